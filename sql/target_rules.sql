--
-- target_rules (review): a target with a rewrite rule.  The engine writes a
-- target's rows partly through the executor (which never fires rules, as
-- PostgreSQL's own logical replication apply does not) and partly through
-- SPI statements (which the rewriter rewrites: the rules fire).  Found with
-- a DO INSTEAD NOTHING delete rule: the delete answered 'applied' and wrote
-- a tombstone, but the row stayed.  A target with rules (pg_class.relhasrules)
-- is now refused with 0A000 naming it, by cdc.register_mapping, cdc_apply(),
-- cdc_apply_batch() and the worker, before anything is claimed or written;
-- dropped rule, it is a target like any other.
-- Objects: tr_*.
--
CREATE TABLE tr_log (what text, id int);
CREATE TABLE tr_del (id int PRIMARY KEY, v text);
CREATE TABLE tr_ins (id int PRIMARY KEY, v text);
CREATE TABLE tr_upd (id int PRIMARY KEY, v text);
CREATE TABLE tr_also (id int PRIMARY KEY, v text);
INSERT INTO tr_del VALUES (1, 'a');
INSERT INTO tr_upd VALUES (1, 'a');
-- mapped and applied to before its rule is made (its metadata cached in this
-- session): the rule is noticed when the engine applies next
SELECT target FROM cdc.register_mapping('tr_del');
SELECT cdc_apply(dbz('c', 'tr_del', '{"id": 2, "v": "b"}', '0/8', 1), 'tr_del');
CREATE RULE tr_del_nothing AS ON DELETE TO tr_del DO INSTEAD NOTHING;
CREATE RULE tr_ins_nothing AS ON INSERT TO tr_ins DO INSTEAD NOTHING;
CREATE RULE tr_upd_log AS ON UPDATE TO tr_upd DO INSTEAD INSERT INTO tr_log VALUES ('update', new.id);
CREATE RULE tr_also_log AS ON INSERT TO tr_also DO ALSO INSERT INTO tr_log VALUES ('insert', new.id);
-- the reviewer's case: the delete must not answer 'applied' while the row stays
SELECT cdc_apply(dbz('d', 'tr_del', NULL, '0/10', 1, '{"id": 1, "v": "a"}'), 'tr_del');
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('d', 'tr_del', NULL, '0/10', 1, '{"id": 1, "v": "a"}')), 'tr_del');
SELECT * FROM tr_del ORDER BY id;
-- every kind of rule, every op, both entry points: refused, nothing claimed
SELECT cdc_apply(dbz('c', 'tr_ins', '{"id": 1, "v": "a"}', '0/10', 1), 'tr_ins');
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'tr_ins', '{"id": 1, "v": "a"}', '0/10', 1)), 'tr_ins');
SELECT cdc_apply(dbz('u', 'tr_upd', '{"id": 1, "v": "b"}', '0/10', 1), 'tr_upd');
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('u', 'tr_upd', '{"id": 1, "v": "b"}', '0/10', 1)), 'tr_upd');
SELECT cdc_apply(dbz('c', 'tr_also', '{"id": 1, "v": "a"}', '0/10', 1), 'tr_also');
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('r', 'tr_also', '{"id": 2, "v": "b"}', '0/10', 1)), 'tr_also');
SELECT cdc_apply(dbz('t', 'tr_also', NULL, '0/20', 2), 'tr_also');
-- a target resolved by its mapping is refused alike
SELECT cdc_apply(dbz('d', 'tr_del', NULL, '0/10', 1, '{"id": 1, "v": "a"}'));
SELECT (SELECT count(*) FROM tr_ins) AS ins, (SELECT string_agg(v, ',') FROM tr_upd) AS upd,
       (SELECT count(*) FROM tr_also) AS also, (SELECT count(*) FROM tr_log) AS log,
       (SELECT count(*) FROM cdc.ledger WHERE target IN ('tr_del'::regclass, 'tr_ins'::regclass, 'tr_upd'::regclass, 'tr_also'::regclass)) AS ledger,
       (SELECT count(*) FROM cdc.entities WHERE target IN ('tr_del'::regclass, 'tr_ins'::regclass, 'tr_upd'::regclass, 'tr_also'::regclass)) AS entities;
-- cdc.register_mapping refuses to map a table with rules, DO ALSO ones too
SELECT target FROM cdc.register_mapping('tr_ins');
SELECT target FROM cdc.register_mapping('tr_also');
SELECT count(*) AS mappings FROM cdc.mapping WHERE target IN ('tr_ins'::regclass, 'tr_also'::regclass);
-- the rule dropped, the same deliveries apply, and a redelivery is a duplicate
DROP RULE tr_del_nothing ON tr_del;
DROP RULE tr_also_log ON tr_also;
SELECT cdc_apply(dbz('d', 'tr_del', NULL, '0/10', 1, '{"id": 1, "v": "a"}'), 'tr_del');
SELECT cdc_apply(dbz('d', 'tr_del', NULL, '0/10', 1, '{"id": 1, "v": "a"}'), 'tr_del');
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'tr_also', '{"id": 1, "v": "a"}', '0/10', 1),
                                                dbz('r', 'tr_also', '{"id": 2, "v": "b"}', '0/10', 1)), 'tr_also');
SELECT * FROM tr_del ORDER BY id;
SELECT * FROM tr_also ORDER BY id;
SELECT count(*) AS log FROM tr_log;
SELECT target FROM cdc.register_mapping('tr_also');
DROP TABLE tr_del, tr_ins, tr_upd, tr_also, tr_log;

--
-- truncate_groups: a source TRUNCATE of tables linked by a foreign key
-- arrives as one truncate event per table, side by side (Debezium sends
-- one per table; pgoutput one message listing them).  PostgreSQL refuses to
-- truncate a referenced table alone, so consecutive truncate events of one
-- cdc_apply_batch() call empty their tables with one TRUNCATE statement per
-- role, as the source's did (docs/semantics.md, rule 8).  Alone, the
-- referenced table cannot be truncated, as at the source.  Tables of this
-- suite are called tg_*.
--
CREATE TABLE tg_parent (id int PRIMARY KEY, name text);
CREATE TABLE tg_child (id int PRIMARY KEY, parent_id int NOT NULL REFERENCES tg_parent, note text);
CREATE TABLE tg_other (id int PRIMARY KEY);
SELECT count(*) FROM cdc.register_mapping('tg_parent', outbox => true);
SELECT count(*) FROM cdc.register_mapping('tg_child', outbox => true);
SELECT count(*) FROM cdc.register_mapping('tg_other');
SELECT applied FROM cdc_apply_batch(jsonb_build_array(
  dbz('c', 'tg_parent', '{"id": 1, "name": "p1"}', '0/1000', 100, total_order => 1),
  dbz('c', 'tg_child', '{"id": 10, "parent_id": 1, "note": "c10"}', '0/1010', 100, total_order => 2),
  dbz('c', 'tg_other', '{"id": 5}', '0/1020', 100, total_order => 3)));

-- The source's TRUNCATE tg_parent, tg_child, tg_other, then a new parent.
SELECT applied, outcomes FROM cdc_apply_batch(jsonb_build_array(
  dbz('t', 'tg_parent', NULL, '0/2000', 200, total_order => 1),
  dbz('t', 'tg_child', NULL, '0/2000', 200, total_order => 2),
  dbz('t', 'tg_other', NULL, '0/2000', 200, total_order => 3),
  dbz('c', 'tg_parent', '{"id": 2, "name": "p2"}', '0/2010', 200, total_order => 4)), with_outcomes => true);
SELECT (SELECT string_agg(id::text, ',') FROM tg_parent) AS parents, (SELECT count(*) FROM tg_child) AS children,
       (SELECT count(*) FROM tg_other) AS others;
SELECT target, op FROM cdc.outbox WHERE op = 't' AND target::text LIKE 'tg\_%' ORDER BY id;

-- The same batch again: duplicates, nothing truncated.
SELECT applied, duplicate FROM cdc_apply_batch(jsonb_build_array(
  dbz('t', 'tg_parent', NULL, '0/2000', 200, total_order => 1),
  dbz('t', 'tg_child', NULL, '0/2000', 200, total_order => 2),
  dbz('t', 'tg_other', NULL, '0/2000', 200, total_order => 3),
  dbz('c', 'tg_parent', '{"id": 2, "name": "p2"}', '0/2010', 200, total_order => 4)));
SELECT string_agg(id::text, ',') AS parents FROM tg_parent;

-- One event per call: a truncate of the referenced table alone fails, as
-- TRUNCATE tg_parent alone fails at the source (which therefore never sends
-- it alone), and nothing is applied.  Both in one batch, in either order,
-- work.
SELECT cdc_apply(dbz('c', 'tg_child', '{"id": 20, "parent_id": 2, "note": "c20"}', '0/3000', 300));
\set VERBOSITY terse
SELECT cdc_apply(dbz('t', 'tg_parent', NULL, '0/3100', 301));
\set VERBOSITY default
SELECT (SELECT count(*) FROM tg_parent) AS parents, (SELECT count(*) FROM tg_child) AS children,
       cdc.delivery_processed('tg_parent', 'dbz:srv:src:public.tg_parent:t:12544:301::') AS claimed;
SELECT applied FROM cdc_apply_batch(jsonb_build_array(
  dbz('t', 'tg_child', NULL, '0/3100', 301, total_order => 1),
  dbz('t', 'tg_parent', NULL, '0/3100', 301, total_order => 2)));
SELECT (SELECT count(*) FROM tg_parent) AS parents, (SELECT count(*) FROM tg_child) AS children;
SELECT target, op FROM cdc.outbox WHERE op = 't' AND target::text LIKE 'tg\_%' ORDER BY id;

-- A grouped TRUNCATE that fails (a third table references tg_child and is
-- not truncated with it) names the batch's events in its context, as every
-- batch error does, and nothing is applied.
CREATE TABLE tg_grandchild (id int PRIMARY KEY, child_id int REFERENCES tg_child);
SELECT count(*) FROM cdc.register_mapping('tg_grandchild');
SELECT cdc_apply_batch(jsonb_build_array(
  dbz('c', 'tg_parent', '{"id": 5, "name": "p5"}', '0/4000', 400, total_order => 1),
  dbz('t', 'tg_child', NULL, '0/4100', 401, total_order => 1),
  dbz('t', 'tg_parent', NULL, '0/4100', 401, total_order => 2)));
SELECT (SELECT count(*) FROM tg_parent) AS parents,
       cdc.delivery_processed('tg_child', 'dbz:srv:src:public.tg_child:t:16640:401::') AS claimed;

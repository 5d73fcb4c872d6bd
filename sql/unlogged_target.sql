--
-- unlogged_target (review h4): an unlogged table is never a target.  A
-- crash (any immediate stop) empties it, while the ledger entries and
-- entity records that say its rows were applied are WAL-logged and stay:
-- every redelivery of the lost rows is then a duplicate, a whole replay of
-- the topic too, and they never come back.  Found with cdc_apply() into an
-- UNLOGGED table, pg_ctl stop -m immediate, start: the table was empty and
-- the same event answered 'duplicate'.  The engine's own hint for temporary
-- tables said "Apply to a permanent (or unlogged) table".  Now an unlogged
-- table, or a partitioned table with an unlogged partition, is refused with
-- 42809 before anything is written, by cdc_apply(), cdc_apply_batch() and
-- the worker, and cdc.register_mapping (and cdc._write_mapping, called
-- directly) refuses to map one.
-- Objects: ut_*.
--
CREATE UNLOGGED TABLE ut_plain (id int PRIMARY KEY, v text);
-- no mapping for it
SELECT target FROM cdc.register_mapping('ut_plain');
-- nor through cdc._write_mapping called directly (here by a superuser): it
-- accepted one (its own checks of the target left out persistence)
CREATE FUNCTION ut_row(src text) RETURNS cdc.mapping LANGUAGE sql AS $$
  SELECT jsonb_populate_record(NULL::cdc.mapping,
           jsonb_build_object('source_schema', 'public', 'source_table', src, 'source_epoch', 0, 'outbox', false,
                              'truncate_policy', 'truncate', 'unavailable_placeholder', '__debezium_unavailable_value',
                              'conflict_policy', 'record', 'mode', 'state', 'expired_policy', 'refuse',
                              'outbox_via', 'table'))
$$;
SELECT target FROM cdc._write_mapping('register', 'ut_plain', ut_row('ut_plain'));
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT count(*) AS mappings FROM cdc.mapping WHERE target = 'ut_plain'::regclass;
-- neither entry point applies to it, and nothing is claimed or recorded
SELECT cdc_apply(dbz('c', 'ut_plain', '{"id": 1, "v": "a"}', '0/10', 1), 'ut_plain');
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'ut_plain', '{"id": 2, "v": "b"}', '0/20', 2)), 'ut_plain');
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('t', 'ut_plain', NULL, '0/30', 3)), 'ut_plain');
SELECT (SELECT count(*) FROM ut_plain) AS rows,
       (SELECT count(*) FROM cdc.entities WHERE target = 'ut_plain'::regclass) AS entities,
       (SELECT count(*) FROM cdc.ledger WHERE target = 'ut_plain'::regclass) AS ledger;
-- made permanent, it is a target like any other
ALTER TABLE ut_plain SET LOGGED;
SELECT cdc_apply(dbz('c', 'ut_plain', '{"id": 1, "v": "a"}', '0/10', 1), 'ut_plain');
SELECT cdc_apply(dbz('c', 'ut_plain', '{"id": 1, "v": "a"}', '0/10', 1), 'ut_plain');
SELECT * FROM ut_plain;
-- and it cannot be made unlogged behind the engine's back
ALTER TABLE ut_plain SET UNLOGGED;
SELECT cdc_apply(dbz('u', 'ut_plain', '{"id": 1, "v": "b"}', '0/40', 4), 'ut_plain');
SELECT * FROM ut_plain;
-- a partitioned table whose partition is unlogged: rows routed there would be lost alike
CREATE TABLE ut_part (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE ut_part_low PARTITION OF ut_part FOR VALUES FROM (0) TO (100);
CREATE UNLOGGED TABLE ut_part_high PARTITION OF ut_part FOR VALUES FROM (100) TO (200);
SELECT cdc_apply(dbz('c', 'ut_part', '{"id": 1, "v": "low"}', '0/10', 1), 'ut_part');
SELECT target FROM cdc.register_mapping('ut_part');
SELECT target FROM cdc._write_mapping('register', 'ut_part', ut_row('ut_part'));
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT count(*) AS mappings FROM cdc.mapping WHERE target = 'ut_part'::regclass;
SELECT count(*) AS rows FROM ut_part;
ALTER TABLE ut_part_high SET LOGGED;
SELECT cdc_apply(dbz('c', 'ut_part', '{"id": 150, "v": "high"}', '0/20', 2), 'ut_part');
SELECT tableoid::regclass, * FROM ut_part;
DROP TABLE ut_plain, ut_part;
DROP FUNCTION ut_row(text);

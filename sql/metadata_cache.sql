--
-- metadata_cache: every backend caches each target's columns, types, key,
-- mapping and truncate barrier, and the resolution of source tables to
-- targets (docs/internals.md, "Target metadata cache").  Whatever changes
-- between two calls of one session must be seen by the second: DDL on the
-- target, a mapping registered, changed or removed, a barrier written or
-- rolled back, a table dropped and created again under the same name.
-- Tables of this suite are called mc_*.
--

-- DDL between calls: a column added, then dropped.
CREATE TABLE mc_items (id int PRIMARY KEY, name text);
SELECT cdc_apply(dbz('c', 'mc_items', '{"id": 1, "name": "a"}', '0/1000', 1), 'mc_items');
ALTER TABLE mc_items ADD COLUMN color text;
SELECT cdc_apply(dbz('c', 'mc_items', '{"id": 2, "name": "b", "color": "red"}', '0/1010', 2), 'mc_items');
SELECT (cdc_apply_batch(jsonb_build_array(dbz('c', 'mc_items', '{"id": 3, "name": "c", "color": "blue"}', '0/1020', 3)),
                        'mc_items')).applied;
ALTER TABLE mc_items DROP COLUMN color;
SELECT cdc_apply(dbz('c', 'mc_items', '{"id": 4, "name": "d", "color": "green"}', '0/1030', 4), 'mc_items');
ALTER TABLE mc_items ALTER COLUMN name TYPE int USING length(name);
SELECT cdc_apply(dbz('c', 'mc_items', '{"id": 5, "name": "not a number"}', '0/1040', 5), 'mc_items');
SELECT cdc_apply(dbz('c', 'mc_items', '{"id": 5, "name": 42}', '0/1040', 5), 'mc_items');
SELECT * FROM mc_items ORDER BY id;

-- A mapping registered, changed and removed between calls.
CREATE TABLE mc_orders (id int PRIMARY KEY, amount int);
SELECT cdc_apply(dbz('c', 'mc_orders', '{"id": 1, "amount": 10}', '0/2000', 10), 'mc_orders');
SELECT 1 FROM cdc.register_mapping('mc_orders', outbox => true);
SELECT cdc_apply(dbz('c', 'mc_orders', '{"id": 2, "amount": 20}', '0/2010', 11));
SELECT 1 FROM cdc.register_mapping('mc_orders', outbox => false, source_epoch => 7);
SELECT cdc_apply(dbz('c', 'mc_orders', '{"id": 3, "amount": 30}', '0/2020', 12));
SELECT entity_key, version FROM cdc.entities WHERE target = 'mc_orders'::regclass ORDER BY entity_key::text;
SELECT count(*) AS outbox_rows FROM cdc.outbox WHERE target = 'mc_orders'::regclass;
SELECT cdc.unregister_mapping('mc_orders');
SELECT cdc_apply(dbz('c', 'mc_orders', '{"id": 4, "amount": 40}', '0/2030', 13));

-- A mapping moved to another target: the source table resolves to the new one.
CREATE TABLE mc_orders_v2 (id int PRIMARY KEY, amount int);
SELECT 1 FROM cdc.register_mapping('mc_orders_v2', source_table => 'mc_orders');
SELECT cdc_apply(dbz('c', 'mc_orders', '{"id": 5, "amount": 50}', '0/2040', 14));
SELECT (SELECT count(*) FROM mc_orders WHERE id = 5) AS old_target, (SELECT count(*) FROM mc_orders_v2 WHERE id = 5) AS new_target;

-- A target dropped and created again under the same name: the mapping
-- names the table by OID, so it points at the dropped table until it is
-- registered again; then the new table is used at once.
CREATE TEMP TABLE mc_old AS SELECT 'mc_orders_v2'::regclass::oid AS relid;
DROP TABLE mc_orders_v2;
CREATE TABLE mc_orders_v2 (id int PRIMARY KEY, amount int, note text);
DO $$
BEGIN
  PERFORM cdc_apply(dbz('c', 'mc_orders', '{"id": 6, "amount": 60, "note": "new table"}', '0/2050', 15));
EXCEPTION WHEN undefined_table THEN
  RAISE NOTICE 'undefined_table (42P01): the mapping still names the dropped table';
END $$;
DELETE FROM cdc.mapping WHERE target::oid = (SELECT relid FROM mc_old);
SELECT 1 FROM cdc.register_mapping('mc_orders_v2', source_table => 'mc_orders');
SELECT cdc_apply(dbz('c', 'mc_orders', '{"id": 6, "amount": 60, "note": "new table"}', '0/2050', 15));
SELECT * FROM mc_orders_v2;

-- A truncate barrier rolled back is forgotten; a committed one holds.
CREATE TABLE mc_trunc (id int PRIMARY KEY, v text);
SELECT cdc_apply(dbz('c', 'mc_trunc', '{"id": 1, "v": "a"}', '0/3000', 20), 'mc_trunc');
BEGIN;
SELECT cdc_apply(dbz('t', 'mc_trunc', NULL, '0/3100', 21), 'mc_trunc');
ROLLBACK;
SELECT cdc_apply(dbz('c', 'mc_trunc', '{"id": 2, "v": "b"}', '0/3050', 22), 'mc_trunc');
SELECT cdc_apply(dbz('t', 'mc_trunc', NULL, '0/3100', 21), 'mc_trunc');
SELECT cdc_apply(dbz('c', 'mc_trunc', '{"id": 3, "v": "c"}', '0/3080', 23), 'mc_trunc');
SELECT (cdc_apply_batch(jsonb_build_array(dbz('c', 'mc_trunc', '{"id": 4, "v": "d"}', '0/3090', 24)), 'mc_trunc')).stale;
-- the barrier removed by hand (a superuser): older events apply again
DELETE FROM cdc.table_barrier WHERE target = 'mc_trunc'::regclass;
SELECT cdc_apply(dbz('c', 'mc_trunc', '{"id": 5, "v": "e"}', '0/3095', 25), 'mc_trunc');
SELECT * FROM mc_trunc ORDER BY id;

-- The invalidation trigger is internal.
SELECT cdc._invalidate_target();

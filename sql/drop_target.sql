-- Dropping a mapped target removes its mapping and per-entity state
-- (event trigger cdc_drop_target_state): no mapping row names a missing
-- table, and a new table (even one that reused the OID) starts clean.
-- Ledger and outbox rows stay (pruned by the replay horizon / the relay).
CREATE TABLE dt_items (id int PRIMARY KEY, name text);
SELECT target FROM cdc.register_mapping('dt_items', outbox => true);
SELECT cdc_apply(dbz('t', 'dt_items', NULL, '0/4900', 699));
SELECT cdc_apply(dbz('c', 'dt_items', '{"id": 1, "name": "a"}', '0/5000', 700));
SELECT cdc_apply(dbz('d', 'dt_items', NULL, '0/5100', 701, '{"id": 1}'));
SELECT cdc_apply(dbz('c', 'dt_items', '{"id": 2, "name": "b"}', '0/5200', 702));
-- one live record, one tombstone, a truncate barrier, counters
SELECT (SELECT count(*) FROM cdc.entity_state WHERE target = 'dt_items'::regclass) AS entity_records,
       (SELECT count(*) FROM cdc.entity_state WHERE target = 'dt_items'::regclass AND deleted) AS tombstones,
       (SELECT count(*) FROM cdc.table_barrier WHERE target = 'dt_items'::regclass) AS barriers,
       (SELECT count(*) FROM cdc.counters WHERE target = 'dt_items'::regclass) AS counter_rows;
CREATE TEMP TABLE dt_oid AS SELECT 'dt_items'::regclass::oid AS oid;
SELECT count(*) AS ledger_before FROM cdc.ledger WHERE target::oid = (SELECT oid FROM dt_oid);
DROP TABLE dt_items;
SELECT (SELECT count(*) FROM cdc.mapping WHERE target::oid = (SELECT oid FROM dt_oid)) AS mappings,
       (SELECT count(*) FROM cdc.entity_state WHERE target::oid = (SELECT oid FROM dt_oid)) AS entity_records,
       (SELECT count(*) FROM cdc.table_barrier WHERE target::oid = (SELECT oid FROM dt_oid)) AS barriers,
       (SELECT count(*) FROM cdc.counters WHERE target::oid = (SELECT oid FROM dt_oid)) AS counter_rows,
       (SELECT count(*) FROM cdc.ledger WHERE target::oid = (SELECT oid FROM dt_oid)) AS ledger_rows,
       (SELECT count(*) FROM cdc.outbox WHERE target::oid = (SELECT oid FROM dt_oid)) AS outbox_rows;
-- The same name again: no mapping until registered, then a fresh start (the
-- insert of id 1 at an LSN older than the old barrier and tombstone applies).
CREATE TABLE dt_items (id int PRIMARY KEY, name text);
SELECT cdc_apply(dbz('c', 'dt_items', '{"id": 1, "name": "again"}', '0/4000', 699));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT target FROM cdc.register_mapping('dt_items');
SELECT cdc_apply(dbz('c', 'dt_items', '{"id": 1, "name": "again"}', '0/4000', 699));
SELECT * FROM dt_items;
-- Dropping other objects, and a schema with a mapped table in it.
CREATE VIEW dt_view AS SELECT * FROM dt_items;
DROP VIEW dt_view;
CREATE SCHEMA dt_schema;
CREATE TABLE dt_schema.orders (id int PRIMARY KEY);
SELECT target FROM cdc.register_mapping('dt_schema.orders');
CREATE TEMP TABLE dt_schema_oid AS SELECT 'dt_schema.orders'::regclass::oid AS oid;
DROP SCHEMA dt_schema CASCADE;
SELECT count(*) AS mappings_left FROM cdc.mapping WHERE target::oid = (SELECT oid FROM dt_schema_oid);
-- An ordinary user drops their own mapped table: the clean-up runs as the
-- extension owner (the user has no privilege on cdc.mapping).
CREATE ROLE dt_user;
GRANT CREATE ON SCHEMA public TO dt_user;
SET ROLE dt_user;
CREATE TABLE dt_owned (id int PRIMARY KEY);
RESET ROLE;
SELECT target FROM cdc.register_mapping('dt_owned');
SET ROLE dt_user;
DROP TABLE dt_owned;
RESET ROLE;
SELECT count(*) AS mappings_left FROM cdc.mapping WHERE target::text LIKE '%dt_owned%';
REVOKE CREATE ON SCHEMA public FROM dt_user;
DROP ROLE dt_user;
DROP TABLE dt_items;
-- DROP EXTENSION drops cdc's own tables in the same command: the trigger
-- function finds cdc.mapping gone and does nothing; the extension installs
-- again.
CREATE TABLE dt_last (id int PRIMARY KEY);
SELECT target FROM cdc.register_mapping('dt_last');
DROP EXTENSION cdc_apply;
SELECT count(*) AS cdc_event_triggers FROM pg_event_trigger WHERE evtname LIKE 'cdc%';
CREATE EXTENSION cdc_apply;
SELECT count(*) AS mappings FROM cdc.mapping;
DROP TABLE dt_last;
-- A target that loses its primary key (or gets a wider one): cdc.entities
-- still reads, showing the stored compact key as a JSON string.
CREATE TABLE dt_keys (id int PRIMARY KEY, name text NOT NULL);
SELECT target FROM cdc.register_mapping('dt_keys');
SELECT cdc_apply(dbz('c', 'dt_keys', '{"id": 1, "name": "a"}', '0/6000', 800));
SELECT entity_key FROM cdc.entities WHERE target = 'dt_keys'::regclass;
ALTER TABLE dt_keys DROP CONSTRAINT dt_keys_pkey;
SELECT entity_key FROM cdc.entities WHERE target = 'dt_keys'::regclass;
ALTER TABLE dt_keys ADD PRIMARY KEY (id, name);
SELECT entity_key FROM cdc.entities WHERE target = 'dt_keys'::regclass;
SELECT cdc_apply(dbz('c', 'dt_keys', '{"id": 2, "name": "b"}', '0/6100', 801));
SELECT entity_key FROM cdc.entities WHERE target = 'dt_keys'::regclass ORDER BY entity_key::text;
DROP TABLE dt_keys;

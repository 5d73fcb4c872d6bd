--
-- regclass_missing_args (fresh-user review h3): cdc.set_ordering and
-- cdc.create_history_table given a regclass that names no relation (OID 0,
-- '-'::regclass, or the OID of a dropped table) built their statement from
-- its text and failed with 42601 'syntax error at or near "-"' (LOCK TABLE -
-- IN SHARE ROW EXCLUSIVE MODE; CREATE TABLE  (cdc_seq ...), the table name
-- lost), naming neither the argument nor the relation.  Now 42P01 naming the
-- argument and the OID, as cdc_apply(), cdc.audit and cdc.resync do (and as
-- cdc.register_mapping and cdc.range_hash now do, which said 'target - is
-- not a table', 42809, and '4294967295 is not a table'); a
-- create_history_table source that has no columns of a row (an index, a
-- sequence) is 42809.  Nothing is created or changed; the transaction goes on
-- after a caught error.
-- Objects: rma, rma_gone, rma_seq.
--
CREATE TABLE rma (id int PRIMARY KEY, v text);
SELECT target, ordering FROM cdc.register_mapping('rma');
CREATE TABLE rma_gone (id int PRIMARY KEY);
SELECT 'rma_gone'::regclass::oid AS gone_oid \gset
DROP TABLE rma_gone;
CREATE SEQUENCE rma_seq;
\set VERBOSITY default
SELECT cdc.set_ordering(0, 'stream');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.set_ordering('-', 'entity');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.set_ordering(4294967295, 'stream');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- cdc.register_mapping and cdc.range_hash said 'target - is not a table' (42809)
SELECT cdc.register_mapping(0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.register_mapping(4294967295);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.range_hash(0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.range_hash(4294967295);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a relation that is not a table: 42809 as before
SELECT cdc.register_mapping('rma_seq');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.range_hash('rma_seq');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_history_table('rma_history', 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_history_table('rma_history', 4294967295);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_history_table('rma_history', 'rma_pkey');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_history_table('rma_history', 'rma_seq');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
-- a dropped table's OID: the same error (the OID itself varies, so only the SQLSTATE)
SET rma.gone = :'gone_oid';
DO $$
BEGIN
  PERFORM cdc.set_ordering(current_setting('rma.gone')::oid::regclass, 'stream');
EXCEPTION WHEN undefined_table THEN
  RAISE NOTICE 'set_ordering of a dropped table: %', SQLSTATE;
END $$ LANGUAGE plpgsql;
DO $$
BEGIN
  PERFORM cdc.create_history_table('rma_history', current_setting('rma.gone')::oid::regclass);
EXCEPTION WHEN undefined_table THEN
  RAISE NOTICE 'create_history_table of a dropped table: %', SQLSTATE;
END $$ LANGUAGE plpgsql;
DO $$
BEGIN
  PERFORM cdc.register_mapping(current_setting('rma.gone')::oid::regclass);
EXCEPTION WHEN undefined_table THEN
  RAISE NOTICE 'register_mapping of a dropped table: %', SQLSTATE;
END $$ LANGUAGE plpgsql;
RESET rma.gone;
-- in a transaction that goes on: nothing created or changed
BEGIN;
SAVEPOINT s;
SELECT cdc.set_ordering(0, 'stream');
ROLLBACK TO s;
SELECT cdc.create_history_table('rma_history', 0);
ROLLBACK TO s;
SELECT cdc.register_mapping(0);
ROLLBACK TO s;
SELECT to_regclass('rma_history') AS history_table;
SELECT target, ordering FROM cdc.mapping WHERE target = 'rma'::regclass;
SELECT count(*) AS mappings_of_no_relation FROM cdc.mapping m WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = m.target);
-- the same functions on existing tables work as before
SELECT target, ordering FROM cdc.set_ordering('rma', 'stream');
SELECT target, ordering FROM cdc.set_ordering('rma', 'entity');
SELECT cdc.create_history_table('rma_history', 'rma') AS history_table;
COMMIT;
SELECT count(*) AS history_columns FROM pg_attribute WHERE attrelid = 'rma_history'::regclass AND attnum > 0;
DROP TABLE rma_history;
DROP SEQUENCE rma_seq;
DROP TABLE rma;

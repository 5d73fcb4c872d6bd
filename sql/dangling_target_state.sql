--
-- dangling_target_state (review h2): the state of a target is keyed by its
-- OID and removed by the sql_drop event trigger cdc_drop_target_state.
-- Drops that do not fire it left the state behind, for a later table given
-- the same OID (after the cluster's OID counter wraps, which any role can
-- hasten: lo_create, temporary tables):
--  1. the trigger was enabled for ORIGIN only, and the apply worker's
--     session runs with session_replication_role = replica: a table owner's
--     trigger code, applied by the worker, drops another of its tables, and
--     that table's mapping (a delegate's, with its handler) stays.  Live
--     reproducer: eve's ENABLE ALWAYS trigger on a published table drops
--     eve.bait (mode handler, eve.h); after pg_resetwal -o <that OID> (an
--     OID wraparound) a superuser's new table got the OID, the mapping
--     routed the published table "ghost" to it and the worker ran eve.h as
--     the superuser.  Here the superuser sets the worker's setting.
--  2. a temporary table leaves without the trigger (session end, ON COMMIT
--     DROP, DISCARD TEMP): cdc.register_mapping refuses one, but a delegate
--     INSERTs the mapping row itself, and cdc_apply() writes entity records
--     for one (any role, its own temporary table), which stay as tombstones
--     and versions of the OID.
-- Expected: the trigger fires under replica too; temporary tables are
-- neither mapped (42501, the delegate's policy) nor targets (42809).
-- Objects: h2dt_*.
--
CREATE ROLE h2dt_del;
CREATE SCHEMA h2dt AUTHORIZATION h2dt_del;
GRANT INSERT, UPDATE, DELETE ON cdc.mapping TO h2dt_del;
GRANT EXECUTE ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
                                               bigint, text, text, text, regprocedure, text, text) TO h2dt_del;
-- 1. a drop under session_replication_role = replica
SET ROLE h2dt_del;
CREATE TABLE h2dt.bait (id int PRIMARY KEY, v text);
CREATE FUNCTION h2dt.h(op text, old jsonb, new jsonb, meta jsonb) RETURNS void LANGUAGE sql AS $$ SELECT $$;
SELECT mode, handler FROM cdc.register_mapping('h2dt.bait', source_schema => 'h2dt', source_table => 'ghost',
                                                mode => 'handler', handler => 'h2dt.h(text,jsonb,jsonb,jsonb)');
SELECT cdc_apply(dbz('c', 'ghost', '{"id": 1, "v": "a"}', '0/1000', 100, schema_name => 'h2dt'), 'h2dt.bait');
RESET ROLE;
CREATE TEMP TABLE h2dt_oid AS SELECT 'h2dt.bait'::regclass::oid AS oid;
SET session_replication_role = replica;
DROP TABLE h2dt.bait;
RESET session_replication_role;
SELECT (SELECT count(*) FROM cdc.mapping WHERE target::oid = (SELECT oid FROM h2dt_oid)) AS mappings,
       (SELECT count(*) FROM cdc.entity_state WHERE target::oid = (SELECT oid FROM h2dt_oid)) AS entity_records;
-- 2a. a delegate's mapping row for its temporary table
SET ROLE h2dt_del;
CREATE TEMP TABLE h2dt_tmp (id int PRIMARY KEY, v text);
INSERT INTO cdc.mapping (target, source_schema, source_table, mode, handler)
  VALUES ('h2dt_tmp', 'h2dt', 'ghost2', 'handler', 'h2dt.h(text,jsonb,jsonb,jsonb)');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- 2b. entity records for a temporary table
SELECT cdc_apply(dbz('d', 'ghost2', NULL, '0/2000', 200, before => '{"id": 1}', schema_name => 'h2dt'), 'h2dt_tmp');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT (SELECT count(*) FROM cdc.mapping WHERE target = 'h2dt_tmp'::regclass) AS mappings,
       (SELECT count(*) FROM cdc.entities WHERE target = 'h2dt_tmp'::regclass) AS entity_records;
DROP TABLE h2dt_tmp;
RESET ROLE;
-- leftovers of a failing run, then the objects
DELETE FROM cdc.mapping WHERE target::oid = (SELECT oid FROM h2dt_oid);
DELETE FROM cdc.entity_state WHERE target::oid = (SELECT oid FROM h2dt_oid);
DROP TABLE h2dt_oid;
DROP FUNCTION h2dt.h(text, jsonb, jsonb, jsonb);
DROP SCHEMA h2dt;
REVOKE ALL ON cdc.mapping FROM h2dt_del;
REVOKE ALL ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
                                            bigint, text, text, text, regprocedure, text, text) FROM h2dt_del;
DROP ROLE h2dt_del;

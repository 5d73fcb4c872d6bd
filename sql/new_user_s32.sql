--
-- new_user_s32 (fresh-user review h4, round 32): the delivery key derived
-- from an event's source identity (no delivery_key given) joined
-- source.name, source.db, source.schema and source.table with ':' and '.'
-- without quoting, so two different source identities could derive one
-- key: name "a:b" with db "c" and name "a" with db "b:c", or schema "x.y"
-- with table "z" and schema "x" with table "y.z" (PostgreSQL allows both
-- as quoted identifiers).  The second event found the first one's claim
-- and was a `duplicate`, its content neither applied nor recorded as a
-- conflict, while the same event under a delivery key of its own was a
-- conflict.  Now a name holding its separator (':', for the schema also
-- '.') or a double quote is written as a JSON string; names without them
-- derive the same key as before (an existing ledger keeps matching).
-- Objects: nus2_*.
--
CREATE TABLE nus2 (id int PRIMARY KEY, v text);
CREATE FUNCTION nus2_state() RETURNS TABLE (rows bigint, ledger bigint, entities bigint, conflicts bigint)
LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM nus2), (SELECT count(*) FROM cdc.ledger WHERE target = 'nus2'::regclass),
         (SELECT count(*) FROM cdc.entity_state WHERE target = 'nus2'::regclass),
         (SELECT count(*) FROM cdc.conflicts WHERE target = 'nus2'::regclass) $$;
-- source.name "a:b", db "c" against name "a", db "b:c": two sources, two deliveries
SELECT cdc_apply('{"op":"c","after":{"id":1,"v":"first"},"source":{"name":"a:b","db":"c","schema":"public","table":"nus2","lsn":100,"txId":1}}', 'nus2');
SELECT cdc_apply('{"op":"c","after":{"id":1,"v":"second"},"source":{"name":"a","db":"b:c","schema":"public","table":"nus2","lsn":100,"txId":1}}', 'nus2');
-- the same event under a key of its own: the outcome the derived key must give too
SELECT cdc_apply('{"op":"c","after":{"id":1,"v":"second"},"source":{"name":"a","db":"b:c","schema":"public","table":"nus2","lsn":100,"txId":1}}', 'nus2', 'own-key');
-- schema "x.y", table "z" against schema "x", table "y.z"
SELECT cdc_apply('{"op":"c","after":{"id":2,"v":"first"},"source":{"name":"n","db":"d","schema":"x.y","table":"z","lsn":100,"txId":1}}', 'nus2');
SELECT cdc_apply('{"op":"c","after":{"id":2,"v":"second"},"source":{"name":"n","db":"d","schema":"x","table":"y.z","lsn":100,"txId":1}}', 'nus2');
-- a name holding a double quote against its quoted spelling
SELECT cdc_apply('{"op":"c","after":{"id":3,"v":"first"},"source":{"name":"n","db":"d","schema":"\"x.y\"","table":"z","lsn":100,"txId":1}}', 'nus2');
SELECT * FROM nus2 ORDER BY id;
SELECT * FROM nus2_state();
-- each redelivery is a duplicate, in a batch too
SELECT cdc_apply('{"op":"c","after":{"id":1,"v":"second"},"source":{"name":"a","db":"b:c","schema":"public","table":"nus2","lsn":100,"txId":1}}', 'nus2');
SELECT outcomes FROM cdc_apply_batch('[
  {"op":"c","after":{"id":1,"v":"first"},"source":{"name":"a:b","db":"c","schema":"public","table":"nus2","lsn":100,"txId":1}},
  {"op":"c","after":{"id":2,"v":"second"},"source":{"name":"n","db":"d","schema":"x","table":"y.z","lsn":100,"txId":1}},
  {"op":"c","after":{"id":2,"v":"first"},"source":{"name":"n","db":"d","schema":"x.y","table":"z","lsn":100,"txId":1}}]'::jsonb,
  'nus2', with_outcomes => true);
SELECT * FROM nus2_state();
-- the derived keys: names without a separator as before, the others quoted
SELECT cdc.delivery_processed('nus2', 'dbz:"a:b":c:public.nus2:c:100:1::{"id": "1"}') AS name_quoted,
       cdc.delivery_processed('nus2', 'dbz:a:"b:c":public.nus2:c:100:1::{"id": "1"}') AS db_quoted,
       cdc.delivery_processed('nus2', 'dbz:n:d:"x.y".z:c:100:1::{"id": "2"}') AS schema_quoted,
       cdc.delivery_processed('nus2', 'dbz:n:d:x.y.z:c:100:1::{"id": "2"}') AS table_with_dot,
       cdc.delivery_processed('nus2', 'dbz:n:d:"\"x.y\"".z:c:100:1::{"id": "3"}') AS quote_escaped;
-- a source identity without separators derives the key it always did
CREATE TABLE nus2_plain (id int PRIMARY KEY);
SELECT cdc_apply('{"op":"c","after":{"id":1},"source":{"name":"srv.prod","db":"shop","schema":"public","table":"nus2_plain","lsn":100,"txId":7}}', 'nus2_plain');
SELECT cdc.delivery_processed('nus2_plain', 'dbz:srv.prod:shop:public.nus2_plain:c:100:7::{"id": "1"}') AS unchanged_key;
--
-- A record that is not a change (a Kafka tombstone, transaction metadata, a
-- logical decoding message) given an explicit target was counted as
-- `ignored` in cdc.stats under that target without any of the target's
-- checks: a role without privileges on a table bumped its counters (and
-- created its cdc.stats row), and a system catalog, a table of cdc_apply,
-- a sequence, a view, a temporary table (whose counters outlive it) or a
-- relation that does not exist got a counters row.  Now the target is
-- checked as for a change (42501, 42809, 42P01), nothing counted; without
-- a target such records still count under target 0, and a permitted
-- target still counts them.
--
CREATE TABLE nus2_t (id int PRIMARY KEY);
CREATE SEQUENCE nus2_seq;
CREATE VIEW nus2_view AS SELECT 1 AS id;
CREATE TEMPORARY TABLE nus2_temp (id int PRIMARY KEY);
CREATE TABLE nus2_gone (id int PRIMARY KEY);
SELECT 'nus2_gone'::regclass::oid AS nus2_gone_oid \gset
DROP TABLE nus2_gone;
\set VERBOSITY terse
SELECT cdc_apply(NULL::jsonb, 'pg_class');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(NULL::text, 'cdc.ledger');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(NULL::jsonb, 'nus2_seq');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"status":"BEGIN","id":"571:53195829","event_count":null,"data_collections":null}', 'nus2_view');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc_apply_batch('[null]'::jsonb, 'nus2_temp');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY sqlstate
SELECT cdc_apply(NULL::jsonb, :nus2_gone_oid::oid::regclass);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
CREATE ROLE nus2_role;
GRANT SELECT ON nus2_t TO nus2_role;
SET ROLE nus2_role;
SELECT cdc_apply(NULL::jsonb, 'nus2_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"op":"m","source":{"lsn":1},"message":{"prefix":"p","content":"AA=="}}', 'nus2_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc_apply_batch('[null, null]'::jsonb, 'nus2_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc_apply_batch(ARRAY[NULL, 'null']::jsonb[], 'nus2_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc_apply_batch('[null]'::text, 'nus2_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
\set VERBOSITY default
SELECT s.target::oid::regclass AS target, s.ignored FROM cdc.stats s
 WHERE s.target::oid IN ('pg_class'::regclass, 'cdc.ledger'::regclass, 'nus2_seq'::regclass, 'nus2_view'::regclass,
                         'nus2_temp'::regclass, 'nus2_t'::regclass, :nus2_gone_oid)
 ORDER BY 1::text;
-- permitted: counted under the target as before; without a target under target 0
GRANT INSERT, UPDATE, DELETE ON nus2_t TO nus2_role;
SET ROLE nus2_role;
SELECT cdc_apply(NULL::jsonb, 'nus2_t');
SELECT ignored FROM cdc_apply_batch('[null, null]'::jsonb, 'nus2_t');
SELECT cdc_apply(NULL::jsonb);
RESET ROLE;
SELECT s.target::oid::regclass AS target, s.ignored FROM cdc.stats s WHERE s.target = 'nus2_t'::regclass;
DROP TABLE nus2_t;
DROP ROLE nus2_role;
--
-- cdc.delivery_processed() given a target that names no relation (OID 0,
-- a dropped table's OID) answered false, as if the delivery were merely
-- not processed; every other function of the API refuses such a target
-- with 42P01.
--
CREATE TABLE nus2_gone2 (id int PRIMARY KEY);
SELECT 'nus2_gone2'::regclass::oid AS nus2_gone2_oid \gset
DROP TABLE nus2_gone2;
\set VERBOSITY terse
SELECT cdc.delivery_processed('-'::regclass, 'k');
\set VERBOSITY sqlstate
SELECT cdc.delivery_processed(:nus2_gone2_oid::oid::regclass, 'k');
\set VERBOSITY default
SELECT cdc.delivery_processed('nus2', 'own-key') AS still_answers;

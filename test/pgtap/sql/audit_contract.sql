--
-- audit_contract: the catalog contract of audit and repair (docs/audit.md),
-- checked with pgTAP: the procedures and functions with their signatures,
-- languages and privileges, the runs and findings tables, the status view,
-- and the search_path immunity of the statements they build.
--
\set ECHO none
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS cdc_apply;
RESET client_min_messages;
\set ECHO all

SELECT plan(28);

SELECT has_function('cdc', 'audit', ARRAY['text', 'regclass', 'integer', 'integer', 'interval', 'bigint', 'bigint'],
                     'CALL cdc.audit(subscription, target, page_rows, leaf_rows, wait_timeout, audit_id, findings) exists');
SELECT has_function('cdc', 'resync', ARRAY['text', 'regclass', 'jsonb', 'jsonb', 'jsonb', 'bigint', 'integer', 'integer', 'interval', 'bigint', 'bigint'],
                     'CALL cdc.resync(subscription, target, keys, from_key, to_key, audit, page_rows, leaf_rows, wait_timeout, resync_id, repaired) exists');
SELECT is((SELECT proargnames::text FROM pg_proc WHERE oid = 'cdc.audit(text, regclass, integer, integer, interval, bigint, bigint)'::regprocedure),
          '{subscription,target,page_rows,leaf_rows,wait_timeout,audit_id,findings}', 'cdc.audit argument names');
SELECT is((SELECT proargmodes::text FROM pg_proc WHERE oid = 'cdc.audit(text, regclass, integer, integer, interval, bigint, bigint)'::regprocedure),
          '{i,i,i,i,i,b,b}', 'cdc.audit returns audit_id and findings (INOUT)');
SELECT is((SELECT proargnames::text FROM pg_proc WHERE oid = 'cdc.resync(text, regclass, jsonb, jsonb, jsonb, bigint, integer, integer, interval, bigint, bigint)'::regprocedure),
          '{subscription,target,keys,from_key,to_key,audit,page_rows,leaf_rows,wait_timeout,resync_id,repaired}', 'cdc.resync argument names');
SELECT function_lang_is('cdc', 'audit', ARRAY['text', 'regclass', 'integer', 'integer', 'interval', 'bigint', 'bigint'], 'c',
                        'cdc.audit is a C procedure');
SELECT isnt_definer('cdc', 'audit', ARRAY['text', 'regclass', 'integer', 'integer', 'interval', 'bigint', 'bigint'],
                    'cdc.audit is not SECURITY DEFINER');
SELECT is((SELECT proconfig FROM pg_proc WHERE oid = 'cdc.audit(text, regclass, integer, integer, interval, bigint, bigint)'::regprocedure),
          NULL, 'cdc.audit has no SET clause (a procedure with one cannot commit)');
SELECT function_privs_are('cdc', 'audit', ARRAY['text', 'regclass', 'integer', 'integer', 'interval', 'bigint', 'bigint'],
                          'public', ARRAY[]::text[], 'PUBLIC may not execute cdc.audit');
SELECT function_privs_are('cdc', 'resync', ARRAY['text', 'regclass', 'jsonb', 'jsonb', 'jsonb', 'bigint', 'integer', 'integer', 'interval', 'bigint', 'bigint'],
                          'public', ARRAY[]::text[], 'PUBLIC may not execute cdc.resync');

SELECT has_function('cdc', 'range_hash', ARRAY['regclass', 'text[]', 'text[]', 'name[]', 'name[]'], 'cdc.range_hash exists');
SELECT function_returns('cdc', 'range_hash', ARRAY['regclass', 'text[]', 'text[]', 'name[]', 'name[]'], 'setof record',
                        'cdc.range_hash returns a table (rows, hash)');
SELECT is((SELECT array_agg(c ORDER BY c) FROM pg_proc, unnest(proconfig) c
            WHERE oid = 'cdc.range_hash(regclass, text[], text[], name[], name[])'::regprocedure),
          ARRAY['DateStyle=ISO', 'IntervalStyle=postgres', 'TimeZone=UTC', 'bytea_output=hex', 'extra_float_digits=3',
                'lc_monetary=C', 'search_path=pg_catalog, pg_temp'],
          'cdc.range_hash pins the settings of the row text and the search_path');
SELECT has_function('cdc', 'range_hash_sql', ARRAY['text', 'text', 'text[]', 'text[]', 'text[]', 'text[]', 'text', 'boolean'],
                    'cdc.range_hash_sql exists');
SELECT volatility_is('cdc', 'range_hash_sql', ARRAY['text', 'text', 'text[]', 'text[]', 'text[]', 'text[]', 'text', 'boolean'],
                     'immutable', 'cdc.range_hash_sql is immutable (text in, text out)');

SELECT columns_are('cdc', 'audit_findings', ARRAY['id', 'audit_id', 'subscription', 'target', 'key', 'kind', 'source_hash',
                     'dest_hash', 'source_lsn', 'detail', 'found_at', 'repaired_at', 'repair_outcome', 'repair_lsn'],
                   'cdc.audit_findings has the documented columns');
SELECT col_type_is('cdc', 'audit_findings', 'key', 'jsonb', 'a finding''s key is jsonb, as an entity key');
SELECT col_type_is('cdc', 'audit_findings', 'target', 'regclass', 'a finding''s target is regclass');
SELECT fk_ok('cdc', 'audit_findings', 'audit_id', 'cdc', 'audit_runs', 'id', 'findings belong to their run');
SELECT columns_are('cdc', 'audit_status', ARRAY['id', 'kind', 'subscription', 'target', 'of_audit', 'current_target', 'state',
                     'source_lsn', 'tables_done', 'tables_total', 'rows_done', 'rows_estimate', 'percent', 'ranges_done',
                     'rows_per_second', 'time_left', 'findings', 'unsettled', 'repaired', 'unchanged', 'started_at',
                     'updated_at', 'finished_at', 'elapsed', 'requested_by'],
                   'cdc.audit_status has the documented columns');
SELECT col_type_is('cdc', 'audit_status', 'time_left', 'interval', 'time_left is an interval');
SELECT table_privs_are('cdc', 'audit_status', 'public', ARRAY['SELECT'], 'PUBLIC may read cdc.audit_status (no row data)');
SELECT table_privs_are('cdc', 'audit_findings', 'public', ARRAY[]::text[], 'PUBLIC may not read cdc.audit_findings (keys are row data)');
SELECT table_privs_are('cdc', 'audit_runs', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on cdc.audit_runs');

-- The statements are immune to the search_path: an operator and a function
-- planted in a schema searched first change nothing.
CREATE SCHEMA trap;
CREATE FUNCTION trap.md5(text) RETURNS text LANGUAGE sql AS $$ SELECT 'trapped' $$;
CREATE FUNCTION trap.textcat(text, text) RETURNS text LANGUAGE sql AS $$ SELECT 'x0' $$;
CREATE FUNCTION trap.gt(int, int) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR trap.> (LEFTARG = int, RIGHTARG = int, FUNCTION = trap.gt);
CREATE TABLE tap_rows (id int PRIMARY KEY, v text);
INSERT INTO tap_rows SELECT g, 'v' || g FROM generate_series(1, 10) g;
SELECT cdc.range_hash_sql('public', 'tap_rows', ARRAY['id', 'v'], ARRAY['id'], after => ARRAY['3'], up_to => ARRAY['7']) AS sql \gset
SELECT results_eq(:'sql', $$SELECT 4::bigint, sum(('x' || substr(md5(convert_to(ROW(id, v)::text, 'UTF8')), 1, 16))::bit(64)::bigint::numeric)
                               FROM tap_rows WHERE id > 3 AND id <= 7$$,
                  'the statement computes the documented range hash');
SET search_path = trap, public, pg_catalog;
SELECT results_eq(:'sql', $$SELECT 4::bigint, sum(('x' || pg_catalog.substr(pg_catalog.md5(convert_to(ROW(id, v)::text, 'UTF8')), 1, 16))::bit(64)::bigint::numeric)
                               FROM tap_rows WHERE id OPERATOR(pg_catalog.>) 3 AND id <= 7$$,
                  'and the same with trap functions and operators first on the search_path');
SELECT results_eq($$SELECT rows FROM cdc.range_hash('tap_rows', after => ARRAY['3'], up_to => ARRAY['7'])$$, $$VALUES (4::bigint)$$,
                  'cdc.range_hash too');
RESET search_path;
SELECT is((SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
            JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
           WHERE c.relname IN ('audit_runs', 'audit_findings', 'audit_status')), 3::bigint,
          'the audit''s tables and view belong to the extension');

SELECT * FROM finish();

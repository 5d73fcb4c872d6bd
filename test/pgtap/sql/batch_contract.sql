--
-- batch_contract: the catalog and API contract of cdc_apply_batch() and its
-- result type cdc.batch_result, checked with pgTAP.
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

SELECT plan(39);

-- The result type.
SELECT has_composite('cdc', 'batch_result', 'composite type cdc.batch_result exists');
SELECT columns_are('cdc', 'batch_result', ARRAY['events', 'applied', 'duplicate', 'stale', 'conflict', 'ignored', 'expired', 'outcomes'],
                   'cdc.batch_result has exactly the documented columns');
SELECT col_type_is('cdc', 'batch_result', 'events', 'bigint', 'cdc.batch_result.events is bigint');
SELECT col_type_is('cdc', 'batch_result', 'applied', 'bigint', 'cdc.batch_result.applied is bigint');
SELECT col_type_is('cdc', 'batch_result', 'duplicate', 'bigint', 'cdc.batch_result.duplicate is bigint');
SELECT col_type_is('cdc', 'batch_result', 'stale', 'bigint', 'cdc.batch_result.stale is bigint');
SELECT col_type_is('cdc', 'batch_result', 'conflict', 'bigint', 'cdc.batch_result.conflict is bigint');
SELECT col_type_is('cdc', 'batch_result', 'ignored', 'bigint', 'cdc.batch_result.ignored is bigint');
SELECT col_type_is('cdc', 'batch_result', 'expired', 'bigint', 'cdc.batch_result.expired is bigint');
SELECT col_type_is('cdc', 'batch_result', 'outcomes', 'text[]', 'cdc.batch_result.outcomes is text[]');
SELECT isnt(obj_description('cdc.batch_result'::regtype, 'pg_type'), NULL, 'cdc.batch_result has a comment');
SELECT is_empty($$
  SELECT a.attname FROM pg_attribute a
   WHERE a.attrelid = 'cdc.batch_result'::regclass AND a.attnum > 0 AND NOT a.attisdropped
     AND col_description(a.attrelid, a.attnum) IS NULL$$,
  'every column of cdc.batch_result has a comment');
SELECT is_empty($$
  SELECT t.oid::regtype::text FROM pg_type t
    JOIN pg_depend d ON d.classid = 'pg_type'::regclass AND d.objid = t.oid AND d.deptype = 'e'
    JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
   WHERE coalesce(obj_description(t.oid, 'pg_type'), '') = ''$$,
  'every type of the extension has a COMMENT');

-- The three forms: JSON array (jsonb or text) and jsonb[].
SELECT has_function('public', 'cdc_apply_batch', ARRAY['jsonb', 'regclass', 'text[]', 'boolean'],
                    'cdc_apply_batch(jsonb, regclass, text[], boolean) exists');
SELECT has_function('public', 'cdc_apply_batch', ARRAY['jsonb[]', 'regclass', 'text[]', 'boolean'],
                    'cdc_apply_batch(jsonb[], regclass, text[], boolean) exists');
SELECT has_function('public', 'cdc_apply_batch', ARRAY['text', 'regclass', 'text[]', 'boolean'],
                    'cdc_apply_batch(text, regclass, text[], boolean) exists');
SELECT is((SELECT array_agg(DISTINCT p.prorettype::regtype::text) FROM pg_proc p
            WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace),
          ARRAY['cdc.batch_result'], 'every cdc_apply_batch returns cdc.batch_result');
SELECT is((SELECT array_agg(DISTINCT l.lanname::text) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace),
          ARRAY['c'], 'every cdc_apply_batch is a C function');
SELECT is((SELECT array_agg(DISTINCT p.provolatile::text) FROM pg_proc p
            WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace),
          ARRAY['v'], 'every cdc_apply_batch is volatile');
SELECT is((SELECT bool_or(p.proisstrict) FROM pg_proc p
            WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace),
          false, 'no cdc_apply_batch is strict (a NULL events is an error, not a NULL result)');
SELECT is((SELECT bool_or(p.prosecdef) FROM pg_proc p
            WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace),
          false, 'no cdc_apply_batch is SECURITY DEFINER');
SELECT is((SELECT array_agg(DISTINCT p.proargnames::text) FROM pg_proc p
            WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace),
          ARRAY['{events,target,delivery_keys,with_outcomes}'],
          'cdc_apply_batch argument names are events, target, delivery_keys, with_outcomes');
SELECT is((SELECT array_agg(DISTINCT p.pronargdefaults) FROM pg_proc p
            WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace),
          ARRAY[3::int2], 'cdc_apply_batch: target, delivery_keys and with_outcomes have defaults');
SELECT is((SELECT bool_and('search_path=pg_catalog, pg_temp' = ANY (p.proconfig)) FROM pg_proc p
            WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace),
          true, 'every cdc_apply_batch pins search_path');
SELECT function_privs_are('public', 'cdc_apply_batch', ARRAY['jsonb', 'regclass', 'text[]', 'boolean'], 'public',
                          ARRAY['EXECUTE'], 'PUBLIC may execute cdc_apply_batch(jsonb, ...)');
SELECT function_privs_are('public', 'cdc_apply_batch', ARRAY['jsonb[]', 'regclass', 'text[]', 'boolean'], 'public',
                          ARRAY['EXECUTE'], 'PUBLIC may execute cdc_apply_batch(jsonb[], ...)');
SELECT function_privs_are('public', 'cdc_apply_batch', ARRAY['text', 'regclass', 'text[]', 'boolean'], 'public',
                          ARRAY['EXECUTE'], 'PUBLIC may execute cdc_apply_batch(text, ...)');

-- The contract in use, with the default search_path.
RESET search_path;
CREATE TABLE tap_batch (id int PRIMARY KEY, v text);
SELECT results_eq($$SELECT events, applied, duplicate, stale, conflict, ignored, expired, outcomes FROM cdc_apply_batch(
                      '[{"op": "c", "source": {"name": "tapb", "lsn": 16}, "after": {"id": 1, "v": "x"}},
                        {"op": "u", "source": {"name": "tapb", "lsn": 32}, "after": {"id": 1, "v": "y"}},
                        {"op": "c", "source": {"name": "tapb", "lsn": 16}, "after": {"id": 1, "v": "x"}},
                        null]'::jsonb, 'tap_batch', with_outcomes => true)$$,
                  $$VALUES (4::bigint, 2::bigint, 1::bigint, 0::bigint, 0::bigint, 1::bigint, 0::bigint,
                            ARRAY['applied', 'applied', 'duplicate', 'ignored'])$$,
                  'cdc_apply_batch(jsonb) returns the counts and the outcomes in input order');
SELECT results_eq('SELECT id, v FROM tap_batch', $$VALUES (1, 'y')$$, 'the batch left the newest row');
SELECT is((cdc_apply_batch(ARRAY['{"op": "u", "source": {"name": "tapb", "lsn": 48}, "after": {"id": 1, "v": "z"}}'::jsonb, NULL],
                           'tap_batch')).applied, 1::bigint, 'cdc_apply_batch(jsonb[]) applies');
SELECT is((cdc_apply_batch('[{"op": "u", "source": {"name": "tapb", "lsn": 48}, "after": {"id": 1, "v": "z"}}]', 'tap_batch')).duplicate,
          1::bigint, 'cdc_apply_batch(text) sees a redelivery as a duplicate');
SELECT is((cdc_apply_batch('[]'::jsonb)).events, 0::bigint, 'an empty batch applies nothing');
SELECT is((cdc_apply_batch('[]'::jsonb)).outcomes, NULL, 'outcomes is NULL unless with_outcomes');
SELECT throws_ok($$SELECT cdc_apply_batch(NULL::jsonb)$$, '22004', 'events must not be NULL', 'NULL events raise 22004');
SELECT throws_ok($$SELECT cdc_apply_batch('{"op": "c"}'::jsonb)$$, '22023', NULL, 'events that are not an array raise 22023');
SELECT throws_ok($$SELECT cdc_apply_batch('[{"op": "c"}'::text)$$, '22P02', NULL, 'malformed JSON text raises 22P02');
SELECT throws_ok($$SELECT cdc_apply_batch('[]'::jsonb, NULL, ARRAY['k'])$$, '22023', NULL,
                 'delivery_keys of another length raise 22023');
SELECT throws_ok($$SELECT cdc_apply_batch('[{"op": "c", "source": {"name": "tapb", "lsn": 64}, "after": {"id": 2, "v": "a"}},
                                            {"op": "c", "source": {"name": "tapb", "lsn": 80}, "after": {"id": "two", "v": "b"}}]'::jsonb,
                                          'tap_batch')$$,
                 '22P02', NULL, 'a bad event raises its own SQLSTATE');
SELECT results_eq('SELECT count(*) FROM tap_batch WHERE id = 2', 'VALUES (0::bigint)', 'a failed batch applies nothing');

SELECT * FROM finish();

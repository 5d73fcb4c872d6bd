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

SELECT plan(63);

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

-- The three forms: JSON array (jsonb or text) and jsonb[], each with the
-- arguments of claims by offset range (source_partition, offsets), and no
-- other cdc_apply_batch (the four-argument forms of 0.1 are gone).
SELECT has_function('public', 'cdc_apply_batch', ARRAY['jsonb', 'regclass', 'text[]', 'boolean', 'text', 'bigint[]'],
                    'cdc_apply_batch(jsonb, regclass, text[], boolean, text, bigint[]) exists');
SELECT has_function('public', 'cdc_apply_batch', ARRAY['jsonb[]', 'regclass', 'text[]', 'boolean', 'text', 'bigint[]'],
                    'cdc_apply_batch(jsonb[], regclass, text[], boolean, text, bigint[]) exists');
SELECT has_function('public', 'cdc_apply_batch', ARRAY['text', 'regclass', 'text[]', 'boolean', 'text', 'bigint[]'],
                    'cdc_apply_batch(text, regclass, text[], boolean, text, bigint[]) exists');
SELECT is((SELECT array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text) FROM pg_proc p
            WHERE p.proname = 'cdc_apply_batch'),
          ARRAY['cdc_apply_batch(jsonb,regclass,text[],boolean,text,bigint[])',
                'cdc_apply_batch(jsonb[],regclass,text[],boolean,text,bigint[])',
                'cdc_apply_batch(text,regclass,text[],boolean,text,bigint[])'],
          'there is no other cdc_apply_batch');
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
          ARRAY['{events,target,delivery_keys,with_outcomes,source_partition,offsets}'],
          'cdc_apply_batch argument names are events, target, delivery_keys, with_outcomes, source_partition, offsets');
SELECT is((SELECT array_agg(DISTINCT p.pronargdefaults) FROM pg_proc p
            WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace),
          ARRAY[5::int2], 'cdc_apply_batch: every argument but events has a default');
SELECT is((SELECT array_agg(DISTINCT substr(pg_get_function_arguments(p.oid), strpos(pg_get_function_arguments(p.oid), ', ') + 2))
             FROM pg_proc p WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace),
          ARRAY['target regclass DEFAULT NULL::regclass, delivery_keys text[] DEFAULT NULL::text[], '
                'with_outcomes boolean DEFAULT false, source_partition text DEFAULT NULL::text, offsets bigint[] DEFAULT NULL::bigint[]'],
          'cdc_apply_batch defaults: target, delivery_keys, source_partition and offsets NULL, with_outcomes false');
SELECT is((SELECT bool_and('search_path=pg_catalog, pg_temp' = ANY (p.proconfig)) FROM pg_proc p
            WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace),
          true, 'every cdc_apply_batch pins search_path');
SELECT function_privs_are('public', 'cdc_apply_batch', ARRAY['jsonb', 'regclass', 'text[]', 'boolean', 'text', 'bigint[]'], 'public',
                          ARRAY['EXECUTE'], 'PUBLIC may execute cdc_apply_batch(jsonb, ...)');
SELECT function_privs_are('public', 'cdc_apply_batch', ARRAY['jsonb[]', 'regclass', 'text[]', 'boolean', 'text', 'bigint[]'], 'public',
                          ARRAY['EXECUTE'], 'PUBLIC may execute cdc_apply_batch(jsonb[], ...)');
SELECT function_privs_are('public', 'cdc_apply_batch', ARRAY['text', 'regclass', 'text[]', 'boolean', 'text', 'bigint[]'], 'public',
                          ARRAY['EXECUTE'], 'PUBLIC may execute cdc_apply_batch(text, ...)');
SELECT is_empty($$
  SELECT p.oid::regprocedure::text FROM pg_proc p
   WHERE p.proname = 'cdc_apply_batch' AND p.pronamespace = 'public'::regnamespace
     AND NOT CASE WHEN p.proargtypes[0] = 'jsonb'::regtype
                  THEN obj_description(p.oid, 'pg_proc') LIKE '%source_partition%' AND obj_description(p.oid, 'pg_proc') LIKE '%offsets%'
                  ELSE obj_description(p.oid, 'pg_proc') LIKE 'Same as cdc_apply_batch(jsonb, ...)%' END$$,
  'the comment of cdc_apply_batch(jsonb, ...) documents source_partition and offsets, the other forms refer to it');

-- The tables of claims by offset range and their comments.
SELECT isnt(obj_description('cdc.ledger_partition'::regclass, 'pg_class'), NULL, 'cdc.ledger_partition has a comment');
SELECT isnt(obj_description('cdc.ledger_range'::regclass, 'pg_class'), NULL, 'cdc.ledger_range has a comment');
SELECT is_empty($$
  SELECT a.attrelid::regclass::text || '.' || a.attname FROM pg_attribute a
   WHERE a.attrelid IN ('cdc.ledger_partition'::regclass, 'cdc.ledger_range'::regclass) AND a.attnum > 0 AND NOT a.attisdropped
     AND coalesce(col_description(a.attrelid, a.attnum), '') = ''$$,
  'every column of cdc.ledger_partition and cdc.ledger_range has a comment');
SELECT is_empty($$
  SELECT pol.polname::text FROM pg_policy pol
   WHERE pol.polrelid IN ('cdc.ledger_partition'::regclass, 'cdc.ledger_range'::regclass)
     AND coalesce(obj_description(pol.oid, 'pg_policy'), '') = ''$$,
  'every policy of cdc.ledger_partition and cdc.ledger_range has a comment');

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

-- Claims by offset range in use: event i is the delivery
-- source_partition:offsets[i]; the batch writes a range, no ledger row.
SELECT results_eq($$SELECT applied, ignored, outcomes FROM cdc_apply_batch(
                      '[{"op": "c", "source": {"name": "tapb", "lsn": 96}, "after": {"id": 3, "v": "k"}},
                        null,
                        {"op": "u", "source": {"name": "tapb", "lsn": 112}, "after": {"id": 3, "v": "l"}}]'::jsonb,
                      'tap_batch', with_outcomes => true, source_partition => 'tapk:0:0', offsets => ARRAY[10, 11, 12]::bigint[])$$,
                  $$VALUES (2::bigint, 1::bigint, ARRAY['applied', 'ignored', 'applied'])$$,
                  'cdc_apply_batch with source_partition and offsets applies');
SELECT results_eq($$SELECT g.lo, g.hi FROM cdc.ledger_partition p JOIN cdc.ledger_range g ON g.partition_id = p.id
                     WHERE p.target = 'tap_batch'::regclass AND p.name = 'tapk:0:0'$$,
                  'VALUES (10::bigint, 12::bigint)', 'the batch claimed the range [10, 12] of its partition');
SELECT is((SELECT count(*) FROM cdc.ledger
            WHERE digest IN (SELECT cdc.delivery_digest('tap_batch', 'tapk:0:0:' || o) FROM generate_series(10, 12) o)),
          0::bigint, 'and wrote no ledger row for those deliveries');
SELECT results_eq($$SELECT cdc.delivery_processed('tap_batch', k) FROM unnest(ARRAY['tapk:0:0:10', 'tapk:0:0:11', 'tapk:0:0:13']) k$$,
                  'VALUES (true), (true), (false)',
                  'cdc.delivery_processed answers for <partition>:<offset> from the range');
SELECT results_eq($$SELECT duplicate, outcomes FROM cdc_apply_batch(
                      ARRAY['{"op": "u", "source": {"name": "tapb", "lsn": 112}, "after": {"id": 3, "v": "l"}}'::jsonb,
                            '{"op": "u", "source": {"name": "tapb", "lsn": 128}, "after": {"id": 3, "v": "m"}}'::jsonb],
                      'tap_batch', with_outcomes => true, source_partition => 'tapk:0:0', offsets => ARRAY[12, 13]::bigint[])$$,
                  $$VALUES (1::bigint, ARRAY['duplicate', 'applied'])$$,
                  'cdc_apply_batch(jsonb[]) with offsets: a redelivered offset is a duplicate, the next one applies');
SELECT results_eq('SELECT id, v FROM tap_batch WHERE id = 3', $$VALUES (3, 'm')$$, 'the batches by offset left the newest row');

-- Bad arguments of claims by offset range: 22023 (2202E for a
-- multidimensional array), nothing applied.
SELECT throws_ok($$SELECT cdc_apply_batch('[{"op": "c", "source": {"name": "tapb", "lsn": 144}, "after": {"id": 4}}]'::jsonb,
                                          'tap_batch', source_partition => 'tape:0:0')$$,
                 '22023', 'source_partition is given without offsets', 'source_partition without offsets raises 22023');
SELECT throws_ok($$SELECT cdc_apply_batch('[{"op": "c", "source": {"name": "tapb", "lsn": 144}, "after": {"id": 4}}]'::jsonb,
                                          'tap_batch', offsets => ARRAY[1]::bigint[])$$,
                 '22023', 'offsets are given without source_partition', 'offsets without source_partition raise 22023');
SELECT throws_ok($$SELECT cdc_apply_batch('[{"op": "c", "source": {"name": "tapb", "lsn": 144}, "after": {"id": 4}}]'::jsonb,
                                          'tap_batch', ARRAY['k'], source_partition => 'tape:0:0', offsets => ARRAY[1]::bigint[])$$,
                 '22023', 'delivery_keys and source_partition are both given', 'delivery_keys with source_partition raise 22023');
SELECT throws_ok($$SELECT cdc_apply_batch('[{"op": "c", "source": {"name": "tapb", "lsn": 144}, "after": {"id": 4}}]'::jsonb,
                                          'tap_batch', source_partition => '', offsets => ARRAY[1]::bigint[])$$,
                 '22023', 'source_partition must not be empty', 'an empty source_partition raises 22023');
SELECT throws_ok($$SELECT cdc_apply_batch('[{"op": "c", "source": {"name": "tapb", "lsn": 144}, "after": {"id": 4}}]'::jsonb,
                                          'tap_batch', source_partition => 'tape:0:0', offsets => ARRAY[1, 2]::bigint[])$$,
                 '22023', 'offsets has 2 elements, events has 1', 'offsets of another length raise 22023');
SELECT throws_ok($$SELECT cdc_apply_batch(ARRAY['{"op": "c", "source": {"name": "tapb", "lsn": 144}, "after": {"id": 4}}'::jsonb, NULL],
                                          'tap_batch', source_partition => 'tape:0:0', offsets => ARRAY[1, NULL]::bigint[])$$,
                 '22023', 'offsets[2] is NULL', 'a NULL offset raises 22023 (jsonb[] form)');
SELECT throws_ok($$SELECT cdc_apply_batch('[{"op": "c", "source": {"name": "tapb", "lsn": 144}, "after": {"id": 4}}, null]'::jsonb,
                                          'tap_batch', source_partition => 'tape:0:0', offsets => ARRAY[5, 5]::bigint[])$$,
                 '22023', 'offsets must be strictly increasing: offsets[2] = 5 follows offsets[1] = 5',
                 'an offset equal to the one before raises 22023');
SELECT throws_ok($$SELECT cdc_apply_batch('[{"op": "c", "source": {"name": "tapb", "lsn": 144}, "after": {"id": 4}}, null]'::text,
                                          'tap_batch', source_partition => 'tape:0:0', offsets => ARRAY[6, 5]::bigint[])$$,
                 '22023', 'offsets must be strictly increasing: offsets[2] = 5 follows offsets[1] = 6',
                 'a decreasing offset raises 22023 (text form)');
SELECT throws_ok($$SELECT cdc_apply_batch('[{"op": "c", "source": {"name": "tapb", "lsn": 144}, "after": {"id": 4}}]'::jsonb,
                                          'tap_batch', source_partition => 'tape:0:0', offsets => ARRAY[[1]]::bigint[])$$,
                 '2202E', NULL, 'multidimensional offsets raise 2202E');
-- a bad event after the claims: they roll back with the rest
SELECT throws_ok($$SELECT cdc_apply_batch('[{"op": "c", "source": {"name": "tapb", "lsn": 144}, "after": {"id": 4}},
                                            {"op": "c", "source": {"name": "tapb", "lsn": 160}, "after": {"id": "five"}}]'::jsonb,
                                          'tap_batch', source_partition => 'tape:0:1', offsets => ARRAY[1, 2]::bigint[])$$,
                 '22P02', NULL, 'a bad event in a batch by offset raises its own SQLSTATE');
SELECT results_eq($$SELECT (SELECT count(*) FROM tap_batch WHERE id = 4),
                           (SELECT count(*) FROM cdc.ledger_partition WHERE name IN ('tape:0:0', 'tape:0:1')),
                           (SELECT count(*) FROM cdc.ledger_range g JOIN cdc.ledger_partition p ON p.id = g.partition_id
                             WHERE p.name IN ('tape:0:0', 'tape:0:1'))$$,
                  'VALUES (0::bigint, 0::bigint, 0::bigint)', 'the refused batches applied and claimed nothing');

SELECT * FROM finish();

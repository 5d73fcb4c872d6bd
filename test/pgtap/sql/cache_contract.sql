--
-- cache_contract: the invalidation triggers that keep every backend's cache
-- of target metadata in step with cdc.mapping and cdc.table_barrier
-- (docs/internals.md, "Target metadata cache"), checked with pgTAP.
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

SELECT plan(12);

SELECT has_function('cdc', '_invalidate_target', ARRAY[]::text[], 'cdc._invalidate_target() exists');
SELECT function_returns('cdc', '_invalidate_target', ARRAY[]::text[], 'trigger', 'cdc._invalidate_target returns trigger');
SELECT function_lang_is('cdc', '_invalidate_target', ARRAY[]::text[], 'c', 'cdc._invalidate_target is a C function');
SELECT function_privs_are('cdc', '_invalidate_target', ARRAY[]::text[], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc._invalidate_target');
SELECT has_trigger('cdc', 'mapping', 'invalidate_target', 'cdc.mapping has the row trigger invalidate_target');
SELECT has_trigger('cdc', 'mapping', 'invalidate_targets', 'cdc.mapping has the truncate trigger invalidate_targets');
SELECT has_trigger('cdc', 'table_barrier', 'invalidate_target', 'cdc.table_barrier has the row trigger invalidate_target');
SELECT has_trigger('cdc', 'table_barrier', 'invalidate_targets', 'cdc.table_barrier has the truncate trigger invalidate_targets');
SELECT trigger_is('cdc', 'mapping', 'invalidate_target', 'cdc', '_invalidate_target',
                  'cdc.mapping.invalidate_target calls cdc._invalidate_target');
SELECT trigger_is('cdc', 'table_barrier', 'invalidate_target', 'cdc', '_invalidate_target',
                  'cdc.table_barrier.invalidate_target calls cdc._invalidate_target');
SELECT is_empty($$
  SELECT t.tgrelid::regclass || '.' || t.tgname FROM pg_trigger t
    JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = t.tgrelid AND d.deptype = 'e'
    JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
   WHERE NOT t.tgisinternal AND coalesce(obj_description(t.oid, 'pg_trigger'), '') = ''$$,
  'every trigger on the extension''s tables has a COMMENT');
SELECT throws_ok('SELECT cdc._invalidate_target()', '39P01', NULL, 'calling it outside a trigger raises 39P01');

SELECT * FROM finish();

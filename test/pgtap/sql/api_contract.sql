--
-- api_contract: the catalog and API contract of cdc_apply, checked with
-- pgTAP: schema, tables, views, keys, column types, function signatures,
-- return types, security properties, privileges and comments.
--
\set ECHO none
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
SET client_min_messages = warning;
CREATE EXTENSION pgtap;
CREATE EXTENSION cdc_apply;
RESET client_min_messages;
\set ECHO all

SELECT plan(224);

-- The extension, its schema and where the entry points live.
SELECT has_extension('cdc_apply', 'extension cdc_apply is installed');
SELECT has_schema('cdc', 'schema cdc holds the state');
SELECT is((SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'cdc_apply'), 'public',
          'entry points live in the extension schema (public), reachable with the default search_path');
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'cdc_apply'), false, 'extension is not relocatable');

-- Tables and views.
SELECT tables_are('cdc', ARRAY['mapping', 'ledger', 'ledger_partition', 'ledger_range', 'source', 'entity_state', 'table_barrier', 'outbox_rows', 'outbox_source',
                         'conflicts', 'counters', 'subscription', 'subscription_state', 'subscription_rel', 'skipped_transactions',
                         'dead_letter', 'prune_watermark', 'prune_state', 'subscription_errors', 'accepted_gaps', 'source_renames',
                         'stream_mark', 'audit_runs', 'audit_findings'],
                  'schema cdc has exactly the state tables');
SELECT views_are('cdc', ARRAY['stats', 'entities', 'tombstones', 'subscription_status', 'subscription_tables', 'horizon_status',
                        'outbox', 'stream_marks', 'audit_status',
                        'shared_stats', 'call_stats', 'failed_calls', 'worker_stats', 'apply_latency', 'rates',
                        'copy_progress', 'prune_progress'],
                 'schema cdc has exactly the views');
SELECT has_table('cdc', 'mapping', 'cdc.mapping exists');
SELECT has_table('cdc', 'ledger', 'cdc.ledger exists');
SELECT has_table('cdc', 'entity_state', 'cdc.entity_state exists');
SELECT has_table('cdc', 'table_barrier', 'cdc.table_barrier exists');
SELECT has_view('cdc', 'outbox', 'cdc.outbox exists (a view of cdc.outbox_rows)');
SELECT has_table('cdc', 'conflicts', 'cdc.conflicts exists');
SELECT has_table('cdc', 'counters', 'cdc.counters exists');
SELECT has_view('cdc', 'stats', 'cdc.stats exists');
SELECT has_view('cdc', 'entities', 'cdc.entities exists');
SELECT has_view('cdc', 'tombstones', 'cdc.tombstones exists');

-- Keys.
-- The compact layout (docs/retention.md): fixed-width columns only.
SELECT columns_are('cdc', 'ledger', ARRAY['digest', 'target', 'claimed_s'], 'cdc.ledger has exactly the compact columns');
SELECT col_is_pk('cdc', 'ledger', 'digest', 'cdc.ledger: the digest of (target, delivery key) is the primary key (the dedup claim)');
SELECT col_type_is('cdc', 'ledger', 'digest', 'bigint', 'cdc.ledger.digest is bigint');
SELECT col_type_is('cdc', 'ledger', 'target', 'regclass', 'cdc.ledger.target is regclass');
SELECT col_type_is('cdc', 'ledger', 'claimed_s', 'integer', 'cdc.ledger.claimed_s is integer (seconds since 2000)');
SELECT col_not_null('cdc', 'ledger', 'claimed_s', 'cdc.ledger.claimed_s is NOT NULL');
-- Claims by offset range (cdc_apply_batch with source_partition and
-- offsets): one row per (target, partition), ranges keyed by their end.
SELECT columns_are('cdc', 'ledger_partition', ARRAY['id', 'target', 'name', 'claimed_s'], 'cdc.ledger_partition has exactly the documented columns');
SELECT col_is_pk('cdc', 'ledger_partition', 'id', 'cdc.ledger_partition: id is the primary key');
SELECT col_is_unique('cdc', 'ledger_partition', ARRAY['target', 'name'], 'cdc.ledger_partition: one row per (target, partition), the lock of its claims');
SELECT col_type_is('cdc', 'ledger_partition', 'target', 'regclass', 'cdc.ledger_partition.target is regclass');
SELECT col_type_is('cdc', 'ledger_partition', 'name', 'text', 'cdc.ledger_partition.name is text');
SELECT columns_are('cdc', 'ledger_range', ARRAY['partition_id', 'lo', 'hi', 'claimed_s'], 'cdc.ledger_range has exactly the documented columns');
SELECT col_is_pk('cdc', 'ledger_range', ARRAY['partition_id', 'hi'], 'cdc.ledger_range: (partition, last offset) is the primary key');
SELECT col_type_is('cdc', 'ledger_range', 'lo', 'bigint', 'cdc.ledger_range.lo is bigint');
SELECT col_type_is('cdc', 'ledger_range', 'hi', 'bigint', 'cdc.ledger_range.hi is bigint');
SELECT col_type_is('cdc', 'ledger_range', 'claimed_s', 'integer', 'cdc.ledger_range.claimed_s is integer (seconds since 2000)');
SELECT is(cdc.delivery_digest('cdc.mapping', 'k'), ('x' || substr(md5('cdc.mapping'::regclass::oid::text || E'\n' || 'k'), 1, 16))::bit(64)::bigint,
          'cdc.delivery_digest is the first 64 bits of md5(target oid, newline, delivery key)');

-- The outbox: compact rows keyed by the binary idempotency key, shown by the view cdc.outbox.
SELECT index_is_unique('cdc', 'outbox_rows', 'outbox_rows_ikey', 'cdc.outbox_rows_ikey is unique');
SELECT has_index('cdc', 'outbox_rows', 'outbox_rows_ikey', ARRAY['target', 'v1', 'v2', 'ikey'], 'cdc.outbox_rows: the binary idempotency key is unique per target, after the version columns (docs/security.md)');
SELECT is((SELECT pg_get_expr(indpred, indrelid) FROM pg_index WHERE indexrelid = 'cdc.outbox_rows_ikey'::regclass), '(NOT stream_ordered)',
          'cdc.outbox_rows_ikey leaves out the rows of stream-ordered targets (unique by their stream mark)');
SELECT hasnt_pk('cdc', 'outbox_rows', 'cdc.outbox_rows has no primary key (the unique index is partial)');
SELECT is((SELECT relreplident FROM pg_class WHERE oid = 'cdc.outbox_rows'::regclass), 'f'::"char",
          'cdc.outbox_rows has REPLICA IDENTITY FULL, so UPDATE and DELETE work where a publication includes it');
SELECT col_not_null('cdc', 'outbox_rows', 'stream_ordered', 'cdc.outbox_rows.stream_ordered is NOT NULL');
SELECT col_type_is('cdc', 'outbox_rows', 'ikey', 'uuid', 'cdc.outbox_rows.ikey is uuid (the 16 bytes of the md5)');
SELECT indexes_are('cdc', 'outbox_rows', ARRAY['outbox_rows_ikey', 'outbox_unpublished_idx'],
                   'cdc.outbox_rows has one unique index and the relay''s work queue');
SELECT col_is_pk('cdc', 'outbox_source', 'id', 'cdc.outbox_source: id is the primary key');
SELECT is((SELECT is_updatable || is_insertable_into FROM information_schema.views
            WHERE table_schema = 'cdc' AND table_name = 'outbox'), 'YESYES',
          'cdc.outbox is an automatically updatable view (relays update and delete through it)');
SELECT is(ARRAY(SELECT column_name::text FROM information_schema.columns
                 WHERE table_schema = 'cdc' AND table_name = 'outbox' AND is_updatable = 'YES' ORDER BY ordinal_position),
          ARRAY['id', 'target', 'created_at', 'published_at'],
          'cdc.outbox: the columns stored as shown are updatable through the view (entity_key and payload are stored as JSON text, the payload as its values)');
SELECT col_type_is('cdc', 'outbox', 'idempotency_key', 'text', 'cdc.outbox.idempotency_key is text');
SELECT col_type_is('cdc', 'outbox', 'op', 'text', 'cdc.outbox.op is text');
SELECT col_type_is('cdc', 'outbox', 'payload', 'jsonb', 'cdc.outbox.payload is jsonb');
SELECT col_type_is('cdc', 'outbox', 'source', 'jsonb', 'cdc.outbox.source is jsonb');
SELECT col_type_is('cdc', 'outbox', 'version', 'bigint[]', 'cdc.outbox.version is bigint[]');
SELECT col_type_is('cdc', 'outbox', 'published_at', 'timestamp with time zone', 'cdc.outbox.published_at is timestamptz');
SELECT col_is_null('cdc', 'outbox', 'published_at', 'cdc.outbox.published_at is nullable (NULL until published)');

SELECT col_is_pk('cdc', 'mapping', 'target', 'cdc.mapping: target is the primary key');
SELECT col_type_is('cdc', 'mapping', 'key_columns', 'name[]', 'cdc.mapping.key_columns is name[]');
SELECT col_type_is('cdc', 'mapping', 'version_column', 'name', 'cdc.mapping.version_column is name');
SELECT col_has_default('cdc', 'mapping', 'truncate_policy', 'cdc.mapping.truncate_policy has a default');
SELECT col_default_is('cdc', 'mapping', 'truncate_policy', 'truncate', 'cdc.mapping.truncate_policy defaults to truncate');
SELECT col_default_is('cdc', 'mapping', 'unavailable_placeholder', '__debezium_unavailable_value',
                      'cdc.mapping.unavailable_placeholder defaults to Debezium''s placeholder');
SELECT col_default_is('cdc', 'mapping', 'conflict_policy', 'record', 'cdc.mapping.conflict_policy defaults to record');

SELECT col_is_pk('cdc', 'entity_state', ARRAY['target', 'key'], 'cdc.entity_state: (target, key) is the primary key');
SELECT columns_are('cdc', 'entity_state', ARRAY['v1', 'v2', 'target', 'v0', 'v3', 'chash', 'touched_s', 'src', 'deleted', 'key'],
                   'cdc.entity_state has exactly the compact columns');
SELECT is((SELECT array_agg(format_type(atttypid, atttypmod) ORDER BY attnum) FROM pg_attribute
            WHERE attrelid = 'cdc.entity_state'::regclass AND attnum > 0 AND NOT attisdropped),
          ARRAY['bigint', 'bigint', 'integer', 'integer', 'regclass', 'integer', 'integer', 'integer', 'boolean', 'text'],
          'cdc.entity_state columns are fixed-width, 8-byte ones first, those an update rewrites (v1, v2, chash) together, the key last');
SELECT col_is_pk('cdc', 'source', 'id', 'cdc.source: id is the primary key');
SELECT col_is_unique('cdc', 'source', 'name', 'cdc.source.name is unique');
SELECT col_type_is('cdc', 'entity_state', 'deleted', 'boolean', 'cdc.entity_state.deleted is boolean');
SELECT col_is_pk('cdc', 'table_barrier', 'target', 'cdc.table_barrier: target is the primary key');
SELECT col_is_pk('cdc', 'conflicts', 'id', 'cdc.conflicts: id is the primary key');
SELECT col_type_is('cdc', 'conflicts', 'stored_image', 'jsonb', 'cdc.conflicts.stored_image is jsonb');
SELECT col_type_is('cdc', 'conflicts', 'event_image', 'jsonb', 'cdc.conflicts.event_image is jsonb');
SELECT col_is_pk('cdc', 'counters', ARRAY['target', 'backend_id'], 'cdc.counters: (target, backend_id) is the primary key');

-- The stats view: its columns, in order, and their types.
SELECT columns_are('cdc', 'stats', ARRAY['target', 'applied', 'duplicate', 'stale', 'conflict', 'ignored',
                                         'blocked_resurrections', 'outbox_rows', 'snapshot_rows', 'expired'],
                   'cdc.stats has exactly the documented columns');
SELECT is((SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'cdc.stats'::regclass AND attnum > 0),
          ARRAY['target', 'applied', 'duplicate', 'stale', 'conflict', 'ignored', 'blocked_resurrections',
                'outbox_rows', 'snapshot_rows', 'expired'],
          'cdc.stats columns are in the documented order');
SELECT col_type_is('cdc', 'stats', 'target', 'regclass', 'cdc.stats.target is regclass');
SELECT col_type_is('cdc', 'stats', 'applied', 'bigint', 'cdc.stats.applied is bigint');
SELECT col_type_is('cdc', 'stats', 'duplicate', 'bigint', 'cdc.stats.duplicate is bigint');
SELECT col_type_is('cdc', 'stats', 'stale', 'bigint', 'cdc.stats.stale is bigint');
SELECT col_type_is('cdc', 'stats', 'conflict', 'bigint', 'cdc.stats.conflict is bigint');
SELECT col_type_is('cdc', 'stats', 'ignored', 'bigint', 'cdc.stats.ignored is bigint');
SELECT col_type_is('cdc', 'stats', 'blocked_resurrections', 'bigint', 'cdc.stats.blocked_resurrections is bigint');
SELECT col_type_is('cdc', 'stats', 'outbox_rows', 'bigint', 'cdc.stats.outbox_rows is bigint');
SELECT col_type_is('cdc', 'stats', 'snapshot_rows', 'bigint', 'cdc.stats.snapshot_rows is bigint');
SELECT columns_are('cdc', 'entities', ARRAY['target', 'entity_key', 'source_name', 'version', 'is_tombstone', 'updated_at'],
                   'cdc.entities has exactly the documented columns');
SELECT columns_are('cdc', 'tombstones', ARRAY['target', 'entity_key', 'source_name', 'version', 'deleted_at'],
                   'cdc.tombstones has exactly the documented columns');

-- Functions: signatures, return types, language, volatility, security.
SELECT functions_are('public', ARRAY['cdc_apply', 'cdc_apply_batch'] || ARRAY(SELECT p.proname::text FROM pg_proc p
                       WHERE p.pronamespace = 'public'::regnamespace AND p.proname NOT IN ('cdc_apply', 'cdc_apply_batch')
                         AND NOT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
                                          WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
                                            AND e.extname = 'cdc_apply')),
                     'the only extension functions in public are cdc_apply and cdc_apply_batch (batch_contract.sql)');
SELECT has_function('public', 'cdc_apply', ARRAY['jsonb', 'regclass', 'text'], 'cdc_apply(jsonb, regclass, text) exists');
SELECT has_function('public', 'cdc_apply', ARRAY['text', 'regclass', 'text'], 'cdc_apply(text, regclass, text) exists');
SELECT function_returns('public', 'cdc_apply', ARRAY['jsonb', 'regclass', 'text'], 'text', 'cdc_apply(jsonb, regclass, text) returns text');
SELECT function_returns('public', 'cdc_apply', ARRAY['text', 'regclass', 'text'], 'text', 'cdc_apply(text, regclass, text) returns text');
SELECT function_lang_is('public', 'cdc_apply', ARRAY['jsonb', 'regclass', 'text'], 'c', 'cdc_apply(jsonb, ...) is a C function');
SELECT volatility_is('public', 'cdc_apply', ARRAY['jsonb', 'regclass', 'text'], 'volatile', 'cdc_apply(jsonb, ...) is volatile');
SELECT isnt_strict('public', 'cdc_apply', ARRAY['jsonb', 'regclass', 'text'], 'cdc_apply(jsonb, ...) is called on NULL input (Kafka tombstones)');
SELECT isnt_definer('public', 'cdc_apply', ARRAY['jsonb', 'regclass', 'text'], 'cdc_apply(jsonb, ...) is not SECURITY DEFINER');
SELECT isnt_definer('public', 'cdc_apply', ARRAY['text', 'regclass', 'text'], 'cdc_apply(text, ...) is not SECURITY DEFINER');
SELECT is((SELECT array_agg(p.proargnames::text ORDER BY p.oid::regprocedure::text) FROM pg_proc p
            WHERE p.proname = 'cdc_apply' AND p.pronamespace = 'public'::regnamespace),
          ARRAY['{event,target,delivery_key}', '{event,target,delivery_key}'],
          'cdc_apply argument names are event, target, delivery_key');
SELECT is((SELECT array_agg(p.pronargdefaults ORDER BY p.oid::regprocedure::text) FROM pg_proc p
            WHERE p.proname = 'cdc_apply' AND p.pronamespace = 'public'::regnamespace),
          ARRAY[2::int2, 2::int2], 'cdc_apply: target and delivery_key default to NULL');
SELECT has_function('cdc', 'register_mapping',
                    ARRAY['regclass', 'text', 'text', 'name[]', 'name', 'boolean', 'text', 'text', 'text', 'text', 'bigint', 'text', 'text', 'text', 'regprocedure', 'text', 'text'],
                    'cdc.register_mapping(...) exists with the documented signature');
SELECT function_returns('cdc', 'register_mapping',
                        ARRAY['regclass', 'text', 'text', 'name[]', 'name', 'boolean', 'text', 'text', 'text', 'text', 'bigint', 'text', 'text', 'text', 'regprocedure', 'text', 'text'],
                        'cdc.mapping', 'cdc.register_mapping returns the cdc.mapping row');
SELECT isnt_definer('cdc', 'register_mapping',
                    ARRAY['regclass', 'text', 'text', 'name[]', 'name', 'boolean', 'text', 'text', 'text', 'text', 'bigint', 'text', 'text', 'text', 'regprocedure', 'text', 'text'],
                    'cdc.register_mapping is not SECURITY DEFINER');
SELECT is((SELECT p.proargnames FROM pg_proc p WHERE p.oid = 'cdc.register_mapping(regclass,text,text,name[],name,boolean,text,text,text,text,bigint,text,text,text,regprocedure,text,text)'::regprocedure),
          ARRAY['target', 'source_schema', 'source_table', 'key_columns', 'version_column', 'outbox', 'outbox_topic',
                'truncate_policy', 'unavailable_placeholder', 'temporal_unit', 'source_epoch', 'source_name', 'conflict_policy',
                'mode', 'handler', 'expired_policy', 'outbox_via'],
          'cdc.register_mapping argument names (callable with named arguments)');
SELECT col_type_is('cdc', 'mapping', 'mode', 'text', 'cdc.mapping.mode is text');
SELECT col_default_is('cdc', 'mapping', 'mode', 'state', 'cdc.mapping.mode defaults to state');
SELECT col_type_is('cdc', 'mapping', 'handler', 'regprocedure', 'cdc.mapping.handler is regprocedure');
SELECT col_is_null('cdc', 'mapping', 'handler', 'cdc.mapping.handler is nullable (only mode handler has one)');
SELECT has_function('cdc', 'create_history_table', ARRAY['text', 'regclass'], 'cdc.create_history_table(text, regclass) exists');
SELECT function_returns('cdc', 'create_history_table', ARRAY['text', 'regclass'], 'regclass',
                        'cdc.create_history_table returns the new table');
SELECT function_privs_are('cdc', 'create_history_table', ARRAY['text', 'regclass'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.create_history_table');
SELECT has_function('cdc', 'outbox_mark_published', ARRAY['bigint[]'], 'cdc.outbox_mark_published(bigint[]) exists');
SELECT function_returns('cdc', 'outbox_mark_published', ARRAY['bigint[]'], 'bigint', 'cdc.outbox_mark_published returns the count marked');
SELECT function_privs_are('cdc', 'outbox_mark_published', ARRAY['bigint[]'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.outbox_mark_published (grant it to the relay role)');
SELECT columns_are('cdc', 'outbox', ARRAY['id', 'idempotency_key', 'topic', 'target', 'entity_key', 'op', 'payload', 'source',
                                         'version', 'created_at', 'published_at'],
                   'cdc.outbox has exactly the documented columns');
SELECT has_index('cdc', 'outbox_rows', 'outbox_unpublished_idx', 'cdc.outbox_rows has the relay''s index of unpublished rows');
-- The replay horizon.
SELECT has_function('cdc', 'prune', ARRAY['integer', 'interval'], 'cdc.prune(integer, interval) exists');
SELECT is((SELECT p.proargnames FROM pg_proc p WHERE p.oid = 'cdc.prune(integer,interval)'::regprocedure),
          ARRAY['max_pages', 'horizon', 'relation', 'scanned_blocks', 'removed', 'sweep_done'],
          'cdc.prune takes max_pages and horizon and returns relation, scanned_blocks, removed, sweep_done');
SELECT function_privs_are('cdc', 'prune', ARRAY['integer', 'interval'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.prune');
SELECT has_function('cdc', 'replay_horizon', ARRAY[]::text[], 'cdc.replay_horizon() exists');
SELECT is(cdc.replay_horizon(), interval '7 days', 'the replay horizon defaults to 7 days');
SELECT col_default_is('cdc', 'mapping', 'expired_policy', 'refuse', 'cdc.mapping.expired_policy defaults to refuse');
SELECT col_default_is('cdc', 'mapping', 'outbox_via', 'table', 'cdc.mapping.outbox_via defaults to table');
SELECT columns_are('cdc', 'horizon_status', ARRAY['horizon', 'cutoff', 'oldest_ledger_entry', 'ledger_rows', 'ledger_bytes', 'ledger_ranges',
                   'oldest_tombstone', 'tombstones', 'live_entities', 'entity_state_bytes', 'outbox_unpublished',
                   'outbox_published', 'outbox_bytes', 'watermarks', 'expired_changes', 'last_prune_at', 'last_full_sweep_at'],
                   'cdc.horizon_status has exactly the documented columns');
SELECT table_privs_are('cdc', 'horizon_status', 'public', ARRAY['SELECT'], 'PUBLIC may read cdc.horizon_status');
SELECT col_is_pk('cdc', 'prune_watermark', ARRAY['target', 'src'], 'cdc.prune_watermark: one watermark per (target, source)');
SELECT has_function('cdc', 'unregister_mapping', ARRAY['regclass'], 'cdc.unregister_mapping(regclass) exists');
SELECT function_returns('cdc', 'unregister_mapping', ARRAY['regclass'], 'boolean', 'cdc.unregister_mapping returns boolean');

-- Every function of the extension pins search_path; only two are SECURITY
-- DEFINER (docs/security.md).  (Procedures that commit cannot have a SET
-- clause: cdc.audit and cdc.resync set it for each of their transactions,
-- audit_contract.sql.)
SELECT is_empty($$
  SELECT p.oid::regprocedure::text FROM pg_proc p
    JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
   WHERE p.prokind <> 'p' AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)$$,
  'every extension function sets search_path = pg_catalog, pg_temp');
SELECT is_empty($$
  SELECT p.oid::regprocedure::text FROM pg_proc p
    JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
   WHERE p.prosecdef AND p.oid NOT IN ('cdc._drop_target_state()'::regprocedure, 'cdc._subscription_progress()'::regprocedure,
                                       'cdc._fold_into_stream_mark(regclass)'::regprocedure,
                                       'cdc._stream_scope_conflict(regclass, text)'::regprocedure,
                                       'cdc.outbox_mark_published(bigint[])'::regprocedure,
                                       'cdc.outbox_claim(integer, text)'::regprocedure,
                                       'cdc.outbox_delete(bigint[])'::regprocedure,
                                       'cdc.prune(integer, interval)'::regprocedure,
                                       'cdc.rename_source(text, text)'::regprocedure)$$,
  'no extension function is SECURITY DEFINER except the sql_drop clean-up (any table owner may drop a mapped table), the origin progress of cdc.subscription_status, the fold of a target''s records into its stream mark (only for targets already switched), the check of a stream-ordered target''s subscriptions (it reads cdc.subscription and returns only subscription names, which cdc.subscription_tables shows everyone), the relay''s claiming, marking and deleting of outbox rows (which need no UPDATE or DELETE on cdc.outbox, with which a relay could LOCK cdc.outbox_rows) and cdc.prune and cdc.rename_source (whose grantees need no privilege on the tables they write)');
SELECT is_definer('cdc', '_subscription_progress', ARRAY[]::text[],
                  'cdc._subscription_progress reads the replication origins as the extension owner');
SELECT function_privs_are('cdc', '_subscription_progress', ARRAY[]::text[], 'public', ARRAY['EXECUTE'],
                          'PUBLIC may execute cdc._subscription_progress (it returns subids and LSNs only)');

-- Privileges: PUBLIC may execute cdc_apply, read the views and cdc.mapping,
-- and nothing else.
SELECT function_privs_are('public', 'cdc_apply', ARRAY['jsonb', 'regclass', 'text'], 'public', ARRAY['EXECUTE'],
                          'PUBLIC may execute cdc_apply(jsonb, ...)');
SELECT is_definer('cdc', 'outbox_mark_published', ARRAY['bigint[]'],
                  'cdc.outbox_mark_published marks rows as the extension owner: a relay needs EXECUTE, not UPDATE on cdc.outbox');
SELECT function_privs_are('cdc', 'outbox_mark_published', ARRAY['bigint[]'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.outbox_mark_published');
SELECT is_definer('cdc', 'outbox_claim', ARRAY['integer', 'text'],
                  'cdc.outbox_claim locks rows as the extension owner: a relay needs EXECUTE, not UPDATE on cdc.outbox');
SELECT function_returns('cdc', 'outbox_claim', ARRAY['integer', 'text'], 'setof cdc.outbox',
                        'cdc.outbox_claim returns rows of the view cdc.outbox');
SELECT function_privs_are('cdc', 'outbox_claim', ARRAY['integer', 'text'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.outbox_claim (grant it to the relay role)');
SELECT is_definer('cdc', 'outbox_delete', ARRAY['bigint[]'],
                  'cdc.outbox_delete deletes rows as the extension owner: a relay needs EXECUTE, not DELETE on cdc.outbox');
SELECT function_returns('cdc', 'outbox_delete', ARRAY['bigint[]'], 'bigint', 'cdc.outbox_delete returns the count deleted');
SELECT function_privs_are('cdc', 'outbox_delete', ARRAY['bigint[]'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.outbox_delete (grant it to the relay role)');
SELECT is_definer('cdc', 'prune', ARRAY['integer', 'interval'],
                  'cdc.prune prunes as the extension owner: a grantee needs EXECUTE, not DELETE or UPDATE on the tables it prunes');
SELECT is_definer('cdc', 'rename_source', ARRAY['text', 'text'],
                  'cdc.rename_source renames as the extension owner: a grantee needs EXECUTE, no privilege on the tables it rewrites, and every mapping of the old name follows');
SELECT isnt_definer('cdc', '_write_mapping', ARRAY['text', 'regclass', 'cdc.mapping'],
                    'cdc._write_mapping is not SECURITY DEFINER: it checks the caller (GetUserId) and switches to the table''s owner for the write only');
SELECT function_privs_are('cdc', '_write_mapping', ARRAY['text', 'regclass', 'cdc.mapping'], 'public', ARRAY['EXECUTE'],
                          'PUBLIC may execute cdc._write_mapping (it requires EXECUTE on the function each action serves)');
SELECT function_privs_are('cdc', 'register_mapping',
                          ARRAY['regclass', 'text', 'text', 'name[]', 'name', 'boolean', 'text', 'text', 'text', 'text', 'bigint', 'text', 'text', 'text', 'regprocedure', 'text', 'text'],
                          'public', ARRAY[]::text[], 'PUBLIC may not execute cdc.register_mapping');
SELECT table_privs_are('cdc', 'ledger', 'public', ARRAY['SELECT'], 'PUBLIC may read cdc.ledger (row by row: policy readable_targets)');
SELECT ok((SELECT relrowsecurity AND NOT relforcerowsecurity FROM pg_class WHERE oid = 'cdc.ledger'::regclass),
          'cdc.ledger has row-level security (the extension owner, who writes it, is not subject to it)');
SELECT policies_are('cdc', 'ledger', ARRAY['readable_targets'], 'cdc.ledger has exactly the policy readable_targets');
SELECT table_privs_are('cdc', 'ledger_partition', 'public', ARRAY['SELECT'], 'PUBLIC may read cdc.ledger_partition (row by row: policy readable_targets)');
SELECT table_privs_are('cdc', 'ledger_range', 'public', ARRAY['SELECT'], 'PUBLIC may read cdc.ledger_range (row by row: policy readable_targets)');
SELECT ok((SELECT bool_and(relrowsecurity AND NOT relforcerowsecurity) FROM pg_class
            WHERE oid IN ('cdc.ledger_partition'::regclass, 'cdc.ledger_range'::regclass)),
          'cdc.ledger_partition and cdc.ledger_range have row-level security (not forced: the extension owner writes them)');
SELECT policies_are('cdc', 'ledger_partition', ARRAY['readable_targets'], 'cdc.ledger_partition has exactly the policy readable_targets');
SELECT policies_are('cdc', 'ledger_range', ARRAY['readable_targets'], 'cdc.ledger_range has exactly the policy readable_targets');
SELECT ok((SELECT relrowsecurity FROM pg_class WHERE oid = 'cdc.mapping'::regclass),
          'cdc.mapping has row-level security (delegated writers write only their own tables'' mappings)');
SELECT policies_are('cdc', 'mapping', ARRAY['readable', 'own_targets'], 'cdc.mapping has exactly the policies readable and own_targets');
SELECT table_privs_are('cdc', 'outbox', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on cdc.outbox');
SELECT table_privs_are('cdc', 'outbox_rows', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on cdc.outbox_rows');
SELECT table_privs_are('cdc', 'outbox_source', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on cdc.outbox_source');
SELECT table_privs_are('cdc', 'entity_state', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on cdc.entity_state');
SELECT table_privs_are('cdc', 'stats', 'public', ARRAY['SELECT'], 'PUBLIC may read cdc.stats');
SELECT table_privs_are('cdc', 'tombstones', 'public', ARRAY['SELECT'], 'PUBLIC may read cdc.tombstones');
SELECT schema_privs_are('cdc', 'public', ARRAY['USAGE'], 'PUBLIC has USAGE (not CREATE) on schema cdc');

-- Comments: the schema, every table, view and function of the extension,
-- and every column of the extension's tables.
SELECT isnt(obj_description('cdc'::regnamespace, 'pg_namespace'), NULL, 'schema cdc has a comment');
SELECT is_empty($$
  SELECT c.oid::regclass::text FROM pg_class c
    JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
    JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
   WHERE c.relkind IN ('r', 'v', 'p', 'm')
     AND NOT EXISTS (SELECT 1 FROM pg_description ds
                      WHERE ds.classoid = 'pg_class'::regclass AND ds.objoid = c.oid AND ds.objsubid = 0
                        AND ds.description <> '')$$,
  'every table and view of the extension has a COMMENT');
SELECT is_empty($$
  SELECT p.oid::regprocedure::text FROM pg_proc p
    JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
   WHERE NOT EXISTS (SELECT 1 FROM pg_description ds
                      WHERE ds.classoid = 'pg_proc'::regclass AND ds.objoid = p.oid AND ds.objsubid = 0
                        AND ds.description <> '')$$,
  'every function of the extension has a COMMENT');
SELECT is_empty($$
  SELECT c.oid::regclass::text || '.' || a.attname FROM pg_class c
    JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
    JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
   WHERE c.relkind = 'r' AND col_description(c.oid, a.attnum) IS NULL$$,
  'every column of the extension''s tables has a COMMENT');
SELECT cmp_ok((SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
                WHERE d.deptype = 'e' AND d.classid IN ('pg_class'::regclass, 'pg_proc'::regclass)), '>=', 14::bigint,
              'the comment checks above saw the extension''s objects');

-- The contract in use: a minimal call resolves with the default search_path
-- and returns one of the documented outcomes.
RESET search_path;
CREATE TABLE tap_items (id int PRIMARY KEY, v text);
SELECT is(cdc_apply('{"op": "c", "source": {"name": "tap", "lsn": 16}, "after": {"id": 1, "v": "x"}}'::jsonb, 'tap_items'),
          'applied', 'cdc_apply(jsonb) applies a create');
SELECT is(cdc_apply('{"op": "c", "source": {"name": "tap", "lsn": 16}, "after": {"id": 1, "v": "x"}}', 'tap_items'),
          'duplicate', 'cdc_apply(text) sees the same delivery as a duplicate');
SELECT is(cdc_apply(NULL::jsonb), 'ignored', 'a NULL value (Kafka tombstone) is ignored');
SELECT results_eq('SELECT id, v FROM tap_items', $$VALUES (1, 'x')$$, 'the row was written once');
SELECT throws_ok($$SELECT cdc_apply('{"op": "c"', 'tap_items')$$, '22P02', NULL, 'malformed JSON raises 22P02');
SELECT throws_ok($$SELECT cdc_apply('{"op": "q"}'::jsonb, 'tap_items')$$, '22023', 'unknown op "q"', 'an unknown op raises 22023');

-- The history table made by cdc.create_history_table has the documented metadata columns and unique index.
CREATE TABLE tap_hist_src (id int PRIMARY KEY, v text);
SELECT is(cdc.create_history_table('tap_hist', 'tap_hist_src')::text, 'tap_hist', 'cdc.create_history_table creates the table');
SELECT columns_are('public', 'tap_hist', ARRAY['id', 'v', 'cdc_seq', 'cdc_key', 'cdc_version', 'cdc_op', 'cdc_snapshot',
                                              'cdc_source_ts', 'cdc_source', 'cdc_delivery_key', 'cdc_recorded_at'],
                   'a history table has the source columns and the documented metadata columns');
SELECT col_type_is('public', 'tap_hist', 'cdc_key', 'jsonb', 'history cdc_key is jsonb');
SELECT col_type_is('public', 'tap_hist', 'cdc_version', 'bigint[]', 'history cdc_version is bigint[]');
SELECT col_type_is('public', 'tap_hist', 'cdc_source_ts', 'timestamp with time zone', 'history cdc_source_ts is timestamptz');
SELECT col_is_unique('public', 'tap_hist', ARRAY['cdc_key', 'cdc_version'], 'history rows are unique on (cdc_key, cdc_version)');
SELECT is((cdc.register_mapping('tap_hist', source_table => 'tap_hist_src', key_columns => '{id}', mode => 'history')).mode,
          'history', 'a history mapping registers');
SELECT throws_ok($$SELECT cdc.register_mapping('tap_items', mode => 'handler')$$, '22023', NULL, 'mode handler needs a handler');

-- The background worker's status view (docs/worker.md).
SELECT columns_are('cdc', 'subscription_status', ARRAY['name', 'state', 'received_lsn', 'applied_lsn', 'flushed_lsn',
                     'source_end_lsn', 'lag_bytes', 'lag_seconds', 'retry_count', 'last_error', 'last_error_lsn',
                     'last_error_at', 'worker_pid', 'slot_name', 'publications', 'applied_xacts', 'apply_commits'],
                   'cdc.subscription_status has exactly the documented columns');
SELECT has_function('cdc', 'alter_subscription', ARRAY['text', 'text', 'text[]', 'bigint', 'regrole', 'boolean', 'text'],
                    'cdc.alter_subscription(name, conninfo, publications, source_epoch, owner, run_as_owner, origin) exists');
SELECT function_privs_are('cdc', 'alter_subscription', ARRAY['text', 'text', 'text[]', 'bigint', 'regrole', 'boolean', 'text'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.alter_subscription');
SELECT has_function('cdc', 'create_subscription', ARRAY['text', 'text', 'text[]', 'name', 'boolean', 'boolean', 'boolean', 'bigint', 'regrole', 'boolean', 'text'],
                    'cdc.create_subscription(..., owner, run_as_owner, origin) exists');
SELECT col_type_is('cdc', 'subscription', 'owner', 'regrole', 'cdc.subscription.owner is the role the worker acts as');
SELECT col_not_null('cdc', 'subscription', 'owner', 'cdc.subscription.owner is NOT NULL');
SELECT col_type_is('cdc', 'subscription', 'run_as_owner', 'boolean', 'cdc.subscription.run_as_owner is boolean');
SELECT trigger_is('cdc', 'subscription', 'subscription_guard', 'cdc', '_subscription_guard',
                  'cdc.subscription refuses writes by non-superusers (trigger subscription_guard)');
SELECT col_default_is('cdc', 'subscription', 'origin', 'any'::text, 'a subscription applies transactions of any origin by default');

-- The tables of a subscription, and refreshing them (issue 12, item 8).
SELECT columns_are('cdc', 'subscription_tables', ARRAY['subscription', 'schema_name', 'table_name', 'state', 'sync_lsn',
                     'copied_rows', 'updated_at'],
                   'cdc.subscription_tables has exactly the documented columns');
SELECT table_privs_are('cdc', 'subscription_tables', 'public', ARRAY['SELECT'], 'PUBLIC may read cdc.subscription_tables');
SELECT table_privs_are('cdc', 'subscription_rel', 'public', ARRAY[]::text[], 'PUBLIC may not read cdc.subscription_rel');
SELECT function_returns('cdc', 'refresh_subscription', ARRAY['text', 'boolean'], 'setof record',
                        'cdc.refresh_subscription(name, copy_data) returns the added and removed tables');
SELECT function_privs_are('cdc', 'refresh_subscription', ARRAY['text', 'boolean'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.refresh_subscription');
SELECT function_returns('cdc', 'resync_table', ARRAY['text', 'regclass'], 'void', 'cdc.resync_table(name, target) exists');
SELECT function_privs_are('cdc', 'resync_table', ARRAY['text', 'regclass'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.resync_table');
SELECT function_privs_are('cdc', '_publication_tables', ARRAY['text', 'text[]'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc._publication_tables');

-- Continuity, durable control state, status history, re-keying (issue 12, items 5-7, 9, 10).
SELECT function_returns('cdc', 'accept_gap', ARRAY['text', 'text'], 'bigint', 'cdc.accept_gap(name, reason) returns the request id');
SELECT function_privs_are('cdc', 'accept_gap', ARRAY['text', 'text'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.accept_gap');
SELECT function_privs_are('cdc', 'rename_source', ARRAY['text', 'text'], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.rename_source');
SELECT col_type_is('cdc', 'subscription_state', 'confirmed_lsn', 'pg_lsn',
                   'cdc.subscription_state.confirmed_lsn is the durable idle confirmation');
SELECT table_privs_are('cdc', 'subscription_errors', 'pg_read_all_stats', ARRAY['SELECT'],
                       'pg_read_all_stats may read cdc.subscription_errors (error texts, as last_error)');
SELECT table_privs_are('cdc', 'subscription_errors', 'public', ARRAY[]::text[], 'PUBLIC may not read cdc.subscription_errors');

-- A dropped target takes its mapping and state with it (event trigger, sql/drop_target.sql).
SELECT has_function('cdc', '_drop_target_state', ARRAY[]::text[], 'cdc._drop_target_state() exists');
SELECT function_returns('cdc', '_drop_target_state', ARRAY[]::text[], 'event_trigger', 'cdc._drop_target_state returns event_trigger');
SELECT is_definer('cdc', '_drop_target_state', ARRAY[]::text[], 'cdc._drop_target_state runs as the extension owner');
SELECT function_privs_are('cdc', '_drop_target_state', ARRAY[]::text[], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc._drop_target_state');
SELECT ok(EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = 'cdc_drop_target_state' AND evtevent = 'sql_drop'
                   AND evtfoid = 'cdc._drop_target_state()'::regprocedure AND evtenabled = 'A'),
          'event trigger cdc_drop_target_state calls cdc._drop_target_state on sql_drop');
SELECT isnt(obj_description((SELECT oid FROM pg_event_trigger WHERE evtname = 'cdc_drop_target_state'), 'pg_event_trigger'),
            NULL, 'event trigger cdc_drop_target_state has a comment');

-- Operations (issue 14): counters that survive rollbacks, rates, progress.
SELECT columns_are('cdc', 'shared_stats', ARRAY['available', 'note', 'call_entries', 'call_capacity', 'subscription_entries',
                     'subscription_capacity', 'lost'], 'cdc.shared_stats has exactly the documented columns');
SELECT columns_are('cdc', 'call_stats', ARRAY['function', 'calls', 'failed', 'since'], 'cdc.call_stats has exactly the documented columns');
SELECT columns_are('cdc', 'failed_calls', ARRAY['function', 'sqlstate', 'failures', 'since'],
                   'cdc.failed_calls has exactly the documented columns');
SELECT columns_are('cdc', 'worker_stats', ARRAY['subscription', 'errors', 'errors_by_sqlstate', 'retries', 'group_retries',
                     'applied_xacts', 'latency_sum_seconds', 'latency_avg_ms', 'latency_p50_ms', 'latency_p99_ms', 'since'],
                   'cdc.worker_stats has exactly the documented columns');
SELECT columns_are('cdc', 'apply_latency', ARRAY['subscription', 'le_ms', 'xacts'], 'cdc.apply_latency has exactly the documented columns');
SELECT columns_are('cdc', 'rates', ARRAY['kind', 'name', 'events', 'duplicate_rate', 'stale_rate', 'conflict_rate', 'expired',
                     'errors', 'error_rate', 'state', 'lag_bytes', 'lag_seconds', 'retries', 'latency_p50_ms', 'latency_p99_ms', 'since'],
                   'cdc.rates has exactly the documented columns');
SELECT columns_are('cdc', 'copy_progress', ARRAY['subscription', 'schema_name', 'table_name', 'state', 'rows_copied', 'rows_estimated',
                     'percent', 'rows_per_second', 'time_left', 'bytes_copied', 'started_at', 'finished_at', 'worker_pid'],
                   'cdc.copy_progress has exactly the documented columns');
SELECT columns_are('cdc', 'prune_progress', ARRAY['relation', 'table_blocks', 'pass_position', 'blocks_left', 'pass_percent',
                     'blocks_per_call', 'call_interval', 'calls_left', 'pass_time_left', 'full_pass_time', 'last_run_at',
                     'last_sweep_done_at', 'behind'],
                   'cdc.prune_progress has exactly the documented columns');
SELECT table_privs_are('cdc', v, 'public', ARRAY['SELECT'], 'PUBLIC may read cdc.' || v)
  FROM unnest(ARRAY['shared_stats', 'call_stats', 'failed_calls', 'worker_stats', 'apply_latency', 'rates', 'copy_progress',
                    'prune_progress']) v;
SELECT function_returns('cdc', 'reset_shared_stats', ARRAY[]::text[], 'timestamp with time zone',
                        'cdc.reset_shared_stats() returns the time of the reset');
SELECT function_privs_are('cdc', 'reset_shared_stats', ARRAY[]::text[], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc.reset_shared_stats (grant it, as pg_stat_statements_reset)');
SELECT function_privs_are('cdc', '_notify_launcher', ARRAY[]::text[], 'public', ARRAY[]::text[],
                          'PUBLIC may not execute cdc._notify_launcher');

SELECT * FROM finish();

--
-- null_arguments (helper h2): a NULL argument of the cdc.* SQL API where
-- NULL has no documented meaning.  Some were taken silently as the default
-- (cdc.audit's and cdc.resync's page_rows, leaf_rows and wait_timeout: the
-- call went on to 42704 for the unknown subscription; cdc_apply_batch's
-- with_outcomes; create_subscription's run_as_owner; drop_subscription's
-- drop_slot, which dropped the subscription; range_hash_sql's only_table),
-- others were refused with an unrelated SQLSTATE or message (cdc.prune's
-- max_pages: 22023 "must be at least 1"; register_mapping's
-- unavailable_placeholder: 22023 "must not be empty"; source_epoch: 22023
-- "an integer from 0 to 2147483647"; its other options, set_ordering's
-- ordering, create_subscription's origin, conninfo and publications,
-- rename_source's names, skip_transaction's and accept_gap's reason:
-- 22023; create_subscription's name: 42602 "invalid subscription name";
-- unregister_mapping and create_history_table named two arguments at
-- once).  Each is now refused with 22004 "<argument> must not be NULL",
-- before anything is done.  The arguments whose NULL means something (the
-- default, every table, unbounded, keep the value) are accepted as before;
-- a few are called here.
-- Objects: table na_t, subscriptions na_sub, na_bad.
--
\set SHOW_CONTEXT never
\set VERBOSITY default
CREATE TABLE na_t (id int PRIMARY KEY, v text);

-- cdc.prune
SELECT * FROM cdc.prune(max_pages => NULL);
\echo SQLSTATE :SQLSTATE
-- horizon NULL: cdc.replay_horizon()
SELECT count(*) AS tables FROM cdc.prune(10, horizon => NULL);

-- cdc.register_mapping: every option with a default other than NULL
SELECT target FROM cdc.register_mapping('na_t', outbox => NULL);
\echo SQLSTATE :SQLSTATE
SELECT target FROM cdc.register_mapping('na_t', truncate_policy => NULL);
\echo SQLSTATE :SQLSTATE
SELECT target FROM cdc.register_mapping('na_t', unavailable_placeholder => NULL);
\echo SQLSTATE :SQLSTATE
SELECT target FROM cdc.register_mapping('na_t', source_epoch => NULL);
\echo SQLSTATE :SQLSTATE
SELECT target FROM cdc.register_mapping('na_t', conflict_policy => NULL);
\echo SQLSTATE :SQLSTATE
SELECT target FROM cdc.register_mapping('na_t', mode => NULL);
\echo SQLSTATE :SQLSTATE
SELECT target FROM cdc.register_mapping('na_t', expired_policy => NULL);
\echo SQLSTATE :SQLSTATE
SELECT target FROM cdc.register_mapping('na_t', outbox_via => NULL);
\echo SQLSTATE :SQLSTATE
-- NULL before a bad table: the argument is named first
SELECT target FROM cdc.register_mapping('pg_class', mode => NULL);
\echo SQLSTATE :SQLSTATE
SELECT count(*) AS na_mappings FROM cdc.mapping WHERE target = 'na_t'::regclass;
-- the options whose NULL means the default (docs/sql-reference.md)
SELECT target, source_schema, source_table, key_columns, version_column, outbox_topic, temporal_unit, source_name, handler
  FROM cdc.register_mapping('na_t', source_schema => NULL, source_table => NULL, key_columns => NULL,
                            version_column => NULL, outbox_topic => NULL, temporal_unit => NULL,
                            source_name => NULL, handler => NULL);

-- cdc.set_ordering, cdc.unregister_mapping
SELECT cdc.set_ordering('na_t', NULL);
\echo SQLSTATE :SQLSTATE
SELECT cdc.unregister_mapping(NULL);
\echo SQLSTATE :SQLSTATE

-- cdc.create_history_table, cdc.rename_source
SELECT cdc.create_history_table(NULL, 'na_t');
\echo SQLSTATE :SQLSTATE
SELECT cdc.create_history_table('na_h', NULL);
\echo SQLSTATE :SQLSTATE
SELECT cdc.rename_source(NULL, 'na_new');
\echo SQLSTATE :SQLSTATE
SELECT cdc.rename_source('na_old', NULL);
\echo SQLSTATE :SQLSTATE
-- an empty new_name stays a bad value
SELECT cdc.rename_source('na_old', '');
\echo SQLSTATE :SQLSTATE

-- cdc_apply_batch: with_outcomes, in each form (events NULL is named first)
SELECT * FROM cdc_apply_batch('[]'::jsonb, with_outcomes => NULL);
\echo SQLSTATE :SQLSTATE
SELECT * FROM cdc_apply_batch(ARRAY[]::jsonb[], with_outcomes => NULL);
\echo SQLSTATE :SQLSTATE
SELECT * FROM cdc_apply_batch('[]'::text, with_outcomes => NULL);
\echo SQLSTATE :SQLSTATE
SELECT * FROM cdc_apply_batch(NULL::jsonb, with_outcomes => NULL);
\echo SQLSTATE :SQLSTATE
-- target, delivery_keys, source_partition and offsets NULL: resolved, derived, none
SELECT * FROM cdc_apply_batch('[]'::jsonb, target => NULL, delivery_keys => NULL, source_partition => NULL, offsets => NULL);

-- cdc.range_hash_sql: only_table (row_filter, after and up_to NULL: none, unbounded)
SELECT cdc.range_hash_sql('public', 'na_t', '{id,v}', '{id}', only_table => NULL) LIKE '%FROM ONLY public.na_t%' AS only_table;
\echo SQLSTATE :SQLSTATE
SELECT cdc.range_hash_sql('public', 'na_t', '{id,v}', '{id}', after => NULL, up_to => NULL, row_filter => NULL) LIKE '%FROM ONLY public.na_t%' AS only_table;

-- subscriptions
SELECT cdc.create_subscription(NULL, 'host=/nonexistent dbname=x', ARRAY['p'], enabled => false);
\echo SQLSTATE :SQLSTATE
SELECT cdc.create_subscription('na_bad', NULL, ARRAY['p'], enabled => false);
\echo SQLSTATE :SQLSTATE
SELECT cdc.create_subscription('na_bad', 'host=/nonexistent dbname=x', NULL, enabled => false);
\echo SQLSTATE :SQLSTATE
SELECT cdc.create_subscription('na_bad', 'host=/nonexistent dbname=x', ARRAY['p'], origin => NULL, enabled => false);
\echo SQLSTATE :SQLSTATE
SELECT cdc.create_subscription('na_bad', 'host=/nonexistent dbname=x', ARRAY['p'], run_as_owner => NULL, enabled => false) > 0 AS created;
\echo SQLSTATE :SQLSTATE
SELECT name FROM cdc.subscription WHERE name LIKE 'na\_%' ORDER BY name;
-- slot_name and owner NULL: the subscription's name, the calling superuser
SELECT cdc.create_subscription('na_sub', 'host=/nonexistent dbname=x', ARRAY['p'], slot_name => NULL, owner => NULL,
                               enabled => false) > 0 AS created;
SELECT slot_name, owner = current_user::regrole AS owner_is_me FROM cdc.subscription WHERE name = 'na_sub';
SELECT cdc.skip_transaction('na_sub', '0/10', NULL);
\echo SQLSTATE :SQLSTATE
SELECT cdc.accept_gap('na_sub', NULL);
\echo SQLSTATE :SQLSTATE
SELECT cdc.drop_subscription('na_sub', drop_slot => NULL);
\echo SQLSTATE :SQLSTATE
SELECT name FROM cdc.subscription WHERE name LIKE 'na\_%' ORDER BY name;
-- alter_subscription: NULL keeps a value
SELECT cdc.alter_subscription('na_sub', conninfo => NULL, publications => NULL, source_epoch => NULL, owner => NULL,
                              run_as_owner => NULL, origin => NULL);
SELECT publications, source_epoch, run_as_owner, origin FROM cdc.subscription WHERE name = 'na_sub';

-- cdc.audit and cdc.resync: the sizes and the timeout (checked before the subscription is looked up)
CALL cdc.audit('na_none', page_rows => NULL);
\echo SQLSTATE :SQLSTATE
CALL cdc.audit('na_none', leaf_rows => NULL);
\echo SQLSTATE :SQLSTATE
CALL cdc.audit('na_none', wait_timeout => NULL);
\echo SQLSTATE :SQLSTATE
CALL cdc.resync('na_none', 'na_t', page_rows => NULL);
\echo SQLSTATE :SQLSTATE
CALL cdc.resync('na_none', 'na_t', leaf_rows => NULL);
\echo SQLSTATE :SQLSTATE
CALL cdc.resync('na_none', 'na_t', wait_timeout => NULL);
\echo SQLSTATE :SQLSTATE
-- target, keys, bounds and audit NULL keep their meaning: the subscription is looked up
CALL cdc.audit('na_none', target => NULL);
\echo SQLSTATE :SQLSTATE
CALL cdc.resync('na_none', 'na_t', keys => NULL, from_key => NULL, to_key => NULL, audit => NULL);
\echo SQLSTATE :SQLSTATE

SELECT cdc.drop_subscription(name) FROM cdc.subscription WHERE name LIKE 'na\_%';
SELECT cdc.unregister_mapping('na_t');
DROP TABLE na_t;

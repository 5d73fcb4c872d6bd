--
-- subscriptions: the SQL API of the background worker (docs/worker.md):
-- create, alter, enable, disable, skip and drop a subscription, the status
-- view, and every error with its SQLSTATE.  The regression instance does not
-- preload cdc_apply, so no launcher or worker runs: this checks what the
-- functions write (the worker itself is tested by test/t/02*_worker_*.pl).
--
\set SHOW_CONTEXT never

-- create: the slot defaults to the subscription's name; a replication origin
-- cdc_<database oid>_<subid> is created with it; copy_data needs create_slot.
SELECT cdc.create_subscription('shop', 'host=/nonexistent dbname=shop', ARRAY['shop_pub'], enabled => false) > 0 AS created;
SELECT cdc.create_subscription('other', 'host=/nonexistent dbname=x', ARRAY['a', 'b'], slot_name => 'other_slot',
                               create_slot => false, copy_data => true, source_epoch => 2) > 0 AS created;
SELECT name, slot_name, publications, create_slot, copy_data, enabled, source_epoch, slot_ready, skip_lsn
  FROM cdc.subscription ORDER BY subid;
SELECT s.name, o.roname = 'cdc_' || (SELECT oid FROM pg_database WHERE datname = current_database()) || '_' || s.subid AS origin_named_after_subid
  FROM cdc.subscription s JOIN pg_replication_origin o ON o.roname = cdc._origin_name(s.subid) ORDER BY s.subid;
SELECT name, state, received_lsn, applied_lsn, flushed_lsn, lag_bytes, retry_count, last_error, worker_pid,
       applied_xacts, apply_commits
  FROM cdc.subscription_status ORDER BY name;

SELECT cdc.create_subscription('Shop', 'x', ARRAY['p']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('shop', 'x', ARRAY['p']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', 'x', ARRAY[]::text[]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', 'x', ARRAY['p', '']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', 'x', ARRAY['p', NULL]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', NULL, ARRAY['p']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a conninfo libpq cannot parse is refused (22P02, as CREATE SUBSCRIPTION
-- checks it; found by a fresh-user run: a bare word was taken as a
-- database name); one that sets no parameter (empty, blank, a bare URI),
-- which libpq would take for its defaults, is refused (22023; found by a
-- fresh-user run: the error text said conninfo was required, yet '' passed)
SELECT cdc.create_subscription('third', 'shop', ARRAY['p']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', '', ARRAY['p']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', '   ', ARRAY['p']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', 'postgresql://', ARRAY['p']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', 'host=/nonexistent dbname', ARRAY['p']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', 'host=/nonexistent nosuchoption=1', ARRAY['p']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', 'postgresql://[::1', ARRAY['p']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS subscriptions FROM cdc.subscription;

-- alter: NULL keeps a value; the epoch only grows.
SELECT cdc.alter_subscription('shop', conninfo => 'host=/elsewhere dbname=shop');
SELECT cdc.alter_subscription('shop', publications => ARRAY['shop_pub', 'more_pub']);
SELECT cdc.alter_subscription('shop', source_epoch => 3);
SELECT name, conninfo, publications, source_epoch, origin, refresh_pending FROM cdc.subscription WHERE name = 'shop';
SELECT cdc.alter_subscription('shop', source_epoch => 2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.alter_subscription('shop', publications => ARRAY[]::text[]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.alter_subscription('shop', publications => ARRAY['']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.alter_subscription('nosuch', conninfo => 'x');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.alter_subscription('shop', conninfo => 'shop');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.alter_subscription('shop', conninfo => '');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT name, conninfo, publications, source_epoch FROM cdc.subscription WHERE name = 'shop';

-- origin: 'any' by default, 'none' drops source transactions that carry a
-- replication origin; nothing else is accepted.
SELECT name, origin FROM cdc.subscription ORDER BY subid;
SELECT cdc.alter_subscription('shop', origin => 'none');
SELECT cdc.alter_subscription('shop', origin => 'local');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', 'x', ARRAY['p'], origin => 'all');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('third', 'x', ARRAY['p'], origin => NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT name, origin FROM cdc.subscription ORDER BY subid;
-- the same publications again do not ask for a refresh
UPDATE cdc.subscription SET refresh_pending = false WHERE name = 'shop';
SELECT cdc.alter_subscription('shop', publications => ARRAY['shop_pub', 'more_pub']);
SELECT name, refresh_pending FROM cdc.subscription WHERE name = 'shop';

-- The subscription's tables (cdc.subscription_rel, shown by
-- cdc.subscription_tables): cdc._reconcile_tables makes them a published
-- table list, as cdc.refresh_subscription does with the list it reads from
-- the source; copy_data decides whether an added table is copied (init) or
-- only streamed (ready).
SELECT * FROM cdc._reconcile_tables((SELECT subid FROM cdc.subscription WHERE name = 'shop'),
                                    ARRAY['public', 'public', 'public'], ARRAY['sub_a', 'sub_b', 'sub_a'], true);
SELECT subscription, schema_name, table_name, state, sync_lsn FROM cdc.subscription_tables ORDER BY 1, 2, 3;
SELECT * FROM cdc._reconcile_tables((SELECT subid FROM cdc.subscription WHERE name = 'shop'),
                                    ARRAY['public', 'shop'], ARRAY['sub_b', 'sub_c'], false);
SELECT subscription, schema_name, table_name, state, sync_lsn FROM cdc.subscription_tables ORDER BY 1, 2, 3;
SELECT * FROM cdc._reconcile_tables((SELECT subid FROM cdc.subscription WHERE name = 'shop'),
                                    ARRAY['public', 'shop'], ARRAY['sub_b', 'sub_c'], true);
-- A dropped destination table leaves the subscription: fed by the source
-- table of its name, or per its mapping.
CREATE TABLE sub_b (id int PRIMARY KEY);
CREATE TABLE sub_mapped (id int PRIMARY KEY);
SELECT target FROM cdc.register_mapping('sub_mapped', source_schema => 'shop', source_table => 'sub_c', source_name => 'shop');
CREATE TABLE sub_other (id int PRIMARY KEY);
DROP TABLE sub_other;
SELECT subscription, schema_name, table_name, state FROM cdc.subscription_tables ORDER BY 1, 2, 3;
DROP TABLE sub_b;
SELECT subscription, schema_name, table_name, state FROM cdc.subscription_tables ORDER BY 1, 2, 3;
DROP TABLE sub_mapped;
SELECT subscription, schema_name, table_name, state FROM cdc.subscription_tables ORDER BY 1, 2, 3;
-- refresh and resync: errors before the source is asked; an unreachable
-- source is 08001
SELECT * FROM cdc.refresh_subscription('nosuch');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.refresh_subscription('shop', copy_data => NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.resync_table('nosuch', 'pg_class');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.resync_table('shop', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a target that is not a table is refused by name (42809), before the
-- source is asked; a NULL subscription name is 22004 in every function
-- that takes one (it read 'subscription "<NULL>" does not exist', 42704)
CREATE VIEW sub_view AS SELECT 1 AS id;
SELECT cdc.resync_table('shop', 'sub_view');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
DROP VIEW sub_view;
SELECT cdc.resync_table(NULL, 'pg_class');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.refresh_subscription(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.enable_subscription(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.disable_subscription(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.alter_subscription(NULL, conninfo => 'host=elsewhere');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.skip_transaction(NULL, '0/1', 'x');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.accept_gap(NULL, 'x');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.drop_subscription(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
DO $$
BEGIN
  PERFORM cdc.refresh_subscription('shop');
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'refresh with an unreachable source: SQLSTATE %', SQLSTATE;
END $$;
SELECT count(*) AS rows_after_failed_refresh FROM cdc.subscription_tables;

-- enable / disable: the status view shows disabled for a disabled subscription.
SELECT cdc.enable_subscription('shop');
SELECT name, state FROM cdc.subscription_status ORDER BY name;
SELECT cdc.disable_subscription('shop');
SELECT name, state FROM cdc.subscription_status ORDER BY name;
SELECT cdc.enable_subscription('nosuch');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.disable_subscription('nosuch');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- skip: recorded as requested; performed (skipped_at) only by the worker.
SELECT cdc.skip_transaction('shop', '0/1A2B3C4', 'violates a local check');
SELECT name, commit_lsn, reason, requested_by = current_user AS by_me, xid, skipped_at FROM cdc.skipped_transactions;
SELECT skip_lsn FROM cdc.subscription WHERE name = 'shop';
SELECT cdc.skip_transaction('shop', '0/1A2B3C4', ' ');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.skip_transaction('nosuch', '0/1', 'x');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- drop: the row, its state, its tables, its replication origin and its
-- open skip request (never performed) go; performed skips would stay
-- (skip_after_drop).
SELECT count(*) AS tables_before_drop
  FROM cdc._reconcile_tables((SELECT subid FROM cdc.subscription WHERE name = 'shop'), ARRAY['public'], ARRAY['kept'], true);
SELECT cdc.drop_subscription('shop');
SELECT cdc.drop_subscription('other');
SELECT count(*) AS subscriptions, (SELECT count(*) FROM cdc.subscription_state) AS states,
       (SELECT count(*) FROM pg_replication_origin WHERE roname LIKE 'cdc\_%') AS origins,
       (SELECT count(*) FROM cdc.skipped_transactions) AS skip_records,
       (SELECT count(*) FROM cdc.subscription_rel) AS tables
  FROM cdc.subscription;
SELECT cdc.drop_subscription('shop');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
DELETE FROM cdc.skipped_transactions;

-- A replication origin left behind by a dropped extension (origins are
-- cluster-wide) under the next subscription's name is replaced, not a 23505.
SELECT pg_replication_origin_create(cdc._origin_name((SELECT last_value + 1 FROM cdc.subscription_subid_seq)::int)) > 0 AS leftover_origin;
SELECT cdc.create_subscription('again', 'host=/nonexistent dbname=x', ARRAY['p'], enabled => false) > 0 AS created;
SELECT count(*) AS origins FROM pg_replication_origin o JOIN cdc.subscription s ON o.roname = cdc._origin_name(s.subid);
SELECT cdc.drop_subscription('again');

-- drop_slot's connection takes every form of conninfo create_subscription
-- accepts: key=value and a URI (it appended its own options to the text,
-- which a URI cannot take: the rest became part of the database name).
-- Here the source is this server, which has no such slot.
SELECT replace(current_setting('unix_socket_directories'), '/', '%2F') AS sock, current_setting('port') AS port \gset
SET client_min_messages = error;  -- the "launcher serves another database" warning
SELECT cdc.create_subscription('selfkv', format('host=%s port=%s dbname=%s', current_setting('unix_socket_directories'),
                               :'port', current_database()), ARRAY['p'], slot_name => 'no_such_slot', enabled => false) > 0 AS created;
SELECT cdc.create_subscription('selfuri', format('postgresql://%s:%s/%s', :'sock', :'port', current_database()), ARRAY['p'],
                               slot_name => 'no_such_slot', enabled => false) > 0 AS created;
RESET client_min_messages;
SELECT cdc.drop_subscription('selfkv', drop_slot => true);
SELECT cdc.drop_subscription('selfuri', drop_slot => true);
\set SHOW_CONTEXT errors

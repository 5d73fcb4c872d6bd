--
-- subscriptions: the SQL API of the background worker (docs/worker.md):
-- create, alter, enable, disable, skip and drop a subscription, the status
-- view, and every error with its SQLSTATE.  The regression instance does not
-- preload cdc_apply, so no launcher or worker runs: this checks what the
-- functions write (the worker itself is tested by test/t/02*_worker_*.pl).
--
\set SHOW_CONTEXT never

-- create: the slot defaults to the subscription's name; a replication origin
-- cdc_<subid> is created with it; copy_data needs create_slot.
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
SELECT cdc.create_subscription('third', NULL, ARRAY['p']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS subscriptions FROM cdc.subscription;

-- alter: NULL keeps a value; the epoch only grows.
SELECT cdc.alter_subscription('shop', conninfo => 'host=/elsewhere dbname=shop');
SELECT cdc.alter_subscription('shop', publications => ARRAY['shop_pub', 'more_pub']);
SELECT cdc.alter_subscription('shop', source_epoch => 3);
SELECT name, conninfo, publications, source_epoch FROM cdc.subscription WHERE name = 'shop';
SELECT cdc.alter_subscription('shop', source_epoch => 2);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.alter_subscription('shop', publications => ARRAY[]::text[]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.alter_subscription('nosuch', conninfo => 'x');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT name, conninfo, publications, source_epoch FROM cdc.subscription WHERE name = 'shop';

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

-- drop: the row, its state and its replication origin go; the skip record stays.
SELECT cdc.drop_subscription('shop');
SELECT cdc.drop_subscription('other');
SELECT count(*) AS subscriptions, (SELECT count(*) FROM cdc.subscription_state) AS states,
       (SELECT count(*) FROM pg_replication_origin WHERE roname LIKE 'cdc\_%') AS origins,
       (SELECT count(*) FROM cdc.skipped_transactions) AS skip_records
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
\set SHOW_CONTEXT errors

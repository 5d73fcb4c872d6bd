--
-- subscription_control: the SQL side of issue 12 items 5-7 (docs/worker.md,
-- "Continuity", "Control state is durable", "Dropping"): cdc.accept_gap and
-- its errors, drop_subscription(drop_slot => true) inside a transaction
-- block, its slot dropped only at COMMIT (nothing after ROLLBACK, PREPARE
-- refused 0A000, 08001 at COMMIT with the subscription kept), the status
-- view's lag rules; create_subscription
-- (copy_data => false) in a transaction block, its slot made only at
-- COMMIT (none after ROLLBACK, PREPARE refused 0A000, 08001 at COMMIT).  No worker runs here
-- (cdc_apply is not preloaded).
--
\set SHOW_CONTEXT never
SET client_min_messages = error;  -- the "launcher serves another database" warning
SELECT cdc.create_subscription('ctl', 'host=/nonexistent dbname=x', ARRAY['p'], enabled => false) > 0 AS created;
RESET client_min_messages;

-- accept_gap: needs a reason, a subscription, and a finished initial copy
SELECT cdc.accept_gap('ctl', '');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.accept_gap('nope', 'why');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.accept_gap('ctl', 'why');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE cdc.subscription SET slot_ready = true WHERE name = 'ctl';
SELECT cdc.accept_gap('ctl', 'slot dropped by mistake') > 0 AS requested;
-- a second call while the first is open replaces its reason: one open request
SELECT cdc.accept_gap('ctl', 'slot dropped by mistake; table re-copied') > 0 AS requested;
SELECT name, reason, requested_by = current_user AS by_me, from_lsn, to_lsn, accepted_at FROM cdc.accepted_gaps;

-- drop_subscription(drop_slot => true) drops the slot when the transaction
-- commits (src/pg/worker/slot_at_commit.cpp): inside a transaction block a
-- ROLLBACK drops nothing (and never connects)
BEGIN;
SELECT cdc.drop_subscription('ctl', drop_slot => true);
ROLLBACK;
SELECT count(*) AS still_there FROM cdc.subscription WHERE name = 'ctl';
-- PREPARE TRANSACTION with a pending slot drop is refused
BEGIN;
SELECT cdc.drop_subscription('ctl', drop_slot => true);
PREPARE TRANSACTION 'ctl';
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS still_there FROM cdc.subscription WHERE name = 'ctl';
SELECT count(*) AS none FROM pg_prepared_xacts WHERE gid = 'ctl';
-- a slot drop that fails at COMMIT (the source cannot be reached) aborts it:
-- the subscription stays, its origin too
\set VERBOSITY sqlstate
BEGIN;
SELECT cdc.drop_subscription('ctl', drop_slot => true);
COMMIT;
\set VERBOSITY default
SELECT count(*) AS still_there FROM cdc.subscription WHERE name = 'ctl';
SELECT count(*) AS origin_kept FROM pg_replication_origin o JOIN cdc.subscription s ON o.roname = cdc._origin_name(s.subid)
 WHERE s.name = 'ctl';
-- without drop_slot it can (and rolls back with the block)
BEGIN;
SELECT cdc.drop_subscription('ctl');
ROLLBACK;
SELECT count(*) AS still_there FROM cdc.subscription WHERE name = 'ctl';

-- lag: the source's end beyond what is applied or confirmed; zero when caught up
SELECT pg_replication_origin_advance(cdc._origin_name(subid), '0/2000') FROM cdc.subscription WHERE name = 'ctl';
UPDATE cdc.subscription_state SET source_end_lsn = '0/3000', flushed_lsn = '0/1000',
       last_msg_at = '2026-01-01 00:00:10+00', last_commit_at = '2026-01-01 00:00:00+00'
 WHERE subid = (SELECT subid FROM cdc.subscription WHERE name = 'ctl');
UPDATE cdc.subscription SET enabled = true WHERE name = 'ctl';
SELECT lag_bytes, lag_seconds FROM cdc.subscription_status WHERE name = 'ctl';
UPDATE cdc.subscription_state SET flushed_lsn = '0/3000'
 WHERE subid = (SELECT subid FROM cdc.subscription WHERE name = 'ctl');
SELECT lag_bytes, lag_seconds FROM cdc.subscription_status WHERE name = 'ctl';
-- the state waiting is allowed
UPDATE cdc.subscription_state SET state = 'waiting', last_error = 'no free worker slot (cdc.max_workers = 1)'
 WHERE subid = (SELECT subid FROM cdc.subscription WHERE name = 'ctl');
SELECT state, last_error FROM cdc.subscription_status WHERE name = 'ctl';

-- the slot is not there (the source is unreachable here, so only without drop_slot)
SELECT cdc.drop_subscription('ctl');
SELECT count(*) AS gone FROM cdc.subscription WHERE name = 'ctl';

-- copy_data => false: the slot is made when the creating transaction
-- commits (src/pg/worker/slot_at_commit.cpp), so the call works inside a
-- transaction block and a ROLLBACK makes nothing (and never connects)
SET client_min_messages = error;
BEGIN;
SELECT cdc.create_subscription('pend', 'host=/nonexistent dbname=x', ARRAY['p'], copy_data => false) > 0 AS created;
ROLLBACK;
SELECT count(*) AS none FROM cdc.subscription WHERE name = 'pend';
-- PREPARE TRANSACTION with a pending creation is refused
BEGIN;
SELECT cdc.create_subscription('pend', 'host=/nonexistent dbname=x', ARRAY['p'], copy_data => false) > 0 AS created;
PREPARE TRANSACTION 'pend';
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS none FROM cdc.subscription WHERE name = 'pend';
SELECT count(*) AS none FROM pg_prepared_xacts WHERE gid = 'pend';
-- a creation that fails at COMMIT aborts it: no subscription stays
\set VERBOSITY sqlstate
BEGIN;
SELECT cdc.create_subscription('pend', 'host=/nonexistent dbname=x', ARRAY['p'], copy_data => false) > 0 AS created;
COMMIT;
\set VERBOSITY default
SELECT count(*) AS none FROM cdc.subscription WHERE name = 'pend';
RESET client_min_messages;

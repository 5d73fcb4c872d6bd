--
-- skip_transaction_args (fresh-user review, h3; failed on integ 51e935b):
-- cdc.skip_transaction() took any LSN.
--   - NULL failed inside the function with 23502 naming the internal table
--     cdc.skipped_transactions (its CONTEXT quoting the INSERT) instead of
--     naming the argument;
--   - an LSN at or before the subscription's progress (the replication
--     origin's LSN: that transaction is applied or skipped already) can
--     never match a transaction the worker still receives, yet was recorded
--     as a pending skip that stays pending for ever (PostgreSQL's ALTER
--     SUBSCRIPTION ... SKIP refuses it: "skip WAL location ... must be
--     greater than origin LSN");
--   - a second request replaced the first (one skip_lsn per subscription),
--     but the first stayed in cdc.skipped_transactions as pending, so the
--     record showed two open requests of which only one can ever be done.
-- Expected: 22004 for NULL, 22023 for an LSN before the progress, and one
-- open request per subscription (a second call replaces the first, as
-- cdc.accept_gap does).  The regression instance runs no worker: the
-- origin's progress is set by hand.
--
\set SHOW_CONTEXT never
SELECT cdc.create_subscription('h3skip', 'host=/nonexistent dbname=x', ARRAY['p'], enabled => false) > 0 AS created;
SELECT pg_replication_origin_advance(cdc._origin_name(subid), '0/5000') FROM cdc.subscription WHERE name = 'h3skip';

-- NULL: 22004 naming the argument, nothing recorded
SELECT cdc.skip_transaction('h3skip', NULL, 'no lsn');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- before the progress: 22023, nothing recorded (at the progress is the
-- next transaction's commit when it directly follows: TAP 096_skip_at_progress)
SELECT cdc.skip_transaction('h3skip', '0/4FF8', 'before the progress');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.skip_transaction('h3skip', '0/1', 'typo');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS records, (SELECT skip_lsn FROM cdc.subscription WHERE name = 'h3skip') AS skip_lsn
  FROM cdc.skipped_transactions;

-- after the progress: recorded; a second request replaces the first
SELECT cdc.skip_transaction('h3skip', '0/6000', 'first guess');
SELECT cdc.skip_transaction('h3skip', '0/7000', 'the failing one');
SELECT name, commit_lsn, reason, skipped_at FROM cdc.skipped_transactions ORDER BY id;
SELECT skip_lsn FROM cdc.subscription WHERE name = 'h3skip';

SELECT cdc.drop_subscription('h3skip');
DELETE FROM cdc.skipped_transactions;

--
-- skip_after_drop (fresh-user review h4): after cdc.drop_subscription, the
-- subscription's open skip request stayed in cdc.skipped_transactions with
-- skipped_at NULL for ever: a request no worker can ever carry out, shown
-- as pending (docs/worker.md, "Failure handling"), and not removed by
-- anything.  Expected: dropping a subscription removes its open (never
-- performed) request with it, in the same transaction (a rolled-back drop
-- keeps it), and keeps the skips the worker performed as the record of
-- what was skipped.  The regression instance runs no worker: the origin's
-- progress is set by hand, and a performed skip is written as the worker
-- writes it (skipped_at and xid, src/pg/worker/transactions.cpp).
--
\set SHOW_CONTEXT never
SELECT cdc.create_subscription('sad', 'host=/nonexistent dbname=x', ARRAY['p'], enabled => false) > 0 AS created;
SELECT pg_replication_origin_advance(cdc._origin_name(subid), '0/5000') FROM cdc.subscription WHERE name = 'sad';
-- a skip the worker performed, then an open request
SELECT cdc.skip_transaction('sad', '0/6000', 'performed');
UPDATE cdc.skipped_transactions SET skipped_at = now(), xid = 4711 WHERE name = 'sad';
SELECT cdc.skip_transaction('sad', '0/7000', 'still open');
SELECT name, commit_lsn, reason, xid, skipped_at IS NOT NULL AS skipped FROM cdc.skipped_transactions WHERE name = 'sad' ORDER BY id;

-- a drop rolled back keeps the open request
BEGIN;
SELECT cdc.drop_subscription('sad');
ROLLBACK;
SELECT name, commit_lsn, reason, skipped_at IS NOT NULL AS skipped FROM cdc.skipped_transactions WHERE name = 'sad' ORDER BY id;

-- the drop: the open request goes with the subscription, the performed skip stays
SELECT cdc.drop_subscription('sad');
SELECT name, commit_lsn, reason, xid, skipped_at IS NOT NULL AS skipped FROM cdc.skipped_transactions WHERE name = 'sad' ORDER BY id;
SELECT count(*) AS open_requests FROM cdc.skipped_transactions WHERE skipped_at IS NULL;

-- a new subscription of the same name starts without a request
SELECT cdc.create_subscription('sad', 'host=/nonexistent dbname=x', ARRAY['p'], enabled => false) > 0 AS created;
SELECT skip_lsn FROM cdc.subscription WHERE name = 'sad';
SELECT count(*) AS open_requests FROM cdc.skipped_transactions WHERE skipped_at IS NULL;
SELECT cdc.drop_subscription('sad');
DELETE FROM cdc.skipped_transactions WHERE name = 'sad';

--
-- history: mode 'history' (SPEC §4.5).  A history table gets one row per
-- source change, unique on (cdc_key, cdc_version): a replay, a duplicate
-- delivery or a re-published record inserts nothing; two changes sharing one
-- LSN (a multi-row statement, COPY) are two rows; snapshot rows are flagged.
-- Tables of this suite are called hist_*.
--
CREATE TABLE hist_orders (id int PRIMARY KEY, customer_id int, amount numeric(12,2), status text, note text);

-- The helper creates the history table from the source table's shape.
SELECT cdc.create_history_table('hist_orders_log', 'hist_orders');
SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull
  FROM pg_attribute a WHERE a.attrelid = 'hist_orders_log'::regclass AND a.attnum > 0 ORDER BY a.attnum;
SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'hist_orders_log'::regclass ORDER BY 1;

SELECT target, source_table, key_columns, mode, outbox
  FROM cdc.register_mapping('hist_orders_log', source_table => 'orders', key_columns => '{id}',
                            mode => 'history', outbox => true);

-- Events of source table public.orders; ts_ms is the source commit time.
CREATE FUNCTION hist_ev(op text, after jsonb, lsn text, tx bigint, before jsonb DEFAULT NULL,
                        total_order int DEFAULT NULL, ts_ms bigint DEFAULT 1700000000000) RETURNS jsonb
LANGUAGE sql AS $$
  SELECT jsonb_set(dbz(op, 'orders', after, lsn, tx, before => before, total_order => total_order),
                   '{source,ts_ms}', to_jsonb(ts_ms))
$$;
CREATE FUNCTION hist_rows() RETURNS TABLE (id int, amount numeric, status text, note text, cdc_key jsonb,
                                           cdc_version bigint[], cdc_op text, cdc_snapshot boolean, cdc_source_ts timestamptz)
LANGUAGE sql AS $$
  SELECT id, amount, status, note, cdc_key, cdc_version, cdc_op, cdc_snapshot, cdc_source_ts
    FROM hist_orders_log ORDER BY cdc_key::text, cdc_version
$$;
SET timezone = 'UTC';

-- ===========================================================================
-- 1. A life cycle: insert, two updates, delete, re-creation.  One row each.
-- ===========================================================================
CREATE TABLE hist_seed (n int PRIMARY KEY, ev jsonb NOT NULL);
INSERT INTO hist_seed VALUES
  (1, hist_ev('c', '{"id": 1, "customer_id": 7, "amount": 10.00, "status": "new", "note": "n1"}', '0/1000', 100, ts_ms => 1700000001000)),
  (2, hist_ev('u', '{"id": 1, "customer_id": 7, "amount": 12.50, "status": "paid", "note": "n1"}', '0/1100', 101, ts_ms => 1700000002000)),
  (3, hist_ev('u', '{"id": 1, "customer_id": 7, "amount": 12.50, "status": "shipped", "note": "n1"}', '0/1200', 102, ts_ms => 1700000003000)),
  (4, hist_ev('d', NULL, '0/1300', 103, before => '{"id": 1}', ts_ms => 1700000004000)),
  (5, hist_ev('c', '{"id": 1, "customer_id": 8, "amount": 3.00, "status": "new", "note": "n2"}', '0/1400', 104, ts_ms => 1700000005000));
SELECT n, cdc_apply(ev) FROM hist_seed ORDER BY n;
SELECT * FROM hist_rows();
-- No entity record is kept for a history target: its unique index is the guard.
SELECT count(*) AS entity_records FROM cdc.entities WHERE target = 'hist_orders_log'::regclass;
SELECT op, entity_key, payload->>'cdc_op' AS payload_op FROM cdc.outbox WHERE target = 'hist_orders_log'::regclass ORDER BY id;

-- ===========================================================================
-- 2. Double delivery: the same records again (ledger), and the same changes
--    re-published under new delivery keys (rebuilt topic: the history's
--    unique (cdc_key, cdc_version) catches them).  Nothing is added.
-- ===========================================================================
SELECT n, cdc_apply(ev) FROM hist_seed ORDER BY n;
SELECT n, cdc_apply(ev, NULL, 'orders-rebuilt:1:0:' || n) FROM hist_seed ORDER BY n;
SELECT count(*) AS history_rows, (SELECT count(*) FROM cdc.outbox WHERE target = 'hist_orders_log'::regclass) AS outbox_rows
  FROM hist_orders_log;
SELECT applied, duplicate, stale, conflict, outbox_rows FROM cdc.stats WHERE target = 'hist_orders_log'::regclass;

-- ===========================================================================
-- 3. Reordering: an older change arriving after a newer one is still a fact
--    that was not recorded yet.  It is appended (applied); ordering the
--    history by cdc_version gives the source order.
-- ===========================================================================
SELECT cdc_apply(hist_ev('u', '{"id": 2, "customer_id": 7, "amount": 5.00, "status": "paid"}', '0/2100', 201));
SELECT cdc_apply(hist_ev('c', '{"id": 2, "customer_id": 7, "amount": 5.00, "status": "new"}', '0/2000', 200));
SELECT cdc_apply(hist_ev('c', '{"id": 2, "customer_id": 7, "amount": 5.00, "status": "new"}', '0/2000', 200));
SELECT id, status, cdc_op, cdc_version FROM hist_orders_log WHERE id = 2 ORDER BY cdc_version;

-- ===========================================================================
-- 4. Two changes sharing one LSN: a multi-row INSERT or COPY is one WAL
--    record, so its rows have the same source.lsn (and, without transaction
--    metadata, the same version).  Different keys: two rows.
-- ===========================================================================
SELECT cdc_apply(hist_ev('c', '{"id": 10, "amount": 1.00, "status": "new"}', '0/3000', 300));
SELECT cdc_apply(hist_ev('c', '{"id": 11, "amount": 2.00, "status": "new"}', '0/3000', 300));
-- and with Kafka coordinates as delivery keys, delivered twice
SELECT cdc_apply(hist_ev('c', '{"id": 12, "amount": 3.00, "status": "new"}', '0/3100', 301), NULL, 'orders:0:0:40');
SELECT cdc_apply(hist_ev('c', '{"id": 13, "amount": 4.00, "status": "new"}', '0/3100', 301), NULL, 'orders:0:0:41');
SELECT cdc_apply(hist_ev('c', '{"id": 12, "amount": 3.00, "status": "new"}', '0/3100', 301), NULL, 'orders:0:0:40');
SELECT cdc_apply(hist_ev('c', '{"id": 13, "amount": 4.00, "status": "new"}', '0/3100', 301), NULL, 'orders:0:0:41');
SELECT id, amount, cdc_key, cdc_version FROM hist_orders_log WHERE id >= 10 ORDER BY id;

-- ===========================================================================
-- 5. Snapshots: snapshot rows are recorded as op r with cdc_snapshot = true
--    and no outbox row.  Replaying the same snapshot adds nothing; a
--    re-snapshot at a later point records what it saw at that point.
-- ===========================================================================
CREATE FUNCTION hist_snap(id int, status text, lsn text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT dbz('r', 'orders', jsonb_build_object('id', id, 'amount', 9.99, 'status', status), lsn)
$$;
SELECT cdc_apply(hist_snap(20, 'new', '0/4000')), cdc_apply(hist_snap(21, 'new', '0/4000'));
SELECT cdc_apply(hist_snap(20, 'new', '0/4000'), NULL, 'snapshot-again:20'),
       cdc_apply(hist_snap(21, 'new', '0/4000'), NULL, 'snapshot-again:21');
SELECT cdc_apply(hist_ev('u', '{"id": 20, "amount": 9.99, "status": "paid"}', '0/4100', 400));
SELECT cdc_apply(hist_snap(20, 'paid', '0/5000')), cdc_apply(hist_snap(21, 'new', '0/5000'));
SELECT id, status, cdc_op, cdc_snapshot, cdc_version FROM hist_orders_log WHERE id >= 20 ORDER BY id, cdc_version;
SELECT count(*) FILTER (WHERE cdc_snapshot) AS snapshot_rows,
       (SELECT count(*) FROM cdc.outbox o WHERE o.target = 'hist_orders_log'::regclass AND o.entity_key->>'id' IN ('20', '21')) AS outbox_rows
  FROM hist_orders_log WHERE id >= 20;

-- ===========================================================================
-- 6. Unchanged (TOAST) columns take the value of the key's previous change;
--    without one there is nothing to take it from: conflict, nothing written.
-- ===========================================================================
SELECT cdc_apply(hist_ev('u', '{"id": 1, "customer_id": 8, "amount": 4.00, "status": "paid", "note": "__debezium_unavailable_value"}', '0/6000', 600));
SELECT id, amount, note, cdc_op FROM hist_orders_log WHERE id = 1 ORDER BY cdc_version DESC LIMIT 1;
SELECT cdc_apply(hist_ev('u', '{"id": 30, "amount": 4.00, "status": "paid", "note": "__debezium_unavailable_value"}', '0/6100', 601));
SELECT count(*) AS rows_of_30 FROM hist_orders_log WHERE id = 30;
SELECT entity_key, reason FROM cdc.conflicts WHERE target = 'hist_orders_log'::regclass;

-- ===========================================================================
-- 7. A truncate is recorded as one op t row with key {} (data columns NULL).
-- ===========================================================================
SELECT cdc_apply(dbz('t', 'orders', NULL, '0/7000', 700));
SELECT cdc_apply(dbz('t', 'orders', NULL, '0/7000', 700), NULL, 'orders-rebuilt:t');
SELECT id, cdc_key, cdc_op, cdc_version FROM hist_orders_log WHERE cdc_op = 't';
SELECT count(*) AS history_rows_after_truncate FROM hist_orders_log;

-- ===========================================================================
-- 8. Bad mappings and bad events (each followed by the SQLSTATE psql got).
-- ===========================================================================
\set SHOW_CONTEXT never
CREATE TABLE hist_bad (id int, v text, cdc_key jsonb, cdc_version bigint[], cdc_op text);
SELECT cdc.register_mapping('hist_bad', mode => 'history');                          -- 42P10 no key_columns
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.register_mapping('hist_bad', key_columns => '{id}', mode => 'history');   -- 42P10 no unique index
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CREATE UNIQUE INDEX ON hist_bad (cdc_key, cdc_version);
ALTER TABLE hist_bad ALTER COLUMN cdc_op TYPE varchar;
SELECT cdc.register_mapping('hist_bad', key_columns => '{id}', mode => 'history');   -- 42804 cdc_op type
\echo SQLSTATE :LAST_ERROR_SQLSTATE
ALTER TABLE hist_bad DROP COLUMN cdc_op;
SELECT cdc.register_mapping('hist_bad', key_columns => '{id}', mode => 'history');   -- 42P10 no cdc_op
\echo SQLSTATE :LAST_ERROR_SQLSTATE
ALTER TABLE hist_bad ADD COLUMN cdc_op text;
SELECT target, mode FROM cdc.register_mapping('hist_bad', key_columns => '{id}', mode => 'history');
SELECT cdc.register_mapping('hist_bad', key_columns => '{id}', mode => 'archive');   -- 22023
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- an event field may not write a metadata column
SELECT cdc_apply(dbz('c', 'hist_bad', '{"id": 1, "v": "x", "cdc_op": "d"}', '0/8000', 800), 'hist_bad');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS hist_bad_rows FROM hist_bad;
SELECT cdc.create_history_table('a.b.c', 'hist_orders');                            -- 42602
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_history_table('hist_orders_log', 'hist_orders');                  -- 42P07
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors

-- ===========================================================================
-- 9. The replay check is the history table's unique index, which covers the
--    table alone, not its inheritance children (an archive, say).  The reads
--    for unchanged values and for "already recorded" stay on the table's own
--    rows too, so a change gets the same outcome with unchanged values as
--    without: once a key's rows are archived, its replays are appended again.
-- ===========================================================================
SELECT cdc_apply(hist_ev('c', '{"id": 40, "amount": 1.00, "status": "new", "note": "n40"}', '0/9000', 900));
SELECT cdc_apply(hist_ev('u', '{"id": 40, "amount": 2.00, "status": "paid", "note": "__debezium_unavailable_value"}', '0/9100', 901));
CREATE TABLE hist_orders_archive () INHERITS (hist_orders_log);
WITH moved AS (DELETE FROM ONLY hist_orders_log WHERE id = 40 RETURNING *)
INSERT INTO hist_orders_archive SELECT * FROM moved;
-- the update again (a rebuilt topic): the table has no earlier row of key 40
SELECT cdc_apply(hist_ev('u', '{"id": 40, "amount": 2.00, "status": "paid", "note": "__debezium_unavailable_value"}', '0/9100', 901),
                 NULL, 'orders-rebuilt:40:1');
-- the insert again: appended, as any change the table does not hold
SELECT cdc_apply(hist_ev('c', '{"id": 40, "amount": 1.00, "status": "new", "note": "n40"}', '0/9000', 900),
                 NULL, 'orders-rebuilt:40:0');
-- now the update takes its note from the table's own row of the insert
SELECT cdc_apply(hist_ev('u', '{"id": 40, "amount": 2.00, "status": "paid", "note": "__debezium_unavailable_value"}', '0/9100', 901),
                 NULL, 'orders-rebuilt:40:2');
SELECT tableoid::regclass AS in_table, id, amount, note, cdc_op, cdc_version
  FROM hist_orders_log WHERE id = 40 ORDER BY tableoid::regclass::text, cdc_version;
SELECT entity_key, reason FROM cdc.conflicts WHERE target = 'hist_orders_log'::regclass AND entity_key->>'id' = '40';

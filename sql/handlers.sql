--
-- handlers: mode 'handler' (SPEC §4.5).  The target mirrors the source row
-- as in state mode, and a user function is called in the same transaction
-- with (op, old, new, meta) only when a change is applied — never for a
-- duplicate or a stale event — so deltas computed as new - old are
-- replay-safe.  The examples are those of docs/handlers.md: a running total
-- per customer and a counter of shipped orders that ignores snapshot rows.
-- Tables of this suite are called hd_*.
--
CREATE TABLE hd_orders (id int PRIMARY KEY, customer_id int NOT NULL, amount numeric(12,2) NOT NULL,
                        status text NOT NULL, note text);
CREATE TABLE hd_customer_totals (customer_id int PRIMARY KEY, total numeric(14,2) NOT NULL);
CREATE TABLE hd_shipped (shipped bigint NOT NULL);
INSERT INTO hd_shipped VALUES (0);
-- every handler call, to assert when it is (not) called
CREATE TABLE hd_calls (n serial PRIMARY KEY, op text, old_id int, new_id int, new_note text, is_snapshot boolean,
                       version bigint[], delivery_key text);

-- The handler of docs/handlers.md.  old and new are rows of hd_orders (NULL
-- when there is none: test a key column, since a row IS NULL only when all
-- of its columns are).
CREATE FUNCTION hd_orders_handler(op text, old hd_orders, new hd_orders, meta jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
  INSERT INTO hd_calls (op, old_id, new_id, new_note, is_snapshot, version, delivery_key)
  VALUES (op, old.id, new.id, new.note, (meta->>'is_snapshot')::boolean,
          ARRAY(SELECT jsonb_array_elements_text(meta->'version'))::bigint[], meta->>'delivery_key');
  IF new.amount < 0 THEN
    RAISE EXCEPTION 'negative amount % for order %', new.amount, new.id USING ERRCODE = 'P0101';
  END IF;
  -- Running total per customer: total + (new.amount - old.amount), split in
  -- two when the order moves to another customer.
  IF old.id IS NOT NULL THEN
    INSERT INTO hd_customer_totals AS t VALUES (old.customer_id, -old.amount)
    ON CONFLICT (customer_id) DO UPDATE SET total = t.total - old.amount;
  END IF;
  IF new.id IS NOT NULL THEN
    INSERT INTO hd_customer_totals AS t VALUES (new.customer_id, new.amount)
    ON CONFLICT (customer_id) DO UPDATE SET total = t.total + new.amount;
  END IF;
  -- Shipped orders: a business event.  Snapshot rows are state, not events.
  IF NOT (meta->>'is_snapshot')::boolean AND new.status = 'shipped' AND old.status IS DISTINCT FROM 'shipped' THEN
    UPDATE hd_shipped SET shipped = shipped + 1;
  END IF;
END $$;

-- Registration checks the handler's signature.
\set SHOW_CONTEXT never
CREATE FUNCTION hd_wrong(op text, old jsonb, new hd_orders, meta jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT cdc.register_mapping('hd_orders', mode => 'handler', handler => 'hd_wrong(text, jsonb, hd_orders, jsonb)');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.register_mapping('hd_orders', handler => 'hd_orders_handler(text, hd_orders, hd_orders, jsonb)');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.register_mapping('hd_orders', mode => 'handler');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
SELECT target, source_table, mode, handler
  FROM cdc.register_mapping('hd_orders', mode => 'handler',
                            handler => 'hd_orders_handler(text, hd_orders, hd_orders, jsonb)');

CREATE FUNCTION hd_ev(op text, id int, customer int, amount numeric, status text, lsn text, tx bigint) RETURNS jsonb
LANGUAGE sql AS $$
  SELECT CASE WHEN op = 'd' THEN dbz('d', 'hd_orders', NULL, lsn, tx, before => jsonb_build_object('id', id))
              ELSE dbz(op, 'hd_orders', jsonb_build_object('id', id, 'customer_id', customer, 'amount', amount,
                                                         'status', status), lsn, tx) END
$$;
-- The invariant every check below asserts: the totals equal the sum of the
-- mirrored rows per customer (customers without orders total 0).
CREATE FUNCTION hd_totals_exact() RETURNS boolean LANGUAGE sql AS $$
  SELECT NOT EXISTS (
    SELECT 1 FROM hd_customer_totals t
      FULL JOIN (SELECT customer_id, sum(amount) AS s FROM hd_orders GROUP BY customer_id) o USING (customer_id)
     WHERE coalesce(t.total, 0) <> coalesce(o.s, 0))
$$;

-- ===========================================================================
-- 1. A stream: two orders, updates, a customer move, a delete, a snapshot row.
-- ===========================================================================
CREATE TABLE hd_stream (n int PRIMARY KEY, ev jsonb NOT NULL);
INSERT INTO hd_stream VALUES
  (1, hd_ev('c', 1, 7, 10.00, 'new', '0/1000', 100)),
  (2, hd_ev('c', 2, 7, 5.00, 'new', '0/1100', 101)),
  (3, hd_ev('u', 1, 7, 12.50, 'paid', '0/1200', 102)),
  (4, hd_ev('u', 1, 7, 12.50, 'shipped', '0/1300', 103)),
  (5, hd_ev('u', 2, 8, 6.00, 'paid', '0/1400', 104)),
  (6, hd_ev('d', 2, NULL, NULL, NULL, '0/1500', 105)),
  (7, dbz('r', 'hd_orders', '{"id": 3, "customer_id": 9, "amount": 100.00, "status": "shipped"}', '0/1600')),
  (8, hd_ev('u', 3, 9, 100.00, 'delivered', '0/1700', 107));
SELECT n, cdc_apply(ev) FROM hd_stream ORDER BY n;
SELECT * FROM hd_orders ORDER BY id;
SELECT * FROM hd_customer_totals ORDER BY customer_id;
SELECT shipped AS shipped_orders FROM hd_shipped;   -- order 1; the snapshot row of order 3 does not count
SELECT op, old_id, new_id, is_snapshot, version FROM hd_calls ORDER BY n;
SELECT hd_totals_exact() AS totals_exact;

-- ===========================================================================
-- 2. Duplicates: the same records again, and re-published under new delivery
--    keys.  No handler call, nothing changes.
-- ===========================================================================
SELECT n, cdc_apply(ev) FROM hd_stream ORDER BY n;
SELECT n, cdc_apply(ev, NULL, 'orders-gen2:0:' || n) FROM hd_stream ORDER BY n;
SELECT count(*) AS handler_calls FROM hd_calls;
SELECT * FROM hd_customer_totals ORDER BY customer_id;
SELECT shipped AS shipped_orders FROM hd_shipped;

-- ===========================================================================
-- 3. Crash between the destination commit and the input acknowledgement:
--    the consumer re-delivers from an earlier offset.  Totals stay exact.
-- ===========================================================================
SELECT cdc_apply(hd_ev('c', 4, 7, 1.00, 'new', '0/2000', 200), NULL, 'orders:0:0:100');
SELECT cdc_apply(hd_ev('u', 4, 7, 2.00, 'paid', '0/2100', 201), NULL, 'orders:0:0:101');
-- (crash: offset 100 was the last one acknowledged) -> 101 again, then 102
SELECT cdc_apply(hd_ev('u', 4, 7, 2.00, 'paid', '0/2100', 201), NULL, 'orders:0:0:101');
SELECT cdc_apply(hd_ev('u', 4, 7, 3.00, 'shipped', '0/2200', 202), NULL, 'orders:0:0:102');
-- a crash before the commit: the transaction rolls back whole, handler effects included
BEGIN;
SELECT cdc_apply(hd_ev('u', 4, 7, 4.00, 'delivered', '0/2300', 203), NULL, 'orders:0:0:103');
ROLLBACK;
SELECT cdc_apply(hd_ev('u', 4, 7, 4.00, 'delivered', '0/2300', 203), NULL, 'orders:0:0:103');
SELECT total AS total_of_customer_7 FROM hd_customer_totals WHERE customer_id = 7;
SELECT shipped AS shipped_orders FROM hd_shipped;
SELECT hd_totals_exact() AS totals_exact;

-- ===========================================================================
-- 4. Reordering within the guarantees (every order of five changes of one
--    key, each from a clean state): stale changes never reach the handler,
--    and the total always equals the mirrored row's amount.
-- ===========================================================================
CREATE TABLE hd_perm_ev (n int PRIMARY KEY, ev jsonb NOT NULL);
INSERT INTO hd_perm_ev VALUES
  (1, hd_ev('c', 50, 5, 10.00, 'new', '0/3000', 300)),
  (2, hd_ev('u', 50, 5, 20.00, 'paid', '0/3100', 301)),
  (3, hd_ev('u', 50, 6, 30.00, 'paid', '0/3200', 302)),
  (4, hd_ev('d', 50, NULL, NULL, NULL, '0/3300', 303)),
  (5, hd_ev('c', 50, 5, 40.00, 'new', '0/3400', 304));
CREATE FUNCTION hd_perm(perm int[]) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  e int;
  calls_before bigint;
  outcome text;
  problems text[] := '{}';
BEGIN
  DELETE FROM hd_orders WHERE id = 50;
  DELETE FROM hd_customer_totals WHERE customer_id IN (5, 6);
  DELETE FROM cdc.ledger WHERE target = 'hd_orders'::regclass
     AND digest IN (SELECT cdc.delivery_digest('hd_orders', format('dbz:srv:src:public.hd_orders:%s:%s:%s::{"id": "50"}',
                                                                 ev->>'op', ev->'source'->>'lsn', ev->'source'->>'txId'))
                      FROM hd_perm_ev);
  DELETE FROM cdc.entity_state WHERE target = 'hd_orders'::regclass AND key = '50';
  FOREACH e IN ARRAY perm LOOP
    calls_before := (SELECT count(*) FROM hd_calls);
    outcome := cdc_apply((SELECT ev FROM hd_perm_ev WHERE n = e));
    IF (outcome = 'applied') <> ((SELECT count(*) FROM hd_calls) = calls_before + 1) THEN
      problems := problems || format('event %s: %s with %s handler calls', e, outcome,
                                     (SELECT count(*) FROM hd_calls) - calls_before);
    END IF;
    IF coalesce((SELECT sum(total) FROM hd_customer_totals WHERE customer_id IN (5, 6)), 0)
       <> coalesce((SELECT amount FROM hd_orders WHERE id = 50), 0) THEN
      problems := problems || format('after event %s: totals %s, row %s', e,
                                     (SELECT array_agg(t) FROM hd_customer_totals t WHERE customer_id IN (5, 6)),
                                     (SELECT r FROM hd_orders r WHERE id = 50));
    END IF;
  END LOOP;
  IF (SELECT total FROM hd_customer_totals WHERE customer_id = 5) <> 40.00
     OR coalesce((SELECT total FROM hd_customer_totals WHERE customer_id = 6), 0) <> 0 THEN
    problems := problems || 'final totals are not 40.00 for customer 5 and 0 for customer 6'::text;
  END IF;
  RETURN problems;
END $$;
CREATE TABLE hd_perm_result AS
  WITH RECURSIVE p(perm) AS (
    SELECT ARRAY[]::int[]
    UNION ALL
    SELECT p.perm || n FROM p, generate_series(1, 5) n WHERE cardinality(p.perm) < 5 AND NOT n = ANY (p.perm))
  SELECT perm, hd_perm(perm) AS problems FROM p WHERE cardinality(perm) = 5;
SELECT count(*) AS permutations_checked, bool_and(cardinality(problems) = 0) AS all_ok,
       string_agg(perm::text || ': ' || array_to_string(problems, '; '), E'\n') FILTER (WHERE cardinality(problems) > 0) AS failures
  FROM hd_perm_result;
SELECT hd_totals_exact() AS totals_exact;

-- ===========================================================================
-- 5. A handler error aborts the change with the handler's SQLSTATE and
--    message, and names the event; nothing of it stays; a corrected retry
--    applies.
-- ===========================================================================
\set VERBOSITY default
SELECT cdc_apply(hd_ev('u', 1, 7, -1.00, 'paid', '0/4000', 400), NULL, 'orders:0:0:200');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT amount FROM hd_orders WHERE id = 1;
SELECT cdc.delivery_processed('hd_orders', 'orders:0:0:200') AS claimed;
SELECT cdc_apply(hd_ev('u', 1, 7, 1.00, 'paid', '0/4000', 400), NULL, 'orders:0:0:200');
SELECT amount FROM hd_orders WHERE id = 1;
SELECT hd_totals_exact() AS totals_exact;

-- ===========================================================================
-- 6. Unchanged (TOAST) columns: new is the destination row after the change,
--    so the handler sees the kept value, never the placeholder.
-- ===========================================================================
UPDATE hd_orders SET note = 'kept' WHERE id = 1;
SELECT cdc_apply(dbz('u', 'hd_orders', '{"id": 1, "customer_id": 7, "amount": 1.50, "status": "paid", "note": "__debezium_unavailable_value"}', '0/4100', 401));
SELECT id, amount, note FROM hd_orders WHERE id = 1;
SELECT op, new_id, new_note FROM hd_calls ORDER BY n DESC LIMIT 1;
SELECT hd_totals_exact() AS totals_exact;

-- ===========================================================================
-- 7. A truncate removes the rows one by one: the handler sees each as op t
--    with old = the row, so the totals go to zero.
-- ===========================================================================
SELECT cdc_apply(dbz('t', 'hd_orders', NULL, '0/5000', 500));
SELECT count(*) AS rows_left FROM hd_orders;
SELECT op, count(*) FROM hd_calls WHERE op = 't' GROUP BY op;
SELECT customer_id, total FROM hd_customer_totals WHERE total <> 0;
SELECT hd_totals_exact() AS totals_exact;

-- ===========================================================================
-- 8. A handler taking jsonb images gets the same calls, and the metadata.
-- ===========================================================================
CREATE TABLE hd_items (id int PRIMARY KEY, v text);
CREATE TABLE hd_item_log (op text, old jsonb, new jsonb, meta jsonb);
CREATE FUNCTION hd_items_handler(op text, old jsonb, new jsonb, meta jsonb) RETURNS void
LANGUAGE sql AS $$ INSERT INTO public.hd_item_log VALUES (op, old, new, meta) $$;
SELECT target, mode FROM cdc.register_mapping('hd_items', mode => 'handler', handler => 'hd_items_handler(text, jsonb, jsonb, jsonb)');
SELECT cdc_apply(jsonb_set(dbz('c', 'hd_items', '{"id": 1, "v": "a"}', '0/6000', 600), '{source,ts_ms}', '1700000000000'));
SELECT cdc_apply(dbz('u', 'hd_items', '{"id": 1, "v": "b"}', '0/6100', 601), NULL, 'items:0:0:9');
SELECT cdc_apply(dbz('d', 'hd_items', NULL, '0/6200', 602, before => '{"id": 1}'));
SELECT op, old, new FROM hd_item_log;
SELECT jsonb_pretty(meta) FROM hd_item_log WHERE op = 'c';
SELECT meta->>'delivery_key' AS delivery_key, meta->'source'->>'lsn' AS lsn FROM hd_item_log WHERE op = 'u';
-- a mapped handler cannot be dropped (2BP01, sql/handler_drop_guard.sql)
DROP FUNCTION hd_items_handler(text, jsonb, jsonb, jsonb);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- the handler disappears (what the event trigger disabled lets through, as
-- in a mapping from before that rule): the next change fails with 42883
-- naming the mapping
ALTER EVENT TRIGGER cdc_drop_target_state DISABLE;
DROP FUNCTION hd_items_handler(text, jsonb, jsonb, jsonb);
ALTER EVENT TRIGGER cdc_drop_target_state ENABLE ALWAYS;
SELECT cdc_apply(dbz('c', 'hd_items', '{"id": 2, "v": "x"}', '0/6300', 603));
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- ===========================================================================
-- 9. A key change that is stale for its new key (a later change of the new
--    key came first): the old key's delete applies and gets its 'd' call,
--    the new key's upsert is stale and gets none (docs/handlers.md).
-- ===========================================================================
CREATE TABLE hd_kc (id int PRIMARY KEY, v text);
CREATE TABLE hd_kc_log (n serial PRIMARY KEY, op text, old jsonb, new jsonb);
CREATE FUNCTION hd_kc_handler(op text, old jsonb, new jsonb, meta jsonb) RETURNS void
LANGUAGE sql AS $$ INSERT INTO public.hd_kc_log (op, old, new) VALUES (op, old, new) $$;
SELECT target, mode FROM cdc.register_mapping('hd_kc', mode => 'handler', handler => 'hd_kc_handler(text, jsonb, jsonb, jsonb)');
SELECT cdc_apply(dbz('c', 'hd_kc', '{"id": 1, "v": "a"}', '0/7000', 700)) AS create_1,
       cdc_apply(dbz('u', 'hd_kc', '{"id": 2, "v": "later"}', '0/7200', 702)) AS update_2_first,
       cdc_apply(dbz('u', 'hd_kc', '{"id": 2, "v": "moved"}', '0/7100', 701, before => '{"id": 1}')) AS update_1_to_2_late;
SELECT op, old, new FROM hd_kc_log ORDER BY n;
SELECT * FROM hd_kc;

--
-- outbox_taken_decoded: outbox rows whose key is taken never reach the WAL
-- as inserts, also now that the per-row pre-check runs only where one look
-- per target at outbox_rows_ikey over the flush's v1 range finds a row
-- (OutboxKeysMayBeTakenPg, review of 233f6bb): taken keys mixed with new
-- ones, several targets in one flush, a late change inside the range, and a
-- key taken in the same transaction.  A test_decoding slot counts the
-- inserts a relay would see.  Tables: otd_*.
--
CREATE TABLE otd_a (id int PRIMARY KEY, v text);
CREATE TABLE otd_b (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('otd_a', outbox => true);
SELECT target FROM cdc.register_mapping('otd_b', outbox => true);
CREATE FUNCTION otd_ev(t text, op text, id int, v text, l int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT dbz(op, t, jsonb_build_object('id', id, 'v', v), lsn => '0/' || to_hex(l), tx => l) $$;
CREATE FUNCTION otd_forget(VARIADIC t regclass[]) RETURNS void LANGUAGE sql AS $$
  DELETE FROM cdc.ledger WHERE target = ANY (t);
  DELETE FROM cdc.entity_state WHERE target = ANY (t) $$;
SELECT applied FROM cdc_apply_batch((SELECT jsonb_agg(e ORDER BY l) FROM (
  SELECT otd_ev('otd_a', 'c', i, 'a' || i, 10000 + i * 16) e, 10000 + i * 16 l FROM generate_series(1, 10) i
  UNION ALL SELECT otd_ev('otd_b', 'c', i, 'b' || i, 10004 + i * 16), 10004 + i * 16 FROM generate_series(1, 10) i) s));
SELECT 'init' FROM pg_create_logical_replication_slot('regress_cdc_otd', 'test_decoding');
CREATE FUNCTION otd_decoded() RETURNS TABLE (outbox_inserts bigint, outbox_deletes bigint) LANGUAGE sql AS $$
  SELECT count(*) FILTER (WHERE data LIKE 'table cdc.outbox_rows: INSERT:%'),
         count(*) FILTER (WHERE data LIKE 'table cdc.outbox_rows: DELETE:%')
    FROM pg_logical_slot_get_changes('regress_cdc_otd', NULL, NULL) $$;
-- one target: 3 taken keys and 2 new ones: 2 inserts
SELECT otd_forget('otd_a');
SELECT applied FROM cdc_apply_batch(jsonb_build_array(otd_ev('otd_a', 'c', 1, 'a1', 10016), otd_ev('otd_a', 'c', 2, 'a2', 10032),
  otd_ev('otd_a', 'c', 3, 'a3', 10048), otd_ev('otd_a', 'u', 1, 'a1x', 20000), otd_ev('otd_a', 'c', 11, 'a11', 20016)));
SELECT * FROM otd_decoded();
-- two targets in one flush, taken keys in both: 2 inserts
SELECT otd_forget('otd_a', 'otd_b');
SELECT applied FROM cdc_apply_batch(jsonb_build_array(otd_ev('otd_a', 'c', 5, 'a5', 10080), otd_ev('otd_b', 'c', 5, 'b5', 10084),
  otd_ev('otd_b', 'c', 6, 'b6', 10100), otd_ev('otd_a', 'c', 12, 'a12', 30016), otd_ev('otd_b', 'c', 12, 'b12', 30020)));
SELECT * FROM otd_decoded();
-- every key taken: none
SELECT otd_forget('otd_a');
SELECT applied FROM cdc_apply_batch((SELECT jsonb_agg(otd_ev('otd_a', 'c', i, 'a' || i, 10000 + i * 16) ORDER BY i) FROM generate_series(1, 10) i));
SELECT * FROM otd_decoded();
-- taken by a row of the same transaction (an earlier flush), through the executor and with the statement: 3 and 1
BEGIN;
SELECT applied FROM cdc_apply_batch(jsonb_build_array(otd_ev('otd_a', 'c', 20, 'a20', 50000), otd_ev('otd_a', 'c', 21, 'a21', 50016)));
SELECT otd_forget('otd_a');
SELECT applied FROM cdc_apply_batch(jsonb_build_array(otd_ev('otd_a', 'c', 20, 'a20', 50000), otd_ev('otd_a', 'c', 22, 'a22', 50032)));
COMMIT;
SELECT * FROM otd_decoded();
BEGIN;
SET LOCAL cdc.direct_writes = off;
SELECT otd_forget('otd_a');
SELECT applied FROM cdc_apply_batch(jsonb_build_array(otd_ev('otd_a', 'c', 20, 'a20', 50000), otd_ev('otd_a', 'c', 23, 'a23', 60000)));
COMMIT;
SELECT * FROM otd_decoded();
-- one source transaction (one commit LSN: every row has the same v1), the look narrowed to the
-- flush's v2 range: 3 new; a taken key and a new one above the rows: 1; two new keys between rows
-- (the per-row pre-check runs): 2; two taken keys at the ends of the range: 0
CREATE FUNCTION otd_tx(op text, id int, v text, l int, pos int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT dbz(op, 'otd_a', jsonb_build_object('id', id, 'v', v), lsn => '0/' || to_hex(l), tx => 7, clsn => '0/90000',
             total_order => pos) $$;
SELECT applied FROM cdc_apply_batch(jsonb_build_array(otd_tx('c', 40, 'a40', 70000, 1), otd_tx('c', 41, 'a41', 70016, 2),
  otd_tx('c', 42, 'a42', 70032, 3)));
SELECT * FROM otd_decoded();
SELECT otd_forget('otd_a');
SELECT applied FROM cdc_apply_batch(jsonb_build_array(otd_tx('c', 41, 'a41', 70016, 2), otd_tx('c', 43, 'a43', 70048, 4)));
SELECT * FROM otd_decoded();
SELECT otd_forget('otd_a');
SELECT applied FROM cdc_apply_batch(jsonb_build_array(otd_tx('c', 44, 'a44', 70004, 5), otd_tx('c', 45, 'a45', 70020, 6)));
SELECT * FROM otd_decoded();
SELECT otd_forget('otd_a');
SELECT applied FROM cdc_apply_batch(jsonb_build_array(otd_tx('c', 40, 'a40', 70000, 1), otd_tx('c', 42, 'a42', 70032, 3)));
SELECT * FROM otd_decoded();
SELECT target, count(*) AS outbox_rows, count(DISTINCT idempotency_key) AS keys
  FROM cdc.outbox WHERE target IN ('otd_a'::regclass, 'otd_b'::regclass) GROUP BY target ORDER BY target::text;
SELECT pg_drop_replication_slot('regress_cdc_otd');
DROP TABLE otd_a, otd_b;
DROP FUNCTION otd_ev(text, text, int, text, int), otd_tx(text, int, text, int, int), otd_forget(regclass[]), otd_decoded();

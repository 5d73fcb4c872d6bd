--
-- outbox_message: a mapping with outbox_via => 'message' (docs/semantics.md,
-- "Outbox as logical decoding messages"): instead of a cdc.outbox row,
-- every applied non-snapshot change writes one transactional logical
-- decoding message with prefix cdc_outbox carrying the same content as
-- JSON.  Read back here with test_decoding: exactly one message per
-- applied change, in order, none for replays, snapshot rows or a rolled-back
-- transaction, and each equal to the row a table outbox writes for the same
-- source change.  Tables of this suite are called om_*.
--
CREATE TABLE om_msg (id int PRIMARY KEY, status text NOT NULL, amount numeric(12,2));
CREATE TABLE om_tab (id int PRIMARY KEY, status text NOT NULL, amount numeric(12,2));
-- While every role may call pg_logical_emit_message(), any role could write
-- cdc_outbox messages a relay cannot tell from the outbox's: refused (55000;
-- sql/outbox_message_forged.sql).  Revoked here, granted back at the end.
SELECT cdc.register_mapping('om_msg', source_table => 'om', outbox => true, outbox_via => 'message');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC;
-- the same source table feeds both (the second mapping for source srv only):
-- one with messages, one with rows
SELECT target, outbox, outbox_via FROM cdc.register_mapping('om_msg', source_table => 'om', outbox => true,
                                                           outbox_via => 'message', outbox_topic => 'shop.om');
SELECT target, outbox, outbox_via FROM cdc.register_mapping('om_tab', source_table => 'om', outbox => true,
                                                           outbox_topic => 'shop.om', source_name => 'srv');
SELECT cdc.register_mapping('om_tab', source_table => 'om', outbox => true, outbox_via => 'post');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

SELECT 'init' FROM pg_create_logical_replication_slot('regress_cdc_outbox', 'test_decoding');
-- The messages written since the last call, as JSON (created_at is the
-- transaction's start time: checked apart).
CREATE FUNCTION om_messages() RETURNS TABLE (n bigint, prefix text, msg jsonb) LANGUAGE sql AS $$
  SELECT row_number() OVER (), substring(data FROM 'prefix: ([^,]*),'), substring(data FROM 'content:(.*)$')::jsonb
    FROM pg_logical_slot_get_changes('regress_cdc_outbox', NULL, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')
   WHERE data LIKE 'message: transactional: 1 prefix: %'
$$;

CREATE TABLE om_ev (n int PRIMARY KEY, ev jsonb NOT NULL);
INSERT INTO om_ev VALUES
  (1, dbz('c', 'om', '{"id": 1, "status": "new", "amount": 10}', '0/1000', 100, total_order => 1)),
  (2, dbz('u', 'om', '{"id": 1, "status": "paid", "amount": 10}', '0/1100', 101, clsn => '0/1180', total_order => 1)),
  (3, dbz('d', 'om', NULL, '0/1200', 102, before => '{"id": 1}', total_order => 1)),
  (4, dbz('d', 'om', NULL, '0/1300', 103, before => '{"id": 7, "status": "gone"}', total_order => 1)),
  (5, dbz('r', 'om', '{"id": 2, "status": "snap", "amount": 1}', '0/1400', NULL)),
  (6, dbz('u', 'om', '{"id": 2, "status": "after snap", "amount": 2}', '0/1500', 105));
SELECT n, cdc_apply(ev, 'om_msg', 'm:' || n), cdc_apply(ev, 'om_tab', 't:' || n) FROM om_ev ORDER BY n;
-- replays: nothing
SELECT n, cdc_apply(ev, 'om_msg', 'm:' || n) FROM om_ev ORDER BY n;
-- a rolled-back transaction: its messages are never decoded
BEGIN;
SELECT cdc_apply(dbz('c', 'om', '{"id": 3, "status": "rolled back", "amount": 3}', '0/1600', 106), 'om_msg');
ROLLBACK;
-- no rows in the table outbox for om_msg; the messages are counted
SELECT count(*) AS outbox_rows_of_om_msg FROM cdc.outbox WHERE target = 'om_msg'::regclass;
SELECT target, applied, duplicate, snapshot_rows, outbox_rows FROM cdc.stats
 WHERE target IN ('om_msg'::regclass, 'om_tab'::regclass) ORDER BY target::text;

CREATE TABLE om_seen AS SELECT * FROM om_messages();
SELECT n, prefix, msg->>'op' AS op, msg->'entity_key' AS entity_key, msg->'payload' AS payload, msg->'version' AS version,
       msg->>'topic' AS topic, msg->>'target' AS target
  FROM om_seen ORDER BY n;
-- each message carries what the table outbox row of the same change holds
SELECT s.n, s.msg - 'created_at' - 'target'
            = (to_jsonb(o) - 'n' - 'id' - 'created_at' - 'published_at' - 'target') AS same_as_the_row,
       (s.msg->>'created_at')::timestamptz <= now() AS created_at_is_a_time
  FROM om_seen s
  JOIN (SELECT row_number() OVER (ORDER BY id) AS n, o.* FROM cdc.outbox o WHERE o.target = 'om_tab'::regclass) o USING (n)
 ORDER BY s.n;
SELECT msg - 'created_at' AS msg FROM om_seen WHERE n = 2;

-- A batch, merged (c -> u -> d -> c of one key), and a truncate.
SELECT applied FROM cdc_apply_batch(ARRAY[
  dbz('c', 'om', '{"id": 5, "status": "v1", "amount": 1}', '0/2000', 200),
  dbz('u', 'om', '{"id": 5, "status": "v2", "amount": 2}', '0/2100', 201),
  dbz('d', 'om', NULL, '0/2200', 202, before => '{"id": 5}'),
  dbz('c', 'om', '{"id": 5, "status": "v3", "amount": 3}', '0/2300', 203)], 'om_msg');
SELECT cdc_apply(dbz('t', 'om', NULL, '0/2400', 204), 'om_msg');
SELECT n, msg->>'op' AS op, msg->'entity_key' AS entity_key, msg->'payload' AS payload FROM om_messages() ORDER BY n;
SELECT * FROM om_msg;

SELECT pg_drop_replication_slot('regress_cdc_outbox');
GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) TO PUBLIC;

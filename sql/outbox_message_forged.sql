--
-- outbox_message_forged (review h2): the outbox of a mapping with
-- outbox_via => 'message' is the stream of transactional logical decoding
-- messages with prefix cdc_outbox in the destination's WAL (docs/semantics.md,
-- "Outbox as logical decoding messages"), which relays publish.  Only the
-- engine may write an entry, for a change it applied (as only the extension
-- owner writes cdc.outbox_rows).  But pg_logical_emit_message() is
-- EXECUTE to PUBLIC in PostgreSQL 15: any role that may connect writes a
-- message a relay cannot tell from the engine's, naming any target and topic
-- (here a payment of another tenant's table that the role may not even
-- apply to).  So a message outbox needs pg_logical_emit_message() revoked
-- from PUBLIC: cdc.register_mapping refuses it before, and the engine
-- refuses to write an entry while PUBLIC may call it again (55000).
-- Expected: no cdc_outbox message but the engine's.  Tables of this suite
-- are called h2om_*.
--
CREATE TABLE h2om_pay (id int PRIMARY KEY, amount numeric(12,2));
SELECT cdc.register_mapping('h2om_pay', outbox => true, outbox_via => 'message');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC;
SELECT target, outbox, outbox_via FROM cdc.register_mapping('h2om_pay', outbox => true, outbox_via => 'message',
                                                            outbox_topic => 'shop.payments');
CREATE ROLE h2om_forger;
SELECT 'init' FROM pg_create_logical_replication_slot('h2om_relay', 'test_decoding');
SELECT cdc_apply(dbz('c', 'h2om_pay', '{"id": 1, "amount": 10}', '0/1000', 100), 'h2om_pay');
SET ROLE h2om_forger;
-- the role may not apply to the table
SELECT cdc_apply(dbz('c', 'h2om_pay', '{"id": 2, "amount": 1000000}', '0/1100', 101), 'h2om_pay');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- nor write an entry of its outbox (whether refused or not, say nothing here)
DO $$
BEGIN
  PERFORM pg_logical_emit_message(true, 'cdc_outbox',
    '{"idempotency_key": "00000000000000000000000000000002", "topic": "shop.payments", "target": "public.h2om_pay", '
    '"entity_key": {"id": "2"}, "op": "c", "payload": {"id": 2, "amount": 1000000.00}, '
    '"source": {"db": "src", "lsn": 4352, "name": "srv", "txId": 101, "table": "h2om_pay", "schema": "public", '
    '"version": [0, 4352, 4352, 0], "commit_lsn": null}, "version": [0, 4352, 4352, 0], '
    '"created_at": "2026-12-03T00:00:00+00:00"}');
EXCEPTION WHEN insufficient_privilege THEN
  NULL;
END $$;
RESET ROLE;
-- what a relay reads: the engine's one entry (id 1), nothing else
SELECT substring(data FROM 'content:(.*)$')::jsonb -> 'entity_key' AS entity_key,
       substring(data FROM 'content:(.*)$')::jsonb ->> 'topic' AS topic
  FROM pg_logical_slot_get_changes('h2om_relay', NULL, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')
 WHERE data LIKE 'message: transactional: 1 prefix: cdc_outbox,%';
-- EXECUTE granted to PUBLIC again (a restore, an operator): the engine
-- writes no entry while it is, and nothing of the change is applied
GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) TO PUBLIC;
SELECT cdc_apply(dbz('c', 'h2om_pay', '{"id": 3, "amount": 30}', '0/1200', 102), 'h2om_pay');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS rows_of_3 FROM h2om_pay WHERE id = 3;
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) FROM PUBLIC;
SELECT cdc_apply(dbz('c', 'h2om_pay', '{"id": 3, "amount": 30}', '0/1200', 102), 'h2om_pay');
SELECT substring(data FROM 'content:(.*)$')::jsonb -> 'entity_key' AS entity_key
  FROM pg_logical_slot_get_changes('h2om_relay', NULL, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')
 WHERE data LIKE 'message: transactional: 1 prefix: cdc_outbox,%';
SELECT pg_drop_replication_slot('h2om_relay');
GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) TO PUBLIC;
DROP TABLE h2om_pay;
DROP ROLE h2om_forger;

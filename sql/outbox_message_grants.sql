--
-- outbox_message_grants (review h2 of 49232bf): a message outbox
-- needs pg_logical_emit_message() revoked from PUBLIC.  Checked here: EXECUTE
-- left to PUBLIC on the bytea signature only is refused too (registration
-- and engine); EXECUTE granted to one role, or held through membership of
-- it, is not PUBLIC's (the operator chose who may write messages):
-- accepted; a batch writes its entries under one check.  Tables of this
-- suite are called h2og_*.
--
CREATE TABLE h2og_pay (id int PRIMARY KEY, amount int);
CREATE ROLE h2og_relay_writer;
CREATE ROLE h2og_member IN ROLE h2og_relay_writer;
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) FROM PUBLIC;
-- the bytea signature still PUBLIC's
SELECT cdc.register_mapping('h2og_pay', outbox => true, outbox_via => 'message');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea)
  TO h2og_relay_writer;
SELECT target, outbox_via FROM cdc.register_mapping('h2og_pay', outbox => true, outbox_via => 'message');
SELECT has_function_privilege('h2og_member', 'pg_logical_emit_message(boolean, text, text)', 'EXECUTE') AS member_may;
SELECT 'init' FROM pg_create_logical_replication_slot('h2og_relay', 'test_decoding');
SELECT cdc_apply(dbz('c', 'h2og_pay', '{"id": 1, "amount": 10}', '0/1000', 100), 'h2og_pay');
-- the bytea signature granted to PUBLIC again: the engine refuses
GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, bytea) TO PUBLIC;
SELECT cdc_apply(dbz('c', 'h2og_pay', '{"id": 2, "amount": 20}', '0/1100', 101), 'h2og_pay');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC;
-- a batch: one transaction, several entries
SELECT applied FROM cdc_apply_batch(jsonb_build_array(
    dbz('c', 'h2og_pay', '{"id": 3, "amount": 30}', '0/1200', 102),
    dbz('c', 'h2og_pay', '{"id": 4, "amount": 40}', '0/1300', 103)), 'h2og_pay');
SELECT substring(data FROM 'content:(.*)$')::jsonb -> 'entity_key' AS entity_key
  FROM pg_logical_slot_get_changes('h2og_relay', NULL, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')
 WHERE data LIKE 'message: transactional: 1 prefix: cdc_outbox,%';
SELECT pg_drop_replication_slot('h2og_relay');
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea)
  FROM h2og_relay_writer;
GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) TO PUBLIC;
DROP TABLE h2og_pay;
DROP ROLE h2og_member, h2og_relay_writer;

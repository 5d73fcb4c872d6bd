--
-- decimal_empty_bytes (fresh-user review h2): a Kafka Connect Decimal or a
-- Debezium VariableScaleDecimal whose base64 value is empty ("" = no bytes)
-- was applied as 0. Java's BigInteger, which Debezium encodes the unscaled
-- value with, writes at least one byte and cannot read zero bytes (Kafka
-- Connect's own Decimal.toLogical fails on them), so an empty value is a
-- damaged event, not a zero: it is refused with 22P02 naming the field and
-- column, nothing applied or claimed, through both cdc_apply() forms and
-- the batch. One zero byte ("AA==") is still 0.
-- Objects: deb*.
--
CREATE TABLE deb (id int PRIMARY KEY, amount numeric(10,2));
SELECT target FROM cdc.register_mapping('deb', outbox => true);
\set VERBOSITY terse
-- Decimal (parameters.scale) with an empty value: jsonb, text, batch
SELECT cdc_apply('{"schema": {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [{"field": "id", "type": "int32"},
                   {"field": "amount", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}]}]},
                   "payload": {"op": "c", "source": {"lsn": 16}, "after": {"id": 1, "amount": ""}}}'::jsonb, 'deb', 'deb-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"schema": {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [{"field": "id", "type": "int32"},
                   {"field": "amount", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}]}]},
                   "payload": {"op": "c", "source": {"lsn": 16}, "after": {"id": 1, "amount": ""}}}'::text, 'deb', 'deb-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc_apply_batch('[{"schema": {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [{"field": "id", "type": "int32"},
                   {"field": "amount", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}]}]},
                   "payload": {"op": "c", "source": {"lsn": 16}, "after": {"id": 1, "amount": ""}}}]'::jsonb, 'deb', ARRAY['deb-1']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- VariableScaleDecimal (no schema needed: an object with scale and value)
SELECT cdc_apply('{"op": "c", "source": {"lsn": 16}, "after": {"id": 1, "amount": {"scale": 2, "value": ""}}}'::jsonb, 'deb', 'deb-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"op": "c", "source": {"lsn": 16}, "after": {"id": 1, "amount": {"scale": 2, "value": ""}}}'::text, 'deb', 'deb-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- nothing applied, claimed or written
SELECT (SELECT count(*) FROM deb) AS rows, (SELECT count(*) FROM cdc.entities WHERE target = 'deb'::regclass) AS entities,
       (SELECT count(*) FROM cdc.outbox WHERE topic = 'public.deb') AS outbox, cdc.delivery_processed('deb', 'deb-1') AS claimed;
-- one zero byte is 0, under the same delivery key
SELECT cdc_apply('{"op": "c", "source": {"lsn": 16}, "after": {"id": 1, "amount": {"scale": 2, "value": "AA=="}}}'::jsonb, 'deb', 'deb-1');
SELECT * FROM deb;
DROP TABLE deb;

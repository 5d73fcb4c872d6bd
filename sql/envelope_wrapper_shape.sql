--
-- envelope_wrapper_shape (fresh-user review h3): the members of the
-- JsonConverter wrapper {"schema": ..., "payload": ...} of the wrong shape.
-- A payload that was not an object was refused as if it were the whole
-- event ('event must be a JSON object, got number'); a schema that was not
-- an object, or whose "fields" was not an array of objects, was ignored and
-- the payload decoded without it (applied, or a misleading error of the
-- payload).  Each is now refused with 22023 naming the field, by both
-- cdc_apply() forms and the batch, nothing claimed or written.  A top
-- level that is not an object was already refused.
-- Objects: ews, ews_ev().
--
CREATE TABLE ews (id int PRIMARY KEY, p numeric(10,2));
SELECT target FROM cdc.register_mapping('ews', outbox => true);
CREATE FUNCTION ews_ev(sch jsonb, pay jsonb DEFAULT NULL) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('schema', sch, 'payload',
           coalesce(pay, jsonb_build_object('op', 'c', 'after', jsonb_build_object('id', 1, 'p', 'AN6m'),
             'source', jsonb_build_object('name', 'ews', 'schema', 'public', 'table', 'ews', 'lsn', 100)))) $$;
\set VERBOSITY terse
-- a top level that is not an object
SELECT cdc_apply('[1]'::jsonb);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('"x"'::jsonb);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('7'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a payload that is not an object
SELECT cdc_apply(ews_ev('{}', '5'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(ews_ev('{}', '[{"op": "c"}]')::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a schema that is not an object: was ignored, the payload decoded without it (the decimal then ambiguous)
SELECT cdc_apply(ews_ev('5'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(ews_ev('[]')::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(ews_ev('"struct"'), 'ews', 'dk-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- "fields" that is not an array, and a member of it that is not an object
SELECT cdc_apply(ews_ev('{"type": "struct", "fields": {"field": "after"}}'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(ews_ev('{"type": "struct", "fields": [{"field": "op", "type": "string"}, "after"]}'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- the same in the batch forms (jsonb, jsonb[] and text): the event is named in the context
\set VERBOSITY default
SELECT applied FROM cdc_apply_batch(jsonb_build_array(ews_ev('5')));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT applied FROM cdc_apply_batch(ARRAY[ews_ev('{}', '[]')]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT applied FROM cdc_apply_batch(jsonb_build_array(ews_ev('{"fields": 1}'))::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
-- nothing was written or claimed
SELECT count(*) AS rows, (SELECT count(*) FROM cdc.outbox WHERE target = 'ews'::regclass) AS outbox,
       (SELECT count(*) FROM cdc.entities WHERE target = 'ews'::regclass) AS entities,
       ledger_count('ews') AS ledger FROM ews;
-- a null schema is none (the base64 decimal is then ambiguous), a tombstone stays ignored,
-- and a well-formed schema applies (Decimal "AN6m" at scale 2 is 569.98)
SELECT cdc_apply(ews_ev('null'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"schema": null, "payload": null}'::jsonb);
SELECT cdc_apply(ews_ev('{"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [{"field": "id", "type": "int32"}, {"field": "p", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}]}]}'));
SELECT * FROM ews;
SELECT cdc.unregister_mapping('ews');
DROP TABLE ews;
DROP FUNCTION ews_ev(jsonb, jsonb);

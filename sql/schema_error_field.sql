--
-- schema_error_field (fresh-user review, h3): a JsonConverter envelope
-- whose field schema is malformed was refused (22023) with a message that
-- named no field: 'field schema "type" must be a string, got number'.  In a
-- real Debezium value the schema block lists every column of before and
-- after; an error must say which one (docs/sql-reference.md: "the message
-- names the field or column").  Nothing may be written (the envelope is
-- refused before the claim).
--
CREATE TABLE h3s (id int PRIMARY KEY, p numeric(10,2), arr int[]);
SELECT target FROM cdc.register_mapping('h3s', outbox => true);
CREATE FUNCTION h3s_ev(fields jsonb, which text DEFAULT 'after') RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('schema', jsonb_build_object('type', 'struct', 'fields', jsonb_build_array(
           jsonb_build_object('field', which, 'type', 'struct', 'optional', true, 'fields', fields))),
         'payload', jsonb_build_object('op', 'c', 'after', jsonb_build_object('id', 1, 'p', 'AN6m'),
           'source', jsonb_build_object('name', 'h3', 'schema', 'public', 'table', 'h3s', 'lsn', 100))) $$;
\set VERBOSITY default
-- "type" that is not a string, in after and in before
SELECT cdc_apply(h3s_ev('[{"field": "id", "type": "int32"}, {"field": "p", "type": 5}]'));
SELECT cdc_apply(h3s_ev('[{"field": "arr", "type": "array", "items": {"type": []}}]', 'before'));
-- the key-schema shape ({"name": <field>, "schema": {...}})
SELECT cdc_apply(h3s_ev('[{"name": "p", "index": "0", "schema": {"type": true}}]'));
-- a member of "fields" that is not an object
SELECT cdc_apply(h3s_ev('[{"field": "id", "type": "int32"}, 7]'));
-- the same in a batch, and in the text form
SELECT applied FROM cdc_apply_batch(jsonb_build_array(h3s_ev('[{"field": "p", "type": 5}]')));
SELECT cdc_apply(h3s_ev('[{"field": "p", "type": 5}]')::text);
-- nothing was written
SELECT count(*) AS rows, (SELECT count(*) FROM cdc.outbox WHERE target = 'h3s'::regclass) AS outbox,
       (SELECT count(*) FROM cdc.entities WHERE target = 'h3s'::regclass) AS entities FROM h3s;
-- a well-formed schema applies (Decimal "AN6m" at scale 2 is 569.98)
SELECT cdc_apply(h3s_ev('[{"field": "id", "type": "int32"}, {"field": "p", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}]'));
SELECT * FROM h3s;
DROP TABLE h3s;
DROP FUNCTION h3s_ev(jsonb, text);

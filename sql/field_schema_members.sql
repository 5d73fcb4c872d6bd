--
-- field_schema_members (fresh-user run h4): a JsonConverter field schema
-- whose "name", "field", "fields", "items", "parameters" or "optional" is
-- of the wrong JSON type was ignored (only "type" was checked), and the
-- value decoded without it: a Decimal whose schema said "name": 5 was read
-- as plain bytes ('invalid input syntax for type numeric: ""'), an "after"
-- schema with "fields": 5 or a member with "field": 5 applied the event as
-- if it had no schema.  Now 22023 naming the field schema and the member,
-- by both cdc_apply() forms and cdc_apply_batch(), nothing written.
-- Objects: fsm.
--
CREATE TABLE fsm (id int PRIMARY KEY, n numeric, a int[]);
SELECT target FROM cdc.register_mapping('fsm', outbox => true);
CREATE FUNCTION fsm_event(after_schema jsonb, lsn int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object(
    'schema', jsonb_build_object('type', 'struct', 'fields', jsonb_build_array(after_schema)),
    'payload', jsonb_build_object('op', 'c', 'after', jsonb_build_object('id', lsn, 'n', 'AQ==', 'a', '[1]'::jsonb),
                                  'source', jsonb_build_object('name', 's', 'db', 'd', 'schema', 'public',
                                                               'table', 'fsm', 'lsn', lsn, 'txId', 1)))
$$;
CREATE TABLE fsm_cases (lsn int, after_schema jsonb);
INSERT INTO fsm_cases VALUES
  (1, '{"field": "after", "type": "struct", "fields": [{"field": "n", "type": "bytes", "name": 5}]}'),
  (2, '{"field": "after", "type": "struct", "fields": [{"field": 5, "type": "bytes"}]}'),
  (3, '{"field": "after", "type": "struct", "fields": 5}'),
  (4, '{"field": "after", "type": "struct", "fields": [{"field": "n", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": 2}]}'),
  (5, '{"field": "after", "type": "struct", "fields": [{"field": "a", "type": "array", "items": "int32"}]}'),
  (6, '{"field": "after", "type": "struct", "fields": [{"field": "n", "type": "bytes", "optional": 1}]}'),
  (7, '{"field": ["after"], "type": "struct", "fields": []}');
\set VERBOSITY default
SELECT lsn, cdc_apply(fsm_event(after_schema, lsn)) FROM fsm_cases WHERE lsn = 1;
SELECT lsn, cdc_apply(fsm_event(after_schema, lsn)::text) FROM fsm_cases WHERE lsn = 1;
SELECT lsn, cdc_apply(fsm_event(after_schema, lsn)) FROM fsm_cases WHERE lsn = 2;
SELECT lsn, cdc_apply(fsm_event(after_schema, lsn)::text) FROM fsm_cases WHERE lsn = 2;
SELECT lsn, cdc_apply(fsm_event(after_schema, lsn)) FROM fsm_cases WHERE lsn = 3;
SELECT lsn, cdc_apply(fsm_event(after_schema, lsn)::text) FROM fsm_cases WHERE lsn = 3;
SELECT lsn, cdc_apply(fsm_event(after_schema, lsn)) FROM fsm_cases WHERE lsn = 4;
SELECT lsn, cdc_apply(fsm_event(after_schema, lsn)) FROM fsm_cases WHERE lsn = 5;
SELECT lsn, cdc_apply(fsm_event(after_schema, lsn)) FROM fsm_cases WHERE lsn = 6;
SELECT lsn, cdc_apply(fsm_event(after_schema, lsn)::text) FROM fsm_cases WHERE lsn = 7;
-- a batch: the good first event is not applied either
SELECT * FROM cdc_apply_batch((SELECT jsonb_build_array(
  fsm_event('{"field": "after", "type": "struct", "fields": [{"field": "n", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}]}', 100),
  fsm_event(after_schema, lsn)) FROM fsm_cases WHERE lsn = 3));
SELECT * FROM cdc_apply_batch((SELECT jsonb_build_array(
  fsm_event('{"field": "after", "type": "struct", "fields": [{"field": "n", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}]}', 100),
  fsm_event(after_schema, lsn))::text FROM fsm_cases WHERE lsn = 1));
SELECT count(*) AS rows FROM fsm;
SELECT count(*) AS entities FROM cdc.entities WHERE target = 'fsm'::regclass;
SELECT count(*) AS outbox_rows FROM cdc.outbox WHERE target = 'fsm'::regclass;
SELECT count(*) AS ledger_rows FROM cdc.ledger WHERE target = 'fsm'::regclass;
-- well-formed: the Decimal with its scale applies (0.01), and its redelivery is a duplicate
SELECT cdc_apply(fsm_event('{"field": "after", "type": "struct", "fields": [{"field": "n", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}, "optional": true}, {"field": "a", "type": "array", "items": {"type": "int32"}}]}', 100));
SELECT cdc_apply(fsm_event('{"field": "after", "type": "struct", "fields": [{"field": "n", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}, "optional": "true"}, {"field": "a", "type": "array", "items": {"type": "int32"}}]}', 100)::text);
SELECT id, n, a FROM fsm;
SELECT cdc.unregister_mapping('fsm');
DROP TABLE fsm, fsm_cases;
DROP FUNCTION fsm_event(jsonb, int);

--
-- jsonb_intake (issue 13): the jsonb forms read the Debezium envelope in
-- place (src/pg/jsonb_view.cpp), the text forms parse it into a tree; the
-- same tricky envelopes through both give the same outcome, rows, outbox
-- payloads, conflict images, content hashes and errors (SQLSTATE and
-- message).  Each case runs in a subtransaction that is rolled back, so
-- that both forms start from the same state.
--
CREATE TABLE ji (id int PRIMARY KEY, t text, n numeric, j jsonb, a int[], b boolean);
SELECT target FROM cdc.register_mapping('ji', outbox => true);
-- a row at version lsn 100, for the conflict (same version, other content) and the update
SELECT cdc_apply('{"op": "c", "after": {"id": 1, "t": "one"}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 100}}'::jsonb);

-- What applying `e` in form `form` (jsonb, text, batch_jsonb, batch_array,
-- batch_text) gives: the outcome and what it left (rows, outbox payloads,
-- conflict images, entity content hashes), or the error; rolled back.
CREATE FUNCTION ji_try(e text, form text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  result text;
BEGIN
  BEGIN
    result := CASE form
      WHEN 'jsonb' THEN cdc_apply(e::jsonb)
      WHEN 'text' THEN cdc_apply(e)
      WHEN 'batch_jsonb' THEN (SELECT b.outcomes::text FROM cdc_apply_batch(('[' || e || ']')::jsonb, with_outcomes => true) b)
      WHEN 'batch_array' THEN (SELECT b.outcomes::text FROM cdc_apply_batch(ARRAY[e::jsonb], with_outcomes => true) b)
      WHEN 'batch_text' THEN (SELECT b.outcomes::text FROM cdc_apply_batch('[' || e || ']', with_outcomes => true) b) END;
    result := result
      || ' rows ' || coalesce((SELECT string_agg(to_jsonb(r)::text, ', ' ORDER BY r.id) FROM ji r), '-')
      || ' outbox ' || coalesce((SELECT string_agg(o.op || ' ' || o.payload::text, ', ' ORDER BY o.id) FROM cdc.outbox o WHERE o.target = 'ji'::regclass), '-')
      || ' conflicts ' || coalesce((SELECT string_agg(c.event_image::text, ', ') FROM cdc.conflicts c WHERE c.target = 'ji'::regclass), '-')
      || ' hashes ' || coalesce((SELECT string_agg(cdc.entity_key_json(en.target, en.key)::text || '=' || en.chash, ', '
                                                   ORDER BY cdc.entity_key_json(en.target, en.key)::text)
                                  FROM cdc.entity_state en WHERE en.target = 'ji'::regclass), '-');
    RAISE EXCEPTION 'ji rollback';
  EXCEPTION WHEN OTHERS THEN
    IF SQLERRM = 'ji rollback' THEN
      RETURN result;
    END IF;
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
  END;
END $$;

CREATE TABLE ji_case (n serial, name text, e text);
INSERT INTO ji_case (name, e) VALUES
  ('repeated keys: the last wins', '{"op": "c", "after": {"id": 2, "t": "a", "t": "b"}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 200, "lsn": 201}}'),
  ('numbers as numeric prints them', '{"op": "c", "after": {"id": 3e0, "n": 1.50e1, "t": 12.0}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 2e2, "txId": "7", "ts_ms": 1.0E+3}}'),
  ('json, array, bool and escapes', '{"op": "c", "after": {"id": 4, "j": {"b": [1, 2.0, {"c": null}], "a": "x\u0001\"y"}, "a": [1, 2, 3], "b": true, "t": "line\nnext \"q\" \u00e9 \\"}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 300}}'),
  ('unread members of every kind', '{"op": "c", "after": {"id": 5}, "ts_us": [[[1]], {"x": 1.5}], "source": {"version": {"v": [1]}, "sequence": "[\"1\"]", "xmin": null, "name": "ji", "table": "ji", "schema": "public", "lsn": 400, "ts_ns": 1}, "transaction": {"id": "tx", "total_order": 2, "data_collection_order": 1}}'),
  ('the JsonConverter wrapper with a schema', '{"schema": {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [{"field": "id", "type": "int32"}, {"field": "n", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}]}]}, "payload": {"op": "c", "after": {"id": 6, "n": "AN6m"}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 500}}}'),
  ('an update of the row', '{"op": "u", "before": {"id": 1}, "after": {"id": 1, "t": "uno", "j": [1, {"z": "w"}]}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 600}}'),
  ('same version, other content: a conflict with its image', '{"op": "u", "after": {"id": 1, "t": "other", "j": {"k": [true]}}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 100}}'),
  ('a delete of a row never had: the before-image published', '{"op": "d", "before": {"id": 99, "t": "gone", "j": {"k": [1, "2"]}, "a": [7]}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 700}}'),
  ('a truncate', '{"op": "t", "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 800}}'),
  ('heartbeat', '{"ts_ms": 5}'),
  ('transaction marker', '{"status": "BEGIN", "id": "571", "ts_ms": 1}'),
  ('tombstone', 'null'),
  ('logical decoding message', '{"op": "m", "message": {"prefix": "p"}}'),
  ('not an object', '[1, 2]'),
  ('a string event', '"c"'),
  ('op not a string', '{"op": 7, "after": {"id": 1}}'),
  ('unknown op', '{"op": "x", "after": {"id": 1}}'),
  ('after not an object', '{"op": "c", "after": "x", "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1}}'),
  ('after missing', '{"op": "c", "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1}}'),
  ('before missing', '{"op": "d", "after": {"id": 1}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1}}'),
  ('source not an object', '{"op": "c", "after": {"id": 1}, "source": [1]}'),
  ('source.lsn not an LSN', '{"op": "c", "after": {"id": 1}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": {"x": [1, 2]}}}'),
  ('source.lsn above bigint', '{"op": "c", "after": {"id": 1}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 99999999999999999999}}'),
  ('source.name not a string', '{"op": "c", "after": {"id": 1}, "source": {"name": 5.50, "table": "ji", "schema": "public", "lsn": 1}}'),
  ('source.snapshot unknown', '{"op": "r", "after": {"id": 1}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1, "snapshot": "maybe"}}'),
  ('source.txId not an integer', '{"op": "c", "after": {"id": 1}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1, "txId": 1.5}}'),
  ('transaction.total_order out of range', '{"op": "c", "after": {"id": 1}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1}, "transaction": {"id": "t", "total_order": 2147483648}}'),
  ('a field without a column', '{"op": "c", "after": {"id": 8, "zz": 1}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1}}'),
  ('a value the column refuses', '{"op": "c", "after": {"id": 9, "b": "perhaps"}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1}}'),
  ('an object for an integer column', '{"op": "c", "after": {"id": {"v": 1}}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1}}'),
  ('nested deeper than 1000 levels in an unread member', '{"op": "c", "after": {"id": 10}, "ts_us": ' || repeat('[', 1000) || repeat(']', 1000) || ', "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1}}'),
  ('an event over 4 MB (read into a tree, its jsonb freed first)', '{"op": "c", "after": {"id": 12, "t": "' || repeat('x', 4200000) || '", "t": "last", "j": {"k": "' || repeat('y', 100) || '"}}, "ts_us": [[1]], "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1200, "lsn": 1201, "txId": 1e1}}'),
  ('an event over 4 MB with an error', '{"op": "c", "after": {"id": 13, "t": "' || repeat('x', 4200000) || '"}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": {"bad": 1}}}'),
  ('1000 levels in a batch, with a json column', '{"op": "c", "after": {"id": 11, "j": ' || repeat('[', 997) || repeat(']', 997) || '}, "source": {"name": "ji", "table": "ji", "schema": "public", "lsn": 1}}');

-- every form gives what the text form gives
SELECT c.n, c.name,
       ji_try(c.e, 'jsonb') = ji_try(c.e, 'text') AS jsonb_as_text,
       ji_try(c.e, 'batch_jsonb') = ji_try(c.e, 'batch_text') AS batch_jsonb_as_text,
       ji_try(c.e, 'batch_array') = ji_try(c.e, 'batch_text') AS batch_array_as_text
  FROM ji_case c ORDER BY c.n;
-- what they give (the jsonb form; error contexts are not shown)
\set VERBOSITY terse
SELECT c.n, left(ji_try(c.e, 'jsonb'), 600) AS jsonb_form FROM ji_case c ORDER BY c.n;

DROP FUNCTION ji_try(text, text);
DROP TABLE ji_case;
DROP TABLE ji;

--
-- new_user_s31 (fresh-user review h4, round 31): the CONTEXT line of an
-- error names the delivery key the caller passed.  Every other name an
-- error quotes from an event (a field's path, source.name, the source
-- table, an unknown op) is written as a JSON string, its control
-- characters escaped; the delivery key was copied as it came, so a key
-- holding a newline (a Kafka key read from a hostile producer, a
-- pipeline's own id) broke the CONTEXT line in two and could print a line
-- of its own choosing after it ('ERROR:  ...', a terminal escape), in the
-- client's output and in the server log.  A handler's CONTEXT line also
-- printed the key whole: a key of a megabyte made a line of a megabyte
-- (the engine's own line is cut at 200 bytes).  Now both lines show the
-- control characters of the key as JSON escapes (\n, \u001b) and cut it
-- at 200 bytes.  Nothing of a failing call is applied.  Objects: nus_*.
--
CREATE TABLE nus (id int PRIMARY KEY, v int);
CREATE FUNCTION nus_state() RETURNS TABLE (rows bigint, ledger bigint, entities bigint, outbox bigint)
LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM nus), (SELECT count(*) FROM cdc.ledger WHERE target = 'nus'::regclass),
         (SELECT count(*) FROM cdc.entity_state WHERE target = 'nus'::regclass),
         (SELECT count(*) FROM cdc.outbox WHERE target = 'nus'::regclass) $$;
SELECT target FROM cdc.register_mapping('nus', source_schema => 'public', source_table => 'nus', outbox => true);
-- a value the column refuses, under a delivery key with a newline, a quote and an escape character
SELECT cdc_apply(dbz('c', 'nus', '{"id": 1, "v": "x"}', '0/10', 1), NULL, E'topic:0:7"\nERROR:  forged \x1b[31mline');
SELECT cdc_apply(dbz('c', 'nus', '{"id": 1, "v": "x"}', '0/10', 1)::text, NULL, E'tab\there\r\x7f');
-- the batch: the element's key, the same way
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'nus', '{"id": 1, "v": 1}', '0/10', 1),
                                                dbz('c', 'nus', '{"id": 2, "v": "x"}', '0/20', 2)),
                              NULL, ARRAY['k1', E'k2\nERROR:  forged']);
-- a source partition (the key is partition:offset)
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'nus', '{"id": 2, "v": "x"}', '0/20', 2)),
                              NULL, source_partition => E'orders\n0', offsets => ARRAY[5]);
SELECT * FROM nus_state();
-- a key without control characters reads as before
SELECT cdc_apply(dbz('c', 'nus', '{"id": 1, "v": "x"}', '0/10', 1), NULL, 'orders:0:3:1187');
-- a handler's error: its CONTEXT line escapes and cuts the key as well
CREATE TABLE nus_h (id int PRIMARY KEY, v int);
CREATE FUNCTION nus_handler(op text, old nus_h, new nus_h, meta jsonb) RETURNS void
LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'handler refuses %', new.id USING ERRCODE = 'P0001'; END $$;
SELECT target FROM cdc.register_mapping('nus_h', mode => 'handler', handler => 'nus_handler(text, nus_h, nus_h, jsonb)');
\set VERBOSITY terse
DO $$
DECLARE ctx text;
BEGIN
  PERFORM cdc_apply(dbz('c', 'nus_h', '{"id": 1, "v": 1}', '0/10', 1), NULL, E'h\nERROR:  forged');
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT;
  RAISE NOTICE '% line(s) name the key: %', (SELECT count(*) FROM regexp_split_to_table(ctx, E'\n') l WHERE l LIKE '%delivery key%'),
    (SELECT string_agg(substr(l, strpos(l, 'delivery key')), ' | ') FROM regexp_split_to_table(ctx, E'\n') l WHERE l LIKE '%delivery key%');
  RAISE NOTICE 'a line starts with ERROR: %', ctx ~ E'\nERROR';
END $$;
DO $$
DECLARE ctx text;
BEGIN
  PERFORM cdc_apply(dbz('c', 'nus_h', '{"id": 1, "v": 1}', '0/10', 1), NULL, repeat('k', 100000));
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT;
  RAISE NOTICE 'lines naming the key: %, each under 500 bytes: %', (SELECT count(*) FROM regexp_split_to_table(ctx, E'\n') l WHERE l LIKE '%delivery key%'),
    (SELECT bool_and(octet_length(l) < 500) FROM regexp_split_to_table(ctx, E'\n') l WHERE l LIKE '%delivery key%');
END $$;
\set VERBOSITY default
SELECT (SELECT count(*) FROM nus_h) AS rows, (SELECT count(*) FROM cdc.ledger WHERE target = 'nus_h'::regclass) AS ledger;
--
-- The same for a value an input function refuses: PostgreSQL's message
-- quotes the value as it came, and a value with a newline printed a line of
-- its own after it.  The message (cdc_apply's prefix naming the field and
-- column, then the input function's) now shows the value's control
-- characters as JSON escapes, as the decoder's own messages do (a bad
-- base64 value, an integer field given a string).
CREATE TABLE nus_v (id int PRIMARY KEY, n int, b boolean, a int[], ts timestamp);
SELECT cdc_apply(dbz('c', 'nus_v', jsonb_build_object('id', 1, 'n', E'7\nERROR:  forged'), '0/10', 1), 'nus_v');
SELECT cdc_apply(dbz('c', 'nus_v', jsonb_build_object('id', 1, 'b', E'yes\r\nno'), '0/10', 1)::text, 'nus_v');
SELECT cdc_apply(dbz('c', 'nus_v', jsonb_build_object('id', 1, 'a', jsonb_build_array(1, E'2\nERROR:  forged')), '0/10', 1), 'nus_v');
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'nus_v', '{"id": 1, "n": 1}', '0/10', 1),
                                                dbz('c', 'nus_v', jsonb_build_object('id', 2, 'ts', E'2024-01-01\t\x1b[2J'), '0/20', 2)), 'nus_v');
-- a key column: refused before anything is claimed, the same message
SELECT cdc_apply(dbz('c', 'nus_v', jsonb_build_object('id', E'1\nERROR:  forged'), '0/10', 1), 'nus_v');
-- a long value: cut at 40 bytes as before, then escaped
SELECT cdc_apply(dbz('c', 'nus_v', jsonb_build_object('id', 1, 'n', E'\n' || repeat('9', 60)), '0/10', 1), 'nus_v');
SELECT (SELECT count(*) FROM nus_v) AS rows, (SELECT count(*) FROM cdc.ledger WHERE target = 'nus_v'::regclass) AS ledger,
       (SELECT count(*) FROM cdc.entity_state WHERE target = 'nus_v'::regclass) AS entities;
--
-- A JsonConverter wrapper with a top-level "op": null.  JSON null counts as
-- absent for the envelope's fields ("op" among them: an event whose op is
-- null is "field "op" is missing"), but the wrapper was told by "op" being
-- absent, so {"schema", "payload", "op": null} was read as a bare payload
-- and refused with 'field "op" is missing' while its payload had one.  Now
-- it is a wrapper, as without the member, in both forms and the batch; a
-- top-level "op" that is not null still makes the object the payload.
CREATE TABLE nus_w (id int PRIMARY KEY, v text);
SELECT cdc_apply(jsonb_build_object('schema', NULL, 'op', NULL, 'payload', dbz('c', 'nus_w', '{"id": 1, "v": "a"}', '0/10', 1)), 'nus_w');
SELECT cdc_apply(jsonb_build_object('schema', NULL, 'op', NULL, 'payload', dbz('c', 'nus_w', '{"id": 2, "v": "b"}', '0/20', 2))::text, 'nus_w');
SELECT events, applied FROM cdc_apply_batch(jsonb_build_array(jsonb_build_object('schema', NULL, 'op', NULL, 'payload', dbz('c', 'nus_w', '{"id": 3, "v": "c"}', '0/30', 3))), 'nus_w');
SELECT cdc_apply(jsonb_build_object('schema', NULL, 'op', 'c', 'payload', dbz('c', 'nus_w', '{"id": 4, "v": "d"}', '0/40', 4)), 'nus_w');
SELECT * FROM nus_w ORDER BY id;

--
-- jsonb_number_datums (issue 13, twenty-first round): a differential test
-- of JSON numbers given as jsonb.  The jsonb intake reads a number as
-- numeric_out's text of the jsonb's numeric, and the column's input function
-- parses that text again; taking an integer or numeric column's Datum from
-- the numeric itself was tried and not kept (docs/benchmarks.md,
-- twenty-first round): this guards any such change.  Every number of a
-- generated set (type limits and one past, negative zero, exponents,
-- fractions, many digits, values a typmod rounds or overflows) goes into
-- int2, int4, int8, numeric, numeric(p,s) (a negative scale too), float4,
-- float8 and a domain over int4 columns through cdc_apply() and
-- cdc_apply_batch() (jsonb forms), and is compared with the cast of the
-- jsonb's text of the number to the column's type: the same value, or the
-- same SQLSTATE and message (after 'field ... (column ...): ').  Then the
-- events of the numbers every column takes go through the jsonb forms and
-- through the text form of the same envelope (the text tree, whose numbers
-- are those texts): the same rows, outbox payloads and content hashes.
-- Every mismatch is listed; none is expected.
--
CREATE DOMAIN jnd_pos AS int4 CHECK (VALUE > 0);
CREATE TABLE jnd_t (id integer PRIMARY KEY, i2 int2, i4 int4, i8 int8, n numeric, n52 numeric(5,2), n3 numeric(3),
                    nneg numeric(4,-2), f4 float4, f8 float8, d jnd_pos);
SELECT target FROM cdc.register_mapping('jnd_t', outbox => true);
-- a numeric key: the entity key's text comes from the Datum
CREATE TABLE jnd_k (k numeric PRIMARY KEY, v int8);
SELECT target FROM cdc.register_mapping('jnd_k', outbox => true);
CREATE SEQUENCE jnd_id;
CREATE TABLE jnd_numbers (x text PRIMARY KEY);
INSERT INTO jnd_numbers
SELECT unnest(ARRAY['0','-0','0.0','-0.0','0e5','-0e-5','1','-1','1.0','1.00','-1.0','1.5','-1.5','0.5','-0.5','2.5',
  '1e3','1E+3','1e-3','1.5e1','-1.5E1','12.345','999.994','999.995','-999.995','999.99','1000','99.999','0.005','0.004',
  '-0.005','49','50','-50','151','-150','9999','9950','9949','10049','127','128','255','256',
  '32767','32768','-32768','-32769','2147483647','2147483648','-2147483648','-2147483649','4294967296',
  '9223372036854775807','9223372036854775808','-9223372036854775808','-9223372036854775809',
  '18446744073709551616','1e20','-1e20','123456789012345678901234567890.123456789','0.000000000000000000001','1e-30',
  '3.4028235e38','3.4028236e38','3.5e38','-3.5e38','1e39','1e308','1.7976931348623157e308','1.7976931348623159e308',
  '1e309','-1e309','1e-38','1.17549435e-38','1e-45','2e-45','1e-46','1e-307','5e-324','2e-324','1e-400','1e1000',
  '0.1','0.30000000000000004','16777216','16777217','9007199254740992','9007199254740993','3.14159265358979323846',
  '1.000000000000000000000000000001','100000000000000000000000000000000000000000']);

CREATE FUNCTION jnd_ev(id int, col text, x text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', 'c', 'source', jsonb_build_object('name', 'jnd', 'schema', 'public', 'table', 'jnd_t', 'lsn', 100),
    'after', jsonb_build_object('id', id, col, x::jsonb)) $$;

-- every number into every column, through cdc_apply (form 'one') or
-- cdc_apply_batch (form 'batch'), compared with the cast of the jsonb's text
-- of the number: the stored value, or the SQLSTATE and the message
CREATE FUNCTION jnd_mismatches(form text) RETURNS TABLE (x text, col text, via_apply text, via_cast text)
LANGUAGE plpgsql AS $$
DECLARE
  r record; c record; n int; got text; want text; st text; msg text; ok boolean; v text; jt text; res text;
BEGIN
  FOR r IN SELECT t.x FROM jnd_numbers t ORDER BY t.x LOOP
    jt := (r.x::jsonb)::text;
    FOR c IN SELECT attname::text AS name, format_type(atttypid, atttypmod) AS typ FROM pg_attribute
             WHERE attrelid = 'jnd_t'::regclass AND attnum > 1 AND NOT attisdropped ORDER BY attnum LOOP
      n := nextval('jnd_id');
      BEGIN
        EXECUTE format('SELECT (%L::%s)::text', jt, c.typ) INTO v;
        want := 'value ' || coalesce(v, 'NULL');
      EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
        -- as cdc_apply words it (today's behaviour, kept): a value over 40
        -- bytes quoted cut, the domain named with its schema
        IF length(jt) > 40 THEN
          msg := replace(msg, jt, left(jt, 40) || '...');
        END IF;
        msg := replace(msg, 'domain jnd_pos ', 'domain public.jnd_pos ');
        want := st || ' ' || msg;
      END;
      BEGIN
        IF form = 'one' THEN
          res := cdc_apply(jnd_ev(n, c.name, r.x));
        ELSE
          SELECT b.outcomes[1] INTO res FROM cdc_apply_batch(jsonb_build_array(jnd_ev(n, c.name, r.x)), with_outcomes => true) b;
        END IF;
        IF res IS DISTINCT FROM 'applied' THEN
          got := 'not applied: ' || coalesce(res, 'NULL');
        ELSE
          EXECUTE format('SELECT %I::text FROM jnd_t WHERE id = $1', c.name) INTO v USING n;
          got := 'value ' || coalesce(v, 'NULL');
          -- the same value, not only the same text
          EXECUTE format('SELECT %I IS NOT DISTINCT FROM %L::%s FROM jnd_t WHERE id = $1', c.name, jt, c.typ) INTO ok USING n;
          IF NOT ok THEN got := got || ' (another value)'; END IF;
        END IF;
      EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
        IF msg LIKE format('field "after.%s" (column "%s" of type %%): %%', c.name, c.name) THEN
          msg := substr(msg, strpos(msg, '): ') + 3);
        ELSE
          msg := 'unexpected form: ' || msg;
        END IF;
        got := st || ' ' || msg;
      END;
      IF got IS DISTINCT FROM want THEN
        x := r.x; col := c.name; via_apply := got; via_cast := want;
        RETURN NEXT;
      END IF;
    END LOOP;
  END LOOP;
  -- what this left (several thousand entity records would slow jnd_try's hashes down)
  DELETE FROM jnd_t;
  DELETE FROM cdc.outbox WHERE target = 'jnd_t'::regclass;
  DELETE FROM cdc.entity_state WHERE target = 'jnd_t'::regclass;
END $$;
SELECT count(*) AS numbers FROM jnd_numbers;
SELECT * FROM jnd_mismatches('one');
SELECT * FROM jnd_mismatches('batch');

-- the same messages in full once (the field and the column named), for the record
SELECT cdc_apply(jnd_ev(1, 'i4', '1.5'));
SELECT cdc_apply(jnd_ev(1, 'i2', '32768'));
SELECT cdc_apply(jnd_ev(1, 'n52', '999.995'));
SELECT cdc_apply(jnd_ev(1, 'd', '-0'));
SELECT cdc_apply_batch(jsonb_build_array(jnd_ev(1, 'i8', '9223372036854775808')));

-- What one event (text `e`) in form `form` leaves: rows, outbox payloads and
-- content hashes of both tables, or the error; rolled back.
CREATE FUNCTION jnd_try(e text, form text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  result text;
BEGIN
  BEGIN
    result := CASE form
      WHEN 'jsonb' THEN cdc_apply(e::jsonb)
      WHEN 'text' THEN cdc_apply(e)
      WHEN 'batch_jsonb' THEN (SELECT b.outcomes[1] FROM cdc_apply_batch(('[' || e || ']')::jsonb, with_outcomes => true) b)
      WHEN 'batch_array' THEN (SELECT b.outcomes[1] FROM cdc_apply_batch(ARRAY[e::jsonb], with_outcomes => true) b)
      WHEN 'batch_text' THEN (SELECT b.outcomes[1] FROM cdc_apply_batch('[' || e || ']', with_outcomes => true) b) END;
    result := result
      || ' rows ' || coalesce((SELECT string_agg(to_jsonb(r)::text, ', ' ORDER BY r.id) FROM jnd_t r), '-')
      || ' keyrows ' || coalesce((SELECT string_agg(to_jsonb(r)::text, ', ' ORDER BY r.k) FROM jnd_k r), '-')
      || ' outbox ' || coalesce((SELECT string_agg(o.op || ' ' || o.payload::text, ', ' ORDER BY o.id) FROM cdc.outbox o
                                 WHERE o.target IN ('jnd_t'::regclass, 'jnd_k'::regclass)), '-')
      || ' hashes ' || coalesce((SELECT string_agg(cdc.entity_key_json(en.target, en.key)::text || '=' || en.chash, ', '
                                                   ORDER BY cdc.entity_key_json(en.target, en.key)::text)
                                  FROM cdc.entity_state en WHERE en.target IN ('jnd_t'::regclass, 'jnd_k'::regclass)), '-');
    RAISE EXCEPTION 'jnd rollback';
  EXCEPTION WHEN OTHERS THEN
    IF SQLERRM = 'jnd rollback' THEN
      RETURN result;
    END IF;
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
  END;
END $$;

-- per number: an event with every column that takes it (the cast decides),
-- and one of the numeric-keyed table, through the jsonb forms and the text
-- form of the jsonb's text
CREATE FUNCTION jnd_takes(jt text, typ text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('SELECT %L::%s', jt, typ);
  RETURN true;
EXCEPTION WHEN OTHERS THEN
  RETURN false;
END $$;
CREATE TABLE jnd_events (x text, e text);
INSERT INTO jnd_events
SELECT t.x, (jsonb_build_object('op', 'c', 'source', jsonb_build_object('name', 'jnd', 'schema', 'public', 'table', 'jnd_t', 'lsn', 200),
         'after', jsonb_build_object('id', 1) || coalesce((SELECT jsonb_object_agg(a.attname, t.x::jsonb) FROM pg_attribute a
                                                           WHERE a.attrelid = 'jnd_t'::regclass AND a.attnum > 1 AND NOT a.attisdropped
                                                             AND jnd_takes((t.x::jsonb)::text, format_type(a.atttypid, a.atttypmod))), '{}')))::text
FROM jnd_numbers t
UNION ALL
SELECT t.x, (jsonb_build_object('op', 'c', 'source', jsonb_build_object('name', 'jnd', 'schema', 'public', 'table', 'jnd_k', 'lsn', 200),
         'after', jsonb_build_object('k', t.x::jsonb, 'v', CASE WHEN jnd_takes((t.x::jsonb)::text, 'int8') THEN t.x::jsonb ELSE '0' END)))::text
FROM jnd_numbers t;
SELECT count(*) AS events, count(*) FILTER (WHERE jnd_try(e, 'jsonb') LIKE 'applied rows %') AS applied FROM jnd_events;
SELECT ev.x, f.form, jnd_try(ev.e, f.form) AS via_form, jnd_try(ev.e, 'text') AS via_text
FROM jnd_events ev, unnest(ARRAY['jsonb', 'batch_jsonb', 'batch_array', 'batch_text']) f(form)
WHERE jnd_try(ev.e, f.form) IS DISTINCT FROM jnd_try(ev.e, 'text');
-- an update of a row through each form: the hash of the new image, the outbox's before and after
SELECT count(*) AS updates,
       count(*) FILTER (WHERE a.jsonb_form IS DISTINCT FROM a.text_form) AS mismatches
FROM (SELECT jnd_try(replace(replace(ev.e, '"op": "c"', '"op": "u"'), '"lsn": 200', '"lsn": 300'), 'jsonb') AS jsonb_form,
             jnd_try(replace(replace(ev.e, '"op": "c"', '"op": "u"'), '"lsn": 200', '"lsn": 300'), 'text') AS text_form
      FROM jnd_events ev) a;

DROP FUNCTION jnd_try(text, text);
DROP FUNCTION jnd_takes(text, text);
DROP FUNCTION jnd_mismatches(text);
DROP FUNCTION jnd_ev(int, text, text);
DROP TABLE jnd_events, jnd_numbers;
SELECT cdc.unregister_mapping('jnd_t');
SELECT cdc.unregister_mapping('jnd_k');
DROP TABLE jnd_t, jnd_k;
DROP SEQUENCE jnd_id;
DROP DOMAIN jnd_pos;

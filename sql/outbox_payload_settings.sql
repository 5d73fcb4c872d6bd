--
-- outbox_payload_settings: the outbox payload of a change does not depend
-- on the applying session's bytea_output, IntervalStyle, DateStyle or
-- extra_float_digits: every row image the engine makes is printed with the
-- settings the worker pins (docs/semantics.md, "The outbox payload's
-- text"; src/pg/apply/outbox.hpp).  Found by review: the same event gave
-- "b":"\\xdeadbeef", "iv":"1 day 02:00:00" in a default session and
-- "b":"\\336\\255\\276\\357", "iv":"1 2:00:00" with bytea_output escape and
-- IntervalStyle sql_standard.  The same changes (other keys) are applied
-- in four sessions' settings through cdc_apply() (jsonb and text forms),
-- cdc_apply_batch() (merged chains, deletes) and a delete, into targets
-- whose payloads are built each way: from the image (built-in types; and
-- through to_jsonb with a range, an array and a type with a cast to json),
-- read back from the statement (a generated column), a history table, a
-- jsonb handler and a message outbox.  The payloads without the key are
-- equal; the target's triggers see the caller's settings; the caller's
-- settings are unchanged afterwards, also after an error raised while the
-- payload was built.  TimeZone stays the session's (fixed here).  Tables
-- of this suite are called ops_*.
--
SET TimeZone = 'UTC';
CREATE TYPE ops_e AS ENUM ('ok', 'bad');
-- a cast to json, which to_jsonb calls for the type: shows the settings the payload is built with
CREATE FUNCTION ops_e_json(ops_e) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
  IF $1 = 'bad' THEN
    RAISE EXCEPTION 'ops_e bad (IntervalStyle %)', current_setting('IntervalStyle');
  END IF;
  RETURN to_json(format('%s %s %s %s', interval '1 day 2 hours', '\xdead'::bytea, date '2024-03-01',
                        0.1::float8 + 0.2::float8));
END $$;
CREATE CAST (ops_e AS json) WITH FUNCTION ops_e_json(ops_e);
CREATE TABLE ops_f (id int PRIMARY KEY, b bytea, iv interval, f float8, d date, ts timestamp, tz timestamptz);
CREATE TABLE ops_r (id int PRIMARY KEY, b bytea, iv interval, f float8, dr daterange, tsr tsrange, fa float8[], e ops_e);
CREATE TABLE ops_g (id int PRIMARY KEY, b bytea, iv interval, f float8, dr daterange, g int GENERATED ALWAYS AS (length(b)) STORED);
CREATE TABLE ops_h (id int, b bytea, iv interval, f float8, dr daterange, cdc_key jsonb, cdc_version bigint[], cdc_op text,
                    UNIQUE (cdc_key, cdc_version));
CREATE TABLE ops_j (id int PRIMARY KEY, b bytea, iv interval, f float8, dr daterange);
CREATE TABLE ops_m (id int PRIMARY KEY, b bytea, iv interval, f float8, dr daterange);
-- the settings the target's triggers see: the caller's
CREATE TABLE ops_trig_log (run int, tbl text, settings text);
CREATE FUNCTION ops_trig() RETURNS trigger LANGUAGE plpgsql SET search_path = public AS $$
BEGIN
  INSERT INTO ops_trig_log VALUES (current_setting('ops.run')::int, TG_TABLE_NAME,
    current_setting('IntervalStyle') || ' ' || current_setting('bytea_output') || ' ' ||
    current_setting('DateStyle') || ' ' || current_setting('extra_float_digits'));
  RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;
CREATE TRIGGER ops_g_trig BEFORE INSERT OR UPDATE OR DELETE ON ops_g FOR EACH ROW EXECUTE FUNCTION ops_trig();
CREATE TABLE ops_hlog (run int, op text, old jsonb, new jsonb);
CREATE FUNCTION ops_j_handler(op text, old jsonb, new jsonb, meta jsonb) RETURNS void
LANGUAGE sql AS $$ INSERT INTO public.ops_hlog VALUES (current_setting('ops.run')::int, op, old, new) $$;
SELECT target FROM cdc.register_mapping('ops_f', outbox => true);
SELECT target FROM cdc.register_mapping('ops_r', outbox => true);
SELECT target FROM cdc.register_mapping('ops_g', outbox => true);
SELECT target FROM cdc.register_mapping('ops_h', key_columns => '{id}', mode => 'history', outbox => true);
SELECT target FROM cdc.register_mapping('ops_j', mode => 'handler', handler => 'ops_j_handler(text, jsonb, jsonb, jsonb)', outbox => true);
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC;
SELECT target FROM cdc.register_mapping('ops_m', outbox => true, outbox_via => 'message');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_ops', 'test_decoding');

-- the event of change n of a run (lsn: run * 1000 + n) for table tbl
CREATE FUNCTION ops_ev(op text, tbl text, id int, lsn int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT dbz(op, tbl,
    CASE WHEN op <> 'd' THEN jsonb_build_object('id', id, 'b', '3q2+7w==', 'iv', 'P1DT2H', 'f', 0.30000000000000004,
      'd', '2024-03-01', 'ts', '2024-03-01T10:00:00.5', 'tz', '2024-03-01T10:00:00Z',
      'dr', '[2024-01-01,2024-02-01)', 'tsr', '["2024-01-01 10:00:00","2024-01-02 00:00:00")',
      'fa', jsonb_build_array(0.1, 0.30000000000000004), 'e', 'ok')
      - CASE tbl WHEN 'ops_f' THEN ARRAY['dr', 'tsr', 'fa', 'e'] WHEN 'ops_r' THEN ARRAY['d', 'ts', 'tz']
                 ELSE ARRAY['d', 'ts', 'tz', 'tsr', 'fa', 'e'] END
      - CASE WHEN op = 'u' THEN ARRAY['b'] ELSE ARRAY[]::text[] END
      || CASE WHEN op = 'u' THEN jsonb_build_object('b', 'AQI=') ELSE '{}' END END,
    '0/' || to_hex(lsn), lsn, before => CASE WHEN op = 'd' THEN jsonb_build_object('id', id) END)
$$;
-- The same changes for run k (keys 10k+1 .. 10k+4) on every table:
-- cdc_apply() jsonb, text, a batch (create, update, create and delete of
-- one key, delete of the first key), a delete alone.
CREATE FUNCTION ops_run(k int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  tbl text;
  b int := k * 10;
  l int := k * 1000;
BEGIN
  PERFORM set_config('ops.run', k::text, false);
  FOREACH tbl IN ARRAY ARRAY['ops_f', 'ops_r', 'ops_g', 'ops_h', 'ops_j', 'ops_m'] LOOP
    l := l + 100;
    PERFORM cdc_apply(ops_ev('c', tbl, b + 1, l + 1));
    PERFORM cdc_apply(ops_ev('c', tbl, b + 2, l + 2)::text);
    PERFORM cdc_apply_batch(jsonb_build_array(ops_ev('c', tbl, b + 3, l + 3), ops_ev('u', tbl, b + 3, l + 4),
                                              ops_ev('c', tbl, b + 4, l + 5), ops_ev('d', tbl, b + 4, l + 6),
                                              ops_ev('d', tbl, b + 1, l + 7)));
    PERFORM cdc_apply(ops_ev('d', tbl, b + 2, l + 8));
  END LOOP;
END $$;
CREATE TABLE ops_out (run int, tbl text, n bigint, op text, payload jsonb);
CREATE FUNCTION ops_collect(k int) RETURNS void LANGUAGE sql AS $$
  INSERT INTO ops_out SELECT k, target::text, row_number() OVER (PARTITION BY target ORDER BY id), op,
                             payload - ARRAY['id', 'cdc_key', 'cdc_version']
    FROM cdc.outbox WHERE target IN ('ops_f'::regclass, 'ops_r', 'ops_g', 'ops_h', 'ops_j') AND (payload->>'id')::int / 10 = k AND (payload->>'id')::int % 10 BETWEEN 1 AND 4;
  INSERT INTO ops_out
  SELECT k, 'ops_m', row_number() OVER (), msg->>'op', (msg->'payload') - 'id'
    FROM (SELECT substring(data FROM 'content:(.*)$')::jsonb AS msg
            FROM pg_logical_slot_get_changes('regress_ops', NULL, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')
           WHERE data LIKE 'message: transactional: 1 prefix: cdc_outbox%') m;
$$;

-- run 1: PostgreSQL's defaults (pg_regress's session has others)
SET bytea_output = 'hex'; SET IntervalStyle = 'postgres'; SET DateStyle = 'ISO, MDY'; SET extra_float_digits = 1;
SELECT ops_run(1); SELECT ops_collect(1);
-- run 2: other styles, floats rounded
SET bytea_output = 'escape'; SET IntervalStyle = 'sql_standard'; SET DateStyle = 'SQL, DMY'; SET extra_float_digits = 0;
SELECT ops_run(2); SELECT ops_collect(2);
-- run 3: more of them, the statements instead of the direct writes
SET IntervalStyle = 'iso_8601'; SET DateStyle = 'German'; SET extra_float_digits = -15; SET cdc.direct_writes = off;
SELECT ops_run(3); SELECT ops_collect(3);
-- run 4: postgres_verbose, DMY order, extra_float_digits 3 (prints as 1)
SET bytea_output = 'hex'; SET IntervalStyle = 'postgres_verbose'; SET DateStyle = 'Postgres, DMY'; SET extra_float_digits = 3;
RESET cdc.direct_writes;
SELECT ops_run(4); SELECT ops_collect(4);
-- the caller's settings are as it set them
SELECT current_setting('bytea_output') bo, current_setting('IntervalStyle') ivs, current_setting('DateStyle') ds,
       current_setting('extra_float_digits') efd, current_setting('TimeZone') tz;
RESET ALL;
SET TimeZone = 'UTC';

-- every table's payloads: one per change (6 per run), equal in every run
SELECT tbl, count(*) AS rows, count(DISTINCT run) AS runs FROM ops_out GROUP BY tbl ORDER BY tbl;
SELECT tbl, n, count(DISTINCT (op, payload)) AS distinct_payloads FROM ops_out GROUP BY tbl, n
HAVING count(DISTINCT (op, payload)) <> 1 OR count(*) <> 4 ORDER BY tbl, n;
-- what they are (run 1), the message outbox's equal to the table's
SELECT tbl, n, op, payload FROM ops_out WHERE run = 1 AND tbl IN ('ops_f', 'ops_r', 'ops_g') ORDER BY tbl, n;
SELECT tbl, n, op, payload
  FROM ops_out WHERE run = 1 AND tbl = 'ops_h' ORDER BY n;
SELECT m.n, m.payload = j.payload AS message_equals_table
  FROM ops_out m JOIN ops_out j ON j.run = m.run AND j.n = m.n AND j.tbl = 'ops_j' WHERE m.tbl = 'ops_m' AND m.run = 3 ORDER BY m.n;
-- the jsonb handler's rows: the same in every run too
SELECT op, count(DISTINCT old - 'id') AS olds, count(DISTINCT new - 'id') AS news, count(*) FROM ops_hlog GROUP BY op ORDER BY op;
SELECT op, old - 'id' AS old, new - 'id' AS new FROM ops_hlog WHERE run = 3 ORDER BY op;
-- the trigger saw each run's own settings
SELECT run, settings, count(*) FROM ops_trig_log GROUP BY run, settings ORDER BY run;

-- An error raised while the payload is built (the cast to json): the
-- caller's settings are its own afterwards, at top level and after a
-- caught error.
SET bytea_output = 'escape'; SET IntervalStyle = 'sql_standard'; SET DateStyle = 'SQL, DMY'; SET extra_float_digits = 0;
SELECT cdc_apply(jsonb_set(ops_ev('c', 'ops_r', 91, 9001), '{after,e}', '"bad"'));
SELECT current_setting('bytea_output') bo, current_setting('IntervalStyle') ivs, current_setting('DateStyle') ds,
       current_setting('extra_float_digits') efd;
DO $$
BEGIN
  PERFORM cdc_apply_batch(jsonb_build_array(jsonb_set(ops_ev('c', 'ops_r', 92, 9002), '{after,e}', '"bad"')));
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'caught: %', SQLERRM;
END $$;
SELECT current_setting('bytea_output') bo, current_setting('IntervalStyle') ivs, current_setting('DateStyle') ds,
       current_setting('extra_float_digits') efd;
SELECT count(*) AS nothing_applied FROM ops_r WHERE id > 90;
RESET ALL;

SELECT pg_drop_replication_slot('regress_ops');
GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) TO PUBLIC;

--
-- key_text_settings: entity keys and content hashes of array, range,
-- multirange, composite (nested, arrays of, domains over) and money
-- columns do not depend on the applying session's TimeZone, DateStyle,
-- IntervalStyle, extra_float_digits, bytea_output and lc_monetary
-- (docs/semantics.md; src/pg/apply/image.cpp, OutputInSettledSettingsPg);
-- an error raised by an output function under the settled settings leaves
-- the session's own settings as they were; cdc._key_text() works in a
-- parallel worker.
--

CREATE TYPE kts_c AS (at timestamptz, iv interval, b bytea, f float8);
CREATE TYPE kts_n AS (p kts_c, arr timestamptz[]);
CREATE DOMAIN kts_dm AS money;
CREATE TABLE kts (a timestamptz[], r tstzrange, mr tstzmultirange, c kts_c, n kts_n, ac kts_c[], m kts_dm, PRIMARY KEY (a, r, mr, c, n, ac, m),
                 v text, nk_a timestamptz[], nk_c kts_c, nk_m money, nk_r tstzrange);
SELECT target FROM cdc.register_mapping('kts', outbox => true);
CREATE FUNCTION kts_ev(op text, v text, lsn bigint, nk_ts text DEFAULT '2024-03-01T00:00:00Z') RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'kts', 'schema', 'public', 'table', 'kts', 'lsn', lsn, 'txId', lsn),
    'after', jsonb_build_object('a', jsonb_build_array('2024-01-01T00:00:00.25Z', '2024-06-01T12:00:00Z'),
      'r', '["2024-01-01 00:00:00+00","2024-06-01 00:00:00+00")',
      'mr', '{["2024-01-01 00:00:00+00","2024-06-01 00:00:00+00"),["2025-01-01 00:00:00+00",)}',
      'c', '("2024-01-01 00:00:00+00","1 day 02:03:04.5","\\x0102",0.1)',
      'n', '("(""2024-01-01 00:00:00+00"",""-10 mons"",""\\\\xff"",1e-07)","{""2024-01-01 00:00:00+00""}")',
      'ac', '{"(\"2024-01-01 00:00:00+00\",\"1 day\",\"\\\\x00\",2.5)"}',
      'm', 12.5, 'v', v,
      'nk_a', jsonb_build_array(nk_ts), 'nk_c', '("2024-01-01 00:00:00+00","1 day","\\x00",0.3)', 'nk_m', 7.25,
      'nk_r', '["2024-01-01 00:00:00+00",)')) $$;
SET TimeZone='UTC'; SET DateStyle='ISO, MDY';
SELECT cdc_apply(kts_ev('c', 'new', 2000), NULL, 'k-2000') AS first;
SET TimeZone='America/St_Johns'; SET DateStyle='SQL, DMY'; SET IntervalStyle='iso_8601'; SET extra_float_digits=-10; SET bytea_output='escape'; SET lc_monetary='C.utf8';
SELECT cdc_apply(kts_ev('u', 'OLD', 1000), NULL, 'k-1000') AS older_elsewhere;
SELECT applied, stale FROM cdc_apply_batch(jsonb_build_array(kts_ev('u', 'OLD-b', 1500)));
SELECT cdc_apply(kts_ev('c', 'new', 2000), NULL, 'k-2000-again') AS same_version_other_dk;
SELECT cdc_apply(kts_ev('u', 'newer', 3000), NULL, 'k-3000') AS newer;
SET TimeZone='Pacific/Chatham'; SET DateStyle='Postgres, YMD'; SET IntervalStyle='sql_standard';
SELECT cdc_apply(kts_ev('u', 'newer', 3000), NULL, 'k-3000-again') AS same_version_other_dk2;
SELECT applied, duplicate FROM cdc_apply_batch(jsonb_build_array(kts_ev('u', 'newer', 3000)), NULL, ARRAY['k-3000-b']);
SELECT current_setting('TimeZone') tz, current_setting('DateStyle') ds, current_setting('IntervalStyle') ivs, current_setting('extra_float_digits') efd, current_setting('bytea_output') bo, current_setting('lc_monetary') lm;
RESET ALL;
SELECT count(*) AS entity_records FROM cdc.entity_state WHERE target='kts'::regclass;
SELECT count(*) AS conflicts FROM cdc.conflicts WHERE target='kts'::regclass;
SELECT v FROM kts;
SELECT op, payload->>'v' FROM cdc.outbox WHERE target='kts'::regclass ORDER BY id;
SELECT applied, duplicate, stale, outbox_rows FROM cdc.stats WHERE target='kts'::regclass;
SELECT key = '{"{\"2024-01-01 00:00:00.25+00\",\"2024-06-01 12:00:00+00\"}","[\"2024-01-01 00:00:00+00\",\"2024-06-01 00:00:00+00\")","{[\"2024-01-01 00:00:00+00\",\"2024-06-01 00:00:00+00\"),[\"2025-01-01 00:00:00+00\",)}","(\"2024-01-01 00:00:00+00\",\"1 day 02:03:04.5\",\"\\\\x0102\",0.1)","(\"(\"\"2024-01-01 00:00:00+00\"\",\"\"-10 mons\"\",\"\"\\\\\\\\xff\"\",1e-07)\",\"{\"\"2024-01-01 00:00:00+00\"\"}\")","{\"(\\\"2024-01-01 00:00:00+00\\\",\\\"1 day\\\",\\\"\\\\\\\\x00\\\",2.5)\"}",$12.50}' AS settled_key
  FROM cdc.entity_state WHERE target = 'kts'::regclass;
-- cdc._key_text in SQL: the same texts under other settings
CREATE DOMAIN kts_dtzarr AS timestamptz[];
CREATE DOMAIN kts_dc AS kts_c;
CREATE TABLE kts_vals AS SELECT
  ARRAY['2024-01-01 00:00:00.25+00'::timestamptz, NULL] a,
  tstzmultirange(tstzrange('2024-01-01 00:00+00', '2024-06-01 00:00+00'), tstzrange('2025-01-01 00:00+00', NULL)) mr,
  ROW(ROW('2024-01-01 00:00+00', '1 day -02:03:04.5', '\x0102', 0.1)::kts_c, ARRAY['2024-01-01 00:00+00'::timestamptz])::kts_n n,
  ARRAY[ROW('2024-01-01 00:00+00', '1 day', '\x00', 2.5)::kts_c, NULL] ac,
  ARRAY['2024-01-01 00:00+00']::kts_dtzarr dta,
  ROW('2024-01-01 00:00+00', '1 day', '\x00', 2.5)::kts_dc dc,
  12.5::money::kts_dm dm, ARRAY[12.5::money] am,
  ARRAY[interval '1 day 2 hours'] ai, ARRAY['\x0102'::bytea] ab, ARRAY[0.1::float4, 1e-7::float4] af4, ARRAY['12:00:01.5+05'::timetz] att;
CREATE FUNCTION kts_texts() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT concat_ws(' ', cdc._key_text(a), cdc._key_text(mr), cdc._key_text(n), cdc._key_text(ac), cdc._key_text(dta), cdc._key_text(dc),
                   cdc._key_text(dm), cdc._key_text(am), cdc._key_text(ai), cdc._key_text(ab), cdc._key_text(af4), cdc._key_text(att)) FROM kts_vals $$;
SELECT kts_texts() AS settled;
CREATE TABLE kts_settled AS SELECT kts_texts() AS t;
SET TimeZone = 'America/St_Johns'; SET DateStyle = 'German, DMY'; SET IntervalStyle = 'sql_standard';
SET extra_float_digits = -15; SET bytea_output = 'escape'; SET lc_monetary = 'C.utf8';
SELECT kts_texts() = t AS same_elsewhere FROM kts_settled;
-- in a parallel worker
SET force_parallel_mode = on;
EXPLAIN (COSTS OFF) SELECT kts_texts() = t AS same_in_parallel_worker FROM kts_settled;
SELECT kts_texts() = t AS same_in_parallel_worker FROM kts_settled;
CREATE TABLE kts_par AS SELECT g, '2024-01-01 00:00+00'::timestamptz + g * interval '1 hour' AS at FROM generate_series(1, 1000) g;
ANALYZE kts_par;
SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT cdc._key_text(ARRAY[at]) FROM kts_par WHERE g > 0;
SELECT count(DISTINCT cdc._key_text(ARRAY[at])) AS texts, min(cdc._key_text(tstzrange(at, at + interval '1 hour'))) AS first_range,
       min(cdc._key_text(ROW(at, '1 day', '\x00', 0.1)::kts_c)) AS first_composite FROM kts_par WHERE g > 0;
RESET force_parallel_mode; RESET parallel_setup_cost; RESET parallel_tuple_cost; RESET min_parallel_table_scan_size;
SELECT current_setting('TimeZone') tz, current_setting('DateStyle') ds, current_setting('IntervalStyle') ivs,
       current_setting('extra_float_digits') efd, current_setting('bytea_output') bo, current_setting('lc_monetary') lm;
-- An output function that raises an error under the settled settings (a
-- type whose output is enum_out: any value not an enum label's OID): the
-- session's settings are its own afterwards, after ROLLBACK TO SAVEPOINT
-- and inside a PL/pgSQL exception block.
CREATE TYPE kts_err;
CREATE FUNCTION kts_err_in(cstring) RETURNS kts_err LANGUAGE internal IMMUTABLE STRICT AS 'int4in';
CREATE FUNCTION kts_err_out(kts_err) RETURNS cstring LANGUAGE internal IMMUTABLE STRICT AS 'enum_out';
CREATE TYPE kts_err (INPUT = kts_err_in, OUTPUT = kts_err_out, INTERNALLENGTH = 4, PASSEDBYVALUE, ALIGNMENT = int4);
CREATE TYPE kts_ec AS (at timestamptz, e kts_err);
SET TimeZone = 'Asia/Tokyo';
SELECT cdc._key_text(ROW('2024-01-01 00:00+00', '5')::kts_ec);
BEGIN;
SAVEPOINT s;
SELECT cdc._key_text(ARRAY[ROW('2024-01-01 00:00+00', '5')::kts_ec]);
ROLLBACK TO SAVEPOINT s;
SELECT current_setting('TimeZone') tz, current_setting('DateStyle') ds, current_setting('IntervalStyle') ivs,
       current_setting('extra_float_digits') efd, current_setting('bytea_output') bo, current_setting('lc_monetary') lm;
DO $$ BEGIN
  BEGIN
    PERFORM cdc._key_text(ROW('2024-01-01 00:00+00', '5')::kts_ec);
  EXCEPTION WHEN others THEN
    RAISE NOTICE 'caught "%"; TimeZone %, DateStyle %, IntervalStyle %, extra_float_digits %, bytea_output %', SQLERRM,
      current_setting('TimeZone'), current_setting('DateStyle'), current_setting('IntervalStyle'),
      current_setting('extra_float_digits'), current_setting('bytea_output');
  END;
END $$;
COMMIT;
-- through the engine: the column's text for the content hash
CREATE TABLE kts_e (id int PRIMARY KEY, c kts_ec);
SELECT target FROM cdc.register_mapping('kts_e');
BEGIN;
SAVEPOINT s;
SELECT cdc_apply(jsonb_build_object('op', 'c', 'source', jsonb_build_object('name', 'kts', 'schema', 'public', 'table', 'kts_e', 'lsn', 1, 'txId', 1),
                                    'after', jsonb_build_object('id', 1, 'c', '("2024-01-01 00:00:00+00",5)')));
ROLLBACK TO SAVEPOINT s;
SELECT applied FROM cdc_apply_batch(jsonb_build_array(jsonb_build_object('op', 'c', 'source', jsonb_build_object('name', 'kts', 'schema', 'public', 'table', 'kts_e', 'lsn', 1, 'txId', 1),
                                    'after', jsonb_build_object('id', 1, 'c', '("2024-01-01 00:00:00+00",5)'))));
ROLLBACK TO SAVEPOINT s;
SELECT current_setting('TimeZone') tz, current_setting('DateStyle') ds, current_setting('IntervalStyle') ivs,
       current_setting('extra_float_digits') efd, current_setting('bytea_output') bo, current_setting('lc_monetary') lm;
COMMIT;
RESET ALL;
DROP TABLE kts, kts_vals, kts_settled, kts_par, kts_e;
DROP FUNCTION kts_texts(), kts_ev(text, text, bigint, text);
DROP DOMAIN kts_dtzarr, kts_dc, kts_dm;
DROP TYPE kts_n, kts_c, kts_ec, kts_err CASCADE;

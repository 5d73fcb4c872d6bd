--
-- decoding: Debezium value decoding, end to end through cdc_apply().
--   * with a `schema` block: the Debezium semantic type decides (Decimal,
--     VariableScaleDecimal, Date, MicroTime, MicroTimestamp into timestamp
--     and timestamptz, ZonedTimestamp, Json, Uuid, bytes, arrays);
--   * without a schema: the destination column type decides; ambiguous input
--     is an error naming the field and the setting to use.
-- Rows are printed in ISO style; timestamptz values are shown in UTC and in
-- the session zone, which is not UTC, to prove that nothing depends on it.
--
SET datestyle = 'ISO, YMD';
SET timezone = 'America/New_York';
SET intervalstyle = 'postgres';

-- dec_event(op, table, after, fields, lsn): a JsonConverter envelope whose
-- before/after schemas are the struct of `fields` (Connect field schemas).
CREATE FUNCTION dec_event(op text, tbl text, after jsonb, fields jsonb, lsn text) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
    'schema', jsonb_build_object('type', 'struct', 'optional', false, 'name', 'srv.public.' || tbl || '.Envelope',
      'fields', jsonb_build_array(
        jsonb_build_object('type', 'struct', 'optional', true, 'name', 'srv.public.' || tbl || '.Value',
                           'field', 'before', 'fields', fields),
        jsonb_build_object('type', 'struct', 'optional', true, 'name', 'srv.public.' || tbl || '.Value',
                           'field', 'after', 'fields', fields),
        jsonb_build_object('type', 'string', 'optional', false, 'field', 'op'))),
    'payload', dbz(op, tbl, after, lsn, 1))
$$;

-- ---------------------------------------------------------------------------
-- 1. With a schema block
-- ---------------------------------------------------------------------------
CREATE TABLE dec_typed (
  id     int PRIMARY KEY,
  amount numeric(12,2),      -- org.apache.kafka.connect.data.Decimal, scale 2
  big    numeric,            -- Decimal, scale 5, 30 digits
  vsd    numeric,            -- io.debezium.data.VariableScaleDecimal
  d      date,               -- io.debezium.time.Date
  t      time,               -- io.debezium.time.MicroTime
  ts     timestamp,          -- io.debezium.time.MicroTimestamp
  tstz   timestamptz,        -- io.debezium.time.MicroTimestamp (UTC)
  zts    timestamptz,        -- io.debezium.time.ZonedTimestamp
  j      jsonb,              -- io.debezium.data.Json
  u      uuid,               -- io.debezium.data.Uuid
  b      bytea,              -- bytes (base64)
  ia     int[],              -- array of int32
  ta     text[]              -- array of string
);

CREATE TABLE dec_typed_fields AS SELECT '[
  {"type": "int32", "optional": false, "field": "id"},
  {"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
   "parameters": {"scale": "2", "connect.decimal.precision": "12"}, "field": "amount"},
  {"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
   "parameters": {"scale": "5"}, "field": "big"},
  {"type": "struct", "optional": true, "name": "io.debezium.data.VariableScaleDecimal", "version": 1,
   "fields": [{"type": "int32", "optional": false, "field": "scale"}, {"type": "bytes", "optional": false, "field": "value"}],
   "field": "vsd"},
  {"type": "int32", "optional": true, "name": "io.debezium.time.Date", "version": 1, "field": "d"},
  {"type": "int64", "optional": true, "name": "io.debezium.time.MicroTime", "version": 1, "field": "t"},
  {"type": "int64", "optional": true, "name": "io.debezium.time.MicroTimestamp", "version": 1, "field": "ts"},
  {"type": "int64", "optional": true, "name": "io.debezium.time.MicroTimestamp", "version": 1, "field": "tstz"},
  {"type": "string", "optional": true, "name": "io.debezium.time.ZonedTimestamp", "version": 1, "field": "zts"},
  {"type": "string", "optional": true, "name": "io.debezium.data.Json", "version": 1, "field": "j"},
  {"type": "string", "optional": true, "name": "io.debezium.data.Uuid", "version": 1, "field": "u"},
  {"type": "bytes", "optional": true, "field": "b"},
  {"type": "array", "optional": true, "items": {"type": "int32", "optional": true}, "field": "ia"},
  {"type": "array", "optional": true, "items": {"type": "string", "optional": true}, "field": "ta"}
]'::jsonb AS f;

-- Row 1: 12345 (MDk=) scale 2 = 123.45; 123456789012345678901234567890
-- scale 5; VariableScaleDecimal 1234567 (EtaH) scale 3 = 1234.567;
-- 19000 days = 2022-01-08; 45296789012 us = 12:34:56.789012;
-- 1559033904863123 us = 2019-05-28 08:58:24.863123 (UTC).
SELECT cdc_apply(dec_event('c', 'dec_typed', '{
  "id": 1, "amount": "MDk=", "big": "AY7pD/bDc+DuTj8K0g==", "vsd": {"scale": 3, "value": "EtaH"},
  "d": 19000, "t": 45296789012, "ts": 1559033904863123, "tstz": 1559033904863123,
  "zts": "2019-05-28T08:58:24.863123Z", "j": "{\"a\": [1, 2], \"b\": null}",
  "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "b": "3q2+7wD/", "ia": [1, 2, 3],
  "ta": ["a", "b c", null, "\"q\"", "NULL", ""]}', f, '0/1000'), 'dec_typed')
  FROM dec_typed_fields;

-- Row 2: negative and pre-epoch values, zoned timestamp with an offset,
-- nulls, empty arrays: -12345 (z8c=) = -123.45; -5 (+w==) scale 5;
-- VariableScaleDecimal 0 scale 0; -1 day = 1969-12-31; 0 us = 00:00:00;
-- -1 us = 1969-12-31 23:59:59.999999.
SELECT cdc_apply(dec_event('c', 'dec_typed', '{
  "id": 2, "amount": "z8c=", "big": "+w==", "vsd": {"scale": 0, "value": "AA=="},
  "d": -1, "t": 0, "ts": -1, "tstz": -1,
  "zts": "2019-05-28T10:58:24.5+02:00", "j": "[true, \"x\"]",
  "u": null, "b": "", "ia": [], "ta": []}', f, '0/1100'), 'dec_typed')
  FROM dec_typed_fields;

SELECT id, amount, big, vsd, d, t, ts FROM dec_typed ORDER BY id;
SELECT id, tstz AT TIME ZONE 'UTC' AS tstz_utc, zts AT TIME ZONE 'UTC' AS zts_utc, tstz, zts FROM dec_typed ORDER BY id;
SELECT id, j, jsonb_typeof(j) AS j_type, u, b, ia, ta, cardinality(ta) AS ta_len, ta[3] IS NULL AS ta3_is_null, ta[6] = '' AS ta6_empty
  FROM dec_typed ORDER BY id;
-- Exact values, not just their text.
SELECT amount = 123.45 AS amount_ok, big = 1234567890123456789012345.67890 AS big_ok, vsd = 1234.567 AS vsd_ok,
       d = date '2022-01-08' AS d_ok, t = time '12:34:56.789012' AS t_ok,
       ts = timestamp '2019-05-28 08:58:24.863123' AS ts_ok,
       tstz = timestamptz '2019-05-28 08:58:24.863123+00' AS tstz_ok, zts = tstz AS zts_ok,
       j = '{"a": [1, 2], "b": null}'::jsonb AS j_ok, b = '\xdeadbeef00ff'::bytea AS b_ok,
       ia = ARRAY[1, 2, 3] AS ia_ok, ta = ARRAY['a', 'b c', NULL, '"q"', 'NULL', ''] AS ta_ok
  FROM dec_typed WHERE id = 1;
SELECT amount = -123.45 AS amount_ok, big = -0.00005 AS big_ok, vsd = 0 AS vsd_ok, d = date '1969-12-31' AS d_ok,
       ts = timestamp '1969-12-31 23:59:59.999999' AS ts_ok, tstz = timestamptz '1969-12-31 23:59:59.999999+00' AS tstz_ok,
       zts = timestamptz '2019-05-28 08:58:24.5+00' AS zts_ok, u IS NULL AS u_null, b = ''::bytea AS b_ok,
       ia = '{}'::int[] AS ia_ok, ta = '{}'::text[] AS ta_ok
  FROM dec_typed WHERE id = 2;

-- An update decoded by the same schema: every column gets its new value
-- (a null Decimal, day 19001, 1 us, epoch zero, an upper-case uuid, one
-- zero byte, an array with a null element).
SELECT cdc_apply(dec_event('u', 'dec_typed', '{
  "id": 1, "amount": "MDk=", "big": null, "vsd": {"scale": 3, "value": "EtaH"},
  "d": 19001, "t": 1, "ts": 1, "tstz": 1, "zts": "1970-01-01T00:00:00Z", "j": "{}",
  "u": "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "b": "AA==", "ia": [null, 7], "ta": ["z"]}', f, '0/1200'), 'dec_typed')
  FROM dec_typed_fields;
SELECT id, amount, big, vsd, d, t, ts, tstz AT TIME ZONE 'UTC' AS tstz_utc, zts AT TIME ZONE 'UTC' AS zts_utc, j, u, b, ia, ta
  FROM dec_typed WHERE id = 1;
SELECT ledger_count('dec_typed') AS ledger, applied FROM cdc.stats WHERE target = 'dec_typed'::regclass;

-- A value that contradicts its schema is an error naming the field, and
-- nothing is applied (row 1 keeps amount 123.45).
SELECT cdc_apply(dec_event('u', 'dec_typed', '{"id": 1, "amount": "not base64!"}', f, '0/1300'), 'dec_typed')
  FROM dec_typed_fields;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(dec_event('u', 'dec_typed', '{"id": 1, "d": "2020-01-01"}', f, '0/1300'), 'dec_typed')
  FROM dec_typed_fields;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT id, amount, d FROM dec_typed WHERE id = 1;
SELECT ledger_count('dec_typed') AS ledger;

-- ---------------------------------------------------------------------------
-- 2. Without a schema: the destination column type decides
-- ---------------------------------------------------------------------------
CREATE TABLE dec_bare (
  id   int PRIMARY KEY,
  n    numeric(10,2),
  nx   numeric,
  d    date,
  tstz timestamptz,
  ts   timestamp,
  j    jsonb,
  u    uuid,
  b    bytea,
  ia   int[],
  ta   text[]
);

-- numeric from a JSON number and from a decimal string; date from days; jsonb
-- from an object, from a string holding JSON text (what Debezium sends for
-- json columns) and from a number; uuid and bytea (base64) from strings;
-- arrays (also two-dimensional) from arrays; timestamps from ISO strings.
SELECT cdc_apply(dbz('c', 'dec_bare', '{"id": 1, "n": 12.5, "nx": 12.5, "d": 19000, "j": {"k": [1, {"x": null}]},
                                         "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "b": "3q2+7w==",
                                         "ia": [4, 5], "ta": ["p", "q r"],
                                         "tstz": "2019-05-28T08:58:24.863Z", "ts": "2019-05-28T08:58:24.863"}',
                 '0/2000', 2), 'dec_bare');
SELECT cdc_apply(dbz('c', 'dec_bare', '{"id": 2, "n": "12.50", "nx": "12.50", "d": null, "j": "{\"from\": \"string\"}", "ia": [[1, 2], [3, 4]]}',
                 '0/2100', 2), 'dec_bare');
SELECT cdc_apply(dbz('c', 'dec_bare', '{"id": 3, "n": -0.5, "nx": "-1.5e3", "j": 42, "ta": ["{", "}", ","]}', '0/2200', 2), 'dec_bare');
SELECT id, n, d, tstz AT TIME ZONE 'UTC' AS tstz_utc, ts, j, jsonb_typeof(j) AS j_type, u, b, ia, ta FROM dec_bare ORDER BY id;
-- The number lexeme reaches numeric input unchanged: 12.5 keeps scale 1 and
-- "12.50" scale 2 in an unconstrained numeric column.
SELECT id, n = 12.50 AS n_ok, scale(n) AS n_scale, nx, scale(nx) AS nx_scale FROM dec_bare ORDER BY id;

-- A base64 decimal without schema: its scale is unknown -> 22023 naming the
-- field, with a hint naming the settings.  Nothing is written.
SELECT cdc_apply(dbz('u', 'dec_bare', '{"id": 1, "n": "MDk="}', '0/2300', 3), 'dec_bare');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- An integer for a timestamptz column without temporal_unit: the unit is
-- unknown -> 22023 naming the field and the mapping option.
SELECT cdc_apply(dbz('u', 'dec_bare', '{"id": 1, "tstz": 1559033904863}', '0/2300', 3), 'dec_bare');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(dbz('u', 'dec_bare', '{"id": 1, "ts": 1559033904863}', '0/2300', 3), 'dec_bare');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT id, n, tstz AT TIME ZONE 'UTC' AS tstz_utc, ts FROM dec_bare WHERE id = 1;
SELECT ledger_count('dec_bare') AS ledger;

-- With the mapping's temporal_unit => 'milli' the same integers decode as
-- milliseconds since the epoch (UTC), whatever the session time zone.
SELECT target, temporal_unit FROM cdc.register_mapping('dec_bare', temporal_unit => 'milli');
SELECT cdc_apply(dbz('u', 'dec_bare', '{"id": 1, "tstz": 1559033904863, "ts": 1559033904863}', '0/2400', 4), 'dec_bare');
SELECT id, tstz AT TIME ZONE 'UTC' AS tstz_utc, ts, tstz = timestamptz '2019-05-28 08:58:24.863+00' AS tstz_ok,
       ts = timestamp '2019-05-28 08:58:24.863' AS ts_ok
  FROM dec_bare WHERE id = 1;
-- 'micro' and 'nano' read the same instant from their own units.
SELECT target, temporal_unit FROM cdc.register_mapping('dec_bare', temporal_unit => 'micro');
SELECT cdc_apply(dbz('u', 'dec_bare', '{"id": 2, "tstz": 1559033904863123}', '0/2500', 5), 'dec_bare');
SELECT target, temporal_unit FROM cdc.register_mapping('dec_bare', temporal_unit => 'nano');
SELECT cdc_apply(dbz('u', 'dec_bare', '{"id": 3, "tstz": 1559033904863123456}', '0/2600', 6), 'dec_bare');
SELECT id, tstz AT TIME ZONE 'UTC' AS tstz_utc FROM dec_bare ORDER BY id;
SELECT ledger_count('dec_bare') AS ledger, applied FROM cdc.stats WHERE target = 'dec_bare'::regclass;

-- The session's array_nulls and xmloption do not change what an envelope
-- means: a JSON null element is an array NULL, and an xml value the source
-- held as content is read as content (found by a fidelity review, h3: with
-- array_nulls = off the element became the string "NULL" in a text[] and
-- was refused in an int[]; with xmloption = document the xml was refused).
CREATE TABLE arr_settings (id int PRIMARY KEY, ta text[], ia int[], x xml);
SET array_nulls = off;
SET xmloption = document;
SELECT cdc_apply(dbz('c', 'arr_settings', '{"id": 1, "ta": ["a", null, "NULL"], "ia": [1, null], "x": "<a/><b/>"}', '0/2700', 7),
                 'arr_settings');
SELECT id, ta, ta[2] IS NULL AS ta2_null, ta[3] IS NULL AS ta3_null, ia, ia[2] IS NULL AS ia2_null, x::text FROM arr_settings;
SELECT current_setting('array_nulls') AS array_nulls, current_setting('xmloption') AS xmloption;
RESET array_nulls;
RESET xmloption;

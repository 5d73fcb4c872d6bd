--
-- outbox_stored_payload_fuzz: many generated values against the claim of
-- outbox_stored_payload, that a table outbox's payload and entity key
-- printed straight from the image (outbox.cpp, StoredPayloadFromImage and
-- StoredEntityKey, by cdc_apply() and cdc_apply_batch()) are byte for byte
-- the text the jsonb path stores (cdc_apply() with cdc.direct_writes off,
-- the reference).  One target per column type (ospf_<tag>_{ref,one,bat}:
-- key (r, id), one column v of the type) and, for a type with a btree
-- equality, one whose key is a column of it (ospf_k<tag>_*: key (r, k)).
-- The values are crafted edge values (limits, NaN, infinities, -0,
-- subnormals, typmod rounding, BC and far dates, every ASCII control
-- character, quotes, backslashes, U+2028, non-ASCII and 4-byte text,
-- values over 8 kB that get compressed) and values drawn with setseed().
-- Per round, every value is created, then updated to another value, every
-- third row deleted (the reference prints the removed row with to_jsonb,
-- the batch reuses the payload its update stored), plus chains of one
-- key inside the batch (create, update, delete; create, delete; a
-- snapshot row, then its delete) and a delete of a row that was never
-- there (the before-image is published).
-- Rounds 2-5 repeat the crafted values under session settings other than
-- the ones payloads are printed with (DateStyle, IntervalStyle,
-- extra_float_digits, bytea_output) and fixed non-UTC time zones; round 5
-- runs the reference under round 1's settings and the two others under
-- round 2's pinned-away settings (same TimeZone: payloads print
-- timestamptz in the session's zone, by design); round 6 gives the two
-- paths under test the events as text (the intake's other reader).  The report is one row
-- per type: stored texts equal to the reference's on both paths, and the
-- list of differing rows (expected: none).  Tables are called ospf_*.
--
SET client_min_messages = warning;
SET DateStyle = 'ISO, MDY';
SET IntervalStyle = postgres;
SET TimeZone = 'UTC';
SET extra_float_digits = 1;
SHOW server_encoding;
CREATE TABLE ospf_types (tag text PRIMARY KEY, typ text NOT NULL, keyable bool NOT NULL);
INSERT INTO ospf_types VALUES
 ('bool', 'boolean', true), ('int2', 'int2', true), ('int4', 'int4', true), ('int8', 'int8', true),
 ('num', 'numeric', true), ('nump', 'numeric(7,3)', true), ('numneg', 'numeric(5,-2)', true),
 ('numsc', 'numeric(3,5)', true), ('f4', 'float4', true), ('f8', 'float8', true),
 ('date', 'date', true), ('ts', 'timestamp', true), ('ts0', 'timestamp(0)', true), ('tz', 'timestamptz', true),
 ('tz3', 'timestamptz(3)', true), ('text', 'text', true), ('vc', 'varchar(12)', true), ('bp', 'char(5)', true),
 ('ch', '"char"', true), ('name', 'name', true), ('uuid', 'uuid', true), ('bytea', 'bytea', true),
 ('iv', 'interval', true), ('ivhm', 'interval hour to minute', true), ('inet', 'inet', true), ('cidr', 'cidr', true),
 ('mac', 'macaddr', true), ('mac8', 'macaddr8', true), ('money', 'money', true), ('bit', 'bit(4)', true),
 ('vbit', 'varbit(8)', true), ('lsn', 'pg_lsn', true), ('point', 'point', false), ('box', 'box', false),
 ('tsv', 'tsvector', true), ('oid', 'oid', true), ('xml', 'xml', false), ('time', 'time(2)', true),
 ('timetz', 'timetz', true), ('jsonb', 'jsonb', false);

-- the values, as the JSON of the after-image (Table B of docs/debezium-types.md); i < 1000 crafted
CREATE TABLE ospf_vals (tag text, i int, v jsonb, PRIMARY KEY (tag, i));
CREATE FUNCTION ospf_add(tag text, vals jsonb) RETURNS void LANGUAGE sql AS $$
  INSERT INTO ospf_vals SELECT tag, coalesce((SELECT max(i) FROM ospf_vals x WHERE x.tag = ospf_add.tag AND x.i < 1000), 0) + n, e
  FROM jsonb_array_elements(vals) WITH ORDINALITY AS a(e, n) $$;
SELECT ospf_add('bool', '[true, false, null, "t", "off", "YES", "0", " true "]');
SELECT ospf_add('int2', '[-32768, 32767, 0, -1, "  42 ", null, "-0"]');
SELECT ospf_add('int4', '[-2147483648, 2147483647, 0, -1, "+17", null]');
SELECT ospf_add('int8', '[-9223372036854775808, 9223372036854775807, 0, -1, "9007199254740993", null]');
SELECT ospf_add('num', '["NaN", "Infinity", "-Infinity", "-inf", "+inf", "-0", "-0.000", 1.000000, "1.000000",
  "0.0000000000000000000000000001", "1e-1000", "-1e1000", "1e-16383", 123456789012345678901234567890.123456789012345678901234567890,
  12.50, 1.5e3, "-1E+2", null, 0, "1e10000", "9.999999999999999999999999999999999999999e-7"]');
SELECT ospf_add('nump', '["NaN", "1.0005", "-9999.9994", "0.0004999", "1e-5", "-0", 1234.5675, null]');
SELECT ospf_add('numneg', '["12345", "-99949", "49", "50", "NaN", "-0", null, 149.99]');
SELECT ospf_add('numsc', '["0.00999", "-0.001234", "0.000005", "-0.000004", "NaN", "0", null]');
SELECT ospf_add('f4', '["NaN", "Infinity", "-Infinity", "-0", "1.4e-45", "1e-45", "3.4028235e38", "1.17549435e-38",
  "1.1754942e-38", 0.1, 16777217, "3.14159274", "-1e-10", null, 0, 100000000, "1e+20"]');
SELECT ospf_add('f8', '["NaN", "Infinity", "-Infinity", "-0", "5e-324", "2.2250738585072014e-308", "2.225073858507201e-308",
  "1.7976931348623157e308", "1e300", "-1e-300", 0.1, "0.30000000000000004", "123456789012345680000", "0.3333333333333333",
  "1e23", "9007199254740993", "-1.2345678901234567e-100", null, 0, "1e-7", "1e21", "123e-20"]');
SELECT ospf_add('date', '["infinity", "-infinity", "4713-01-01 BC", "0001-01-01 BC", "0001-01-01", "5874897-12-31",
  "2024-02-29", 19000, -719163, 0, null, "1999-12-31"]');
SELECT ospf_add('ts', '["infinity", "-infinity", "294276-12-31 23:59:59.999999", "4713-01-01 00:00:00 BC",
  "2000-01-01T00:00:00.000001", "1999-12-31 23:59:59.5", "0001-01-01 00:00:00 BC", "10000-01-01 00:00:00",
  "2024-02-29T12:34:56.123456", 9223372036854775807, -9223372036854775808, 1529507596945104, -1, null]');
SELECT ospf_add('ts0', '["2020-01-01 00:00:00.5", "2020-01-01 00:00:00.4999", "1999-12-31 23:59:59.5", "infinity",
  "0044-03-15 12:00:00.5 BC", null]');
SELECT ospf_add('tz', '["infinity", "-infinity", "2024-01-01T00:00:00+05:45", "294276-12-30 00:00:00+00",
  "4713-01-02 12:00:00+00 BC", "1900-01-01 00:00:00+00", "1970-01-01T00:00:00.000001Z", "2024-03-10T02:30:00-08:00",
  "2018-06-20T15:13:16.945104Z", "12345-06-07 08:09:10.5+14", 1529507596945104, null]');
SELECT ospf_add('tz3', '["2020-01-01T00:00:00.0005+00", "2020-01-01T00:00:00.00049+00", "1969-12-31T23:59:59.9995Z",
  "infinity", null]');
SELECT ospf_add('text', '["", "plain", "quote \" backslash \\ slash / solidus", "</script><script>alert(1)</script>",
  "\u2028\u2029", "é ✓ 🐘 \ud83d\ude00", "\u00ad\u200b\ufeff\ufffd", "\\u0000 is no NUL", "\\\\\\\"", "  trailing  ", null,
  "\u007f", "\u0080\u009f", "a\"b\"c", "\"", "\\"]');
SELECT ospf_add('vc', '["", "abc", "abcdefghijkl", "abcdefghijkl     ", "ééééééééééé🐘", "\"\\\n\t", null, "   "]');
SELECT ospf_add('bp', '["", "ab", "abcde", "abcde   ", "é", " x", "🐘🐘", "\n", null, "a\"\\"]');
SELECT ospf_add('ch', '["a", "", "é", "\u0001", "\"", "\\", "\u007f", null, "zz"]');
SELECT ospf_add('name', '["x", "", "a_name_of_more_than_sixty-three_bytes_is_truncated_by_namein_0123456789",
  "ééééééééééééééééééééééééééééééééé", "\"quoted\"", "back\\slash", null]');
SELECT ospf_add('uuid', '["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A12}",
  "00000000000000000000000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff", null]');
SELECT ospf_add('bytea', '["", "AA==", "3q2+7w==", "AQID/w", "XCJcXA==", null]');
SELECT ospf_add('iv', '["1 year 2 mons 3 days 04:05:06.789", "P1Y2M3DT4H5M6.78S", "-178000000 years", "178000000 years",
  90061000001, 0, "00:00:00.000001", "P-1Y-2M3DT-4H-5M-6S", "1 mon -1 days 1 second", "2147483647 days", null]');
SELECT ospf_add('ivhm', '["1 day 02:03:04.5", "P1DT2H3M59S", "-00:00:59", "100 years", null]');
SELECT ospf_add('inet', '["10.1.2.3/8", "::1", "2001:db8::1/128", "::ffff:1.2.3.4", "0.0.0.0/0", "192.168.0.1/32", null]');
SELECT ospf_add('cidr', '["10.0.0.0/8", "2001:db8::/32", "0.0.0.0/0", "192.168.1", "::/0", null]');
SELECT ospf_add('mac', '["08:00:2b:01:02:03", "08002b010203", "FF-FF-FF-FF-FF-FF", "0800.2b01.0204", null]');
SELECT ospf_add('mac8', '["08:00:2b:01:02:03:04:05", "08002b0102030406", "08:00:2b:01:02:03", null]');
SELECT ospf_add('money', '["12.34", "-92233720368547758.08", "92233720368547758.07", "0", 0.005, "$1,000.5", null]');
SELECT ospf_add('bit', '["1010", "0000", "1111", "xA", "X0", null]');
SELECT ospf_add('vbit', '["1", "10101010", "", "x0F", "0", "00000000", null, true, false]');
SELECT ospf_add('lsn', '["0/0", "FFFFFFFF/FFFFFFFF", "16/B374D848", "0/1", null]');
SELECT ospf_add('point', '["(1,2)", "(-0,1e300)", "(NaN,Infinity)", "(0.1,-0.30000000000000004)", "(1e-320,5e-324)", null]');
SELECT ospf_add('box', '["(1,2),(3,4)", "((-0,0),(NaN,1))", "(1e308,-1e308),(0.1,0.2)", null]');
SELECT ospf_add('tsv', '["a fat cat", "''quoted\\''s'' str", "é:1A,2B ✓:3", "", "a:1,1,2,2", null]');
SELECT ospf_add('oid', '[0, 4294967295, "-1", 17, null]');
SELECT ospf_add('xml', '["<a x=\"1\">t &amp; é</a>", "plain text content", "<!-- c --><b/>", "", null]');
SELECT ospf_add('time', '["24:00:00", "00:00:00.000001", "23:59:59.996", "12:34:56.785", 45296789012, null]');
SELECT ospf_add('timetz', '["12:00:00+14:59", "00:00:00-15:59", "24:00:00+00", "23:59:59.999999+05:45", null]');
SELECT ospf_add('jsonb', '[{"b": 1, "a": [1.50, "x\u0001"]}, "\"str\"", 1e2, null]');
-- every ASCII control character and DEL, alone and between text; 4-byte and other UTF-8
SELECT ospf_add('text', (SELECT jsonb_agg(x ORDER BY c) FROM generate_series(1, 32) c,
                         LATERAL (VALUES (chr(CASE c WHEN 32 THEN 127 ELSE c END)),
                                         ('x' || chr(CASE c WHEN 32 THEN 127 ELSE c END) || 'y')) s(x)));
SELECT ospf_add('text', jsonb_build_array((SELECT string_agg(chr(c), '') FROM generate_series(1, 127) c),
                                          chr(1114111) || chr(65536) || chr(55295) || chr(57344) || chr(65533)));
-- over 8 kB: compressed (repeats) and hardly compressible, with escapes in them
SELECT ospf_add('text', jsonb_build_array(repeat(E'abc"\\\n</', 3000),
                                          (SELECT string_agg(md5(g::text) || chr(1 + g % 31) || chr(233 + g % 500), '') FROM generate_series(1, 400) g),
                                          repeat('🐘', 5000)));
SELECT ospf_add('vc', jsonb_build_array(chr(1) || chr(31) || chr(127) || '🐘', E'\\\\\\"'));
SELECT ospf_add('bytea', (SELECT jsonb_build_array(replace(encode(string_agg(set_byte('\x00'::bytea, 0, b), '' ORDER BY b), 'base64'), E'\n', ''))
                          FROM generate_series(0, 255) b));
SELECT ospf_add('bytea', jsonb_build_array(replace(encode(decode(repeat('00ff5c22', 3000), 'hex'), 'base64'), E'\n', '')));

-- drawn values (round 1 only), i >= 1001
SELECT setseed(0.4242);
INSERT INTO ospf_vals
SELECT tag, 1000 + g,
       CASE tag
       WHEN 'int2' THEN to_jsonb(floor(random() * 65536 - 32768)::int)
       WHEN 'int4' THEN to_jsonb(floor(random() * 4294967296 - 2147483648)::bigint)
       WHEN 'int8' THEN to_jsonb(floor((random() - 0.5) * 1.8e19)::numeric)
       WHEN 'num' THEN to_jsonb(round(((random() - 0.5) * 10 ^ floor(random() * 60 - 30))::numeric, floor(random() * 40)::int))
       WHEN 'nump' THEN to_jsonb(round(((random() - 0.5) * 19998)::numeric, 6))
       WHEN 'f4' THEN to_jsonb(((random() - 0.5) * 10 ^ floor(random() * 70 - 35))::float4::text)
       WHEN 'f8' THEN to_jsonb(((random() - 0.5) * 10 ^ floor(random() * 600 - 300))::text)
       WHEN 'date' THEN to_jsonb((date '2000-01-01' + floor((random() - 0.5) * 3000000)::int)::text)
       WHEN 'ts' THEN to_jsonb((timestamp '2000-01-01' + (random() * 6000000 - 2200000) * interval '1 day')::text)
       WHEN 'tz' THEN to_jsonb((timestamp '2000-01-01' + (random() - 0.5) * interval '900000 days')::text
                               || CASE WHEN random() < 0.5 THEN '+' ELSE '-' END || lpad(floor(random() * 14)::text, 2, '0')
                               || ':' || lpad((floor(random() * 4) * 15)::text, 2, '0'))
       WHEN 'text' THEN (SELECT to_jsonb(coalesce(string_agg(chr(CASE WHEN r < 0.35 THEN 1 + floor(r / 0.35 * 126)::int
                                                                       WHEN r < 0.6 THEN 128 + floor((r - 0.35) / 0.25 * 1920)::int
                                                                       WHEN r < 0.8 THEN 2048 + floor((r - 0.6) / 0.2 * 53247)::int
                                                                       WHEN r < 0.9 THEN 57344 + floor((r - 0.8) / 0.1 * 8189)::int
                                                                       ELSE 65536 + floor((r - 0.9) / 0.1 * 1048575)::int END), ''), ''))
                         FROM (SELECT random() AS r, k FROM generate_series(1, floor(random() * 40)::int + g * 0) k) s)
       WHEN 'uuid' THEN to_jsonb(md5(random()::text)::uuid::text)
       WHEN 'bytea' THEN (SELECT to_jsonb(coalesce(encode(string_agg(set_byte('\x00'::bytea, 0, floor(random() * 256)::int), ''), 'base64'), ''))
                          FROM generate_series(1, floor(random() * 30)::int + g * 0) k)
       WHEN 'iv' THEN to_jsonb((random() * interval '100 years' - random() * interval '3000 days 01:02:03.456789')::text)
       WHEN 'inet' THEN to_jsonb(host('0.0.0.0'::inet + floor(random() * 4294967295)::bigint) || '/' || floor(random() * 33))
       WHEN 'money' THEN to_jsonb(round(((random() - 0.5) * 1e12)::numeric, 2)::text)
       END
FROM unnest('{int2,int4,int8,num,nump,f4,f8,date,ts,tz,text,uuid,bytea,iv,inet,money}'::text[]) AS tag,
     generate_series(1, 40) g
ORDER BY tag, g;
SELECT count(*) AS values, count(*) FILTER (WHERE i > 1000) AS drawn, count(DISTINCT tag) AS types FROM ospf_vals;

-- the targets: three of each (reference, one by one, batch), mapped with an outbox
DO $$
DECLARE ty ospf_types; p text;
BEGIN
  FOR ty IN SELECT * FROM ospf_types ORDER BY tag LOOP
    FOREACH p IN ARRAY '{ref,one,bat}'::text[] LOOP
      EXECUTE format('CREATE TABLE %I (r int, id int, v %s, PRIMARY KEY (r, id))', 'ospf_' || ty.tag || '_' || p, ty.typ);
      PERFORM cdc.register_mapping(('ospf_' || ty.tag || '_' || p)::regclass, outbox => true, temporal_unit => 'micro');
      IF ty.keyable THEN
        EXECUTE format('CREATE TABLE %I (r int, k %s, n int, PRIMARY KEY (r, k))', 'ospf_k' || ty.tag || '_' || p, ty.typ);
        PERFORM cdc.register_mapping(('ospf_k' || ty.tag || '_' || p)::regclass, outbox => true, temporal_unit => 'micro');
      END IF;
    END LOOP;
  END LOOP;
END $$;
-- member and key names to escape, of equal byte lengths that sort bytewise ("B" < "a" < "é" for 1-2 bytes)
CREATE TABLE ospf_names_ref ("é" text, "Zz" int, "a""" uuid, "a\" numeric, "B" text, "a" float8, "ab" bool,
                             "k
l" text, "tab	x" date, "ü" timestamptz, r int, "€" bytea, "✓" interval,
                             PRIMARY KEY (r, "é", "Zz", "a""", "a\", "B", "k
l"));
CREATE TABLE ospf_names_one (LIKE ospf_names_ref INCLUDING ALL);
CREATE TABLE ospf_names_bat (LIKE ospf_names_ref INCLUDING ALL);
SELECT count(*) AS mapped FROM (
  SELECT cdc.register_mapping(tbl, outbox => true, temporal_unit => 'micro')
  FROM unnest('{ospf_names_ref,ospf_names_one,ospf_names_bat}'::regclass[]) AS tbl) m;

-- the changes of a round: (base table, round, seq, op, after, before); the path's suffix is added per target
CREATE TABLE ospf_events (base text, r int, seq int, op text, after jsonb, before jsonb, PRIMARY KEY (base, r, seq));
-- a key's text must fit the entity record's index (CompactKey): no value of several kB, no numeric of 1,000+ digits
CREATE FUNCTION ospf_keyable(v jsonb) RETURNS bool LANGUAGE sql AS $$
  SELECT octet_length(v::text) < 2000 AND v::text !~* 'e-?[0-9]{4}' $$;
CREATE FUNCTION ospf_round_events(rnd int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  -- per type: create each value, update it to the next value, delete every third row; chains; an absent row
  INSERT INTO ospf_events
  SELECT 'ospf_' || tag, rnd, row_number() OVER (PARTITION BY tag ORDER BY phase, i), op, after, before
  FROM (
    SELECT v.tag, 1 AS phase, v.i, 'c' AS op, jsonb_build_object('r', rnd, 'id', v.i, 'v', v.v) AS after, NULL::jsonb AS before
    FROM ospf_vals v WHERE rnd = 1 OR v.i < 1000
    UNION ALL
    SELECT v.tag, 2, v.i, 'u', jsonb_build_object('r', rnd, 'id', v.i, 'v',
           coalesce((SELECT w.v FROM ospf_vals w WHERE w.tag = v.tag AND w.i > v.i AND (rnd = 1 OR w.i < 1000) ORDER BY w.i LIMIT 1),
                    (SELECT w.v FROM ospf_vals w WHERE w.tag = v.tag ORDER BY w.i LIMIT 1))), NULL
    FROM ospf_vals v WHERE rnd = 1 OR v.i < 1000
    UNION ALL
    SELECT v.tag, 3, v.i, 'd', NULL, jsonb_build_object('r', rnd, 'id', v.i)
    FROM ospf_vals v WHERE (rnd = 1 OR v.i < 1000) AND v.i % 3 = 0
    UNION ALL
    -- chains of one key: create, update, delete (id -1); create, delete (id -2); update, delete of a new row (id -3);
    -- a snapshot row, then its delete (id -5: the batch prints the snapshot's image); snapshot, update, delete (id -6)
    SELECT v.tag, 4, 100000 + s.k * 10000 + v.i, s.op,
           CASE WHEN s.op <> 'd' THEN jsonb_build_object('r', rnd, 'id', s.id, 'v', v.v) END,
           CASE WHEN s.op = 'd' THEN jsonb_build_object('r', rnd, 'id', s.id) END
    FROM ospf_vals v, (VALUES (1, -1, 'c', 1), (2, -1, 'u', 2), (3, -1, 'd', 2), (4, -2, 'c', 3), (5, -2, 'd', 3), (6, -3, 'u', 4),
                              (7, -3, 'd', 4), (8, -5, 'r', 4), (9, -5, 'd', 4), (10, -6, 'r', 1), (11, -6, 'u', 2), (12, -6, 'd', 2))
                      s(k, id, op, vi)
    WHERE v.i = s.vi
    UNION ALL
    -- the delete of a row the target never had: the before-image is what is published
    SELECT v.tag, 5, v.i, 'd', NULL, jsonb_build_object('r', rnd, 'id', -4 - v.i, 'v', v.v)
    FROM ospf_vals v WHERE v.i <= 2) e;
  -- key columns of the type: create (n = i), update (n = -i), delete every other; equal keys make chains too
  INSERT INTO ospf_events
  SELECT 'ospf_k' || tag, rnd, row_number() OVER (PARTITION BY tag ORDER BY phase, i), op, after, before
  FROM (
    SELECT v.tag, 1 AS phase, v.i, 'c' AS op, jsonb_build_object('r', rnd, 'k', v.v, 'n', v.i) AS after, NULL::jsonb AS before
    FROM ospf_vals v JOIN ospf_types t USING (tag) WHERE t.keyable AND v.v <> 'null' AND (rnd = 1 OR v.i < 1000) AND ospf_keyable(v.v)
    UNION ALL
    SELECT v.tag, 2, v.i, 'u', jsonb_build_object('r', rnd, 'k', v.v, 'n', -v.i), NULL
    FROM ospf_vals v JOIN ospf_types t USING (tag) WHERE t.keyable AND v.v <> 'null' AND (rnd = 1 OR v.i < 1000) AND ospf_keyable(v.v)
    UNION ALL
    SELECT v.tag, 3, v.i, 'd', NULL, jsonb_build_object('r', rnd, 'k', v.v)
    FROM ospf_vals v JOIN ospf_types t USING (tag) WHERE t.keyable AND v.v <> 'null' AND (rnd = 1 OR v.i < 1000) AND ospf_keyable(v.v) AND v.i % 2 = 0) e;
  -- the names table: one value of each column's list per row
  INSERT INTO ospf_events
  SELECT 'ospf_names', rnd, row_number() OVER (ORDER BY phase, j), op, after, before
  FROM (
    SELECT g.phase, g.j, CASE g.phase WHEN 1 THEN 'c' WHEN 2 THEN 'u' ELSE 'd' END AS op,
           CASE WHEN g.phase < 3 THEN jsonb_build_object('r', rnd, 'é', k.t1, 'Zz', g.j, 'a"', k.u, 'a\', k.n, 'B', k.t2,
             'a', (SELECT v FROM ospf_vals WHERE tag = 'f8' AND i = 1 + (g.j + g.phase) % 20),
             'ab', (SELECT v FROM ospf_vals WHERE tag = 'bool' AND i = 1 + (g.j + g.phase) % 8),
             E'k\nl', k.t3,
             E'tab\tx', (SELECT v FROM ospf_vals WHERE tag = 'date' AND i = 1 + (g.j + g.phase) % 12),
             'ü', (SELECT v FROM ospf_vals WHERE tag = 'tz' AND i = 1 + (g.j + g.phase) % 12),
             '€', (SELECT v FROM ospf_vals WHERE tag = 'bytea' AND i = 1 + (g.j + g.phase) % 5),
             '✓', (SELECT v FROM ospf_vals WHERE tag = 'iv' AND i = 1 + (g.j + g.phase) % 11)) END AS after,
           CASE WHEN g.phase = 3 THEN jsonb_build_object('r', rnd, 'é', k.t1, 'Zz', g.j, 'a"', k.u, 'a\', k.n, 'B', k.t2, E'k\nl', k.t3) END AS before
    FROM (SELECT ph AS phase, j FROM generate_series(1, 3) ph, generate_series(1, 12) j WHERE ph < 3 OR j % 2 = 0) g,
         LATERAL (SELECT (SELECT x.v #>> '{}' FROM ospf_vals x WHERE x.tag = 'text' AND x.v <> 'null'
                          ORDER BY x.i LIMIT 1 OFFSET g.j) AS t1,
                         md5(g.j::text)::uuid AS u,
                         (SELECT x.v FROM ospf_vals x WHERE x.tag = 'num' AND x.v <> 'null' AND x.v::text !~* 'e-?[0-9]{4}'
                          ORDER BY x.i LIMIT 1 OFFSET g.j) AS n,
                         (SELECT x.v #>> '{}' FROM ospf_vals x WHERE x.tag = 'text' AND x.v <> 'null'
                          ORDER BY x.i DESC LIMIT 1 OFFSET g.j) AS t2,
                         chr(g.j) || '"\' || chr(127) AS t3) k) e;
END $$;
SELECT ospf_round_events(r) FROM generate_series(1, 6) r;
SELECT r, count(*) AS events, count(DISTINCT base) AS targets FROM ospf_events GROUP BY r ORDER BY r;

-- the session settings of a round and path: round 5 changes only the pinned ones on the two paths under test;
-- round 6 has round 1's, and the two paths under test take the events' text (cdc_apply(text), cdc_apply_batch(text))
CREATE FUNCTION ospf_settings(rnd int, path text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE s text[];
BEGIN
  s := CASE WHEN rnd IN (1, 6) OR (rnd = 5 AND path = 'ref') THEN '{UTC,"ISO, MDY",postgres,1,hex}'::text[]
            WHEN rnd = 2 THEN '{Asia/Kathmandu,"SQL, DMY",sql_standard,0,escape}'
            WHEN rnd = 3 THEN '{America/St_Johns,"Postgres, YMD",iso_8601,3,escape}'
            WHEN rnd = 4 THEN '{Pacific/Chatham,"German, DMY",postgres_verbose,-15,hex}'
            ELSE '{UTC,"SQL, DMY",sql_standard,-15,escape}' END;
  PERFORM set_config('TimeZone', s[1], true), set_config('DateStyle', s[2], true),
          set_config('IntervalStyle', s[3], true), set_config('extra_float_digits', s[4], true),
          set_config('bytea_output', s[5], true), set_config('cdc.direct_writes', (path <> 'ref')::text, true);
END $$;

-- the reference and cdc_apply() one change per call, cdc_apply_batch() each target's changes in one batch
CREATE TABLE ospf_outcomes (base text, r int, path text, outcomes text);
CREATE FUNCTION ospf_event(e ospf_events, path text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', e.op, 'after', e.after, 'before', e.before,
                            'source', jsonb_build_object('name', 'ospf', 'schema', 'public', 'table', e.base || '_' || path,
                                                         'lsn', e.r * 1000000 + e.seq)) $$;
DO $$
DECLARE rnd int; b text; p text; e ospf_events; res text;
BEGIN
  FOR rnd IN 1..6 LOOP
    FOR b IN SELECT DISTINCT base FROM ospf_events ORDER BY 1 LOOP
      FOREACH p IN ARRAY '{ref,one}'::text[] LOOP
        PERFORM ospf_settings(rnd, p);
        res := '';
        FOR e IN SELECT * FROM ospf_events WHERE base = b AND r = rnd ORDER BY seq LOOP
          res := res || left(CASE WHEN rnd = 6 AND p = 'one' THEN cdc_apply(ospf_event(e, p)::text)
                                  ELSE cdc_apply(ospf_event(e, p)) END, 1);
        END LOOP;
        INSERT INTO ospf_outcomes VALUES (b, rnd, p, res);
      END LOOP;
      PERFORM ospf_settings(rnd, 'bat');
      IF rnd < 6 THEN
        INSERT INTO ospf_outcomes
        SELECT b, rnd, 'bat', string_agg(left(o, 1), '' ORDER BY n)
        FROM cdc_apply_batch((SELECT jsonb_agg(ospf_event(e2, 'bat') ORDER BY e2.seq)
                              FROM ospf_events e2 WHERE e2.base = b AND e2.r = rnd), with_outcomes => true) x,
             unnest(x.outcomes) WITH ORDINALITY AS u(o, n);
      ELSE
        INSERT INTO ospf_outcomes
        SELECT b, rnd, 'bat', string_agg(left(o, 1), '' ORDER BY n)
        FROM cdc_apply_batch((SELECT jsonb_agg(ospf_event(e2, 'bat') ORDER BY e2.seq)::text
                              FROM ospf_events e2 WHERE e2.base = b AND e2.r = rnd), with_outcomes => true) x,
             unnest(x.outcomes) WITH ORDINALITY AS u(o, n);
      END IF;
    END LOOP;
  END LOOP;
END $$;
SHOW cdc.direct_writes;
SHOW TimeZone;
-- every change applied on the three paths
SELECT path, count(*) AS runs, sum(length(outcomes)) AS changes,
       sum(length(replace(outcomes, 'a', ''))) AS not_applied
FROM ospf_outcomes GROUP BY path ORDER BY path;

-- the stored texts, per target and round in insertion order
CREATE FUNCTION ospf_stored(tbl text) RETURNS TABLE (r int, n bigint, op "char", payload text, entity_key text) LANGUAGE sql AS $$
  SELECT (o.entity_key::jsonb->>'r')::int, row_number() OVER (PARTITION BY o.entity_key::jsonb->>'r' ORDER BY o.id),
         o.op, o.payload::text, o.entity_key::text
  FROM cdc.outbox_rows o WHERE o.target = tbl::regclass $$;
CREATE TABLE ospf_compare AS
SELECT b.base, p.path, j.*
FROM (SELECT DISTINCT base FROM ospf_events) b, unnest('{one,bat}'::text[]) AS p(path),
     LATERAL (SELECT coalesce(s1.r, s2.r) AS r, coalesce(s1.n, s2.n) AS n, s1.op AS ref_op, s2.op,
                     s1.payload AS ref_payload, s2.payload, s1.entity_key AS ref_key, s2.entity_key
              FROM ospf_stored(b.base || '_ref') s1
              FULL JOIN ospf_stored(b.base || '_' || p.path) s2 ON s1.r = s2.r AND s1.n = s2.n) j;
-- one row per target: stored rows, and whether every payload and entity key text is the reference's
SELECT base, sum(1) FILTER (WHERE path = 'one') AS rows,
       bool_and(ref_op IS NOT DISTINCT FROM op) AS same_ops,
       bool_and(ref_payload IS NOT DISTINCT FROM payload) FILTER (WHERE path = 'one') AS one_payload,
       bool_and(ref_key IS NOT DISTINCT FROM entity_key) FILTER (WHERE path = 'one') AS one_key,
       bool_and(ref_payload IS NOT DISTINCT FROM payload) FILTER (WHERE path = 'bat') AS bat_payload,
       bool_and(ref_key IS NOT DISTINCT FROM entity_key) FILTER (WHERE path = 'bat') AS bat_key
FROM ospf_compare GROUP BY base ORDER BY base;
-- per round
SELECT r, count(*) AS compared, bool_and(ref_payload IS NOT DISTINCT FROM payload) AS same_payload,
       bool_and(ref_key IS NOT DISTINCT FROM entity_key) AS same_key
FROM ospf_compare GROUP BY r ORDER BY r;
-- the differing rows (none expected; the first 40)
SELECT base, path, r, n, ref_op, op, left(ref_payload, 120) AS ref_payload, left(payload, 120) AS payload,
       left(ref_key, 60) AS ref_key, left(entity_key, 60) AS entity_key
FROM ospf_compare
WHERE ref_op IS DISTINCT FROM op OR ref_payload IS DISTINCT FROM payload OR ref_key IS DISTINCT FROM entity_key
ORDER BY base, path, r, n LIMIT 40;
-- the batch targets' payloads are in the values form (their member names in a cdc.outbox_source entry)
SELECT count(DISTINCT o.target) AS targets, count(DISTINCT o.target) FILTER (WHERE s.payload_keys IS NOT NULL) AS with_names_entry
FROM cdc.outbox_rows o JOIN cdc.outbox_source s ON s.id = o.src
WHERE o.target::text LIKE 'ospf\_%\_bat';
SELECT count(*) FILTER (WHERE octet_length(payload) > 8192) AS payloads_over_8kb,
       max(octet_length(payload)) AS longest
FROM ospf_compare WHERE path = 'bat';
RESET client_min_messages;

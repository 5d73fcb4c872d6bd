--
-- outbox_stored_payload: a table outbox's payload and entity key are
-- stored printed straight from the applied image (outbox.cpp,
-- StoredPayloadFromImage and OutboxEntityKey), without building the jsonb
-- and printing it again, by cdc_apply() and on the set-based path
-- (cdc_apply_batch(), and the worker through the same segment code).  The
-- text stored in cdc.outbox_rows must be byte for byte what the jsonb path
-- stores: with cdc.direct_writes off the engine takes that path (the
-- reference, as for its other direct writes), so the same changes go
-- through the reference (cdc_apply() with the setting off), cdc_apply()
-- and cdc_apply_batch() into triplet tables, and each stored payload is
-- also checked against PostgreSQL's own to_jsonb() of the final row,
-- printed value by value in jsonb's key order.  Every kind of built-in
-- column the payload is printed for, with edge values: NaN and infinities
-- (numeric, float), -0, exponents, NULLs, strings with quotes,
-- backslashes, control characters and non-ASCII text, infinite dates and
-- timestamps.  Chains of one key inside the batch (update then delete)
-- reuse the payload the update stored; a composite key's names sort by
-- length.  Targets whose payload is not printed that way (a column without
-- a built-in rendering, member names too long for the dictionary) must
-- store the same too.  Tables of this suite are called osp_*.
--
SET TimeZone = 'UTC';
CREATE TABLE osp_one (id int PRIMARY KEY, b bool, s2 int2, i4 int, i8 int8, n numeric, f4 float4, f8 float8,
                      d date, ts timestamp, tz timestamptz, t text, vc varchar(40), c char(3), u uuid, by bytea,
                      iv interval, ip inet, "Wéird ""name""" text);
CREATE TABLE osp_bat (LIKE osp_one INCLUDING ALL);
CREATE TABLE osp_ref (LIKE osp_one INCLUDING ALL);
-- a column without a built-in rendering (an array goes through to_jsonb)
CREATE TABLE osp_arr_one (id int PRIMARY KEY, a int[], t text);
CREATE TABLE osp_arr_bat (LIKE osp_arr_one INCLUDING ALL);
CREATE TABLE osp_arr_ref (LIKE osp_arr_one INCLUDING ALL);
-- member names that take more than 320 bytes as a text[]: the payload keeps them
CREATE TABLE osp_long_one (id int PRIMARY KEY,
  column_with_a_long_name_number_01_abcdefghijklmnopqrstuvwxyz text, column_with_a_long_name_number_02_abcdefghijklmnopqrstuvwxyz text,
  column_with_a_long_name_number_03_abcdefghijklmnopqrstuvwxyz text, column_with_a_long_name_number_04_abcdefghijklmnopqrstuvwxyz text,
  column_with_a_long_name_number_05_abcdefghijklmnopqrstuvwxyz text, column_with_a_long_name_number_06_abcdefghijklmnopqrstuvwxyz int);
CREATE TABLE osp_long_bat (LIKE osp_long_one INCLUDING ALL);
CREATE TABLE osp_long_ref (LIKE osp_long_one INCLUDING ALL);
-- a composite key (names of several lengths, a value to escape): the entity key is printed from the image too
CREATE TABLE osp_key_one (zz text, a int, "Ké""y" text, v text, PRIMARY KEY (zz, a, "Ké""y"));
CREATE TABLE osp_key_bat (LIKE osp_key_one INCLUDING ALL);
CREATE TABLE osp_key_ref (LIKE osp_key_one INCLUDING ALL);
SELECT count(*) AS mapped FROM (
  SELECT cdc.register_mapping(tbl, outbox => true)
  FROM unnest('{osp_one,osp_bat,osp_ref,osp_arr_one,osp_arr_bat,osp_arr_ref,osp_long_one,osp_long_bat,osp_long_ref,osp_key_one,osp_key_bat,osp_key_ref}'::regclass[]) AS tbl) m;

-- the changes, in order: (op, lsn, after-image); "table" is filled in per target
CREATE TABLE osp_changes (seq int PRIMARY KEY, family text, op text, id int, lsn bigint, after jsonb);
INSERT INTO osp_changes VALUES
 (1, 'all', 'c', 1, 100, jsonb_build_object('id', 1, 'b', true, 's2', -32768, 'i4', 2147483647, 'i8', -9223372036854775808,
    'n', '12.50', 'f4', '3.4e38', 'f8', '0.1', 'd', '2024-02-29', 'ts', '2024-02-29T12:34:56.123456',
    'tz', '2024-02-29T12:34:56.5Z', 't', E'quote " backslash \\ newline \n tab \t bell \u0007 é ✓ 🐘', 'vc', 'x',
    'c', 'ab', 'u', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'by', '3q2+7w==', 'iv', '1 day 02:03:04.5',
    'ip', '10.1.2.3/8', 'Wéird "name"', 'w')),
 (2, 'all', 'c', 2, 101, jsonb_build_object('id', 2, 'b', false, 's2', 0, 'i4', -1, 'i8', 0,
    'n', 'NaN', 'f4', 'NaN', 'f8', '-0', 'd', 'infinity', 'ts', '-infinity', 'tz', 'infinity', 't', '',
    'vc', '', 'c', '', 'u', '00000000-0000-0000-0000-000000000000', 'by', '', 'iv', '-3 mons +1 day -00:00:01',
    'ip', '::1', 'Wéird "name"', '')),
 (3, 'all', 'c', 3, 102, jsonb_build_object('id', 3, 'b', null, 's2', null, 'i4', null, 'i8', null, 'n', null, 'f4', null,
    'f8', null, 'd', null, 'ts', null, 'tz', null, 't', null, 'vc', null, 'c', null, 'u', null, 'by', null, 'iv', null,
    'ip', null, 'Wéird "name"', null)),
 (4, 'all', 'c', 4, 103, jsonb_build_object('id', 4, 'b', true, 's2', 7, 'i4', 7, 'i8', 7,
    'n', 'Infinity', 'f4', '-Infinity', 'f8', '1e+20', 'd', '0001-01-01', 'ts', '1999-12-31T23:59:59', 'tz', '1970-01-01T00:00:00Z',
    't', 'plain', 'vc', 'plain', 'c', 'xyz', 'u', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'by', 'AA==', 'iv', '0',
    'ip', '2001:db8::/32', 'Wéird "name"', 'x')),
 (5, 'all', 'u', 1, 104, jsonb_build_object('id', 1, 'b', false, 's2', 1, 'i4', 1, 'i8', 1,
    'n', '-0.000000000000000000000000000001', 'f4', '1.5e-05', 'f8', '123456789.123456789', 'd', '2024-03-01',
    'ts', '2024-03-01T00:00:00', 'tz', '2024-03-01T00:00:00+05:30', 't', E'\\u0000 is not a NUL here: \\\\', 'vc', 'y',
    'c', 'a', 'u', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'by', 'AQID/w==', 'iv', '1 year', 'ip', '192.168.0.1',
    'Wéird "name"', 'v2')),
 (6, 'all', 'u', 4, 105, jsonb_build_object('id', 4, 'b', true, 's2', 8, 'i4', 8, 'i8', 8, 'n', '-Infinity', 'f4', '0',
    'f8', '-1.7976931348623157e+308', 'd', '2000-01-01', 'ts', 'infinity', 'tz', '-infinity', 't', 'deleted next',
    'vc', 'z', 'c', 'q', 'u', null, 'by', null, 'iv', null, 'ip', null, 'Wéird "name"', null)),
 (7, 'all', 'd', 4, 106, NULL),
 (8, 'all', 'd', 2, 107, NULL),
 (9, 'all', 'c', 5, 108, jsonb_build_object('id', 5, 'b', true, 's2', 5, 'i4', 5, 'i8', 5, 'n', '5', 'f4', '5', 'f8', '5',
    'd', '2005-05-05', 'ts', '2005-05-05T05:05:05', 'tz', '2005-05-05T05:05:05Z', 't', 'five', 'vc', 'five', 'c', 'v',
    'u', null, 'by', 'BQ==', 'iv', '5 minutes', 'ip', '5.5.5.5', 'Wéird "name"', 'five')),
 (10, 'arr', 'c', 1, 200, '{"id": 1, "a": [1, null, 3], "t": "one \"1\""}'),
 (11, 'arr', 'u', 1, 201, '{"id": 1, "a": [], "t": null}'),
 (12, 'arr', 'c', 2, 202, '{"id": 2, "a": null, "t": "two"}'),
 (13, 'arr', 'd', 2, 203, NULL),
 (14, 'long', 'c', 1, 300, '{"id": 1, "column_with_a_long_name_number_01_abcdefghijklmnopqrstuvwxyz": "a", "column_with_a_long_name_number_06_abcdefghijklmnopqrstuvwxyz": 6}'),
 (15, 'long', 'u', 1, 301, '{"id": 1, "column_with_a_long_name_number_02_abcdefghijklmnopqrstuvwxyz": "b\"", "column_with_a_long_name_number_06_abcdefghijklmnopqrstuvwxyz": -6}'),
 (16, 'long', 'd', 1, 302, NULL),
 (17, 'key', 'c', 1, 400, '{"zz": "q\"uote\\ \u00e9", "a": -1, "Ké\"y": "k1", "v": "one"}'),
 (18, 'key', 'c', 2, 401, '{"zz": "", "a": 2, "Ké\"y": "\n", "v": "two"}'),
 (19, 'key', 'u', 2, 402, '{"zz": "", "a": 2, "Ké\"y": "\n", "v": "two again"}');

CREATE FUNCTION osp_table(family text, path text) RETURNS text LANGUAGE sql AS $$
  SELECT 'osp_' || CASE family WHEN 'all' THEN '' ELSE family || '_' END || path $$;
-- the envelope of a change for table tbl (a delete names its key in the before-image)
CREATE FUNCTION osp_event(c osp_changes, tbl text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', c.op, 'after', c.after,
                            'before', CASE WHEN c.op = 'd' THEN jsonb_build_object('id', c.id) END,
                            'source', jsonb_build_object('name', 'osp', 'schema', 'public', 'table', tbl, 'lsn', c.lsn)) $$;

-- one change per call into osp_*ref with cdc.direct_writes off and into osp_*one (in order); the same
-- changes of each family in one batch into osp_*bat
CREATE TABLE osp_outcomes (path text, family text, outcomes text);
DO $$
DECLARE c osp_changes; fam text; res text; path text;
BEGIN
  FOR fam IN SELECT DISTINCT family FROM osp_changes ORDER BY 1 LOOP
    FOREACH path IN ARRAY '{ref,one}'::text[] LOOP
      PERFORM set_config('cdc.direct_writes', (path = 'one')::text, true);
      res := '';
      FOR c IN SELECT * FROM osp_changes WHERE family = fam ORDER BY seq LOOP
        res := res || cdc_apply(osp_event(c, osp_table(fam, path))) || ' ';
      END LOOP;
      INSERT INTO osp_outcomes VALUES (path, fam, res);
    END LOOP;
    INSERT INTO osp_outcomes
    SELECT 'bat', fam, string_agg(o, ' ' ORDER BY n) || ' '
    FROM cdc_apply_batch((SELECT jsonb_agg(osp_event(c2, osp_table(fam, 'bat')) ORDER BY c2.seq)
                          FROM osp_changes c2 WHERE c2.family = fam), with_outcomes => true) b,
         unnest(b.outcomes) WITH ORDINALITY AS u(o, n);
  END LOOP;
END $$;
SELECT * FROM osp_outcomes ORDER BY family, path;

SHOW cdc.direct_writes;
-- the stored payloads and entity keys, in insertion order per target: equal text on the three paths
CREATE FUNCTION osp_stored(tbl text) RETURNS TABLE (n bigint, op "char", payload text, entity_key text) LANGUAGE sql AS $$
  SELECT row_number() OVER (ORDER BY r.id), r.op, r.payload::text, r.entity_key::text
  FROM cdc.outbox_rows r WHERE r.target = tbl::regclass ORDER BY r.id $$;
SELECT fam, path, count(*) AS rows, bool_and(ref.op = x.op) AS same_ops,
       bool_and(ref.payload IS NOT DISTINCT FROM x.payload) AS same_stored_text,
       bool_and(ref.entity_key IS NOT DISTINCT FROM x.entity_key) AS same_stored_key
FROM unnest('{all,arr,key,long}'::text[]) AS fam, unnest('{one,bat}'::text[]) AS path,
     LATERAL osp_stored(osp_table(fam, 'ref')) ref JOIN LATERAL osp_stored(osp_table(fam, path)) x USING (n)
GROUP BY fam, path ORDER BY fam, path;
-- what the batch stored, in full (the values array; the names are the dictionary entry's)
SELECT n, op, payload FROM osp_stored('osp_bat');
SELECT s.payload_keys FROM cdc.outbox_source s
WHERE s.id = (SELECT r.src FROM cdc.outbox_rows r WHERE r.target = 'osp_bat'::regclass LIMIT 1);
SELECT n, op, payload FROM osp_stored('osp_arr_bat');
SELECT n, op, left(payload, 80) AS payload FROM osp_stored('osp_long_bat');
SELECT n, op, entity_key, payload FROM osp_stored('osp_key_bat');

-- against PostgreSQL's own to_jsonb() of each row left in the tables: the last
-- stored payload of the key is its values printed in jsonb's key order, under
-- the settings payloads are printed with (outbox_payload_settings)
SET IntervalStyle = postgres;
SET DateStyle = ISO;
SET bytea_output = hex;
SET extra_float_digits = 1;
CREATE FUNCTION osp_oracle(tbl regclass) RETURNS TABLE (live_rows bigint, stored_is_to_jsonb_values boolean)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format($q$
    SELECT count(*), bool_and(stored = expected)
    FROM (SELECT (SELECT r.payload::text FROM cdc.outbox_rows r
                  WHERE r.target = %1$L::regclass AND r.entity_key::jsonb = jsonb_build_object('id', x.id::text)
                  ORDER BY r.id DESC LIMIT 1) AS stored,
                 (SELECT '[' || string_agg(e.value::text, ',' ORDER BY e.ord) || ']'
                  FROM jsonb_each(to_jsonb(x)) WITH ORDINALITY AS e(key, value, ord)) AS expected
          FROM %1$s x) s $q$, tbl);
END $$;
SELECT tbl, o.* FROM unnest('{osp_arr_bat,osp_bat,osp_one}'::regclass[]) AS tbl, LATERAL osp_oracle(tbl) o;
-- and the view shows the row: payload = to_jsonb(row) for every live row
SELECT count(*) AS live_rows, bool_and(o.payload = to_jsonb(x)) AS view_payload_is_the_row
FROM osp_bat x, LATERAL (SELECT v.payload FROM cdc.outbox v WHERE v.target = 'osp_bat'::regclass
                         AND v.entity_key = jsonb_build_object('id', x.id::text) ORDER BY v.id DESC LIMIT 1) o;
RESET IntervalStyle;
RESET DateStyle;
RESET bytea_output;
RESET extra_float_digits;

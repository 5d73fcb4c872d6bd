--
-- timestamp_strict_diff (review of the strict ISO timestamp form, image.cpp
-- StrictTimestampPg): a differential test.  Every text of a generated set
-- (days a month has or lacks in leap and common years, years 0000, 0001,
-- 9999 and of five digits, 24:00:00 and 23:59:60, 0 to 9 fraction digits
-- rounding into the next second, day and year, offsets Z, z, +00, -00,
-- +00:00:00, +14:00, -12:00, +15:59, +16:00, with and without a colon,
-- 'T', 't' and space, trailing spaces, BC, infinity ...) goes through
-- cdc_apply() into timestamptz, timestamptz(0), timestamptz(3), timestamp,
-- timestamp(0) and timestamp(3) columns, under several TimeZone, DateStyle
-- and timezone_abbreviations settings, and is compared with the cast of the
-- text to the column's type: the same value (the same instant), or the same
-- SQLSTATE and message (after cdc_apply's 'field ... (column ...): ').
-- Every mismatch is listed; none is expected.
--
CREATE SEQUENCE tsd_id;
CREATE TABLE tsd_t (id integer PRIMARY KEY, tz timestamptz, tz0 timestamptz(0), tz3 timestamptz(3),
                    ts timestamp, ts0 timestamp(0), ts3 timestamp(3));
CREATE TABLE tsd_texts (txt text PRIMARY KEY);
INSERT INTO tsd_texts
SELECT d || s || t || f || o
FROM unnest(ARRAY['2024-02-29','2023-02-29','2024-02-30','2000-02-29','1900-02-29','0000-01-01','0001-01-01',
                  '9999-12-31','10000-01-01','2024-13-01','2024-00-10','2024-01-00','1969-12-31','2024-04-31']) d,
     unnest(ARRAY['T',' ','t']) s,
     unnest(ARRAY['00:00:00','23:59:59','24:00:00','23:59:60','12:60:00','25:00:00']) t,
     unnest(ARRAY['','.5']) f,
     unnest(ARRAY['Z','+00','-05:30']) o
UNION
SELECT d || s || t || f || o
FROM unnest(ARRAY['2024-02-29','9999-12-31']) d,
     unnest(ARRAY['T',' ']) s,
     unnest(ARRAY['23:59:59']) t,
     unnest(ARRAY['','.','.0','.5','.05','.123','.1234','.12345','.999999','.9999995','.0000005','.1234567','.99999999','.000000001','.999999999']) f,
     unnest(ARRAY['','Z','z','+00','-00','+00:00','-00:00','+00:00:00','+14:00','-12:00','+15:59','-15:59','+16:00','+15:60',
                  '+05:30','+0530','+5','+05:3',' UTC',' Z',' +05','+05:30:15','-03:30:59',' ','  ','+05 ','Z ','+1','-1530']) o
UNION
SELECT unnest(ARRAY['infinity','-infinity','Infinity','epoch','allballs','0044-03-15 12:00:00+00 BC','0044-03-15T12:00:00Z BC',
  '0001-01-01 00:00:00+00 BC','4713-11-24 00:00:00+00 BC','4714-11-24 00:00:00+00 BC','294276-12-31 23:59:59+00',
  '294277-01-01 00:00:00+00','99999-01-01T00:00:00Z','12345-06-07 08:09:10+01','2024-01-01T00:00:00+00 AD',
  '2024-01-01T00:00:00.+00','2024-01-01T00:00:00,5Z','2024-1-1T00:00:00Z','2024-01-01T0:00:00Z','2024-01-01T00:0:00Z',
  '2024-01-01T00:00:0Z','2024-01-01T00:00Z','2024-01-01T00Z','2024-01-01Z','2024-01-01','20240101T000000Z',
  '2024-01-01T00:00:00+05:30:00','2024-01-01T00:00:00-00:00:01','2024-01-01T00:00:00+15:59:59','2024-01-01T00:00:00UTC',
  '2024-01-01T00:00:00+00:60','2024-01-01T00:00:00.5+00:59','2024-01-01T00:00:00Zulu','2024-01-01T00:00:00 Europe/Paris',
  '2024-01-01T00:00:00+05:30 UTC','2024-01-01T00:00:00Z+05','2024-01-01T00:00:00+05Z','2024-01-01  00:00:00Z',
  '2024-01-01T00:00:00-','2024-01-01T00:00:00+','2024-01-01T00:00:00+-05','2024-01-01T00:00:00++05',
  '2024-01-01T00:00:00+٠٥','2024-01-01T00:00:00.５Z','0000-02-29T00:00:00Z','0004-02-29T00:00:00Z','0100-02-29T00:00:00Z',
  '0400-02-29T00:00:00Z','1582-10-10T00:00:00Z','1883-11-18T12:00:00-04:56:02','1000-01-01 00:00:00-00:00',
  '2038-01-19T03:14:08Z','1901-12-13T20:45:52Z','9999-12-31T23:59:59.9999995Z','9999-12-31T23:59:59.999999-15:59',
  '0001-01-01T00:00:00+15:59','0001-01-01T00:00:00-15:59','9999-12-31T23:59:59.999999+15:59','9999-12-31 23:59:59.5+00'])
ON CONFLICT DO NOTHING;

CREATE FUNCTION tsd_ev(id int, col text, txt text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', 'c', 'source', jsonb_build_object('name', 'tsd', 'schema', 'public', 'table', 'tsd_t', 'lsn', 100, 'txId', 100),
    'after', jsonb_build_object('id', id, col, txt)) $$;

-- every text into every column, compared with the cast: the stored value, or
-- the SQLSTATE and the message (after cdc_apply's 'field ... (column ...): ')
CREATE FUNCTION tsd_mismatches() RETURNS TABLE (txt text, col text, via_apply text, via_cast text)
LANGUAGE plpgsql AS $$
DECLARE
  x record; c record; n int := 0; got text; want text; st text; msg text; ok boolean; v text;
BEGIN
  FOR x IN SELECT t.txt FROM tsd_texts t ORDER BY t.txt LOOP
    FOR c IN SELECT attname::text AS name, format_type(atttypid, atttypmod) AS typ FROM pg_attribute
             WHERE attrelid = 'tsd_t'::regclass AND attnum > 1 AND NOT attisdropped ORDER BY attnum LOOP
      n := nextval($q$tsd_id$q$);
      BEGIN
        EXECUTE format('SELECT (%L::%s)::text', x.txt, c.typ) INTO v;
        want := 'value ' || coalesce(v, 'NULL');
      EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
        want := st || ' ' || msg;
      END;
      BEGIN
        IF cdc_apply(tsd_ev(n, c.name, x.txt), 'tsd_t') <> 'applied' THEN
          got := 'not applied';
        ELSE
          EXECUTE format('SELECT %I::text FROM tsd_t WHERE id = $1', c.name) INTO v USING n;
          got := 'value ' || coalesce(v, 'NULL');
          -- the same instant, not only the same text
          EXECUTE format('SELECT %I IS NOT DISTINCT FROM %L::%s FROM tsd_t WHERE id = $1', c.name, x.txt, c.typ) INTO ok USING n;
          IF NOT ok THEN got := got || ' (another value)'; END IF;
        END IF;
      EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
        IF msg LIKE format('field "after.%s" (column "%s" of type %%): %%', c.name, c.name) THEN
          msg := substr(msg, strpos(msg, '): ') + 3);
        END IF;
        got := st || ' ' || msg;
      END;
      IF got IS DISTINCT FROM want THEN
        txt := x.txt; col := c.name; via_apply := got; via_cast := want;
        RETURN NEXT;
      END IF;
    END LOOP;
  END LOOP;
  DELETE FROM tsd_t;
END $$;
SELECT count(*) AS texts FROM tsd_texts;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, MDY';
SELECT * FROM tsd_mismatches();
SET TimeZone = 'America/St_Johns';
SET DateStyle = 'SQL, DMY';
SET timezone_abbreviations = 'Australia';
SELECT * FROM tsd_mismatches();
SET TimeZone = '<+0330>-03:30';
SET DateStyle = 'German';
SET timezone_abbreviations = 'India';
SELECT * FROM tsd_mismatches();
RESET TimeZone;
RESET DateStyle;
RESET timezone_abbreviations;
DROP FUNCTION tsd_mismatches();
DROP FUNCTION tsd_ev(int, text, text);
DROP TABLE tsd_t, tsd_texts;
DROP SEQUENCE tsd_id;

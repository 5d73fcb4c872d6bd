--
-- timestamp_strict_form (issue 13, nineteenth round): timestamptz and
-- timestamp values written in the strict ISO form with an explicit offset
-- (YYYY-MM-DD{T| }HH:MM:SS[.f]{Z|±HH[:MM]}) are converted without the input
-- function (image.cpp, StrictTimestampPg); every other text still goes
-- through it.  Either way the stored value must be the one a cast of the
-- text gives, under every typmod and in a session whose TimeZone and
-- DateStyle are not the defaults, and a text the type refuses must be
-- refused with the input function's SQLSTATE and message, naming the field.
--
SET TimeZone = 'America/St_Johns';
SET DateStyle = 'SQL, DMY';
CREATE DOMAIN tsf_dom AS timestamptz CHECK (VALUE <> '1999-01-01 00:00:00+00');
CREATE TABLE tsf_t (id integer PRIMARY KEY, src text, a timestamptz, b timestamptz(0), c timestamptz(3),
                    d timestamp, e timestamp(2), f tsf_dom);
CREATE TABLE tsf_texts (id integer PRIMARY KEY, txt text);
INSERT INTO tsf_texts VALUES
  (1, '2024-01-01T00:00:00.001000Z'),       -- the benchmark's form (Debezium ZonedTimestamp)
  (2, '2024-01-01 00:00:00.001+00'),        -- pgoutput's form
  (3, '2024-02-29T23:59:59.999999Z'),       -- a leap day; rounds up under (0), (2), (3)
  (4, '2023-12-31T23:59:59.5+05:30'),
  (5, '2023-12-31 23:59:59-03:30'),
  (6, '2001-06-30T12:00:00-15:59'),
  (7, '2001-06-30T12:00:00+15:00'),
  (8, '2001-06-30T12:00:00.1Z'),
  (9, '2001-06-30T12:00:00.123456-00'),
  (10, '0001-01-01T00:00:00Z'),
  (11, '9999-12-31T23:59:59.999999Z'),
  (12, '1970-01-01 00:00:00Z'),
  (13, '2000-03-01T00:00:00+01'),
  -- not the strict form: the input function decides
  (20, '2024-01-01T00:00:00.0000005Z'),     -- 7 fraction digits
  (21, '2024-01-01 00:00:00'),              -- no offset: the session's TimeZone
  (22, '2024-01-01T24:00:00Z'),             -- 24:00
  (23, '2024-01-01 00:00:00 UTC'),
  (24, '01/02/2024 10:00:00+02'),           -- DateStyle decides the order
  (25, '2024-01-01T00:00:00+05:30:15'),     -- an offset with seconds
  (26, '2024-01-01T00:00:00z'),
  (27, ' 2024-01-01T00:00:00Z'),
  (28, '2024-01-01T00:00:60Z');             -- a leap second
CREATE FUNCTION tsf_ev(id int, txt text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', 'c', 'source', jsonb_build_object('name', 'tsf', 'schema', 'public', 'table', 'tsf_t', 'lsn', 100, 'txId', 100),
    'after', jsonb_build_object('id', id, 'src', txt, 'a', txt, 'b', txt, 'c', txt, 'd', txt, 'e', txt, 'f', txt)) $$;
-- one by one, and as one batch
SELECT count(*) FILTER (WHERE cdc_apply(tsf_ev(id, txt), 'tsf_t') = 'applied') AS applied FROM tsf_texts;
SELECT applied FROM cdc_apply_batch((SELECT jsonb_agg(tsf_ev(id + 100, txt) ORDER BY id) FROM tsf_texts), 'tsf_t');
-- every stored value is the cast's
SELECT t.id, x.txt,
       t.a IS NOT DISTINCT FROM x.txt::timestamptz AS a, t.b IS NOT DISTINCT FROM x.txt::timestamptz(0) AS b,
       t.c IS NOT DISTINCT FROM x.txt::timestamptz(3) AS c, t.d IS NOT DISTINCT FROM x.txt::timestamp AS d,
       t.e IS NOT DISTINCT FROM x.txt::timestamp(2) AS e, t.f IS NOT DISTINCT FROM x.txt::tsf_dom AS f
FROM tsf_t t JOIN tsf_texts x ON x.id = t.id % 100 ORDER BY t.id;
-- in UTC, to read
SET TimeZone = 'UTC';
SET DateStyle = 'ISO';
SELECT id, a, b, c, d, e FROM tsf_t WHERE id < 100 ORDER BY id;
SET TimeZone = 'America/St_Johns';
-- texts the types refuse: the input function's error, naming the field and column
CREATE TABLE tsf_bad (id integer PRIMARY KEY, a timestamptz, d timestamp);
CREATE FUNCTION tsf_bad_ev(id int, col text, txt text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', 'c', 'source', jsonb_build_object('name', 'tsf', 'schema', 'public', 'table', 'tsf_bad', 'lsn', 100, 'txId', 100),
    'after', jsonb_build_object('id', id, col, txt)) $$;
\set VERBOSITY default
SELECT cdc_apply(tsf_bad_ev(1, 'a', '2023-02-29T00:00:00Z'), 'tsf_bad');
SELECT '2023-02-29T00:00:00Z'::timestamptz;
SELECT cdc_apply(tsf_bad_ev(2, 'd', '2024-13-01T00:00:00Z'), 'tsf_bad');
SELECT '2024-13-01T00:00:00Z'::timestamp;
SELECT cdc_apply(tsf_bad_ev(3, 'a', '2024-01-01T00:00:00+16'), 'tsf_bad');
SELECT '2024-01-01T00:00:00+16'::timestamptz;
SELECT cdc_apply(tsf_bad_ev(4, 'a', '0000-01-01T00:00:00Z'), 'tsf_bad');
SELECT '0000-01-01T00:00:00Z'::timestamptz;
SELECT applied FROM cdc_apply_batch(jsonb_build_array(tsf_bad_ev(5, 'a', '2024-01-01T00:00:00Z'), tsf_bad_ev(6, 'a', '2024-01-01T00:61:00Z')), 'tsf_bad');
SELECT '2024-01-01T00:61:00Z'::timestamptz;
-- a domain's CHECK still refuses (its input function runs)
SELECT cdc_apply(tsf_ev(200, '1999-01-01T00:00:00Z'), 'tsf_t');
-- nothing of the refused calls stayed
SELECT count(*) FROM tsf_bad;
SELECT count(*) FROM tsf_t WHERE id = 200;
RESET TimeZone;
RESET DateStyle;
DROP TABLE tsf_t, tsf_texts, tsf_bad;
DROP FUNCTION tsf_ev(int, text);
DROP FUNCTION tsf_bad_ev(int, text, text);
DROP DOMAIN tsf_dom;

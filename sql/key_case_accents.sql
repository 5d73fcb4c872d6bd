--
-- key_case_accents: text keys that differ only in case, accents,
-- normalisation form (NFC/NFD), compatibility characters or trailing
-- spaces name different entities (docs/sql-reference.md, cdc.entity_state:
-- key COLLATE "C", compared byte by byte), through cdc_apply() and
-- cdc_apply_batch(), under the database's collation and under deterministic
-- ICU collations, and a delete of one never blocks or removes its twin.
-- (batch_memory covers three keys on the batch path only.)  Tables: kca_*.
--
CREATE TABLE kca_plain (k text PRIMARY KEY, v int);
CREATE TABLE kca_icu (k varchar(20) COLLATE "en-x-icu" PRIMARY KEY, v int);
CREATE TABLE kca_two (a text COLLATE "de-x-icu", b text COLLATE "sv-x-icu", v int, PRIMARY KEY (a, b));
SELECT 1 FROM cdc.register_mapping('kca_plain', source_table => 'kca_plain', outbox => true);
SELECT 1 FROM cdc.register_mapping('kca_icu', source_table => 'kca_icu', outbox => true);
SELECT 1 FROM cdc.register_mapping('kca_two', source_table => 'kca_two');

CREATE TABLE kca_keys (n int, k text);
INSERT INTO kca_keys VALUES (1, 'abc'), (2, 'ABC'), (3, 'Abc'),
  (4, U&'r\00E9sum\00E9'),         -- NFC
  (5, U&'re\0301sume\0301'),       -- NFD
  (6, 'resume'), (7, U&'\00DF'), (8, 'ss'), (9, 'a '), (10, 'a'),
  (11, U&'\FB01'), (12, 'fi'), (13, U&'\0130'), (14, 'I');

CREATE FUNCTION kca_ev(tbl text, op text, k text, lsn int, v int DEFAULT NULL) RETURNS jsonb LANGUAGE sql AS $$
  SELECT dbz(op, tbl, CASE WHEN op <> 'd' THEN jsonb_build_object('k', k, 'v', v) END,
             lsn => '0/' || to_hex(lsn), tx => lsn,
             before => CASE WHEN op IN ('u', 'd') THEN jsonb_build_object('k', k) END)
$$;

-- every key created: the odd ones by a batch, the even ones one by one
SELECT events, applied FROM cdc_apply_batch(
  (SELECT jsonb_agg(kca_ev('kca_plain', 'c', k, 4096 + n, n) ORDER BY n) FROM kca_keys WHERE n % 2 = 1));
SELECT n, cdc_apply(kca_ev('kca_plain', 'c', k, 4096 + n, n)) FROM kca_keys WHERE n % 2 = 0 ORDER BY n;
SELECT count(*) AS rows, (SELECT count(*) FROM cdc.entity_state WHERE target = 'kca_plain'::regclass) AS entity_records
  FROM kca_plain;

-- delete one of each pair, then older changes of both: the twin applies,
-- the deleted key stays deleted (stale), in a batch and one by one
SELECT outcomes FROM cdc_apply_batch(
  (SELECT jsonb_agg(kca_ev('kca_plain', 'd', k, 8192 + n) ORDER BY n) FROM kca_keys WHERE n IN (2, 4, 8, 9, 11, 13)),
  with_outcomes => true);
SELECT outcomes FROM cdc_apply_batch(
  (SELECT jsonb_agg(kca_ev('kca_plain', 'u', k, 6144 + n, 100 + n) ORDER BY n) FROM kca_keys WHERE n <= 7),
  with_outcomes => true);
SELECT n, cdc_apply(kca_ev('kca_plain', 'u', k, 6144 + n, 100 + n)) FROM kca_keys WHERE n > 7 ORDER BY n;
SELECT n, p.v FROM kca_keys JOIN kca_plain p USING (k) ORDER BY n;
SELECT n, e.is_tombstone FROM kca_keys k
  JOIN cdc.entities e ON e.target = 'kca_plain'::regclass AND e.entity_key ->> 'k' = k.k
 ORDER BY n;
SELECT count(*) AS outbox_rows, count(DISTINCT idempotency_key) AS keys FROM cdc.outbox WHERE target = 'kca_plain'::regclass;

-- a deterministic ICU collation on the key column
SELECT outcomes FROM cdc_apply_batch(
  (SELECT jsonb_agg(kca_ev('kca_icu', 'c', k, 4096 + n, n) ORDER BY n) FROM kca_keys WHERE n <= 6),
  with_outcomes => true);
SELECT outcomes FROM cdc_apply_batch(jsonb_build_array(
  kca_ev('kca_icu', 'd', 'ABC', 8192),
  kca_ev('kca_icu', 'c', 'ABC', 4000, 9),                         -- older than the delete: stale
  kca_ev('kca_icu', 'u', 'abc', 6144, 60),
  kca_ev('kca_icu', 'd', U&'r\00E9sum\00E9', 8193),
  kca_ev('kca_icu', 'u', U&'re\0301sume\0301', 6145, 61)), with_outcomes => true);
SELECT n, i.v FROM kca_keys JOIN kca_icu i USING (k) ORDER BY n;

-- a two-column key, each column under another ICU collation
SELECT outcomes FROM cdc_apply_batch(jsonb_build_array(
  dbz('c', 'kca_two', '{"a": "x", "b": "Y", "v": 1}', lsn => '0/1001', tx => 1),
  dbz('c', 'kca_two', '{"a": "X", "b": "y", "v": 2}', lsn => '0/1002', tx => 2),
  dbz('c', 'kca_two', '{"a": "x", "b": "y", "v": 3}', lsn => '0/1003', tx => 3),
  dbz('d', 'kca_two', NULL, lsn => '0/1004', tx => 4, before => '{"a": "x", "b": "y"}'),
  dbz('c', 'kca_two', '{"a": "x", "b": "y", "v": 5}', lsn => '0/1002', tx => 2)), with_outcomes => true);  -- older than the delete: stale
SELECT a, b, v FROM kca_two ORDER BY a COLLATE "C", b COLLATE "C";

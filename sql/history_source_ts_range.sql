--
-- history_source_ts_range (fresh-user review h3; failed on integ 51e935b):
-- a history table's cdc_source_ts is source.ts_ms converted to a timestamp
-- (TimestampFromUnixMs, src/pg/apply/modes.cpp) with plain int64
-- arithmetic.  A ts_ms near the ends of bigint overflowed silently (signed
-- overflow): 9223372036854775807 was stored as 1969-12-31 23:59:59.999+00
-- and -9223372036854775808 as 1970-01-01 00:00:00+00, and the change was
-- applied; one just outside PostgreSQL's timestamp range failed with a bare
-- 22008 "timestamp out of range" naming no field.  Every other envelope
-- field that cannot be taken is refused naming it (docs/sql-reference.md).
-- Expected: the first and the last valid millisecond are stored exactly;
-- every ts_ms outside the range is refused with 22008 naming
-- "source.ts_ms", with nothing applied (no history row, no ledger claim),
-- by cdc_apply() and cdc_apply_batch().
--
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE TABLE tsr (id int PRIMARY KEY, amt numeric);
SELECT cdc.create_history_table('tsr_hist', 'tsr');
SELECT target FROM cdc.register_mapping('tsr_hist', source_table => 'tsr', key_columns => '{id}', mode => 'history');
CREATE FUNCTION tsr_ev(id int, lsn bigint, ts text) RETURNS text LANGUAGE sql AS $$
  SELECT format('{"op":"c","after":{"id":%s,"amt":1},"source":{"name":"tsr","schema":"public","table":"tsr","lsn":%s,"ts_ms":%s}}', id, lsn, ts) $$;
-- the ends of PostgreSQL's timestamp range: stored exactly
SELECT cdc_apply(tsr_ev(1, 1, '-210866803200000'));
SELECT cdc_apply(tsr_ev(2, 2, '9224318015999999'));
SELECT cdc_apply(tsr_ev(3, 3, '-1'));
SELECT id, cdc_source_ts FROM tsr_hist ORDER BY id;
-- outside it: refused naming the field, nothing applied
SELECT cdc_apply(tsr_ev(4, 4, '-210866803200001'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(tsr_ev(5, 5, '9224318016000000'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(tsr_ev(6, 6, '9223372036854775807'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(tsr_ev(7, 7, '-9223372036854775808'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc_apply_batch(jsonb_build_array(tsr_ev(8, 8, '8')::jsonb, tsr_ev(9, 9, '9223372036854775807')::jsonb));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS history_rows, (SELECT count(*) FROM cdc.ledger WHERE target = 'tsr_hist'::regclass) AS claims
  FROM tsr_hist;
DROP TABLE tsr_hist, tsr;
DROP FUNCTION tsr_ev(int, bigint, text);

--
-- insert_first_records: cdc_apply_batch() inserts the rows its entity
-- records say are new without looking their keys up first
-- (docs/internals.md, "Insert first"): an entity with no record, or whose
-- record is a tombstone, whatever the event's op.  The hint is wrong for
-- rows of a table loaded before cdc_apply wrote it: the first taken key
-- turns it off for the rest of the write.  The target's statistics show
-- the look-ups saved and the one taken-back insert of a wrong hint.  Each
-- scenario runs with the executor's writes (cdc.direct_writes on) and with
-- the statements (off): rows, entity records, outbox and counters equal.
--
CREATE FUNCTION ifr_ev(op text, id int, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'ifr', 'schema', 'public', 'table', current_setting('ifr.tbl'), 'lsn', lsn, 'txId', lsn),
    'before', CASE WHEN op = 'd' THEN jsonb_build_object('id', id) END,
    'after', CASE WHEN op <> 'd' THEN jsonb_build_object('id', id, 'v', v) END) $$;
CREATE TABLE ifr_result (run text, what text, result text);
-- The target's index scans (look-ups of keys), heap inserts (a taken-back
-- insert counts) and updates since the last call, from the cumulative
-- statistics (flushed by pg_stat_force_next_flush() in the statement before).
CREATE TABLE ifr_seen (tbl regclass PRIMARY KEY, idx_scan bigint, n_tup_ins bigint, n_tup_upd bigint);
CREATE FUNCTION ifr_writes(t regclass, OUT look_ups bigint, OUT inserts bigint, OUT updates bigint) LANGUAGE plpgsql AS $$
DECLARE s record;
BEGIN
  PERFORM pg_stat_clear_snapshot();
  SELECT coalesce(u.idx_scan, 0) AS idx_scan, u.n_tup_ins, u.n_tup_upd INTO s FROM pg_stat_user_tables u WHERE u.relid = t;
  SELECT s.idx_scan - coalesce(e.idx_scan, 0), s.n_tup_ins - coalesce(e.n_tup_ins, 0), s.n_tup_upd - coalesce(e.n_tup_upd, 0)
    INTO look_ups, inserts, updates FROM (SELECT) x LEFT JOIN ifr_seen e ON e.tbl = t;
  INSERT INTO ifr_seen VALUES (t, s.idx_scan, s.n_tup_ins, s.n_tup_upd)
    ON CONFLICT (tbl) DO UPDATE SET idx_scan = excluded.idx_scan, n_tup_ins = excluded.n_tup_ins, n_tup_upd = excluded.n_tup_upd;
END $$;
\getenv abs_srcdir PG_ABS_SRCDIR
\set scenario :abs_srcdir '/sql/include/insert_first_records_scenario.sql'
\set tbl ifr_on
\set dw on
\set outbox false
\i :scenario
\set tbl ifr_off
\set dw off
\i :scenario
\set tbl ifr_on_outbox
\set dw on
\set outbox true
\i :scenario
\set tbl ifr_off_outbox
\set dw off
\i :scenario
-- identical, part by part, with and without outbox
SELECT what, count(DISTINCT result) = 1 AS same, count(*) AS runs FROM ifr_result WHERE run LIKE '%outbox%' = false GROUP BY what ORDER BY what;
SELECT what, count(DISTINCT result) = 1 AS same, count(*) AS runs FROM ifr_result WHERE run LIKE '%outbox%' GROUP BY what ORDER BY what;
SELECT run, result FROM ifr_result WHERE what IN ('rows', 'stats') ORDER BY run, what;
DROP TABLE ifr_result, ifr_seen, ifr_on, ifr_off, ifr_on_outbox, ifr_off_outbox;
DROP FUNCTION ifr_ev(text, int, text, bigint);
DROP FUNCTION ifr_writes(regclass);

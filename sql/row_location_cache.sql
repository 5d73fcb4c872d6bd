--
-- row_location_cache: a key's row is fetched where this backend last saw
-- it (cdc.row_location_cache, docs/internals.md "Rows found where they were
-- last seen") and taken only if it is visible, written by nobody else and
-- has the key; anything else falls back to the key's index.  Each case
-- shows the index look-ups the cache saved (pg_stat_get_xact_numscans of
-- the key index, in the applying transaction) and that a remembered
-- location that went wrong behind the engine's back (a row moved, deleted,
-- its line pointer reused by another key, the heap truncated or rewritten)
-- changes no result: the same histories applied with the cache off end
-- with the same rows, entity records and counters.
--
CREATE FUNCTION rlc_ev(tbl text, op text, id int, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'rlc', 'schema', 'public', 'table', tbl, 'lsn', lsn, 'txId', lsn),
    'before', CASE WHEN op = 'd' THEN jsonb_build_object('id', id) END,
    'after', CASE WHEN op <> 'd' THEN jsonb_build_object('id', id, 'v', v) END) $$;
-- Applies `events` to `tbl` in one transaction and returns the outcome
-- counts with the look-ups of the target's key index it took.
CREATE FUNCTION rlc_apply(tbl regclass, events jsonb, OUT applied bigint, OUT stale bigint, OUT key_look_ups bigint)
LANGUAGE plpgsql AS $$
DECLARE
  pkey regclass := (SELECT indexrelid FROM pg_index WHERE indrelid = tbl AND indisprimary);
  before bigint := pg_stat_get_xact_numscans(pkey);
BEGIN
  SELECT r.applied, r.stale INTO applied, stale FROM cdc_apply_batch(events, tbl) r;
  key_look_ups := pg_stat_get_xact_numscans(pkey) - before;
END $$;
-- VACUUM removes a deleted row only when no transaction that could still
-- see it runs anywhere in the database: an autovacuum ANALYZE of another
-- test's table holds a snapshot while it runs, and once kept key 2's dead
-- row (the line pointer that case 4 needs reused stayed taken, "0 rows").
-- Waits until every other backend's snapshot is newer than the last delete
-- of rlc_case (rlc.delete_xid), so the VACUUM that follows removes it.
-- pg_stat_activity is read once per transaction and kept until it ends
-- (the backend status snapshot), and the whole CALL is one transaction:
-- each turn discards it (pg_stat_clear_snapshot), or a backend seen at the
-- first look stayed there for the whole wait (an autovacuum worker gone
-- long before: two quick runs on a loaded machine failed so).  A backend
-- in a VACUUM's vacuum phase (pg_stat_progress_vacuum) does not count:
-- PostgreSQL leaves its xmin out of other VACUUMs' horizon (PROC_IN_VACUUM,
-- procarray.c); nor does one of another database.
CREATE PROCEDURE rlc_wait_horizon() LANGUAGE plpgsql AS $$
DECLARE
  x xid := current_setting('rlc.delete_xid')::xid;
  t0 timestamptz := clock_timestamp();
BEGIN
  LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                 WHERE a.pid <> pg_backend_pid() AND a.backend_xmin IS NOT NULL AND age(a.backend_xmin) >= age(x)
                   AND a.datname = current_database()
                   AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_vacuum v WHERE v.pid = a.pid));
    IF clock_timestamp() - t0 > interval '60 s' THEN
      RAISE EXCEPTION 'a backend holds a snapshot older than the delete for 60 s: %',
        (SELECT string_agg(backend_type || ' ' || coalesce(query, ''), '; ') FROM pg_stat_activity a
          WHERE a.pid <> pg_backend_pid() AND a.backend_xmin IS NOT NULL AND age(a.backend_xmin) >= age(x)
            AND a.datname = current_database()
            AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_vacuum v WHERE v.pid = a.pid));
    END IF;
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
-- A second index makes an update of v move the row (no HOT update).
CREATE TABLE rlc_on (id int PRIMARY KEY, v text);
CREATE INDEX ON rlc_on (v);
CREATE TABLE rlc_off (LIKE rlc_on INCLUDING ALL);
SELECT count(*) FROM cdc.register_mapping('rlc_on', source_table => 'rlc_on', outbox => false);
SELECT count(*) FROM cdc.register_mapping('rlc_off', source_table => 'rlc_off', outbox => false);
SHOW cdc.row_location_cache;
-- The cases, applied to one table with the cache as set by the caller.
CREATE FUNCTION rlc_case(tbl regclass, n int) RETURNS TABLE (applied bigint, stale bigint, key_look_ups bigint)
LANGUAGE plpgsql AS $$
DECLARE t text := tbl::text; ctid2 tid;
BEGIN
  IF n = 1 THEN
    -- keys 1-3 inserted, then updated: found where they were inserted
    RETURN QUERY SELECT * FROM rlc_apply(tbl, jsonb_build_array(rlc_ev(t,'c',1,'a',10), rlc_ev(t,'c',2,'a',10), rlc_ev(t,'c',3,'a',10)));
    RETURN QUERY SELECT * FROM rlc_apply(tbl, jsonb_build_array(rlc_ev(t,'u',1,'b',20), rlc_ev(t,'u',2,'b',20), rlc_ev(t,'u',3,'b',20)));
  ELSIF n = 2 THEN
    -- a session moves row 1 (its index entries change): the old location holds a dead tuple
    EXECUTE format('UPDATE %s SET v = %L WHERE id = 1', tbl, 'moved by a session');
    RETURN QUERY SELECT * FROM rlc_apply(tbl, jsonb_build_array(rlc_ev(t,'u',1,'c',30)));
    -- found again where the engine's own update put it
    RETURN QUERY SELECT * FROM rlc_apply(tbl, jsonb_build_array(rlc_ev(t,'u',1,'d',40)));
  ELSIF n = 3 THEN
    -- a session deletes row 2 (where the engine last wrote it: its remembered location) and vacuums
    EXECUTE format('SELECT ctid FROM %s WHERE id = 2', tbl) INTO ctid2;
    PERFORM set_config('rlc.ctid2', ctid2::text, false);
    EXECUTE format('DELETE FROM %s WHERE id = 2', tbl);
    PERFORM set_config('rlc.delete_xid', pg_current_xact_id()::text, false);
  ELSIF n = 4 THEN
    -- the session's next rows take every free line pointer of the page, key 2's among them
    EXECUTE format('INSERT INTO %s SELECT g, %L FROM generate_series(500, 519) g', tbl, 'session row');
    -- the remembered location of key 2 holds another key: not taken; key 2 has no row, so it is inserted
    RETURN QUERY SELECT * FROM rlc_apply(tbl, jsonb_build_array(rlc_ev(t,'u',2,'e',50)));
  ELSIF n = 5 THEN
    -- keys 10-409 over several pages, remembered where they went in
    RETURN QUERY SELECT * FROM rlc_apply(tbl, (SELECT jsonb_agg(rlc_ev(t,'c',g,repeat('x', 200),60)) FROM generate_series(10, 409) g));
    -- a session removes them all but re-inserts key 409, which lands on the first page once the others are vacuumed away
    EXECUTE format('DELETE FROM %s WHERE id BETWEEN 10 AND 409', tbl);
    PERFORM set_config('rlc.delete_xid', pg_current_xact_id()::text, false);
  ELSIF n = 6 THEN
    EXECUTE format('INSERT INTO %s VALUES (409, %L)', tbl, 'back on the first page');
    -- its remembered location is past the end of the truncated heap: not fetched, found through the index
    RETURN QUERY SELECT * FROM rlc_apply(tbl, jsonb_build_array(rlc_ev(t,'u',409,'f',70), rlc_ev(t,'u',3,'f',70)));
  ELSIF n = 7 THEN
    -- a rewrite (VACUUM FULL) gives the table a new file: every location of the old one is forgotten
    RETURN QUERY SELECT * FROM rlc_apply(tbl, jsonb_build_array(rlc_ev(t,'u',1,'g',80), rlc_ev(t,'u',3,'g',80)));
    RETURN QUERY SELECT * FROM rlc_apply(tbl, jsonb_build_array(rlc_ev(t,'u',1,'h',90), rlc_ev(t,'u',3,'h',90)));
  ELSIF n = 8 THEN
    -- a delete then the key again: the delete forgets the location, the new row is remembered
    RETURN QUERY SELECT * FROM rlc_apply(tbl, jsonb_build_array(rlc_ev(t,'d',3,NULL,100)));
    RETURN QUERY SELECT * FROM rlc_apply(tbl, jsonb_build_array(rlc_ev(t,'c',3,'i',110)));
    RETURN QUERY SELECT * FROM rlc_apply(tbl, jsonb_build_array(rlc_ev(t,'u',3,'j',120), rlc_ev(t,'u',3,'k',90)));
  END IF;
END $$;
\echo the cache on (the default)
SELECT * FROM rlc_case('rlc_on', 1);
SELECT * FROM rlc_case('rlc_on', 2);
SELECT * FROM rlc_case('rlc_on', 3);
CALL rlc_wait_horizon();
VACUUM rlc_on;
SELECT * FROM rlc_case('rlc_on', 4);
SELECT id <> 2 AS another_key_there FROM rlc_on WHERE ctid = current_setting('rlc.ctid2')::tid;
SELECT id, v FROM rlc_on WHERE id = 2 OR v = 'session row' ORDER BY id;
SELECT * FROM rlc_case('rlc_on', 5);
CALL rlc_wait_horizon();
VACUUM rlc_on;
SELECT pg_relation_size('rlc_on') / current_setting('block_size')::int AS pages_after_vacuum;
SELECT * FROM rlc_case('rlc_on', 6);
SELECT (ctid::text::point)[0] = 0 AS on_the_first_page, id, v FROM rlc_on WHERE id = 409;
VACUUM FULL rlc_on;
SELECT * FROM rlc_case('rlc_on', 7);
SELECT * FROM rlc_case('rlc_on', 8);
\echo the same with the cache off: every look-up through the index
SET cdc.row_location_cache = 0;
SELECT * FROM rlc_case('rlc_off', 1);
SELECT * FROM rlc_case('rlc_off', 2);
SELECT * FROM rlc_case('rlc_off', 3);
CALL rlc_wait_horizon();
VACUUM rlc_off;
SELECT * FROM rlc_case('rlc_off', 4);
SELECT * FROM rlc_case('rlc_off', 5);
CALL rlc_wait_horizon();
VACUUM rlc_off;
SELECT * FROM rlc_case('rlc_off', 6);
VACUUM FULL rlc_off;
SELECT * FROM rlc_case('rlc_off', 7);
SELECT * FROM rlc_case('rlc_off', 8);
RESET cdc.row_location_cache;
\echo equal rows, entity records and counters
SELECT id, v FROM rlc_on ORDER BY id;
SELECT (SELECT array_agg((id, v) ORDER BY id) FROM rlc_on) = (SELECT array_agg((id, v) ORDER BY id) FROM rlc_off) AS rows_equal;
SELECT (SELECT array_agg((key, v0, v1, v2, v3, deleted, chash) ORDER BY key) FROM cdc.entity_state WHERE target = 'rlc_on'::regclass)
     = (SELECT array_agg((key, v0, v1, v2, v3, deleted, chash) ORDER BY key) FROM cdc.entity_state WHERE target = 'rlc_off'::regclass) AS records_equal;
SELECT target::text, applied, duplicate, stale, conflict FROM cdc.stats WHERE target IN ('rlc_on'::regclass, 'rlc_off'::regclass) ORDER BY 1;

-- A random history of 60 keys in batches of 40 changes, with a cache of
-- one kilobyte (64 locations: keys push each other out all the time, and a
-- location is often another key's), against the cache off.
CREATE TABLE rlc_small (id int PRIMARY KEY, v text);
CREATE TABLE rlc_ref (LIKE rlc_small INCLUDING ALL);
SELECT count(*) FROM cdc.register_mapping('rlc_small', source_table => 'rlc_small', outbox => false);
SELECT count(*) FROM cdc.register_mapping('rlc_ref', source_table => 'rlc_ref', outbox => false);
SELECT setseed(0.42);
CREATE TABLE rlc_history AS
  SELECT b, n, (ARRAY['c','u','u','u','d'])[1 + floor(random() * 5)::int] AS op, 1 + floor(random() * 60)::int AS id,
         md5(random()::text) AS v
    FROM generate_series(1, 50) b, generate_series(1, 40) n;
CREATE FUNCTION rlc_replay(tbl regclass, cache text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE batch int; total bigint := 0;
BEGIN
  PERFORM set_config('cdc.row_location_cache', cache, true);
  FOR batch IN 1..50 LOOP
    total := total + (SELECT applied FROM cdc_apply_batch(
      (SELECT jsonb_agg(rlc_ev(tbl::text, h.op, h.id, h.v, batch * 100 + h.n) ORDER BY h.n) FROM rlc_history h WHERE h.b = batch), tbl));
    -- rows moved behind the engine's back now and then
    IF batch % 7 = 0 THEN
      EXECUTE format('UPDATE %s SET v = v || %L WHERE id %% 5 = 0', tbl, '+');
    END IF;
  END LOOP;
  RETURN total;
END $$;
SELECT rlc_replay('rlc_small', '1kB') AS applied_small, rlc_replay('rlc_ref', '0') AS applied_ref;
SELECT (SELECT array_agg((id, v) ORDER BY id) FROM rlc_small) = (SELECT array_agg((id, v) ORDER BY id) FROM rlc_ref) AS rows_equal,
       (SELECT count(*) FROM rlc_small) AS rows;
SELECT (SELECT array_agg((key, v0, v1, v2, v3, deleted, chash) ORDER BY key) FROM cdc.entity_state WHERE target = 'rlc_small'::regclass)
     = (SELECT array_agg((key, v0, v1, v2, v3, deleted, chash) ORDER BY key) FROM cdc.entity_state WHERE target = 'rlc_ref'::regclass) AS records_equal;

SELECT cdc.unregister_mapping(t) FROM unnest(ARRAY['rlc_on', 'rlc_off', 'rlc_small', 'rlc_ref']::regclass[]) t;
DROP TABLE rlc_on, rlc_off, rlc_small, rlc_ref, rlc_history;
DROP FUNCTION rlc_ev, rlc_apply, rlc_case, rlc_replay;
DROP PROCEDURE rlc_wait_horizon;

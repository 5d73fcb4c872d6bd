--
-- row_location_hot_chain (review helper h3): a key whose row was updated
-- HOT before this backend first looked it up.  The descent of the key's
-- index follows the HOT chain from its root to the visible version, and
-- index_fetch_heap leaves that version's TID (a heap-only tuple) in
-- xs_heaptid.  FindRowPg remembered that TID as if it were the chain's
-- root (docs/internals.md, "Rows found where they were last seen": "the
-- TID of the row's HOT chain root"), and a fetch at a heap-only tuple
-- finds nothing (heap_hot_search_buffer does not start a chain there), so
-- such a key was looked up through the index at every change, in every
-- later batch, until an update that was not HOT: after a worker restart,
-- or once the cache had pushed the key out, the cache never served it
-- again; the same for entity records (cdc.entity_state).  FindRowPg now
-- keeps the index entry's TID (index_getnext_tid before index_fetch_heap).
-- Results were right either way (the fallback), so only the look-ups
-- differ: the expected counts are those of a key whose row was never
-- updated HOT (one look-up, then none).
--
CREATE FUNCTION rlh_ev(tbl text, op text, id int, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'rlh', 'schema', 'public', 'table', tbl, 'lsn', lsn, 'txId', lsn),
    'before', CASE WHEN op = 'd' THEN jsonb_build_object('id', id) END,
    'after', CASE WHEN op <> 'd' THEN jsonb_build_object('id', id, 'v', v) END) $$;
-- Applies updates of keys 1-3 to `tbl` and returns the look-ups of its key index.
CREATE FUNCTION rlh_apply(tbl regclass, v text, lsn bigint, OUT applied bigint, OUT key_look_ups bigint)
LANGUAGE plpgsql AS $$
DECLARE
  pkey regclass := (SELECT indexrelid FROM pg_index WHERE indrelid = tbl AND indisprimary);
  before bigint := pg_stat_get_xact_numscans(pkey);
BEGIN
  SELECT r.applied INTO applied
    FROM cdc_apply_batch((SELECT jsonb_agg(rlh_ev(tbl::text, 'u', g, v, lsn)) FROM generate_series(1, 3) g), tbl) r;
  key_look_ups := pg_stat_get_xact_numscans(pkey) - before;
END $$;
-- No other index: every update of v is HOT.
CREATE TABLE rlh_hot (id int PRIMARY KEY, v text);
CREATE TABLE rlh_fresh (LIKE rlh_hot INCLUDING ALL);
SELECT count(*) FROM cdc.register_mapping('rlh_hot', source_table => 'rlh_hot', outbox => false);
SELECT count(*) FROM cdc.register_mapping('rlh_fresh', source_table => 'rlh_fresh', outbox => false);
INSERT INTO rlh_hot SELECT g, 'a' FROM generate_series(1, 3) g;
INSERT INTO rlh_fresh SELECT g, 'a' FROM generate_series(1, 3) g;
-- rlh_hot's rows updated HOT once: each key's index entry points to a chain root whose visible version is heap-only
UPDATE rlh_hot SET v = 'b';
SELECT count(*) AS heap_only_versions FROM rlh_hot WHERE ctid NOT IN ('(0,1)', '(0,2)', '(0,3)');
\echo a row never updated HOT: looked up once, then fetched where it was found
SELECT * FROM rlh_apply('rlh_fresh', 'c', 10);
SELECT * FROM rlh_apply('rlh_fresh', 'd', 20);
SELECT * FROM rlh_apply('rlh_fresh', 'e', 30);
\echo a row updated HOT before its first look-up: the same
SELECT * FROM rlh_apply('rlh_hot', 'c', 10);
SELECT * FROM rlh_apply('rlh_hot', 'd', 20);
SELECT * FROM rlh_apply('rlh_hot', 'e', 30);
-- A new backend (an apply worker restarted): every row and entity record
-- above was updated HOT by the engine.  Expected: one look-up of each
-- key's row and record, then none.
CREATE FUNCTION rlh_apply2(tbl regclass, v text, lsn bigint, OUT applied bigint, OUT key_look_ups bigint, OUT record_look_ups bigint)
LANGUAGE plpgsql AS $$
DECLARE
  pkey regclass := (SELECT indexrelid FROM pg_index WHERE indrelid = tbl AND indisprimary);
  epkey regclass := (SELECT indexrelid FROM pg_index WHERE indrelid = 'cdc.entity_state'::regclass AND indisprimary);
  before bigint := pg_stat_get_xact_numscans(pkey);
  ebefore bigint := pg_stat_get_xact_numscans(epkey);
BEGIN
  SELECT r.applied INTO applied
    FROM cdc_apply_batch((SELECT jsonb_agg(rlh_ev(tbl::text, 'u', g, v, lsn)) FROM generate_series(1, 3) g), tbl) r;
  key_look_ups := pg_stat_get_xact_numscans(pkey) - before;
  record_look_ups := pg_stat_get_xact_numscans(epkey) - ebefore;
END $$;
\c
SELECT * FROM rlh_apply2('rlh_fresh', 'f', 40);
SELECT * FROM rlh_apply2('rlh_fresh', 'g', 50);
SELECT * FROM rlh_apply2('rlh_fresh', 'h', 60);
SELECT * FROM rlh_apply2('rlh_hot', 'f', 40);
SELECT * FROM rlh_apply2('rlh_hot', 'g', 50);
SELECT * FROM rlh_apply2('rlh_hot', 'h', 60);
SELECT (SELECT array_agg((id, v) ORDER BY id) FROM rlh_hot) = (SELECT array_agg((id, v) ORDER BY id) FROM rlh_fresh) AS rows_equal;
SELECT cdc.unregister_mapping(t) FROM unnest(ARRAY['rlh_hot', 'rlh_fresh']::regclass[]) t;
DROP TABLE rlh_hot, rlh_fresh;
DROP FUNCTION rlh_ev, rlh_apply, rlh_apply2;

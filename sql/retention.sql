--
-- retention: the replay horizon (SPEC §3 fourth answer, §8).  cdc.prune()
-- removes ledger entries, tombstones and published outbox rows older than
-- the horizon, in bounded steps, never anything the horizon covers; a
-- replay after pruning is decided by the remaining records, and a change
-- that cannot be proven new or old is expired (refused, dead-lettered or
-- applied as the mapping says), never silently applied.  Also: the compact
-- layout's keys, and a ledger digest collision.  Tables are called rt_*.
--
-- Time is simulated: the test moves entries into the past by changing
-- their stored seconds (claimed_s, touched_s) and outbox created_at.
--

-- The horizon setting and its default.
SELECT cdc.replay_horizon() AS default_horizon;
SET cdc.replay_horizon = '36h';
SELECT cdc.replay_horizon() AS horizon_36h;
RESET cdc.replay_horizon;

CREATE TABLE rt_orders (id int PRIMARY KEY, status text NOT NULL);
SELECT target, outbox, expired_policy FROM cdc.register_mapping('rt_orders', outbox => true);
CREATE FUNCTION rt_ev(op text, id int, status text, lsn text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT CASE WHEN op = 'd' THEN dbz('d', 'rt_orders', NULL, lsn, NULL, before => jsonb_build_object('id', id))
              ELSE dbz(op, 'rt_orders', jsonb_build_object('id', id, 'status', status), lsn) END
$$;
-- Moves everything rt_orders has so far N days into the past.
CREATE FUNCTION rt_age(days int) RETURNS void LANGUAGE sql AS $$
  UPDATE cdc.ledger SET claimed_s = claimed_s - days * 86400 WHERE target = 'rt_orders'::regclass;
  UPDATE cdc.entity_state SET touched_s = touched_s - days * 86400 WHERE target = 'rt_orders'::regclass;
  UPDATE cdc.outbox SET created_at = created_at - days * interval '1 day' WHERE target = 'rt_orders'::regclass;
$$;
-- Runs cdc.prune(max_pages) until every table had a full pass; sums per
-- table.  calls_as_blocks: as many calls as the largest table had blocks
-- left to scan, max_pages at a time (the tables are shared with every
-- earlier test of the schedule, so their sizes are not this file's to
-- print).
CREATE FUNCTION rt_prune(max_pages int DEFAULT 1, horizon interval DEFAULT NULL)
RETURNS TABLE (relation text, removed bigint, calls_as_blocks boolean, bounded boolean) LANGUAGE plpgsql AS $$
DECLARE
  r record;
  done text[] := '{}';
  total jsonb := '{}';
  n int := 0;
  ok boolean := true;
  expect int;
BEGIN
  SELECT max(greatest(1, ceil((pg_relation_size(('cdc.' || CASE p.relation WHEN 'outbox' THEN 'outbox_rows' ELSE p.relation END)::regclass)
                               / current_setting('block_size')::int - p.next_block) / max_pages::numeric)))
    INTO expect FROM cdc.prune_state p;
  WHILE cardinality(done) < 4 LOOP
    n := n + 1;
    FOR r IN SELECT * FROM cdc.prune(max_pages, horizon) LOOP
      total := total || jsonb_build_object(r.relation, coalesce((total->>r.relation)::bigint, 0) + r.removed);
      ok := ok AND r.scanned_blocks <= max_pages;
      IF r.sweep_done AND NOT r.relation = ANY (done) THEN
        done := done || r.relation;
      END IF;
    END LOOP;
  END LOOP;
  RETURN QUERY SELECT k, v::bigint, n = expect, ok FROM jsonb_each_text(total) AS t(k, v) ORDER BY 1;
END $$;

-- ===========================================================================
-- 1. Old history (8 days ago): keys 1..4 created, 2 and 3 deleted, 1
--    updated; the outbox rows of 1 published.  Then recent changes (now):
--    key 5 created and deleted, key 6 created.
-- ===========================================================================
CREATE TABLE rt_ev AS
  SELECT * FROM (VALUES
    (1, rt_ev('c', 1, 'new', '0/1000')), (2, rt_ev('c', 2, 'new', '0/1100')), (3, rt_ev('c', 3, 'new', '0/1200')),
    (4, rt_ev('c', 4, 'new', '0/1300')), (5, rt_ev('d', 2, NULL, '0/1400')), (6, rt_ev('d', 3, NULL, '0/1500')),
    (7, rt_ev('u', 1, 'paid', '0/1600'))) v(n, ev);
SELECT n, cdc_apply(ev) FROM rt_ev ORDER BY n;
SELECT cdc.outbox_mark_published(ARRAY(SELECT id FROM cdc.outbox WHERE target = 'rt_orders'::regclass
                                                                     AND entity_key = '{"id": "1"}')) AS published;
SELECT FROM rt_age(8);
INSERT INTO rt_ev VALUES (8, rt_ev('c', 5, 'new', '0/2000')), (9, rt_ev('d', 5, NULL, '0/2100')), (10, rt_ev('c', 6, 'new', '0/2200'));
SELECT n, cdc_apply(ev) FROM rt_ev WHERE n >= 8 ORDER BY n;
SELECT ledger_count('rt_orders') AS ledger, (SELECT count(*) FROM cdc.tombstones WHERE target = 'rt_orders'::regclass) AS tombstones,
       outbox_count('rt_orders') AS outbox;

-- ===========================================================================
-- 2. Pruning with the default horizon (7 days), one block per table per
--    call: the 8-day-old ledger entries, tombstones and published outbox
--    rows go; live entity records stay whatever their age; everything
--    within the horizon stays.
-- ===========================================================================
SELECT * FROM rt_prune(1);
SELECT * FROM ledger_has('rt_orders', VARIADIC ARRAY(
  SELECT format('dbz:srv:src:public.rt_orders:%s:%s:::{"id": "%s"}', ev->>'op', ev->'source'->>'lsn',
                coalesce(ev->'after'->>'id', ev->'before'->>'id')) FROM rt_ev ORDER BY n));
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'rt_orders'::regclass ORDER BY entity_key::text;
SELECT op, entity_key, published_at IS NOT NULL AS published FROM cdc.outbox WHERE target = 'rt_orders'::regclass ORDER BY id;
-- the watermark: the greatest pruned tombstone version (key 3's delete)
SELECT target, s.name AS source, ARRAY[v0::bigint, v1, v2, v3::bigint] AS watermark
  FROM cdc.prune_watermark w JOIN cdc.source s ON s.id = w.src WHERE target = 'rt_orders'::regclass;
-- a second pass removes nothing more
SELECT * FROM rt_prune(1000);
-- a shorter horizon covers less: 1 hour still keeps what happened now
SELECT * FROM rt_prune(1000, interval '1 hour');
SELECT ledger_count('rt_orders') AS ledger_after_1h_horizon;

-- ===========================================================================
-- 3. Replays after pruning.  The remaining records decide what they can;
--    what they cannot is expired (policy refuse: nothing applied, counted).
-- ===========================================================================
SELECT cdc_apply(ev) AS key1_create_replayed FROM rt_ev WHERE n = 1;     -- live record {..4096..} newer: stale
SELECT cdc_apply(ev) AS key1_update_replayed FROM rt_ev WHERE n = 7;     -- equal version and content: duplicate
SELECT cdc_apply(ev) AS key2_create_replayed FROM rt_ev WHERE n = 2;     -- tombstone pruned, <= watermark: expired
SELECT cdc_apply(ev) AS key2_delete_replayed FROM rt_ev WHERE n = 5;     -- expired
SELECT cdc_apply(rt_ev('c', 9, 'never-seen', '0/1450')) AS unknown_old_key;  -- no record, <= watermark: expired
SELECT cdc_apply(ev) AS key5_create_replayed FROM rt_ev WHERE n = 8;     -- ledger entry within the horizon: duplicate
SELECT * FROM rt_orders ORDER BY id;
SELECT outbox_count('rt_orders') AS outbox_rows_unchanged;
SELECT applied, duplicate, stale, expired, outbox_rows FROM cdc.stats WHERE target = 'rt_orders'::regclass;
-- a change newer than the watermark is provably new: key 2 re-created
SELECT cdc_apply(rt_ev('c', 2, 'again', '0/3000')) AS key2_recreated;
SELECT * FROM rt_orders WHERE id = 2;

-- expired_policy 'dead_letter': refused and kept for the operator
SELECT target, expired_policy FROM cdc.register_mapping('rt_orders', outbox => true, expired_policy => 'dead_letter');
SELECT cdc_apply(rt_ev('u', 3, 'late', '0/1450'), NULL, 'late-3') AS key3_late_update;
SELECT entity_key, delivery_key, op, version, watermark, event_image FROM cdc.dead_letter WHERE target = 'rt_orders'::regclass;
SELECT count(*) AS key3_rows FROM rt_orders WHERE id = 3;
-- expired_policy 'apply': applied as new, and still counted as expired
SELECT target, expired_policy FROM cdc.register_mapping('rt_orders', outbox => true, expired_policy => 'apply');
SELECT cdc_apply(rt_ev('u', 3, 'late', '0/1450'), NULL, 'late-3-again') AS key3_applied_as_new;
SELECT * FROM rt_orders WHERE id = 3;
SELECT applied, expired FROM cdc.stats WHERE target = 'rt_orders'::regclass;
\set SHOW_CONTEXT never
SELECT cdc.register_mapping('rt_orders', expired_policy => 'ignore');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors

-- ===========================================================================
-- 4. History tables are never expired: their unique (cdc_key, cdc_version)
--    is not pruned, so a replay after pruning still inserts nothing.
-- ===========================================================================
CREATE TABLE rt_src (id int PRIMARY KEY, v text);
SELECT cdc.create_history_table('rt_hist', 'rt_src');
SELECT target FROM cdc.register_mapping('rt_hist', source_table => 'rt_src', key_columns => '{id}', mode => 'history');
SELECT cdc_apply(dbz('c', 'rt_src', '{"id": 1, "v": "a"}', '0/5000')) AS hist_create,
       cdc_apply(dbz('d', 'rt_src', NULL, '0/5100', before => '{"id": 1}')) AS hist_delete;
UPDATE cdc.ledger SET claimed_s = claimed_s - 30 * 86400 WHERE target = 'rt_hist'::regclass;
SELECT sum(removed) > 0 AS pruned_something FROM rt_prune(1000);
SELECT ledger_count('rt_hist') AS hist_ledger;
SELECT cdc_apply(dbz('c', 'rt_src', '{"id": 1, "v": "a"}', '0/5000')) AS hist_create_replayed,
       cdc_apply(dbz('d', 'rt_src', NULL, '0/5100', before => '{"id": 1}')) AS hist_delete_replayed;
SELECT count(*) AS history_rows FROM rt_hist;

-- ===========================================================================
-- 5. cdc.horizon_status.
-- ===========================================================================
SELECT horizon, cutoff = now() - interval '7 days' AS cutoff_ok, oldest_ledger_entry <= now() AS oldest_ok,
       ledger_rows = (SELECT count(*) FROM cdc.ledger) AS ledger_rows_ok, ledger_bytes > 0 AS ledger_bytes_ok,
       tombstones = (SELECT count(*) FROM cdc.tombstones) AS tombstones_ok, entity_state_bytes > 0 AS entity_bytes_ok,
       watermarks >= 1 AS has_watermark, expired_changes >= 5 AS counted_expired,
       last_prune_at IS NOT NULL AS pruned, last_full_sweep_at IS NOT NULL AS swept
  FROM cdc.horizon_status;
SELECT array_agg(attname ORDER BY attnum) AS horizon_status_columns
  FROM pg_attribute WHERE attrelid = 'cdc.horizon_status'::regclass AND attnum > 0;

-- Bad arguments.
\set SHOW_CONTEXT never
SELECT * FROM cdc.prune(horizon => interval '-1 day');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.prune(max_pages => 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors

-- ===========================================================================
-- 6. The compact layout: composite keys with characters array_out quotes
--    round-trip to JSON, and a late truncate keeps the newer composite row.
-- ===========================================================================
CREATE TABLE rt_comp (a text, b int, v text, PRIMARY KEY (a, b));
SELECT cdc_apply(dbz('c', 'rt_comp', '{"a": "x, y {z}", "b": 1, "v": "one"}', '0/6000'), 'rt_comp'),
       cdc_apply(dbz('c', 'rt_comp', '{"a": "NULL", "b": 2, "v": "two"}', '0/6100'), 'rt_comp'),
       cdc_apply(dbz('c', 'rt_comp', '{"a": "q\"b\\s", "b": 3, "v": "three"}', '0/6300'), 'rt_comp');
SELECT key FROM cdc.entity_state WHERE target = 'rt_comp'::regclass ORDER BY key;
SELECT entity_key FROM cdc.entities WHERE target = 'rt_comp'::regclass ORDER BY entity_key::text;
-- a truncate at 0/6200 arrives late: the row changed at 0/6300 survives it
SELECT cdc_apply(dbz('t', 'rt_comp', NULL, '0/6200'), 'rt_comp') AS late_truncate;
SELECT a, b, v FROM rt_comp ORDER BY b;

-- ===========================================================================
-- 7. A ledger digest collision cannot skip a change: forge the ledger entry
--    another delivery would make for a new change; the version records
--    prove it new and it applies.  A forged entry for an old change is a
--    duplicate.
-- ===========================================================================
INSERT INTO cdc.ledger VALUES (cdc.delivery_digest('rt_orders', 'collides:1'), 'rt_orders', 0),
                              (cdc.delivery_digest('rt_orders', 'collides:2'), 'rt_orders', 0);
SELECT cdc_apply(rt_ev('u', 6, 'shipped', '0/7000'), NULL, 'collides:1') AS new_change_applies;
SELECT cdc_apply(rt_ev('u', 6, 'older', '0/2150'), NULL, 'collides:2') AS old_change_is_duplicate;
SELECT * FROM rt_orders WHERE id = 6;

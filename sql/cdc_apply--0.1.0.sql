/* cdc_apply 0.1.0: replay-safe apply of change-data-capture events. */
\echo Use "CREATE EXTENSION cdc_apply" to load this file. \quit

-- The extension's state lives in schema cdc; the entry points
-- (cdc_apply) live in the extension's schema (public by default), so that
-- SELECT cdc_apply(...) works with the default search_path.
CREATE SCHEMA cdc;
COMMENT ON SCHEMA cdc IS
  'State of the cdc_apply extension: mappings, dedup ledger, per-entity versions and tombstones, truncate barriers, outbox, conflicts, counters.';

-- ---------------------------------------------------------------------------
-- Mappings
-- ---------------------------------------------------------------------------
CREATE TABLE cdc.mapping (
  target                  regclass PRIMARY KEY,
  source_name             text,
  source_schema           text NOT NULL,
  source_table            text NOT NULL,
  key_columns             name[],
  version_column          name,
  source_epoch            bigint NOT NULL DEFAULT 0 CHECK (source_epoch BETWEEN 0 AND 2147483647),
  outbox                  boolean NOT NULL DEFAULT false,
  outbox_topic            text,
  truncate_policy         text NOT NULL DEFAULT 'truncate' CHECK (truncate_policy IN ('truncate', 'ignore')),
  unavailable_placeholder text NOT NULL DEFAULT '__debezium_unavailable_value',
  temporal_unit           text CHECK (temporal_unit IN ('milli', 'micro', 'nano')),
  conflict_policy         text NOT NULL DEFAULT 'record' CHECK (conflict_policy IN ('record', 'error')),
  mode                    text NOT NULL DEFAULT 'state' CHECK (mode IN ('state', 'history', 'handler')),
  handler                 regprocedure,
  expired_policy          text NOT NULL DEFAULT 'refuse' CHECK (expired_policy IN ('refuse', 'apply', 'dead_letter')),
  created_at              timestamptz NOT NULL DEFAULT now(),
  CHECK ((mode = 'handler') = (handler IS NOT NULL))
);
CREATE UNIQUE INDEX mapping_source_idx ON cdc.mapping (coalesce(source_name, ''), source_schema, source_table);
COMMENT ON TABLE cdc.mapping IS
  'One row per target table: which source table feeds it and how (key, version, outbox, truncate, placeholder). Written by cdc.register_mapping().';
COMMENT ON COLUMN cdc.mapping.target IS 'Destination table the events are applied to.';
COMMENT ON COLUMN cdc.mapping.source_name IS 'Debezium source.name (topic prefix) this mapping accepts; NULL accepts any source.';
COMMENT ON COLUMN cdc.mapping.source_schema IS 'source.schema of the events resolved to this target when cdc_apply() gets no target.';
COMMENT ON COLUMN cdc.mapping.source_table IS 'source.table of the events resolved to this target when cdc_apply() gets no target.';
COMMENT ON COLUMN cdc.mapping.key_columns IS 'Entity key columns; NULL means the primary key. Must be covered by a unique index.';
COMMENT ON COLUMN cdc.mapping.version_column IS 'Column ordering the changes (integer, date or timestamp) instead of the source position; NULL uses the source position.';
COMMENT ON COLUMN cdc.mapping.source_epoch IS 'First component of every version: bump it when the source LSN space restarts (new cluster).';
COMMENT ON COLUMN cdc.mapping.outbox IS 'Write one cdc.outbox row per applied non-snapshot change.';
COMMENT ON COLUMN cdc.mapping.outbox_topic IS 'Topic of the outbox rows; NULL means the target''s qualified name.';
COMMENT ON COLUMN cdc.mapping.truncate_policy IS '''truncate'': truncate the target and record a barrier; ''ignore'': truncate events are ignored.';
COMMENT ON COLUMN cdc.mapping.unavailable_placeholder IS 'Value marking a column the source did not send (unchanged TOAST); such columns keep their destination value.';
COMMENT ON COLUMN cdc.mapping.temporal_unit IS 'Unit of integer timestamps/times in schema-less events: milli, micro or nano. NULL: such values are an error.';
COMMENT ON COLUMN cdc.mapping.conflict_policy IS '''record'': equal-version conflicts go to cdc.conflicts and return conflict; ''error'': they raise SQLSTATE 23000.';
COMMENT ON COLUMN cdc.mapping.mode IS '''state'': the target mirrors the source row; ''history'': the target is a history table getting one row per source change, unique on (cdc_key, cdc_version); ''handler'': as state, and the handler function is called for every applied change.';
COMMENT ON COLUMN cdc.mapping.handler IS 'Handler function of mode ''handler'': handler(op text, old T, new T, meta jsonb) with T the target''s row type or jsonb; called only when a change is applied, in the same transaction.';
COMMENT ON COLUMN cdc.mapping.expired_policy IS 'What happens to a change that has no entity record and is not newer than the prune watermark (its records may have been pruned, so it can be proven neither new nor old): ''refuse'' (outcome expired, nothing applied), ''dead_letter'' (outcome expired, the event is kept in cdc.dead_letter) or ''apply'' (applied as new). Counted in cdc.stats.expired either way.';
COMMENT ON COLUMN cdc.mapping.created_at IS 'When the mapping was registered or last changed.';

-- ---------------------------------------------------------------------------
-- Dedup ledger, entity versions and tombstones, truncate barriers
-- ---------------------------------------------------------------------------
-- Compact layout (docs/retention.md, "Layout"): no text or jsonb that is
-- not needed, fixed-width versions, times as whole seconds since 2000-01-01
-- UTC.  The views below show the same state in readable form.
CREATE TABLE cdc.ledger (
  digest    bigint PRIMARY KEY,
  target    regclass NOT NULL,
  claimed_s integer NOT NULL
);
COMMENT ON TABLE cdc.ledger IS
  'Processed-delivery ledger (the dedup claim): one row per (target, delivery key) processed within the replay horizon, as a 64-bit digest. cdc.delivery_processed(target, delivery_key) looks one up; cdc.prune() removes entries older than the horizon.';
COMMENT ON COLUMN cdc.ledger.digest IS 'cdc.delivery_digest(target, delivery_key): the first 64 bits of md5(target oid || newline || delivery key).';
COMMENT ON COLUMN cdc.ledger.target IS 'Destination table of the event.';
COMMENT ON COLUMN cdc.ledger.claimed_s IS 'Claim time: start of the claiming transaction, in whole seconds since 2000-01-01 00:00 UTC (cdc.seconds_to_timestamptz).';

CREATE TABLE cdc.source (
  id   smallint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  name text NOT NULL UNIQUE
);
COMMENT ON TABLE cdc.source IS
  'Dictionary of source ids (Debezium source.name, pg:<system identifier> on the worker path, empty for mappings ordered by a version column), so that entity records hold a 2-byte id.';
COMMENT ON COLUMN cdc.source.id IS 'Id used in cdc.entity_state.src and cdc.prune_watermark.src.';
COMMENT ON COLUMN cdc.source.name IS 'The source id as events carry it.';

CREATE TABLE cdc.entity_state (
  v1        bigint NOT NULL,
  v2        bigint NOT NULL,
  target    regclass NOT NULL,
  v0        integer NOT NULL,
  v3        integer NOT NULL,
  chash     integer NOT NULL,
  touched_s integer NOT NULL,
  src       smallint NOT NULL,
  deleted   boolean NOT NULL,
  key       text NOT NULL,
  PRIMARY KEY (target, key)
) WITH (fillfactor = 90);
COMMENT ON TABLE cdc.entity_state IS
  'Per-entity source version of the latest applied change; deleted = true makes the row a tombstone that blocks older inserts and updates. Columns ordered for alignment; read it through cdc.entities and cdc.tombstones.';
COMMENT ON COLUMN cdc.entity_state.v1 IS 'Version component 2: commit LSN (or the LSN), the snapshot point, or the version column''s value.';
COMMENT ON COLUMN cdc.entity_state.v2 IS 'Version component 3: the change''s LSN or position in the source transaction; 0 for snapshot rows; 1 for deletes ordered by a version column.';
COMMENT ON COLUMN cdc.entity_state.target IS 'Destination table.';
COMMENT ON COLUMN cdc.entity_state.v0 IS 'Version component 1: the source epoch.';
COMMENT ON COLUMN cdc.entity_state.v3 IS 'Version component 4: order within the source transaction (transaction.total_order), else 0; absent (0) for versions from a column.';
COMMENT ON COLUMN cdc.entity_state.chash IS 'First 32 bits of the md5 of the applied image (0 for a delete): tells an equal-version duplicate from a conflict.';
COMMENT ON COLUMN cdc.entity_state.touched_s IS 'When the record was last written, in whole seconds since 2000-01-01 00:00 UTC; a tombstone older than the replay horizon is removed by cdc.prune().';
COMMENT ON COLUMN cdc.entity_state.src IS 'cdc.source id of the source that produced the version.';
COMMENT ON COLUMN cdc.entity_state.deleted IS 'True: the latest applied change was a delete (tombstone).';
COMMENT ON COLUMN cdc.entity_state.key IS 'Entity key, exact and compact: the key column''s output text, or a text[] literal of the key columns'' output texts (cdc.entity_key_json shows it as JSON).';

CREATE TABLE cdc.table_barrier (
  target       regclass PRIMARY KEY,
  source_name  text NOT NULL,
  version      bigint[] NOT NULL,
  truncated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE cdc.table_barrier IS
  'Table-level version set by an applied truncate: events of that source with a version at or below it are stale.';
COMMENT ON COLUMN cdc.table_barrier.target IS 'Destination table.';
COMMENT ON COLUMN cdc.table_barrier.source_name IS 'Source of the truncate.';
COMMENT ON COLUMN cdc.table_barrier.version IS 'Version of the truncate.';
COMMENT ON COLUMN cdc.table_barrier.truncated_at IS 'When the truncate was applied.';

-- Every backend caches each target's metadata, mapping and truncate barrier
-- (docs/internals.md): a change of a mapping or a barrier invalidates it.
CREATE FUNCTION cdc._invalidate_target() RETURNS trigger
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_invalidate_target';
COMMENT ON FUNCTION cdc._invalidate_target() IS
  'Internal trigger of cdc.mapping and cdc.table_barrier: sends a relcache invalidation of the target of each changed row (committed with the change), so every backend reloads its cached metadata of that target; a change of cdc.mapping or a truncate of either table empties the caches. Error 39P01 when not called as a trigger.';
CREATE TRIGGER invalidate_target AFTER INSERT OR UPDATE OR DELETE ON cdc.mapping
  FOR EACH ROW EXECUTE FUNCTION cdc._invalidate_target();
COMMENT ON TRIGGER invalidate_target ON cdc.mapping IS 'Invalidates the cached metadata of the mapping''s target, and every cached source-table resolution.';
CREATE TRIGGER invalidate_targets AFTER TRUNCATE ON cdc.mapping
  FOR EACH STATEMENT EXECUTE FUNCTION cdc._invalidate_target();
COMMENT ON TRIGGER invalidate_targets ON cdc.mapping IS 'Empties every backend''s cache of target metadata.';
CREATE TRIGGER invalidate_target AFTER INSERT OR UPDATE OR DELETE ON cdc.table_barrier
  FOR EACH ROW EXECUTE FUNCTION cdc._invalidate_target();
COMMENT ON TRIGGER invalidate_target ON cdc.table_barrier IS 'Invalidates the cached truncate barrier of the target.';
CREATE TRIGGER invalidate_targets AFTER TRUNCATE ON cdc.table_barrier
  FOR EACH STATEMENT EXECUTE FUNCTION cdc._invalidate_target();
COMMENT ON TRIGGER invalidate_targets ON cdc.table_barrier IS 'Empties every backend''s cache of target metadata.';

-- ---------------------------------------------------------------------------
-- Outbox and conflicts
-- ---------------------------------------------------------------------------
CREATE TABLE cdc.outbox (
  id              bigserial PRIMARY KEY,
  idempotency_key text NOT NULL UNIQUE,
  topic           text,
  target          regclass NOT NULL,
  entity_key      jsonb,
  op              text NOT NULL CHECK (op IN ('c', 'u', 'd', 't')),
  payload         jsonb,
  source          jsonb NOT NULL,
  version         bigint[] NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  published_at    timestamptz
);
COMMENT ON TABLE cdc.outbox IS
  'Outbox: one row per applied non-snapshot change of a mapping with outbox = true, written in the same transaction. idempotency_key is stable across replays and re-published topics.';
COMMENT ON COLUMN cdc.outbox.id IS 'Insertion order.';
COMMENT ON COLUMN cdc.outbox.idempotency_key IS 'md5(source name, source table, op, version, entity key): identical for every delivery of the same source change.';
COMMENT ON COLUMN cdc.outbox.topic IS 'The mapping''s outbox_topic, or the target''s qualified name.';
COMMENT ON COLUMN cdc.outbox.target IS 'Destination table of the change.';
COMMENT ON COLUMN cdc.outbox.entity_key IS 'Entity key; NULL for a truncate.';
COMMENT ON COLUMN cdc.outbox.op IS 'c (insert), u (update), d (delete) or t (truncate).';
COMMENT ON COLUMN cdc.outbox.payload IS 'Destination row after the change (for d: the removed row, or the event''s before-image); NULL for t.';
COMMENT ON COLUMN cdc.outbox.source IS 'Source identity: name, db, schema, table, lsn, commit_lsn, txId, version.';
COMMENT ON COLUMN cdc.outbox.version IS 'Source version of the change.';
COMMENT ON COLUMN cdc.outbox.created_at IS 'Transaction start time of the apply.';
COMMENT ON COLUMN cdc.outbox.published_at IS 'Set by a relay once the row is published (cdc.outbox_mark_published); NULL until then. cdc.prune() removes published rows older than the replay horizon.';
CREATE INDEX outbox_unpublished_idx ON cdc.outbox (id) WHERE published_at IS NULL;
COMMENT ON INDEX cdc.outbox_unpublished_idx IS 'The relay''s work queue: unpublished rows in insertion order.';

CREATE FUNCTION cdc.outbox_mark_published(ids bigint[]) RETURNS bigint
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
  WITH marked AS (
    UPDATE cdc.outbox SET published_at = now()
     WHERE id = ANY (ids) AND published_at IS NULL
    RETURNING 1)
  SELECT count(*) FROM marked
$$;
COMMENT ON FUNCTION cdc.outbox_mark_published(bigint[]) IS
  'For an outbox relay: sets published_at on the given cdc.outbox rows that are not published yet and returns how many it marked (rows already published are left alone, so a relay that retries after a crash gets 0 for them). Runs with the caller''s rights: the relay role needs EXECUTE and SELECT, UPDATE on cdc.outbox.';

CREATE TABLE cdc.conflicts (
  id             bigserial PRIMARY KEY,
  target         regclass NOT NULL,
  entity_key     jsonb NOT NULL,
  delivery_key   text NOT NULL,
  op             text NOT NULL,
  reason         text NOT NULL,
  stored_version bigint[],
  event_version  bigint[] NOT NULL,
  stored_image   jsonb,
  event_image    jsonb NOT NULL,
  recorded_at    timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE cdc.conflicts IS
  'Changes not applied because they conflict: same version with different content, versions from different sources, or unavailable values for a row the destination lacks. Both images are kept for investigation.';
COMMENT ON COLUMN cdc.conflicts.id IS 'Insertion order.';
COMMENT ON COLUMN cdc.conflicts.target IS 'Destination table.';
COMMENT ON COLUMN cdc.conflicts.entity_key IS 'Entity key.';
COMMENT ON COLUMN cdc.conflicts.delivery_key IS 'Delivery key of the conflicting event.';
COMMENT ON COLUMN cdc.conflicts.op IS 'Op of the conflicting event (c, u, d, r).';
COMMENT ON COLUMN cdc.conflicts.reason IS 'Why the change was not applied.';
COMMENT ON COLUMN cdc.conflicts.stored_version IS 'Version stored for the entity, if any.';
COMMENT ON COLUMN cdc.conflicts.event_version IS 'Version of the event.';
COMMENT ON COLUMN cdc.conflicts.stored_image IS 'Destination row at the time, if any.';
COMMENT ON COLUMN cdc.conflicts.event_image IS 'The event''s after-image (before-image for deletes), as received.';
COMMENT ON COLUMN cdc.conflicts.recorded_at IS 'Transaction start time.';

-- ---------------------------------------------------------------------------
-- Counters and the public views
-- ---------------------------------------------------------------------------
CREATE TABLE cdc.counters (
  target                regclass NOT NULL,
  backend_id            integer NOT NULL,
  applied               bigint NOT NULL DEFAULT 0,
  duplicate             bigint NOT NULL DEFAULT 0,
  stale                 bigint NOT NULL DEFAULT 0,
  conflict              bigint NOT NULL DEFAULT 0,
  ignored               bigint NOT NULL DEFAULT 0,
  blocked_resurrections bigint NOT NULL DEFAULT 0,
  outbox_rows           bigint NOT NULL DEFAULT 0,
  snapshot_rows         bigint NOT NULL DEFAULT 0,
  expired               bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (target, backend_id)
);
COMMENT ON TABLE cdc.counters IS
  'Outcome counters, one row per (target, backend slot) so that concurrent sessions never wait on each other; read them through cdc.stats. Transactional: a rolled-back call counts nothing.';
COMMENT ON COLUMN cdc.counters.target IS 'Destination table (0 = events ignored before a target was known).';
COMMENT ON COLUMN cdc.counters.backend_id IS 'Backend slot that wrote the row.';
COMMENT ON COLUMN cdc.counters.applied IS 'Events applied.';
COMMENT ON COLUMN cdc.counters.duplicate IS 'Events that were duplicates (ledger claim or equal version and content).';
COMMENT ON COLUMN cdc.counters.stale IS 'Events older than the stored version or the truncate barrier.';
COMMENT ON COLUMN cdc.counters.conflict IS 'Events recorded in cdc.conflicts.';
COMMENT ON COLUMN cdc.counters.ignored IS 'Non-change records and truncates ignored by policy.';
COMMENT ON COLUMN cdc.counters.blocked_resurrections IS 'Stale inserts/updates blocked by a newer tombstone.';
COMMENT ON COLUMN cdc.counters.outbox_rows IS 'Outbox rows written.';
COMMENT ON COLUMN cdc.counters.snapshot_rows IS 'Snapshot rows (op r) applied.';
COMMENT ON COLUMN cdc.counters.expired IS 'Changes older than the prune watermark of an entity without records (outcome expired, or applied under expired_policy ''apply'').';

CREATE VIEW cdc.stats AS
  SELECT target,
         sum(applied)::bigint               AS applied,
         sum(duplicate)::bigint             AS duplicate,
         sum(stale)::bigint                 AS stale,
         sum(conflict)::bigint              AS conflict,
         sum(ignored)::bigint               AS ignored,
         sum(blocked_resurrections)::bigint AS blocked_resurrections,
         sum(outbox_rows)::bigint           AS outbox_rows,
         sum(snapshot_rows)::bigint         AS snapshot_rows,
         sum(expired)::bigint               AS expired
    FROM cdc.counters
   GROUP BY target;
COMMENT ON VIEW cdc.stats IS
  'Per-target outcome counts (applied, duplicate, stale, conflict, ignored), blocked resurrections, outbox rows, snapshot rows and expired changes, summed over all sessions.';

-- Readable forms of the compact layout.
CREATE FUNCTION cdc.seconds_to_timestamptz(seconds integer) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT timestamptz '2000-01-01 00:00:00+00' + seconds * interval '1 second' $$;
COMMENT ON FUNCTION cdc.seconds_to_timestamptz(integer) IS
  'The time stored in cdc.ledger.claimed_s and cdc.entity_state.touched_s (whole seconds since 2000-01-01 00:00 UTC) as a timestamptz.';

CREATE FUNCTION cdc.delivery_digest(target regclass, delivery_key text) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ('x' || substr(md5(target::oid::text || E'\n' || delivery_key), 1, 16))::bit(64)::bigint $$;
COMMENT ON FUNCTION cdc.delivery_digest(regclass, text) IS
  'The ledger digest of a delivery to a target: the first 64 bits of md5(target oid || newline || delivery key), as a signed bigint (cdc.ledger.digest).';

CREATE FUNCTION cdc.delivery_processed(target regclass, delivery_key text) RETURNS boolean
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT EXISTS (SELECT 1 FROM cdc.ledger l WHERE l.digest = cdc.delivery_digest(target, delivery_key)) $$;
COMMENT ON FUNCTION cdc.delivery_processed(regclass, text) IS
  'True when the ledger holds the delivery key for the target: it was processed within the replay horizon (ledger entries older than the horizon are pruned). Needs SELECT on cdc.ledger.';

CREATE FUNCTION cdc.entity_key_json(target regclass, key text) RETURNS jsonb
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN cardinality(c.cols) = 1 THEN jsonb_build_object(c.cols[1], key)
              ELSE jsonb_object(c.cols, key::text[]) END
    FROM (SELECT coalesce(
                   (SELECT m.key_columns::text[] FROM cdc.mapping m WHERE m.target = entity_key_json.target),
                   (SELECT array_agg(a.attname::text ORDER BY k.n)
                      FROM pg_index i, unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n), pg_attribute a
                     WHERE i.indrelid = entity_key_json.target AND i.indisprimary
                       AND a.attrelid = i.indrelid AND a.attnum = k.attnum)) AS cols) c
$$;
COMMENT ON FUNCTION cdc.entity_key_json(regclass, text) IS
  'An entity key of cdc.entity_state (compact form) as JSON {"column": "text value"}, using the mapping''s key_columns or the target''s primary key, in key order.';

CREATE VIEW cdc.entities AS
  SELECT e.target, cdc.entity_key_json(e.target, e.key) AS entity_key, s.name AS source_name,
         CASE WHEN EXISTS (SELECT 1 FROM cdc.mapping m WHERE m.target = e.target AND m.version_column IS NOT NULL)
              THEN ARRAY[e.v0::bigint, e.v1, e.v2]
              ELSE ARRAY[e.v0::bigint, e.v1, e.v2, e.v3::bigint] END AS version,
         e.deleted AS is_tombstone, cdc.seconds_to_timestamptz(e.touched_s) AS updated_at
    FROM cdc.entity_state e
    JOIN cdc.source s ON s.id = e.src
   WHERE pg_catalog.has_table_privilege(e.target, 'SELECT');
COMMENT ON VIEW cdc.entities IS
  'Per-entity versions and tombstones: the version of the latest applied change of each key (bigint[]); is_tombstone when it was a delete. A readable form of cdc.entity_state, showing only targets the current role may SELECT from (keys are row data).';

CREATE VIEW cdc.tombstones AS
  SELECT target, entity_key, source_name, version, updated_at AS deleted_at
    FROM cdc.entities
   WHERE is_tombstone;
COMMENT ON VIEW cdc.tombstones IS
  'Delete tombstones: keys whose latest applied change was a delete, with its version. Kept for the replay horizon (cdc.prune()).';

-- ---------------------------------------------------------------------------
-- Replay horizon and pruning (SPEC §3 fourth answer, §8; docs/retention.md)
-- ---------------------------------------------------------------------------
CREATE TABLE cdc.dead_letter (
  id           bigserial PRIMARY KEY,
  target       regclass NOT NULL,
  entity_key   jsonb NOT NULL,
  delivery_key text NOT NULL,
  op           text NOT NULL,
  version      bigint[] NOT NULL,
  watermark    bigint[] NOT NULL,
  event_image  jsonb NOT NULL,
  source       jsonb NOT NULL,
  recorded_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE cdc.dead_letter IS
  'Changes refused as expired under expired_policy ''dead_letter'': no entity record and not newer than the prune watermark, so neither new nor old can be proven. Kept for an operator to inspect and, if right, re-apply with a mapping whose expired_policy is ''apply''.';
COMMENT ON COLUMN cdc.dead_letter.id IS 'Insertion order.';
COMMENT ON COLUMN cdc.dead_letter.target IS 'Destination table.';
COMMENT ON COLUMN cdc.dead_letter.entity_key IS 'Entity key.';
COMMENT ON COLUMN cdc.dead_letter.delivery_key IS 'Delivery key of the change.';
COMMENT ON COLUMN cdc.dead_letter.op IS 'Op of the change (c, u, d, r).';
COMMENT ON COLUMN cdc.dead_letter.version IS 'Version of the change.';
COMMENT ON COLUMN cdc.dead_letter.watermark IS 'The prune watermark it was not newer than.';
COMMENT ON COLUMN cdc.dead_letter.event_image IS 'The event''s after-image (before-image for deletes), as received.';
COMMENT ON COLUMN cdc.dead_letter.source IS 'Source identity of the change (as cdc.outbox.source).';
COMMENT ON COLUMN cdc.dead_letter.recorded_at IS 'Transaction start time.';

CREATE TABLE cdc.prune_watermark (
  v1        bigint NOT NULL,
  v2        bigint NOT NULL,
  target    regclass NOT NULL,
  src       smallint NOT NULL,
  v0        integer NOT NULL,
  v3        integer NOT NULL,
  pruned_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (target, src)
);
COMMENT ON TABLE cdc.prune_watermark IS
  'Per target and source: the greatest version of a tombstone cdc.prune() removed. A change for an entity without records is provably new only when its version is greater; otherwise it is expired (expired_policy).';
COMMENT ON COLUMN cdc.prune_watermark.v1 IS 'Version component 2 (see cdc.entity_state.v1).';
COMMENT ON COLUMN cdc.prune_watermark.v2 IS 'Version component 3.';
COMMENT ON COLUMN cdc.prune_watermark.target IS 'Destination table.';
COMMENT ON COLUMN cdc.prune_watermark.src IS 'cdc.source id: versions of different sources are never compared.';
COMMENT ON COLUMN cdc.prune_watermark.v0 IS 'Version component 1 (the source epoch).';
COMMENT ON COLUMN cdc.prune_watermark.v3 IS 'Version component 4.';
COMMENT ON COLUMN cdc.prune_watermark.pruned_at IS 'When it last moved.';

CREATE TABLE cdc.prune_state (
  relation           text PRIMARY KEY CHECK (relation IN ('ledger', 'entity_state', 'outbox')),
  next_block         bigint NOT NULL DEFAULT 0,
  last_run_at        timestamptz,
  last_sweep_done_at timestamptz,
  removed            bigint NOT NULL DEFAULT 0
);
INSERT INTO cdc.prune_state (relation) VALUES ('ledger'), ('entity_state'), ('outbox');
COMMENT ON TABLE cdc.prune_state IS
  'Where cdc.prune() continues in each table: it scans at most max_pages blocks per table per call, from next_block, wrapping around at the end (a completed pass is a sweep).';
COMMENT ON COLUMN cdc.prune_state.relation IS 'ledger, entity_state (tombstones) or outbox (published rows).';
COMMENT ON COLUMN cdc.prune_state.next_block IS 'First block the next call scans.';
COMMENT ON COLUMN cdc.prune_state.last_run_at IS 'When cdc.prune() last scanned this table.';
COMMENT ON COLUMN cdc.prune_state.last_sweep_done_at IS 'When a pass over the whole table last completed: everything older than the horizon of that time is gone.';
COMMENT ON COLUMN cdc.prune_state.removed IS 'Rows removed by cdc.prune() so far.';

CREATE FUNCTION cdc.replay_horizon() RETURNS interval
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(nullif(current_setting('cdc.replay_horizon', true), '')::interval, interval '7 days') $$;
COMMENT ON FUNCTION cdc.replay_horizon() IS
  'The replay horizon: setting cdc.replay_horizon (default 7 days). Ledger entries, tombstones and published outbox rows are kept at least this long.';

CREATE FUNCTION cdc.prune(max_pages integer DEFAULT 1000, horizon interval DEFAULT NULL)
RETURNS TABLE (relation text, scanned_blocks bigint, removed bigint, sweep_done boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  h        interval := coalesce(horizon, cdc.replay_horizon());
  cutoff   timestamptz;
  cutoff_s integer;
  st       cdc.prune_state;
  nblocks  bigint;
  upto     bigint;
  n        bigint;
BEGIN
  IF h < interval '0' THEN
    RAISE EXCEPTION 'the replay horizon must not be negative: %', h USING ERRCODE = '22023';
  END IF;
  IF max_pages IS NULL OR max_pages < 1 THEN
    RAISE EXCEPTION 'max_pages must be at least 1' USING ERRCODE = '22023';
  END IF;
  -- one pruner at a time; a concurrent call returns nothing
  IF NOT pg_try_advisory_xact_lock(hashtext('cdc.prune')) THEN
    RETURN;
  END IF;
  cutoff := now() - h;
  -- whole seconds since 2000-01-01 UTC, rounded down: an entry stored with
  -- second s is older than the horizon when s < cutoff_s (never one within)
  cutoff_s := floor(extract(epoch FROM cutoff) - 946684800)::integer;
  FOR st IN SELECT * FROM cdc.prune_state ORDER BY 1 FOR UPDATE LOOP
    nblocks := pg_relation_size(('cdc.' || st.relation)::regclass) / current_setting('block_size')::bigint;
    IF st.next_block >= nblocks THEN
      st.next_block := 0;
    END IF;
    upto := st.next_block + max_pages;
    IF st.relation = 'ledger' THEN
      DELETE FROM cdc.ledger l
       WHERE l.ctid >= format('(%s,0)', st.next_block)::tid AND l.ctid < format('(%s,0)', upto)::tid
         AND l.claimed_s < cutoff_s;
      GET DIAGNOSTICS n = ROW_COUNT;
    ELSIF st.relation = 'entity_state' THEN
      -- tombstones only (a live entity's record is needed as long as its row
      -- lives); the greatest pruned version per target and source becomes
      -- the watermark, in the same statement
      WITH gone AS (
        DELETE FROM cdc.entity_state e
         WHERE e.ctid >= format('(%s,0)', st.next_block)::tid AND e.ctid < format('(%s,0)', upto)::tid
           AND e.deleted AND e.touched_s < cutoff_s
        RETURNING e.target, e.src, e.v0, e.v1, e.v2, e.v3),
      top AS (
        SELECT DISTINCT ON (g.target, g.src) g.target, g.src, g.v0, g.v1, g.v2, g.v3
          FROM gone g ORDER BY g.target, g.src, g.v0 DESC, g.v1 DESC, g.v2 DESC, g.v3 DESC),
      mark AS (
        INSERT INTO cdc.prune_watermark AS w (target, src, v0, v1, v2, v3)
        SELECT t.target, t.src, t.v0, t.v1, t.v2, t.v3 FROM top t
        ON CONFLICT (target, src) DO UPDATE
           SET v0 = EXCLUDED.v0, v1 = EXCLUDED.v1, v2 = EXCLUDED.v2, v3 = EXCLUDED.v3, pruned_at = now()
         WHERE (w.v0, w.v1, w.v2, w.v3) < (EXCLUDED.v0, EXCLUDED.v1, EXCLUDED.v2, EXCLUDED.v3))
      SELECT count(*) INTO n FROM gone;
    ELSE
      DELETE FROM cdc.outbox o
       WHERE o.ctid >= format('(%s,0)', st.next_block)::tid AND o.ctid < format('(%s,0)', upto)::tid
         AND o.published_at IS NOT NULL AND o.created_at < cutoff;
      GET DIAGNOSTICS n = ROW_COUNT;
    END IF;
    UPDATE cdc.prune_state p
       SET next_block = CASE WHEN upto >= nblocks THEN 0 ELSE upto END,
           last_run_at = now(),
           last_sweep_done_at = CASE WHEN upto >= nblocks THEN now() ELSE p.last_sweep_done_at END,
           removed = p.removed + n
     WHERE p.relation = st.relation;
    relation := st.relation;
    scanned_blocks := least(upto, nblocks) - st.next_block;
    removed := n;
    sweep_done := upto >= nblocks;
    RETURN NEXT;
  END LOOP;
END
$fn$;
COMMENT ON FUNCTION cdc.prune(integer, interval) IS
  'Removes ledger entries, tombstones and published outbox rows older than the replay horizon (default cdc.replay_horizon()), scanning at most max_pages blocks of each table per call and continuing where the last call stopped (cdc.prune_state): call it repeatedly, or let the launcher call it every cdc.prune_interval. Pruned tombstones raise the prune watermark. Returns per table the blocks scanned, the rows removed and whether a pass over the table completed. A concurrent call returns no rows. Errors: 22023 negative horizon or max_pages < 1.';

CREATE VIEW cdc.horizon_status AS
  SELECT h.horizon,
         now() - h.horizon AS cutoff,
         (SELECT cdc.seconds_to_timestamptz(min(l.claimed_s)) FROM cdc.ledger l) AS oldest_ledger_entry,
         (SELECT count(*) FROM cdc.ledger) AS ledger_rows,
         pg_total_relation_size('cdc.ledger') AS ledger_bytes,
         (SELECT cdc.seconds_to_timestamptz(min(e.touched_s)) FROM cdc.entity_state e WHERE e.deleted) AS oldest_tombstone,
         (SELECT count(*) FROM cdc.entity_state e WHERE e.deleted) AS tombstones,
         (SELECT count(*) FROM cdc.entity_state e WHERE NOT e.deleted) AS live_entities,
         pg_total_relation_size('cdc.entity_state') AS entity_state_bytes,
         (SELECT count(*) FROM cdc.outbox o WHERE o.published_at IS NULL) AS outbox_unpublished,
         (SELECT count(*) FROM cdc.outbox o WHERE o.published_at IS NOT NULL) AS outbox_published,
         pg_total_relation_size('cdc.outbox') AS outbox_bytes,
         (SELECT count(*) FROM cdc.prune_watermark) AS watermarks,
         (SELECT coalesce(sum(c.expired), 0) FROM cdc.counters c)::bigint AS expired_changes,
         (SELECT max(p.last_run_at) FROM cdc.prune_state p) AS last_prune_at,
         (SELECT CASE WHEN bool_and(p.last_sweep_done_at IS NOT NULL) THEN min(p.last_sweep_done_at) END
            FROM cdc.prune_state p) AS last_full_sweep_at
    FROM (SELECT cdc.replay_horizon() AS horizon) h;
COMMENT ON VIEW cdc.horizon_status IS
  'The replay horizon and what it retains: the horizon and its cutoff time, the oldest ledger entry and tombstone, row counts and sizes in bytes (heap, indexes, TOAST) of the ledger, entity records and outbox, watermarks, expired changes, and when cdc.prune() last ran and last completed a pass over every table. Counts scan the tables.';

-- ---------------------------------------------------------------------------
-- Registering mappings
-- ---------------------------------------------------------------------------
CREATE FUNCTION cdc.register_mapping(
  target                  regclass,
  source_schema           text    DEFAULT NULL,
  source_table            text    DEFAULT NULL,
  key_columns             name[]  DEFAULT NULL,
  version_column          name    DEFAULT NULL,
  outbox                  boolean DEFAULT false,
  outbox_topic            text    DEFAULT NULL,
  truncate_policy         text    DEFAULT 'truncate',
  unavailable_placeholder text    DEFAULT '__debezium_unavailable_value',
  temporal_unit           text    DEFAULT NULL,
  source_epoch            bigint  DEFAULT 0,
  source_name             text    DEFAULT NULL,
  conflict_policy         text    DEFAULT 'record',
  mode                    text    DEFAULT 'state',
  handler                 regprocedure DEFAULT NULL,
  expired_policy          text    DEFAULT 'refuse')
RETURNS cdc.mapping
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  rel_schema name;
  rel_name   name;
  col        name;
  result     cdc.mapping;
  fn         pg_proc;
  meta       record;
BEGIN
  IF target IS NULL THEN
    RAISE EXCEPTION 'target must not be NULL' USING ERRCODE = '22004';
  END IF;
  SELECT n.nspname, c.relname INTO rel_schema, rel_name
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.oid = target AND c.relkind IN ('r', 'p');
  IF NOT FOUND THEN
    RAISE EXCEPTION 'target % is not a table', target USING ERRCODE = '42809';
  END IF;
  IF NOT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = target), 'USAGE') THEN
    RAISE EXCEPTION 'must be owner of table % to register a mapping for it', target USING ERRCODE = '42501';
  END IF;
  FOREACH col IN ARRAY coalesce(key_columns, '{}'::name[]) || array_remove(ARRAY[version_column], NULL) LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = target AND attname = col AND attnum > 0 AND NOT attisdropped) THEN
      RAISE EXCEPTION 'column "%" does not exist in table %', col, target USING ERRCODE = '42703';
    END IF;
  END LOOP;
  IF key_columns IS NOT NULL AND cardinality(key_columns) = 0 THEN
    RAISE EXCEPTION 'key_columns must not be empty' USING ERRCODE = '22023';
  END IF;
  -- Stored entity versions are in the old basis (source positions or the old
  -- column): compared with versions of the new one, every later change
  -- would be judged stale for good.
  IF (SELECT m.version_column FROM cdc.mapping m WHERE m.target = register_mapping.target)
       IS DISTINCT FROM register_mapping.version_column
     AND EXISTS (SELECT 1 FROM cdc.entity_state e WHERE e.target = register_mapping.target) THEN
    RAISE EXCEPTION 'cannot change how changes of table % are ordered (version_column) while it has entity records', target
      USING ERRCODE = '55000',
            HINT = 'Keep the version_column it was registered with, or unregister the mapping, empty the table and remove its cdc.entity_state rows first.';
  END IF;
  IF expired_policy IS NULL OR expired_policy NOT IN ('refuse', 'apply', 'dead_letter') THEN
    RAISE EXCEPTION 'expired_policy must be ''refuse'', ''apply'' or ''dead_letter'', not %',
                    coalesce(quote_literal(expired_policy), 'NULL')
      USING ERRCODE = '22023';
  END IF;
  IF mode IS NULL OR mode NOT IN ('state', 'history', 'handler') THEN
    RAISE EXCEPTION 'mode must be ''state'', ''history'' or ''handler'', not %', coalesce(quote_literal(mode), 'NULL')
      USING ERRCODE = '22023';
  END IF;
  IF mode = 'history' THEN
    -- A history table: entity key columns (any index), the metadata columns,
    -- and the unique index (cdc_key, cdc_version) that makes a replay a no-op.
    IF key_columns IS NULL THEN
      RAISE EXCEPTION 'mode ''history'' needs key_columns (the entity key columns of the history table)'
        USING ERRCODE = '42P10';
    END IF;
    FOR meta IN SELECT * FROM (VALUES ('cdc_key', 'jsonb'::regtype, true), ('cdc_version', 'bigint[]'::regtype, true),
                                      ('cdc_op', 'text'::regtype, true), ('cdc_snapshot', 'boolean'::regtype, false),
                                      ('cdc_source_ts', 'timestamptz'::regtype, false), ('cdc_source', 'jsonb'::regtype, false),
                                      ('cdc_delivery_key', 'text'::regtype, false)) v(name, type, required) LOOP
      IF NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = target AND a.attname = meta.name
                        AND a.attnum > 0 AND NOT a.attisdropped) THEN
        IF meta.required THEN
          RAISE EXCEPTION 'history table % has no column "%"', target, meta.name
            USING ERRCODE = '42P10',
                  HINT = 'A history table needs cdc_key jsonb, cdc_version bigint[] and cdc_op text; cdc.create_history_table() creates one.';
        END IF;
      ELSIF NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = target AND a.attname = meta.name
                           AND a.atttypid = meta.type) THEN
        RAISE EXCEPTION 'column "%" of history table % must be of type %', meta.name, target, meta.type
          USING ERRCODE = '42804';
      END IF;
    END LOOP;
    IF NOT EXISTS (
         SELECT 1 FROM pg_index i
          WHERE i.indrelid = target AND i.indisunique AND i.indimmediate AND i.indisvalid
            AND i.indpred IS NULL AND i.indexprs IS NULL AND i.indnkeyatts = 2
            AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a
                  WHERE a.attrelid = target AND a.attnum = ANY (i.indkey::int2[])) = ARRAY['cdc_key', 'cdc_version']) THEN
      RAISE EXCEPTION 'history table % has no unique index on exactly (cdc_key, cdc_version)', target
        USING ERRCODE = '42P10', HINT = 'Create one: a replay is recognised by this index.';
    END IF;
  END IF;
  IF mode = 'handler' THEN
    IF handler IS NULL THEN
      RAISE EXCEPTION 'mode ''handler'' needs a handler function' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO fn FROM pg_proc WHERE oid = handler;
    IF fn.prokind <> 'f' OR fn.pronargs <> 4 OR fn.proargtypes[0] <> 'text'::regtype
       OR fn.proargtypes[3] <> 'jsonb'::regtype OR fn.proargtypes[1] <> fn.proargtypes[2]
       OR fn.proargtypes[1] NOT IN ('jsonb'::regtype, (SELECT reltype FROM pg_class WHERE oid = target)) THEN
      RAISE EXCEPTION 'handler % must be a function (op text, old T, new T, meta jsonb) with T the row type of % or jsonb',
                      handler, target
        USING ERRCODE = '42P13';
    END IF;
  ELSIF handler IS NOT NULL THEN
    RAISE EXCEPTION 'a handler needs mode ''handler'' (mode is %)', quote_literal(mode) USING ERRCODE = '22023';
  END IF;
  IF mode <> 'history' AND key_columns IS NOT NULL AND NOT EXISTS (
       SELECT 1 FROM pg_index i
        WHERE i.indrelid = target AND i.indisunique AND i.indimmediate AND i.indisvalid
          AND i.indpred IS NULL AND i.indexprs IS NULL AND i.indnkeyatts = cardinality(key_columns)
          AND (SELECT array_agg(a.attname ORDER BY a.attname) FROM pg_attribute a
                WHERE a.attrelid = target AND a.attnum = ANY (i.indkey::int2[]))
              = (SELECT array_agg(k ORDER BY k) FROM unnest(key_columns) k)) THEN
    RAISE EXCEPTION 'table % has no unique index on exactly (%)', target, array_to_string(key_columns, ', ')
      USING ERRCODE = '42P10', HINT = 'Create a unique, non-partial, non-deferrable index on the key columns.';
  END IF;
  IF mode <> 'history' AND key_columns IS NULL AND NOT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = target AND indisprimary) THEN
    RAISE EXCEPTION 'table % has no primary key', target
      USING ERRCODE = '42P10', HINT = 'Add a primary key or pass key_columns backed by a unique index.';
  END IF;
  IF version_column IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                      WHERE a.attrelid = target AND a.attname = version_column
                        AND (CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END)
                            IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'date'::regtype,
                                'timestamp'::regtype, 'timestamptz'::regtype)) THEN
    RAISE EXCEPTION 'version column "%" must be smallint, integer, bigint, date, timestamp or timestamptz', version_column
      USING ERRCODE = '42804';
  END IF;
  IF truncate_policy IS NULL OR truncate_policy NOT IN ('truncate', 'ignore') THEN
    RAISE EXCEPTION 'truncate_policy must be ''truncate'' or ''ignore'', not %', coalesce(quote_literal(truncate_policy), 'NULL')
      USING ERRCODE = '22023';
  END IF;
  IF temporal_unit IS NOT NULL AND temporal_unit NOT IN ('milli', 'micro', 'nano') THEN
    RAISE EXCEPTION 'temporal_unit must be ''milli'', ''micro'' or ''nano'', not %', quote_literal(temporal_unit)
      USING ERRCODE = '22023';
  END IF;
  IF conflict_policy IS NULL OR conflict_policy NOT IN ('record', 'error') THEN
    RAISE EXCEPTION 'conflict_policy must be ''record'' or ''error''' USING ERRCODE = '22023';
  END IF;
  IF unavailable_placeholder IS NULL OR unavailable_placeholder = '' THEN
    RAISE EXCEPTION 'unavailable_placeholder must not be empty' USING ERRCODE = '22023';
  END IF;
  IF source_epoch IS NULL OR source_epoch < 0 OR source_epoch > 2147483647 THEN
    RAISE EXCEPTION 'source_epoch must be an integer from 0 to 2147483647' USING ERRCODE = '22023';
  END IF;

  INSERT INTO cdc.mapping AS m (target, source_name, source_schema, source_table, key_columns, version_column,
                                source_epoch, outbox, outbox_topic, truncate_policy, unavailable_placeholder,
                                temporal_unit, conflict_policy, mode, handler, expired_policy)
  VALUES (target, source_name, coalesce(source_schema, rel_schema), coalesce(source_table, rel_name), key_columns,
          version_column, source_epoch, coalesce(outbox, false), outbox_topic, truncate_policy,
          unavailable_placeholder, temporal_unit, conflict_policy, mode, handler, expired_policy)
  ON CONFLICT ON CONSTRAINT mapping_pkey DO UPDATE
     SET source_name = EXCLUDED.source_name, source_schema = EXCLUDED.source_schema,
         source_table = EXCLUDED.source_table, key_columns = EXCLUDED.key_columns,
         version_column = EXCLUDED.version_column, source_epoch = EXCLUDED.source_epoch,
         outbox = EXCLUDED.outbox, outbox_topic = EXCLUDED.outbox_topic,
         truncate_policy = EXCLUDED.truncate_policy, unavailable_placeholder = EXCLUDED.unavailable_placeholder,
         temporal_unit = EXCLUDED.temporal_unit, conflict_policy = EXCLUDED.conflict_policy,
         mode = EXCLUDED.mode, handler = EXCLUDED.handler, expired_policy = EXCLUDED.expired_policy,
         created_at = now()
  RETURNING * INTO result;
  RETURN result;
END
$fn$;
COMMENT ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text, bigint, text, text, text, regprocedure, text) IS
  'Registers (or replaces) the mapping of a source table to target. source_schema/source_table default to the target''s own names. mode: state (default), history (target is a history table: key_columns required, cdc_key/cdc_version/cdc_op columns and a unique index on (cdc_key, cdc_version)) or handler (handler(op text, old T, new T, meta jsonb) called per applied change). expired_policy: refuse (default), dead_letter or apply, for changes the pruned records cannot prove new or old (docs/retention.md). Errors: 42809 not a table, 42501 not the owner, 42703 unknown column, 42P10 no primary key / no unique index on key_columns / history table shape, 42804 bad version or metadata column type, 42P13 bad handler signature, 22023 bad option value. Returns the cdc.mapping row.';

CREATE FUNCTION cdc.unregister_mapping(target regclass) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ DELETE FROM cdc.mapping WHERE mapping.target = unregister_mapping.target RETURNING true $$;
COMMENT ON FUNCTION cdc.unregister_mapping(regclass) IS
  'Removes the mapping of a target table. Its versions, tombstones and ledger rows are kept. Returns true when a mapping was removed, NULL otherwise.';

CREATE FUNCTION cdc.create_history_table(name text, source regclass) RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  parts text[];
  qname text;
  cols  text;
BEGIN
  IF name IS NULL OR source IS NULL THEN
    RAISE EXCEPTION 'name and source must not be NULL' USING ERRCODE = '22004';
  END IF;
  parts := parse_ident(name);
  IF cardinality(parts) = 1 THEN
    parts := ARRAY[(SELECT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                     WHERE c.oid = source)] || parts;
  ELSIF cardinality(parts) <> 2 THEN
    RAISE EXCEPTION 'history table name % must be table or schema.table', quote_literal(name) USING ERRCODE = '42602';
  END IF;
  qname := quote_ident(parts[1]) || '.' || quote_ident(parts[2]);
  SELECT string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
    INTO cols
    FROM pg_attribute a
   WHERE a.attrelid = source AND a.attnum > 0 AND NOT a.attisdropped AND a.attname::text NOT LIKE 'cdc\_%';
  EXECUTE format('CREATE TABLE %s (%s'
                 'cdc_seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, '
                 'cdc_key jsonb NOT NULL, cdc_version bigint[] NOT NULL, '
                 'cdc_op text NOT NULL CHECK (cdc_op IN (''c'', ''u'', ''d'', ''r'', ''t'')), '
                 'cdc_snapshot boolean NOT NULL DEFAULT false, cdc_source_ts timestamptz, cdc_source jsonb, '
                 'cdc_delivery_key text, cdc_recorded_at timestamptz NOT NULL DEFAULT now(), '
                 'UNIQUE (cdc_key, cdc_version))',
                 qname, CASE WHEN cols IS NULL THEN '' ELSE cols || ', ' END);
  RETURN qname::regclass;
END
$fn$;
COMMENT ON FUNCTION cdc.create_history_table(text, regclass) IS
  'Creates a history table for mode ''history'': the columns of source (same names and types, nullable, no defaults), then cdc_seq (identity, primary key), cdc_key, cdc_version, cdc_op, cdc_snapshot, cdc_source_ts, cdc_source, cdc_delivery_key, cdc_recorded_at and UNIQUE (cdc_key, cdc_version). name: table or schema.table (default schema: source''s). Returns the new table. Errors: 42P07 exists, 42602 bad name, 22004 NULL argument.';

-- ---------------------------------------------------------------------------
-- Entry points
-- ---------------------------------------------------------------------------
CREATE FUNCTION @extschema@.cdc_apply(event jsonb, target regclass DEFAULT NULL, delivery_key text DEFAULT NULL)
RETURNS text
LANGUAGE c CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_apply_jsonb';
COMMENT ON FUNCTION @extschema@.cdc_apply(jsonb, regclass, text) IS
  'Applies one Debezium change event (value JSON: schema+payload or bare payload; NULL or JSON null = Kafka tombstone) in the caller''s transaction. target NULL: resolved from cdc.mapping by source.schema/source.table. delivery_key NULL: derived from the source identity. Returns applied, duplicate, stale, conflict or ignored. Errors (nothing is applied, the claim rolls back): 22023 bad envelope field, 22004 null key, 42P01 no mapping/target, 42P10 no usable key, 42703 unknown column, 42602 bad name, 42501 missing SELECT/INSERT/UPDATE/DELETE privilege, type input SQLSTATEs (22P02, 22003, 22007, 22008) for values. See docs/sql-reference.md.';

CREATE FUNCTION @extschema@.cdc_apply(event text, target regclass DEFAULT NULL, delivery_key text DEFAULT NULL)
RETURNS text
LANGUAGE c CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_apply_text';
COMMENT ON FUNCTION @extschema@.cdc_apply(text, regclass, text) IS
  'Same as cdc_apply(jsonb, ...) for raw JSON text such as a Kafka record value; malformed JSON raises 22P02 naming the byte offset.';

CREATE TYPE cdc.batch_result AS (
  events    bigint,
  applied   bigint,
  duplicate bigint,
  stale     bigint,
  conflict  bigint,
  ignored   bigint,
  expired   bigint,
  outcomes  text[]
);
COMMENT ON TYPE cdc.batch_result IS
  'Result of cdc_apply_batch(): the number of events and of each outcome; outcomes holds the outcome of every event in input order when the call asked for it (with_outcomes), else NULL.';
COMMENT ON COLUMN cdc.batch_result.events IS 'Events in the batch.';
COMMENT ON COLUMN cdc.batch_result.applied IS 'Events applied.';
COMMENT ON COLUMN cdc.batch_result.duplicate IS 'Events that were duplicates (delivery key already claimed, or same version and content).';
COMMENT ON COLUMN cdc.batch_result.stale IS 'Events older than the stored version or the truncate barrier.';
COMMENT ON COLUMN cdc.batch_result.conflict IS 'Events recorded in cdc.conflicts.';
COMMENT ON COLUMN cdc.batch_result.ignored IS 'Non-change records (Kafka tombstones, transaction metadata, heartbeats, messages) and truncates ignored by policy.';
COMMENT ON COLUMN cdc.batch_result.expired IS 'Events with no entity record and not newer than the prune watermark, refused or dead-lettered by the mapping''s expired_policy (docs/retention.md); under expired_policy apply they count as applied.';
COMMENT ON COLUMN cdc.batch_result.outcomes IS 'Outcome of each event in input order (applied, duplicate, stale, conflict, ignored, expired); NULL unless with_outcomes.';

CREATE FUNCTION @extschema@.cdc_apply_batch(events jsonb, target regclass DEFAULT NULL, delivery_keys text[] DEFAULT NULL,
                                            with_outcomes boolean DEFAULT false)
RETURNS cdc.batch_result
LANGUAGE c CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_apply_batch_jsonb';
COMMENT ON FUNCTION @extschema@.cdc_apply_batch(jsonb, regclass, text[], boolean) IS
  'Applies a JSON array of Debezium change events (each as cdc_apply() takes it; JSON null = Kafka tombstone) in one call, in the caller''s transaction, with exactly the result of applying them one by one in order: rows, tombstones, ledger, outbox, conflicts and counters. target NULL: resolved per event from cdc.mapping. delivery_keys: one per event (NULL or a NULL element: derived). Returns the count of each outcome and, with with_outcomes, the outcome of every event in input order. Errors: 22004 events NULL, 22023 events not an array or delivery_keys of another length, and every error of cdc_apply() with "event N of the batch" in the context; nothing of the batch is applied. See docs/sql-reference.md.';

CREATE FUNCTION @extschema@.cdc_apply_batch(events jsonb[], target regclass DEFAULT NULL, delivery_keys text[] DEFAULT NULL,
                                            with_outcomes boolean DEFAULT false)
RETURNS cdc.batch_result
LANGUAGE c CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_apply_batch_array';
COMMENT ON FUNCTION @extschema@.cdc_apply_batch(jsonb[], regclass, text[], boolean) IS
  'Same as cdc_apply_batch(jsonb, ...) for an array of jsonb events (NULL elements are Kafka tombstones).';

CREATE FUNCTION @extschema@.cdc_apply_batch(events text, target regclass DEFAULT NULL, delivery_keys text[] DEFAULT NULL,
                                            with_outcomes boolean DEFAULT false)
RETURNS cdc.batch_result
LANGUAGE c CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_apply_batch_text';
COMMENT ON FUNCTION @extschema@.cdc_apply_batch(text, regclass, text[], boolean) IS
  'Same as cdc_apply_batch(jsonb, ...) for a JSON array as text (such as Kafka record values joined by a consumer); malformed JSON raises 22P02 naming the byte offset.';

-- ---------------------------------------------------------------------------
-- Subscriptions: the background worker consuming a source's logical
-- replication slot (pgoutput).  Needs shared_preload_libraries = 'cdc_apply'.
-- ---------------------------------------------------------------------------
CREATE TABLE cdc.subscription (
  subid        serial PRIMARY KEY,
  name         text NOT NULL UNIQUE CHECK (name ~ '^[a-z_][a-z0-9_]{0,40}$'),
  conninfo     text NOT NULL,
  publications text[] NOT NULL CHECK (cardinality(publications) > 0),
  slot_name    name NOT NULL,
  create_slot  boolean NOT NULL DEFAULT true,
  copy_data    boolean NOT NULL DEFAULT true,
  enabled      boolean NOT NULL DEFAULT true,
  source_epoch bigint NOT NULL DEFAULT 0 CHECK (source_epoch BETWEEN 0 AND 2147483647),
  slot_ready   boolean NOT NULL DEFAULT false,
  skip_lsn     pg_lsn,
  created_at   timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE cdc.subscription IS
  'One row per subscription to a source PostgreSQL publication. conninfo may hold a password: only superusers and the extension owner can read this table; use cdc.subscription_status.';
COMMENT ON COLUMN cdc.subscription.subid IS 'Internal id; the replication origin is named cdc_<subid>.';
COMMENT ON COLUMN cdc.subscription.name IS 'Subscription name (lower-case identifier, up to 41 characters).';
COMMENT ON COLUMN cdc.subscription.conninfo IS 'libpq connection string of the source (replication=database is added).';
COMMENT ON COLUMN cdc.subscription.publications IS 'Publications on the source to stream.';
COMMENT ON COLUMN cdc.subscription.slot_name IS 'Logical replication slot on the source.';
COMMENT ON COLUMN cdc.subscription.create_slot IS 'Create the slot on the source when the worker first starts.';
COMMENT ON COLUMN cdc.subscription.copy_data IS 'Copy the published tables (as snapshot rows) consistently with the slot''s start point.';
COMMENT ON COLUMN cdc.subscription.enabled IS 'The launcher runs an apply worker for enabled subscriptions.';
COMMENT ON COLUMN cdc.subscription.source_epoch IS 'First version component of this source''s changes.';
COMMENT ON COLUMN cdc.subscription.slot_ready IS 'The slot exists and the initial copy (if any) is done; streaming starts from the replication origin''s progress.';
COMMENT ON COLUMN cdc.subscription.skip_lsn IS 'Set by cdc.skip_transaction(): the commit LSN of one source transaction the worker skips.';
COMMENT ON COLUMN cdc.subscription.created_at IS 'When the subscription was created.';

CREATE TABLE cdc.subscription_state (
  subid          integer PRIMARY KEY REFERENCES cdc.subscription ON DELETE CASCADE,
  state          text NOT NULL DEFAULT 'starting' CHECK (state IN ('starting', 'copying', 'streaming', 'error', 'disabled')),
  worker_pid     integer,
  received_lsn   pg_lsn,
  flushed_lsn    pg_lsn,
  source_end_lsn pg_lsn,
  last_commit_at timestamptz,
  last_msg_at    timestamptz,
  retry_count    integer NOT NULL DEFAULT 0,
  last_error     text,
  last_error_lsn pg_lsn,
  last_error_at  timestamptz,
  applied_xacts  bigint NOT NULL DEFAULT 0,
  apply_commits  bigint NOT NULL DEFAULT 0,
  updated_at     timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE cdc.subscription_state IS 'Worker-maintained state of each subscription; read it through cdc.subscription_status.';
COMMENT ON COLUMN cdc.subscription_state.subid IS 'The subscription.';
COMMENT ON COLUMN cdc.subscription_state.state IS 'starting, copying, streaming, error or disabled.';
COMMENT ON COLUMN cdc.subscription_state.worker_pid IS 'PID of the apply worker, while one runs.';
COMMENT ON COLUMN cdc.subscription_state.received_lsn IS 'Highest source LSN received.';
COMMENT ON COLUMN cdc.subscription_state.flushed_lsn IS 'Source LSN reported to the source as flushed (durably committed here).';
COMMENT ON COLUMN cdc.subscription_state.source_end_lsn IS 'The source''s WAL end as last reported by it (keepalive or data).';
COMMENT ON COLUMN cdc.subscription_state.last_commit_at IS 'Source commit time of the last applied transaction.';
COMMENT ON COLUMN cdc.subscription_state.last_msg_at IS 'When the worker last heard from the source.';
COMMENT ON COLUMN cdc.subscription_state.retry_count IS 'Consecutive failed attempts; reset by a successful commit.';
COMMENT ON COLUMN cdc.subscription_state.last_error IS 'Text of the last error (with the table and LSN it concerns).';
COMMENT ON COLUMN cdc.subscription_state.last_error_lsn IS 'Commit LSN of the source transaction that failed, if any.';
COMMENT ON COLUMN cdc.subscription_state.last_error_at IS 'When the last error happened.';
COMMENT ON COLUMN cdc.subscription_state.applied_xacts IS 'Source transactions the worker applied (explicit skips and re-sent transactions excluded); added every cdc.status_interval, so a crash may drop the last interval''s count.';
COMMENT ON COLUMN cdc.subscription_state.apply_commits IS 'Local transactions that committed them: applied_xacts / apply_commits is the grouping factor (cdc.group_max_transactions); counted like applied_xacts.';
COMMENT ON COLUMN cdc.subscription_state.updated_at IS 'When the worker last wrote this row.';

CREATE TABLE cdc.skipped_transactions (
  id         bigserial PRIMARY KEY,
  subid      integer NOT NULL,
  name       text NOT NULL,
  commit_lsn pg_lsn NOT NULL,
  xid        bigint,
  reason     text NOT NULL,
  requested_by name NOT NULL DEFAULT current_user,
  skipped_at timestamptz
);
COMMENT ON TABLE cdc.skipped_transactions IS 'Source transactions skipped by an explicit operator action (cdc.skip_transaction); skipped_at is set when the worker actually skipped it.';
COMMENT ON COLUMN cdc.skipped_transactions.id IS 'Request order.';
COMMENT ON COLUMN cdc.skipped_transactions.subid IS 'The subscription.';
COMMENT ON COLUMN cdc.skipped_transactions.name IS 'Subscription name at the time.';
COMMENT ON COLUMN cdc.skipped_transactions.commit_lsn IS 'Commit LSN of the skipped source transaction.';
COMMENT ON COLUMN cdc.skipped_transactions.xid IS 'Source transaction id, filled in when skipped.';
COMMENT ON COLUMN cdc.skipped_transactions.reason IS 'Why the operator skipped it.';
COMMENT ON COLUMN cdc.skipped_transactions.requested_by IS 'Role that requested the skip.';
COMMENT ON COLUMN cdc.skipped_transactions.skipped_at IS 'When the worker skipped it (NULL: not reached yet).';

CREATE VIEW cdc.subscription_status AS
  SELECT s.name,
         CASE WHEN NOT s.enabled THEN 'disabled' ELSE coalesce(st.state, 'starting') END AS state,
         st.received_lsn,
         o.remote_lsn AS applied_lsn,
         st.flushed_lsn,
         st.source_end_lsn,
         CASE WHEN st.source_end_lsn IS NOT NULL AND o.remote_lsn IS NOT NULL
              THEN greatest(st.source_end_lsn - o.remote_lsn, 0)::bigint END AS lag_bytes,
         CASE WHEN st.last_commit_at IS NOT NULL
              THEN extract(epoch FROM st.last_msg_at - st.last_commit_at)::double precision END AS lag_seconds,
         st.retry_count,
         st.last_error,
         st.last_error_lsn,
         st.last_error_at,
         st.worker_pid,
         s.slot_name,
         s.publications,
         st.applied_xacts,
         st.apply_commits
    FROM cdc.subscription s
    LEFT JOIN cdc.subscription_state st USING (subid)
    LEFT JOIN pg_catalog.pg_replication_origin_status o ON o.external_id = 'cdc_' || s.subid;
COMMENT ON VIEW cdc.subscription_status IS
  'One row per subscription: state (copying, streaming, error, disabled), received/applied/flushed source LSN (applied_lsn = the replication origin''s progress, committed with the rows), lag in bytes (source WAL end - applied) and seconds (last message - last applied commit time), retries and the last error, source transactions applied and the local commits that applied them (grouping). No conninfo.';

CREATE FUNCTION cdc.create_subscription(
  name         text,
  conninfo     text,
  publications text[],
  slot_name    name    DEFAULT NULL,
  create_slot  boolean DEFAULT true,
  copy_data    boolean DEFAULT true,
  enabled      boolean DEFAULT true,
  source_epoch bigint  DEFAULT 0)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  id integer;
BEGIN
  IF name IS NULL OR name !~ '^[a-z_][a-z0-9_]{0,40}$' THEN
    RAISE EXCEPTION 'invalid subscription name %', coalesce(quote_literal(name), 'NULL')
      USING ERRCODE = '42602', HINT = 'Use a lower-case identifier of at most 41 characters.';
  END IF;
  IF conninfo IS NULL OR publications IS NULL OR cardinality(publications) = 0 THEN
    RAISE EXCEPTION 'conninfo and at least one publication are required' USING ERRCODE = '22023';
  END IF;
  INSERT INTO cdc.subscription (name, conninfo, publications, slot_name, create_slot, copy_data, enabled, source_epoch)
  VALUES (name, conninfo, publications, coalesce(slot_name, name), create_slot, copy_data AND create_slot, enabled, source_epoch)
  RETURNING subid INTO id;
  INSERT INTO cdc.subscription_state (subid, state) VALUES (id, CASE WHEN enabled THEN 'starting' ELSE 'disabled' END);
  -- A replication origin of this name with no subscription row is a leftover
  -- of a dropped extension (origins are cluster-wide and outlive DROP
  -- EXTENSION): its progress belongs to nobody, so it is replaced.
  IF EXISTS (SELECT 1 FROM pg_replication_origin WHERE roname = 'cdc_' || id) THEN
    PERFORM pg_replication_origin_drop('cdc_' || id);
  END IF;
  PERFORM pg_replication_origin_create('cdc_' || id);
  IF current_setting('cdc.database', true) IS DISTINCT FROM current_database() THEN
    RAISE WARNING 'subscription "%" will not run: the cdc_apply launcher serves database %, not %', name,
      coalesce(quote_literal(current_setting('cdc.database', true)), 'none (cdc_apply is not in shared_preload_libraries)'),
      quote_literal(current_database())
      USING HINT = 'Set cdc.database to this database and shared_preload_libraries = ''cdc_apply'', then restart.';
  END IF;
  RETURN id;
END
$fn$;
COMMENT ON FUNCTION cdc.create_subscription(text, text, text[], name, boolean, boolean, boolean, bigint) IS
  'Creates a subscription: the launcher (shared_preload_libraries = cdc_apply, database cdc.database) starts an apply worker that creates the slot (default: named after the subscription) when create_slot, copies the published tables as snapshot rows when copy_data (only with create_slot), then streams pgoutput. Tables map to the same schema and name, or per cdc.mapping (source_name = the subscription name). Returns the subid. Errors: 42602 bad name, 23505 name exists, 22023 missing conninfo/publications.';

CREATE FUNCTION cdc.enable_subscription(name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  UPDATE cdc.subscription s SET enabled = true WHERE s.name = enable_subscription.name;
  IF NOT FOUND THEN RAISE EXCEPTION 'subscription "%" does not exist', name USING ERRCODE = '42704'; END IF;
  UPDATE cdc.subscription_state st SET state = 'starting', retry_count = 0, updated_at = now()
    FROM cdc.subscription s WHERE s.subid = st.subid AND s.name = enable_subscription.name;
END $fn$;
COMMENT ON FUNCTION cdc.enable_subscription(text) IS 'Enables a subscription; the launcher starts its worker within cdc.naptime. Error 42704 if it does not exist.';

CREATE FUNCTION cdc.disable_subscription(name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  UPDATE cdc.subscription s SET enabled = false WHERE s.name = disable_subscription.name;
  IF NOT FOUND THEN RAISE EXCEPTION 'subscription "%" does not exist', name USING ERRCODE = '42704'; END IF;
END $fn$;
COMMENT ON FUNCTION cdc.disable_subscription(text) IS 'Disables a subscription; the launcher stops its worker (SIGTERM) within cdc.naptime. Progress is kept in the replication origin. Error 42704 if it does not exist.';

CREATE FUNCTION cdc.alter_subscription(
  name         text,
  conninfo     text    DEFAULT NULL,
  publications text[]  DEFAULT NULL,
  source_epoch bigint  DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  sub cdc.subscription;
  running_pid integer;
BEGIN
  SELECT * INTO sub FROM cdc.subscription s WHERE s.name = alter_subscription.name FOR UPDATE;
  IF NOT FOUND THEN RAISE EXCEPTION 'subscription "%" does not exist', name USING ERRCODE = '42704'; END IF;
  IF publications IS NOT NULL AND cardinality(publications) = 0 THEN
    RAISE EXCEPTION 'at least one publication is required' USING ERRCODE = '22023';
  END IF;
  IF source_epoch IS NOT NULL AND source_epoch < sub.source_epoch THEN
    RAISE EXCEPTION 'source_epoch can only grow (is %, asked %)', sub.source_epoch, source_epoch
      USING ERRCODE = '22023',
            DETAIL = 'A lower epoch would make every later change of this source older than what is applied.';
  END IF;
  UPDATE cdc.subscription s
     SET conninfo = coalesce(alter_subscription.conninfo, s.conninfo),
         publications = coalesce(alter_subscription.publications, s.publications),
         source_epoch = coalesce(alter_subscription.source_epoch, s.source_epoch)
   WHERE s.subid = sub.subid;
  -- the worker reads its settings when it starts: stop it, the launcher starts a new one
  SELECT worker_pid INTO running_pid FROM cdc.subscription_state WHERE subid = sub.subid;
  IF running_pid IS NOT NULL AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = running_pid
                                            AND a.backend_type = 'cdc_apply worker') THEN
    PERFORM pg_terminate_backend(running_pid);
  END IF;
END $fn$;
COMMENT ON FUNCTION cdc.alter_subscription(text, text, text[], bigint) IS
  'Changes the conninfo, the publications or (only upwards) the source_epoch of a subscription; NULL keeps a value. A running worker is stopped and restarted by the launcher with the new settings, from the replication origin''s progress (tables added to the publications are not copied). Errors: 42704 unknown subscription, 22023 empty publications or a lower source_epoch.';

CREATE FUNCTION cdc.skip_transaction(name text, commit_lsn pg_lsn, reason text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  id integer;
BEGIN
  IF reason IS NULL OR btrim(reason) = '' THEN
    RAISE EXCEPTION 'a reason is required to skip a transaction' USING ERRCODE = '22023';
  END IF;
  UPDATE cdc.subscription s SET skip_lsn = commit_lsn WHERE s.name = skip_transaction.name RETURNING subid INTO id;
  IF NOT FOUND THEN RAISE EXCEPTION 'subscription "%" does not exist', name USING ERRCODE = '42704'; END IF;
  INSERT INTO cdc.skipped_transactions (subid, name, commit_lsn, reason) VALUES (id, name, commit_lsn, reason);
END $fn$;
COMMENT ON FUNCTION cdc.skip_transaction(text, pg_lsn, text) IS
  'Asks the worker to skip the source transaction with this commit LSN (as shown in cdc.subscription_status.last_error_lsn), recorded in cdc.skipped_transactions. The only way a change is ever skipped. Errors: 42704 unknown subscription, 22023 no reason.';

CREATE FUNCTION cdc.drop_subscription(name text, drop_slot boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  sub cdc.subscription;
  pid integer;
BEGIN
  SELECT * INTO sub FROM cdc.subscription s WHERE s.name = drop_subscription.name FOR UPDATE;
  IF NOT FOUND THEN RAISE EXCEPTION 'subscription "%" does not exist', name USING ERRCODE = '42704'; END IF;
  SELECT worker_pid INTO pid FROM cdc.subscription_state WHERE subid = sub.subid;
  IF pid IS NOT NULL THEN
    PERFORM pg_terminate_backend(pid, 10000);
  END IF;
  IF drop_slot AND sub.slot_ready THEN
    PERFORM cdc._drop_source_slot(sub.conninfo, sub.slot_name);
  END IF;
  DELETE FROM cdc.subscription s WHERE s.subid = sub.subid;
  IF EXISTS (SELECT 1 FROM pg_replication_origin WHERE roname = 'cdc_' || sub.subid) THEN
    PERFORM pg_replication_origin_drop('cdc_' || sub.subid);
  END IF;
END $fn$;
COMMENT ON FUNCTION cdc.drop_subscription(text, boolean) IS
  'Stops the worker, drops the replication origin and the subscription, and with drop_slot also the slot on the source. Error 42704 if it does not exist.';

CREATE FUNCTION cdc._drop_source_slot(conninfo text, slot_name name) RETURNS void
LANGUAGE c STRICT VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_drop_source_slot';
COMMENT ON FUNCTION cdc._drop_source_slot(text, name) IS 'Internal: connects to the source with libpq and drops a logical replication slot (DROP_REPLICATION_SLOT ... WAIT). Errors: 08001 connection failure, the source''s error otherwise.';

-- The engine writes its bookkeeping as the extension owner; nobody else
-- writes these tables directly.  Reading state is open to everyone.
REVOKE ALL ON ALL TABLES IN SCHEMA cdc FROM PUBLIC;
GRANT USAGE ON SCHEMA cdc TO PUBLIC;
GRANT SELECT ON cdc.stats, cdc.entities, cdc.tombstones, cdc.mapping, cdc.source, cdc.horizon_status TO PUBLIC;
REVOKE ALL ON FUNCTION cdc.prune(integer, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text, bigint, text, text, text, regprocedure, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.unregister_mapping(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.create_history_table(text, regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.outbox_mark_published(bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.create_subscription(text, text, text[], name, boolean, boolean, boolean, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.alter_subscription(text, text, text[], bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.enable_subscription(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.disable_subscription(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.skip_transaction(text, pg_lsn, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.drop_subscription(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._drop_source_slot(text, name) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._invalidate_target() FROM PUBLIC;
GRANT SELECT ON cdc.subscription_status TO PUBLIC;

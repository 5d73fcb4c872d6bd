/* cdc_apply 0.2.0: replay-safe apply of change-data-capture events. */
\echo Use "CREATE EXTENSION cdc_apply" to load this file. \quit

-- Everything this script resolves at creation time (view bodies, column
-- defaults, CHECK constraints, index expressions, policies) binds to
-- pg_catalog only: CREATE EXTENSION puts the extension's schema (public by
-- default, where any role may have CREATE) on the search_path, and an
-- operator or function planted there with a more exact signature would
-- otherwise be captured by a view that runs with the extension owner's
-- rights (docs/security.md).  SET LOCAL ends with the script.
SET LOCAL search_path TO pg_catalog, pg_temp;

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
  ordering                text NOT NULL DEFAULT 'entity' CHECK (ordering IN ('entity', 'stream')),
  outbox_via              text NOT NULL DEFAULT 'table' CHECK (outbox_via IN ('table', 'message')),
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
COMMENT ON COLUMN cdc.mapping.ordering IS '''entity'' (default): per-entity version records, ledger claims and tombstones decide every change (any input, any order); ''stream'': the target is written only by one ordered stream (a subscription''s worker), and a per-(target, source) high-water mark in cdc.stream_mark decides: a change at or below it is a duplicate. Changed with cdc.set_ordering() (docs/semantics.md, "Stream ordering").';
COMMENT ON COLUMN cdc.mapping.outbox_via IS 'Where outbox entries go: ''table'' (rows of cdc.outbox) or ''message'' (one transactional logical decoding message per applied change, prefix cdc_outbox, for relays that read the destination''s WAL; needs wal_level = logical).';
COMMENT ON COLUMN cdc.mapping.created_at IS 'When the mapping was registered or last changed.';
-- Mappings are readable by everyone.  Writing them is the extension owner's
-- (a superuser's) business; a role it grants EXECUTE on cdc.register_mapping
-- (cdc.unregister_mapping, cdc.set_ordering) can write only the mappings of
-- tables it owns (or is a member of the owner of), so it cannot attach a
-- handler or an outbox to someone else's table (docs/security.md).  The
-- functions write through cdc._write_mapping, which checks the caller as
-- the policy own_targets below does and writes as the table's owner: a
-- delegate needs no privilege on cdc.mapping, whose UPDATE or DELETE would
-- let it LOCK the table and stall every worker (review h3).  The policy
-- still binds a role granted INSERT, UPDATE or DELETE on the table (the
-- delegation of earlier versions).
ALTER TABLE cdc.mapping ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable ON cdc.mapping FOR SELECT TO PUBLIC USING (true);
COMMENT ON POLICY readable ON cdc.mapping IS 'Every role may read every mapping.';
-- A delegate's outbox rows carry the topic of its mapping, which a relay
-- publishes into that topic's stream: a topic that is another owner's (the
-- topic of another owner's mapping, or another owner's table's qualified
-- name, the default topic of its mapping now or later) would let the
-- delegate write into that owner's stream (review helper;
-- sql/outbox_topic_delegate.sql).  Read with the caller's rights: cdc.mapping
-- and the catalog are readable by everyone.
CREATE FUNCTION cdc._outbox_topic_taken(topic text, target regclass) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF topic IS NULL THEN
    RETURN false;
  END IF;
  IF EXISTS (SELECT 1 FROM cdc.mapping m JOIN pg_class c ON c.oid = m.target JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE m.target <> _outbox_topic_taken.target
                AND coalesce(m.outbox_topic, n.nspname || '.' || c.relname) = topic
                AND NOT pg_has_role(c.relowner, 'USAGE')) THEN
    RETURN true;
  END IF;
  -- schema.table of another owner's table: the table name is what follows one of the topic's dots
  RETURN EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE c.relname IN (SELECT substr(topic, i + 1) FROM generate_series(1, length(topic)) i
                                       WHERE substr(topic, i, 1) = '.')
                    AND n.nspname || '.' || c.relname = topic
                    AND c.relkind IN ('r', 'p', 'f', 'v', 'm')
                    AND c.oid <> _outbox_topic_taken.target
                    AND NOT pg_has_role(c.relowner, 'USAGE'));
END
$$;
COMMENT ON FUNCTION cdc._outbox_topic_taken(text, regclass) IS 'Internal (policy own_targets, cdc.register_mapping): true when topic is another owner''s outbox topic for the calling role and its table target: the outbox_topic (or the schema.table default) of a mapping of a table whose owner''s privileges the role does not have, or the schema.table of such a table. NULL topic: false. Reads cdc.mapping and the catalog with the caller''s rights.';

CREATE POLICY own_targets ON cdc.mapping FOR ALL TO PUBLIC
  USING (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) target), 'USAGE'))
  WITH CHECK (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) target
                                        AND c.relpersistence OPERATOR(pg_catalog.<>) 't'), 'USAGE')
              AND (NOT outbox OR (outbox_topic IS NOT NULL AND NOT cdc._outbox_topic_taken(outbox_topic, target)))
              -- a handler the writer may execute, as cdc.register_mapping requires of every role:
              -- a 0.1.0-style grantee attached a superuser's function (security review h4)
              AND (handler IS NULL OR pg_catalog.has_function_privilege(handler::pg_catalog.oid, 'EXECUTE')));
COMMENT ON POLICY own_targets ON cdc.mapping IS 'A role granted write access to cdc.mapping writes only the mappings of tables whose owner''s privileges it has, a mapping with an outbox only with a topic of its own: named (not NULL, which would follow renames of its table) and not another owner''s (cdc._outbox_topic_taken), and a mapping with a handler only with a function it may execute (as cdc.register_mapping).';

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
  id   integer PRIMARY KEY,
  name text NOT NULL UNIQUE
);
COMMENT ON TABLE cdc.source IS
  'Dictionary of source ids (Debezium source.name, pg:<system identifier> on the worker path, empty for mappings ordered by a version column), so that entity records hold a 4-byte id. Ids come from the name''s hash, not a sequence: a rolled-back call leaves nothing behind (docs/security.md, "Shared state").';
COMMENT ON COLUMN cdc.source.id IS 'Id used in cdc.entity_state.src and cdc.prune_watermark.src: the first 31 bits of md5(name), or the next free id after it on a collision; cdc.rename_source() keeps the id under the new name.';
COMMENT ON COLUMN cdc.source.name IS 'The source id as events carry it.';

-- Every backend caches the ids of cdc.source and cdc.outbox_source
-- (docs/internals.md, "Dictionary ids"): a change or removal of an entry
-- (cdc.rename_source) empties those caches.
CREATE FUNCTION cdc._invalidate_dictionary() RETURNS trigger
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_invalidate_dictionary';
COMMENT ON FUNCTION cdc._invalidate_dictionary() IS
  'Internal trigger of cdc.source and cdc.outbox_source: sends a relcache invalidation of the table when entries are updated, deleted or truncated (committed with the change), so every backend forgets the ids it cached. Error 39P01 when not called as a trigger.';
CREATE TRIGGER invalidate_ids AFTER UPDATE OR DELETE ON cdc.source
  FOR EACH STATEMENT EXECUTE FUNCTION cdc._invalidate_dictionary();
COMMENT ON TRIGGER invalidate_ids ON cdc.source IS 'Empties every backend''s cache of source ids (cdc.rename_source renames and merges sources).';
CREATE TRIGGER invalidate_ids_truncate AFTER TRUNCATE ON cdc.source
  FOR EACH STATEMENT EXECUTE FUNCTION cdc._invalidate_dictionary();
COMMENT ON TRIGGER invalidate_ids_truncate ON cdc.source IS 'Empties every backend''s cache of source ids.';

-- fire under any session_replication_role: a database or role set to
-- replica (and the worker, which always is) must not skip them (TAP 115)
ALTER TABLE cdc.source ENABLE ALWAYS TRIGGER invalidate_ids;
ALTER TABLE cdc.source ENABLE ALWAYS TRIGGER invalidate_ids_truncate;

CREATE TABLE cdc.entity_state (
  -- What an applied change rewrites (v1, v2, chash) leads the row, what
  -- it keeps follows: an update's WAL record holds only the bytes between
  -- the common prefix and suffix of the old and new row (20 instead of 32).
  v1        bigint NOT NULL,
  v2        bigint NOT NULL,
  chash     integer NOT NULL,
  touched_s integer NOT NULL,
  target    regclass NOT NULL,
  v0        integer NOT NULL,
  v3        integer NOT NULL,
  src       integer NOT NULL,
  deleted   boolean NOT NULL,
  key       text COLLATE "C" NOT NULL,  -- compared byte by byte: a lookup per change, equal texts are equal keys under any deterministic collation
  PRIMARY KEY (target, key)
) WITH (fillfactor = 50);  -- every applied change of an entity updates its record: room for HOT updates (docs/retention.md, "Fill factor")
COMMENT ON TABLE cdc.entity_state IS
  'Per-entity source version of the latest applied change; deleted = true makes the row a tombstone that blocks older inserts and updates. Columns ordered for alignment, the ones an applied change rewrites (v1, v2, chash) first, so that the update''s WAL record is short; read it through cdc.entities and cdc.tombstones.';
COMMENT ON COLUMN cdc.entity_state.v1 IS 'Version component 2: commit LSN (or the LSN), the snapshot point, or the version column''s value.';
COMMENT ON COLUMN cdc.entity_state.v2 IS 'Version component 3: the change''s LSN or position in the source transaction; 0 for snapshot rows; 1 for deletes ordered by a version column.';
COMMENT ON COLUMN cdc.entity_state.target IS 'Destination table.';
COMMENT ON COLUMN cdc.entity_state.v0 IS 'Version component 1: the source epoch.';
COMMENT ON COLUMN cdc.entity_state.v3 IS 'Version component 4: order within the source transaction (transaction.total_order), else 0; absent (0) for versions from a column.';
COMMENT ON COLUMN cdc.entity_state.chash IS 'CRC-32C of the applied image''s column names and value texts (0 for a delete; 32 bits of an md5 in records written by release 0.1.0): tells an equal-version duplicate from a conflict.';
COMMENT ON COLUMN cdc.entity_state.touched_s IS 'When the record was last written, in whole seconds since 2000-01-01 00:00 UTC; a tombstone older than the replay horizon is removed by cdc.prune().';
COMMENT ON COLUMN cdc.entity_state.src IS 'cdc.source id of the source that produced the version.';
COMMENT ON COLUMN cdc.entity_state.deleted IS 'True: the latest applied change was a delete (tombstone).';
COMMENT ON COLUMN cdc.entity_state.key IS 'Entity key, exact and compact, compared byte by byte (COLLATE "C"): the key column''s output text, or a text[] literal of the key columns'' output texts (cdc.entity_key_json shows it as JSON), printed with fixed settings whatever the session''s: ISO dates, timestamptz in UTC, postgres intervals, hex bytea, shortest floats, numeric without trailing zeros.';

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

-- fire under any session_replication_role: a database or role set to
-- replica (and the worker, which always is) must not skip them (TAP 115)
ALTER TABLE cdc.mapping ENABLE ALWAYS TRIGGER invalidate_target;
ALTER TABLE cdc.mapping ENABLE ALWAYS TRIGGER invalidate_targets;

CREATE TRIGGER invalidate_target AFTER INSERT OR UPDATE OR DELETE ON cdc.table_barrier
  FOR EACH ROW EXECUTE FUNCTION cdc._invalidate_target();
COMMENT ON TRIGGER invalidate_target ON cdc.table_barrier IS 'Invalidates the cached truncate barrier of the target.';
CREATE TRIGGER invalidate_targets AFTER TRUNCATE ON cdc.table_barrier
  FOR EACH STATEMENT EXECUTE FUNCTION cdc._invalidate_target();
COMMENT ON TRIGGER invalidate_targets ON cdc.table_barrier IS 'Empties every backend''s cache of target metadata.';

-- fire under any session_replication_role: a database or role set to
-- replica (and the worker, which always is) must not skip them (TAP 115)
ALTER TABLE cdc.table_barrier ENABLE ALWAYS TRIGGER invalidate_target;
ALTER TABLE cdc.table_barrier ENABLE ALWAYS TRIGGER invalidate_targets;

-- ---------------------------------------------------------------------------
-- Outbox and conflicts
-- ---------------------------------------------------------------------------
-- The outbox is stored compactly (docs/semantics.md, "Outbox"): one row per
-- applied change in cdc.outbox_rows, keyed by the binary idempotency key, the
-- constant part of the source identity and the topic in the dictionary
-- cdc.outbox_source, the version and the varying source positions as
-- columns.  The view cdc.outbox shows the documented row shape.
CREATE TABLE cdc.outbox_source (
  id            integer PRIMARY KEY,
  topic         text NOT NULL,
  source_name   text NOT NULL,
  source_db     text NOT NULL,
  source_schema text NOT NULL,
  source_table  text NOT NULL,
  -- The member names of the rows' payloads, which then hold only the values
  -- (docs/semantics.md, "Outbox"): the names of a table's rows are the
  -- same in every row, and were a quarter of each row.
  payload_keys  text[] NOT NULL DEFAULT '{}',
  CONSTRAINT outbox_source_key UNIQUE (topic, source_name, source_db, source_schema, source_table, payload_keys)
);
COMMENT ON TABLE cdc.outbox_source IS
  'Dictionary of the constant part of outbox rows: topic and source identity (name, db, schema, table) as they were when the row was written, and the member names of the row''s payload, so that cdc.outbox_rows holds a 4-byte id. Ids are derived from the entry''s hash (the next free one on a collision), so rolled-back calls never use one up; entries are never removed.';
COMMENT ON COLUMN cdc.outbox_source.id IS 'Id used in cdc.outbox_rows.src.';
COMMENT ON COLUMN cdc.outbox_source.topic IS 'The mapping''s outbox_topic, or the target''s schema.table, when the row was written.';
COMMENT ON COLUMN cdc.outbox_source.source_name IS 'source.name (Debezium topic prefix; pg:<system identifier> on the worker path).';
COMMENT ON COLUMN cdc.outbox_source.source_db IS 'source.db.';
COMMENT ON COLUMN cdc.outbox_source.source_schema IS 'source.schema.';
COMMENT ON COLUMN cdc.outbox_source.source_table IS 'source.table.';
COMMENT ON COLUMN cdc.outbox_source.payload_keys IS 'Member names of the payload of the rows with this id, in jsonb''s order: those rows'' payload holds the values alone, a JSON array in the same order (cdc._outbox_payload joins them again). Empty: the payload is stored whole (NULL, an empty object, a row carried over from 0.1.0).';
COMMENT ON INDEX cdc.outbox_source_pkey IS 'Looks an id up (cdc.outbox).';
COMMENT ON INDEX cdc.outbox_source_key IS 'Finds the id of a topic, source identity and payload member names (the engine, before it writes a row).';

CREATE TRIGGER invalidate_ids AFTER UPDATE OR DELETE ON cdc.outbox_source
  FOR EACH STATEMENT EXECUTE FUNCTION cdc._invalidate_dictionary();
COMMENT ON TRIGGER invalidate_ids ON cdc.outbox_source IS 'Empties every backend''s cache of outbox source ids.';
CREATE TRIGGER invalidate_ids_truncate AFTER TRUNCATE ON cdc.outbox_source
  FOR EACH STATEMENT EXECUTE FUNCTION cdc._invalidate_dictionary();
COMMENT ON TRIGGER invalidate_ids_truncate ON cdc.outbox_source IS 'Empties every backend''s cache of outbox source ids.';

-- fire under any session_replication_role: a database or role set to
-- replica (and the worker, which always is) must not skip them (TAP 115)
ALTER TABLE cdc.outbox_source ENABLE ALWAYS TRIGGER invalidate_ids;
ALTER TABLE cdc.outbox_source ENABLE ALWAYS TRIGGER invalidate_ids_truncate;

-- The payload of an outbox row as cdc.outbox shows it: the values stored in
-- cdc.outbox_rows.payload joined again with the member names of its
-- dictionary entry (C, a few microseconds per row read).  search_path is
-- pinned as for every function of the extension, though it reads nothing
-- by name.
CREATE FUNCTION cdc._outbox_payload(keys text[], payload json) RETURNS jsonb
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_outbox_payload';
COMMENT ON FUNCTION cdc._outbox_payload(text[], json) IS
  'Internal (the view cdc.outbox): the jsonb of a stored outbox payload. keys empty: payload is the whole JSON value, returned as jsonb. Else payload is a JSON array of as many values as keys, and the result the object of keys[i] to value i. Errors: 22P02 payload not valid JSON, or not an array of that many values.';

CREATE TABLE cdc.outbox_rows (
  id           bigserial,
  created_at   timestamptz NOT NULL DEFAULT now(),
  v1           bigint NOT NULL,
  v2           bigint NOT NULL,
  -- v3, lsn and commit_lsn are left NULL where elided says the view derives
  -- them: a NULL takes no room in the row (docs/benchmarks.md, "The
  -- outbox row narrowed").
  v3           bigint,
  lsn          bigint,
  commit_lsn   bigint,
  tx_id        bigint,
  published_at timestamptz,
  ikey         uuid NOT NULL,
  target       regclass NOT NULL,
  src          integer NOT NULL,
  v0           integer NOT NULL,
  elided       smallint NOT NULL DEFAULT 0,
  -- No CHECK on op: only the engine writes rows (as the owner of the
  -- extension's tables), and a CHECK is planned again by every statement
  -- that inserts (ExecConstraints builds it per statement): about 5 % of a
  -- cdc_apply() call (docs/internals.md, "Writes without SQL").
  op           "char" NOT NULL,
  -- Takes a byte of the alignment padding before payload: the row is no wider.
  stream_ordered boolean NOT NULL DEFAULT false,
  -- json, not jsonb: the engine writes the text of the jsonb it built,
  -- without insignificant whitespace, and the view casts it back, which
  -- gives that jsonb again; the text form takes about a quarter less room
  -- (no per-member offsets) and so less WAL per row.  A payload object's
  -- member names are in the dictionary entry (outbox_source.payload_keys),
  -- its values here.
  entity_key   json,
  payload      json
);
-- Unique on the idempotency key per target: a role writing its own target
-- cannot take (and so drop) another target's row by sending the same source
-- identity.  The key's version columns come first (the key covers the
-- version, so they add no uniqueness): in a stream the version grows, so new
-- entries go to the right edge of each target's part of the index instead of
-- a random leaf page.  Rows of stream-ordered targets are left out: their
-- target's stream mark already makes each key unique (a change at or below
-- it writes nothing, docs/semantics.md, "Stream ordering"), and the index
-- entry was a fifth of the worker's CPU per change and 96 B of its WAL
-- (docs/benchmarks.md, "One unique index entry less per streamed change").
CREATE UNIQUE INDEX outbox_rows_ikey ON cdc.outbox_rows (target, v1, v2, ikey) WHERE NOT stream_ordered;
-- Without a primary key the table needs a replica identity of its own, so
-- that a relay's UPDATE (published_at) and cdc.prune's DELETE keep working
-- where a publication FOR ALL TABLES includes it (wal_level = logical).
ALTER TABLE cdc.outbox_rows REPLICA IDENTITY FULL;
COMMENT ON TABLE cdc.outbox_rows IS
  'Storage of the outbox (read it through cdc.outbox): one row per applied non-snapshot change of a mapping with outbox = true, written in the same transaction, unique on the binary idempotency key per target (by the unique index outbox_rows_ikey, or for a stream-ordered target by its stream mark). Columns ordered for alignment; positions the view derives are left NULL (elided), entity_key and payload are JSON text. REPLICA IDENTITY FULL: it has no primary key.';
COMMENT ON COLUMN cdc.outbox_rows.id IS 'Insertion order (cdc.outbox.id).';
COMMENT ON COLUMN cdc.outbox_rows.created_at IS 'Transaction start time of the apply.';
COMMENT ON COLUMN cdc.outbox_rows.v1 IS 'Version component 2 (commit LSN, LSN or version column value).';
COMMENT ON COLUMN cdc.outbox_rows.v2 IS 'Version component 3.';
COMMENT ON COLUMN cdc.outbox_rows.v3 IS 'Version component 4; NULL for a 3-component version (mappings ordered by a version column), and NULL for a component 4 of 0 when elided has bit 4.';
COMMENT ON COLUMN cdc.outbox_rows.lsn IS 'source.lsn of the change, if known; NULL also when it equals v2 and elided has bit 1.';
COMMENT ON COLUMN cdc.outbox_rows.commit_lsn IS 'source.commit_lsn of the change, if known; NULL also when it equals v1 and elided has bit 2.';
COMMENT ON COLUMN cdc.outbox_rows.elided IS 'Which columns are left NULL because the view derives them: bit 1 lsn (= v2), bit 2 commit_lsn (= v1), bit 4 v3 (= 0; the version has 4 components). 0: every column holds its value.';
COMMENT ON COLUMN cdc.outbox_rows.tx_id IS 'source.txId of the change, if known.';
COMMENT ON COLUMN cdc.outbox_rows.published_at IS 'Set by a relay once the row is published; NULL until then.';
COMMENT ON COLUMN cdc.outbox_rows.ikey IS 'The idempotency key: the 16 bytes of md5(source name, source table, op, version, entity key) (cdc.outbox.idempotency_key is its hex form).';
COMMENT ON COLUMN cdc.outbox_rows.target IS 'Destination table of the change.';
COMMENT ON COLUMN cdc.outbox_rows.src IS 'cdc.outbox_source id: topic, source name, db, schema and table, and the payload''s member names.';
COMMENT ON COLUMN cdc.outbox_rows.v0 IS 'Version component 1 (the source epoch).';
COMMENT ON COLUMN cdc.outbox_rows.op IS 'c (insert), u (update), d (delete) or t (truncate); written only by the engine, so not checked by a constraint.';
COMMENT ON COLUMN cdc.outbox_rows.entity_key IS 'Entity key as JSON text (the jsonb the engine built, without insignificant whitespace; cdc.outbox casts it back to jsonb); NULL for a truncate.';
COMMENT ON COLUMN cdc.outbox_rows.payload IS 'Destination row after the change (for d: the removed row, or the event''s before-image) as JSON text (of the jsonb the engine built, without insignificant whitespace): where the cdc.outbox_source entry src has payload_keys, only the values, a JSON array in their order; else the whole object. cdc.outbox shows it as jsonb (cdc._outbox_payload); NULL for t.';
COMMENT ON SEQUENCE cdc.outbox_rows_id_seq IS 'Ids of outbox rows, in insertion order.';
COMMENT ON COLUMN cdc.outbox_rows.stream_ordered IS 'True for a row of a stream-ordered target (cdc.set_ordering): its key is unique by the target''s stream mark, so outbox_rows_ikey leaves it out.';
COMMENT ON INDEX cdc.outbox_rows_ikey IS 'The one unique index, (target, v1, v2, idempotency key), of the rows of entity-ordered targets: a change whose key is there already for its target adds no second row (ON CONFLICT ... WHERE NOT stream_ordered DO NOTHING); per target, so that a writer of one table cannot take another table''s key (docs/security.md). The version columns lead so that inserts of a growing stream append to the index instead of landing on random pages (the key covers the version, so uniqueness is that of (target, key)). Rows of stream-ordered targets are unique by the target''s stream mark (a change at or below it writes nothing) and are not indexed.';
CREATE INDEX outbox_unpublished_idx ON cdc.outbox_rows (id) WHERE published_at IS NULL;
COMMENT ON INDEX cdc.outbox_unpublished_idx IS 'The relay''s work queue: unpublished rows in insertion order (cdc.outbox_claim; cdc.outbox_mark_published and cdc.outbox_delete find their rows by id in it).';

CREATE VIEW cdc.outbox AS
  SELECT o.id,
         pg_catalog.replace(o.ikey::pg_catalog.text, '-', '') AS idempotency_key,
         (SELECT s.topic FROM cdc.outbox_source s WHERE s.id OPERATOR(pg_catalog.=) o.src) AS topic,
         o.target,
         o.entity_key::pg_catalog.jsonb AS entity_key,
         o.op::pg_catalog.text AS op,
         (SELECT cdc._outbox_payload(s.payload_keys, o.payload)
            FROM cdc.outbox_source s WHERE s.id OPERATOR(pg_catalog.=) o.src) AS payload,
         (SELECT pg_catalog.jsonb_build_object('name', s.source_name, 'db', s.source_db, 'schema', s.source_schema,
                                               'table', s.source_table,
                                               'lsn', CASE WHEN (o.elided OPERATOR(pg_catalog.&) 1) OPERATOR(pg_catalog.<>) 0
                                                           THEN o.v2 ELSE o.lsn END,
                                               'commit_lsn', CASE WHEN (o.elided OPERATOR(pg_catalog.&) 2) OPERATOR(pg_catalog.<>) 0
                                                                  THEN o.v1 ELSE o.commit_lsn END,
                                               'txId', o.tx_id, 'version',
                                               CASE WHEN o.v3 IS NULL AND (o.elided OPERATOR(pg_catalog.&) 4) OPERATOR(pg_catalog.=) 0
                                                    THEN ARRAY[o.v0::pg_catalog.int8, o.v1, o.v2]
                                                    ELSE ARRAY[o.v0::pg_catalog.int8, o.v1, o.v2, COALESCE(o.v3, 0)] END)
            FROM cdc.outbox_source s WHERE s.id OPERATOR(pg_catalog.=) o.src) AS source,
         CASE WHEN o.v3 IS NULL AND (o.elided OPERATOR(pg_catalog.&) 4) OPERATOR(pg_catalog.=) 0
              THEN ARRAY[o.v0::pg_catalog.int8, o.v1, o.v2]
              ELSE ARRAY[o.v0::pg_catalog.int8, o.v1, o.v2, COALESCE(o.v3, 0)] END AS version,
         o.created_at,
         o.published_at
    FROM cdc.outbox_rows o;
COMMENT ON VIEW cdc.outbox IS
  'Outbox: one row per applied non-snapshot change of a mapping with outbox = true, written in the same transaction. idempotency_key is stable across replays and re-published topics, and unique per target. A view of cdc.outbox_rows (and cdc.outbox_source). A relay claims rows (cdc.outbox_claim: FOR UPDATE SKIP LOCKED), marks them (cdc.outbox_mark_published) or deletes them (cdc.outbox_delete) with EXECUTE on those functions; UPDATE or DELETE on the view, with which it could do the same like a table, also let a role LOCK it and its base tables. WHERE published_at IS NULL ORDER BY id uses outbox_unpublished_idx.';
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

-- SECURITY DEFINER (review h3): a relay needs EXECUTE on it, and no UPDATE
-- on the view cdc.outbox, with which it could LOCK the view and so its
-- base tables (checked against the view's owner), stalling every writer of
-- outbox rows.  It changes nothing but published_at of the given rows.
CREATE FUNCTION cdc.outbox_mark_published(ids bigint[]) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  n bigint;
BEGIN
  -- as key_columns and publications (fresh-user review h3: a 2-D array was
  -- taken, its elements used; regress input_polish)
  IF array_ndims(ids) > 1 THEN
    RAISE EXCEPTION 'ids must be a one-dimensional array, not % dimensions', array_ndims(ids)
      USING ERRCODE = '2202E';
  END IF;
  UPDATE cdc.outbox_rows o SET published_at = now()
   WHERE o.id = ANY (ids) AND o.published_at IS NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$fn$;
COMMENT ON FUNCTION cdc.outbox_mark_published(bigint[]) IS
  'For an outbox relay: sets published_at on the given cdc.outbox rows that are not published yet and returns how many it marked (rows already published are left alone, so a relay that retries after a crash gets 0 for them). SECURITY DEFINER: the relay role needs EXECUTE on it (revoked from PUBLIC), and reads the rows with cdc.outbox_claim() (EXECUTE) or SELECT on cdc.outbox; no UPDATE on cdc.outbox, which would let it LOCK the view and its base tables. Errors: 42501 without EXECUTE, 2202E ids of more than one dimension.';

-- The relay's claim and delete (review h3): locking rows FOR UPDATE SKIP
-- LOCKED through the view needed UPDATE on it, and deleting through it
-- DELETE, either of which lets the role LOCK the view and so
-- cdc.outbox_rows and cdc.outbox_source as the view's owner, stalling every
-- writer of outbox rows.  As SECURITY DEFINER functions they need EXECUTE
-- only; row locks belong to the transaction, not to the role, so the
-- caller's transaction holds the claims.
CREATE FUNCTION cdc.outbox_claim(max_rows integer, topic text DEFAULT NULL) RETURNS SETOF cdc.outbox
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  IF max_rows IS NULL THEN
    RAISE EXCEPTION 'max_rows must not be NULL' USING ERRCODE = '22004';
  END IF;
  IF max_rows < 1 THEN
    RAISE EXCEPTION 'max_rows must be at least 1, not %', max_rows USING ERRCODE = '22023';
  END IF;
  -- Through the view, so that the rows have its shape: FOR UPDATE locks the
  -- rows of cdc.outbox_rows (not the cdc.outbox_source entries the view's
  -- subqueries read), ORDER BY id with published_at IS NULL reads
  -- outbox_unpublished_idx, and LIMIT counts only rows it could lock.
  IF outbox_claim.topic IS NULL THEN
    RETURN QUERY
      SELECT v.* FROM cdc.outbox v
       WHERE v.published_at IS NULL
       ORDER BY v.id LIMIT max_rows
         FOR UPDATE SKIP LOCKED;
  ELSE
    RETURN QUERY
      SELECT v.* FROM cdc.outbox v
       WHERE v.published_at IS NULL AND v.topic = outbox_claim.topic
       ORDER BY v.id LIMIT max_rows
         FOR UPDATE SKIP LOCKED;
  END IF;
END
$fn$;
COMMENT ON FUNCTION cdc.outbox_claim(integer, text) IS
  'For an outbox relay: locks and returns up to max_rows cdc.outbox rows not marked published (of topic only, when given), in id order, skipping rows another transaction has locked (FOR UPDATE SKIP LOCKED), so that relays running at once get disjoint rows. The row locks are held by the caller''s transaction until it ends: call it in a transaction (READ COMMITTED), publish, then cdc.outbox_mark_published() or cdc.outbox_delete() the ids before COMMIT; outside a transaction block the locks end with the statement. Rows of a stream-ordered target are claimed like any other; a mapping with outbox_via = ''message'' writes no rows. SECURITY DEFINER: the relay role needs EXECUTE on it (revoked from PUBLIC), which lets it read every outbox row, as SELECT on cdc.outbox does, and no privilege on cdc.outbox or cdc.outbox_rows (UPDATE would let it LOCK them). Errors: 22004 max_rows NULL, 22023 max_rows < 1.';

CREATE FUNCTION cdc.outbox_delete(ids bigint[]) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  n bigint;
BEGIN
  -- NULL (array_agg over an empty claim) deletes nothing, as
  -- cdc.outbox_mark_published(NULL) marks nothing
  IF ids IS NULL THEN
    RETURN 0;
  END IF;
  -- as key_columns and publications (fresh-user review h3; regress input_polish)
  IF array_ndims(ids) > 1 THEN
    RAISE EXCEPTION 'ids must be a one-dimensional array, not % dimensions', array_ndims(ids)
      USING ERRCODE = '2202E';
  END IF;
  -- Rows not marked published only: outbox_unpublished_idx finds them by id
  -- (there is no other index on id), and a marked row is cdc.prune()'s.
  DELETE FROM cdc.outbox_rows o WHERE o.id = ANY (ids) AND o.published_at IS NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$fn$;
COMMENT ON FUNCTION cdc.outbox_delete(bigint[]) IS
  'For an outbox relay that removes what it published instead of marking it: deletes the given cdc.outbox rows that are not marked published and returns how many it deleted. Calling it says the rows are published, as cdc.outbox_mark_published() does. Rows already marked published are left alone (cdc.prune() removes them after the replay horizon: only unpublished rows are indexed by id), as are ids of no row (a relay that retries after a crash gets 0 for rows it deleted). A row another transaction has locked (claimed) is waited for. Dedup never depends on outbox rows, so a deleted row never comes back. SECURITY DEFINER: the relay role needs EXECUTE on it (revoked from PUBLIC), no DELETE on cdc.outbox (which would let it LOCK the view and its base tables). A NULL ids (array_agg over an empty claim) deletes nothing (0), as cdc.outbox_mark_published does. Errors: 42501 without EXECUTE, 2202E ids of more than one dimension.';

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
  'Outcome counters, one row per (target, backend slot) so that concurrent sessions never wait on each other; read them through cdc.stats. A transaction''s counts are added once, when it commits (or is prepared); transactional: a rolled-back call or subtransaction counts nothing.';
COMMENT ON COLUMN cdc.counters.target IS 'Destination table (0 = events ignored before a target was known).';
COMMENT ON COLUMN cdc.counters.backend_id IS 'Backend slot that wrote the row.';
COMMENT ON COLUMN cdc.counters.applied IS 'Events applied.';
COMMENT ON COLUMN cdc.counters.duplicate IS 'Events that were duplicates (ledger claim or equal version and content).';
COMMENT ON COLUMN cdc.counters.stale IS 'Events older than the stored version or the truncate barrier.';
COMMENT ON COLUMN cdc.counters.conflict IS 'Events recorded in cdc.conflicts.';
COMMENT ON COLUMN cdc.counters.ignored IS 'Non-change records, truncates ignored by policy, and the worker''s updates of a table whose publications publish no inserts of it that find no row at the destination (not applied, as by PostgreSQL''s own subscriber).';
COMMENT ON COLUMN cdc.counters.blocked_resurrections IS 'Stale inserts/updates blocked by a newer tombstone.';
COMMENT ON COLUMN cdc.counters.outbox_rows IS 'Outbox rows written.';
COMMENT ON COLUMN cdc.counters.snapshot_rows IS 'Snapshot rows (op r) applied.';
COMMENT ON COLUMN cdc.counters.expired IS 'Changes older than the prune watermark of an entity without records (outcome expired, or applied under expired_policy ''apply'').';

-- A transaction's counts are written to cdc.counters when it commits
-- (docs/internals.md, "Counters"); until then this function returns them,
-- so that cdc.stats shows a transaction its own counts.
CREATE FUNCTION cdc._pending_counters()
RETURNS TABLE (target regclass, applied bigint, duplicate bigint, stale bigint, conflict bigint, ignored bigint,
               blocked_resurrections bigint, outbox_rows bigint, snapshot_rows bigint, expired bigint)
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_pending_counters';
COMMENT ON FUNCTION cdc._pending_counters() IS
  'The outcome counts the current session has taken in its open transaction and not yet written to cdc.counters (written when the transaction commits or is prepared; discarded with a rolled-back transaction or subtransaction), one row per target. Used by cdc.stats; returns only the caller''s own uncommitted counts. No error.';

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
    FROM (SELECT c.target, c.applied, c.duplicate, c.stale, c.conflict, c.ignored, c.blocked_resurrections,
                 c.outbox_rows, c.snapshot_rows, c.expired
            FROM cdc.counters c
          UNION ALL
          SELECT * FROM cdc._pending_counters()) c
   GROUP BY target;
COMMENT ON VIEW cdc.stats IS
  'Per-target outcome counts (applied, duplicate, stale, conflict, ignored), blocked resurrections, outbox rows, snapshot rows and expired changes, summed over all sessions (cdc.counters), plus the current transaction''s own counts, which cdc.counters receives when it commits.';

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

-- The ledger is readable row by row: a role sees the entries of the targets
-- it may SELECT from without row-level security applying to it (whether a
-- delivery was processed is information about the target's rows).  The
-- extension owner, who writes it, is not subject to the policy.
ALTER TABLE cdc.ledger ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable_targets ON cdc.ledger FOR SELECT TO PUBLIC
  USING (pg_catalog.has_table_privilege(target, 'SELECT') AND NOT pg_catalog.row_security_active(target));
COMMENT ON POLICY readable_targets ON cdc.ledger IS
  'A role reads the ledger entries of the targets it may SELECT from, unless row-level security applies to it on that target.';

-- Claims by offset range (docs/semantics.md, "Claims by offset range"):
-- cdc_apply_batch(..., source_partition, offsets) claims the deliveries of
-- one ordered source partition (a Kafka topic partition) as ranges of
-- offsets per target, one row per batch instead of one ledger row per
-- delivery.  The partition's row is the lock that serialises two batches
-- of one partition and target.
CREATE TABLE cdc.ledger_partition (
  id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  target    regclass NOT NULL,
  name      text NOT NULL,
  claimed_s integer NOT NULL,
  UNIQUE (target, name)
);
COMMENT ON TABLE cdc.ledger_partition IS
  'Source partitions whose deliveries a target claims by offset range (cdc_apply_batch with source_partition and offsets): one row per (target, partition). Claiming a range updates the row first, which serialises two batches of the same partition and target.';
COMMENT ON COLUMN cdc.ledger_partition.id IS 'Id used by cdc.ledger_range.partition_id (a bigint: ids that rolled-back calls consumed never run out).';
COMMENT ON COLUMN cdc.ledger_partition.target IS 'Destination table of the deliveries.';
COMMENT ON COLUMN cdc.ledger_partition.name IS 'The source_partition argument: the name of one ordered sequence of offsets, for Kafka topic:generation:partition. The delivery key of offset o is name || '':'' || o.';
COMMENT ON COLUMN cdc.ledger_partition.claimed_s IS 'Time of the last claim, in whole seconds since 2000-01-01 00:00 UTC (cdc.seconds_to_timestamptz). cdc.prune() removes a partition older than the replay horizon once it has no ranges left.';

CREATE TABLE cdc.ledger_range (
  partition_id bigint NOT NULL,
  lo           bigint NOT NULL,
  hi           bigint NOT NULL,
  claimed_s    integer NOT NULL,
  PRIMARY KEY (partition_id, hi),
  CHECK (lo <= hi)
);
COMMENT ON TABLE cdc.ledger_range IS
  'Processed deliveries claimed by offset range: every offset in [lo, hi] of the partition was processed for its target (the deliveries of one batch, and the offsets between them that the batch did not carry: Kafka tombstones, transaction markers, compacted records). Ranges of one partition are disjoint. cdc.delivery_processed() reads them; cdc.prune() removes ranges older than the replay horizon.';
COMMENT ON COLUMN cdc.ledger_range.partition_id IS 'cdc.ledger_partition.id: the target and partition.';
COMMENT ON COLUMN cdc.ledger_range.lo IS 'First offset of the range.';
COMMENT ON COLUMN cdc.ledger_range.hi IS 'Last offset of the range (inclusive).';
COMMENT ON COLUMN cdc.ledger_range.claimed_s IS 'Claim time: start of the claiming transaction, in whole seconds since 2000-01-01 00:00 UTC (cdc.seconds_to_timestamptz).';

ALTER TABLE cdc.ledger_partition ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable_targets ON cdc.ledger_partition FOR SELECT TO PUBLIC
  USING (pg_catalog.has_table_privilege(target, 'SELECT') AND NOT pg_catalog.row_security_active(target));
COMMENT ON POLICY readable_targets ON cdc.ledger_partition IS
  'A role reads the partitions of the targets it may SELECT from, unless row-level security applies to it on that target.';
ALTER TABLE cdc.ledger_range ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable_targets ON cdc.ledger_range FOR SELECT TO PUBLIC
  USING (EXISTS (SELECT 1 FROM cdc.ledger_partition p WHERE p.id OPERATOR(pg_catalog.=) partition_id));
COMMENT ON POLICY readable_targets ON cdc.ledger_range IS
  'A role reads the ranges of the partitions it may read in cdc.ledger_partition (the targets it may SELECT from without row-level security).';

CREATE FUNCTION cdc.delivery_processed(target regclass, delivery_key text) RETURNS boolean
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  IF NOT pg_catalog.has_table_privilege(target, 'SELECT') OR pg_catalog.row_security_active(target) THEN
    RAISE EXCEPTION 'permission denied for table %', target
      USING ERRCODE = '42501',
            HINT = 'cdc.delivery_processed() needs SELECT on the target, without row-level security applying to the caller.';
  END IF;
  -- a target that names no relation (OID 0, a dropped table's OID) is 42P01
  -- (has_table_privilege() is NULL for it, so the check above lets it pass),
  -- as everywhere in the API; it answered false (sql/new_user_s32.sql)
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) target::pg_catalog.oid) THEN
    RAISE EXCEPTION 'target relation with OID % does not exist', target::pg_catalog.oid
      USING ERRCODE = '42P01';
  END IF;
  RETURN EXISTS (SELECT 1 FROM cdc.ledger l WHERE l.digest OPERATOR(pg_catalog.=) cdc.delivery_digest(delivery_processed.target, delivery_processed.delivery_key))
      -- <partition>:<offset> of a partition claimed by offset range: the
      -- range of the partition ending at or after the offset starts at or
      -- before it (ranges are disjoint).  The offset as cdc_apply_batch
      -- spells it in the delivery key (no sign but '-', no leading zero, no
      -- '-0'): 'p:05' is another delivery key than 'p:5'.
      OR EXISTS (SELECT 1
                   FROM pg_catalog.regexp_match(delivery_processed.delivery_key, '^(.*):(0|-?[1-9][0-9]{0,18})$') r,
                        LATERAL (SELECT CASE WHEN r[2]::pg_catalog.numeric
                                                  BETWEEN -9223372036854775808 AND 9223372036854775807
                                             THEN r[2]::pg_catalog.int8 END AS o) x,
                        cdc.ledger_partition p
                  WHERE p.target OPERATOR(pg_catalog.=) delivery_processed.target
                    AND p.name OPERATOR(pg_catalog.=) r[1]
                    AND (SELECT g.lo FROM cdc.ledger_range g
                          WHERE g.partition_id OPERATOR(pg_catalog.=) p.id
                            AND g.hi OPERATOR(pg_catalog.>=) x.o
                          ORDER BY g.hi LIMIT 1) OPERATOR(pg_catalog.<=) x.o)
      -- a worker delivery key pgoutput:<source>:<commit LSN>:<position> of a
      -- stream-ordered target: processed when the target's mark of that
      -- source has reached it (docs/semantics.md, "Stream ordering")
      OR EXISTS (SELECT 1
                   FROM pg_catalog.regexp_match(delivery_processed.delivery_key,
                                                '^pgoutput:(.+):([0-9A-F]{1,8}/[0-9A-F]{1,8}):([0-9]{1,18})$') r,
                        cdc.stream_mark m JOIN cdc.source s ON s.id OPERATOR(pg_catalog.=) m.src
                  WHERE m.target OPERATOR(pg_catalog.=) delivery_processed.target
                    AND s.name OPERATOR(pg_catalog.=) r[1]
                    AND ROW(r[2]::pg_catalog.pg_lsn OPERATOR(pg_catalog.-) '0/0'::pg_catalog.pg_lsn, r[3]::pg_catalog.numeric)
                        OPERATOR(pg_catalog.<=) ROW(m.v1::pg_catalog.numeric, m.v2::pg_catalog.numeric));
END
$fn$;
COMMENT ON FUNCTION cdc.delivery_processed(regclass, text) IS
  'True when the delivery key was processed for the target: the ledger holds it (within the replay horizon: older ledger entries are pruned), or it has the form <partition>:<offset> and a range the target claimed for that partition holds the offset (cdc.ledger_range, cdc_apply_batch with source_partition and offsets; pruned as the ledger is), or it is a worker delivery key (pgoutput:<source>:<commit LSN>:<position>) at or below the target''s stream mark of that source (stream-ordered targets keep no ledger rows; the mark is never pruned). Runs with the caller''s rights: error 42501 unless the caller may SELECT from the target and row-level security does not apply to it there (the ledger''s policy shows the caller those entries only).';

CREATE FUNCTION cdc.entity_key_json(target regclass, key text) RETURNS jsonb
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
  -- Without key columns (the target lost its primary key) or with a key of
  -- another width than the stored one: the compact key as a JSON string.
  SELECT CASE WHEN c.cols IS NULL THEN to_jsonb(key)
              WHEN cardinality(c.cols) = 1 THEN jsonb_build_object(c.cols[1], key)
              WHEN key NOT LIKE '{%}' THEN to_jsonb(key)
              ELSE CASE WHEN cardinality(key::text[]) = cardinality(c.cols) THEN jsonb_object(c.cols, key::text[])
                        ELSE to_jsonb(key) END END
    FROM (SELECT coalesce(
                   -- flat, as the engine reads it (a row written directly may have more dimensions)
                   (SELECT ARRAY(SELECT k::text FROM unnest(m.key_columns) k) FROM cdc.mapping m
                     WHERE m.target = entity_key_json.target AND m.key_columns IS NOT NULL),
                   (SELECT array_agg(a.attname::text ORDER BY k.n)
                      FROM pg_index i, unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n), pg_attribute a
                     WHERE i.indrelid = entity_key_json.target AND i.indisprimary
                       AND a.attrelid = i.indrelid AND a.attnum = k.attnum)) AS cols) c
$$;
COMMENT ON FUNCTION cdc.entity_key_json(regclass, text) IS
  'An entity key of cdc.entity_state (compact form) as JSON {"column": "text value"}, using the mapping''s key_columns or the target''s primary key, in key order; the compact key as a JSON string when the target has no such key or one of another width.';

-- security_barrier: a caller's function in a WHERE clause on the view runs
-- only on the rows the privilege filter lets through (sql/entities_barrier.sql).
CREATE VIEW cdc.entities WITH (security_barrier) AS
  SELECT e.target, cdc.entity_key_json(e.target, e.key) AS entity_key, s.name AS source_name,
         CASE WHEN EXISTS (SELECT 1 FROM cdc.mapping m WHERE m.target = e.target AND m.version_column IS NOT NULL)
              THEN ARRAY[e.v0::bigint, e.v1, e.v2]
              ELSE ARRAY[e.v0::bigint, e.v1, e.v2, e.v3::bigint] END AS version,
         e.deleted AS is_tombstone, cdc.seconds_to_timestamptz(e.touched_s) AS updated_at
    FROM cdc.entity_state e
    JOIN cdc.source s ON s.id = e.src
   WHERE pg_catalog.has_table_privilege(e.target, 'SELECT') AND NOT pg_catalog.row_security_active(e.target);
COMMENT ON VIEW cdc.entities IS
  'Per-entity versions and tombstones: the version of the latest applied change of each key (bigint[]); is_tombstone when it was a delete. A readable form of cdc.entity_state, showing only targets the current role may SELECT from without row-level security applying to it (keys are row data).';

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
  src       integer NOT NULL,
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

-- Stream ordering (docs/semantics.md, "Stream ordering"): one row per
-- stream-ordered target and source instead of a ledger row and an entity
-- record per change.
CREATE TABLE cdc.stream_mark (
  v1        bigint NOT NULL,
  v2        bigint NOT NULL,
  target    regclass NOT NULL,
  v0        integer NOT NULL,
  v3        integer NOT NULL,
  updated_s integer NOT NULL,
  src       integer NOT NULL,
  PRIMARY KEY (target, src)
);
COMMENT ON TABLE cdc.stream_mark IS
  'High-water mark of a target written by one ordered stream (mapping ordering = ''stream''): the version of the last change of that source applied to the target. Every change of the source at or below it was processed (a re-sent change is a duplicate), so no ledger row or entity record is kept per change. Written by the worker at each local commit, under a row lock that serialises two subscriptions of the same source; never pruned. After cdc.set_ordering(target, ''entity'') it stays as the implicit record of every key that has none. Read it through cdc.stream_marks.';
COMMENT ON COLUMN cdc.stream_mark.v1 IS 'Version component 2: the commit LSN of the last applied change (or the snapshot point of an initial copy).';
COMMENT ON COLUMN cdc.stream_mark.v2 IS 'Version component 3: the change''s position in its source transaction (0 for snapshot rows and a mark seeded at a copy).';
COMMENT ON COLUMN cdc.stream_mark.target IS 'Destination table.';
COMMENT ON COLUMN cdc.stream_mark.v0 IS 'Version component 1: the source epoch.';
COMMENT ON COLUMN cdc.stream_mark.v3 IS 'Version component 4 (0 on the worker path).';
COMMENT ON COLUMN cdc.stream_mark.updated_s IS 'When the mark last moved, in whole seconds since 2000-01-01 00:00 UTC (cdc.seconds_to_timestamptz).';
COMMENT ON COLUMN cdc.stream_mark.src IS 'cdc.source id of the stream''s source (pg:<system identifier> on the worker path). A stream-ordered target has marks of one source only.';

-- security_barrier and row_security_active, as cdc.entities: a reader's own
-- function in a WHERE clause saw the targets of every mark before the
-- privilege filter, and a reader under a policy of the target read its mark
-- (security review h2, sql/stream_marks_barrier.sql).
CREATE VIEW cdc.stream_marks WITH (security_barrier) AS
  SELECT m.target, s.name AS source_name, ARRAY[m.v0::bigint, m.v1, m.v2, m.v3::bigint] AS version,
         cdc.seconds_to_timestamptz(m.updated_s) AS updated_at
    FROM cdc.stream_mark m
    JOIN cdc.source s ON s.id = m.src
   WHERE pg_catalog.has_table_privilege(m.target, 'SELECT') AND NOT pg_catalog.row_security_active(m.target);
COMMENT ON VIEW cdc.stream_marks IS
  'Readable form of cdc.stream_mark: per stream-ordered target (and per target switched back to entity ordering) the source and the version of the last change applied from it, and when it moved; only targets the current role may SELECT from without row-level security applying to it (as cdc.entities).';
ALTER TABLE cdc.stream_mark ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable_targets ON cdc.stream_mark FOR SELECT TO PUBLIC
  USING (pg_catalog.has_table_privilege(target, 'SELECT') AND NOT pg_catalog.row_security_active(target));
COMMENT ON POLICY readable_targets ON cdc.stream_mark IS
  'A role reads the stream marks of the targets it may SELECT from, unless row-level security applies to it on that target (cdc.delivery_processed() reads them with the caller''s rights).';

CREATE TABLE cdc.prune_state (
  relation           text PRIMARY KEY CHECK (relation IN ('ledger', 'ledger_range', 'entity_state', 'outbox')),
  next_block         bigint NOT NULL DEFAULT 0,
  last_run_at        timestamptz,
  last_sweep_done_at timestamptz,
  removed            bigint NOT NULL DEFAULT 0
);
INSERT INTO cdc.prune_state (relation) VALUES ('ledger'), ('ledger_range'), ('entity_state'), ('outbox');
COMMENT ON TABLE cdc.prune_state IS
  'Where cdc.prune() continues in each table: it scans at most max_pages blocks per table per call, from next_block, wrapping around at the end (a completed pass is a sweep).';
COMMENT ON COLUMN cdc.prune_state.relation IS 'ledger, ledger_range (claims by offset range), entity_state (tombstones) or outbox (published rows).';
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

-- SECURITY DEFINER (review h3): a role delegated pruning needs EXECUTE
-- only.  As the caller it needed DELETE on cdc.ledger, cdc.ledger_range,
-- cdc.ledger_partition, cdc.entity_state and cdc.outbox_rows, UPDATE on
-- cdc.prune_state and INSERT, UPDATE on cdc.prune_watermark, with which it
-- could LOCK any of them in ACCESS EXCLUSIVE mode and stall every worker and
-- cdc_apply() caller.  It removes nothing newer than the horizon it is
-- given (a grantee may give a short one: EXECUTE is for administrators).
CREATE FUNCTION cdc.prune(max_pages integer DEFAULT 1000, horizon interval DEFAULT NULL)
RETURNS TABLE (relation text, scanned_blocks bigint, removed bigint, sweep_done boolean)
LANGUAGE plpgsql
SECURITY DEFINER
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
  parts    bigint[];
BEGIN
  -- NULL was refused as 'must be at least 1' (22023); horizon NULL is the default
  IF max_pages IS NULL THEN
    RAISE EXCEPTION 'max_pages must not be NULL' USING ERRCODE = '22004';
  END IF;
  IF h < interval '0' THEN
    RAISE EXCEPTION 'the replay horizon must not be negative: %', h USING ERRCODE = '22023';
  END IF;
  IF max_pages < 1 THEN
    RAISE EXCEPTION 'max_pages must be at least 1' USING ERRCODE = '22023';
  END IF;
  -- One pruner at a time; a concurrent call returns nothing.  The mutex is
  -- a row lock on cdc.prune_state, which only a role that may UPDATE that
  -- table, or call this function, can take: an advisory lock can be taken
  -- (and held forever) by any role, which would stop pruning for everyone
  -- (docs/security.md).
  PERFORM 1 FROM cdc.prune_state p WHERE p.relation = 'entity_state' FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  cutoff := now() - h;
  -- whole seconds since 2000-01-01 UTC, rounded down: an entry stored with
  -- second s is older than the horizon when s < cutoff_s (never one within)
  cutoff_s := floor(extract(epoch FROM cutoff) - 946684800)::integer;
  FOR st IN SELECT * FROM cdc.prune_state ORDER BY 1 FOR UPDATE LOOP
    -- the outbox is stored in cdc.outbox_rows (cdc.outbox is its view)
    nblocks := pg_relation_size(CASE WHEN st.relation = 'outbox' THEN 'cdc.outbox_rows'::regclass
                                     ELSE ('cdc.' || st.relation)::regclass END) / current_setting('block_size')::bigint;
    IF st.next_block >= nblocks THEN
      st.next_block := 0;
    END IF;
    upto := st.next_block + max_pages;
    IF st.relation = 'ledger' THEN
      DELETE FROM cdc.ledger l
       WHERE l.ctid >= format('(%s,0)', st.next_block)::tid AND l.ctid < format('(%s,0)', upto)::tid
         AND l.claimed_s < cutoff_s;
      GET DIAGNOSTICS n = ROW_COUNT;
    ELSIF st.relation = 'ledger_range' THEN
      DELETE FROM cdc.ledger_range g
       WHERE g.ctid >= format('(%s,0)', st.next_block)::tid AND g.ctid < format('(%s,0)', upto)::tid
         AND g.claimed_s < cutoff_s;
      GET DIAGNOSTICS n = ROW_COUNT;
      -- at the end of a pass, the partitions left without ranges that were
      -- not claimed within the horizon (one row per target and partition:
      -- few, so the scan of the whole table once per pass is bounded by
      -- them).  The candidates are locked first, skipping any a batch is
      -- claiming in (it holds the row lock until it ends); a batch that
      -- comes later waits for this transaction.  Then the DELETE, a
      -- statement of its own, so that its snapshot is taken after the locks:
      -- it sees the ranges of a batch that committed before a lock was
      -- taken, and keeps that partition (its claim may be older than the
      -- cutoff when the horizon is shorter than the batch's transaction).
      IF upto >= nblocks THEN
        parts := ARRAY(SELECT q.id FROM cdc.ledger_partition q WHERE q.claimed_s < cutoff_s
                        FOR UPDATE SKIP LOCKED);
        DELETE FROM cdc.ledger_partition p
         WHERE p.id = ANY (parts)
           AND NOT EXISTS (SELECT 1 FROM cdc.ledger_range g WHERE g.partition_id = p.id);
      END IF;
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
      DELETE FROM cdc.outbox_rows o
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
  'Removes ledger entries (digests and offset ranges), tombstones and published outbox rows older than the replay horizon (default cdc.replay_horizon()), scanning at most max_pages blocks of each table per call and continuing where the last call stopped (cdc.prune_state): call it repeatedly, or let the launcher call it every cdc.prune_interval. Pruned tombstones raise the prune watermark. Returns per table the blocks scanned, the rows removed and whether a pass over the table completed. A concurrent call returns no rows. SECURITY DEFINER, EXECUTE revoked from PUBLIC: a role granted EXECUTE needs no privilege on the tables it prunes (which would let it LOCK them). Errors: 22004 max_pages NULL, 22023 negative horizon or max_pages < 1.';

CREATE VIEW cdc.horizon_status AS
  SELECT h.horizon,
         now() - h.horizon AS cutoff,
         (SELECT cdc.seconds_to_timestamptz(min(l.claimed_s)) FROM cdc.ledger l) AS oldest_ledger_entry,
         (SELECT count(*) FROM cdc.ledger) AS ledger_rows,
         pg_total_relation_size('cdc.ledger') AS ledger_bytes,
         (SELECT count(*) FROM cdc.ledger_range) AS ledger_ranges,
         (SELECT cdc.seconds_to_timestamptz(min(e.touched_s)) FROM cdc.entity_state e WHERE e.deleted) AS oldest_tombstone,
         (SELECT count(*) FROM cdc.entity_state e WHERE e.deleted) AS tombstones,
         (SELECT count(*) FROM cdc.entity_state e WHERE NOT e.deleted) AS live_entities,
         pg_total_relation_size('cdc.entity_state') AS entity_state_bytes,
         (SELECT count(*) FROM cdc.outbox_rows o WHERE o.published_at IS NULL) AS outbox_unpublished,
         (SELECT count(*) FROM cdc.outbox_rows o WHERE o.published_at IS NOT NULL) AS outbox_published,
         pg_total_relation_size('cdc.outbox_rows') + pg_total_relation_size('cdc.outbox_source') AS outbox_bytes,
         (SELECT count(*) FROM cdc.prune_watermark) AS watermarks,
         (SELECT coalesce(sum(c.expired), 0) FROM cdc.stats c)::bigint AS expired_changes,
         (SELECT max(p.last_run_at) FROM cdc.prune_state p) AS last_prune_at,
         (SELECT CASE WHEN bool_and(p.last_sweep_done_at IS NOT NULL) THEN min(p.last_sweep_done_at) END
            FROM cdc.prune_state p) AS last_full_sweep_at
    FROM (SELECT cdc.replay_horizon() AS horizon) h;
COMMENT ON VIEW cdc.horizon_status IS
  'The replay horizon and what it retains: the horizon and its cutoff time, the oldest ledger entry and tombstone, row counts and sizes in bytes (heap, indexes, TOAST) of the ledger, entity records and outbox, watermarks, expired changes, and when cdc.prune() last ran and last completed a pass over every table. Counts scan the tables.';

-- ---------------------------------------------------------------------------
-- Registering mappings
-- ---------------------------------------------------------------------------
-- The primary key columns of a table in index order (NULL: none).
CREATE FUNCTION cdc._primary_key_columns(target regclass) RETURNS name[]
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT array_agg(a.attname ORDER BY k.n)
    FROM pg_index i, unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n), pg_attribute a
   WHERE i.indrelid = target AND i.indisprimary AND a.attrelid = i.indrelid AND a.attnum = k.attnum
$$;
COMMENT ON FUNCTION cdc._primary_key_columns(regclass) IS
  'Internal: the primary key columns of a table in index order, NULL when it has none.';

-- The text entity records name a key value by, whatever the session's
-- settings (src/pg/sql_api.cpp, cdc_key_text): used by the engine's
-- statements that match rows by key and by cdc._rekey_entities.  Without
-- side effects, so every role may call it (the engine's statements run as
-- the caller).  STABLE, not IMMUTABLE: a composite type's attributes can
-- change (ALTER TYPE), and an output function is only STABLE.  The
-- search_path clause, like every function's here, costs about 1 us a call
-- (measured); it is only called where rows are matched by key.
CREATE FUNCTION cdc._key_text(value anyelement) RETURNS text
LANGUAGE c STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_key_text';
COMMENT ON FUNCTION cdc._key_text(anyelement) IS
  'Internal: the text entity records name a key value by (cdc.entity_state.key): the output text printed with fixed settings (ISO dates, timestamptz in UTC, postgres intervals, hex bytea, shortest floats, numeric without trailing zeros), the same in every session; array, range, multirange and composite values and money print through their output function under those settings (and lc_monetary C).';

CREATE FUNCTION cdc._key_ambiguity(target regclass, key_columns name[]) RETURNS text
LANGUAGE c STABLE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_key_ambiguity';
COMMENT ON FUNCTION cdc._key_ambiguity(regclass, name[]) IS
  'Internal (cdc.register_mapping): the message for the first key column of target (key_columns, or NULL for the primary key) whose equal values can print different texts (citext, jsonb, an unpadded bpchar, a case-insensitive collation of a unique index on the key, or such a type or collation inside an array, range or composite key), which entity records, naming an entity by its key''s text, cannot tell apart; NULL when there is none. The engine refuses such a key on entity-ordered targets (0A000); cdc.register_mapping warns. Reads only the catalogs: every role may call it.';

-- The key texts of every row of a target under two key definitions, read
-- as the table's owner in a security-restricted operation (planning a read
-- of the table can run its owner's code; src/pg/sql_api.cpp).
CREATE FUNCTION cdc._rekey_pairs(target regclass, old_key name[], new_key name[]) RETURNS TABLE (ok text, nk text)
LANGUAGE c VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_rekey_pairs';
COMMENT ON FUNCTION cdc._rekey_pairs(regclass, name[], name[]) IS
  'Internal (cdc._rekey_entities): the key text of every row of target under old_key (ok) and under new_key (nk, NULL when a column of new_key is NULL), read as the table''s owner in a security-restricted operation. EXECUTE revoked from PUBLIC.';

-- Re-keys the entity records of a target from one key definition to another
-- (B36): each live record is moved to the key its row has under the new key
-- columns (the row is read from the target, which is locked against writes
-- meanwhile).  Tombstones, and live records whose row is gone, cannot be
-- re-keyed (the deleted row's other columns are not kept): they are removed
-- and their greatest version per source is folded into the prune watermark,
-- exactly as cdc.prune() does with expired tombstones, so an older change
-- for such an entity is `expired` (expired_policy), never applied as new.
-- The keys are the columns' key texts (cdc._key_text), whatever the
-- session's settings.
CREATE FUNCTION cdc._rekey_entities(target regclass, old_key name[], new_key name[]) RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  old_keys text[];
  new_keys text[];
  missing text;
  recs cdc.entity_state[];
  moved bigint;
BEGIN
  -- no change of the target's rows while their records move
  EXECUTE format('LOCK TABLE %s IN SHARE MODE', target);
  PERFORM 1 FROM cdc.entity_state e WHERE e.target = _rekey_entities.target FOR UPDATE;
  -- the compact key (docs/retention.md) of every row under both keys, read
  -- as the table's owner in a security-restricted operation
  -- (cdc._rekey_pairs): planning a read of the table folds its index
  -- predicates, which can run the owner's code (sql/rekey_owner_code.sql)
  SELECT pg_catalog.array_agg(n.ok), pg_catalog.array_agg(n.nk),
         pg_catalog.min(CASE WHEN n.nk IS NULL THEN n.ok END)
    INTO old_keys, new_keys, missing
    FROM cdc.entity_state e
    JOIN cdc._rekey_pairs(_rekey_entities.target, _rekey_entities.old_key, _rekey_entities.new_key) n
      ON n.ok OPERATOR(pg_catalog.=) e.key COLLATE pg_catalog."C"
   WHERE e.target OPERATOR(pg_catalog.=) _rekey_entities.target AND NOT e.deleted;
  IF missing IS NOT NULL THEN
    RAISE EXCEPTION 'cannot re-key table %: the row with key % has NULL in a column of the new key (%)', target,
                    cdc.entity_key_json(target, missing), array_to_string(new_key, ', ')
      USING ERRCODE = '23502',
            HINT = 'Every row with an entity record needs a value in each new key column.';
  END IF;
  old_keys := coalesce(old_keys, '{}');
  new_keys := coalesce(new_keys, '{}');
  -- what cannot be re-keyed: its greatest version per source becomes the watermark
  INSERT INTO cdc.prune_watermark AS w (target, src, v0, v1, v2, v3)
  SELECT DISTINCT ON (e.src) e.target, e.src, e.v0, e.v1, e.v2, e.v3
    FROM cdc.entity_state e
   WHERE e.target = _rekey_entities.target AND NOT EXISTS (SELECT 1 FROM unnest(old_keys) k WHERE k = e.key)
   ORDER BY e.src, e.v0 DESC, e.v1 DESC, e.v2 DESC, e.v3 DESC
  ON CONFLICT ON CONSTRAINT prune_watermark_pkey DO UPDATE
     SET v0 = EXCLUDED.v0, v1 = EXCLUDED.v1, v2 = EXCLUDED.v2, v3 = EXCLUDED.v3, pruned_at = now()
   WHERE (EXCLUDED.v0, EXCLUDED.v1, EXCLUDED.v2, EXCLUDED.v3) > (w.v0, w.v1, w.v2, w.v3);
  DELETE FROM cdc.entity_state e
   WHERE e.target = _rekey_entities.target AND NOT EXISTS (SELECT 1 FROM unnest(old_keys) k WHERE k = e.key);
  -- the live records: delete, then insert under the new key (an old key may be another row's new key)
  WITH gone AS (
    DELETE FROM cdc.entity_state e WHERE e.target = _rekey_entities.target RETURNING e.*
  )
  SELECT array_agg(g) INTO recs FROM gone g;
  INSERT INTO cdc.entity_state (v1, v2, target, v0, v3, chash, touched_s, src, deleted, key)
  SELECT r.v1, r.v2, r.target, r.v0, r.v3, r.chash, r.touched_s, r.src, r.deleted, m.nk
    FROM unnest(recs) r
    JOIN unnest(old_keys, new_keys) m(ok, nk) ON m.ok = r.key;
  GET DIAGNOSTICS moved = ROW_COUNT;
  RETURN moved;
END
$fn$;
COMMENT ON FUNCTION cdc._rekey_entities(regclass, name[], name[]) IS
  'Internal (cdc.register_mapping with other key_columns): moves the live entity records of target to the keys their rows have under new_key; tombstones and records without a row are removed and folded into cdc.prune_watermark. Locks the target in SHARE mode. Returns the number of records moved. Error 23502 when a row with a record has NULL in a new key column.';

-- Called by cdc.register_mapping before it writes the mapping: entity
-- records are keyed by the key columns' values, so a new key definition
-- re-keys them (cdc._rekey_entities), or is refused where they cannot be
-- carried over (a history mapping; a table without a usable key) (B36).
CREATE FUNCTION cdc._rekey_if_needed(target regclass, key_columns name[], mode text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  old_key name[];
  new_key name[];
BEGIN
  old_key := coalesce((SELECT m.key_columns FROM cdc.mapping m WHERE m.target = _rekey_if_needed.target),
                      cdc._primary_key_columns(target));
  new_key := coalesce(key_columns, cdc._primary_key_columns(target));
  -- cdc.entities, not cdc.entity_state: a role the extension owner delegated
  -- mappings to (docs/security.md) sees the records of its own tables there
  IF old_key IS NOT DISTINCT FROM new_key
     OR NOT EXISTS (SELECT 1 FROM cdc.entities e WHERE e.target = _rekey_if_needed.target) THEN
    RETURN;
  END IF;
  IF mode = 'history' OR (SELECT m.mode FROM cdc.mapping m WHERE m.target = _rekey_if_needed.target) = 'history'
     OR old_key IS NULL OR new_key IS NULL THEN
    RAISE EXCEPTION 'cannot change the key of table % (key_columns) while it has entity records', target
      USING ERRCODE = '55000',
            HINT = 'Keep the key_columns it was registered with, or unregister the mapping, empty the table and remove its cdc.entity_state rows first.';
  END IF;
  -- moving records writes the shared bookkeeping (cdc.entity_state,
  -- cdc.prune_watermark), which only the extension owner writes: a delegate
  -- cannot re-key, whatever table it owns
  IF NOT (pg_catalog.has_function_privilege('cdc._rekey_entities(regclass, name[], name[])', 'EXECUTE')
          AND pg_catalog.has_table_privilege('cdc.entity_state', 'SELECT, INSERT, UPDATE, DELETE')
          AND pg_catalog.has_table_privilege('cdc.prune_watermark', 'INSERT, UPDATE')) THEN
    RAISE EXCEPTION 'permission denied to re-key the entity records of table %', target
      USING ERRCODE = '42501',
            DETAIL = format('key_columns %s differ from %s, under which its entity records were written.',
                            new_key, old_key),
            HINT = 'The extension owner re-keys them: it calls cdc.register_mapping with the new key_columns (docs/security.md, "Delegating mappings").';
  END IF;
  PERFORM cdc._rekey_entities(target, old_key, new_key);
END
$fn$;
COMMENT ON FUNCTION cdc._rekey_if_needed(regclass, name[], text) IS
  'Internal (cdc.register_mapping): re-keys the entity records of target when key_columns (NULL: the primary key) differ from the key they were written under. Runs with the caller''s rights (EXECUTE for every role: it reads cdc.mapping and cdc.entities and changes nothing itself). Errors: 55000 for a history mapping or a table without a primary key, 42501 when the caller may not write the bookkeeping (a delegate of register_mapping), 23502 from cdc._rekey_entities.';

-- The one writer of cdc.mapping for register_mapping, unregister_mapping
-- and set_ordering (src/pg/mapping_write.cpp): checks the calling role
-- (EXECUTE on the function the action serves; the checks of policy
-- own_targets when row-level security of cdc.mapping applies to it), then
-- writes as the owner of cdc.mapping in a security-restricted operation.
CREATE FUNCTION cdc._write_mapping(action text, target regclass, m cdc.mapping) RETURNS cdc.mapping
LANGUAGE C
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_write_mapping';
COMMENT ON FUNCTION cdc._write_mapping(text, regclass, cdc.mapping) IS
  'Internal (cdc.register_mapping, cdc.unregister_mapping, cdc.set_ordering): writes the cdc.mapping row of target as the table''s owner, after checking the calling role: action register (insert or replace with the options of m), unregister (delete), lock (read FOR UPDATE) or ordering (set m.ordering); returns the row, or NULL when there is none the caller may write. EXECUTE to PUBLIC: it requires EXECUTE on the function the action serves (register_mapping; unregister_mapping; set_ordering for lock and ordering) and, where row-level security of cdc.mapping applies to the caller, what the policy own_targets requires (the target''s owner''s privileges, no temporary table, an outbox topic of its own), so that a delegate needs no privilege on cdc.mapping (whose UPDATE or DELETE would let it LOCK the table). Errors: 22004 NULL action or target (the message names it; or m for register and ordering), 22023 unknown action, 42501 no EXECUTE on that function or (register) on the handler of m, a row the policy refuses, or a system catalog or cdc table as target, 42809 not a table, a temporary table, an unlogged table or a partitioned table with an unlogged partition (register).';

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
  expired_policy          text    DEFAULT 'refuse',
  outbox_via              text    DEFAULT 'table')
RETURNS cdc.mapping
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  rel_schema name;
  rel_name   name;
  col        name;
  key_names  name[];
  other_key  text;
  result     cdc.mapping;
  fn         pg_proc;
  meta       record;
  other      regclass;
BEGIN
  IF target IS NULL THEN
    RAISE EXCEPTION 'target must not be NULL' USING ERRCODE = '22004';
  END IF;
  -- the options whose default is not NULL: a NULL was refused as a bad value
  -- (22023; unavailable_placeholder as empty), outbox as 'true or false'
  IF outbox IS NULL OR truncate_policy IS NULL OR unavailable_placeholder IS NULL OR source_epoch IS NULL
     OR conflict_policy IS NULL OR mode IS NULL OR expired_policy IS NULL OR outbox_via IS NULL THEN
    RAISE EXCEPTION '% must not be NULL',
      CASE WHEN outbox IS NULL THEN 'outbox' WHEN truncate_policy IS NULL THEN 'truncate_policy'
           WHEN unavailable_placeholder IS NULL THEN 'unavailable_placeholder' WHEN source_epoch IS NULL THEN 'source_epoch'
           WHEN conflict_policy IS NULL THEN 'conflict_policy' WHEN mode IS NULL THEN 'mode'
           WHEN expired_policy IS NULL THEN 'expired_policy' ELSE 'outbox_via' END
      USING ERRCODE = '22004';
  END IF;
  SELECT n.nspname, c.relname INTO rel_schema, rel_name
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.oid = target AND c.relkind IN ('r', 'p');
  -- OID 0 or a dropped table's OID: 42P01, as cdc_apply() and cdc.audit say it (it was 'target - is not a table', review h3)
  IF NOT FOUND AND NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = target) THEN
    RAISE EXCEPTION 'target relation with OID % does not exist', target::oid USING ERRCODE = '42P01';
  ELSIF NOT FOUND THEN
    RAISE EXCEPTION 'target % is not a table', target USING ERRCODE = '42809';
  END IF;
  IF (SELECT relpersistence FROM pg_class WHERE oid = target) = 't' THEN
    RAISE EXCEPTION 'target % is a temporary table', target USING ERRCODE = '42809',
      DETAIL = 'A mapping, its ledger and entity records outlive the session; the table does not.';
  END IF;
  -- a crash empties an unlogged table or partition and keeps its ledger: the engine refuses it too (review h4)
  IF (SELECT relpersistence FROM pg_class WHERE oid = target) = 'u'
     OR EXISTS (SELECT FROM pg_partition_tree(target) t JOIN pg_class c ON c.oid = t.relid WHERE c.relpersistence = 'u') THEN
    RAISE EXCEPTION 'target % is or has an unlogged table', target USING ERRCODE = '42809',
      DETAIL = 'A crash empties an unlogged table, while the ledger entries and entity records of its rows stay: their redeliveries would be duplicates and the rows would never come back.',
      HINT = 'ALTER TABLE ... SET LOGGED, or map a permanent table.';
  END IF;
  IF EXISTS (SELECT FROM pg_rewrite WHERE ev_class = target) THEN
    RAISE EXCEPTION 'target % has rewrite rules', target USING ERRCODE = '0A000',
      DETAIL = 'cdc_apply writes a target''s rows both through the executor, which fires no rules (as PostgreSQL''s logical replication apply does not), and through SQL statements, which do: its rows would not be what the outcomes say.',
      HINT = 'Drop the table''s rules (DROP RULE ... ON ' || target::text || '; \d lists them), or do their work in a trigger (ENABLE ALWAYS to fire under the worker too).';
  END IF;
  -- as the engine refuses such targets when it applies (docs/security.md, "Targets"), superusers too
  IF rel_schema IN ('pg_catalog', 'cdc') OR rel_schema LIKE 'pg\_toast%' THEN
    RAISE EXCEPTION 'table % cannot be a target: it is a system catalog or a table of cdc_apply itself', target
      USING ERRCODE = '42501', HINT = 'Map the source table to a table of your own schema.';
  END IF;
  IF NOT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = target), 'USAGE') THEN
    RAISE EXCEPTION 'must be owner of table % to register a mapping for it', target USING ERRCODE = '42501';
  END IF;
  -- a NULL element names no column: it was reported as an unknown column "<NULL>" (42703; fresh-user review h3)
  IF EXISTS (SELECT 1 FROM unnest(key_columns) k WHERE k IS NULL) THEN
    RAISE EXCEPTION 'key_columns must not contain NULL' USING ERRCODE = '22004';
  END IF;
  -- a column named twice: it was reported as 'no unique index on exactly (id, id)' (42P10; fresh-user review h3)
  SELECT u.k INTO col FROM unnest(key_columns) WITH ORDINALITY u(k, n) GROUP BY u.k HAVING count(*) > 1 ORDER BY min(u.n) LIMIT 1;
  IF col IS NOT NULL THEN
    RAISE EXCEPTION 'key_columns names column "%" more than once', col USING ERRCODE = '42701';
  END IF;
  FOREACH col IN ARRAY coalesce(key_columns, '{}'::name[]) || array_remove(ARRAY[version_column], NULL) LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = target AND attname = col AND attnum > 0 AND NOT attisdropped) THEN
      RAISE EXCEPTION 'column "%" does not exist in table %', col, target USING ERRCODE = '42703';
    END IF;
  END LOOP;
  IF key_columns IS NOT NULL AND cardinality(key_columns) = 0 THEN
    RAISE EXCEPTION 'key_columns must not be empty' USING ERRCODE = '22023';
  END IF;
  -- the engine would read {{a},{b}} as (a, b), but cdc.entities failed on it (fresh-user run)
  IF array_ndims(key_columns) > 1 THEN
    RAISE EXCEPTION 'key_columns must be a one-dimensional array, not % dimensions', array_ndims(key_columns)
      USING ERRCODE = '2202E';
  END IF;
  -- Stored entity versions are in the old basis (source positions or the old
  -- column): compared with versions of the new one, every later change
  -- would be judged stale for good.
  IF (SELECT m.version_column FROM cdc.mapping m WHERE m.target = register_mapping.target)
       IS DISTINCT FROM register_mapping.version_column
     AND EXISTS (SELECT 1 FROM cdc.entities e WHERE e.target = register_mapping.target) THEN
    RAISE EXCEPTION 'cannot change how changes of table % are ordered (version_column) while it has entity records', target
      USING ERRCODE = '55000',
            HINT = 'Keep the version_column it was registered with, or unregister the mapping, empty the table and remove its cdc.entity_state rows first.';
  END IF;
  IF expired_policy NOT IN ('refuse', 'apply', 'dead_letter') THEN
    RAISE EXCEPTION 'expired_policy must be ''refuse'', ''apply'' or ''dead_letter'', not %',
                    quote_literal(expired_policy)
      USING ERRCODE = '22023';
  END IF;
  IF outbox_via NOT IN ('table', 'message') THEN
    RAISE EXCEPTION 'outbox_via must be ''table'' or ''message'', not %', quote_literal(outbox_via)
      USING ERRCODE = '22023';
  END IF;
  IF outbox AND outbox_via = 'message' AND current_setting('wal_level') <> 'logical' THEN
    RAISE EXCEPTION 'outbox_via ''message'' needs wal_level = logical on this server (it is %)', current_setting('wal_level')
      USING ERRCODE = '55000',
            HINT = 'Set wal_level = logical and restart, or use outbox_via => ''table''.';
  END IF;
  -- A relay cannot tell who wrote a cdc_outbox message: while every role may
  -- call pg_logical_emit_message(), every role could forge outbox entries
  -- (sql/outbox_message_forged.sql; the engine checks again before it writes
  -- one, docs/security.md, "The outbox as messages").
  IF outbox AND outbox_via = 'message'
     AND (pg_catalog.has_function_privilege('public', 'pg_catalog.pg_logical_emit_message(boolean, text, text)', 'EXECUTE')
          OR pg_catalog.has_function_privilege('public', 'pg_catalog.pg_logical_emit_message(boolean, text, bytea)', 'EXECUTE')) THEN
    RAISE EXCEPTION 'outbox_via ''message'' needs pg_logical_emit_message() revoked from PUBLIC: any role could otherwise write cdc_outbox messages that a relay cannot tell from the outbox''s'
      USING ERRCODE = '55000',
            HINT = 'REVOKE EXECUTE ON FUNCTION pg_catalog.pg_logical_emit_message(boolean, text, text), pg_catalog.pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC; (as a superuser), or use outbox_via => ''table''.';
  END IF;
  IF mode NOT IN ('state', 'history', 'handler') THEN
    RAISE EXCEPTION 'mode must be ''state'', ''history'' or ''handler'', not %', quote_literal(mode)
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
  IF mode <> 'history' AND key_columns IS NULL AND NOT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = target AND indisprimary AND indimmediate) THEN
    IF EXISTS (SELECT 1 FROM pg_index WHERE indrelid = target AND indisprimary) THEN
      RAISE EXCEPTION 'table % has a deferrable primary key', target
        USING ERRCODE = '42P10',
              DETAIL = 'Conflicts are decided by an immediate unique index (as INSERT ... ON CONFLICT requires).',
              HINT = 'Make the primary key NOT DEFERRABLE, or pass key_columns backed by a non-deferrable unique index.';
    END IF;
    RAISE EXCEPTION 'table % has no primary key', target
      USING ERRCODE = '42P10', HINT = 'Add a primary key or pass key_columns backed by a unique index.';
  END IF;
  -- Entity records name an entity by its key's text: under a nondeterministic
  -- collation 'abc' and 'ABC' are one row with two texts, so a delete of one
  -- would not stop a late change of the other.  The engine refuses such a
  -- key at every change (a collation changed after registration); refused
  -- here first, with the engine's message (found by a review: the mapping
  -- was accepted and every event then failed).
  -- The key's columns: key_columns, else the primary key's, in column order.
  key_names := ARRAY(SELECT a.attname FROM pg_attribute a
                      WHERE a.attrelid = target AND NOT a.attisdropped
                        AND CASE WHEN key_columns IS NOT NULL THEN a.attname = ANY (key_columns)
                                 ELSE EXISTS (SELECT 1 FROM pg_index i
                                               WHERE i.indrelid = target AND i.indisprimary
                                                 AND a.attnum = ANY (i.indkey::int2[])) END
                      ORDER BY a.attnum);
  SELECT a.attname INTO col FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
   WHERE a.attrelid = target AND NOT c.collisdeterministic AND a.attname = ANY (key_names)
   ORDER BY a.attnum LIMIT 1;
  IF col IS NOT NULL THEN
    RAISE EXCEPTION 'key column "%" of table % has a nondeterministic collation: equal keys can differ in text, which entity records cannot tell apart',
                    col, target
      USING ERRCODE = '0A000',
            HINT = 'Give the key column a deterministic collation (ALTER TABLE ... ALTER COLUMN ... TYPE ... COLLATE "C"), or key the mapping by other columns (key_columns).';
  END IF;
  -- The destination computes a generated column and the engine never writes
  -- one, so an event cannot name a row by it: the engine refuses such a key
  -- at every change (found by a fresh-user run: the mapping was accepted and
  -- every change failed with 'field "after.g" is missing').
  SELECT a.attname INTO col FROM pg_attribute a
   WHERE a.attrelid = target AND a.attgenerated <> '' AND a.attname = ANY (key_names)
   ORDER BY a.attnum LIMIT 1;
  IF col IS NOT NULL THEN
    RAISE EXCEPTION 'key column "%" of table % is a generated column: the destination computes it, so an event cannot name a row by it',
                    col, target
      USING ERRCODE = '0A000',
            HINT = 'Key the mapping by other columns backed by a unique index (key_columns), or make the column an ordinary one (ALTER TABLE ... ALTER COLUMN ... DROP EXPRESSION).';
  END IF;
  -- A key whose equal values can print different texts (citext, jsonb, a
  -- case-insensitive unique index ...): the engine refuses its changes while
  -- the target is entity-ordered, as it is once registered; a stream-ordered
  -- target keeps no entity records and may have it (cdc.set_ordering).
  other_key := cdc._key_ambiguity(target, key_columns);
  IF other_key IS NOT NULL THEN
    RAISE WARNING '%', other_key
      USING DETAIL = 'Changes of this table will be refused (0A000) while it is entity-ordered: entity records name an entity by its key''s text, and two texts of one row would be two entities.',
            HINT = 'Key the mapping by columns whose equal values print alike (for example a text column the source fills with lower(email), with a unique index, as key_columns; not a generated column, which cannot be a key); a subscription''s target may instead be stream-ordered (cdc.set_ordering), which keeps no entity records.';
  END IF;
  IF version_column IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                      WHERE a.attrelid = target AND a.attname = version_column
                        AND (CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END)
                            IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'date'::regtype,
                                'timestamp'::regtype, 'timestamptz'::regtype)) THEN
    RAISE EXCEPTION 'version column "%" must be smallint, integer, bigint, date, timestamp or timestamptz', version_column
      USING ERRCODE = '42804';
  END IF;
  -- computed by the destination and never written, like a generated key column
  IF version_column IS NOT NULL AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = target
                      AND a.attname = version_column AND a.attgenerated <> '' AND NOT a.attisdropped) THEN
    RAISE EXCEPTION 'version column "%" of table % is a generated column: the destination computes it, so an event cannot order changes by it',
                    version_column, target
      USING ERRCODE = '0A000',
            HINT = 'Register the mapping without version_column (changes are then ordered by their source position), or make the column an ordinary one (ALTER TABLE ... ALTER COLUMN ... DROP EXPRESSION).';
  END IF;
  IF truncate_policy NOT IN ('truncate', 'ignore') THEN
    RAISE EXCEPTION 'truncate_policy must be ''truncate'' or ''ignore'', not %', quote_literal(truncate_policy)
      USING ERRCODE = '22023';
  END IF;
  IF temporal_unit IS NOT NULL AND temporal_unit NOT IN ('milli', 'micro', 'nano') THEN
    RAISE EXCEPTION 'temporal_unit must be ''milli'', ''micro'' or ''nano'', not %', quote_literal(temporal_unit)
      USING ERRCODE = '22023';
  END IF;
  IF conflict_policy NOT IN ('record', 'error') THEN
    RAISE EXCEPTION 'conflict_policy must be ''record'' or ''error'', not %', quote_literal(conflict_policy)
      USING ERRCODE = '22023';
  END IF;
  IF unavailable_placeholder = '' THEN
    RAISE EXCEPTION 'unavailable_placeholder must not be empty' USING ERRCODE = '22023';
  END IF;
  -- an empty name matches no event and no topic a consumer would read (found by a fresh-user run)
  IF source_name = '' THEN
    RAISE EXCEPTION 'source_name must not be empty' USING ERRCODE = '22023',
      HINT = 'Pass the connector''s source.name (topic.prefix), or NULL to accept any source.';
  END IF;
  IF source_table = '' THEN
    RAISE EXCEPTION 'source_table must not be empty' USING ERRCODE = '22023',
      HINT = 'Pass the source.table of the events, or NULL for the target''s own name.';
  END IF;
  IF source_schema = '' THEN
    RAISE EXCEPTION 'source_schema must not be empty' USING ERRCODE = '22023',
      HINT = 'Pass the source.schema of the events, or NULL for the target''s own schema.';
  END IF;
  IF outbox_topic = '' THEN
    RAISE EXCEPTION 'outbox_topic must not be empty' USING ERRCODE = '22023',
      HINT = 'Pass a topic name, or NULL for the target''s qualified name.';
  END IF;
  -- The byte limits of the envelope's source fields (core/envelope.hpp,
  -- docs/sql-reference.md "Limits"): a longer name matches no event, and the
  -- names and the topic are keys of btree indexes (cdc.mapping's and
  -- cdc.outbox_source's), whose entries hold at most 2,704 bytes.
  IF octet_length(source_name) > 1024 THEN
    RAISE EXCEPTION 'source_name is % bytes long, more than the 1024 allowed', octet_length(source_name)
      USING ERRCODE = '22023', HINT = 'An event''s source.name longer than 1024 bytes is refused (docs/sql-reference.md, "Limits").';
  END IF;
  IF octet_length(source_schema) > 255 OR octet_length(source_table) > 255 THEN
    RAISE EXCEPTION '% is % bytes long, more than the 255 allowed',
      CASE WHEN octet_length(source_schema) > 255 THEN 'source_schema' ELSE 'source_table' END,
      greatest(octet_length(source_schema), octet_length(source_table))
      USING ERRCODE = '22023', HINT = 'An event''s source.schema or source.table longer than 255 bytes is refused (docs/sql-reference.md, "Limits").';
  END IF;
  IF octet_length(outbox_topic) > 512 THEN
    RAISE EXCEPTION 'outbox_topic is % bytes long, more than the 512 allowed', octet_length(outbox_topic)
      USING ERRCODE = '22023', HINT = 'The topic is a key of cdc.outbox_source''s index with the source identity (docs/sql-reference.md, "Limits").';
  END IF;
  IF source_epoch < 0 OR source_epoch > 2147483647 THEN
    RAISE EXCEPTION 'source_epoch must be an integer from 0 to 2147483647' USING ERRCODE = '22023';
  END IF;
  -- A delegate (docs/security.md, "Delegating mappings"; policy own_targets):
  -- its outbox topic is recorded, so that a rename of its table cannot move
  -- it, and may not be another owner's (review helper; sql/outbox_topic_delegate.sql).
  IF outbox AND pg_catalog.row_security_active('cdc.mapping') THEN
    outbox_topic := coalesce(outbox_topic, rel_schema OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) rel_name);
    IF cdc._outbox_topic_taken(outbox_topic, target) THEN
      RAISE EXCEPTION 'outbox_topic "%" is the topic of another owner''s table', outbox_topic
        USING ERRCODE = '42501',
              HINT = 'Name a topic of your own: a delegate''s outbox rows may not join another owner''s topic (docs/security.md, "Delegating mappings").';
    END IF;
  END IF;

  -- a source table maps to one target (mapping_source_idx): say which one holds it
  SELECT mp.target INTO other FROM cdc.mapping mp
   WHERE coalesce(mp.source_name, '') OPERATOR(pg_catalog.=) coalesce(register_mapping.source_name, '')
     AND mp.source_schema OPERATOR(pg_catalog.=) coalesce(register_mapping.source_schema, rel_schema)
     AND mp.source_table OPERATOR(pg_catalog.=) coalesce(register_mapping.source_table, rel_name)
     AND mp.target OPERATOR(pg_catalog.<>) register_mapping.target;
  IF other IS NOT NULL THEN
    RAISE EXCEPTION 'source table %.% of source % is already mapped to table %',
                    quote_ident(coalesce(register_mapping.source_schema, rel_schema)), quote_ident(coalesce(register_mapping.source_table, rel_name)),
                    coalesce(quote_literal(register_mapping.source_name), '(any)'), other
      USING ERRCODE = '23505',
            HINT = 'A source table maps to one target: unregister the other mapping (cdc.unregister_mapping), or map another source table.';
  END IF;
  -- A partition and its partitioned ancestor both mapped would give one row
  -- two entity records (fresh-user review; the engine also refuses such a
  -- pair at apply time, for trees joined by a later ATTACH PARTITION).
  SELECT mp.target INTO other FROM cdc.mapping mp
   WHERE mp.target OPERATOR(pg_catalog.<>) register_mapping.target
     AND (mp.target IN (SELECT a.relid FROM pg_catalog.pg_partition_ancestors(register_mapping.target) a)
          OR mp.target IN (SELECT t.relid FROM pg_catalog.pg_partition_tree(register_mapping.target) t))
   LIMIT 1;
  IF other IS NOT NULL THEN
    RAISE EXCEPTION 'table % and table % are in one partition tree: only one of them can be a target', target, other
      USING ERRCODE = '23505',
            DETAIL = pg_catalog.format('%s is already mapped. A row of a partition is also a row of its partitioned ancestors: mapped twice, it would have two entity records, and a stale change through one mapping could overwrite a newer one applied through the other, or bring a deleted row back.', other),
            HINT = 'Map either the partitioned table (changes of every partition go through it) or its partitions, not both: unregister the other mapping (cdc.unregister_mapping).';
  END IF;

  PERFORM cdc._rekey_if_needed(target, key_columns, mode);
  -- written as the owner of cdc.mapping after the checks of policy own_targets
  -- against the caller (cdc._write_mapping): a delegate needs EXECUTE only
  result.source_name := source_name;
  result.source_schema := coalesce(source_schema, rel_schema);
  result.source_table := coalesce(source_table, rel_name);
  result.key_columns := key_columns;
  result.version_column := version_column;
  result.source_epoch := source_epoch;
  result.outbox := outbox;
  result.outbox_topic := outbox_topic;
  result.truncate_policy := truncate_policy;
  result.unavailable_placeholder := unavailable_placeholder;
  result.temporal_unit := temporal_unit;
  result.conflict_policy := conflict_policy;
  result.mode := mode;
  result.handler := handler;
  result.expired_policy := expired_policy;
  result.outbox_via := outbox_via;
  result := cdc._write_mapping('register', target, result);
  RETURN result;
END
$fn$;
COMMENT ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text, bigint, text, text, text, regprocedure, text, text) IS
  'Registers (or replaces) the mapping of a source table to target. source_schema/source_table default to the target''s own names. mode: state (default), history (target is a history table: key_columns required, cdc_key/cdc_version/cdc_op columns and a unique index on (cdc_key, cdc_version)) or handler (handler(op text, old T, new T, meta jsonb) called per applied change). expired_policy: refuse (default), dead_letter or apply, for changes the pruned records cannot prove new or old (docs/retention.md). outbox_via: table (default: cdc.outbox rows) or message (transactional logical decoding messages with prefix cdc_outbox; needs wal_level = logical). Errors: 55000 outbox_via message without wal_level = logical, or while PUBLIC may execute pg_logical_emit_message(), 42809 not a table, a temporary table or an unlogged table or partition, 0A000 a table with rewrite rules (CREATE RULE), 42501 not the owner (or a system catalog or a table of the cdc schema, for superusers too; for a delegate, an outbox_topic, or the default schema.table, that is another owner''s topic: a delegate''s topic is recorded, not left NULL), 42703 unknown column, 42P10 no primary key / no unique index on key_columns / history table shape, 42804 bad version or metadata column type, 42P13 bad handler signature, 42501 a handler the caller may not execute (as CREATE TRIGGER requires EXECUTE on its function), 0A000 a key column with a nondeterministic collation, or a generated key or version column, 2202E key_columns of more than one dimension, 42P01 target names no relation (OID 0, a dropped table), 22004 NULL target, a NULL element of key_columns, or NULL for an option whose default is not NULL (outbox, truncate_policy, unavailable_placeholder, source_epoch, conflict_policy, mode, expired_policy, outbox_via; the others take NULL as their default), 42701 a column named twice in key_columns, 22023 bad option value (also an empty source_name, source_table or outbox_topic, or one longer than the limit of events: source_name 1024 bytes, source_schema and source_table 255, outbox_topic 512), 23505 the source table is mapped to another target, or target and a mapped table are in one partition tree (a partition and a partitioned ancestor: one row would have two entity records). Writes cdc.mapping through cdc._write_mapping (as the table''s owner, after checking the caller as the policy own_targets does): EXECUTE on this function is all a delegate needs. Returns the cdc.mapping row.';

CREATE TABLE cdc.source_renames (
  id         bigserial PRIMARY KEY,
  old_name   text NOT NULL,
  new_name   text NOT NULL,
  merged     boolean NOT NULL,
  renamed_by name NOT NULL DEFAULT current_user,
  renamed_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE cdc.source_renames IS 'Every cdc.rename_source() call: a source (Debezium source.name / topic.prefix) declared the same as before under a new name.';
COMMENT ON COLUMN cdc.source_renames.id IS 'Order of the renames.';
COMMENT ON COLUMN cdc.source_renames.old_name IS 'The name the entity records had.';
COMMENT ON COLUMN cdc.source_renames.new_name IS 'The name they have now.';
COMMENT ON COLUMN cdc.source_renames.merged IS 'True when events under the new name had already created records of their own, which were merged in.';
COMMENT ON COLUMN cdc.source_renames.renamed_by IS 'Role that renamed it.';
COMMENT ON COLUMN cdc.source_renames.renamed_at IS 'When.';

-- A Debezium connector whose source.name (topic.prefix) changes is the same
-- source with the same LSN space: its entity records, tombstones, prune
-- watermarks and truncate barriers are carried over to the new name, so
-- that later changes of existing rows are ordered against them instead of
-- being conflicts (docs/semantics.md, "Renaming a source").
-- SECURITY DEFINER (review h3): a role granted EXECUTE needs no privilege
-- on the tables it rewrites.  As the caller it needed UPDATE or DELETE on
-- each table it locks below (and on cdc.mapping and more), with which it
-- could LOCK them in any mode at any time; and where the policy own_targets
-- applied to it, its UPDATE of cdc.mapping moved only the mappings of its
-- own tables to the new name, leaving other mappings restricted to a name
-- that no longer comes (their events refused).  The lock it takes itself
-- is held until the caller's transaction ends: EXECUTE is for
-- administrators (revoked from PUBLIC).
CREATE FUNCTION cdc.rename_source(old_name text, new_name text) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  old_id integer;
  new_id integer;
  dup    record;
BEGIN
  IF old_name IS NULL OR new_name IS NULL THEN
    RAISE EXCEPTION '% must not be NULL', CASE WHEN old_name IS NULL THEN 'old_name' ELSE 'new_name' END
      USING ERRCODE = '22004';
  END IF;
  IF new_name = '' THEN
    RAISE EXCEPTION 'new_name must not be empty' USING ERRCODE = '22023';
  END IF;
  IF octet_length(new_name) > 1024 THEN
    RAISE EXCEPTION 'new_name is % bytes long, more than the 1024 allowed', octet_length(new_name)
      USING ERRCODE = '22023', HINT = 'An event''s source.name longer than 1024 bytes is refused (docs/sql-reference.md, "Limits").';
  END IF;
  IF old_name = new_name THEN
    RAISE EXCEPTION 'source "%" already has that name', old_name USING ERRCODE = '22023';
  END IF;
  IF old_name LIKE 'pg:%' OR new_name LIKE 'pg:%' THEN
    RAISE EXCEPTION 'source "%" belongs to the background worker', CASE WHEN old_name LIKE 'pg:%' THEN old_name ELSE new_name END
      USING ERRCODE = '22023',
            DETAIL = 'Worker sources are named after the source cluster''s system identifier, which a failover to a physical standby keeps.';
  END IF;
  -- No applier may hold or take a source id while the records move: every
  -- apply writes cdc.entity_state (ROW EXCLUSIVE), which this lock waits
  -- for and then blocks until the commit.
  LOCK TABLE cdc.entity_state, cdc.source, cdc.prune_watermark, cdc.table_barrier, cdc.stream_mark IN EXCLUSIVE MODE;
  SELECT id INTO old_id FROM cdc.source WHERE name = old_name;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'source "%" is not known', old_name USING ERRCODE = '42704',
      HINT = 'cdc.entities shows the source names of the stored records.';
  END IF;
  -- Every mapping restricted to old_name follows the rename: one whose
  -- source table new_name has a mapping of too would make two mappings of
  -- one source table (mapping_source_idx).  Refused before anything moves.
  SELECT a.source_schema, a.source_table, a.target AS old_target, b.target AS new_target INTO dup
    FROM cdc.mapping a
    JOIN cdc.mapping b ON b.source_name = new_name AND b.source_schema = a.source_schema
                      AND b.source_table = a.source_table
   WHERE a.source_name = old_name
   ORDER BY a.source_schema, a.source_table
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'source "%" cannot be renamed to "%": source table %.% is mapped under both names (to tables % and %)',
                    old_name, new_name, dup.source_schema, dup.source_table, dup.old_target, dup.new_target
      USING ERRCODE = '23505',
            DETAIL = format('The mapping of table %s (source_name "%s") would follow the rename, and a source table maps to one target.',
                            dup.old_target, old_name),
            HINT = 'Unregister one of the two mappings (cdc.unregister_mapping), then rename.';
  END IF;
  SELECT id INTO new_id FROM cdc.source WHERE name = new_name;
  IF FOUND THEN
    -- Events under the new name arrived before the rename: the entities
    -- they created (existing ones were conflicts and are untouched) join
    -- the old records; a watermark keeps the greater version.
    UPDATE cdc.entity_state SET src = old_id WHERE src = new_id;
    INSERT INTO cdc.prune_watermark AS w (target, src, v0, v1, v2, v3, pruned_at)
    SELECT target, old_id, v0, v1, v2, v3, pruned_at FROM cdc.prune_watermark WHERE src = new_id
    ON CONFLICT (target, src) DO UPDATE
       SET v0 = EXCLUDED.v0, v1 = EXCLUDED.v1, v2 = EXCLUDED.v2, v3 = EXCLUDED.v3, pruned_at = EXCLUDED.pruned_at
     WHERE (EXCLUDED.v0, EXCLUDED.v1, EXCLUDED.v2, EXCLUDED.v3) > (w.v0, w.v1, w.v2, w.v3);
    DELETE FROM cdc.prune_watermark WHERE src = new_id;
    -- a stream mark (left by an earlier stream ordering) keeps the greater version too
    INSERT INTO cdc.stream_mark AS w (target, src, v0, v1, v2, v3, updated_s)
    SELECT target, old_id, v0, v1, v2, v3, updated_s FROM cdc.stream_mark WHERE src = new_id
    ON CONFLICT ON CONSTRAINT stream_mark_pkey DO UPDATE
       SET v0 = EXCLUDED.v0, v1 = EXCLUDED.v1, v2 = EXCLUDED.v2, v3 = EXCLUDED.v3, updated_s = EXCLUDED.updated_s
     WHERE (EXCLUDED.v0, EXCLUDED.v1, EXCLUDED.v2, EXCLUDED.v3) > (w.v0, w.v1, w.v2, w.v3);
    DELETE FROM cdc.stream_mark WHERE src = new_id;
    DELETE FROM cdc.source WHERE id = new_id;
  END IF;
  UPDATE cdc.source SET name = new_name WHERE id = old_id;
  UPDATE cdc.table_barrier SET source_name = new_name WHERE source_name = old_name;
  -- a mapping restricted to the old name accepts only its events: it follows
  UPDATE cdc.mapping SET source_name = new_name WHERE source_name = old_name;
  INSERT INTO cdc.source_renames (old_name, new_name, merged) VALUES (old_name, new_name, new_id IS NOT NULL);
END
$fn$;
COMMENT ON FUNCTION cdc.rename_source(text, text) IS
  'Declares new_name (a Debezium source.name / topic.prefix that changed) the same source as old_name: entity records, tombstones, prune watermarks, stream marks, truncate barriers and the source_name of mappings of old_name are carried over (records that events under new_name already created are merged in), so later changes of existing rows are ordered against them instead of being conflicts. Events still arriving under old_name afterwards count as another source (conflict). Recorded in cdc.source_renames. Waits for concurrent appliers, and holds them (EXCLUSIVE lock on cdc.entity_state, cdc.source, cdc.prune_watermark, cdc.table_barrier and cdc.stream_mark) until the caller''s transaction ends. SECURITY DEFINER, EXECUTE revoked from PUBLIC: a role granted EXECUTE needs no privilege on those tables, and every mapping of old_name follows, whoever owns its table. Errors: 42704 unknown old_name, 22004 a NULL name, 22023 an empty new_name or equal names, a new_name longer than 1024 bytes (the limit of source.name) or a worker source (pg:...), 23505 a source table mapped under both names (its mapping of old_name would follow onto new_name: a source table maps to one target; nothing is renamed).';

-- Folds a stream-ordered target's entity records into its stream mark.
-- Runs as the extension owner (the records and marks are its tables), but
-- only for a target whose mapping is stream-ordered (cdc.set_ordering
-- switched it, under the caller's rights and the mapping's row-level
-- security) and only for a session whose login role may act as the
-- target's owner: its upsert locks the target's cdc.stream_mark rows, and
-- any role calling it in an open transaction held them, stalling the
-- subscription's worker.  It never changes the ordering of a target itself.
CREATE FUNCTION cdc._fold_into_stream_mark(target regclass) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  nsrc bigint;
BEGIN
  -- SECURITY DEFINER: current_user is the extension owner here; the session's
  -- login role is a member of the owner whenever the caller could SET ROLE
  -- to it (cdc.set_ordering checks current_user before calling)
  IF NOT pg_catalog.pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c
                                                WHERE c.oid OPERATOR(pg_catalog.=) _fold_into_stream_mark.target), 'MEMBER') THEN
    RAISE EXCEPTION 'must be owner of table % to fold its entity records', target USING ERRCODE = '42501';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM cdc.mapping mp
                  WHERE mp.target OPERATOR(pg_catalog.=) _fold_into_stream_mark.target AND mp.ordering = 'stream') THEN
    RAISE EXCEPTION 'table % is not stream-ordered', target USING ERRCODE = '55000';
  END IF;
  SELECT pg_catalog.count(DISTINCT e.src) INTO nsrc
    FROM (SELECT e.src FROM cdc.entity_state e WHERE e.target OPERATOR(pg_catalog.=) _fold_into_stream_mark.target
          UNION ALL
          SELECT w.src FROM cdc.prune_watermark w WHERE w.target OPERATOR(pg_catalog.=) _fold_into_stream_mark.target) e;
  IF nsrc > 1 THEN
    RAISE EXCEPTION 'table % cannot be stream-ordered: it has entity records or prune watermarks of % sources', target, nsrc
      USING ERRCODE = '55000',
            DETAIL = 'A stream-ordered target is written by one source only (docs/semantics.md, "Stream ordering"); cdc.entities and cdc.prune_watermark show the sources.',
            HINT = 'Keep entity ordering, or remove the other sources'' rows, records and watermarks first.';
  END IF;
  -- session_user is the session's login role, not the caller's: a table
  -- owner's code runs with a superuser's session_user in the worker, under
  -- ANALYZE and autovacuum (expression indexes) and REFRESH MATERIALIZED
  -- VIEW, as that owner.  The caller proves it may write the target by the
  -- lock cdc.set_ordering takes before calling (SHARE ROW EXCLUSIVE: LOCK
  -- TABLE needs UPDATE, DELETE or TRUNCATE; the worker never takes it)
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                  WHERE l.locktype OPERATOR(pg_catalog.=) 'relation'
                    AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d
                                                            WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                    AND l.relation OPERATOR(pg_catalog.=) _fold_into_stream_mark.target
                    AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
                    AND l.granted AND l.mode OPERATOR(pg_catalog.=) 'ShareRowExclusiveLock') THEN
    RAISE EXCEPTION 'must be owner of table % to fold its entity records', target USING ERRCODE = '42501',
      DETAIL = 'The calling transaction holds no SHARE ROW EXCLUSIVE lock on the table (cdc.set_ordering takes it).';
  END IF;
  /*
   * The records become the mark: every change of that source applied so far
   * is at or below the greatest recorded version, or the prune watermark
   * where cdc.prune() removed the newest records (tombstones).  The records
   * themselves are no longer consulted, so they go (a switch back starts
   * from the mark); the watermark stays, as entity ordering reads it.
   */
  INSERT INTO cdc.stream_mark AS w (target, src, v0, v1, v2, v3, updated_s)
  SELECT DISTINCT ON (e.src) e.target, e.src, e.v0, e.v1, e.v2, e.v3,
         pg_catalog.floor(EXTRACT(epoch FROM pg_catalog.now()) OPERATOR(pg_catalog.-) 946684800)::integer
    FROM (SELECT r.target, r.src, r.v0, r.v1, r.v2, r.v3 FROM cdc.entity_state r
           WHERE r.target OPERATOR(pg_catalog.=) _fold_into_stream_mark.target
          UNION ALL
          SELECT p.target, p.src, p.v0, p.v1, p.v2, p.v3 FROM cdc.prune_watermark p
           WHERE p.target OPERATOR(pg_catalog.=) _fold_into_stream_mark.target) e
   ORDER BY e.src, e.v0 DESC, e.v1 DESC, e.v2 DESC, e.v3 DESC
  ON CONFLICT ON CONSTRAINT stream_mark_pkey DO UPDATE
     SET v0 = EXCLUDED.v0, v1 = EXCLUDED.v1, v2 = EXCLUDED.v2, v3 = EXCLUDED.v3, updated_s = EXCLUDED.updated_s
   WHERE ROW(w.v0, w.v1, w.v2, w.v3) OPERATOR(pg_catalog.<) ROW(EXCLUDED.v0, EXCLUDED.v1, EXCLUDED.v2, EXCLUDED.v3);
  DELETE FROM cdc.entity_state e WHERE e.target OPERATOR(pg_catalog.=) _fold_into_stream_mark.target;
END
$fn$;
COMMENT ON FUNCTION cdc._fold_into_stream_mark(regclass) IS
  'Internal (cdc.set_ordering): folds the entity records of a target whose mapping is stream-ordered into its cdc.stream_mark row and removes them. Errors: 42501 when the session''s login role (session_user) is not a member of the target''s owner, 55000 when the target is not stream-ordered or has records of several sources. EXECUTE is granted to PUBLIC so that cdc.set_ordering can call it with its caller''s rights; it acts only on stream-ordered targets of owners the session may act as (it locks their cdc.stream_mark rows).';

CREATE FUNCTION cdc.set_ordering(target regclass, ordering text) RETURNS cdc.mapping
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  m      cdc.mapping;
  result cdc.mapping;
BEGIN
  IF target IS NULL OR ordering IS NULL THEN
    RAISE EXCEPTION '% must not be NULL', CASE WHEN target IS NULL THEN 'target' ELSE 'ordering' END USING ERRCODE = '22004';
  END IF;
  IF ordering NOT IN ('entity', 'stream') THEN
    RAISE EXCEPTION 'ordering must be ''entity'' or ''stream'', not %', quote_literal(ordering)
      USING ERRCODE = '22023';
  END IF;
  -- OID 0 ('-') or a dropped table's OID: the LOCK below was a syntax error (review h3)
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) target) THEN
    RAISE EXCEPTION 'target relation with OID % does not exist', target::pg_catalog.oid USING ERRCODE = '42P01';
  END IF;
  IF NOT pg_catalog.pg_has_role(current_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) target), 'USAGE') THEN
    RAISE EXCEPTION 'must be owner of table % to change its ordering', target USING ERRCODE = '42501';
  END IF;
  /*
   * Every applying transaction holds ROW EXCLUSIVE on its target until it
   * commits: waiting for SHARE ROW EXCLUSIVE means no change is being applied
   * under the old ordering while the state is converted, and changes applied
   * afterwards see the new mapping (its invalidation reaches every backend).
   */
  EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', target);
  -- read and written as the owner of cdc.mapping after the checks of policy
  -- own_targets against the caller (cdc._write_mapping): EXECUTE suffices
  m := cdc._write_mapping('lock', target, NULL);
  IF m.target IS NULL THEN
    RAISE EXCEPTION 'table % has no mapping', target USING ERRCODE = '42704',
      HINT = 'Register it with cdc.register_mapping() first.';
  END IF;
  IF m.ordering = set_ordering.ordering THEN
    RETURN m;
  END IF;
  IF set_ordering.ordering = 'stream' AND m.version_column IS NOT NULL THEN
    RAISE EXCEPTION 'table % cannot be stream-ordered: its mapping orders changes by version_column', target
      USING ERRCODE = '55000',
            HINT = 'Stream ordering compares source positions; register the mapping without version_column first.';
  END IF;
  IF set_ordering.ordering = 'stream' THEN
    DECLARE sub_a text; sub_b text;
    BEGIN
      SELECT c.subscription_a, c.subscription_b INTO sub_a, sub_b FROM cdc._stream_scope_conflict(target, NULL) c;
      IF FOUND THEN
        RAISE EXCEPTION 'table % cannot be stream-ordered: subscriptions "%" and "%" both feed it with different publications', target, sub_a, sub_b
          USING ERRCODE = '55000',
                DETAIL = 'Its one stream mark per source orders the changes of several subscriptions only when they receive the same changes; otherwise a change one of them delivers late counts as a duplicate (docs/semantics.md, "Stream ordering").',
                HINT = 'Use one subscription per stream-ordered target, or the same publications for all of them, or keep entity ordering.';
      END IF;
    END;
  END IF;
  m.ordering := set_ordering.ordering;
  result := cdc._write_mapping('ordering', target, m);
  IF set_ordering.ordering = 'stream' THEN
    PERFORM cdc._fold_into_stream_mark(target);
  END IF;
  RETURN result;
END
$fn$;
COMMENT ON FUNCTION cdc.set_ordering(regclass, text) IS
  'Switches how the changes of a mapped target are ordered (docs/semantics.md, "Stream ordering"). ''stream'': only the worker of a subscription may write the target and a per-(target, source) high-water mark (cdc.stream_mark) replaces the ledger rows and entity records; the target''s entity records are folded into the mark and removed. ''entity'': per-entity records again; the mark stays as the implicit record of every key without one (a change at or below it is a duplicate). Waits for transactions applying to the target (SHARE ROW EXCLUSIVE lock), so it is safe under load. Writes cdc.mapping through cdc._write_mapping (as the table''s owner, after checking the caller as the policy own_targets does): EXECUTE on this function is all a delegate needs. Returns the cdc.mapping row. Errors: 22004 NULL target or ordering, 22023 bad ordering, 42P01 target names no relation (OID 0, a dropped table), 42501 not the owner (or, for a delegate, a mapping with an outbox whose outbox_topic is NULL or another owner''s), 42704 no mapping, 55000 version_column mapping, records of several sources, or (''stream'') two subscriptions of one source feeding it with different publications.';

CREATE FUNCTION cdc.unregister_mapping(target regclass) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT true FROM cdc._write_mapping('unregister', unregister_mapping.target, NULL) w WHERE w.target IS NOT NULL $$;
COMMENT ON FUNCTION cdc.unregister_mapping(regclass) IS
  'Removes the mapping of a target table. Its versions, tombstones and ledger rows are kept. Returns true when a mapping was removed, NULL otherwise (also for the mapping of a table whose owner''s privileges a delegate lacks). Deletes through cdc._write_mapping (as the table''s owner, after checking the caller as the policy own_targets does): EXECUTE on this function is all a delegate needs. Errors: 22004 NULL target, 42501 from cdc._write_mapping when the caller may not execute it.';

-- A dropped target takes its mapping and per-entity state with it: otherwise
-- the mapping row would name a missing table, and a later table that reused
-- the OID would inherit versions, tombstones and barriers that are not its
-- own.  Ledger rows stay until the replay horizon (a hit is re-checked
-- against the version state), outbox rows stay for the relay.
CREATE FUNCTION cdc._drop_target_state() RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  dropped oid[];
  affected integer[];
  sub integer;
  handler_fn text;
  handler_of text;
BEGIN
  -- DROP EXTENSION drops cdc's own tables too: nothing to clean up then
  IF to_regclass('cdc.mapping') IS NULL THEN
    RETURN;
  END IF;
  SELECT array_agg(d.objid) INTO dropped
    FROM pg_event_trigger_dropped_objects() d
   WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0 AND d.object_type IN ('table', 'partitioned table');
  -- A mapping's handler is a regprocedure, which records no dependency: a
  -- dropped handler left its mapping naming a dropped OID, which prints as
  -- a bare number, and pg_dump dumps it so: a restore read it back as
  -- whatever function has that OID in the new cluster, and the engine
  -- called that one for every change of the table (security review h2,
  -- sql/handler_drop_guard.sql).  Refused as a dependency would be, unless
  -- the mapping goes in the same statement (its table is dropped too).
  SELECT d.object_identity, m.target::text INTO handler_fn, handler_of
    FROM pg_event_trigger_dropped_objects() d
    JOIN cdc.mapping m ON m.handler::oid = d.objid
   WHERE d.classid = 'pg_proc'::regclass AND NOT (m.target::oid = ANY (coalesce(dropped, '{}')))
   ORDER BY m.target::oid LIMIT 1;
  IF handler_of IS NOT NULL THEN
    RAISE EXCEPTION 'cannot drop function %: it is the handler of the mapping of table %', handler_fn, handler_of
      USING ERRCODE = '2BP01',
      HINT = 'Register the mapping with another handler (cdc.register_mapping), or unregister it (cdc.unregister_mapping), first.';
  END IF;
  IF dropped IS NULL THEN
    RETURN;
  END IF;
  -- A published table whose destination table is dropped leaves its
  -- subscriptions (as pg_subscription_rel rows do): its changes are no longer
  -- applied until cdc.resync_table or cdc.refresh_subscription copies it
  -- again.  The table is fed by its mapping for the subscription, else by
  -- the source table of the same schema and name.  The workers of those
  -- subscriptions restart (after this transaction: their rows stay locked).
  WITH gone AS (
      DELETE FROM cdc.subscription_rel r USING cdc.subscription s
       WHERE s.subid = r.subid
         AND (EXISTS (SELECT 1 FROM cdc.mapping m
                       WHERE m.target::oid = ANY (dropped) AND (m.source_name IS NULL OR m.source_name = s.name)
                         AND m.source_schema = r.schema_name AND m.source_table = r.table_name)
              OR EXISTS (SELECT 1 FROM pg_event_trigger_dropped_objects() d
                          WHERE d.objid = ANY (dropped) AND d.schema_name = r.schema_name AND d.object_name = r.table_name
                            AND NOT EXISTS (SELECT 1 FROM cdc.mapping m
                                             WHERE m.source_schema = r.schema_name AND m.source_table = r.table_name
                                               AND (m.source_name IS NULL OR m.source_name = s.name))))
      RETURNING r.subid)
  SELECT array_agg(DISTINCT g.subid) INTO affected FROM gone g;
  FOREACH sub IN ARRAY coalesce(affected, '{}')
  LOOP
    PERFORM 1 FROM cdc.subscription s WHERE s.subid = sub FOR UPDATE;
    BEGIN
      PERFORM cdc._stop_worker(sub);
    EXCEPTION WHEN insufficient_privilege THEN
      -- it reads its tables again at its next restart
      NULL;
    END;
  END LOOP;
  DELETE FROM cdc.mapping WHERE target::oid = ANY (dropped);
  DELETE FROM cdc.table_barrier WHERE target::oid = ANY (dropped);
  DELETE FROM cdc.entity_state WHERE target::oid = ANY (dropped);
  DELETE FROM cdc.prune_watermark WHERE target::oid = ANY (dropped);
  DELETE FROM cdc.counters WHERE target::oid = ANY (dropped);
  DELETE FROM cdc.stream_mark WHERE target::oid = ANY (dropped);
  -- Offset-range claims serve only their table (one made again has another
  -- OID); kept, they named a dropped OID, which pg_dump dumps as a bare
  -- number that a restore binds to another relation, whose batches of the
  -- same partition then came out duplicate (security review h2,
  -- sql/ledger_drop_target.sql).  The table is dropped, so no batch of it
  -- holds these rows.
  DELETE FROM cdc.ledger_range g USING cdc.ledger_partition p
   WHERE g.partition_id = p.id AND p.target::oid = ANY (dropped);
  DELETE FROM cdc.ledger_partition WHERE target::oid = ANY (dropped);
END
$fn$;
COMMENT ON FUNCTION cdc._drop_target_state() IS
  'Event trigger function (sql_drop): removes the mapping, entity records and tombstones, truncate barrier, prune watermarks, stream marks, offset-range claims (cdc.ledger_partition, cdc.ledger_range) and counters of dropped tables, and their rows in cdc.subscription_rel (restarting those subscriptions'' workers). Ledger digests and outbox rows are kept. Refuses (2BP01) the drop of a function that is the handler of a mapping whose table stays.';
CREATE EVENT TRIGGER cdc_drop_target_state ON sql_drop
  EXECUTE FUNCTION cdc._drop_target_state();
-- ALWAYS: an event trigger enabled for ORIGIN does not fire with
-- session_replication_role = replica, the setting of the apply worker's
-- session, where a table owner's trigger code may DROP its other tables:
-- their mappings (with handlers) and entity records stayed behind for a
-- later table given the same OID (review h2, sql/dangling_target_state.sql)
ALTER EVENT TRIGGER cdc_drop_target_state ENABLE ALWAYS;
COMMENT ON EVENT TRIGGER cdc_drop_target_state IS
  'Calls cdc._drop_target_state() after DROP TABLE (and DROP SCHEMA ... CASCADE, DROP OWNED) so that no state outlives its target, and no mapping its handler.';

-- DROP EXTENSION cdc_apply while the database has subscriptions is refused
-- by the module's ProcessUtility hook, which exists only when cdc_apply is
-- preloaded; without it a session that had never loaded the library
-- dropped the extension, and the slots made by create_subscription(copy_data
-- => false) stayed on the sources (review h1, TAP 119).  This event
-- trigger's C function loads the library when it fires.  ALWAYS: also
-- under session_replication_role = replica.
CREATE FUNCTION cdc._guard_extension_drop() RETURNS event_trigger
LANGUAGE C
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_guard_extension_drop';
COMMENT ON FUNCTION cdc._guard_extension_drop() IS
  'Event trigger function (ddl_command_start, DROP EXTENSION and DROP OWNED): refuses DROP EXTENSION cdc_apply, and DROP OWNED BY the role that owns it, by any role with the privileges of that owner (a superuser, the owner, a member of it) while cdc.subscription has rows (2BP01 naming them), as the module''s ProcessUtility hook does when cdc_apply is preloaded, so that no subscription''s replication slot or origin is left behind; subscriptions dropped earlier in the same transaction are not counted.';
CREATE EVENT TRIGGER cdc_guard_drop_extension ON ddl_command_start
  WHEN TAG IN ('DROP EXTENSION', 'DROP OWNED')
  EXECUTE FUNCTION cdc._guard_extension_drop();
ALTER EVENT TRIGGER cdc_guard_drop_extension ENABLE ALWAYS;
COMMENT ON EVENT TRIGGER cdc_guard_drop_extension IS
  'Calls cdc._guard_extension_drop() before DROP EXTENSION and DROP OWNED: cdc_apply is not dropped while it has subscriptions, preloaded or not.';

CREATE FUNCTION cdc.create_history_table(name text, source regclass) RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  parts text[];
  qname text;
  cols  text; why text;  -- one line: the CONTEXT line numbers of the errors below stay
BEGIN
  IF name IS NULL OR source IS NULL THEN
    RAISE EXCEPTION '% must not be NULL', CASE WHEN name IS NULL THEN 'name' ELSE 'source' END USING ERRCODE = '22004';
  END IF;
  -- OID 0 ('-') or a dropped table's OID gave no schema and no columns: the
  -- CREATE TABLE below was a syntax error (review h3)
  IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = source) THEN
    RAISE EXCEPTION 'source relation with OID % does not exist', source::oid USING ERRCODE = '42P01';
  END IF;
  IF (SELECT c.relkind FROM pg_class c WHERE c.oid = source) NOT IN ('r', 'p', 'v', 'm', 'f') THEN
    RAISE EXCEPTION 'source % is not a table, view, materialized view or foreign table', source USING ERRCODE = '42809',
      DETAIL = 'A history table records the rows of a table: its columns are the source''s.';
  END IF;
  -- parse_ident's own error was 22023 'string is not a valid identifier';
  -- a bad name is 42602 as documented (review h4)
  BEGIN
    parts := parse_ident(name);
  EXCEPTION WHEN invalid_parameter_value THEN
    GET STACKED DIAGNOSTICS why = PG_EXCEPTION_DETAIL;
    RAISE EXCEPTION 'history table name % is not a valid name', quote_literal(name) USING ERRCODE = '42602',
      DETAIL = SQLERRM || CASE WHEN why <> '' THEN '. ' || why ELSE '' END,
      HINT = 'Give table or schema.table; quote a name with upper case, spaces or dots: ''"My Table"''.';
  END;
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
  'Creates a history table for mode ''history'': the columns of source (same names and types, nullable, no defaults), then cdc_seq (identity, primary key), cdc_key, cdc_version, cdc_op, cdc_snapshot, cdc_source_ts, cdc_source, cdc_delivery_key, cdc_recorded_at and UNIQUE (cdc_key, cdc_version). name: table or schema.table (default schema: source''s). Returns the new table. Errors: 42P07 exists, 42602 bad name, 22004 NULL name or source (the message names it), 42P01 source names no relation (OID 0, a dropped table), 42809 source is not a table, view, materialized view or foreign table (an index, a sequence, a composite type).';

-- ---------------------------------------------------------------------------
-- Entry points
-- ---------------------------------------------------------------------------
CREATE FUNCTION @extschema@.cdc_apply(event jsonb, target regclass DEFAULT NULL, delivery_key text DEFAULT NULL)
RETURNS text
LANGUAGE c CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_apply_jsonb';
COMMENT ON FUNCTION @extschema@.cdc_apply(jsonb, regclass, text) IS
  'Applies one Debezium change event (value JSON: schema+payload or bare payload; NULL or JSON null = Kafka tombstone) in the caller''s transaction. target NULL: resolved from cdc.mapping by source.schema/source.table. delivery_key NULL: derived from the source identity. Returns applied, duplicate, stale, conflict or ignored. Errors (nothing is applied, the claim rolls back): 22023 bad envelope field (also a source.name longer than 1024 bytes, a source.db, source.schema or source.table longer than 255, a source.commit_lsn below source.lsn, a negative source.txId), 55000 a target in one partition tree with another mapped table (a partition and its partitioned parent or ancestor: one row would have two entity records), 22004 null key, 42P01 no mapping/target, 42P10 no usable key, 42703 unknown column, 42602 bad name, 42501 missing SELECT/INSERT/UPDATE/DELETE privilege, type input SQLSTATEs (22P02, 22003, 22007, 22008) for values. See docs/sql-reference.md.';

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
                                            with_outcomes boolean DEFAULT false,
                                            source_partition text DEFAULT NULL, offsets bigint[] DEFAULT NULL)
RETURNS cdc.batch_result
LANGUAGE c CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_apply_batch_jsonb';
COMMENT ON FUNCTION @extschema@.cdc_apply_batch(jsonb, regclass, text[], boolean, text, bigint[]) IS
  'Applies a JSON array of Debezium change events (each as cdc_apply() takes it; JSON null = Kafka tombstone) in one call, in the caller''s transaction, with exactly the result of applying them one by one in order: rows, tombstones, ledger, outbox, conflicts and counters. target NULL: resolved per event from cdc.mapping. delivery_keys: one per event (NULL or a NULL element: derived). source_partition and offsets (instead of delivery_keys): the events were read from one ordered source partition (Kafka: topic:generation:partition) at these strictly increasing offsets, one per event; event i''s delivery key is source_partition || '':'' || offsets[i], and the batch claims its deliveries as offset ranges per target (cdc.ledger_range) instead of one ledger row each (docs/semantics.md, "Claims by offset range"). Returns the count of each outcome and, with with_outcomes, the outcome of every event in input order. Errors: 22004 events or with_outcomes NULL, 22023 events not an array, delivery_keys or offsets of another length, source_partition without offsets or the other way round, both with delivery_keys, an empty source_partition or one longer than 1,024 bytes, a NULL offset or offsets not strictly increasing, and every error of cdc_apply() with "event N of the batch" in the context; nothing of the batch is applied. See docs/sql-reference.md.';

CREATE FUNCTION @extschema@.cdc_apply_batch(events jsonb[], target regclass DEFAULT NULL, delivery_keys text[] DEFAULT NULL,
                                            with_outcomes boolean DEFAULT false,
                                            source_partition text DEFAULT NULL, offsets bigint[] DEFAULT NULL)
RETURNS cdc.batch_result
LANGUAGE c CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_apply_batch_array';
COMMENT ON FUNCTION @extschema@.cdc_apply_batch(jsonb[], regclass, text[], boolean, text, bigint[]) IS
  'Same as cdc_apply_batch(jsonb, ...) for an array of jsonb events (NULL elements are Kafka tombstones).';

CREATE FUNCTION @extschema@.cdc_apply_batch(events text, target regclass DEFAULT NULL, delivery_keys text[] DEFAULT NULL,
                                            with_outcomes boolean DEFAULT false,
                                            source_partition text DEFAULT NULL, offsets bigint[] DEFAULT NULL)
RETURNS cdc.batch_result
LANGUAGE c CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_apply_batch_text';
COMMENT ON FUNCTION @extschema@.cdc_apply_batch(text, regclass, text[], boolean, text, bigint[]) IS
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
  owner        regrole NOT NULL,
  run_as_owner boolean NOT NULL DEFAULT false,
  slot_ready   boolean NOT NULL DEFAULT false,
  skip_lsn     pg_lsn,
  origin       text NOT NULL DEFAULT 'any' CHECK (origin IN ('none', 'any')),
  refresh_pending boolean NOT NULL DEFAULT false,
  slot_system_id  text,
  slot_timeline   integer,
  slot_created_lsn pg_lsn,
  count_positions_until pg_lsn CHECK (count_positions_until <> '0/0'),
  created_at   timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE cdc.subscription IS
  'One row per subscription to a source PostgreSQL publication. conninfo may hold a password: only superusers and the extension owner can read this table; use cdc.subscription_status. Only superusers may write it (trigger subscription_guard).';
COMMENT ON COLUMN cdc.subscription.subid IS 'Internal id; the replication origin is named cdc_<database oid>_<subid> (cdc._origin_name).';
COMMENT ON COLUMN cdc.subscription.name IS 'Subscription name (lower-case identifier, up to 41 characters).';
COMMENT ON COLUMN cdc.subscription.conninfo IS 'libpq connection string of the source (replication=database is added).';
COMMENT ON COLUMN cdc.subscription.publications IS 'Publications on the source to stream.';
COMMENT ON COLUMN cdc.subscription.slot_name IS 'Logical replication slot on the source.';
COMMENT ON COLUMN cdc.subscription.create_slot IS 'Create the slot on the source when the worker first starts.';
COMMENT ON COLUMN cdc.subscription.copy_data IS 'Copy the published tables (as snapshot rows) consistently with the slot''s start point.';
COMMENT ON COLUMN cdc.subscription.enabled IS 'The launcher runs an apply worker for enabled subscriptions.';
COMMENT ON COLUMN cdc.subscription.source_epoch IS 'First version component of this source''s changes.';
COMMENT ON COLUMN cdc.subscription.owner IS 'The role the apply worker acts as: it never applies with more rights than this role (docs/security.md). Default: the superuser who created the subscription.';
COMMENT ON COLUMN cdc.subscription.run_as_owner IS 'false (default): changes of a table are applied as the table''s owner, in a security-restricted context, and the subscription owner must be a member of that owner; true: everything is applied as the subscription owner, who needs the privileges on the tables (as PostgreSQL 16''s run_as_owner).';
COMMENT ON COLUMN cdc.subscription.slot_ready IS 'The slot exists and the initial copy (if any) is done; streaming starts from the replication origin''s progress.';
COMMENT ON COLUMN cdc.subscription.skip_lsn IS 'Set by cdc.skip_transaction(): the commit LSN of one source transaction the worker skips.';
COMMENT ON COLUMN cdc.subscription.origin IS '''none'': source transactions that carry a replication origin (replicated into the source from elsewhere; pgoutput sends an Origin message for them) are not applied, as PostgreSQL 16''s origin = none; ''any'' (default): they are applied.';
COMMENT ON COLUMN cdc.subscription.refresh_pending IS 'The worker reads the publications'' tables into cdc.subscription_rel at its next start (as cdc.refresh_subscription does, copying new tables when copy_data): set by cdc.alter_subscription when the publications change, and at creation without create_slot.';
COMMENT ON COLUMN cdc.subscription.slot_system_id IS 'Identity of the slot (docs/worker.md, "Continuity"): the source''s system identifier (IDENTIFY_SYSTEM) when the worker created the slot, or first used a slot it did not create.';
COMMENT ON COLUMN cdc.subscription.slot_timeline IS 'The source''s timeline then: a promoted standby has another one, and PostgreSQL 15 copies no logical slot to it.';
COMMENT ON COLUMN cdc.subscription.slot_created_lsn IS 'The slot''s consistent point (where its stream starts), or the position it was first used from.';
COMMENT ON COLUMN cdc.subscription.count_positions_until IS 'Source transactions committed at or below this LSN were applied by cdc_apply 0.1.0, whose positions counted the changes a transaction sent: sent again (a replication origin moved back), they keep those versions and delivery keys and are duplicates (docs/worker.md, "Keys from before this version"). Set by ALTER EXTENSION cdc_apply UPDATE from 0.1.0 to the origin''s progress; NULL (subscriptions created on 0.2.0): every position is the change''s WAL position.';
COMMENT ON COLUMN cdc.subscription.created_at IS 'When the subscription was created.';

-- Managing subscriptions is for superusers only (as CREATE SUBSCRIPTION is in
-- PostgreSQL 15): a subscription decides which role the worker acts as and
-- where it connects to.  The functions check it, and this trigger refuses
-- writes by anyone else whatever they were granted (docs/security.md).
CREATE FUNCTION cdc._require_superuser(action text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  IF NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user), false) THEN
    RAISE EXCEPTION 'permission denied to %', action
      USING ERRCODE = '42501',
            HINT = 'Only superusers manage cdc_apply subscriptions (docs/security.md).';
  END IF;
END
$fn$;
COMMENT ON FUNCTION cdc._require_superuser(text) IS
  'Internal: raises 42501 "permission denied to <action>" unless the current role is a superuser.';

CREATE FUNCTION cdc._no_such_subscription(name text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  IF name IS NULL THEN
    RAISE EXCEPTION 'subscription name must not be NULL' USING ERRCODE = '22004';
  END IF;
  RAISE EXCEPTION 'subscription "%" does not exist', name USING ERRCODE = '42704';
END
$fn$;
COMMENT ON FUNCTION cdc._no_such_subscription(text) IS
  'Internal (the subscription functions, when no subscription of that name exists): always raises, 22004 "subscription name must not be NULL" for a NULL name, else 42704 "subscription "<name>" does not exist".';

CREATE FUNCTION cdc._subscription_guard() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  PERFORM cdc._require_superuser(pg_catalog.lower(TG_OP) OPERATOR(pg_catalog.||) ' cdc.subscription');
  RETURN CASE WHEN TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN OLD ELSE NEW END;
END
$fn$;
COMMENT ON FUNCTION cdc._subscription_guard() IS
  'Internal trigger of cdc.subscription: only superusers may insert, update or delete subscriptions (error 42501), whatever privileges others were granted.';
CREATE TRIGGER subscription_guard BEFORE INSERT OR UPDATE OR DELETE ON cdc.subscription
  FOR EACH ROW EXECUTE FUNCTION cdc._subscription_guard();
COMMENT ON TRIGGER subscription_guard ON cdc.subscription IS 'Refuses writes by non-superusers (42501).';
CREATE TRIGGER subscription_guard_truncate BEFORE TRUNCATE ON cdc.subscription
  FOR EACH STATEMENT EXECUTE FUNCTION cdc._subscription_guard();
COMMENT ON TRIGGER subscription_guard_truncate ON cdc.subscription IS 'Refuses TRUNCATE by non-superusers (42501).';

-- fire under any session_replication_role: a database or role set to
-- replica (and the worker, which always is) must not skip them (TAP 115)
ALTER TABLE cdc.subscription ENABLE ALWAYS TRIGGER subscription_guard;
ALTER TABLE cdc.subscription ENABLE ALWAYS TRIGGER subscription_guard_truncate;

-- A subscription created or enabled (or disabled) by any committed write,
-- not only by the functions below: the launchers look at once when the
-- transaction commits (a superuser's own INSERT woke nothing before, and in
-- a database without subscriptions the subscription started only at the
-- next scheduled cdc.prune(); review h2, TAP 125).
CREATE FUNCTION cdc._subscription_changed() RETURNS trigger
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_subscription_changed';
COMMENT ON FUNCTION cdc._subscription_changed() IS
  'Internal trigger of cdc.subscription (AFTER INSERT, and UPDATE OF enabled that changes it): when the transaction commits, the cluster launcher and the database''s launcher look at the subscriptions at once (docs/worker.md, "Every database"); an inserted row counts as a subscription being created until the transaction ends (DROP DATABASE is refused, and so is PREPARE TRANSACTION: 0A000). A no-op without shared_preload_libraries.';
CREATE TRIGGER subscription_created AFTER INSERT ON cdc.subscription
  FOR EACH ROW EXECUTE FUNCTION cdc._subscription_changed();
COMMENT ON TRIGGER subscription_created ON cdc.subscription IS 'The launchers start the new subscription''s worker as soon as the transaction commits.';
CREATE TRIGGER subscription_enabled AFTER UPDATE OF enabled ON cdc.subscription
  FOR EACH ROW WHEN (OLD.enabled IS DISTINCT FROM NEW.enabled) EXECUTE FUNCTION cdc._subscription_changed();
COMMENT ON TRIGGER subscription_enabled ON cdc.subscription IS 'The database''s launcher starts (or stops) the subscription''s worker as soon as the transaction commits.';
ALTER TABLE cdc.subscription ENABLE ALWAYS TRIGGER subscription_created;
ALTER TABLE cdc.subscription ENABLE ALWAYS TRIGGER subscription_enabled;

-- The tables of a subscription, as pg_subscription_rel is for PostgreSQL's
-- own subscriptions: the published tables the worker applies, and where
-- each one's copy joined the stream.
CREATE TABLE cdc.subscription_rel (
  subid       integer NOT NULL REFERENCES cdc.subscription ON DELETE CASCADE,
  schema_name text NOT NULL,
  table_name  text NOT NULL,
  state       text NOT NULL CHECK (state IN ('init', 'ready')),
  sync_lsn    pg_lsn,
  copied_rows bigint,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  source_relid oid,
  PRIMARY KEY (subid, schema_name, table_name)
);
COMMENT ON TABLE cdc.subscription_rel IS
  'One row per published table a subscription applies (PostgreSQL''s pg_subscription_rel). Filled from the publications when the slot is created, by cdc.refresh_subscription and cdc.resync_table; a dropped destination table removes its row. Changes of published tables without a row are not applied (the worker logs a warning), except a table renamed or moved on the source since its copy or the slot''s creation (source_relid), which stops the worker, as does a table dropped and created again under its name. Read it through cdc.subscription_tables.';
COMMENT ON COLUMN cdc.subscription_rel.subid IS 'The subscription.';
COMMENT ON COLUMN cdc.subscription_rel.schema_name IS 'Schema of the table as the source publishes it (pgoutput''s relation message; the partitioned root with publish_via_partition_root).';
COMMENT ON COLUMN cdc.subscription_rel.table_name IS 'Name of the table as the source publishes it.';
COMMENT ON COLUMN cdc.subscription_rel.state IS '''init'': the worker copies the table (at the snapshot of a temporary slot) before it streams on; ''ready'': its changes are applied.';
COMMENT ON COLUMN cdc.subscription_rel.source_relid IS 'The source''s pg_class OID of the table when the worker copied it; for a table of a slot made without a copy (copy_data => false), its OID at the slot''s consistent point, read with the slot; for a table added later without a copy, the OID the stream named it with at its first applied change (NULL: none yet). A stream that names that relation otherwise (renamed or moved on the source) stops the worker (55000) instead of skipping its changes, and so does a change of this table''s name from another relation (dropped and created again on the source).';
COMMENT ON COLUMN cdc.subscription_rel.sync_lsn IS 'The consistent point of the table''s copy: its changes in source transactions committed before it are in the copy and not applied again. NULL: not copied (copy_data false); every change is applied.';
COMMENT ON COLUMN cdc.subscription_rel.copied_rows IS 'Rows the last copy of the table delivered.';
COMMENT ON COLUMN cdc.subscription_rel.updated_at IS 'When the row last changed.';

CREATE TABLE cdc.subscription_state (
  subid          integer PRIMARY KEY REFERENCES cdc.subscription ON DELETE CASCADE,
  state          text NOT NULL DEFAULT 'starting' CHECK (state IN ('starting', 'waiting', 'copying', 'streaming', 'error', 'disabled')),
  worker_pid     integer,
  received_lsn   pg_lsn,
  flushed_lsn    pg_lsn,
  source_end_lsn pg_lsn,
  confirmed_lsn  pg_lsn,
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
COMMENT ON COLUMN cdc.subscription_state.state IS 'starting, waiting (for a free worker slot: cdc.max_workers or max_worker_processes), copying, streaming, error or disabled.';
COMMENT ON COLUMN cdc.subscription_state.worker_pid IS 'PID of the apply worker, while one runs.';
COMMENT ON COLUMN cdc.subscription_state.received_lsn IS 'Highest source LSN received.';
COMMENT ON COLUMN cdc.subscription_state.flushed_lsn IS 'Source LSN reported to the source as flushed (durably committed here).';
COMMENT ON COLUMN cdc.subscription_state.source_end_lsn IS 'The source''s WAL end as last reported by it (keepalive or data).';
COMMENT ON COLUMN cdc.subscription_state.confirmed_lsn IS 'Highest source position the worker confirmed to the source without a local commit (an idle stream: the WAL carried nothing for this subscription), made durable before it was reported; with the replication origin''s progress it bounds the slot''s confirmed_flush_lsn (docs/worker.md, "Continuity").';
COMMENT ON COLUMN cdc.subscription_state.last_commit_at IS 'Source commit time of the last applied transaction.';
COMMENT ON COLUMN cdc.subscription_state.last_msg_at IS 'When the worker last heard from the source.';
COMMENT ON COLUMN cdc.subscription_state.retry_count IS 'Consecutive failed attempts; reset (with last_error) once the worker streams again: it committed a source transaction or caught up with the source.';
COMMENT ON COLUMN cdc.subscription_state.last_error IS 'Text of the current error with its DETAIL, HINT and CONTEXT (the table and LSN it concerns); NULL once the worker streams again. Earlier errors: cdc.subscription_errors.';
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
COMMENT ON TABLE cdc.skipped_transactions IS 'Source transactions skipped by an explicit operator action (cdc.skip_transaction); skipped_at is set when the worker actually skipped it. cdc.drop_subscription removes the subscription''s open request (skipped_at NULL) and keeps the performed skips.';
COMMENT ON COLUMN cdc.skipped_transactions.id IS 'Request order.';
COMMENT ON COLUMN cdc.skipped_transactions.subid IS 'The subscription.';
COMMENT ON COLUMN cdc.skipped_transactions.name IS 'Subscription name at the time.';
COMMENT ON COLUMN cdc.skipped_transactions.commit_lsn IS 'Commit LSN of the skipped source transaction.';
COMMENT ON COLUMN cdc.skipped_transactions.xid IS 'Source transaction id, filled in when skipped.';
COMMENT ON COLUMN cdc.skipped_transactions.reason IS 'Why the operator skipped it.';
COMMENT ON COLUMN cdc.skipped_transactions.requested_by IS 'Role that requested the skip.';
COMMENT ON COLUMN cdc.skipped_transactions.skipped_at IS 'When the worker skipped it (NULL: not reached yet).';

-- Replication origins are cluster-wide: their names carry the database's
-- OID, so that subscriptions of cdc_apply in two databases never share (or
-- drop) one another's origin.
CREATE FUNCTION cdc._origin_name(subid integer) RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 'cdc_' OPERATOR(pg_catalog.||) d.oid::pg_catalog.text OPERATOR(pg_catalog.||) '_'
                    OPERATOR(pg_catalog.||) subid::pg_catalog.text
        FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database() $$;
COMMENT ON FUNCTION cdc._origin_name(integer) IS
  'The name of the replication origin of subscription subid in this database: cdc_<database oid>_<subid> (the worker builds the same name).';

-- The replication origins' progress is readable only by superusers and
-- roles granted pg_show_replication_origin_status(); a view calls functions
-- with its reader's rights, so the status view reads it through this
-- function, which returns nothing but the subscriptions' applied LSNs.
CREATE FUNCTION cdc._subscription_progress() RETURNS TABLE (subid integer, remote_lsn pg_lsn)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT pg_catalog.split_part(o.external_id, '_', 3)::integer, o.remote_lsn
    FROM pg_catalog.pg_replication_origin_status o
   WHERE o.external_id OPERATOR(pg_catalog.~)
         ('^cdc_' OPERATOR(pg_catalog.||) (SELECT d.oid FROM pg_catalog.pg_database d
                                           WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())::pg_catalog.text
          OPERATOR(pg_catalog.||) '_[0-9]+$')
$$;
COMMENT ON FUNCTION cdc._subscription_progress() IS
  'Internal (SECURITY DEFINER, for cdc.subscription_status): the remote LSN of the replication origin of each subscription of this database (cdc_<database oid>_<subid>), so that roles without access to pg_replication_origin_status can read the applied position.';

CREATE TABLE cdc.subscription_errors (
  id         bigserial PRIMARY KEY,
  subid      integer NOT NULL,
  name       text NOT NULL,
  error      text NOT NULL,
  error_lsn  pg_lsn,
  retry      integer NOT NULL,
  at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON cdc.subscription_errors (subid, id);
COMMENT ON TABLE cdc.subscription_errors IS 'History of worker errors, newest last: the worker adds one row per error (the text of cdc.subscription_status.last_error) and keeps the last 100 per subscription. Error texts can quote row values: readable by superusers and members of pg_read_all_stats (pg_monitor) only.';
COMMENT ON COLUMN cdc.subscription_errors.id IS 'Order of the errors.';
COMMENT ON COLUMN cdc.subscription_errors.subid IS 'The subscription.';
COMMENT ON COLUMN cdc.subscription_errors.name IS 'Subscription name at the time.';
COMMENT ON COLUMN cdc.subscription_errors.error IS 'Message with DETAIL, HINT and CONTEXT.';
COMMENT ON COLUMN cdc.subscription_errors.error_lsn IS 'Commit LSN of the failing source transaction, if one failed.';
COMMENT ON COLUMN cdc.subscription_errors.retry IS 'Consecutive failure number (retry_count after it).';
COMMENT ON COLUMN cdc.subscription_errors.at IS 'When it happened.';

CREATE TABLE cdc.accepted_gaps (
  id           bigserial PRIMARY KEY,
  subid        integer NOT NULL,
  name         text NOT NULL,
  reason       text NOT NULL,
  requested_by name NOT NULL DEFAULT current_user,
  requested_at timestamptz NOT NULL DEFAULT now(),
  from_lsn     pg_lsn,
  to_lsn       pg_lsn,
  detail       text,
  accepted_at  timestamptz
);
COMMENT ON TABLE cdc.accepted_gaps IS 'Explicit operator acceptances of a stream whose continuity the worker could not prove (cdc.accept_gap; docs/worker.md, "Continuity"): committed source transactions between from_lsn and to_lsn may never have been applied here.';
COMMENT ON COLUMN cdc.accepted_gaps.id IS 'Request order.';
COMMENT ON COLUMN cdc.accepted_gaps.subid IS 'The subscription.';
COMMENT ON COLUMN cdc.accepted_gaps.name IS 'Subscription name at the time.';
COMMENT ON COLUMN cdc.accepted_gaps.reason IS 'Why the operator accepted the gap.';
COMMENT ON COLUMN cdc.accepted_gaps.requested_by IS 'Role that accepted it.';
COMMENT ON COLUMN cdc.accepted_gaps.requested_at IS 'When it was requested.';
COMMENT ON COLUMN cdc.accepted_gaps.from_lsn IS 'The replication origin''s progress (end of the last applied source transaction) when the worker acted on it.';
COMMENT ON COLUMN cdc.accepted_gaps.to_lsn IS 'Where the stream continued: the consistent point of the new slot, or the confirmed position of the slot found.';
COMMENT ON COLUMN cdc.accepted_gaps.detail IS 'What the worker found (the reason continuity could not be proven).';
COMMENT ON COLUMN cdc.accepted_gaps.accepted_at IS 'When the worker acted on it (NULL: not yet).';

CREATE VIEW cdc.subscription_status AS
  SELECT s.name,
         CASE WHEN NOT s.enabled THEN 'disabled' ELSE coalesce(st.state, 'starting') END AS state,
         st.received_lsn,
         o.remote_lsn AS applied_lsn,
         st.flushed_lsn,
         st.source_end_lsn,
         -- what the source has decoded and sent beyond what is applied here;
         -- flushed_lsn covers an idle stream whose last transactions carried
         -- nothing for this subscription (confirmed without a local commit)
         CASE WHEN st.source_end_lsn IS NOT NULL AND o.remote_lsn IS NOT NULL
              THEN greatest(st.source_end_lsn - greatest(o.remote_lsn, st.flushed_lsn), 0)::bigint END AS lag_bytes,
         -- caught up: nothing to wait for; else the last message's age over the last applied commit
         CASE WHEN st.source_end_lsn IS NOT NULL AND o.remote_lsn IS NOT NULL
                   AND st.source_end_lsn <= greatest(o.remote_lsn, st.flushed_lsn) THEN 0::double precision
              WHEN st.last_commit_at IS NOT NULL
              THEN greatest(extract(epoch FROM st.last_msg_at - st.last_commit_at), 0)::double precision END AS lag_seconds,
         st.retry_count,
         -- error texts can quote row values: like the query texts of
         -- pg_stat_activity, only for pg_read_all_stats and the owner
         CASE WHEN pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE') OR pg_catalog.pg_has_role(s.owner, 'USAGE')
              THEN st.last_error
              WHEN st.last_error IS NOT NULL THEN '<insufficient privilege>' END AS last_error,
         st.last_error_lsn,
         st.last_error_at,
         -- only while that process runs as a cdc_apply worker: a worker
         -- that exited (disabled, killed) leaves its pid in the state row
         -- (review helper: a disabled subscription showed a dead pid)
         CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a
                            WHERE a.pid OPERATOR(pg_catalog.=) st.worker_pid
                              AND a.backend_type OPERATOR(pg_catalog.=) 'cdc_apply worker')
              THEN st.worker_pid END AS worker_pid,
         s.slot_name,
         s.publications,
         st.applied_xacts,
         st.apply_commits
    FROM cdc.subscription s
    LEFT JOIN cdc.subscription_state st USING (subid)
    LEFT JOIN cdc._subscription_progress() o ON o.subid = s.subid;
COMMENT ON VIEW cdc.subscription_status IS
  'One row per subscription: state (starting, waiting, copying, streaming, error, disabled), received/applied/flushed source LSN (applied_lsn = the replication origin''s progress, committed with the rows), lag in bytes (source WAL end - the greater of applied and flushed) and seconds (0 when caught up, else last message - last applied commit time), retries and the current error, source transactions applied and the local commits that applied them (grouping). Readable by every role; last_error only by members of pg_read_all_stats (pg_monitor) and of the subscription''s owner, others see <insufficient privilege>. No conninfo.';

CREATE VIEW cdc.subscription_tables AS
  SELECT s.name AS subscription, r.schema_name, r.table_name, r.state, r.sync_lsn, r.copied_rows, r.updated_at
    FROM cdc.subscription_rel r
    JOIN cdc.subscription s USING (subid);
COMMENT ON VIEW cdc.subscription_tables IS
  'The tables of each subscription (cdc.subscription_rel): state init (to be copied) or ready, the copy''s consistent point (sync_lsn) and rows. No conninfo.';

-- Stream ordering keeps one mark per (target, source): two subscriptions of
-- one source that feed the target share it, which orders their changes only
-- when both receive the same changes.  With different publications (one
-- publishing only inserts, a row filter, another table set) the one that
-- applies a later change first moves the mark past a change the other has yet
-- to deliver, which then counts as a duplicate (fresh-user run h4; TAP 157).
-- Such a configuration is refused: by cdc.set_ordering and by the worker
-- before it uses the mark (docs/semantics.md, "Stream ordering").
CREATE FUNCTION cdc._stream_scope_conflict(target regclass, source text)
RETURNS TABLE (subscription_a text, subscription_b text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  WITH feeders AS (
    SELECT DISTINCT s.name, s.slot_system_id,
           ARRAY(SELECT DISTINCT p FROM pg_catalog.unnest(s.publications) p ORDER BY p) AS pubs
      FROM cdc.subscription s
      JOIN cdc.subscription_rel r ON r.subid OPERATOR(pg_catalog.=) s.subid
      JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) _stream_scope_conflict.target
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
     WHERE (_stream_scope_conflict.source IS NULL OR s.slot_system_id IS NULL
            OR 'pg:' OPERATOR(pg_catalog.||) s.slot_system_id OPERATOR(pg_catalog.=) _stream_scope_conflict.source)
       AND (EXISTS (SELECT 1 FROM cdc.mapping m
                     WHERE m.target OPERATOR(pg_catalog.=) _stream_scope_conflict.target
                       AND (m.source_name IS NULL OR m.source_name OPERATOR(pg_catalog.=) s.name)
                       AND m.source_schema OPERATOR(pg_catalog.=) r.schema_name
                       AND m.source_table OPERATOR(pg_catalog.=) r.table_name)
            OR (r.schema_name OPERATOR(pg_catalog.=) n.nspname::text AND r.table_name OPERATOR(pg_catalog.=) c.relname::text
                AND NOT EXISTS (SELECT 1 FROM cdc.mapping m
                                 WHERE m.source_schema OPERATOR(pg_catalog.=) r.schema_name
                                   AND m.source_table OPERATOR(pg_catalog.=) r.table_name
                                   AND (m.source_name IS NULL OR m.source_name OPERATOR(pg_catalog.=) s.name)))))
  SELECT a.name, b.name FROM feeders a JOIN feeders b ON a.name OPERATOR(pg_catalog.<) b.name
   WHERE a.pubs OPERATOR(pg_catalog.<>) b.pubs
     AND (a.slot_system_id IS NULL OR b.slot_system_id IS NULL
          OR a.slot_system_id OPERATOR(pg_catalog.=) b.slot_system_id)
   ORDER BY a.name, b.name LIMIT 1
$$;
COMMENT ON FUNCTION cdc._stream_scope_conflict(regclass, text) IS
  'Internal (cdc.set_ordering and the worker, docs/semantics.md "Stream ordering"): one row with the names of two subscriptions, subscription_a sorting before subscription_b (of source, pg:<system identifier>, or of any one source when NULL; a subscription whose slot has no system identifier yet counts as of every source), that both feed target (cdc.subscription_rel, through its mapping or the same name) with publications that differ as sets of names; no row when there are none. One stream mark cannot order such subscriptions. SECURITY DEFINER: reads cdc.subscription, which only superusers and the extension owner may; returns only subscription names, which cdc.subscription_tables shows to every role.';

-- Control transitions (docs/worker.md, "Control state is durable"): the
-- functions below commit synchronously whatever synchronous_commit says, so
-- that no crash can lose a state the worker or the source already acted on.
CREATE FUNCTION cdc._force_sync_commit() RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_force_sync_commit';
COMMENT ON FUNCTION cdc._force_sync_commit() IS
  'Internal: makes the current transaction''s commit synchronous (ForceSyncCommit, as CREATE DATABASE does), whatever synchronous_commit says. Called by every subscription control function.';

CREATE FUNCTION cdc._note_subscription_database() RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_note_subscription_database';
COMMENT ON FUNCTION cdc._note_subscription_database() IS
  'Internal: tells the server (shared memory, when cdc_apply is preloaded) at once that this database has subscriptions, so that DROP DATABASE of it is refused before the launcher''s next look (docs/worker.md, "Dropping").';

-- Stopping a subscription's worker: the launcher starts a new one, which
-- reads the subscription again.
CREATE FUNCTION cdc._stop_subscription_workers(subid integer, timeout_ms bigint) RETURNS integer
LANGUAGE c STRICT VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_stop_subscription_workers';
COMMENT ON FUNCTION cdc._stop_subscription_workers(integer, bigint) IS
  'Internal (cdc._stop_worker): SIGTERM to every apply worker of the subscription that the launchers'' registry in shared memory knows, including one started a moment ago that has not recorded its pid in cdc.subscription_state yet; with timeout_ms > 0 waits up to that long (milliseconds) for each to exit (a WARNING for one that does not). Returns how many were signalled; -1 without shared_preload_libraries (no registry). No errors.';

CREATE FUNCTION cdc._stop_worker(subid integer, timeout_ms bigint DEFAULT 0) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  -- Every worker of the subscription the registry knows, also a new one that
  -- has not recorded its pid in cdc.subscription_state yet.  Without the
  -- registry (cdc_apply not in shared_preload_libraries) no launcher runs,
  -- so no worker does either: nothing to stop.
  PERFORM cdc._stop_subscription_workers(_stop_worker.subid, timeout_ms);
END $fn$;
COMMENT ON FUNCTION cdc._stop_worker(integer, bigint) IS
  'Internal: stops the apply workers of a subscription (every one the launchers'' registry knows, cdc._stop_subscription_workers; on a server without cdc_apply in shared_preload_libraries none runs) with SIGTERM; timeout_ms > 0 waits that long for each to exit. The launcher starts a new one, which reads the subscription again. Callers hold the subscription''s row lock, so the new worker only starts once their change is committed.';

CREATE FUNCTION cdc.create_subscription(
  name         text,
  conninfo     text,
  publications text[],
  slot_name    name    DEFAULT NULL,
  create_slot  boolean DEFAULT true,
  copy_data    boolean DEFAULT true,
  enabled      boolean DEFAULT true,
  source_epoch bigint  DEFAULT 0,
  owner        regrole DEFAULT NULL,
  run_as_owner boolean DEFAULT false,
  origin       text    DEFAULT 'any')
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  id integer;
BEGIN
  PERFORM cdc._require_superuser('create a subscription');
  -- the arguments whose NULL means nothing (slot_name and owner NULL: the
  -- defaults): a NULL name was an invalid name (42602), conninfo,
  -- publications and origin bad values (22023), run_as_owner false
  IF name IS NULL OR conninfo IS NULL OR publications IS NULL OR create_slot IS NULL OR copy_data IS NULL
     OR enabled IS NULL OR source_epoch IS NULL OR run_as_owner IS NULL OR origin IS NULL THEN
    RAISE EXCEPTION '% must not be NULL',
      CASE WHEN name IS NULL THEN 'subscription name' WHEN conninfo IS NULL THEN 'conninfo'
           WHEN publications IS NULL THEN 'publications' WHEN create_slot IS NULL THEN 'create_slot'
           WHEN copy_data IS NULL THEN 'copy_data' WHEN enabled IS NULL THEN 'enabled'
           WHEN source_epoch IS NULL THEN 'source_epoch' WHEN run_as_owner IS NULL THEN 'run_as_owner' ELSE 'origin' END
      USING ERRCODE = '22004';
  END IF;
  IF name !~ '^[a-z_][a-z0-9_]{0,40}$' THEN
    RAISE EXCEPTION 'invalid subscription name %', quote_literal(name)
      USING ERRCODE = '42602', HINT = 'Use a lower-case identifier of at most 41 characters.';
  END IF;
  -- checked as PostgreSQL checks a slot name (ReplicationSlotValidateName),
  -- here rather than by the source when the worker creates the slot: it
  -- then failed and retried with backoff (fresh-user run)
  IF slot_name IS NOT NULL AND slot_name !~ '^[a-z0-9_]{1,63}$' THEN
    RAISE EXCEPTION 'invalid replication slot name %', quote_literal(slot_name)
      USING ERRCODE = '42602',
            HINT = 'Replication slot names may only contain lower case letters, numbers, and the underscore character.';
  END IF;
  IF array_ndims(publications) > 1 THEN
    RAISE EXCEPTION 'publications must be a one-dimensional array, not % dimensions', array_ndims(publications)
      USING ERRCODE = '2202E';
  END IF;
  IF cardinality(publications) = 0 THEN
    RAISE EXCEPTION 'at least one publication is required' USING ERRCODE = '22023';
  END IF;
  PERFORM cdc._check_publications_owner(publications, owner);
  IF source_epoch < 0 OR source_epoch > 2147483647 THEN
    RAISE EXCEPTION 'source_epoch must be an integer from 0 to 2147483647, not %', source_epoch USING ERRCODE = '22023';
  END IF;
  IF origin NOT IN ('none', 'any') THEN
    RAISE EXCEPTION 'origin must be ''none'' or ''any'', not %', quote_literal(origin)
      USING ERRCODE = '22023';
  END IF;
  IF EXISTS (SELECT 1 FROM cdc.subscription s WHERE s.name OPERATOR(pg_catalog.=) create_subscription.name) THEN
    RAISE EXCEPTION 'subscription % already exists', quote_literal(create_subscription.name)
      USING ERRCODE = '42710', HINT = 'Choose another name, or drop the subscription first (cdc.drop_subscription).';
  END IF;
  PERFORM cdc._check_conninfo(conninfo);
  -- without create_slot the worker finds the slot ready: it reads the publications' tables at its first start
  INSERT INTO cdc.subscription (name, conninfo, publications, slot_name, create_slot, copy_data, enabled, source_epoch,
                                owner, run_as_owner, origin, refresh_pending)
  VALUES (name, conninfo, publications, coalesce(slot_name, name), create_slot, copy_data AND create_slot, enabled, source_epoch,
          coalesce(owner, current_user::regrole), run_as_owner, origin, NOT create_slot)
  RETURNING subid INTO id;
  INSERT INTO cdc.subscription_state (subid, state) VALUES (id, CASE WHEN enabled THEN 'starting' ELSE 'disabled' END);
  -- A replication origin of this name with no subscription row is a leftover
  -- of an extension dropped from this database (origins are cluster-wide
  -- and outlive DROP EXTENSION; the name holds this database's OID, so it is
  -- never another database's): its progress belongs to nobody, so it is
  -- replaced.
  IF EXISTS (SELECT 1 FROM pg_replication_origin WHERE roname = cdc._origin_name(id)) THEN
    PERFORM pg_replication_origin_drop(cdc._origin_name(id));
  END IF;
  PERFORM pg_replication_origin_create(cdc._origin_name(id));
  PERFORM cdc._note_subscription_database();
  PERFORM cdc._force_sync_commit();
  -- without a copy, the slot is created with the subscription, as
  -- CREATE SUBSCRIPTION does: made by the worker at its first start, it
  -- would miss every change the source made until then (a subscription
  -- created disabled, or waiting for a free worker; review helper).  A slot
  -- cannot roll back, so it is made when this transaction commits (its
  -- pre-commit), with its consistent point recorded in slot_created_lsn for
  -- the worker to adopt it (prepare_slot): a transaction that rolls back or
  -- fails makes none (src/pg/worker/slot_at_commit.cpp).
  IF create_slot AND NOT copy_data THEN
    PERFORM cdc._create_source_slot(id);
  END IF;
  -- the launcher serves every database with the extension; only a server
  -- without the launcher, or the deprecated cdc.database naming another
  -- database, leaves the subscription unserved (docs/worker.md, "Every database")
  IF current_setting('cdc.max_databases', true) IS NULL THEN
    RAISE WARNING 'subscription "%" will not run: cdc_apply is not in shared_preload_libraries', name
      USING HINT = 'Add cdc_apply to shared_preload_libraries and restart the server.';
  ELSIF coalesce(current_setting('cdc.database', true), '') NOT IN ('', current_database()) THEN
    RAISE WARNING 'subscription "%" will not run: cdc.database restricts the launcher to database %', name,
      quote_literal(current_setting('cdc.database', true))
      USING HINT = 'cdc.database is deprecated: set it to '''' (every database) and restart the server.';
  END IF;
  RETURN id;
END
$fn$;
COMMENT ON FUNCTION cdc.create_subscription(text, text, text[], name, boolean, boolean, boolean, bigint, regrole, boolean, text) IS
  'Creates a subscription (superusers only): the launcher (shared_preload_libraries = cdc_apply; every database, docs/worker.md) starts an apply worker that creates the slot (default: named after the subscription) when create_slot (with copy_data => false the slot is created with the subscription, as CREATE SUBSCRIPTION does, so that no change made before the worker starts is missed: when the calling transaction commits, connecting to the source, so that a transaction that rolls back or fails, also in a rolled-back savepoint or a DO block, leaves no slot), records the published tables in cdc.subscription_rel, copies them as snapshot rows when copy_data (only with create_slot; the publications'' row filters and column lists apply), then streams pgoutput. Tables map to the same schema and name, or per cdc.mapping (source_name = the subscription name). owner (default: the calling superuser) is the role the worker acts as; run_as_owner: apply everything as that role instead of as each table''s owner (docs/security.md). origin ''none'' drops source transactions that carry a replication origin (PostgreSQL 16''s origin = none), ''any'' applies them. Commits synchronously. Returns the subid. Errors: 42501 not a superuser, 42602 bad name or slot_name (a slot name as PostgreSQL requires: lower-case letters, digits and _), 2202E publications of more than one dimension, 42710 name exists (as CREATE SUBSCRIPTION), 22004 a NULL name, conninfo, publications, create_slot, copy_data, enabled, source_epoch, run_as_owner or origin (slot_name and owner NULL: the defaults), 22023 empty publications or another origin, 42710 a publication name given twice, 42622 one longer than 63 bytes, 42704 an owner that is no role, 22023 a source_epoch outside 0 to 2147483647, 22P02 a conninfo libpq cannot parse (as CREATE SUBSCRIPTION; a bare word is not taken as a database name), 22023 one that sets no parameter (empty, blank: libpq''s defaults would connect to this server); with create_slot and copy_data => false also, raised by the COMMIT, 08001 source unreachable, 42710 the slot exists on the source (no subscription stays); and 0A000 at PREPARE TRANSACTION (the launchers are woken when the transaction commits, which COMMIT PREPARED cannot do).';

CREATE FUNCTION cdc.enable_subscription(name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  PERFORM cdc._require_superuser('enable a subscription');
  UPDATE cdc.subscription s SET enabled = true WHERE s.name = enable_subscription.name;
  IF NOT FOUND THEN PERFORM cdc._no_such_subscription(name); END IF;
  UPDATE cdc.subscription_state st SET state = 'starting', retry_count = 0, updated_at = now()
    FROM cdc.subscription s WHERE s.subid = st.subid AND s.name = enable_subscription.name;
  PERFORM cdc._force_sync_commit();
END $fn$;
COMMENT ON FUNCTION cdc.enable_subscription(text) IS 'Enables a subscription; the database''s launcher starts its worker as soon as the transaction commits (trigger subscription_enabled). Superusers only; commits synchronously. Errors: 42501 not a superuser, 42704 if it does not exist, 22004 a NULL name.';

CREATE FUNCTION cdc.disable_subscription(name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  PERFORM cdc._require_superuser('disable a subscription');
  UPDATE cdc.subscription s SET enabled = false WHERE s.name = disable_subscription.name;
  IF NOT FOUND THEN PERFORM cdc._no_such_subscription(name); END IF;
  PERFORM cdc._force_sync_commit();
END $fn$;
COMMENT ON FUNCTION cdc.disable_subscription(text) IS 'Disables a subscription; the database''s launcher stops its worker (SIGTERM) as soon as the transaction commits (trigger subscription_enabled). Progress is kept in the replication origin. Superusers only; commits synchronously. Errors: 42501 not a superuser, 42704 if it does not exist, 22004 a NULL name.';

CREATE FUNCTION cdc.alter_subscription(
  name         text,
  conninfo     text    DEFAULT NULL,
  publications text[]  DEFAULT NULL,
  source_epoch bigint  DEFAULT NULL,
  owner        regrole DEFAULT NULL,
  run_as_owner boolean DEFAULT NULL,
  origin       text    DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  sub cdc.subscription;
BEGIN
  PERFORM cdc._require_superuser('alter a subscription');
  SELECT * INTO sub FROM cdc.subscription s WHERE s.name = alter_subscription.name FOR UPDATE;
  IF NOT FOUND THEN PERFORM cdc._no_such_subscription(name); END IF;
  IF conninfo IS NOT NULL THEN
    PERFORM cdc._check_conninfo(conninfo);
  END IF;
  IF array_ndims(publications) > 1 THEN
    RAISE EXCEPTION 'publications must be a one-dimensional array, not % dimensions', array_ndims(publications)
      USING ERRCODE = '2202E';
  END IF;
  IF publications IS NOT NULL AND cardinality(publications) = 0 THEN
    RAISE EXCEPTION 'at least one publication is required' USING ERRCODE = '22023';
  END IF;
  PERFORM cdc._check_publications_owner(publications, owner);
  IF origin IS NOT NULL AND origin NOT IN ('none', 'any') THEN
    RAISE EXCEPTION 'origin must be ''none'' or ''any'', not %', quote_literal(origin) USING ERRCODE = '22023';
  END IF;
  IF source_epoch > 2147483647 THEN
    RAISE EXCEPTION 'source_epoch must be an integer from 0 to 2147483647, not %', source_epoch USING ERRCODE = '22023';
  END IF;
  IF source_epoch IS NOT NULL AND source_epoch < sub.source_epoch THEN
    RAISE EXCEPTION 'source_epoch can only grow (is %, asked %)', sub.source_epoch, source_epoch
      USING ERRCODE = '22023',
            DETAIL = 'A lower epoch would make every later change of this source older than what is applied.';
  END IF;
  UPDATE cdc.subscription s
     SET conninfo = coalesce(alter_subscription.conninfo, s.conninfo),
         publications = coalesce(alter_subscription.publications, s.publications),
         source_epoch = coalesce(alter_subscription.source_epoch, s.source_epoch),
         owner = coalesce(alter_subscription.owner, s.owner),
         run_as_owner = coalesce(alter_subscription.run_as_owner, s.run_as_owner),
         origin = coalesce(alter_subscription.origin, s.origin),
         -- other publications: the worker reads their tables at its next start (REFRESH PUBLICATION)
         refresh_pending = s.refresh_pending OR (alter_subscription.publications IS NOT NULL
                                                 AND alter_subscription.publications IS DISTINCT FROM s.publications)
   WHERE s.subid = sub.subid;
  PERFORM cdc._force_sync_commit();
  -- the worker reads its settings when it starts: stop it, the launcher starts a new one
  PERFORM cdc._stop_worker(sub.subid);
END $fn$;
COMMENT ON FUNCTION cdc.alter_subscription(text, text, text[], bigint, regrole, boolean, text) IS
  'Changes the conninfo, the publications, (only upwards) the source_epoch, the owner, run_as_owner or the origin option (none, any) of a subscription (superusers only); NULL keeps a value. A running worker is stopped and restarted by the launcher with the new settings, from the replication origin''s progress. Other publications: the new worker refreshes the subscription''s tables first, as cdc.refresh_subscription(name, copy_data) does with the subscription''s copy_data (new tables added, copied when copy_data; tables no longer published removed). Commits synchronously. Errors: 42501 not a superuser, 42704 unknown subscription, 22004 NULL name, 22023 empty publications, a lower source_epoch or one beyond 2147483647, or another origin, 42710 a publication name given twice, 42622 one longer than 63 bytes, 42704 an owner that is no role, 22P02 a conninfo libpq cannot parse, 22023 one that sets no parameter, 2202E publications of more than one dimension.';

CREATE FUNCTION cdc.skip_transaction(name text, commit_lsn pg_lsn, reason text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  id integer;
  sub_id integer;
  progress pg_lsn;
BEGIN
  PERFORM cdc._require_superuser('skip a transaction');
  IF reason IS NULL THEN
    RAISE EXCEPTION 'reason must not be NULL' USING ERRCODE = '22004',
      HINT = 'A reason is required to skip a transaction: it is recorded in cdc.skipped_transactions.';
  END IF;
  IF btrim(reason) = '' THEN
    RAISE EXCEPTION 'a reason is required to skip a transaction' USING ERRCODE = '22023';
  END IF;
  IF commit_lsn IS NULL THEN
    RAISE EXCEPTION 'commit_lsn must not be NULL' USING ERRCODE = '22004',
      HINT = 'Pass the commit LSN of the failing source transaction: cdc.subscription_status.last_error_lsn.';
  END IF;
  -- no transaction commits at the invalid LSN: such a request stayed pending for ever (review h4)
  IF commit_lsn OPERATOR(pg_catalog.=) '0/0'::pg_lsn THEN
    RAISE EXCEPTION 'commit_lsn 0/0 is not the commit LSN of a transaction' USING ERRCODE = '22023',
      HINT = 'Pass the commit LSN of the failing source transaction: cdc.subscription_status.last_error_lsn.';
  END IF;
  UPDATE cdc.subscription s SET skip_lsn = commit_lsn WHERE s.name = skip_transaction.name RETURNING subid INTO id;
  IF NOT FOUND THEN PERFORM cdc._no_such_subscription(name); END IF;
  -- a transaction whose commit LSN is before the progress is applied (or
  -- skipped) already: the worker never receives it again, so such a skip
  -- could never happen.  The progress is the end LSN of the last applied
  -- commit, which is the start of the next WAL record: a commit LSN equal
  -- to it is the next transaction, not an applied one (begin_source_xact:
  -- final_lsn < progress; review h2r, TAP 096_skip_at_progress)
  sub_id := id;
  progress := pg_catalog.pg_replication_origin_progress(cdc._origin_name(id), false);
  IF progress IS NOT NULL AND commit_lsn OPERATOR(pg_catalog.<) progress THEN
    RAISE EXCEPTION 'commit LSN % of subscription "%" is before its progress %: that source transaction is applied or skipped already',
      commit_lsn, name, progress USING ERRCODE = '22023',
      HINT = 'Pass the commit LSN of the failing source transaction: cdc.subscription_status.last_error_lsn.';
  END IF;
  -- one open request per subscription (skip_lsn holds one): a second call replaces the first
  UPDATE cdc.skipped_transactions t SET commit_lsn = skip_transaction.commit_lsn, reason = skip_transaction.reason,
         requested_by = current_user
   WHERE t.subid OPERATOR(pg_catalog.=) sub_id AND t.skipped_at IS NULL;
  IF NOT FOUND THEN
    INSERT INTO cdc.skipped_transactions (subid, name, commit_lsn, reason) VALUES (id, name, commit_lsn, reason);
  END IF;
  PERFORM cdc._force_sync_commit();
END $fn$;
COMMENT ON FUNCTION cdc.skip_transaction(text, pg_lsn, text) IS
  'Asks the worker to skip the source transaction with this commit LSN (as shown in cdc.subscription_status.last_error_lsn), recorded in cdc.skipped_transactions. The only way a change is ever skipped. One open request per subscription: a second call replaces the first. Superusers only; commits synchronously. Errors: 42501 not a superuser, 42704 unknown subscription, 22004 NULL name, reason or LSN, 22023 a blank reason, an LSN before the subscription''s progress, or 0/0.';

CREATE FUNCTION cdc.accept_gap(name text, reason text) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  sub cdc.subscription;
  req bigint;
BEGIN
  PERFORM cdc._require_superuser('accept a gap');
  IF reason IS NULL THEN
    RAISE EXCEPTION 'reason must not be NULL' USING ERRCODE = '22004',
      HINT = 'A reason is required to accept a gap in the stream: it is recorded in cdc.accepted_gaps.';
  END IF;
  IF btrim(reason) = '' THEN
    RAISE EXCEPTION 'a reason is required to accept a gap in the stream' USING ERRCODE = '22023';
  END IF;
  SELECT * INTO sub FROM cdc.subscription s WHERE s.name = accept_gap.name FOR UPDATE;
  IF NOT FOUND THEN PERFORM cdc._no_such_subscription(name); END IF;
  IF NOT sub.slot_ready THEN
    RAISE EXCEPTION 'subscription "%" has not finished its initial copy: there is no stream to continue', name
      USING ERRCODE = '55000', HINT = 'The worker copies again by itself; nothing to accept.';
  END IF;
  -- one open request at a time: a second call replaces the reason
  UPDATE cdc.accepted_gaps g SET reason = accept_gap.reason, requested_by = current_user, requested_at = now()
   WHERE g.subid = sub.subid AND g.accepted_at IS NULL
  RETURNING g.id INTO req;
  IF req IS NULL THEN
    INSERT INTO cdc.accepted_gaps (subid, name, reason) VALUES (sub.subid, sub.name, reason) RETURNING id INTO req;
  END IF;
  UPDATE cdc.subscription_state st SET retry_count = 0, updated_at = now() WHERE st.subid = sub.subid;
  PERFORM cdc._force_sync_commit();
  -- the worker acts on the request when it connects: restart a running one
  -- now (the launcher starts a new one), so that no request stays open to
  -- accept a later gap nobody has seen
  PERFORM cdc._stop_worker(sub.subid);
  RETURN req;
END $fn$;
COMMENT ON FUNCTION cdc.accept_gap(text, text) IS
  'Explicit way out of a stream whose continuity the worker cannot prove (state error: the slot is missing, was created again or advanced, or the source failed over; docs/worker.md, "Continuity"). The worker, on its next attempt, continues from the slot it finds (or creates a new one, without copying) and records from_lsn/to_lsn in cdc.accepted_gaps: source transactions in between may be missing here; re-copy the affected tables (cdc.resync_table) to repair them. A running worker is restarted to act on it at once; while the stream is provably continuous the request is closed without skipping anything. Returns the request id. Superusers only; commits synchronously. Errors: 42501 not a superuser, 42704 unknown subscription, 22004 NULL name or reason, 22023 a blank reason, 55000 initial copy not finished.';

CREATE FUNCTION cdc.drop_subscription(name text, drop_slot boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  sub cdc.subscription;
  origin_xmin xid;
BEGIN
  PERFORM cdc._require_superuser('drop a subscription');
  -- NULL was taken as false (no slot dropped)
  IF drop_slot IS NULL THEN
    RAISE EXCEPTION 'drop_slot must not be NULL' USING ERRCODE = '22004';
  END IF;
  SELECT * INTO sub FROM cdc.subscription s WHERE s.name = drop_subscription.name FOR UPDATE;
  IF NOT FOUND THEN PERFORM cdc._no_such_subscription(name); END IF;
  -- waits (10 s at most) for the worker to exit: it must not hold the slot
  -- or the origin when they are dropped; a worker started later reads the
  -- locked row as gone
  PERFORM cdc._stop_worker(sub.subid, 10000);
  DELETE FROM cdc.subscription s WHERE s.subid = sub.subid;
  -- its open skip request can never be carried out: it goes with the
  -- subscription (it stayed pending for ever; review h4, skip_after_drop);
  -- the skips performed stay, as the record of what was skipped
  DELETE FROM cdc.skipped_transactions t WHERE t.subid OPERATOR(pg_catalog.=) sub.subid AND t.skipped_at IS NULL;
  PERFORM cdc._force_sync_commit();
  -- Neither the slot on the source nor the replication origin's progress
  -- (pg_replication_origin_drop clears it in shared memory at once) can
  -- roll back with this transaction: both are dropped when it commits (its
  -- pre-commit), the slot first, with the conninfo and slot name of now
  -- (src/pg/worker/slot_at_commit.cpp).  A ROLLBACK, a failing DO block or
  -- a rolled-back savepoint or procedure drops nothing, so this may run in
  -- a transaction block.  The slot is dropped in every state (the worker
  -- may have created it and not finished its initial copy); one that is not
  -- there (never created) is no error.  The origin's row tells whether the
  -- subscription was created in this transaction: then it has no slot.
  SELECT o.xmin INTO origin_xmin FROM pg_replication_origin o WHERE o.roname = cdc._origin_name(sub.subid);
  PERFORM cdc._drop_at_commit(sub.name, sub.conninfo, CASE WHEN drop_slot THEN sub.slot_name END,
                              cdc._origin_name(sub.subid), origin_xmin);
END $fn$;
COMMENT ON FUNCTION cdc.drop_subscription(text, boolean) IS
  'Stops the worker and drops the subscription with its open skip request (the skips performed stay in cdc.skipped_transactions); when the transaction commits, also its replication origin and, with drop_slot, its slot on the source, in every state of the subscription (also before its initial copy finished; a slot that does not exist is skipped with a NOTICE). Transactional: a ROLLBACK, a failing DO block, a rolled-back savepoint or procedure leaves the subscription, its slot and its progress, so it may run inside a transaction block (unlike DROP SUBSCRIPTION with a slot). Superusers only; commits synchronously. Errors: 42501 not a superuser, 42704 unknown subscription, 22004 NULL name or drop_slot; at COMMIT 08001 source unreachable, 55006 slot in use, 57014 statement_timeout or a cancel while another process holds the slot, aborting the transaction (the subscription stays); 0A000 at PREPARE TRANSACTION with drop_slot.';

CREATE FUNCTION cdc._check_publications_owner(publications text[], owner regrole) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  IF array_position(publications, NULL) IS NOT NULL OR '' = ANY (publications) THEN
    RAISE EXCEPTION 'publication names must not be NULL or empty' USING ERRCODE = '22023';
  END IF;
  -- publication names as CREATE SUBSCRIPTION takes them: each once, and
  -- no longer than a name (no publication can have a longer one: the
  -- worker failed at the source and retried); an owner that is a role (the
  -- worker acts as it); fresh-user review h2, sql/subscription_args.sql
  IF cardinality(publications) <> (SELECT count(DISTINCT p) FROM unnest(publications) p) THEN
    RAISE EXCEPTION 'publication name % used more than once',
      (SELECT quote_literal(p) FROM unnest(publications) p GROUP BY p HAVING count(*) > 1 ORDER BY 1 LIMIT 1)
      USING ERRCODE = '42710';
  END IF;
  IF EXISTS (SELECT 1 FROM unnest(publications) p WHERE octet_length(p) > 63) THEN
    RAISE EXCEPTION 'publication name % is longer than 63 bytes',
      (SELECT quote_literal(left(p, 40) || '...') FROM unnest(publications) p WHERE octet_length(p) > 63 LIMIT 1)
      USING ERRCODE = '42622', HINT = 'A publication''s name is a PostgreSQL name of at most 63 bytes.';
  END IF;
  IF owner IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = owner::oid) THEN
    RAISE EXCEPTION 'owner must be an existing role, got OID %', owner::oid USING ERRCODE = '42704';
  END IF;
END
$fn$;
COMMENT ON FUNCTION cdc._check_publications_owner(text[], regrole) IS
  'Internal (cdc.create_subscription, cdc.alter_subscription): checks the publication names as CREATE SUBSCRIPTION takes them and the owner. Publications NULL (alter: unchanged) and owner NULL pass. Errors: 22023 a NULL or empty name, 42710 a name given twice, 42622 a name longer than 63 bytes, 42704 an owner OID that is no role (''-'', a dropped role''s OID).';

CREATE FUNCTION cdc._check_conninfo(conninfo text) RETURNS void
LANGUAGE c STRICT IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_check_conninfo';
COMMENT ON FUNCTION cdc._check_conninfo(text) IS 'Internal (cdc.create_subscription, cdc.alter_subscription): refuses a conninfo libpq cannot parse (PQconninfoParse, as CREATE SUBSCRIPTION checks its CONNECTION); a bare word, which libpq''s connect functions would take for a database name, is refused, and so is a conninfo that sets no parameter (empty, blank, a bare postgresql://: libpq would connect with its defaults). Connects nowhere. Errors: 22P02 with libpq''s reason, 22023 no parameter set.';

CREATE FUNCTION cdc._create_source_slot(subid integer) RETURNS void
LANGUAGE c STRICT VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_create_source_slot';
COMMENT ON FUNCTION cdc._create_source_slot(integer) IS 'Internal (cdc.create_subscription with copy_data => false): the subscription''s logical replication slot is created on the source when the calling transaction commits (its pre-commit: connects with libpq, CREATE_REPLICATION_SLOT ... LOGICAL pgoutput, SNAPSHOT ''export'', waiting interruptibly under the committing statement''s statement_timeout), with the conninfo, slot_name and publications of the subscription''s row as the transaction leaves it (none when the row is gone), and its consistent point written to cdc.subscription.slot_created_lsn, with the tables the publications published at that point (read on a second connection in the slot''s snapshot) and their source OIDs in cdc.subscription_rel (when a publication did not exist then: none, and refresh_pending set, with a NOTICE); a slot made there is dropped again if the transaction then aborts. Nothing is made when the transaction, or the subtransaction that called it, rolls back. Errors: 42501 not a superuser; at COMMIT 08001 connection failure, the source''s SQLSTATE otherwise (42710 a slot of that name exists), aborting the transaction; 0A000 at PREPARE TRANSACTION.';

CREATE FUNCTION cdc._drop_at_commit(name text, conninfo text, slot_name name, origin text, origin_xmin xid) RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_drop_at_commit';
COMMENT ON FUNCTION cdc._drop_at_commit(text, text, name, text, xid) IS 'Internal (cdc.drop_subscription): when the calling transaction commits (its pre-commit), drops the logical replication slot slot_name on the source over conninfo (unless slot_name is NULL: connects with libpq, DROP_REPLICATION_SLOT ... WAIT, waiting interruptibly under the committing statement''s statement_timeout; a slot that does not exist is skipped with a NOTICE), then the replication origin origin (if it exists). origin_xmin is the xmin of the origin''s row: a subscription created in the same transaction has no slot to drop. Nothing is dropped when the transaction, or the subtransaction that called it, rolls back. name is the subscription''s, for messages. Errors: 42501 not a superuser; at COMMIT 08001 connection failure, 55006 the slot in use, 57014 a cancel or statement_timeout, aborting the transaction; 0A000 at PREPARE TRANSACTION with a slot to drop.';

CREATE FUNCTION cdc._publication_tables(conninfo text, publications text[])
RETURNS TABLE (schema_name text, table_name text)
LANGUAGE c STRICT VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_publication_tables';
COMMENT ON FUNCTION cdc._publication_tables(text, text[]) IS
  'Internal: connects to the source with libpq (the worker''s session settings) and returns the tables the publications publish, as pgoutput names them (pg_publication_tables: leaf partitions, or the root with publish_via_partition_root). Errors: 08001 connection failure, the source''s error otherwise (42704 unknown publication).';

CREATE FUNCTION cdc._reconcile_tables(subid integer, schema_names text[], table_names text[], copy_data boolean)
RETURNS TABLE (schema_name text, table_name text, action text)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
  WITH published AS (
    SELECT DISTINCT p.n, p.t FROM unnest($2, $3) AS p(n, t)
  ), removed AS (
    DELETE FROM cdc.subscription_rel r
     WHERE r.subid = $1
       AND NOT EXISTS (SELECT 1 FROM published p WHERE p.n = r.schema_name AND p.t = r.table_name)
    RETURNING r.schema_name, r.table_name
  ), added AS (
    INSERT INTO cdc.subscription_rel (subid, schema_name, table_name, state)
    SELECT $1, p.n, p.t, CASE WHEN $4 THEN 'init' ELSE 'ready' END
      FROM published p
     WHERE NOT EXISTS (SELECT 1 FROM cdc.subscription_rel r WHERE r.subid = $1 AND r.schema_name = p.n AND r.table_name = p.t)
    RETURNING subscription_rel.schema_name, subscription_rel.table_name
  )
  SELECT a.schema_name, a.table_name, 'added' FROM added a
  UNION ALL
  SELECT d.schema_name, d.table_name, 'removed' FROM removed d
  ORDER BY 1, 2, 3
$fn$;
COMMENT ON FUNCTION cdc._reconcile_tables(integer, text[], text[], boolean) IS
  'Internal: makes the subscription''s tables (cdc.subscription_rel) the given published tables: new ones are added as init (copy_data: the worker copies them) or ready (no copy), tables no longer published are removed. Returns each added or removed table.';

CREATE FUNCTION cdc.refresh_subscription(name text, copy_data boolean DEFAULT true)
RETURNS TABLE (schema_name text, table_name text, action text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  sub cdc.subscription;
  names text[];
  tables text[];
  changed bigint;
BEGIN
  PERFORM cdc._require_superuser('refresh a subscription');
  IF copy_data IS NULL THEN
    RAISE EXCEPTION 'copy_data must not be NULL' USING ERRCODE = '22004';
  END IF;
  SELECT * INTO sub FROM cdc.subscription s WHERE s.name = refresh_subscription.name FOR UPDATE;
  IF NOT FOUND THEN PERFORM cdc._no_such_subscription(name); END IF;
  SELECT coalesce(array_agg(p.schema_name), '{}'), coalesce(array_agg(p.table_name), '{}') INTO names, tables
    FROM cdc._publication_tables(sub.conninfo, sub.publications) p;
  RETURN QUERY SELECT * FROM cdc._reconcile_tables(sub.subid, names, tables, copy_data);
  GET DIAGNOSTICS changed = ROW_COUNT;
  UPDATE cdc.subscription s SET refresh_pending = false WHERE s.subid = sub.subid;
  PERFORM cdc._force_sync_commit();
  IF changed > 0 THEN
    PERFORM cdc._stop_worker(sub.subid);
  END IF;
END $fn$;
COMMENT ON FUNCTION cdc.refresh_subscription(text, boolean) IS
  'REFRESH PUBLICATION of a subscription: reads the tables its publications publish now (connecting to the source) and adds the new ones to cdc.subscription_rel, removes those no longer published, and restarts the worker if anything changed. With copy_data (default) an added table is copied at the snapshot of a temporary slot and joins the stream there (its changes committed before the copy''s point are skipped, later ones applied); the other tables are not copied again. Without copy_data its changes are applied from the worker''s position on. Until then, changes of a published table that is not part of the subscription are not applied. Returns each added and removed table. Superusers only; commits synchronously. Errors: 42501 not a superuser, 42704 unknown subscription, 22004 NULL name, 22004 copy_data NULL, 08001 source unreachable.';

CREATE FUNCTION cdc.resync_table(name text, target regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  sub cdc.subscription;
  src_schema text;
  src_table text;
BEGIN
  PERFORM cdc._require_superuser('resync a table');
  IF target IS NULL THEN
    RAISE EXCEPTION 'target must not be NULL' USING ERRCODE = '22004';
  END IF;
  -- OID 0 ('-') or a dropped table's OID: the relkind below is NULL and let it
  -- through to 55000 'table <NULL>.<NULL> is not published' (review h4)
  IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = resync_table.target) THEN
    RAISE EXCEPTION 'target relation with OID % does not exist', target::oid USING ERRCODE = '42P01',
      HINT = 'Pass the destination table to copy again.';
  END IF;
  IF (SELECT c.relkind FROM pg_class c WHERE c.oid = resync_table.target) NOT IN ('r', 'p') THEN
    RAISE EXCEPTION '"%" is not a table', target::text USING ERRCODE = '42809',
      HINT = 'cdc.resync_table copies into a table or a partitioned table.';
  END IF;
  SELECT * INTO sub FROM cdc.subscription s WHERE s.name = resync_table.name FOR UPDATE;
  IF NOT FOUND THEN PERFORM cdc._no_such_subscription(name); END IF;
  -- the source table feeding the target: its mapping for this subscription, else its own schema and name
  SELECT m.source_schema, m.source_table INTO src_schema, src_table
    FROM cdc.mapping m WHERE m.target = resync_table.target AND (m.source_name IS NULL OR m.source_name = sub.name);
  IF NOT FOUND THEN
    SELECT n.nspname, c.relname INTO src_schema, src_table
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = resync_table.target;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM cdc._publication_tables(sub.conninfo, sub.publications) p
                  WHERE p.schema_name = src_schema AND p.table_name = src_table) THEN
    RAISE EXCEPTION 'table %.% is not published by subscription "%"', src_schema, src_table, sub.name
      USING ERRCODE = '55000', DETAIL = format('Its publications are %s.', array_to_string(sub.publications, ', ')),
            HINT = 'Add the table to a publication on the source, then call cdc.refresh_subscription.';
  END IF;
  INSERT INTO cdc.subscription_rel AS r (subid, schema_name, table_name, state)
  VALUES (sub.subid, src_schema, src_table, 'init')
  ON CONFLICT (subid, schema_name, table_name)
  DO UPDATE SET state = 'init', sync_lsn = NULL, copied_rows = NULL, updated_at = now();
  PERFORM cdc._force_sync_commit();
  PERFORM cdc._stop_worker(sub.subid);
END $fn$;
COMMENT ON FUNCTION cdc.resync_table(text, regclass) IS
  'Copies one table of a subscription again (for example a destination table dropped and created again), without copying the others: the worker restarts, copies the source table feeding target (per cdc.mapping, else the same schema and name) at the snapshot of a temporary slot, and the stream joins it there (its changes committed before the copy''s point are skipped). Rows the destination has and the source no longer has are not removed: truncate the target first if it may hold such rows. Superusers only; commits synchronously. Errors: 42501 not a superuser, 42704 unknown subscription, 22004 NULL name or target, 42P01 target names no relation (OID 0, a dropped table), 42809 target not a table or partitioned table, 55000 the source table is not published by the subscription''s publications, 08001 source unreachable.';

-- The engine writes its bookkeeping as the extension owner; nobody else
-- writes these tables directly.  Reading state is open to everyone.
REVOKE ALL ON ALL TABLES IN SCHEMA cdc FROM PUBLIC;
GRANT USAGE ON SCHEMA cdc TO PUBLIC;
GRANT SELECT ON cdc.stats, cdc.entities, cdc.tombstones, cdc.stream_marks, cdc.mapping, cdc.source, cdc.horizon_status, cdc.ledger, cdc.ledger_partition, cdc.ledger_range, cdc.stream_mark TO PUBLIC;
REVOKE ALL ON FUNCTION cdc.prune(integer, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text, bigint, text, text, text, regprocedure, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.unregister_mapping(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.set_ordering(regclass, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cdc._fold_into_stream_mark(regclass) TO PUBLIC;
-- checks itself that its caller may execute the function it serves
GRANT EXECUTE ON FUNCTION cdc._write_mapping(text, regclass, cdc.mapping) TO PUBLIC;
REVOKE ALL ON FUNCTION cdc._drop_target_state() FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._guard_extension_drop() FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.create_history_table(text, regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.outbox_mark_published(bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.outbox_claim(integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.outbox_delete(bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.create_subscription(text, text, text[], name, boolean, boolean, boolean, bigint, regrole, boolean, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.alter_subscription(text, text, text[], bigint, regrole, boolean, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.refresh_subscription(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.resync_table(text, regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._publication_tables(text, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._check_conninfo(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._check_publications_owner(text[], regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._reconcile_tables(integer, text[], text[], boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._stop_worker(integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._stop_subscription_workers(integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.enable_subscription(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.disable_subscription(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.skip_transaction(text, pg_lsn, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.drop_subscription(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.accept_gap(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._drop_at_commit(text, text, name, text, xid) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._create_source_slot(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._force_sync_commit() FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._note_subscription_database() FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc.rename_source(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._rekey_entities(regclass, name[], name[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._rekey_pairs(regclass, name[], name[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._invalidate_target() FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._invalidate_dictionary() FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._subscription_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._subscription_changed() FROM PUBLIC;
GRANT SELECT ON cdc.subscription_status TO PUBLIC;
-- the error history quotes what last_error quotes: for the readers of other sessions' query texts
GRANT SELECT ON cdc.subscription_errors TO pg_read_all_stats;
GRANT SELECT ON cdc.subscription_tables TO PUBLIC;

-- ---------------------------------------------------------------------------
-- Audit and repair (SPEC §8; docs/audit.md): cdc.audit compares a
-- subscription's destination tables with the source by hashes over key
-- ranges at a known source position; cdc.resync repairs the keys that
-- differ through the apply engine.  Both are procedures that commit after
-- every page, so neither holds a long transaction on the destination.
-- ---------------------------------------------------------------------------
CREATE TABLE cdc.audit_runs (
  id             bigserial PRIMARY KEY,
  kind           text NOT NULL CHECK (kind IN ('audit', 'resync')),
  subscription   text NOT NULL,
  target         regclass,
  of_audit       bigint,
  current_target regclass,
  source_lsn     pg_lsn,
  pid            integer NOT NULL DEFAULT pg_catalog.pg_backend_pid(),
  requested_by   name NOT NULL DEFAULT CURRENT_USER,
  started_at     timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  updated_at     timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  finished_at    timestamptz,
  tables_total   integer NOT NULL DEFAULT 0,
  tables_done    integer NOT NULL DEFAULT 0,
  rows_estimate  bigint NOT NULL DEFAULT 0,
  rows_done      bigint NOT NULL DEFAULT 0,
  ranges_done    bigint NOT NULL DEFAULT 0,
  findings       bigint NOT NULL DEFAULT 0,
  unsettled      bigint NOT NULL DEFAULT 0,
  repaired       bigint NOT NULL DEFAULT 0,
  unchanged      bigint NOT NULL DEFAULT 0
);
COMMENT ON TABLE cdc.audit_runs IS
  'One row per cdc.audit or cdc.resync call, updated after every page (committed, so other sessions see the progress); read it through cdc.audit_status.';
COMMENT ON COLUMN cdc.audit_runs.id IS 'Run id: the audit_id of cdc.audit_findings, the audit argument of cdc.resync.';
COMMENT ON COLUMN cdc.audit_runs.kind IS 'audit or resync.';
COMMENT ON COLUMN cdc.audit_runs.subscription IS 'The subscription whose tables are compared or repaired.';
COMMENT ON COLUMN cdc.audit_runs.target IS 'The table asked for; NULL: every table of the subscription (or of the audit''s findings).';
COMMENT ON COLUMN cdc.audit_runs.of_audit IS 'A resync of the findings of this audit run.';
COMMENT ON COLUMN cdc.audit_runs.current_target IS 'The table being worked on.';
COMMENT ON COLUMN cdc.audit_runs.source_lsn IS 'The source position the current comparison is made at: the consistent point of the temporary slot whose snapshot is read.';
COMMENT ON COLUMN cdc.audit_runs.pid IS 'The backend running it.';
COMMENT ON COLUMN cdc.audit_runs.requested_by IS 'The role that called it.';
COMMENT ON COLUMN cdc.audit_runs.started_at IS 'When it started.';
COMMENT ON COLUMN cdc.audit_runs.updated_at IS 'When it last wrote its progress.';
COMMENT ON COLUMN cdc.audit_runs.finished_at IS 'When it finished; NULL while it runs (or after it failed: cdc.audit_status tells).';
COMMENT ON COLUMN cdc.audit_runs.tables_total IS 'Tables to compare.';
COMMENT ON COLUMN cdc.audit_runs.tables_done IS 'Tables compared.';
COMMENT ON COLUMN cdc.audit_runs.rows_estimate IS 'Source rows to compare, estimated (the tables'' pg_class.reltuples on the source; for a resync of keys, their number).';
COMMENT ON COLUMN cdc.audit_runs.rows_done IS 'Source rows compared so far (keys, for a resync of keys).';
COMMENT ON COLUMN cdc.audit_runs.ranges_done IS 'Key ranges hashed on both sides so far: pages and the halves of bisected ranges.';
COMMENT ON COLUMN cdc.audit_runs.findings IS 'Keys found to differ and recorded in cdc.audit_findings.';
COMMENT ON COLUMN cdc.audit_runs.unsettled IS 'Keys that differed but that the stream kept changing through every re-check: not reported.';
COMMENT ON COLUMN cdc.audit_runs.repaired IS 'Resync: keys written through the engine (outcome applied).';
COMMENT ON COLUMN cdc.audit_runs.unchanged IS 'Resync: keys left as they were (equal to the source, or changed by the stream after the snapshot, or not applied by the engine: stale, duplicate, conflict).';

CREATE TABLE cdc.audit_findings (
  id             bigserial PRIMARY KEY,
  audit_id       bigint NOT NULL REFERENCES cdc.audit_runs ON DELETE CASCADE,
  subscription   text NOT NULL,
  target         regclass NOT NULL,
  key            jsonb NOT NULL,
  kind           text NOT NULL CHECK (kind IN ('missing', 'extra', 'different')),
  source_hash    text,
  dest_hash      text,
  source_lsn     pg_lsn NOT NULL,
  detail         text,
  found_at       timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  repaired_at    timestamptz,
  repair_outcome text,
  repair_lsn     pg_lsn
);
CREATE INDEX audit_findings_audit_idx ON cdc.audit_findings (audit_id, target);
COMMENT ON INDEX cdc.audit_findings_audit_idx IS 'The findings of an audit, per table (cdc.resync(..., audit => id)).';
COMMENT ON TABLE cdc.audit_findings IS
  'Keys where a subscription''s destination table differs from the source, as cdc.audit found and re-checked them: each still differed at a source snapshot taken after the destination had applied the stream up to it, and the stream had not changed it since. cdc.resync(..., audit => id) repairs them.';
COMMENT ON COLUMN cdc.audit_findings.id IS 'Insertion order.';
COMMENT ON COLUMN cdc.audit_findings.audit_id IS 'The audit run (cdc.audit_runs).';
COMMENT ON COLUMN cdc.audit_findings.subscription IS 'The subscription.';
COMMENT ON COLUMN cdc.audit_findings.target IS 'The destination table.';
COMMENT ON COLUMN cdc.audit_findings.key IS 'The entity key, {"column": "value"} as in cdc.entities.';
COMMENT ON COLUMN cdc.audit_findings.kind IS 'missing: the source publishes the row, the destination lacks it; extra: the destination has a row the source does not publish (absent there or outside the row filter); different: both have it with other contents.';
COMMENT ON COLUMN cdc.audit_findings.source_hash IS 'md5 of the source row''s canonical text (docs/audit.md, "The row hash"); NULL when the source has no row with this key.';
COMMENT ON COLUMN cdc.audit_findings.dest_hash IS 'md5 of the destination row''s canonical text; NULL when it has none.';
COMMENT ON COLUMN cdc.audit_findings.source_lsn IS 'The source position of the re-check that confirmed the finding.';
COMMENT ON COLUMN cdc.audit_findings.detail IS 'For extra rows: whether the source has no such row or one outside the publication''s row filter.';
COMMENT ON COLUMN cdc.audit_findings.found_at IS 'When it was confirmed.';
COMMENT ON COLUMN cdc.audit_findings.repaired_at IS 'When cdc.resync(..., audit => audit_id) handled it; NULL until then.';
COMMENT ON COLUMN cdc.audit_findings.repair_outcome IS 'What the resync did: applied (written through the engine), equal (already equal at its snapshot), newer (the stream changed it after that snapshot), kept (a row the source no longer publishes, of a table whose publications never delete rows: publish = ''insert'' or ''insert, update'' without a row filter), or the engine''s outcome when it did not apply (stale, duplicate, conflict, expired).';
COMMENT ON COLUMN cdc.audit_findings.repair_lsn IS 'The source position the resync read the key at.';

CREATE VIEW cdc.audit_status AS
  SELECT r.id, r.kind, r.subscription, r.target, r.of_audit, r.current_target,
         -- running: its backend still runs the statement that started it
         CASE WHEN r.finished_at IS NOT NULL THEN 'done'
              WHEN a.pid IS NOT NULL AND a.state IS NULL THEN 'unknown'
              WHEN a.state OPERATOR(pg_catalog.=) 'active' AND a.query_start OPERATOR(pg_catalog.<=) r.started_at THEN 'running'
              ELSE 'failed' END AS state,
         r.source_lsn, r.tables_done, r.tables_total, r.rows_done, r.rows_estimate,
         CASE WHEN r.rows_estimate OPERATOR(pg_catalog.>) 0
              THEN pg_catalog.round(least(100::pg_catalog.numeric, 100::pg_catalog.numeric OPERATOR(pg_catalog.*) r.rows_done OPERATOR(pg_catalog./) r.rows_estimate), 1) END AS percent,
         r.ranges_done,
         pg_catalog.round((r.rows_done::pg_catalog.float8 OPERATOR(pg_catalog./) greatest(
             EXTRACT(epoch FROM coalesce(r.finished_at, r.updated_at) OPERATOR(pg_catalog.-) r.started_at)::pg_catalog.float8, 0.001))::pg_catalog.numeric, 1) AS rows_per_second,
         CASE WHEN r.finished_at IS NULL AND r.rows_done OPERATOR(pg_catalog.>) 0 AND r.rows_estimate OPERATOR(pg_catalog.>) r.rows_done
              THEN pg_catalog.make_interval(secs => (r.rows_estimate OPERATOR(pg_catalog.-) r.rows_done)::pg_catalog.float8
                     OPERATOR(pg_catalog.*) EXTRACT(epoch FROM r.updated_at OPERATOR(pg_catalog.-) r.started_at)::pg_catalog.float8
                     OPERATOR(pg_catalog./) r.rows_done::pg_catalog.float8) END AS time_left,
         r.findings, r.unsettled, r.repaired, r.unchanged,
         r.started_at, r.updated_at, r.finished_at,
         coalesce(r.finished_at, r.updated_at) OPERATOR(pg_catalog.-) r.started_at AS elapsed,
         r.requested_by
    FROM cdc.audit_runs r
    LEFT JOIN pg_catalog.pg_stat_activity a
      ON a.pid OPERATOR(pg_catalog.=) r.pid AND a.backend_start OPERATOR(pg_catalog.<=) r.started_at;
COMMENT ON VIEW cdc.audit_status IS
  'Progress of cdc.audit and cdc.resync calls (of_audit: the audit whose findings a resync repairs): state (running; done; failed when it stopped without finishing: an error, a cancel, its backend gone; unknown for a role that may not see the backend''s state in pg_stat_activity), the table being compared and the source position, tables and source rows done of the estimate, percent, rows per second so far, time left at that rate, key ranges hashed, findings, unsettled keys, keys repaired or left alone. Readable by every role (no row data).';

CREATE FUNCTION cdc.range_hash_sql(schema_name text, table_name text, columns text[], key_columns text[],
                                   after text[] DEFAULT NULL, up_to text[] DEFAULT NULL, row_filter text DEFAULT NULL,
                                   only_table boolean DEFAULT true)
RETURNS text
LANGUAGE c IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_range_hash_sql';
COMMENT ON FUNCTION cdc.range_hash_sql(text, text, text[], text[], text[], text[], text, boolean) IS
  'The statement computing the range hash of table schema_name.table_name: rows and hash (the sum of the first 64 bits of md5(convert_to(ROW(columns)::text, ''UTF8'')) of every row with key_columns in (after, up_to], NULL bounds unbounded, as signed integers), restricted by row_filter, over FROM ONLY unless only_table is false (a partitioned table). It uses only md5, convert_to, substr, textcat, casts, count and sum, qualified: run it on any PostgreSQL source with DateStyle ISO, IntervalStyle postgres, extra_float_digits 3, TimeZone UTC, bytea_output hex and lc_monetary C (docs/audit.md). cdc.audit sends the same statements. Errors: 22004 a NULL name, column, key column or only_table (row_filter NULL: no filter), 22023 empty columns or key_columns, or a bound with another number of values than key_columns.';

CREATE FUNCTION cdc.range_hash(target regclass, after text[] DEFAULT NULL, up_to text[] DEFAULT NULL,
                               columns name[] DEFAULT NULL, key_columns name[] DEFAULT NULL)
RETURNS TABLE (rows bigint, hash numeric)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET datestyle = 'ISO'
SET intervalstyle = 'postgres'
SET extra_float_digits = 3
SET timezone = 'UTC'
SET bytea_output = 'hex'
SET lc_monetary = 'C'
AS $fn$
DECLARE
  rel   record;
  cols  text[];
  keys  text[];
  bound record;
  typ   text;
BEGIN
  IF target IS NULL THEN
    RAISE EXCEPTION 'target must not be NULL' USING ERRCODE = '22004';
  END IF;
  SELECT n.nspname::text AS nsp, c.relname::text AS name, c.relkind INTO rel
    FROM pg_class c JOIN pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
   WHERE c.oid OPERATOR(pg_catalog.=) target;
  -- OID 0 or a dropped table's: 42P01, as cdc_apply() and cdc.audit say it (it was '- is not a table', review h3)
  IF NOT FOUND THEN
    RAISE EXCEPTION 'target relation with OID % does not exist', target::pg_catalog.oid USING ERRCODE = '42P01';
  END IF;
  IF rel.relkind NOT IN ('r', 'p') THEN
    RAISE EXCEPTION '% is not a table', target USING ERRCODE = '42809';
  END IF;
  -- default: every column the table does not generate, in attribute order
  cols := coalesce(columns::text[],
                   (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
                     WHERE a.attrelid OPERATOR(pg_catalog.=) target AND a.attnum OPERATOR(pg_catalog.>) 0
                       AND NOT a.attisdropped AND a.attgenerated OPERATOR(pg_catalog.=) ''));
  -- default: the mapping's key_columns, else the primary key
  keys := coalesce(key_columns::text[],
                   (SELECT m.key_columns::text[] FROM cdc.mapping m WHERE m.target OPERATOR(pg_catalog.=) range_hash.target),
                   (SELECT array_agg(a.attname::text ORDER BY k.n)
                      FROM pg_index i, unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n), pg_attribute a
                     WHERE i.indrelid OPERATOR(pg_catalog.=) target AND i.indisprimary
                       AND a.attrelid OPERATOR(pg_catalog.=) i.indrelid AND a.attnum OPERATOR(pg_catalog.=) k.attnum));
  IF keys IS NULL THEN
    RAISE EXCEPTION 'table % has no primary key', target USING ERRCODE = '42P10',
      HINT = 'Pass key_columns.';
  END IF;
  -- each bound value read as its key column's type first: else a value the
  -- type refuses failed inside the statement below, with a LINE pointer into
  -- it, naming neither the argument nor the column (fresh-user review h3)
  FOR bound IN SELECT v.arg, v.vals FROM (VALUES ('after', after), ('up_to', up_to)) v(arg, vals) WHERE v.vals IS NOT NULL LOOP
    FOR i IN 1 .. least(pg_catalog.cardinality(bound.vals), pg_catalog.cardinality(keys)) LOOP
      typ := (SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
               WHERE a.attrelid OPERATOR(pg_catalog.=) target AND a.attname OPERATOR(pg_catalog.=) keys[i] AND NOT a.attisdropped);
      CONTINUE WHEN typ IS NULL OR bound.vals[i] IS NULL;  -- an unknown column or a NULL: range_hash_sql and the statement say so
      BEGIN
        EXECUTE pg_catalog.format('SELECT %L::%s', bound.vals[i], typ);
      EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION '%[%]: key column "%" of type %: %', bound.arg, i, keys[i], typ, SQLERRM USING ERRCODE = SQLSTATE;
      END;
    END LOOP;
  END LOOP;
  RETURN QUERY EXECUTE cdc.range_hash_sql(rel.nsp, rel.name, cols, keys, after, up_to, NULL, rel.relkind OPERATOR(pg_catalog.=) 'r');
END
$fn$;
COMMENT ON FUNCTION cdc.range_hash(regclass, text[], text[], name[], name[]) IS
  'The range hash of a destination table (docs/audit.md, "The row hash"): rows and hash of the rows with key in (after, up_to] (key values as text, in key order; NULL: unbounded), over columns (default: every column the table does not generate, in attribute order) and key_columns (default: the mapping''s, else the primary key), computed by the statement cdc.range_hash_sql() returns, under the settings that statement needs. Run that statement on a PostgreSQL source with the same columns to compare. Errors: 22004 NULL target, 42P01 target names no relation (OID 0, a dropped table), 42809 not a table, 42P10 no key, a bound value its key column''s type refuses (the input function''s SQLSTATE, 22P02 for example; the message names the argument, the value''s place and the column), and those of cdc.range_hash_sql and of the statement (42703 unknown column).';

CREATE PROCEDURE cdc.audit(
  subscription  text,
  target        regclass DEFAULT NULL,
  page_rows     integer  DEFAULT 10000,
  leaf_rows     integer  DEFAULT 16384,
  wait_timeout  interval DEFAULT '5 min',
  INOUT audit_id bigint  DEFAULT NULL,
  INOUT findings bigint  DEFAULT NULL)
LANGUAGE c
AS 'MODULE_PATHNAME', 'cdc_audit';
COMMENT ON PROCEDURE cdc.audit(text, regclass, integer, integer, interval, bigint, bigint) IS
  'Compares the destination tables of a subscription (or only target) with the source, over a connection of its own with the subscription''s conninfo: per table, a snapshot of the source at the consistent point S of a temporary slot; waits (up to wait_timeout) until the worker has applied the stream up to S; hashes pages of page_rows source rows in key order on both sides (only the published columns and rows: column lists, row filters), bisects pages that differ until a range holds at most leaf_rows rows of both sides together, whose keys and row hashes it then compares, and re-checks those keys at a newer snapshot once the destination caught up again, so that only keys that still differ and that the stream did not change since are recorded in cdc.audit_findings. Commits after every page (no long transaction on the destination); cdc.audit_max_rows_per_second caps its rate; progress in cdc.audit_status and a NOTICE every 5 s. CALL it outside a transaction block; superusers only. Returns the run id and the number of findings. Errors: 22004 NULL subscription, page_rows, leaf_rows or wait_timeout (target NULL: every table), 22023 page_rows or leaf_rows < 1 or negative wait_timeout, 25001 in a transaction block, 42501 not a superuser, 42704 unknown subscription, 55000 initial copy not finished, subscription disabled, worker not at S within wait_timeout, or table not published, 0A000 history table, key type without built-in ordering or keys ordered differently on the two sides, 42P10 no key, 42703 a published column the destination lacks, 08001 source unreachable.';

CREATE PROCEDURE cdc.resync(
  subscription  text,
  target        regclass DEFAULT NULL,
  keys          jsonb    DEFAULT NULL,
  from_key      jsonb    DEFAULT NULL,
  to_key        jsonb    DEFAULT NULL,
  audit         bigint   DEFAULT NULL,
  page_rows     integer  DEFAULT 10000,
  leaf_rows     integer  DEFAULT 16384,
  wait_timeout  interval DEFAULT '5 min',
  INOUT resync_id bigint DEFAULT NULL,
  INOUT repaired  bigint DEFAULT NULL)
LANGUAGE c
AS 'MODULE_PATHNAME', 'cdc_resync';
COMMENT ON PROCEDURE cdc.resync(text, regclass, jsonb, jsonb, jsonb, bigint, integer, integer, interval, bigint, bigint) IS
  'Repairs what differs between the source and a destination table of a subscription: keys (a JSON array of keys, {"column": "value"} or bare values for a one-column key), or every key in [from_key, to_key] (NULL: unbounded; the whole table when both are NULL and keys is NULL; compared in pages of page_rows source rows, bisected down to leaf_rows as by cdc.audit), or with audit every finding of that audit not repaired yet (of target only, when given). Reads the keys at one source snapshot S (a temporary slot''s consistent point), once the worker has applied the stream up to S, compares them with the destination, and applies only those that differ through the apply engine: a published row as a snapshot row (op r) versioned {epoch, S, 0, 0}, a key the snapshot does not publish as a delete at S; a newer streamed change still wins, an older re-delivery stays stale. Writes entity records, tombstones, ledger rows and counters (snapshot_rows) as the engine does; no outbox rows; handlers are called with meta.is_snapshot = true. Marks the audit''s findings with the outcome. Commits after every batch of keys; CALL it outside a transaction block; superusers only. Returns the run id and the number of keys written. Errors: 22004 NULL subscription, page_rows, leaf_rows or wait_timeout, or NULL target without audit (after 42704 for an unknown subscription), 42P01 a target of OID 0 or of no relation, 22023 conflicting arguments, a malformed key, page_rows or leaf_rows < 1, 42704 unknown subscription or audit, 0A000 a history table or a mapping ordered by a version column, and those of cdc.audit.';

REVOKE ALL ON cdc.audit_runs, cdc.audit_findings FROM PUBLIC;
GRANT SELECT ON cdc.audit_status TO PUBLIC;
REVOKE ALL ON PROCEDURE cdc.audit(text, regclass, integer, integer, interval, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON PROCEDURE cdc.resync(text, regclass, jsonb, jsonb, jsonb, bigint, integer, integer, interval, bigint, bigint) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Operations (issue 14, sections 3-5; docs/operations.md): counters in
-- shared memory that survive rollbacks, the rates operators alert on, the
-- progress of long copies and of pruning, and the launcher's notice of this
-- database.  Counts, SQLSTATEs, table names and LSNs only: readable by
-- every role.  Every expression is qualified (pg_catalog functions and
-- operators), as the whole script runs with search_path = pg_catalog.
-- ---------------------------------------------------------------------------
CREATE FUNCTION cdc._notify_launcher() RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_notify_launcher';
COMMENT ON FUNCTION cdc._notify_launcher() IS
  'Internal: after the current transaction commits, the cdc_apply launcher looks at this database at once (called at the end of this install script, so that CREATE EXTENSION makes the database served without waiting for cdc.naptime; docs/worker.md, "Every database"). A no-op without shared_preload_libraries.';

CREATE FUNCTION cdc._call_stats()
RETURNS TABLE (function text, sqlstate text, count bigint, since timestamptz)
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_call_stats';
COMMENT ON FUNCTION cdc._call_stats() IS
  'Internal: the shared-memory call counters of this database: per entry point (cdc_apply, cdc_apply_batch) a row with sqlstate NULL counting its calls and one per SQLSTATE counting its failed calls (at most 32 SQLSTATEs per entry point and database, the failures of any other under sqlstate ''other''), with the time counting began (creation or cdc.reset_shared_stats()). No rows without shared_preload_libraries. Read through cdc.call_stats and cdc.failed_calls.';

CREATE FUNCTION cdc._worker_stats()
RETURNS TABLE (subid integer, errors bigint, errors_by_sqlstate jsonb, retries bigint, group_retries bigint, xacts bigint,
               latency_sum_seconds double precision, latency_buckets bigint[], latency_p50_ms double precision,
               latency_p99_ms double precision, since timestamptz)
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_worker_stats';
COMMENT ON FUNCTION cdc._worker_stats() IS
  'Internal: the shared-memory counters of the apply workers of this database, per subscription id: errors (and by SQLSTATE), starts after an error, failed groups retried one by one, applied source transactions, the sum of their apply latencies and their histogram (latency_buckets[k] counts latencies of at most 2^(k-1) ms and more than the bucket before, k = 1..19; [20] the rest), the upper bounds of the buckets holding the median and the 99th percentile. No rows without shared_preload_libraries. Read through cdc.worker_stats and cdc.apply_latency.';

CREATE FUNCTION cdc._shared_stats_status()
RETURNS TABLE (available boolean, call_entries integer, call_capacity integer, subscription_entries integer,
               subscription_capacity integer, lost bigint)
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_shared_stats_status';
COMMENT ON FUNCTION cdc._shared_stats_status() IS
  'Internal: whether the shared counters exist (cdc_apply in shared_preload_libraries), how many entries of their tables are used (all databases) and how many counts were lost because a table was full. Read through cdc.shared_stats.';

CREATE FUNCTION cdc._copy_progress()
RETURNS TABLE (subid integer, worker_pid integer, schema_name text, table_name text, state text, rows_copied bigint,
               bytes_copied bigint, rows_estimated bigint, percent double precision, rows_per_second double precision,
               seconds_left double precision, started_at timestamptz, finished_at timestamptz)
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_copy_progress';
COMMENT ON FUNCTION cdc._copy_progress() IS
  'Internal: the table copy of each apply worker of this database, from shared memory: running (copying) or the last one it finished (done), rows and bytes received so far (updated every 1,000 rows), the source planner''s estimate of the rows (NULL unknown), percent (below 100 until done), rate and seconds left. No rows without shared_preload_libraries. Read through cdc.copy_progress.';

CREATE FUNCTION cdc.reset_shared_stats() RETURNS timestamptz
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'cdc_reset_shared_stats';
COMMENT ON FUNCTION cdc.reset_shared_stats() IS
  'Zeroes this database''s counters in shared memory (cdc.call_stats, cdc.failed_calls, cdc.worker_stats, cdc.apply_latency, and each worker''s count of errors in a row it could not record, from which its backoff grows) and returns the time of the reset, their new since; the transactional cdc.stats is not touched. NULL without shared_preload_libraries. EXECUTE is revoked from PUBLIC: grant it (to pg_monitor, say) as pg_stat_statements_reset is granted. No errors.';

CREATE VIEW cdc.shared_stats AS
  SELECT s.available,
         CASE WHEN NOT s.available
              THEN 'cdc_apply is not in shared_preload_libraries: calls, failed calls, worker errors, apply latency and copy progress are not counted'
         END AS note,
         s.call_entries, s.call_capacity, s.subscription_entries, s.subscription_capacity, s.lost
    FROM cdc._shared_stats_status() s;
COMMENT ON VIEW cdc.shared_stats IS
  'Whether the counters in shared memory are kept (available: cdc_apply is in shared_preload_libraries; note says what is missing otherwise), how full their fixed tables are for all databases (call_entries of call_capacity, subscription_entries of subscription_capacity) and how many counts were lost because a table was full.';

CREATE VIEW cdc.call_stats AS
  SELECT c.function,
         pg_catalog.sum(c.count) FILTER (WHERE c.sqlstate IS NULL)::bigint AS calls,
         coalesce(pg_catalog.sum(c.count) FILTER (WHERE c.sqlstate IS NOT NULL), 0)::bigint AS failed,
         pg_catalog.min(c.since) AS since
    FROM cdc._call_stats() c
   GROUP BY c.function;
COMMENT ON VIEW cdc.call_stats IS
  'Calls of cdc_apply() (both forms) and cdc_apply_batch() (all forms) in this database and how many failed, counted in shared memory since since (creation or cdc.reset_shared_stats()): unlike cdc.stats these survive the rollback of the calling transaction. A call that fails before the function runs (an argument that does not cast) or whose transaction fails later (at COMMIT) is not a failed call. Empty without shared_preload_libraries (see cdc.shared_stats).';

CREATE VIEW cdc.failed_calls AS
  SELECT c.function, c.sqlstate, c.count AS failures, c.since
    FROM cdc._call_stats() c
   WHERE c.sqlstate IS NOT NULL;
COMMENT ON VIEW cdc.failed_calls IS
  'Failed calls of cdc_apply() and cdc_apply_batch() in this database by SQLSTATE (22P02 malformed input, 22023 bad event, 42501 privileges, 23xxx constraints of the target, 57014 canceled, ...; at most 32 SQLSTATEs per entry point, those of any other SQLSTATE count under sqlstate ''other''), counted in shared memory in the error path of the call, so they survive the rollback that follows. Empty without shared_preload_libraries.';

CREATE VIEW cdc.worker_stats AS
  SELECT s.name AS subscription, w.errors, w.errors_by_sqlstate, w.retries, w.group_retries,
         w.xacts AS applied_xacts, w.latency_sum_seconds,
         CASE WHEN w.xacts OPERATOR(pg_catalog.>) 0
              THEN w.latency_sum_seconds OPERATOR(pg_catalog./) w.xacts::double precision
                   OPERATOR(pg_catalog.*) 1000::double precision END AS latency_avg_ms,
         w.latency_p50_ms, w.latency_p99_ms, w.since
    FROM cdc._worker_stats() w
    JOIN cdc.subscription s ON s.subid OPERATOR(pg_catalog.=) w.subid;
COMMENT ON VIEW cdc.worker_stats IS
  'Per subscription, counted in shared memory by its apply worker since since: errors it recorded (each stops the worker, which backs off and restarts; errors_by_sqlstate counts them by SQLSTATE), retries (starts after an error), group_retries (failed groups of source transactions re-applied one by one, docs/worker.md "Grouping"), applied_xacts (source transactions applied, each with its apply latency: local commit time minus the source''s commit time), their sum, average, and the upper bounds of the histogram buckets holding the median and the 99th percentile (powers of two milliseconds; cdc.apply_latency has the histogram). A difference between the source''s and the destination''s clocks shifts the latencies (negative ones count as 0). Empty without shared_preload_libraries.';

CREATE VIEW cdc.apply_latency AS
  SELECT s.name AS subscription,
         CASE WHEN b.k OPERATOR(pg_catalog.=) 20 THEN 'Infinity'::double precision
              ELSE pg_catalog.power(2::double precision, (b.k OPERATOR(pg_catalog.-) 1)::double precision) END AS le_ms,
         pg_catalog.sum(b.n) OVER (PARTITION BY w.subid ORDER BY b.k)::bigint AS xacts
    FROM cdc._worker_stats() w
    JOIN cdc.subscription s ON s.subid OPERATOR(pg_catalog.=) w.subid
   CROSS JOIN LATERAL pg_catalog.unnest(w.latency_buckets) WITH ORDINALITY AS b(n, k);
COMMENT ON VIEW cdc.apply_latency IS
  'The apply-latency histogram of each subscription (source commit to local commit, per applied source transaction), cumulative like a Prometheus histogram: xacts counts the transactions whose latency was at most le_ms milliseconds (1, 2, 4, ... 262144, Infinity). Empty without shared_preload_libraries.';

CREATE VIEW cdc.rates AS
  -- targets: how the events applied to each (both paths) were decided
  SELECT 'target'::text AS kind,
         CASE WHEN st.target::oid OPERATOR(pg_catalog.=) 0::oid THEN '(no target)'
              ELSE pg_catalog.format('%I.%I', n.nspname, c.relname) END AS name,
         (st.applied OPERATOR(pg_catalog.+) st.duplicate OPERATOR(pg_catalog.+) st.stale
            OPERATOR(pg_catalog.+) st.conflict) AS events,
         st.duplicate::double precision OPERATOR(pg_catalog./)
           nullif(st.applied OPERATOR(pg_catalog.+) st.duplicate OPERATOR(pg_catalog.+) st.stale
                               OPERATOR(pg_catalog.+) st.conflict, 0)::double precision AS duplicate_rate,
         st.stale::double precision OPERATOR(pg_catalog./)
           nullif(st.applied OPERATOR(pg_catalog.+) st.duplicate OPERATOR(pg_catalog.+) st.stale
                               OPERATOR(pg_catalog.+) st.conflict, 0)::double precision AS stale_rate,
         st.conflict::double precision OPERATOR(pg_catalog./)
           nullif(st.applied OPERATOR(pg_catalog.+) st.duplicate OPERATOR(pg_catalog.+) st.stale
                               OPERATOR(pg_catalog.+) st.conflict, 0)::double precision AS conflict_rate,
         st.expired,
         NULL::bigint AS errors,
         NULL::double precision AS error_rate,
         NULL::text AS state,
         NULL::bigint AS lag_bytes,
         NULL::double precision AS lag_seconds,
         NULL::bigint AS retries,
         NULL::double precision AS latency_p50_ms,
         NULL::double precision AS latency_p99_ms,
         NULL::timestamptz AS since
    FROM cdc.stats st
    LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) st.target::oid
    LEFT JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
  UNION ALL
  -- the SQL entry points: calls and failed calls (shared memory)
  SELECT 'function', cs.function, cs.calls, NULL, NULL, NULL, NULL,
         cs.failed,
         cs.failed::double precision OPERATOR(pg_catalog./) nullif(cs.calls, 0)::double precision,
         NULL, NULL, NULL, NULL, NULL, NULL, cs.since
    FROM cdc.call_stats cs
  UNION ALL
  -- subscriptions: state, lag, and the worker's errors, retries and latency (shared memory)
  SELECT 'subscription', ss.name, ws.applied_xacts, NULL, NULL, NULL, NULL,
         ws.errors, NULL, ss.state, ss.lag_bytes, ss.lag_seconds,
         ws.retries OPERATOR(pg_catalog.+) ws.group_retries, ws.latency_p50_ms, ws.latency_p99_ms, ws.since
    FROM cdc.subscription_status ss
    LEFT JOIN cdc.worker_stats ws ON ws.subscription OPERATOR(pg_catalog.=) ss.name;
COMMENT ON VIEW cdc.rates IS
  'What operators alert on, in one view (docs/operations.md, "Alerts"). kind target: per target (cdc.stats; (no target) for events ignored before a target was known) its change events (applied + duplicate + stale + conflict) and the share of each outcome since the extension was created: duplicate_rate (redeliveries), stale_rate (late or reordered changes), conflict_rate (equal versions with other content: data problems), expired. kind function: calls of cdc_apply/cdc_apply_batch, failed calls and their share (shared memory). kind subscription: state, lag_bytes, lag_seconds (cdc.subscription_status), applied source transactions, worker errors, retries and the median and 99th-percentile apply latency (shared memory; NULL without shared_preload_libraries, see cdc.shared_stats). Ratios are since the counters began: for rates over a window use the counters with postgres_exporter (docs/postgres_exporter.yml).';

CREATE VIEW cdc.copy_progress AS
  SELECT s.name AS subscription, p.schema_name, p.table_name, p.state, p.rows_copied, p.rows_estimated,
         pg_catalog.round(p.percent::numeric, 1) AS percent,
         pg_catalog.round(p.rows_per_second::numeric, 0) AS rows_per_second,
         pg_catalog.make_interval(secs => pg_catalog.round(p.seconds_left::numeric, 0)::double precision) AS time_left,
         p.bytes_copied, p.started_at, p.finished_at, p.worker_pid
    FROM cdc._copy_progress() p
    JOIN cdc.subscription s ON s.subid OPERATOR(pg_catalog.=) p.subid
  UNION ALL
  SELECT s.name, r.schema_name, r.table_name, 'waiting', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
    FROM cdc.subscription_rel r
    JOIN cdc.subscription s ON s.subid OPERATOR(pg_catalog.=) r.subid
   WHERE r.state OPERATOR(pg_catalog.=) 'init'
     -- a copy that shared memory shows, running or done, is not waiting: the
     -- state read from cdc.subscription_rel is this query's snapshot's, and
     -- the worker marks a finished copy done in shared memory right after
     -- the commit that made the table ready, which a snapshot taken just
     -- before does not see (the table showed as done and waiting at once)
     AND NOT EXISTS (SELECT 1 FROM cdc._copy_progress() p
                      WHERE p.subid OPERATOR(pg_catalog.=) r.subid AND p.state OPERATOR(pg_catalog.=) ANY (ARRAY['copying', 'done'])
                        AND p.schema_name OPERATOR(pg_catalog.=) r.schema_name
                        AND p.table_name OPERATOR(pg_catalog.=) r.table_name);
COMMENT ON VIEW cdc.copy_progress IS
  'Progress of the table copies of the subscriptions (docs/worker.md, "Progress"): per table being copied (state copying) the rows received so far, the source planner''s estimate of the total (row filters included; NULL unknown), percent (stays below 100 until the copy is done, however low the estimate was), rows per second and the time left at that rate; the last table each worker copied (done, 100 %) until its next copy or its exit; and the tables waiting for their copy (waiting). Rows are updated in shared memory every 1,000 rows; without shared_preload_libraries only the waiting tables show.';

CREATE VIEW cdc.prune_progress AS
  WITH cfg AS (
    SELECT (SELECT x.available FROM cdc._shared_stats_status() x) AS launcher,
           (SELECT st.setting::integer FROM pg_catalog.pg_settings st
             WHERE st.name OPERATOR(pg_catalog.=) 'cdc.prune_interval') AS interval_s,
           (SELECT st.setting::integer FROM pg_catalog.pg_settings st
             WHERE st.name OPERATOR(pg_catalog.=) 'cdc.prune_max_pages') AS max_pages,
           pg_catalog.current_setting('block_size')::bigint AS block_size
  ), t AS (
    SELECT p.relation, p.next_block, p.last_run_at, p.last_sweep_done_at,
           -- the outbox is stored in cdc.outbox_rows (cdc.outbox is its view), as cdc.prune reads it
           (pg_catalog.pg_relation_size(CASE WHEN p.relation OPERATOR(pg_catalog.=) 'outbox' THEN 'cdc.outbox_rows'::regclass
                                             ELSE ('cdc.' OPERATOR(pg_catalog.||) p.relation)::regclass END)
              OPERATOR(pg_catalog./) cfg.block_size) AS blocks,
           CASE WHEN cfg.launcher AND cfg.interval_s OPERATOR(pg_catalog.>) 0 THEN cfg.max_pages END AS per_call,
           CASE WHEN cfg.launcher AND cfg.interval_s OPERATOR(pg_catalog.>) 0 THEN cfg.interval_s END AS every_s
      FROM cdc.prune_state p, cfg
  )
  SELECT t.relation,
         t.blocks AS table_blocks,
         least(t.next_block, t.blocks) AS pass_position,
         greatest(t.blocks OPERATOR(pg_catalog.-) t.next_block, 0) AS blocks_left,
         CASE WHEN t.blocks OPERATOR(pg_catalog.>) 0
              THEN pg_catalog.round(100 OPERATOR(pg_catalog.*) least(t.next_block, t.blocks)::numeric
                                    OPERATOR(pg_catalog./) t.blocks, 1) END AS pass_percent,
         t.per_call AS blocks_per_call,
         pg_catalog.make_interval(secs => t.every_s::double precision) AS call_interval,
         pg_catalog.ceil(greatest(t.blocks OPERATOR(pg_catalog.-) t.next_block, 0)::numeric
                         OPERATOR(pg_catalog./) t.per_call)::bigint AS calls_left,
         pg_catalog.make_interval(secs => (pg_catalog.ceil(greatest(t.blocks OPERATOR(pg_catalog.-) t.next_block, 0)::numeric
                         OPERATOR(pg_catalog./) t.per_call) OPERATOR(pg_catalog.*) t.every_s)::double precision) AS pass_time_left,
         pg_catalog.make_interval(secs => (greatest(pg_catalog.ceil(t.blocks::numeric OPERATOR(pg_catalog./) t.per_call), 1)
                         OPERATOR(pg_catalog.*) t.every_s)::double precision) AS full_pass_time,
         t.last_run_at,
         t.last_sweep_done_at,
         -- the schedule stalled (three intervals without a call), or a pass takes longer than the horizon
         (t.every_s IS NOT NULL AND (
            coalesce(t.last_run_at, '-infinity'::timestamptz) OPERATOR(pg_catalog.<)
              (pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => (3 OPERATOR(pg_catalog.*) t.every_s)::double precision))
            OR pg_catalog.make_interval(secs => (greatest(pg_catalog.ceil(t.blocks::numeric OPERATOR(pg_catalog./) t.per_call), 1)
                                         OPERATOR(pg_catalog.*) t.every_s)::double precision)
               OPERATOR(pg_catalog.>) cdc.replay_horizon())) AS behind
    FROM t;
COMMENT ON VIEW cdc.prune_progress IS
  'Where the launcher''s scheduled cdc.prune() is in each bookkeeping table (docs/retention.md): the table''s blocks, the position of the current pass, blocks left in it and percent done, the blocks one call scans (cdc.prune_max_pages) and how often it is called (cdc.prune_interval), the calls and time left in the pass, the time a full pass takes (an entry may outlive the replay horizon by up to that much), when it last ran and last completed a pass, and behind: true when no call came for three intervals (the launcher is down or cdc.prune() fails: see the server log) or a full pass takes longer than the replay horizon (raise cdc.prune_max_pages). The schedule columns are NULL when the launcher does not prune (cdc.prune_interval = 0, or cdc_apply not preloaded). Cheap: reads cdc.prune_state and the tables'' sizes, never their rows.';

GRANT SELECT ON cdc.shared_stats, cdc.call_stats, cdc.failed_calls, cdc.worker_stats, cdc.apply_latency, cdc.rates,
                cdc.copy_progress, cdc.prune_progress TO PUBLIC;
REVOKE ALL ON FUNCTION cdc.reset_shared_stats() FROM PUBLIC;
REVOKE ALL ON FUNCTION cdc._notify_launcher() FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- What pg_dump carries (docs/operations.md, "Backups")
-- ---------------------------------------------------------------------------
-- A table of an extension is not dumped unless the extension says so
-- (pg_extension_config_dump): without this, a dump and restore of the
-- destination brought back the target rows without the mappings, the
-- entity records and tombstones, the offset claims, the truncate barriers,
-- the stream marks or the unpublished outbox rows, so replayed changes were
-- applied again and deleted rows came back (scenario of a logical restore,
-- test/t/110_dump_restore.pl).  Every table below names targets by
-- regclass (dumped as a name, read back as the restored table's new OID)
-- or by dictionary id.  The sequences of the dumped tables go with them,
-- so that new outbox rows follow the restored ones in id order.  Not
-- dumped: cdc.ledger (its digest includes the target's OID, which a
-- restore changes: the restored entries would never match again; the
-- entity records decide replays of changes from before the dump),
-- cdc.counters and the audit's tables (statistics), cdc.prune_state
-- (block positions in the old files), and the worker's subscriptions and
-- their state (a restored copy must not consume the original's slot:
-- create the subscription again; docs/worker.md).
SELECT pg_catalog.pg_extension_config_dump('cdc.mapping', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.source', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.source_renames', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.source_renames_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.entity_state', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.table_barrier', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.prune_watermark', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.stream_mark', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.ledger_partition', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.ledger_partition_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.ledger_range', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.outbox_source', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.outbox_rows', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.outbox_rows_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.conflicts', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.conflicts_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.dead_letter', '');
SELECT pg_catalog.pg_extension_config_dump('cdc.dead_letter_id_seq', '');

-- The launcher serves this database as soon as CREATE EXTENSION commits.
SELECT cdc._notify_launcher();

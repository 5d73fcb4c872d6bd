--
-- envelope: the forms of a Debezium value that cdc_apply() accepts.
--   * JsonConverter schema+payload wrapper vs bare payload: same identity,
--     same version, same rows;
--   * source.lsn / source.commit_lsn as Debezium decimals and as PostgreSQL
--     text LSNs;
--   * transaction.total_order as the last version component;
--   * source.snapshot "true" / "last" / "incremental" on op r.
--

-- env_wrap(payload, row fields): the JsonConverter form (schemas.enable=true)
-- of a bare payload, with before/after struct schemas built from `fields`
-- (a JSON array of Connect field schemas) and the PostgreSQL source schema.
CREATE FUNCTION env_wrap(payload jsonb, fields jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
    'schema', jsonb_build_object(
      'type', 'struct', 'optional', false, 'name', 'srv.public.t.Envelope', 'version', 1,
      'fields', jsonb_build_array(
        jsonb_build_object('type', 'struct', 'optional', true, 'name', 'srv.public.t.Value', 'field', 'before', 'fields', fields),
        jsonb_build_object('type', 'struct', 'optional', true, 'name', 'srv.public.t.Value', 'field', 'after', 'fields', fields),
        jsonb_build_object('type', 'struct', 'optional', false, 'name', 'io.debezium.connector.postgresql.Source', 'field', 'source',
          'fields', jsonb_build_array(
            jsonb_build_object('type', 'string', 'optional', false, 'field', 'connector'),
            jsonb_build_object('type', 'string', 'optional', false, 'field', 'name'),
            jsonb_build_object('type', 'string', 'optional', false, 'field', 'db'),
            jsonb_build_object('type', 'string', 'optional', false, 'field', 'schema'),
            jsonb_build_object('type', 'string', 'optional', false, 'field', 'table'),
            jsonb_build_object('type', 'int64', 'optional', true, 'field', 'txId'),
            jsonb_build_object('type', 'int64', 'optional', true, 'field', 'lsn'),
            jsonb_build_object('type', 'string', 'optional', true, 'field', 'snapshot'))),
        jsonb_build_object('type', 'string', 'optional', false, 'field', 'op'),
        jsonb_build_object('type', 'int64', 'optional', true, 'field', 'ts_ms'))),
    'payload', payload)
$$;

CREATE TABLE env_fields AS SELECT '[{"type": "int32", "optional": false, "field": "id"},
                                    {"type": "string", "optional": true, "field": "name"},
                                    {"type": "int32", "optional": true, "field": "qty"}]'::jsonb AS f;

-- ---------------------------------------------------------------------------
-- 1. schema+payload vs bare payload
-- ---------------------------------------------------------------------------
CREATE TABLE env_wrapped (id int PRIMARY KEY, name text, qty int);
CREATE TABLE env_bare    (id int PRIMARY KEY, name text, qty int);

-- One history (create, update, delete of key 2, an older update), applied in
-- the wrapped form to env_wrapped and bare to env_bare.  The source names
-- differ (w / b) so that the derived delivery keys do not collide.
CREATE TABLE env_history (step int, op text, after jsonb, before jsonb, lsn text, tx bigint);
INSERT INTO env_history VALUES
  (1, 'c', '{"id": 1, "name": "bolt", "qty": 10}', NULL, '0/1000', 100),
  (2, 'c', '{"id": 2, "name": "nut", "qty": 5}', NULL, '0/1100', 101),
  (3, 'u', '{"id": 1, "name": "bolt", "qty": 8}', '{"id": 1}', '0/1200', 102),
  (4, 'd', NULL, '{"id": 2}', '0/1300', 103),
  (5, 'u', '{"id": 1, "name": "bolt", "qty": 9}', '{"id": 1}', '0/1150', 104),
  (6, 'c', '{"id": 1, "name": "bolt", "qty": 10}', NULL, '0/1000', 100);

SELECT h.step, h.op,
       cdc_apply(env_wrap(dbz(h.op, 'things', h.after, h.lsn, h.tx, h.before, src => 'w'), f), 'env_wrapped') AS wrapped,
       cdc_apply(dbz(h.op, 'things', h.after, h.lsn, h.tx, h.before, src => 'b'), 'env_bare') AS bare
  FROM env_history h, env_fields ORDER BY h.step;

-- Identical rows, identical versions and tombstones, identical ledger keys
-- (up to the source name).
SELECT 'wrapped' AS form, * FROM env_wrapped UNION ALL SELECT 'bare', * FROM env_bare ORDER BY 2, 1;
SELECT (SELECT array_agg(row(entity_key, version, is_tombstone)::text ORDER BY entity_key::text)
          FROM cdc.entities WHERE target = 'env_wrapped'::regclass)
     = (SELECT array_agg(row(entity_key, version, is_tombstone)::text ORDER BY entity_key::text)
          FROM cdc.entities WHERE target = 'env_bare'::regclass) AS same_entities;
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'env_wrapped'::regclass ORDER BY entity_key::text;
-- (the derived key of each step, dbz:<name>:<db>:<schema>.<table>:<op>:<lsn>:<txId>:<total_order>:<key>)
SELECT h.step,
       cdc.delivery_processed('env_wrapped', format('dbz:w:src:public.things:%s:%s:%s::{"id": "%s"}', h.op,
                              h.lsn::pg_lsn - '0/0', h.tx, coalesce(h.after, h.before)->>'id')) AS wrapped_ledger_has,
       cdc.delivery_processed('env_bare', format('dbz:b:src:public.things:%s:%s:%s::{"id": "%s"}', h.op,
                              h.lsn::pg_lsn - '0/0', h.tx, coalesce(h.after, h.before)->>'id')) AS bare_ledger_has
  FROM env_history h WHERE h.step <= 5 ORDER BY h.step;
SELECT ledger_count('env_wrapped') AS wrapped_ledger, ledger_count('env_bare') AS bare_ledger;
SELECT s.target, s.applied, s.duplicate, s.stale, s.conflict, s.ignored
  FROM cdc.stats s WHERE s.target IN ('env_wrapped'::regclass, 'env_bare'::regclass) ORDER BY s.target::text;

-- The same message in both forms is one delivery: wrapped first, then bare
-- (same derived delivery key) is a duplicate, and the other way round.
SELECT cdc_apply(env_wrap(dbz('c', 'things', '{"id": 3, "name": "pin", "qty": 1}', '0/1400', 105, src => 'w'), f), 'env_wrapped')
  FROM env_fields;
SELECT cdc_apply(dbz('c', 'things', '{"id": 3, "name": "pin", "qty": 1}', '0/1400', 105, src => 'w'), 'env_wrapped');
SELECT cdc_apply(dbz('c', 'things', '{"id": 4, "name": "cap", "qty": 2}', '0/1500', 106, src => 'w'), 'env_wrapped');
SELECT cdc_apply(env_wrap(dbz('c', 'things', '{"id": 4, "name": "cap", "qty": 2}', '0/1500', 106, src => 'w'), f), 'env_wrapped')
  FROM env_fields;
-- "schema": null (a converter that sends no schema) is the bare payload too.
SELECT cdc_apply(jsonb_build_object('schema', NULL, 'payload',
                 dbz('c', 'things', '{"id": 4, "name": "cap", "qty": 2}', '0/1500', 106, src => 'w')), 'env_wrapped');
SELECT cdc_apply(jsonb_build_object('schema', NULL, 'payload',
                 dbz('c', 'things', '{"id": 5, "name": "rod", "qty": 3}', '0/1600', 107, src => 'w')), 'env_wrapped');
SELECT * FROM env_wrapped ORDER BY id;
SELECT ledger_count('env_wrapped') AS ledger;

-- ---------------------------------------------------------------------------
-- 2. source.lsn / source.commit_lsn: Debezium decimal and PostgreSQL text
-- ---------------------------------------------------------------------------
-- Version of a streamed change: {epoch, commit_lsn (or lsn), lsn, total_order}.
CREATE TABLE env_lsn (id int PRIMARY KEY, v text);
-- 0/5000 = 20480, 0/4000 = 16384, 1/0 = 4294967296.
SELECT cdc_apply('{"op": "c", "source": {"name": "s", "db": "d", "schema": "public", "table": "env_lsn", "lsn": 16384, "commit_lsn": 20480, "txId": 1},
                   "after": {"id": 1, "v": "a"}}'::jsonb, 'env_lsn', 'lsn-decimal');
SELECT cdc_apply('{"op": "c", "source": {"name": "s", "db": "d", "schema": "public", "table": "env_lsn", "lsn": "0/4000", "commit_lsn": "0/5000", "txId": 1},
                   "after": {"id": 2, "v": "b"}}'::jsonb, 'env_lsn', 'lsn-text');
SELECT cdc_apply('{"op": "c", "source": {"name": "s", "db": "d", "schema": "public", "table": "env_lsn", "lsn": "16384", "commit_lsn": "20480", "txId": 1},
                   "after": {"id": 3, "v": "c"}}'::jsonb, 'env_lsn', 'lsn-decimal-string');
SELECT cdc_apply('{"op": "c", "source": {"name": "s", "db": "d", "schema": "public", "table": "env_lsn", "lsn": "1/0", "txId": 2},
                   "after": {"id": 4, "v": "d"}}'::jsonb, 'env_lsn', 'lsn-high');
SELECT * FROM ledger_has('env_lsn', 'lsn-decimal', 'lsn-decimal-string', 'lsn-high', 'lsn-text');
SELECT entity_key, version FROM cdc.entities WHERE target = 'env_lsn'::regclass ORDER BY entity_key::text;
-- The decimal and the text form of one position are one version: the same
-- change for key 1 in text form under another delivery key is an
-- equal-version, equal-content duplicate; with other content, a conflict.
SELECT cdc_apply('{"op": "c", "source": {"name": "s", "db": "d", "schema": "public", "table": "env_lsn", "lsn": "0/4000", "commit_lsn": "0/5000", "txId": 1},
                   "after": {"id": 1, "v": "a"}}'::jsonb, 'env_lsn', 'lsn-text-again');
SELECT cdc_apply('{"op": "c", "source": {"name": "s", "db": "d", "schema": "public", "table": "env_lsn", "lsn": "0/4000", "commit_lsn": "0/5000", "txId": 1},
                   "after": {"id": 1, "v": "other"}}'::jsonb, 'env_lsn', 'lsn-text-conflict');
-- commit_lsn orders before lsn: a change with a later commit wins even when
-- its own lsn is lower (two transactions interleaved in the WAL).
SELECT cdc_apply('{"op": "u", "source": {"name": "s", "db": "d", "schema": "public", "table": "env_lsn", "lsn": "0/6100", "commit_lsn": "0/7000", "txId": 3},
                   "after": {"id": 1, "v": "later-commit"}}'::jsonb, 'env_lsn', 'commit-7000');
SELECT cdc_apply('{"op": "u", "source": {"name": "s", "db": "d", "schema": "public", "table": "env_lsn", "lsn": "0/6200", "commit_lsn": "0/6300", "txId": 4},
                   "after": {"id": 1, "v": "earlier-commit"}}'::jsonb, 'env_lsn', 'commit-6300');
SELECT * FROM env_lsn ORDER BY id;
SELECT entity_key, version FROM cdc.entities WHERE target = 'env_lsn'::regclass ORDER BY entity_key::text;

-- ---------------------------------------------------------------------------
-- 3. transaction.total_order
-- ---------------------------------------------------------------------------
-- Two changes of one key in one transaction: same commit, ordered by
-- total_order (the docs also show it as a string).  The derived delivery key
-- contains it, so both are distinct deliveries.
CREATE TABLE env_tx (id int PRIMARY KEY, v text);
SELECT cdc_apply(dbz('u', 'env_tx', '{"id": 1, "v": "second"}', '0/8000', 700, clsn => '0/9000', total_order => 2), 'env_tx');
SELECT cdc_apply(dbz('c', 'env_tx', '{"id": 1, "v": "first"}', '0/8000', 700, clsn => '0/9000', total_order => 1), 'env_tx');
SELECT cdc_apply('{"op": "u", "source": {"name": "srv", "db": "src", "schema": "public", "table": "env_tx", "lsn": 32768, "commit_lsn": 36864, "txId": 700},
                   "transaction": {"id": "700:36864", "total_order": "3", "data_collection_order": "3"},
                   "after": {"id": 1, "v": "third"}}'::jsonb, 'env_tx');
SELECT * FROM env_tx;
SELECT * FROM ledger_has('env_tx', 'dbz:srv:src:public.env_tx:c:32768:700:1:{"id": "1"}',
                           'dbz:srv:src:public.env_tx:u:32768:700:2:{"id": "1"}',
                           'dbz:srv:src:public.env_tx:u:32768:700:3:{"id": "1"}');
SELECT applied, stale FROM cdc.stats WHERE target = 'env_tx'::regclass;

-- ---------------------------------------------------------------------------
-- 4. Snapshots: source.snapshot "true", "last", "incremental"
-- ---------------------------------------------------------------------------
-- Snapshot version: {epoch, snapshot lsn, 0, 0}; op r sets state but never
-- writes outbox rows.  A snapshot row loses against a change committed after
-- its snapshot point and wins against one committed before.
CREATE TABLE env_snap (id int PRIMARY KEY, v text);
SELECT target, outbox FROM cdc.register_mapping('env_snap', outbox => true);
SELECT cdc_apply(dbz('r', 'env_snap', '{"id": 1, "v": "snap-true"}', '0/A000', 800, snap => 'true'), 'env_snap');
SELECT cdc_apply(dbz('r', 'env_snap', '{"id": 2, "v": "snap-last"}', '0/A000', 800, snap => 'last'), 'env_snap');
SELECT cdc_apply(dbz('r', 'env_snap', '{"id": 3, "v": "snap-incremental"}', '0/A000', 800, snap => 'incremental'), 'env_snap');
SELECT * FROM env_snap ORDER BY id;
SELECT entity_key, version FROM cdc.entities WHERE target = 'env_snap'::regclass ORDER BY entity_key::text;
SELECT outbox_count('env_snap') AS outbox;
SELECT applied, snapshot_rows, outbox_rows FROM cdc.stats WHERE target = 'env_snap'::regclass;
-- A streamed update committed after the snapshot point: applied, one outbox row.
SELECT cdc_apply(dbz('u', 'env_snap', '{"id": 1, "v": "streamed"}', '0/B000', 801), 'env_snap');
-- A re-snapshot taken before that commit cannot overwrite it (stale); one
-- taken after it ("last" row of a later snapshot) applies, without outbox.
SELECT cdc_apply(dbz('r', 'env_snap', '{"id": 1, "v": "old-snapshot"}', '0/A800', 802, snap => 'last'), 'env_snap');
SELECT cdc_apply(dbz('r', 'env_snap', '{"id": 2, "v": "new-snapshot"}', '0/C000', 803, snap => 'incremental'), 'env_snap');
-- A streamed change committed before the snapshot point of id 2 is stale.
SELECT cdc_apply(dbz('u', 'env_snap', '{"id": 2, "v": "too-old"}', '0/B800', 804), 'env_snap');
SELECT * FROM env_snap ORDER BY id;
SELECT op, entity_key, payload FROM cdc.outbox WHERE target = 'env_snap'::regclass ORDER BY id;
SELECT applied, stale, snapshot_rows, outbox_rows FROM cdc.stats WHERE target = 'env_snap'::regclass;

--
-- batch: cdc_apply_batch().  Its contract is that a batch has exactly the
-- effect of applying its events one by one, in order, with cdc_apply():
-- the same rows, entity records and tombstones, ledger rows, outbox rows (in
-- the same order), conflict records, dead letters, truncate barriers,
-- handler effects and counters, and the same outcome for every event.  bat_compare() checks that by applying the
-- same deliveries both ways from a clean state and listing every
-- difference: the expected output of each comparison is no rows.  Tables of
-- this suite are called bat_*.
--

-- Every row cdc_apply wrote for a target, as comparable text: the compact
-- ledger and entity records (docs/retention.md), and the rows of a log
-- table <t>_log (column n: insertion order) if there is one, which the
-- handler tests write.  Outbox, conflict, dead-letter and log rows carry
-- their rank in insertion order.
CREATE FUNCTION bat_state(t regclass) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format('SELECT ''row '' || x::text FROM %s x', t);
  RETURN QUERY SELECT 'entity ' || row(e.key, s.name, e.v0, e.v1, e.v2, e.v3, e.deleted, e.chash)::text
                 FROM cdc.entity_state e JOIN cdc.source s ON s.id = e.src WHERE e.target = t;
  RETURN QUERY SELECT 'ledger ' || l.digest::text FROM cdc.ledger l WHERE l.target = t;
  RETURN QUERY SELECT 'outbox ' || row(row_number() OVER (ORDER BY o.id), o.idempotency_key, o.topic, o.entity_key,
                                       o.op, o.payload, o.source, o.version)::text
                 FROM cdc.outbox o WHERE o.target = t;
  RETURN QUERY SELECT 'conflict ' || row(row_number() OVER (ORDER BY c.id), c.entity_key, c.delivery_key, c.op,
                                         c.reason, c.stored_version, c.event_version, c.stored_image, c.event_image)::text
                 FROM cdc.conflicts c WHERE c.target = t;
  RETURN QUERY SELECT 'dead letter ' || row(row_number() OVER (ORDER BY d.id), d.entity_key, d.delivery_key, d.op,
                                            d.version, d.watermark, d.event_image, d.source)::text
                 FROM cdc.dead_letter d WHERE d.target = t;
  RETURN QUERY SELECT 'barrier ' || row(b.source_name, b.version)::text FROM cdc.table_barrier b WHERE b.target = t;
  RETURN QUERY SELECT 'stats ' || row(s.applied - b.s[1], s.duplicate - b.s[2], s.stale - b.s[3], s.conflict - b.s[4],
                                      s.ignored - b.s[5], s.blocked_resurrections - b.s[6], s.outbox_rows - b.s[7],
                                      s.snapshot_rows - b.s[8], s.expired - b.s[9])::text
                 FROM cdc.stats s LEFT JOIN LATERAL (SELECT coalesce((SELECT x.s FROM bat_stats_base x WHERE x.target = t),
                                                                    '{0,0,0,0,0,0,0,0,0}') AS s) b ON true
                WHERE s.target = t;
  IF to_regclass(t::text || '_log') IS NOT NULL THEN
    RETURN QUERY EXECUTE format('SELECT ''log '' || row_number() OVER (ORDER BY l.n) || '' '' || (to_jsonb(l) - ''n'')::text FROM %s l',
                                t::text || '_log');
  END IF;
END $$;

-- The counts of cdc.stats at the last bat_reset() of a target, which
-- bat_state() subtracts: a transaction's counts reach cdc.counters only when
-- it commits (docs/internals.md, "Counters"), so deleting cdc.counters rows
-- cannot reset the counts of the transaction doing it (bat_compare runs
-- both sides in one statement).
CREATE TABLE bat_stats_base (target regclass PRIMARY KEY, s bigint[] NOT NULL);

-- Forgets everything about a target (the suite runs as superuser).
CREATE FUNCTION bat_reset(t regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('DELETE FROM %s', t);
  DELETE FROM cdc.ledger WHERE target = t;
  DELETE FROM cdc.entity_state WHERE target = t;
  DELETE FROM cdc.table_barrier WHERE target = t;
  DELETE FROM cdc.outbox WHERE target = t;
  DELETE FROM cdc.conflicts WHERE target = t;
  DELETE FROM cdc.dead_letter WHERE target = t;
  DELETE FROM cdc.prune_watermark WHERE target = t;
  DELETE FROM cdc.counters WHERE target = t;
  DELETE FROM bat_stats_base WHERE target = t;
  INSERT INTO bat_stats_base
  SELECT t, ARRAY[applied, duplicate, stale, conflict, ignored, blocked_resurrections, outbox_rows, snapshot_rows, expired]
    FROM cdc.stats WHERE target = t;
  IF to_regclass(t::text || '_log') IS NOT NULL THEN
    EXECUTE format('DELETE FROM %s', t::text || '_log');
  END IF;
END $$;

-- Applies evs one by one with cdc_apply(); returns the outcomes.
CREATE FUNCTION bat_one_by_one(t regclass, evs jsonb[], dks text[] DEFAULT NULL) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
  r text[] := '{}';
BEGIN
  FOR i IN 1 .. coalesce(cardinality(evs), 0) LOOP
    r := r || cdc_apply(evs[i], t, dks[i]);
  END LOOP;
  RETURN r;
END $$;

-- Applies evs with cdc_apply_batch(), cut into batches that start at the
-- positions in `cuts` (1-based; {} = one batch); returns the outcomes.
CREATE FUNCTION bat_batches(t regclass, evs jsonb[], cuts int[] DEFAULT '{}', dks text[] DEFAULT NULL) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
  r text[] := '{}';
  bounds int[] := ARRAY[1] || cuts || ARRAY[coalesce(cardinality(evs), 0) + 1];
  res cdc.batch_result;
BEGIN
  FOR b IN 1 .. cardinality(bounds) - 1 LOOP
    CONTINUE WHEN bounds[b] >= bounds[b + 1];
    res := cdc_apply_batch(evs[bounds[b]:bounds[b + 1] - 1], t, dks[bounds[b]:bounds[b + 1] - 1], true);
    IF res.events <> bounds[b + 1] - bounds[b]
       OR res.applied + res.duplicate + res.stale + res.conflict + res.ignored + res.expired <> res.events
       OR cardinality(res.outcomes) <> res.events
       OR res.applied <> cardinality(array_positions(res.outcomes, 'applied'))
       OR res.expired <> cardinality(array_positions(res.outcomes, 'expired')) THEN
      RAISE EXCEPTION 'inconsistent batch result %', res;
    END IF;
    r := r || res.outcomes;
  END LOOP;
  RETURN r;
END $$;

-- Applies the same deliveries one by one and in batches, each from a clean
-- state (after `setup`, a statement run after each reset), and returns
-- every difference (outcomes and bat_state lines).
CREATE FUNCTION bat_compare(t regclass, evs jsonb[], cuts int[] DEFAULT '{}', dks text[] DEFAULT NULL,
                            setup text DEFAULT NULL)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  one text[];
  many text[];
  s1 text[];
  s2 text[];
BEGIN
  PERFORM bat_reset(t);
  IF setup IS NOT NULL THEN EXECUTE setup; END IF;
  one := bat_one_by_one(t, evs, dks);
  s1 := ARRAY(SELECT bat_state(t));
  PERFORM bat_reset(t);
  IF setup IS NOT NULL THEN EXECUTE setup; END IF;
  many := bat_batches(t, evs, cuts, dks);
  s2 := ARRAY(SELECT bat_state(t));
  IF one IS DISTINCT FROM many THEN
    RETURN NEXT format('outcomes one by one %s, in batches %s', one, many);
  END IF;
  RETURN QUERY SELECT 'only one by one: ' || x FROM (SELECT unnest(s1) EXCEPT ALL SELECT unnest(s2)) d(x);
  RETURN QUERY SELECT 'only in batches: ' || x FROM (SELECT unnest(s2) EXCEPT ALL SELECT unnest(s1)) d(x);
END $$;

-- ===========================================================================
-- a. The API: counts, outcomes in input order, the three input forms.
-- ===========================================================================
CREATE TABLE bat_api (id int PRIMARY KEY, name text NOT NULL);
SELECT target, outbox FROM cdc.register_mapping('bat_api', outbox => true);

SELECT * FROM cdc_apply_batch(jsonb_build_array(
  dbz('c', 'bat_api', '{"id": 1, "name": "a"}', '0/1000', 10),
  dbz('c', 'bat_api', '{"id": 2, "name": "b"}', '0/1010', 10),
  kafka_tombstone(),
  dbz('u', 'bat_api', '{"id": 1, "name": "a2"}', '0/1020', 11),
  dbz('c', 'bat_api', '{"id": 1, "name": "a"}', '0/1000', 10)));
SELECT * FROM bat_api ORDER BY id;
-- with_outcomes: one outcome per event, in input order
SELECT outcomes FROM cdc_apply_batch(jsonb_build_array(
  dbz('u', 'bat_api', '{"id": 2, "name": "b2"}', '0/1030', 12),
  dbz('u', 'bat_api', '{"id": 2, "name": "b-old"}', '0/1008', 9),
  '{"ts_ms": 1}'::jsonb,
  dbz('d', 'bat_api', NULL, '0/1040', 13, before => '{"id": 1}')), with_outcomes => true);
-- jsonb[] (a NULL element is a Kafka tombstone) and text
SELECT events, applied, ignored, outcomes FROM cdc_apply_batch(
  ARRAY[dbz('c', 'bat_api', '{"id": 3, "name": "c"}', '0/1050', 14), NULL]::jsonb[], with_outcomes => true);
SELECT events, applied, outcomes FROM cdc_apply_batch(
  jsonb_build_array(dbz('c', 'bat_api', '{"id": 4, "name": "d"}', '0/1060', 15))::text, with_outcomes => true);
-- an untyped literal is read as text
SELECT events, ignored FROM cdc_apply_batch('[null, {"ts_ms": 5}]');
-- an empty batch
SELECT * FROM cdc_apply_batch('[]'::jsonb);
SELECT * FROM bat_api ORDER BY id;
SELECT op, entity_key, payload FROM cdc.outbox WHERE target = 'bat_api'::regclass ORDER BY id;
SELECT applied, duplicate, stale, ignored, outbox_rows FROM cdc.stats WHERE target = 'bat_api'::regclass;

-- Delivery keys: one per event; a NULL element is derived.  A key given
-- twice in one batch: the first event claims it.  The second finds the
-- claim taken and, as one by one, is still decided by the version records
-- (docs/retention.md: a ledger hit is not the last word): the same change
-- again is a duplicate; a newer change of the entity is applied.
SELECT ledger_count('bat_api') AS ledger_before \gset
SELECT outcomes FROM cdc_apply_batch(jsonb_build_array(
    dbz('u', 'bat_api', '{"id": 3, "name": "c2"}', '0/1070', 16),
    dbz('u', 'bat_api', '{"id": 4, "name": "d2"}', '0/1080', 17),
    dbz('u', 'bat_api', '{"id": 3, "name": "c2"}', '0/1070', 16),
    dbz('u', 'bat_api', '{"id": 3, "name": "c3"}', '0/1090', 18)),
  'bat_api', ARRAY['topic:0:0:7', NULL, 'topic:0:0:7', 'topic:0:0:7'], true);
SELECT * FROM bat_api WHERE id IN (3, 4) ORDER BY id;
SELECT cdc.delivery_processed('bat_api', 'topic:0:0:7') AS key_processed,
       ledger_count('bat_api') - :ledger_before AS new_ledger_rows;

-- Errors: nothing of the batch is applied (the claims roll back too), and
-- the context names the event's position.
SELECT ledger_count('bat_api') AS ledger_before \gset
\set VERBOSITY default
SELECT cdc_apply_batch(NULL::jsonb);
SELECT cdc_apply_batch('{"op": "c"}'::jsonb);
SELECT cdc_apply_batch('[1, 2'::text);
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bat_api', '{"id": 9, "name": "x"}', '0/2000', 20)), 'bat_api', ARRAY['a', 'b']);
SELECT cdc_apply_batch(jsonb_build_array(
  dbz('c', 'bat_api', '{"id": 10, "name": "ok"}', '0/2010', 21),
  dbz('c', 'bat_api', '{"id": 11, "name": "ok"}', '0/2020', 22),
  dbz('c', 'bat_api', '{"id": "eleven", "name": "bad"}', '0/2030', 23)));
SELECT cdc_apply_batch(jsonb_build_array(
  dbz('c', 'bat_api', '{"id": 10, "name": "ok"}', '0/2010', 21),
  dbz('c', 'bat_api', '{"id": 12, "name": null}', '0/2040', 24)));
SELECT cdc_apply_batch(jsonb_build_array(
  dbz('c', 'bat_api', '{"id": 10, "name": "ok"}', '0/2010', 21),
  '{"op": "x"}'::jsonb));
-- A role that may not write the target is refused before anything is
-- written, as by cdc_apply().
CREATE ROLE bat_reader;
GRANT SELECT ON bat_api TO bat_reader;
SET ROLE bat_reader;
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bat_api', '{"id": 10, "name": "ok"}', '0/2010', 21)), 'bat_api');
RESET ROLE;
DROP OWNED BY bat_reader;
DROP ROLE bat_reader;
\set VERBOSITY terse
SELECT count(*) = 0 AS errors_applied_nothing FROM bat_api WHERE id >= 9;
SELECT ledger_count('bat_api') = :ledger_before AS errors_claimed_nothing;
-- the corrected batch applies
SELECT events, applied FROM cdc_apply_batch(jsonb_build_array(
  dbz('c', 'bat_api', '{"id": 10, "name": "ok"}', '0/2010', 21),
  dbz('c', 'bat_api', '{"id": 11, "name": "ok"}', '0/2020', 22)));

-- ===========================================================================
-- b. The seed fixture (insert, update, update, delete, re-creation of one
--    key) in every one of its 120 orders, as one batch, on three tables:
--    bat_state_only (state mapping, rows independent: changes of a key are
--    merged into the newest), bat_outbox (outbox rows and full images:
--    merged too, every applied change keeping its own outbox row and
--    payload) and bat_trig (a trigger: change by change).  Every order must
--    equal one-by-one application exactly.
-- ===========================================================================
CREATE TABLE bat_state_only (id int PRIMARY KEY, name text NOT NULL);
SELECT target FROM cdc.register_mapping('bat_state_only');
CREATE TABLE bat_outbox (id int PRIMARY KEY, name text NOT NULL);
SELECT target FROM cdc.register_mapping('bat_outbox', outbox => true);
CREATE TABLE bat_trig (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE bat_trig_log (n serial, op text, id int, name text);
CREATE FUNCTION bat_trig_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.bat_trig_log (op, id, name)
  VALUES (TG_OP, coalesce(NEW.id, OLD.id), CASE WHEN TG_OP = 'DELETE' THEN OLD.name ELSE NEW.name END);
  RETURN NULL;
END $$;
CREATE TRIGGER bat_trig_log AFTER INSERT OR UPDATE OR DELETE ON bat_trig FOR EACH ROW EXECUTE FUNCTION bat_trig_fn();
SELECT target FROM cdc.register_mapping('bat_trig');

-- the five events of key 1 (n = 1..5), and the same change history of key 2
CREATE FUNCTION bat_seed(tbl text, k int, n int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT CASE n
    WHEN 1 THEN dbz('c', tbl, jsonb_build_object('id', k, 'name', 'v1'), '0/1000', 100)
    WHEN 2 THEN dbz('u', tbl, jsonb_build_object('id', k, 'name', 'v2'), '0/1100', 101)
    WHEN 3 THEN dbz('u', tbl, jsonb_build_object('id', k, 'name', 'v3'), '0/1200', 102)
    WHEN 4 THEN dbz('d', tbl, NULL, '0/1300', 103, before => jsonb_build_object('id', k))
    WHEN 5 THEN dbz('c', tbl, jsonb_build_object('id', k, 'name', 'v5'), '0/1400', 104) END
$$;

CREATE TABLE bat_perms AS
  WITH RECURSIVE p(perm) AS (
    SELECT ARRAY[n] FROM generate_series(1, 5) n
    UNION ALL
    SELECT p.perm || n FROM p, generate_series(1, 5) n WHERE cardinality(p.perm) < 5 AND NOT n = ANY (p.perm))
  SELECT perm FROM p WHERE cardinality(perm) = 5;

-- One batch per order; key 2 gets the events in input order between them.
SELECT tbl, count(*) AS orders_compared, count(*) FILTER (WHERE d IS NOT NULL) AS orders_with_differences,
       min(d) AS first_difference
  FROM (VALUES ('bat_state_only'), ('bat_outbox'), ('bat_trig')) AS t(tbl),
       bat_perms,
       LATERAL (SELECT min(x) AS d FROM bat_compare(tbl::regclass,
                  ARRAY(SELECT bat_seed(tbl, CASE WHEN i % 2 = 0 THEN 2 ELSE 1 END, CASE WHEN i % 2 = 0 THEN i / 2 ELSE perm[(i + 1) / 2] END)
                          FROM generate_series(1, 9) i ORDER BY i)) x) c
 GROUP BY tbl ORDER BY tbl;
-- the merged run of the in-order fixture, once more, in detail: five
-- changes, one row written (the transaction's own table statistics; the
-- counts of earlier transactions are flushed first)
SELECT bat_reset('bat_state_only');
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT outcomes FROM cdc_apply_batch(ARRAY(SELECT bat_seed('bat_state_only', 1, n) FROM generate_series(1, 5) n), with_outcomes => true);
SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables WHERE relid = 'bat_state_only'::regclass;
COMMIT;
SELECT * FROM bat_state_only;
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'bat_state_only'::regclass;
SELECT count(*) AS ledger_rows FROM cdc.ledger WHERE target = 'bat_state_only'::regclass;
SELECT applied, duplicate, stale, blocked_resurrections FROM cdc.stats WHERE target = 'bat_state_only'::regclass;
-- the trigger saw every change, as one by one
SELECT bat_reset('bat_trig');
TRUNCATE bat_trig_log;
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT applied FROM cdc_apply_batch(ARRAY(SELECT bat_seed('bat_trig', 1, n) FROM generate_series(1, 5) n));
SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables WHERE relid = 'bat_trig'::regclass;
COMMIT;
SELECT op, id, name FROM bat_trig_log ORDER BY n;

-- Redeliveries: the fixture twice in one batch, and cut into batches at
-- every position, with duplicates across batches.
SELECT tbl, cuts, x AS difference
  FROM (VALUES ('bat_state_only'), ('bat_outbox'), ('bat_trig')) AS t(tbl),
       (VALUES ('{}'::int[]), ('{2}'), ('{3,5}'), ('{4,6,8}'), ('{2,3,4,5,6,7,8,9,10}')) AS c(cuts),
       LATERAL bat_compare(tbl::regclass,
                 ARRAY(SELECT bat_seed(tbl, 1, n) FROM generate_series(1, 5) n) ||
                 ARRAY(SELECT bat_seed(tbl, 1, n) FROM generate_series(5, 1, -1) n), cuts) x;

-- ===========================================================================
-- b2. Outbox mappings with full images are merged (docs/semantics.md,
--     "Batches"): one row write per entity, one outbox row per applied
--     change, each with the payload one by one gives it: an upsert's image,
--     for a delete the row it removed (the chain's previous image, the row
--     before the batch, or the event's before-image when there was none).
-- ===========================================================================
-- c -> u -> d -> c of one key in one batch: four outbox rows equal to one by
-- one, in order, and a single row write.
SELECT x AS difference FROM bat_compare('bat_outbox',
  ARRAY(SELECT bat_seed('bat_outbox', 1, n) FROM generate_series(1, 5) n WHERE n <> 3)) x;
SELECT bat_reset('bat_outbox');
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT outcomes FROM cdc_apply_batch(ARRAY(SELECT bat_seed('bat_outbox', 1, n) FROM generate_series(1, 5) n WHERE n <> 3),
                                     with_outcomes => true);
SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables WHERE relid = 'bat_outbox'::regclass;
COMMIT;
SELECT op, entity_key, payload, version FROM cdc.outbox WHERE target = 'bat_outbox'::regclass ORDER BY id;
SELECT * FROM bat_outbox;

-- A row that exists before the batch (applied by an earlier call): a chain
-- that starts with its delete takes the removed row as payload, whether the
-- chain ends with an upsert (the row is read first) or with a delete (the
-- merged delete returns it); a delete of a key the destination never had
-- publishes the event's before-image; snapshot rows set the row a later
-- delete publishes but get no outbox row of their own.
SELECT chain, x AS difference
  FROM (VALUES ('d c', ARRAY[bat_seed('bat_outbox', 1, 4), bat_seed('bat_outbox', 1, 5)]),
               ('d c d', ARRAY[bat_seed('bat_outbox', 1, 4), bat_seed('bat_outbox', 1, 5),
                               dbz('d', 'bat_outbox', NULL, '0/1500', 105, before => '{"id": 1}')]),
               ('d', ARRAY[bat_seed('bat_outbox', 1, 4)]),
               ('u d c u', ARRAY[bat_seed('bat_outbox', 1, 3), bat_seed('bat_outbox', 1, 4), bat_seed('bat_outbox', 1, 5),
                                 dbz('u', 'bat_outbox', '{"id": 1, "name": "v6"}', '0/1500', 105)]),
               ('d of a missing key, d d', ARRAY[dbz('d', 'bat_outbox', NULL, '0/1300', 103, before => '{"id": 5, "name": "gone"}'),
                                                 bat_seed('bat_outbox', 1, 4),
                                                 dbz('d', 'bat_outbox', NULL, '0/1500', 105, before => '{"id": 1}')]),
               ('r d, r u', ARRAY[dbz('r', 'bat_outbox', '{"id": 1, "name": "snap"}', '0/1250', NULL), bat_seed('bat_outbox', 1, 4),
                                  dbz('r', 'bat_outbox', '{"id": 6, "name": "snap"}', '0/1250', NULL),
                                  dbz('u', 'bat_outbox', '{"id": 6, "name": "s2"}', '0/1260', 102)])) AS c(chain, evs),
       LATERAL bat_compare('bat_outbox', evs,
                           setup => $$SELECT cdc_apply(dbz('c', 'bat_outbox', '{"id": 1, "name": "before"}', '0/1200', 99))$$) x;
SELECT bat_reset('bat_outbox');
SELECT cdc_apply(dbz('c', 'bat_outbox', '{"id": 1, "name": "before"}', '0/1200', 99));
SELECT applied FROM cdc_apply_batch(ARRAY[bat_seed('bat_outbox', 1, 4), bat_seed('bat_outbox', 1, 5),
                                          dbz('d', 'bat_outbox', NULL, '0/1500', 105, before => '{"id": 1}'),
                                          dbz('d', 'bat_outbox', NULL, '0/1600', 106, before => '{"id": 7, "name": "never"}')]);
SELECT op, entity_key, payload FROM cdc.outbox WHERE target = 'bat_outbox'::regclass ORDER BY id;

-- Payloads built from the image equal to_jsonb() of the written row for
-- every kind of column (numeric typmods, times, json, bytea, NaN, a domain,
-- a composite, a dropped column), and entity keys of several columns (in
-- jsonb key order) with quotes and backslashes.  (A table with an array
-- column is never set-based: there is no array of an array type to send
-- its column in.)
CREATE DOMAIN bat_pos AS int CHECK (VALUE > 0);
CREATE TYPE bat_pair AS (a int, b text);
CREATE TABLE bat_types (k2 text, k1 int, gone int, n numeric(8,2), f float8, ts timestamptz, d date, j json,
                        jb jsonb, by bytea, b boolean, dom bat_pos, pair bat_pair, vc varchar(4), ch char(3),
                        PRIMARY KEY (k2, k1));
ALTER TABLE bat_types DROP COLUMN gone;
SELECT target FROM cdc.register_mapping('bat_types', outbox => true);
SELECT x AS difference FROM bat_compare('bat_types', ARRAY[
  dbz('c', 'bat_types', '{"k2": "a\"b\\c", "k1": 1, "n": 1.005, "f": "NaN", "ts": "2024-01-02T03:04:05.123456Z", "d": 19000,
                          "j": "{\"z\": 1,  \"a\": [1, 2]}", "jb": "{\"z\": 1, \"a\": [1.50, 2]}", "by": "3q0=",
                          "b": true, "dom": 5, "pair": "(1,\"x y\")", "vc": "abcd", "ch": "x"}', '0/1000', 100),
  dbz('u', 'bat_types', '{"k2": "a\"b\\c", "k1": 1, "n": -3, "f": 1e300, "ts": null, "d": null, "j": "[]",
                          "jb": null, "by": "", "b": false, "dom": 7, "pair": null, "vc": "é", "ch": "é"}', '0/1100', 101),
  dbz('c', 'bat_types', '{"k2": "ü", "k1": 2, "n": 0, "f": "-Infinity", "ts": "infinity", "d": 0, 
                          "j": "null", "jb": "\"s\"", "by": null, "b": null, "dom": 1, "pair": "(,)", "vc": null, "ch": null}', '0/1200', 102),
  dbz('d', 'bat_types', NULL, '0/1300', 103, before => '{"k2": "a\"b\\c", "k1": 1}')]) x;
SELECT entity_key, payload FROM cdc.outbox WHERE target = 'bat_types'::regclass ORDER BY id;
-- (merged: one row write for key 1's three changes)
SELECT bat_reset('bat_types');
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT applied FROM cdc_apply_batch(ARRAY[
  dbz('c', 'bat_types', '{"k2": "x", "k1": 1, "n": 1, "f": 1, "ts": null, "d": null, "j": null, "jb": null,
                          "by": null, "b": null, "dom": 1, "pair": "(1,a)", "vc": null, "ch": null}', '0/1000', 100),
  dbz('u', 'bat_types', '{"k2": "x", "k1": 1, "n": 2, "f": 2, "ts": null, "d": null, "j": null, "jb": null,
                          "by": null, "b": null, "dom": 2, "pair": "(2,b)", "vc": null, "ch": null}', '0/1100', 101),
  dbz('d', 'bat_types', NULL, '0/1300', 103, before => '{"k2": "x", "k1": 1}')]);
SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables WHERE relid = 'bat_types'::regclass;
COMMIT;
SELECT op, payload->'n' AS n, payload->'pair' AS pair FROM cdc.outbox WHERE target = 'bat_types'::regclass ORDER BY id;

-- Payloads of tables whose columns are all built-in scalars are built
-- straight from the image, with the keys in jsonb order worked out once per
-- target (outbox.cpp, ImageJsonbFastPg): names of one length in byte order
-- ("Ab" before "ab"), shorter names first, a multibyte name, declared out
-- of order.  Every payload must be to_jsonb() of the written row, as text
-- too (the stored key order).
CREATE TABLE bat_fast (zz text, id int8 PRIMARY KEY, a int2, bb int4, ab numeric, b2 float4, ccc float8,
                       "Ab" boolean, dd date, ts timestamp, tz timestamptz, vc varchar(5), u uuid, "é" text);
SELECT target FROM cdc.register_mapping('bat_fast', outbox => true);
SELECT applied FROM cdc_apply_batch(ARRAY[
  dbz('c', 'bat_fast', '{"id": 1, "zz": "z\"q", "a": -2, "bb": 2147483647, "ab": 1.50, "b2": 0.1, "ccc": 12345.678,
                         "Ab": true, "dd": 19000, "ts": "2024-01-02T03:04:05.5", "tz": "2024-01-02T03:04:05.123456Z",
                         "vc": "abcde", "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "é": "ü"}', '0/1000', 100),
  dbz('c', 'bat_fast', '{"id": 2, "zz": null, "a": null, "bb": null, "ab": "NaN", "b2": "-Infinity", "ccc": "NaN",
                         "Ab": false, "dd": null, "ts": null, "tz": null, "vc": null, "u": null, "é": null}', '0/1100', 101),
  dbz('u', 'bat_fast', '{"id": 1, "zz": "", "a": 3, "bb": -1, "ab": -0.001, "b2": 3.5, "ccc": -2.25,
                         "Ab": null, "dd": 0, "ts": null, "tz": null, "vc": "é", "u": null, "é": "x"}', '0/1200', 102)]);
SELECT o.id = max(o.id) OVER (PARTITION BY o.entity_key) AS last_of_its_row, o.op,
       o.payload::text = to_jsonb(b)::text AS same_text, o.payload = to_jsonb(b) AS same_jsonb, o.payload
  FROM cdc.outbox o JOIN bat_fast b ON b.id = (o.entity_key->>'id')::int8
 WHERE o.target = 'bat_fast'::regclass ORDER BY o.id;

-- A composite column travels as one column of the batch's upsert (before,
-- its array's unnest in FROM split it into its fields and the batch failed),
-- with or without outbox.
CREATE TABLE bat_comp (id int PRIMARY KEY, pair bat_pair);
SELECT target FROM cdc.register_mapping('bat_comp');
SELECT x AS difference FROM bat_compare('bat_comp', ARRAY[
  dbz('c', 'bat_comp', '{"id": 1, "pair": "(1,a)"}', '0/1000', 100),
  dbz('c', 'bat_comp', '{"id": 2, "pair": null}', '0/1010', 100),
  dbz('u', 'bat_comp', '{"id": 1, "pair": "(2,\"b c\")"}', '0/1100', 101)]) x;
SELECT * FROM bat_comp ORDER BY id;

-- A generated column is computed by the destination: such an outbox
-- target is written round by round and each payload read back (never
-- merged), still equal to one by one in every order of the seed fixture.
CREATE TABLE bat_outbox_gen (id int PRIMARY KEY, name text NOT NULL, len int GENERATED ALWAYS AS (length(name)) STORED);
SELECT target FROM cdc.register_mapping('bat_outbox_gen', outbox => true);
SELECT count(*) AS orders_compared, count(*) FILTER (WHERE d IS NOT NULL) AS orders_with_differences, min(d) AS first_difference
  FROM bat_perms,
       LATERAL (SELECT min(x) AS d FROM bat_compare('bat_outbox_gen',
                  ARRAY(SELECT bat_seed('bat_outbox_gen', 1, perm[i]) FROM generate_series(1, 5) i ORDER BY i)) x) c;
SELECT bat_reset('bat_outbox_gen');
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT applied FROM cdc_apply_batch(ARRAY(SELECT bat_seed('bat_outbox_gen', 1, n) FROM generate_series(1, 5) n));
SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables WHERE relid = 'bat_outbox_gen'::regclass;
COMMIT;
SELECT op, payload FROM cdc.outbox WHERE target = 'bat_outbox_gen'::regclass ORDER BY id;

-- ===========================================================================
-- c. Merged chains that cannot stay merged: a conflict in the middle (the
--    conflict record holds the row as it was at that change) and a change
--    from another source.  The chain is applied change by change instead.
-- ===========================================================================
SELECT x AS difference FROM bat_compare('bat_state_only', ARRAY[
  dbz('c', 'bat_state_only', '{"id": 1, "name": "v1"}', '0/1000', 100),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v2"}', '0/1100', 101),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v2-other"}', '0/1100', 999),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v3"}', '0/1200', 102),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "elsewhere"}', '0/1300', 103, src => 'other')]) x;
SELECT reason, stored_version, event_version, stored_image, event_image
  FROM cdc.conflicts WHERE target = 'bat_state_only'::regclass ORDER BY id;
SELECT * FROM bat_state_only;

-- An intermediate image that violates NOT NULL fails the batch at that
-- event, as one by one it fails at that event.
\set VERBOSITY default
SELECT bat_reset('bat_state_only');
SELECT cdc_apply_batch(jsonb_build_array(
  dbz('c', 'bat_state_only', '{"id": 1, "name": "v1"}', '0/1000', 100),
  dbz('u', 'bat_state_only', '{"id": 1, "name": null}', '0/1100', 101),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v3"}', '0/1200', 102)));
\set VERBOSITY terse
SELECT count(*) = 0 AS not_null_nothing_applied FROM bat_state_only;

-- ===========================================================================
-- d. Everything else in batches: key changes, unchanged-TOAST placeholders,
--    snapshot rows, truncates in the middle of a batch, version_column
--    mappings, several targets resolved per event, stale and blocked
--    resurrections.
-- ===========================================================================
CREATE TABLE bat_wide (id int PRIMARY KEY, a text, b text NOT NULL DEFAULT 'dflt');
SELECT target FROM cdc.register_mapping('bat_wide');
CREATE TABLE bat_ver (id int PRIMARY KEY, v int NOT NULL, note text);
SELECT target FROM cdc.register_mapping('bat_ver', version_column => 'v', truncate_policy => 'ignore');

-- key changes (the old key's chain and the new key's chain are applied change by change)
SELECT x AS difference FROM bat_compare('bat_wide', ARRAY[
  dbz('c', 'bat_wide', '{"id": 1, "a": "x", "b": "y"}', '0/1000', 100),
  dbz('c', 'bat_wide', '{"id": 2, "a": "p", "b": "q"}', '0/1010', 100),
  dbz('u', 'bat_wide', '{"id": 3, "a": "x2", "b": "y"}', '0/1100', 101, before => '{"id": 1, "a": "x", "b": "y"}'),
  dbz('u', 'bat_wide', '{"id": 3, "a": "x3", "b": "y"}', '0/1200', 102),
  dbz('c', 'bat_wide', '{"id": 1, "a": "back", "b": "z"}', '0/1300', 103),
  dbz('u', 'bat_wide', '{"id": 2, "a": "p2", "b": "q"}', '0/1310', 103)]) x;
SELECT * FROM bat_wide ORDER BY id;
-- a key change stale for its new key (a later change of the new key came
-- first): the old key is still deleted, in batches as one by one
SELECT x AS difference FROM bat_compare('bat_wide', ARRAY[
  dbz('c', 'bat_wide', '{"id": 1, "a": "x", "b": "y"}', '0/1000', 100),
  dbz('u', 'bat_wide', '{"id": 2, "a": "later", "b": "y"}', '0/1200', 102),
  dbz('u', 'bat_wide', '{"id": 2, "a": "moved", "b": "y"}', '0/1100', 101, before => '{"id": 1}'),
  dbz('c', 'bat_wide', '{"id": 3, "a": "z", "b": "y"}', '0/1300', 103)]) x;
SELECT * FROM bat_wide ORDER BY id;
-- unchanged-TOAST placeholders and partial images: never merged
SELECT x AS difference FROM bat_compare('bat_wide', ARRAY[
  dbz('c', 'bat_wide', '{"id": 1, "a": "x", "b": "y"}', '0/1000', 100),
  dbz('u', 'bat_wide', '{"id": 1, "a": "x2", "b": "__debezium_unavailable_value"}', '0/1100', 101),
  dbz('u', 'bat_wide', '{"id": 1, "a": "x3"}', '0/1200', 102),
  dbz('c', 'bat_wide', '{"id": 2, "a": "__debezium_unavailable_value", "b": "q"}', '0/1300', 103),
  dbz('u', 'bat_wide', '{"id": 1, "a": "x4", "b": "y4"}', '0/1400', 104)]) x;
SELECT * FROM bat_wide ORDER BY id;
-- snapshot rows, streamed changes, a late re-snapshot, truncates in the middle
SELECT cuts, x AS difference
  FROM (VALUES ('{}'::int[]), ('{4}'), ('{6,7}')) AS c(cuts),
       LATERAL bat_compare('bat_wide', ARRAY[
         dbz('r', 'bat_wide', '{"id": 1, "a": "s1", "b": "s"}', '0/2000', NULL),
         dbz('r', 'bat_wide', '{"id": 2, "a": "s2", "b": "s"}', '0/2000', NULL),
         dbz('u', 'bat_wide', '{"id": 1, "a": "n1", "b": "s"}', '0/2100', 200),
         dbz('r', 'bat_wide', '{"id": 1, "a": "late", "b": "s"}', '0/2080', NULL),
         dbz('c', 'bat_wide', '{"id": 3, "a": "n3", "b": "s"}', '0/2200', 201),
         dbz('t', 'bat_wide', NULL, '0/2300', 202),
         dbz('c', 'bat_wide', '{"id": 1, "a": "old", "b": "s"}', '0/2250', 201),
         dbz('c', 'bat_wide', '{"id": 4, "a": "after", "b": "s"}', '0/2400', 203),
         dbz('u', 'bat_wide', '{"id": 4, "a": "after2", "b": "s"}', '0/2500', 204),
         dbz('t', 'bat_wide', NULL, '0/2300', 202)], cuts) x;
SELECT * FROM bat_wide ORDER BY id;
SELECT source_name, version FROM cdc.table_barrier WHERE target = 'bat_wide'::regclass;
-- version_column: ordered by the row's own column; stale and blocked resurrections
SELECT x AS difference FROM bat_compare('bat_ver', ARRAY[
  dbz('c', 'bat_ver', '{"id": 1, "v": 1, "note": "a"}', '0/1000', 1),
  dbz('u', 'bat_ver', '{"id": 1, "v": 3, "note": "c"}', '0/1010', 2),
  dbz('u', 'bat_ver', '{"id": 1, "v": 2, "note": "b"}', '0/1020', 3),
  dbz('d', 'bat_ver', NULL, '0/1030', 4, before => '{"id": 1, "v": 3}'),
  dbz('u', 'bat_ver', '{"id": 1, "v": 3, "note": "c"}', '0/1040', 5),
  dbz('c', 'bat_ver', '{"id": 1, "v": 4, "note": "d"}', '0/1050', 6),
  dbz('t', 'bat_ver', NULL, '0/1060', 7)]) x;
SELECT * FROM bat_ver;
-- (the counts of the batched side: since the reset between the two sides)
SELECT s.applied - b.s[1] AS applied, s.stale - b.s[3] AS stale, s.blocked_resurrections - b.s[6] AS blocked_resurrections,
       s.ignored - b.s[5] AS ignored
  FROM cdc.stats s JOIN bat_stats_base b ON b.target = s.target WHERE s.target = 'bat_ver'::regclass;
-- several targets in one batch, resolved from each event's source table
SELECT bat_reset('bat_state_only'), bat_reset('bat_outbox');
SELECT events, applied, outcomes FROM cdc_apply_batch(jsonb_build_array(
  bat_seed('bat_state_only', 7, 1), bat_seed('bat_outbox', 7, 1), bat_seed('bat_state_only', 7, 2),
  bat_seed('bat_outbox', 7, 2), bat_seed('bat_state_only', 7, 4)), with_outcomes => true);
SELECT (SELECT count(*) FROM bat_state_only) AS state_only_rows, (SELECT name FROM bat_outbox) AS outbox_row,
       outbox_count('bat_outbox') AS outbox_rows, ledger_count('bat_state_only') AS ledger_state_only,
       (SELECT version FROM cdc.tombstones WHERE target = 'bat_state_only'::regclass) AS tombstone;

-- ===========================================================================
-- e. Modes, expired changes and ledger hits (docs/semantics.md, "Batches"):
--    history and handler mappings are applied change by change; so is
--    every entity with an expired change (its mapping's expired_policy
--    decides), and every entity with a change whose delivery the ledger had
--    and whose version records would apply it.  Each must equal one by one.
-- ===========================================================================
CREATE TABLE bat_hist (id int, name text, cdc_key jsonb NOT NULL, cdc_version bigint[] NOT NULL, cdc_op text NOT NULL,
                       UNIQUE (cdc_key, cdc_version));
SELECT target, mode FROM cdc.register_mapping('bat_hist', key_columns => '{id}', mode => 'history', outbox => true);
CREATE TABLE bat_hand (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE bat_hand_log (n serial, op text, old_name text, new_name text, version jsonb, snapshot boolean);
CREATE FUNCTION bat_hand_fn(op text, old bat_hand, new bat_hand, meta jsonb) RETURNS void LANGUAGE sql AS $$
  INSERT INTO public.bat_hand_log (op, old_name, new_name, version, snapshot)
  VALUES (op, old.name, new.name, meta->'version', (meta->>'is_snapshot')::boolean)
$$;
SELECT target, mode FROM cdc.register_mapping('bat_hand', mode => 'handler', outbox => true,
                                              handler => 'bat_hand_fn(text, bat_hand, bat_hand, jsonb)');

-- the seed fixture in all 120 orders (key 2 in input order between them)
SELECT tbl, count(*) AS orders_compared, count(*) FILTER (WHERE d IS NOT NULL) AS orders_with_differences,
       min(d) AS first_difference
  FROM (VALUES ('bat_hist'), ('bat_hand')) AS t(tbl),
       bat_perms,
       LATERAL (SELECT min(x) AS d FROM bat_compare(tbl::regclass,
                  ARRAY(SELECT bat_seed(tbl, CASE WHEN i % 2 = 0 THEN 2 ELSE 1 END, CASE WHEN i % 2 = 0 THEN i / 2 ELSE perm[(i + 1) / 2] END)
                          FROM generate_series(1, 9) i ORDER BY i)) x) c
 GROUP BY tbl ORDER BY tbl;
-- redeliveries cut at several positions, a snapshot row and a truncate
SELECT tbl, cuts, x AS difference
  FROM (VALUES ('bat_hist'), ('bat_hand')) AS t(tbl),
       (VALUES ('{}'::int[]), ('{3}'), ('{2,5,9}')) AS c(cuts),
       LATERAL bat_compare(tbl::regclass,
                 ARRAY[dbz('r', tbl, '{"id": 3, "name": "s"}', '0/0800', NULL)] ||
                 ARRAY(SELECT bat_seed(tbl, 1, n) FROM generate_series(1, 5) n) ||
                 ARRAY[dbz('t', tbl, NULL, '0/1350', 105)] ||
                 ARRAY(SELECT bat_seed(tbl, 1, n) FROM generate_series(5, 1, -1) n), cuts) x;
-- the last batch run, in detail: history rows, handler calls, outbox rows
SELECT id, name, cdc_key, cdc_version, cdc_op FROM bat_hist ORDER BY cdc_version, cdc_key::text;
SELECT op, old_name, new_name, version, snapshot FROM bat_hand_log ORDER BY n;
SELECT target, count(*) AS outbox_rows FROM cdc.outbox WHERE target IN ('bat_hist'::regclass, 'bat_hand'::regclass)
 GROUP BY target ORDER BY target::text;

-- Expired changes: a prune watermark at 0/2000 for source srv, and changes
-- below and above it, under each expired_policy.  Key 1 has no record at
-- first (expired), then a newer change creates one (later old changes are
-- stale); key 3 is an expired delete; the first change delivered again has
-- its claim taken (duplicate).
CREATE TABLE bat_exp (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE bat_exp_events AS SELECT ARRAY[
  dbz('c', 'bat_exp', '{"id": 1, "name": "old"}', '0/1000', 10),
  dbz('c', 'bat_exp', '{"id": 2, "name": "new"}', '0/3000', 30),
  dbz('u', 'bat_exp', '{"id": 2, "name": "new2"}', '0/3100', 31),
  dbz('u', 'bat_exp', '{"id": 1, "name": "old2"}', '0/1100', 11),
  dbz('c', 'bat_exp', '{"id": 1, "name": "recreated"}', '0/2100', 21),
  dbz('u', 'bat_exp', '{"id": 1, "name": "old3"}', '0/1200', 12),
  dbz('d', 'bat_exp', NULL, '0/1800', 18, before => '{"id": 3}'),
  dbz('c', 'bat_exp', '{"id": 1, "name": "old"}', '0/1000', 10)] AS evs;
CREATE TABLE bat_exp_setup AS SELECT $$
  INSERT INTO cdc.source (id, name) VALUES (('x' || substr(md5('srv'), 1, 8))::bit(32)::int & 2147483647, 'srv') ON CONFLICT DO NOTHING;
  INSERT INTO cdc.prune_watermark (target, src, v0, v1, v2, v3)
  SELECT 'bat_exp', id, 0, 8192, 8192, 0 FROM cdc.source WHERE name = 'srv'$$ AS setup;
SELECT policy, cuts, x AS difference
  FROM (VALUES ('refuse'), ('dead_letter'), ('apply')) AS p(policy),
       (VALUES ('{}'::int[]), ('{4}'), ('{2,3,4,5,6,7,8}')) AS c(cuts),
       LATERAL bat_compare('bat_exp', (SELECT evs FROM bat_exp_events), cuts,
                           setup => format('SELECT cdc.register_mapping(%L, expired_policy => %L); ', 'bat_exp', policy)
                                    || (SELECT setup FROM bat_exp_setup)) x;
-- each policy once more, in detail
CREATE FUNCTION bat_exp_run(policy text)
RETURNS TABLE (events bigint, applied bigint, duplicate bigint, stale bigint, expired bigint, outcomes text[],
               rows_after text, dead_letters bigint, stats_expired bigint) LANGUAGE plpgsql AS $$
DECLARE
  res cdc.batch_result;
BEGIN
  PERFORM cdc.register_mapping('bat_exp', expired_policy => policy);
  PERFORM bat_reset('bat_exp');
  EXECUTE (SELECT setup FROM bat_exp_setup);
  res := cdc_apply_batch((SELECT evs FROM bat_exp_events), 'bat_exp', NULL, true);
  RETURN QUERY SELECT res.events, res.applied, res.duplicate, res.stale, res.expired, res.outcomes,
    (SELECT string_agg(id || ':' || name, ', ' ORDER BY id) FROM bat_exp),
    (SELECT count(*) FROM cdc.dead_letter d WHERE d.target = 'bat_exp'::regclass),
    (SELECT s.expired FROM cdc.stats s WHERE s.target = 'bat_exp'::regclass);
END $$;
SELECT * FROM bat_exp_run('refuse');
SELECT * FROM bat_exp_run('dead_letter');
SELECT * FROM bat_exp_run('apply');

-- Ledger hits on a table whose changes are merged: a delivery key reused for
-- a newer change (decided by the version records: applied), and a delivery
-- recorded as a conflict delivered again with a newer change (a duplicate:
-- a recorded conflict is never re-decided).
SELECT x AS difference FROM bat_compare('bat_state_only', ARRAY[
  dbz('c', 'bat_state_only', '{"id": 1, "name": "v1"}', '0/1000', 100),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v2"}', '0/1100', 101),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v3"}', '0/1200', 102),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v3-other"}', '0/1200', 102),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v4"}', '0/1300', 103),
  dbz('c', 'bat_state_only', '{"id": 2, "name": "w1"}', '0/1400', 104),
  dbz('u', 'bat_state_only', '{"id": 2, "name": "w2"}', '0/1500', 105)],
  '{}', ARRAY['k1', 'k2', 'k1', 'k3', 'k3', 'k4', 'k4']) x;
SELECT bat_reset('bat_state_only');
SELECT outcomes FROM cdc_apply_batch(ARRAY[
  dbz('c', 'bat_state_only', '{"id": 1, "name": "v1"}', '0/1000', 100),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v2"}', '0/1100', 101),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v3"}', '0/1200', 102),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v3-other"}', '0/1200', 102),
  dbz('u', 'bat_state_only', '{"id": 1, "name": "v4"}', '0/1300', 103),
  dbz('c', 'bat_state_only', '{"id": 2, "name": "w1"}', '0/1400', 104),
  dbz('u', 'bat_state_only', '{"id": 2, "name": "w2"}', '0/1500', 105)],
  'bat_state_only', ARRAY['k1', 'k2', 'k1', 'k3', 'k3', 'k4', 'k4'], true);
SELECT * FROM bat_state_only ORDER BY id;

-- ===========================================================================
-- A text key under a nondeterministic collation: 'A' and 'a' are one row
-- with two texts.  Once the batch failed with "ON CONFLICT DO UPDATE command
-- cannot affect row a second time" where one by one applied; a later
-- fresh-user run found that entity records, keyed by the text, let a
-- deleted row come back.  Such a key is now refused (0A000) both ways, and
-- by cdc.register_mapping; a key column given the collation after the
-- mapping was registered is refused at the first change.
-- ===========================================================================
CREATE COLLATION bat_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE bat_ci_keys (id text COLLATE bat_ci PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('bat_ci_keys');
CREATE TABLE bat_ci_two (a int, b text COLLATE bat_ci, v text, UNIQUE (a, b), PRIMARY KEY (a));
SELECT target FROM cdc.register_mapping('bat_ci_two', key_columns => ARRAY['a', 'b']);
SELECT target FROM cdc.register_mapping('bat_ci_two');  -- keyed by a alone: accepted
SELECT cdc.unregister_mapping('bat_ci_two');
DROP TABLE bat_ci_two;
DROP TABLE bat_ci_keys;
CREATE TABLE bat_ci_keys (id text PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('bat_ci_keys');
ALTER TABLE bat_ci_keys ALTER COLUMN id TYPE text COLLATE bat_ci;
SELECT x AS difference FROM bat_compare('bat_ci_keys', ARRAY[
  dbz('c', 'bat_ci_keys', '{"id": "A", "v": "first"}', '0/1000', 100),
  dbz('c', 'bat_ci_keys', '{"id": "a", "v": "second"}', '0/1100', 101)]) x;
SELECT bat_reset('bat_ci_keys');
SELECT outcomes FROM cdc_apply_batch(ARRAY[
  dbz('c', 'bat_ci_keys', '{"id": "A", "v": "first"}', '0/1000', 100),
  dbz('c', 'bat_ci_keys', '{"id": "a", "v": "second"}', '0/1100', 101)], 'bat_ci_keys', NULL, true);
SELECT * FROM bat_ci_keys;

-- ===========================================================================
-- Set-based rows are written as PostgreSQL's own apply writes them, without
-- SQL (src/pg/apply/table_write.cpp), only where a statement would do the
-- same: a role with every privilege on the table but no USAGE on its schema
-- gets the statement's error, and nothing is applied; a stored generated
-- column is computed; a NOT NULL violation in a final image names the column.
-- ===========================================================================
CREATE SCHEMA bat_hidden;
CREATE TABLE bat_hidden.rows (id int PRIMARY KEY, name text NOT NULL, len int GENERATED ALWAYS AS (length(name)) STORED);
SELECT target FROM cdc.register_mapping('bat_hidden.rows');
CREATE ROLE bat_writer;
GRANT SELECT, INSERT, UPDATE, DELETE ON bat_hidden.rows TO bat_writer;
SET ROLE bat_writer;
SELECT applied FROM cdc_apply_batch(ARRAY[
  dbz('c', 'rows', '{"id": 1, "name": "a"}', '0/1000', 100),
  dbz('u', 'rows', '{"id": 1, "name": "ab"}', '0/1100', 101)], 'bat_hidden.rows');
RESET ROLE;
SELECT count(*) AS rows_after_refusal FROM bat_hidden.rows;
GRANT USAGE ON SCHEMA bat_hidden TO bat_writer;
SET ROLE bat_writer;
SELECT applied FROM cdc_apply_batch(ARRAY[
  dbz('c', 'rows', '{"id": 1, "name": "a"}', '0/1000', 100),
  dbz('u', 'rows', '{"id": 1, "name": "ab"}', '0/1100', 101),
  dbz('c', 'rows', '{"id": 2, "name": "xyz"}', '0/1200', 102)], 'bat_hidden.rows');
SELECT applied FROM cdc_apply_batch(ARRAY[
  dbz('u', 'rows', '{"id": 2, "name": "wxyz"}', '0/1300', 103)], 'bat_hidden.rows');
RESET ROLE;
SELECT * FROM bat_hidden.rows ORDER BY id;
SELECT cdc_apply_batch(ARRAY[
  dbz('u', 'rows', '{"id": 1, "name": null}', '0/1400', 104)], 'bat_hidden.rows');
SELECT * FROM bat_hidden.rows ORDER BY id;
SELECT cdc.unregister_mapping('bat_hidden.rows');
DROP SCHEMA bat_hidden CASCADE;
DROP OWNED BY bat_writer;
DROP ROLE bat_writer;

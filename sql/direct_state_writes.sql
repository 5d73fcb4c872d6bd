--
-- direct_state_writes: the dedup claim and the entity records written through the
-- executor (cdc.direct_writes = on, the default; docs/internals.md, "Writes
-- without SQL") end in exactly the state the SQL statements give (off).
-- One history of one target (inserts, updates, deletes, a re-delivery, stale
-- and out-of-order changes, a blocked resurrection, a re-creation, a
-- re-published change, a same-version conflict) is applied with the
-- statements, its final state kept, everything reset, the same history
-- applied through the executor, and the two states compared row for row:
-- target rows, cdc.ledger (digest, target), cdc.entity_state (every column
-- but the write time), cdc.outbox, cdc.conflicts and the outcome counts.
-- Then the cases where the executor path gives way to the statement:
-- REPEATABLE READ, a trigger someone added on cdc.entity_state, a
-- read-only transaction.
--

CREATE TABLE ds_t (id int PRIMARY KEY, v text);
SELECT target, outbox FROM cdc.register_mapping('ds_t', outbox => true);

CREATE FUNCTION ds_ev(op text, id int, v text, lsn bigint, tx bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op,
           'source', jsonb_build_object('connector', 'postgresql', 'name', 'dwsrv', 'db', 'src',
                                        'schema', 'public', 'table', 'ds_t', 'lsn', lsn, 'txId', tx),
           'before', CASE WHEN op IN ('u', 'd') THEN jsonb_build_object('id', id) END,
           'after', CASE WHEN op IN ('c', 'u') THEN jsonb_build_object('id', id, 'v', v) END)
$$;

-- The history: each step an event and its delivery key.
CREATE TABLE ds_history (step int PRIMARY KEY, ev jsonb NOT NULL, dk text NOT NULL);
INSERT INTO ds_history VALUES
  (1,  ds_ev('c', 1, 'a',     100, 1), 'k:100'),
  (2,  ds_ev('c', 2, 'b',     110, 2), 'k:110'),
  (3,  ds_ev('u', 1, 'a2',    120, 3), 'k:120'),
  (4,  ds_ev('u', 1, 'a2',    120, 3), 'k:120'),        -- re-delivery: duplicate by the ledger
  (5,  ds_ev('u', 1, 'old',   105, 4), 'k:105'),        -- older than the record: stale
  (6,  ds_ev('d', 2, NULL,    130, 5), 'k:130'),        -- tombstone
  (7,  ds_ev('c', 2, 'b-old', 115, 6), 'k:115'),        -- older than the tombstone: blocked resurrection
  (8,  ds_ev('c', 2, 'b2',    140, 7), 'k:140'),        -- re-creation
  (9,  ds_ev('u', 1, 'a2',    120, 3), 'republished:1'), -- same version, same content: duplicate
  (10, ds_ev('u', 1, 'zz',    120, 3), 'republished:2'), -- same version, other content: conflict
  (11, ds_ev('c', 3, 'c',     150, 8), 'k:150'),
  (12, ds_ev('d', 3, NULL,    160, 9), 'k:160'),
  (13, ds_ev('c', 3, 'c2',    170, 10), 'k:170'),
  (14, ds_ev('d', 4, NULL,    180, 11), 'k:180'),       -- delete of a key never seen: a tombstone first
  (15, ds_ev('c', 4, 'd-old', 175, 12), 'k:175');       -- older than that tombstone: stale

-- Applies the history in one transaction (so each step must see the
-- previous steps' writes) with cdc.direct_writes = `direct`.
CREATE FUNCTION ds_run(direct bool) RETURNS TABLE (step int, outcome text) LANGUAGE plpgsql AS $$
DECLARE h record;
BEGIN
  PERFORM set_config('cdc.direct_writes', direct::text, true);
  FOR h IN SELECT * FROM ds_history ORDER BY 1 LOOP
    step := h.step;
    outcome := cdc_apply(h.ev, 'ds_t', h.dk);
    RETURN NEXT;
  END LOOP;
END $$;

-- Everything the history leaves behind, one text line per row.
CREATE FUNCTION ds_state() RETURNS TABLE (kind text, item text) LANGUAGE sql AS $$
  SELECT 'row', format('%s %s', id, v) FROM ds_t
  UNION ALL
  SELECT 'ledger', format('%s %s', digest, target) FROM cdc.ledger WHERE target = 'ds_t'::regclass
  UNION ALL
  SELECT 'entity', format('%s src=%s v=%s,%s,%s,%s deleted=%s chash=%s', e.key, s.name, e.v0, e.v1, e.v2, e.v3,
                          e.deleted, e.chash)
    FROM cdc.entity_state e JOIN cdc.source s ON s.id = e.src WHERE e.target = 'ds_t'::regclass
  UNION ALL
  SELECT 'outbox', format('%s %s %s %s %s', idempotency_key, op, entity_key, payload, version)
    FROM cdc.outbox WHERE target = 'ds_t'::regclass
  UNION ALL
  SELECT 'conflict', format('%s %s %s %s %s %s', delivery_key, op, reason, stored_version, event_version, event_image)
    FROM cdc.conflicts WHERE target = 'ds_t'::regclass
  UNION ALL
  SELECT 'stats', format('applied %s duplicate %s stale %s conflict %s blocked %s outbox %s', applied, duplicate,
                         stale, conflict, blocked_resurrections, outbox_rows)
    FROM cdc.stats WHERE target = 'ds_t'::regclass
$$;

CREATE FUNCTION ds_reset() RETURNS void LANGUAGE sql AS $$
  DELETE FROM ds_t;
  DELETE FROM cdc.ledger WHERE target = 'ds_t'::regclass;
  DELETE FROM cdc.entity_state WHERE target = 'ds_t'::regclass;
  DELETE FROM cdc.outbox WHERE target = 'ds_t'::regclass;
  DELETE FROM cdc.conflicts WHERE target = 'ds_t'::regclass;
  DELETE FROM cdc.counters WHERE target = 'ds_t'::regclass;
$$;

SHOW cdc.direct_writes;

-- 1. With the SQL statements.
SELECT * FROM ds_run(false);
CREATE TABLE ds_by_sql AS SELECT * FROM ds_state();
SELECT ds_reset();

-- 2. Through the executor: the same outcomes ...
SELECT * FROM ds_run(true);
CREATE TABLE ds_by_exec AS SELECT * FROM ds_state();

-- ... and the same state, row for row (no row on either side only).
SELECT 'sql only' AS side, * FROM (SELECT * FROM ds_by_sql EXCEPT ALL SELECT * FROM ds_by_exec) d
UNION ALL
SELECT 'executor only', * FROM (SELECT * FROM ds_by_exec EXCEPT ALL SELECT * FROM ds_by_sql) d;

-- The state itself (ledger digests and idempotency keys counted, not shown).
SELECT kind, count(*) FROM ds_by_exec GROUP BY kind ORDER BY kind;
SELECT kind, item FROM ds_by_exec WHERE kind IN ('row', 'entity', 'conflict', 'stats') ORDER BY kind, item;

-- 3. The second half of the history again, step by step in its own
-- transactions, alternating the two paths: a record written by one path is
-- locked and updated by the other.  Every step is a re-delivery now.
SET cdc.direct_writes = off;
SELECT cdc_apply(ev, 'ds_t', dk) FROM ds_history WHERE step = 8;
SET cdc.direct_writes = on;
SELECT cdc_apply(ev, 'ds_t', dk) FROM ds_history WHERE step = 13;
-- new versions of existing records, one per path
SELECT cdc_apply(ds_ev('u', 3, 'c3', 190, 13), 'ds_t', 'k:190');
SET cdc.direct_writes = off;
SELECT cdc_apply(ds_ev('u', 3, 'c4', 200, 14), 'ds_t', 'k:200');
SET cdc.direct_writes = on;
SELECT cdc_apply(ds_ev('d', 3, NULL, 210, 15), 'ds_t', 'k:210');
SELECT cdc_apply(ds_ev('c', 3, 'c-old', 205, 16), 'ds_t', 'k:205');
SELECT * FROM ds_t ORDER BY id;
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'ds_t'::regclass ORDER BY entity_key::text;
SELECT count(*) AS ledger_rows FROM cdc.ledger WHERE target = 'ds_t'::regclass;
SELECT op, entity_key, payload FROM cdc.outbox WHERE target = 'ds_t'::regclass AND version[2] >= 190 ORDER BY id;

-- 4. REPEATABLE READ: the statements run (their serialization checks); the
-- result is the same.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT cdc_apply(ds_ev('c', 5, 'e', 300, 20), 'ds_t', 'k:300');
SELECT cdc_apply(ds_ev('u', 5, 'e2', 310, 21), 'ds_t', 'k:310');
SELECT cdc_apply(ds_ev('u', 5, 'e2', 310, 21), 'ds_t', 'k:310');
COMMIT;
SELECT * FROM ds_t WHERE id = 5;
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'ds_t'::regclass AND entity_key = '{"id": "5"}';
SELECT cdc.delivery_processed('ds_t', 'k:300') AS k300, cdc.delivery_processed('ds_t', 'k:310') AS k310;

-- 5. A trigger on cdc.entity_state (only a superuser can add one): the
-- statements run, so it fires, once per record write.
BEGIN;
CREATE TEMP TABLE ds_fired (op text);
CREATE FUNCTION ds_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO ds_fired VALUES (TG_OP); RETURN NEW; END $$;
CREATE TRIGGER ds_count BEFORE INSERT OR UPDATE ON cdc.entity_state FOR EACH ROW EXECUTE FUNCTION ds_count();
SELECT cdc_apply(ds_ev('c', 6, 'f', 400, 30), 'ds_t', 'k:400');
SELECT cdc_apply(ds_ev('u', 6, 'f2', 410, 31), 'ds_t', 'k:410');
SELECT op, count(*) FROM ds_fired GROUP BY op ORDER BY op;
ROLLBACK;

-- 6. A read-only transaction: the claim is refused as the INSERT statement
-- refuses it (25006), nothing is written.
BEGIN READ ONLY;
SELECT cdc_apply(ds_ev('c', 7, 'g', 500, 40), 'ds_t', 'k:500');
ROLLBACK;
SELECT cdc.delivery_processed('ds_t', 'k:500') AS k500, (SELECT count(*) FROM ds_t WHERE id = 7) AS rows_7;

SELECT cdc.unregister_mapping('ds_t');
DROP TABLE ds_t, ds_history, ds_by_sql, ds_by_exec;
DROP FUNCTION ds_ev(text, int, text, bigint, bigint);
DROP FUNCTION ds_run(bool);
DROP FUNCTION ds_state();
DROP FUNCTION ds_reset();

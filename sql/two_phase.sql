--
-- two_phase: cdc_apply() and cdc_apply_batch() in a transaction that is
-- prepared (PREPARE TRANSACTION) and then rolled back or committed
-- (ROLLBACK / COMMIT PREPARED), with the table outbox and with
-- outbox_via => 'message'.  Needs max_prepared_transactions > 0 and
-- wal_level = logical (test/regress.conf).  Asserted on rows, cdc.entities,
-- the ledger, cdc.outbox, the decoded messages and cdc.stats:
--   - while prepared, nothing is visible; after ROLLBACK PREPARED nothing
--     stays (no claim, no record, no outbox row, no message), and the same
--     deliveries apply again;
--   - after COMMIT PREPARED everything is there once, and a replay is a
--     duplicate;
--   - the counts are written at PRE_PREPARE into this backend's
--     cdc.counters row of the target (docs/internals.md, "Counters"): the
--     session's next transaction applying to the same target must not wait
--     for the prepared one (it did: its commit waited on the prepared
--     transaction's row lock until another session resolved it, and
--     statement_timeout cannot stop a wait at commit).
--

-- The messages decoded since the last call (a prepared transaction is
-- decoded at COMMIT PREPARED: the slot is not two-phase).
SELECT 'init' FROM pg_create_logical_replication_slot('regress_cdc_two_phase', 'test_decoding');
CREATE FUNCTION tp_messages() RETURNS TABLE (op text, entity_key jsonb, target text) LANGUAGE sql AS $$
  SELECT m->>'op', m->'entity_key', m->>'target'
    FROM (SELECT substring(data FROM 'content:(.*)$')::jsonb AS m
            FROM pg_logical_slot_get_changes('regress_cdc_two_phase', NULL, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')
           WHERE data LIKE 'message: transactional: 1 prefix: cdc_outbox,%') s
$$;
-- One source table 'tp', two targets: rows and table outbox (tp_tab), rows
-- and messages (tp_msg); the events name their target.
CREATE TABLE tp (id int PRIMARY KEY, v text);
CREATE TABLE tp_msg (id int PRIMARY KEY, v text);
CREATE TABLE tp_tab (id int PRIMARY KEY, v text);
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC;
SELECT target, outbox, outbox_via FROM cdc.register_mapping('tp_tab', source_table => 'tp', outbox => true, source_name => 'srv');
SELECT target, outbox, outbox_via FROM cdc.register_mapping('tp_msg', source_table => 'tp', outbox => true, outbox_via => 'message');
-- Everything the engine keeps about a target, one row per kind.
CREATE FUNCTION tp_state(t regclass) RETURNS TABLE (kind text, items text) LANGUAGE plpgsql AS $$
BEGIN
  kind := 'rows';
  EXECUTE format('SELECT string_agg(id || ''='' || v, ''; '' ORDER BY id) FROM %s', t) INTO items;
  RETURN NEXT;
  kind := 'entities';
  SELECT string_agg(entity_key::text || CASE WHEN is_tombstone THEN ' (tombstone)' ELSE '' END, '; ' ORDER BY entity_key::text)
    INTO items FROM cdc.entities WHERE target = t;
  RETURN NEXT;
  kind := 'outbox';
  SELECT string_agg(op || ' ' || entity_key::text, '; ' ORDER BY id) INTO items FROM cdc.outbox WHERE target = t;
  RETURN NEXT;
  kind := 'ledger';
  items := ledger_count(t)::text;
  RETURN NEXT;
  kind := 'stats';
  SELECT format('applied %s, duplicate %s, outbox_rows %s', applied, duplicate, outbox_rows) INTO items
    FROM cdc.stats WHERE target = t;
  RETURN NEXT;
END $$;

-- a source row committed first, so that the prepared transactions below
-- create no cdc.source / cdc.outbox_source rows
SELECT cdc_apply(dbz('c', 'tp', '{"id": 100, "v": "seed"}', '0/0100', 1), 'tp_tab') AS seed_tab,
       cdc_apply(dbz('c', 'tp', '{"id": 100, "v": "seed"}', '0/0100', 1), 'tp_msg') AS seed_msg;
SELECT * FROM tp_messages();

CREATE TABLE tp_ev (n int PRIMARY KEY, ev jsonb NOT NULL);
INSERT INTO tp_ev VALUES
  (1, dbz('c', 'tp', '{"id": 1, "v": "a"}', '0/1000', 10)),
  (2, dbz('u', 'tp', '{"id": 1, "v": "b"}', '0/1100', 11)),
  (3, dbz('c', 'tp', '{"id": 2, "v": "c"}', '0/1200', 12)),
  (4, dbz('d', 'tp', NULL, '0/1300', 13, before => '{"id": 100}'));

-- ===========================================================================
-- a. PREPARE, then ROLLBACK PREPARED: nothing stays, nothing is decoded.
-- ===========================================================================
BEGIN;
SELECT n, cdc_apply(ev, 'tp_tab') AS tab, cdc_apply(ev, 'tp_msg') AS msg FROM tp_ev WHERE n <= 2 ORDER BY n;
SELECT applied FROM cdc_apply_batch(ARRAY(SELECT ev FROM tp_ev WHERE n > 2 ORDER BY n), 'tp_tab');
SELECT applied FROM cdc_apply_batch(ARRAY(SELECT ev FROM tp_ev WHERE n > 2 ORDER BY n), 'tp_msg');
PREPARE TRANSACTION 'cdc_tp_rollback';
SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'cdc_tp_%';
-- while prepared: the session sees the state before the transaction
SELECT * FROM tp_state('tp_tab');
ROLLBACK PREPARED 'cdc_tp_rollback';
SELECT * FROM tp_state('tp_tab');
SELECT * FROM tp_state('tp_msg');
SELECT * FROM tp_messages();

-- ===========================================================================
-- b. The same deliveries again, PREPARE, COMMIT PREPARED: they apply (the
--    rolled-back claims are gone), once; the messages are decoded once.
-- ===========================================================================
BEGIN;
SELECT n, cdc_apply(ev, 'tp_tab') AS tab, cdc_apply(ev, 'tp_msg') AS msg FROM tp_ev WHERE n <= 2 ORDER BY n;
SELECT applied FROM cdc_apply_batch(ARRAY(SELECT ev FROM tp_ev WHERE n > 2 ORDER BY n), 'tp_tab');
SELECT applied FROM cdc_apply_batch(ARRAY(SELECT ev FROM tp_ev WHERE n > 2 ORDER BY n), 'tp_msg');
PREPARE TRANSACTION 'cdc_tp_commit';
-- not decoded before COMMIT PREPARED
SELECT * FROM tp_messages();
COMMIT PREPARED 'cdc_tp_commit';
SELECT * FROM tp_state('tp_tab');
SELECT * FROM tp_state('tp_msg');
SELECT * FROM tp_messages();
-- a replay after COMMIT PREPARED: duplicates, nothing more
SELECT n, cdc_apply(ev, 'tp_tab') AS tab, cdc_apply(ev, 'tp_msg') AS msg FROM tp_ev ORDER BY n;
SELECT duplicate FROM cdc_apply_batch(ARRAY(SELECT ev FROM tp_ev ORDER BY n), 'tp_tab');
SELECT * FROM tp_state('tp_tab');
SELECT * FROM tp_messages();

-- ===========================================================================
-- c. While a transaction of this session is prepared, the session's next
--    transaction applies other deliveries to the same target and commits
--    without waiting for it (lock_timeout stands for "waits for ever":
--    statement_timeout does not cover the wait at commit).
-- ===========================================================================
BEGIN;
SELECT cdc_apply(dbz('c', 'tp', '{"id": 3, "v": "held"}', '0/1400', 14), 'tp_tab') AS held_tab,
       cdc_apply(dbz('c', 'tp', '{"id": 3, "v": "held"}', '0/1400', 14), 'tp_msg') AS held_msg;
PREPARE TRANSACTION 'cdc_tp_hold';
SET lock_timeout = '3s';
\set VERBOSITY terse
SELECT cdc_apply(dbz('c', 'tp', '{"id": 4, "v": "next"}', '0/1500', 15), 'tp_tab') AS next_tab;
SELECT cdc_apply(dbz('c', 'tp', '{"id": 4, "v": "next"}', '0/1500', 15), 'tp_msg') AS next_msg;
SELECT applied FROM cdc_apply_batch(ARRAY[dbz('c', 'tp', '{"id": 5, "v": "next"}', '0/1600', 16)], 'tp_tab');
\set VERBOSITY default
RESET lock_timeout;
COMMIT PREPARED 'cdc_tp_hold';
SELECT * FROM tp_state('tp_tab');
SELECT * FROM tp_state('tp_msg');
SELECT * FROM tp_messages();
-- the counters of cdc.stats are the sums of what committed, nothing twice
SELECT target, applied, duplicate, outbox_rows FROM cdc.stats WHERE target IN ('tp_tab'::regclass, 'tp_msg'::regclass)
 ORDER BY target::text;

-- the prepared transactions' counts share one row per target (one no open
-- transaction holds is reused), apart from this backend's own row
SELECT target, count(*) FILTER (WHERE backend_id < 0) AS prepared_rows, count(*) FILTER (WHERE backend_id > 0) AS backend_rows
  FROM cdc.counters WHERE target IN ('tp_tab'::regclass, 'tp_msg'::regclass) GROUP BY target ORDER BY target::text;
SELECT count(*) AS prepared_left FROM pg_prepared_xacts WHERE gid LIKE 'cdc_tp_%';
SELECT pg_drop_replication_slot('regress_cdc_two_phase');
GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) TO PUBLIC;

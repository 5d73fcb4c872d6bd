--
-- insert_skipping_taken: ledger claims, new entity records and outbox rows
-- inserted without speculative insertion (docs/internals.md, "Inserts
-- without speculative insertion") give what the statements give: the same
-- scenario through the executor (ist_on, cdc.direct_writes on) and with the
-- statements (ist_off, off) ends with the same outcomes, ledger, entity
-- records, rows, outbox and counters; one outbox row per change; no 23505.
-- The same delivery twice in one batch and in one transaction, state
-- pruned (ledger and entity records deleted) in the same and in an earlier
-- transaction, a rolled-back savepoint, REPEATABLE READ and SERIALIZABLE
-- (the statements there), batches over the 1,000-row insert chunks.
-- isolation spec insert_skipping_taken has the concurrent cases.
--
CREATE FUNCTION ist_ev(op text, id int, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'ist', 'schema', 'public', 'table', current_setting('ist.tbl'), 'lsn', lsn, 'txId', lsn),
    'before', CASE WHEN op = 'd' THEN jsonb_build_object('id', id) END,
    'after', CASE WHEN op <> 'd' THEN jsonb_build_object('id', id, 'v', v) END) $$;
CREATE TABLE ist_result (dw text, what text, result text);
CREATE TABLE ist_on (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('ist_on', source_table => 'ist_on', outbox => true);
SET ist.tbl = 'ist_on';
SET cdc.direct_writes = on;
\echo S1 same event twice in one batch (derived delivery key) plus a new one
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',1,'a',1000), ist_ev('c',1,'a',1000), ist_ev('c',2,'x',1000)), 'ist_on'::regclass);
\echo S2 explicit delivery keys: same key for two different changes in one batch
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('u',1,'b',1100), ist_ev('u',1,'c',1200), ist_ev('u',2,'y',1100)), 'ist_on'::regclass, ARRAY['dk-1','dk-1','dk-2']);
\echo S3 two calls in one transaction
BEGIN;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('u',1,'d',1300), ist_ev('c',3,'z',1300)), 'ist_on'::regclass);
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('u',1,'d',1300), ist_ev('c',3,'z',1300)), 'ist_on'::regclass);
SELECT cdc_apply(ist_ev('u',1,'d',1300), 'ist_on'::regclass) AS single_again, cdc_apply(ist_ev('u',3,'z2',1400), 'ist_on'::regclass) AS single_new,
       cdc_apply(ist_ev('u',3,'z2',1400), 'ist_on'::regclass) AS single_same;
COMMIT;
\echo S4 pruning in the same transaction, then replay (state gone, outbox kept)
BEGIN;
DELETE FROM cdc.ledger WHERE target = 'ist_on'::regclass;
DELETE FROM cdc.entity_state WHERE target = 'ist_on'::regclass;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',1,'a',1000), ist_ev('u',1,'b',1100), ist_ev('u',1,'c',1200), ist_ev('u',1,'d',1300), ist_ev('c',3,'z',1300), ist_ev('u',3,'z2',1400), ist_ev('c',4,'n',1500)), 'ist_on'::regclass);
COMMIT;
\echo S5 pruning committed in another transaction, replay under new delivery keys
DELETE FROM cdc.ledger WHERE target = 'ist_on'::regclass;
DELETE FROM cdc.entity_state WHERE target = 'ist_on'::regclass;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',1,'a',1000), ist_ev('u',1,'d',1300), ist_ev('u',3,'z2',1400), ist_ev('c',4,'n',1500), ist_ev('c',5,'m',1600)), 'ist_on'::regclass, ARRAY['g2-1','g2-2','g2-3','g2-4','g2-5']);
\echo S6 savepoint rolled back, then the same batch again
BEGIN;
SAVEPOINT s;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',6,'p',1700), ist_ev('c',6,'p',1700), ist_ev('u',5,'m2',1800)), 'ist_on'::regclass);
ROLLBACK TO SAVEPOINT s;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',6,'p',1700), ist_ev('c',6,'p',1700), ist_ev('u',5,'m2',1800)), 'ist_on'::regclass);
COMMIT;
\echo S7 REPEATABLE READ and SERIALIZABLE
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',7,'q',1900), ist_ev('c',7,'q',1900), ist_ev('u',6,'p2',2000)), 'ist_on'::regclass);
DELETE FROM cdc.ledger WHERE target = 'ist_on'::regclass;
DELETE FROM cdc.entity_state WHERE target = 'ist_on'::regclass;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',7,'q',1900), ist_ev('u',6,'p2',2000), ist_ev('c',8,'r',2100)), 'ist_on'::regclass);
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',9,'s',2200), ist_ev('c',9,'s',2200), ist_ev('u',8,'r2',2300)), 'ist_on'::regclass);
SELECT cdc_apply(ist_ev('c',9,'s',2200), 'ist_on'::regclass) AS ser_single;
COMMIT;
\echo S8 large batch across the 1000-row chunks: 1200 new entities, each delivered twice (second copy 1000 later)
SELECT applied, duplicate, stale FROM cdc_apply_batch(
  (SELECT jsonb_agg(ist_ev('c', 100 + (g % 1200), 'big', 5000 + (g % 1200)) ORDER BY g) FROM generate_series(0, 2399) g), 'ist_on'::regclass);
\echo S9 a delete then older replays of pruned state
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('d',1,NULL,9000), ist_ev('u',1,'old',1350)), 'ist_on'::regclass);
\echo result
SELECT count(*) AS ledger_rows FROM cdc.ledger WHERE target = 'ist_on'::regclass;
SELECT md5(string_agg(format('%s|%s|%s|%s|%s|%s|%s', key, v0, v1, v2, v3, deleted, chash), ';' ORDER BY key)) AS entity_hash, count(*) AS entity_records
  FROM cdc.entity_state WHERE target = 'ist_on'::regclass;
SELECT md5(string_agg(format('%s|%s', id, v), ';' ORDER BY id)) AS rows_hash, count(*) AS rows FROM ist_on;
SELECT md5(string_agg(format('%s|%s|%s|%s', op, entity_key, payload, version), ';' ORDER BY id)) AS outbox_hash, count(*) AS outbox_rows,
       count(DISTINCT idempotency_key) AS distinct_keys FROM cdc.outbox WHERE target = 'ist_on'::regclass;
SELECT applied, duplicate, stale, conflict, outbox_rows FROM cdc.stats WHERE target = 'ist_on'::regclass;
INSERT INTO ist_result
  SELECT 'on', 'ledger', count(*)::text FROM cdc.ledger WHERE target = 'ist_on'::regclass
  UNION ALL SELECT 'on', 'entity records', string_agg(format('%s|%s|%s|%s|%s|%s|%s', key, v0, v1, v2, v3, deleted, chash), ';' ORDER BY key)
    FROM cdc.entity_state WHERE target = 'ist_on'::regclass
  UNION ALL SELECT 'on', 'rows', string_agg(format('%s|%s', id, v), ';' ORDER BY id) FROM ist_on
  UNION ALL SELECT 'on', 'outbox', string_agg(format('%s|%s|%s|%s', op, entity_key, payload, version), ';' ORDER BY id)
    FROM cdc.outbox WHERE target = 'ist_on'::regclass
  UNION ALL SELECT 'on', 'stats', format('%s|%s|%s|%s|%s', applied, duplicate, stale, conflict, outbox_rows) FROM cdc.stats WHERE target = 'ist_on'::regclass;
RESET cdc.direct_writes;
CREATE TABLE ist_off (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('ist_off', source_table => 'ist_off', outbox => true);
SET ist.tbl = 'ist_off';
SET cdc.direct_writes = off;
\echo S1 same event twice in one batch (derived delivery key) plus a new one
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',1,'a',1000), ist_ev('c',1,'a',1000), ist_ev('c',2,'x',1000)), 'ist_off'::regclass);
\echo S2 explicit delivery keys: same key for two different changes in one batch
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('u',1,'b',1100), ist_ev('u',1,'c',1200), ist_ev('u',2,'y',1100)), 'ist_off'::regclass, ARRAY['dk-1','dk-1','dk-2']);
\echo S3 two calls in one transaction
BEGIN;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('u',1,'d',1300), ist_ev('c',3,'z',1300)), 'ist_off'::regclass);
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('u',1,'d',1300), ist_ev('c',3,'z',1300)), 'ist_off'::regclass);
SELECT cdc_apply(ist_ev('u',1,'d',1300), 'ist_off'::regclass) AS single_again, cdc_apply(ist_ev('u',3,'z2',1400), 'ist_off'::regclass) AS single_new,
       cdc_apply(ist_ev('u',3,'z2',1400), 'ist_off'::regclass) AS single_same;
COMMIT;
\echo S4 pruning in the same transaction, then replay (state gone, outbox kept)
BEGIN;
DELETE FROM cdc.ledger WHERE target = 'ist_off'::regclass;
DELETE FROM cdc.entity_state WHERE target = 'ist_off'::regclass;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',1,'a',1000), ist_ev('u',1,'b',1100), ist_ev('u',1,'c',1200), ist_ev('u',1,'d',1300), ist_ev('c',3,'z',1300), ist_ev('u',3,'z2',1400), ist_ev('c',4,'n',1500)), 'ist_off'::regclass);
COMMIT;
\echo S5 pruning committed in another transaction, replay under new delivery keys
DELETE FROM cdc.ledger WHERE target = 'ist_off'::regclass;
DELETE FROM cdc.entity_state WHERE target = 'ist_off'::regclass;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',1,'a',1000), ist_ev('u',1,'d',1300), ist_ev('u',3,'z2',1400), ist_ev('c',4,'n',1500), ist_ev('c',5,'m',1600)), 'ist_off'::regclass, ARRAY['g2-1','g2-2','g2-3','g2-4','g2-5']);
\echo S6 savepoint rolled back, then the same batch again
BEGIN;
SAVEPOINT s;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',6,'p',1700), ist_ev('c',6,'p',1700), ist_ev('u',5,'m2',1800)), 'ist_off'::regclass);
ROLLBACK TO SAVEPOINT s;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',6,'p',1700), ist_ev('c',6,'p',1700), ist_ev('u',5,'m2',1800)), 'ist_off'::regclass);
COMMIT;
\echo S7 REPEATABLE READ and SERIALIZABLE
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',7,'q',1900), ist_ev('c',7,'q',1900), ist_ev('u',6,'p2',2000)), 'ist_off'::regclass);
DELETE FROM cdc.ledger WHERE target = 'ist_off'::regclass;
DELETE FROM cdc.entity_state WHERE target = 'ist_off'::regclass;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',7,'q',1900), ist_ev('u',6,'p2',2000), ist_ev('c',8,'r',2100)), 'ist_off'::regclass);
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',9,'s',2200), ist_ev('c',9,'s',2200), ist_ev('u',8,'r2',2300)), 'ist_off'::regclass);
SELECT cdc_apply(ist_ev('c',9,'s',2200), 'ist_off'::regclass) AS ser_single;
COMMIT;
\echo S8 large batch across the 1000-row chunks: 1200 new entities, each delivered twice (second copy 1000 later)
SELECT applied, duplicate, stale FROM cdc_apply_batch(
  (SELECT jsonb_agg(ist_ev('c', 100 + (g % 1200), 'big', 5000 + (g % 1200)) ORDER BY g) FROM generate_series(0, 2399) g), 'ist_off'::regclass);
\echo S9 a delete then older replays of pruned state
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('d',1,NULL,9000), ist_ev('u',1,'old',1350)), 'ist_off'::regclass);
\echo result
SELECT count(*) AS ledger_rows FROM cdc.ledger WHERE target = 'ist_off'::regclass;
SELECT md5(string_agg(format('%s|%s|%s|%s|%s|%s|%s', key, v0, v1, v2, v3, deleted, chash), ';' ORDER BY key)) AS entity_hash, count(*) AS entity_records
  FROM cdc.entity_state WHERE target = 'ist_off'::regclass;
SELECT md5(string_agg(format('%s|%s', id, v), ';' ORDER BY id)) AS rows_hash, count(*) AS rows FROM ist_off;
SELECT md5(string_agg(format('%s|%s|%s|%s', op, entity_key, payload, version), ';' ORDER BY id)) AS outbox_hash, count(*) AS outbox_rows,
       count(DISTINCT idempotency_key) AS distinct_keys FROM cdc.outbox WHERE target = 'ist_off'::regclass;
SELECT applied, duplicate, stale, conflict, outbox_rows FROM cdc.stats WHERE target = 'ist_off'::regclass;
INSERT INTO ist_result
  SELECT 'off', 'ledger', count(*)::text FROM cdc.ledger WHERE target = 'ist_off'::regclass
  UNION ALL SELECT 'off', 'entity records', string_agg(format('%s|%s|%s|%s|%s|%s|%s', key, v0, v1, v2, v3, deleted, chash), ';' ORDER BY key)
    FROM cdc.entity_state WHERE target = 'ist_off'::regclass
  UNION ALL SELECT 'off', 'rows', string_agg(format('%s|%s', id, v), ';' ORDER BY id) FROM ist_off
  UNION ALL SELECT 'off', 'outbox', string_agg(format('%s|%s|%s|%s', op, entity_key, payload, version), ';' ORDER BY id)
    FROM cdc.outbox WHERE target = 'ist_off'::regclass
  UNION ALL SELECT 'off', 'stats', format('%s|%s|%s|%s|%s', applied, duplicate, stale, conflict, outbox_rows) FROM cdc.stats WHERE target = 'ist_off'::regclass;
RESET cdc.direct_writes;
-- identical, part by part
SELECT what, count(DISTINCT result) = 1 AS same, count(*) AS runs FROM ist_result GROUP BY what ORDER BY what;
SELECT what, result FROM ist_result WHERE dw = 'on' AND what IN ('ledger', 'stats') ORDER BY what;
DROP TABLE ist_result, ist_on, ist_off;
DROP FUNCTION ist_ev(text, int, text, bigint);

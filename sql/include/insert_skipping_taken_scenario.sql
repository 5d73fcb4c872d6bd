-- The scenario of insert_skipping_taken.sql, run once per setting of
-- cdc.direct_writes: psql variables tbl (the target, created here) and dw
-- (on or off).  Included with \i; not a test of its own.
CREATE TABLE :tbl (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping(:'tbl', source_table => :'tbl', outbox => true);
SET ist.tbl = :'tbl';
SET cdc.direct_writes = :dw;
\echo S1 same event twice in one batch (derived delivery key) plus a new one
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',1,'a',1000), ist_ev('c',1,'a',1000), ist_ev('c',2,'x',1000)), :'tbl'::regclass);
\echo S2 explicit delivery keys: same key for two different changes in one batch
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('u',1,'b',1100), ist_ev('u',1,'c',1200), ist_ev('u',2,'y',1100)), :'tbl'::regclass, ARRAY['dk-1','dk-1','dk-2']);
\echo S3 two calls in one transaction
BEGIN;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('u',1,'d',1300), ist_ev('c',3,'z',1300)), :'tbl'::regclass);
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('u',1,'d',1300), ist_ev('c',3,'z',1300)), :'tbl'::regclass);
SELECT cdc_apply(ist_ev('u',1,'d',1300), :'tbl'::regclass) AS single_again, cdc_apply(ist_ev('u',3,'z2',1400), :'tbl'::regclass) AS single_new,
       cdc_apply(ist_ev('u',3,'z2',1400), :'tbl'::regclass) AS single_same;
COMMIT;
\echo S4 pruning in the same transaction, then replay (state gone, outbox kept)
BEGIN;
DELETE FROM cdc.ledger WHERE target = :'tbl'::regclass;
DELETE FROM cdc.entity_state WHERE target = :'tbl'::regclass;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',1,'a',1000), ist_ev('u',1,'b',1100), ist_ev('u',1,'c',1200), ist_ev('u',1,'d',1300), ist_ev('c',3,'z',1300), ist_ev('u',3,'z2',1400), ist_ev('c',4,'n',1500)), :'tbl'::regclass);
COMMIT;
\echo S5 pruning committed in another transaction, replay under new delivery keys
DELETE FROM cdc.ledger WHERE target = :'tbl'::regclass;
DELETE FROM cdc.entity_state WHERE target = :'tbl'::regclass;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',1,'a',1000), ist_ev('u',1,'d',1300), ist_ev('u',3,'z2',1400), ist_ev('c',4,'n',1500), ist_ev('c',5,'m',1600)), :'tbl'::regclass, ARRAY['g2-1','g2-2','g2-3','g2-4','g2-5']);
\echo S6 savepoint rolled back, then the same batch again
BEGIN;
SAVEPOINT s;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',6,'p',1700), ist_ev('c',6,'p',1700), ist_ev('u',5,'m2',1800)), :'tbl'::regclass);
ROLLBACK TO SAVEPOINT s;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',6,'p',1700), ist_ev('c',6,'p',1700), ist_ev('u',5,'m2',1800)), :'tbl'::regclass);
COMMIT;
\echo S7 REPEATABLE READ and SERIALIZABLE
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',7,'q',1900), ist_ev('c',7,'q',1900), ist_ev('u',6,'p2',2000)), :'tbl'::regclass);
DELETE FROM cdc.ledger WHERE target = :'tbl'::regclass;
DELETE FROM cdc.entity_state WHERE target = :'tbl'::regclass;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',7,'q',1900), ist_ev('u',6,'p2',2000), ist_ev('c',8,'r',2100)), :'tbl'::regclass);
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('c',9,'s',2200), ist_ev('c',9,'s',2200), ist_ev('u',8,'r2',2300)), :'tbl'::regclass);
SELECT cdc_apply(ist_ev('c',9,'s',2200), :'tbl'::regclass) AS ser_single;
COMMIT;
\echo S8 large batch across the 1000-row chunks: 1200 new entities, each delivered twice (second copy 1000 later)
SELECT applied, duplicate, stale FROM cdc_apply_batch(
  (SELECT jsonb_agg(ist_ev('c', 100 + (g % 1200), 'big', 5000 + (g % 1200)) ORDER BY g) FROM generate_series(0, 2399) g), :'tbl'::regclass);
\echo S9 a delete then older replays of pruned state
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ist_ev('d',1,NULL,9000), ist_ev('u',1,'old',1350)), :'tbl'::regclass);
\echo result
SELECT count(*) AS ledger_rows FROM cdc.ledger WHERE target = :'tbl'::regclass;
SELECT md5(string_agg(format('%s|%s|%s|%s|%s|%s|%s', key, v0, v1, v2, v3, deleted, chash), ';' ORDER BY key)) AS entity_hash, count(*) AS entity_records
  FROM cdc.entity_state WHERE target = :'tbl'::regclass;
SELECT md5(string_agg(format('%s|%s', id, v), ';' ORDER BY id)) AS rows_hash, count(*) AS rows FROM :tbl;
SELECT md5(string_agg(format('%s|%s|%s|%s', op, entity_key, payload, version), ';' ORDER BY id)) AS outbox_hash, count(*) AS outbox_rows,
       count(DISTINCT idempotency_key) AS distinct_keys FROM cdc.outbox WHERE target = :'tbl'::regclass;
SELECT applied, duplicate, stale, conflict, outbox_rows FROM cdc.stats WHERE target = :'tbl'::regclass;
INSERT INTO ist_result
  SELECT :'dw', 'ledger', count(*)::text FROM cdc.ledger WHERE target = :'tbl'::regclass
  UNION ALL SELECT :'dw', 'entity records', string_agg(format('%s|%s|%s|%s|%s|%s|%s', key, v0, v1, v2, v3, deleted, chash), ';' ORDER BY key)
    FROM cdc.entity_state WHERE target = :'tbl'::regclass
  UNION ALL SELECT :'dw', 'rows', string_agg(format('%s|%s', id, v), ';' ORDER BY id) FROM :tbl
  UNION ALL SELECT :'dw', 'outbox', string_agg(format('%s|%s|%s|%s', op, entity_key, payload, version), ';' ORDER BY id)
    FROM cdc.outbox WHERE target = :'tbl'::regclass
  UNION ALL SELECT :'dw', 'stats', format('%s|%s|%s|%s|%s', applied, duplicate, stale, conflict, outbox_rows) FROM cdc.stats WHERE target = :'tbl'::regclass;
RESET cdc.direct_writes;

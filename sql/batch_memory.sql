--
-- batch_memory: a cdc_apply_batch() call works in memory its backend keeps
-- between calls (docs/internals.md, "Memory of a batch"), reset when a call
-- returns.  Its contract: a batch applied by a trigger or handler while
-- another batch runs (the nested call allocates in its own caller's
-- context) leaves both batches' effects intact; a failed batch leaves the
-- next one unaffected; a batch larger than the memory kept is applied whole.
-- And entity records' keys compare byte by byte (COLLATE "C"): keys that
-- differ only in case or accents stay distinct entities.  Tables: bm_*.
--

CREATE TABLE bm_orders (id int PRIMARY KEY, note text);
CREATE TABLE bm_audit (id int PRIMARY KEY, note text);
SELECT 1 FROM cdc.register_mapping('bm_orders', source_table => 'bm_orders', outbox => true);
SELECT 1 FROM cdc.register_mapping('bm_audit', source_table => 'bm_audit', outbox => true);

-- Every row inserted into bm_orders is copied into bm_audit by a batch of
-- its own, applied from the trigger while the outer batch still runs (the
-- engine writes with search_path = pg_catalog: names are qualified).
CREATE FUNCTION bm_copy() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r cdc.batch_result;
BEGIN
  r := public.cdc_apply_batch(jsonb_build_array(
         public.dbz('c', 'bm_audit', jsonb_build_object('id', NEW.id, 'note', 'copy of ' || NEW.note),
             lsn => '0/' || to_hex(4096 + NEW.id * 16), tx => NEW.id)));
  IF r.applied <> 1 THEN
    RAISE EXCEPTION 'nested batch: %', r;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER bm_copy AFTER INSERT ON bm_orders FOR EACH ROW EXECUTE FUNCTION bm_copy();

-- 200 inserts with long notes, so that the outer batch's images, payloads
-- and outbox tuples are still in use when each nested batch runs.
SELECT events, applied FROM cdc_apply_batch(
  (SELECT jsonb_agg(dbz('c', 'bm_orders', jsonb_build_object('id', i, 'note', repeat(chr(97 + i % 26), 500)),
                        lsn => ('0/' || to_hex(4096 + i * 16)), tx => 100 + i) ORDER BY i)
     FROM generate_series(1, 200) i));
SELECT count(*) AS rows, count(DISTINCT note) AS notes, min(length(note)), max(length(note)) FROM bm_orders;
SELECT count(*) AS copies,
       count(*) FILTER (WHERE a.note = 'copy of ' || o.note) AS matching
  FROM bm_audit a JOIN bm_orders o USING (id);
SELECT target, count(*) AS outbox_rows, count(DISTINCT idempotency_key) AS keys
  FROM cdc.outbox WHERE target IN ('bm_orders'::regclass, 'bm_audit'::regclass) GROUP BY target ORDER BY target::text;
SELECT target, count(*) AS entity_records FROM cdc.entity_state
 WHERE target IN ('bm_orders'::regclass, 'bm_audit'::regclass) GROUP BY target ORDER BY target::text;

DROP TRIGGER bm_copy ON bm_orders;

-- A batch that fails half-way (its second event names a column the target
-- lacks) applies nothing, and the next batch of the same transaction,
-- after the failure was caught, is applied whole.
BEGIN;
DO $$
BEGIN
  PERFORM cdc_apply_batch(jsonb_build_array(
    dbz('u', 'bm_orders', '{"id": 1, "note": "changed"}', lsn => '0/9000', tx => 900),
    dbz('u', 'bm_orders', '{"id": 2, "no_such_column": 1}', lsn => '0/9010', tx => 901)));
EXCEPTION WHEN others THEN
  RAISE NOTICE 'batch failed: % %', SQLSTATE, SQLERRM;
END $$;
SELECT id, length(note) = 500 AS unchanged FROM bm_orders WHERE id IN (1, 2) ORDER BY id;
SELECT events, applied, stale FROM cdc_apply_batch(jsonb_build_array(
  dbz('u', 'bm_orders', '{"id": 1, "note": "changed"}', lsn => '0/9000', tx => 900),
  dbz('u', 'bm_orders', '{"id": 2, "note": "changed too"}', lsn => '0/9010', tx => 901)));
COMMIT;
SELECT id, note FROM bm_orders WHERE id IN (1, 2) ORDER BY id;

-- A batch of 3,000 events with 2 kB notes (about 20 MB of work, five times
-- the memory kept): all applied, one outbox row each.
SELECT events, applied FROM cdc_apply_batch(
  (SELECT jsonb_agg(dbz('u', 'bm_orders', jsonb_build_object('id', 1 + i % 200, 'note', repeat(chr(65 + i % 26), 2000) || i),
                        lsn => ('0/' || to_hex(65536 + i * 16)), tx => 1000 + i) ORDER BY i)
     FROM generate_series(1, 3000) i));
SELECT count(*) AS rows, count(*) FILTER (WHERE length(note) >= 2001) AS rewritten FROM bm_orders;
SELECT count(*) AS outbox_rows FROM cdc.outbox WHERE target = 'bm_orders'::regclass;
-- the last change of every key won
SELECT count(*) AS last_notes FROM bm_orders o
 WHERE o.note = repeat(chr(65 + ((SELECT max(i) FROM generate_series(1, 3000) i WHERE 1 + i % 200 = o.id) % 26)), 2000)
               || (SELECT max(i) FROM generate_series(1, 3000) i WHERE 1 + i % 200 = o.id);

-- Entity records compare keys byte by byte.
SELECT collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
 WHERE a.attrelid = 'cdc.entity_state'::regclass AND a.attname = 'key';
CREATE TABLE bm_names (name text PRIMARY KEY, n int);
SELECT 1 FROM cdc.register_mapping('bm_names', source_table => 'bm_names');
SELECT events, applied, stale, duplicate FROM cdc_apply_batch(jsonb_build_array(
  dbz('c', 'bm_names', '{"name": "Ève", "n": 1}', lsn => '0/A000', tx => 2000),
  dbz('c', 'bm_names', '{"name": "eve", "n": 2}', lsn => '0/A010', tx => 2001),
  dbz('c', 'bm_names', '{"name": "Eve", "n": 3}', lsn => '0/A020', tx => 2002),
  dbz('u', 'bm_names', '{"name": "eve", "n": 4}', lsn => '0/A030', tx => 2003),
  dbz('d', 'bm_names', NULL, lsn => '0/A040', tx => 2004, before => '{"name": "Eve"}'),
  dbz('u', 'bm_names', '{"name": "Eve", "n": 5}', lsn => '0/A020', tx => 2002)));
SELECT name, n FROM bm_names ORDER BY name COLLATE "C";
SELECT key, deleted FROM cdc.entity_state WHERE target = 'bm_names'::regclass ORDER BY key;

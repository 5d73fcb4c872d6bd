--
-- batch_memory_long: a long session of batches keeps the backend's memory
-- bounded (docs/internals.md, "Memory of a batch": the context kept is
-- reset when a call returns and when the next call starts; a failed call
-- leaves its memory there until then).  300 batches of 200 events with
-- outbox rows, in all three input forms and with offsets, and 100 batches
-- that fail at their last event: the memory of the backend's contexts
-- after them is that after the first 50.  (Measured by a fresh-user run:
-- RssAnon stayed at 10.8-12.5 MB over 800 batches of 500 events; VmRSS grows
-- only by the shared buffers the session touches.)  Tables: bml_*.
--
CREATE TABLE bml_t (id int PRIMARY KEY, note text, amount numeric(12,2));
SELECT 1 FROM cdc.register_mapping('bml_t', source_table => 'bml_t', outbox => true);
CREATE FUNCTION bml_batch(b int) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_agg(dbz(CASE WHEN g % 7 = 0 THEN 'd' WHEN g % 3 = 0 THEN 'u' ELSE 'c' END, 'bml_t',
                       CASE WHEN g % 7 <> 0 THEN jsonb_build_object('id', (b * 200 + g) % 5000, 'note', repeat('n', g), 'amount', g) END,
                       lsn => '0/' || to_hex(65536 + b * 1000 + g), tx => b,
                       before => CASE WHEN g % 7 = 0 OR g % 3 = 0 THEN jsonb_build_object('id', (b * 200 + g) % 5000) END) ORDER BY g)
    FROM generate_series(1, 200) g
$$;
-- The backend's memory less its catalog caches (CacheMemoryContext and the
-- relcache entries' contexts under it): those grow with the catalog entries
-- the session reads for the first time, bounded by the catalog, not by the
-- batches.  Counted, they made this test fail in whole-suite runs only: the
-- failing batches read a few kB of new catalog entries (3 kB over the 100
-- here, then 1.3 kB once more over 800 more failures, then nothing), and
-- in a database left with the other tests' objects that crossed the cache's
-- block boundary, so CacheMemoryContext took a new 1 MB block.
CREATE FUNCTION bml_mem() RETURNS bigint LANGUAGE sql AS
  $$ SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts
      WHERE name <> 'CacheMemoryContext' AND parent IS DISTINCT FROM 'CacheMemoryContext' $$;
CREATE TEMP TABLE bml_seen (after_batches int, bytes bigint);
-- The statements applying batches first..last, each through another input form.
CREATE FUNCTION bml_statements(first int, last int) RETURNS SETOF text LANGUAGE sql AS $$
  SELECT format(CASE b % 4
                  WHEN 0 THEN 'SELECT applied FROM cdc_apply_batch(bml_batch(%s), with_outcomes => true)'
                  WHEN 1 THEN 'SELECT applied FROM cdc_apply_batch(bml_batch(%s)::text)'
                  WHEN 2 THEN 'SELECT applied FROM cdc_apply_batch(ARRAY(SELECT jsonb_array_elements(bml_batch(%s))))'
                  ELSE 'SELECT applied FROM cdc_apply_batch(bml_batch(%1$s), source_partition => ''bml:0'', offsets => ARRAY(SELECT %1$s::bigint * 1000 + g FROM generate_series(1, 200) g))'
                END, b)
    FROM generate_series(first, last) b
$$;

\set ECHO none
\o /dev/null
SELECT bml_statements(1, 50) \gexec
\o
\set ECHO all
INSERT INTO bml_seen VALUES (50, bml_mem());
\set ECHO none
\o /dev/null
SELECT bml_statements(51, 300) \gexec
\o
\set ECHO all
INSERT INTO bml_seen VALUES (300, bml_mem());
-- 100 batches that fail at their last event (a NOT NULL key), nothing kept
DO $$
BEGIN
  FOR b IN 301 .. 400 LOOP
    BEGIN
      PERFORM cdc_apply_batch(bml_batch(b) || jsonb_build_array(dbz('c', 'bml_t', '{"id": null}', lsn => '0/1', tx => 1)));
    EXCEPTION WHEN null_value_not_allowed THEN
      NULL;
    END;
  END LOOP;
END $$;
SELECT events, applied FROM cdc_apply_batch(bml_batch(401));
INSERT INTO bml_seen VALUES (401, bml_mem());

SELECT after_batches, bytes - (SELECT bytes FROM bml_seen WHERE after_batches = 50) < 1024 * 1024 AS grew_less_than_1mb
  FROM bml_seen ORDER BY 1;
SELECT applied, outbox_rows FROM cdc.stats WHERE target = 'bml_t'::regclass;
SELECT count(*) AS ranges FROM cdc.ledger_range r JOIN cdc.ledger_partition p ON p.id = r.partition_id WHERE p.name = 'bml:0';

--
-- event_cache_bound: the backend caches keyed by event values (the ids of
-- cdc.source names and of cdc.outbox_source identities, src/pg/apply/
-- id_cache.cpp, and the resolutions of (source name, schema, table) of
-- events sent without a target, src/pg/apply/target.cpp) keep at most 1,024
-- entries each, in memory contexts of their own.  Before, they were
-- unbounded malloc memory: a caller sending events with ever new source
-- names grew its backend without limit (200,000 names of 110 bytes: 84 MB
-- more anonymous memory, none of it in pg_backend_memory_contexts).
-- Tables: ecb_*.
--

CREATE TABLE ecb_t (id int PRIMARY KEY, v text);
SELECT 1 FROM cdc.register_mapping('ecb_t', source_table => 'ecb_t', outbox => true, outbox_topic => 'ecb');

-- 5,000 events, each from a new source of a 1,000-byte name, sent without a
-- target (resolved through the mapping, which names no source).
CREATE FUNCTION ecb_name(i int) RETURNS text LANGUAGE sql IMMUTABLE AS
  $$ SELECT 'ecb-' || lpad(i::text, 6, '0') || repeat('x', 990) $$;
SELECT r, count(*) FROM generate_series(1, 5000) i,
       cdc_apply(dbz('c', 'ecb_t', jsonb_build_object('id', i, 'v', 'a'), lsn => '0/' || to_hex(4096 + i * 16),
                     tx => i, src => ecb_name(i))) r
 GROUP BY r;

-- Each cache holds at most 1,024 keys of about 1 kB: its context stays
-- under 2 MB (5,000 keys took more than 5 MB), and holds the cache (the
-- last entries are there: more than 256 kB).
SELECT name, ident, total_bytes > 256 * 1024 AS in_use, total_bytes < 2 * 1024 * 1024 AS bounded
  FROM pg_backend_memory_contexts
 WHERE name IN ('cdc_apply id cache', 'cdc_apply resolved source tables')
 ORDER BY name, ident;

-- Emptying a full cache loses nothing: an early source, whose entry went,
-- keeps its id; every source has its own.
SELECT cdc_apply(dbz('u', 'ecb_t', '{"id": 1, "v": "b"}', lsn => '0/FFFFF0', tx => 9000, src => ecb_name(1)));
SELECT s.name = ecb_name(1) AS same_source, t.v
  FROM cdc.entity_state e JOIN cdc.source s ON s.id = e.src JOIN ecb_t t ON t.id::text = e.key
 WHERE e.target = 'ecb_t'::regclass AND e.key = '1';
SELECT count(*) AS records, count(DISTINCT src) AS sources FROM cdc.entity_state WHERE target = 'ecb_t'::regclass;
SELECT count(*) AS outbox_rows, count(DISTINCT source->>'name') AS outbox_sources FROM cdc.outbox WHERE target = 'ecb_t'::regclass;

-- The prepared-plan cache is keyed by statement text, and the columns an
-- event carries choose its statements' column lists: 1,023 inserts, each
-- with another subset of ten columns, prepared 1,023 statements and kept
-- them all (23 MB of plans in one backend; 2^n of them for n columns).  It
-- keeps at most cdc.plan_cache_size plans; beyond, a statement is prepared
-- for its execution and freed after it.  Plans live in contexts named
-- CachedPlanSource, CachedPlanQuery and CachedPlan.
CREATE TABLE ecb_w (id int PRIMARY KEY, c1 int, c2 int, c3 int, c4 int, c5 int, c6 int, c7 int, c8 int, c9 int, c10 int);
SET cdc.plan_cache_size = 64;
SELECT r, count(*) FROM generate_series(1, 1023) i,
       LATERAL (SELECT jsonb_object_agg('c' || b, i) || jsonb_build_object('id', i) AS after
                  FROM generate_series(1, 10) b WHERE (i >> (b - 1)) & 1 = 1) a,
       cdc_apply(dbz('c', 'ecb_w', a.after, lsn => '0/' || to_hex(4096 + i * 16), tx => i), 'ecb_w') r
 GROUP BY r;
SELECT count(*) FILTER (WHERE c1 = id) AS c1_set, count(*) FILTER (WHERE c10 = id) AS c10_set,
       count(*) FILTER (WHERE c1 IS NULL AND c10 IS NULL) AS neither FROM ecb_w;
SELECT count(*) <= 3 * 64 AS plans_bounded FROM pg_backend_memory_contexts WHERE name = 'CachedPlanSource';
-- Only a superuser sets it.
CREATE ROLE ecb_user;
SET ROLE ecb_user;
SET cdc.plan_cache_size = 1000000;
RESET ROLE;
DROP ROLE ecb_user;
RESET cdc.plan_cache_size;
SHOW cdc.plan_cache_size;

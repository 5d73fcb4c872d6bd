--
-- batch_offsets: claims by offset range (docs/semantics.md, "Claims by
-- offset range").  cdc_apply_batch(events, ..., source_partition, offsets)
-- claims the deliveries of one ordered source partition (a Kafka topic
-- partition) as ranges of offsets per target (cdc.ledger_range) instead of
-- one ledger row each.  Its contract: the same rows, entity records and
-- tombstones, outbox rows, conflicts, barriers, counters and outcomes as the
-- same deliveries applied one by one with cdc_apply() and the delivery key
-- <partition>:<offset> (a ledger row each); no ledger rows; and
-- cdc.delivery_processed() answers for those keys.  Tables: bo_*.
--

-- Everything cdc_apply wrote for a target but its ledger, as comparable text
-- (outbox and conflict rows with their rank in insertion order).
CREATE FUNCTION bo_state(t regclass) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format('SELECT ''row '' || x::text FROM %s x', t);
  RETURN QUERY SELECT 'entity ' || row(e.key, s.name, e.v0, e.v1, e.v2, e.v3, e.deleted, e.chash)::text
                 FROM cdc.entity_state e JOIN cdc.source s ON s.id = e.src WHERE e.target = t;
  RETURN QUERY SELECT 'outbox ' || row(row_number() OVER (ORDER BY o.id), o.idempotency_key, o.topic, o.entity_key,
                                       o.op, o.payload, o.source, o.version)::text
                 FROM cdc.outbox o WHERE o.target = t;
  RETURN QUERY SELECT 'conflict ' || row(row_number() OVER (ORDER BY c.id), c.entity_key, c.delivery_key, c.op,
                                         c.reason, c.stored_version, c.event_version)::text
                 FROM cdc.conflicts c WHERE c.target = t;
  RETURN QUERY SELECT 'barrier ' || row(b.source_name, b.version)::text FROM cdc.table_barrier b WHERE b.target = t;
END $$;

-- Forgets everything about a target (the suite runs as superuser).
CREATE FUNCTION bo_reset(t regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('DELETE FROM %s', t);
  DELETE FROM cdc.ledger WHERE target = t;
  DELETE FROM cdc.ledger_range WHERE partition_id IN (SELECT id FROM cdc.ledger_partition WHERE target = t);
  DELETE FROM cdc.ledger_partition WHERE target = t;
  DELETE FROM cdc.entity_state WHERE target = t;
  DELETE FROM cdc.table_barrier WHERE target = t;
  DELETE FROM cdc.outbox WHERE target = t;
  DELETE FROM cdc.conflicts WHERE target = t;
END $$;

-- The deliveries of partition 'orders:0:3' used below: (offset, event).
CREATE TABLE bo_t (id int PRIMARY KEY, v text);
SELECT target, outbox FROM cdc.register_mapping('bo_t', outbox => true);
CREATE TABLE bo_ev (off bigint PRIMARY KEY, ev jsonb);
INSERT INTO bo_ev VALUES
  (100, dbz('c', 'bo_t', '{"id": 1, "v": "a"}', '0/100', 1)),
  (101, dbz('c', 'bo_t', '{"id": 2, "v": "b"}', '0/200', 2)),
  (102, dbz('u', 'bo_t', '{"id": 1, "v": "a2"}', '0/300', 3)),
  (103, kafka_tombstone()),
  (104, dbz('d', 'bo_t', NULL, '0/400', 4, '{"id": 2}')),
  (105, kafka_tombstone()),
  (106, dbz('c', 'bo_t', '{"id": 3, "v": "c"}', '0/500', 5)),
  (107, dbz('u', 'bo_t', '{"id": 1, "v": "older"}', '0/250', 6)),        -- stale
  (108, dbz('u', 'bo_t', '{"id": 3, "v": "other"}', '0/500', 5)),        -- same version, other content: conflict
  (109, dbz('t', 'bo_t', NULL, '0/600', 7)),                              -- truncate inside the batch
  (110, dbz('c', 'bo_t', '{"id": 4, "v": "d"}', '0/700', 8)),
  (111, dbz('r', 'bo_t', '{"id": 5, "v": "snap"}', '0/650', 9)),         -- a snapshot row
  (112, dbz('u', 'bo_t', '{"id": 4, "v": "d2"}', '0/800', 10));

-- Applies offsets [lo, hi] of bo_ev with claims by offset range, as one
-- batch; returns the outcomes.
CREATE FUNCTION bo_batch(lo bigint, hi bigint, part text DEFAULT 'orders:0:3') RETURNS text[] LANGUAGE sql AS $$
  SELECT (cdc_apply_batch(array_agg(ev ORDER BY off), 'bo_t', with_outcomes => true,
                          source_partition => part, offsets => array_agg(off ORDER BY off))).outcomes
    FROM bo_ev WHERE off BETWEEN lo AND hi
$$;
-- The same deliveries one by one with cdc_apply() and the delivery key <partition>:<offset>.
CREATE FUNCTION bo_one_by_one(lo bigint, hi bigint, part text DEFAULT 'orders:0:3') RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  r text[] := '{}';
  e record;
BEGIN
  FOR e IN SELECT * FROM bo_ev WHERE off BETWEEN lo AND hi ORDER BY off LOOP
    r := r || cdc_apply(e.ev, 'bo_t', part || ':' || e.off);
  END LOOP;
  RETURN r;
END $$;

-- ===========================================================================
-- 1. One by one (a ledger row per delivery) and in batches by offset range
--    (cut at 103 and 108; then a consumer rewound to 102 re-reads 102..112
--    in one batch, then 100..101 again): the same outcomes and state.
-- ===========================================================================
CREATE TABLE bo_run (how text, step int, outcomes text[], state text[]);
SELECT bo_reset('bo_t');
INSERT INTO bo_run SELECT 'one', 1, bo_one_by_one(100, 112), NULL;
INSERT INTO bo_run SELECT 'one', 2, bo_one_by_one(102, 112), NULL;
INSERT INTO bo_run SELECT 'one', 3, bo_one_by_one(100, 101), ARRAY(SELECT bo_state('bo_t') ORDER BY 1);
SELECT count(*) AS ledger_rows_one_by_one FROM cdc.ledger WHERE target = 'bo_t'::regclass;
SELECT bo_reset('bo_t');
INSERT INTO bo_run SELECT 'batch', 1, bo_batch(100, 102) || bo_batch(103, 107) || bo_batch(108, 112), NULL;
INSERT INTO bo_run SELECT 'batch', 2, bo_batch(102, 112), NULL;
INSERT INTO bo_run SELECT 'batch', 3, bo_batch(100, 101), ARRAY(SELECT bo_state('bo_t') ORDER BY 1);
SELECT step, outcomes FROM bo_run WHERE how = 'batch' ORDER BY step;
-- no difference in outcomes or state
SELECT a.step, a.outcomes AS one_by_one, b.outcomes AS batch
  FROM bo_run a JOIN bo_run b USING (step) WHERE a.how = 'one' AND b.how = 'batch' AND a.outcomes IS DISTINCT FROM b.outcomes;
SELECT 'only one by one: ' || x FROM (SELECT unnest(state) FROM bo_run WHERE how = 'one' AND step = 3
                                      EXCEPT ALL SELECT unnest(state) FROM bo_run WHERE how = 'batch' AND step = 3) d(x);
SELECT 'only in batches: ' || x FROM (SELECT unnest(state) FROM bo_run WHERE how = 'batch' AND step = 3
                                      EXCEPT ALL SELECT unnest(state) FROM bo_run WHERE how = 'one' AND step = 3) d(x);
-- what the batches left: the rows, no ledger rows, and the ranges (103, a
-- Kafka tombstone at the start of a batch, is in none: a tombstone is no
-- delivery to a target, and a range only covers what lies between claimed
-- offsets, as 105 does; the re-read of 102..112 added nothing)
SELECT * FROM bo_t ORDER BY id;
SELECT count(*) AS ledger_rows FROM cdc.ledger WHERE target = 'bo_t'::regclass;
SELECT p.target, p.name, g.lo, g.hi
  FROM cdc.ledger_partition p JOIN cdc.ledger_range g ON g.partition_id = p.id
 WHERE p.target = 'bo_t'::regclass ORDER BY g.lo;
SELECT count(*) AS outbox_rows, count(DISTINCT idempotency_key) AS distinct_keys FROM cdc.outbox WHERE target = 'bo_t'::regclass;

-- cdc.delivery_processed() for keys of the partition: inside a range (and
-- 105, a Kafka tombstone between claimed offsets), outside, another
-- partition, keys that are not <partition>:<offset>.
SELECT k, cdc.delivery_processed('bo_t', k) AS processed
  FROM unnest(ARRAY['orders:0:3:99', 'orders:0:3:100', 'orders:0:3:103', 'orders:0:3:105', 'orders:0:3:112', 'orders:0:3:113',
                    'orders:0:4:100', 'orders:0:3', 'orders:0:3:1x', 'orders:0:3:-1',
                    'orders:0:3:99999999999999999999']) k;
-- only the offset as the batch spells it in the delivery key: 'orders:0:3:0100'
-- and 'orders:0:3:+100' are other delivery keys than 'orders:0:3:100'
SELECT k, cdc.delivery_processed('bo_t', k) AS processed
  FROM unnest(ARRAY['orders:0:3:0100', 'orders:0:3:+100', 'orders:0:3:100 ', 'orders:0:3:-0']) k;

-- ===========================================================================
-- 2. Redelivery with gaps: the topic was compacted meanwhile, so a re-read
--    lacks offsets it had (compacted records); new offsets follow.  A range
--    claimed before is never swallowed by a new one.
-- ===========================================================================
SELECT bo_reset('bo_t');
SELECT bo_batch(100, 101) AS first_read;
SELECT bo_batch(106, 106) AS third_read;
INSERT INTO bo_ev VALUES (113, dbz('c', 'bo_t', '{"id": 6, "v": "e"}', '0/900', 11));
-- the re-read: 100, 102, 110 and 113 (101 and 106 compacted away)
SELECT (cdc_apply_batch(array_agg(ev ORDER BY off), 'bo_t', with_outcomes => true,
                        source_partition => 'orders:0:3', offsets => array_agg(off ORDER BY off))).outcomes AS reread
  FROM bo_ev WHERE off IN (100, 102, 110, 113);
SELECT g.lo, g.hi FROM cdc.ledger_partition p JOIN cdc.ledger_range g ON g.partition_id = p.id
 WHERE p.target = 'bo_t'::regclass ORDER BY g.lo;
SELECT * FROM bo_t ORDER BY id;

-- Another partition's offsets are other deliveries: the same events from
-- partition orders:0:4 are decided by their versions alone (stale or
-- duplicate here: nothing is applied twice).
SELECT bo_batch(100, 102, 'orders:0:4') AS other_partition;
SELECT p.name, count(*) AS ranges FROM cdc.ledger_partition p JOIN cdc.ledger_range g ON g.partition_id = p.id
 WHERE p.target = 'bo_t'::regclass GROUP BY p.name ORDER BY 1;

-- ===========================================================================
-- 3. Several targets in one batch (target NULL, resolved per event): each
--    target claims the offsets of its own events; a run ends where another
--    target's event lies between.
-- ===========================================================================
CREATE TABLE bo_x (id int PRIMARY KEY, v text);
CREATE TABLE bo_y (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('bo_x');
SELECT target FROM cdc.register_mapping('bo_y');
SELECT (cdc_apply_batch(jsonb_build_array(
          dbz('c', 'bo_x', '{"id": 1, "v": "x1"}', '0/100', 1),
          dbz('c', 'bo_x', '{"id": 2, "v": "x2"}', '0/110', 1),
          dbz('c', 'bo_y', '{"id": 1, "v": "y1"}', '0/120', 1),
          kafka_tombstone(),
          dbz('u', 'bo_x', '{"id": 1, "v": "x1b"}', '0/130', 2),
          dbz('c', 'bo_y', '{"id": 2, "v": "y2"}', '0/140', 2)),
        with_outcomes => true, source_partition => 'routed:0:0', offsets => '{0,1,2,3,4,5}')).outcomes;
SELECT p.target, g.lo, g.hi FROM cdc.ledger_partition p JOIN cdc.ledger_range g ON g.partition_id = p.id
 WHERE p.name = 'routed:0:0' ORDER BY g.lo;
SELECT cdc.delivery_processed('bo_x', 'routed:0:2') AS y_offset_for_x, cdc.delivery_processed('bo_y', 'routed:0:2') AS y_offset_for_y;

-- ===========================================================================
-- 4. Pruning: ranges older than the replay horizon go, in bounded steps
--    (cdc.prune_state 'ledger_range'); at the end of a pass, so do the
--    partitions that have no range left and were not claimed within the
--    horizon (bo_x's was; bo_y's was not).
-- ===========================================================================
UPDATE cdc.ledger_range SET claimed_s = claimed_s - 8 * 86400
 WHERE partition_id IN (SELECT id FROM cdc.ledger_partition WHERE name = 'routed:0:0');
UPDATE cdc.ledger_partition SET claimed_s = claimed_s - 8 * 86400 WHERE name = 'routed:0:0' AND target = 'bo_y'::regclass;
SELECT relation, removed > 0 AS removed_some FROM cdc.prune(1000) WHERE relation = 'ledger_range';
SELECT count(*) AS routed_ranges_left FROM cdc.ledger_range g JOIN cdc.ledger_partition p ON p.id = g.partition_id
 WHERE p.name = 'routed:0:0';
SELECT target FROM cdc.ledger_partition WHERE name = 'routed:0:0' ORDER BY 1;
SELECT count(*) AS bo_t_ranges_left FROM cdc.ledger_range g JOIN cdc.ledger_partition p ON p.id = g.partition_id
 WHERE p.target = 'bo_t'::regclass;
SELECT ledger_ranges > 0 AS horizon_status_counts_ranges FROM cdc.horizon_status;

-- ===========================================================================
-- 5. Bad arguments: a clear error with its SQLSTATE, nothing applied.
-- ===========================================================================
\set VERBOSITY sqlstate
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9)), source_partition => 'p');
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9)), offsets => '{1}');
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9)), delivery_keys => '{k}',
                       source_partition => 'p', offsets => '{1}');
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9)), source_partition => '', offsets => '{1}');
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9)), source_partition => repeat('p', 1025), offsets => '{1}');
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9)), source_partition => 'p', offsets => '{1,2}');
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9), kafka_tombstone()),
                       source_partition => 'p', offsets => '{1,NULL}');
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9), kafka_tombstone()),
                       source_partition => 'p', offsets => '{5,5}');
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9), kafka_tombstone()),
                       source_partition => 'p', offsets => '{6,5}');
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9)), source_partition => 'p',
                       offsets => '{{1}}');
\set VERBOSITY default
-- the error names the argument
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9)), source_partition => 'p',
                       offsets => '{{1}}');
-- a negative offset (-1 is Kafka clients' "no offset") is refused, naming the element; nothing claimed
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9), kafka_tombstone()),
                       source_partition => 'p-neg', offsets => '{-1,0}');
SELECT count(*) AS claimed_ranges FROM cdc.ledger_range r JOIN cdc.ledger_partition p ON p.id = r.partition_id
 WHERE p.name = 'p-neg';
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9}', '0/900', 9)), delivery_keys => '{{a}}');
\set VERBOSITY sqlstate
-- an error in the batch rolls its claims back with everything else
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9, "v": "ok"}', '0/900', 9),
                                         dbz('c', 'bo_x', '{"id": "not a number"}', '0/910', 9)),
                       source_partition => 'p', offsets => '{1,2}');
\set VERBOSITY default
SELECT count(*) AS partitions_of_p FROM cdc.ledger_partition WHERE name = 'p';
SELECT count(*) AS row_9 FROM bo_x WHERE id = 9;
-- the corrected retry applies
SELECT applied FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 9, "v": "ok"}', '0/900', 9),
                                                      dbz('c', 'bo_x', '{"id": 10}', '0/910', 9)),
                                    source_partition => 'p', offsets => '{1,2}');
-- a partition name of 1,024 bytes, the longest allowed, is stored
SELECT applied FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 11}', '0/920', 9)),
                                    source_partition => repeat('q', 1024), offsets => '{7}');
SELECT length(name) FROM cdc.ledger_partition WHERE name LIKE 'qqq%';
-- an empty batch claims nothing
SELECT events FROM cdc_apply_batch('[]'::jsonb, source_partition => 'empty', offsets => '{}');
SELECT count(*) AS partitions_of_empty FROM cdc.ledger_partition WHERE name = 'empty';

-- ===========================================================================
-- 6. Who sees the ranges: the ledger's rule (a role that may SELECT from
--    the target without row-level security); nobody but the extension
--    writes them.
-- ===========================================================================
CREATE ROLE bo_reader;
SET ROLE bo_reader;
SELECT count(*) AS partitions_seen_without_select FROM cdc.ledger_partition;
SELECT count(*) AS ranges_seen_without_select FROM cdc.ledger_range;
\set VERBOSITY sqlstate
INSERT INTO cdc.ledger_range VALUES (1, 0, 0, 0);
UPDATE cdc.ledger_partition SET claimed_s = 0;
\set VERBOSITY default
RESET ROLE;
GRANT SELECT ON bo_x TO bo_reader;
SET ROLE bo_reader;
SELECT p.target, count(*) AS ranges FROM cdc.ledger_partition p JOIN cdc.ledger_range g ON g.partition_id = p.id GROUP BY 1;
SELECT cdc.delivery_processed('bo_x', 'p:1') AS processed;
RESET ROLE;
-- A role that may write bo_x but not bo_y: a batch with an event of each
-- fails on bo_y's event, and the error's context names that event and its
-- delivery key (not the event before it); nothing is applied or claimed.
GRANT INSERT, UPDATE, DELETE ON bo_x TO bo_reader;
SET ROLE bo_reader;
SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'bo_x', '{"id": 20}', '0/a00', 20),
                                         dbz('c', 'bo_y', '{"id": 20}', '0/a10', 20)),
                       source_partition => 'denied', offsets => '{1,2}');
RESET ROLE;
SELECT count(*) AS partitions_of_denied FROM cdc.ledger_partition WHERE name = 'denied';
SELECT count(*) AS row_20 FROM bo_x WHERE id = 20;
DROP OWNED BY bo_reader;
DROP ROLE bo_reader;

--
-- ledger_drop_target (security review h2, round 32): DROP TABLE of a
-- target removed its mapping, entity records, barrier, watermarks, marks
-- and counters, but kept its offset-range claims (cdc.ledger_partition,
-- cdc.ledger_range).  Their target then names a dropped OID, which prints
-- as a bare number, and pg_dump dumps both tables: a restore read the
-- number back as whatever relation has that OID in the new cluster, whose
-- batches of the same source partition then came out duplicate, not
-- applied, for every offset the dropped table had claimed.  The claims of
-- a dropped table serve nothing (a table made again has another OID): they
-- go with it, and another target's claims of the same partition stay.
--
CREATE TABLE ldt_a (id int PRIMARY KEY, v text);
CREATE TABLE ldt_b (id int PRIMARY KEY, v text);
SELECT (cdc_apply_batch(jsonb_build_array(dbz('c', 'ldt_a', '{"id": 1, "v": "a"}', '0/10', 1),
                                          dbz('c', 'ldt_a', '{"id": 2, "v": "b"}', '0/20', 2)),
                        'ldt_a', source_partition => 'ldt:0:0', offsets => '{10,11}')).applied;
SELECT (cdc_apply_batch(jsonb_build_array(dbz('c', 'ldt_b', '{"id": 1, "v": "a"}', '0/10', 1)),
                        'ldt_b', source_partition => 'ldt:0:0', offsets => '{10}')).applied;
SELECT 'ldt_a'::regclass::oid AS ldt_a_oid \gset
SELECT count(*) AS partitions, (SELECT count(*) FROM cdc.ledger_range r JOIN cdc.ledger_partition p ON p.id = r.partition_id
                                 WHERE p.target::oid = :ldt_a_oid) AS ranges
  FROM cdc.ledger_partition WHERE target::oid = :ldt_a_oid;
DROP TABLE ldt_a;
-- nothing of the dropped table's claims stays (a dump would carry them under a bare OID)
SELECT count(*) AS partitions_left, (SELECT count(*) FROM cdc.ledger_range r
                                      WHERE NOT EXISTS (SELECT FROM cdc.ledger_partition p WHERE p.id = r.partition_id)) AS orphan_ranges
  FROM cdc.ledger_partition WHERE target::oid = :ldt_a_oid;
SELECT count(*) AS claims_as_numbers FROM cdc.ledger_partition WHERE name = 'ldt:0:0' AND target::text ~ '^[0-9]+$';
-- the other target's claims of the same partition stay: a replay of its offset is a duplicate
SELECT (cdc_apply_batch(jsonb_build_array(dbz('c', 'ldt_b', '{"id": 1, "v": "a"}', '0/10', 1)),
                        'ldt_b', source_partition => 'ldt:0:0', offsets => '{10}', with_outcomes => true)).outcomes;
DROP TABLE ldt_b;

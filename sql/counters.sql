--
-- counters: the outcome counters and the dictionary ids are kept in backend
-- memory for the open transaction (docs/internals.md, "Counters" and
-- "Dictionary ids").  cdc.counters receives a transaction's counts once,
-- when it commits or is prepared; a rolled-back call, subtransaction or
-- prepared transaction counts nothing; cdc.stats shows a transaction its
-- own counts.  Ids of cdc.source and cdc.outbox_source cached by a backend
-- never outlive a rollback of the transaction that created them, and a
-- rename of a source empties the cache.  Tables of this suite are cnt_*.
--
CREATE TABLE cnt_a (id int PRIMARY KEY, v text);
CREATE TABLE cnt_b (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('cnt_a', outbox => true);
SELECT target FROM cdc.register_mapping('cnt_b');

-- The committed counts (cdc.counters), and what this session sees (cdc.stats).
CREATE FUNCTION cnt_committed(t regclass) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(sum(applied), 0) || '/' || coalesce(sum(duplicate), 0) || '/' || coalesce(sum(ignored), 0) || '/' ||
         coalesce(sum(outbox_rows), 0) || ' (' || count(*) || ' row)'
    FROM cdc.counters WHERE target = t
$$;
CREATE FUNCTION cnt_seen(t regclass) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(sum(applied), 0) || '/' || coalesce(sum(duplicate), 0) || '/' || coalesce(sum(ignored), 0) || '/' ||
         coalesce(sum(outbox_rows), 0)
    FROM cdc.stats WHERE target = t
$$;

-- ===========================================================================
-- a. Many calls in one transaction: counted in memory, visible through
--    cdc.stats, written once at the commit (one row per backend slot).
-- ===========================================================================
BEGIN;
SELECT cdc_apply(dbz('c', 'cnt_a', '{"id": 1, "v": "a"}', '0/1000', 1)) AS a1,
       cdc_apply(dbz('u', 'cnt_a', '{"id": 1, "v": "b"}', '0/1010', 2)) AS a2,
       cdc_apply(dbz('u', 'cnt_a', '{"id": 1, "v": "b"}', '0/1010', 2)) AS a2_again,
       cdc_apply('{"ts_ms": 1}'::jsonb, 'cnt_a') AS heartbeat;
SELECT cnt_committed('cnt_a') AS committed_before_commit, cnt_seen('cnt_a') AS seen_before_commit;
SELECT * FROM cdc._pending_counters() WHERE target = 'cnt_a'::regclass;
COMMIT;
SELECT cnt_committed('cnt_a') AS committed, cnt_seen('cnt_a') AS seen;
SELECT count(*) AS pending_after_commit FROM cdc._pending_counters();
-- a batch in the same transaction as single calls adds to the same counts
BEGIN;
SELECT applied FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'cnt_a', '{"id": 2, "v": "a"}', '0/1100', 3),
                                                      dbz('c', 'cnt_b', '{"id": 2, "v": "a"}', '0/1100', 3)));
SELECT cdc_apply(dbz('c', 'cnt_b', '{"id": 3, "v": "a"}', '0/1110', 4));
COMMIT;
SELECT cnt_committed('cnt_a') AS a_committed, cnt_committed('cnt_b') AS b_committed;

-- ===========================================================================
-- b. Rollbacks: of the transaction, of savepoints (nested, released), of a
--    PL/pgSQL exception block.  Only what commits is counted.
-- ===========================================================================
BEGIN;
SELECT cdc_apply(dbz('c', 'cnt_b', '{"id": 10, "v": "x"}', '0/2000', 10));
ROLLBACK;
SELECT cnt_committed('cnt_b') AS b_after_rollback;
BEGIN;
SELECT cdc_apply(dbz('c', 'cnt_b', '{"id": 11, "v": "x"}', '0/2010', 11)) AS kept_1;
SAVEPOINT s1;
SELECT cdc_apply(dbz('c', 'cnt_b', '{"id": 12, "v": "x"}', '0/2020', 12)) AS rolled_back;
SAVEPOINT s2;
SELECT cdc_apply(dbz('c', 'cnt_b', '{"id": 13, "v": "x"}', '0/2030', 13)) AS rolled_back_with_s1;
RELEASE s2;
SELECT cnt_seen('cnt_b') AS seen_with_three;
ROLLBACK TO s1;
SELECT cnt_seen('cnt_b') AS seen_after_rollback_to_s1;
SAVEPOINT s3;
SELECT cdc_apply(dbz('c', 'cnt_b', '{"id": 14, "v": "x"}', '0/2040', 14)) AS kept_2;
RELEASE s3;
COMMIT;
SELECT cnt_committed('cnt_b') AS b_committed, (SELECT array_agg(id ORDER BY id) FROM cnt_b) AS rows;
DO $$
BEGIN
  PERFORM cdc_apply(dbz('c', 'cnt_b', '{"id": 15, "v": "x"}', '0/2050', 15));
  BEGIN
    PERFORM cdc_apply(dbz('c', 'cnt_b', '{"id": 16, "v": "x"}', '0/2060', 16));
    RAISE EXCEPTION 'undo the inner block';
  EXCEPTION WHEN raise_exception THEN
    NULL;
  END;
END $$;
SELECT cnt_committed('cnt_b') AS b_after_exception_block, (SELECT array_agg(id ORDER BY id) FROM cnt_b) AS rows;
-- a procedure committing in its loop: each transaction counts its own calls
CREATE PROCEDURE cnt_loop() LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 20 .. 22 LOOP
    PERFORM cdc_apply(dbz('c', 'cnt_b', jsonb_build_object('id', i, 'v', 'p'), '0/3000', i));
    IF i = 21 THEN
      ROLLBACK;
    ELSE
      COMMIT;
    END IF;
  END LOOP;
END $$;
CALL cnt_loop();
SELECT cnt_committed('cnt_b') AS b_after_procedure, (SELECT array_agg(id ORDER BY id) FROM cnt_b) AS rows;

-- ===========================================================================
-- c. Two-phase commit: the counts are part of the prepared transaction.
-- ===========================================================================
BEGIN;
SELECT cdc_apply(dbz('c', 'cnt_b', '{"id": 30, "v": "2pc"}', '0/4000', 30));
PREPARE TRANSACTION 'cnt_prepared_commit';
SELECT cnt_committed('cnt_b') AS b_while_prepared;
COMMIT PREPARED 'cnt_prepared_commit';
SELECT cnt_committed('cnt_b') AS b_after_commit_prepared;
BEGIN;
SELECT cdc_apply(dbz('c', 'cnt_b', '{"id": 31, "v": "2pc"}', '0/4010', 31));
PREPARE TRANSACTION 'cnt_prepared_rollback';
ROLLBACK PREPARED 'cnt_prepared_rollback';
SELECT cnt_committed('cnt_b') AS b_after_rollback_prepared, (SELECT array_agg(id ORDER BY id) FROM cnt_b) AS rows;

-- ===========================================================================
-- d. A read-only transaction refuses the write at the call, as before; a
--    transaction set read-only after its calls still commits their counts
--    (they were taken while it could write).  A target dropped later in the
--    transaction leaves no counters row.
-- ===========================================================================
BEGIN READ ONLY;
SELECT cdc_apply('{"ts_ms": 1}'::jsonb, 'cnt_b');
ROLLBACK;
BEGIN;
SELECT cdc_apply(dbz('c', 'cnt_b', '{"id": 40, "v": "ro"}', '0/5000', 40));
SET LOCAL transaction_read_only = on;
COMMIT;
SELECT cnt_committed('cnt_b') AS b_after_read_only_commit;
CREATE TABLE cnt_gone (id int PRIMARY KEY);
BEGIN;
SELECT cdc_apply(dbz('c', 'cnt_gone', '{"id": 1}', '0/5100', 41), 'cnt_gone');
SELECT oid AS gone_oid FROM pg_class WHERE relname = 'cnt_gone' \gset
DROP TABLE cnt_gone;
COMMIT;
SELECT count(*) AS counters_of_dropped FROM cdc.counters WHERE target::oid = :gone_oid;

-- ===========================================================================
-- e. Dictionary ids: an id created by a rolled-back transaction or
--    subtransaction is not served to the next one (the records would point
--    to no source); a rename empties the cache.
-- ===========================================================================
BEGIN;
SELECT cdc_apply(dbz('c', 'cnt_b', '{"id": 50, "v": "n"}', '0/6000', 50, src => 'cnt_new_source'));
SELECT count(*) AS source_row_inside FROM cdc.source WHERE name = 'cnt_new_source';
ROLLBACK;
SELECT cdc_apply(dbz('c', 'cnt_b', '{"id": 50, "v": "n"}', '0/6000', 50, src => 'cnt_new_source'));
SELECT entity_key, source_name FROM cdc.entities WHERE target = 'cnt_b'::regclass AND source_name = 'cnt_new_source';
BEGIN;
SAVEPOINT s;
SELECT cdc_apply(dbz('c', 'cnt_a', '{"id": 51, "v": "n"}', '0/6010', 51, src => 'cnt_other_source', schema_name => 'cnt_schema'), 'cnt_a');
ROLLBACK TO s;
SELECT cdc_apply(dbz('c', 'cnt_a', '{"id": 51, "v": "n"}', '0/6010', 51, src => 'cnt_other_source', schema_name => 'cnt_schema'), 'cnt_a');
COMMIT;
-- the record names its source and the outbox row its source identity (both joins find their dictionary rows)
SELECT entity_key, source_name FROM cdc.entities WHERE target = 'cnt_a'::regclass AND source_name = 'cnt_other_source';
SELECT entity_key, source->>'name' AS name, source->>'schema' AS schema FROM cdc.outbox WHERE target = 'cnt_a'::regclass AND entity_key = '{"id": "51"}';
-- a rename in this session, after its ids were cached: the next event of
-- the old name is another source again (a conflict with the renamed record)
SELECT cdc.rename_source('cnt_new_source', 'cnt_renamed_source');
SELECT cdc_apply(dbz('u', 'cnt_b', '{"id": 50, "v": "m"}', '0/6100', 52, src => 'cnt_new_source')) AS old_name_after_rename;
SELECT cdc_apply(dbz('u', 'cnt_b', '{"id": 50, "v": "m"}', '0/6100', 52, src => 'cnt_renamed_source')) AS new_name_after_rename;
SELECT entity_key, source_name, version FROM cdc.entities WHERE target = 'cnt_b'::regclass AND entity_key = '{"id": "50"}';
SELECT name FROM cdc.source WHERE name LIKE 'cnt\_%' ORDER BY name;

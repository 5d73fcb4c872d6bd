--
-- delegation_lock (review h3): docs/security.md, "Delegating mappings".
-- Mappings were delegated by granting INSERT, UPDATE and DELETE on
-- cdc.mapping (with EXECUTE on cdc.register_mapping), and a relay was
-- granted SELECT, UPDATE on the view cdc.outbox for
-- cdc.outbox_mark_published(): PostgreSQL lets a role with UPDATE, DELETE
-- or TRUNCATE on a table (or a view, whose base tables it then locks as the
-- view's owner) take any lock on it, and row-level security does not apply
-- to LOCK, so such a role could lock cdc.mapping or cdc.outbox_rows in
-- ACCESS EXCLUSIVE mode and stall every worker and every cdc_apply()
-- caller.  Delegation now needs EXECUTE on the functions only: they write
-- cdc.mapping as the extension owner (cdc._write_mapping, C) after checking
-- the calling role as the policy own_targets did; the relay needs EXECUTE
-- on cdc.outbox_mark_published() (SECURITY DEFINER) and SELECT on the view.
-- A relay that claims rows (FOR UPDATE SKIP LOCKED) or deletes what it
-- published needed UPDATE or DELETE on the view, with the same power:
-- cdc.outbox_claim() and cdc.outbox_delete() (SECURITY DEFINER) need
-- EXECUTE only (section 6).
-- The stall itself: test/isolation/specs/security_mapping_lock.spec.
-- Objects: h3dl_*.
--
CREATE ROLE h3dl_del;
CREATE ROLE h3dl_nobody;
CREATE ROLE h3dl_legacy;
CREATE ROLE h3dl_relay;
CREATE SCHEMA h3dl AUTHORIZATION h3dl_del;
GRANT EXECUTE ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
                                               bigint, text, text, text, regprocedure, text, text),
                          cdc.unregister_mapping(regclass), cdc.set_ordering(regclass, text)
  TO h3dl_del, h3dl_legacy;
GRANT INSERT, UPDATE, DELETE ON cdc.mapping TO h3dl_legacy;
GRANT SELECT ON cdc.outbox TO h3dl_relay;
GRANT EXECUTE ON FUNCTION cdc.outbox_mark_published(bigint[]) TO h3dl_relay;
-- what a statement raises, by SQLSTATE only
CREATE FUNCTION h3dl_try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE stmt;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;
CREATE TABLE h3dl_theirs (id int PRIMARY KEY, v text);
SELECT target, outbox_topic FROM cdc.register_mapping('h3dl_theirs', outbox => true, outbox_topic => 'h3dl.theirs');
SELECT cdc_apply('{"source": {"connector": "postgresql", "name": "h3dl", "db": "src", "schema": "public",
                              "table": "h3dl_theirs", "lsn": 4096, "txId": 500, "snapshot": "false"},
                   "op": "c", "after": {"id": 1, "v": "a"}}'::jsonb, 'h3dl_theirs');

-- 1. A delegate with EXECUTE only: it maps, re-maps, orders and unmaps its own table
SET ROLE h3dl_del;
CREATE TABLE h3dl.mine (id int PRIMARY KEY, v text);
SELECT target, outbox, outbox_topic, ordering FROM cdc.register_mapping('h3dl.mine', outbox => true);
SELECT target, outbox, outbox_topic, ordering FROM cdc.register_mapping('h3dl.mine', outbox => true, outbox_topic => 'h3dl.mine.v2');
SELECT target, ordering FROM cdc.set_ordering('h3dl.mine', 'stream');
SELECT target, ordering FROM cdc.set_ordering('h3dl.mine', 'entity');
-- and holds no privilege on cdc's tables: no lock but ACCESS SHARE, no direct write
SELECT m AS mode, h3dl_try(format('LOCK TABLE cdc.mapping IN %s MODE', m)) AS mapping,
       h3dl_try(format('LOCK TABLE cdc.outbox IN %s MODE', m)) AS outbox,
       h3dl_try(format('LOCK TABLE cdc.outbox_rows IN %s MODE', m)) AS outbox_rows
  FROM unnest(ARRAY['ACCESS SHARE', 'ROW EXCLUSIVE', 'SHARE', 'SHARE ROW EXCLUSIVE', 'ACCESS EXCLUSIVE']) m;
SELECT h3dl_try($$UPDATE cdc.mapping SET truncate_policy = 'ignore' WHERE target = 'h3dl.mine'::regclass$$) AS direct_update;
BEGIN;
LOCK TABLE cdc.mapping IN ACCESS EXCLUSIVE MODE;
ROLLBACK;

-- 2. The checks of policy own_targets hold for every entry point
-- another owner's table: refused, through the functions and directly
SELECT h3dl_try($$SELECT cdc.register_mapping('h3dl_theirs', outbox => true, outbox_topic => 'h3dl.mine.v3')$$) AS register;
SELECT h3dl_try($$SELECT cdc.set_ordering('h3dl_theirs', 'stream')$$) AS set_ordering;
SELECT cdc.unregister_mapping('h3dl_theirs') AS unregister;
SELECT cdc._write_mapping('register', 'h3dl_theirs',
                          jsonb_populate_record(m, '{"outbox_topic": "h3dl.mine.v3"}')) FROM cdc.mapping m
 WHERE m.target = 'h3dl_theirs'::regclass;
-- (rows it may not see are left alone, as by the policy's USING clause)
SELECT cdc._write_mapping('ordering', 'h3dl_theirs', jsonb_populate_record(m, '{"ordering": "stream"}')) IS NULL AS no_row,
       cdc._write_mapping('lock', 'h3dl_theirs', NULL) IS NULL AS no_lock,
       cdc._write_mapping('unregister', 'h3dl_theirs', NULL) IS NULL AS no_delete
  FROM cdc.mapping m WHERE m.target = 'h3dl_theirs'::regclass;
-- its own table with another owner's topic, or with no topic: refused
SELECT cdc._write_mapping('register', 'h3dl.mine', jsonb_populate_record(m, '{"outbox_topic": "h3dl.theirs"}'))
  FROM cdc.mapping m WHERE m.target = 'h3dl.mine'::regclass;
SELECT h3dl_try($$SELECT cdc._write_mapping('register', 'h3dl.mine', jsonb_populate_record(m, '{"outbox_topic": "public.h3dl_theirs"}'))
                    FROM cdc.mapping m WHERE m.target = 'h3dl.mine'::regclass$$) AS default_topic;
SELECT h3dl_try($$SELECT cdc._write_mapping('register', 'h3dl.mine', jsonb_populate_record(m, '{"outbox_topic": null}'))
                    FROM cdc.mapping m WHERE m.target = 'h3dl.mine'::regclass$$) AS null_topic;
-- a temporary table of its own: refused
CREATE TEMP TABLE h3dl_tmp (id int PRIMARY KEY);
SELECT h3dl_try($$SELECT cdc.register_mapping('h3dl_tmp')$$) AS register_temp;
SELECT h3dl_try($$SELECT cdc._write_mapping('register', 'h3dl_tmp',
                                            jsonb_populate_record(NULL::cdc.mapping, '{"source_schema": "s", "source_table": "t"}'))$$) AS direct_temp;
DROP TABLE h3dl_tmp;
-- its table's mapping with an outbox and no topic (as the extension owner
-- registers it): the policy refuses the delegate's update of it, as before
RESET ROLE;
SELECT outbox, outbox_topic FROM cdc.register_mapping('h3dl.mine', outbox => true);
SET ROLE h3dl_del;
SELECT h3dl_try($$SELECT cdc.set_ordering('h3dl.mine', 'stream')$$) AS set_ordering_null_topic;
SELECT outbox, outbox_topic FROM cdc.register_mapping('h3dl.mine', outbox => true, outbox_topic => 'h3dl.mine.v2');
-- an unknown action, a NULL target
SELECT cdc._write_mapping('upsert', 'h3dl.mine', NULL);
SELECT cdc._write_mapping('lock', NULL, NULL);
-- nothing of the other owner's mapping changed
RESET ROLE;
SELECT target, outbox, outbox_topic, ordering, truncate_policy FROM cdc.mapping
 WHERE target IN ('h3dl_theirs'::regclass, 'h3dl.mine'::regclass) ORDER BY target::text;

-- 3. A role without EXECUTE on the functions may not call the writer either
SET ROLE h3dl_nobody;
SELECT cdc._write_mapping('unregister', 'h3dl_theirs', NULL);
SELECT h3dl_try($$SELECT cdc._write_mapping('register', 'h3dl_theirs', m) FROM cdc.mapping m WHERE m.target = 'h3dl_theirs'::regclass$$) AS register;
RESET ROLE;

-- 4. A delegate that still holds the table grants of before keeps working
-- (and keeps the power to lock: docs/security.md says to revoke them)
CREATE TABLE h3dl_old (id int PRIMARY KEY, v text);
ALTER TABLE h3dl_old OWNER TO h3dl_legacy;
SET ROLE h3dl_legacy;
SELECT target, outbox, outbox_topic FROM cdc.register_mapping('h3dl_old', outbox => true, outbox_topic => 'h3dl.legacy');
SELECT target, ordering FROM cdc.set_ordering('h3dl_old', 'stream');
SELECT h3dl_try($$UPDATE cdc.mapping SET truncate_policy = 'ignore' WHERE target = 'h3dl_old'::regclass$$) AS direct_update;
-- (another owner's row: left alone by the policy)
SELECT h3dl_try($$UPDATE cdc.mapping SET truncate_policy = 'ignore' WHERE target = 'h3dl_theirs'::regclass$$) AS direct_update_theirs;
SELECT h3dl_try('LOCK TABLE cdc.mapping IN ACCESS EXCLUSIVE MODE') AS lock;
SELECT cdc.unregister_mapping('h3dl_old');
RESET ROLE;
DROP TABLE h3dl_old;

-- 5. The relay: EXECUTE on cdc.outbox_mark_published() and SELECT on the view
SET ROLE h3dl_relay;
SELECT count(*) AS unpublished FROM cdc.outbox WHERE target = 'h3dl_theirs'::regclass AND published_at IS NULL;
SELECT cdc.outbox_mark_published(ARRAY(SELECT id FROM cdc.outbox WHERE target = 'h3dl_theirs'::regclass));
SELECT cdc.outbox_mark_published(ARRAY(SELECT id FROM cdc.outbox WHERE target = 'h3dl_theirs'::regclass));
SELECT m AS mode, h3dl_try(format('LOCK TABLE cdc.outbox IN %s MODE', m)) AS outbox,
       h3dl_try(format('LOCK TABLE cdc.outbox_rows IN %s MODE', m)) AS outbox_rows
  FROM unnest(ARRAY['ACCESS SHARE', 'ROW EXCLUSIVE', 'ACCESS EXCLUSIVE']) m;
RESET ROLE;
SELECT count(*) AS published FROM cdc.outbox WHERE target = 'h3dl_theirs'::regclass AND published_at IS NOT NULL;
-- a relay granted UPDATE on the view (the old recipe) can lock its base
-- tables through it, as the view's owner: docs/security.md says to revoke it
GRANT UPDATE ON cdc.outbox TO h3dl_relay;
SET ROLE h3dl_relay;
BEGIN;
LOCK TABLE cdc.outbox IN ACCESS EXCLUSIVE MODE;
SELECT relation::regclass, mode FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'relation'
   AND relation IN ('cdc.outbox'::regclass, 'cdc.outbox_rows'::regclass, 'cdc.outbox_source'::regclass)
 ORDER BY relation::regclass::text;
ROLLBACK;
RESET ROLE;

-- 6. A relay that claims and deletes with EXECUTE only (not even SELECT on
-- the view): cdc.outbox_claim() locks unpublished rows in id order for the
-- caller's transaction (SKIP LOCKED; two relays: the isolation spec),
-- cdc.outbox_delete() removes the given rows not marked published (the
-- relay's alternative to marking them; rows already marked are left to
-- cdc.prune())
CREATE ROLE h3dl_relay2;
GRANT EXECUTE ON FUNCTION cdc.outbox_claim(integer, text), cdc.outbox_delete(bigint[]),
                          cdc.outbox_mark_published(bigint[])
  TO h3dl_relay2;
SELECT cdc_apply(format('{"source": {"connector": "postgresql", "name": "h3dl", "db": "src", "schema": "public",
                                     "table": "h3dl_theirs", "lsn": %s, "txId": %s, "snapshot": "false"},
                          "op": "c", "after": {"id": %s, "v": "b"}}', 4096 + 64 * i, 500 + i, i)::jsonb, 'h3dl_theirs')
  FROM generate_series(2, 6) i;
-- the rows of a stream-ordered target are claimed and deleted like any
-- other (a worker writes them; here one row is made such a row by hand)
UPDATE cdc.outbox_rows SET stream_ordered = true
 WHERE target = 'h3dl_theirs'::regclass AND entity_key::jsonb = '{"id": "4"}';
SET ROLE h3dl_relay2;
SELECT has_table_privilege('cdc.outbox', 'SELECT') AS reads_view,
       has_table_privilege('cdc.outbox', 'UPDATE') AS updates_view,
       has_table_privilege('cdc.outbox_rows', 'SELECT') AS reads_rows;
BEGIN;
SELECT entity_key, op, topic, source->>'lsn' AS lsn, published_at FROM cdc.outbox_claim(2, 'h3dl.theirs');
-- the claimed rows are locked by this transaction
RESET ROLE;
SELECT r.entity_key, r.xmax = pg_current_xact_id()::xid AS locked_here
  FROM cdc.outbox_rows r WHERE r.target = 'h3dl_theirs'::regclass AND r.published_at IS NULL ORDER BY r.id;
SET ROLE h3dl_relay2;
-- called again in the same transaction, its own locks do not skip them
SELECT entity_key FROM cdc.outbox_claim(3, 'h3dl.theirs');
-- and its LOCK of the outbox's view or table is refused
SAVEPOINT s;
LOCK TABLE cdc.outbox IN ROW EXCLUSIVE MODE;
ROLLBACK TO SAVEPOINT s;
LOCK TABLE cdc.outbox_rows IN ACCESS SHARE MODE;
ROLLBACK TO SAVEPOINT s;
-- publishes the first two and deletes them instead of marking them
SELECT cdc.outbox_delete(ARRAY(SELECT id FROM cdc.outbox_claim(2, 'h3dl.theirs'))) AS deleted;
COMMIT;
-- by topic: none of another topic, the rows of this one; without a topic,
-- those of every topic (other tests' rows too: the relay's claims in this
-- test name the topic)
SELECT count(*) AS other_topic FROM cdc.outbox_claim(10, 'h3dl.no_such_topic');
SELECT entity_key FROM cdc.outbox_claim(10, 'h3dl.theirs');
SELECT entity_key FROM cdc.outbox_claim(1000000) WHERE target = 'h3dl_theirs'::regclass;
-- marks one, then deletes it, an unpublished one and an unknown id: the
-- marked row is left for cdc.prune(), the unknown id is ignored
SELECT id AS h3dl_marked FROM cdc.outbox_claim(1, 'h3dl.theirs') \gset
SELECT cdc.outbox_mark_published(ARRAY[:h3dl_marked]::bigint[]) AS marked;
SELECT id AS h3dl_next FROM cdc.outbox_claim(1, 'h3dl.theirs') \gset
SELECT cdc.outbox_delete(ARRAY[:h3dl_marked, :h3dl_next, -1]::bigint[]) AS deleted;
SELECT cdc.outbox_delete(ARRAY[:h3dl_next]::bigint[]) AS deleted_again, cdc.outbox_delete('{}') AS deleted_none;
-- bad input
SELECT * FROM cdc.outbox_claim(NULL);
SELECT * FROM cdc.outbox_claim(0);
SELECT * FROM cdc.outbox_claim(-1, 'h3dl.theirs');
-- NULL (array_agg over an empty claim) deletes nothing, as marking does
SELECT cdc.outbox_delete((SELECT array_agg(id) FROM cdc.outbox_claim(1, 'no.such.topic'))) AS deleted_none,
       cdc.outbox_mark_published(NULL) AS marked_none;
RESET ROLE;
SELECT entity_key, published_at IS NOT NULL AS published, stream_ordered FROM cdc.outbox_rows
 WHERE target = 'h3dl_theirs'::regclass ORDER BY id;
-- a role without EXECUTE on them
SET ROLE h3dl_nobody;
SELECT * FROM cdc.outbox_claim(1);
SELECT cdc.outbox_delete('{1}');
RESET ROLE;
-- the statements of the two functions use the work-queue index
-- outbox_unpublished_idx (docs/internals.md, "The outbox relay functions")
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT v.* FROM cdc.outbox v
 WHERE v.published_at IS NULL ORDER BY v.id LIMIT 2 FOR UPDATE SKIP LOCKED;
EXPLAIN (COSTS OFF) DELETE FROM cdc.outbox_rows o WHERE o.id = ANY ('{1,2}'::bigint[]) AND o.published_at IS NULL;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- 7. A role delegated cdc.prune() with EXECUTE only: it prunes (as the
-- extension owner: the function is SECURITY DEFINER), and holds no
-- privilege on the tables it prunes, so it cannot LOCK them.  It needed
-- DELETE on cdc.ledger, cdc.ledger_range, cdc.ledger_partition,
-- cdc.entity_state and cdc.outbox_rows, UPDATE on cdc.prune_state and
-- INSERT, UPDATE on cdc.prune_watermark, each of which allowed the lock.
CREATE ROLE h3dl_pruner;
GRANT EXECUTE ON FUNCTION cdc.prune(integer, interval) TO h3dl_pruner;
UPDATE cdc.ledger SET claimed_s = claimed_s - 2 * 86400 WHERE target = 'h3dl_theirs'::regclass;
UPDATE cdc.outbox_rows SET created_at = created_at - interval '2 days' WHERE target = 'h3dl_theirs'::regclass;
SELECT count(*) AS old_ledger_entries FROM cdc.ledger WHERE target = 'h3dl_theirs'::regclass;
SET ROLE h3dl_pruner;
-- twice: a pass starts where the last call (of another test) stopped
SELECT count(*) AS tables FROM cdc.prune(100000, interval '1 day');
SELECT relation, sweep_done FROM cdc.prune(100000, interval '1 day') ORDER BY relation;
SELECT m AS mode, h3dl_try(format('LOCK TABLE cdc.ledger IN %s MODE', m)) AS ledger,
       h3dl_try(format('LOCK TABLE cdc.entity_state IN %s MODE', m)) AS entity_state,
       h3dl_try(format('LOCK TABLE cdc.outbox_rows IN %s MODE', m)) AS outbox_rows,
       h3dl_try(format('LOCK TABLE cdc.prune_state IN %s MODE', m)) AS prune_state,
       h3dl_try(format('LOCK TABLE cdc.prune_watermark IN %s MODE', m)) AS prune_watermark
  FROM unnest(ARRAY['ROW EXCLUSIVE', 'ACCESS EXCLUSIVE']) m;
SELECT h3dl_try('SELECT 1 FROM cdc.prune_state FOR UPDATE') AS prune_state_row_lock;
RESET ROLE;
SELECT count(*) AS ledger_entries_left FROM cdc.ledger WHERE target = 'h3dl_theirs'::regclass;
SELECT entity_key, published_at IS NOT NULL AS published FROM cdc.outbox_rows
 WHERE target = 'h3dl_theirs'::regclass ORDER BY id;
-- a role without EXECUTE
SET ROLE h3dl_nobody;
SELECT count(*) FROM cdc.prune();
RESET ROLE;

-- 8. A role delegated cdc.rename_source() with EXECUTE only: the rename
-- runs as the extension owner (SECURITY DEFINER).  As the caller it needed
-- UPDATE (or DELETE) on cdc.entity_state, cdc.source, cdc.prune_watermark,
-- cdc.table_barrier and cdc.stream_mark for its EXCLUSIVE lock, and more
-- (INSERT, DELETE, UPDATE on cdc.mapping, the sequence of
-- cdc.source_renames), with which it could LOCK those tables in any mode;
-- and its UPDATE of cdc.mapping, under the policy own_targets, moved only
-- the mappings of its own tables to the new name: another owner's mapping
-- restricted to the old name stayed, refusing that source's events.  Its
-- own EXCLUSIVE lock still waits for appliers and holds them until the
-- caller's transaction ends: the rename is an administrator's operation.
CREATE ROLE h3dl_renamer;
GRANT EXECUTE ON FUNCTION cdc.rename_source(text, text) TO h3dl_renamer;
CREATE TABLE h3dl_ren (id int PRIMARY KEY, v text);
CREATE TABLE h3dl.ren_mine (id int PRIMARY KEY, v text);
ALTER TABLE h3dl.ren_mine OWNER TO h3dl_renamer;
SELECT target, source_name FROM cdc.register_mapping('h3dl_ren', source_name => 'h3dl_src_a');
SELECT target, source_name FROM cdc.register_mapping('h3dl.ren_mine', source_name => 'h3dl_src_a');
SELECT cdc_apply('{"source": {"name": "h3dl_src_a", "schema": "public", "table": "h3dl_ren", "lsn": 100},
                   "op": "c", "after": {"id": 1, "v": "a"}}'::jsonb, 'h3dl_ren');
SET ROLE h3dl_renamer;
SELECT cdc.rename_source('h3dl_src_a', 'h3dl_src_b');
SELECT m AS mode, h3dl_try(format('LOCK TABLE cdc.entity_state IN %s MODE', m)) AS entity_state,
       h3dl_try(format('LOCK TABLE cdc.source IN %s MODE', m)) AS source,
       h3dl_try(format('LOCK TABLE cdc.table_barrier IN %s MODE', m)) AS table_barrier
  FROM unnest(ARRAY['ROW EXCLUSIVE', 'EXCLUSIVE']) m;
RESET ROLE;
-- every mapping of the old name follows, another owner's too
SELECT target, source_name FROM cdc.mapping WHERE target IN ('h3dl_ren'::regclass, 'h3dl.ren_mine'::regclass)
 ORDER BY target::text;
SELECT name FROM cdc.source WHERE name LIKE 'h3dl_src_%';
SELECT old_name, new_name, merged FROM cdc.source_renames WHERE old_name = 'h3dl_src_a';
-- the next change under the new name is ordered against the record
SELECT cdc_apply('{"source": {"name": "h3dl_src_b", "schema": "public", "table": "h3dl_ren", "lsn": 200},
                   "op": "u", "after": {"id": 1, "v": "b"}}'::jsonb, 'h3dl_ren');
-- a role without EXECUTE
SET ROLE h3dl_nobody;
SELECT cdc.rename_source('h3dl_src_b', 'h3dl_src_c');
RESET ROLE;
SELECT cdc.unregister_mapping('h3dl_ren'), cdc.unregister_mapping('h3dl.ren_mine');
DELETE FROM cdc.ledger WHERE target = 'h3dl_ren'::regclass;
DELETE FROM cdc.entity_state WHERE target = 'h3dl_ren'::regclass;
DELETE FROM cdc.counters WHERE target = 'h3dl_ren'::regclass;
DELETE FROM cdc.source WHERE name LIKE 'h3dl_src_%';
DELETE FROM cdc.source_renames WHERE old_name = 'h3dl_src_a';
DROP TABLE h3dl_ren, h3dl.ren_mine;

-- the function entry points: SECURITY DEFINER or not, and who may execute them
SELECT p.oid::regprocedure, p.prosecdef, p.proconfig, has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
  FROM pg_proc p
 WHERE p.oid IN ('cdc._write_mapping(text, regclass, cdc.mapping)'::regprocedure,
                 'cdc.outbox_mark_published(bigint[])'::regprocedure,
                 'cdc.outbox_claim(integer, text)'::regprocedure, 'cdc.outbox_delete(bigint[])'::regprocedure,
                 'cdc.prune(integer, interval)'::regprocedure, 'cdc.rename_source(text, text)'::regprocedure)
 ORDER BY 1::text;

DELETE FROM cdc.outbox_rows WHERE target = 'h3dl_theirs'::regclass;
DELETE FROM cdc.ledger WHERE target = 'h3dl_theirs'::regclass;
DELETE FROM cdc.counters WHERE target = 'h3dl_theirs'::regclass;
SELECT cdc.unregister_mapping('h3dl.mine');
DROP TABLE h3dl.mine, h3dl_theirs;
DROP SCHEMA h3dl;
DROP FUNCTION h3dl_try(text);
REVOKE ALL ON cdc.mapping FROM h3dl_legacy;
REVOKE ALL ON cdc.outbox FROM h3dl_relay;
REVOKE ALL ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
                                            bigint, text, text, text, regprocedure, text, text),
                       cdc.unregister_mapping(regclass), cdc.set_ordering(regclass, text)
  FROM h3dl_del, h3dl_legacy;
REVOKE ALL ON FUNCTION cdc.outbox_mark_published(bigint[]) FROM h3dl_relay;
REVOKE ALL ON FUNCTION cdc.outbox_claim(integer, text), cdc.outbox_delete(bigint[]),
                       cdc.outbox_mark_published(bigint[])
  FROM h3dl_relay2;
REVOKE ALL ON FUNCTION cdc.prune(integer, interval) FROM h3dl_pruner;
REVOKE ALL ON FUNCTION cdc.rename_source(text, text) FROM h3dl_renamer;
DROP ROLE h3dl_del, h3dl_nobody, h3dl_legacy, h3dl_relay, h3dl_relay2, h3dl_pruner, h3dl_renamer;

--
-- insert_first_stream_mark: the insert-first hint of cdc_apply_batch()
-- (docs/internals.md, "Insert first"; MarkCreateFromRecord) takes a key
-- without an entity record for a key that was never applied.  After
-- cdc.set_ordering(target, 'stream') and back to 'entity' no key has a
-- record, yet every row is there: the stream mark is the implicit record
-- of every key without one (docs/semantics.md, "Stream ordering").  The
-- hint must follow it, as Decide() does, and insert nothing first there:
-- a batch that updates rows the target has makes no taken-back insert
-- (a heap insert and a heap delete in the target's statistics).
--
CREATE FUNCTION ifs_ev(op text, id int, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'ifs', 'schema', 'public', 'table', 'ifs', 'lsn', lsn, 'txId', lsn),
    'after', jsonb_build_object('id', id, 'v', v)) $$;
CREATE TABLE ifs (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('ifs', source_table => 'ifs');
SET cdc.direct_writes = on;
SELECT applied FROM cdc_apply_batch(jsonb_build_array(ifs_ev('c', 1, 'a1', 100), ifs_ev('c', 2, 'a2', 100), ifs_ev('c', 3, 'a3', 100)), 'ifs'::regclass);
SELECT ordering FROM cdc.set_ordering('ifs', 'stream');
SELECT ordering FROM cdc.set_ordering('ifs', 'entity');
-- no records; the mark stands for them
SELECT count(*) AS records FROM cdc.entity_state WHERE target = 'ifs'::regclass;
SELECT pg_stat_force_next_flush();
CREATE TABLE ifs_before AS SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables WHERE relid = 'ifs'::regclass;
-- newer changes of the three rows (op c as producers that send every write as a create, and u)
SELECT applied, duplicate, stale FROM cdc_apply_batch(jsonb_build_array(ifs_ev('u', 1, 'b1', 200), ifs_ev('c', 2, 'b2', 200), ifs_ev('c', 3, 'b3', 200)), 'ifs'::regclass);
SELECT pg_stat_force_next_flush();
-- three updates, no insert (taken back or not), no delete
SELECT s.n_tup_ins - b.n_tup_ins AS inserts, s.n_tup_upd - b.n_tup_upd AS updates, s.n_tup_del - b.n_tup_del AS deletes
  FROM pg_stat_user_tables s, ifs_before b WHERE s.relid = 'ifs'::regclass;
SELECT * FROM ifs ORDER BY id;
SELECT entity_key, version FROM cdc.entities WHERE target = 'ifs'::regclass ORDER BY entity_key;
RESET cdc.direct_writes;
SELECT cdc.unregister_mapping('ifs');
DROP TABLE ifs, ifs_before;
DROP FUNCTION ifs_ev(text, int, text, bigint);

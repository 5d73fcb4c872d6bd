--
-- speculative_reentry (security review h2): an apply run from user code
-- evaluated during the engine's own speculative insertion of a new key
-- (InsertMissingRowPg: the target's index expressions, predicates and
-- operator classes run between table_tuple_insert_speculative and
-- table_tuple_complete_speculative).  Before the fix:
--   * the nested apply found the outer's speculative row (its dirty
--     snapshot sees the transaction's own rows) and updated it; the outer
--     then confirmed the speculative insertion, which overwrote the updated
--     row's t_ctid with its own TID.  After a HOT update that is a HOT chain
--     pointing to itself: an index scan of the key then looped for ever
--     holding the buffer's lock (pg_cancel_backend and pg_terminate_backend
--     do nothing), and VACUUM of the table died with signal 11, restarting
--     the whole cluster (autovacuum would do it again and again).  Any role
--     that owns a table and may call cdc_apply() on it could do that alone;
--     this file keeps to the non-HOT case, which breaks the update chain
--     the same way but does not hang, so that it fails without stopping
--     the suite;
--   * a nested apply that inserted a key itself took and released the
--     backend's one speculative-insertion lock under the outer one's
--     (WARNING "you don't own a lock of type ExclusiveLock"; the outer's
--     lock was kept to the end of the transaction).
-- Now the engine refuses to start while one of its speculative insertions
-- is in progress (0A000), in cdc_apply() and cdc_apply_batch(); the flag
-- is cleared when the insertion ends, also by an error.
--
CREATE FUNCTION sre_ev(tbl text, op text, id int, w text, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'sre', 'schema', 'public', 'table', tbl, 'lsn', lsn, 'txId', lsn),
    'after', jsonb_build_object('id', id, 'w', w, 'v', v)) $$;
CREATE TABLE sre_t (id int PRIMARY KEY, w text, v text);
CREATE TABLE sre_other (id int PRIMARY KEY, w text, v text);
SELECT count(*) FROM cdc.register_mapping('sre_t', source_table => 'sre_t', outbox => false);
SELECT count(*) FROM cdc.register_mapping('sre_other', source_table => 'sre_other', outbox => false);
-- the index expression's function: while sre.nested names an event, it
-- applies that event once, and reports its outcome or its error
CREATE FUNCTION sre_hook(w text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE ev text := current_setting('sre.nested', true);
BEGIN
  IF coalesce(ev, '') <> '' THEN
    PERFORM set_config('sre.nested', '', false);
    IF current_setting('sre.catch') = 'on' THEN
      BEGIN
        RAISE NOTICE 'nested: %', public.cdc_apply(ev::jsonb);
      EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'nested refused: % %', SQLSTATE, SQLERRM;
      END;
    ELSE
      RAISE NOTICE 'nested: %', public.cdc_apply(ev::jsonb);
    END IF;
  END IF;
  RETURN w;
END $$;
CREATE INDEX sre_t_hook ON sre_t (sre_hook(w));
SET sre.catch = 'on';
-- 1. cdc_apply(): a new key, inserted by speculative insertion; the nested
-- event updates the same key (another indexed value: not HOT)
SELECT set_config('sre.nested', sre_ev('sre_t', 'u', 1, 'nested', 'nested', 50)::text, false);
SELECT cdc_apply(sre_ev('sre_t', 'c', 1, 'outer', 'outer', 10));
SELECT id, w, v FROM sre_t ORDER BY id;
-- 2. cdc_apply_batch(): the same with a key the batch inserts first
SELECT set_config('sre.nested', sre_ev('sre_t', 'u', 2, 'nested', 'nested', 50)::text, false);
SELECT events, applied FROM cdc_apply_batch(jsonb_build_array(sre_ev('sre_t', 'c', 2, 'outer', 'outer', 10)));
SELECT id, w, v FROM sre_t ORDER BY id;
-- 3. a nested event that inserts a new key of another table (its own
-- speculative insertion under the outer's)
SELECT set_config('sre.nested', sre_ev('sre_other', 'c', 7, 'x', 'x', 10)::text, false);
SELECT events, applied FROM cdc_apply_batch(jsonb_build_array(sre_ev('sre_t', 'c', 3, 'outer', 'outer', 10)));
SELECT id, w, v FROM sre_t ORDER BY id;
SELECT count(*) AS other_rows FROM sre_other;
-- 4. not caught: the outer call fails with the nested call's error, nothing applied
SET sre.catch = 'off';
SELECT set_config('sre.nested', sre_ev('sre_other', 'c', 8, 'x', 'x', 10)::text, false);
DO $$
BEGIN
  PERFORM cdc_apply(sre_ev('sre_t', 'c', 4, 'outer', 'outer', 10));
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'outer failed: % %', SQLSTATE, SQLERRM;
END $$;
SELECT count(*) AS key_4_rows FROM sre_t WHERE id = 4;
-- 5. after that error, this session applies again, nested calls included
-- where no speculative insertion is in progress (an update of a row found)
SELECT cdc_apply(sre_ev('sre_other', 'c', 9, 'x', 'x', 10));
SELECT set_config('sre.nested', sre_ev('sre_other', 'c', 10, 'x', 'x', 10)::text, false);
SELECT cdc_apply(sre_ev('sre_t', 'u', 3, 'changed', 'changed', 20));
SELECT id, w, v FROM sre_t ORDER BY id;
SELECT id FROM sre_other ORDER BY id;
-- every row reachable through the key index
SET enable_seqscan = off;
SELECT id, v FROM sre_t WHERE id IN (1, 2, 3) ORDER BY id;
RESET enable_seqscan;
RESET sre.catch;
SELECT cdc.unregister_mapping(t) FROM unnest(ARRAY['sre_t', 'sre_other']::regclass[]) t;
DROP TABLE sre_t, sre_other;
DROP FUNCTION sre_ev, sre_hook;

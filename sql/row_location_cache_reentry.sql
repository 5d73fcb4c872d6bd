--
-- row_location_cache_reentry (review helper h3): FindRowPg takes the
-- backend's row location cache (RowLocationsPg) before it descends the key
-- index and puts the location found into it after.  The descent runs the
-- index's comparison support function, which is user code where the key
-- index has a user-defined operator class (accepted: its equality is the
-- column type's "=").  If that code changes cdc.row_location_cache and
-- applies an event (the nested apply reallocates the cache), the outer
-- FindRowPg wrote into the freed cache: a crash (signal 11, the freed
-- 40MB block unmapped) before the fix.  Expected: the rows updated, the
-- nested changes applied, no crash.
--
CREATE FUNCTION rlr_ev(tbl text, op text, id int, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'rlr', 'schema', 'public', 'table', tbl, 'lsn', lsn, 'txId', lsn),
    'after', jsonb_build_object('id', id, 'v', v)) $$;
CREATE SEQUENCE rlr_seq;
CREATE TABLE rlr_nested (id int PRIMARY KEY, v text);
SELECT count(*) FROM cdc.register_mapping('rlr_nested', source_table => 'rlr_nested', outbox => false);
-- a comparison that, while rlr.on is 1, resizes the cache and applies an event
CREATE FUNCTION rlr_cmp(a int, b int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE n bigint;
BEGIN
  IF current_setting('rlr.on', true) = '1' THEN
    PERFORM set_config('rlr.on', '0', false);
    n := nextval('public.rlr_seq');
    IF n >= current_setting('rlr.first')::int THEN
      PERFORM set_config('cdc.row_location_cache', CASE WHEN n % 2 = 0 THEN '48MB' ELSE '4MB' END, false);
      PERFORM public.cdc_apply(public.rlr_ev('rlr_nested', 'c', 1000 + n::int, 'nested', 1000 + n));
    END IF;
    PERFORM set_config('rlr.on', '1', false);
  END IF;
  RETURN btint4cmp(a, b);
END $$;
CREATE OPERATOR CLASS rlr_ops FOR TYPE int USING btree AS
  OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >, FUNCTION 1 rlr_cmp(int, int);
CREATE TABLE rlr_t (id int NOT NULL, v text);
CREATE UNIQUE INDEX rlr_t_key ON rlr_t (id rlr_ops);
ALTER TABLE rlr_t REPLICA IDENTITY FULL;
SELECT count(*) FROM cdc.register_mapping('rlr_t', source_table => 'rlr_t', outbox => false, key_columns => ARRAY['id']);
-- rows the engine has not seen: their keys are looked up through the index
INSERT INTO rlr_t SELECT g, 'a' FROM generate_series(1, 3) g;
SET cdc.row_location_cache = '40MB';
-- the first 5 comparisons (the taken-back insert of the first key, which
-- its missing entity record makes expected new) apply nothing: a nested
-- apply there takes the backend's speculative insertion lock and releases
-- it under the outer one (WARNING "you don't own a lock of type
-- ExclusiveLock"), another matter than this test's
SET rlr.first = 6;
SELECT set_config('rlr.on', '1', false);
SELECT sum(applied) FROM cdc_apply_batch((SELECT jsonb_agg(rlr_ev('rlr_t', 'u', g, 'b', 20)) FROM generate_series(1, 3) g));
SELECT set_config('rlr.on', '0', false);
SELECT id, v FROM rlr_t ORDER BY id;
SELECT count(*) > 0 AS nested_applied FROM rlr_nested;
RESET cdc.row_location_cache;
SELECT cdc.unregister_mapping(t) FROM unnest(ARRAY['rlr_t', 'rlr_nested']::regclass[]) t;
DROP TABLE rlr_t, rlr_nested;
DROP OPERATOR FAMILY rlr_ops USING btree;
DROP FUNCTION rlr_ev, rlr_cmp;
DROP SEQUENCE rlr_seq;

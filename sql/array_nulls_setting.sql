--
-- array_nulls_setting (security review h2): array values are read as
-- array_out writes them, whatever the session's array_nulls.  The engine
-- turns a JSON array into an array literal with a bare NULL for each JSON
-- null (and quotes a string "NULL"), and pgoutput and COPY send arrays as
-- array_out prints them, the same way; the type's input function read that
-- literal under the session's array_nulls, and with array_nulls = off (a
-- setting of the session, the role or the database, which a database's
-- owner may set for every session there: the worker's too, TAP 140) every
-- null element was stored as the string 'NULL', silently.  Objects: anl_*.
--
CREATE TABLE anl_t (id int PRIMARY KEY, a text[], n int[], m text[][]);
SELECT target FROM cdc.register_mapping('anl_t');
SET array_nulls = off;
SELECT cdc_apply(dbz('c', 'anl_t', '{"id": 1, "a": ["x", null, "NULL"], "n": [1, null], "m": [["p", null], [null, "q"]]}', '0/10', 1), 'anl_t');
SELECT * FROM cdc_apply_batch(jsonb_build_array(
  dbz('c', 'anl_t', '{"id": 2, "a": [null], "n": [null, 2], "m": null}', '0/20', 2),
  dbz('u', 'anl_t', '{"id": 1, "a": ["y", null], "n": [null], "m": [[null]]}', '0/30', 3)), 'anl_t');
SELECT cdc_apply(dbz('c', 'anl_t', '{"id": 3, "a": ["z", null], "n": null, "m": null}', '0/40', 4)::text, 'anl_t');
-- the session's setting is what it was
SHOW array_nulls;
-- also after a value's input function fails inside the call (the setting is
-- changed for the input call only): caught in a PL/pgSQL EXCEPTION block,
-- rolled back to a savepoint, or ending the transaction (review h3)
DO $$
BEGIN
  PERFORM cdc_apply(dbz('c', 'anl_t', '{"id": 9, "n": [1, "x"]}', '0/50', 5), 'anl_t');
EXCEPTION WHEN invalid_text_representation THEN
  RAISE NOTICE 'caught: %; array_nulls in the block: %', sqlerrm, current_setting('array_nulls');
END $$;
SHOW array_nulls;
SELECT ('{a,NULL}'::text[])[2] IS NULL AS null_element_is_null; -- f: the session's off
BEGIN;
SAVEPOINT s;
SELECT cdc_apply(dbz('c', 'anl_t', '{"id": 9, "n": [1, "x"]}', '0/50', 5), 'anl_t');
ROLLBACK TO s;
SHOW array_nulls;
COMMIT;
SELECT cdc_apply(dbz('c', 'anl_t', '{"id": 9, "n": [1, "x"]}', '0/50', 5), 'anl_t');
SHOW array_nulls;
SELECT count(*) AS id9_rows FROM anl_t WHERE id = 9;
RESET array_nulls;
SELECT id, a, a[2] IS NULL AS a2_null, n, m FROM anl_t ORDER BY id;
SELECT count(*) AS string_nulls FROM anl_t, unnest(coalesce(a, '{}')) e WHERE e = 'NULL';
DROP TABLE anl_t;

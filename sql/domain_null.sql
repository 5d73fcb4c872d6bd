--
-- domain_null: a JSON null for a column whose type is a domain that refuses
-- NULL (NOT NULL, or a CHECK that NULL fails) must be refused with the
-- domain's own error, naming the field and the column, as every other value
-- the domain refuses is (docs/semantics.md, "Destination tables": "a
-- domain's CHECK refuses a value with its own 23514 error").  Found by a
-- hostile review: the null skipped the domain's input function, so one
-- cdc_apply() or cdc_apply_batch(), with cdc.direct_writes on and off,
-- stored NULL in a column a plain INSERT cannot give NULL (nothing
-- half-applied: the whole call must roll back, claim included).
--
CREATE DOMAIN dnull_nn AS integer NOT NULL;
CREATE DOMAIN dnull_ck AS text CHECK (VALUE IS NOT NULL);
CREATE TABLE dnull_t (id integer PRIMARY KEY, x dnull_nn, y dnull_ck);
CREATE FUNCTION dnull_ev(op text, id int, x jsonb, y jsonb, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'dn', 'schema', 'public', 'table', 'dnull_t', 'lsn', lsn, 'txId', lsn),
    'after', jsonb_build_object('id', id, 'x', x, 'y', y)) $$;
-- what PostgreSQL gives a plain INSERT
INSERT INTO dnull_t VALUES (1, NULL, 'a');
INSERT INTO dnull_t VALUES (1, 1, NULL);
-- one by one, with the setting on and off
SELECT cdc_apply(dnull_ev('c', 1, 'null', '"a"', 100), 'dnull_t');
SELECT cdc_apply(dnull_ev('c', 2, '2', 'null', 100), 'dnull_t');
SET cdc.direct_writes = off;
SELECT cdc_apply(dnull_ev('c', 3, 'null', '"a"', 100), 'dnull_t');
RESET cdc.direct_writes;
-- an update to NULL of a row that is there
SELECT cdc_apply(dnull_ev('c', 4, '4', '"d"', 100), 'dnull_t');
SELECT cdc_apply(dnull_ev('u', 4, 'null', '"d"', 200), 'dnull_t');
-- batches (set-based), with the setting on and off
SELECT applied FROM cdc_apply_batch(jsonb_build_array(dnull_ev('c', 5, 'null', '"e"', 100)), 'dnull_t');
SELECT applied FROM cdc_apply_batch(jsonb_build_array(dnull_ev('c', 6, '6', '"f"', 100), dnull_ev('u', 6, '6', 'null', 200)), 'dnull_t');
SET cdc.direct_writes = off;
SELECT applied FROM cdc_apply_batch(jsonb_build_array(dnull_ev('c', 7, 'null', '"g"', 100)), 'dnull_t');
RESET cdc.direct_writes;
-- nothing of the refused calls stayed: only row 4, as created
SELECT * FROM dnull_t ORDER BY id;
SELECT entity_key, version FROM cdc.entities WHERE target = 'dnull_t'::regclass ORDER BY 1;
-- the corrected retries (same derived delivery keys) apply
SELECT cdc_apply(dnull_ev('c', 1, '1', '"a"', 100), 'dnull_t') AS corrected,
       cdc_apply(dnull_ev('u', 4, '40', '"d"', 200), 'dnull_t') AS corrected_update;
-- a duplicate delivery is still reported as such, whatever its values
SELECT cdc_apply(dnull_ev('c', 1, 'null', '"a"', 100), 'dnull_t') AS redelivered;
SELECT * FROM dnull_t ORDER BY id;
DROP TABLE dnull_t;
DROP FUNCTION dnull_ev(text, int, jsonb, jsonb, bigint);
DROP DOMAIN dnull_nn;
DROP DOMAIN dnull_ck;

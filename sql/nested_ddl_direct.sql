--
-- nested_ddl_direct: a target's trigger (or any user code that runs while a
-- batch is applied: a handler, a domain CHECK, a column default) may alter
-- another target of the same batch before its rows are written.  The batch
-- has read that target's metadata (column types) and converted the events'
-- values already; rows written without SQL (cdc.direct_writes) placed those
-- Datums into the altered table's descriptor as they were: an int Datum read
-- as a text pointer crashed the server.  The write takes the statement then,
-- which PostgreSQL coerces or refuses as for any cached plan.
-- Tables of this suite are called nd_*.
--
CREATE TABLE nd_a (id int PRIMARY KEY, v int);
CREATE TABLE nd_b (id int PRIMARY KEY, v int);
SELECT 1 FROM cdc.register_mapping('nd_a');
SELECT 1 FROM cdc.register_mapping('nd_b');
CREATE FUNCTION nd_b_alter() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  ALTER TABLE public.nd_a ALTER COLUMN v TYPE text;
  RETURN NEW;
END $$;
CREATE TRIGGER nd_b_t AFTER INSERT ON nd_b FOR EACH ROW EXECUTE FUNCTION nd_b_alter();

-- A value column's type changed between the metadata read and the write.
SELECT cdc_apply_batch(jsonb_build_array(
  dbz('c', 'nd_b', '{"id": 1, "v": 1}', '0/1000', 1),
  dbz('c', 'nd_a', '{"id": 1, "v": 12345}', '0/1010', 2),
  dbz('c', 'nd_a', '{"id": 2, "v": 7}', '0/1020', 3)));
SELECT id, v, pg_typeof(v) FROM nd_a ORDER BY id;
SELECT entity_key, version FROM cdc.entities WHERE target = 'nd_a'::regclass ORDER BY entity_key::text;

-- The key column's type changed before rows are looked up by key (an update
-- and a delete): the statement refuses the integer key (42883), and the
-- whole batch (the ALTER too) is rolled back.
CREATE OR REPLACE FUNCTION nd_b_alter() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  ALTER TABLE public.nd_a ALTER COLUMN id TYPE text;
  RETURN NEW;
END $$;
SELECT cdc_apply_batch(jsonb_build_array(
  dbz('c', 'nd_b', '{"id": 2, "v": 2}', '0/2000', 4),
  dbz('u', 'nd_a', '{"id": 1, "v": "updated"}', '0/2010', 5, before => '{"id": 1}'),
  dbz('d', 'nd_a', NULL, '0/2020', 6, before => '{"id": 2}')));
SELECT id, pg_typeof(id), v FROM nd_a ORDER BY id;
SELECT entity_key, version FROM cdc.entities WHERE target = 'nd_a'::regclass ORDER BY entity_key::text;

-- The next batch reads the altered table's metadata again (v is text now):
-- rows written without SQL.
DROP TRIGGER nd_b_t ON nd_b;
SELECT cdc_apply_batch(jsonb_build_array(
  dbz('c', 'nd_a', '{"id": 3, "v": "y"}', '0/3000', 7)));
SELECT id, v, pg_typeof(v) FROM nd_a ORDER BY id;

-- The outbox payload of a column type without a built-in fast path (here a
-- domain) is formed into the table's row type: a domain CHECK that applies
-- a change of another target (a nested call) and alters the target of the
-- change it checks, before the rest of its batch is converted.  Refused
-- with 55006 and the whole batch rolled back: that formed the int Datum
-- into the text column and crashed too.
CREATE TABLE nd_c (id int PRIMARY KEY, v int);
SELECT 1 FROM cdc.register_mapping('nd_c', outbox => true);
CREATE FUNCTION nd_check(int) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
  PERFORM public.cdc_apply(public.dbz('c', 'nd_c', jsonb_build_object('id', $1, 'v', $1), '0/5000', 50 + $1));
  IF (SELECT atttypid FROM pg_attribute WHERE attrelid = 'public.nd_d'::regclass AND attname = 'w') = 'int4'::regtype THEN
    ALTER TABLE public.nd_d ALTER COLUMN w TYPE text;
  END IF;
  RETURN true;
END $$;
CREATE DOMAIN nd_dom AS int CHECK (nd_check(VALUE));
CREATE TABLE nd_d (id int PRIMARY KEY, d nd_dom, w int);
SELECT 1 FROM cdc.register_mapping('nd_d', outbox => true);
SELECT cdc_apply_batch(jsonb_build_array(
  dbz('c', 'nd_d', '{"id": 1, "d": 1, "w": 111}', '0/4000', 8),
  dbz('c', 'nd_d', '{"id": 2, "d": 2, "w": 222}', '0/4010', 9)));
SELECT (SELECT count(*) FROM nd_d) AS nd_d_rows, (SELECT count(*) FROM nd_c) AS nd_c_rows,
       outbox_count('nd_d') AS nd_d_outbox, outbox_count('nd_c') AS nd_c_outbox,
       (SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'nd_d'::regclass AND attname = 'w') AS w_type;
-- Without the DDL, the nested calls and the batch are both applied, with their outbox rows.
CREATE OR REPLACE FUNCTION nd_check(int) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
  PERFORM public.cdc_apply(public.dbz('c', 'nd_c', jsonb_build_object('id', $1, 'v', $1), '0/5000', 50 + $1));
  RETURN true;
END $$;
SELECT cdc_apply_batch(jsonb_build_array(
  dbz('c', 'nd_d', '{"id": 1, "d": 1, "w": 111}', '0/4000', 8),
  dbz('c', 'nd_d', '{"id": 2, "d": 2, "w": 222}', '0/4010', 9)));
SELECT * FROM nd_d ORDER BY id;
SELECT * FROM nd_c ORDER BY id;
SELECT outbox_count('nd_d') AS nd_d_outbox, outbox_count('nd_c') AS nd_c_outbox;

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

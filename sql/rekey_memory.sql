--
-- rekey_memory (review h2 of 3c28cf4): cdc._rekey_pairs read every
-- row of the target with SPI_execute, which holds all of them in memory
-- at once (SPI_tuptable) before they reach the function's tuplestore
-- (which spills to disk past work_mem): re-keying a target of 3,000,000
-- rows with one entity record took 400 MB, growing with the table.
-- Expected: the backend's peak memory grows by far less than the rows'
-- size (here 500,000 rows, about 65 MB held at once before; the read itself
-- and the join add up to about 30 MB).  Linux only
-- (/proc/self/status).  Tables of this suite are called h2rm_*.
--
CREATE TABLE h2rm_big (id int PRIMARY KEY, code int NOT NULL UNIQUE);
INSERT INTO h2rm_big SELECT g, g FROM generate_series(1, 500000) g;
SELECT target FROM cdc.register_mapping('h2rm_big');
SELECT cdc_apply(dbz('c', 'h2rm_big', '{"id": 1, "code": 1}', '0/1000', 100), 'h2rm_big');
\c -
-- the table's pages in this backend's resident memory before the baseline
SELECT count(*) FROM h2rm_big;
CREATE TEMP TABLE h2rm_hwm AS
  SELECT substring(pg_read_file('/proc/' || pg_backend_pid() || '/status') FROM 'VmHWM:\s*(\d+) kB')::bigint AS kb;
SELECT key_columns FROM cdc.register_mapping('h2rm_big', key_columns => '{code}');
SELECT entity_key FROM cdc.entities WHERE target = 'h2rm_big'::regclass;
SELECT substring(pg_read_file('/proc/' || pg_backend_pid() || '/status') FROM 'VmHWM:\s*(\d+) kB')::bigint - kb < 50000
       AS peak_grew_less_than_50mb
  FROM h2rm_hwm;
DROP TABLE h2rm_big;

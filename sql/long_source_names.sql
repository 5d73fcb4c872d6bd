--
-- long_source_names (fresh-user review h3): the 42P01 "no mapping for
-- source table" message cut the source schema and table names at 40 bytes,
-- so two unmapped tables of a PostgreSQL source whose names differ only at
-- the end (names up to 63 bytes, NAMEDATALEN - 1) gave the same message:
-- the operator could not tell which one lacks a mapping.  Now a name is cut
-- only beyond 63 bytes (at a character boundary); source.name in the DETAIL
-- is cut as before.
-- Objects: none (no table is created: the events name unmapped tables).
--
\set VERBOSITY terse
-- 63-byte table names that differ in their last characters
SELECT cdc_apply(dbz('c', 'orders_archive_partition_for_region_europe_west_year_2024_q1_a', '{"id": 1}', '0/10', 1));
SELECT cdc_apply(dbz('c', 'orders_archive_partition_for_region_europe_west_year_2024_q1_b', '{"id": 1}', '0/10', 1));
-- a 63-byte schema name, and a table of 31 two-byte characters (62 bytes)
SELECT cdc_apply(dbz('c', repeat('é', 31), '{"id": 1}', '0/10', 1,
                     schema_name => 'warehouse_reporting_schema_for_region_europe_west_year_2024_q1'));
-- beyond 63 bytes (a source other than PostgreSQL): cut at a character boundary
SELECT cdc_apply(dbz('c', repeat('é', 40), '{"id": 1}', '0/10', 1));
SELECT cdc_apply(dbz('c', repeat('x', 200), '{"id": 1}', '0/10', 1));
-- the batch says the same
SELECT * FROM cdc_apply_batch(jsonb_build_array(
  dbz('c', 'orders_archive_partition_for_region_europe_west_year_2024_q1_b', '{"id": 1}', '0/10', 1)));

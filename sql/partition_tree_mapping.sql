--
-- partition_tree_mapping (fresh-user review): a partition and its
-- partitioned parent (or any ancestor) could both be mapped.  The engine
-- writes a partitioned target through the parent, so one row then had two
-- entity records, one per target: a stale change through one mapping
-- overwrote a newer one applied through the other.  The second registration
-- is refused with 23505 naming both tables, at every level, whichever is
-- mapped first; sibling partitions may both be mapped.
-- Objects: ptm*.
--
CREATE TABLE ptm (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE "ptm.P1" PARTITION OF ptm FOR VALUES FROM (0) TO (100) PARTITION BY RANGE (id);
CREATE TABLE ptm1a PARTITION OF "ptm.P1" FOR VALUES FROM (0) TO (50);
CREATE TABLE ptm2 PARTITION OF ptm FOR VALUES FROM (100) TO (200);
SELECT target FROM cdc.register_mapping('ptm', source_schema => 'src', source_table => 'ptm');
-- a partition and a sub-partition of a mapped table: refused
SELECT target FROM cdc.register_mapping('"ptm.P1"', source_schema => 'src', source_table => 'ptm_p1');
SELECT target FROM cdc.register_mapping('ptm1a', source_schema => 'src', source_table => 'ptm1a');
SELECT target::text FROM cdc.mapping WHERE target::text LIKE '%ptm%' ORDER BY 1;
-- the parent's mapping works: a newer change through it, a stale one again
SELECT cdc_apply(dbz('c', 'ptm', '{"id": 1, "v": "new"}', '0/20', 2), 'ptm');
SELECT cdc_apply(dbz('u', 'ptm', '{"id": 1, "v": "old"}', '0/10', 1), 'ptm');
SELECT * FROM ptm ORDER BY id;
-- the other way round: a mapped sub-partition, then its ancestors refused
SELECT cdc.unregister_mapping('ptm');
SELECT target FROM cdc.register_mapping('ptm1a', source_schema => 'src', source_table => 'ptm1a');
SELECT target FROM cdc.register_mapping('ptm', source_schema => 'src', source_table => 'ptm');
SELECT target FROM cdc.register_mapping('"ptm.P1"', source_schema => 'src', source_table => 'ptm_p1');
-- a sibling partition in another branch may be mapped too
SELECT target FROM cdc.register_mapping('ptm2', source_schema => 'src', source_table => 'ptm2');
-- registering the same target again (replacing its options) is not refused
SELECT target FROM cdc.register_mapping('ptm1a', source_schema => 'src', source_table => 'ptm1a', outbox => false);
SELECT target::text FROM cdc.mapping WHERE target::text LIKE '%ptm%' ORDER BY 1;
SELECT cdc.unregister_mapping('ptm1a');
SELECT cdc.unregister_mapping('ptm2');
DROP TABLE ptm;

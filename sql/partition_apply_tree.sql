--
-- partition_apply_tree (fresh-user review): cdc.register_mapping refuses a
-- partition and its partitioned ancestor both mapped (partition_tree_mapping),
-- but the engine did not look at the tree when applying:
--  * a cdc_apply() or cdc_apply_batch() naming an unmapped partition as its
--    target while the parent is mapped (or the unmapped parent while a
--    partition is mapped) applied, giving the row a second entity record;
--  * a mapped table ATTACHed as a partition of a mapped parent (the check at
--    registration cannot see later DDL) made both mappings apply again.
-- Now the engine refuses such a target at apply time, 55000 naming both
-- tables, nothing claimed or written; the metadata cache sees a later ATTACH
-- or DETACH PARTITION.
-- Objects: pat*.
--
CREATE TABLE pat (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE pat1 PARTITION OF pat FOR VALUES FROM (0) TO (100);
CREATE TABLE pat2 PARTITION OF pat FOR VALUES FROM (100) TO (200);
SELECT target FROM cdc.register_mapping('pat');
SELECT cdc_apply(dbz('c', 'pat', '{"id": 1, "v": "a"}', '0/10', 1), 'pat');
-- an unmapped partition of the mapped parent named as the target: refused
SELECT cdc_apply(dbz('u', 'pat1', '{"id": 1, "v": "b"}', '0/20', 2), 'pat1');
SELECT cdc_apply(dbz('u', 'pat1', '{"id": 1, "v": "b"}', '0/20', 2)::text, 'pat1');
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('u', 'pat1', '{"id": 1, "v": "b"}', '0/20', 2)), 'pat1');
SELECT * FROM cdc_apply_batch(ARRAY[dbz('c', 'pat2', '{"id": 101, "v": "x"}', '0/30', 3)], 'pat2');
SELECT * FROM pat ORDER BY id;
SELECT (SELECT count(*) FROM cdc.ledger WHERE target IN ('pat'::regclass, 'pat1'::regclass, 'pat2'::regclass)) AS ledger,
       (SELECT count(*) FROM cdc.entities WHERE target IN ('pat'::regclass, 'pat1'::regclass, 'pat2'::regclass)) AS entities;
-- the reverse: a mapped partition, its unmapped parent named as the target
SELECT cdc.unregister_mapping('pat');
SELECT target FROM cdc.register_mapping('pat1');
SELECT cdc_apply(dbz('u', 'pat', '{"id": 1, "v": "c"}', '0/40', 4), 'pat');
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('u', 'pat', '{"id": 1, "v": "c"}', '0/40', 4))::text, 'pat');
-- a sibling of the mapped partition is not in its tree's line: applied
SELECT cdc_apply(dbz('c', 'pat2', '{"id": 102, "v": "y"}', '0/50', 5), 'pat2');
SELECT cdc.unregister_mapping('pat1');
-- ATTACH PARTITION after both tables were mapped separately
CREATE TABLE patx (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('pat');
SELECT target FROM cdc.register_mapping('patx');
SELECT cdc_apply(dbz('c', 'patx', '{"id": 201, "v": "x1"}', '0/60', 6));
SELECT cdc_apply(dbz('c', 'pat', '{"id": 2, "v": "p1"}', '0/61', 7));
ALTER TABLE pat ATTACH PARTITION patx FOR VALUES FROM (200) TO (300);
-- both mappings are refused now (the cached metadata of both is dropped)
SELECT cdc_apply(dbz('u', 'patx', '{"id": 201, "v": "x2"}', '0/70', 8));
SELECT cdc_apply(dbz('u', 'pat', '{"id": 201, "v": "x0"}', '0/65', 9)::text);
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('u', 'pat', '{"id": 2, "v": "p2"}', '0/71', 10),
                                                dbz('u', 'patx', '{"id": 201, "v": "x2"}', '0/72', 11)));
SELECT * FROM cdc_apply_batch(ARRAY[dbz('u', 'pat', '{"id": 2, "v": "p2"}', '0/71', 10)]);
SELECT * FROM pat ORDER BY id;
SELECT (SELECT count(*) FROM cdc.ledger WHERE target IN ('pat'::regclass, 'patx'::regclass)) AS ledger,
       (SELECT count(*) FROM cdc.entities WHERE target IN ('pat'::regclass, 'patx'::regclass)) AS entities;
-- re-registering either is refused as before (partition_tree_mapping)
SELECT target FROM cdc.register_mapping('patx');
-- DETACH: two separate tables again, both apply
ALTER TABLE pat DETACH PARTITION patx;
SELECT cdc_apply(dbz('u', 'patx', '{"id": 201, "v": "x2"}', '0/70', 8));
SELECT cdc_apply(dbz('u', 'pat', '{"id": 2, "v": "p2"}', '0/71', 10));
-- attached again, one mapping unregistered: the other one applies
ALTER TABLE pat ATTACH PARTITION patx FOR VALUES FROM (200) TO (300);
SELECT cdc.unregister_mapping('patx');
SELECT cdc_apply(dbz('u', 'pat', '{"id": 201, "v": "x3"}', '0/80', 12));
SELECT * FROM pat ORDER BY id;
SELECT cdc.unregister_mapping('pat');
DROP TABLE pat;

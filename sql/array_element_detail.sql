--
-- array_element_detail (fresh-user review h3): an array column's element
-- that cannot be converted (a JSON object, a boolean for an integer
-- element, an integer timestamp without temporal_unit) was refused with a
-- DETAIL naming the element's type as the column's: 'Destination column
-- "a" has type integer.' for an int[] column.  The detail now names the
-- column's own type (integer[], timestamp with time zone[]), as the other
-- conversion errors do; the message names the element's path and type.
-- Objects: aed.
--
CREATE TABLE aed (id int PRIMARY KEY, a int[], ts timestamptz[], n numeric(6,2)[]);
SELECT target FROM cdc.register_mapping('aed');
\set VERBOSITY default
SELECT cdc_apply(dbz('c', 'aed', '{"id": 1, "a": [1, {"x": 1}]}', '0/10'));
SELECT cdc_apply(dbz('c', 'aed', '{"id": 1, "a": [[1], [2, [3, {"y": 2}]]]}', '0/10'));
SELECT cdc_apply(dbz('c', 'aed', '{"id": 1, "ts": [1700000000000]}', '0/10'));
SELECT cdc_apply(dbz('c', 'aed', '{"id": 1, "n": ["AN6m"]}', '0/10')::text);
SELECT applied FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'aed', '{"id": 1, "a": [{"x": 1}]}', '0/10')));
-- the input function's error names the column and its type in the message, as before
SELECT cdc_apply(dbz('c', 'aed', '{"id": 1, "a": ["1", "x"]}', '0/10'));
-- the whole value of the wrong kind: the column's type, as before
SELECT cdc_apply(dbz('c', 'aed', '{"id": 1, "a": {"x": 1}}', '0/10'));
\set VERBOSITY terse
SELECT count(*) AS rows FROM aed;
SELECT cdc.unregister_mapping('aed');
DROP TABLE aed;

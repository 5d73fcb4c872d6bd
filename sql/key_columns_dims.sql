--
-- key_columns_dims (fresh-user run h4): cdc.register_mapping took
-- key_columns of two dimensions ('{{a},{b}}'): the engine read them as the
-- key (a, b), but cdc.entities, which shows entity keys as JSON through
-- cdc.entity_key_json, then failed for every reader who could see that
-- target's records with 'wrong number of array subscripts' (2202E, from
-- jsonb_object).  register_mapping now refuses such an array with 2202E
-- naming the argument, and entity_key_json reads a stored one as the
-- engine does (a mapping row written directly, as _write_mapping or a
-- superuser may), so the view never fails on it.
-- Objects: kd_*.
--
CREATE TABLE kd (id int PRIMARY KEY, a int NOT NULL, b int NOT NULL);
CREATE UNIQUE INDEX kd_ab ON kd (a, b);
\set VERBOSITY default
SELECT target FROM cdc.register_mapping('kd', key_columns => '{{a},{b}}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT count(*) AS kd_mappings FROM cdc.mapping WHERE target = 'kd'::regclass;
-- a row written directly: the engine keys by (a, b), and the view shows the records
INSERT INTO cdc.mapping (target, source_schema, source_table, key_columns) VALUES ('kd', 'public', 'kd', '{{a},{b}}');
SELECT cdc_apply(dbz('c', 'kd', '{"id": 1, "a": 1, "b": 2}', '0/10', 1));
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'kd'::regclass;
SELECT cdc.entity_key_json('kd', '{1,2}');
DROP TABLE kd;

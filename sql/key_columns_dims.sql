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
-- Objects: kdim, kdim_ab.
--
CREATE TABLE kdim (id int PRIMARY KEY, a int NOT NULL, b int NOT NULL);
CREATE UNIQUE INDEX kdim_ab ON kdim (a, b);
\set VERBOSITY default
SELECT target FROM cdc.register_mapping('kdim', key_columns => '{{a},{b}}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT count(*) AS kd_mappings FROM cdc.mapping WHERE target = 'kdim'::regclass;
-- a row written directly: the engine keys by (a, b), and the view shows the records
INSERT INTO cdc.mapping (target, source_schema, source_table, key_columns) VALUES ('kdim', 'public', 'kdim', '{{a},{b}}');
SELECT cdc_apply(dbz('c', 'kdim', '{"id": 1, "a": 1, "b": 2}', '0/10', 1));
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'kdim'::regclass;
SELECT cdc.entity_key_json('kdim', '{1,2}');
DROP TABLE kdim;

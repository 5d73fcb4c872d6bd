--
-- generated_key (fresh-user run h4): a key column that is a stored
-- generated column.  The engine leaves generated columns to the
-- destination (it never writes them, as PostgreSQL's own subscriber does
-- not), so the event's value of such a key column was dropped before the
-- key was read, and every change failed with 22023 'field "after.g" is
-- missing: it is a key column' although the event carried the field; and
-- cdc.register_mapping accepted the mapping.  Such a key is refused with
-- 0A000 naming the column, by cdc.register_mapping (the primary key and
-- key_columns), cdc_apply() and cdc_apply_batch(), nothing claimed; the
-- same table applies once the column is an ordinary one.
-- Objects: gk_*.
--
CREATE TABLE gk_pk (a int NOT NULL, g int GENERATED ALWAYS AS (a * 2) STORED PRIMARY KEY, v text);
CREATE TABLE gk_uk (id int PRIMARY KEY, a int NOT NULL, g int GENERATED ALWAYS AS (a + 100) STORED, v text);
CREATE UNIQUE INDEX gk_uk_g ON gk_uk (g);
\set VERBOSITY default
-- registering: the primary key, and key_columns backed by a unique index
SELECT target FROM cdc.register_mapping('gk_pk');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT target FROM cdc.register_mapping('gk_uk', key_columns => '{g}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- an ordinary key column of the same table is fine
SELECT target FROM cdc.register_mapping('gk_uk');
SELECT count(*) AS gk_mappings FROM cdc.mapping WHERE target IN ('gk_pk'::regclass, 'gk_uk'::regclass);
-- applying to the unmapped table (its primary key): every op, both entry points
SELECT cdc_apply(dbz('c', 'gk_pk', '{"a": 1, "g": 2, "v": "x"}', '0/10', 1), 'gk_pk');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(dbz('u', 'gk_pk', '{"a": 1, "g": 2, "v": "y"}', '0/20', 2, '{"a": 1, "g": 2}'), 'gk_pk');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(dbz('d', 'gk_pk', NULL, '0/30', 3, '{"a": 1, "g": 2}'), 'gk_pk');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'gk_pk', '{"a": 1, "g": 2, "v": "x"}', '0/10', 1)), 'gk_pk');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT (SELECT count(*) FROM gk_pk) AS rows, ledger_count('gk_pk') AS ledger_rows, outbox_count('gk_pk') AS outbox_rows,
       (SELECT count(*) FROM cdc.entities WHERE target = 'gk_pk'::regclass) AS entity_records;
-- the column made an ordinary one: registered and applied, a redelivery a duplicate
ALTER TABLE gk_pk ALTER COLUMN g DROP EXPRESSION;
SELECT target FROM cdc.register_mapping('gk_pk', outbox => true);
SELECT cdc_apply(dbz('c', 'gk_pk', '{"a": 1, "g": 2, "v": "x"}', '0/10', 1));
SELECT cdc_apply(dbz('c', 'gk_pk', '{"a": 1, "g": 2, "v": "x"}', '0/10', 1));
SELECT * FROM gk_pk;
SELECT ledger_count('gk_pk') AS ledger_rows, outbox_count('gk_pk') AS outbox_rows;
DROP TABLE gk_pk, gk_uk;
-- a version_column that is a generated column: its value is dropped as well,
-- so every change failed with 'field "after.ver" is missing or null'
CREATE TABLE gk_ver (id int PRIMARY KEY, v text, ver int GENERATED ALWAYS AS (length(v)) STORED);
\set VERBOSITY default
SELECT target FROM cdc.register_mapping('gk_ver', version_column => 'ver');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT count(*) AS gk_ver_mappings FROM cdc.mapping WHERE target = 'gk_ver'::regclass;
-- a mapping written before the check (as by an older version): the engine refuses it too, nothing claimed
INSERT INTO cdc.mapping (target, source_schema, source_table, version_column) VALUES ('gk_ver', 'public', 'gk_ver', 'ver');
\set VERBOSITY default
SELECT cdc_apply(dbz('c', 'gk_ver', '{"id": 1, "v": "x", "ver": 1}', '0/10', 1));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT (SELECT count(*) FROM gk_ver) AS rows, ledger_count('gk_ver') AS ledger_rows;
DROP TABLE gk_ver;

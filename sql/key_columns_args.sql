--
-- key_columns_args (fresh-user review h3): cdc.register_mapping's
-- key_columns with a NULL element was refused as an unknown column
-- ('column "<NULL>" does not exist', 42703); it is a bad argument value:
-- 22004 naming key_columns.  A column named twice ('{id,id}') was refused
-- as 'no unique index on exactly (id, id)' (42P10): now 42701 naming
-- key_columns and the column.  Nothing is registered.
-- Objects: kca.
--
CREATE TABLE kca (id int PRIMARY KEY, a int NOT NULL, b int NOT NULL);
CREATE UNIQUE INDEX kca_ab ON kca (a, b);
\set VERBOSITY default
SELECT target FROM cdc.register_mapping('kca', key_columns => '{NULL}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT target FROM cdc.register_mapping('kca', key_columns => '{a,NULL}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT target FROM cdc.register_mapping('kca', key_columns => '{{a},{NULL}}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a column named twice, also among others and not adjacent: the first repeated one
SELECT target FROM cdc.register_mapping('kca', key_columns => '{id,id}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT target FROM cdc.register_mapping('kca', key_columns => '{a,b,b,a}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT target FROM cdc.register_mapping('kca', key_columns => '{b,a,b}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT count(*) AS kca_mappings FROM cdc.mapping WHERE target = 'kca'::regclass;
-- the same columns without the NULL are accepted
SELECT target, key_columns FROM cdc.register_mapping('kca', key_columns => '{a,b}');
SELECT cdc.unregister_mapping('kca');
DROP TABLE kca;

--
-- quoted_table_names (fresh-user review): error messages printed a
-- target's schema and table names unquoted, e.g. 'has no column in table
-- Weird "S".x.Tab.le "q"', which cannot tell a dot or quote in a name from
-- the separator.  They print the names as quote_identifier does (quoted
-- only when needed: public.t stays public.t).  A second round covers the
-- messages left out at first: not a table, a temporary table, a handler's
-- CONTEXT line, a source table mapped twice (register_mapping).
-- Objects: schema "qtn.S", table "Tab.le ""q"" ü".
--
CREATE SCHEMA "qtn.S";
CREATE TABLE "qtn.S"."Tab.le ""q"" ü" (id int PRIMARY KEY, v text);
CREATE TABLE "qtn.S"."no key" (id int, v text);
-- a field without a column (after- and before-image), a key missing, null
SELECT cdc_apply(dbz('c', 'x', '{"id": 1, "v": "a", "w": 1}', '0/10', 1), '"qtn.S"."Tab.le ""q"" ü"');
SELECT cdc_apply(dbz('u', 'x', '{"id": 1, "v": "a"}', '0/10', 1, before => '{"id": 1, "w": 1}'), '"qtn.S"."Tab.le ""q"" ü"');
SELECT cdc_apply(dbz('c', 'x', '{"v": "a"}', '0/10', 1), '"qtn.S"."Tab.le ""q"" ü"');
SELECT cdc_apply(dbz('c', 'x', '{"id": null, "v": "a"}', '0/10', 1), '"qtn.S"."Tab.le ""q"" ü"');
-- no key
SELECT cdc_apply(dbz('c', 'x', '{"id": 1, "v": "a"}', '0/10', 1), '"qtn.S"."no key"');
-- the same in a batch
SELECT events FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'x', '{"id": 1, "w": 1}', '0/10', 1)), '"qtn.S"."Tab.le ""q"" ü"');
-- a plain name is printed as before
CREATE TABLE qtn_plain (id int PRIMARY KEY);
SELECT cdc_apply(dbz('c', 'x', '{"id": 1, "w": 1}', '0/10', 1), 'qtn_plain');
SELECT count(*) AS rows FROM "qtn.S"."Tab.le ""q"" ü";
-- (second round: the messages and CONTEXT lines the first one left out)
-- not a table, a temporary table (its name alone: pg_temp_N varies)
CREATE VIEW "qtn.S"."A View" AS SELECT 1 AS id;
SELECT cdc_apply(dbz('c', 'x', '{"id": 1}', '0/10', 1), '"qtn.S"."A View"');
CREATE TEMPORARY TABLE "Tmp.T" (id int PRIMARY KEY);
SELECT cdc_apply(dbz('c', 'x', '{"id": 1}', '0/10', 1), '"Tmp.T"');
DROP TABLE "Tmp.T";
-- a handler's error: the CONTEXT line names the target quoted
CREATE TABLE "qtn.S"."Hand.led" (id int PRIMARY KEY, v text);
CREATE FUNCTION qtn_failing_handler(op text, old jsonb, new jsonb, meta jsonb) RETURNS void
LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'handler says no (target %)', meta->>'target' USING ERRCODE = 'P0001'; END $$;
SELECT (cdc.register_mapping('"qtn.S"."Hand.led"', mode => 'handler',
                             handler => 'qtn_failing_handler(text, jsonb, jsonb, jsonb)')).mode;
SELECT cdc_apply(dbz('c', 'x', '{"id": 1, "v": "a"}', '0/10', 1), '"qtn.S"."Hand.led"');
-- a source table mapped twice: its names quoted like the target's
SELECT (cdc.register_mapping('"qtn.S"."Tab.le ""q"" ü"', source_schema => 'src.S', source_table => 'T "1"')).target;
CREATE TABLE "qtn.S"."other" (id int PRIMARY KEY);
SELECT cdc.register_mapping('"qtn.S"."other"', source_schema => 'src.S', source_table => 'T "1"');
SELECT count(*) AS rows FROM "qtn.S"."Hand.led";
DROP TABLE qtn_plain;
DROP SCHEMA "qtn.S" CASCADE;
-- (after its mapped table: a mapped handler cannot be dropped, sql/handler_drop_guard.sql)
DROP FUNCTION qtn_failing_handler(text, jsonb, jsonb, jsonb);

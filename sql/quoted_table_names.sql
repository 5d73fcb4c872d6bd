--
-- quoted_table_names (fresh-user review): error messages printed a
-- target's schema and table names unquoted, e.g. 'has no column in table
-- Weird "S".x.Tab.le "q"', which cannot tell a dot or quote in a name from
-- the separator.  They print the names as quote_identifier does (quoted
-- only when needed: public.t stays public.t).
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
DROP TABLE qtn_plain;
DROP SCHEMA "qtn.S" CASCADE;

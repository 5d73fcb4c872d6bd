--
-- text_form_encoding (proposed by rev4, fails on integ 291f584 / be6127e):
-- (1) the text form of cdc_apply() and cdc_apply_batch() in a database whose
-- encoding is not UTF-8.  The text argument is in the database encoding, yet
-- it is parsed as UTF-8 and its strings stored as UTF-8 bytes: a raw
-- non-ASCII character is refused (22P02 "ill-formed UTF-8 byte") where the
-- jsonb form applies it, and a \u escape is stored as UTF-8 bytes in an
-- EUC_JP column, which is then not valid text of the database (22021 on
-- reading it back).  docs/sql-reference.md: "the same document gives the
-- same outcome" in both forms.
-- (2) a client whose client_encoding cannot hold U+2026 gets 22P05 instead
-- of the error's own SQLSTATE when the message is clipped with "…" (the
-- 1e999 case of docs/sql-reference.md, an LSN that is not one).
-- (3) a Debezium integer LSN above 2^63 - 1 is named as too large, as text
-- above 7FFFFFFF/FFFFFFFF is (0b0fd45's comment says both are).
--
SELECT current_database() AS regress_db \gset
CREATE DATABASE cdc_text_eucjp TEMPLATE template0 ENCODING 'EUC_JP' LC_COLLATE 'C' LC_CTYPE 'C';
\c cdc_text_eucjp
SET client_min_messages = warning;
CREATE EXTENSION cdc_apply;
RESET client_min_messages;
CREATE TABLE te (id int PRIMARY KEY, s text);
SELECT target FROM cdc.register_mapping('te');
CREATE FUNCTION te_try(doc text, form text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF form = 'jsonb' THEN RETURN cdc_apply(doc::jsonb);
  ELSIF form = 'text' THEN RETURN cdc_apply(doc);
  ELSE PERFORM cdc_apply_batch('[' || doc || ']'); RETURN 'batch applied';
  END IF;
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;
-- the same documents in each form: a raw 中 and an escaped one
SELECT f.form, n.i, te_try(format('{"op": "c", "after": {"id": %s, "s": "%s"}, "source": {"schema": "public", "table": "te", "lsn": %s}}',
                                  n.i * 10 + f.k, CASE n.i WHEN 1 THEN U&'\4E2D' ELSE '\u4e2d' END, n.i * 10 + f.k), f.form) AS outcome
  FROM (VALUES ('jsonb', 1), ('text', 2), ('batch', 3)) AS f(form, k), (VALUES (1), (2)) AS n(i)
 ORDER BY n.i, f.k;
-- every stored value is the character 中, in valid EUC_JP
SELECT id, s = U&'\4E2D' AS is_the_character, octet_length(s) AS bytes FROM te ORDER BY id;
\c :regress_db
DROP DATABASE cdc_text_eucjp;

-- (2) clipped messages reach a LATIN1 client with their own SQLSTATE
CREATE TABLE te_d (id int PRIMARY KEY, d double precision);
SELECT 1 FROM cdc.register_mapping('te_d', source_table => 'te_d');
SET client_encoding = 'LATIN1';
\set VERBOSITY sqlstate
SELECT cdc_apply('{"op": "c", "after": {"id": 1, "d": 1e999}, "source": {"schema": "public", "table": "te_d", "lsn": 5}}'::text);
SELECT cdc_apply(jsonb_build_object('op', 'c', 'after', jsonb_build_object('id', 1),
                                    'source', jsonb_build_object('schema', 'public', 'table', 'te_d', 'lsn', repeat('x', 300))));
\set VERBOSITY default
RESET client_encoding;

-- (3) an integer LSN above 2^63 - 1 (Debezium's form) is named as too large
SELECT cdc_apply('{"op": "c", "after": {"id": 2}, "source": {"schema": "public", "table": "te_d", "lsn": 9223372036854775808}}'::jsonb);
SELECT cdc_apply('{"op": "c", "after": {"id": 2}, "source": {"schema": "public", "table": "te_d", "lsn": 18446744073709551615}}'::jsonb);
SELECT count(*) AS rows FROM te_d;

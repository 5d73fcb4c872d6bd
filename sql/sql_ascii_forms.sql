--
-- sql_ascii_forms (fresh-user review, h3; failed on integ a94d1b6, fixed
-- in sql_api.cpp, ParseSqlAsciiTextForm): the
-- text form and the jsonb form of one document disagree in a SQL_ASCII
-- database.  docs/sql-reference.md: "the same document gives the same
-- outcome" and "The text form is text of the database's encoding, as the
-- jsonb form's input reads it".  In SQL_ASCII, jsonb takes any byte above
-- 0x7F in a string as it is and refuses a \u escape above U+007F (0A000);
-- the text form parses the bytes as UTF-8 (src/pg/sql_api.cpp,
-- ParseTextForm: "SQL_ASCII has no conversion"), so it refuses the raw
-- bytes (22P02 "ill-formed UTF-8 byte") and stores the escape as UTF-8.
-- Expected (and now so): the text form gives the jsonb form's outcome in
-- both cases.
--
SELECT current_database() AS regress_db \gset
CREATE DATABASE cdc_h3_sqlascii TEMPLATE template0 ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C';
\c cdc_h3_sqlascii
SET client_min_messages = warning;
CREATE EXTENSION cdc_apply;
RESET client_min_messages;
CREATE TABLE sa (id int PRIMARY KEY, s text);
SELECT target FROM cdc.register_mapping('sa');
-- the document with bytes `mid` inside the string s (built from bytes: SQL_ASCII takes any)
CREATE FUNCTION sa_doc(id int, mid bytea) RETURNS text LANGUAGE sql AS $$
  SELECT convert_from(convert_to(format('{"op": "c", "after": {"id": %s, "s": "a', id), 'SQL_ASCII') || mid ||
         convert_to(format('b"}, "source": {"name": "h3", "schema": "public", "table": "sa", "lsn": %s}}', id), 'SQL_ASCII'), 'SQL_ASCII') $$;
CREATE FUNCTION sa_try(doc text, form text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF form = 'jsonb' THEN RETURN cdc_apply(doc::jsonb);
  ELSIF form = 'text' THEN RETURN cdc_apply(doc);
  ELSE PERFORM cdc_apply_batch('[' || doc || ']'); RETURN 'batch applied';
  END IF;
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;
-- raw bytes: Latin-1 é (0xE9) and an encoded surrogate (ED A0 80), as a
-- SQL_ASCII database holds them; and the escape \u00e9
SELECT c.name, f.form, sa_try(sa_doc(c.i * 10 + f.k, c.mid), f.form) AS outcome
  FROM (VALUES (1, 'raw 0xE9', '\xe9'::bytea), (2, 'raw ED A0 80', '\xeda080'::bytea),
               (3, 'escape \u00e9', convert_to('\u00e9', 'SQL_ASCII'))) AS c(i, name, mid),
       (VALUES ('jsonb', 1), ('text', 2), ('batch', 3)) AS f(form, k)
 ORDER BY c.i, f.k;
-- what each stored (bytes)
SELECT id, convert_to(s, 'SQL_ASCII') AS bytes FROM sa ORDER BY id;
\c :regress_db
DROP DATABASE cdc_h3_sqlascii;

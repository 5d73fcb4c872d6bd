--
-- json_error_encoding: the message of a malformed-JSON error (22P02,
-- "invalid JSON at byte N: ... last read: '...'") quotes the bytes read
-- last.  Found by a fresh-user run: it cuts them inside a multibyte
-- character, so the message is not valid UTF-8; a client whose
-- client_encoding is not UTF8 then gets 22021 "invalid byte sequence for
-- encoding "UTF8": 0xc3 0x27" instead of the documented 22P02
-- (docs/sql-reference.md: "22P02 ... malformed JSON (text form; the
-- message gives the byte offset)").  Each error must keep 22P02 and a
-- message that is valid text of the database encoding.
--
CREATE FUNCTION jee_try(doc text, batch boolean) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; valid boolean;
BEGIN
  IF batch THEN
    PERFORM cdc_apply_batch(doc);
  ELSE
    PERFORM cdc_apply(doc);
  END IF;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
  BEGIN
    PERFORM convert_to(msg, 'UTF8');   -- validates the bytes
    valid := true;
  EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character THEN
    valid := false;
  END;
  RETURN st || CASE WHEN valid THEN ', message valid' ELSE ', message NOT valid UTF-8' END;
END $$;

SELECT label, batch, jee_try(doc, batch) AS result
  FROM (VALUES
    ('unquoted two-byte character', E'{"op": \xC3\xA9}'),
    ('unquoted three-byte character', E'{"op": \xE2\x82\xAC}'),
    ('unquoted four-byte character', E'{"op": \xF0\x9F\x98\x80}'),
    ('byte order mark inside the array', E'[\xEF\xBB\xBF{}]'),
    ('byte order mark after the value', E'{"op": "c"}\xEF\xBB\xBF'),
    ('accented string then a stray letter', E'{"op": "\xC3\xA9\xC3\xA9\xC3\xA9"x}')
  ) AS d(label, doc),
  unnest(ARRAY[false, true]) AS b(batch)
 ORDER BY label, batch;

-- The same document gives the same outcome in both forms (README, "Status":
-- "the envelope rules are the same for jsonb and text events").  jsonb's
-- input refuses a leading byte order mark (22P02); the text form applied it.
CREATE TABLE jee_t (id int PRIMARY KEY);
SELECT 1 FROM cdc.register_mapping('jee_t', source_table => 'jee_t');
SELECT jee_try(E'\xEF\xBB\xBF{"op": "c", "after": {"id": 1}, "source": {"schema": "public", "table": "jee_t", "lsn": 1}}', false) AS leading_bom_text;
SELECT jee_try(E'\xEF\xBB\xBF[{"op": "c", "after": {"id": 2}, "source": {"schema": "public", "table": "jee_t", "lsn": 2}}]', true) AS leading_bom_text_batch;
SELECT count(*) AS rows FROM jee_t;

--
-- context_clip_encoding: the delivery key clipped to 200 bytes in an error
-- CONTEXT (engine.cpp, SetContext) in a database whose encoding is not
-- UTF-8.  The clipped context must be valid text of the database encoding
-- and the error keep its own SQLSTATE: a UTF-8 ellipsis (U+2026) appended to EUC_JP text
-- (or a cut inside an EUC_JP character) turns every error of such a key
-- into 22021 "invalid byte sequence for encoding" on its way to the client.
--
SELECT current_database() AS regress_db \gset
CREATE DATABASE cdc_clip_eucjp TEMPLATE template0 ENCODING 'EUC_JP' LC_COLLATE 'C' LC_CTYPE 'C';
\c cdc_clip_eucjp
SET client_min_messages = warning;
CREATE EXTENSION cdc_apply;
RESET client_min_messages;
CREATE TABLE kt (id text PRIMARY KEY, v int);
SELECT target FROM cdc.register_mapping('kt');
-- keys of 2,600 two-byte characters, with 0, 1 and 2 ASCII bytes before them
DO $$
DECLARE st text; ctx text; pre text;
BEGIN
  FOREACH pre IN ARRAY ARRAY['', 'a', 'ab'] LOOP
    BEGIN
      PERFORM cdc_apply(jsonb_build_object('op', 'c', 'after', jsonb_build_object('id', pre || repeat(U&'\65E5', 2600), 'v', 'x'),
                                           'source', jsonb_build_object('name', 'srv', 'schema', 'public', 'table', 'kt', 'lsn', 1, 'txId', 1)));
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, ctx = PG_EXCEPTION_CONTEXT;
      RAISE NOTICE 'prefix "%": sqlstate %', pre, st;
      BEGIN
        PERFORM convert_to(ctx, 'UTF8');
        RAISE NOTICE 'prefix "%": context valid EUC_JP, its first line fewer than 300 bytes: %', pre, octet_length(split_part(ctx, E'\n', 1)) < 300;
      EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'prefix "%": context not valid EUC_JP: %', pre, SQLERRM;
      END;
    END;
  END LOOP;
END $$;
-- the error as a UTF-8 client sees it
SET client_encoding = 'UTF8';
\set VERBOSITY sqlstate
SELECT cdc_apply(jsonb_build_object('op', 'c', 'after', jsonb_build_object('id', repeat(U&'\65E5', 2600), 'v', 'x'),
                                    'source', jsonb_build_object('name', 'srv', 'schema', 'public', 'table', 'kt', 'lsn', 1, 'txId', 1)));
\set VERBOSITY default
RESET client_encoding;
\c :regress_db
DROP DATABASE cdc_clip_eucjp;

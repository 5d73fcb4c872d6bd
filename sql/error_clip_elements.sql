--
-- error_clip_elements (fresh-user run h4): an error message quotes a value
-- cut to its first 40 bytes and "..." (docs/sql-reference.md), but only the
-- whole value was cut: the input function of an array, a range or a
-- composite quotes the element or bound it refuses, a part of the value,
-- and that part was quoted whole, so a 1 MB element gave a 1 MB message
-- (to the client, the server log and a subscription's last_error).  Every
-- quoted run of the value longer than the limit is now cut.
-- Objects: ec_*.
--
CREATE TYPE ec_pair AS (n int, t text);
CREATE TABLE ec (id int PRIMARY KEY, arr int[], rng int4range, pair ec_pair, n int);
\set VERBOSITY default
-- an array element, a range bound and a composite field of 200 bytes
SELECT cdc_apply(dbz('c', 'ec', jsonb_build_object('id', 1, 'arr', jsonb_build_array(1, repeat('x', 200))), '0/10', 1), 'ec');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(dbz('c', 'ec', jsonb_build_object('id', 1, 'rng', '[1,' || repeat('7', 200) || ')'), '0/10', 1), 'ec');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(dbz('c', 'ec', jsonb_build_object('id', 1, 'pair', '(' || repeat('y', 200) || ',a)'), '0/10', 1), 'ec');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a multibyte element is cut at a character boundary
SELECT cdc_apply(dbz('c', 'ec', jsonb_build_object('id', 1, 'arr', jsonb_build_array(repeat('é', 100))), '0/10', 1), 'ec');
-- the whole value is cut as before, once (a scalar, and the whole array literal)
SELECT cdc_apply(dbz('c', 'ec', jsonb_build_object('id', 1, 'n', repeat('z', 200)), '0/10', 1), 'ec');
SELECT cdc_apply(dbz('c', 'ec', jsonb_build_object('id', 1, 'arr', '{' || repeat('1,', 100) || '}'), '0/10', 1), 'ec');
\set VERBOSITY terse
-- a 1 MB element, through cdc_apply() and cdc_apply_batch(): the message stays short
CREATE FUNCTION ec_message_bytes(batch boolean) RETURNS int LANGUAGE plpgsql AS $$
DECLARE msg text; ev jsonb := dbz('c', 'ec', jsonb_build_object('id', 2, 'arr', jsonb_build_array(repeat('w', 1000000))), '0/20', 2);
BEGIN
  IF batch THEN PERFORM * FROM cdc_apply_batch(jsonb_build_array(ev), 'ec'); ELSE PERFORM cdc_apply(ev, 'ec'); END IF;
  RETURN NULL;
EXCEPTION WHEN invalid_text_representation THEN
  GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
  RETURN octet_length(msg);
END $$;
SELECT ec_message_bytes(false) AS single_message_bytes, ec_message_bytes(true) AS batch_message_bytes;
SELECT (SELECT count(*) FROM ec) AS rows, ledger_count('ec') AS ledger_rows;
-- a corrected event applies
SELECT cdc_apply(dbz('c', 'ec', jsonb_build_object('id', 1, 'arr', jsonb_build_array(1, 2)), '0/10', 1), 'ec');
SELECT id, arr FROM ec;
DROP TABLE ec;
DROP TYPE ec_pair;
DROP FUNCTION ec_message_bytes(boolean);

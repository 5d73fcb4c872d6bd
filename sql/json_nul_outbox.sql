--
-- json_nul_outbox (fresh-user review, h3; failed on integ a94d1b6, fixed
-- in image.cpp, ConvertCell: a json value of an outbox target is read as
-- jsonb there too, so the error names the field and the column):
-- docs/debezium-types.md section 5: "A JSON object or array sent to a
-- json/jsonb column keeps the \u0000 escape.  json accepts it; jsonb
-- rejects it with its own 22P05."  That holds for a target without an
-- outbox.  With outbox => true (table or message) the change is refused
-- with jsonb's 22P05 "unsupported Unicode escape sequence" raised while the
-- outbox payload is built (to_jsonb of the row): the message names no field
-- and no column (its CONTEXT is the engine's INSERT ... RETURNING
-- to_jsonb(t.*)), unlike every other value a column cannot take
-- ('field "after.x" (column "x" of type ...): ...').  Expected here: the
-- error names the field and the column (applying the change as without an
-- outbox would do too, with this expected file changed); nothing
-- half-applied either way.  The same holds for outbox_via => 'message' and
-- for handler mode (the row is read back as jsonb for the handler).
--
CREATE TABLE h3j_plain (id int PRIMARY KEY, js json);
CREATE TABLE h3j_ob (id int PRIMARY KEY, js json);
SELECT target FROM cdc.register_mapping('h3j_ob', outbox => true);
CREATE FUNCTION h3j_ev(tbl text, id int, lsn bigint) RETURNS text LANGUAGE sql AS $$
  SELECT format('{"op": "c", "after": {"id": %s, "js": {"k": "a\u0000b"}}, "source": {"name": "h3", "schema": "public", "table": "%s", "lsn": %s}}',
                id, tbl, lsn) $$;
-- the outcome, or the error's SQLSTATE and whether its message or detail
-- names the field and the column
CREATE FUNCTION h3j_try(doc text, batch boolean) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text;
BEGIN
  IF batch THEN RETURN (SELECT 'batch applied ' || applied FROM cdc_apply_batch('[' || doc || ']')); END IF;
  RETURN cdc_apply(doc);
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
  RETURN format('ERROR %s, names field "after.js": %s, names column "js": %s', st,
                position('"after.js"' IN msg || ' ' || coalesce(det, '')) > 0, position('column "js"' IN msg || ' ' || coalesce(det, '')) > 0);
END $$;
-- without an outbox: applied, the json value keeps the escape (documented)
SELECT cdc_apply(h3j_ev('h3j_plain', 1, 100), 'h3j_plain');
SELECT * FROM h3j_plain;
-- with an outbox: one call and a batch
SELECT h3j_try(h3j_ev('h3j_ob', 1, 100), false) AS single;
SELECT h3j_try(h3j_ev('h3j_ob', 2, 200), true) AS batch;
-- handler mode reads the written row back as jsonb for its handler (a
-- handler of row type or of jsonb): the same
CREATE TABLE h3j_h (id int PRIMARY KEY, js json);
CREATE FUNCTION h3j_handler(op text, old h3j_h, new h3j_h, meta jsonb) RETURNS void LANGUAGE sql AS $$ SELECT $$;
SELECT target, mode FROM cdc.register_mapping('h3j_h', mode => 'handler', handler => 'h3j_handler(text, h3j_h, h3j_h, jsonb)');
SELECT h3j_try(h3j_ev('h3j_h', 1, 100), false) AS handler_single;
SELECT h3j_try(h3j_ev('h3j_h', 2, 200), true) AS handler_batch;
SELECT count(*) AS handler_rows FROM h3j_h;
-- nothing half-applied
SELECT count(*) AS rows, (SELECT count(*) FROM cdc.outbox WHERE target = 'h3j_ob'::regclass) AS outbox,
       (SELECT count(*) FROM cdc.entities WHERE target = 'h3j_ob'::regclass) AS entities FROM h3j_ob;
-- the handler with its table (a mapped handler cannot be dropped alone, sql/handler_drop_guard.sql)
DROP TABLE h3j_plain, h3j_ob;
DROP TABLE h3j_h CASCADE;
DROP FUNCTION h3j_ev(text, int, bigint);
DROP FUNCTION h3j_try(text, boolean);

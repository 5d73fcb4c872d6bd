--
-- integer_field_range (fresh-user review h3): an integer field of the
-- envelope (source.txId, source.ts_ms, transaction.total_order) holding an
-- integer beyond 64 bits was refused as "must be an integer, got number
-- 9223372036854775808", which reads as if the value were a fraction or not
-- a number.  It is refused, as before with 22023 naming the field and
-- nothing applied, saying the integer is out of range; a fraction and a
-- non-number still say "must be an integer".
-- Objects: ifr*.
--
CREATE TABLE ifr (id int PRIMARY KEY, v text);
\set VERBOSITY terse
-- beyond 64 bits: a number, a number in exponent form, a string of digits, a negative one
SELECT cdc_apply('{"op": "c", "after": {"id": 1}, "source": {"name": "s", "schema": "public", "table": "ifr", "lsn": 16, "txId": 9223372036854775808}}'::jsonb, 'ifr');
SELECT cdc_apply('{"op": "c", "after": {"id": 1}, "source": {"name": "s", "schema": "public", "table": "ifr", "lsn": 16, "txId": 1e300}}'::text, 'ifr');
SELECT cdc_apply('{"op": "c", "after": {"id": 1}, "source": {"name": "s", "schema": "public", "table": "ifr", "lsn": 16, "txId": "99999999999999999999"}}'::jsonb, 'ifr');
SELECT cdc_apply('{"op": "c", "after": {"id": 1}, "source": {"name": "s", "schema": "public", "table": "ifr", "lsn": 16, "ts_ms": -9223372036854775809}}'::jsonb, 'ifr');
SELECT * FROM cdc_apply_batch('[{"op": "c", "after": {"id": 1}, "source": {"name": "s", "schema": "public", "table": "ifr", "lsn": 16},
                                 "transaction": {"id": "1", "total_order": 18446744073709551616}}]'::text, 'ifr');
-- not integers: as before
SELECT cdc_apply('{"op": "c", "after": {"id": 1}, "source": {"name": "s", "schema": "public", "table": "ifr", "lsn": 16, "txId": 1.5}}'::jsonb, 'ifr');
SELECT cdc_apply('{"op": "c", "after": {"id": 1}, "source": {"name": "s", "schema": "public", "table": "ifr", "lsn": 16, "txId": "12a"}}'::jsonb, 'ifr');
SELECT cdc_apply('{"op": "c", "after": {"id": 1}, "source": {"name": "s", "schema": "public", "table": "ifr", "lsn": 16, "txId": 1e-300}}'::jsonb, 'ifr');
SELECT count(*) AS rows FROM ifr;
-- at the ends of the range: applied
SELECT cdc_apply('{"op": "c", "after": {"id": 1}, "source": {"name": "s", "schema": "public", "table": "ifr", "lsn": 16, "txId": 9223372036854775807, "ts_ms": -9223372036854775808}}'::jsonb, 'ifr');
SELECT * FROM ifr;
DROP TABLE ifr;

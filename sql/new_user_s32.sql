--
-- new_user_s32 (fresh-user review h4, round 32): the delivery key derived
-- from an event's source identity (no delivery_key given) joined
-- source.name, source.db, source.schema and source.table with ':' and '.'
-- without quoting, so two different source identities could derive one
-- key: name "a:b" with db "c" and name "a" with db "b:c", or schema "x.y"
-- with table "z" and schema "x" with table "y.z" (PostgreSQL allows both
-- as quoted identifiers).  The second event found the first one's claim
-- and was a `duplicate`, its content neither applied nor recorded as a
-- conflict, while the same event under a delivery key of its own was a
-- conflict.  Now a name holding its separator (':', for the schema also
-- '.') or a double quote is written as a JSON string; names without them
-- derive the same key as before (an existing ledger keeps matching).
-- Objects: nus2_*.
--
CREATE TABLE nus2 (id int PRIMARY KEY, v text);
CREATE FUNCTION nus2_state() RETURNS TABLE (rows bigint, ledger bigint, entities bigint, conflicts bigint)
LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM nus2), (SELECT count(*) FROM cdc.ledger WHERE target = 'nus2'::regclass),
         (SELECT count(*) FROM cdc.entity_state WHERE target = 'nus2'::regclass),
         (SELECT count(*) FROM cdc.conflicts WHERE target = 'nus2'::regclass) $$;
-- source.name "a:b", db "c" against name "a", db "b:c": two sources, two deliveries
SELECT cdc_apply('{"op":"c","after":{"id":1,"v":"first"},"source":{"name":"a:b","db":"c","schema":"public","table":"nus2","lsn":100,"txId":1}}', 'nus2');
SELECT cdc_apply('{"op":"c","after":{"id":1,"v":"second"},"source":{"name":"a","db":"b:c","schema":"public","table":"nus2","lsn":100,"txId":1}}', 'nus2');
-- the same event under a key of its own: the outcome the derived key must give too
SELECT cdc_apply('{"op":"c","after":{"id":1,"v":"second"},"source":{"name":"a","db":"b:c","schema":"public","table":"nus2","lsn":100,"txId":1}}', 'nus2', 'own-key');
-- schema "x.y", table "z" against schema "x", table "y.z"
SELECT cdc_apply('{"op":"c","after":{"id":2,"v":"first"},"source":{"name":"n","db":"d","schema":"x.y","table":"z","lsn":100,"txId":1}}', 'nus2');
SELECT cdc_apply('{"op":"c","after":{"id":2,"v":"second"},"source":{"name":"n","db":"d","schema":"x","table":"y.z","lsn":100,"txId":1}}', 'nus2');
-- a name holding a double quote against its quoted spelling
SELECT cdc_apply('{"op":"c","after":{"id":3,"v":"first"},"source":{"name":"n","db":"d","schema":"\"x.y\"","table":"z","lsn":100,"txId":1}}', 'nus2');
SELECT * FROM nus2 ORDER BY id;
SELECT * FROM nus2_state();
-- each redelivery is a duplicate, in a batch too
SELECT cdc_apply('{"op":"c","after":{"id":1,"v":"second"},"source":{"name":"a","db":"b:c","schema":"public","table":"nus2","lsn":100,"txId":1}}', 'nus2');
SELECT outcomes FROM cdc_apply_batch('[
  {"op":"c","after":{"id":1,"v":"first"},"source":{"name":"a:b","db":"c","schema":"public","table":"nus2","lsn":100,"txId":1}},
  {"op":"c","after":{"id":2,"v":"second"},"source":{"name":"n","db":"d","schema":"x","table":"y.z","lsn":100,"txId":1}},
  {"op":"c","after":{"id":2,"v":"first"},"source":{"name":"n","db":"d","schema":"x.y","table":"z","lsn":100,"txId":1}}]'::jsonb,
  'nus2', with_outcomes => true);
SELECT * FROM nus2_state();
-- the derived keys: names without a separator as before, the others quoted
SELECT cdc.delivery_processed('nus2', 'dbz:"a:b":c:public.nus2:c:100:1::{"id": "1"}') AS name_quoted,
       cdc.delivery_processed('nus2', 'dbz:a:"b:c":public.nus2:c:100:1::{"id": "1"}') AS db_quoted,
       cdc.delivery_processed('nus2', 'dbz:n:d:"x.y".z:c:100:1::{"id": "2"}') AS schema_quoted,
       cdc.delivery_processed('nus2', 'dbz:n:d:x.y.z:c:100:1::{"id": "2"}') AS table_with_dot,
       cdc.delivery_processed('nus2', 'dbz:n:d:"\"x.y\"".z:c:100:1::{"id": "3"}') AS quote_escaped;
-- a source identity without separators derives the key it always did
CREATE TABLE nus2_plain (id int PRIMARY KEY);
SELECT cdc_apply('{"op":"c","after":{"id":1},"source":{"name":"srv.prod","db":"shop","schema":"public","table":"nus2_plain","lsn":100,"txId":7}}', 'nus2_plain');
SELECT cdc.delivery_processed('nus2_plain', 'dbz:srv.prod:shop:public.nus2_plain:c:100:7::{"id": "1"}') AS unchanged_key;

--
-- key_text_char_array: keys whose equal values print alike must stay
-- accepted, without a registration WARNING and without 0A000, by the
-- ambiguity check of entity-ordered targets (AmbiguousKeyColumnPg,
-- cdc._key_ambiguity).  char(n) pads every value to n, also as an array
-- element ('{a}' and '{"a  "}' are stored, and print, as '{"a  "}'), so
-- a char(n)[] key prints one text per value and was accepted before; it
-- was refused (found in review: the array's element was checked without
-- the column's typmod, as an unpadded bpchar).  The source created {a} at 100, deleted {"a  "} (equal) at
-- 200; delivered 100, 200 then a late create at 150: the row stays deleted.
--
CREATE FUNCTION ktc_ev(tbl text, op text, k jsonb, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'ktc', 'schema', 'public', 'table', tbl, 'lsn', lsn, 'txId', lsn),
    'before', CASE WHEN op = 'd' THEN jsonb_build_object('id', k) END,
    'after', CASE WHEN op <> 'd' THEN jsonb_build_object('id', k, 'v', v) END) $$;
SELECT '{a}'::char(3)[] = '{"a  "}'::char(3)[] AS array_equal, '{a}'::char(3)[]::text AS array_text;
-- char(3)[] primary key
CREATE TABLE ktc_arr (id char(3)[] PRIMARY KEY, v text);
SELECT cdc._key_ambiguity('ktc_arr', NULL) AS arr_ambiguity;
SELECT target FROM cdc.register_mapping('ktc_arr');
SELECT cdc_apply(ktc_ev('ktc_arr', 'c', '["a"]', 'one', 100)) AS arr_create,
       cdc_apply(ktc_ev('ktc_arr', 'd', '["a  "]', NULL, 200)) AS arr_delete,
       cdc_apply(ktc_ev('ktc_arr', 'c', '["a "]', 'late', 150)) AS arr_late_create;
SELECT count(*) AS arr_rows, (SELECT count(*) FROM cdc.entities WHERE target = 'ktc_arr'::regclass) AS arr_records FROM ktc_arr;
SELECT cdc.unregister_mapping('ktc_arr');
DROP TABLE ktc_arr;
DROP FUNCTION ktc_ev(text, text, jsonb, text, bigint);

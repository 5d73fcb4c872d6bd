--
-- content_hash_stable: the content hash of an applied image (the entity
-- record's chash, which tells an equal-version redelivery from a
-- conflict) is stored, so its value must not change with the way it is
-- computed: a redelivery after an upgrade would otherwise be a conflict.
-- The values below pin the hash's definition (a CRC-32C over the column
-- names and value texts, each after its length: ContentHash in
-- src/pg/apply/image.cpp, since 2026-12-05; it was 32 bits of an md5
-- before, and 0.2.0 had not been released): images from empty to
-- 150,000 bytes (around 1 KiB, where the md5 used to switch from a
-- buffer to a streamed digest), and non-ASCII text, quotes and numbers
-- that print through their output function.
--
CREATE TABLE chs (id int PRIMARY KEY, a text, b text, c numeric);
SELECT target FROM cdc.register_mapping('chs');
CREATE FUNCTION chs_ev(id int, a text, b text, c numeric) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', 'c', 'source', jsonb_build_object('name', 'chs', 'schema', 'public', 'table', 'chs', 'lsn', 100 + id, 'txId', 100 + id),
    'after', jsonb_build_object('id', id, 'a', a, 'b', b, 'c', c)) $$;
SELECT count(*) FILTER (WHERE outcome = 'applied') AS applied
  FROM (SELECT cdc_apply(chs_ev(n, repeat('x"y', n), repeat('é', n % 50), n * 1.5)) AS outcome
          FROM unnest(ARRAY[0, 1, 10, 300, 320, 330, 335, 340, 341, 342, 345, 350, 400, 1000, 5000, 50000]) n) s;
SELECT e.key, octet_length(c.a) + octet_length(c.b) AS value_bytes, e.chash
  FROM cdc.entity_state e JOIN chs c ON c.id::text = e.key
 WHERE e.target = 'chs'::regclass ORDER BY c.id;
-- a redelivery at the same version with the same content is a duplicate, not a conflict
SELECT cdc_apply(chs_ev(342, repeat('x"y', 342), repeat('é', 342 % 50), 342 * 1.5), NULL, 'again-342') AS redelivered;

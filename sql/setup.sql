--
-- setup: the extension and the test helpers every later suite uses.
--
CREATE EXTENSION cdc_apply;

-- dbz(): builds a Debezium PostgreSQL-connector envelope (bare payload) in
-- the notation of shared/scenarios.md.  LSNs are written as PostgreSQL text
-- ('0/1000') and emitted as Debezium's decimal integers.
CREATE FUNCTION dbz(op text, tbl text, after jsonb DEFAULT NULL, lsn text DEFAULT NULL,
                    tx bigint DEFAULT NULL, before jsonb DEFAULT NULL, clsn text DEFAULT NULL,
                    snap text DEFAULT NULL, src text DEFAULT 'srv', total_order int DEFAULT NULL,
                    schema_name text DEFAULT 'public')
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_strip_nulls(jsonb_build_object(
           'source', jsonb_build_object(
              'connector', 'postgresql', 'name', src, 'db', 'src',
              'schema', schema_name, 'table', tbl,
              'lsn', (lsn::pg_lsn - '0/0'::pg_lsn)::bigint,
              'commit_lsn', (clsn::pg_lsn - '0/0'::pg_lsn)::bigint,
              'txId', tx,
              'snapshot', coalesce(snap, CASE WHEN op = 'r' THEN 'true' ELSE 'false' END)),
           'op', op,
           'transaction', CASE WHEN total_order IS NOT NULL
                               THEN jsonb_build_object('id', tx::text, 'total_order', total_order) END))
         || jsonb_build_object('before', before, 'after', after)
$$;

-- A Kafka tombstone is a record with a null value.
CREATE FUNCTION kafka_tombstone() RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$ SELECT 'null'::jsonb $$;

-- Outbox rows, ledger rows and tombstones of one target, for assertions.
CREATE FUNCTION outbox_count(t regclass) RETURNS bigint LANGUAGE sql AS
  $$ SELECT count(*) FROM cdc.outbox WHERE target = t $$;
CREATE FUNCTION ledger_count(t regclass) RETURNS bigint LANGUAGE sql AS
  $$ SELECT count(*) FROM cdc.ledger WHERE target = t $$;
-- The ledger keeps a digest per (target, delivery key), not the key's text
-- (cdc.delivery_digest): a test lists the delivery keys it expects and sees
-- that each was processed, and ledger_rows (all entries of the target) shows
-- that there are no others.
CREATE FUNCTION ledger_has(t regclass, VARIADIC dks text[])
RETURNS TABLE (delivery_key text, processed boolean, ledger_rows bigint) LANGUAGE sql AS
  $$ SELECT dk, cdc.delivery_processed(t, dk), ledger_count(t) FROM unnest(dks) dk ORDER BY dk $$;
CREATE FUNCTION tombstones_of(t regclass) RETURNS TABLE (entity_key jsonb, version bigint[]) LANGUAGE sql AS
  $$ SELECT entity_key, version FROM cdc.tombstones WHERE target = t ORDER BY entity_key::text $$;
-- the cdc_apply lines of an error's context (PG_EXCEPTION_CONTEXT), innermost first
CREATE FUNCTION cdc_context_lines(ctx text) RETURNS text[] LANGUAGE sql AS
  $$ SELECT ARRAY(SELECT l FROM regexp_split_to_table(ctx, E'\n') WITH ORDINALITY AS t(l, n)
                  WHERE l LIKE 'cdc\_apply%' ORDER BY n) $$;

SELECT dbz('c', 'items', '{"id": 7, "name": "bolt"}', '0/3000', 600);
SELECT dbz('d', 'items', NULL, '0/3200', 602, before => '{"id": 7}', clsn => '0/3210', total_order => 1);

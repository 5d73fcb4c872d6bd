--
-- key_index_collation: cdc.register_mapping refuses a key column with a
-- nondeterministic collation (0A000), because entity records name an
-- entity by its key's text while such a collation makes 'a' and 'A' one
-- row.  The same holds when the column's own collation is deterministic
-- but the unique index that decides conflicts (key_columns) compares the
-- key under a nondeterministic collation, or the key's type compares its
-- text under one (a composite type's attribute, a range type's
-- collation).  Those must be refused too: accepted, an older create of
-- 'A' overwrote the newer row 'a' through the index and its delete then
-- removed the row the source still has.  cdc.register_mapping warns about
-- them (a stream-ordered target, which keeps no entity records, may have
-- such a key) and the engine refuses every change of an entity-ordered
-- one with 0A000 naming the column and the table, nothing applied.
--
CREATE COLLATION kic_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE FUNCTION kic_try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE stmt;
  RETURN 'accepted';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || CASE WHEN SQLERRM LIKE '%"id"%' AND SQLERRM LIKE '%kic_%' THEN ' (names column and table)' ELSE ' ' || SQLERRM END;
END $$;
CREATE FUNCTION kic_ev(tbl text, op text, n int, id text, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'kic', 'schema', 'public', 'table', tbl, 'lsn', lsn, 'txId', lsn),
    'before', CASE WHEN op = 'd' THEN jsonb_build_object('n', n, 'id', id) END,
    'after', CASE WHEN op <> 'd' THEN jsonb_build_object('n', n, 'id', id, 'v', v) END) $$;
-- A deterministic column whose unique index (key_columns) is case-insensitive.
CREATE TABLE kic_idx (n int PRIMARY KEY, id text NOT NULL, v text);
CREATE UNIQUE INDEX kic_idx_id ON kic_idx (id COLLATE kic_ci);
SELECT kic_try($$SELECT cdc.register_mapping('kic_idx', key_columns => '{id}')$$) AS register_index_collation;
SELECT kic_try(format('SELECT cdc_apply(%L::jsonb)', kic_ev('kic_idx', 'c', 1, 'a', 'x', 100))) AS apply_index_collation;
-- A composite key type with a case-insensitive attribute.
CREATE TYPE kic_comp AS (s text COLLATE kic_ci);
CREATE TABLE kic_composite (id kic_comp PRIMARY KEY, v text);
SELECT kic_try($$SELECT cdc.register_mapping('kic_composite')$$) AS register_composite;
SELECT kic_try(format('SELECT cdc_apply_batch(jsonb_build_array(%L::jsonb))', kic_ev('kic_composite', 'c', 1, '(a)', 'x', 100))) AS apply_composite;
-- A range key type over a case-insensitive collation.
CREATE TYPE kic_range AS RANGE (subtype = text, collation = kic_ci);
CREATE TABLE kic_ranges (id kic_range PRIMARY KEY, v text);
SELECT kic_try($$SELECT cdc.register_mapping('kic_ranges')$$) AS register_range;
SELECT kic_try(format('SELECT cdc_apply(%L::jsonb)', kic_ev('kic_ranges', 'c', 1, '[a,b)', 'x', 100))) AS apply_range;
SELECT (SELECT count(*) FROM kic_idx) + (SELECT count(*) FROM kic_composite) + (SELECT count(*) FROM kic_ranges) AS rows_applied;
-- Registered on a deterministic unique index that is then replaced by a
-- case-insensitive one: every change is refused and nothing is applied.
-- The source (with the same index) created 'A' at 100, deleted it at 200
-- and created 'a' at 300; delivered 300, 100, 200 it must end with 'a'.
CREATE TABLE kic_swap (n int PRIMARY KEY, id text NOT NULL, v text);
CREATE UNIQUE INDEX kic_swap_id ON kic_swap (id);
SELECT target FROM cdc.register_mapping('kic_swap', key_columns => '{id}');
CREATE UNIQUE INDEX kic_swap_id_ci ON kic_swap (id COLLATE kic_ci);
DROP INDEX kic_swap_id;
SELECT kic_try(format('SELECT cdc_apply(%L::jsonb)', kic_ev('kic_swap', 'c', 2, 'a', 'new', 300))) AS create_a_300;
SELECT kic_try(format('SELECT cdc_apply(%L::jsonb)', kic_ev('kic_swap', 'c', 1, 'A', 'old', 100))) AS create_A_100;
SELECT kic_try(format('SELECT cdc_apply_batch(jsonb_build_array(%L::jsonb))', kic_ev('kic_swap', 'd', 1, 'A', NULL, 200))) AS delete_A_200;
SELECT * FROM kic_swap;
SELECT count(*) AS entity_records FROM cdc.entities WHERE target = 'kic_swap'::regclass;
SELECT cdc.unregister_mapping('kic_swap');
SELECT cdc.unregister_mapping(t) FROM unnest(ARRAY['kic_idx', 'kic_composite', 'kic_ranges']::regclass[]) t;
DROP TABLE kic_idx, kic_composite, kic_ranges, kic_swap;
DROP TYPE kic_comp, kic_range;
DROP FUNCTION kic_try(text), kic_ev(text, text, int, text, text, bigint);
DROP COLLATION kic_ci;

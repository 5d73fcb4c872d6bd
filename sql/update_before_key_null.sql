--
-- update_before_key_null: an update ('u') whose before-image names a key
-- column as JSON null or as Debezium's unavailable-value placeholder.
-- Such a before-image cannot say whether the key changed (SPEC §4.4: a key
-- change deletes the old key with a tombstone and inserts the new one; §6:
-- a missing key column is a clear ERROR naming the field).  Taking it for
-- "no key change" upserts the new key and leaves the row under the old key
-- behind for good, silently; with a composite key the outcome depended on
-- which column came first.  Refused like the before-image of a delete:
-- 22004 (null) or 22023 (placeholder), naming the field, before anything is
-- claimed, so the corrected event with the same delivery key applies.
-- Checked through cdc_apply() and cdc_apply_batch(), on a one-column and a
-- two-column key; asserted on rows, cdc.entities, cdc.tombstones, the ledger
-- and cdc.outbox.
--

-- The outcome of one event, or the error's SQLSTATE and message.
CREATE FUNCTION ubk_try(ev jsonb, dk text DEFAULT NULL) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  RETURN cdc_apply(ev, NULL, dk);
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
CREATE FUNCTION ubk_try_batch(evs jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r cdc.batch_result;
BEGIN
  r := cdc_apply_batch(evs, with_outcomes => true);
  RETURN array_to_string(r.outcomes, ',');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- Everything the engine keeps about a target, in one row per kind.
CREATE FUNCTION ubk_state(t regclass) RETURNS TABLE (kind text, items text) LANGUAGE sql AS $$
  SELECT 'entities', string_agg(entity_key::text || CASE WHEN is_tombstone THEN ' (tombstone)' ELSE '' END, '; '
                                ORDER BY entity_key::text)
    FROM cdc.entities WHERE target = t
  UNION ALL
  SELECT 'outbox', string_agg(op || ' ' || entity_key::text, '; ' ORDER BY id) FROM cdc.outbox WHERE target = t
  UNION ALL
  SELECT 'ledger', ledger_count(t)::text
$$;

-- ===========================================================================
-- a. One-column key, cdc_apply()
-- ===========================================================================
CREATE TABLE ubk (id int PRIMARY KEY, v text);
SELECT target, outbox FROM cdc.register_mapping('ubk', outbox => true);
SELECT ubk_try(dbz('c', 'ubk', '{"id": 1, "v": "a"}', '0/1000', 10)) AS create_1;

-- the key moves from 1 to 2, but the before-image gives the old key as null
SELECT ubk_try(dbz('u', 'ubk', '{"id": 2, "v": "b"}', '0/1100', 11, before => '{"id": null, "v": "a"}')) AS before_id_null;
-- ... or as the unavailable-value placeholder
SELECT ubk_try(dbz('u', 'ubk', '{"id": 2, "v": "b"}', '0/1100', 11,
                   before => '{"id": "__debezium_unavailable_value", "v": "a"}')) AS before_id_placeholder;
-- the same key in the after-image does not make the before-image say more
SELECT ubk_try(dbz('u', 'ubk', '{"id": 1, "v": "b"}', '0/1100', 11, before => '{"id": null}')) AS before_id_null_same_after;
-- nothing of them was kept: id 1 is still the only row, no claim, one outbox row
SELECT * FROM ubk ORDER BY id;
SELECT * FROM ubk_state('ubk');

-- The corrected event, same delivery (source position): the key change
-- applies, id 1 is deleted with a tombstone and its outbox row.
SELECT ubk_try(dbz('u', 'ubk', '{"id": 2, "v": "b"}', '0/1100', 11, before => '{"id": 1, "v": "a"}')) AS corrected;
SELECT * FROM ubk ORDER BY id;
SELECT * FROM ubk_state('ubk');
SELECT * FROM tombstones_of('ubk');

-- A null in a non-key column of the before-image is an ordinary value
-- (REPLICA IDENTITY FULL): no key change, applied.
SELECT ubk_try(dbz('u', 'ubk', '{"id": 2, "v": "c"}', '0/1200', 12, before => '{"id": 2, "v": null}')) AS before_value_null;
SELECT * FROM ubk ORDER BY id;

-- ===========================================================================
-- b. Two-column key, cdc_apply(): the outcome must not depend on which key
--    column of the before-image is the unusable one.
-- ===========================================================================
CREATE TABLE ubk2 (a int, b int, v text, PRIMARY KEY (a, b));
SELECT target, outbox FROM cdc.register_mapping('ubk2', outbox => true);
SELECT ubk_try(dbz('c', 'ubk2', '{"a": 1, "b": 1, "v": "x"}', '0/2000', 20)) AS create_1_1;
-- (1,1) -> (2,2); the first key column null
SELECT ubk_try(dbz('u', 'ubk2', '{"a": 2, "b": 2, "v": "y"}', '0/2100', 21, before => '{"a": null, "b": 1}')) AS before_a_null;
-- the second key column null
SELECT ubk_try(dbz('u', 'ubk2', '{"a": 2, "b": 2, "v": "y"}', '0/2100', 21, before => '{"a": 1, "b": null}')) AS before_b_null;
-- (1,1) -> (1,2): the column that is the same comes first, the null one after
SELECT ubk_try(dbz('u', 'ubk2', '{"a": 1, "b": 2, "v": "y"}', '0/2100', 21, before => '{"a": 1, "b": null}')) AS before_b_null_a_same;
-- the placeholder in the second column
SELECT ubk_try(dbz('u', 'ubk2', '{"a": 1, "b": 2, "v": "y"}', '0/2100', 21,
                   before => '{"a": 1, "b": "__debezium_unavailable_value"}')) AS before_b_placeholder;
-- a before-image without the first key column whose second one differs:
-- the key changed, and the old key is not known
SELECT ubk_try(dbz('u', 'ubk2', '{"a": 2, "b": 2, "v": "y"}', '0/2100', 21, before => '{"b": 1}')) AS before_a_missing_b_differs;
SELECT * FROM ubk2 ORDER BY a, b;
SELECT * FROM ubk_state('ubk2');
-- corrected
SELECT ubk_try(dbz('u', 'ubk2', '{"a": 2, "b": 2, "v": "y"}', '0/2100', 21, before => '{"a": 1, "b": 1}')) AS corrected;
SELECT * FROM ubk2 ORDER BY a, b;
SELECT * FROM ubk_state('ubk2');

-- ===========================================================================
-- c. cdc_apply_batch(): the same events in batches (the set-based path,
--    segment.cpp IsKeyChange); the whole batch rolls back.
-- ===========================================================================
CREATE TABLE ubk_b (id int PRIMARY KEY, v text);
SELECT target, outbox FROM cdc.register_mapping('ubk_b', outbox => true);
SELECT ubk_try_batch(jsonb_build_array(
  dbz('c', 'ubk_b', '{"id": 1, "v": "a"}', '0/3000', 30),
  dbz('c', 'ubk_b', '{"id": 5, "v": "e"}', '0/3010', 30))) AS batch_create;
SELECT ubk_try_batch(jsonb_build_array(
  dbz('c', 'ubk_b', '{"id": 6, "v": "f"}', '0/3050', 30),
  dbz('u', 'ubk_b', '{"id": 2, "v": "b"}', '0/3100', 31, before => '{"id": null, "v": "a"}'))) AS batch_before_null;
SELECT ubk_try_batch(jsonb_build_array(
  dbz('c', 'ubk_b', '{"id": 6, "v": "f"}', '0/3050', 30),
  dbz('u', 'ubk_b', '{"id": 2, "v": "b"}', '0/3100', 31, before => '{"id": "__debezium_unavailable_value"}'))) AS batch_before_placeholder;
SELECT * FROM ubk_b ORDER BY id;
SELECT * FROM ubk_state('ubk_b');
SELECT ubk_try_batch(jsonb_build_array(
  dbz('c', 'ubk_b', '{"id": 6, "v": "f"}', '0/3050', 30),
  dbz('u', 'ubk_b', '{"id": 2, "v": "b"}', '0/3100', 31, before => '{"id": 1, "v": "a"}'))) AS batch_corrected;
SELECT * FROM ubk_b ORDER BY id;
SELECT * FROM ubk_state('ubk_b');

CREATE TABLE ubk2_b (a int, b int, v text, PRIMARY KEY (a, b));
SELECT target, outbox FROM cdc.register_mapping('ubk2_b', outbox => true);
SELECT ubk_try_batch(jsonb_build_array(dbz('c', 'ubk2_b', '{"a": 1, "b": 1, "v": "x"}', '0/4000', 40))) AS batch_create;
SELECT ubk_try_batch(jsonb_build_array(
  dbz('u', 'ubk2_b', '{"a": 2, "b": 2, "v": "y"}', '0/4100', 41, before => '{"a": null, "b": 1}'))) AS batch_before_a_null;
SELECT ubk_try_batch(jsonb_build_array(
  dbz('u', 'ubk2_b', '{"a": 1, "b": 2, "v": "y"}', '0/4100', 41, before => '{"a": 1, "b": null}'))) AS batch_before_b_null_a_same;
SELECT * FROM ubk2_b ORDER BY a, b;
SELECT * FROM ubk_state('ubk2_b');
SELECT ubk_try_batch(jsonb_build_array(
  dbz('u', 'ubk2_b', '{"a": 2, "b": 2, "v": "y"}', '0/4100', 41, before => '{"a": 1, "b": 1}'))) AS batch_corrected;
SELECT * FROM ubk2_b ORDER BY a, b;
SELECT * FROM ubk_state('ubk2_b');
SELECT * FROM tombstones_of('ubk2_b');

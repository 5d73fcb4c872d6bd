--
-- entities_barrier (review h2): cdc.entities shows only the targets the
-- current role may SELECT from, and the keys are row data.  A role's own
-- function in a WHERE clause on the view must never see the keys of rows
-- the view hides.  Without security_barrier that held only by the
-- planner's cost estimates (cdc.entity_key_json is costed high, so a cheap
-- function was still evaluated after the privilege filter); with it, a
-- function that is not leakproof runs only on the rows the view returns,
-- whatever its cost.  cdc.tombstones reads through cdc.entities.
-- Objects: eb_*.
--
CREATE TABLE eb_secret (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('eb_secret');
SELECT cdc_apply(dbz('c', 'eb_secret', '{"id": 42, "v": "pin 1234"}', '0/10', 1), 'eb_secret');
SELECT cdc_apply(dbz('d', 'eb_secret', NULL, '0/20', 2, before => '{"id": 42, "v": "pin 1234"}'), 'eb_secret');
SELECT cdc_apply(dbz('c', 'eb_secret', '{"id": 7, "v": "pin 5678"}', '0/30', 3), 'eb_secret');
SELECT reloptions FROM pg_class WHERE oid = 'cdc.entities'::regclass;
CREATE ROLE eb_eve;
CREATE SCHEMA eb_eve AUTHORIZATION eb_eve;
SET ROLE eb_eve;
CREATE FUNCTION eb_eve.leak(k jsonb) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
  RAISE NOTICE 'leaked %', k;
  RETURN true;
END $$;
-- neither view shows eve a row, and her function sees none of their keys
SELECT count(*) AS entities_seen FROM cdc.entities WHERE eb_eve.leak(entity_key);
SELECT count(*) AS tombstones_seen FROM cdc.tombstones WHERE eb_eve.leak(entity_key);
SELECT count(*) AS entities_seen FROM cdc.entities e WHERE e.target = 'eb_secret'::regclass AND eb_eve.leak(e.entity_key);
RESET ROLE;
-- once she may read the table, she sees its keys
GRANT SELECT ON eb_secret TO eb_eve;
SET ROLE eb_eve;
SELECT entity_key, is_tombstone FROM cdc.entities WHERE target = 'eb_secret'::regclass ORDER BY entity_key::text;
SELECT entity_key FROM cdc.tombstones WHERE target = 'eb_secret'::regclass;
RESET ROLE;
DROP SCHEMA eb_eve CASCADE;
DROP TABLE eb_secret;
DROP ROLE eb_eve;

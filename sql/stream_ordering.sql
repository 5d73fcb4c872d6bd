--
-- stream_ordering: cdc.set_ordering() and what it changes on the SQL path
-- (docs/semantics.md, "Stream ordering").  A stream-ordered target is
-- written only by a subscription's worker (TAP 050 covers the worker): here
-- cdc_apply() is refused, the switch folds entity records into the mark,
-- and after a switch back the mark is the implicit record of every key
-- without one.  Tables are called so_*.
--
CREATE TABLE so_orders (id int PRIMARY KEY, status text NOT NULL);
SELECT target, ordering FROM cdc.register_mapping('so_orders', outbox => true);
CREATE FUNCTION so_ev(op text, id int, status text, lsn text, src text DEFAULT 'srv') RETURNS jsonb LANGUAGE sql AS $$
  SELECT CASE WHEN op = 'd' THEN dbz('d', 'so_orders', NULL, lsn, NULL, before => jsonb_build_object('id', id), src => src)
              ELSE dbz(op, 'so_orders', jsonb_build_object('id', id, 'status', status), lsn, src => src) END
$$;

-- Entity ordering first: three keys, one deleted.
SELECT cdc_apply(so_ev('c', 1, 'new', '0/100'));
SELECT cdc_apply(so_ev('c', 2, 'new', '0/200'));
SELECT cdc_apply(so_ev('u', 1, 'paid', '0/300'));
SELECT cdc_apply(so_ev('c', 3, 'new', '0/400'));
SELECT cdc_apply(so_ev('d', 3, NULL, '0/500'));
SELECT count(*) AS records FROM cdc.entity_state WHERE target = 'so_orders'::regclass;

-- Errors of cdc.set_ordering.
SELECT cdc.set_ordering(NULL, 'stream');
SELECT cdc.set_ordering('so_orders', 'sideways');
SELECT cdc.set_ordering('so_orders', NULL);
CREATE TABLE so_unmapped (id int PRIMARY KEY);
SELECT cdc.set_ordering('so_unmapped', 'stream');
CREATE TABLE so_versioned (id int PRIMARY KEY, v int NOT NULL);
SELECT target FROM cdc.register_mapping('so_versioned', version_column => 'v');
SELECT cdc.set_ordering('so_versioned', 'stream');
-- records of two sources cannot become one mark
CREATE TABLE so_two (id int PRIMARY KEY, status text);
SELECT target FROM cdc.register_mapping('so_two');
SELECT cdc_apply(dbz('c', 'so_two', '{"id": 1, "status": "a"}', '0/10', src => 'one'), 'so_two');
SELECT cdc_apply(dbz('c', 'so_two', '{"id": 2, "status": "b"}', '0/20', src => 'two'), 'so_two');
SELECT cdc.set_ordering('so_two', 'stream');
-- only the owner (or a member of the owning role) may switch
CREATE ROLE so_other;
GRANT SELECT, INSERT, UPDATE, DELETE ON so_orders TO so_other;
GRANT EXECUTE ON FUNCTION cdc.set_ordering(regclass, text) TO so_other;
SET ROLE so_other;
SELECT cdc.set_ordering('so_orders', 'stream');
RESET ROLE;

-- Entity -> stream: the records become the mark (the greatest version of
-- the source), and are removed.
SELECT target, ordering FROM cdc.set_ordering('so_orders', 'stream');
SELECT target, source_name, version FROM cdc.stream_marks WHERE target = 'so_orders'::regclass;
SELECT count(*) AS records FROM cdc.entity_state WHERE target = 'so_orders'::regclass;
-- switching to the ordering it has is a no-op
SELECT ordering FROM cdc.set_ordering('so_orders', 'stream');

-- The SQL path may not write a stream-ordered target, in any form; nothing
-- of the call stays.
SELECT cdc_apply(so_ev('c', 9, 'new', '0/900'));
SELECT cdc_apply(so_ev('c', 9, 'new', '0/900'), 'so_orders');
SELECT * FROM cdc_apply_batch(jsonb_build_array(so_ev('c', 9, 'new', '0/900')));
SELECT count(*) AS rows_9, (SELECT count(*) FROM cdc.ledger WHERE target = 'so_orders'::regclass) AS ledger
  FROM so_orders WHERE id = 9;

-- Stream -> entity: the mark stays as the implicit record of every key
-- without one.  Replays of changes at or below it are duplicates (also of
-- the deleted key 3: no resurrection), a newer change applies and gets a
-- record again, another source is not compared with the mark.
SELECT ordering FROM cdc.set_ordering('so_orders', 'entity');
SELECT cdc_apply(so_ev('c', 3, 'new', '0/400'), delivery_key => 'redelivery-1') AS replay_of_deleted_key;
SELECT cdc_apply(so_ev('u', 1, 'new', '0/150'), delivery_key => 'redelivery-2') AS older_update;
SELECT cdc_apply(so_ev('u', 2, 'late', '0/500'), delivery_key => 'redelivery-3') AS at_the_mark;
SELECT cdc_apply(so_ev('u', 2, 'shipped', '0/600')) AS newer_update;
SELECT cdc_apply(so_ev('c', 7, 'other', '0/100', src => 'elsewhere')) AS other_source;
SELECT * FROM so_orders ORDER BY id;
SELECT entity_key, source_name, version, is_tombstone FROM cdc.entities WHERE target = 'so_orders'::regclass ORDER BY 1;
SELECT applied, duplicate, stale, conflict FROM cdc.stats WHERE target = 'so_orders'::regclass;
SELECT op, entity_key FROM cdc.outbox WHERE target = 'so_orders'::regclass ORDER BY id;

-- delivery_processed for worker delivery keys of a target with a mark
INSERT INTO cdc.source (id, name) VALUES (424242, 'pg:4242');
INSERT INTO cdc.stream_mark (target, src, v0, v1, v2, v3, updated_s)
  SELECT 'so_unmapped'::regclass, id, 0, ('0/5000'::pg_lsn - '0/0')::bigint, 3, 0, 0 FROM cdc.source WHERE name = 'pg:4242';
SELECT k, cdc.delivery_processed('so_unmapped', k)
  FROM unnest(ARRAY['pgoutput:pg:4242:0/4FFF:9', 'pgoutput:pg:4242:0/5000:3', 'pgoutput:pg:4242:0/5000:4',
                    'pgoutput:pg:4242:FFFFFFFF/0:1', 'pgoutput:pg:4343:0/10:1', 'pgoutput:pg:4242:garbage']) k;

-- Entity -> stream after pruning: the mark also covers the prune watermark.
-- Key 2's delete (0/300) is the newest change applied; its tombstone is
-- pruned, leaving key 1's record (0/100) and a watermark of 0/300.  The mark
-- must be 0/300, or a re-sent delete of key 2 would be applied again (a
-- second outbox row, and rows of stream-ordered targets are unique by the
-- mark alone).
CREATE TABLE so_pruned (id int PRIMARY KEY, status text NOT NULL);
SELECT target FROM cdc.register_mapping('so_pruned', outbox => true);
SELECT cdc_apply(dbz('c', 'so_pruned', '{"id": 1, "status": "a"}', '0/100'));
SELECT cdc_apply(dbz('c', 'so_pruned', '{"id": 2, "status": "b"}', '0/200'));
SELECT cdc_apply(dbz('d', 'so_pruned', NULL, '0/300', NULL, before => '{"id": 2}'));
UPDATE cdc.entity_state SET touched_s = touched_s - 8 * 86400 WHERE target = 'so_pruned'::regclass;
SELECT sum(removed) > 0 AS pruned FROM cdc.prune(1000);
SELECT ARRAY[v0::bigint, v1, v2, v3::bigint] AS watermark FROM cdc.prune_watermark WHERE target = 'so_pruned'::regclass;
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'so_pruned'::regclass;
SELECT ordering FROM cdc.set_ordering('so_pruned', 'stream');
SELECT version FROM cdc.stream_marks WHERE target = 'so_pruned'::regclass;
SELECT count(*) AS watermarks_left FROM cdc.prune_watermark WHERE target = 'so_pruned'::regclass;
-- back to entity ordering: the re-sent delete is a duplicate, no outbox row
SELECT ordering FROM cdc.set_ordering('so_pruned', 'entity');
SELECT cdc_apply(dbz('d', 'so_pruned', NULL, '0/300', NULL, before => '{"id": 2}'), delivery_key => 'again') AS resent_delete;
SELECT op, entity_key FROM cdc.outbox WHERE target = 'so_pruned'::regclass ORDER BY id;

-- A dropped target takes its marks with it.
DROP TABLE so_unmapped;
SELECT count(*) AS marks_left FROM cdc.stream_mark WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = target);
DROP OWNED BY so_other;
DROP ROLE so_other;

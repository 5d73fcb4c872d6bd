--
-- outbox: the outbox contract (SPEC §4.6).  The row shape, the rule that
-- produces the idempotency key, the same key for a change re-published
-- under a new delivery key (a rebuilt topic, a new generation) and no second
-- row, a relay marking rows published, and published rows removed without
-- weakening dedup.  Tables of this suite are called ob_*.
--
CREATE TABLE ob_orders (id int PRIMARY KEY, status text NOT NULL, amount numeric(12,2));
SELECT target, outbox, outbox_topic
  FROM cdc.register_mapping('ob_orders', source_table => 'ob_orders', outbox => true, outbox_topic => 'shop.orders.v1');

-- The row shape.
SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull
  FROM pg_attribute a WHERE a.attrelid = 'cdc.outbox'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum;

-- Three changes delivered from generation 1 of the topic.
CREATE TABLE ob_ev (n int PRIMARY KEY, ev jsonb NOT NULL);
INSERT INTO ob_ev VALUES
  (1, dbz('c', 'ob_orders', '{"id": 1, "status": "new", "amount": 10}', '0/1000', 100, total_order => 1)),
  (2, dbz('u', 'ob_orders', '{"id": 1, "status": "paid", "amount": 10}', '0/1100', 101, clsn => '0/1180', total_order => 1)),
  (3, dbz('d', 'ob_orders', NULL, '0/1200', 102, before => '{"id": 1}', total_order => 1));
SELECT n, cdc_apply(ev, NULL, 'shop.orders:gen1:0:' || n) FROM ob_ev ORDER BY n;
SELECT topic, target, entity_key, op, payload, source, version, created_at <= now() AS created_at_set, published_at
  FROM cdc.outbox WHERE target = 'ob_orders'::regclass ORDER BY id;

-- The idempotency key rule: md5 of source.name, source schema.table, op,
-- version and entity key, separated by newlines.  No delivery key, no clock.
SELECT o.op, o.idempotency_key = md5(concat_ws(E'\n', o.source->>'name', (o.source->>'schema') || '.' || (o.source->>'table'),
                                              o.op, o.version::text, o.entity_key::text)) AS key_follows_the_rule
  FROM cdc.outbox o WHERE o.target = 'ob_orders'::regclass ORDER BY o.id;
CREATE TABLE ob_keys AS SELECT op, idempotency_key FROM cdc.outbox WHERE target = 'ob_orders'::regclass;

-- A rebuilt topic: the same changes, generation 2, new offsets.  Nothing new.
SELECT n, cdc_apply(ev, NULL, 'shop.orders:gen2:3:' || (n + 500)) FROM ob_ev ORDER BY n;
SELECT count(*) AS outbox_rows FROM cdc.outbox WHERE target = 'ob_orders'::regclass;

-- The same source change applied where nothing is known about it yet (a
-- second destination, rebuilt from scratch) gets the same idempotency key:
-- forget the ledger and the entity record, keep the outbox, re-deliver
-- under generation 3.
DELETE FROM cdc.ledger WHERE target = 'ob_orders'::regclass;
DELETE FROM cdc.entity_state WHERE target = 'ob_orders'::regclass;
SELECT n, cdc_apply(ev, NULL, 'shop.orders:gen3:0:' || n) FROM ob_ev ORDER BY n;
SELECT count(*) AS outbox_rows,
       count(*) FILTER (WHERE idempotency_key IN (SELECT idempotency_key FROM ob_keys)) AS with_canonical_keys
  FROM cdc.outbox WHERE target = 'ob_orders'::regclass;
SELECT applied, duplicate, stale, outbox_rows FROM cdc.stats WHERE target = 'ob_orders'::regclass;

-- ===========================================================================
-- A relay: read unpublished rows in order, publish, mark them.
-- ===========================================================================
INSERT INTO ob_ev VALUES
  (4, dbz('c', 'ob_orders', '{"id": 2, "status": "new", "amount": 5}', '0/2000', 200)),
  (5, dbz('u', 'ob_orders', '{"id": 2, "status": "paid", "amount": 5}', '0/2100', 201));
SELECT n, cdc_apply(ev, NULL, 'shop.orders:gen3:0:' || n) FROM ob_ev WHERE n >= 4 ORDER BY n;
CREATE ROLE regress_cdc_relay;
GRANT SELECT, UPDATE ON cdc.outbox TO regress_cdc_relay;
GRANT EXECUTE ON FUNCTION cdc.outbox_mark_published(bigint[]) TO regress_cdc_relay;
SET ROLE regress_cdc_relay;
CREATE TEMP TABLE ob_batch AS
  SELECT id, op, entity_key FROM cdc.outbox
   WHERE published_at IS NULL AND target = 'ob_orders'::regclass ORDER BY id LIMIT 4;
SELECT op, entity_key FROM ob_batch ORDER BY id;
SELECT cdc.outbox_mark_published(ARRAY(SELECT id FROM ob_batch)) AS marked;
-- a relay that crashed after publishing and retries marks nothing twice
SELECT cdc.outbox_mark_published(ARRAY(SELECT id FROM ob_batch)) AS marked_again;
SELECT count(*) FILTER (WHERE published_at IS NULL) AS unpublished, count(*) FILTER (WHERE published_at IS NOT NULL) AS published
  FROM cdc.outbox WHERE target = 'ob_orders'::regclass;
RESET ROLE;
-- without the grant, a role cannot mark rows
CREATE ROLE regress_cdc_nobody;
SET ROLE regress_cdc_nobody;
SELECT cdc.outbox_mark_published(ARRAY[1]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;

-- ===========================================================================
-- Published rows removed (as cdc.prune() does once they are older than the
-- replay horizon): dedup does not depend on them.  Every change replayed,
-- under its old and under new delivery keys: no outbox row comes back.
-- ===========================================================================
DELETE FROM cdc.outbox WHERE target = 'ob_orders'::regclass AND published_at IS NOT NULL;
SELECT n, cdc_apply(ev, NULL, 'shop.orders:gen3:0:' || n) AS same_keys,
       cdc_apply(ev, NULL, 'shop.orders:gen4:0:' || n) AS new_keys
  FROM ob_ev ORDER BY n;
SELECT count(*) AS outbox_rows, count(*) FILTER (WHERE published_at IS NULL) AS unpublished
  FROM cdc.outbox WHERE target = 'ob_orders'::regclass;
SELECT * FROM ob_orders;

DROP TABLE ob_batch;
DROP ROLE regress_cdc_nobody;
REVOKE ALL ON cdc.outbox FROM regress_cdc_relay;
REVOKE ALL ON FUNCTION cdc.outbox_mark_published(bigint[]) FROM regress_cdc_relay;
DROP ROLE regress_cdc_relay;

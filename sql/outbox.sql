--
-- outbox: the outbox contract (SPEC §4.6).  The row shape, the rule that
-- produces the idempotency key, the same key for a change re-published
-- under a new delivery key (a rebuilt topic, a new generation) and no second
-- row, a relay marking rows published, and published rows removed without
-- weakening dedup; the storage behind the view (cdc.outbox_rows and the
-- dictionary cdc.outbox_source) and what a relay does through the view.
-- Tables of this suite are called ob_*.
--
CREATE TABLE ob_orders (id int PRIMARY KEY, status text NOT NULL, amount numeric(12,2));
SELECT target, outbox, outbox_topic
  FROM cdc.register_mapping('ob_orders', source_table => 'ob_orders', outbox => true, outbox_topic => 'shop.orders.v1');

-- The row shape (cdc.outbox is a view: no column is NOT NULL there; the
-- base table's are).
SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull
  FROM pg_attribute a WHERE a.attrelid = 'cdc.outbox'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum;
SELECT relkind FROM pg_class WHERE oid = 'cdc.outbox'::regclass;
SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull
  FROM pg_attribute a WHERE a.attrelid = 'cdc.outbox_rows'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum;
SELECT indexrelid::regclass AS index, indisunique, pg_get_indexdef(indexrelid) AS definition
  FROM pg_index WHERE indrelid = 'cdc.outbox_rows'::regclass ORDER BY 1::text;
-- No primary key (rows of stream-ordered targets are not in the unique
-- index): the table's replica identity is FULL, so that UPDATE and DELETE of
-- its rows work where a publication includes it.
SELECT relreplident FROM pg_class WHERE oid = 'cdc.outbox_rows'::regclass;

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

-- The view renders the stored binary key as the md5's 32 hex digits, and
-- the source identity from the dictionary and the row's own columns.  A
-- position equal to a version component is not stored (elided: bit 1 lsn =
-- v2, bit 2 commit_lsn = v1, bit 4 v3 = 0), and the view shows it again;
-- the payload holds the values, the dictionary entry their member names.
SELECT o.idempotency_key = replace(r.ikey::text, '-', '') AS key_is_the_stored_bytes,
       length(o.idempotency_key) AS key_length, s.topic, s.source_name, s.source_db, s.source_schema, s.source_table,
       r.lsn, r.commit_lsn, r.tx_id, ARRAY[r.v0, r.v1, r.v2, r.v3] AS v, r.elided,
       o.source->'lsn' AS lsn, o.source->'commit_lsn' AS commit_lsn, r.op
  FROM cdc.outbox o JOIN cdc.outbox_rows r USING (id) JOIN cdc.outbox_source s ON s.id = r.src
 WHERE o.target = 'ob_orders'::regclass ORDER BY o.id;
SELECT r.op, s.payload_keys, r.payload AS stored_payload, r.entity_key AS stored_entity_key, o.payload, o.entity_key
  FROM cdc.outbox o JOIN cdc.outbox_rows r USING (id) JOIN cdc.outbox_source s ON s.id = r.src
 WHERE o.target = 'ob_orders'::regclass ORDER BY o.id;
-- cdc._outbox_payload joins names and values; a value count that does not
-- match the names is an error, not a shorter object.
SELECT cdc._outbox_payload('{}', '{"a": 1}') AS whole, cdc._outbox_payload('{a,b}', '[1,{"c":[2]}]') AS joined;
SELECT cdc._outbox_payload('{a,b}', '[1]');

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

-- ===========================================================================
-- Relays through the view: FOR UPDATE SKIP LOCKED locks the rows of
-- cdc.outbox_rows (isolation spec outbox_concurrent has two relays), the
-- work-queue index serves the relay's queries, and a relay may delete what
-- it published.  The relay role needs no privilege on the base table.
-- ===========================================================================
INSERT INTO ob_ev VALUES
  (6, dbz('c', 'ob_orders', '{"id": 3, "status": "new", "amount": 7}', '0/2200', 202)),
  (7, dbz('c', 'ob_orders', '{"id": 4, "status": "new", "amount": 8}', '0/2300', 203));
SELECT n, cdc_apply(ev, NULL, 'shop.orders:gen3:0:' || n) FROM ob_ev WHERE n >= 6 ORDER BY n;
SET ROLE regress_cdc_relay;
SELECT has_table_privilege('cdc.outbox_rows', 'SELECT') AS relay_reads_base_table;
BEGIN;
SELECT op, entity_key FROM cdc.outbox WHERE published_at IS NULL AND target = 'ob_orders'::regclass
 ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED;
RESET ROLE;
SELECT r.entity_key, r.xmax = pg_current_xact_id()::xid AS locked_by_the_relay
  FROM cdc.outbox_rows r WHERE r.target = 'ob_orders'::regclass AND r.published_at IS NULL ORDER BY r.id;
SET ROLE regress_cdc_relay;
SELECT cdc.outbox_mark_published(ARRAY(SELECT id FROM cdc.outbox WHERE published_at IS NULL AND target = 'ob_orders'::regclass
                                          ORDER BY id LIMIT 2)) AS marked;
COMMIT;
RESET ROLE;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id, idempotency_key, topic, entity_key, op, payload FROM cdc.outbox
 WHERE published_at IS NULL ORDER BY id LIMIT 500;
EXPLAIN (COSTS OFF) UPDATE cdc.outbox SET published_at = now() WHERE id = ANY ('{1,2}') AND published_at IS NULL;
RESET enable_seqscan;
RESET enable_bitmapscan;
-- A relay that deletes what it published instead of marking it (needs
-- DELETE on the view): the rows go from the base table.
GRANT DELETE ON cdc.outbox TO regress_cdc_relay;
SET ROLE regress_cdc_relay;
DELETE FROM cdc.outbox WHERE target = 'ob_orders'::regclass AND entity_key = '{"id": "3"}' AND published_at IS NOT NULL
RETURNING op, entity_key, payload;
RESET ROLE;
SELECT count(*) AS rows_of_key_3 FROM cdc.outbox_rows WHERE target = 'ob_orders'::regclass AND entity_key::jsonb = '{"id": "3"}';

SELECT op, entity_key, published_at IS NOT NULL AS published FROM cdc.outbox WHERE target = 'ob_orders'::regclass ORDER BY id;

-- ===========================================================================
-- The dictionary cdc.outbox_source keeps the topic and the source identity
-- a row was written with: a later topic, a renamed target or a rolled-back
-- first use change nothing of earlier rows, and ids come from the
-- identity's hash (a rolled-back call uses none up, and takes no lock that
-- other sessions' new entries would wait for: review h3).
-- ===========================================================================
CREATE TABLE ob_plain (id int PRIMARY KEY, v text);
SELECT target, outbox_topic FROM cdc.register_mapping('ob_plain', outbox => true);
SELECT cdc_apply(dbz('c', 'ob_plain', '{"id": 1, "v": "a"}', '0/3000', 300));
CREATE TEMP TABLE ob_dict_before AS SELECT id FROM cdc.outbox_source;
BEGIN;
SELECT cdc_apply(dbz('c', 'ob_plain', '{"id": 2, "v": "b"}', '0/3100', 301, src => 'rolled_back'));
SELECT count(*) AS new_ids_in_transaction FROM cdc.outbox_source WHERE id NOT IN (SELECT id FROM ob_dict_before);
ROLLBACK;
SELECT count(*) AS rolled_back_entries FROM cdc.outbox_source WHERE source_name = 'rolled_back';
SELECT target, outbox_topic FROM cdc.register_mapping('ob_plain', outbox => true, outbox_topic => 'plain.v2');
SELECT cdc_apply(dbz('u', 'ob_plain', '{"id": 1, "v": "b"}', '0/3200', 302));
ALTER TABLE ob_plain RENAME TO ob_plain_renamed;
SELECT target, outbox_topic FROM cdc.register_mapping('ob_plain_renamed', source_table => 'ob_plain', outbox => true);
SELECT cdc_apply(dbz('u', 'ob_plain', '{"id": 1, "v": "c"}', '0/3300', 303));
SELECT cdc_apply(dbz('u', 'ob_plain', '{"id": 1, "v": "d"}', '0/3400', 304));
SELECT target, op, topic, payload FROM cdc.outbox WHERE target = 'ob_plain_renamed'::regclass ORDER BY id;
SELECT s.topic AS new_topic FROM cdc.outbox_source s WHERE s.id NOT IN (SELECT id FROM ob_dict_before) ORDER BY s.topic;
-- rows of a dropped target stay for the relay, with their topic
DROP TABLE ob_plain_renamed;
SELECT target::text ~ '^[0-9]+$' AS target_shown_as_its_oid, op, topic, payload FROM cdc.outbox
 WHERE topic IN ('public.ob_plain', 'plain.v2', 'public.ob_plain_renamed') ORDER BY id;

-- ===========================================================================
-- A batch whose outbox insert meets keys that are there already (state
-- forgotten, outbox kept, as above): the insert is redone with ON CONFLICT
-- DO NOTHING (docs/semantics.md, "Outbox"), so the batch's new change gets
-- its row, counted once, and the others none.
-- ===========================================================================
CREATE TABLE ob_dup (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('ob_dup', outbox => true);
SELECT applied FROM cdc_apply_batch(ARRAY[dbz('c', 'ob_dup', '{"id": 1, "v": "a"}', '0/4000', 400),
                                          dbz('u', 'ob_dup', '{"id": 1, "v": "b"}', '0/4100', 401)]);
DELETE FROM cdc.ledger WHERE target = 'ob_dup'::regclass;
DELETE FROM cdc.entity_state WHERE target = 'ob_dup'::regclass;
SELECT applied FROM cdc_apply_batch(ARRAY[dbz('c', 'ob_dup', '{"id": 1, "v": "a"}', '0/4000', 400),
                                          dbz('c', 'ob_dup', '{"id": 2, "v": "x"}', '0/4050', 400),
                                          dbz('u', 'ob_dup', '{"id": 1, "v": "b"}', '0/4100', 401)]);
SELECT op, entity_key, payload FROM cdc.outbox WHERE target = 'ob_dup'::regclass ORDER BY id;
SELECT applied, outbox_rows FROM cdc.stats WHERE target = 'ob_dup'::regclass;
SELECT * FROM ob_dup ORDER BY id;
-- The same over two targets, with the rows inserted through the executor
-- and with the statement (cdc.direct_writes off): one row per change that
-- had none, counted for its own target.
CREATE TABLE ob_dup2 (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('ob_dup2', outbox => true);
SELECT applied FROM cdc_apply_batch(ARRAY[dbz('c', 'ob_dup2', '{"id": 1, "v": "a"}', '0/4000', 400)]);
DELETE FROM cdc.ledger WHERE target IN ('ob_dup'::regclass, 'ob_dup2'::regclass);
DELETE FROM cdc.entity_state WHERE target IN ('ob_dup'::regclass, 'ob_dup2'::regclass);
PREPARE ob_dup2_batch AS
  SELECT applied FROM cdc_apply_batch(ARRAY[dbz('c', 'ob_dup2', '{"id": 1, "v": "a"}', '0/4000', 400),
                                            dbz('c', 'ob_dup', '{"id": 3, "v": "y"}', '0/4200', 402),
                                            dbz('c', 'ob_dup2', '{"id": 2, "v": "z"}', '0/4200', 402),
                                            dbz('c', 'ob_dup', '{"id": 1, "v": "a"}', '0/4000', 400)]);
PREPARE ob_dup2_outbox AS
  SELECT target, op, entity_key, payload FROM cdc.outbox WHERE target IN ('ob_dup'::regclass, 'ob_dup2'::regclass) ORDER BY id;
PREPARE ob_dup2_stats AS
  SELECT target, applied, outbox_rows FROM cdc.stats WHERE target IN ('ob_dup'::regclass, 'ob_dup2'::regclass) ORDER BY target;
BEGIN;
SET LOCAL cdc.direct_writes = off;
EXECUTE ob_dup2_batch;
EXECUTE ob_dup2_outbox;
EXECUTE ob_dup2_stats;
ROLLBACK;
EXECUTE ob_dup2_batch;
EXECUTE ob_dup2_outbox;
EXECUTE ob_dup2_stats;
-- The key taken by a row of the same transaction, not yet committed: the
-- change applied, its state forgotten and the change applied again, by
-- cdc_apply() and by a batch, in one transaction: one outbox row in all,
-- through the executor and with the statement.
CREATE TABLE ob_dup3 (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('ob_dup3', outbox => true);
CREATE FUNCTION ob_forget() RETURNS void LANGUAGE sql AS $$
  DELETE FROM cdc.ledger WHERE target = 'ob_dup3'::regclass;
  DELETE FROM cdc.entity_state WHERE target = 'ob_dup3'::regclass $$;
PREPARE ob_dup3_twice AS
  SELECT cdc_apply(dbz('c', 'ob_dup3', '{"id": 1, "v": "a"}', '0/5000', 500)) AS first,
         ob_forget() IS NULL AS forgotten,
         cdc_apply(dbz('c', 'ob_dup3', '{"id": 1, "v": "a"}', '0/5000', 500)) AS again,
         ob_forget() IS NULL AS forgotten_again,
         (SELECT applied FROM cdc_apply_batch(ARRAY[dbz('c', 'ob_dup3', '{"id": 1, "v": "a"}', '0/5000', 500),
                                                    dbz('u', 'ob_dup3', '{"id": 1, "v": "b"}', '0/5100', 501)])) AS batch_applied;
-- ... and a relay decoding cdc.outbox_rows from the WAL sees one insert
-- per row and nothing of the changes whose key was taken (no insert, no
-- delete), as with speculative insertion (docs/internals.md, "Inserts
-- without speculative insertion").
SELECT 'init' FROM pg_create_logical_replication_slot('regress_cdc_ob_dup3', 'test_decoding');
BEGIN;
SET LOCAL cdc.direct_writes = off;
EXECUTE ob_dup3_twice;
SELECT op, payload FROM cdc.outbox WHERE target = 'ob_dup3'::regclass ORDER BY id;
ROLLBACK;
BEGIN;
EXECUTE ob_dup3_twice;
SELECT op, payload FROM cdc.outbox WHERE target = 'ob_dup3'::regclass ORDER BY id;
SELECT applied, outbox_rows FROM cdc.stats WHERE target = 'ob_dup3'::regclass;
COMMIT;
SELECT op, payload FROM cdc.outbox WHERE target = 'ob_dup3'::regclass ORDER BY id;
SELECT count(*) FILTER (WHERE data LIKE 'table cdc.outbox_rows: INSERT:%') AS outbox_inserts_decoded,
       count(*) FILTER (WHERE data LIKE 'table cdc.outbox_rows: DELETE:%') AS outbox_deletes_decoded
  FROM pg_logical_slot_get_changes('regress_cdc_ob_dup3', NULL, NULL);
SELECT pg_drop_replication_slot('regress_cdc_ob_dup3');
SELECT * FROM ob_dup3;
DROP TABLE ob_dup3;
DROP FUNCTION ob_forget();

-- ===========================================================================
-- The stored forms (docs/semantics.md, "Outbox"): a version of 3 components
-- (version_column) keeps v3 NULL with elided 0 and its lsn; member names
-- that would take more than 320 bytes as a text[] stay in the payload (its
-- dictionary entry has none).  The view shows both as it always did.
-- ===========================================================================
CREATE TABLE ob_forms_ver (id int PRIMARY KEY, ver bigint NOT NULL, note text);
SELECT target FROM cdc.register_mapping('ob_forms_ver', outbox => true, version_column => 'ver');
SELECT cdc_apply(dbz('c', 'ob_forms_ver', '{"id": 1, "ver": 7, "note": "a"}', '0/6000', 600), NULL, 'obf:1');
CREATE TABLE ob_forms_wide (id int PRIMARY KEY, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_01 int, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_02 int, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_03 int, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_04 int, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_05 int, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_06 int, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_07 int, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_08 int, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_09 int, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_10 int, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_11 int, c_xxxxxxxxxxxxxxxxxxxxxxxxxx_12 int);
SELECT target FROM cdc.register_mapping('ob_forms_wide', outbox => true);
SELECT cdc_apply(dbz('c', 'ob_forms_wide', '{"id": 1, "c_xxxxxxxxxxxxxxxxxxxxxxxxxx_01": 5}', '0/6100', 601), NULL, 'obf:2');
SELECT o.target, r.v3, r.elided, r.lsn, o.version, o.source->'lsn' AS lsn_shown, s.payload_keys,
       left(r.payload::text, 40) AS stored_payload, o.payload->'id' AS id, jsonb_typeof(o.payload) AS payload_type,
       (SELECT count(*) FROM jsonb_object_keys(o.payload)) AS members
  FROM cdc.outbox o JOIN cdc.outbox_rows r USING (id) JOIN cdc.outbox_source s ON s.id = r.src
 WHERE o.target IN ('ob_forms_ver'::regclass, 'ob_forms_wide'::regclass) ORDER BY o.id;
SELECT o.payload = (SELECT to_jsonb(w) FROM ob_forms_wide w) AS wide_payload_is_the_row FROM cdc.outbox o
 WHERE o.target = 'ob_forms_wide'::regclass;
SELECT cdc.unregister_mapping('ob_forms_ver'), cdc.unregister_mapping('ob_forms_wide');
DROP TABLE ob_forms_ver, ob_forms_wide;

DROP TABLE ob_batch;
DROP ROLE regress_cdc_nobody;
REVOKE ALL ON cdc.outbox FROM regress_cdc_relay;
REVOKE ALL ON FUNCTION cdc.outbox_mark_published(bigint[]) FROM regress_cdc_relay;
DROP ROLE regress_cdc_relay;

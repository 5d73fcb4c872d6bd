--
-- fixtures: every file in test/fixtures/debezium/ (real Debezium
-- documentation examples, see its README.md) gives its documented outcome
-- and rows.  Files are read server-side and passed to cdc_apply() as raw
-- text, exactly as a Kafka consumer would receive the record value.
--
\getenv abs_srcdir PG_ABS_SRCDIR
\set fx :abs_srcdir '/test/fixtures/debezium/'

-- The fixture files (the listing is part of the expected output, so a new
-- file shows up here and in the coverage check at the end).
SELECT name FROM pg_ls_dir(:'fx') AS name ORDER BY name;
CREATE TABLE fx_files AS
  SELECT name, pg_read_file(:'fx' || name) AS body FROM pg_ls_dir(:'fx') AS name WHERE name <> 'README.md';
SELECT name, length(body) AS bytes, body::jsonb ? 'payload' AS wrapped FROM fx_files ORDER BY name;

-- fx_try(file, target, delivery key): cdc_apply() on the file's text; an
-- error is returned as 'ERROR <SQLSTATE>: <message> [HINT: <hint>]' (the
-- failed call rolls back in its subtransaction).  Every file used is recorded in fx_seen.
CREATE TABLE fx_seen (name text PRIMARY KEY);
CREATE FUNCTION fx_try(file text, tgt regclass DEFAULT NULL, dk text DEFAULT NULL) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  b text;
  h text;
BEGIN
  SELECT body INTO STRICT b FROM fx_files WHERE name = file;
  INSERT INTO fx_seen VALUES (file) ON CONFLICT DO NOTHING;
  BEGIN
    RETURN cdc_apply(b, tgt, dk);
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT;
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM || CASE WHEN h <> '' THEN ' HINT: ' || h ELSE '' END;
  END;
END
$$;
-- Bookkeeping totals over this suite's targets (fx_*), to show that ignored
-- records and errors write nothing.
CREATE FUNCTION fx_totals() RETURNS TABLE (ledger bigint, outbox bigint, entities bigint, conflicts bigint, barriers bigint)
LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM cdc.ledger WHERE target::text LIKE 'fx\_%'),
         (SELECT count(*) FROM cdc.outbox WHERE target::text LIKE 'fx\_%'),
         (SELECT count(*) FROM cdc.entities WHERE target::text LIKE 'fx\_%'),
         (SELECT count(*) FROM cdc.conflicts WHERE target::text LIKE 'fx\_%'),
         (SELECT count(*) FROM cdc.table_barrier WHERE target::text LIKE 'fx\_%')
$$;

-- ---------------------------------------------------------------------------
-- 1. The customers stream: create, update, delete, tombstone, truncate.
-- ---------------------------------------------------------------------------
-- Destination of PostgreSQL_server's public.customers, with outbox.
CREATE TABLE fx_customers (id int PRIMARY KEY, first_name text, last_name text, email text);
SELECT target, source_name, source_schema, source_table, outbox, truncate_policy
  FROM cdc.register_mapping('fx_customers', source_schema => 'public', source_table => 'customers',
                            source_name => 'PostgreSQL_server', outbox => true);

-- create (JsonConverter form): applied.  Its source says "snapshot": true
-- while op is "c" (a documented quirk): op decides, so it is a streamed
-- change and writes an outbox row.
SELECT fx_try('pg-create-with-schema.json');
SELECT * FROM fx_customers ORDER BY id;
-- The same record without schema: same source identity, same derived
-- delivery key -> duplicate.
SELECT fx_try('pg-create.payload-only.json');
SELECT * FROM ledger_has('fx_customers', 'dbz:PostgreSQL_server:postgres:public.customers:c:24023128:555::{"id": "1"}');

-- update (REPLICA IDENTITY DEFAULT, before = key only): the docs give it the
-- same source.lsn (24023128) as the create, so on this key it is an equal
-- version with different content -> conflict, recorded with both images;
-- the row keeps the created image.
SELECT fx_try('pg-update-replica-identity-default-with-schema.json');
SELECT * FROM fx_customers ORDER BY id;
SELECT entity_key, op, reason, stored_version, event_version, stored_image, event_image
  FROM cdc.conflicts WHERE target = 'fx_customers'::regclass ORDER BY id;
-- Its payload-only twin is the same delivery: duplicate, no second conflict.
SELECT fx_try('pg-update-replica-identity-default.payload-only.json');
SELECT count(*) AS conflicts FROM cdc.conflicts WHERE target = 'fx_customers'::regclass;

-- delete (before = key only, lsn 46523128): applied, row gone, tombstone.
SELECT fx_try('pg-delete-replica-identity-default-with-schema.json');
SELECT fx_try('pg-delete-replica-identity-default.payload-only.json');
SELECT count(*) AS rows FROM fx_customers;
SELECT entity_key, version FROM tombstones_of('fx_customers');

-- The Kafka tombstone that follows the delete (value null): ignored.
SELECT * FROM fx_totals();
SELECT fx_try('pg-tombstone.value-null.txt', 'fx_customers');
SELECT fx_try('pg-tombstone.value-null.txt');
SELECT * FROM fx_totals();

-- truncate (no before/after, lsn 46523128): applied under the mapping's
-- truncate policy; it sets the table barrier at its version and clears the
-- entity versions it covers (the id 1 tombstone is at that version).
INSERT INTO fx_customers VALUES (99, 'not', 'from', 'cdc');
SELECT fx_try('pg-truncate.payload-only.json');
SELECT count(*) AS rows FROM fx_customers;
SELECT target, source_name, version FROM cdc.table_barrier WHERE target = 'fx_customers'::regclass;
SELECT count(*) AS entities FROM cdc.entities WHERE target = 'fx_customers'::regclass;
-- The truncate again: duplicate.
SELECT fx_try('pg-truncate.payload-only.json');
-- The create replayed under a new delivery key (a rebuilt topic): older than
-- the barrier -> stale; the table stays empty.
SELECT fx_try('pg-create-with-schema.json', NULL, 'rebuilt-topic:0:0');
SELECT count(*) AS rows FROM fx_customers;

SELECT op, entity_key, payload, source->>'lsn' AS lsn, version FROM cdc.outbox WHERE target = 'fx_customers'::regclass ORDER BY id;
SELECT applied, duplicate, stale, conflict, ignored, blocked_resurrections, outbox_rows, snapshot_rows
  FROM cdc.stats WHERE target = 'fx_customers'::regclass;
SELECT * FROM ledger_has('fx_customers', 'dbz:PostgreSQL_server:postgres:public.customers:c:24023128:555::{"id": "1"}',
                         'dbz:PostgreSQL_server:postgres:public.customers:d:46523128:556::{"id": "1"}',
                         'dbz:PostgreSQL_server:postgres:public.customers:t:46523128:556::',
                         'dbz:PostgreSQL_server:postgres:public.customers:u:24023128:556::{"id": "1"}',
                         'rebuilt-topic:0:0');

-- ---------------------------------------------------------------------------
-- 2. The update applied on its own to a fresh table: applied (explicit
--    delivery keys, because the derived one is already in the ledger).
--    With and without schema it gives the same row.
-- ---------------------------------------------------------------------------
CREATE TABLE fx_fresh_a (id int PRIMARY KEY, first_name text, last_name text, email text);
CREATE TABLE fx_fresh_b (id int PRIMARY KEY, first_name text, last_name text, email text);
SELECT fx_try('pg-update-replica-identity-default-with-schema.json', 'fx_fresh_a', 'fresh-a');
SELECT fx_try('pg-update-replica-identity-default.payload-only.json', 'fx_fresh_b', 'fresh-b');
SELECT 'a' AS t, * FROM fx_fresh_a UNION ALL SELECT 'b', * FROM fx_fresh_b ORDER BY t;
SELECT target, entity_key, version FROM cdc.entities
 WHERE target IN ('fx_fresh_a'::regclass, 'fx_fresh_b'::regclass) ORDER BY target::text;
-- Then the delete of that key on fresh_a: applied (newer), row gone.
SELECT fx_try('pg-delete-replica-identity-default.payload-only.json', 'fx_fresh_a', 'fresh-a-delete');
SELECT count(*) AS rows_a FROM fx_fresh_a;

-- ---------------------------------------------------------------------------
-- 3. Non-change records: logical decoding messages and transaction
--    BEGIN/END metadata are ignored; nothing is written.
-- ---------------------------------------------------------------------------
SELECT * FROM fx_totals();
SELECT fx_try('pg-message-transactional.payload-only.json');
SELECT fx_try('pg-message-non-transactional.payload-only.json');
SELECT fx_try('pg-transaction-begin.json');
SELECT fx_try('pg-transaction-end.json');
-- Also with a target given.
SELECT fx_try('pg-transaction-begin.json', 'fx_customers');
SELECT fx_try('pg-message-transactional.payload-only.json', 'fx_customers');
SELECT * FROM fx_totals();

-- ---------------------------------------------------------------------------
-- 4. Events without source.lsn / source.table: the incremental-snapshot read
--    and the transaction-block example.  Without a target: error naming
--    source.table; with a target but no version: error naming source.lsn;
--    with a target whose mapping orders by a column: applied.
-- ---------------------------------------------------------------------------
CREATE TABLE fx_incremental (pk int PRIMARY KEY, value text);
SELECT fx_try('pg-read-incremental-snapshot.payload-only.json');
SELECT fx_try('pg-read-incremental-snapshot.payload-only.json', 'fx_incremental');
SELECT * FROM fx_totals();
-- The only orderable column the example has is its key; order by it.
SELECT target, version_column FROM cdc.register_mapping('fx_incremental', version_column => 'pk');
SELECT fx_try('pg-read-incremental-snapshot.payload-only.json', 'fx_incremental');
SELECT fx_try('pg-read-incremental-snapshot.payload-only.json', 'fx_incremental');
SELECT * FROM fx_incremental;
SELECT entity_key, source_name, version FROM cdc.entities WHERE target = 'fx_incremental'::regclass;
SELECT applied, duplicate, snapshot_rows, outbox_rows FROM cdc.stats WHERE target = 'fx_incremental'::regclass;

-- The transaction-block example ("source": {} in the docs; total_order as
-- the string "1").
CREATE TABLE fx_txblock (pk int PRIMARY KEY, aa int);
SELECT fx_try('pg-create-with-transaction-block.payload-only.json');
SELECT fx_try('pg-create-with-transaction-block.payload-only.json', 'fx_txblock');
SELECT count(*) AS rows FROM fx_txblock;
SELECT target, version_column FROM cdc.register_mapping('fx_txblock', version_column => 'aa');
SELECT fx_try('pg-create-with-transaction-block.payload-only.json', 'fx_txblock');
SELECT * FROM fx_txblock;
-- no source.lsn and a version_column mapping: the derived key ends with the version (aa = 1)
SELECT * FROM ledger_has('fx_txblock', 'dbz:::.:c:::1:{"pk": "2"}:1');
SELECT entity_key, version FROM cdc.entities WHERE target = 'fx_txblock'::regclass;

-- ---------------------------------------------------------------------------
-- 5. Not change events: the Kafka KEY of a customers record and the JDBC
--    sink field schemas / connector configuration.  Given as a value, each is
--    rejected with 22023 "field "op" is missing"; nothing is written.
-- ---------------------------------------------------------------------------
SELECT * FROM fx_totals();
SELECT fx_try('pg-key-customers-with-schema.json');
SELECT fx_try('pg-key-customers-with-schema.json', 'fx_customers');
SELECT fx_try('jdbc-field-schema-primitive-int64.json', 'fx_customers');
SELECT fx_try('jdbc-field-schema-logical-date.json', 'fx_customers');
SELECT fx_try('jdbc-field-schema-propagated-source-column-type.json', 'fx_customers');
SELECT fx_try('jdbc-sink-connector-config.json', 'fx_customers');
SELECT * FROM fx_totals();
SELECT count(*) AS rows FROM fx_customers;

-- ---------------------------------------------------------------------------
-- Coverage: every fixture file was exercised.
-- ---------------------------------------------------------------------------
SELECT name AS not_exercised FROM fx_files EXCEPT SELECT name FROM fx_seen ORDER BY 1;
SELECT count(*) AS exercised FROM fx_seen;

-- Leave no mapping for public.customers behind for later suites.
SELECT cdc.unregister_mapping('fx_customers');

--
-- audit: the row hash and range hash (cdc.range_hash_sql, cdc.range_hash),
-- cdc.audit and cdc.resync end to end, and every argument error with its
-- SQLSTATE (docs/audit.md).  No worker runs here: the subscription's source
-- is this very database (a publication of table src, mapped to target
-- dst), and the status row says the worker applied everything, so the
-- audit's wait for the destination returns at once.  The worker path
-- (audits while the stream runs) is test/t/051_audit.pl.
--
\set SHOW_CONTEXT never

-- The row hash: md5 of the row's text in UTF-8; the range hash: count and
-- sum of the first 64 bits of the row hashes.  The statement is the same
-- for any table; bounds are literals; ONLY for a plain table.
SELECT cdc.range_hash_sql('public', 'Orders', ARRAY['id', 'note'], ARRAY['id'], after => ARRAY['10'], up_to => ARRAY['20']);
SELECT cdc.range_hash_sql('s', 't', ARRAY['a', 'b', 'c'], ARRAY['a', 'b'], after => ARRAY['1', 'it''s'],
                          row_filter => '(c > 0)', only_table => false);

CREATE TABLE hashed (id int PRIMARY KEY, note text, amount numeric(10,2), at timestamptz, f float8, b bytea, tags text[]);
INSERT INTO hashed VALUES (1, 'one', 1.50, '2024-01-02 03:04:05+01', 0.1, '\x00ff', '{a,"b c"}'),
                          (2, NULL, 2, '2024-06-30 23:59:59.5+00', 1e300, '\x', '{}'),
                          (3, 'quote " and \ backslash', -3.25, NULL, 'NaN', NULL, NULL);
-- the whole table, by hand and by cdc.range_hash: the same
SELECT count(*) AS rows,
       sum(('x' || substr(md5(convert_to(ROW(id, note, amount, at, f, b, tags)::text, 'UTF8')), 1, 16))::bit(64)::bigint::numeric) AS hash
  FROM hashed h;
SELECT * FROM cdc.range_hash('hashed');
-- additive over ranges: (NULL, 1] + (1, 3] = everything
SELECT (SELECT hash FROM cdc.range_hash('hashed', up_to => ARRAY['1'])) +
       (SELECT hash FROM cdc.range_hash('hashed', after => ARRAY['1'], up_to => ARRAY['3']))
     = (SELECT hash FROM cdc.range_hash('hashed')) AS additive;
-- independent of the session's settings (the function pins them)
SET datestyle = 'SQL, DMY';
SET timezone = 'Asia/Kolkata';
SET extra_float_digits = 0;
SET bytea_output = 'escape';
SET intervalstyle = 'sql_standard';
SELECT * FROM cdc.range_hash('hashed');
RESET datestyle;
RESET timezone;
RESET extra_float_digits;
RESET bytea_output;
RESET intervalstyle;
-- the statement of cdc.range_hash_sql, run by hand under the pinned settings, gives the same
BEGIN;
SET LOCAL datestyle = 'ISO';
SET LOCAL intervalstyle = 'postgres';
SET LOCAL extra_float_digits = 3;
SET LOCAL timezone = 'UTC';
SET LOCAL bytea_output = 'hex';
SET LOCAL lc_monetary = 'C';
SELECT cdc.range_hash_sql('public', 'hashed', ARRAY['id', 'note', 'amount', 'at', 'f', 'b', 'tags'], ARRAY['id']) AS sql \gset
:sql;
COMMIT;
-- explicit columns and key columns
SELECT * FROM cdc.range_hash('hashed', columns => ARRAY['id', 'note'], key_columns => ARRAY['id']);

-- errors
SELECT cdc.range_hash_sql(NULL, 't', ARRAY['a'], ARRAY['a']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.range_hash_sql('s', 't', ARRAY[]::text[], ARRAY['a']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.range_hash_sql('s', 't', ARRAY['a'], ARRAY[NULL]::text[]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.range_hash_sql('s', 't', ARRAY['a', 'b'], ARRAY['a', 'b'], after => ARRAY['1']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.range_hash(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.range_hash('pg_stat_activity');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CREATE TABLE keyless (a int);
SELECT * FROM cdc.range_hash('keyless');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.range_hash('hashed', columns => ARRAY['nope']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- ---------------------------------------------------------------------------
-- A subscription whose source is this database: src is published (with a
-- row filter and a column list), dst is its destination (per mapping).
-- ---------------------------------------------------------------------------
CREATE TABLE src (id int PRIMARY KEY, region text, note text, secret text);
CREATE TABLE dst (id int PRIMARY KEY, region text, note text, local text DEFAULT 'kept');
INSERT INTO src SELECT g, CASE WHEN g % 4 = 0 THEN 'us' ELSE 'eu' END, 'n' || g, 's' || g FROM generate_series(1, 2000) g;
INSERT INTO dst (id, region, note) SELECT id, region, note FROM src WHERE region = 'eu';
CREATE PUBLICATION loop_pub FOR TABLE src (id, region, note) WHERE (region = 'eu');
-- a handler mapping: the resync's calls are visible
CREATE TABLE handler_log (op text, id int, is_snapshot boolean);
CREATE FUNCTION log_change(op text, old dst, new dst, meta jsonb) RETURNS void LANGUAGE sql SET search_path = public, pg_temp AS
  $$ INSERT INTO handler_log VALUES (op, coalesce(new.id, old.id), (meta->>'is_snapshot')::boolean) $$;
SELECT target, source_table, outbox, mode
  FROM cdc.register_mapping('dst', source_schema => 'public', source_table => 'src', source_name => 'loop', outbox => true,
                            mode => 'handler', handler => 'log_change(text, dst, dst, jsonb)');
SELECT format('host=%s port=%s dbname=%s', split_part(current_setting('unix_socket_directories'), ',', 1),
              current_setting('port'), current_database()) AS conninfo \gset
SELECT cdc.create_subscription('loop', :'conninfo', ARRAY['loop_pub'], create_slot => false, enabled => false) > 0 AS created;

-- not copied yet: nothing to compare with
CALL cdc.audit('loop');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE cdc.subscription SET slot_ready = true WHERE name = 'loop';
-- its tables, as the worker records them (cdc.subscription_rel): none yet,
-- then one waiting for its copy, then copied
CALL cdc.audit('loop');
INSERT INTO cdc.subscription_rel (subid, schema_name, table_name, state)
SELECT subid, 'public', 'src', 'init' FROM cdc.subscription WHERE name = 'loop';
CALL cdc.audit('loop', 'dst');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE cdc.subscription_rel SET state = 'ready', sync_lsn = '0/1' WHERE table_name = 'src';
-- disabled: its worker cannot catch up (the messages name source positions)
\set VERBOSITY sqlstate
CALL cdc.audit('loop');
UPDATE cdc.subscription SET enabled = true WHERE name = 'loop';
UPDATE cdc.subscription_state SET state = 'starting' WHERE subid = (SELECT subid FROM cdc.subscription WHERE name = 'loop');
-- enabled, but nothing applied: the wait runs out
CALL cdc.audit('loop', wait_timeout => '0');
\set VERBOSITY default
SELECT kind, target, state, tables_done, tables_total, finished_at IS NULL AS unfinished FROM cdc.audit_status ORDER BY id;
-- pretend the worker confirmed everything the source has
UPDATE cdc.subscription_state SET flushed_lsn = 'FFFFFFFF/0', state = 'streaming'
 WHERE subid = (SELECT subid FROM cdc.subscription WHERE name = 'loop');
ANALYZE src;

-- equal: no findings; every published row compared, pages of 300 rows
CALL cdc.audit('loop', page_rows => 300, leaf_rows => 16);
SELECT kind, subscription, target, current_target, state, source_lsn IS NOT NULL AS at_a_position, tables_done, tables_total,
       rows_done, rows_estimate, ranges_done, findings, unsettled, finished_at IS NOT NULL AS finished
  FROM cdc.audit_status WHERE id = (SELECT max(id) FROM cdc.audit_runs);

-- what the destination gets wrong by hand
UPDATE dst SET note = 'changed' WHERE id IN (5, 1001);
UPDATE dst SET local = 'not published' WHERE id = 6;
DELETE FROM dst WHERE id IN (1, 1998);
INSERT INTO dst (id, region, note) VALUES (0, 'eu', 'never on the source'), (5000, 'eu', 'after the last key');
INSERT INTO dst (id, region, note) VALUES (8, 'us', 'n8');   -- the source has it, outside the row filter
CALL cdc.audit('loop', page_rows => 300, leaf_rows => 16);
SELECT f.target, f.key, f.kind, f.source_hash IS NOT NULL AS src_hash, f.dest_hash IS NOT NULL AS dst_hash,
       f.source_hash = md5(convert_to(ROW(s.id, s.region, s.note)::text, 'UTF8')) AS src_hash_is_the_row_hash,
       f.detail, f.source_lsn IS NOT NULL AS at_a_position, f.repaired_at
  FROM cdc.audit_findings f LEFT JOIN src s ON s.id = (f.key->>'id')::int
 WHERE f.audit_id = (SELECT max(id) FROM cdc.audit_runs) ORDER BY (f.key->>'id')::int;
SELECT findings, unsettled FROM cdc.audit_status WHERE id = (SELECT max(id) FROM cdc.audit_runs);
SELECT max(id) AS audit_id FROM cdc.audit_runs \gset

-- resync of the audit's findings: through the engine, as snapshot rows or deletes at the snapshot
TRUNCATE handler_log;
CALL cdc.resync('loop', audit => :audit_id);
SELECT (f.key->>'id')::int AS id, f.kind, f.repair_outcome, f.repaired_at IS NOT NULL AS repaired,
       f.repair_lsn IS NOT NULL AS at_a_position
  FROM cdc.audit_findings f WHERE f.audit_id = :audit_id ORDER BY 1;
-- the rows now mirror the source; the unpublished column keeps its value
SELECT d.id, d.region, d.note, d.local FROM dst d WHERE d.id IN (0, 1, 5, 6, 8, 1001, 1998, 5000) ORDER BY d.id;
-- entity records at the snapshot's position, tombstones for the removed keys
SELECT (e.entity_key->>'id')::int AS id, e.is_tombstone, e.version[1] AS epoch, e.version[3:4] AS position_in_snapshot,
       e.source_name LIKE 'pg:%' AS worker_source
  FROM cdc.entities e WHERE e.target = 'dst'::regclass ORDER BY 1;
-- no outbox rows; the handler saw snapshot changes: r for the rows written, d for the removed ones
SELECT count(*) AS outbox_rows FROM cdc.outbox WHERE target = 'dst'::regclass;
SELECT op, id, is_snapshot FROM handler_log ORDER BY id;
SELECT applied, snapshot_rows, outbox_rows, stale, duplicate FROM cdc.stats WHERE target = 'dst'::regclass;
SELECT kind, state, of_audit = :audit_id AS of_that_audit, rows_done, rows_estimate, repaired, unchanged
  FROM cdc.audit_status WHERE id = (SELECT max(id) FROM cdc.audit_runs);
-- a second resync of the same audit has nothing left to do
CALL cdc.resync('loop', audit => :audit_id);
-- and a new audit finds nothing
CALL cdc.audit('loop', 'dst', page_rows => 300, leaf_rows => 16);
SELECT findings FROM cdc.audit_status WHERE id = (SELECT max(id) FROM cdc.audit_runs);

-- resync by keys and by key range: only what differs is written
UPDATE dst SET note = 'again' WHERE id IN (10, 11, 50);
DELETE FROM dst WHERE id = 13;
TRUNCATE handler_log;
CALL cdc.resync('loop', 'dst', keys => '[10, {"id": "13"}, 14]');
SELECT op, id, is_snapshot FROM handler_log ORDER BY id;
SELECT id, note FROM dst WHERE id IN (10, 11, 13, 14, 50) ORDER BY id;
TRUNCATE handler_log;
CALL cdc.resync('loop', 'dst', from_key => '{"id": 11}', to_key => '50', page_rows => 7, leaf_rows => 2);
SELECT op, id, is_snapshot FROM handler_log ORDER BY id;
SELECT rows_done, repaired, unchanged FROM cdc.audit_status WHERE id = (SELECT max(id) FROM cdc.audit_runs);
-- a key the source does not publish and the destination lacks: nothing to do
CALL cdc.resync('loop', 'dst', keys => '[4, 99999]');
-- the whole table: nothing differs
CALL cdc.resync('loop', 'dst');

-- neither depends on the caller's search_path: functions and operators
-- planted ahead of pg_catalog change nothing
CREATE SCHEMA trap;
CREATE FUNCTION trap.md5(text) RETURNS text LANGUAGE sql AS $$ SELECT 'trapped' $$;
CREATE FUNCTION trap.format(text, text) RETURNS text LANGUAGE sql AS $$ SELECT 'trapped' $$;
CREATE FUNCTION trap.eq(int, int) RETURNS boolean LANGUAGE sql AS $$ SELECT false $$;
CREATE OPERATOR trap.= (LEFTARG = int, RIGHTARG = int, FUNCTION = trap.eq);
CREATE FUNCTION trap.gt(int, int) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR trap.> (LEFTARG = int, RIGHTARG = int, FUNCTION = trap.gt);
UPDATE dst SET note = 'trap' WHERE id = 17;
SET search_path = trap, public, pg_catalog;
CALL cdc.audit('loop', 'dst', page_rows => 300, leaf_rows => 16);
SELECT max(id) AS trap_audit FROM cdc.audit_runs \gset
SELECT key, kind FROM cdc.audit_findings WHERE audit_id = :trap_audit;
CALL cdc.resync('loop', audit => :trap_audit);
RESET search_path;
SELECT id, note FROM dst WHERE id = 17;
DROP SCHEMA trap CASCADE;

-- argument errors, each with its SQLSTATE
CALL cdc.audit(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.audit('loop', page_rows => 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.audit('loop', leaf_rows => 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.audit('loop', wait_timeout => '-1 s');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.audit('nosuch');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
BEGIN;
CALL cdc.audit('loop');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
ROLLBACK;
CALL cdc.audit('loop', 'keyless');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.audit('loop', 'hashed');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a history table (one row per source change) is no mirror: neither audited nor resynced
SELECT cdc.create_history_table('src_log', 'src');
SELECT target, mode FROM cdc.register_mapping('src_log', source_table => 'src_history', key_columns => '{id}', mode => 'history');
CALL cdc.audit('loop', 'src_log');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', 'src_log', keys => '[1]');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS history_rows FROM src_log;
SELECT cdc.unregister_mapping('src_log');
DROP TABLE src_log;
CALL cdc.resync(NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', 'dst', keys => '[1]', from_key => '1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', 'dst', keys => '[1]', audit => 1);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', 'dst', keys => '[]');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', 'dst', keys => '[{"nope": 1}]');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', 'dst', from_key => '[1]');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', audit => 999999);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT max(id) AS resync_id FROM cdc.audit_runs WHERE kind = 'resync' \gset
CALL cdc.resync('loop', audit => :resync_id);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('nosuch', 'dst');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- each bad argument its own error (fresh-user review h3): an unknown
-- subscription without a target was 'target must not be NULL' (22004), and
-- a target given as OID 0 ('-'::regclass) was taken for NULL (resync:
-- 22004; audit: every table of the subscription)
CALL cdc.resync('nosuch');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', '-'::regclass);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', 0::oid::regclass, audit => :audit_id);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.audit('loop', '-'::regclass);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', 'nosuch_table');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', 'dst_pkey');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a source that cannot be reached: the connection error, without the password
UPDATE cdc.subscription SET conninfo = 'host=127.0.0.1 port=1 password=hunter2 connect_timeout=2' WHERE name = 'loop';
CALL cdc.audit('loop');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a role that is not a superuser, even with EXECUTE
CREATE ROLE audit_role;
GRANT EXECUTE ON PROCEDURE cdc.audit(text, regclass, integer, integer, interval, bigint, bigint) TO audit_role;
SET ROLE audit_role;
CALL cdc.audit('loop');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('loop', 'dst');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) > 0 AS status_readable FROM cdc.audit_status;
SELECT count(*) FROM cdc.audit_findings;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;

-- the status view's arithmetic on a run in progress (this backend, its statement started before the run)
INSERT INTO cdc.audit_runs (kind, subscription, pid, started_at, updated_at, rows_estimate, rows_done)
VALUES ('audit', 'loop', pg_backend_pid(), now() + interval '1 min', now() + interval '1 min' + interval '10 s', 1000, 250);
SELECT state, percent, rows_per_second, time_left, elapsed FROM cdc.audit_status WHERE id = (SELECT max(id) FROM cdc.audit_runs);
-- a run whose backend went away without finishing
UPDATE cdc.audit_runs SET pid = 0 WHERE id = (SELECT max(id) FROM cdc.audit_runs);
SELECT state FROM cdc.audit_status WHERE id = (SELECT max(id) FROM cdc.audit_runs);
-- findings: kinds are checked, and go with their run
\set VERBOSITY terse
INSERT INTO cdc.audit_findings (audit_id, subscription, target, key, kind, source_lsn)
VALUES ((SELECT max(id) FROM cdc.audit_runs), 'loop', 'dst', '{"id": "1"}', 'odd', '0/0');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY default
DELETE FROM cdc.audit_runs WHERE id = :audit_id;
SELECT count(*) AS findings_of_deleted_run FROM cdc.audit_findings WHERE audit_id = :audit_id;

SELECT cdc.drop_subscription('loop');
DROP PUBLICATION loop_pub;
SELECT cdc.unregister_mapping('dst');
DROP FUNCTION log_change(text, dst, dst, jsonb);
DROP TABLE hashed, keyless, src, dst, handler_log;
REVOKE EXECUTE ON PROCEDURE cdc.audit(text, regclass, integer, integer, interval, bigint, bigint) FROM audit_role;
DROP ROLE audit_role;

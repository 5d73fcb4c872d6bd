--
-- resync_key_values (fresh-user run h4): a key given to cdc.resync that its
-- column's type refuses ("abc", 1.5, true or 99999999999 for an integer
-- key, in keys, from_key or to_key) was sent to the source and came back as
-- 'the source failed "SELECT cdc_keys.cdc_ord, ...": ERROR: invalid input
-- syntax for type integer: "abc"', naming neither the argument nor the
-- column.  Now each value is read with its destination column's type before
-- the source is touched: the input function's error and SQLSTATE, prefixed
-- with the argument (keys[N], from_key, to_key) and the column.  The
-- subscription's conninfo leads nowhere: none of these reaches the source.
-- Objects: rkv_src, rkv_dst, rkv_pub, subscription rkv.
--
CREATE TABLE rkv_src (id int PRIMARY KEY, k2 date NOT NULL, note text);
CREATE TABLE rkv_dst (id int, k2 date, note text, PRIMARY KEY (id, k2));
CREATE PUBLICATION rkv_pub FOR TABLE rkv_src;
SELECT target FROM cdc.register_mapping('rkv_dst', source_schema => 'public', source_table => 'rkv_src', source_name => 'rkv');
SELECT cdc.create_subscription('rkv', 'host=127.0.0.1 port=1 connect_timeout=2', ARRAY['rkv_pub'],
                               create_slot => false, enabled => false) > 0 AS created;
UPDATE cdc.subscription SET slot_ready = true WHERE name = 'rkv';
INSERT INTO cdc.subscription_rel (subid, schema_name, table_name, state, sync_lsn)
SELECT subid, 'public', 'rkv_src', 'ready', '0/1' FROM cdc.subscription WHERE name = 'rkv';
\set VERBOSITY default
CALL cdc.resync('rkv', 'rkv_dst', keys => '[{"id": "abc", "k2": "2026-01-01"}]');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('rkv', 'rkv_dst', keys => '[{"id": 1, "k2": "2026-01-01"}, {"id": 1.5, "k2": "2026-01-01"}]');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('rkv', 'rkv_dst', keys => '[{"id": true, "k2": "2026-01-01"}]');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('rkv', 'rkv_dst', keys => '[{"id": 99999999999, "k2": "2026-01-01"}]');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('rkv', 'rkv_dst', keys => '[{"id": 1, "k2": "2026-02-30"}]');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a long value is cut in the message
CALL cdc.resync('rkv', 'rkv_dst', keys => jsonb_build_array(jsonb_build_object('id', repeat('9', 400), 'k2', '2026-01-01')));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('rkv', 'rkv_dst', from_key => '{"id": "x", "k2": "2026-01-01"}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CALL cdc.resync('rkv', 'rkv_dst', from_key => '{"id": 1, "k2": "2026-01-01"}', to_key => '{"id": 2, "k2": "yesterday-ish"}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- valid keys get as far as the source, which cannot be reached
\set VERBOSITY sqlstate
CALL cdc.resync('rkv', 'rkv_dst', keys => '[{"id": 1, "k2": "2026-01-01"}]');
\set VERBOSITY default
-- nothing was written
SELECT count(*) AS rows FROM rkv_dst;
SELECT count(*) AS entities FROM cdc.entities WHERE target = 'rkv_dst'::regclass;
SELECT count(*) AS resync_runs FROM cdc.audit_runs WHERE kind = 'resync' AND subscription = 'rkv';
SELECT cdc.drop_subscription('rkv');
SELECT cdc.unregister_mapping('rkv_dst');
DROP PUBLICATION rkv_pub;
DROP TABLE rkv_src, rkv_dst;

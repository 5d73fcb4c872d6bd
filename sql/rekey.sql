--
-- rekey: changing the key definition and the source name under stored
-- per-entity state (shared/scenarios.md B36 (c); issue 12 item 9).
--

-- ===========================================================================
-- B36 (c): re-keying the mapping from the primary key to another unique key
-- ===========================================================================
CREATE TABLE k (id int PRIMARY KEY, email text UNIQUE, v int);
SELECT target, key_columns FROM cdc.register_mapping('k', outbox => true);
SELECT cdc_apply(dbz('c', 'k', '{"id": 1, "email": "x@example.org", "v": 1}', lsn => '0/64', tx => 10)) AS d1;
SELECT cdc_apply(dbz('u', 'k', '{"id": 1, "email": "x@example.org", "v": 2}', lsn => '0/C8', tx => 11)) AS d2;
-- a second row, deleted: its tombstone cannot be re-keyed (the row is gone)
SELECT cdc_apply(dbz('c', 'k', '{"id": 2, "email": "y@example.org", "v": 1}', lsn => '0/12C', tx => 12)) AS d3;
SELECT cdc_apply(dbz('d', 'k', NULL, lsn => '0/190', tx => 13, before => '{"id": 2, "email": "y@example.org", "v": 1}')) AS d4;
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'k'::regclass ORDER BY entity_key::text;

-- re-key to {email}: the live record moves to its row's email, the tombstone
-- becomes the prune watermark
SELECT target, key_columns FROM cdc.register_mapping('k', outbox => true, key_columns => '{email}');
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'k'::regclass ORDER BY entity_key::text;
SELECT v0, v1, v2, v3 FROM cdc.prune_watermark WHERE target = 'k'::regclass;

-- d1 redelivered under a new delivery key (a rebalance): stale, v stays 2
SELECT cdc_apply(dbz('c', 'k', '{"id": 1, "email": "x@example.org", "v": 1}', lsn => '0/64', tx => 10),
                 delivery_key => 'topic-k:1:0:17') AS d1_redelivered;
-- d3 redelivered: its entity has no record now, and its version is below the
-- watermark: expired (refused by default), the deleted row does not come back
SELECT cdc_apply(dbz('c', 'k', '{"id": 2, "email": "y@example.org", "v": 1}', lsn => '0/12C', tx => 12),
                 delivery_key => 'topic-k:1:0:18') AS d3_redelivered;
-- a newer change under the new key applies
SELECT cdc_apply(dbz('u', 'k', '{"id": 1, "email": "x@example.org", "v": 3}', lsn => '0/1F4', tx => 14)) AS d5;
SELECT * FROM k ORDER BY id;
SELECT count(*) AS outbox_rows FROM cdc.outbox WHERE target = 'k'::regclass;

-- and back to the primary key: the record moves again
SELECT target, key_columns FROM cdc.register_mapping('k', outbox => true);
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'k'::regclass ORDER BY entity_key::text;
SELECT cdc_apply(dbz('u', 'k', '{"id": 1, "email": "x@example.org", "v": 2}', lsn => '0/C8', tx => 11),
                 delivery_key => 'topic-k:1:0:19') AS d2_redelivered;
SELECT * FROM k ORDER BY id;

-- ===========================================================================
-- Keys that swap: one row's old key is another row's new key
-- ===========================================================================
CREATE TABLE ksw (a int PRIMARY KEY, b int NOT NULL UNIQUE, v text);
SELECT target FROM cdc.register_mapping('ksw');
SELECT cdc_apply(dbz('c', 'ksw', '{"a": 1, "b": 2, "v": "one"}', lsn => '0/100', tx => 20)) AS s1;
SELECT cdc_apply(dbz('c', 'ksw', '{"a": 2, "b": 1, "v": "two"}', lsn => '0/200', tx => 21)) AS s2;
SELECT target FROM cdc.register_mapping('ksw', key_columns => '{b}');
SELECT entity_key, version FROM cdc.entities WHERE target = 'ksw'::regclass ORDER BY entity_key::text;
-- the older image of row a=2 (now keyed b=1) is stale
SELECT cdc_apply(dbz('c', 'ksw', '{"a": 2, "b": 1, "v": "two-old"}', lsn => '0/180', tx => 19),
                 delivery_key => 'x:1') AS older_b1;
SELECT * FROM ksw ORDER BY a;

-- ===========================================================================
-- A key of two columns (text[] form, in key_columns order)
-- ===========================================================================
CREATE TABLE k2 (id int PRIMARY KEY, region text NOT NULL, code text NOT NULL, v int, UNIQUE (region, code));
SELECT target FROM cdc.register_mapping('k2');
SELECT cdc_apply(dbz('c', 'k2', '{"id": 7, "region": "eu", "code": "a b", "v": 1}', lsn => '0/300', tx => 30)) AS t1;
SELECT target FROM cdc.register_mapping('k2', key_columns => '{region,code}');
SELECT entity_key, version FROM cdc.entities WHERE target = 'k2'::regclass;
SELECT cdc_apply(dbz('c', 'k2', '{"id": 7, "region": "eu", "code": "a b", "v": 1}', lsn => '0/300', tx => 30),
                 delivery_key => 'x:2') AS t1_redelivered;
SELECT cdc_apply(dbz('u', 'k2', '{"id": 7, "region": "eu", "code": "a b", "v": 2}', lsn => '0/400', tx => 31)) AS t2;
SELECT * FROM k2;

-- A timestamptz key, re-keyed from a session with another TimeZone and
-- DateStyle: the records move (entity keys are printed in UTC and ISO
-- style whatever the session's settings), and an older change is stale.
CREATE TABLE kt (id int PRIMARY KEY, at timestamptz NOT NULL UNIQUE, v int);
SELECT target FROM cdc.register_mapping('kt');
SELECT cdc_apply(dbz('c', 'kt', '{"id": 1, "at": "2024-03-01T10:00:00Z", "v": 1}', lsn => '0/600', tx => 50)) AS kt1;
SET TimeZone = 'America/New_York';
SET DateStyle = 'SQL, DMY';
SELECT target FROM cdc.register_mapping('kt', key_columns => '{at}');
SELECT key FROM cdc.entity_state WHERE target = 'kt'::regclass;
SELECT cdc_apply(dbz('u', 'kt', '{"id": 1, "at": "2024-03-01T10:00:00Z", "v": 0}', lsn => '0/5FF', tx => 49)) AS kt_older;
RESET TimeZone;
RESET DateStyle;
SELECT id, v FROM kt;
-- a numeric key column: records are named without insignificant trailing
-- zeros (1.50 is 1.5), by the engine and by the re-key alike
CREATE TABLE kd (id int PRIMARY KEY, amount numeric NOT NULL UNIQUE, v int);
SELECT target FROM cdc.register_mapping('kd');
SELECT cdc_apply(dbz('c', 'kd', '{"id": 1, "amount": 1.50, "v": 1}', lsn => '0/700', tx => 55)) AS kd1;
SELECT target FROM cdc.register_mapping('kd', key_columns => '{amount}');
SELECT key FROM cdc.entity_state WHERE target = 'kd'::regclass;
SELECT cdc_apply(dbz('u', 'kd', '{"id": 1, "amount": 1.5, "v": 0}', lsn => '0/6FF', tx => 54)) AS kd_older;
SELECT id, amount, v FROM kd;

-- ===========================================================================
-- Refused: a row without a value in the new key (nothing changes)
-- ===========================================================================
CREATE TABLE kn (id int PRIMARY KEY, email text UNIQUE);
SELECT target FROM cdc.register_mapping('kn');
SELECT cdc_apply(dbz('c', 'kn', '{"id": 1, "email": null}', lsn => '0/500', tx => 40)) AS n1;
\set VERBOSITY default
SELECT target FROM cdc.register_mapping('kn', key_columns => '{email}');
\set VERBOSITY terse
SELECT key_columns FROM cdc.mapping WHERE target = 'kn'::regclass;
SELECT entity_key FROM cdc.entities WHERE target = 'kn'::regclass;

-- ===========================================================================
-- Renaming a Debezium source (topic.prefix changed)
-- ===========================================================================
CREATE TABLE rn (id int PRIMARY KEY, v int);
SELECT target FROM cdc.register_mapping('rn', outbox => true);
SELECT cdc_apply(dbz('c', 'rn', '{"id": 1, "v": 1}', lsn => '0/1000', tx => 50, src => 'shop_v1')) AS r1;
SELECT cdc_apply(dbz('c', 'rn', '{"id": 2, "v": 1}', lsn => '0/1100', tx => 51, src => 'shop_v1')) AS r2;
SELECT cdc_apply(dbz('d', 'rn', NULL, lsn => '0/1200', tx => 52, src => 'shop_v1', before => '{"id": 2}')) AS r3;
-- the connector is renamed: without a rename, an update of an existing row is a conflict
SELECT cdc_apply(dbz('u', 'rn', '{"id": 1, "v": 2}', lsn => '0/2000', tx => 60, src => 'shop_v2')) AS u_before_rename;
-- and a new row gets records of the new name
SELECT cdc_apply(dbz('c', 'rn', '{"id": 3, "v": 1}', lsn => '0/2100', tx => 61, src => 'shop_v2')) AS c_before_rename;
SELECT cdc.rename_source('shop_v1', 'shop_v2');
SELECT old_name, new_name, merged FROM cdc.source_renames;
SELECT entity_key, source_name, is_tombstone FROM cdc.entities WHERE target = 'rn'::regclass ORDER BY entity_key::text;
-- now the update applies, an older replay under the new name is stale, and
-- the deleted row stays deleted
SELECT cdc_apply(dbz('u', 'rn', '{"id": 1, "v": 2}', lsn => '0/2000', tx => 60, src => 'shop_v2'), delivery_key => 'r:1') AS u_after_rename;
SELECT cdc_apply(dbz('c', 'rn', '{"id": 1, "v": 1}', lsn => '0/1000', tx => 50, src => 'shop_v2')) AS r1_replayed;
SELECT cdc_apply(dbz('c', 'rn', '{"id": 2, "v": 1}', lsn => '0/1100', tx => 51, src => 'shop_v2')) AS r2_replayed;
SELECT * FROM rn ORDER BY id;
SELECT count(*) AS outbox_rows FROM cdc.outbox WHERE target = 'rn'::regclass;
SELECT count(*) AS conflicts FROM cdc.conflicts WHERE target = 'rn'::regclass;
-- a mapping restricted to the old name (source_name, which the engine
-- enforces: docs/security.md) follows the rename, so its table accepts the
-- renamed connector's events
CREATE TABLE rn_named (id int PRIMARY KEY, v int);
SELECT target, source_name FROM cdc.register_mapping('rn_named', source_name => 'shop_w1');
SELECT cdc_apply(dbz('c', 'rn_named', '{"id": 1, "v": 1}', lsn => '0/3000', tx => 70, src => 'shop_w1')) AS w1;
SELECT cdc.rename_source('shop_w1', 'shop_w2');
SELECT source_name FROM cdc.mapping WHERE target = 'rn_named'::regclass;
SELECT cdc_apply(dbz('u', 'rn_named', '{"id": 1, "v": 2}', lsn => '0/3100', tx => 71, src => 'shop_w2')) AS w2_update;
SELECT cdc_apply(dbz('u', 'rn_named', '{"id": 1, "v": 9}', lsn => '0/3200', tx => 72, src => 'shop_w1'), 'rn_named');
SELECT * FROM rn_named;
-- bad calls
SELECT cdc.rename_source('nope', 'shop_v3');
SELECT cdc.rename_source('shop_v2', 'shop_v2');
SELECT cdc.rename_source('shop_v2', 'pg:123');
-- onto a name that already has a mapping of the same source table: two
-- mappings would claim one source table (mapping_source_idx).  It failed
-- with the index's raw 23505; now it is refused before anything moves,
-- naming both source names, the source table and both targets, and nothing
-- is renamed or merged
CREATE TABLE rn_dup_a (id int PRIMARY KEY, v int);
CREATE TABLE rn_dup_b (id int PRIMARY KEY, v int);
SELECT target FROM cdc.register_mapping('rn_dup_a', source_name => 'shop_x1', source_table => 'rn_dup');
SELECT target FROM cdc.register_mapping('rn_dup_b', source_name => 'shop_x2', source_table => 'rn_dup');
SELECT cdc_apply(dbz('c', 'rn_dup', '{"id": 1, "v": 1}', lsn => '0/4000', tx => 80, src => 'shop_x1')) AS x1;
SELECT cdc_apply(dbz('c', 'rn_dup', '{"id": 2, "v": 1}', lsn => '0/4100', tx => 81, src => 'shop_x2')) AS x2;
\set VERBOSITY default
SELECT cdc.rename_source('shop_x1', 'shop_x2');
\set VERBOSITY terse
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT target, source_name FROM cdc.mapping WHERE target IN ('rn_dup_a'::regclass, 'rn_dup_b'::regclass) ORDER BY target::text;
SELECT name FROM cdc.source WHERE name LIKE 'shop_x%' ORDER BY name;
SELECT target, entity_key, source_name FROM cdc.entities
 WHERE target IN ('rn_dup_a'::regclass, 'rn_dup_b'::regclass) ORDER BY target::text, entity_key::text;
SELECT count(*) AS renames FROM cdc.source_renames WHERE old_name = 'shop_x1';
-- with one of the two mappings removed, the rename goes through
SELECT cdc.unregister_mapping('rn_dup_b');
SELECT cdc.rename_source('shop_x1', 'shop_x2');
SELECT target, source_name FROM cdc.mapping WHERE target IN ('rn_dup_a'::regclass, 'rn_dup_b'::regclass) ORDER BY target::text;
SELECT old_name, new_name, merged FROM cdc.source_renames WHERE old_name = 'shop_x1';
DROP TABLE rn_dup_a, rn_dup_b;

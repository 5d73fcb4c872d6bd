--
-- rekey_collation: re-keying a target whose key columns have a collation of
-- their own (not the database default).  cdc.entity_state.key is COLLATE
-- "C"; cdc._rekey_entities joins it with cdc._key_text(t.<column>), whose
-- result takes the column's collation, so the join's equality must not
-- depend on which collation wins (review of 94ea470).  "POSIX" is a
-- collation other than "C" on every platform.  Tables: rkc_*.
--
CREATE TABLE rkc_one (code text COLLATE "POSIX" PRIMARY KEY, name text COLLATE "POSIX" NOT NULL UNIQUE, n int);
SELECT target, key_columns FROM cdc.register_mapping('rkc_one');
SELECT applied FROM cdc_apply_batch(jsonb_build_array(
  dbz('c', 'rkc_one', '{"code": "a", "name": "Ève", "n": 1}', lsn => '0/1000', tx => 1),
  dbz('c', 'rkc_one', '{"code": "B", "name": "eve", "n": 2}', lsn => '0/1010', tx => 2)));
-- re-key to {name}: both live records move to their rows' names
SELECT target, key_columns FROM cdc.register_mapping('rkc_one', key_columns => '{name}');
SELECT key, deleted FROM cdc.entity_state WHERE target = 'rkc_one'::regclass ORDER BY key;
-- a change of the new key is decided by the moved record: stale
SELECT cdc_apply(dbz('u', 'rkc_one', '{"code": "B", "name": "eve", "n": 0}', lsn => '0/1008', tx => 3)) AS older;
SELECT * FROM rkc_one ORDER BY code COLLATE "C";

-- two key columns (the compact key is a text[] literal), one with a collation
CREATE TABLE rkc_two (a text COLLATE "POSIX", b int, c text COLLATE "POSIX" UNIQUE, PRIMARY KEY (a, b));
SELECT target, key_columns FROM cdc.register_mapping('rkc_two');
SELECT applied FROM cdc_apply_batch(jsonb_build_array(
  dbz('c', 'rkc_two', '{"a": "x", "b": 1, "c": "X1"}', lsn => '0/2000', tx => 4),
  dbz('c', 'rkc_two', '{"a": "X", "b": 1, "c": "x1"}', lsn => '0/2010', tx => 5)));
SELECT target, key_columns FROM cdc.register_mapping('rkc_two', key_columns => '{c}');
SELECT key, deleted FROM cdc.entity_state WHERE target = 'rkc_two'::regclass ORDER BY key;

DROP TABLE rkc_one, rkc_two;

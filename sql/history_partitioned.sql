--
-- history_partitioned (review h2 of cd89d5c, history reads with
-- ONLY): a partitioned history table has no rows of its own, so its reads
-- (the replay check, an unavailable value's earlier row) must not be ONLY.
-- A replayed change inserts nothing, and an unavailable (TOASTed,
-- unchanged) value is taken from the entity's latest row.  Tables of this
-- suite are called h2hp_*.
--
CREATE TABLE h2hp_log (id int, note text, cdc_key jsonb NOT NULL, cdc_version bigint[] NOT NULL, cdc_op text NOT NULL)
  PARTITION BY HASH (cdc_key);
CREATE TABLE h2hp_log_0 PARTITION OF h2hp_log FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE h2hp_log_1 PARTITION OF h2hp_log FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE UNIQUE INDEX ON h2hp_log (cdc_key, cdc_version);
SELECT target, mode FROM cdc.register_mapping('h2hp_log', source_table => 'h2hp_src', key_columns => '{id}', mode => 'history');
SELECT cdc_apply(dbz('c', 'h2hp_src', '{"id": 1, "note": "long"}', '0/1000', 100), 'h2hp_log');
-- the same change again under another delivery key: the history's unique index decides
SELECT cdc_apply(dbz('c', 'h2hp_src', '{"id": 1, "note": "long"}', '0/1000', 100), 'h2hp_log', 'rebuilt:1');
-- an update whose note is unavailable (Debezium's placeholder)
SELECT cdc_apply(dbz('u', 'h2hp_src', '{"id": 1, "note": "__debezium_unavailable_value"}', '0/1100', 101), 'h2hp_log');
SELECT id, note, cdc_key, cdc_version, cdc_op FROM h2hp_log ORDER BY cdc_version;
DROP TABLE h2hp_log;

--
-- input_polish (fresh-user review h3): small input errors.
--
-- 1. cdc.outbox_delete and cdc.outbox_mark_published took an ids array of
-- two dimensions ('{{1,2},{3,4}}') and used its elements, where every other
-- array argument of the API (key_columns, publications) is refused with
-- 2202E naming the argument.  Now 2202E naming ids; nothing is changed.
-- NULL and an empty array still give 0.
--
\set VERBOSITY default
SELECT cdc.outbox_delete('{{1,2},{3,4}}'::bigint[]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.outbox_mark_published('{{1,2},{3,4}}'::bigint[]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT cdc.outbox_delete(NULL) AS deleted_null, cdc.outbox_delete('{}') AS deleted_empty,
       cdc.outbox_mark_published(NULL) AS marked_null, cdc.outbox_mark_published('{}') AS marked_empty;
--
-- 2. An event whose source.table is "" was refused as if the field were
-- missing ('field "source.table" is missing and no target was given').  Now
-- the message says the field is empty (22023, as before); absent and null
-- still say missing.  source.schema "" is an event with no source.schema,
-- as before.
-- Objects: ipt.
--
CREATE TABLE ipt (id int PRIMARY KEY, n int);
SELECT target FROM cdc.register_mapping('ipt');
\set VERBOSITY default
SELECT cdc_apply('{"op": "c", "source": {"schema": "public", "table": "", "lsn": 16}, "after": {"id": 1}}'::jsonb);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"op": "c", "source": {"schema": "public", "table": "", "lsn": 16}, "after": {"id": 1}}'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"op": "c", "source": {"schema": "public", "lsn": 16}, "after": {"id": 1}}'::jsonb);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"op": "c", "source": {"schema": "public", "table": null, "lsn": 16}, "after": {"id": 1}}'::jsonb);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
-- with a target given, an empty source.table is not needed
SELECT cdc_apply('{"op": "c", "source": {"schema": "public", "table": "", "lsn": 16}, "after": {"id": 1}}'::jsonb, 'ipt') AS applied;
--
-- 3. A Debezium temporal schema (io.debezium.time.Timestamp, Date, ...) on
-- an integer column: the value was decoded to a timestamp's text, and the
-- error quoted that text ('invalid input syntax for type integer:
-- "2021-01-01 00:00:00"'), not the number the event sent.  Now the error
-- quotes the JSON number and names the field and the column.
--
\set VERBOSITY default
SELECT cdc_apply('{"schema": {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [{"field": "id", "type": "int32"},
                   {"field": "n", "type": "int64", "name": "io.debezium.time.Timestamp"}]}]},
                   "payload": {"op": "c", "source": {"lsn": 32}, "after": {"id": 2, "n": 1609459200000}}}'::jsonb, 'ipt', 'ip-3');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"schema": {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [{"field": "id", "type": "int32"},
                   {"field": "n", "type": "int32", "name": "io.debezium.time.Date"}]}]},
                   "payload": {"op": "c", "source": {"lsn": 32}, "after": {"id": 2, "n": 18628}}}'::text, 'ipt', 'ip-3');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT id, n FROM ipt ORDER BY id;
--
-- 4. cdc.create_history_table leaves out source columns named cdc_*
-- (documented); an event carrying one was refused with 42703 and the hint
-- 'Add the column to the target table', which a history table's column of
-- that name would collide with.  Now the hint of a history table's cdc_*
-- field says that history tables leave those columns out; other fields and
-- other tables keep the hint.
-- Objects: iph, iph_log.
--
CREATE TABLE iph (id int PRIMARY KEY, cdc_note text, v text);
SELECT cdc.create_history_table('iph_log', 'iph');
SELECT target, mode FROM cdc.register_mapping('iph_log', source_table => 'iph', key_columns => '{id}', mode => 'history');
\set VERBOSITY default
SELECT cdc_apply(dbz('c', 'iph', '{"id": 1, "cdc_note": "x", "v": "a"}', '0/40'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(dbz('c', 'iph', '{"id": 1, "cdc_note": "x", "v": "a"}', '0/40')::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc_apply_batch(ARRAY[dbz('c', 'iph', '{"id": 1, "cdc_note": "x", "v": "a"}', '0/40')]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- another field of the history table, and a cdc_* field of a state table: the hint as before
SELECT cdc_apply(dbz('c', 'iph', '{"id": 1, "w": "x"}', '0/40'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(dbz('c', 'ipt', '{"id": 3, "cdc_note": "x"}', '0/40'), 'ipt');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT count(*) AS history_rows FROM iph_log;
SELECT cdc_apply(dbz('c', 'iph', '{"id": 1, "v": "a"}', '0/40')) AS applied;
DROP TABLE iph_log, iph, ipt;
--
-- 5. cdc.range_hash with a bound its key column's type refuses ('{abc}' for
-- an integer key) failed inside the statement it builds: 22P02 with a LINE
-- pointer into that statement, naming neither the argument nor the column.
-- Now the argument, the value's place and the key column with its type are
-- named, and the input function's SQLSTATE is kept.
-- Objects: iprh.
--
CREATE TABLE iprh (id int, at date, v text, PRIMARY KEY (id, at));
INSERT INTO iprh VALUES (1, '2024-01-01', 'a'), (2, '2024-01-02', 'b');
\set VERBOSITY default
SELECT * FROM cdc.range_hash('iprh', after => '{abc,2024-01-01}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.range_hash('iprh', up_to => '{2,not-a-date}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.range_hash('iprh', up_to => '{99999999999,2024-01-01}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
-- bounds of the right types: as before
SELECT rows FROM cdc.range_hash('iprh', after => '{1,2024-01-01}');
SELECT rows FROM cdc.range_hash('iprh', up_to => '{1,2024-01-01}');
DROP TABLE iprh;

--
-- batch_text_json_errors (fresh-user review h4): in the text form
-- cdc_apply_batch('[...]'::text), an error of an event's JSON (a number
-- beyond numeric's range, malformed JSON inside the event, an unpaired
-- \ud800 escape, nesting too deep) had no CONTEXT line, though the batch
-- docs say every error names "event N of the batch"; and cdc_apply(text)
-- with such a number did not name the field.  Expected: an error inside an
-- element names its event (the byte offset of a syntax error still counts
-- the whole text), a number's error names its field; errors of the array's
-- own syntax (a missing comma between events, text after the array) belong
-- to no event and name none.  Nothing is applied.
--
\set VERBOSITY default
\set SHOW_CONTEXT always
CREATE TABLE btje (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('btje', source_schema => 'public', source_table => 'btje');

-- a number beyond numeric's range in event 2: 22003 naming the field and the event
SELECT * FROM cdc_apply_batch('[null, {"op": "c", "after": {"id": 1, "v": 1e1000000}, "source": {"schema": "public", "table": "btje"}}]'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- ... in a schema+payload envelope, the field path as written
SELECT * FROM cdc_apply_batch('[null, null, {"payload": {"op": "c", "after": {"id": 1, "v": -1e131072}}}]'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- malformed JSON inside event 2: 22P02, the byte offset in the whole text
SELECT * FROM cdc_apply_batch('[null, {"op": "c",, "after": {"id": 1}}]'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- an unpaired surrogate escape in event 3
SELECT * FROM cdc_apply_batch('[null, {"op": "r"}, {"op": "c", "after": {"id": 1, "v": "\ud800"}}]'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a text cut inside event 2
SELECT * FROM cdc_apply_batch('[null, {"op": "c", "after": {"id"'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- nesting too deep inside event 2 (the batch array counts as a level, as in the jsonb form)
SELECT * FROM cdc_apply_batch(('[null, {"op": "c", "after": {"id": 1, "v": ' || repeat('[', 998) || repeat(']', 998) || '}}]')::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- errors of the array itself name no event
SELECT * FROM cdc_apply_batch('[null {"op": "c"}]'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc_apply_batch('[null, null] x'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc_apply_batch('[null, null'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- not an array: no event either
SELECT * FROM cdc_apply_batch('{"v": 1e1000000}'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- an empty element (a comma with no event before it) is the array's own
-- syntax error (22P02 at its byte, no event), also when an event after it
-- has a number beyond numeric's range; before, the scan of the elements
-- skipped it, and that number's error (22003) was raised naming the event
-- one before its place (review h3)
SELECT * FROM cdc_apply_batch('[, {"v": 1e1000000}]'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc_apply_batch('[null, , {"v": 1e1000000}]'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a number before a trailing comma is the first error either way: its event
SELECT * FROM cdc_apply_batch('[null, {"v": 1e1000000},]'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a good batch still applies
SELECT events, applied, ignored FROM cdc_apply_batch('[null, {"op": "c", "after": {"id": 1, "v": 1e2}, "source": {"schema": "public", "table": "btje", "lsn": 100}}]'::text);

-- cdc_apply(text): the number's error names its field
SELECT cdc_apply('{"op": "c", "after": {"id": 2, "v": 1e1000000}, "source": {"schema": "public", "table": "btje"}}'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"op": "c", "after": {"id": 2, "v": [1, 2, 0.1e-16383]}, "source": {"schema": "public", "table": "btje"}}'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('1e1000000'::text);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM btje;
SELECT cdc.unregister_mapping('btje');
DROP TABLE btje;

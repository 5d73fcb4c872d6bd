--
-- bad_input: every kind of bad input (SPEC section 6) is an ERROR with a
-- proper SQLSTATE that names the event field or column; nothing changes
-- (target rows, ledger, outbox, entity versions, counters); and the
-- corrected retry with the SAME delivery key applies, which proves that the
-- dedup claim rolled back with the rest.
--
-- Each failing statement is followed by \echo of the SQLSTATE psql received
-- (LAST_ERROR_SQLSTATE), so the expected output pins the SQLSTATE as well as
-- the message.
--

CREATE TABLE bad_items (id int PRIMARY KEY, name text, qty int2 CHECK (qty >= 0));
SELECT target, outbox FROM cdc.register_mapping('bad_items', outbox => true);

-- The observable state of bad_items: its rows, its ledger, outbox and
-- entity-state rows, conflicts and counters.
CREATE FUNCTION bad_state() RETURNS TABLE (target_rows text, ledger bigint, outbox bigint, entities bigint,
                                          conflicts bigint, applied bigint)
LANGUAGE sql AS $$
  SELECT (SELECT coalesce(string_agg(format('%s:%s:%s', id, name, qty), ' ' ORDER BY id), '') FROM bad_items),
         ledger_count('bad_items'), outbox_count('bad_items'),
         (SELECT count(*) FROM cdc.entities WHERE target = 'bad_items'::regclass),
         (SELECT count(*) FROM cdc.conflicts WHERE target = 'bad_items'::regclass),
         coalesce((SELECT s.applied FROM cdc.stats s WHERE s.target = 'bad_items'::regclass), 0)
$$;
CREATE TABLE bad_mark AS SELECT * FROM bad_state() WITH NO DATA;
-- bad_checkpoint(): remembers (and shows) the current state.
CREATE FUNCTION bad_checkpoint() RETURNS SETOF bad_mark LANGUAGE sql AS $$
  DELETE FROM bad_mark;
  INSERT INTO bad_mark SELECT * FROM bad_state() RETURNING *;
$$;
-- bad_unchanged(dk): is the state the remembered one, and is dk unclaimed?
CREATE FUNCTION bad_unchanged(dk text) RETURNS TABLE (unchanged boolean, claimed boolean) LANGUAGE sql AS $$
  SELECT (SELECT row(m.*)::text FROM bad_mark m) = (SELECT row(s.*)::text FROM bad_state() s),
         cdc.delivery_processed('bad_items', dk)
$$;
-- bad_ev(op, id-or-image, lsn): a Debezium event for bad_items.
CREATE FUNCTION bad_ev(op text, after jsonb, lsn text, before jsonb DEFAULT NULL) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$ SELECT dbz(op, 'bad_items', after, lsn, 900, before) $$;

SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- 1. Malformed JSON (text overload): 22P02 naming the byte offset.
-- ---------------------------------------------------------------------------
SELECT cdc_apply('{"op": "c", "source": {"name": "srv", "lsn": 4096}, "after": {"id": 1, "name": "a", "qty": 1}',
                 'bad_items', 'bad-json');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"op": "c"} trailing', 'bad_items', 'bad-json');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('', 'bad_items', 'bad-json');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- Valid JSON that is not an object: 22023.
SELECT cdc_apply('[1, 2]', 'bad_items', 'bad-json');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- Nesting deeper than 1000 levels, even in a field the engine ignores:
-- 54001 (a 400,000-level event crashed the backend before the limit).
SELECT cdc_apply('{"op": "c", "extra": ' || repeat('[', 400000) || repeat(']', 400000) || '}', 'bad_items', 'bad-json');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(('{"op": "c", "extra": ' || repeat('[', 5000) || repeat(']', 5000) || '}')::jsonb, 'bad_items', 'bad-json');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- The same in unread members (source.version, ts_us) of an otherwise valid event
-- (the jsonb intake leaves out the scalar values of members nothing reads, never
-- a container: its nesting is checked as in the text form).
SELECT cdc_apply(('{"op": "c", "after": {"id": 1, "name": "a", "qty": 1}, "source": {"lsn": 4096, "version": ' || repeat('[', 5000) || repeat(']', 5000) || '}}')::jsonb, 'bad_items', 'bad-json');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(('{"op": "c", "ts_us": {"x": ' || repeat('[', 5000) || repeat(']', 5000) || '}, "after": {"id": 1, "name": "a", "qty": 1}}')::jsonb, 'bad_items', 'bad-json');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- In a batch given as one JSON array (jsonb or text) the array is one of the
-- 1000 levels: 999 levels under an event's member are refused there, and
-- not in a jsonb[] element or alone (each its own document: then the
-- after-image is missing).
SELECT cdc_apply_batch(('[{"op": "c", "extra": ' || repeat('[', 999) || repeat(']', 999) || '}]')::jsonb, 'bad_items');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply_batch(ARRAY[('{"op": "c", "extra": ' || repeat('[', 999) || repeat(']', 999) || '}')::jsonb], 'bad_items');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply_batch(('[{"op": "c", "extra": ' || repeat('[', 999) || repeat(']', 999) || '}]')::text, 'bad_items');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(('{"op": "c", "extra": ' || repeat('[', 999) || repeat(']', 999) || '}')::jsonb, 'bad_items', 'bad-json');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM bad_unchanged('bad-json');
SELECT cdc_apply('{"op": "c", "source": {"name": "srv", "lsn": 4096}, "after": {"id": 1, "name": "a", "qty": 1}}',
                 'bad_items', 'bad-json') AS retry;
SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- 2. Unknown op: 22023.
-- ---------------------------------------------------------------------------
SELECT cdc_apply('{"op": "x", "source": {"name": "srv", "lsn": 4352}, "after": {"id": 2, "name": "b", "qty": 2}}'::jsonb,
                 'bad_items', 'bad-op');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- an unknown op is printed as a JSON string, cut (found by a fresh-user run:
-- a quote and a newline in it went into the message as they were)
SELECT cdc_apply(jsonb_build_object('op', E'x"\n' || repeat('q', 500), 'source', jsonb_build_object('name', 'srv', 'lsn', 4352),
                                    'after', jsonb_build_object('id', 2, 'name', 'b', 'qty', 2)), 'bad_items', 'bad-op2');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- a transaction.total_order beyond 32 bits names its field (22023, was a 22003 about a "position")
SELECT cdc_apply('{"op": "c", "source": {"name": "srv", "lsn": 4352}, "transaction": {"id": "t", "total_order": 2147483648},
                   "after": {"id": 2, "name": "b", "qty": 2}}'::jsonb, 'bad_items', 'bad-to');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS rows_for_id_2 FROM bad_items WHERE id = 2;
SELECT cdc_apply('{"op": 99, "source": {"name": "srv", "lsn": 4352}, "after": {"id": 2, "name": "b", "qty": 2}}'::jsonb,
                 'bad_items', 'bad-op');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"source": {"name": "srv", "lsn": 4352}, "after": {"id": 2, "name": "b", "qty": 2}}'::jsonb,
                 'bad_items', 'bad-op');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM bad_unchanged('bad-op');
SELECT cdc_apply('{"op": "c", "source": {"name": "srv", "lsn": 4352}, "after": {"id": 2, "name": "b", "qty": 2}}'::jsonb,
                 'bad_items', 'bad-op') AS retry;
SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- 3. Missing after-image for c, u and r; a non-object after: 22023.
-- ---------------------------------------------------------------------------
SELECT cdc_apply(bad_ev('c', NULL, '0/1200'), 'bad_items', 'bad-after-c');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('u', NULL, '0/1300', '{"id": 2}'), 'bad_items', 'bad-after-u');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('r', NULL, '0/1400'), 'bad_items', 'bad-after-r');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('c', '[3, "c"]', '0/1200'), 'bad_items', 'bad-after-c');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM bad_unchanged('bad-after-c');
SELECT claimed FROM bad_unchanged('bad-after-u');
SELECT claimed FROM bad_unchanged('bad-after-r');
SELECT cdc_apply(bad_ev('c', '{"id": 3, "name": "c", "qty": 3}', '0/1200'), 'bad_items', 'bad-after-c') AS retry_c,
       cdc_apply(bad_ev('u', '{"id": 2, "name": "b2", "qty": 2}', '0/1300', '{"id": 2}'), 'bad_items', 'bad-after-u') AS retry_u,
       cdc_apply(bad_ev('r', '{"id": 5, "name": "e", "qty": 5}', '0/1400'), 'bad_items', 'bad-after-r') AS retry_r;
SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- 4. Missing before-image for d: 22023 (an after-image does not replace it).
-- ---------------------------------------------------------------------------
SELECT cdc_apply(bad_ev('d', NULL, '0/1500'), 'bad_items', 'bad-before');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('d', '{"id": 1}', '0/1500'), 'bad_items', 'bad-before');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- A before-image without the key column: 22023 naming before.id.
SELECT cdc_apply(bad_ev('d', NULL, '0/1500', '{"name": "a"}'), 'bad_items', 'bad-before');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM bad_unchanged('bad-before');
SELECT cdc_apply(bad_ev('d', NULL, '0/1500', '{"id": 1}'), 'bad_items', 'bad-before') AS retry;
SELECT * FROM bad_checkpoint();
SELECT entity_key, version FROM tombstones_of('bad_items');

-- ---------------------------------------------------------------------------
-- 5. Missing key column (22023) and null key column (22004).
-- ---------------------------------------------------------------------------
SELECT cdc_apply(bad_ev('c', '{"name": "f", "qty": 6}', '0/1600'), 'bad_items', 'bad-key');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('c', '{"id": null, "name": "f", "qty": 6}', '0/1600'), 'bad_items', 'bad-key');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM bad_unchanged('bad-key');
SELECT cdc_apply(bad_ev('c', '{"id": 6, "name": "f", "qty": 6}', '0/1600'), 'bad_items', 'bad-key') AS retry;
SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- 6. Unknown target: no mapping for the source table (42P01), no
--    source.table and no target (22023), a relation OID that does not exist
--    (42P01), a name that does not exist (42P01, from regclass input itself).
-- ---------------------------------------------------------------------------
SELECT cdc_apply(dbz('c', 'nowhere', '{"id": 7, "name": "g", "qty": 7}', '0/1700', 901), NULL, 'bad-target');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"op": "c", "source": {"name": "srv", "lsn": 5888}, "after": {"id": 7, "name": "g", "qty": 7}}'::jsonb,
                 NULL, 'bad-target');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(dbz('c', 'nowhere', '{"id": 7, "name": "g", "qty": 7}', '0/1700', 901), 4000000000::oid::regclass, 'bad-target');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(dbz('c', 'nowhere', '{"id": 7, "name": "g", "qty": 7}', '0/1700', 901), 'no_such_table', 'bad-target');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- A view is not a table: 42809.
CREATE VIEW bad_view AS SELECT * FROM bad_items;
SELECT cdc_apply(dbz('c', 'nowhere', '{"id": 7, "name": "g", "qty": 7}', '0/1700', 901), 'bad_view', 'bad-target');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- Neither a view nor a temporary table can be mapped: 42809, no mapping row.
SELECT cdc.register_mapping('bad_view');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
CREATE TEMP TABLE bad_temp (id int PRIMARY KEY, name text);
SELECT cdc.register_mapping('bad_temp');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS mappings FROM cdc.mapping WHERE target::text LIKE '%bad_temp' OR target::text LIKE '%bad_view';
DROP TABLE bad_temp;
SELECT * FROM bad_unchanged('bad-target');
SELECT cdc_apply(dbz('c', 'nowhere', '{"id": 7, "name": "g", "qty": 7}', '0/1700', 901), 'bad_items', 'bad-target') AS retry;
SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- 7. A target without a usable key: 42P10 (no primary key, no mapping keys).
-- ---------------------------------------------------------------------------
CREATE TABLE bad_nopk (id int, name text, qty int2);
SELECT cdc_apply(bad_ev('c', '{"id": 8, "name": "h", "qty": 8}', '0/1800'), 'bad_nopk', 'bad-nopk');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- register_mapping refuses it as well, with the same SQLSTATE.  (CONTEXT
-- lines that quote internals are hidden where they would pin line numbers
-- or the engine's own SQL text.)
\set SHOW_CONTEXT never
SELECT cdc.register_mapping('bad_nopk');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- A DEFERRABLE primary key does not decide conflicts (ON CONFLICT and the
-- engine's index lookups need an immediate unique index): refused, and said so.
CREATE TABLE bad_defpk (id int PRIMARY KEY DEFERRABLE, name text);
SELECT cdc.register_mapping('bad_defpk');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('c', '{"id": 8, "name": "h"}', '0/1800'), 'bad_defpk', 'bad-defpk');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
SELECT count(*) AS nopk_rows FROM bad_nopk;
SELECT * FROM bad_unchanged('bad-nopk');
SELECT cdc_apply(bad_ev('c', '{"id": 8, "name": "h", "qty": 8}', '0/1800'), 'bad_items', 'bad-nopk') AS retry;
SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- 8. A value that does not convert: 22P02 naming field and column.
-- ---------------------------------------------------------------------------
SELECT cdc_apply(bad_ev('c', '{"id": 9, "name": "i", "qty": "nine"}', '0/1900'), 'bad_items', 'bad-value');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('c', '{"id": 9, "name": "i", "qty": 1.5}', '0/1900'), 'bad_items', 'bad-value');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('c', '{"id": "9x", "name": "i", "qty": 9}', '0/1900'), 'bad_items', 'bad-value');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- A JSON object for a scalar column: 22023 naming field and type.
SELECT cdc_apply(bad_ev('c', '{"id": 9, "name": {"first": "i"}, "qty": 9}', '0/1900'), 'bad_items', 'bad-value');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM bad_unchanged('bad-value');
SELECT cdc_apply(bad_ev('c', '{"id": 9, "name": "i", "qty": 9}', '0/1900'), 'bad_items', 'bad-value') AS retry;
SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- 9. A number out of range for the column type (int2): 22003.
-- ---------------------------------------------------------------------------
SELECT cdc_apply(bad_ev('c', '{"id": 10, "name": "j", "qty": 70000}', '0/1A00'), 'bad_items', 'bad-range');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('c', '{"id": 10, "name": "j", "qty": 99999999999999999999999}', '0/1A00'), 'bad_items', 'bad-range');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM bad_unchanged('bad-range');
SELECT cdc_apply(bad_ev('c', '{"id": 10, "name": "j", "qty": 32767}', '0/1A00'), 'bad_items', 'bad-range') AS retry;
SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- 10. An unknown column: 42703 naming the field and the table.  Identifiers
--     from events are never spliced into SQL: a field that looks like SQL is
--     just an unknown column, and the table is still there.
-- ---------------------------------------------------------------------------
SELECT cdc_apply(bad_ev('c', '{"id": 11, "name": "k", "qty": 11, "colour": "red"}', '0/1B00'), 'bad_items', 'bad-column');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('c', '{"id": 11, "qty = 0; DROP TABLE bad_items; --": 1}', '0/1B00'), 'bad_items', 'bad-column');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('c', '{"id": 11, "Name": "k"}', '0/1B00'), 'bad_items', 'bad-column');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM bad_unchanged('bad-column');
SELECT cdc_apply(bad_ev('c', '{"id": 11, "name": "k", "qty": 11}', '0/1B00'), 'bad_items', 'bad-column') AS retry;
SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- 11. A field name that is not a plain identifier: 42602 (70 characters,
--     longer than any PostgreSQL name; the empty string).
-- ---------------------------------------------------------------------------
SELECT cdc_apply(bad_ev('c', jsonb_build_object('id', 12, repeat('n', 70), 'l'), '0/1C00'), 'bad_items', 'bad-name');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('c', '{"id": 12, "": "l"}', '0/1C00'), 'bad_items', 'bad-name');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM bad_unchanged('bad-name');
SELECT cdc_apply(bad_ev('c', '{"id": 12, "name": "l", "qty": 12}', '0/1C00'), 'bad_items', 'bad-name') AS retry;
SELECT * FROM bad_checkpoint();

-- Column names that need quoting are applied by name, correctly quoted.
CREATE TABLE "bad Quoted" ("Id" int PRIMARY KEY, "select" text, "a""b" int);
SELECT cdc_apply(dbz('c', 'bad Quoted', '{"Id": 1, "select": "kw", "a\"b": 2}', '0/1C80', 902), '"bad Quoted"');
SELECT * FROM "bad Quoted";

-- ---------------------------------------------------------------------------
-- 12. An error raised after the claim (the target's CHECK constraint fails
--     during the mutation): 23514; the claim, the entity version and the
--     outbox row roll back with it, so the same delivery key applies later.
-- ---------------------------------------------------------------------------
\set SHOW_CONTEXT never
SELECT cdc_apply(bad_ev('c', '{"id": 13, "name": "m", "qty": -1}', '0/1D00'), 'bad_items', 'bad-check');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
SELECT * FROM bad_unchanged('bad-check');
SELECT count(*) AS entity_13 FROM cdc.entities WHERE target = 'bad_items'::regclass AND entity_key = '{"id": "13"}';
SELECT cdc_apply(bad_ev('c', '{"id": 13, "name": "m", "qty": 13}', '0/1D00'), 'bad_items', 'bad-check') AS retry;
SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- 13. A batch of statements in one transaction where the 3rd event fails:
--     the whole transaction rolls back, including the first two claims.
-- ---------------------------------------------------------------------------
BEGIN;
SELECT cdc_apply(bad_ev('c', '{"id": 20, "name": "t", "qty": 20}', '0/2000'), 'bad_items', 'bad-batch-1');
SELECT cdc_apply(bad_ev('c', '{"id": 21, "name": "u", "qty": 21}', '0/2100'), 'bad_items', 'bad-batch-2');
SELECT count(*) AS rows_inside_tx FROM bad_items WHERE id IN (20, 21);
SELECT cdc_apply(bad_ev('c', '{"id": 22, "name": "v", "qty": "x"}', '0/2200'), 'bad_items', 'bad-batch-3');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_ev('c', '{"id": 23, "name": "w", "qty": 23}', '0/2300'), 'bad_items', 'bad-batch-4');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
COMMIT;
SELECT * FROM bad_unchanged('bad-batch-1');
SELECT claimed FROM bad_unchanged('bad-batch-2');
SELECT claimed FROM bad_unchanged('bad-batch-3');
-- The corrected batch, same delivery keys: all applied (not duplicate).
BEGIN;
SELECT cdc_apply(bad_ev('c', '{"id": 20, "name": "t", "qty": 20}', '0/2000'), 'bad_items', 'bad-batch-1');
SELECT cdc_apply(bad_ev('c', '{"id": 21, "name": "u", "qty": 21}', '0/2100'), 'bad_items', 'bad-batch-2');
SELECT cdc_apply(bad_ev('c', '{"id": 22, "name": "v", "qty": 22}', '0/2200'), 'bad_items', 'bad-batch-3');
COMMIT;
SELECT * FROM bad_checkpoint();

-- ---------------------------------------------------------------------------
-- Final state: every corrected retry applied once; one outbox row per
-- applied change; nothing from any failed attempt.
-- ---------------------------------------------------------------------------
SELECT * FROM bad_items ORDER BY id;
SELECT * FROM ledger_has('bad_items', 'bad-after-c', 'bad-after-r', 'bad-after-u', 'bad-batch-1', 'bad-batch-2', 'bad-batch-3', 'bad-before', 'bad-check', 'bad-column', 'bad-json', 'bad-key', 'bad-name', 'bad-nopk', 'bad-op', 'bad-range', 'bad-target', 'bad-value');
SELECT op, entity_key FROM cdc.outbox WHERE target = 'bad_items'::regclass ORDER BY id;
SELECT applied, duplicate, stale, conflict, ignored, outbox_rows FROM cdc.stats WHERE target = 'bad_items'::regclass;
-- Replaying the keys of the rolled-back attempts once more changes nothing:
-- they are duplicates now.
SELECT cdc_apply(bad_ev('c', '{"id": 13, "name": "m", "qty": 13}', '0/1D00'), 'bad_items', 'bad-check') AS replay_check,
       cdc_apply(bad_ev('c', '{"id": 22, "name": "v", "qty": 22}', '0/2200'), 'bad_items', 'bad-batch-3') AS replay_batch;
SELECT (SELECT row(m.*)::text FROM bad_mark m) = (SELECT row(s.*)::text FROM bad_state() s) AS unchanged_by_replay;

-- ---------------------------------------------------------------------------
-- A NUL (\u0000) in a text field of the envelope (found by a fresh-user
-- run: it reached cdc.source as text PostgreSQL cannot hold, and a second
-- such source name made the dictionary insert spin).  Refused with 22P02
-- naming the field, in the text form (jsonb cannot hold it at all), and
-- nothing is applied or recorded.
-- ---------------------------------------------------------------------------
CREATE TABLE bad_nul (id int PRIMARY KEY);
SELECT target FROM cdc.register_mapping('bad_nul', outbox => true);
SELECT count(*) AS sources_before FROM cdc.source \gset
\set VERBOSITY default
SELECT cdc_apply('{"op":"c","after":{"id":1},"source":{"name":"a\u0000b","schema":"public","table":"bad_nul","lsn":100,"txId":1}}'::text, 'bad_nul');
SELECT cdc_apply('{"op":"c","after":{"id":2},"source":{"name":"a\u0000c","schema":"public","table":"bad_nul","lsn":200,"txId":2}}'::text, 'bad_nul');
SELECT cdc_apply('{"op":"c","after":{"id":3},"source":{"name":"ok","db":"d\u0000x","schema":"public","table":"bad_nul","lsn":300,"txId":3}}'::text, 'bad_nul');
SELECT cdc_apply('{"op":"c","after":{"id\u0000x":3},"source":{"name":"ok","schema":"public","table":"bad_nul","lsn":300,"txId":3}}'::text, 'bad_nul');
SELECT cdc_apply_batch('[{"op":"c","after":{"id":4},"source":{"name":"ok","schema":"public","table":"bad_nul","lsn":400,"txId":4}},
                         {"op":"c","after":{"id":5},"source":{"name":"n\u0000","schema":"public","table":"bad_nul","lsn":500,"txId":5}}]'::text, 'bad_nul');
\set VERBOSITY terse
SELECT (SELECT count(*) FROM bad_nul) AS rows, outbox_count('bad_nul') AS outbox_rows, ledger_count('bad_nul') AS ledger_rows,
       (SELECT count(*) FROM cdc.source) = :sources_before AS no_source_recorded;
SELECT cdc_apply('{"op":"c","after":{"id":6},"source":{"name":"ok","schema":"public","table":"bad_nul","lsn":600,"txId":6}}'::text, 'bad_nul') AS clean_event_still_applies;

-- ---------------------------------------------------------------------------
-- A number beyond double precision's range (found by fresh-user runs: the
-- text form's JSON parser stopped at it, "number overflow" and then 22003,
-- even for a numeric column or a member nothing reads, while the jsonb form
-- keeps it as numeric).  Both forms now keep every number as written: a
-- double column refuses it with its type's 22003 naming the field and the
-- column (a long value cut to 40 characters and "..." in the message); a
-- numeric column takes it exactly; an unread member never fails.
-- ---------------------------------------------------------------------------
CREATE TABLE bad_big (id int PRIMARY KEY, x float8, n numeric);
SELECT target FROM cdc.register_mapping('bad_big', outbox => true);
\set VERBOSITY default
SELECT cdc_apply('{"op":"c","after":{"id":1,"x":1e999},"source":{"name":"ok","schema":"public","table":"bad_big","lsn":100,"txId":1}}'::text, 'bad_big', 'big-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply('{"op":"c","after":{"id":1,"x":1e999},"source":{"name":"ok","schema":"public","table":"bad_big","lsn":100,"txId":1}}'::jsonb, 'bad_big', 'big-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply_batch('[{"op":"c","after":{"id":2},"source":{"name":"ok","schema":"public","table":"bad_big","lsn":200,"txId":2}},
                         {"op":"c","after":{"id":3,"x":2.5e309},"source":{"name":"ok","schema":"public","table":"bad_big","lsn":300,"txId":3}}]'::text, 'bad_big');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT (SELECT count(*) FROM bad_big) AS rows, outbox_count('bad_big') AS outbox_rows, ledger_count('bad_big') AS ledger_rows;
SELECT cdc_apply('{"schema":{},"payload":{"op":"c","after":{"id":1,"x":1e308,"n":-5E+400},"ts_ms":1e400,"source":{"name":"ok","schema":"public","table":"bad_big","lsn":100,"txId":1}}}'::text, 'bad_big', 'big-1') AS text_form;
SELECT cdc_apply('{"schema":{},"payload":{"op":"c","after":{"id":2,"x":1e308,"n":-5E+400},"ts_ms":1e400,"source":{"name":"ok","schema":"public","table":"bad_big","lsn":200,"txId":2}}}'::jsonb, 'bad_big', 'big-2') AS jsonb_form;
SELECT id, x, n = '-5e400'::numeric AS n_kept FROM bad_big ORDER BY id;
SELECT outbox_count('bad_big') AS outbox_rows, ledger_count('bad_big') AS ledger_rows;

-- ---------------------------------------------------------------------------
-- Non-key values are converted once the dedup claim and the version
-- decision apply the change (docs/semantics.md, "When values are
-- converted"): a duplicate delivery or a stale change whose non-key value
-- its column cannot take is reported as what it is, not refused; a change
-- that is applied with such a value is refused (the column type's
-- SQLSTATE, naming the field), and nothing of it stays: no row, no entity
-- record, no ledger claim, no outbox row.  The corrected retry with the
-- same delivery key applies.
-- ---------------------------------------------------------------------------
CREATE TABLE bad_late (id int PRIMARY KEY, qty int, note text);
SELECT target FROM cdc.register_mapping('bad_late', outbox => true);
SELECT cdc_apply(dbz('c', 'bad_late', '{"id": 1, "qty": 1, "note": "first"}', '0/3000', 950), 'bad_late', 'late-1') AS first;
-- the same delivery again, with a value qty cannot take: a duplicate
SELECT cdc_apply(dbz('c', 'bad_late', '{"id": 1, "qty": "not a number", "note": "first"}', '0/3000', 950), 'bad_late', 'late-1') AS same_delivery;
SELECT (cdc_apply_batch(jsonb_build_array(dbz('c', 'bad_late', '{"id": 1, "qty": "not a number", "note": "first"}', '0/3000', 950)),
                        'bad_late', ARRAY['late-1'])).duplicate AS same_delivery_in_a_batch;
-- a newer change applied, then an older one with a bad value: stale
SELECT cdc_apply(dbz('u', 'bad_late', '{"id": 1, "qty": 2, "note": "second"}', '0/3100', 951), 'bad_late', 'late-2') AS newer;
SELECT cdc_apply(dbz('u', 'bad_late', '{"id": 1, "qty": "not a number", "note": "older"}', '0/3050', 952), 'bad_late', 'late-3') AS older;
-- A batch converts the values of every delivery it claims before deciding
-- it (set-based decisions, docs/semantics.md): there the older change with
-- the bad value is refused, and its claim rolls back with it.
SELECT cdc_apply_batch(jsonb_build_array(dbz('u', 'bad_late', '{"id": 1, "qty": "not a number", "note": "older"}', '0/3050', 952)),
                       'bad_late', ARRAY['late-5']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.delivery_processed('bad_late', 'late-5') AS claimed_by_the_refused_batch;
SELECT id, qty, note FROM bad_late;
-- a new change with a bad value: refused, through either entry point, and nothing of it stays
SELECT cdc_apply(dbz('u', 'bad_late', '{"id": 1, "qty": "x", "note": "third"}', '0/3200', 953), 'bad_late', 'late-4');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply_batch(jsonb_build_array(dbz('u', 'bad_late', '{"id": 1, "qty": "x", "note": "third"}', '0/3200', 953)),
                       'bad_late', ARRAY['late-4']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT id, qty, note FROM bad_late;
SELECT cdc.delivery_processed('bad_late', 'late-4') AS claimed, ledger_count('bad_late') AS ledger_rows,
       outbox_count('bad_late') AS outbox_rows;
SELECT entity_key, version, is_tombstone FROM cdc.entities WHERE target = 'bad_late'::regclass;
SELECT cdc_apply(dbz('u', 'bad_late', '{"id": 1, "qty": 3, "note": "third"}', '0/3200', 953), 'bad_late', 'late-4') AS corrected;
SELECT id, qty, note FROM bad_late;
SELECT op, payload FROM cdc.outbox WHERE target = 'bad_late'::regclass ORDER BY id;

-- ---------------------------------------------------------------------------
-- Wrong JSON types in `source` (found by a fresh-user run: accepted and
-- stored as their JSON text, source.name {"a":1} as a source id in
-- cdc.entities; source.table 5 without a target gave 42P01 "no mapping for
-- source table public.5").  A name (name, db, schema, table, connector)
-- must be a JSON string, source.snapshot a boolean or one of Debezium's
-- values; JSON null is absent.  22023 naming the field, in both forms,
-- nothing applied, claimed or recorded.
-- ---------------------------------------------------------------------------
CREATE TABLE bad_src (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('bad_src', outbox => true);
SELECT count(*) AS sources_before FROM cdc.source \gset
CREATE TABLE bad_src_events (n int, source text);
INSERT INTO bad_src_events VALUES
  (1, '{"name":"ok","schema":"public","table":5,"lsn":100}'),
  (2, '{"name":{"a":1},"schema":"public","table":"bad_src","lsn":100}'),
  (3, '{"name":[1],"schema":"public","table":"bad_src","lsn":100}'),
  (4, '{"name":"ok","schema":true,"table":"bad_src","lsn":100}'),
  (5, '{"name":"ok","db":7,"schema":"public","table":"bad_src","lsn":100}'),
  (6, '{"name":"ok","schema":"public","table":"bad_src","lsn":100,"snapshot":7}'),
  (7, '{"name":"ok","schema":"public","table":"bad_src","lsn":100,"snapshot":{}}'),
  (8, '{"name":"ok","schema":"public","table":"bad_src","lsn":100,"snapshot":"bogus"}'),
  (9, '{"name":"ok","connector":5,"schema":"public","table":"bad_src","lsn":100}');
CREATE FUNCTION bad_src_try(doc text, as_jsonb boolean, target regclass) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF as_jsonb THEN
    RETURN cdc_apply(doc::jsonb, target);
  END IF;
  RETURN cdc_apply(doc, target);
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ' ' || SQLERRM;
END $$;
SELECT n, f.as_jsonb, bad_src_try('{"op":"c","after":{"id":' || n || ',"v":"x"},"source":' || source || '}', f.as_jsonb, 'bad_src') AS outcome
  FROM bad_src_events, (VALUES (false), (true)) f(as_jsonb) ORDER BY n, f.as_jsonb;
-- without a target: the type error, not a lookup of table "5"
SELECT bad_src_try('{"op":"c","after":{"id":1},"source":{"name":"ok","schema":"public","table":5,"lsn":100}}', true, NULL) AS no_target;
SELECT (SELECT count(*) FROM bad_src) AS rows, outbox_count('bad_src') AS outbox_rows, ledger_count('bad_src') AS ledger_rows,
       (SELECT count(*) FROM cdc.source) = :sources_before AS no_source_recorded;
-- JSON null is absent; a boolean snapshot (older Debezium) and Debezium's strings apply
SELECT cdc_apply('{"op":"c","after":{"id":1,"v":"a"},"source":{"name":"ok","db":null,"connector":null,"schema":"public","table":"bad_src","lsn":100,"snapshot":false}}'::text, 'bad_src') AS nulls_absent;
SELECT cdc_apply('{"op":"r","after":{"id":2,"v":"b"},"source":{"name":"ok","db":"d","schema":"public","table":"bad_src","lsn":200,"snapshot":"first_in_data_collection"}}'::jsonb) AS debezium_value;
SELECT cdc_apply('{"op":"r","after":{"id":3,"v":"c"},"source":{"name":"ok","db":"d","schema":"public","table":"bad_src","lsn":200,"snapshot":true}}'::text) AS boolean_snapshot;
SELECT id, v FROM bad_src ORDER BY id;
SELECT source_name, entity_key, version FROM cdc.entities WHERE target = 'bad_src'::regclass ORDER BY entity_key::text;

-- ---------------------------------------------------------------------------
-- Repeated object keys (found by a fresh-user run: the text form kept the
-- first occurrence for some lookups and not others, an after-image
-- {"id":90,"name":"a","id":91,"name":"b"} applied row 91|a, while jsonb
-- keeps the last value of each key).  The text form keeps the last value
-- too: each document gives the same rows, entity records and ledger rows in
-- both forms, and through the text batch.
-- ---------------------------------------------------------------------------
CREATE TABLE bad_dup_t (id int PRIMARY KEY, name text);
CREATE TABLE bad_dup_j (LIKE bad_dup_t INCLUDING ALL);
CREATE TABLE bad_dup_b (LIKE bad_dup_t INCLUDING ALL);
CREATE TABLE bad_dup_events (n int, doc text);
INSERT INTO bad_dup_events VALUES
  (1, '{"op":"c","after":{"id":90,"name":"a","id":91,"name":"b"},"source":{"name":"dup","schema":"public","table":"t","lsn":100,"txId":1}}'),
  (2, '{"op":"d","op":"c","after":{"id":92,"name":"c"},"source":{"name":"dup","schema":"public","table":"t","lsn":200,"txId":2}}'),
  -- lsn 300 (the last) is read, not 900: else event 4 (lsn 400) would be stale and 91 would end as b2
  (3, '{"op":"u","after":{"id":91,"name":"b2"},"source":{"name":"dup","schema":"public","table":"t","lsn":900,"lsn":300,"txId":3}}'),
  (4, '{"op":"u","after":{"id":91,"name":"b3"},"source":{"name":"dup","schema":"public","table":"t","lsn":400,"txId":4}}'),
  (5, '{"schema":{},"payload":{"op":"c","after":{"id":93,"name":"wrong"},"source":{"name":"dup","schema":"public","table":"t","lsn":500,"txId":5}},"payload":{"op":"c","after":{"id":94,"name":"d"},"source":{"name":"dup","schema":"public","table":"t","lsn":600,"txId":6}}}');
SELECT n, cdc_apply(doc, 'bad_dup_t') AS text_form, cdc_apply(doc::jsonb, 'bad_dup_j') AS jsonb_form FROM bad_dup_events ORDER BY n;
SELECT (cdc_apply_batch('[' || string_agg(doc, ',' ORDER BY n) || ']', 'bad_dup_b', with_outcomes => true)).outcomes AS batch
  FROM bad_dup_events;
SELECT * FROM bad_dup_t ORDER BY id;
SELECT (SELECT array_agg(t ORDER BY id) FROM bad_dup_t t)::text = (SELECT array_agg(j ORDER BY id) FROM bad_dup_j j)::text AS jsonb_same_rows,
       (SELECT array_agg(t ORDER BY id) FROM bad_dup_t t)::text = (SELECT array_agg(b ORDER BY id) FROM bad_dup_b b)::text AS batch_same_rows;
SELECT e.entity_key, e.version,
       e.version = (SELECT version FROM cdc.entities j WHERE j.target = 'bad_dup_j'::regclass AND j.entity_key = e.entity_key) AS jsonb_same,
       e.version = (SELECT version FROM cdc.entities b WHERE b.target = 'bad_dup_b'::regclass AND b.entity_key = e.entity_key) AS batch_same
  FROM cdc.entities e WHERE e.target = 'bad_dup_t'::regclass ORDER BY e.entity_key::text;
SELECT ledger_count('bad_dup_t') AS text_ledger, ledger_count('bad_dup_j') AS jsonb_ledger, ledger_count('bad_dup_b') AS batch_ledger;

-- ---------------------------------------------------------------------------
-- Integer fields written as integral numbers with an exponent or a ".0"
-- (found by a fresh-user run: source.lsn 1e2 applied from jsonb, which
-- holds the numeric 100, and refused from text, "not an LSN: 1e2").  An
-- integer field (lsn, commit_lsn, txId, ts_ms, total_order) takes a JSON
-- number by its value in both forms; a fraction is refused in both.  Field
-- names in messages are quoted as JSON strings; long values are cut.
-- ---------------------------------------------------------------------------
CREATE TABLE bad_num_t (id int PRIMARY KEY, v text);
CREATE TABLE bad_num_j (LIKE bad_num_t INCLUDING ALL);
CREATE TABLE bad_num_events (n int, doc text);
INSERT INTO bad_num_events VALUES
  (1, '{"op":"c","after":{"id":1,"v":"a"},"source":{"name":"num","schema":"public","table":"t","lsn":1e2,"txId":7.0}}'),
  (2, '{"op":"u","after":{"id":1,"v":"b"},"source":{"name":"num","schema":"public","table":"t","lsn":4.0e3,"commit_lsn":4.5e3,"ts_ms":1.7e12},"transaction":{"id":"x","total_order":2E0}}'),
  (3, '{"op":"u","after":{"id":1,"v":"c"},"source":{"name":"num","schema":"public","table":"t","lsn":5000.0,"txId":8}}');
SELECT n, cdc_apply(doc, 'bad_num_t') AS text_form, cdc_apply(doc::jsonb, 'bad_num_j') AS jsonb_form FROM bad_num_events ORDER BY n;
SELECT t.id, t.v, j.v AS jsonb_v FROM bad_num_t t JOIN bad_num_j j USING (id);
SELECT t.entity_key, t.version, t.version = j.version AS jsonb_same
  FROM cdc.entities t JOIN cdc.entities j ON j.entity_key = t.entity_key AND j.target = 'bad_num_j'::regclass
 WHERE t.target = 'bad_num_t'::regclass;
\set VERBOSITY default
SELECT cdc_apply('{"op":"u","after":{"id":1,"v":"d"},"source":{"name":"num","schema":"public","table":"t","lsn":6000,"txId":1.5}}'::text, 'bad_num_t');
SELECT cdc_apply('{"op":"u","after":{"id":1,"v":"d"},"source":{"name":"num","schema":"public","table":"t","lsn":6000,"txId":1.5}}'::jsonb, 'bad_num_j');
SELECT cdc_apply('{"op":"u","after":{"id":1,"v":"d"},"source":{"name":"num","schema":"public","table":"t","lsn":1e400}}'::text, 'bad_num_t');
SELECT cdc_apply('{"op":"u","after":{"id":1,"v":"d"},"source":{"name":"num","schema":"public","table":"t","lsn":1e400}}'::jsonb, 'bad_num_j');
SELECT cdc_apply('{"op":"u","after":{"id":1,"na\"me":"d"},"source":{"name":"num","schema":"public","table":"t","lsn":6000}}'::jsonb, 'bad_num_j');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT t.v, j.v AS jsonb_v, ledger_count('bad_num_t') AS text_ledger, ledger_count('bad_num_j') AS jsonb_ledger
  FROM bad_num_t t JOIN bad_num_j j USING (id);

-- ---------------------------------------------------------------------------
-- Column values written as numbers with an exponent (found by a fresh-user
-- run: "id": 1e2 filled an integer column from jsonb, which holds the
-- numeric 100, and was refused from text with 22P02; a text key column
-- stored 1e2 from text and 100 from jsonb, two entities for one key).  A
-- JSON number reaches the column's input function as jsonb prints it, in
-- both forms: exponent applied, numeric's display scale (1.25e-1 is
-- 0.125, 12.30e-1 is 1.230), no sign on zero.  A number numeric cannot
-- hold is refused with 22003 in the text form, as jsonb_in refuses it.
-- ---------------------------------------------------------------------------
CREATE TABLE bad_exp_t (id int PRIMARY KEY, k text UNIQUE, n numeric, f float8, s text);
CREATE TABLE bad_exp_j (LIKE bad_exp_t INCLUDING ALL);
SELECT target FROM cdc.register_mapping('bad_exp_t');
SELECT target FROM cdc.register_mapping('bad_exp_j');
CREATE TABLE bad_exp_events (n int, doc text);
INSERT INTO bad_exp_events VALUES
  (1, '{"op":"c","after":{"id":1e2,"k":"a","n":1.25e-1,"f":-1.5E+3,"s":12.30e-1},"source":{"name":"exp","schema":"public","table":"t","lsn":100}}'),
  (2, '{"op":"c","after":{"id":2,"k":"b","n":-0.0,"f":5e-1,"s":0e5},"source":{"name":"exp","schema":"public","table":"t","lsn":200}}');
SELECT n, cdc_apply(doc, 'bad_exp_t') AS text_form, cdc_apply(doc::jsonb, 'bad_exp_j') AS jsonb_form FROM bad_exp_events ORDER BY n;
SELECT t.*, (t.*)::text = (j.*)::text AS jsonb_same FROM bad_exp_t t JOIN bad_exp_j j USING (id) ORDER BY id;
-- a text key: 1e1 and 10 name one entity whichever form carries them
CREATE TABLE bad_exp_key (k text PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('bad_exp_key');
SELECT cdc_apply('{"op":"c","after":{"k":1e1,"v":"text form"},"source":{"name":"exp","schema":"public","table":"k","lsn":300}}'::text, 'bad_exp_key') AS text_form,
       cdc_apply('{"op":"u","after":{"k":10,"v":"jsonb form"},"source":{"name":"exp","schema":"public","table":"k","lsn":400}}'::jsonb, 'bad_exp_key') AS jsonb_form;
SELECT * FROM bad_exp_key;
SELECT entity_key, version FROM cdc.entities WHERE target = 'bad_exp_key'::regclass;
\set VERBOSITY default
SELECT cdc_apply('{"op":"c","after":{"id":3,"n":1e131072},"source":{"name":"exp","schema":"public","table":"t","lsn":500}}'::text, 'bad_exp_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT '{"n":1e131072}'::jsonb;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT count(*) AS rows_t, ledger_count('bad_exp_t') AS ledger_t FROM bad_exp_t;

-- ---------------------------------------------------------------------------
-- Long source identity values (found by a fresh-user run: a source.name of
-- about 3,000 bytes failed at cdc.source's btree index with 54000 "index
-- row size ... exceeds maximum" naming no field, and a long source.table
-- was printed whole in the 42P01 message).  source.name takes at most 1024
-- bytes, source.db, source.schema and source.table 255 each: a longer value
-- is refused with 22023 naming the field, its length and its first 40
-- bytes, in both forms and in the batch, before anything is written.  At
-- the limits, with incompressible values (md5 hex) and a 512-byte outbox
-- topic (the limit of cdc.register_mapping), the event applies and its
-- cdc.source and cdc.outbox_source entries fit their indexes.  The 42P01
-- message of an unmapped table cuts the names to 40 bytes.
-- cdc.register_mapping and cdc.rename_source take the same limits.
-- ---------------------------------------------------------------------------
-- bad_hex(n, seed): n bytes of hex digits that pglz cannot compress
CREATE FUNCTION bad_hex(n int, seed text) RETURNS text LANGUAGE sql IMMUTABLE AS
  $$ SELECT left(string_agg(md5(seed || i), '' ORDER BY i), n) FROM generate_series(1, n / 32 + 1) i $$;
-- bad_long_ev(id, name, db, schema, table, lsn): a create event for bad_long
CREATE FUNCTION bad_long_ev(id int, name text, db text, sch text, tbl text, lsn int) RETURNS text LANGUAGE sql IMMUTABLE AS
  $$ SELECT json_build_object('op', 'c', 'after', json_build_object('id', id),
                              'source', json_build_object('name', name, 'db', db, 'schema', sch, 'table', tbl,
                                                          'lsn', lsn, 'txId', lsn))::text $$;
CREATE TABLE bad_long (id int PRIMARY KEY);
SELECT target, octet_length(outbox_topic) AS topic_bytes
  FROM cdc.register_mapping('bad_long', outbox => true, outbox_topic => bad_hex(512, 'topic'));
CREATE FUNCTION bad_long_state() RETURNS TABLE (rows bigint, ledger bigint, outbox bigint, entities bigint,
                                                sources bigint, outbox_sources bigint)
LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM bad_long), ledger_count('bad_long'), outbox_count('bad_long'),
         (SELECT count(*) FROM cdc.entities WHERE target = 'bad_long'::regclass),
         (SELECT count(*) FROM cdc.source), (SELECT count(*) FROM cdc.outbox_source)
$$;
SELECT row(s.*)::text AS long_before FROM bad_long_state() s \gset
\set VERBOSITY default
-- one byte over each limit, text form and jsonb form
SELECT cdc_apply(bad_long_ev(1, bad_hex(1025, 'n'), 'd', 'public', 't', 100), 'bad_long');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_long_ev(1, bad_hex(1025, 'n'), 'd', 'public', 't', 100)::jsonb, 'bad_long');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_long_ev(1, 'n', bad_hex(256, 'd'), 'public', 't', 100), 'bad_long');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_long_ev(1, 'n', 'd', bad_hex(256, 's'), 't', 100)::jsonb, 'bad_long');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_long_ev(1, 'n', 'd', 'public', bad_hex(256, 't'), 100), 'bad_long');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- multi-byte characters count as bytes: 128 x 'é' is 256 bytes
SELECT cdc_apply(bad_long_ev(1, 'n', 'd', 'public', repeat('é', 128), 100)::jsonb, 'bad_long');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- the case of the report (3,000 bytes) and a multi-megabyte name: the message stays short
SELECT cdc_apply(bad_long_ev(1, bad_hex(3000, 'n'), 'd', 'public', 't', 100), 'bad_long');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_long_ev(1, repeat('x', 3000000), 'd', 'public', 't', 100)::jsonb, 'bad_long');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- in a batch the good event before it rolls back with it
SELECT cdc_apply_batch('[' || bad_long_ev(1, 'n', 'd', 'public', 't', 100) || ','
                       || bad_long_ev(2, bad_hex(1025, 'n'), 'd', 'public', 't', 200) || ']', 'bad_long');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply_batch(ARRAY[bad_long_ev(1, 'n', 'd', 'public', 't', 100)::jsonb,
                             bad_long_ev(2, 'n', 'd', 'public', bad_hex(300, 't'), 200)::jsonb], 'bad_long');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- no target: an unmapped table's names are cut in the 42P01 message
SELECT cdc_apply(bad_long_ev(1, bad_hex(1024, 'n'), 'd', bad_hex(255, 's'), bad_hex(255, 't'), 100)::jsonb);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply(bad_long_ev(1, 'n', 'd', 'public', repeat('é', 127), 100));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
-- (the dictionaries are shared by every test: their counts are compared, not shown)
SELECT row(s.*)::text = :'long_before' AS nothing_written, rows, ledger, outbox, entities FROM bad_long_state() s;
-- at every limit at once, incompressible: applied, in both forms; the dictionaries hold the whole values
SELECT cdc_apply(bad_long_ev(1, bad_hex(1024, 'n'), bad_hex(255, 'd'), bad_hex(255, 's'), bad_hex(255, 't'), 100), 'bad_long') AS text_form,
       cdc_apply(bad_long_ev(2, bad_hex(1024, 'm'), bad_hex(255, 'e'), bad_hex(255, 'r'), bad_hex(255, 'u'), 200)::jsonb, 'bad_long') AS jsonb_form;
SELECT octet_length(topic) AS topic, octet_length(source_name) AS name, octet_length(source_db) AS db,
       octet_length(source_schema) AS schema, octet_length(source_table) AS tbl
  FROM cdc.outbox_source WHERE source_name IN (bad_hex(1024, 'n'), bad_hex(1024, 'm')) ORDER BY source_name;
SELECT count(*) AS long_sources FROM cdc.source WHERE name IN (bad_hex(1024, 'n'), bad_hex(1024, 'm'));
SELECT rows, ledger, outbox, entities FROM bad_long_state();
-- cdc.register_mapping and cdc.rename_source: the same limits
SELECT cdc.register_mapping('bad_long', source_name => bad_hex(1025, 'n'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.register_mapping('bad_long', source_schema => bad_hex(256, 's'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.register_mapping('bad_long', source_table => bad_hex(256, 't'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.register_mapping('bad_long', outbox => true, outbox_topic => bad_hex(513, 'topic'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.rename_source(bad_hex(1024, 'n'), bad_hex(1025, 'n'));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT octet_length(source_name) AS name, source_table, octet_length(outbox_topic) AS topic
  FROM cdc.mapping WHERE target = 'bad_long'::regclass;
SELECT target, octet_length(source_name) AS name, octet_length(source_schema) AS schema, octet_length(source_table) AS tbl
  FROM cdc.register_mapping('bad_long', source_name => bad_hex(1024, 'n'), source_schema => bad_hex(255, 's'),
                            source_table => bad_hex(255, 't'), outbox => true, outbox_topic => bad_hex(512, 'topic'));
-- resolved by its mapping at the limits, no target given
SELECT cdc_apply(bad_long_ev(3, bad_hex(1024, 'n'), 'd', bad_hex(255, 's'), bad_hex(255, 't'), 300)::jsonb) AS resolved;
SELECT id FROM bad_long ORDER BY id;
-- Another source at its limit, with multibyte characters: the 42501 message
-- shows both names clipped to 40 bytes (at a character boundary), not 2 KB.
SELECT cdc_apply(bad_long_ev(4, repeat('é', 512), 'd', bad_hex(255, 's'), bad_hex(255, 't'), 400), 'bad_long');
SELECT id FROM bad_long ORDER BY id;

-- An entity key longer than cdc.entity_state's primary key can hold (found
-- by a fresh-user run: PostgreSQL's 54000 named only the index
-- entity_state_pkey, with a hint about md5 indexes): 54000 naming the key
-- column, nothing applied, one by one and in a batch; a key that fits
-- once compressed, and one just under the limit, are applied.
\set SHOW_CONTEXT never
CREATE TABLE bad_long_key (k text PRIMARY KEY, v int);
SELECT target FROM cdc.register_mapping('bad_long_key');
CREATE FUNCTION bad_key_ev(k text, lsn int) RETURNS jsonb LANGUAGE sql IMMUTABLE AS
  $$ SELECT jsonb_build_object('op', 'c', 'after', jsonb_build_object('k', k, 'v', 1),
                               'source', jsonb_build_object('name', 'lk', 'schema', 'public', 'table', 'bad_long_key', 'lsn', lsn)) $$;
SELECT cdc_apply(bad_key_ev(bad_hex(3000, 'k'), 10));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT applied FROM cdc_apply_batch(ARRAY[bad_key_ev('short', 11), bad_key_ev(bad_hex(3000, 'k'), 12)]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS rows_, (SELECT count(*) FROM cdc.entity_state WHERE target = 'bad_long_key'::regclass) AS records,
       (SELECT count(*) FROM cdc.ledger WHERE target = 'bad_long_key'::regclass) AS ledger FROM bad_long_key;
SELECT cdc_apply(bad_key_ev(repeat('ab', 50000), 13)) AS compressible_100000,
       cdc_apply(bad_key_ev(bad_hex(2590, 'k'), 14)) AS incompressible_2590;
SELECT octet_length(key) FROM cdc.entity_state WHERE target = 'bad_long_key'::regclass ORDER BY 1;
-- the error's context names the delivery key, which holds the entity key:
-- clipped to 200 bytes and an ellipsis (it was the whole 3,000-byte key)
DO $$
DECLARE ctx text;
BEGIN
  PERFORM cdc_apply(bad_key_ev(bad_hex(3000, 'k'), 15));
EXCEPTION WHEN program_limit_exceeded THEN
  GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT;
  RAISE NOTICE 'context line of % bytes, delivery key clipped: %', octet_length(split_part(ctx, E'\n', 1)),
    split_part(ctx, E'\n', 1) ~ '..."$';
END $$;
\set SHOW_CONTEXT errors
DROP TABLE bad_long_key;
DROP FUNCTION bad_key_ev(text, int);
-- A target given as OID 0 names no relation: 42P01, not routed by the
-- mapping as if the target were left out (review h3); NULL routes.
\set VERBOSITY terse
SELECT cdc_apply(dbz('c', 'bad_items', '{"id": 900, "name": "zero", "qty": 1}', '0/9000', 900), 0);
SELECT cdc_apply(dbz('c', 'bad_items', '{"id": 900, "name": "zero", "qty": 1}', '0/9000', 900), '-'::regclass);
SELECT cdc_apply_batch(ARRAY[dbz('c', 'bad_items', '{"id": 900, "name": "zero", "qty": 1}', '0/9000', 900)], 0);
\set VERBOSITY default
SELECT count(*) AS rows_900 FROM bad_items WHERE id = 900;
SELECT cdc_apply(dbz('c', 'bad_items', '{"id": 900, "name": "zero", "qty": 1}', '0/9000', 900), NULL);
SELECT count(*) AS rows_900 FROM bad_items WHERE id = 900;
-- An event without source.schema (a MySQL connector's) is routed by no
-- mapping, which always names a source schema: the message says so (it
-- read ".bad_items"); with its target named, it applies.
\set VERBOSITY terse
SELECT cdc_apply(dbz('c', 'bad_items', '{"id": 901, "name": "noschema", "qty": 1}', '0/9010', 901, schema_name => NULL));
\set VERBOSITY default
SELECT cdc_apply(dbz('c', 'bad_items', '{"id": 901, "name": "noschema", "qty": 1}', '0/9010', 901, schema_name => NULL), 'bad_items');

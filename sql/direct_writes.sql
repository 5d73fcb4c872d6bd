--
-- direct_writes: rows written without SQL (cdc.direct_writes, on by
-- default; docs/internals.md, "Writes without SQL") give exactly what the
-- SQL statements give.  Each case applies the same deliveries to two
-- identical targets, one with cdc.direct_writes on and one with it off,
-- and compares rows, outbox rows (payload, entity key, op, version) and
-- entity records; then the cases where the direct writer must step aside
-- (a column the event does not carry, a generated column with an outbox, a
-- trigger) and the errors it must raise as the statement does.
-- Tables of this suite are called dw_*.
--
-- The histories: (n, op, after, before), applied in n order.
CREATE TABLE dw_history (n int PRIMARY KEY, op text NOT NULL, after jsonb, before jsonb);
INSERT INTO dw_history VALUES
  (1, 'c', '{"id": 1, "name": "a", "qty": 1, "price": 1.50, "tags": ["x"], "at": "2024-01-01T00:00:00Z"}', NULL),
  (2, 'c', '{"id": 2, "name": "b", "qty": 2, "price": 2.00, "tags": [], "at": "2024-01-01T00:00:01Z"}', NULL),
  (3, 'u', '{"id": 1, "name": "a2", "qty": 3, "price": 1.500, "tags": ["x", "y"], "at": "2024-01-01T00:00:02Z"}', NULL),
  (4, 'd', NULL, '{"id": 2}'),
  (5, 'c', '{"id": 2, "name": "b again", "qty": null, "price": -0.0, "tags": null, "at": null}', NULL),
  (6, 'u', '{"id": 3, "name": "new by update", "qty": 7, "price": 1e3, "tags": ["z"], "at": "2024-01-02T00:00:00+02:00"}', NULL),
  (7, 'r', '{"id": 4, "name": "snapshot row", "qty": 4, "price": 4, "tags": [], "at": null}', NULL),
  (8, 'u', '{"id": 1, "name": "a3 \u00e9\u4e2d", "qty": 8, "price": 0.1, "tags": ["\"q\""], "at": "2024-01-03T00:00:00Z"}', NULL);

-- Applies dw_history to target `tbl` (source table of the same name) with
-- cdc.direct_writes set to `direct`, each history entry twice (the second
-- time a duplicate delivery); returns the outcomes.
CREATE FUNCTION dw_apply(tbl text, direct boolean) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  h record;
  outcomes text := '';
BEGIN
  PERFORM set_config('cdc.direct_writes', direct::text, true);
  FOR h IN SELECT * FROM dw_history ORDER BY n LOOP
    FOR i IN 1 .. 2 LOOP
      outcomes := outcomes || cdc_apply(dbz(h.op, tbl, h.after, '0/' || to_hex(4096 + h.n * 16), 500 + h.n,
                                            before => h.before, total_order => 1),
                                        NULL, tbl || ':' || h.n) || ' ';
    END LOOP;
  END LOOP;
  RETURN outcomes;
END $$;

-- What must be equal between the two targets: rows as JSON, outbox rows
-- (without ids, targets and times) and entity records.
CREATE FUNCTION dw_state(t regclass) RETURNS TABLE (part text, item text) LANGUAGE sql AS $$
  SELECT 'outbox', concat_ws(' ', o.op, o.version::text, o.entity_key::text, o.payload::text)
    FROM cdc.outbox o WHERE o.target = t
  UNION ALL
  SELECT 'entity', concat_ws(' ', e.entity_key::text, e.version::text, e.is_tombstone::text)
    FROM cdc.entities e WHERE e.target = t
$$;
CREATE FUNCTION dw_rows(t regclass) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format('SELECT to_jsonb(x)::text FROM %s x', t);
END $$;
-- Differences between the two targets' states and rows: none expected.
CREATE FUNCTION dw_diff(a regclass, b regclass) RETURNS TABLE (side text, part text, item text) LANGUAGE sql AS $$
  (SELECT 'only ' || a::text, * FROM dw_state(a) EXCEPT ALL SELECT 'only ' || a::text, * FROM dw_state(b))
  UNION ALL
  (SELECT 'only ' || b::text, * FROM dw_state(b) EXCEPT ALL SELECT 'only ' || b::text, * FROM dw_state(a))
  UNION ALL
  (SELECT 'only ' || a::text, 'row', r FROM dw_rows(a) r EXCEPT ALL SELECT 'only ' || a::text, 'row', r FROM dw_rows(b) r)
  UNION ALL
  (SELECT 'only ' || b::text, 'row', r FROM dw_rows(b) r EXCEPT ALL SELECT 'only ' || b::text, 'row', r FROM dw_rows(a) r)
$$;

-- 1. A plain table with an outbox: the direct writer's own case.
CREATE TABLE dw_plain_on (id int PRIMARY KEY, name text NOT NULL, qty int, price numeric, tags text[], at timestamptz);
CREATE TABLE dw_plain_off (LIKE dw_plain_on INCLUDING ALL);
SELECT count(*) FROM cdc.register_mapping('dw_plain_on', outbox => true);
SELECT count(*) FROM cdc.register_mapping('dw_plain_off', outbox => true);
SELECT dw_apply('dw_plain_on', true) = dw_apply('dw_plain_off', false) AS same_outcomes;
SELECT dw_apply('dw_plain_on', true) AS outcomes_again;
SHOW cdc.direct_writes;
SELECT * FROM dw_diff('dw_plain_on', 'dw_plain_off');
SELECT id, name, qty, price, tags, at FROM dw_plain_on ORDER BY id;
SELECT op, payload FROM cdc.outbox WHERE target = 'dw_plain_on'::regclass ORDER BY id;

-- 2. Without an outbox, with a stored generated column: the executor
-- computes it either way.
CREATE TABLE dw_gen_on (id int PRIMARY KEY, name text NOT NULL, qty int, price numeric, tags text[], at timestamptz,
                        total numeric GENERATED ALWAYS AS (qty * price) STORED);
CREATE TABLE dw_gen_off (LIKE dw_gen_on INCLUDING ALL);
SELECT count(*) FROM cdc.register_mapping('dw_gen_on');
SELECT count(*) FROM cdc.register_mapping('dw_gen_off');
SELECT dw_apply('dw_gen_on', true) = dw_apply('dw_gen_off', false) AS same_outcomes;
SELECT * FROM dw_diff('dw_gen_on', 'dw_gen_off');
SELECT id, qty, price, total FROM dw_gen_on ORDER BY id;

-- 3. A generated column with an outbox: the payload must show the computed
-- value, so the statement writes the row (RETURNING) in both settings.
CREATE TABLE dw_genob_on (LIKE dw_gen_on INCLUDING ALL);
CREATE TABLE dw_genob_off (LIKE dw_gen_on INCLUDING ALL);
SELECT count(*) FROM cdc.register_mapping('dw_genob_on', outbox => true);
SELECT count(*) FROM cdc.register_mapping('dw_genob_off', outbox => true);
SELECT dw_apply('dw_genob_on', true) = dw_apply('dw_genob_off', false) AS same_outcomes;
SELECT * FROM dw_diff('dw_genob_on', 'dw_genob_off');
SELECT payload->>'id' AS id, payload->>'total' AS total FROM cdc.outbox
 WHERE target = 'dw_genob_on'::regclass AND op <> 'd' ORDER BY id;

-- 4. A column the events do not carry: its default on insert, kept on
-- update, as INSERT ... ON CONFLICT DO UPDATE does (the statement runs).
CREATE TABLE dw_extra_on (LIKE dw_plain_on INCLUDING ALL);
ALTER TABLE dw_extra_on ADD COLUMN note text NOT NULL DEFAULT 'from default';
CREATE TABLE dw_extra_off (LIKE dw_extra_on INCLUDING ALL);
SELECT count(*) FROM cdc.register_mapping('dw_extra_on', outbox => true);
SELECT count(*) FROM cdc.register_mapping('dw_extra_off', outbox => true);
SELECT dw_apply('dw_extra_on', true) = dw_apply('dw_extra_off', false) AS same_outcomes;
SELECT * FROM dw_diff('dw_extra_on', 'dw_extra_off');
SELECT id, note FROM dw_extra_on ORDER BY id;

-- 5. A trigger on the target: it fires once per applied change, in both.
CREATE TABLE dw_log (tbl text, op text, id int);
CREATE FUNCTION dw_log_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.dw_log VALUES (TG_TABLE_NAME, TG_OP, coalesce(NEW.id, OLD.id));
  RETURN coalesce(NEW, OLD);
END $$;
CREATE TABLE dw_trg_on (LIKE dw_plain_on INCLUDING ALL);
CREATE TABLE dw_trg_off (LIKE dw_plain_on INCLUDING ALL);
CREATE TRIGGER dw_trg_on_log AFTER INSERT OR UPDATE OR DELETE ON dw_trg_on FOR EACH ROW EXECUTE FUNCTION dw_log_row();
CREATE TRIGGER dw_trg_off_log AFTER INSERT OR UPDATE OR DELETE ON dw_trg_off FOR EACH ROW EXECUTE FUNCTION dw_log_row();
SELECT count(*) FROM cdc.register_mapping('dw_trg_on', outbox => true);
SELECT count(*) FROM cdc.register_mapping('dw_trg_off', outbox => true);
SELECT dw_apply('dw_trg_on', true) = dw_apply('dw_trg_off', false) AS same_outcomes;
SELECT * FROM dw_diff('dw_trg_on', 'dw_trg_off');
SELECT op, count(*) FILTER (WHERE tbl = 'dw_trg_on') AS direct_on, count(*) FILTER (WHERE tbl = 'dw_trg_off') AS direct_off
  FROM dw_log GROUP BY op ORDER BY op;

-- 6. Errors as the statement's, and nothing half-applied: a NULL in a NOT
-- NULL column (23502, the column named), with no ledger row, entity record
-- or outbox row left behind.
\set VERBOSITY terse
SET cdc.direct_writes = on;
SELECT cdc_apply(dbz('c', 'dw_plain_on', '{"id": 9, "name": null, "qty": 1, "price": 1, "tags": [], "at": null}',
                     '0/9000', 900), NULL, 'dw_plain_on:null');
SET cdc.direct_writes = off;
SELECT cdc_apply(dbz('c', 'dw_plain_on', '{"id": 9, "name": null, "qty": 1, "price": 1, "tags": [], "at": null}',
                     '0/9000', 900), NULL, 'dw_plain_on:null');
RESET cdc.direct_writes;
\set VERBOSITY default
SELECT cdc.delivery_processed('dw_plain_on', 'dw_plain_on:null') AS claimed,
       (SELECT count(*) FROM cdc.entities WHERE target = 'dw_plain_on'::regclass AND entity_key = '{"id": "9"}') AS records,
       (SELECT count(*) FROM cdc.outbox WHERE target = 'dw_plain_on'::regclass AND entity_key = '{"id": "9"}') AS outbox_rows,
       (SELECT count(*) FROM dw_plain_on WHERE id = 9) AS target_rows;

-- The setting is a superuser's (PGC_SUSET): an ordinary role cannot turn
-- the direct writer off (nor on) for its own calls.
CREATE ROLE dw_user;
SET ROLE dw_user;
SET cdc.direct_writes = off;
RESET ROLE;
DROP ROLE dw_user;

-- 7. What the direct outbox writer knows of cdc.outbox_rows (the columns it
-- fills, the planned defaults of the others) is kept per backend and
-- renewed when the table changes: a column a relay adds, and a default it
-- changes, apply to the next row of the same session.
SELECT cdc_apply(dbz('c', 'dw_plain_on', '{"id": 20, "name": "t", "qty": 1, "price": 1, "tags": [], "at": null}',
                     '0/A000', 1000), NULL, 'dw:20');
ALTER TABLE cdc.outbox_rows ADD COLUMN relay_note text DEFAULT 'first';
SELECT cdc_apply(dbz('c', 'dw_plain_on', '{"id": 21, "name": "t", "qty": 1, "price": 1, "tags": [], "at": null}',
                     '0/A010', 1001), NULL, 'dw:21');
ALTER TABLE cdc.outbox_rows ALTER COLUMN relay_note SET DEFAULT 'second';
SELECT cdc_apply(dbz('c', 'dw_plain_on', '{"id": 22, "name": "t", "qty": 1, "price": 1, "tags": [], "at": null}',
                     '0/A020', 1002), NULL, 'dw:22');
SELECT o.payload->>'id' AS id, r.relay_note FROM cdc.outbox_rows r JOIN cdc.outbox o USING (id)
 WHERE r.target = 'dw_plain_on'::regclass AND (o.payload->>'id')::int >= 20 ORDER BY r.id;
ALTER TABLE cdc.outbox_rows DROP COLUMN relay_note;
SELECT cdc_apply(dbz('c', 'dw_plain_on', '{"id": 23, "name": "t", "qty": 1, "price": 1, "tags": [], "at": null}',
                     '0/A030', 1003), NULL, 'dw:23');
SELECT payload->>'id' AS id, op FROM cdc.outbox
 WHERE target = 'dw_plain_on'::regclass AND (payload->>'id')::int >= 20 ORDER BY id;

-- 8. Batches (cdc_apply_batch, the worker's engine): a segment's deletes
-- and the rows it reads back for outbox payloads go without SQL too
-- (FindRowsDirect), with the same rows and payloads as the statements.
-- The second batch has a chain ending with a delete after an update (key
-- 1), a delete followed by a re-create (key 2: the row before the batch is
-- read back first), a lone delete (key 5), a delete of a row that is not
-- there (key 9: the before-image is published), and delete, create,
-- delete (key 7); with an outbox and without one.
CREATE TABLE dwb_history (b int, n int, op text NOT NULL, after jsonb, before jsonb, PRIMARY KEY (b, n));
INSERT INTO dwb_history VALUES
  (1, 1, 'c', '{"id": 1, "name": "one", "qty": 1, "price": 1, "at": null}', NULL),
  (1, 2, 'c', '{"id": 2, "name": "two", "qty": 2, "price": 2, "at": null}', NULL),
  (1, 3, 'c', '{"id": 5, "name": "five", "qty": 5, "price": 5, "at": "2024-05-05T00:00:00Z"}', NULL),
  (1, 4, 'c', '{"id": 7, "name": "seven", "qty": 7, "price": 7, "at": null}', NULL),
  (2, 1, 'u', '{"id": 1, "name": "one updated", "qty": 10, "price": 1.5, "at": null}', NULL),
  (2, 2, 'd', NULL, '{"id": 1}'),
  (2, 3, 'd', NULL, '{"id": 2}'),
  (2, 4, 'c', '{"id": 2, "name": "two again", "qty": 22, "price": 2, "at": null}', NULL),
  (2, 5, 'd', NULL, '{"id": 5}'),
  (2, 6, 'd', NULL, '{"id": 9, "name": "nine, gone already"}'),
  (2, 7, 'd', NULL, '{"id": 7}'),
  (2, 8, 'c', '{"id": 7, "name": "seven again", "qty": 77, "price": 7, "at": null}', NULL),
  (2, 9, 'd', NULL, '{"id": 7}');
-- key 5's name is stored out of line (TOAST): its delete's payload has it whole
UPDATE dwb_history SET after = jsonb_set(after, '{name}', to_jsonb(repeat('five', 1000))) WHERE b = 1 AND n = 3;
CREATE FUNCTION dwb_apply(tbl text, direct boolean) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  outcomes text := '';
  bn int;
BEGIN
  PERFORM set_config('cdc.direct_writes', direct::text, true);
  FOR bn IN 1 .. 2 LOOP
    outcomes := outcomes || (SELECT r.outcomes::text
                               FROM cdc_apply_batch((SELECT jsonb_agg(dbz(h.op, tbl, h.after, '0/' || to_hex(bn * 4096 + h.n * 16),
                                                                          700 + bn, before => h.before, total_order => h.n)
                                                                      ORDER BY h.n)
                                                       FROM dwb_history h WHERE h.b = bn), with_outcomes => true) r) || ' ';
  END LOOP;
  RETURN outcomes;
END $$;
-- (no array column: an array column's values cannot be passed as an array,
-- so such a target is applied change by change)
CREATE TABLE dwb_ob_on (id int PRIMARY KEY, name text NOT NULL, qty int, price numeric, at timestamptz);
ALTER TABLE dwb_ob_on ALTER COLUMN name SET STORAGE EXTERNAL;
CREATE TABLE dwb_ob_off (LIKE dwb_ob_on INCLUDING ALL);
CREATE TABLE dwb_st_on (LIKE dwb_ob_on INCLUDING ALL);
CREATE TABLE dwb_st_off (LIKE dwb_ob_on INCLUDING ALL);
SELECT count(*) FROM cdc.register_mapping('dwb_ob_on', outbox => true);
SELECT count(*) FROM cdc.register_mapping('dwb_ob_off', outbox => true);
SELECT count(*) FROM cdc.register_mapping('dwb_st_on');
SELECT count(*) FROM cdc.register_mapping('dwb_st_off');
SELECT dwb_apply('dwb_ob_on', true) = dwb_apply('dwb_ob_off', false) AS same_outcomes;
SELECT dwb_apply('dwb_ob_on', true) AS replayed;
SELECT * FROM dw_diff('dwb_ob_on', 'dwb_ob_off');
SELECT id, name, qty FROM dwb_ob_on ORDER BY id;
SELECT op, entity_key, left(payload->>'name', 20) AS name, length(payload->>'name') AS name_length, payload->>'qty' AS qty
  FROM cdc.outbox WHERE target = 'dwb_ob_on'::regclass ORDER BY id;
SELECT dwb_apply('dwb_st_on', true) = dwb_apply('dwb_st_off', false) AS same_outcomes;
SELECT * FROM dw_diff('dwb_st_on', 'dwb_st_off');
SELECT id, name, qty FROM dwb_st_on ORDER BY id;

-- ===========================================================================
-- Where the key index finds other rows than the statement's "DELETE FROM t
-- WHERE key = $1": the direct writer must step aside, and a batch must not
-- merge a key's delete into its re-creation.
-- (a) An inheritance parent: a change names the parent's own rows (as at
--     the source and in PostgreSQL's own apply), so the statements read
--     "ONLY parent" and a child's row of the key stays, with the setting on
--     and off (before, the statement also removed it; the worker lost the
--     source's child rows that way: test/t/069_worker_inheritance.pl).
-- (b) A unique index declared with another collation than its column (a
--     nondeterministic, case-insensitive one on a "C" column): the index
--     finds 'ABC' for the key 'abc', which the statement's = does not match.
--     Such a key is now refused (0A000) on both paths before anything is
--     written, and cdc.register_mapping warns (entity records name an
--     entity by its key's text: sql/key_index_collation.sql).
-- Each applies the same delete with the setting on and off, in a rolled
-- back transaction, and compares the rows and the outbox payloads.
-- ===========================================================================
CREATE TABLE dw_par (id int PRIMARY KEY, v text);
CREATE TABLE dw_par_child (extra int) INHERITS (dw_par);
INSERT INTO dw_par_child VALUES (1, 'child row', 0);
SELECT count(*) FROM cdc.register_mapping('dw_par', outbox => true);
CREATE COLLATION dw_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE dw_ci_key (k text COLLATE "C" NOT NULL, v text);
CREATE UNIQUE INDEX dw_ci_key_k ON dw_ci_key (k COLLATE dw_ci);
-- (a replica identity: without one the direct writer steps aside anyway)
ALTER TABLE dw_ci_key REPLICA IDENTITY USING INDEX dw_ci_key_k;
INSERT INTO dw_ci_key VALUES ('ABC', 'upper case');
SELECT count(*) FROM cdc.register_mapping('dw_ci_key', key_columns => ARRAY['k'], outbox => true);
-- the deliveries `evs` applied to `tbl` one by one (or as one batch) with
-- the setting `direct`; the rows (with the table each is in) and the outbox
-- payloads, then everything rolled back
CREATE FUNCTION dw_scope(tbl regclass, evs jsonb, direct boolean, batch boolean) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  r text;
  e jsonb;
BEGIN
  BEGIN
    PERFORM set_config('cdc.direct_writes', direct::text, true);
    IF batch THEN
      PERFORM cdc_apply_batch(evs);
    ELSE
      FOR e IN SELECT * FROM jsonb_array_elements(evs) LOOP
        PERFORM cdc_apply(e);
      END LOOP;
    END IF;
    EXECUTE format('SELECT coalesce(string_agg(t.tableoid::regclass || '' '' || to_jsonb(t)::text, ''; '' ORDER BY to_jsonb(t)::text), ''no rows'') FROM %s t', tbl)
      INTO r;
    r := r || ' | outbox: ' || coalesce((SELECT string_agg(op || ' ' || payload::text, '; ' ORDER BY id) FROM cdc.outbox WHERE target = tbl), 'none');
    RAISE EXCEPTION USING ERRCODE = 'P0099', MESSAGE = r;
  EXCEPTION WHEN SQLSTATE 'P0099' THEN
    RETURN SQLERRM;
  END;
END $$;
-- (a) the delete leaves the child's row either way; the parent has no row of the key, so its payload is the before-image
SELECT dw_scope('dw_par', jsonb_build_array(dbz('d', 'dw_par', NULL, '0/100', 1, '{"id": 1, "v": "before"}')), true, false) AS direct_on;
SELECT dw_scope('dw_par', jsonb_build_array(dbz('d', 'dw_par', NULL, '0/100', 1, '{"id": 1, "v": "before"}')), false, false) AS direct_off;
-- a batch with the key's delete and its re-creation: the child's row stays, as one by one
SELECT dw_scope('dw_par', jsonb_build_array(dbz('d', 'dw_par', NULL, '0/100', 1, '{"id": 1, "v": "before"}'),
                                            dbz('c', 'dw_par', '{"id": 1, "v": "again"}', '0/200', 2)), true, true) AS batch_on;
SELECT dw_scope('dw_par', jsonb_build_array(dbz('d', 'dw_par', NULL, '0/100', 1, '{"id": 1, "v": "before"}'),
                                            dbz('c', 'dw_par', '{"id": 1, "v": "again"}', '0/200', 2)), false, false) AS one_by_one_off;
-- (b) the delete of 'abc' is refused either way, the row 'ABC' left
SELECT dw_scope('dw_ci_key', jsonb_build_array(dbz('d', 'dw_ci_key', NULL, '0/100', 1, '{"k": "abc", "v": "lower case"}')), true, false) AS direct_on;
SELECT dw_scope('dw_ci_key', jsonb_build_array(dbz('d', 'dw_ci_key', NULL, '0/100', 1, '{"k": "abc", "v": "lower case"}')), false, false) AS direct_off;
SELECT dw_scope('dw_ci_key', jsonb_build_array(dbz('d', 'dw_ci_key', NULL, '0/100', 1, '{"k": "abc", "v": "lower case"}')), true, true) AS batch_on;

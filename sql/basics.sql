--
-- basics: the extension as a user meets it after CREATE EXTENSION (done in
-- setup): cdc_apply() resolves with the default search_path, its state lives
-- in schema cdc, a minimal round trip, the text overload, and the set of
-- values cdc_apply() returns.
--

-- A fresh session's search_path: nothing set by this suite.
RESET search_path;
SHOW search_path;

-- The entry points live in the extension's schema (public), the state in cdc.
SELECT e.extname, e.extversion, e.extnamespace::regnamespace AS ext_schema
  FROM pg_extension e WHERE e.extname = 'cdc_apply';
SELECT p.oid::regprocedure AS function, p.prorettype::regtype AS returns
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
 ORDER BY p.oid::regprocedure::text;
SELECT c.oid::regclass AS relation, c.relkind
  FROM pg_class c
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
 WHERE c.relkind IN ('r', 'v')
 ORDER BY c.oid::regclass::text;
-- Nothing of the extension's state lands in public.
SELECT count(*) AS public_relations_of_extension
  FROM pg_class c
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
 WHERE c.relnamespace = 'public'::regnamespace;

-- The unqualified name resolves to the extension's function, with both
-- overloads visible and distinct.
SELECT 'cdc_apply(jsonb,regclass,text)'::regprocedure = 'public.cdc_apply(jsonb,regclass,text)'::regprocedure AS jsonb_resolves,
       'cdc_apply(text,regclass,text)'::regprocedure = 'public.cdc_apply(text,regclass,text)'::regprocedure AS text_resolves;

-- ---------------------------------------------------------------------------
-- Minimal round trip: explicit target, no mapping, derived delivery keys.
-- ---------------------------------------------------------------------------
CREATE TABLE basics_items (id int PRIMARY KEY, name text NOT NULL, qty int);

-- Nothing yet: no state for this target.
SELECT ledger_count('basics_items') AS ledger, outbox_count('basics_items') AS outbox,
       (SELECT count(*) FROM cdc.entities WHERE target = 'basics_items'::regclass) AS entities;

SELECT cdc_apply(dbz('c', 'basics_items', '{"id": 1, "name": "bolt", "qty": 10}', '0/1000', 500), 'basics_items');
SELECT * FROM basics_items ORDER BY id;
-- The claim and the entity version were written with the row.
SELECT * FROM ledger_has('basics_items', 'dbz:srv:src:public.basics_items:c:4096:500::{"id": "1"}');
SELECT target, entity_key, source_name, version, is_tombstone FROM cdc.entities WHERE target = 'basics_items'::regclass;

-- The same message again: duplicate (same derived delivery key), nothing changes.
SELECT cdc_apply(dbz('c', 'basics_items', '{"id": 1, "name": "bolt", "qty": 10}', '0/1000', 500), 'basics_items');
SELECT * FROM basics_items ORDER BY id;
SELECT ledger_count('basics_items') AS ledger;

-- A newer update: applied (absolute values).
SELECT cdc_apply(dbz('u', 'basics_items', '{"id": 1, "name": "bolt", "qty": 7}', '0/2000', 501), 'basics_items');
SELECT * FROM basics_items ORDER BY id;

-- The text overload: raw JSON text (for example a Kafka record value).
SELECT cdc_apply(dbz('c', 'basics_items', '{"id": 2, "name": "nut", "qty": 100}', '0/2100', 502)::text,
                 'basics_items'::regclass);
-- An untyped literal resolves to the text overload too.
EXPLAIN (VERBOSE, COSTS OFF) SELECT cdc_apply('{}', 'basics_items');
SELECT cdc_apply('{"op": "c", "source": {"name": "srv", "db": "src", "schema": "public", "table": "basics_items", "lsn": 8704, "txId": 503}, "after": {"id": 3, "name": "washer", "qty": 5}}',
                 'basics_items');
-- jsonb and text carry the same event: the text delivery of id 2 is a
-- duplicate when the same message comes back as jsonb.
SELECT cdc_apply(dbz('c', 'basics_items', '{"id": 2, "name": "nut", "qty": 100}', '0/2100', 502), 'basics_items');
SELECT * FROM basics_items ORDER BY id;

-- An older update of id 1 (lsn 0/1800 < 0/2000): stale, row keeps qty 7.
SELECT cdc_apply(dbz('u', 'basics_items', '{"id": 1, "name": "bolt", "qty": 9}', '0/1800', 499), 'basics_items');
-- Equal version with different content (same lsn as the applied update, other
-- image): conflict, recorded with both images, not applied.
SELECT cdc_apply(dbz('u', 'basics_items', '{"id": 1, "name": "bolt", "qty": 6}', '0/2000', 501), 'basics_items',
                 'explicit-conflict-1');
-- A delete: applied, leaves a tombstone.
SELECT cdc_apply(dbz('d', 'basics_items', NULL, '0/3000', 510, before => '{"id": 3}'), 'basics_items');
-- A Kafka tombstone (null value after the delete): ignored.
SELECT cdc_apply(kafka_tombstone(), 'basics_items');
SELECT cdc_apply(NULL::jsonb, 'basics_items');

SELECT * FROM basics_items ORDER BY id;
SELECT entity_key, version FROM tombstones_of('basics_items');
SELECT entity_key, reason, stored_version, event_version, stored_image, event_image
  FROM cdc.conflicts WHERE target = 'basics_items'::regclass ORDER BY id;
SELECT applied, duplicate, stale, conflict, ignored, blocked_resurrections, outbox_rows, snapshot_rows
  FROM cdc.stats WHERE target = 'basics_items'::regclass;
-- Kafka tombstones pass before a target is known; with a target given they
-- count for it.  Ledger: one row per processed delivery (not for ignored ones).
SELECT ledger_count('basics_items') AS ledger, outbox_count('basics_items') AS outbox;

-- ---------------------------------------------------------------------------
-- Target resolved from a mapping (no target argument).
-- ---------------------------------------------------------------------------
SELECT target, source_schema, source_table, key_columns, version_column, outbox, truncate_policy
  FROM cdc.register_mapping('basics_items');
SELECT cdc_apply(dbz('c', 'basics_items', '{"id": 4, "name": "pin", "qty": 1}', '0/4000', 520));
SELECT cdc_apply(dbz('c', 'basics_items', '{"id": 4, "name": "pin", "qty": 1}', '0/4000', 520)::text);
SELECT * FROM basics_items ORDER BY id;

-- ---------------------------------------------------------------------------
-- The returned value set: exactly the five outcomes, as text.
-- ---------------------------------------------------------------------------
CREATE TABLE basics_outcomes (n int PRIMARY KEY, v text);
CREATE TEMP TABLE seen (step int, outcome text);
INSERT INTO seen VALUES
  (1, cdc_apply(dbz('c', 'basics_outcomes', '{"n": 1, "v": "a"}', '0/5000', 600), 'basics_outcomes'));
INSERT INTO seen VALUES
  (2, cdc_apply(dbz('c', 'basics_outcomes', '{"n": 1, "v": "a"}', '0/5000', 600), 'basics_outcomes'));
INSERT INTO seen VALUES
  (3, cdc_apply(dbz('u', 'basics_outcomes', '{"n": 1, "v": "old"}', '0/4F00', 599), 'basics_outcomes'));
INSERT INTO seen VALUES
  (4, cdc_apply(dbz('u', 'basics_outcomes', '{"n": 1, "v": "b"}', '0/5000', 600), 'basics_outcomes', 'other-delivery'));
INSERT INTO seen VALUES
  (5, cdc_apply('null'::jsonb, 'basics_outcomes'));
SELECT step, outcome FROM seen ORDER BY step;
SELECT array_agg(DISTINCT outcome ORDER BY outcome) AS outcome_set,
       bool_and(outcome IN ('applied', 'duplicate', 'stale', 'conflict', 'ignored')) AS all_known
  FROM seen;
SELECT * FROM basics_outcomes;
SELECT applied, duplicate, stale, conflict, ignored FROM cdc.stats WHERE target = 'basics_outcomes'::regclass;

-- A source table maps to one target: a second target for it is refused
-- naming the first (found by a fresh-user run: a raw unique violation of
-- mapping_source_idx), and a bad conflict_policy is echoed.
CREATE TABLE basics_one (id int PRIMARY KEY);
CREATE TABLE basics_two (id int PRIMARY KEY);
SELECT target FROM cdc.register_mapping('basics_one', 'public', 'shared_src');
\set VERBOSITY default
SELECT target FROM cdc.register_mapping('basics_two', 'public', 'shared_src');
SELECT target FROM cdc.register_mapping('basics_two', conflict_policy => 'ignore');
-- NULL for outbox is refused as for every other option, not taken as false (review h3)
SELECT target FROM cdc.register_mapping('basics_two', outbox => NULL);
\set VERBOSITY terse
SELECT target FROM cdc.register_mapping('basics_two', 'public', 'shared_src', source_name => 'another');
SELECT target::text, source_name, source_table FROM cdc.mapping WHERE target IN ('basics_one'::regclass, 'basics_two'::regclass) ORDER BY 1;
SELECT cdc.unregister_mapping('basics_one'), cdc.unregister_mapping('basics_two');
DROP TABLE basics_one, basics_two;

-- Empty names are refused naming the parameter (22023; found by a fresh-user
-- run: they were stored, and no event could ever match them), and nothing is
-- registered.
CREATE TABLE basics_empty (id int PRIMARY KEY);
\set VERBOSITY default
SELECT target FROM cdc.register_mapping('basics_empty', source_name => '');
SELECT target FROM cdc.register_mapping('basics_empty', 'public', '');
SELECT target FROM cdc.register_mapping('basics_empty', '', 'basics_empty');
SELECT target FROM cdc.register_mapping('basics_empty', outbox => true, outbox_topic => '');
\set VERBOSITY terse
SELECT count(*) AS mappings FROM cdc.mapping WHERE target = 'basics_empty'::regclass;
DROP TABLE basics_empty;

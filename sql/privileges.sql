--
-- privileges: cdc_apply() acts with the caller's rights on the target and
-- its own bookkeeping is closed to plain roles.
--   * without INSERT/UPDATE/DELETE on the target: 42501 naming the table,
--     nothing written (no row, no ledger claim, no counters);
--   * with the grants: applied;
--   * cdc.register_mapping() is not for non-owners;
--   * cdc.ledger (and the other state tables) cannot be written by a plain
--     role; cdc.stats is readable, and so are the ledger entries of targets
--     the role may read (the policy of cdc.ledger, sql/security.sql);
--   * every function of the extension pins search_path; none is SECURITY
--     DEFINER except the sql_drop clean-up cdc._drop_target_state() (any
--     table owner may drop a mapped table; it only deletes the state of the
--     dropped tables), which PUBLIC cannot call directly, and
--     cdc._subscription_progress() (the replication origins' LSNs for
--     cdc.subscription_status; docs/security.md).
--
CREATE ROLE regress_cdc_reader;   -- SELECT only
CREATE ROLE regress_cdc_partial;  -- SELECT, INSERT, UPDATE (no DELETE)
CREATE ROLE regress_cdc_writer;   -- SELECT, INSERT, UPDATE, DELETE
CREATE ROLE regress_cdc_blind;    -- INSERT, UPDATE, DELETE (no SELECT)

CREATE TABLE priv_items (id int PRIMARY KEY, v text);
SELECT target, outbox FROM cdc.register_mapping('priv_items', outbox => true);
GRANT SELECT ON priv_items TO regress_cdc_reader;
GRANT SELECT, INSERT, UPDATE ON priv_items TO regress_cdc_partial;
GRANT SELECT, INSERT, UPDATE, DELETE ON priv_items TO regress_cdc_writer;
GRANT INSERT, UPDATE, DELETE ON priv_items TO regress_cdc_blind;

CREATE FUNCTION priv_state() RETURNS TABLE (target_rows bigint, ledger bigint, outbox bigint, entities bigint, applied bigint)
LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM priv_items), ledger_count('priv_items'), outbox_count('priv_items'),
         (SELECT count(*) FROM cdc.entities WHERE target = 'priv_items'::regclass),
         coalesce((SELECT applied FROM cdc.stats WHERE target = 'priv_items'::regclass), 0)
$$;
SELECT * FROM priv_state();

-- ---------------------------------------------------------------------------
-- 1. No write privileges on the target: 42501 naming the table (and, in the
--    detail, the role); nothing is written.
-- ---------------------------------------------------------------------------
SET ROLE regress_cdc_reader;
SELECT cdc_apply(dbz('c', 'priv_items', '{"id": 1, "v": "a"}', '0/1000', 1), 'priv_items', 'priv-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- Through the mapping (no target argument): the same.
SELECT cdc_apply(dbz('c', 'priv_items', '{"id": 1, "v": "a"}', '0/1000', 1), NULL, 'priv-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_cdc_partial;
SELECT cdc_apply(dbz('c', 'priv_items', '{"id": 1, "v": "a"}', '0/1000', 1), 'priv_items', 'priv-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Write privileges without SELECT: the upsert (ON CONFLICT DO UPDATE ...
-- RETURNING) needs SELECT too, so the engine's own check refuses it before
-- anything is claimed or written.
SET ROLE regress_cdc_blind;
\set SHOW_CONTEXT never
SELECT cdc_apply(dbz('c', 'priv_items', '{"id": 1, "v": "a"}', '0/1000', 1), 'priv_items', 'priv-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
RESET ROLE;
SELECT * FROM priv_state();
SELECT cdc.delivery_processed('priv_items', 'priv-1') AS claimed;

-- ---------------------------------------------------------------------------
-- 2. With the grants: applied, and the bookkeeping (ledger, entity version,
--    outbox, counters) is written although the role cannot write cdc.*.
-- ---------------------------------------------------------------------------
SET ROLE regress_cdc_writer;
SELECT current_user;
SELECT cdc_apply(dbz('c', 'priv_items', '{"id": 1, "v": "a"}', '0/1000', 1), 'priv_items', 'priv-1');
SELECT cdc_apply(dbz('u', 'priv_items', '{"id": 1, "v": "b"}', '0/2000', 2), NULL, 'priv-2');
SELECT cdc_apply(dbz('c', 'priv_items', '{"id": 2, "v": "c"}', '0/2100', 3)::text, 'priv_items', 'priv-3');
SELECT cdc_apply(dbz('d', 'priv_items', NULL, '0/2200', 4, before => '{"id": 2}'), 'priv_items', 'priv-4');
SELECT cdc_apply(dbz('c', 'priv_items', '{"id": 1, "v": "a"}', '0/1000', 1), 'priv_items', 'priv-1');
SELECT * FROM priv_items ORDER BY id;
-- cdc.stats, cdc.entities, cdc.tombstones and cdc.mapping are readable.
SELECT applied, duplicate, outbox_rows FROM cdc.stats WHERE target = 'priv_items'::regclass;
SELECT entity_key, is_tombstone FROM cdc.entities WHERE target = 'priv_items'::regclass ORDER BY entity_key::text;
SELECT entity_key FROM cdc.tombstones WHERE target = 'priv_items'::regclass;
SELECT target, outbox FROM cdc.mapping WHERE target = 'priv_items'::regclass;
RESET ROLE;
-- Entity keys are row data: a role without SELECT on the target sees none.
SET ROLE regress_cdc_blind;
SELECT count(*) AS blind_entities FROM cdc.entities WHERE target = 'priv_items'::regclass;
SELECT count(*) AS blind_tombstones FROM cdc.tombstones WHERE target = 'priv_items'::regclass;
RESET ROLE;
SELECT * FROM priv_state();
SELECT * FROM ledger_has('priv_items', 'priv-1', 'priv-2', 'priv-3', 'priv-4');

-- A truncate event needs TRUNCATE on the target under truncate_policy
-- 'truncate' (found by a fresh-user run: it failed only at the TRUNCATE
-- statement, after the ACCESS EXCLUSIVE lock).  Refused by the check made
-- before locking, naming the table and the privilege; nothing is claimed
-- or written.  Under truncate_policy 'ignore' it needs no TRUNCATE.
CREATE TABLE priv_trunc (id int PRIMARY KEY, v text);
SELECT target FROM cdc.register_mapping('priv_trunc', outbox => true);
CREATE TABLE priv_trunc_ign (id int PRIMARY KEY);
SELECT target FROM cdc.register_mapping('priv_trunc_ign', truncate_policy => 'ignore');
GRANT SELECT, INSERT, UPDATE, DELETE ON priv_trunc, priv_trunc_ign TO regress_cdc_writer;
INSERT INTO priv_trunc_ign VALUES (1);
SET ROLE regress_cdc_writer;
SELECT cdc_apply(dbz('c', 'priv_trunc', '{"id": 1, "v": "a"}', '0/2200', 4), 'priv_trunc') AS created;
\set SHOW_CONTEXT never
SELECT cdc_apply(dbz('t', 'priv_trunc', NULL, '0/2300', 5), 'priv_trunc', 'priv-t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc_apply_batch(ARRAY[dbz('c', 'priv_trunc', '{"id": 3, "v": "d"}', '0/2250', 5),
                             dbz('t', 'priv_trunc', NULL, '0/2300', 5)], 'priv_trunc');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
SELECT cdc_apply(dbz('t', 'priv_trunc_ign', NULL, '0/2300', 5), 'priv_trunc_ign') AS truncate_ignored;
RESET ROLE;
SELECT (SELECT array_agg(id) FROM priv_trunc) AS rows, outbox_count('priv_trunc') AS outbox_rows,
       ledger_count('priv_trunc') AS ledger_rows, cdc.delivery_processed('priv_trunc', 'priv-t') AS claimed,
       (SELECT count(*) FROM priv_trunc_ign) AS ignored_rows_kept;
-- with TRUNCATE granted, the same delivery applies
GRANT TRUNCATE ON priv_trunc TO regress_cdc_writer;
SET ROLE regress_cdc_writer;
SELECT cdc_apply(dbz('t', 'priv_trunc', NULL, '0/2300', 5), 'priv_trunc', 'priv-t') AS truncate_applied;
RESET ROLE;
SELECT (SELECT count(*) FROM priv_trunc) AS rows, outbox_count('priv_trunc') AS outbox_rows;
SELECT cdc.unregister_mapping('priv_trunc'), cdc.unregister_mapping('priv_trunc_ign');
DROP TABLE priv_trunc, priv_trunc_ign;

-- ---------------------------------------------------------------------------
-- 3. cdc.register_mapping() is not for non-owners: no EXECUTE for PUBLIC,
--    and with EXECUTE granted, the caller must own the table.
-- ---------------------------------------------------------------------------
SET ROLE regress_cdc_writer;
SELECT target FROM cdc.register_mapping('priv_items', outbox => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.unregister_mapping('priv_items');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT EXECUTE ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text, bigint, text, text, text, regprocedure, text, text)
  TO regress_cdc_writer;
SET ROLE regress_cdc_writer;
\set SHOW_CONTEXT never
SELECT target FROM cdc.register_mapping('priv_items', outbox => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
RESET ROLE;
REVOKE EXECUTE ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text, bigint, text, text, text, regprocedure, text, text)
  FROM regress_cdc_writer;
-- The mapping is unchanged (outbox still on).
SELECT target, outbox FROM cdc.mapping WHERE target = 'priv_items'::regclass;

-- ---------------------------------------------------------------------------
-- 4. The state tables cannot be written (nor read raw) by a plain role;
--    the views are readable.
-- ---------------------------------------------------------------------------
SET ROLE regress_cdc_writer;
INSERT INTO cdc.ledger (digest, target, claimed_s) VALUES (cdc.delivery_digest('priv_items', 'forged'), 'priv_items', 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE cdc.ledger SET digest = cdc.delivery_digest('priv_items', 'forged') WHERE digest = cdc.delivery_digest('priv_items', 'priv-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
DELETE FROM cdc.ledger WHERE digest = cdc.delivery_digest('priv_items', 'priv-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
TRUNCATE cdc.ledger;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- Readable row by row: the entries of priv_items, which the role may read.
SELECT count(*) FROM cdc.ledger;
DELETE FROM cdc.entity_state;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
INSERT INTO cdc.mapping (target, source_schema, source_table) VALUES ('priv_items', 'x', 'y');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE cdc.outbox SET published_at = now();
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE cdc.counters SET applied = 0;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- Readable as a plain role (and the view sums are the same as the owner sees).
SELECT applied, duplicate, stale, conflict, ignored, outbox_rows FROM cdc.stats WHERE target = 'priv_items'::regclass;
RESET ROLE;
-- Table privileges of PUBLIC on the extension's relations: only SELECT on
-- the views, cdc.mapping, cdc.source and cdc.ledger (row by row).
SELECT c.oid::regclass AS relation,
       has_table_privilege('regress_cdc_reader', c.oid, 'SELECT') AS sel,
       has_table_privilege('regress_cdc_reader', c.oid, 'INSERT') AS ins,
       has_table_privilege('regress_cdc_reader', c.oid, 'UPDATE') AS upd,
       has_table_privilege('regress_cdc_reader', c.oid, 'DELETE') AS del,
       has_table_privilege('regress_cdc_reader', c.oid, 'TRUNCATE') AS trunc
  FROM pg_class c
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
 WHERE c.relkind IN ('r', 'v')
 ORDER BY c.oid::regclass::text;
SELECT * FROM priv_state();
SELECT count(*) AS ledger_rows_for_priv FROM cdc.ledger WHERE target = 'priv_items'::regclass;

-- ---------------------------------------------------------------------------
-- 5. Functions: search_path pinned, no SECURITY DEFINER but cdc._drop_target_state()
--    and cdc._subscription_progress().
-- ---------------------------------------------------------------------------
SELECT p.oid::regprocedure AS function, p.proconfig, p.prosecdef
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
 ORDER BY p.oid::regprocedure::text;
-- (procedures that commit cannot have a SET clause: cdc.audit and cdc.resync
-- set search_path for each of their transactions, sql/audit.sql)
SELECT count(*) AS functions,
       count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%')) AS without_search_path,
       count(*) FILTER (WHERE p.prokind = 'p') AS procedures,
       count(*) FILTER (WHERE p.prosecdef) AS security_definer
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply';
-- Who may execute what: cdc_apply for everyone, mapping functions not.
SELECT p.oid::regprocedure AS function, has_function_privilege('regress_cdc_reader', p.oid, 'EXECUTE') AS plain_role_can_execute
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cdc_apply'
 ORDER BY p.oid::regprocedure::text;

-- A pinned search_path means objects in the caller's schemas cannot stand in
-- for the ones the engine uses: a role's shadowing function named like a
-- catalog function in a schema placed before pg_catalog is never called.
CREATE SCHEMA regress_cdc_evil;
CREATE FUNCTION regress_cdc_evil.to_jsonb(anyelement) RETURNS jsonb LANGUAGE sql AS $$ SELECT '{"evil": true}'::jsonb $$;
CREATE FUNCTION regress_cdc_evil.md5(text) RETURNS text LANGUAGE sql AS $$ SELECT 'evil' $$;
SET search_path = regress_cdc_evil, pg_catalog, public;
SELECT to_jsonb(1) AS shadowed_here;
SELECT cdc_apply(dbz('u', 'priv_items', '{"id": 1, "v": "z"}', '0/3000', 5), 'priv_items', 'priv-5');
RESET search_path;
SELECT * FROM priv_items ORDER BY id;
SELECT payload FROM cdc.outbox WHERE target = 'priv_items'::regclass ORDER BY id DESC LIMIT 1;
SELECT idempotency_key ~ '^[0-9a-f]{32}$' AS real_md5 FROM cdc.outbox WHERE target = 'priv_items'::regclass ORDER BY id DESC LIMIT 1;
DROP SCHEMA regress_cdc_evil CASCADE;

-- Clean up the roles (cluster-wide objects).
DROP OWNED BY regress_cdc_reader, regress_cdc_partial, regress_cdc_writer, regress_cdc_blind;
DROP ROLE regress_cdc_reader, regress_cdc_partial, regress_cdc_writer, regress_cdc_blind;

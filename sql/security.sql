--
-- security: hostile roles against the SQL path (docs/security.md).  Each
-- section is one kind of attack from issue 11, tried by an ordinary role,
-- and ends with what must hold: no extra rights, no poisoned state, and
-- the real pipeline still applying.  The worker path is tested by
-- test/t/036_security.pl.
--
-- Roles (cluster-wide, dropped at the end):
--   regress_sec_alice: the hostile role.  Owns one table, has CREATE on
--                      public (as databases upgraded from PostgreSQL 14 and
--                      earlier still grant) and on the victims' schema.
--   regress_sec_bob:   an ordinary role allowed to write one victim table.
--   regress_sec_mon:   a pg_monitor member.
--   regress_sec_carol: the owner of a table with row-level security.
CREATE ROLE regress_sec_alice;
CREATE ROLE regress_sec_bob;
CREATE ROLE regress_sec_mon IN ROLE pg_monitor;
CREATE ROLE regress_sec_carol;
GRANT CREATE ON SCHEMA public TO regress_sec_alice;
CREATE SCHEMA sec_shared;
GRANT USAGE, CREATE ON SCHEMA sec_shared TO regress_sec_alice;
GRANT USAGE ON SCHEMA sec_shared TO regress_sec_bob, regress_sec_mon, regress_sec_carol;

-- The victims: tables of the superuser (the extension owner) in sec_shared,
-- one per mode, all with an outbox.
CREATE TABLE sec_shared.orders (id int PRIMARY KEY, note text, qty int);
SELECT target, outbox FROM cdc.register_mapping('sec_shared.orders', outbox => true);
SELECT cdc.create_history_table('sec_shared.orders_history', 'sec_shared.orders');
SELECT target, mode FROM cdc.register_mapping('sec_shared.orders_history', source_table => 'orders_h',
                                              key_columns => '{id}', mode => 'history', outbox => true);
CREATE TABLE sec_shared.totals (id int PRIMARY KEY, qty int);
CREATE TABLE sec_shared.handled (id int PRIMARY KEY, note text, qty int);
-- The handler leaves the session's search_path pointing at alice's schemas
-- for the rest of the call (set_config(..., true) in a function without a
-- SET clause, as a table owner's code may): every later statement of that
-- call must still resolve in pg_catalog, so the engine's statements must be
-- schema-qualified, not only run under the entry point's pinned setting.
CREATE FUNCTION sec_shared.on_change(op text, old sec_shared.handled, new sec_shared.handled, meta jsonb)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sec_shared.totals AS t
  VALUES (coalesce(new.id, old.id), coalesce(new.qty, 0) OPERATOR(pg_catalog.-) coalesce(old.qty, 0))
    ON CONFLICT (id) DO UPDATE SET qty = t.qty OPERATOR(pg_catalog.+) EXCLUDED.qty;
  PERFORM pg_catalog.set_config('search_path', 'sec_shared, public, pg_catalog', true);
END $$;
SELECT target, mode FROM cdc.register_mapping('sec_shared.handled', mode => 'handler',
                                              handler => 'sec_shared.on_change(text, sec_shared.handled, sec_shared.handled, jsonb)');

-- What planted code records when it runs: a row in sec_log (written by a
-- SECURITY DEFINER helper, so whoever runs it can write it) and a NOTICE
-- (which would show in this file's output).
CREATE TABLE sec_log (id bigserial, what text, ran_as name);
CREATE FUNCTION sec_planted(what text, ran_as name) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  INSERT INTO public.sec_log (what, ran_as) VALUES (what, ran_as);
  RAISE NOTICE 'planted % ran as %', what, ran_as;
END $$;

-- The events of section 1, built before anything is planted.  From here
-- on this file's own statements run with search_path = pg_catalog, pg_temp
-- and qualify everything else: what is tested is the extension's immunity,
-- not this script's.
CREATE TABLE sec_ev (n int, ev jsonb, target regclass, dk text);
INSERT INTO sec_ev VALUES
  (1, dbz('c', 'orders', '{"id": 1, "note": "a", "qty": 5}', '0/1000', 1), 'sec_shared.orders', 'o-1'),
  (2, dbz('u', 'orders', '{"id": 1, "note": "b", "qty": 6}', '0/2000', 2), 'sec_shared.orders', 'o-2'),
  (3, dbz('c', 'orders', '{"id": 2, "note": "c", "qty": 7}', '0/3000', 3), 'sec_shared.orders', 'o-3'),
  (4, dbz('d', 'orders', NULL, '0/4000', 4, before => '{"id": 2}'), 'sec_shared.orders', 'o-4'),
  (5, dbz('c', 'orders_h', '{"id": 1, "note": "a", "qty": 5}', '0/1000', 1), 'sec_shared.orders_history', 'h-1'),
  (6, dbz('u', 'orders_h', '{"id": 1, "note": "__debezium_unavailable_value", "qty": 6}', '0/2000', 2),
      'sec_shared.orders_history', 'h-2'),
  (7, dbz('c', 'handled', '{"id": 1, "note": "a", "qty": 5}', '0/1000', 1), 'sec_shared.handled', 'x-1'),
  (8, dbz('u', 'handled', '{"id": 1, "note": "b", "qty": 9}', '0/2000', 2), 'sec_shared.handled', 'x-2'),
  (9, dbz('t', 'handled', NULL, '0/5000', 5), 'sec_shared.handled', 'x-3'),
  (10, dbz('c', 'orders', '{"id": 3, "note": "d", "qty": 1}', '0/6000', 6), 'sec_shared.orders', 'o-5'),
  (11, dbz('t', 'orders', NULL, '0/5500', 5), 'sec_shared.orders', 'o-6');
-- a batch over all three targets, resolved by their mappings: after the
-- first handler call, everything runs with alice's search_path
CREATE TABLE sec_mixed AS
  SELECT jsonb_build_array(
           dbz('u', 'handled', '{"id": 50, "note": "h", "qty": 1}', '0/B000', 20, schema_name => 'sec_shared'),
           dbz('c', 'orders', '{"id": 50, "note": "o", "qty": 1}', '0/B000', 20, schema_name => 'sec_shared', total_order => 2),
           dbz('c', 'orders_h', '{"id": 50, "note": "o", "qty": 1}', '0/B000', 20, schema_name => 'sec_shared', total_order => 3),
           dbz('u', 'orders', '{"id": 50, "note": "o2", "qty": 2}', '0/B100', 21, schema_name => 'sec_shared'),
           dbz('u', 'orders_h', '{"id": 50, "note": "__debezium_unavailable_value", "qty": 2}', '0/B100', 21,
               schema_name => 'sec_shared', total_order => 2),
           dbz('d', 'orders', NULL, '0/B200', 22, before => '{"id": 50}', schema_name => 'sec_shared'),
           dbz('u', 'handled', '{"id": 50, "note": "h2", "qty": 4}', '0/B300', 23, schema_name => 'sec_shared'),
           dbz('t', 'orders_h', NULL, '0/B400', 24, schema_name => 'sec_shared')) AS evs;
CREATE TABLE sec_batch AS
  SELECT jsonb_agg(dbz('c', 'orders', jsonb_build_object('id', 100 + i, 'note', 'n' || i, 'qty', i), '0/9000', 9,
                       total_order => i) ORDER BY i) AS evs
    FROM generate_series(1, 20) i;

SET search_path = pg_catalog, pg_temp;

-- ===========================================================================
-- 1. search_path: alice plants, in public and in sec_shared, overloads of
--    every function, aggregate and operator name the generated statements
--    use, with argument types that would win resolution over pg_catalog's
--    (exact types where pg_catalog has polymorphic or "any" ones, the
--    victims' row types) and types named like pg_catalog's.  Each planted
--    function logs that it ran and tries to make alice a superuser.
-- ===========================================================================
SET ROLE regress_sec_alice;
CREATE FUNCTION public.sec_body(what text) RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog AS $b$
  SELECT pg_catalog.format($f$
    PERFORM public.sec_planted(%L, current_user);
    BEGIN
      EXECUTE 'ALTER ROLE regress_sec_alice SUPERUSER';
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;$f$, what)
$b$;
DO $plant$
DECLARE
  s text;
  f record;
  n int := 0;
BEGIN
  FOREACH s IN ARRAY ARRAY['public', 'sec_shared'] LOOP
    -- functions: name, argument types, result type, the real call
    FOR f IN SELECT * FROM (VALUES
        ('to_jsonb', 'sec_shared.orders', 'jsonb', 'pg_catalog.to_jsonb($1)'),
        ('to_jsonb', 'sec_shared.orders_history', 'jsonb', 'pg_catalog.to_jsonb($1)'),
        ('to_jsonb', 'sec_shared.handled', 'jsonb', 'pg_catalog.to_jsonb($1)'),
        ('to_jsonb', 'text', 'jsonb', 'pg_catalog.to_jsonb($1)'),
        ('jsonb_populate_record', 'sec_shared.handled, jsonb', 'sec_shared.handled', 'pg_catalog.jsonb_populate_record($1, $2)'),
        ('format', 'text, integer', 'text', 'pg_catalog.format($1, $2)'),
        ('format', 'text, text', 'text', 'pg_catalog.format($1, $2)'),
        ('unnest', 'integer[]', 'SETOF integer', NULL),
        ('unnest', 'text[]', 'SETOF text', NULL),
        ('unnest', 'bigint[]', 'SETOF bigint', NULL),
        ('unnest', 'oid[]', 'SETOF oid', NULL),
        ('unnest', 'smallint[]', 'SETOF smallint', NULL),
        ('unnest', 'boolean[]', 'SETOF boolean', NULL),
        ('jsonb_build_object', 'text, text', 'jsonb', 'pg_catalog.jsonb_build_object($1, $2)'),
        ('jsonb_build_object', 'text, text, text, text', 'jsonb', 'pg_catalog.jsonb_build_object($1, $2, $3, $4)'),
        ('chr', 'integer', 'text', 'pg_catalog.chr($1)'),
        ('array_to_string', 'name[], text', 'text', 'pg_catalog.array_to_string($1, $2)'),
        ('quote_ident', 'text', 'text', 'pg_catalog.quote_ident($1)'),
        ('quote_literal', 'text', 'text', 'pg_catalog.quote_literal($1)'),
        ('to_regclass', 'text', 'regclass', 'pg_catalog.to_regclass($1)'),
        ('now', '', 'timestamptz', 'pg_catalog.now()'),
        ('md5', 'text', 'text', 'pg_catalog.md5($1)'),
        ('md5', 'character varying', 'text', 'pg_catalog.md5($1)'),
        ('substr', 'text, integer, integer', 'text', 'pg_catalog.substr($1, $2, $3)'),
        ('lower', 'text', 'text', 'pg_catalog.lower($1)'),
        ('set_config', 'text, text, boolean', 'text', 'pg_catalog.set_config($1, $2, $3)'),
        ('current_setting', 'text', 'text', 'pg_catalog.current_setting($1)'),
        ('pg_relation_size', 'regclass', 'bigint', 'pg_catalog.pg_relation_size($1)'),
        ('has_table_privilege', 'regclass, text', 'boolean', 'pg_catalog.has_table_privilege($1, $2)'),
        ('row_security_active', 'regclass', 'boolean', 'pg_catalog.row_security_active($1)'),
        ('cardinality', 'text[]', 'integer', 'pg_catalog.cardinality($1)')
      ) v(name, args, result, body) LOOP
      EXECUTE format('CREATE FUNCTION %I.%I(%s) RETURNS %s LANGUAGE plpgsql AS $f$ BEGIN %s %s END $f$',
                     s, f.name, f.args, f.result, public.sec_body(s || '.' || f.name || '(' || f.args || ')'),
                     CASE WHEN f.body IS NULL THEN 'RETURN QUERY SELECT pg_catalog.unnest($1);'
                          ELSE 'RETURN ' || f.body || ';' END);
      n := n + 1;
    END LOOP;
    -- aggregates: a planted transition function
    EXECUTE format('CREATE FUNCTION %I.sec_agg_text(text[], text) RETURNS text[] LANGUAGE plpgsql AS $f$ BEGIN %s RETURN pg_catalog.array_append($1, $2); END $f$',
                   s, public.sec_body(s || '.array_agg(text)'));
    EXECUTE format('CREATE AGGREGATE %I.array_agg(text) (SFUNC = %I.sec_agg_text, STYPE = text[])', s, s);
    EXECUTE format('CREATE FUNCTION %I.sec_agg_cat(text, text, text) RETURNS text LANGUAGE plpgsql AS $f$ BEGIN %s RETURN $1 OPERATOR(pg_catalog.||) $2; END $f$',
                   s, public.sec_body(s || '.string_agg(text, text)'));
    EXECUTE format('CREATE AGGREGATE %I.string_agg(text, text) (SFUNC = %I.sec_agg_cat, STYPE = text)', s, s);
    n := n + 2;
    -- operators: name, left, right, the pg_catalog operator
    FOR f IN SELECT * FROM (VALUES
        ('=', 'integer', 'integer'), ('=', 'text', 'text'), ('=', 'bigint', 'bigint'), ('=', 'smallint', 'smallint'),
        ('=', 'oid', 'oid'), ('=', 'regclass', 'oid'), ('=', 'oid', 'regclass'), ('=', 'regclass', 'regclass'),
        ('=', 'tid', 'tid'), ('=', 'jsonb', 'jsonb'), ('=', 'bigint[]', 'bigint[]'), ('=', 'name', 'name'),
        ('=', 'name', 'text'), ('=', 'text', 'name'),
        ('<>', 'text', 'text'), ('<>', 'integer', 'integer'),
        ('<', 'bigint[]', 'bigint[]'), ('<', 'integer', 'integer'), ('<', 'bigint', 'bigint'),
        ('>', 'integer', 'integer'), ('>', 'bigint', 'bigint'),
        ('<=', 'integer', 'integer'), ('<=', 'bigint', 'bigint'), ('>=', 'integer', 'integer'),
        ('||', 'text', 'text'), ('||', 'text', 'integer'), ('~', 'text', 'text'), ('->>', 'jsonb', 'text')
      ) v(op, l, r) LOOP
      EXECUTE format('CREATE FUNCTION %I.sec_op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS $f$ BEGIN %s RETURN $1 OPERATOR(pg_catalog.%s) $2; END $f$',
                     s, n, f.l, f.r,
                     CASE f.op WHEN '||' THEN 'text' WHEN '->>' THEN 'text' ELSE 'boolean' END,
                     public.sec_body(s || '.' || f.op || '(' || f.l || ', ' || f.r || ')'), f.op);
      EXECUTE format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.sec_op_%s)', s, f.op, f.l, f.r, s, n);
      n := n + 1;
    END LOOP;
    -- types named like pg_catalog's
    EXECUTE format('CREATE TYPE %I.jsonb AS (planted int)', s);
    EXECUTE format('CREATE TYPE %I.text AS (planted int)', s);
    EXECUTE format('CREATE DOMAIN %I.bigint AS integer', s);
  END LOOP;
  RAISE NOTICE 'planted % functions, aggregates and operators', n;
END
$plant$;
RESET ROLE;

-- The superuser applies them with a search_path that puts alice's schemas
-- first, even before pg_catalog: the entry points pin their own.  (No
-- operator or unqualified function in these statements themselves.)
SET search_path = sec_shared, public, pg_catalog;
SELECT n, public.cdc_apply(ev, target, dk) FROM public.sec_ev ORDER BY n;
SELECT (public.cdc_apply_batch(evs, 'sec_shared.orders'::regclass)).applied FROM public.sec_batch;
SELECT n, public.cdc_apply(ev::pg_catalog.text, target, dk) FROM public.sec_ev ORDER BY n;
SELECT * FROM public.cdc_apply_batch((SELECT evs FROM public.sec_mixed), with_outcomes => true);
SELECT * FROM public.cdc_apply_batch((SELECT evs FROM public.sec_mixed), with_outcomes => true);
SELECT relation, removed FROM cdc.prune(1000, '1 day');
SET search_path = pg_catalog, pg_temp;
-- The planted code never ran and alice is no superuser.
SELECT count(*) AS planted_runs FROM public.sec_log;
SELECT rolsuper AS alice_is_superuser FROM pg_roles WHERE rolname = 'regress_sec_alice';
-- What the real pipeline wrote is intact.
SELECT * FROM sec_shared.orders ORDER BY id;
SELECT id, note, qty, cdc_op, cdc_version FROM sec_shared.orders_history ORDER BY cdc_seq;
SELECT * FROM sec_shared.handled ORDER BY id;
SELECT * FROM sec_shared.totals ORDER BY id;
SELECT target, op, entity_key FROM cdc.outbox WHERE target::text LIKE 'sec_shared.%' ORDER BY id;

-- The same objects planted before CREATE EXTENSION: nothing the script
-- creates (views, defaults, CHECK constraints, index expressions,
-- policies) depends on a function, operator or type outside pg_catalog
-- and the extension itself.
\set regress_db :DBNAME
CREATE DATABASE regress_sec_plant;
\c regress_sec_plant
GRANT CREATE ON SCHEMA public TO regress_sec_alice;
SET ROLE regress_sec_alice;
CREATE FUNCTION public.sec_t_int(text, integer) RETURNS text LANGUAGE sql AS $$ SELECT 'planted' $$;
CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = integer, FUNCTION = public.sec_t_int);
CREATE FUNCTION public.sec_t_t(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR public.~ (LEFTARG = text, RIGHTARG = text, FUNCTION = public.sec_t_t);
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.sec_t_t);
CREATE FUNCTION public.sec_i_i(integer, integer) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR public.> (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.sec_i_i);
CREATE FUNCTION public.sec_b_b(bigint, bigint) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR public.>= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.sec_b_b);
CREATE OPERATOR public.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.sec_b_b);
CREATE FUNCTION public.cardinality(text[]) RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION public.has_table_privilege(regclass, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION public.row_security_active(regclass) RETURNS boolean LANGUAGE sql AS $$ SELECT false $$;
CREATE FUNCTION public.pg_has_role(regrole, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION public.pg_has_role(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION public.sec_lsn(pg_lsn, pg_lsn) RETURNS numeric LANGUAGE sql AS $$ SELECT 0::numeric $$;
CREATE OPERATOR public.- (LEFTARG = pg_lsn, RIGHTARG = pg_lsn, FUNCTION = public.sec_lsn);
CREATE TYPE public.jsonb AS (planted int);
RESET ROLE;
CREATE EXTENSION cdc_apply;
SET search_path = pg_catalog, pg_temp;
WITH members AS (
  SELECT d.classid, d.objid FROM pg_depend d
   WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
     AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'cdc_apply')),
objects AS (  -- the members, their columns' defaults, constraints, indexes, rewrite rules and policies
  SELECT classid, objid FROM members
  UNION SELECT d.classid, d.objid FROM pg_depend d JOIN members m ON d.refclassid = m.classid AND d.refobjid = m.objid
   WHERE d.deptype IN ('a', 'i', 'n')),
refs AS (
  SELECT o.classid, o.objid, d.refclassid, d.refobjid FROM objects o
    JOIN pg_depend d ON d.classid = o.classid AND d.objid = o.objid)
SELECT pg_describe_object(r.classid, r.objid, 0) AS object, pg_describe_object(r.refclassid, r.refobjid, 0) AS uses
  FROM refs r
 WHERE (r.refclassid = 'pg_proc'::regclass
        AND (SELECT pronamespace FROM pg_proc WHERE oid = r.refobjid) = 'public'::regnamespace
        AND NOT EXISTS (SELECT 1 FROM members m WHERE m.classid = r.refclassid AND m.objid = r.refobjid))
    OR (r.refclassid = 'pg_operator'::regclass
        AND (SELECT oprnamespace FROM pg_operator WHERE oid = r.refobjid) <> 'pg_catalog'::regnamespace)
    OR (r.refclassid = 'pg_type'::regclass
        AND (SELECT typnamespace FROM pg_type WHERE oid = r.refobjid) NOT IN ('pg_catalog'::regnamespace, 'cdc'::regnamespace))
 ORDER BY 1, 2;
-- and the status view, read by anyone, still computes with pg_catalog's operators
SELECT count(*) AS subscriptions FROM cdc.subscription_status;
\c :regress_db
SET search_path = pg_catalog, pg_temp;
DROP DATABASE regress_sec_plant;

-- ===========================================================================
-- 2. Rights through the target's own objects.  On the SQL path the caller
--    writes the target with its own rights, as an INSERT would: the target's
--    triggers, defaults and handler run as the caller (a role that can
--    write the table can run them anyway).  The worker runs them as the
--    table's owner: test/t/036_security.pl.  A caller without the
--    privileges is refused before any lock on the target is taken
--    (test/isolation/specs/security_lock_queue.spec).
-- ===========================================================================

-- ===========================================================================
-- 3. Row-level security is never bypassed: a role subject to a policy on
--    the target is refused with 42501 before anything is written (it
--    would otherwise record versions for changes the policy hid).
-- ===========================================================================
CREATE TABLE sec_shared.guarded (id int PRIMARY KEY, owner_name name NOT NULL, v text);
ALTER TABLE sec_shared.guarded OWNER TO regress_sec_carol;
ALTER TABLE sec_shared.guarded ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON sec_shared.guarded USING (owner_name OPERATOR(pg_catalog.=) current_user);
SELECT target, outbox FROM cdc.register_mapping('sec_shared.guarded', outbox => true);
GRANT SELECT, INSERT, UPDATE, DELETE ON sec_shared.guarded TO regress_sec_bob;
INSERT INTO sec_shared.guarded VALUES (1, 'regress_sec_alice', 'alice''s row');
SET ROLE regress_sec_bob;
\set SHOW_CONTEXT never
-- an update that the policy would silently turn into nothing
SELECT public.cdc_apply(public.dbz('u', 'guarded', '{"id": 1, "owner_name": "regress_sec_bob", "v": "bob"}', '0/1000', 1),
                        'sec_shared.guarded', 'g-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM public.cdc_apply_batch(pg_catalog.jsonb_build_array(
         public.dbz('c', 'guarded', '{"id": 2, "owner_name": "regress_sec_bob", "v": "bob"}', '0/1100', 2)), 'sec_shared.guarded');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
RESET ROLE;
SELECT * FROM sec_shared.guarded ORDER BY id;
SELECT (SELECT count(*) FROM cdc.ledger WHERE target = 'sec_shared.guarded'::regclass) AS ledger,
       (SELECT count(*) FROM cdc.entity_state WHERE target = 'sec_shared.guarded'::regclass) AS entities,
       (SELECT count(*) FROM cdc.outbox WHERE target = 'sec_shared.guarded'::regclass) AS outbox;
-- the owner is not subject to its policies (without FORCE): it applies;
-- with FORCE it is, and is refused too
SET ROLE regress_sec_carol;
SELECT public.cdc_apply(public.dbz('u', 'guarded', '{"id": 1, "owner_name": "regress_sec_bob", "v": "owner"}', '0/1000', 1),
                        'sec_shared.guarded', 'g-1');
ALTER TABLE sec_shared.guarded FORCE ROW LEVEL SECURITY;
\set SHOW_CONTEXT never
SELECT public.cdc_apply(public.dbz('c', 'guarded', '{"id": 3, "owner_name": "regress_sec_carol", "v": "x"}', '0/1200', 3),
                        'sec_shared.guarded', 'g-3');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
ALTER TABLE sec_shared.guarded NO FORCE ROW LEVEL SECURITY;
RESET ROLE;
SELECT * FROM sec_shared.guarded ORDER BY id;
SELECT e.key, s.name FROM cdc.entity_state e JOIN cdc.source s ON s.id = e.src
 WHERE e.target = 'sec_shared.guarded'::regclass;

-- ===========================================================================
-- 4. Monitoring without superuser.
-- ===========================================================================
-- cdc.subscription_status for a pg_monitor member (and any role): no
-- conninfo; last_error only for pg_read_all_stats and the owner's members.
SELECT cdc.create_subscription('sec_sub', 'host=/nonexistent dbname=x password=s3cret', ARRAY['p'], enabled => false) > 0 AS created;
UPDATE cdc.subscription_state SET last_error = 'duplicate key value violates unique constraint: Key (id)=(42) already exists'
 WHERE subid = (SELECT subid FROM cdc.subscription WHERE name = 'sec_sub');
-- the error history (cdc.subscription_errors) holds the same texts: readable
-- by pg_read_all_stats, not by other roles
INSERT INTO cdc.subscription_errors (subid, name, error, retry)
SELECT subid, name, 'duplicate key value violates unique constraint: Key (id)=(42) already exists', 1
  FROM cdc.subscription WHERE name = 'sec_sub';
SET ROLE regress_sec_mon;
SELECT name, state, applied_lsn, retry_count, last_error FROM cdc.subscription_status;
SELECT conninfo FROM cdc.subscription;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT name, error, retry FROM cdc.subscription_errors;
RESET ROLE;
SET ROLE regress_sec_alice;
SELECT name, state, applied_lsn, retry_count, last_error FROM cdc.subscription_status;
SELECT count(*) FROM cdc.subscription_status s WHERE s::text LIKE '%s3cret%';
SELECT count(*) FROM cdc.subscription_errors;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
DELETE FROM cdc.subscription_errors;
-- the view has no column holding the connection string
SELECT count(*) AS conninfo_columns FROM pg_attribute
 WHERE attrelid = 'cdc.subscription_status'::regclass AND attname ~ 'conn';

-- cdc.delivery_processed(): for roles that may SELECT the target; 42501
-- for the others; the ledger shows each role only such targets' entries.
GRANT SELECT ON sec_shared.orders TO regress_sec_bob;
SET ROLE regress_sec_bob;
SELECT cdc.delivery_processed('sec_shared.orders', 'o-1') AS o1, cdc.delivery_processed('sec_shared.orders', 'never') AS never;
SELECT cdc.delivery_processed('sec_shared.handled', 'x-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT DISTINCT target FROM cdc.ledger ORDER BY 1;
RESET ROLE;
SET ROLE regress_sec_mon;
SELECT cdc.delivery_processed('sec_shared.orders', 'o-1');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS visible_ledger_rows FROM cdc.ledger;
-- the views promised to everyone
SELECT count(*) > 0 AS stats FROM cdc.stats;
SELECT horizon IS NOT NULL AS horizon, ledger_rows > 0 AS ledger_rows FROM cdc.horizon_status;
SELECT count(*) AS entities_of_unreadable_targets FROM cdc.entities;
RESET ROLE;
SELECT cdc.drop_subscription('sec_sub');

-- ===========================================================================
-- 5. Shared state: what one role does cannot block or exhaust what others
--    need.
-- ===========================================================================
-- Subscriptions are superuser-only, whatever a role was granted: the owner
-- (the role the worker acts as) cannot be forged.
SELECT cdc.create_subscription('sec_sub2', 'host=/nonexistent dbname=x', ARRAY['p'], enabled => false) > 0 AS created;
GRANT EXECUTE ON FUNCTION cdc.alter_subscription(text, text, text[], bigint, regrole, boolean, text),
                          cdc.create_subscription(text, text, text[], name, boolean, boolean, boolean, bigint, regrole, boolean, text),
                          cdc.refresh_subscription(text, boolean), cdc.resync_table(text, regclass),
                          cdc.accept_gap(text, text)
  TO regress_sec_alice;
GRANT INSERT, UPDATE, DELETE, TRUNCATE ON cdc.subscription, cdc.subscription_state, cdc.subscription_rel TO regress_sec_alice;
GRANT USAGE ON SEQUENCE cdc.subscription_subid_seq TO regress_sec_alice;
SET ROLE regress_sec_alice;
\set SHOW_CONTEXT never
SELECT cdc.alter_subscription('sec_sub2', owner => 'regress_sec_alice');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sec_sub3', 'host=/nonexistent dbname=x', ARRAY['p'], enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM cdc.refresh_subscription('sec_sub2');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.resync_table('sec_sub2', 'cdc.source');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.accept_gap('sec_sub2', 'a forged gap');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE cdc.subscription SET owner = 'regress_sec_alice', run_as_owner = true;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
INSERT INTO cdc.subscription (name, conninfo, publications, slot_name, owner) VALUES ('evil', 'x', '{p}', 'evil', 'regress_sec_alice');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
DELETE FROM cdc.subscription;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
TRUNCATE cdc.subscription CASCADE;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
RESET ROLE;
REVOKE ALL ON cdc.subscription, cdc.subscription_state, cdc.subscription_rel FROM regress_sec_alice;
REVOKE ALL ON SEQUENCE cdc.subscription_subid_seq FROM regress_sec_alice;
REVOKE ALL ON FUNCTION cdc.alter_subscription(text, text, text[], bigint, regrole, boolean, text),
                       cdc.create_subscription(text, text, text[], name, boolean, boolean, boolean, bigint, regrole, boolean, text),
                       cdc.refresh_subscription(text, boolean), cdc.resync_table(text, regclass),
                       cdc.accept_gap(text, text)
  FROM regress_sec_alice;
SELECT name, owner, run_as_owner FROM cdc.subscription ORDER BY name;
SELECT cdc.drop_subscription('sec_sub2');

-- A role granted write access to cdc.mapping (to manage the mappings of its
-- own tables) cannot write the mapping of someone else's table: it could
-- otherwise attach its handler or an outbox to it.
CREATE TABLE sec_shared.alice_t (id int PRIMARY KEY, v text);
ALTER TABLE sec_shared.alice_t OWNER TO regress_sec_alice;
GRANT EXECUTE ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text, bigint, text, text, text, regprocedure, text, text),
                          cdc.unregister_mapping(regclass)
  TO regress_sec_alice;
GRANT INSERT, UPDATE, DELETE ON cdc.mapping TO regress_sec_alice;
CREATE UNIQUE INDEX alice_t_id_v ON sec_shared.alice_t (id, v);
SET ROLE regress_sec_alice;
SELECT public.cdc_apply(public.dbz('c', 'alice_t', '{"id": 900001, "v": "k"}', '0/1000', 1), 'sec_shared.alice_t') AS applied;
SELECT target, outbox FROM cdc.register_mapping('sec_shared.alice_t', outbox => true);
\set SHOW_CONTEXT never
-- Other key_columns re-key the table's entity records (cdc.entity_state is
-- shared bookkeeping): the delegate is refused, the mapping stays as it was.
SELECT target FROM cdc.register_mapping('sec_shared.alice_t', key_columns => '{id,v}', outbox => true);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT key_columns, outbox FROM cdc.mapping WHERE target = 'sec_shared.alice_t'::regclass;
SELECT target FROM cdc.register_mapping('sec_shared.orders', outbox => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE cdc.mapping SET outbox = false, mode = 'handler', handler = 'sec_shared.on_change(text, sec_shared.handled, sec_shared.handled, jsonb)'
 WHERE target = 'sec_shared.orders'::regclass;
SELECT count(*) AS updated_by_alice FROM cdc.mapping WHERE target = 'sec_shared.orders'::regclass AND NOT outbox;
INSERT INTO cdc.mapping (target, source_schema, source_table) VALUES ('sec_shared.totals', 'x', 'y');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
DELETE FROM cdc.mapping WHERE target = 'sec_shared.orders'::regclass;
SELECT cdc.unregister_mapping('sec_shared.handled');
\set SHOW_CONTEXT errors
SELECT cdc.unregister_mapping('sec_shared.alice_t');
RESET ROLE;
SELECT count(*) AS alice_records FROM cdc.entity_state WHERE target = 'sec_shared.alice_t'::regclass;
DELETE FROM cdc.entity_state WHERE target = 'sec_shared.alice_t'::regclass;
DELETE FROM cdc.ledger WHERE target = 'sec_shared.alice_t'::regclass;
DELETE FROM cdc.counters WHERE target = 'sec_shared.alice_t'::regclass;
DELETE FROM sec_shared.alice_t;
DROP INDEX sec_shared.alice_t_id_v;
REVOKE ALL ON cdc.mapping FROM regress_sec_alice;
REVOKE ALL ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text, bigint, text, text, text, regprocedure, text, text),
                       cdc.unregister_mapping(regclass)
  FROM regress_sec_alice;
SELECT target, outbox, mode FROM cdc.mapping WHERE target::text LIKE 'sec_shared.%' ORDER BY target::text;

-- Source ids: 40,000 distinct source names in calls that roll back (by a
-- role that may write one table) leave nothing behind; new sources keep
-- working for everyone.  Ids come from the name's hash, not a sequence.
SELECT count(*) AS sources_before FROM cdc.source \gset
SET ROLE regress_sec_alice;
BEGIN;
SELECT (public.cdc_apply_batch(pg_catalog.jsonb_agg(
          pg_catalog.jsonb_build_object('op', 'c', 'source', pg_catalog.jsonb_build_object('name', 'junk-' || i, 'lsn', i),
                                        'after', pg_catalog.jsonb_build_object('id', i, 'v', 'x'))),
                                  'sec_shared.alice_t')).applied
  FROM pg_catalog.generate_series(1, 39000) i;
DO $$
BEGIN
  FOR i IN 39001 .. 40000 LOOP
    PERFORM public.cdc_apply(pg_catalog.jsonb_build_object('op', 'c',
              'source', pg_catalog.jsonb_build_object('name', 'junk-' || i, 'lsn', i),
              'after', pg_catalog.jsonb_build_object('id', i, 'v', 'x')), 'sec_shared.alice_t');
  END LOOP;
END $$;
SELECT count(*) - :sources_before AS sources_inside_the_transaction FROM cdc.source;
ROLLBACK;
RESET ROLE;
SELECT count(*) - :sources_before AS sources_left_behind FROM cdc.source;
GRANT SELECT, INSERT, UPDATE, DELETE ON sec_shared.orders TO regress_sec_bob;
SET ROLE regress_sec_bob;
SELECT public.cdc_apply(public.dbz('c', 'orders', '{"id": 60, "note": "new source", "qty": 1}', '0/C000', 30, src => 'brand-new'),
                        'sec_shared.orders', 'o-60');
RESET ROLE;
SELECT s.name, e.v1 FROM cdc.entity_state e JOIN cdc.source s ON s.id = e.src
 WHERE e.target = 'sec_shared.orders'::regclass AND e.key = '60';

SELECT target, outbox FROM cdc.register_mapping('sec_shared.alice_t', outbox => true);
-- Outbox keys are unique per target: alice, who may write only her own
-- table, sends the exact source identity of a change bob will apply to
-- sec_shared.orders (same source, table, op, version and key) first; bob's
-- outbox row is still written.
SET ROLE regress_sec_alice;
SELECT public.cdc_apply(public.dbz('c', 'orders', '{"id": 61}', '0/C100', 31, schema_name => 'sec_shared'),
                        'sec_shared.alice_t', 'pre-empt');
RESET ROLE;
SET ROLE regress_sec_bob;
SELECT public.cdc_apply(public.dbz('c', 'orders', '{"id": 61, "note": "mine", "qty": 1}', '0/C100', 31, schema_name => 'sec_shared'),
                        'sec_shared.orders', 'o-61');
RESET ROLE;
SELECT o.target, o.entity_key, a.idempotency_key = o.idempotency_key AS same_key
  FROM cdc.outbox o, cdc.outbox a
 WHERE a.target = 'sec_shared.alice_t'::regclass AND o.entity_key = '{"id": "61"}' ORDER BY o.id;

-- A mapping's source_name restricts the sources that may write its table,
-- also when the caller names the table explicitly.
SELECT target, source_name FROM cdc.register_mapping('sec_shared.alice_t', source_name => 'alice-src');
SET ROLE regress_sec_alice;
\set SHOW_CONTEXT never
SELECT public.cdc_apply(public.dbz('c', 'alice_t', '{"id": 70, "v": "forged"}', '0/D000', 40, src => 'srv'), 'sec_shared.alice_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
SELECT public.cdc_apply(public.dbz('c', 'alice_t', '{"id": 70, "v": "own"}', '0/D000', 40, src => 'alice-src'), 'sec_shared.alice_t');
RESET ROLE;
SELECT * FROM sec_shared.alice_t WHERE id >= 61 ORDER BY id;

-- cdc.prune(): its mutex is a row lock only the extension's roles can take
-- (an advisory lock could be held by anyone forever; the isolation spec
-- security_prune_lock shows a second session pruning meanwhile).  A plain
-- role can neither lock the row nor the table.
SET ROLE regress_sec_alice;
SELECT 1 FROM cdc.prune_state FOR UPDATE;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
BEGIN;
LOCK TABLE cdc.prune_state IN ROW SHARE MODE;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
ROLLBACK;
RESET ROLE;

-- ===========================================================================
-- 6. Event size: cdc.max_event_size (superusers only) refuses an oversize
--    event with 54000 before it is parsed, on every entry point.
-- ===========================================================================
SET ROLE regress_sec_bob;
SET cdc.max_event_size = '1GB';
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
SET cdc.max_event_size = '1kB';
SET ROLE regress_sec_bob;
\set SHOW_CONTEXT never
CREATE TEMP TABLE sec_big AS
  SELECT public.dbz('c', 'orders', pg_catalog.jsonb_build_object('id', 80, 'note', pg_catalog.repeat('x', 2000), 'qty', 1),
                    '0/E000', 50) AS ev,
         public.dbz('c', 'orders', '{"id": 81, "note": "small", "qty": 1}', '0/E100', 51) AS small;
SELECT public.cdc_apply(ev, 'sec_shared.orders') FROM sec_big;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT public.cdc_apply(ev::pg_catalog.text, 'sec_shared.orders') FROM sec_big;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT (public.cdc_apply_batch(pg_catalog.jsonb_build_array(small, ev), 'sec_shared.orders')).applied FROM sec_big;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT (public.cdc_apply_batch(ARRAY[small, ev], 'sec_shared.orders')).applied FROM sec_big;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT (public.cdc_apply_batch(pg_catalog.jsonb_build_array(small, ev)::pg_catalog.text, 'sec_shared.orders')).applied FROM sec_big;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors
SELECT (public.cdc_apply_batch(pg_catalog.jsonb_build_array(small), 'sec_shared.orders')).applied FROM sec_big;
RESET ROLE;
RESET cdc.max_event_size;
SELECT id, pg_catalog.length(note) FROM sec_shared.orders WHERE id IN (80, 81) ORDER BY id;

-- ===========================================================================
-- cdc._fold_into_stream_mark is SECURITY DEFINER with EXECUTE to PUBLIC (for
-- cdc.set_ordering, which runs with its caller's rights).  Its upsert locks
-- the target's cdc.stream_mark rows: any role calling it in an open
-- transaction held them and stalled the subscription's worker.  A session
-- whose login role may not act as the target's owner is refused (42501)
-- before anything is read or locked; the owner's set_ordering still folds.
-- ===========================================================================
\set regress_user :USER
CREATE ROLE regress_sec_login LOGIN;
CREATE TABLE public.sec_stream (id int PRIMARY KEY, v text);
SELECT public.cdc_apply('{"op": "c", "source": {"name": "sec-stream", "lsn": 100}, "after": {"id": 1, "v": "a"}}'::pg_catalog.jsonb, 'public.sec_stream');
SELECT public.cdc_apply('{"op": "d", "source": {"name": "sec-stream", "lsn": 200}, "before": {"id": 1}}'::pg_catalog.jsonb, 'public.sec_stream');
SELECT (cdc.register_mapping('public.sec_stream', source_schema => 'x', source_table => 'sec_stream')).target;
SELECT (cdc.set_ordering('public.sec_stream', 'stream')).ordering;
SELECT v1, v2 FROM cdc.stream_mark WHERE target OPERATOR(pg_catalog.=) 'public.sec_stream'::pg_catalog.regclass;
\c - regress_sec_login
SELECT cdc._fold_into_stream_mark('public.sec_stream');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\c - :regress_user
SET search_path = pg_catalog, pg_temp;
-- a superuser's session_user is not enough (review h2, fold_session_user):
-- the caller must hold the lock cdc.set_ordering takes on the target
SELECT cdc._fold_into_stream_mark('public.sec_stream');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
BEGIN;
LOCK TABLE public.sec_stream IN SHARE ROW EXCLUSIVE MODE;
SELECT cdc._fold_into_stream_mark('public.sec_stream');
COMMIT;
SELECT v1, v2 FROM cdc.stream_mark WHERE target OPERATOR(pg_catalog.=) 'public.sec_stream'::pg_catalog.regclass;
DROP TABLE public.sec_stream;
DROP ROLE regress_sec_login;

-- ===========================================================================
-- A system catalog or a table of the cdc schema cannot be mapped, by a
-- superuser either (found by a fresh-user run: the mapping was accepted and
-- every apply through it refused; docs/security.md, "Targets").
-- ===========================================================================
\set VERBOSITY terse
SELECT cdc.register_mapping('cdc.ledger', source_schema => 'public', source_table => 'sec_ledger');
SELECT cdc.register_mapping('pg_catalog.pg_authid', source_schema => 'public', source_table => 'sec_authid');
\set VERBOSITY default
SELECT count(*) AS mappings_to_internal_tables FROM cdc.mapping
 WHERE target::text IN ('cdc.ledger', 'pg_authid', 'pg_catalog.pg_authid');

-- ===========================================================================
-- The real pipeline still applies, and nothing of the above stayed behind.
-- ===========================================================================
SELECT public.cdc_apply(public.dbz('u', 'orders', '{"id": 1, "note": "final", "qty": 8}', '0/A000', 10), 'sec_shared.orders', 'o-final');
SELECT * FROM sec_shared.orders ORDER BY id;
SELECT count(*) AS planted_runs FROM public.sec_log;
SELECT rolname, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles WHERE rolname LIKE 'regress_sec_%' ORDER BY 1;

SET client_min_messages = warning;
DROP SCHEMA sec_shared CASCADE;
DROP FUNCTION public.sec_body(text);
DROP TABLE public.sec_ev, public.sec_batch, public.sec_mixed, public.sec_log;
DROP FUNCTION public.sec_planted(text, name);
REVOKE CREATE ON SCHEMA public FROM regress_sec_alice;
DROP OWNED BY regress_sec_alice, regress_sec_bob, regress_sec_mon, regress_sec_carol;
DROP ROLE regress_sec_alice, regress_sec_bob, regress_sec_mon, regress_sec_carol;
RESET client_min_messages;

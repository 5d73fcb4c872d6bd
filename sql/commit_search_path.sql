--
-- commit_search_path (security review h2): the statements the extension
-- runs at a caller's COMMIT and PREPARE TRANSACTION.  The transaction's
-- outcome counts are written to cdc.counters by a transaction callback at
-- XACT_EVENT_PRE_COMMIT (PRE_PREPARE), as the extension owner, in the
-- caller's session, after cdc_apply() has returned: no function's
-- SET search_path is in effect there, the session's own is.  An ordinary
-- role that may apply to its own table plants, in a schema of its own,
-- overloads of the operators and functions those statements could resolve
-- by name (+ on bigint, = and < on the key columns' types, now(), count),
-- each calling a probe that reports who ran it and tries ALTER ROLE ...
-- SUPERUSER, then puts that schema before pg_catalog in its search_path
-- (SET LOCAL and SET) before COMMIT and before PREPARE TRANSACTION.  The
-- statements qualify every operator (OPERATOR(pg_catalog.+)) and name, so
-- no probe runs, the role stays an ordinary one and the counts are
-- written.  A control query under the same search_path shows the planted
-- operators do win an unqualified name there.
--
CREATE ROLE csp_mallory;
CREATE SCHEMA csp_evil AUTHORIZATION csp_mallory;
CREATE SCHEMA csp_own AUTHORIZATION csp_mallory;
SET ROLE csp_mallory;
CREATE TABLE csp_own.t (id int PRIMARY KEY, v text);
CREATE FUNCTION csp_evil.probe(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE WARNING 'probe % ran as %', what, current_user;
  BEGIN
    EXECUTE 'ALTER ROLE csp_mallory SUPERUSER';
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN true;
END $$;
CREATE FUNCTION csp_evil.plus8(bigint, bigint) RETURNS bigint LANGUAGE plpgsql
  AS $$ BEGIN RETURN CASE WHEN csp_evil.probe('bigint + bigint') THEN $1 OPERATOR(pg_catalog.+) $2 END; END $$;
CREATE OPERATOR csp_evil.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = csp_evil.plus8);
CREATE FUNCTION csp_evil.plus84(bigint, int) RETURNS bigint LANGUAGE plpgsql
  AS $$ BEGIN RETURN CASE WHEN csp_evil.probe('bigint + int') THEN $1 OPERATOR(pg_catalog.+) $2 END; END $$;
CREATE OPERATOR csp_evil.+ (LEFTARG = bigint, RIGHTARG = int, FUNCTION = csp_evil.plus84);
CREATE FUNCTION csp_evil.eq_oid(oid, oid) RETURNS boolean LANGUAGE plpgsql
  AS $$ BEGIN RETURN csp_evil.probe('oid = oid') AND $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR csp_evil.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = csp_evil.eq_oid);
CREATE FUNCTION csp_evil.eq_regclass(regclass, oid) RETURNS boolean LANGUAGE plpgsql
  AS $$ BEGIN RETURN csp_evil.probe('regclass = oid') AND $1::oid OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR csp_evil.= (LEFTARG = regclass, RIGHTARG = oid, FUNCTION = csp_evil.eq_regclass);
CREATE FUNCTION csp_evil.eq_int(int, int) RETURNS boolean LANGUAGE plpgsql
  AS $$ BEGIN RETURN csp_evil.probe('int = int') AND $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR csp_evil.= (LEFTARG = int, RIGHTARG = int, FUNCTION = csp_evil.eq_int);
CREATE FUNCTION csp_evil.lt_int(int, int) RETURNS boolean LANGUAGE plpgsql
  AS $$ BEGIN RETURN csp_evil.probe('int < int') AND $1 OPERATOR(pg_catalog.<) $2; END $$;
CREATE OPERATOR csp_evil.< (LEFTARG = int, RIGHTARG = int, FUNCTION = csp_evil.lt_int);
CREATE FUNCTION csp_evil.now() RETURNS timestamptz LANGUAGE plpgsql
  AS $$ BEGIN RETURN CASE WHEN csp_evil.probe('now()') THEN pg_catalog.now() END; END $$;
CREATE FUNCTION csp_evil.count(anyelement) RETURNS bigint LANGUAGE plpgsql
  AS $$ BEGIN RETURN CASE WHEN csp_evil.probe('count()') THEN 1::bigint END; END $$;
-- control: under that search_path an unqualified name does take the plant
BEGIN;
SET LOCAL search_path = csp_evil, pg_catalog;
SELECT 1::bigint + 2::bigint AS control;
ROLLBACK;
-- SET LOCAL before COMMIT
BEGIN;
SELECT cdc_apply('{"op": "c", "after": {"id": 1, "v": "a"},
                   "source": {"name": "csp", "schema": "csp_own", "table": "t", "lsn": 1}}'::jsonb, 'csp_own.t');
SET LOCAL search_path = csp_evil, pg_catalog, public;
COMMIT;
-- SET before COMMIT: the counts of a second call go onto the same row
BEGIN;
SELECT cdc_apply('{"op": "u", "after": {"id": 1, "v": "b"},
                   "source": {"name": "csp", "schema": "csp_own", "table": "t", "lsn": 2}}'::jsonb, 'csp_own.t');
SET search_path = csp_evil, pg_catalog, public;
COMMIT;
RESET search_path;
-- before PREPARE TRANSACTION (the prepared transaction's own counters row)
BEGIN;
SELECT cdc_apply('{"op": "c", "after": {"id": 2, "v": "c"},
                   "source": {"name": "csp", "schema": "csp_own", "table": "t", "lsn": 3}}'::jsonb, 'csp_own.t');
SET LOCAL search_path = csp_evil, pg_catalog, public;
PREPARE TRANSACTION 'csp_prepared';
RESET ROLE;
COMMIT PREPARED 'csp_prepared';
-- nobody gained anything, and the counts are there
SELECT rolsuper AS mallory_superuser FROM pg_roles WHERE rolname = 'csp_mallory';
SELECT applied, duplicate, stale FROM cdc.stats WHERE target = 'csp_own.t'::regclass;
SELECT * FROM csp_own.t ORDER BY id;
DROP SCHEMA csp_evil, csp_own CASCADE;
DROP ROLE csp_mallory;

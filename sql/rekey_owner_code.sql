--
-- rekey_owner_code (review h2): re-keying runs the table owner's code as
-- the superuser.  docs/security.md ("Delegating mappings") tells a delegate
-- whose key_columns change is refused (42501) that the extension owner
-- re-keys by calling cdc.register_mapping itself.  cdc._rekey_entities then
-- reads the delegate's table with the extension owner's rights (EXECUTE
-- format('SELECT ... FROM %s t')): planning that query loads the table's
-- index predicates into the relcache, and RelationGetIndexPredicate folds
-- an IMMUTABLE function of the table owner with constant arguments, as the
-- superuser (the class of test/t/071_resync_planner_code.pl, fixed there
-- for cdc.audit and cdc.resync).  The function calls a VOLATILE one that
-- makes the delegate a superuser.  Expected: the owner's code never runs
-- as the superuser; the records are re-keyed.  Tables of this suite are
-- called h2rk_*.
--
\set regress_user :USER
CREATE ROLE h2rk_mallory;
GRANT CREATE ON SCHEMA public TO h2rk_mallory;
GRANT INSERT, UPDATE, DELETE ON cdc.mapping TO h2rk_mallory;
GRANT EXECUTE ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
                                               bigint, text, text, text, regprocedure, text, text) TO h2rk_mallory;
SET ROLE h2rk_mallory;
CREATE TABLE h2rk_acct (id int PRIMARY KEY, code int NOT NULL UNIQUE, body text);
CREATE TABLE h2rk_ran (what text, ran_as name);
CREATE FUNCTION h2rk_escalate() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  INSERT INTO public.h2rk_ran VALUES (pg_catalog.left(pg_catalog.current_query(), 40), current_user);
  IF current_user <> 'h2rk_mallory' THEN
    EXECUTE 'ALTER ROLE h2rk_mallory SUPERUSER';
  END IF;
  RETURN true;
END $$;
CREATE FUNCTION h2rk_pred(int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN public.h2rk_escalate(); END $$;
SELECT target, key_columns FROM cdc.register_mapping('h2rk_acct');
SELECT cdc_apply(dbz('c', 'h2rk_acct', '{"id": 1, "code": 10, "body": "a"}', '0/1000', 100), 'h2rk_acct');
SELECT cdc_apply(dbz('c', 'h2rk_acct', '{"id": 2, "code": 20, "body": "b"}', '0/1100', 101), 'h2rk_acct');
-- the trap: an index predicate the planner folds (it ran here as h2rk_mallory)
CREATE INDEX h2rk_acct_trap ON h2rk_acct (body) WHERE public.h2rk_pred(0);
-- the delegate may not re-key: 42501, "the extension owner re-keys them"
SELECT cdc.register_mapping('h2rk_acct', key_columns => '{code}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
-- a new backend (an empty relcache), the extension owner's, which does what the hint says
\c - :regress_user
SELECT target, key_columns FROM cdc.register_mapping('h2rk_acct', key_columns => '{code}');
SELECT entity_key FROM cdc.entities WHERE target = 'h2rk_acct'::regclass ORDER BY 1;
-- h2rk_mallory's code never ran as the superuser, and she is not one
SELECT rolsuper FROM pg_roles WHERE rolname = 'h2rk_mallory';
SELECT what, ran_as FROM h2rk_ran WHERE ran_as <> 'h2rk_mallory';
ALTER ROLE h2rk_mallory NOSUPERUSER;
DROP TABLE h2rk_acct, h2rk_ran;
DROP FUNCTION h2rk_pred(int), h2rk_escalate();
REVOKE ALL ON cdc.mapping FROM h2rk_mallory;
REVOKE ALL ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
                                            bigint, text, text, text, regprocedure, text, text) FROM h2rk_mallory;
REVOKE CREATE ON SCHEMA public FROM h2rk_mallory;
DROP ROLE h2rk_mallory;

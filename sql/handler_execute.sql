--
-- handler_execute (review h2): a role may make a mapping call a handler
-- function only if it may execute that function itself, as PostgreSQL's
-- CREATE TRIGGER requires EXECUTE on the trigger function.  A delegate
-- (EXECUTE on cdc.register_mapping only) registered, on a table of its own,
-- a superuser's SECURITY DEFINER function whose EXECUTE was revoked from
-- PUBLIC; every change applied to that table by a role that may execute it
-- (a superuser's cdc_apply(), a run_as_owner subscription's worker) then
-- called it with the delegate's row data.  Expected: 42501 from
-- cdc.register_mapping and from cdc._write_mapping called directly, and the
-- mapping unchanged; a handler the delegate may execute is accepted.
-- Objects: h2he_*.
--
CREATE ROLE h2he_del;
CREATE SCHEMA h2he_del AUTHORIZATION h2he_del;
CREATE SCHEMA h2he_adm;
GRANT USAGE ON SCHEMA h2he_adm TO h2he_del;
GRANT EXECUTE ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
                                               bigint, text, text, text, regprocedure, text, text) TO h2he_del;
CREATE TABLE h2he_calls (who text, op text, meta_target text);
-- the superuser's function: SECURITY DEFINER, not for PUBLIC
CREATE FUNCTION h2he_adm.privileged(op text, old jsonb, new jsonb, meta jsonb) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ INSERT INTO public.h2he_calls VALUES (current_user, op, meta ->> 'target') $$;
REVOKE ALL ON FUNCTION h2he_adm.privileged(text, jsonb, jsonb, jsonb) FROM PUBLIC;
-- one the delegate may execute
CREATE FUNCTION h2he_adm.open(op text, old jsonb, new jsonb, meta jsonb) RETURNS void
LANGUAGE sql AS $$ SELECT $$;
-- what a statement raises, by SQLSTATE only
CREATE FUNCTION h2he_try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE stmt;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;

SET ROLE h2he_del;
CREATE TABLE h2he_del.t (id int PRIMARY KEY, v text);
SELECT target, mode FROM cdc.register_mapping('h2he_del.t');
-- the superuser's function: refused, directly too
SELECT h2he_try($$SELECT cdc.register_mapping('h2he_del.t', mode => 'handler',
                                              handler => 'h2he_adm.privileged(text, jsonb, jsonb, jsonb)')$$) AS register;
SELECT h2he_try($$SELECT cdc._write_mapping('register', 'h2he_del.t',
                     ROW('h2he_del.t', NULL, 'h2he_del', 't', NULL, NULL, 0, false, NULL, 'truncate',
                         '__debezium_unavailable_value', NULL, 'record', 'handler',
                         'h2he_adm.privileged(text, jsonb, jsonb, jsonb)', 'refuse', 'entity', 'table',
                         now())::cdc.mapping)$$) AS write_mapping;
SELECT target, mode, handler FROM cdc.mapping WHERE target = 'h2he_del.t'::regclass;
RESET ROLE;
-- the superuser applies a change to the delegate's table: nothing privileged runs
SELECT cdc_apply('{"op": "c", "after": {"id": 1, "v": "x"}, "source": {"name": "h2he", "schema": "h2he_del", "table": "t", "lsn": 10}}'::jsonb,
                 'h2he_del.t');
SELECT * FROM h2he_calls;
-- a handler it may execute: accepted
SET ROLE h2he_del;
SELECT target, mode, handler FROM cdc.register_mapping('h2he_del.t', mode => 'handler',
                                                         handler => 'h2he_adm.open(text, jsonb, jsonb, jsonb)');
RESET ROLE;
-- the superuser may register its own function
SELECT target, mode, handler FROM cdc.register_mapping('h2he_del.t', mode => 'handler',
                                                         handler => 'h2he_adm.privileged(text, jsonb, jsonb, jsonb)');

SELECT cdc.unregister_mapping('h2he_del.t');
DROP TABLE h2he_del.t, h2he_calls;
DROP FUNCTION h2he_try(text);
DROP FUNCTION h2he_adm.privileged(text, jsonb, jsonb, jsonb), h2he_adm.open(text, jsonb, jsonb, jsonb);
DROP SCHEMA h2he_adm, h2he_del;
REVOKE ALL ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
                                            bigint, text, text, text, regprocedure, text, text) FROM h2he_del;
DROP ROLE h2he_del;

--
-- mapping_grant_handler (security review h4): a role that writes cdc.mapping
-- directly -- granted INSERT and UPDATE on the table, the earlier way of
-- delegating mappings, limited by the row-level security policy
-- own_targets and still working; ALTER EXTENSION ... UPDATE carries such
-- grants over from 0.1.0 (docs/security.md, "Delegating mappings") --
-- may make a mapping call only a handler it may execute, as
-- cdc.register_mapping requires of every role
-- (sql/handler_execute.sql).  The policy did not check it: such a role
-- attached a superuser's SECURITY DEFINER function, revoked from PUBLIC,
-- as the handler of its own table, and a superuser's cdc_apply() to that
-- table then called it with the role's row data.  Expected: INSERT and
-- UPDATE of such a row refused by the policy (42501), the superuser's
-- cdc_apply() calls nothing privileged; a handler the role may execute is
-- accepted.  Objects: h4mg_*.
--
CREATE ROLE h4mg_del;
CREATE SCHEMA h4mg_del AUTHORIZATION h4mg_del;
CREATE SCHEMA h4mg_adm;
GRANT USAGE ON SCHEMA h4mg_adm TO h4mg_del;
-- the earlier delegation
GRANT INSERT, UPDATE ON cdc.mapping TO h4mg_del;
CREATE TABLE h4mg_calls (who text, op text);
-- the superuser's function: SECURITY DEFINER, not for PUBLIC
CREATE FUNCTION h4mg_adm.privileged(op text, old jsonb, new jsonb, meta jsonb) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ INSERT INTO public.h4mg_calls VALUES (current_user, op) $$;
REVOKE ALL ON FUNCTION h4mg_adm.privileged(text, jsonb, jsonb, jsonb) FROM PUBLIC;
-- one the delegate may execute
CREATE FUNCTION h4mg_adm.open(op text, old jsonb, new jsonb, meta jsonb) RETURNS void
LANGUAGE sql AS $$ SELECT $$;
-- what a statement raises, by SQLSTATE only
CREATE FUNCTION h4mg_try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE stmt;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;

SET ROLE h4mg_del;
CREATE TABLE h4mg_del.t (id int PRIMARY KEY, v text);
CREATE TABLE h4mg_del.u (id int PRIMARY KEY, v text);
-- the superuser's function: refused as a new row's handler ...
SELECT h4mg_try($$INSERT INTO cdc.mapping (target, source_schema, source_table, mode, handler)
                  VALUES ('h4mg_del.t', 'h4mg_del', 't', 'handler',
                          'h4mg_adm.privileged(text, jsonb, jsonb, jsonb)')$$) AS insert_privileged;
-- ... and as the new handler of a mapping of its own
SELECT h4mg_try($$INSERT INTO cdc.mapping (target, source_schema, source_table) VALUES ('h4mg_del.u', 'h4mg_del', 'u')$$)
  AS insert_state;
SELECT h4mg_try($$UPDATE cdc.mapping SET mode = 'handler', handler = 'h4mg_adm.privileged(text, jsonb, jsonb, jsonb)'
                   WHERE target = 'h4mg_del.u'::regclass$$) AS update_privileged;
SELECT target, mode, handler FROM cdc.mapping WHERE target IN ('h4mg_del.t'::regclass, 'h4mg_del.u'::regclass)
 ORDER BY target::text;
RESET ROLE;
-- the superuser applies a change to the delegate's tables: nothing privileged runs
SELECT cdc_apply('{"op": "c", "after": {"id": 1, "v": "x"}, "source": {"name": "h4mg", "schema": "h4mg_del", "table": "t", "lsn": 10}}'::jsonb,
                 'h4mg_del.t');
SELECT cdc_apply('{"op": "c", "after": {"id": 1, "v": "x"}, "source": {"name": "h4mg", "schema": "h4mg_del", "table": "u", "lsn": 10}}'::jsonb,
                 'h4mg_del.u');
SELECT * FROM h4mg_calls;
-- a handler it may execute: accepted
SET ROLE h4mg_del;
SELECT h4mg_try($$UPDATE cdc.mapping SET mode = 'handler', handler = 'h4mg_adm.open(text, jsonb, jsonb, jsonb)'
                   WHERE target = 'h4mg_del.u'::regclass$$) AS update_open;
SELECT target, mode, handler FROM cdc.mapping WHERE target = 'h4mg_del.u'::regclass;
RESET ROLE;

SELECT cdc.unregister_mapping('h4mg_del.t'), cdc.unregister_mapping('h4mg_del.u');
DROP TABLE h4mg_del.t, h4mg_del.u, h4mg_calls;
DROP FUNCTION h4mg_try(text);
DROP FUNCTION h4mg_adm.privileged(text, jsonb, jsonb, jsonb), h4mg_adm.open(text, jsonb, jsonb, jsonb);
DROP SCHEMA h4mg_adm, h4mg_del;
REVOKE ALL ON cdc.mapping FROM h4mg_del;
DROP ROLE h4mg_del;

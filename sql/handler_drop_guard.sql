--
-- handler_drop_guard (security review h2, round 32): a mapping's handler
-- is a regprocedure, which records no dependency, so DROP FUNCTION of a
-- handler went through and left the mapping naming a dropped OID.  Such a
-- value prints as a bare number, and pg_dump dumps it so: a restore read
-- it back as whatever function has that OID in the new cluster, and the
-- engine then called that function (another role's, by its name) for
-- every change of the table.  The drop of a handler is refused now (2BP01,
-- as for a dependency), unless the mapping goes in the same statement.
--
CREATE TABLE hdg_t (id int PRIMARY KEY, v text);
CREATE FUNCTION hdg_handler(op text, old jsonb, new jsonb, meta jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT (cdc.register_mapping('hdg_t', mode => 'handler', handler => 'hdg_handler(text, jsonb, jsonb, jsonb)')).handler;
-- refused: the mapping keeps its handler
DROP FUNCTION hdg_handler(text, jsonb, jsonb, jsonb);
SELECT handler FROM cdc.mapping WHERE target = 'hdg_t'::regclass;
-- the mapping still applies through it
SELECT cdc_apply(dbz('c', 'hdg_t', '{"id": 1, "v": "a"}', '0/10', 1), 'hdg_t');
-- a schema dropped with CASCADE holding the handler but not the table: refused too
CREATE SCHEMA hdg_s;
CREATE FUNCTION hdg_s.h(op text, old jsonb, new jsonb, meta jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT (cdc.register_mapping('hdg_t', mode => 'handler', handler => 'hdg_s.h(text, jsonb, jsonb, jsonb)')).handler;
DROP SCHEMA hdg_s CASCADE;
SELECT handler FROM cdc.mapping WHERE target = 'hdg_t'::regclass;
-- another handler registered first: the old one may go
SELECT (cdc.register_mapping('hdg_t', mode => 'handler', handler => 'hdg_handler(text, jsonb, jsonb, jsonb)')).handler;
DROP SCHEMA hdg_s CASCADE;
-- the handler and its table in one statement: both go, with the mapping
CREATE SCHEMA hdg_s2;
CREATE TABLE hdg_s2.t (id int PRIMARY KEY);
CREATE FUNCTION hdg_s2.h(op text, old jsonb, new jsonb, meta jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT (cdc.register_mapping('hdg_s2.t', mode => 'handler', handler => 'hdg_s2.h(text, jsonb, jsonb, jsonb)')).handler;
DROP SCHEMA hdg_s2 CASCADE;
SELECT count(*) AS mappings_left FROM cdc.mapping WHERE source_schema = 'hdg_s2';
-- unregistered, the handler may be dropped
SELECT cdc.unregister_mapping('hdg_t');
DROP FUNCTION hdg_handler(text, jsonb, jsonb, jsonb);
DROP TABLE hdg_t;

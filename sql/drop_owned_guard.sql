--
-- drop_owned_guard (review h4): DROP OWNED BY the role that owns the
-- extension drops cdc_apply (its owner is recorded in pg_shdepend) with the
-- subscriptions' rows, leaving their slots on the sources and their origins
-- here, exactly what DROP EXTENSION is refused for (2BP01).  The event
-- trigger cdc_guard_drop_extension fired only on DROP EXTENSION, and the
-- ProcessUtility hook looked only at DROP EXTENSION too.  A database of its
-- own, whose extension another superuser owns (the bootstrap superuser's
-- objects cannot be dropped by DROP OWNED).  Both guards looked only at a
-- superuser's command, but a member of the owning role may drop the
-- extension too: they now look at every command of a role with the
-- privileges of the extension's owner (whom PostgreSQL lets drop it).
--
SELECT current_database() AS dog_home \gset
CREATE ROLE cdc_dog_owner SUPERUSER;
CREATE ROLE cdc_dog_other;
CREATE DATABASE cdc_dog;
\c cdc_dog
SET ROLE cdc_dog_owner;
CREATE EXTENSION cdc_apply;
INSERT INTO cdc.subscription (name, conninfo, publications, slot_name, enabled, owner)
VALUES ('dog', 'dbname=nowhere', '{p}', 'dog', false, 'cdc_dog_owner');
RESET ROLE;
\set VERBOSITY default
-- refused, RESTRICT and CASCADE, with the extension and its subscription kept
DROP OWNED BY cdc_dog_owner;
DROP OWNED BY cdc_dog_owner CASCADE;
DROP OWNED BY cdc_dog_other, cdc_dog_owner;
SELECT extname FROM pg_extension WHERE extname = 'cdc_apply';
SELECT name FROM cdc.subscription;
-- a role that is not a superuser but has the privileges of the owner
-- (a member of it) may drop the extension, and its objects: refused too
CREATE ROLE cdc_dog_member IN ROLE cdc_dog_owner;
SET ROLE cdc_dog_member;
SELECT rolsuper FROM pg_roles WHERE rolname = current_user;
DROP EXTENSION cdc_apply;
DROP EXTENSION cdc_apply CASCADE;
DROP OWNED BY cdc_dog_owner;
RESET ROLE;
SELECT extname FROM pg_extension WHERE extname = 'cdc_apply';
SELECT name FROM cdc.subscription;
-- a role without them gets PostgreSQL's refusal
SET ROLE cdc_dog_other;
DROP EXTENSION cdc_apply;
DROP OWNED BY cdc_dog_owner;
RESET ROLE;
-- another role's DROP OWNED is not looked at
CREATE TABLE dog_t (id int);
ALTER TABLE dog_t OWNER TO cdc_dog_other;
DROP OWNED BY cdc_dog_other;
SELECT count(*) FROM pg_class WHERE relname = 'dog_t';
-- without subscriptions it goes through
DELETE FROM cdc.subscription;
DROP OWNED BY cdc_dog_owner;
SELECT count(*) FROM pg_extension WHERE extname = 'cdc_apply';
\c :dog_home
DROP DATABASE cdc_dog;
DROP ROLE cdc_dog_member, cdc_dog_owner, cdc_dog_other;

--
-- fold_session_user (review h2): cdc._fold_into_stream_mark(target) is
-- SECURITY DEFINER, EXECUTE to PUBLIC, and refuses "a session whose login
-- role is not a member of the target's owner" by testing session_user.
-- But session_user is the login role of the *session*, not of the code
-- that calls: a table owner's code runs as that owner with session_user a
-- superuser whenever a superuser's session runs it in a security-restricted
-- operation (ANALYZE of an expression index, REFRESH MATERIALIZED VIEW,
-- autovacuum, whose session user is the bootstrap superuser), and in the
-- cdc_apply worker (bootstrap superuser session) applying the owner's
-- table.  From there the owner's code folds another owner's stream-ordered
-- target and keeps its cdc.stream_mark rows locked for as long as its
-- transaction lasts, stalling that target's subscription worker: the stall
-- the check was added against (docs/security.md).  Reproduced on a live
-- worker: an ENABLE ALWAYS trigger of eve's table, applied by subscription
-- A, folded subscription B's target and B's worker waited on the row lock
-- while the trigger slept.  Expected: refused (42501) unless the calling
-- transaction took the lock cdc.set_ordering takes on the target (SHARE
-- ROW EXCLUSIVE, which needs write privileges on it).  Objects: h2sf_*.
--
CREATE ROLE h2sf_eve;
CREATE SCHEMA h2sf AUTHORIZATION h2sf_eve;
-- another owner's stream-ordered target (here the superuser's)
CREATE TABLE h2sf_x (id int PRIMARY KEY, v text);
SELECT ordering FROM cdc.register_mapping('h2sf_x');
SELECT ordering FROM cdc.set_ordering('h2sf_x', 'stream');
SET ROLE h2sf_eve;
CREATE TABLE h2sf.t (id int PRIMARY KEY);
-- eve's expression-index function: tries the fold and says what happened
CREATE FUNCTION h2sf.probe(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  BEGIN
    PERFORM cdc._fold_into_stream_mark('public.h2sf_x');
    RAISE NOTICE 'fold of h2sf_x accepted, as % (session %)', current_user, session_user = 'h2sf_eve';
  EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'fold of h2sf_x refused (42501), as %', current_user;
  END;
  RETURN $1;
END $$;
INSERT INTO h2sf.t VALUES (1);
CREATE INDEX h2sf_t_probe ON h2sf.t (h2sf.probe(id));
RESET ROLE;
-- a superuser's maintenance (autovacuum does the same): eve's code runs as
-- eve, restricted, in a session whose login role is a superuser
ANALYZE h2sf.t;
-- the owner of the target still switches it (the lock is taken there)
SELECT ordering FROM cdc.set_ordering('h2sf_x', 'entity');
SELECT ordering FROM cdc.set_ordering('h2sf_x', 'stream');
DROP TABLE h2sf.t;
DROP FUNCTION h2sf.probe(int);
DROP SCHEMA h2sf;
DROP TABLE h2sf_x;
DROP ROLE h2sf_eve;

--
-- row_location_cache_setting (security review h2): cdc.row_location_cache
-- sizes memory a backend allocates, zeroes and keeps for its whole life
-- (TopMemoryContext), up to 1GB.  It was PGC_USERSET: any caller of
-- cdc_apply() could make its backend hold 1GB (and each of its sessions),
-- and the owner of a database, who need not be a superuser, could
-- ALTER DATABASE ... SET it for every session there, the subscriptions'
-- workers included, which keep it as long as they run.  docs/security.md
-- promises that resources are bounded by settings a superuser controls,
-- as cdc.plan_cache_size and cdc.max_event_size are.  Now a superuser's
-- setting (PGC_SUSET): an ordinary role's SET, set_config(), ALTER ROLE
-- ... SET and, as a database's owner, ALTER DATABASE ... SET are refused
-- with 42501; the superuser's value is what that role's session uses.
--
-- the module loaded, as shared_preload_libraries loads it (else the name is
-- a placeholder, which only a superuser may store for a role or database)
SELECT cdc_apply(NULL::jsonb) AS module_loaded;
CREATE ROLE rlcs_user;
CREATE DATABASE rlcs_db OWNER rlcs_user;
SET ROLE rlcs_user;
SET cdc.row_location_cache = '1GB';
SELECT set_config('cdc.row_location_cache', '1GB', false);
ALTER ROLE rlcs_user SET cdc.row_location_cache = '1GB';
ALTER DATABASE rlcs_db SET cdc.row_location_cache = '1GB';
SHOW cdc.row_location_cache;
RESET ROLE;
-- nothing was stored for the role or the database
SELECT count(*) AS stored_settings FROM pg_db_role_setting s
  WHERE s.setrole = 'rlcs_user'::regrole OR s.setdatabase = (SELECT oid FROM pg_database WHERE datname = 'rlcs_db');
-- a superuser still sets it, for a session, a role or a database
SET cdc.row_location_cache = '4MB';
SHOW cdc.row_location_cache;
RESET cdc.row_location_cache;
ALTER ROLE rlcs_user SET cdc.row_location_cache = '1MB';
ALTER ROLE rlcs_user RESET cdc.row_location_cache;
DROP DATABASE rlcs_db;
DROP ROLE rlcs_user;

--
-- subscription_args (fresh-user review h2): cdc.create_subscription
-- recorded an owner that is no role (owner => '-', OID 0, or a dropped
-- role's OID), which the worker would then act as (SetUserIdAndSecContext);
-- publication names given twice (PostgreSQL's CREATE SUBSCRIPTION: 42710
-- "used more than once") or longer than a name's 63 bytes (no publication
-- can have it: the worker failed at the source and retried); and NULL
-- create_slot, copy_data, enabled or source_epoch, and a source_epoch
-- outside 0 to 2147483647 (also by alter), came out of the INSERT as a constraint violation quoting
-- the function's statement.  Each is now refused naming the argument,
-- before anything is recorded; cdc.alter_subscription refuses the same
-- owner and publications, the subscription unchanged.
-- Objects: subscriptions sa_*, role sa_gone.
--
\set SHOW_CONTEXT never
SELECT count(*) AS origins_before FROM pg_replication_origin \gset
CREATE ROLE sa_gone;
SELECT 'sa_gone'::regrole::oid AS gone_oid \gset
DROP ROLE sa_gone;
SELECT cdc.create_subscription('sa_bad', 'host=/nonexistent dbname=x', ARRAY['p'], owner => '-', enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- (the dropped role's OID varies: the message is not shown)
\set VERBOSITY sqlstate
SELECT cdc.create_subscription('sa_bad', 'host=/nonexistent dbname=x', ARRAY['p'], owner => :gone_oid::oid::regrole, enabled => false);
\set VERBOSITY default
SELECT cdc.create_subscription('sa_bad', 'host=/nonexistent dbname=x', ARRAY['p', 'q', 'p'], enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sa_bad', 'host=/nonexistent dbname=x', ARRAY[repeat('p', 64)], enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sa_bad', 'host=/nonexistent dbname=x', ARRAY['p'], create_slot => NULL, enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sa_bad', 'host=/nonexistent dbname=x', ARRAY['p'], copy_data => NULL, enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sa_bad', 'host=/nonexistent dbname=x', ARRAY['p'], enabled => NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sa_bad', 'host=/nonexistent dbname=x', ARRAY['p'], source_epoch => NULL, enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sa_bad', 'host=/nonexistent dbname=x', ARRAY['p'], source_epoch => -1, enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sa_bad', 'host=/nonexistent dbname=x', ARRAY['p'], source_epoch => 2147483648, enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS subscriptions FROM cdc.subscription WHERE name = 'sa_bad';
SELECT count(*) = :origins_before AS no_origin_left FROM pg_replication_origin;
-- accepted: 63-byte publication names, each once, an existing owner
SELECT cdc.create_subscription('sa_ok', 'host=/nonexistent dbname=x', ARRAY[repeat('p', 63), 'q'], owner => 'pg_monitor',
                               enabled => false) > 0 AS created;
SELECT cdc.alter_subscription('sa_ok', owner => '-');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.alter_subscription('sa_ok', publications => ARRAY['q', 'q']);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.alter_subscription('sa_ok', publications => ARRAY['q', repeat('r', 64)]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.alter_subscription('sa_ok', source_epoch => 2147483648);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT publications, owner, source_epoch FROM cdc.subscription WHERE name = 'sa_ok';
SELECT cdc.alter_subscription('sa_ok', publications => ARRAY['q', 'r'], owner => current_user::regrole);
SELECT publications, owner = current_user::regrole AS owner_is_me FROM cdc.subscription WHERE name = 'sa_ok';
SELECT cdc.drop_subscription('sa_ok');
SELECT count(*) = :origins_before AS no_origin_left FROM pg_replication_origin;

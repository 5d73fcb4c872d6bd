--
-- subscription_names (fresh-user run h4): cdc.create_subscription checked
-- the subscription's name but took any slot_name: 'Bad Slot!' was
-- accepted, and the worker then failed at the source, retrying with
-- backoff ('replication slot name "Bad Slot!" contains invalid
-- character').  A slot name is now checked as PostgreSQL checks one
-- (lower-case letters, digits and '_', at most 63 bytes: 42602, as CREATE
-- SUBSCRIPTION's slot_name), before anything is recorded.  A publications
-- array of more than one dimension was refused with 'searching for
-- elements in multidimensional arrays is not supported'; it is now 2202E
-- naming the argument, by create and alter.
-- Objects: subscriptions sn_*.
--
\set VERBOSITY default
SELECT count(*) AS origins_before FROM pg_replication_origin \gset
SELECT cdc.create_subscription('sn_bad', 'host=/nonexistent dbname=x', ARRAY['p'], slot_name => 'Bad Slot!', enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sn_bad', 'host=/nonexistent dbname=x', ARRAY['p'], slot_name => 'x" LOGICAL pgoutput', enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sn_bad', 'host=/nonexistent dbname=x', ARRAY['p'], slot_name => '', enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sn_bad', 'host=/nonexistent dbname=x', ARRAY['p'], slot_name => 'Upper', enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_subscription('sn_bad', 'host=/nonexistent dbname=x', ARRAY[['a', 'b'], ['c', 'd']], enabled => false);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT count(*) AS subscriptions FROM cdc.subscription WHERE name = 'sn_bad';
SELECT count(*) = :origins_before AS no_origin_left FROM pg_replication_origin;
-- good names: 63 bytes of the allowed characters, digits first
SELECT cdc.create_subscription('sn_ok', 'host=/nonexistent dbname=x', ARRAY['p'],
                               slot_name => '0_' || repeat('a', 61), enabled => false) > 0 AS created;
SELECT name, slot_name, publications FROM cdc.subscription WHERE name = 'sn_ok';
\set VERBOSITY default
SELECT cdc.alter_subscription('sn_ok', publications => ARRAY[['a', 'b'], ['c', 'd']]);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT publications FROM cdc.subscription WHERE name = 'sn_ok';
SELECT cdc.drop_subscription('sn_ok');

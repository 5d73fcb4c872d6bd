--
-- admin_args (fresh-user review h4): arguments of administrator functions
-- that the earlier reviews' tests (regclass_missing_args,
-- skip_transaction_args, null_arguments) did not reach.
--   - cdc.resync_table(name, target) given a target that names no relation
--     (OID 0, '-'::regclass, a dropped table's OID) said 55000 'table
--     <NULL>.<NULL> is not published by subscription ...' (its relkind check
--     is NULL for a missing relation and let it through), with a hint to add
--     the table to a publication; now 42P01 naming the argument and the OID,
--     as cdc.register_mapping, cdc.set_ordering, cdc.audit and cdc.resync say.
--   - cdc.create_history_table(name, source) documents 42602 for a bad name,
--     but a name parse_ident() refuses (an unquoted name with a space, an
--     unbalanced quote, an empty name) was 22023 'string is not a valid
--     identifier' from parse_ident itself; 'a.b.c' was 42602.  Now 42602 for
--     all of them, naming the argument.
--   - cdc.skip_transaction(name, '0/0', reason) was recorded as a pending
--     skip of a subscription without progress, though no transaction commits
--     at the invalid LSN 0/0, so the request could never be done (the same
--     reason as for an LSN before the progress, which is refused).  Now
--     22023, nothing recorded.
-- Objects: aa_t, aa_gone, aa_sub.
--
CREATE TABLE aa_t (id int PRIMARY KEY, v text);
CREATE TABLE aa_gone (id int PRIMARY KEY);
SELECT 'aa_gone'::regclass::oid AS gone_oid \gset
DROP TABLE aa_gone;
\set SHOW_CONTEXT never
SELECT cdc.create_subscription('aa_sub', 'host=/nonexistent dbname=x', ARRAY['p'], enabled => false) > 0 AS created;

-- 1. cdc.resync_table: a target that names no relation is 42P01
SELECT cdc.resync_table('aa_sub', 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.resync_table('aa_sub', '-');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.resync_table('aa_sub', 4294967295);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SET aa.gone = :'gone_oid';
DO $$
BEGIN
  PERFORM cdc.resync_table('aa_sub', current_setting('aa.gone')::oid::regclass);
EXCEPTION WHEN undefined_table THEN
  RAISE NOTICE 'resync_table of a dropped table: %', SQLSTATE;
END $$ LANGUAGE plpgsql;
RESET aa.gone;
\set VERBOSITY default
-- unchanged: NULL is 22004, an index 42809, an unknown subscription 42704
SELECT cdc.resync_table('aa_sub', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.resync_table('aa_sub', 'aa_t_pkey');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.resync_table('aa_nosuch', 'aa_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS subscription_tables FROM cdc.subscription_rel r JOIN cdc.subscription s USING (subid) WHERE s.name = 'aa_sub';

-- 2. cdc.create_history_table: every bad name is 42602, nothing created
SELECT cdc.create_history_table('aa hist', 'aa_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_history_table('"aa"hist"', 'aa_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_history_table('', 'aa_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_history_table('public.', 'aa_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT cdc.create_history_table('a.b.c', 'aa_t');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS history_tables FROM pg_class WHERE relname LIKE 'aa%hist%';
-- names that need quotes work when quoted
SELECT cdc.create_history_table('"aa Hist"', 'aa_t') AS history_table;
SELECT cdc.create_history_table('public."aa.Hist 2"', 'aa_t') AS history_table;
DROP TABLE "aa Hist", "aa.Hist 2";

-- 3. cdc.skip_transaction: the invalid LSN 0/0 is 22023, nothing recorded
SELECT cdc.skip_transaction('aa_sub', '0/0', 'typo');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS skip_records, (SELECT skip_lsn FROM cdc.subscription WHERE name = 'aa_sub') AS skip_lsn
  FROM cdc.skipped_transactions WHERE name = 'aa_sub';
-- a real commit LSN of a subscription without progress is recorded
SELECT cdc.skip_transaction('aa_sub', '0/16B3748', 'the failing one');
SELECT name, commit_lsn, reason, skipped_at FROM cdc.skipped_transactions WHERE name = 'aa_sub' ORDER BY id;

SELECT cdc.drop_subscription('aa_sub');
DELETE FROM cdc.skipped_transactions WHERE name = 'aa_sub';
DROP TABLE aa_t;

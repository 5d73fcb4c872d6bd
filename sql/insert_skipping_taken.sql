--
-- insert_skipping_taken: ledger claims, new entity records and outbox rows
-- inserted without speculative insertion (docs/internals.md, "Inserts
-- without speculative insertion") give what the statements give: the same
-- scenario through the executor (ist_on, cdc.direct_writes on) and with the
-- statements (ist_off, off) ends with the same outcomes, ledger, entity
-- records, rows, outbox and counters; one outbox row per change; no 23505.
-- The same delivery twice in one batch and in one transaction, state
-- pruned (ledger and entity records deleted) in the same and in an earlier
-- transaction, a rolled-back savepoint, REPEATABLE READ and SERIALIZABLE
-- (the statements there), batches over the 1,000-row insert chunks.
-- isolation spec insert_skipping_taken has the concurrent cases.
--
CREATE FUNCTION ist_ev(op text, id int, v text, lsn bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('op', op, 'source', jsonb_build_object('name', 'ist', 'schema', 'public', 'table', current_setting('ist.tbl'), 'lsn', lsn, 'txId', lsn),
    'before', CASE WHEN op = 'd' THEN jsonb_build_object('id', id) END,
    'after', CASE WHEN op <> 'd' THEN jsonb_build_object('id', id, 'v', v) END) $$;
CREATE TABLE ist_result (dw text, what text, result text);
\getenv abs_srcdir PG_ABS_SRCDIR
\set scenario :abs_srcdir '/sql/include/insert_skipping_taken_scenario.sql'
\set tbl ist_on
\set dw on
\i :scenario
\set tbl ist_off
\set dw off
\i :scenario
-- identical, part by part
SELECT what, count(DISTINCT result) = 1 AS same, count(*) AS runs FROM ist_result GROUP BY what ORDER BY what;
SELECT what, result FROM ist_result WHERE dw = 'on' AND what IN ('ledger', 'stats') ORDER BY what;
DROP TABLE ist_result, ist_on, ist_off;
DROP FUNCTION ist_ev(text, int, text, bigint);

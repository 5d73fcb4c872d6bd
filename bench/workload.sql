-- Deterministic workload of the benchmark (bench/run.sh): N changes over K
-- keys, as a table of change events.
--
-- Every key starts with an insert and then gets updates; a quarter of the
-- keys are deleted on the way, and two thirds of those are re-created right
-- after the delete (a re-creation) and updated again.  A key has 2 to 7
-- changes.  Keys start at pseudo-random positions of the stream and space
-- their changes by a per-key gap of 1 to 2 * txn_size positions, so some
-- keys change several times inside one source transaction and others
-- across transactions.  Everything follows from hashint8() of the key and
-- change number: the same (n, k, txn_size) gives the same events on every
-- run.
--
-- bench_events: one row per change, in source order (seq), grouped into
-- source transactions of txn_size changes (txn), with the row values and the
-- Debezium envelope (bare payload, as with value.converter.schemas.enable =
-- false) that the SQL methods receive.

-- A non-negative pseudo-random integer from (a, b).
CREATE FUNCTION bench_h(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT hashint8(a * 1000003 + b)::bigint & 2147483647 $$;

CREATE FUNCTION bench_generate(n bigint, k bigint, txn_size int) RETURNS bigint
LANGUAGE plpgsql
AS $fn$
DECLARE
  total bigint;
BEGIN
  CREATE TABLE bench_events AS
  WITH keys AS (
    SELECT id,
           2 + bench_h(id, 1) % 6           AS m,         -- changes of this key (before the cut at n)
           bench_h(id, 2) % 4 = 0           AS deleted,   -- a quarter of the keys are deleted ...
           bench_h(id, 4) % 3 <> 0          AS recreated, -- ... and two thirds of those re-created
           bench_h(id, 5) % n               AS start,     -- stream position of the first change
           1 + bench_h(id, 6) % (2 * txn_size) AS gap     -- distance between its changes
      FROM generate_series(1, k) AS id),
  shaped AS (
    SELECT keys.*, 1 + bench_h(id, 3) % (m - 1) AS dpos FROM keys),
  changes AS (
    SELECT s.id, j,
           CASE WHEN j = 0 THEN 'c'
                WHEN s.deleted AND j = s.dpos THEN 'd'
                WHEN s.deleted AND j = s.dpos + 1 THEN 'c'
                ELSE 'u' END AS op,
           s.start + j * s.gap AS pos
      FROM shaped s, generate_series(0, s.m - 1) AS j
     WHERE NOT (s.deleted AND NOT s.recreated AND j > s.dpos)),
  ordered AS (
    SELECT row_number() OVER (ORDER BY pos, id, j) AS seq, id, j, op FROM changes),
  rows AS (
    SELECT seq, (seq - 1) / txn_size AS txn, op, id,
           (1 + bench_h(id, 7) % 20000)::int AS customer_id,
           (ARRAY['new', 'paid', 'packed', 'shipped', 'delivered', 'returned'])[1 + j % 6] AS status,
           round((bench_h(id * 8 + j, 8) % 10000000) / 100.0, 2)::numeric(12,2) AS amount,
           'order ' || id || ' rev ' || j || ' ' || repeat(chr(97 + (bench_h(id, j)::int % 26)), (bench_h(id * 8 + j, 9) % 48)::int) AS note,
           timestamptz '2024-01-01 00:00:00+00' + seq * interval '1 millisecond' AS updated_at
      FROM ordered
     WHERE seq <= n)
  SELECT seq, txn::int AS txn, op, id, customer_id, status, amount, note, updated_at,
         jsonb_build_object(
           'op', op,
           'before', CASE WHEN op = 'd' THEN jsonb_build_object('id', id) END,
           'after', CASE WHEN op <> 'd' THEN jsonb_build_object(
                      'id', id, 'customer_id', customer_id, 'status', status, 'amount', amount, 'note', note,
                      'updated_at', to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')) END,
           'source', jsonb_build_object(
                      'version', '2.5.0.Final', 'connector', 'postgresql', 'name', 'bench', 'db', 'bench',
                      'schema', 'public', 'table', 'orders', 'txId', 1000 + txn, 'lsn', 100000 + seq * 64,
                      'ts_ms', 1704067200000 + seq),
           'ts_ms', 1704067200000 + seq) AS event
    FROM rows;
  CREATE UNIQUE INDEX ON bench_events (seq);
  CREATE INDEX ON bench_events (txn, seq);
  SELECT count(*) INTO total FROM bench_events;
  IF total <> n THEN
    RAISE EXCEPTION 'workload has % changes, wanted %', total, n;
  END IF;
  RETURN total;
END
$fn$;

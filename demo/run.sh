#!/usr/bin/env bash
# The main job on a real example, from a fresh machine:
#   installs the build dependencies, builds and installs cdc_apply, starts a
#   throwaway SOURCE and DESTINATION PostgreSQL 15, and
#     0. streams a pgbench workload from the source to the destination through
#        the background worker (initial copy, then pgoutput streaming), and
#        compares both sides table by table; then feeds the destination
#     1. the Debezium documentation events shipped in test/fixtures/debezium/
#        (create with schema, its redelivery, update, delete, Kafka
#        tombstone, transaction metadata, message, truncate), and
#     2. a generated order stream delivered the way an at-least-once
#        pipeline delivers it: duplicated, reordered, then replayed whole,
#   through cdc_apply(), printing every outcome, the resulting rows,
#   tombstones, outbox rows and cdc.stats.
# Usage: bash demo/run.sh [--keep]   (--keep leaves the server running)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
KEEP=${1:-}
bash scripts/install-deps.sh
PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$($PG_CONFIG --bindir)
make -s >/dev/null
if [ -w "$($PG_CONFIG --pkglibdir)" ]; then make -s install >/dev/null; else sudo make -s install >/dev/null; fi

WORK=$(mktemp -d /tmp/cdc_apply_demo.XXXXXX)
chmod 755 "$WORK"
PORT=${DEMO_PORT:-55432}
SRC_PORT=${DEMO_SOURCE_PORT:-55433}
run() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" -eq 0 ] && chown postgres "$WORK"
run "$BINDIR/initdb" -D "$WORK/data" -A trust -U postgres >/dev/null
run "$BINDIR/initdb" -D "$WORK/source" -A trust -U postgres >/dev/null
cat >> "$WORK/data/postgresql.conf" <<CONF
shared_preload_libraries = 'cdc_apply'
cdc.database = 'destination'
cdc.naptime = 1
CONF
echo "wal_level = logical" >> "$WORK/source/postgresql.conf"
run "$BINDIR/pg_ctl" -D "$WORK/source" -l "$WORK/source.log" -o "-p $SRC_PORT -k $WORK -c listen_addresses=''" -w start >/dev/null
run "$BINDIR/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -o "-p $PORT -k $WORK -c listen_addresses=''" -w start >/dev/null
stop() {
	local rc=$?
	[ "$KEEP" = "--keep" ] && return
	run "$BINDIR/pg_ctl" -D "$WORK/data" -m fast stop >/dev/null || true
	run "$BINDIR/pg_ctl" -D "$WORK/source" -m fast stop >/dev/null || true
	# the work directory goes when the demo succeeded; after a failure its logs stay
	if [ "$rc" -eq 0 ]; then rm -rf "$WORK"; else echo "logs kept in $WORK (server.log, source.log)" >&2; fi
}
trap stop EXIT
PSQL=(run "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -U postgres)
SPSQL=(run "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$SRC_PORT" -U postgres)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE destination" >/dev/null

echo "== 0. Source cluster -> cdc_apply background worker -> destination (pgbench workload)"
# Source: pgbench tables (10,000 accounts) and an orders table, published.
run "$BINDIR/pgbench" -q -i -s 1 -h "$WORK" -p "$SRC_PORT" -U postgres postgres >/dev/null 2>&1
"${SPSQL[@]}" -d postgres <<'SQL'
DELETE FROM pgbench_accounts WHERE aid > 10000;
CREATE TABLE demo_orders (id int PRIMARY KEY, aid int NOT NULL, amount numeric(12,2) NOT NULL, note text);
INSERT INTO demo_orders SELECT g, g, g * 1.25, 'initial' FROM generate_series(1, 500) g;
CREATE PUBLICATION demo_pub FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, demo_orders;
SQL
# Destination: the same tables, empty; an outbox for demo_orders.
run "$BINDIR/pgbench" -q -i -I dtp -s 1 -h "$WORK" -p "$PORT" -U postgres destination >/dev/null 2>&1
"${PSQL[@]}" -d destination >/dev/null <<SQL
CREATE EXTENSION cdc_apply;
CREATE TABLE demo_orders (id int PRIMARY KEY, aid int NOT NULL, amount numeric(12,2) NOT NULL, note text);
SELECT 1 FROM cdc.register_mapping('demo_orders', outbox => true, source_name => 'demo');
SELECT 1 FROM cdc.create_subscription('demo', 'host=$WORK port=$SRC_PORT dbname=postgres user=postgres', ARRAY['demo_pub']);
SQL
cat > "$WORK/workload.sql" <<'PGB'
\set aid random(1, 10000)
\set tid random(1, 10)
\set oid random(1, 1000)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = 1;
INSERT INTO demo_orders VALUES (:oid, :aid, abs(:delta) / 100.0, 'order') ON CONFLICT (id) DO UPDATE SET amount = excluded.amount, note = 'updated';
DELETE FROM demo_orders WHERE id = (:oid * 7) % 1000 + 1;
END;
PGB
chmod 644 "$WORK/workload.sql"
echo "running 1,000 pgbench transactions on the source while the worker starts and copies ..."
run "$BINDIR/pgbench" -n -c 2 -t 500 -f "$WORK/workload.sql" -h "$WORK" -p "$SRC_PORT" -U postgres postgres 2>&1 | grep -E "^(number of transactions actually processed|tps)" || true
# the second half only once the initial copy is done, so that it is streamed
for i in $(seq 1 120); do
	[ "$("${PSQL[@]}" -d destination -Atc "SELECT state FROM cdc.subscription_status WHERE name = 'demo'")" = streaming ] && break
	sleep 1
done
echo "running 1,000 more while the worker streams them ..."
run "$BINDIR/pgbench" -n -c 2 -t 500 -f "$WORK/workload.sql" -h "$WORK" -p "$SRC_PORT" -U postgres postgres 2>&1 | grep -E "^(number of transactions actually processed|tps)" || true
target=$("${SPSQL[@]}" -d postgres -Atc "SELECT pg_current_wal_lsn()")
for i in $(seq 1 120); do
	done_=$("${PSQL[@]}" -d destination -Atc "SELECT coalesce(applied_lsn >= '$target'::pg_lsn, false) FROM cdc.subscription_status WHERE name = 'demo'")
	[ "$done_" = "t" ] && break
	sleep 1
done
"${PSQL[@]}" -d destination -c "SELECT name, state, applied_lsn, flushed_lsn, lag_bytes, retry_count, last_error FROM cdc.subscription_status"
echo "table-by-table comparison (row count and md5 of the ordered rows):"
for t in pgbench_accounts pgbench_branches pgbench_tellers demo_orders; do
	q="SELECT count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM $t x"
	s_=$("${SPSQL[@]}" -d postgres -Atc "$q")
	d_=$("${PSQL[@]}" -d destination -Atc "$q")
	if [ "$s_" = "$d_" ]; then verdict=equal; else verdict=DIFFERENT; fi
	printf '  %-18s source %-45s destination %-45s %s\n' "$t" "$s_" "$d_" "$verdict"
done
"${PSQL[@]}" -d destination -c "SELECT target, applied, duplicate, stale, snapshot_rows, outbox_rows FROM cdc.stats ORDER BY 1::text"

# Fixture files are read by the client and passed as literals.
FX="$ROOT/test/fixtures/debezium"
lit() { sed "s/'/''/g" "$1" | tr '\n' ' '; }

{
cat <<'SQL'
\pset footer off
CREATE TABLE customers (id int PRIMARY KEY, first_name text NOT NULL, last_name text NOT NULL, email text NOT NULL);
SELECT target, source_schema, source_table, outbox FROM cdc.register_mapping('customers', 'public', 'customers', outbox => true, outbox_topic => 'customers.events');
\echo
\echo '== 1. Debezium documentation events (test/fixtures/debezium) through cdc_apply()'
CREATE TEMP TABLE run (step int, fixture text, outcome text);
SQL
step=0
for f in pg-create-with-schema.json pg-create-with-schema.json pg-transaction-begin.json \
         pg-update-replica-identity-default-with-schema.json pg-transaction-end.json \
         pg-delete-replica-identity-default-with-schema.json pg-tombstone.value-null.txt \
         pg-message-transactional.payload-only.json pg-create.payload-only.json \
         pg-delete-replica-identity-default.payload-only.json; do
	step=$((step + 1))
	echo "INSERT INTO run SELECT $step, '$f', cdc_apply('$(lit "$FX/$f")'::jsonb);"
done
cat <<'SQL'
SELECT step, fixture, outcome FROM run ORDER BY step;
\echo 'The update example carries the create example''s source.lsn (24023128) with other content:'
\echo 'equal version, different payload -> conflict, recorded with both images:'
SELECT reason, stored_image->>'first_name' AS stored_first_name, event_image->>'first_name' AS event_first_name FROM cdc.conflicts;
\echo 'Rows, tombstones and outbox of customers:'
SELECT * FROM customers ORDER BY id;
SELECT entity_key, version FROM cdc.tombstones WHERE target = 'customers'::regclass;
SELECT topic, op, entity_key, payload->>'email' AS email FROM cdc.outbox WHERE target = 'customers'::regclass ORDER BY id;

\echo
\echo '== 2. An at-least-once order stream: 400 changes over 50 keys, delivered with duplicates, reordered, then replayed'
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL,
                     amount numeric(12,2) NOT NULL, note text, updated_at timestamptz NOT NULL);
SELECT target, source_schema, source_table FROM cdc.register_mapping('orders', 'shop', 'orders', outbox => true);
-- The source history: per key an insert, several updates, a delete and a re-creation;
-- LSNs grow in commit order.  updated_at travels as Debezium's ZonedTimestamp string.
CREATE TEMP TABLE history AS
WITH steps AS (
  SELECT k AS id, s, row_number() OVER (ORDER BY s, k) AS n
    FROM generate_series(1, 50) k, generate_series(1, 8) s)
SELECT n, id,
       jsonb_build_object(
         'op', CASE s WHEN 1 THEN 'c' WHEN 7 THEN 'd' WHEN 8 THEN 'c' ELSE 'u' END,
         'before', CASE WHEN s = 7 THEN jsonb_build_object('id', id) END,
         'after', CASE WHEN s <> 7 THEN jsonb_build_object(
                    'id', id, 'customer_id', id % 7, 'status', (ARRAY['new','paid','packed','shipped','delivered','returned','','again'])[s],
                    'amount', round((id * 10 + s)::numeric / 3, 2), 'note', repeat('n', s),
                    'updated_at', to_char(timestamptz '2026-01-01 00:00:00+00' + n * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')) END,
         'source', jsonb_build_object('name', 'shop-db', 'db', 'shop', 'schema', 'shop', 'table', 'orders',
                                      'lsn', 4096 + n * 64, 'txId', 1000 + n)) AS event
  FROM steps;
-- Delivery: every event, 30% of them twice, shuffled (a change may overtake older changes of its own key) ...
CREATE TEMP TABLE delivered (seq serial, outcome text);
SELECT setseed(0.42);
INSERT INTO delivered (outcome)
SELECT cdc_apply(event) FROM (
  SELECT event, n, random() AS r FROM history
  UNION ALL SELECT event, n, random() FROM history WHERE n % 10 < 3) d
ORDER BY n + (r * 150)::int, n;
SELECT 'first delivery' AS pass, outcome, count(*) FROM delivered GROUP BY outcome ORDER BY outcome;
-- ... then the consumer group rebalances and the whole topic is replayed from offset 0.
SELECT 'full replay' AS pass, cdc_apply(event) AS outcome, count(*) FROM history GROUP BY 2 ORDER BY 2;
\echo 'The destination equals the source history''s final state (re-created rows), whatever the delivery:'
SELECT count(*) AS rows, count(*) FILTER (WHERE status = 'again') AS recreated,
       sum(amount) AS total_amount FROM orders;
SELECT (SELECT count(*) FROM cdc.outbox WHERE target = 'orders'::regclass) AS outbox_rows,
       (SELECT count(DISTINCT idempotency_key) FROM cdc.outbox WHERE target = 'orders'::regclass) AS distinct_keys,
       (SELECT count(*) FROM cdc.ledger WHERE target = 'orders'::regclass) AS ledger_rows;
SELECT * FROM orders ORDER BY id LIMIT 3;

\echo
\echo '== cdc.stats'
SELECT * FROM cdc.stats WHERE target::text NOT LIKE 'pgbench%' ORDER BY target::text;
SQL
} > "$WORK/demo.sql"
chmod 644 "$WORK/demo.sql"
"${PSQL[@]}" -d destination -f "$WORK/demo.sql"
if [ "$KEEP" = "--keep" ]; then
	echo
	echo "servers left running: psql -h $WORK -p $PORT -U postgres destination   (source: -p $SRC_PORT postgres)"
fi

#!/usr/bin/env bash
# The main job on a real example, from a fresh machine:
#   installs the build dependencies, builds and installs cdc_apply, starts a
#   throwaway SOURCE and DESTINATION PostgreSQL 15, and prints, step by step:
#     1-5. a pgbench workload streamed from the source to the destination
#          through the background worker (initial copy, then pgoutput
#          streaming), both sides compared table by table, and what the
#          worker counted;
#     6.   the Debezium documentation events shipped in test/fixtures/debezium/
#          (create with schema, its redelivery, update, delete, Kafka
#          tombstone, transaction metadata, message) through cdc_apply();
#     7.   a generated order stream delivered the way an at-least-once
#          pipeline delivers it: duplicated, reordered, then replayed whole;
#     8.   every row of cdc.stats, read out;
#     9.   cdc.audit of the worker's mirror against the source: no finding.
# Usage: bash demo/run.sh [--keep]   (--keep leaves the servers running)
# PG_CONFIG selects the PostgreSQL 15 installation (default: Debian's
# /usr/lib/postgresql/15/bin/pg_config, else the pg_config on PATH).  Both
# servers listen only on a Unix socket in a private temporary directory, so
# their ports (DEMO_PORT, DEMO_SOURCE_PORT) cannot collide with any other
# server on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
KEEP=${1:-}
case $KEEP in
"" | --keep) ;;
*) echo "usage: bash demo/run.sh [--keep]   (unknown argument: $KEEP)" >&2; exit 2 ;;
esac
echo "installing the build dependencies, building and installing cdc_apply (a few minutes on a fresh machine) ..."
bash scripts/install-deps.sh
if [ -z "${PG_CONFIG:-}" ]; then
	if [ -x /usr/lib/postgresql/15/bin/pg_config ]; then PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config; else PG_CONFIG=pg_config; fi
fi
case "$($PG_CONFIG --version)" in
"PostgreSQL 15"*) ;;
*) echo "demo/run.sh needs PostgreSQL 15; $PG_CONFIG is $($PG_CONFIG --version) (set PG_CONFIG)" >&2; exit 1 ;;
esac
BINDIR=$($PG_CONFIG --bindir)
echo "building cdc_apply with $(nproc) jobs (2 to 7 minutes on 2 cores, longer on a busy machine) ..."
make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG" >/dev/null
if [ -w "$($PG_CONFIG --pkglibdir)" ]; then make -s install PG_CONFIG="$PG_CONFIG" >/dev/null; else sudo make -s install PG_CONFIG="$PG_CONFIG" >/dev/null; fi

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

echo "== 1. Two throwaway PostgreSQL 15 clusters ($($PG_CONFIG --version)), sockets in $WORK"
echo "source:      port $SRC_PORT, wal_level = logical"
echo "destination: port $PORT, shared_preload_libraries = 'cdc_apply', its worker serves database \"destination\""
echo
echo "== 2. The source publishes pgbench's tables and demo_orders; the destination subscribes"
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
echo "source:      10,000 pgbench accounts, 10 tellers, 1 branch, 500 demo_orders; publication demo_pub of those four tables"
echo "destination: the same tables, empty; demo_orders mapped with an outbox (cdc.register_mapping);"
echo "             subscription demo on demo_pub (cdc.create_subscription): the worker copies the tables, then streams"
echo
echo "== 3. The source changes while the worker copies, then while it streams"
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
echo "running 1,000 pgbench transactions on the source while the worker starts; its copy takes a snapshot"
echo "before, among or after them, and whatever commits after the snapshot is streamed ..."
run "$BINDIR/pgbench" -n -c 2 -t 500 -f "$WORK/workload.sql" -h "$WORK" -p "$SRC_PORT" -U postgres postgres 2>&1 | grep -E "^number of transactions actually processed" || true
# the second half only once the initial copy is done, so that it is streamed
for i in $(seq 1 120); do
	[ "$("${PSQL[@]}" -d destination -Atc "SELECT state FROM cdc.subscription_status WHERE name = 'demo'")" = streaming ] && break
	sleep 1
done
echo "running 1,000 more while the worker streams them ..."
run "$BINDIR/pgbench" -n -c 2 -t 500 -f "$WORK/workload.sql" -h "$WORK" -p "$SRC_PORT" -U postgres postgres 2>&1 | grep -E "^number of transactions actually processed" || true
target=$("${SPSQL[@]}" -d postgres -Atc "SELECT pg_current_wal_lsn()")
caught_up=f
for i in $(seq 1 120); do
	caught_up=$("${PSQL[@]}" -d destination -Atc "SELECT coalesce(applied_lsn >= '$target'::pg_lsn, false) FROM cdc.subscription_status WHERE name = 'demo'")
	[ "$caught_up" = "t" ] && break
	sleep 1
done
echo
echo "== 4. The destination equals the source"
echo "subscription status (cdc.subscription_status): streaming, nothing left to apply, no error. applied_lsn is"
echo "the source position committed here; flushed_lsn the one reported to the source as durable, which follows"
echo "it after the next WAL flush (docs/worker.md), so it may lag behind:"
"${PSQL[@]}" -d destination -c "SELECT name, state, applied_lsn, flushed_lsn, lag_bytes, retry_count, last_error FROM cdc.subscription_status"
# the sentence above is checked, not assumed: the demo fails when the worker has not caught up or shows an error
status=$("${PSQL[@]}" -d destination -Atc "SELECT state = 'streaming' AND last_error IS NULL FROM cdc.subscription_status WHERE name = 'demo'")
if [ "$caught_up" != "t" ] || [ "$status" != "t" ]; then
	echo "FAILED: the worker did not apply the source up to $target within 120 s, or is not streaming without error (see above)" >&2
	exit 1
fi
echo "table by table (row count | md5 of the ordered rows):"
differ=0
for t in pgbench_accounts pgbench_branches pgbench_tellers demo_orders; do
	q="SELECT count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM $t x"
	s_=$("${SPSQL[@]}" -d postgres -Atc "$q")
	d_=$("${PSQL[@]}" -d destination -Atc "$q")
	if [ "$s_" = "$d_" ]; then verdict=equal; else verdict=DIFFERENT; differ=1; fi
	printf '  %-18s source %-45s destination %-45s %s\n' "$t" "$s_" "$d_" "$verdict"
done
if [ "$differ" -ne 0 ]; then
	echo "FAILED: the destination differs from the source (above)" >&2
	exit 1
fi
echo
echo "== 5. What the worker counted (cdc.stats of its four tables)"
echo "applied = the rows of the initial copy (snapshot_rows) + the changes streamed after it; a streamed change of"
echo "demo_orders also wrote one outbox row (the copy writes none); nothing was delivered twice here, so no"
echo "duplicate or stale outcome. demo_orders: the pgbench transactions committed before the worker's copy"
echo "took its snapshot, if any, are in the copy too (their inserts and deletes move snapshot_rows above or"
echo "below the 500 of step 2), and each pgbench transaction upserts one order and deletes another, so it"
echo "streams about 1.5 changes per transaction where the other tables stream one:"
"${PSQL[@]}" -d destination -c "SELECT target, applied, snapshot_rows, applied - snapshot_rows AS streamed, outbox_rows, duplicate, stale
  FROM cdc.stats WHERE target::text IN ('pgbench_accounts', 'pgbench_branches', 'pgbench_tellers', 'demo_orders') ORDER BY target::text"

# Fixture files are read by the client and passed as literals.
FX="$ROOT/test/fixtures/debezium"
lit() { sed "s/'/''/g" "$1" | tr '\n' ' '; }

{
cat <<'SQL'
\pset footer off
\echo '== 6. Debezium documentation events (test/fixtures/debezium) through cdc_apply()'
CREATE TABLE customers (id int PRIMARY KEY, first_name text NOT NULL, last_name text NOT NULL, email text NOT NULL);
\echo 'mapping (cdc.register_mapping): the events of source table public.customers go to table customers, with outbox rows:'
SELECT target, source_schema, source_table, outbox, outbox_topic FROM cdc.register_mapping('customers', 'public', 'customers', outbox => true, outbox_topic => 'customers.events');
\echo 'the outcome of each file, in delivery order:'
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
\echo 'equal version, different payload -> conflict, recorded in cdc.conflicts with both images (a version'
\echo 'is {source epoch, commit LSN or LSN, LSN, order in the transaction}, docs/semantics.md "What orders changes"):'
SELECT reason, stored_image->>'first_name' AS stored_first_name, event_image->>'first_name' AS event_first_name FROM cdc.conflicts;
\echo 'table customers after the delete (no row):'
SELECT * FROM customers ORDER BY id;
\echo 'the delete left a tombstone at its version (cdc.tombstones), so an older create can never bring the row back:'
SELECT entity_key, version FROM cdc.tombstones WHERE target = 'customers'::regclass;
\echo 'cdc.outbox: one row per applied change (create and delete), none for the duplicates and the conflict:'
SELECT topic, op, entity_key, payload->>'email' AS email FROM cdc.outbox WHERE target = 'customers'::regclass ORDER BY id;

\echo
\echo '== 7. An at-least-once order stream: 400 changes over 50 keys, delivered with duplicates, reordered, then replayed'
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL,
                     amount numeric(12,2) NOT NULL, note text, updated_at timestamptz NOT NULL);
\echo 'mapping: the events of source table shop.orders go to table orders, with outbox rows:'
SELECT target, source_schema, source_table, outbox FROM cdc.register_mapping('orders', 'shop', 'orders', outbox => true);
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
SELECT setseed(0.42) AS seeded \gset
INSERT INTO delivered (outcome)
SELECT cdc_apply(event) FROM (
  SELECT event, n, random() AS r FROM history
  UNION ALL SELECT event, n, random() FROM history WHERE n % 10 < 3) d
ORDER BY n + (r * 150)::int, n;
\echo 'first delivery: all 400 changes, 120 of them twice, shuffled; stale = an older change that arrived after a newer one of its key:'
SELECT 'first delivery' AS pass, outcome, count(*) FROM delivered GROUP BY outcome ORDER BY outcome;
-- ... then the consumer group rebalances and the whole topic is replayed from offset 0.
\echo 'then the consumer group rebalances and the whole topic is replayed from offset 0: every change is a duplicate:'
SELECT 'full replay' AS pass, cdc_apply(event) AS outcome, count(*) FROM history GROUP BY 2 ORDER BY 2;
\echo 'The destination equals the source history''s final state (every key deleted and re-created), whatever the delivery:'
\echo 'each key''s last change in the history (its after-image) compared with the row of orders, column by column:'
CREATE TEMP VIEW expected_orders AS
SELECT (jsonb_populate_record(NULL::orders, h.event->'after')).*
  FROM (SELECT DISTINCT ON (id) id, event FROM history ORDER BY id, n DESC) h
 WHERE h.event->>'op' <> 'd';
SELECT (SELECT count(*) FROM orders) AS rows, (SELECT count(*) FROM expected_orders) AS expected_rows,
       (SELECT count(*) FROM orders WHERE status = 'again') AS recreated, (SELECT sum(amount) FROM orders) AS total_amount,
       (SELECT sum(amount) FROM expected_orders) AS expected_total,
       CASE WHEN NOT EXISTS ((TABLE orders EXCEPT TABLE expected_orders) UNION ALL (TABLE expected_orders EXCEPT TABLE orders))
            THEN 'equal' ELSE 'DIFFERENT' END AS verdict \gset demo_
SELECT :'demo_rows' AS rows, :'demo_expected_rows' AS expected_rows, :'demo_recreated' AS recreated,
       :'demo_total_amount' AS total_amount, :'demo_expected_total' AS expected_total, :'demo_verdict' AS verdict;
-- the demo fails (ON_ERROR_STOP) when the rows are not the history's final state
SELECT :'demo_verdict' = 'equal' AS demo_equal \gset
\if :demo_equal
\else
DO $$ BEGIN RAISE EXCEPTION 'FAILED: the rows of orders are not the history''s final state'; END $$;
\endif
\echo 'one outbox row per applied change, each with its own idempotency key; one ledger row per distinct delivery:'
SELECT (SELECT count(*) FROM cdc.outbox WHERE target = 'orders'::regclass) AS outbox_rows,
       (SELECT count(DISTINCT idempotency_key) FROM cdc.outbox WHERE target = 'orders'::regclass) AS distinct_keys,
       (SELECT count(*) FROM cdc.ledger WHERE target = 'orders'::regclass) AS ledger_rows;
\echo 'the first three orders:'
SELECT * FROM orders ORDER BY id LIMIT 3;

\echo
\echo '== 8. cdc.stats: one row per destination table, and one (target -) for events that name no table'
SELECT * FROM cdc.stats ORDER BY target::text;
\echo 'Read row by row:'
\pset tuples_only on
\pset format unaligned
\pset fieldsep ': '
SELECT '  ' || s.target::text,
       CASE
       WHEN s.target::oid = 0 THEN
         format('ignored %s: the records of step 6 that are not changes of a table: the transaction BEGIN and END '
                'markers, the Kafka tombstone (null value) and the logical decoding message. They resolve no target, '
                'write nothing and are counted under target 0, shown as -', s.ignored)
       WHEN s.target = 'customers'::regclass THEN
         format('step 6: applied %s (the create and the delete), duplicate %s (the create''s redelivery and the '
                'payload-only copies of the create and the delete, at the same source positions), conflict %s (the '
                'update example, same version as the create with other content), outbox_rows %s (one per applied change)',
                s.applied, s.duplicate, s.conflict, s.outbox_rows)
       WHEN s.target = 'orders'::regclass THEN
         format('step 7: applied %s + stale %s = %s, each of the 400 changes decided once; duplicate %s = %s second '
                'copies in the first delivery + %s in the full replay; of the stale, %s (blocked_resurrections) were '
                'inserts or updates of a key whose newer delete was already kept as a tombstone; outbox_rows %s '
                '(one per applied change)',
                s.applied, s.stale, s.applied + s.stale, s.duplicate,
                (SELECT count(*) FROM delivered WHERE outcome = 'duplicate'), s.duplicate - (SELECT count(*) FROM delivered WHERE outcome = 'duplicate'),
                s.blocked_resurrections, s.outbox_rows)
       ELSE
         format('steps 2-3, the worker: applied %s = snapshot_rows %s (the initial copy) + %s changes streamed '
                'after it; outbox_rows %s', s.applied, s.snapshot_rows, s.applied - s.snapshot_rows, s.outbox_rows)
         || CASE WHEN s.outbox_rows > 0 THEN ' (one per streamed change; the copy writes none)' ELSE ' (no outbox for this table)' END
       END AS reading
  FROM cdc.stats s ORDER BY s.target::text;
\pset tuples_only off
\pset format aligned

\echo
\echo '== 9. cdc.audit: the worker''s mirror (steps 2-4) compared with the source, at one source snapshot'
\echo 'hashes over key ranges on both sides, differing ranges bisected down to keys (docs/audit.md); no finding:'
\echo 'the audit run (CALL cdc.audit):'
CALL cdc.audit('demo');
\echo 'its status (cdc.audit_status): tables and source rows compared, key ranges hashed, findings:'
SELECT tables_done, rows_done AS source_rows_compared, ranges_done, findings, state FROM cdc.audit_status
 WHERE id = (SELECT max(id) FROM cdc.audit_runs);
\echo 'rows in cdc.audit_findings (a key missing, extra or different on the destination would be one):'
SELECT count(*) AS rows_in_audit_findings FROM cdc.audit_findings;
SQL
} > "$WORK/demo.sql"
chmod 644 "$WORK/demo.sql"
# from standard input: psql then prints a NOTICE (the audit's progress) without the script's path and line
"${PSQL[@]}" -d destination <"$WORK/demo.sql"
if [ "$KEEP" = "--keep" ]; then
	echo
	echo "servers left running: psql -h $WORK -p $PORT -U postgres destination   (source: -p $SRC_PORT postgres)"
	echo "to stop them: $BINDIR/pg_ctl -D $WORK/data stop; $BINDIR/pg_ctl -D $WORK/source stop; rm -rf $WORK"
	[ "$(id -u)" -eq 0 ] && echo "(as root, run pg_ctl as postgres: runuser -u postgres -- $BINDIR/pg_ctl ...)"
fi

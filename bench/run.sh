#!/usr/bin/env bash
# The cdc_apply benchmark: one command that starts its own source and
# destination PostgreSQL clusters, generates a deterministic workload
# (bench/workload.sql: N changes over N/4 keys of an orders table —
# inserts, several updates per key, deletes, re-creations — in source
# transactions of --txn changes) and measures, in the same run and on the
# same changes:
#
#   1   plain upsert sink, a batch per source transaction (bench/plain.sql):
#       the ceiling, no guarantees
#   1b  the same, one statement per change
#   2a  PL/pgSQL reference with the same guarantees (bench/plpgsql_reference.sql),
#       one call per change
#   2b  the same, one call per batch
#   3a  cdc_apply(), one call per change
#   3b  cdc_apply_batch(), one call per batch
#   3c  cdc_apply_batch() on a mapping without outbox (state only)
#   3k  cdc_apply_batch() with claims by offset range (source_partition and
#       offsets, as a Kafka consumer passes them: one cdc.ledger_range row per
#       batch instead of a ledger row per change; docs/semantics.md)
#   3kn 3k on a mapping without outbox (state only)
#   3m  cdc_apply_batch() with the outbox as logical decoding messages
#       (outbox_via => 'message'); opt-in: it sets wal_level = logical on the
#       destination, which the other methods then share
#   4   PostgreSQL's native logical replication catching up the backlog
#   5   the cdc_apply background worker catching up the same backlog
#       (entity ordering: a ledger row and an entity record per change)
#   5s  the same worker with the target stream-ordered (cdc.set_ordering:
#       a high-water mark per target instead; docs/semantics.md)
#   5sn 5s on a mapping without outbox (state only)
#   5sm 5s with the outbox as logical decoding messages (outbox_via =>
#       'message'); opt-in like 3m (wal_level = logical on the destination)
#
# Methods 1-3 receive the changes as Debezium envelopes (bare payload) sent
# by a client (psql) as prepared-statement parameters: per change, or as a
# JSON array per source transaction; every source transaction is one
# destination transaction.  Methods 4 and 5 consume two logical replication
# slots created on the source before the backlog was written (each worker
# method in turn: the launcher serves one database, cdc.database, so the
# destination restarts between them).  Every method must end with exactly
# the source's rows (count and md5 of the ordered rows), every change
# applied, every change claimed once for entity ordering (a ledger row, or
# for 3k, 3kn and the worker's source transactions of 16 changes or more a
# place in an offset range; 3k and 3kn keep no ledger rows) and nothing for
# stream ordering, and exactly one outbox row (or message) per change where
# it writes them;
# otherwise the run fails.  Rates are printed on wall-clock time and on the CPU time
# of the applying backend or worker (steadier on a shared machine).
# docs/benchmarks.md explains the set-up and the figures.
#
# Usage: bash bench/run.sh [--sizes 20000,200000] [--txn 1000] [--outbox on|off]
#                          [--methods 1,1b,2a,2b,3a,3b,3c,3k,3kn,3m,4,5,5s,5sn,5sm] [--per-change-max N]
#                          [--port-base P] [--dest-conf SETTINGS] [--no-build] [--keep]
#                          [--dump-outbox DIR] [--rounds R] [--outbox-reuse]
#   --sizes           changes per run, comma-separated (keys = changes / 4)
#   --txn             changes per source transaction (and per batch)
#   --outbox          whether methods 3a, 3b, 3k, 3m, 5, 5s and 5sm write outbox rows or messages (default on; 2 always does)
#   --per-change-max  skip methods 1b, 2a and 3a above this size (default 200000)
#   --port-base       source on P, destination on P+1 (default $BENCH_PORT_BASE or 55460)
#   --dest-conf       extra postgresql.conf lines for the destination (e.g. to load
#                     pg_stat_statements for a per-statement profile); changes the figures
#   --no-build        do not build and install the extension first
#   --keep            leave the last size's clusters running and the work directory in place
#   --dump-outbox DIR write the cdc.outbox view of methods 3a, 3b and 5 (every column
#                     but created_at, in id order) to DIR/outbox_<method>_<size>.txt, for
#                     comparing the outbox of two builds byte for byte
#   --rounds          replay the SQL methods (1-3m) R times, interleaved (round 1
#                     runs every method once, then round 2, ...), then the catch-ups
#                     (4, 5*) R times the same way, each time into a fresh database
#                     (a catch-up from its own slot), and report each one's median
#                     CPU and wall time, and each method's CPU ratio to its base
#                     paired within every round, with their median (default 1)
#   --outbox-reuse    before each catch-up of 5 and 5s, give cdc.outbox_rows free pages
#                     for the backlog's rows, as a relay that deletes what it published
#                     leaves them (rows inserted, deleted, vacuumed without truncation):
#                     the outbox's steady state, where the worker writes into free pages
#                     instead of extending the table by one page at a time
# PG_CONFIG selects the PostgreSQL installation.  As root the servers run as
# user postgres.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

SIZES=20000,200000
TXN=1000
OUTBOX=on
METHODS=1,1b,2a,2b,3a,3b,3c,3k,3kn,4,5,5s,5sn
PER_CHANGE_MAX=200000
PORT_BASE=${BENCH_PORT_BASE:-55460}
BUILD=1
KEEP=0
DEST_CONF=
DUMP_OUTBOX=
ROUNDS=1
OUTBOX_REUSE=0
while [ $# -gt 0 ]; do
	case $1 in
	--sizes) SIZES=$2; shift 2 ;;
	--txn) TXN=$2; shift 2 ;;
	--outbox) OUTBOX=$2; shift 2 ;;
	--methods) METHODS=$2; shift 2 ;;
	--per-change-max) PER_CHANGE_MAX=$2; shift 2 ;;
	--port-base) PORT_BASE=$2; shift 2 ;;
	--dest-conf) DEST_CONF=$2; shift 2 ;;
	--no-build) BUILD=0; shift ;;
	--keep) KEEP=1; shift ;;
	--dump-outbox) DUMP_OUTBOX=$(realpath -m "$2"); shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--outbox-reuse) OUTBOX_REUSE=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
done
case $OUTBOX in on) OUTBOX_SQL=true ;; off) OUTBOX_SQL=false ;; *) echo "--outbox on|off" >&2; exit 2 ;; esac
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "--rounds: a positive integer" >&2; exit 2; }

PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$($PG_CONFIG --bindir)
SRC_PORT=$PORT_BASE
DST_PORT=$((PORT_BASE + 1))

run() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
# CPU time (utime + stime, clock ticks) of a server process, read by the
# server from /proc (superuser): of the session's own backend, or of a pid.
HZ=$(getconf CLK_TCK)
PROC_CPU="(SELECT split_part(s, ' ', 14)::bigint + split_part(s, ' ', 15)::bigint FROM pg_read_file('/proc/self/stat') AS s)"
proc_cpu_of() { echo "(SELECT split_part(s, ' ', 14)::bigint + split_part(s, ' ', 15)::bigint FROM pg_read_file('/proc/' || $1 || '/stat') AS s)"; }
has_method() { [[ ",$METHODS," == *",$1,"* ]]; }

if [ "$BUILD" = 1 ]; then
	make -s PG_CONFIG="$PG_CONFIG" >/dev/null
	if [ -w "$($PG_CONFIG --pkglibdir)" ]; then make -s install PG_CONFIG="$PG_CONFIG" >/dev/null; else sudo make -s install PG_CONFIG="$PG_CONFIG" >/dev/null; fi
fi

WORK=$(mktemp -d /tmp/cdc_bench.XXXXXX)
chmod 755 "$WORK"
[ "$(id -u)" -eq 0 ] && chown postgres "$WORK"
cp "$ROOT"/bench/*.sql "$WORK/" && chmod 644 "$WORK"/*.sql
SRC_DATA= DST_DATA=
stop_clusters() {
	for d in "$SRC_DATA" "$DST_DATA"; do
		[ -n "$d" ] && [ -f "$d/postmaster.pid" ] && run "$BINDIR/pg_ctl" -D "$d" -m fast stop >/dev/null 2>&1 || true
	done
	return 0
}
cleanup() {
	if [ "$KEEP" = 1 ]; then
		echo "kept: $WORK (source port $SRC_PORT, destination port $DST_PORT)"
	else
		stop_clusters
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT

spsql() { local db=$1; shift; run "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$SRC_PORT" -U postgres -d "$db" "$@"; }
dpsql() { local db=$1; shift; run "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$DST_PORT" -U postgres -d "$db" "$@"; }
sval() { local db=$1; shift; spsql "$db" -At "$@"; }
dval() { local db=$1; shift; dpsql "$db" -At "$@"; }
now() { date +%s.%N; }
fdiv() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.0f", a / b }'; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Per-round CPU ratios of method $1 against base method $2 (base CPU / method
# CPU: above 1 is faster than the base), paired within each round, and their
# median: the two ran minutes apart in the same round, so the machine's drift
# over the run (often ±25 % here) cancels better than in the ratio of the two
# medians.  Prints nothing unless both have every round.
paired_ratios() {
	local m=$1 b=$2 line
	[ -n "${CPUS[$m]:-}" ] && [ -n "${CPUS[$b]:-}" ] || return 0
	line=$(awk -v a="${CPUS[$b]}" -v c="${CPUS[$m]}" 'BEGIN {
		n = split(a, x, " "); k = split(c, y, " "); if (n != k || n == 0) exit
		for (i = 1; i <= n; i++) { r[i] = (y[i] > 0) ? x[i] / y[i] : 0; s = s sprintf("%s%.2f", i > 1 ? " " : "", r[i]) }
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
		med = (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
		printf "%.2f (per round %s)", med, s }')
	[ -n "$line" ] && echo "  method $m vs $b, CPU ratio paired by round: median $line"
	return 0
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }

echo "== machine"
echo "cpus: $(nproc); memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); $(uname -sr)"
echo "cpu: $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
echo "PostgreSQL: $("$BINDIR/postgres" --version)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

init_cluster() { # datadir, port, extra settings
	run "$BINDIR/initdb" -D "$1" -A trust -U postgres --no-sync >/dev/null
	cat >>"$1/postgresql.conf" <<CONF
listen_addresses = ''
port = $2
unix_socket_directories = '$WORK'
max_wal_size = 16GB
checkpoint_timeout = 1h
autovacuum = off
$3
CONF
	run "$BINDIR/pg_ctl" -D "$1" -l "$1.log" -w start >/dev/null
}

SUMMARY="$WORK/summary.txt"
: >"$SUMMARY"

run_size() {
	local N=$1
	local K=$((N / 4))
	local D="$WORK/n$N"
	mkdir -p "$D" && chmod 755 "$D"
	[ "$(id -u)" -eq 0 ] && chown postgres "$D"
	SRC_DATA="$D/source" DST_DATA="$D/dest"
	echo
	echo "== size: $N changes over $K keys, $TXN changes per source transaction"
	init_cluster "$SRC_DATA" "$SRC_PORT" "wal_level = logical
max_wal_senders = 10
max_replication_slots = $((5 * ROUNDS + 5))
shared_buffers = 256MB"
	init_cluster "$DST_DATA" "$DST_PORT" "shared_buffers = 1GB
shared_preload_libraries = 'cdc_apply'
cdc.database = 'm_5'
cdc.naptime = 1
max_worker_processes = 16
max_logical_replication_workers = 4
max_replication_slots = 10
$( (has_method 3m || has_method 5sm) && echo "wal_level = logical")
$DEST_CONF"

	# The workload, generated once; every method reads this file.
	local t0 t1
	t0=$(now)
	dpsql postgres -c "CREATE DATABASE bench"
	dpsql bench -f "$WORK/workload.sql"
	dval bench -c "SELECT bench_generate($N, $K, $TXN)" >/dev/null
	dpsql bench -c "COPY bench_events (seq, txn, op, id, customer_id, status, amount, note, updated_at) TO '$D/events.copy'"
	dval bench -o "$D/per_change.sql" -c "
		SELECT line FROM (
		  SELECT txn, -1::bigint AS seq, 'BEGIN;' AS line FROM bench_events GROUP BY txn
		  UNION ALL
		  SELECT txn, seq, format('EXECUTE apply_one(%L);', event::text) FROM bench_events
		  UNION ALL
		  SELECT txn, 9223372036854775807, 'COMMIT;' FROM bench_events GROUP BY txn) x
		ORDER BY txn, seq"
	dval bench -o "$D/per_batch.sql" -c "
		SELECT format('EXECUTE apply_batch(%L);', jsonb_agg(event ORDER BY seq)::text)
		  FROM bench_events GROUP BY txn ORDER BY txn"
	# 3k, 3kn: the same batches with their offsets (the events' sequence numbers)
	dval bench -o "$D/per_batch_offsets.sql" -c "
		SELECT format('EXECUTE apply_batch(%L, %L);', jsonb_agg(event ORDER BY seq)::text, array_agg(seq ORDER BY seq)::text)
		  FROM bench_events GROUP BY txn ORDER BY txn"
	local ops
	ops=$(dval bench -c "SELECT string_agg(op || ' ' || n, ', ' ORDER BY op) FROM (SELECT op, count(*) n FROM bench_events GROUP BY op) x")
	echo "workload: $ops; $(dval bench -c "SELECT count(DISTINCT id) FROM bench_events") keys; generated in $(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }') s"

	# Source: the table, a publication, two slots (native, cdc worker), then the backlog.
	spsql postgres -f "$WORK/schema.sql"
	spsql postgres -o /dev/null <<SQL
CREATE TABLE bench_events (seq bigint, txn int, op text, id bigint, customer_id int, status text,
                           amount numeric(12,2), note text, updated_at timestamptz);
COPY bench_events FROM '$D/events.copy';
CREATE INDEX ON bench_events (txn, seq);
CREATE TABLE bench_marker (lsn pg_lsn);
CREATE PUBLICATION bench_pub FOR TABLE orders;
$(for r in $(seq 1 "$ROUNDS"); do
	has_method 4 && echo "SELECT 1 FROM pg_create_logical_replication_slot('native_slot_$r', 'pgoutput');"
	for m in 5 5s 5sn 5sm; do
		has_method $m && echo "SELECT 1 FROM pg_create_logical_replication_slot('cdc_slot_${m}_$r', 'pgoutput');"
	done
done)
-- Replays the workload as source transactions of $TXN changes; the last one
-- records an LSN before its commit record, so a subscriber's replication
-- origin passing it means the whole backlog is applied.
CREATE PROCEDURE bench_replay() LANGUAGE plpgsql AS \$\$
DECLARE
  last int;
  r record;
BEGIN
  SELECT max(txn) INTO last FROM bench_events;
  FOR b IN 0..last LOOP
    FOR r IN SELECT * FROM bench_events WHERE txn = b ORDER BY seq LOOP
      IF r.op = 'c' THEN
        INSERT INTO orders VALUES (r.id, r.customer_id, r.status, r.amount, r.note, r.updated_at);
      ELSIF r.op = 'u' THEN
        UPDATE orders SET customer_id = r.customer_id, status = r.status, amount = r.amount, note = r.note,
                          updated_at = r.updated_at WHERE id = r.id;
        IF NOT FOUND THEN RAISE EXCEPTION 'update of missing key %', r.id; END IF;
      ELSE
        DELETE FROM orders WHERE id = r.id;
        IF NOT FOUND THEN RAISE EXCEPTION 'delete of missing key %', r.id; END IF;
      END IF;
    END LOOP;
    IF b = last THEN
      INSERT INTO bench_marker VALUES (pg_current_wal_insert_lsn());
    END IF;
    COMMIT;
  END LOOP;
END \$\$;
SQL
	t0=$(now)
	spsql postgres -c "CALL bench_replay()"
	t1=$(now)
	local marker
	marker=$(sval postgres -c "SELECT lsn FROM bench_marker")
	local expected
	expected=$(sval postgres -c "SELECT count(*) || ' ' || md5(coalesce(string_agg(o::text, E'\n' ORDER BY id), '')) FROM orders o")
	echo "source: backlog written in $(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.1f", a - b }') s, ends before $marker; final rows: $expected"

	# Destination databases, one per method, all with the same orders table.
	local m
	# 3m, 5sm: a slot each to count the messages afterwards (test_decoding, if installed)
	local msg_slot=0
	[ -f "$($PG_CONFIG --pkglibdir)/test_decoding.so" ] && msg_slot=1
	# The database of method $1, as every round starts it: the orders table,
	# the method's functions or the extension and its mapping.
	setup_db() {
		local m=$1
		dpsql postgres -c "CREATE DATABASE m_$m"
		dpsql "m_$m" -f "$WORK/schema.sql"
		case $m in
		1 | 1b) dpsql "m_$m" -f "$WORK/plain.sql" ;;
		2a | 2b) dpsql "m_$m" -f "$WORK/plpgsql_reference.sql" ;;
		3* | 5*)
			local ob=$OUTBOX_SQL via=""
			[[ $m == 3c || $m == 3kn || $m == 5sn ]] && ob=false
			[[ $m == 3m || $m == 5sm ]] && via=", outbox_via => 'message'"
			# a message outbox needs pg_logical_emit_message() revoked from PUBLIC (docs/security.md)
			[[ $m == 3m || $m == 5sm ]] && dpsql "m_$m" -c "REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC" >/dev/null
			dpsql "m_$m" -c "CREATE EXTENSION cdc_apply" -c "SELECT 1 FROM cdc.register_mapping('orders', outbox => $ob, source_name => 'bench'$via)" >/dev/null
			[[ $m == 5s* ]] && dpsql "m_$m" -c "SELECT 1 FROM cdc.set_ordering('orders', 'stream')" >/dev/null
			if [ "$msg_slot" = 1 ] && [[ $m == 3m || $m == 5sm ]]; then
				dval "m_$m" -c "SELECT 1 FROM pg_create_logical_replication_slot('bench_msgs_$m', 'test_decoding')" >/dev/null
			fi ;;
		esac
	}
	for m in 1 1b 2a 2b 3a 3b 3c 3k 3kn 3m 4 5 5s 5sn 5sm; do
		has_method "$m" && setup_db "$m"
	done
	# Method $1's database for a catch-up: the procedure that waits for its
	# replication origin, and for native replication the disabled
	# subscription on round $2's slot.
	local conninfo="host=$WORK port=$SRC_PORT dbname=postgres user=postgres"
	setup_catch_up() {
		local m=$1 r=$2
		dpsql "m_$m" <<'SQL'
-- Waits until a replication origin has passed an LSN (the backlog's end).
CREATE PROCEDURE bench_wait_origin(origin text, target pg_lsn, timeout_s int) LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz := clock_timestamp();
  p pg_lsn;
BEGIN
  LOOP
    p := pg_replication_origin_progress(origin, false);
    EXIT WHEN p IS NOT NULL AND p > target;
    IF clock_timestamp() - t0 > make_interval(secs => timeout_s) THEN
      RAISE EXCEPTION 'origin % did not pass % within % s (at %)', origin, target, timeout_s, p;
    END IF;
    PERFORM pg_sleep(0.005);
  END LOOP;
END $$;
SQL
		[ "$m" = 4 ] && dpsql m_4 -c "CREATE SUBSCRIPTION native_sub CONNECTION '$conninfo' PUBLICATION bench_pub
			WITH (create_slot = false, slot_name = 'native_slot_$r', copy_data = false, enabled = false)"
		# --outbox-reuse: free pages for N rows at least as wide as the
		# workload's (a 200-character payload; theirs are about 80), left
		# by rows deleted and vacuumed without truncating the table, as a
		# relay deleting published rows leaves them (the steady state).
		if [ "$OUTBOX_REUSE" = 1 ] && [ "$OUTBOX" = on ] && [[ $m == 5 || $m == 5s ]]; then
			dpsql "m_$m" -c "INSERT INTO cdc.outbox_rows (v1, v2, ikey, target, src, v0, op, entity_key, payload)
			                 SELECT g, g, md5(g::text)::uuid, 'orders'::regclass, 0, 0, 'u', json_build_object('id', g::text), to_json(repeat('x', 200))
			                   FROM generate_series(1, $N) g" \
			                -c "DELETE FROM cdc.outbox_rows" -c "VACUUM (TRUNCATE false) cdc.outbox_rows" >/dev/null
			echo "method $m: cdc.outbox_rows given $(dval "m_$m" -c "SELECT pg_relation_size('cdc.outbox_rows') / 8192") free pages"
		fi
		true
	}
	for m in 4 5 5s 5sn 5sm; do
		has_method $m && setup_catch_up "$m" 1
	done

	declare -A SECS WAL CPU
	local label
	declare -A LABEL=(
		[1]="plain upsert, batch (ceiling)" [1b]="plain upsert, per statement"
		[2a]="PL/pgSQL reference, per change" [2b]="PL/pgSQL reference, batch"
		[3a]="cdc_apply(), per change" [3b]="cdc_apply_batch()" [3c]="cdc_apply_batch(), no outbox"
		[3k]="cdc_apply_batch(), offset claims" [3kn]="offset claims, no outbox"
		[3m]="cdc_apply_batch(), message outbox"
		[4]="native logical replication" [5]="cdc_apply worker" [5s]="worker, stream ordering"
		[5sn]="worker, stream ordering, no outbox" [5sm]="worker, stream ordering, message outbox")
	declare -A PREPARE=(
		[1]="PREPARE apply_batch(jsonb) AS SELECT plain_upsert_batch(\$1);"
		[1b]="PREPARE apply_batch(jsonb) AS SELECT plain_upsert_each(\$1);"
		[2a]="PREPARE apply_one(jsonb) AS SELECT ref.apply(\$1);"
		[2b]="PREPARE apply_batch(jsonb) AS SELECT ref.apply_batch(\$1);"
		[3a]="PREPARE apply_one(jsonb) AS SELECT cdc_apply(\$1);"
		[3b]="PREPARE apply_batch(jsonb) AS SELECT cdc_apply_batch(\$1);"
		[3c]="PREPARE apply_batch(jsonb) AS SELECT cdc_apply_batch(\$1);"
		[3k]="PREPARE apply_batch(jsonb, bigint[]) AS SELECT cdc_apply_batch(\$1, source_partition => 'bench:0:0', offsets => \$2);"
		[3kn]="PREPARE apply_batch(jsonb, bigint[]) AS SELECT cdc_apply_batch(\$1, source_partition => 'bench:0:0', offsets => \$2);"
		[3m]="PREPARE apply_batch(jsonb) AS SELECT cdc_apply_batch(\$1);")
	local have_batch=f
	for m in 3b 3c 3k 3kn 3m; do
		has_method $m && have_batch=$(dval "m_$m" -c "SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'cdc_apply_batch')")
	done

	# --rounds: every round replays each SQL method once into a fresh
	# database (rounds after the first drop and set up the database again);
	# the samples of a method are spread over the run, and its median is
	# reported, so that a drift of the machine's speed moves every method alike.
	declare -A CPUS SECSS
	local round
	for round in $(seq 1 "$ROUNDS"); do
	[ "$ROUNDS" -gt 1 ] && echo "-- round $round of $ROUNDS"
	for m in 1 1b 2a 2b 3a 3b 3c 3k 3kn 3m; do
		has_method $m || continue
		local script="$D/per_batch.sql"
		case $m in 1b | 2a | 3a)
			if [ "$N" -gt "$PER_CHANGE_MAX" ]; then [ "$round" = 1 ] && echo "method $m skipped above --per-change-max $PER_CHANGE_MAX"; continue; fi ;;
		esac
		if [ "$round" -gt 1 ]; then
			[ "$msg_slot" = 1 ] && [ "$m" = 3m ] && dval "m_$m" -c "SELECT pg_drop_replication_slot('bench_msgs_$m')" >/dev/null
			dpsql postgres -c "DROP DATABASE m_$m"
			setup_db "$m"
		fi
		case $m in 2a | 3a) script="$D/per_change.sql" ;; 3k | 3kn) script="$D/per_batch_offsets.sql" ;; esac
		if [[ $m == 3[bckm]* ]] && [ "$have_batch" != t ]; then echo "method $m skipped: cdc_apply_batch() is not installed"; continue; fi
		# The session's backend notes its own CPU time before and after the
		# work (/proc/self/stat of the backend: utime + stime, in clock ticks).
		{
			echo "SELECT $PROC_CPU AS cpu0 \gset"
			echo "${PREPARE[$m]}"
		} >"$D/prepare_$m.sql"
		printf '\\o %s\n\\pset tuples_only on\n\\pset format unaligned\nSELECT %s - :cpu0;\n' "$D/cpu_$m" "$PROC_CPU" >"$D/finish_$m.sql"
		chmod 644 "$D/prepare_$m.sql" "$D/finish_$m.sql"
		dpsql "m_$m" -c "CHECKPOINT"
		local w0 w1
		w0=$(dval "m_$m" -c "SELECT pg_current_wal_insert_lsn()")
		t0=$(now)
		dpsql "m_$m" -o /dev/null -f "$D/prepare_$m.sql" -f "$script" -f "$D/finish_$m.sql"
		t1=$(now)
		w1=$(dval "m_$m" -c "SELECT pg_current_wal_insert_lsn() - '$w0'::pg_lsn")
		SECS[$m]=$(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.3f", a - b }')
		CPU[$m]=$(awk -v t="$(cat "$D/cpu_$m")" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }')
		WAL[$m]=$w1
		CPUS[$m]="${CPUS[$m]:-} ${CPU[$m]}" SECSS[$m]="${SECSS[$m]:-} ${SECS[$m]}"
		echo "method $m (${LABEL[$m]}): ${SECS[$m]} s, backend CPU ${CPU[$m]} s"
	done
	done
	if [ "$ROUNDS" -gt 1 ]; then
		echo "medians of $ROUNDS rounds (CPU s of each round):"
		for m in 1 1b 2a 2b 3a 3b 3c 3k 3kn 3m; do
			[ -n "${CPUS[$m]:-}" ] || continue
			CPU[$m]=$(median <<<"${CPUS[$m]}") SECS[$m]=$(median <<<"${SECSS[$m]}")
			echo "  method $m: CPU ${CPU[$m]} s (${CPUS[$m]# }), wall ${SECS[$m]} s"
		done
		for m in 3b 3c 3k 3kn 3m; do paired_ratios "$m" 1; done
		paired_ratios 3a 2a
	fi

	# Catch-up of the backlog: native logical replication, then the worker;
	# with --rounds R each R times, round after round, each round into a
	# fresh database from its own slot (created before the backlog).
	local out
	for round in $(seq 1 "$ROUNDS"); do
	[ "$ROUNDS" -gt 1 ] && echo "-- catch-up round $round of $ROUNDS"
	if has_method 4; then
		if [ "$round" -gt 1 ]; then
			dpsql m_4 -c "ALTER SUBSCRIPTION native_sub SET (slot_name = NONE)" -c "DROP SUBSCRIPTION native_sub"
			dpsql postgres -c "DROP DATABASE m_4"
			setup_db 4
			setup_catch_up 4 "$round"
		fi
		# Every catch-up starts on a freshly started destination, as the
		# workers' do below (they must restart it): the same cold shared
		# buffers for each, whose first use costs page faults.
		run "$BINDIR/pg_ctl" -D "$DST_DATA" -l "$DST_DATA.log" -w restart >/dev/null
		dpsql m_4 -c "CHECKPOINT"
		local origin
		origin=$(dval m_4 -c "SELECT 'pg_' || oid FROM pg_subscription WHERE subname = 'native_sub'")
		out=$(dval m_4 <<SQL
SELECT clock_timestamp() AS t0, pg_current_wal_insert_lsn() AS w0 \gset
ALTER SUBSCRIPTION native_sub ENABLE;
CALL bench_wait_origin('$origin', '$marker', 3600);
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 3) || ' ' || (pg_current_wal_insert_lsn() - :'w0'::pg_lsn)
       || ' ' || (SELECT $(proc_cpu_of "pid") FROM pg_stat_subscription WHERE subname = 'native_sub' AND relid IS NULL);
SQL
		)
		read -r SECS[4] WAL[4] cpu <<<"$out"
		CPU[4]=$(awk -v t="$cpu" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }')
		CPUS[4]="${CPUS[4]:-} ${CPU[4]}" SECSS[4]="${SECSS[4]:-} ${SECS[4]}"
		dpsql m_4 -c "ALTER SUBSCRIPTION native_sub DISABLE"
		echo "method 4 (${LABEL[4]}): ${SECS[4]} s, apply worker CPU ${CPU[4]} s"
	fi
	for m in 5 5s 5sn 5sm; do
		has_method $m || continue
		if [ "$round" -gt 1 ]; then
			# a fresh database: the launcher leaves the old one first
			dpsql postgres -c "ALTER SYSTEM SET cdc.database = 'postgres'" >/dev/null
			run "$BINDIR/pg_ctl" -D "$DST_DATA" -l "$DST_DATA.log" -w restart >/dev/null
			[ "$msg_slot" = 1 ] && [ "$m" = 5sm ] && dval "m_$m" -c "SELECT pg_drop_replication_slot('bench_msgs_$m')" >/dev/null
			dpsql postgres -c "DROP DATABASE m_$m WITH (FORCE)"
			setup_db "$m"
			setup_catch_up "$m" "$round"
		fi
		# The launcher serves one database (cdc.database): point it at this
		# method's database and restart the destination, then wait until the
		# launcher serves it, so that its start-up is not timed.
		dpsql postgres -c "ALTER SYSTEM SET cdc.database = 'm_$m'" >/dev/null
		run "$BINDIR/pg_ctl" -D "$DST_DATA" -l "$DST_DATA.log" -w restart >/dev/null
		dpsql "m_$m" -c "CHECKPOINT"
		for _ in $(seq 1 300); do
			[ "$(dval "m_$m" -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'cdc_apply launcher' AND datname = 'm_$m'")" = 1 ] && break
			sleep 0.1
		done
		# The subscription is created after the backlog, on the slot that was
		# created before it; pg_reload_conf() wakes the launcher at once.
		out=$(dval "m_$m" <<SQL
SELECT clock_timestamp() AS t0, pg_current_wal_insert_lsn() AS w0 \gset
SELECT cdc.create_subscription('bench', '$conninfo', ARRAY['bench_pub'], slot_name => 'cdc_slot_${m}_$round',
                               create_slot => false, copy_data => false) AS subid \gset
SELECT pg_reload_conf() \gset
CALL bench_wait_origin(cdc._origin_name(:subid), '$marker', 3600);
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 3) || ' ' || (pg_current_wal_insert_lsn() - :'w0'::pg_lsn)
       || ' ' || (SELECT $(proc_cpu_of "worker_pid") FROM cdc.subscription_status WHERE name = 'bench');
SQL
		) || { dpsql "m_$m" -c "SELECT * FROM cdc.subscription_status"; false; }
		read -r SECS[$m] WAL[$m] cpu <<<"$out"
		CPU[$m]=$(awk -v t="$cpu" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }')
		CPUS[$m]="${CPUS[$m]:-} ${CPU[$m]}" SECSS[$m]="${SECSS[$m]:-} ${SECS[$m]}"
		dpsql "m_$m" -c "SELECT cdc.disable_subscription('bench')" >/dev/null
		echo "method $m (${LABEL[$m]}): ${SECS[$m]} s, apply worker CPU ${CPU[$m]} s"
	done
	done
	if [ "$ROUNDS" -gt 1 ]; then
		echo "medians of $ROUNDS catch-up rounds (CPU s of each round):"
		for m in 4 5 5s 5sn 5sm; do
			[ -n "${CPUS[$m]:-}" ] || continue
			CPU[$m]=$(median <<<"${CPUS[$m]}") SECS[$m]=$(median <<<"${SECSS[$m]}")
			echo "  method $m: CPU ${CPU[$m]} s (${CPUS[$m]# }), wall ${SECS[$m]} s"
		done
		for m in 5 5s 5sn 5sm; do paired_ratios "$m" 4; done
	fi

	# One outbox row (or message) per applied change, none without outbox,
	# idempotency keys distinct, and counted as written; method $m, appends
	# to $extra and sets failed (the caller's variables).
	check_outbox() {
		local ob_want=0 ob_got
		[ "$OUTBOX" = on ] && [ "$m" != 3c ] && [ "$m" != 3kn ] && [ "$m" != 5sn ] && ob_want=$N
		if [[ $m == 3m || $m == 5sm ]]; then
			# messages instead of rows: none in cdc.outbox, N counted, N decoded
			ob_got=$(dval "m_$m" -c "SELECT count(*) || ' ' || (SELECT coalesce(sum(outbox_rows), 0) FROM cdc.stats) FROM cdc.outbox")
			[ "$ob_got" = "0 $ob_want" ] || { extra="$extra (no outbox rows and $ob_want messages counted expected: $ob_got)"; failed=1; }
			if [ "$msg_slot" = 1 ]; then
				ob_got=$(dval "m_$m" -c "SELECT count(*) || ' ' || count(DISTINCT substring(data FROM '\"idempotency_key\": \"([0-9a-f]*)\"')) FROM pg_logical_slot_get_changes('bench_msgs_$m', NULL, NULL, 'skip-empty-xacts', '1') WHERE data LIKE 'message: transactional: 1 prefix: cdc_outbox,%'")
				dval "m_$m" -c "SELECT pg_drop_replication_slot('bench_msgs_$m')" >/dev/null
				extra="$extra, messages decoded $ob_got"
				[ "$ob_got" = "$ob_want $ob_want" ] || { extra="$extra (should be $ob_want messages with distinct keys)"; failed=1; }
			fi
		else
			ob_got=$(dval "m_$m" -c "SELECT count(*) || ' ' || count(DISTINCT idempotency_key) || ' ' || (SELECT coalesce(sum(outbox_rows), 0) FROM cdc.stats) FROM cdc.outbox")
			[ "$ob_got" = "$ob_want $ob_want $ob_want" ] || { extra="$extra (outbox should have $ob_want rows, distinct keys, counted: rows, keys, counted = $ob_got)"; failed=1; }
		fi
		if [ -n "$DUMP_OUTBOX" ] && [ "$m" != 3c ] && [ "$m" != 3kn ] && [ "$m" != 3m ] && [ "$m" != 5sn ] && [ "$m" != 5sm ]; then
			mkdir -p "$DUMP_OUTBOX"
			if [[ $m == 5* ]]; then
				# The worker's source identity holds the source's system
				# identifier, LSNs and xids, which differ between runs: they
				# are replaced by their ranks, and the idempotency key by
				# whether it follows the rule (docs/semantics.md, "Outbox").
				dval "m_$m" -c "SELECT id, idempotency_key = md5(concat_ws(E'\n', source->>'name', (source->>'schema') || '.' || (source->>'table'),
				                                  op, version::text, entity_key::text)) AS key_follows_the_rule,
				                  topic, target, entity_key, op, payload,
				                  source || jsonb_build_object('name', 'source', 'lsn', lsn_r, 'commit_lsn', clsn_r, 'txId', tx_r,
				                                               'version', to_jsonb(ARRAY[version[1], clsn_r] || version[3:])) AS source,
				                  ARRAY[version[1], clsn_r] || version[3:] AS version, published_at
				             FROM (SELECT o.*, dense_rank() OVER (ORDER BY (source->>'lsn')::bigint) AS lsn_r,
				                          dense_rank() OVER (ORDER BY (source->>'commit_lsn')::bigint) AS clsn_r,
				                          dense_rank() OVER (ORDER BY (source->>'txId')::bigint) AS tx_r FROM cdc.outbox o) x
				            ORDER BY id" >"$DUMP_OUTBOX/outbox_${m}_$N.txt"
			else
				dval "m_$m" -c "SELECT id, idempotency_key, topic, target, entity_key, op, payload, source, version, published_at
				                  FROM cdc.outbox ORDER BY id" >"$DUMP_OUTBOX/outbox_${m}_$N.txt"
			fi
		fi
	}
	# Correctness: every method ends with the source's rows; methods with
	# guarantees claim every change once (a ledger row or an offset range).
	local failed=0 got
	echo
	echo "verification against the source ($expected):"
	for m in 1 1b 2a 2b 3a 3b 3c 3k 3kn 3m 4 5 5s 5sn 5sm; do
		[ -n "${SECS[$m]:-}" ] || continue
		got=$(dval "m_$m" -c "SELECT count(*) || ' ' || md5(coalesce(string_agg(o::text, E'\n' ORDER BY id), '')) FROM orders o")
		local extra=""
		case $m in
		2a | 2b) extra="ledger $(dval "m_$m" -c "SELECT count(*) FROM ref.ledger"), outbox $(dval "m_$m" -c "SELECT count(*) FROM ref.outbox")"
			[ "${extra%%,*}" = "ledger $N" ] || { extra="$extra (ledger should have $N rows)"; failed=1; } ;;
		5) # The worker's positions are WAL positions (docs/worker.md,
			# "Positions and delivery keys"): an offset range covers more
			# numbers than changes, so each change is looked up, through its
			# outbox row's key pgoutput:<source>:<commit LSN>:<position>, in
			# the ledger and the ranges; it must be held by exactly one, and
			# no ledger row may be left over.  Without outbox rows there is
			# nothing to enumerate the changes by: the claims are counted only.
			local counters
			counters=$(dval "m_$m" -c "SELECT 'applied ' || coalesce(sum(applied), 0) || ', duplicate ' || coalesce(sum(duplicate), 0) || ', stale ' || coalesce(sum(stale), 0) || ', conflict ' || coalesce(sum(conflict), 0) || ', outbox ' || (SELECT count(*) FROM cdc.outbox) FROM cdc.stats")
			if [ "$OUTBOX" = on ]; then
				extra="ledger $(dval "m_$m" -c "
					WITH o AS (
					  SELECT o.target, o.version[3] AS pos,
					         'pgoutput:' || (o.source->>'name') || ':' || ('0/0'::pg_lsn + (o.source->>'commit_lsn')::numeric)::text AS part
					    FROM cdc.outbox o),
					c AS (
					  SELECT (SELECT count(*) FROM cdc.ledger l WHERE l.digest = cdc.delivery_digest(o.target, o.part || ':' || o.pos)) AS by_ledger,
					         (SELECT count(*) FROM cdc.ledger_partition p
					            JOIN LATERAL (SELECT g.lo FROM cdc.ledger_range g WHERE g.partition_id = p.id AND g.hi >= o.pos
					                           ORDER BY g.hi LIMIT 1) g ON g.lo <= o.pos
					           WHERE p.target = o.target AND p.name = o.part) AS by_range
					    FROM o)
					SELECT count(*) FILTER (WHERE by_ledger + by_range = 1)
					       || CASE WHEN (SELECT count(*) FROM cdc.ledger) > coalesce(sum(by_ledger), 0)
					               THEN ' and ' || (SELECT count(*) FROM cdc.ledger) - coalesce(sum(by_ledger), 0) || ' ledger rows of no change' ELSE '' END
					  FROM c"), $counters"
				[ "${extra%%,*}" = "ledger $N" ] || { extra="$extra (every one of the $N changes should be claimed once, by a ledger row or an offset range)"; failed=1; }
			else
				extra="ledger $(dval "m_$m" -c "SELECT count(*) FROM cdc.ledger") rows and $(dval "m_$m" -c "SELECT count(*) FROM cdc.ledger_range") offset ranges, $counters"
			fi
			[[ $extra == *"applied $N,"* ]] || { extra="$extra (all $N changes should be applied)"; failed=1; }
			check_outbox ;;
		3a | 3b | 3c | 3m) extra="ledger $(dval "m_$m" -c "SELECT count(*) + (SELECT coalesce(sum(hi - lo + 1), 0) FROM cdc.ledger_range) FROM cdc.ledger"), $(dval "m_$m" -c "SELECT 'applied ' || coalesce(sum(applied), 0) || ', duplicate ' || coalesce(sum(duplicate), 0) || ', stale ' || coalesce(sum(stale), 0) || ', conflict ' || coalesce(sum(conflict), 0) || ', outbox ' || (SELECT count(*) FROM cdc.outbox) FROM cdc.stats")"
			[ "${extra%%,*}" = "ledger $N" ] || { extra="$extra (ledger rows and offset ranges should claim $N changes)"; failed=1; }
			[[ $extra == *"applied $N,"* ]] || { extra="$extra (all $N changes should be applied)"; failed=1; }
			check_outbox ;;
		3k | 3kn) extra="ledger $(dval "m_$m" -c "SELECT count(*) FROM cdc.ledger"), offset ranges $(dval "m_$m" -c "SELECT count(*) || ' covering ' || coalesce(sum(hi - lo + 1), 0) FROM cdc.ledger_range"), $(dval "m_$m" -c "SELECT 'applied ' || coalesce(sum(applied), 0) || ', duplicate ' || coalesce(sum(duplicate), 0) || ', stale ' || coalesce(sum(stale), 0) || ', conflict ' || coalesce(sum(conflict), 0) || ', outbox ' || (SELECT count(*) FROM cdc.outbox) FROM cdc.stats")"
			[[ $extra == "ledger 0, offset ranges "*" covering $N,"* ]] || { extra="$extra (claims by offset range keep no ledger rows and cover all $N offsets)"; failed=1; }
			[[ $extra == *"applied $N,"* ]] || { extra="$extra (all $N changes should be applied)"; failed=1; }
			check_outbox ;;
		5s | 5sn | 5sm) extra="ledger $(dval "m_$m" -c "SELECT count(*) FROM cdc.ledger"), entity records $(dval "m_$m" -c "SELECT count(*) FROM cdc.entity_state"), $(dval "m_$m" -c "SELECT 'applied ' || coalesce(sum(applied), 0) || ', duplicate ' || coalesce(sum(duplicate), 0) || ', stale ' || coalesce(sum(stale), 0) || ', conflict ' || coalesce(sum(conflict), 0) || ', outbox ' || (SELECT count(*) FROM cdc.outbox) FROM cdc.stats")"
			[[ $extra == "ledger 0, entity records 0,"* ]] || { extra="$extra (stream ordering keeps no ledger rows or entity records)"; failed=1; }
			[[ $extra == *"applied $N,"* ]] || { extra="$extra (all $N changes should be applied)"; failed=1; }
			check_outbox ;;
		esac
		if [ "$got" = "$expected" ]; then
			printf '  %-4s %-36s rows identical  %s\n' "$m" "${LABEL[$m]}" "$extra"
		else
			printf '  %-4s %-36s ROWS DIFFER: %s  %s\n' "$m" "${LABEL[$m]}" "$got" "$extra"
			failed=1
		fi
	done

	# Space: ledger bytes per entry, version-state bytes per entity and
	# outbox bytes per row, heap and indexes after VACUUM, from the database
	# itself.
	local space=""
	for m in 2b 3b 3c 3k 3kn 5 5s 5sn 5sm; do
		[ -n "${SECS[$m]:-}" ] || continue
		case $m in
		2b) space+="$(dval "m_$m" -c "VACUUM" -c "SELECT format('  %-4s %-36s ledger %s B/entry, version state %s B/entity', '$m', '${LABEL[$m]}',
			pg_total_relation_size('ref.ledger') / greatest(count(*), 1), (SELECT pg_total_relation_size('ref.entity_version') / greatest(count(*), 1) FROM ref.entity_version)) FROM ref.ledger")"$'\n' ;;
		3k | 3kn) space+="$(dval "m_$m" -c "VACUUM" -c "SELECT format('  %-4s %-36s no ledger rows: %s offset range(s), %s B in all; version state %s B/entity%s', '$m', '${LABEL[$m]}',
			count(*), pg_total_relation_size('cdc.ledger_range') + pg_total_relation_size('cdc.ledger_partition'),
			(SELECT pg_total_relation_size('cdc.entity_state') / greatest(count(*), 1) FROM cdc.entity_state),
			(SELECT ', outbox ' || (pg_total_relation_size('cdc.outbox_rows') / count(*)) || ' B/row' FROM cdc.outbox HAVING count(*) > 0)) FROM cdc.ledger_range")"$'\n' ;;
		5s | 5sn | 5sm) space+="$(dval "m_$m" -c "VACUUM" -c "SELECT format('  %-4s %-36s no ledger rows or entity records; %s stream mark(s), %s B in all', '$m', '${LABEL[$m]}',
			count(*), pg_total_relation_size('cdc.stream_mark')) FROM cdc.stream_mark")"$'\n' ;;
		*) space+="$(dval "m_$m" -c "VACUUM" -c "SELECT format('  %-4s %-36s %s, version state %s B/entity%s', '$m', '${LABEL[$m]}',
			CASE WHEN count(*) > 0 THEN 'ledger ' || pg_total_relation_size('cdc.ledger') / count(*) || ' B/entry' ELSE 'no ledger rows' END
			  || coalesce((SELECT ' (' || count(*) || ' offset range(s) too, ' || pg_total_relation_size('cdc.ledger_range') + pg_total_relation_size('cdc.ledger_partition') || ' B in all)'
			                 FROM cdc.ledger_range HAVING count(*) > 0), ''),
			(SELECT pg_total_relation_size('cdc.entity_state') / greatest(count(*), 1) FROM cdc.entity_state),
			(SELECT ', outbox ' || (pg_total_relation_size(coalesce(to_regclass('cdc.outbox_rows'), 'cdc.outbox')) / count(*)) || ' B/row'
			   FROM cdc.outbox HAVING count(*) > 0)) FROM cdc.ledger")"$'\n' ;;
		esac
	done

	{
		echo
		echo "== results: $N changes over $K keys, $TXN changes per source transaction ($ops)"
		[ "$ROUNDS" -gt 1 ] && echo "medians of $ROUNDS rounds: SQL methods (1-3m) interleaved, then the catch-ups (4, 5*)"
		echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (wall-clock rates suffer from other load; CPU rates much less)"
		printf '%-4s %-36s %8s %10s %6s %6s %7s %10s %6s %6s %10s\n' "" method seconds changes/s "vs 1" "vs 4" \
			"CPU s" "chg/CPU-s" "vs 1" "vs 4" "WAL B/chg"
		local base1="" base4="" cbase1="" cbase4=""
		[ -n "${SECS[1]:-}" ] && base1=$(fdiv "$N" "${SECS[1]}") && cbase1=$(fdiv "$N" "${CPU[1]}")
		[ -n "${SECS[4]:-}" ] && base4=$(fdiv "$N" "${SECS[4]}") && cbase4=$(fdiv "$N" "${CPU[4]}")
		for m in 1 1b 2a 2b 3a 3b 3c 3k 3kn 3m 4 5 5s 5sn 5sm; do
			[ -n "${SECS[$m]:-}" ] || continue
			local rate crate
			rate=$(fdiv "$N" "${SECS[$m]}")
			crate=$(fdiv "$N" "${CPU[$m]}")
			printf '%-4s %-36s %8s %10s %6s %6s %7s %10s %6s %6s %10s\n' "$m" "${LABEL[$m]}" "${SECS[$m]}" "$rate" \
				"$(ratio "$rate" "$base1")" "$(ratio "$rate" "$base4")" "${CPU[$m]}" "$crate" "$(ratio "$crate" "$cbase1")" \
				"$(ratio "$crate" "$cbase4")" "$(fdiv "${WAL[$m]}" "$N")"
		done
		echo "space (heap + indexes after VACUUM):"
		printf '%s' "$space"
		[ "$failed" = 0 ] && echo "verification: every method ended with the source's rows" || echo "verification: FAILED"
	} | tee -a "$SUMMARY"

	if [ "$KEEP" = 1 ] && [ "$N" = "${size_list[-1]}" ]; then
		return $failed # --keep: the last size's clusters stay up
	fi
	stop_clusters
	SRC_DATA= DST_DATA=
	return $failed
}

status=0
IFS=, read -r -a size_list <<<"$SIZES"
for n in "${size_list[@]}"; do
	run_size "$n" || status=1
done
echo
echo "================ summary ================"
cat "$SUMMARY"
[ "$status" = 0 ] || { echo "benchmark FAILED: a method computed different rows" >&2; exit 1; }

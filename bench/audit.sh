#!/usr/bin/env bash
# The cost of cdc.audit and cdc.resync (docs/audit.md, "Cost"): starts a
# source and a destination cluster, loads the same N rows into a table on
# both (deterministic data: integers, text, timestamptz, float8, numeric),
# subscribes the destination to the source without a copy (the worker
# streams, nothing to stream), then times on the same machine:
#
#   hash     cdc.range_hash() of the whole table on the destination alone
#   equal    cdc.audit of the identical tables, for each --pages size
#   damaged  cdc.audit after --damage rows were changed, deleted and
#            inserted by hand on the destination (every one must be found)
#   resync   cdc.resync of that audit's findings (every one repaired; a
#            second audit must find nothing)
#
# and prints wall-clock seconds, seconds per million rows, and the CPU
# seconds of the destination backend running the call and of the source
# backends serving it (from /proc; both clusters share the machine).  No
# figure is asserted; the run fails only if an audit finds other than the
# damage.
#
# Usage: bash bench/audit.sh [--rows 1000000] [--pages 1000,10000,100000]
#                            [--damage 1000] [--port-base P] [--no-build] [--keep]
# PG_CONFIG selects the PostgreSQL installation.  As root the servers run as
# user postgres.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

ROWS=1000000
PAGES=1000,10000,100000
DAMAGE=1000
PORT_BASE=${BENCH_PORT_BASE:-55470}
BUILD=1
KEEP=0
while [ $# -gt 0 ]; do
	case $1 in
	--rows) ROWS=$2; shift 2 ;;
	--pages) PAGES=$2; shift 2 ;;
	--damage) DAMAGE=$2; shift 2 ;;
	--port-base) PORT_BASE=$2; shift 2 ;;
	--no-build) BUILD=0; shift ;;
	--keep) KEEP=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
done

PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$($PG_CONFIG --bindir)
SRC_PORT=$PORT_BASE
DST_PORT=$((PORT_BASE + 1))
run() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if [ "$BUILD" = 1 ]; then
	make -s PG_CONFIG="$PG_CONFIG" >/dev/null
	if [ -w "$($PG_CONFIG --pkglibdir)" ]; then make -s install PG_CONFIG="$PG_CONFIG" >/dev/null; else sudo make -s install PG_CONFIG="$PG_CONFIG" >/dev/null; fi
fi

WORK=$(mktemp -d /tmp/cdc_audit_bench.XXXXXX)
chmod 755 "$WORK"
[ "$(id -u)" -eq 0 ] && chown postgres "$WORK"
SRC_DATA="$WORK/source" DST_DATA="$WORK/dest"
cleanup() {
	if [ "$KEEP" = 1 ]; then
		echo "kept: $WORK (source port $SRC_PORT, destination port $DST_PORT)"
		return
	fi
	for d in "$SRC_DATA" "$DST_DATA"; do
		[ -f "$d/postmaster.pid" ] && run "$BINDIR/pg_ctl" -D "$d" -m fast stop >/dev/null 2>&1 || true
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

spsql() { run "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$SRC_PORT" -U postgres -d postgres "$@"; }
dpsql() { run "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$DST_PORT" -U postgres -d postgres "$@"; }
now() { date +%s.%N; }
secs() { awk -v a="$2" -v b="$1" 'BEGIN { printf "%.2f", a - b }'; }
per_million() { awk -v s="$1" -v n="$ROWS" 'BEGIN { printf "%.2f", s * 1000000 / n }'; }
HZ=$(getconf CLK_TCK)
# CPU ticks (utime + stime) of every backend of a cluster whose application_name matches, summed
cpu_of() { # psql function, application_name pattern
	$1 -At -c "SELECT coalesce(sum(split_part(pg_read_file('/proc/' || pid || '/stat'), ' ', 14)::bigint
	                             + split_part(pg_read_file('/proc/' || pid || '/stat'), ' ', 15)::bigint), 0)
	             FROM pg_stat_activity WHERE application_name LIKE '$2'"
}

echo "== machine"
echo "cpus: $(nproc); memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); $(uname -sr)"
echo "PostgreSQL: $("$BINDIR/postgres" --version)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

init_cluster() { # datadir, port, extra settings
	run "$BINDIR/initdb" -D "$1" -A trust -U postgres --no-sync >/dev/null
	cat >>"$1/postgresql.conf" <<CONF
listen_addresses = ''
port = $2
unix_socket_directories = '$WORK'
shared_buffers = 512MB
max_wal_size = 8GB
checkpoint_timeout = 1h
$3
CONF
	run "$BINDIR/pg_ctl" -D "$1" -l "$1.log" -w start >/dev/null
}
init_cluster "$SRC_DATA" "$SRC_PORT" "wal_level = logical
max_wal_senders = 10
max_replication_slots = 10"
init_cluster "$DST_DATA" "$DST_PORT" "shared_preload_libraries = 'cdc_apply'
cdc.database = 'postgres'
cdc.naptime = 1
cdc.status_interval = 200ms"

TABLE="CREATE TABLE acc (id int PRIMARY KEY, bal bigint, note text, at timestamptz, f float8, amount numeric(12,2));"
LOAD="INSERT INTO acc SELECT g, g * 37 % 100003, 'note ' || md5(g::text), timestamptz '2024-01-01 00:00+00' + g * interval '17 s',
                                 g / 7.0, (g % 100000) / 100.0 FROM generate_series(1, $ROWS) g;"
t0=$(now)
spsql -c "$TABLE" -c "$LOAD" -c "VACUUM ANALYZE acc" -c "CREATE PUBLICATION pub FOR TABLE acc"
dpsql -c "CREATE EXTENSION cdc_apply" -c "$TABLE" -c "$LOAD" -c "VACUUM ANALYZE acc"
echo "loaded $ROWS rows on both sides in $(secs "$t0" "$(now)") s; table size $(spsql -At -c "SELECT pg_size_pretty(pg_table_size('acc'))")"
conn="host=$WORK port=$SRC_PORT dbname=postgres user=postgres"
dpsql -c "SELECT cdc.create_subscription('bench', '$conn', ARRAY['pub'], copy_data => false)" >/dev/null
for _ in $(seq 1 120); do
	[ "$(dpsql -At -c "SELECT state FROM cdc.subscription_status")" = streaming ] && break
	sleep 1
done
echo "subscription: $(dpsql -At -c "SELECT state FROM cdc.subscription_status")"

printf '\n%-28s %10s %14s %12s %12s %10s\n' "call" "seconds" "s/million rows" "dest CPU s" "source CPU s" "result"
report() { # label, t0, t1, dest ticks, source ticks, result
	local s
	s=$(secs "$2" "$3")
	printf '%-28s %10s %14s %12s %12s %10s\n' "$1" "$s" "$(per_million "$s")" \
		"$(awk -v t="$4" -v h="$HZ" 'BEGIN { printf "%.2f", t / h }')" "$(awk -v t="$5" -v h="$HZ" 'BEGIN { printf "%.2f", t / h }')" "$6"
}

# One call on the destination with its own backend's CPU and the source's audit sessions' CPU
# (sampled every 0.2 s while it runs: they are gone when it returns).
timed() { # label, SQL
	local label=$1 sql=$2 out t0 t1 dcpu scpu samples
	samples="$WORK/samples"
	: >"$samples"
	( while :; do cpu_of spsql 'cdc_apply_audit_%' >>"$samples" 2>/dev/null || true; sleep 0.2; done ) &
	local sampler=$!
	t0=$(now)
	out=$(dpsql -At -c "$sql" -c "SELECT split_part(s, ' ', 14)::bigint + split_part(s, ' ', 15)::bigint FROM pg_read_file('/proc/self/stat') AS s" 2>/dev/null)
	t1=$(now)
	kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
	dcpu=$(echo "$out" | tail -1)
	scpu=$(sort -n "$samples" | tail -1)
	RESULT=$(echo "$out" | head -1)
	report "$label" "$t0" "$t1" "$dcpu" "${scpu:-0}" "$RESULT"
}

timed "range_hash (destination)" "SELECT rows FROM cdc.range_hash('acc')"
for p in ${PAGES//,/ }; do
	timed "audit, equal, pages $p" "CALL cdc.audit('bench', page_rows => $p)"
	found=$(echo "$RESULT" | cut -d'|' -f2)
	[ "$found" = 0 ] || { echo "FAILED: the audit of identical tables found $found keys" >&2; exit 1; }
done

# damage: a third changed, a third deleted, a third inserted, spread over the key space
third=$((DAMAGE / 3))
dpsql -c "UPDATE acc SET note = 'by hand' WHERE id IN (SELECT 1 + (g * 7919) % $ROWS FROM generate_series(1, $third) g)" \
	-c "DELETE FROM acc WHERE id IN (SELECT 1 + (g * 104729) % $ROWS FROM generate_series(1, $third) g) AND note <> 'by hand'" \
	-c "INSERT INTO acc (id, bal, note) SELECT -g, 0, 'only here' FROM generate_series(1, $((DAMAGE - 2 * third))) g"
expected=$(dpsql -At -c "SELECT (SELECT count(*) FROM acc WHERE note IN ('by hand', 'only here')) + $ROWS - (SELECT count(*) FROM acc WHERE id > 0)")
timed "audit, $expected damaged" "CALL cdc.audit('bench', page_rows => 10000)"
audit_id=$(echo "$RESULT" | cut -d'|' -f1)
found=$(echo "$RESULT" | cut -d'|' -f2)
[ "$found" = "$expected" ] || { echo "FAILED: the audit found $found keys, the damage is $expected" >&2; exit 1; }
timed "resync of $found findings" "CALL cdc.resync('bench', audit => $audit_id)"
timed "audit after the resync" "CALL cdc.audit('bench', page_rows => 10000)"
found=$(echo "$RESULT" | cut -d'|' -f2)
[ "$found" = 0 ] || { echo "FAILED: $found keys still differ after the resync" >&2; exit 1; }
timed "resync of a 100,000-key range" "CALL cdc.resync('bench', 'acc', from_key => '1', to_key => '100000')"
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

#!/usr/bin/env bash
# Peak backend memory per MB of event (issue 11, docs/security.md "Event
# size"; figures in docs/benchmarks.md).  Starts a throwaway PostgreSQL
# instance (shared_buffers = 16MB, so that shared memory the call touches
# adds little to the figure), stores one event per size whose after-image
# holds one incompressible text value of that size, and for each entry point
# opens a fresh session, reads the backend's VmRSS from /proc/self/status,
# applies the event and reads VmHWM, the backend's peak resident memory;
# then the same in another session for the same delivery again (a
# duplicate).  Reported: (VmHWM - VmRSS before)
# in MB and divided by the event's size.  It is a measurement, not a test: no
# figure is asserted (the target is at most 4 x the event size).
#
# Usage: bash bench/memory.sh [--sizes 10,50] [--outbox on|off] [--port P] [--no-build] [--keep]
#   --sizes    event sizes in MB, comma-separated (default 10,50)
#   --outbox   whether the target's mapping writes outbox rows (default on)
#   --port     port of the throwaway instance (default $BENCH_PORT_BASE + 5 or 55465)
#   --no-build do not build and install the extension first
#   --keep     leave the instance running and its directory in place
# PG_CONFIG selects the PostgreSQL installation.  As root the server runs as
# user postgres.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

SIZES=10,50
OUTBOX=on
PORT=$((${BENCH_PORT_BASE:-55460} + 5))
BUILD=1
KEEP=0
while [ $# -gt 0 ]; do
	case $1 in
	--sizes) SIZES=$2; shift 2 ;;
	--outbox) OUTBOX=$2; shift 2 ;;
	--port) PORT=$2; shift 2 ;;
	--no-build) BUILD=0; shift ;;
	--keep) KEEP=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
done
case $OUTBOX in on) OUTBOX_SQL=true ;; off) OUTBOX_SQL=false ;; *) echo "--outbox on|off" >&2; exit 2 ;; esac

PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$($PG_CONFIG --bindir)
run() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if [ "$BUILD" = 1 ]; then
	make -s PG_CONFIG="$PG_CONFIG" >/dev/null
	if [ -w "$($PG_CONFIG --pkglibdir)" ]; then make -s install PG_CONFIG="$PG_CONFIG" >/dev/null; else sudo make -s install PG_CONFIG="$PG_CONFIG" >/dev/null; fi
fi

WORK=$(mktemp -d /tmp/cdc_memory.XXXXXX)
chmod 755 "$WORK"
[ "$(id -u)" -eq 0 ] && chown postgres "$WORK"
DATA=$WORK/data
cleanup() {
	if [ "$KEEP" = 1 ]; then
		echo "kept: $WORK (port $PORT)"
	else
		[ -f "$DATA/postmaster.pid" ] && run "$BINDIR/pg_ctl" -D "$DATA" -m fast stop >/dev/null 2>&1 || true
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT

run "$BINDIR/initdb" -D "$DATA" -A trust -U postgres --no-sync >/dev/null
cat >>"$DATA/postgresql.conf" <<CONF
listen_addresses = ''
port = $PORT
unix_socket_directories = '$WORK'
shared_buffers = 16MB
max_wal_size = 4GB
autovacuum = off
cdc.max_event_size = 1GB
CONF
run "$BINDIR/pg_ctl" -D "$DATA" -l "$DATA.log" -w start >/dev/null
psql_() { run "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -U postgres -d postgres "$@"; }

echo "== machine"
echo "cpus: $(nproc); memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); $("$BINDIR/postgres" --version)"
echo "outbox: $OUTBOX; shared_buffers = 16MB"

psql_ <<SQL
CREATE EXTENSION cdc_apply;
CREATE TABLE mem_t (id int PRIMARY KEY, v text);
SELECT 1 FROM cdc.register_mapping('mem_t', outbox => $OUTBOX_SQL);
CREATE FUNCTION mem_status(field text) RETURNS bigint LANGUAGE sql AS
  \$\$ SELECT (regexp_match(pg_read_file('/proc/self/status'), field || ':\s+(\d+) kB'))[1]::bigint \$\$;
CREATE TABLE mem_events (mb int PRIMARY KEY, ev jsonb, evt text, batch jsonb, tbatch text);
SQL
IFS=, read -r -a sizes <<<"$SIZES"
for mb in "${sizes[@]}"; do
	# md5 hex text: pglz finds nothing to compress, so the value stays its size everywhere
	psql_ <<SQL
INSERT INTO mem_events (mb, ev)
SELECT $mb, jsonb_build_object('op', 'c', 'source', jsonb_build_object('name', 'mem', 'lsn', $mb),
                               'after', jsonb_build_object('id', $mb,
                                 'v', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, $mb * 1024 * 1024 / 32) i)));
UPDATE mem_events SET evt = ev::text, batch = jsonb_build_array(ev), tbatch = jsonb_build_array(ev)::text WHERE mb = $mb;
SQL
done

printf '\n%-26s %8s %12s %12s %14s %12s\n' "entry point" "event MB" "peak MB" "per MB" "duplicate MB" "per MB"
measure() { # label, mb, SQL expression applying the event of mem_events row e with delivery key :'dk'
	local label=$1 mb=$2 expr=$3
	local out
	out=$(psql_ -At <<SQL
SELECT mem_status('VmRSS') AS rss0 \gset
SELECT $expr FROM mem_events e WHERE e.mb = $mb \gset r_
SELECT mem_status('VmHWM') AS hwm1 \gset
\connect
SELECT mem_status('VmRSS') AS rss1 \gset
SELECT $expr FROM mem_events e WHERE e.mb = $mb \gset d_
SELECT mem_status('VmHWM') AS hwm2 \gset
SELECT length(evt) FROM mem_events WHERE mb = $mb \gset
SELECT round((:hwm1 - :rss0) / 1024.0, 1), round((:hwm1 - :rss0) / 1024.0 / (:length / 1048576.0), 2),
       round((:hwm2 - :rss1) / 1024.0, 1), round((:hwm2 - :rss1) / 1024.0 / (:length / 1048576.0), 2),
       round(:length / 1048576.0, 1);
SQL
)
	IFS='|' read -r peak per dpeak dper size <<<"$out"
	printf '%-26s %8s %12s %12s %14s %12s\n' "$label" "$size" "$peak" "$per" "$dpeak" "$dper"
}
for mb in "${sizes[@]}"; do
	psql_ -c "TRUNCATE mem_t; DELETE FROM cdc.ledger; DELETE FROM cdc.entity_state; DELETE FROM cdc.outbox"
	measure "cdc_apply(jsonb)" "$mb" "cdc_apply(e.ev, 'mem_t', 'jsonb-$mb')"
	psql_ -c "TRUNCATE mem_t; DELETE FROM cdc.ledger; DELETE FROM cdc.entity_state; DELETE FROM cdc.outbox"
	measure "cdc_apply(text)" "$mb" "cdc_apply(e.evt, 'mem_t', 'text-$mb')"
	psql_ -c "TRUNCATE mem_t; DELETE FROM cdc.ledger; DELETE FROM cdc.entity_state; DELETE FROM cdc.outbox"
	measure "cdc_apply_batch(jsonb)" "$mb" "(cdc_apply_batch(e.batch, 'mem_t', ARRAY['batch-$mb'])).applied"
	psql_ -c "TRUNCATE mem_t; DELETE FROM cdc.ledger; DELETE FROM cdc.entity_state; DELETE FROM cdc.outbox"
	measure "cdc_apply_batch(text)" "$mb" "(cdc_apply_batch(e.tbatch, 'mem_t', ARRAY['tbatch-$mb'])).applied"
done
echo
echo "peak MB: VmHWM of the backend after the call minus its VmRSS before it (the event's own copy included);"
echo "duplicate: the same delivery applied again, in a new session (its own peak)."

#!/usr/bin/env bash
# Runs every test of cdc_apply: GoogleTest units, pg_regress, isolation,
# pgTAP, TAP and the benchmark's correctness check.  Each server-side suite
# starts its own throwaway instance, so no running server is needed.
# Usage: bash test/run_all.sh (as root it builds and installs, then runs
# the suites as user postgres, because PostgreSQL refuses to run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$($PG_CONFIG --bindir)
PGXS_DIR=$(dirname "$($PG_CONFIG --pgxs)")/..
PG_REGRESS="$PGXS_DIR/test/regress/pg_regress"
PG_ISOLATION_REGRESS="$PGXS_DIR/test/isolation/pg_isolation_regress"
TAP_PERL="$PGXS_DIR/test/perl"
RESULTS="$ROOT/test/results"
# CDC_PORT_BASE moves the three throwaway instances (base, base+1, base+2)
# so that several checkouts can run their suites at the same time.
PORT_BASE=${CDC_PORT_BASE:-58431}
# CDC_TAP_TESTS narrows the TAP step to some files (default: all of test/t).
# CDC_SUITES runs only some suites, by the names in brackets below (comma-
# separated: unit, regress, isolation, pgtap, tap, bench; default: all), and
# CDC_REGRESS_TESTS only some pg_regress tests (names of sql/*.sql separated
# by spaces or commas; `setup`, which the others need, runs first).  A name
# that is no suite, or a list naming nothing, exits 2 before the build.  For
# development only: CI runs everything.
mkdir -p "$RESULTS"
if [ -n "${CDC_SUITES+x}" ]; then
	CDC_SUITES=$(echo "$CDC_SUITES" | tr -d ' \t')
	[ -n "$CDC_SUITES" ] || { echo "CDC_SUITES is empty: name suites (unit, regress, isolation, pgtap, tap, bench) or unset it" >&2; exit 2; }
	for s in ${CDC_SUITES//,/ }; do
		case $s in unit | regress | isolation | pgtap | tap | bench) ;;
		*) echo "CDC_SUITES: unknown suite \"$s\" (known: unit, regress, isolation, pgtap, tap, bench)" >&2; exit 2 ;;
		esac
	done
fi

passed=0
failed=0
failures=()
not_selected=()
step() { # suite key, name, command...
	local key=$1 name=$2
	shift 2
	if [ -n "${CDC_SUITES:-}" ] && [[ ",$CDC_SUITES," != *",$key,"* ]]; then
		not_selected+=("$name")
		return 0
	fi
	echo "=== $name"
	if "$@"; then
		passed=$((passed + 1))
		echo "--- $name: ok"
	else
		failed=$((failed + 1))
		failures+=("$name")
		echo "--- $name: FAILED"
	fi
}

as_pg() { # run a command as a non-root user when we are root
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- env PATH="$BINDIR:$PATH" "$@"
	else
		env PATH="$BINDIR:$PATH" "$@"
	fi
}

# 1. build and install the extension
make -s PG_CONFIG="$PG_CONFIG" >/dev/null
if [ -w "$($PG_CONFIG --pkglibdir)" ]; then make -s install PG_CONFIG="$PG_CONFIG" >/dev/null; else sudo make -s install PG_CONFIG="$PG_CONFIG" >/dev/null; fi
if [ "$(id -u)" -eq 0 ]; then chown -R postgres "$ROOT/test" "$ROOT/expected" "$ROOT/sql"; chmod -R a+rX "$ROOT"; fi

# 2. GoogleTest units of the pure C++ core (CTest)
unit() {
	cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
		cmake --build "$ROOT/build" --target cdc_unit_tests -j2 >/dev/null &&
		(cd "$ROOT/build" && ctest --output-on-failure -R "^unit\\.")
}
step unit "unit (GoogleTest)" unit

# 3. pg_regress: the SQL surface
REGRESS=$(sed -n 's/^REGRESS = //p' Makefile)
if [ -n "${CDC_REGRESS_TESTS+x}" ]; then
	# names separated by spaces or commas; setup first, as the others need it
	REGRESS=$(echo "$CDC_REGRESS_TESTS" | tr ',' ' ' | xargs -n1 2>/dev/null | grep -vx setup | xargs)
	[ -n "$REGRESS" ] || { echo "CDC_REGRESS_TESTS names no test besides setup" >&2; exit 2; }
	REGRESS="setup $REGRESS"
fi
regress() {
	rm -rf "$RESULTS/regress" && mkdir -p "$RESULTS/regress" && chmod a+rwx "$RESULTS/regress"
	as_pg "$PG_REGRESS" --temp-instance="$RESULTS/regress/tmp_instance" --temp-config="$ROOT/test/regress.conf" \
		--bindir="$BINDIR" --inputdir="$ROOT" --outputdir="$RESULTS/regress" --port=$PORT_BASE $REGRESS ||
		{ cat "$RESULTS/regress/regression.diffs" 2>/dev/null | head -200; return 1; }
}
step regress "pg_regress" regress

# 4. isolation specs: concurrent appliers
ISOLATION=$(sed -n 's/^ISOLATION = //p' Makefile)
isolation() {
	rm -rf "$RESULTS/isolation" && mkdir -p "$RESULTS/isolation" && chmod a+rwx "$RESULTS/isolation"
	as_pg "$PG_ISOLATION_REGRESS" --temp-instance="$RESULTS/isolation/tmp_instance" \
		--temp-config="$ROOT/test/regress.conf" --bindir="$BINDIR" --inputdir="$ROOT/test/isolation" \
		--outputdir="$RESULTS/isolation" --port=$((PORT_BASE + 1)) $ISOLATION ||
		{ cat "$RESULTS/isolation/regression.diffs" 2>/dev/null | head -200; return 1; }
}
step isolation "isolation" isolation

# 5. pgTAP: catalog and API contracts (run through pg_regress)
PGTAP=$(cd "$ROOT/test/pgtap/sql" && ls *.sql | sed 's/\.sql$//' | tr '\n' ' ')
pgtap() {
	rm -rf "$RESULTS/pgtap" && mkdir -p "$RESULTS/pgtap" && chmod a+rwx "$RESULTS/pgtap"
	as_pg "$PG_REGRESS" --temp-instance="$RESULTS/pgtap/tmp_instance" --temp-config="$ROOT/test/regress.conf" \
		--bindir="$BINDIR" --inputdir="$ROOT/test/pgtap" --outputdir="$RESULTS/pgtap" --port=$((PORT_BASE + 2)) $PGTAP ||
		{ cat "$RESULTS/pgtap/regression.diffs" 2>/dev/null | head -200; return 1; }
}
step pgtap "pgTAP" pgtap

# 6. TAP: real clusters, crashes, restarts (PostgreSQL::Test::Cluster)
# 054_upgrade.pl writes state with the release 0.1.0's own module: build it
# from the release commit (docs/sql-reference.md, "Upgrading").
RELEASE_0_1_0=f919c47
release_module() {
	local dir="$RESULTS/release-0.1.0"
	rm -rf "$dir" && mkdir -p "$dir" &&
		git -C "$ROOT" archive "$RELEASE_0_1_0" | tar -x -C "$dir" &&
		make -s -C "$dir" PG_CONFIG="$PG_CONFIG" >"$dir/build.log" 2>&1 &&
		chmod -R a+rX "$dir" && echo "$dir/cdc_apply.so"
}
tap() {
	rm -rf "$RESULTS/tap" && mkdir -p "$RESULTS/tap" && chmod a+rwx "$RESULTS/tap"
	local release_so
	release_so=$(release_module) || { echo "cannot build the release 0.1.0 module ($RELEASE_0_1_0)"; return 1; }
	(cd "$RESULTS/tap" && as_pg env TESTDIR="$RESULTS/tap" PG_REGRESS="$PG_REGRESS" CDC_ROOT="$ROOT" \
		CDC_RELEASE_0_1_0_SO="$release_so" PG_CONFIG="$PG_CONFIG" \
		prove -I "$TAP_PERL" -I "$ROOT/test/t" ${CDC_TAP_TESTS:-"$ROOT"/test/t/*.pl})
}
step tap "TAP" tap

# 7. the benchmark's correctness check at its smallest size: every method
# (plain upsert, PL/pgSQL reference, cdc_apply, cdc_apply_batch, native
# logical replication, the worker) must end with the source's rows.  No
# timing is asserted.
bench_check() {
	PG_CONFIG="$PG_CONFIG" bash "$ROOT/bench/run.sh" --sizes 2000 --txn 100 --no-build --port-base "$PORT_BASE"
}
step bench "bench (correctness, 2,000 changes)" bench_check

echo
echo "suites: $passed passed, $failed failed"
[ ${#not_selected[@]} -eq 0 ] || printf 'not run (CDC_SUITES=%s): %s\n' "$CDC_SUITES" "$(IFS=,; echo "${not_selected[*]}")"
if [ "$failed" -gt 0 ]; then
	printf 'failed suite: %s\n' "${failures[@]}"
	exit 1
fi

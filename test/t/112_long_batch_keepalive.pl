# A batch whose apply takes longer than the source's wal_sender_timeout must
# not lose the connection (fidelity: continuity of the stream; docs/worker.md,
# "Values on the wire", wal_sender_timeout).
#
# The worker read the stream (keepalives included) and sent its status
# updates only between batches.  A walsender ends a connection whose client
# has not replied for wal_sender_timeout, so one batch of
# cdc.apply_batch_changes changes slower than that lost the connection in
# the middle of the source transaction; the worker applied it again from its
# start, lost the connection again, without end (review h3: "lost the
# connection to the source" in a loop).  The worker now sends a status
# update while the engine applies (rate-limited, per applied change).
#
# The reviewer's reproduction: wal_sender_timeout = 1s for the role the
# subscription connects as (checked on a replication connection of that
# role), an ALWAYS trigger on the destination that sleeps 2 ms per row, and
# one source transaction of 3,000 rows: with batches of 1,000 changes, each
# batch sleeps at least 2 s, twice the timeout, by construction.  Part 2
# does the same for a history-mode target (one row per change), part 3 for a
# handler-mode target whose handler sleeps 2 ms per call.
#
# Asserted: the rows (exact values), that the worker's walsender on the
# source and the worker on the destination are the processes of before the
# transaction, no error recorded and retry_count 0, one outbox row per
# change and every change claimed once.  On the old code the worker never
# catches up (the wait runs into the harness's timeout).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('ka_source');
my $dest = new_dest('ka_dest', "cdc.apply_batch_changes = 1000\ncdc.status_interval = 1s\n");

$source->safe_psql('postgres', q{
CREATE ROLE repl LOGIN REPLICATION;
ALTER ROLE repl SET wal_sender_timeout = '1s';
CREATE TABLE public.t (id int PRIMARY KEY, n int, v text);
CREATE TABLE public.h (id int PRIMARY KEY, n int, v text);
CREATE TABLE public.k (id int PRIMARY KEY, n int, v text);
GRANT SELECT ON public.t, public.h, public.k TO repl;
CREATE PUBLICATION pub_t FOR TABLE public.t;
CREATE PUBLICATION pub_h FOR TABLE public.h;
CREATE PUBLICATION pub_k FOR TABLE public.k;
});
$dest->safe_psql('postgres', q{
CREATE TABLE public.t (id int PRIMARY KEY, n int, v text);
CREATE TABLE public.h (id int PRIMARY KEY, n int, v text);
SELECT cdc.create_history_table('public.h_history', 'public.h');
CREATE FUNCTION public.slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_catalog.pg_sleep(0.002); RETURN NEW; END $$;
CREATE TRIGGER slow BEFORE INSERT ON public.t FOR EACH ROW EXECUTE FUNCTION public.slow();
ALTER TABLE public.t ENABLE ALWAYS TRIGGER slow;
CREATE TRIGGER slow BEFORE INSERT ON public.h_history FOR EACH ROW EXECUTE FUNCTION public.slow();
ALTER TABLE public.h_history ENABLE ALWAYS TRIGGER slow;
SELECT cdc.register_mapping('public.t', outbox => true, source_name => 'ka_t');
CREATE TABLE public.k (id int PRIMARY KEY, n int, v text);
CREATE TABLE public.k_calls (id int, op text);
CREATE FUNCTION public.k_handler(op text, old public.k, new public.k, meta jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_catalog.pg_sleep(0.002); INSERT INTO public.k_calls VALUES (new.id, op); END $$;
});

# the role's setting reaches a replication session: what the walsender runs with
my $repl_conn = $source->connstr('postgres') . ' user=repl replication=database';
is($source->safe_psql('postgres', 'SHOW wal_sender_timeout', connstr => $repl_conn), '1s',
	'a replication session of repl runs with wal_sender_timeout = 1s');

(my $conn = $source->connstr('postgres')) =~ s/'/''/g;

# the worker's walsender on the source and the worker on the destination
sub processes
{
	my ($sub) = @_;
	my $ws = $source->safe_psql('postgres',
		"SELECT pid || '\@' || backend_start FROM pg_stat_activity "
		  . "WHERE application_name = 'cdc_apply_$sub' AND backend_type = 'walsender'");
	my $w = $dest->safe_psql('postgres', "SELECT worker_pid FROM cdc.subscription_status WHERE name = '$sub'");
	return "walsender $ws, worker $w";
}

sub run_case
{
	my ($sub, $table, $pub, $extra) = @_;
	$dest->safe_psql('postgres',
		"SELECT cdc.create_subscription('$sub', '$conn user=repl', ARRAY['$pub'], copy_data => false$extra)");
	ok(wait_status($dest, $sub, q{state = 'streaming'}), "$sub: streaming");
	# a first change: the stream is up and has applied something
	$source->safe_psql('postgres', "INSERT INTO $table VALUES (0, 0, 'first')");
	ok(wait_caught_up($source, $dest, $sub), "$sub: first change applied");
	my $before = processes($sub);
	like($before, qr/^walsender \d+@.+, worker \d+$/, "$sub: the worker and its walsender run");

	# one source transaction of 3,000 rows: three batches of 1,000, each slower than the timeout
	$source->safe_psql('postgres',
		"INSERT INTO $table SELECT g, g * 7, md5(g::text) FROM generate_series(1, 3000) g");
	ok(wait_caught_up($source, $dest, $sub), "$sub: the transaction of 3,000 rows is applied");
	is(processes($sub), $before, "$sub: same walsender and same worker: the connection was never lost");
	is($dest->safe_psql('postgres', "SELECT count(*) FROM cdc.subscription_errors WHERE name = '$sub'"), '0',
		"$sub: no error recorded");
	is(status_row($dest, $sub, 'retry_count'), '0', "$sub: retry_count 0");
	return;
}

# ---------------------------------------------------------------------------
# 1. state mode with outbox rows (a target with a trigger: change by change)
# ---------------------------------------------------------------------------
run_case('ka_t', 'public.t', 'pub_t', '');
compare_table($source, $dest, 'SELECT count(*), sum(n), md5(string_agg(id || \':\' || n || \':\' || v, \',\' ORDER BY id)) FROM public.t',
	'ka_t: the destination rows equal the source');
is($dest->safe_psql('postgres', q{SELECT count(*) || ' ' || min(id) || ' ' || max(id) || ' ' || sum(n)
	FROM public.t WHERE v = md5(id::text) AND n = id * 7}), '3000 1 3000 31510500', 'ka_t: the 3,000 rows, exact values');
is(outbox_summary($dest, q{target = 'public.t'::regclass}), '3001|3001', 'ka_t: one outbox row per change');
# the delivery keys name the source as the worker sees it, pg:<system identifier>
my $sysid = $source->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
is(changes_claimed_once($dest, 'public.t',
		"SELECT 'pg:$sysid' AS source_id, (source->>'commit_lsn')::bigint AS commit_lsn, version[3] AS pos FROM cdc.outbox WHERE target = 'public.t'::regclass"),
	'3001|0',
	'ka_t: every change claimed once, by a ledger row or in an offset range');

# ---------------------------------------------------------------------------
# 2. history mode: one row per change
# ---------------------------------------------------------------------------
$dest->safe_psql('postgres', q{
SELECT cdc.register_mapping('public.h_history', source_table => 'h', key_columns => '{id}', mode => 'history',
                            source_name => 'ka_h');
});
run_case('ka_h', 'public.h', 'pub_h', '');
is($dest->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || sum(n) || ' ' || min(cdc_op) || max(cdc_op)
	FROM public.h_history WHERE v = md5(id::text) AND n = id * 7 AND id > 0 AND cdc_key = jsonb_build_object('id', id::text)}),
	'3000 3000 31510500 cc', 'ka_h: 3,000 history rows, exact values');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.h_history}), '3001', 'ka_h: one history row per change');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.h}), '0', 'ka_h: nothing written to the table of the same name');
is(changes_claimed_once($dest, 'public.h_history',
		"SELECT 'pg:$sysid' AS source_id, cdc_version[2] AS commit_lsn, cdc_version[3] AS pos FROM public.h_history"),
	'3001|0', 'ka_h: every change claimed once, by a ledger row or in an offset range');
is(outbox_summary($dest, q{target = 'public.h_history'::regclass}), '0|0', 'ka_h: no outbox rows (outbox off)');

# ---------------------------------------------------------------------------
# 3. handler mode: the handler is the slow part (no trigger)
# ---------------------------------------------------------------------------
$dest->safe_psql('postgres', q{
SELECT cdc.register_mapping('public.k', mode => 'handler', handler => 'public.k_handler(text, public.k, public.k, jsonb)',
                            source_name => 'ka_k');
});
run_case('ka_k', 'public.k', 'pub_k', '');
compare_table($source, $dest, 'SELECT count(*), sum(n), md5(string_agg(id || \':\' || n || \':\' || v, \',\' ORDER BY id)) FROM public.k',
	'ka_k: the destination rows equal the source');
is($dest->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || min(op) || max(op) FROM public.k_calls}),
	'3001 3001 cc', 'ka_k: one handler call per change');

$dest->safe_psql('postgres',
	q{SELECT cdc.drop_subscription('ka_t'); SELECT cdc.drop_subscription('ka_h'); SELECT cdc.drop_subscription('ka_k')});
done_testing();

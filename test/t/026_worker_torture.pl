# Worker-path torture (issue 4, docs/torture.md "The worker path"): a random
# source workload streamed through the apply worker while the test kills the
# worker (pg_terminate_backend), crashes the destination (kill -9), fires the
# worker's fault points, changes the group size, and restarts the source
# (immediate) between rounds.  At the end the destination must equal the
# source table by table, and the outbox must hold exactly one row per source
# change (two for a key change), counted from a probe slot that sees the
# same stream as the worker; no change may reach the engine twice (no
# duplicate, stale or conflict outcome).
#
# The source database and the test's role carry odd session settings
# (DateStyle 'SQL, DMY', extra_float_digits 0, IntervalStyle sql_standard),
# and table wd is published with a row filter and a column list (issue 12):
# its dates, floats and intervals must arrive exact, and the destination
# must hold exactly the rows and columns the publication publishes.
#
# The seed (printed) fixes the workload and the sequence of faults; when a
# fault lands relative to the stream depends on timing.  Knobs:
#   CDC_WORKER_TORTURE_SEED    seed (default: derived from the time, printed)
#   CDC_WORKER_TORTURE_ROUNDS  rounds (default 8; a soak run uses e.g. 200)
#   CDC_WORKER_TORTURE_XACTS   source transactions per round (default 500)
#   CDC_WORKER_TORTURE_FAULTS  faults per round (default 5)
#   CDC_WORKER_TORTURE_STREAMING  on/off: cdc.streaming (default: on for odd seeds)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;
use lib cdc_root() . '/test/torture';
use CdcTorture::Rng;

my $seed = $ENV{CDC_WORKER_TORTURE_SEED} // (time() % 100000);
my $rounds = $ENV{CDC_WORKER_TORTURE_ROUNDS} // 8;
my $xacts = $ENV{CDC_WORKER_TORTURE_XACTS} // 500;
my $faults = $ENV{CDC_WORKER_TORTURE_FAULTS} // 5;
diag("worker torture: seed $seed (CDC_WORKER_TORTURE_SEED=$seed reproduces the workload and fault sequence), "
	  . "$rounds rounds x $xacts source transactions, $faults faults per round");
my $rng = CdcTorture::Rng->new("worker:$seed");
my $wrng = $rng->fork('workload');
my $frng = $rng->fork('faults');

# Odd seeds stream large transactions while they run (cdc.streaming, protocol
# version 2); even seeds get them at commit (version 1).  The source decodes
# with little memory either way, so large transactions spill or stream.
my $streaming = $ENV{CDC_WORKER_TORTURE_STREAMING} // ($seed % 2 ? 'on' : 'off');
my $source = new_source('source');
$source->append_conf('postgresql.conf', "logical_decoding_work_mem = 64kB\n");
$source->restart;
my $dest = new_dest('dest', "cdc.streaming = $streaming\n");
diag("worker torture: cdc.streaming = $streaming");

my $tables = q{
CREATE TABLE wa (id int PRIMARY KEY, v text, n int NOT NULL);
CREATE TABLE wb (g text, id int, v text, blob bytea, PRIMARY KEY (g, id));
CREATE TABLE wc (id int PRIMARY KEY, note text, body text);
};
# wd: published with a row filter (id % 5 <> 0) and without its column
# secret; at the destination secret is a local column with a default
$source->safe_psql('postgres', $tables . q{
CREATE TABLE wd (id int PRIMARY KEY, region text NOT NULL, d date, f float8, iv interval, secret text, v text);
ALTER TABLE wb REPLICA IDENTITY FULL;
CREATE TABLE torture_done (round int);
CREATE PUBLICATION wt FOR TABLE wa, wb, wc, wd (id, region, d, f, iv, v) WHERE (id % 5 <> 0);
INSERT INTO wa SELECT g, 'seed', 0 FROM generate_series(1, 20) g;
INSERT INTO wd SELECT g, 'eu', date '2024-01-01' + g, g / 3.0::float8, make_interval(days => -g, secs => -g * 1.5), 'hidden', 'seed'
  FROM generate_series(1, 30) g;
ALTER DATABASE postgres SET DateStyle = 'SQL, DMY';
ALTER DATABASE postgres SET extra_float_digits = 0;
ALTER ROLE CURRENT_USER IN DATABASE postgres SET IntervalStyle = 'sql_standard';
});
$dest->safe_psql('postgres', $tables
	  . q{CREATE TABLE wd (id int PRIMARY KEY, region text NOT NULL, d date, f float8, iv interval, v text, secret text DEFAULT 'dest');}
	  . join('', map { "SELECT cdc.register_mapping('$_', outbox => true, source_name => 'wt');\n" } qw(wa wb wc wd)));
probe_create($source, 'probe');
create_subscription($dest, $source, 'wt', ['wt']);
ok(wait_caught_up($source, $dest, 'wt'), 'initial copy done, streaming');

# --- the workload ----------------------------------------------------------
# Single writer, so every statement succeeds: upserts, guarded key changes.
sub statement
{
	my $r = $wrng;
	my $kind = $r->weighted({ wa_upsert => 6, wa_update => 6, wa_delete => 3, wa_rekey => 2, wa_unkey => 2,
		wb_upsert => 5, wb_update => 4, wb_delete => 2, wc_upsert => 2, wc_note => 3, wc_delete => 1, wc_truncate => 0.2,
		wd_upsert => 3, wd_update => 3, wd_move => 1, wd_delete => 1 });
	my $id = $r->range(1, 40);
	my $v = 'v' . $r->int(1000000);
	if ($kind =~ /^wd_/) {
		# ISO date literals and make_interval(): read the same whatever the session's settings
		my $n = $r->int(100000);
		my $d = $r->range(-1000, 1000);
		my $days = -$d;    # never "--", which would start a comment
		my $region = $r->pick('eu', 'us');
		my $cols = "d = date '2024-03-04' + ($d), f = $n / 7.0::float8, iv = make_interval(days => ($days), secs => -$n / 1000.0), v = '$v', secret = 's$n'";
		if ($kind eq 'wd_upsert') {
			return "INSERT INTO wd VALUES ($id, '$region', date '2024-03-04' + ($d), $n / 7.0::float8, make_interval(days => ($days), secs => -$n / 1000.0), 's$n', '$v') "
			  . "ON CONFLICT (id) DO UPDATE SET region = EXCLUDED.region, $cols;";
		} elsif ($kind eq 'wd_update') {
			return "UPDATE wd SET $cols WHERE id = $id;";
		} elsif ($kind eq 'wd_move') {
			# a key change, in, out of or within the row filter
			my $to = $r->range(1, 40);
			return "UPDATE wd SET id = $to WHERE id = $id AND NOT EXISTS (SELECT 1 FROM wd w WHERE w.id = $to);";
		}
		return "DELETE FROM wd WHERE id = $id;";
	}
	if ($kind eq 'wa_upsert') {
		return "INSERT INTO wa VALUES ($id, '$v', 0) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = wa.n + 1;";
	} elsif ($kind eq 'wa_update') {
		return "UPDATE wa SET v = '$v', n = n + 1 WHERE id = $id;";
	} elsif ($kind eq 'wa_delete') {
		return "DELETE FROM wa WHERE id = $id;";
	} elsif ($kind eq 'wa_rekey') {
		return "UPDATE wa SET id = id + 1000 WHERE id = $id AND NOT EXISTS (SELECT 1 FROM wa w WHERE w.id = $id + 1000);";
	} elsif ($kind eq 'wa_unkey') {
		return "UPDATE wa SET id = id - 1000, v = '$v' WHERE id = $id + 1000 AND NOT EXISTS (SELECT 1 FROM wa w WHERE w.id = $id);";
	}
	my $g = $r->pick('a', 'b');
	my $bid = $r->range(1, 20);
	if ($kind eq 'wb_upsert') {
		return "INSERT INTO wb VALUES ('$g', $bid, '$v', decode(md5('$v'), 'hex')) ON CONFLICT (g, id) DO UPDATE SET v = EXCLUDED.v, blob = EXCLUDED.blob;";
	} elsif ($kind eq 'wb_update') {
		return "UPDATE wb SET v = '$v' WHERE g = '$g' AND id = $bid;";
	} elsif ($kind eq 'wb_delete') {
		return "DELETE FROM wb WHERE g = '$g' AND id = $bid;";
	}
	my $cid = $r->range(1, 10);
	if ($kind eq 'wc_upsert') {
		# about 6 kB of hex digits: stored out of line (TOAST)
		return "INSERT INTO wc SELECT $cid, '$v', string_agg(md5(g::text || '$v'), '') FROM generate_series(1, 200) g "
		  . "ON CONFLICT (id) DO UPDATE SET note = EXCLUDED.note, body = EXCLUDED.body;";
	} elsif ($kind eq 'wc_note') {
		return "UPDATE wc SET note = '$v' WHERE id = $cid;";    # body: unchanged TOAST
	} elsif ($kind eq 'wc_delete') {
		return "DELETE FROM wc WHERE id = $cid;";
	}
	return 'TRUNCATE wc;';
}

sub round_sql
{
	my ($round) = @_;
	my $sql = '';
	for (1 .. $xacts) {
		my $shape = $wrng->weighted({ single => 60, block => 30, rollback => 5, savepoint => 5, bulk => 1 });
		if ($shape eq 'single') {
			$sql .= statement() . "\n";
		} elsif ($shape eq 'block') {
			$sql .= "BEGIN;\n" . join("\n", map { statement() } 1 .. $wrng->range(2, 5)) . "\nCOMMIT;\n";
		} elsif ($shape eq 'rollback') {
			$sql .= "BEGIN;\n" . join("\n", map { statement() } 1 .. $wrng->range(1, 3)) . "\nROLLBACK;\n";
		} elsif ($shape eq 'savepoint') {
			$sql .= "BEGIN;\n" . statement() . "\nSAVEPOINT s;\n" . statement() . "\nROLLBACK TO SAVEPOINT s;\n"
			  . statement() . "\nCOMMIT;\n";
		} else {
			# a large transaction (streamed or spilled by the source), with a
			# savepoint that is rolled back or kept, committed or aborted
			my $v = 'b' . $wrng->int(1000000);
			$sql .= "BEGIN;\n" . statement() . "\n"
			  . "INSERT INTO wb SELECT 'bulk', g, '$v', NULL FROM generate_series(1, 1000) g ON CONFLICT (g, id) DO UPDATE SET v = EXCLUDED.v;\n"
			  . "SAVEPOINT s;\n"
			  . "INSERT INTO wb SELECT 'bulk', g, '$v-s', NULL FROM generate_series(500, 1500) g ON CONFLICT (g, id) DO UPDATE SET v = EXCLUDED.v;\n"
			  . ($wrng->chance(0.5) ? "ROLLBACK TO SAVEPOINT s;\n" : "RELEASE SAVEPOINT s;\n")
			  . statement() . "\n" . ($wrng->chance(0.2) ? "ROLLBACK;\n" : "COMMIT;\n");
		}
	}
	return $sql . "INSERT INTO torture_done VALUES ($round);\n";
}

# --- the faults ------------------------------------------------------------
my %count = (terminate => 0, kill9 => 0, fault_point => 0, group_size => 0, source_restart => 0);
my $extra = 0;    # ids of the extra rows written to trigger fault points

sub worker_pid
{
	return $dest->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'cdc_apply worker'});
}

sub outbox_rows
{
	return $dest->safe_psql('postgres', 'SELECT count(*) FROM cdc.outbox');
}

# Waits until the destination moved on since $rows outbox rows, or the round's
# workload is done and applied.
sub wait_progress
{
	my ($rows, $round) = @_;
	for (1 .. 600) {
		return if outbox_rows() > $rows;
		return if $source->safe_psql('postgres', "SELECT count(*) FROM torture_done WHERE round = $round") > 0;
		usleep(100_000);
	}
}

sub inject
{
	my ($round) = @_;
	my $what = $frng->weighted({ terminate => 3, kill9 => 2, fault_point => 2, group_size => 1 });
	$count{$what}++;
	if ($what eq 'terminate') {
		my $pid = worker_pid();
		$dest->safe_psql('postgres', "SELECT pg_terminate_backend($pid)") if $pid;
		note("round $round: terminated the worker" . ($pid ? " $pid" : ' (none running)'));
	} elsif ($what eq 'kill9') {
		$dest->stop('immediate');
		$dest->start;
		note("round $round: kill -9 of the destination");
	} elsif ($what eq 'group_size') {
		# the group size, and how many changes go to the batch engine at once
		# (1: change by change)
		my $size = $frng->pick(1, 3, 50, 1000);
		my $batch = $frng->pick(1, 2, 7, 1000);
		$dest->safe_psql('postgres', "ALTER SYSTEM SET cdc.group_max_transactions = $size");
		$dest->safe_psql('postgres', "ALTER SYSTEM SET cdc.apply_batch_changes = $batch");
		$dest->reload;
		note("round $round: cdc.group_max_transactions = $size, cdc.apply_batch_changes = $batch");
	} else {
		# a fault point, triggered by a transaction of 8 changes written now
		my $point = $frng->pick('before_commit', 'after_commit', 'after_change:' . $frng->range(1, 8));
		set_fault($dest, $point);
		my $pid = worker_pid();
		# make sure the worker that meets the transaction has read the setting
		$dest->safe_psql('postgres', "SELECT pg_terminate_backend($pid)") if $pid;
		my $offset = -s $dest->logfile;
		my $from = ++$extra * 100;
		$source->safe_psql('postgres', "INSERT INTO wb SELECT 'x', g, 'fault', NULL FROM generate_series($from, $from + 7) g");
		$dest->wait_for_log(qr/fault point \Q$point\E reached/, $offset);
		set_fault($dest, undef);
		note("round $round: fault point $point");
	}
}

# --- the rounds ------------------------------------------------------------
for my $round (1 .. $rounds) {
	my $file = PostgreSQL::Test::Utils::tempdir() . "/round$round.sql";
	PostgreSQL::Test::Utils::append_to_file($file, round_sql($round));
	my $log = "$file.log";
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $source->connstr('postgres'), '-f', $file ],
		'<', '/dev/null', '>', $log, '2>&1');
	for (1 .. $faults) {
		wait_progress(outbox_rows(), $round);
		inject($round);
	}
	ok($h->finish, "round $round: $xacts source transactions ran") or diag(slurp_file($log));
	if ($frng->chance(0.25)) {
		$count{source_restart}++;
		$source->stop('immediate');
		$source->start;
		note("round $round: immediate restart of the source");
	}
}
note('faults injected: ' . join(', ', map { "$_ $count{$_}" } sort keys %count));

# --- the check -------------------------------------------------------------
ok(wait_caught_up($source, $dest, 'wt'), 'caught up');
for my $t ([ 'wa', 'id' ], [ 'wb', 'g, id' ], [ 'wc', 'id' ]) {
	my ($name, $key) = @$t;
	compare_table($source, $dest, "SELECT count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY $key), '')) FROM $name x",
		"$name: destination equals source");
}
# wd: exactly the published rows and columns, values exact (both sides
# rendered with the same settings here)
my $pinned = "SET DateStyle = ISO; SET IntervalStyle = postgres; SET extra_float_digits = 3;\n";
is($dest->safe_psql('postgres', $pinned . q{SELECT count(*), md5(coalesce(string_agg(row(id, region, d, f, iv, v)::text, ',' ORDER BY id), '')) FROM wd}),
	$source->safe_psql('postgres', $pinned . q{SELECT count(*), md5(coalesce(string_agg(row(id, region, d, f, iv, v)::text, ',' ORDER BY id), '')) FROM wd WHERE id % 5 <> 0}),
	'wd: destination equals the rows and columns the publication publishes');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM wd WHERE secret IS DISTINCT FROM 'dest'}), '0',
	'wd: the unpublished column keeps the destination default');
my ($txns, $changes, $expected) = (0, 0, 0);
for my $t (@{ probe_read($source, 'probe', 'wt') }) {
	$txns++;
	for my $c (@{ $t->{changes} }) {
		$changes++;
		$expected += ($c->[0] eq 'U' && defined $c->[2] && $c->[2] eq 'K') ? 2 : 1;
	}
}
my $decoding = $source->safe_psql('postgres',
	q{SELECT 'streamed ' || stream_txns || ' transactions in ' || stream_count || ' chunks, spilled ' || spill_txns
	    FROM pg_stat_replication_slots WHERE slot_name = 'wt'});
diag("worker torture seed $seed: $txns source transactions, $changes changes, $expected expected outbox rows; "
	  . 'faults: ' . join(', ', map { "$_ $count{$_}" } sort keys %count) . "; source slot: $decoding (since its last restart)");
is(outbox_summary($dest), "$expected|$expected", 'outbox: exactly one row per source change (two per key change)');
is($dest->safe_psql('postgres', q{SELECT sum(applied) - sum(snapshot_rows) || '|' || sum(duplicate) || '|' || sum(stale) || '|' || sum(conflict) FROM cdc.stats}),
	"$changes|0|0|0", 'every change applied exactly once: no duplicate, stale or conflict');
# (last_error may hold a connection error from a source restart: it is kept until the next error)
ok(wait_status($dest, 'wt', q{state = 'streaming' AND retry_count = 0}), 'streaming, no pending retry');

probe_drop($source, 'probe');
$dest->stop;
$source->stop;
done_testing();

# Faults around the apply worker: kill -9 of the destination in the middle of
# a stream of small source transactions, the worker's own fault points just
# before and just after the local commit (cdc.debug_fault), a source restart
# mid-stream, and a source that is unreachable when the subscription starts.
# After each: the destination equals the source and the outbox holds exactly
# one row per applied source change (no loss, no double apply).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest');

my $tables = q{CREATE TABLE w (id int PRIMARY KEY, n int NOT NULL, v text);};
$source->safe_psql('postgres', $tables . q{
CREATE PUBLICATION pub FOR TABLE w;
INSERT INTO w SELECT -g, 0, 'seed' FROM generate_series(1, 10) g;
});
$dest->safe_psql('postgres', $tables . q{SELECT cdc.register_mapping('w', outbox => true, source_name => 'sub1');});
create_subscription($dest, $source, 'sub1', ['pub']);
ok(wait_caught_up($source, $dest, 'sub1'), 'initial copy done');

# One single-row change per source transaction.  workload($n) runs them and
# returns $n; workload($n, 1) starts them in the background, slowed down by a
# short sleep between transactions, and returns the IPC::Run handle.
my $next = 1;
sub workload
{
	my ($count, $background) = @_;
	my $sql = '';
	for (1 .. $count) {
		my $i = $next++;
		if ($i % 15 == 0) {
			$sql .= "DELETE FROM w WHERE id = " . ($i - 2) . ";\n";
		} elsif ($i % 3 == 0) {
			$sql .= "UPDATE w SET n = n + 1, v = 'u$i' WHERE id = " . ($i - 1) . ";\n";
		} else {
			$sql .= "INSERT INTO w VALUES ($i, 0, 'i$i');\n";
		}
		$sql .= "SELECT pg_sleep(0.01);\n" if $background;
	}
	if ($background) {
		# from a file: IPC::Run feeds a scalar stdin only while pumped
		my $file = PostgreSQL::Test::Utils::tempdir() . '/workload.sql';
		PostgreSQL::Test::Utils::append_to_file($file, $sql);
		my ($out, $err) = ('', '');
		return IPC::Run::start(
			[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $source->connstr('postgres'), '-f', $file ],
			'<', '/dev/null', '>', \$out, '2>', \$err);
	}
	$source->safe_psql('postgres', $sql);
	return $count;
}

sub check_exactly_once
{
	my ($changes, $label) = @_;
	ok(wait_caught_up($source, $dest, 'sub1'), "$label: caught up");
	compare_table($source, $dest, 'SELECT * FROM w ORDER BY 1', "$label: destination equals source");
	is(outbox_summary($dest, q{target = 'w'::regclass}), "$changes|$changes", "$label: $changes outbox rows, all idempotency keys distinct");
}

# --- kill -9 of the destination mid-stream ---------------------------------
my $changes = 300;
my $bg = workload(300, 1);
my @at_kill;
for my $threshold (60, 160) {
	$dest->poll_query_until('postgres', "SELECT count(*) >= $threshold FROM cdc.outbox");
	push @at_kill, $dest->safe_psql('postgres', 'SELECT count(*) FROM cdc.outbox');
	$dest->stop('immediate');
	$dest->start;
}
ok($bg->finish, 'background source workload of 300 transactions completed');
note("outbox rows when the destination was killed: @at_kill of 300");
check_exactly_once($changes, 'kill -9 of the destination twice mid-stream');

# --- fault point after_commit ----------------------------------------------
my $pid = status_row($dest, 'sub1', 'worker_pid');
my $log_offset = -s $dest->logfile;
set_fault($dest, 'after_commit');
# give the worker its SIGHUP before the transaction arrives
$dest->poll_query_until('postgres', q{SELECT current_setting('cdc.debug_fault') = 'after_commit'});
$dest->safe_psql('postgres', 'SELECT pg_sleep(0.5)');
$changes += workload(1);
$dest->wait_for_log(qr/fault point after_commit reached/, $log_offset);
ok(1, 'the worker exited at after_commit');
ok(wait_status($dest, 'sub1', "worker_pid <> $pid AND state = 'streaming'"), 'a new worker was started');
set_fault($dest, undef);
$changes += workload(3);
check_exactly_once($changes, 'after_commit fault');

# --- fault point before_commit ---------------------------------------------
$pid = status_row($dest, 'sub1', 'worker_pid');
$log_offset = -s $dest->logfile;
set_fault($dest, 'before_commit');
$dest->poll_query_until('postgres', q{SELECT current_setting('cdc.debug_fault') = 'before_commit'});
$dest->safe_psql('postgres', 'SELECT pg_sleep(0.5)');
my $before_lsn = source_lsn($source);
$changes += workload(1);
$dest->wait_for_log(qr/fault point before_commit reached/, $log_offset);
ok(1, 'the worker exited at before_commit');
is(status_row($dest, 'sub1', "applied_lsn < '" . source_lsn($source) . "'"), 't', 'the transaction was not committed');
set_fault($dest, undef);
ok(wait_status($dest, 'sub1', "worker_pid <> $pid"), 'a new worker was started');
$changes += workload(3);
check_exactly_once($changes, 'before_commit fault');

# --- source restart mid-stream ---------------------------------------------
my $restart_log_offset = -s $dest->logfile;
$changes += workload(60);
$source->restart;
$changes += workload(40);
check_exactly_once($changes, 'source restart mid-stream');
# Whether the drop is seen as an error (connection lost) or as the end of the
# stream depends on timing; either way the worker must start streaming again.
like(slurp_file($dest->logfile, $restart_log_offset), qr/subscription "sub1": streaming from/,
	'the worker reconnected and resumed streaming after the source restart')
  or diag(status_row($dest, 'sub1', "last_error_at, last_error, retry_count, state"));
ok(wait_status($dest, 'sub1', q{retry_count = 0 AND state = 'streaming'}), 'and recovered: streaming, retry_count reset');

# --- source unreachable when the subscription starts -----------------------
$source->safe_psql('postgres', q{
CREATE TABLE u (id int PRIMARY KEY, v text);
CREATE PUBLICATION pub2 FOR TABLE u;
INSERT INTO u VALUES (1, 'before'), (2, 'before');
});
$dest->safe_psql('postgres', q{CREATE TABLE u (id int PRIMARY KEY, v text); SELECT cdc.register_mapping('u', outbox => true, source_name => 'sub2');});
# A fast shutdown of the source must complete while the worker is connected
# and idle (the walsender waits for the worker to confirm the end of WAL).
{
	local $ENV{PGCTLTIMEOUT} = 20;
	ok($source->stop('fast', fail_ok => 1), 'source fast shutdown completes while the worker is connected')
	  or $source->stop('immediate');
}
create_subscription($dest, $source, 'sub2', ['pub2']);
ok(wait_status($dest, 'sub2', q{state = 'error' AND retry_count > 0 AND last_error LIKE '%could not connect%'}),
	'unreachable source: state error with a connection error, retrying');
ok(wait_status($dest, 'sub2', q{retry_count > 1}), 'retry_count grows while the source is down');
$source->start;
ok(wait_caught_up($source, $dest, 'sub2'), 'sub2 copies and streams once the source is up');
is($dest->safe_psql('postgres', q{SELECT snapshot_rows FROM cdc.stats WHERE target = 'u'::regclass}), '2', 'u: two snapshot rows');
$source->safe_psql('postgres', q{INSERT INTO u VALUES (3, 'streamed'); UPDATE u SET v = 'changed' WHERE id = 1;});
ok(wait_caught_up($source, $dest, 'sub2'), 'sub2 streams');
compare_table($source, $dest, 'SELECT * FROM u ORDER BY 1', 'u: destination equals source');
is($dest->safe_psql('postgres', q{SELECT string_agg(op, '' ORDER BY id) || '|' || count(DISTINCT idempotency_key) FROM cdc.outbox WHERE target = 'u'::regclass}),
	'cu|2', 'u: one outbox row per streamed change');
ok(wait_status($dest, 'sub2', q{state = 'streaming' AND retry_count = 0}), 'sub2 streaming, retry_count reset');
$changes += workload(5);
check_exactly_once($changes, 'sub1 after the source outage');

$dest->stop;
$source->stop;
done_testing();

# The worker commits with synchronous_commit = off (cdc.synchronous_commit)
# and must report to the source as flushed only what is durable here.  Found
# by the worker torture suite (seed 4242): a worker started right after its
# predecessor's last asynchronous commit read that commit's progress from the
# replication origin (shared memory), reported it to the source as flushed
# before the local WAL was flushed, and a kill -9 of the destination then
# lost the commit while the source had already released it: the source
# transactions between the two positions were never applied.
#
# Deterministic here: wal_writer_delay = 10s keeps an asynchronous commit
# unflushed for seconds (nothing else on the destination flushes WAL).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest', "wal_writer_delay = 10s\n");

my $tables = q{CREATE TABLE a (id int PRIMARY KEY, v text);};
$source->safe_psql('postgres', $tables . q{CREATE PUBLICATION pub FOR TABLE a;});
$dest->safe_psql('postgres', $tables . q{SELECT cdc.register_mapping('a', outbox => true, source_name => 'sub');});
create_subscription($dest, $source, 'sub', ['pub']);
ok(wait_caught_up($source, $dest, 'sub'), 'streaming');
probe_create($source, 'probe');

for my $round (1 .. 3) {
	$source->safe_psql('postgres', "INSERT INTO a VALUES ($round, 'row $round')");
	my $tx = probe_read($source, 'probe', 'pub');
	my $end = $tx->[-1]{end_lsn};
	ok(wait_applied($dest, 'sub', $end), "round $round: applied (asynchronous local commit)");
	# a new worker takes over right after the asynchronous commit
	my $pid = status_row($dest, 'sub', 'worker_pid');
	$dest->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
	ok(wait_status($dest, 'sub', "worker_pid <> $pid AND state = 'streaming'"), "round $round: a new worker streams");
	# it tells the source the position is flushed (the source then never sends it again) ...
	ok($source->poll_query_until('postgres', "SELECT confirmed_flush_lsn >= '$end' FROM pg_replication_slots WHERE slot_name = 'sub'"),
		"round $round: the source has the position confirmed");
	# ... so it must be durable here: a crash must not lose it
	$dest->stop('immediate');
	$dest->start;
	$source->safe_psql('postgres', "INSERT INTO a VALUES (100 + $round, 'after the crash')");
	$tx = probe_read($source, 'probe', 'pub');
	ok(wait_applied($dest, 'sub', $tx->[-1]{end_lsn}), "round $round: caught up after the crash");
	compare_table($source, $dest, 'SELECT * FROM a ORDER BY 1', "round $round: destination equals source");
	is(outbox_summary($dest), ($round * 2) . '|' . ($round * 2), "round $round: one outbox row per source change");
}

probe_drop($source, 'probe');
$dest->stop;
$source->stop;
done_testing();

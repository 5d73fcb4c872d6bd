# The initial copy while the source is being written (issue 3, test 6):
# pgbench writes the published tables before, during and after the copy.
# Afterwards the destination equals the source, and the outbox holds exactly
# one row per source change committed at or after the slot's consistent
# point S (a key change counts two: the old key's delete and the new row),
# none for anything the copy delivered: no gap, no double effect.  The
# changes and their commit LSNs are read from a probe slot created before
# the workload.
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

my $tables = q{
CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84));
CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int, filler char(88));
CREATE TABLE pgbench_tellers (tid int PRIMARY KEY, bid int, tbalance int, filler char(84));
};
$dest->safe_psql('postgres', $tables);
for my $t (qw(pgbench_accounts pgbench_branches pgbench_tellers)) {
	$dest->safe_psql('postgres', "SELECT cdc.register_mapping('$t', outbox => true, source_name => 'cc')");
}
command_ok([ 'pgbench', '-i', '-s', '1', '-q', '-d', $source->connstr('postgres') ], 'pgbench -i -s 1 on the source');
$source->safe_psql('postgres', q{
CREATE SEQUENCE extra_aid START 1000001;
CREATE PUBLICATION cc FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers;
});
probe_create($source, 'probe_cc');

# Updates, inserts, deletes and key changes, one source transaction each or
# several in one.
my $script = PostgreSQL::Test::Utils::tempdir() . '/cdc_copy.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set aid random(1, 100000)
\set aid2 random(1, 100000)
\set tid random(1, 10)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = 1;
INSERT INTO pgbench_accounts VALUES (nextval('extra_aid'), 1, :delta, 'new');
END;
DELETE FROM pgbench_accounts WHERE aid = :aid2;
UPDATE pgbench_accounts SET aid = aid + 2000000 WHERE aid = :aid2 + 1;
});
# output to a file: a pipe that nobody drains would block pgbench
my $bench_log = PostgreSQL::Test::Utils::tempdir() . '/pgbench.log';
my $bench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '2', '-j', '1', '-t', '1000000', '-f', $script, $source->connstr('postgres') ],
	'<', '/dev/null', '>', $bench_log, '2>&1');
# the workload runs before the slot exists ...
$source->poll_query_until('postgres', q{SELECT count(*) >= 20 FROM pgbench_accounts WHERE aid > 1000000});
my $offset = -s $dest->logfile;
create_subscription($dest, $source, 'cc', ['cc']);
# ... while the slot is created and the tables are copied ...
$dest->wait_for_log(qr/subscription "cc": slot cc ready at/, $offset);
my ($s) = slurp_file($dest->logfile, $offset) =~ m{subscription "cc": slot cc ready at ([0-9A-F]+/[0-9A-F]+)};
ok(wait_status($dest, 'cc', q{state = 'streaming'}), "copy done (consistent point S = $s), streaming");
my $copied_at = source_lsn($source);
# ... and while the worker streams
$source->poll_query_until('postgres', "SELECT pg_current_wal_lsn() > '$copied_at'::pg_lsn + 100000");
$bench->kill_kill;
$bench->finish;
note('pgbench stopped: ' . slurp_file($bench_log));

ok(wait_caught_up($source, $dest, 'cc'), 'caught up');
for my $t ([ 'pgbench_accounts', 'aid' ], [ 'pgbench_branches', 'bid' ], [ 'pgbench_tellers', 'tid' ]) {
	my ($name, $key) = @$t;
	compare_table($source, $dest,
		"SELECT count(*), md5(string_agg(x::text, ',' ORDER BY $key)) FROM $name x",
		"$name: destination equals source");
}

# Expected outbox rows: the changes of the transactions committed at or
# after S (the copy delivered everything committed before it).
my $tx = probe_read($source, 'probe_cc', 'cc');
my ($before, $during, $expected, $changes) = (0, 0, 0, 0);
for my $t (@$tx) {
	if (lsn_num($t->{commit_lsn}) < lsn_num($s)) {
		$before++;
		next;
	}
	$during++ if lsn_num($t->{commit_lsn}) < lsn_num($copied_at);
	$changes += scalar @{ $t->{changes} };
	$expected += ($_->[0] eq 'U' && $_->[2] eq 'K') ? 2 : 1 for @{ $t->{changes} };
}
ok($before > 0, "$before source transactions committed before S (in the copy)");
ok($during > 0, "$during committed after S while the slot was created and the tables copied");
note('source transactions after S: ' . (scalar(@$tx) - $before) . ", their changes: $changes, expected outbox rows: $expected");
is(outbox_summary($dest, q{target::text LIKE 'pgbench%'}), "$expected|$expected",
	'outbox: exactly one row per change committed after S, keys distinct');
is($dest->safe_psql('postgres', q{SELECT sum(applied) - sum(snapshot_rows) || '|' || sum(duplicate) || '|' || sum(stale) || '|' || sum(conflict) || '|' || sum(outbox_rows)
  FROM cdc.stats WHERE target::text LIKE 'pgbench%'}), "$changes|0|0|0|$expected",
	'stats: every streamed change applied once; no duplicate, stale or conflict');
is(status_row($dest, 'cc', q{state || '|' || retry_count || '|' || coalesce(last_error, '')}), 'streaming|0|', 'no error');

probe_drop($source, 'probe_cc');
$dest->stop;
$source->stop;
done_testing();

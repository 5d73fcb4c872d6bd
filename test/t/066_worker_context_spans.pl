# The worker's error context when a change fails before it is queued (its
# target is resolved) while the queue of the local transaction holds changes
# of an earlier source transaction of the group (the queue spans source
# transactions): the CONTEXT line must name the failing change's source
# transaction and table, not claim that "the delivery key names the change"
# when no delivery key is in the message (found by a fresh-operator run:
# "source transaction X ... or one of the 1 before it in this local
# transaction (the delivery key names the change)" with no delivery key and
# no table).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest');

my $tables = q{
CREATE TABLE t1 (id int PRIMARY KEY, n int);
CREATE TABLE t2 (id int PRIMARY KEY, n int);
};
$source->safe_psql('postgres', $tables . q{
CREATE PUBLICATION pub FOR TABLE t1, t2;
INSERT INTO t1 SELECT g, g FROM generate_series(1, 5) g;
INSERT INTO t2 SELECT g, g FROM generate_series(1, 5) g;
});
$dest->safe_psql('postgres', $tables);
create_subscription($dest, $source, 'sub1', ['pub']);
ok(wait_caught_up($source, $dest, 'sub1'), 'initial copy done, streaming');

# Two source transactions applied in one local transaction: the first one's
# change is queued when the second one's change meets a missing table.
disable_and_wait($source, $dest, 'sub1');
$dest->safe_psql('postgres', 'ALTER TABLE t2 RENAME TO t2_gone');
$source->safe_psql('postgres', 'UPDATE t1 SET n = n + 1 WHERE id = 1');
my $xid = $source->safe_psql('postgres', 'UPDATE t2 SET n = n + 1 WHERE id = 1 RETURNING xmin');
my $offset = -s $dest->logfile;
enable_subscription($dest, 'sub1');
ok(wait_for_log($dest, qr/a local transaction of 2 source transactions failed/, $offset),
	'the group of two source transactions fails and is retried one by one');
ok(wait_status($dest, 'sub1', q{state = 'error' AND retry_count >= 1}), 'state error');

my $log = slurp_file($dest->logfile, $offset);
my @contexts = $log =~ /ERROR:  published table public\.t2 has no destination table\n(?:.*HINT:.*\n)?.*CONTEXT:  ([^\n]*)/g;
ok(@contexts >= 2, 'the error is logged with its context, in the group and one by one');
for my $c (@contexts) {
	like($c, qr/source transaction $xid committed at [0-9A-F]+\/[0-9A-F]+, table public\.t2$/,
		'the context names the failing source transaction and its table');
	unlike($c, qr/the delivery key names the change/, 'no delivery key is claimed where none is given');
}
like(status_row($dest, 'sub1', 'last_error'), qr/CONTEXT: .*source transaction $xid committed at .*, table public\.t2/s,
	'last_error names the source transaction and table');

# the table back: the worker applies both, destination equals source
$dest->safe_psql('postgres', 'ALTER TABLE t2_gone RENAME TO t2');
ok(wait_caught_up($source, $dest, 'sub1'), 'streaming again');
compare_table($source, $dest, 'SELECT * FROM t1 ORDER BY 1', 't1 equal');
compare_table($source, $dest, 'SELECT * FROM t2 ORDER BY 1', 't2 equal');

done_testing();

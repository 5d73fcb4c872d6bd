# After an error the apply worker writes its error record (state 'error',
# last_error, retry_count + 1 in cdc.subscription_state, a row of
# cdc.subscription_errors), waits its backoff and exits; the launcher
# starts it again.  When the write of that record failed itself (a
# read-only session, a lock timeout, any error inside it), the second error
# escaped from the worker's error handler: the process exited at once,
# without its backoff, the launcher restarted it at once (a reviewer saw
# about 1,500 worker processes in 30 s), the status row kept 'streaming' or
# 'starting' with no error, and nothing in the log said that the error had
# not been recorded.  The write now runs guarded: when it fails the worker
# logs a WARNING naming both errors, still waits the same backoff, logs
# that it waited, and only then exits.
#
# The fault point cdc.debug_fault = 'record_error' makes the write fail
# (ERROR inside its transaction, rolled back).  The assertions use only the
# order of the server log's lines, no time: a destination CHECK constraint
# that the source's row violates makes every worker fail the same way, and
# the test waits (the sync point) until two worker processes have hit that
# error; the first one must have logged the WARNING and the end of its
# backoff before the second one logged anything.
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

$source->safe_psql('postgres', q{
	CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL);
	INSERT INTO t SELECT g, g FROM generate_series(1, 5) g;
	CREATE PUBLICATION p FOR TABLE t});
$dest->safe_psql('postgres', q{CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL CONSTRAINT t_n_small CHECK (n < 100))});
create_subscription($dest, $source, 'sub', ['p']);
ok(wait_caught_up($source, $dest, 'sub'), 'the copy is applied');

# The write of the error record fails from now on; the next row fails the CHECK.
set_fault($dest, 'record_error');
my $offset = -s $dest->logfile;
$source->safe_psql('postgres', q{INSERT INTO t VALUES (6, 1000)});

# Sync point: two worker processes have hit the error.
my $err_re = qr/ERROR:\s+new row for relation "t" violates check constraint "t_n_small"/;
ok(wait_for_log($dest, qr/$err_re(?s:.*)$err_re/, $offset), 'two worker processes hit the error');

# The log's lines from the offset: [pid, line], continuation lines (DETAIL,
# CONTEXT, statement text) carry the prefix too.
my @lines;
for my $l (split /\n/, slurp_file($dest->logfile, $offset)) {
	push @lines, [ $1, $l ] if $l =~ /^\S+ \S+ \S+ \[(\d+)\] /;
}
my @errors = grep { $lines[$_][1] =~ $err_re } 0 .. $#lines;
my ($e1, $e2) = @errors[ 0, 1 ];
my ($p1, $p2) = ($lines[$e1][0], $lines[$e2][0]);
isnt($p2, $p1, 'the second error is of another worker process');

# What the first worker logged between its error and the second one's.
sub first_line_of
{
	my ($pid, $re, $from) = @_;
	for my $i ($from .. $#lines) {
		return $i if $lines[$i][0] eq $pid && $lines[$i][1] =~ $re;
	}
	return undef;
}
my $warn = first_line_of($p1,
	qr/WARNING:\s+cdc_apply subscription "sub": could not record the error "new row for relation "t" violates check constraint "t_n_small"".*fault point record_error/,
	$e1);
ok(defined $warn, 'a WARNING names the original error and the failure to record it')
  or diag(join("\n", map { $_->[1] } @lines[ $e1 .. $e2 ]));
my $waited = first_line_of($p1, qr/LOG:\s+cdc_apply subscription "sub": waited \d+ ms after the error that could not be recorded; exiting/, $e1);
ok(defined $waited && defined $warn && $waited > $warn, 'then the worker logged that it waited its backoff');
my ($p2_first) = grep { $lines[$_][0] eq $p2 } 0 .. $#lines;
ok(defined $waited && $p2_first > $waited, 'the next worker process logged nothing before the first one had backed off');
ok(!defined first_line_of($p1, qr/ERROR:\s+cdc_apply: fault point record_error/, $e1),
	'the failure to record is no uncaught ERROR of the worker');

# The shared counters count these errors although no row records them.
ok($dest->safe_psql('postgres', q{
	SELECT errors >= 2 FROM cdc.worker_stats WHERE subscription = 'sub'}) eq 't', 'cdc.worker_stats counts the unrecorded errors');

# Without the fault the error is recorded again, as before.
set_fault($dest, undef);
ok(wait_status($dest, 'sub', q{state = 'error' AND last_error LIKE '%t_n_small%' AND retry_count > 0}),
	'without the fault the status row shows the error');

# The operator fixes the destination: the row is applied.
$dest->safe_psql('postgres', q{ALTER TABLE t DROP CONSTRAINT t_n_small});
ok(wait_caught_up($source, $dest, 'sub'), 'after the fix the worker streams again');
same_id_n_rows($source, $dest, 't', 'after the fix');

$dest->stop;
$source->stop;
done_testing();

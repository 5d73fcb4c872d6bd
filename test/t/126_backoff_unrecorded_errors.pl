# The worker's restart backoff doubles also when its error cannot be
# recorded (docs/operations.md, "How the worker retries"; review h2).
#
# After an error the worker waits cdc.retry_backoff x 2^(n-1), n being its
# consecutive failures, then exits and the launcher starts it again.  n
# came only from cdc.subscription_state.retry_count, which the error record
# increments: when that write fails (a read-only session, a lock timeout, a
# full disk: TAP 114), the count stayed where it was, and every restart
# waited the same first delay for as long as the cause lasted, however
# long.  The worker now also counts, in shared memory, the consecutive
# errors it could not record, and backs off from the sum.
#
# The fault point cdc.debug_fault = 'record_error' makes the write fail;
# a destination CHECK constraint that the source's row violates makes every
# worker process fail.  Each worker process logs the delay it waited
# ("waited N ms after the error that could not be recorded"); the sync
# point is the fourth such line.  With cdc.retry_backoff = 200ms and
# cdc.retry_backoff_max = 2 s the delays must be 200, 400, 800, 1600 (the
# old code: 200 each time).  The delays are read from the log, not timed.
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

set_fault($dest, 'record_error');
my $offset = -s $dest->logfile;
$source->safe_psql('postgres', q{INSERT INTO t VALUES (6, 1000)});

my $waited_re = qr/LOG:\s+cdc_apply subscription "sub": waited (\d+) ms after the error that could not be recorded; exiting/;
ok(wait_for_log($dest, qr/(?s:$waited_re.*){4}/, $offset), 'four worker processes backed off after an unrecorded error');
my @delays = (slurp_file($dest->logfile, $offset) =~ /$waited_re/g);
is(join(',', @delays[0 .. 3]), '200,400,800,1600', 'the backoff doubles at each consecutive unrecorded error');

# The cause goes away: the worker applies the row and streams again.
set_fault($dest, undef);
$dest->safe_psql('postgres', 'ALTER TABLE t DROP CONSTRAINT t_n_small');
ok($dest->poll_query_until('postgres', 'SELECT count(*) = 1 FROM t WHERE id = 6 AND n = 1000'), 'the row arrives once the cause is gone');
ok(wait_caught_up($source, $dest, 'sub'), 'and the worker streams');
is(status_row($dest, 'sub', 'retry_count'), '0', 'retry_count is 0 again');

$dest->stop;
$source->stop;
done_testing();

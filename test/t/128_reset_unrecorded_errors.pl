# cdc.reset_shared_stats() also zeroes the count of consecutive errors the
# worker could not record (review h3).
#
# The worker backs off from cdc.subscription_state.retry_count plus the
# errors in a row it could not record, a count kept in shared memory with
# the other worker counters (TAP 126).  cdc.reset_shared_stats() zeroed
# every counter of the entry but that one: after a reset, cdc.worker_stats
# said 0 errors while the next restart still waited as after the fourth
# unrecorded error (1600 ms and more instead of 200).  Now the reset zeroes
# it too, and the backoff starts again from the first delay.
#
# cdc.debug_fault = 'record_error' makes the error record fail, a CHECK
# constraint makes every worker process fail.  Three processes back off
# (200, 400, 800 ms, read from the log); the subscription is disabled (no
# worker left, the sync point), the counters reset, the subscription
# enabled: the next delay logged must be 200.  Delays are read from the
# log, never timed.
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
ok(wait_for_log($dest, qr/(?s:$waited_re.*){3}/, $offset), 'three worker processes backed off after an unrecorded error');
my @delays = (slurp_file($dest->logfile, $offset) =~ /$waited_re/g);
is(join(',', @delays[0 .. 2]), '200,400,800', 'the backoff doubles at each consecutive unrecorded error');

# No worker left: nothing counts an error while the counters are reset.
disable_and_wait($source, $dest, 'sub');
isnt($dest->safe_psql('postgres', 'SELECT cdc.reset_shared_stats()'), '', 'the shared counters are reset');
is($dest->safe_psql('postgres', q{SELECT errors FROM cdc.worker_stats WHERE subscription = 'sub'}), '0',
	'cdc.worker_stats counts no error after the reset');
$offset = -s $dest->logfile;
enable_subscription($dest, 'sub');
ok(wait_for_log($dest, $waited_re, $offset), 'the worker fails again and backs off');
@delays = (slurp_file($dest->logfile, $offset) =~ /$waited_re/g);
is($delays[0], '200', 'after the reset the backoff starts again from cdc.retry_backoff');

# The cause goes away: the worker applies the row and streams again.
set_fault($dest, undef);
$dest->safe_psql('postgres', 'ALTER TABLE t DROP CONSTRAINT t_n_small');
ok($dest->poll_query_until('postgres', 'SELECT count(*) = 1 FROM t WHERE id = 6 AND n = 1000'), 'the row arrives once the cause is gone');
ok(wait_caught_up($source, $dest, 'sub'), 'and the worker streams');

$dest->stop;
$source->stop;
done_testing();

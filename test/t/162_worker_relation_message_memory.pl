# Security review h2: a source's RELATION messages against the worker's
# memory (docs/security.md, "Event size"; promise 4, resources bounded by
# settings a superuser controls).  The walsender sends a table's RELATION
# message again after every invalidation of the table on the source (an
# ALTER TABLE, a GRANT, an ANALYZE: pgoutput's rel_sync_cache_relation_cb
# resets schema_sent), and a source superuser can send as many as it likes.
# The worker kept every copy: handle_relation replaced its entry's relation
# and left the previous one in CdcWorkerContext, which lives as long as the
# worker, so each message grew the worker by the message's decoded size
# (here a table of 400 columns with 60-byte names, about 30 kB a message)
# without bound, whatever cdc.max_event_size says.  Expected: the worker's
# CdcWorkerContext (pg_log_backend_memory_contexts) grows by less than one
# megabyte over 300 such messages, and the changes between them are applied.
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

my $ncols = 400;
my $cols = join(', ', map { sprintf('c%03d_%s int', $_, 'x' x 55) } 1 .. $ncols);
for my $node ($source, $dest) {
	$node->safe_psql('postgres', "CREATE TABLE public.wide (id int PRIMARY KEY, n int, $cols)");
}
$source->safe_psql('postgres', q{
INSERT INTO public.wide (id, n) VALUES (1, 0);
CREATE PUBLICATION pub FOR TABLE public.wide;
});
create_subscription($dest, $source, 'sub', ['pub']);
ok(wait_caught_up($source, $dest, 'sub'), 'the copy is done and the worker streams');

my $pid = $dest->safe_psql('postgres', q{SELECT worker_pid FROM cdc.subscription_status WHERE name = 'sub'});
like($pid, qr/^\d+$/, 'the worker runs');

# CdcWorkerContext's total bytes, as the worker logs them on request
sub worker_context_bytes
{
	my $offset = -s $dest->logfile;
	$dest->safe_psql('postgres', "SELECT pg_log_backend_memory_contexts($pid)");
	my $re = qr/CdcWorkerContext: (\d+) total in/;
	wait_for_log($dest, $re, $offset) or return undef;
	my ($bytes) = slurp_file($dest->logfile, $offset) =~ $re;
	return $bytes;
}

# one transaction of the source per change, each after an invalidation of
# the table, so that each change comes after a RELATION message
my $before = worker_context_bytes();
$source->safe_psql('postgres', q{
CREATE PROCEDURE churn(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    EXECUTE format('ALTER TABLE public.wide SET (fillfactor = %s)', 90 + i % 10);
    COMMIT;
    UPDATE public.wide SET n = i WHERE id = 1;
    COMMIT;
  END LOOP;
END $$;
CALL churn(300);
});
ok(wait_caught_up($source, $dest, 'sub'), 'the worker applied the changes');
is($dest->safe_psql('postgres', 'SELECT n FROM public.wide WHERE id = 1'), '300', 'the last change is applied');
is($dest->safe_psql('postgres', q{SELECT worker_pid FROM cdc.subscription_status WHERE name = 'sub'}), $pid,
	'the same worker applied them');
my $after = worker_context_bytes();
ok(defined $before && defined $after, 'the worker logged its memory contexts');
my $growth = $after - $before;
cmp_ok($growth, '<', 1024 * 1024,
	"CdcWorkerContext grew by less than 1 MB over 300 RELATION messages (before $before, after $after bytes)");

done_testing();

# An idle worker writes its status (and asks the source for a keepalive)
# every cdc.status_interval (docs/worker.md: "how often the worker writes
# cdc.subscription_state and sends standby status"), whatever wakes it in
# between: a reload, a keepalive, WAL of tables it does not subscribe.
#
# Found by a fresh-user run (h2): the stream loop waited a whole
# cdc.status_interval after every wake-up, so a wake-up just before the
# status was due put it off by up to one more interval (3.8 s between two
# writes with cdc.status_interval = 2s).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest', "cdc.status_interval = 2s\n");

$source->safe_psql('postgres', q{
CREATE TABLE si (id int PRIMARY KEY);
CREATE PUBLICATION pub FOR TABLE si;
});
$dest->safe_psql('postgres', 'CREATE TABLE si (id int PRIMARY KEY)');
create_subscription($dest, $source, 'si', ['pub']);
ok(wait_caught_up($source, $dest, 'si'), 'streaming, idle');

# Wait for a status write, wake the worker 1.9 s later (a reload sets its
# latch), and measure the time to the next status write.
my $gap_sql = q{
DO $$
DECLARE u0 timestamptz; u1 timestamptz; u2 timestamptz;
BEGIN
  SELECT updated_at INTO u0 FROM cdc.subscription_state;
  LOOP SELECT updated_at INTO u1 FROM cdc.subscription_state; EXIT WHEN u1 <> u0; PERFORM pg_sleep(0.02); END LOOP;
  PERFORM pg_sleep(1.9);
  PERFORM pg_reload_conf();
  LOOP SELECT updated_at INTO u2 FROM cdc.subscription_state; EXIT WHEN u2 <> u1; PERFORM pg_sleep(0.02); END LOOP;
  RAISE NOTICE 'gap %', extract(epoch FROM u2 - u1);
END $$};
for my $round (1 .. 3) {
	my ($ret, $out, $err) = $dest->psql('postgres', $gap_sql);
	my ($gap) = $err =~ /gap ([0-9.]+)/;
	ok(defined $gap && $gap < 3.0, "round $round: the next status write came cdc.status_interval after the last, a wake-up in between did not put it off")
	  or diag('seconds between two status writes: ' . ($gap // "none ($err)"));
}

done_testing();

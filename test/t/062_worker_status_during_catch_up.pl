# Status and feedback keep coming while the worker catches up
# (docs/worker.md: "Feedback is sent on keepalives that request a reply and
# every cdc.status_interval"; cdc.status_interval: "how often the worker
# writes cdc.subscription_state and sends standby status").
#
# The stream loop reads the socket before waiting for it (6fab1d6).  While
# the worker catches up a backlog the socket nearly always holds more, so a
# loop that writes its status and feedback only when it is about to wait
# never writes them until the backlog is gone: cdc.subscription_status
# shows the received position of the start of the catch-up for all of it,
# and the source's slot keeps every byte of WAL of the backlog (its
# confirmed_flush_lsn does not move) until then, or until its walsender asks
# for a reply at wal_sender_timeout / 2.
#
# A backlog of 1,500 one-row transactions of about 2 kB each, applied with
# an ALWAYS trigger that sleeps 5 ms per row (a catch-up of about 8 s, with
# no grouping so that every source transaction is committed on its own):
# during it, the status row's received_lsn and the slot's
# confirmed_flush_lsn must move several times.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
$source->append_conf('postgresql.conf', "wal_sender_timeout = 0\n");
$source->restart;
my $dest = new_dest('dest', "cdc.group_max_transactions = 1\ncdc.status_interval = 100ms\n");

sub dq { return $dest->safe_psql('postgres', $_[0]); }
sub sq { return $source->safe_psql('postgres', $_[0]); }

sq(q{
CREATE TABLE big (id int PRIMARY KEY, v text);
CREATE PUBLICATION pub FOR TABLE big;
});
dq(q{
CREATE TABLE big (id int PRIMARY KEY, v text);
CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_catalog.pg_sleep(0.005); RETURN NEW; END $$;
CREATE TRIGGER slow BEFORE INSERT ON big FOR EACH ROW EXECUTE FUNCTION slow();
ALTER TABLE big ENABLE ALWAYS TRIGGER slow;
});
create_subscription($dest, $source, 'cu', ['pub'], 'copy_data => false');
ok(wait_status($dest, 'cu', q{state = 'streaming'}), 'streaming');
sq(q{INSERT INTO big VALUES (0, 'x')});
ok(wait_caught_up($source, $dest, 'cu'), 'caught up');
disable_and_wait($source, $dest, 'cu');

my $n = 1500;
sq(qq{DO \$\$ BEGIN
  FOR i IN 1 .. $n LOOP
    INSERT INTO big SELECT i, string_agg(md5(i::text || ':' || j::text), '') FROM generate_series(1, 32) j;
    COMMIT;
  END LOOP;
END \$\$});
my $end = source_lsn($source);

enable_subscription($dest, 'cu');
# sample the status row and the slot while the backlog is applied
my (%received, %confirmed);
my $samples = 0;
my $deadline = time() + 180;
while (time() < $deadline) {
	my $rows = dq('SELECT count(*) FROM big');
	last if $rows >= $n + 1;
	if ($rows > 0) {
		$samples++;
		my $r = dq(q{SELECT received_lsn FROM cdc.subscription_status WHERE name = 'cu'});
		my $c = sq(q{SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'cu'});
		$received{$r} = 1;
		$confirmed{$c} = 1;
	}
	usleep(200_000);
}
ok(wait_caught_up($source, $dest, 'cu', $end), 'the backlog is applied');
note("samples $samples, received_lsn values " . scalar(keys %received) . ", confirmed_flush_lsn values " . scalar(keys %confirmed));
cmp_ok($samples, '>=', 10, 'the catch-up took long enough to sample');
cmp_ok(scalar(keys %received), '>=', 4, 'cdc.subscription_status.received_lsn moved during the catch-up');
cmp_ok(scalar(keys %confirmed), '>=', 4, "the source's slot was confirmed during the catch-up");

done_testing();

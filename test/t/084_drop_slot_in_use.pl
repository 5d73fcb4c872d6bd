# cdc.drop_subscription(name, drop_slot => true) while another process holds
# the slot on the source (a client left streaming from it, a worker of the
# subscription not yet gone).  DROP_REPLICATION_SLOT ... WAIT waits until
# the slot is free; that wait ran in a blocking PQexec, so neither a cancel
# nor statement_timeout could end cdc.drop_subscription: the session hung
# for as long as the other process held the slot.  Now the wait is
# interruptible (src/pg/worker/source_conn.cpp, drop_source_slot_pg):
#
#   timeout   statement_timeout ends the drop while the slot is held; the
#             subscription and the slot both stay (nothing half-done).
#   freed     once the slot is free, the same call drops both.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest');
sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { return $dest->safe_psql('postgres', $_[0]); }

my $t = 'CREATE TABLE tk (id int PRIMARY KEY, n int NOT NULL);';
sq($t . 'CREATE PUBLICATION pk FOR TABLE tk;');
dq($t);
create_subscription($dest, $source, 'sd', ['pk'], 'copy_data => false, enabled => false');
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sd'}), '1', 'the slot exists from the creation');

# Another client streams from the slot: it is active, and stays so until killed.
my $recv = hold_slot($source, 'sd', 'pk');
ok($recv, 'the slot is held by another client');

# --- timeout: the drop waits for the slot, and statement_timeout ends it ----
my ($stdout, $stderr) = ('', '');
my $h = IPC::Run::start(
	[ $dest->installed_command('psql'), '-XAtq', '-d', $dest->connstr('postgres'), '-c',
	  q{SET statement_timeout = '1s'}, '-c', q{SELECT cdc.drop_subscription('sd', drop_slot => true)} ],
	'>', \$stdout, '2>', \$stderr);
# An order, not a time: the call must return while the client still holds
# the slot.  The limit is only the test's own timeout.
my $t0 = time;
while ($h->pumpable && time - $t0 < $PostgreSQL::Test::Utils::timeout_default) { $h->pump_nb; select(undef, undef, undef, 0.1); }
my $returned_first = !$h->pumpable;
is(sq(q{SELECT active FROM pg_replication_slots WHERE slot_name = 'sd'}), 't', 'timeout: the client still holds the slot');
release_slot($recv);
$h->finish;
ok($returned_first, 'timeout: statement_timeout interrupts the wait for the slot');
like($stderr, qr/canceling statement due to statement timeout/, 'timeout: reported as the statement timeout');
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name = 'sd'}), '1', 'timeout: the subscription stays');
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sd'}), '1', 'timeout: the slot stays');

# --- freed: the same call drops both -----------------------------------------
ok($source->poll_query_until('postgres', q{SELECT NOT active FROM pg_replication_slots WHERE slot_name = 'sd'}),
	'freed: the client is gone');
dq(q{SELECT cdc.drop_subscription('sd', drop_slot => true)});
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name = 'sd'}), '0', 'freed: no subscription');
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sd'}), '0', 'freed: no slot');

$dest->stop;
$source->stop;
done_testing();

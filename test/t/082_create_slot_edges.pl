# Edges of cdc.create_subscription(copy_data => false) creating the slot on
# the source with the subscription (review h2 of 24e32ed).  The slot cannot
# roll back with the destination's transaction; it is now made at the
# creating transaction's pre-commit (TAP 083 for transaction blocks, DO
# blocks, savepoints, PREPARE).
#
#   multi      several statements in one query string (an implicit
#              transaction block): accepted (it was refused with 25001),
#              the slot made when the string's transaction commits.
#   timeout    statement_timeout while CREATE_REPLICATION_SLOT waits for a
#              source transaction (now at the statement's commit): the
#              wait is interruptible and cancels the command on the
#              source, so no slot stays without its subscription (it did
#              stay while PQexec could not be cancelled).
# Not here (open, docs/worker.md): a slot advanced on the source before
# the worker took it over stops the worker with no way out but dropping
# the subscription.
#   errors     unreachable source 08001, bad password 08001 without the
#              password, no free slot 53400, invalid slot name 42602: no
#              subscription left (these hold).
#   dropped/altered before the worker ran: drop_slot drops the slot;
#              new publications' changes since the creation are applied; a
#              conninfo to another database of the source adopts the old
#              database's slot and fails on START_REPLICATION ("not created
#              in this database"), drop_slot still drops it (these hold).
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
sub slots { return sq(qq{SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$_[0]'}); }
sub subs { return dq(qq{SELECT count(*) FROM cdc.subscription WHERE name = '$_[0]'}); }

my $t = 'CREATE TABLE tk (id int PRIMARY KEY, n int NOT NULL); INSERT INTO tk SELECT g, g FROM generate_series(1, 5) g;';
sq($t . 'CREATE PUBLICATION pk FOR TABLE tk;');
dq($t);
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
my ($rc, $out, $err);

# --- several statements in one query string: an implicit transaction block --
my ($mout, $merr) = ('', '');
IPC::Run::run([ $dest->installed_command('psql'), '-XAtq', '-d', $dest->connstr('postgres'), '-c',
	qq{SELECT 1; SELECT cdc.create_subscription('s7', '$conn', ARRAY['pk'], copy_data => false)} ],
	'>', \$mout, '2>', \$merr);
is($merr, '', 'multi: accepted in a multi-statement query string');
is(slots('s7'), '1', 'multi: the slot s7 made at its commit');
dq(q{SELECT cdc.drop_subscription('s7', drop_slot => true)});

# --- timeout ----------------------------------------------------------------
my $open = $source->background_psql('postgres');
$open->query_safe(q{BEGIN; SELECT txid_current()});
my $stdout = '';
my $stderr = '';
my $h = IPC::Run::start(
	[ $dest->installed_command('psql'), '-XAtq', '-d', $dest->connstr('postgres'), '-c',
	  q{SET statement_timeout = '1s'}, '-c',
	  qq{SELECT cdc.create_subscription('s4', '$conn', ARRAY['pk'], copy_data => false)} ],
	'>', \$stdout, '2>', \$stderr);
# An order, not a time: the call must return while the source transaction
# it waits for is still open (before the fix it returned only after that
# transaction's COMMIT).  The limit is only the test's own timeout.
my $t0 = time;
while ($h->pumpable && time - $t0 < $PostgreSQL::Test::Utils::timeout_default) { $h->pump_nb; select(undef, undef, undef, 0.1); }
my $returned_first = !$h->pumpable;
$open->query_safe('COMMIT');
$open->quit;
$h->finish;
ok($returned_first, 'timeout: statement_timeout interrupts the wait for the source transaction');
like($stderr, qr/canceling statement due to statement timeout/, 'timeout: reported as the statement timeout');
my ($s4sub, $s4slot) = (subs('s4'), slots('s4'));
note("timeout: stderr $stderr, subscription $s4sub, slot $s4slot");
is($s4slot, $s4sub, 'timeout: a slot s4 on the source only with a subscription s4');
if ($s4sub eq '1') { dq(q{SELECT cdc.drop_subscription('s4', drop_slot => true)}); }
sq(q{SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 's4'});

# --- errors: SQLSTATE, nothing left, no password in the message -------------
sub create_err
{
	my ($name, $c, $extra) = @_;
	$extra = $extra ? ", $extra" : '';
	my ($r, $o, $e) = $dest->psql('postgres',
		qq{\\set VERBOSITY verbose
SELECT cdc.create_subscription('$name', '$c', ARRAY['pk'], copy_data => false$extra)});
	return $e;
}
my $e = create_err('s9', 'host=127.0.0.1 port=1 dbname=postgres');
like($e, qr/ERROR:  08001: could not connect to the source to create slot "s9"/, 'unreachable: 08001');
is(subs('s9'), '0', 'unreachable: no subscription');
sq(q{CREATE ROLE pw LOGIN REPLICATION SUPERUSER PASSWORD 'right-pw'});
$source->append_conf('pg_hba.conf', '');
{
	my $hba = $source->data_dir . '/pg_hba.conf';
	my $old = PostgreSQL::Test::Utils::slurp_file($hba);
	open(my $fh, '>', $hba) or die;
	print $fh "local all pw scram-sha-256\nlocal replication pw scram-sha-256\n$old";
	close $fh;
	$source->reload;
}
(my $pwconn = $source->connstr('postgres') . " user=pw password=Wrong-Secret-42") =~ s/'/''/g;
$e = create_err('s10', $pwconn);
like($e, qr/ERROR:  08001: .*password authentication failed/s, 'bad password: 08001');
unlike($e, qr/Wrong-Secret-42/, 'bad password: the password is not in the message');
is(subs('s10'), '0', 'bad password: no subscription');
my $free = sq(q{SELECT current_setting('max_replication_slots')::int - count(*) FROM pg_replication_slots});
sq(qq{SELECT pg_create_physical_replication_slot('fill_' || g) FROM generate_series(1, $free) g});
$e = create_err('s11', $conn);
like($e, qr/ERROR:  53400: could not create slot "s11" on the source: .*all replication slots are in use/s,
	'no free slot on the source: 53400');
is(subs('s11'), '0', 'no free slot: no subscription');
sq(q{SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'fill\_%'});
$e = create_err('s12', $conn, q{slot_name => 'Bad-Slot'});
# refused by cdc.create_subscription itself, before the source is asked (sql/subscription_names.sql)
like($e, qr/ERROR:  42602: invalid replication slot name 'Bad-Slot'/, 'invalid slot name: 42602');
is(subs('s12'), '0', 'invalid slot name: no subscription');

# --- dropped before the worker ran ------------------------------------------
create_subscription($dest, $source, 's13', ['pk'], 'copy_data => false, enabled => false');
dq(q{SELECT cdc.drop_subscription('s13', drop_slot => true)});
is(slots('s13'), '0', 'dropped before the worker ran, drop_slot: no slot');
create_subscription($dest, $source, 's14', ['pk'], 'copy_data => false, enabled => false');
dq(q{SELECT cdc.drop_subscription('s14')});
is(slots('s14'), '1', 'dropped before the worker ran, without drop_slot: the slot stays (docs/worker.md: drop_slot drops it)');
sq(q{SELECT pg_drop_replication_slot('s14')});

# --- altered before the worker ran ------------------------------------------
sq(q{CREATE TABLE tk2 (id int PRIMARY KEY, n int NOT NULL); INSERT INTO tk2 SELECT g, g FROM generate_series(1, 5) g;
     CREATE PUBLICATION pk2 FOR TABLE tk2;});
dq(q{CREATE TABLE tk2 (id int PRIMARY KEY, n int NOT NULL); INSERT INTO tk2 SELECT g, g FROM generate_series(1, 5) g;});
create_subscription($dest, $source, 's15', ['pk'], 'copy_data => false, enabled => false');
dq(q{SELECT cdc.alter_subscription('s15', publications => ARRAY['pk', 'pk2'])});
sq(q{UPDATE tk SET n = 300 WHERE id = 3; UPDATE tk2 SET n = 300 WHERE id = 3});
dq(q{SELECT cdc.enable_subscription('s15')});
ok(wait_caught_up($source, $dest, 's15'), 'altered publications: streaming');
same_id_n_rows($source, $dest, 'tk', 'altered publications: tk');
same_id_n_rows($source, $dest, 'tk2', 'altered publications: tk2 (changed before the worker ran)');
dq(q{SELECT cdc.drop_subscription('s15', drop_slot => true)});
is(slots('s15'), '0', 'altered publications: slot dropped');

sq(q{CREATE DATABASE other});
$source->safe_psql('other', q{CREATE TABLE tk (id int PRIMARY KEY, n int NOT NULL); CREATE PUBLICATION pk FOR TABLE tk;});
create_subscription($dest, $source, 's16', ['pk'], 'copy_data => false, enabled => false');
(my $oconn = $source->connstr('other')) =~ s/'/''/g;
dq(qq{SELECT cdc.alter_subscription('s16', conninfo => '$oconn')});
dq(q{SELECT cdc.enable_subscription('s16')});
ok(wait_status($dest, 's16', q{state IN ('streaming', 'error')}), 'altered conninfo: the worker ran');
note('altered conninfo: ' . dq(q{SELECT state || ' ' || coalesce(last_error, '') FROM cdc.subscription_status WHERE name = 's16'}));
note('altered conninfo: slots ' . sq(q{SELECT string_agg(slot_name || '@' || database, ',') FROM pg_replication_slots}));
dq(q{SELECT cdc.drop_subscription('s16', drop_slot => true)});
is(slots('s16'), '0', 'altered conninfo: no slot s16 left on the source after drop_slot');

$dest->stop;
$source->stop;
done_testing();

# DROP DATABASE waits for a subscription being created (docs/worker.md,
# "Every database"; review h1).
#
# cdc.create_subscription marks its database, before commit, as having a
# subscription, so that DROP DATABASE of it is refused; its replication
# slot is made on the source at commit.  A database launcher that looked
# while that transaction was open counted no subscription, overwrote the
# mark and left; DROP DATABASE then went through (waiting for the creating
# session to end) and the slot made at commit stayed on the source,
# keeping WAL.  The transaction is now counted in the registry until it
# ends: the launcher stays and the guard counts a subscription.
#
#   1. a subscription created in database e in an open transaction, with
#      cdc.prune_interval = 0 (the mark alone brings a launcher);
#   2. e's launcher looks and stays (before: it left);
#   3. DROP DATABASE e is refused while the transaction is open;
#   4. after COMMIT the subscription streams; after it is dropped with its
#      slot, DROP DATABASE e succeeds and no slot is left on the source;
#   5. a creation rolled back in database f leaves no launcher and no slot,
#      and f can be dropped.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('pending_source');
$source->safe_psql('postgres', q{
CREATE TABLE t (id int PRIMARY KEY, v text);
CREATE PUBLICATION p FOR TABLE t;
});
my $dest = new_dest('pending_dest', "cdc.prune_interval = 0\n");
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
for my $db ('e', 'f')
{
	$dest->safe_psql('postgres', "CREATE DATABASE $db");
	$dest->safe_psql($db, 'CREATE EXTENSION cdc_apply; CREATE TABLE t (id int PRIMARY KEY, v text);');
}
my $launcher_in = sub {
	my ($db, $extra) = @_;
	return qq{SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'cdc_apply launcher' AND datname = '$db'}
	  . ($extra // '');
};

# 1, 2
my $bg = $dest->background_psql('e');
$bg->query_safe('BEGIN');
$bg->query_safe("SELECT cdc.create_subscription('r', '$conn', ARRAY['p'], copy_data => false)");
ok($dest->poll_query_until('postgres', $launcher_in->('e')), 'a launcher visits e while the creation is open');
ok($dest->poll_query_until('postgres', $launcher_in->('e', q{ AND state = 'idle'})),
	'e\'s launcher looked and stays while the creation is open');

# 3
my ($rc, $out, $err) = $dest->psql('postgres', 'DROP DATABASE e');
isnt($rc, 0, 'DROP DATABASE e is refused while the creation is open');
like($err, qr/has cdc_apply subscriptions/, 'the error says why');

# 4
$bg->query_safe('COMMIT');
$bg->quit;
$source->safe_psql('postgres', q{INSERT INTO t VALUES (1, 'a')});
ok($dest->poll_query_until('e', q{SELECT count(*) = 1 FROM t}), 'the subscription streams after COMMIT');
($rc, $out, $err) = $dest->psql('postgres', 'DROP DATABASE e');
isnt($rc, 0, 'DROP DATABASE e is refused while the subscription exists');
$dest->safe_psql('e', q{SELECT cdc.drop_subscription('r', drop_slot => true)});
my $dropped = 0;
for (1 .. 100)
{
	($rc, $out, $err) = $dest->psql('postgres', 'DROP DATABASE e');
	if ($rc == 0) { $dropped = 1; last; }
	sleep 1;
}
ok($dropped, 'DROP DATABASE e succeeds once the subscription is dropped') or diag($err);
is($source->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'r'}), '0',
	'no slot left on the source');

# 5
$bg = $dest->background_psql('f');
$bg->query_safe('BEGIN');
$bg->query_safe("SELECT cdc.create_subscription('r2', '$conn', ARRAY['p'], copy_data => false)");
ok($dest->poll_query_until('postgres', $launcher_in->('f')), 'a launcher visits f while the creation is open');
$bg->query_safe('ROLLBACK');
$bg->quit;
ok($dest->poll_query_until('postgres', 'SELECT NOT (' . $launcher_in->('f') . ')'),
	'after ROLLBACK f\'s launcher leaves');
$dropped = 0;
for (1 .. 100)
{
	($rc, $out, $err) = $dest->psql('postgres', 'DROP DATABASE f');
	if ($rc == 0) { $dropped = 1; last; }
	sleep 1;
}
ok($dropped, 'DROP DATABASE f succeeds after the rollback') or diag($err);
is($source->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots}), '0', 'no slot on the source');

done_testing();

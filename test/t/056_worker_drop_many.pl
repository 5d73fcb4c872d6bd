# Dropping subscriptions whose worker has just started (docs/worker.md,
# "Dropping"): a worker the launcher started a moment ago has read its
# subscription and taken its replication origin, but has not yet written
# its pid into the status row.  cdc.drop_subscription() used to stop only
# the worker that row named, so the origin drop found the origin in use
# (55006); a fresh-user run hit it dropping two subscriptions in one
# transaction while one of them was retrying.  The fault point
# pause_after:origin holds a starting worker exactly in that window.
#
# Asserts: one subscription and then two in one transaction are dropped
# with their workers in that window (no 55006), leaving no subscription,
# replication origin or worker behind; a third subscription streaming
# alongside keeps its worker and its rows.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source();
my $dest = new_dest();
sub dq { return $dest->safe_psql('postgres', $_[0]); }

for my $t (qw(a b c k)) {
	$source->safe_psql('postgres', "CREATE TABLE dm_$t (id int PRIMARY KEY, v text); CREATE PUBLICATION pub_dm_$t FOR TABLE dm_$t;");
	dq("CREATE TABLE dm_$t (id int PRIMARY KEY, v text)");
}

# The subscription that must not be disturbed: streaming before the fault is set.
create_subscription($dest, $source, 'dm_k', ['pub_dm_k']);
$source->safe_psql('postgres', "INSERT INTO dm_k VALUES (1, 'before')");
ok(wait_caught_up($source, $dest, 'dm_k'), 'dm_k streaming');
my $k_pid = status_row($dest, 'dm_k', 'worker_pid');

# Starts subscription $name and waits until its worker holds its origin at
# the fault point, its pid not in the status row.
sub start_paused
{
	my ($name) = @_;
	my $off = -s $dest->logfile;
	create_subscription($dest, $source, $name, ["pub_$name"], 'copy_data => false');
	ok(wait_for_log($dest, qr/fault point pause_after:origin reached/, $off), "$name: worker holds its origin");
	is(dq(qq{SELECT count(*) FROM pg_replication_origin_status s JOIN pg_replication_origin o ON o.roident = s.local_id
	           JOIN cdc.subscription sub ON o.roname = cdc._origin_name(sub.subid) WHERE sub.name = '$name'}),
		'1', "$name: its origin exists");
	is(dq(qq{SELECT worker_pid IS NULL FROM cdc.subscription_status WHERE name = '$name'}), 't',
		"$name: the status row names no worker yet");
}

set_fault($dest, 'pause_after:origin');

# One subscription.
start_paused('dm_a');
my ($rc, $out, $err) = $dest->psql('postgres', "SELECT cdc.drop_subscription('dm_a')");
is($rc, 0, 'one subscription with a starting worker is dropped') or diag($err);

# Two in one transaction (the fresh-user case).
start_paused('dm_b');
start_paused('dm_c');
($rc, $out, $err) = $dest->psql('postgres',
	"BEGIN; SELECT cdc.drop_subscription('dm_b'); SELECT cdc.drop_subscription('dm_c'); COMMIT;");
is($rc, 0, 'two subscriptions dropped in one transaction') or diag($err);
unlike($err // '', qr/in use/, 'no origin in use');
unlike($err // '', qr/not a PostgreSQL backend process/, 'no exited worker signalled by its recorded pid');

set_fault($dest, undef);

is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name LIKE 'dm\_%' AND name <> 'dm_k'}), '0', 'no subscription left');
is(dq(q{SELECT count(*) FROM pg_replication_origin o WHERE o.roname LIKE 'cdc\_%'
          AND NOT EXISTS (SELECT 1 FROM cdc.subscription s WHERE o.roname = cdc._origin_name(s.subid))}),
	'0', 'no replication origin left behind');
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'cdc_apply worker'}),
	'only the streaming subscription has a worker');

# Three streaming subscriptions dropped by one statement, slots too (a
# fresh-user run saw "PID … is not a PostgreSQL backend process" warnings
# there: the recorded pid of a worker already stopped was signalled again).
for my $t (qw(x y z)) {
	$source->safe_psql('postgres', "CREATE TABLE dm_$t (id int PRIMARY KEY); CREATE PUBLICATION pub_dm_$t FOR TABLE dm_$t;");
	dq("CREATE TABLE dm_$t (id int PRIMARY KEY)");
	create_subscription($dest, $source, "dm_$t", ["pub_dm_$t"]);
}
ok(wait_caught_up($source, $dest, "dm_$_"), "dm_$_ streaming") for qw(x y z);
($rc, $out, $err) = $dest->psql('postgres',
	q{SELECT count(cdc.drop_subscription(name, drop_slot => true)) FROM cdc.subscription WHERE name IN ('dm_x', 'dm_y', 'dm_z')});
is($rc, 0, 'three streaming subscriptions dropped by one statement') or diag($err);
is($err // '', '', 'without a warning');
is($source->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots WHERE slot_name IN ('dm_x', 'dm_y', 'dm_z')}),
	'0', 'their slots dropped');

# A worker whose CREATE_REPLICATION_SLOT waits for a transaction open on
# the source (a fresh-user run: it sat in a blocking PQexec that SIGTERM
# could not interrupt, the drop waited 10 s for it twice and failed with
# 55006).  Without drop_slot the slot, once the source transaction ends,
# stays on the source by contract.
{
	$source->safe_psql('postgres', 'CREATE TABLE dm_w (id int PRIMARY KEY); CREATE PUBLICATION pub_dm_w FOR TABLE dm_w;');
	dq('CREATE TABLE dm_w (id int PRIMARY KEY)');
	my $open = $source->background_psql('postgres');
	$open->query_safe('BEGIN');
	$open->query_safe('SELECT pg_catalog.txid_current()');
	create_subscription($dest, $source, 'dm_w', ['pub_dm_w']);
	ok($source->poll_query_until('postgres', q{SELECT EXISTS (SELECT 1 FROM pg_stat_activity
	     WHERE backend_type = 'walsender' AND wait_event_type = 'Lock' AND query LIKE 'CREATE_REPLICATION_SLOT%')}),
		'the worker waits in CREATE_REPLICATION_SLOT for the open source transaction');
	($rc, $out, $err) = $dest->psql('postgres', "SELECT cdc.drop_subscription('dm_w')");
	is($rc, 0, 'a subscription whose worker waits on the source is dropped') or diag($err);
	unlike($err // '', qr/did not exit|in use/, 'its worker stopped when told to');
	is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name = 'dm_w'}), '0', 'dm_w gone');
	$open->query_safe('COMMIT');
	$open->quit;
	$source->poll_query_until('postgres', q{SELECT NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = 'dm_w' AND active)});
	$source->safe_psql('postgres', q{SELECT pg_drop_replication_slot('dm_w') FROM pg_replication_slots WHERE slot_name = 'dm_w'});
}

# The other subscription was not touched.
$source->safe_psql('postgres', "INSERT INTO dm_k VALUES (2, 'after')");
ok(wait_caught_up($source, $dest, 'dm_k'), 'dm_k still streaming');
is(status_row($dest, 'dm_k', 'worker_pid'), $k_pid, 'dm_k kept its worker');
is(dq('SELECT string_agg(id || v, \',\' ORDER BY id) FROM dm_k'), '1before,2after', 'dm_k has every row');

done_testing();

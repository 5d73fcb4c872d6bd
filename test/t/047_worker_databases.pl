# Subscriptions run in every database (issue 14 section 3; docs/worker.md,
# "Every database").
#
#   1. two databases of one cluster, each with its own subscription: both
#      copy and stream, each served by a launcher of its own; databases
#      without the extension, that disallow connections, or templates hold
#      no connection of cdc_apply;
#   2. cdc.max_workers caps the workers of all databases together: a third
#      subscription waits (and says so) until a worker of another database
#      stops;
#   3. two subscriptions of the same name in two databases on one source:
#      the second does not take the first's slot for a leftover of its own;
#   4. the DROP DATABASE guard covers every database with subscriptions;
#      a database with the extension and no subscriptions can be dropped or
#      renamed at once (its launcher steps aside), one without the
#      extension too;
#   5. CREATE EXTENSION in a new database gets it looked at (and, without
#      a subscription, left: TAP 122), DROP EXTENSION lets it go; a
#      restarted cluster launcher starts no second launcher.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = PostgreSQL::Test::Cluster->new('dest');
$dest->init;
$dest->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cdc_apply'
cdc.naptime = 1
cdc.max_workers = 2
cdc.retry_backoff = 200ms
cdc.retry_backoff_max = 2
cdc.status_interval = 200ms
max_worker_processes = 16
});
$dest->start;

sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { my ($db, $sql) = @_; return $dest->safe_psql($db, $sql); }
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
sub create_sub
{
	my ($db, $name, $pub, $extra) = @_;
	$extra = $extra ? ", $extra" : '';
	dq($db, "SELECT cdc.create_subscription('$name', '$conn', ARRAY['$pub']$extra)");
}
sub wait_state
{
	my ($db, $name, $cond) = @_;
	my $ok = $dest->poll_query_until($db, "SELECT count(*) = 1 FROM cdc.subscription_status WHERE name = '$name' AND ($cond)");
	diag("$db.$name never satisfied [$cond]: " . dq($db, "SELECT state, last_error FROM cdc.subscription_status WHERE name = '$name'"))
	  unless $ok;
	return $ok;
}
# the cdc_apply processes connected to each database: "db:backend_type" sorted
sub connected
{
	return dq('postgres', q{SELECT coalesce(string_agg(datname || ':' || backend_type, ',' ORDER BY datname, backend_type), '')
	                          FROM pg_stat_activity WHERE backend_type LIKE 'cdc_apply%' AND datname IS NOT NULL});
}

sq(q{
CREATE TABLE ta (id int PRIMARY KEY, v text);
CREATE TABLE tb (id int PRIMARY KEY, v text);
CREATE TABLE tc (id int PRIMARY KEY, v text);
INSERT INTO ta SELECT g, 'a' FROM generate_series(1, 100) g;
INSERT INTO tb SELECT g, 'b' FROM generate_series(1, 200) g;
INSERT INTO tc SELECT g, 'c' FROM generate_series(1, 300) g;
CREATE PUBLICATION pa FOR TABLE ta;
CREATE PUBLICATION pb FOR TABLE tb;
CREATE PUBLICATION pc FOR TABLE tc;
});

# ---------------------------------------------------------------------------
# 1. two databases, each with its own subscription
# ---------------------------------------------------------------------------
for my $db (qw(db_a db_b db_none db_closed)) {
	dq('postgres', "CREATE DATABASE $db");
}
dq('postgres', 'ALTER DATABASE db_closed ALLOW_CONNECTIONS false');
dq('postgres', 'CREATE DATABASE tmpl_x IS_TEMPLATE true');
for my $db (qw(db_a db_b)) {
	dq($db, 'CREATE EXTENSION cdc_apply');
	dq($db, 'CREATE TABLE ta (id int PRIMARY KEY, v text); CREATE TABLE tb (id int PRIMARY KEY, v text); CREATE TABLE tc (id int PRIMARY KEY, v text)');
}
my ($rc, $out, $err) = $dest->psql('db_a', "SELECT cdc.create_subscription('sa', '$conn', ARRAY['pa'])");
unlike($err, qr/will not run/, 'create_subscription in a database other than cdc.database no longer warns');
create_sub('db_b', 'sb', 'pb');
ok(wait_state('db_a', 'sa', q{state = 'streaming'}), 'db_a: subscription sa streams');
ok(wait_state('db_b', 'sb', q{state = 'streaming'}), 'db_b: subscription sb streams');
sq(q{INSERT INTO ta VALUES (101, 'a'); INSERT INTO tb VALUES (201, 'b'); UPDATE tb SET v = 'B' WHERE id <= 10;});
my $lsn = sq('SELECT pg_current_wal_lsn()');
for my $x ([ 'db_a', 'sa' ], [ 'db_b', 'sb' ]) {
	ok($dest->poll_query_until($x->[0], qq{SELECT greatest(applied_lsn, flushed_lsn) >= '$lsn' FROM cdc.subscription_status WHERE name = '$x->[1]'}),
		"$x->[0]: $x->[1] caught up");
}
is(dq('db_a', q{SELECT count(*) || '|' || (SELECT count(*) FROM tb) FROM ta}), '101|0', 'db_a holds ta (copied and streamed), nothing of tb');
is(dq('db_b', q{SELECT count(*) || '|' || count(*) FILTER (WHERE v = 'B') || '|' || (SELECT count(*) FROM ta) FROM tb}), '201|10|0',
	'db_b holds tb (copied, streamed, updated), nothing of ta');
ok($dest->poll_query_until('postgres', q{SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'cdc_apply launcher'
                                             AND datname NOT IN ('db_a', 'db_b'))}),
	'launchers of databases without the extension have left');
is(connected(), 'db_a:cdc_apply launcher,db_a:cdc_apply worker,db_b:cdc_apply launcher,db_b:cdc_apply worker',
	'one launcher and one worker per database with a subscription; none in postgres, db_none, db_closed, templates');

# ---------------------------------------------------------------------------
# 2. cdc.max_workers = 2 for all databases together
# ---------------------------------------------------------------------------
create_sub('db_a', 'sc', 'pc');
ok(wait_state('db_a', 'sc', q{state = 'waiting' AND last_error = 'no free worker slot (cdc.max_workers = 2)'}),
	'a third subscription waits: the two slots are taken by workers of two databases');
dq('db_b', q{SELECT cdc.disable_subscription('sb')});
ok(wait_state('db_a', 'sc', q{state = 'streaming'}), 'db_a: sc starts once db_b\'s worker stopped');
is(dq('db_a', 'SELECT count(*) FROM tc'), '300', 'db_a: sc copied tc');
dq('db_b', q{SELECT cdc.enable_subscription('sb')});
ok(wait_state('db_b', 'sb', q{state = 'waiting' AND last_error ~ 'cdc\.max_workers = 2'}), 'db_b: sb now waits, and says why');
dq('db_a', q{SELECT cdc.drop_subscription('sc', drop_slot => true)});
ok(wait_state('db_b', 'sb', q{state = 'streaming'}), 'db_b: sb streams again once db_a\'s sc is dropped');

# ---------------------------------------------------------------------------
# 3. a subscription of the same name (and so the same default slot) in two databases
# ---------------------------------------------------------------------------
dq('db_a', q{SELECT cdc.disable_subscription('sa')});
create_sub('db_a', 'dup', 'pc', 'copy_data => false');
ok(wait_state('db_a', 'dup', q{state = 'streaming'}), 'db_a: dup streams on slot dup');
dq('db_a', q{SELECT cdc.disable_subscription('dup')});
$source->poll_query_until('postgres', q{SELECT NOT active FROM pg_replication_slots WHERE slot_name = 'dup'})
  or die 'slot dup stayed active';
# without a copy, cdc.create_subscription creates the slot itself: refused at once (42710), nothing stays
($rc, $out, $err) = $dest->psql('db_b', "SELECT cdc.create_subscription('dup', '$conn', ARRAY['pc'], copy_data => false)");
like($err, qr/could not create slot "dup" on the source: .*already exists.*another slot_name/s,
	'db_b: dup without a copy is refused at its creation: the source has db_a\'s slot dup');
is(dq('db_b', q{SELECT count(*) FROM cdc.subscription WHERE name = 'dup'}), '0', 'db_b: no subscription dup stays');
# with a copy the worker creates the slot, and refuses one it did not record
create_sub('db_b', 'dup', 'pc');
dq('db_b', q{SELECT cdc.disable_subscription('sb')});
ok(wait_state('db_b', 'dup', q{state = 'error' AND last_error ~ 'replication slot "dup" exists on the source and was not created by this subscription'}),
	'db_b: dup refuses to take the slot of db_a\'s dup for a leftover of its own');
like(dq('db_b', q{SELECT last_error FROM cdc.subscription_status WHERE name = 'dup'}), qr/slot_name => /, 'the hint names the way out');
dq('db_b', q{SELECT cdc.drop_subscription('dup')});
dq('db_a', q{SELECT cdc.enable_subscription('dup')});
ok(wait_state('db_a', 'dup', q{state = 'streaming' AND last_error IS NULL}), 'db_a: dup still streams on its own slot');
dq('db_a', q{SELECT cdc.drop_subscription('dup', drop_slot => true)});
dq('db_a', q{SELECT cdc.enable_subscription('sa')});
dq('db_b', q{SELECT cdc.enable_subscription('sb')});
ok(wait_state('db_a', 'sa', q{state = 'streaming'}) && wait_state('db_b', 'sb', q{state = 'streaming'}), 'sa and sb stream again');

# ---------------------------------------------------------------------------
# 4. DROP DATABASE and the other commands that need a database without sessions
# ---------------------------------------------------------------------------
for my $db (qw(db_a db_b)) {
	($rc, $out, $err) = $dest->psql('postgres', "DROP DATABASE $db WITH (FORCE)");
	like($err, qr/database "$db" has cdc_apply subscriptions/, "DROP DATABASE $db (FORCE) refused: it has subscriptions");
}
($rc, $out, $err) = $dest->psql('postgres', 'DROP DATABASE db_none');
is($rc, 0, 'DROP DATABASE of a database without the extension succeeds at once') or diag($err);
dq('postgres', 'CREATE DATABASE db_c');
dq('db_c', 'CREATE EXTENSION cdc_apply');
ok($dest->poll_query_until('db_c', q{SELECT last_prune_at IS NOT NULL FROM cdc.horizon_status}),
	'CREATE EXTENSION: a launcher looked at db_c (it ran the scheduled cdc.prune())');
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'cdc_apply launcher' AND datname = 'db_c'}),
	'and left: db_c has no subscription (TAP 122)');
($rc, $out, $err) = $dest->psql('postgres', 'ALTER DATABASE db_c RENAME TO db_c2');
is($rc, 0, 'ALTER DATABASE RENAME of a database with the extension and no subscriptions: its launcher steps aside') or diag($err);
my $t_copy = dq('postgres', 'SELECT now()');
($rc, $out, $err) = $dest->psql('postgres', 'CREATE DATABASE db_copy TEMPLATE db_c2');
is($rc, 0, 'CREATE DATABASE ... TEMPLATE of it works too') or diag($err);
ok($dest->poll_query_until('db_copy', qq{SELECT last_prune_at > '$t_copy' FROM cdc.horizon_status}),
	'the copy (it has the extension) is looked at as well');
($rc, $out, $err) = $dest->psql('postgres', 'DROP DATABASE db_c2');
is($rc, 0, 'DROP DATABASE of a database with the extension and no subscriptions succeeds at once') or diag($err);
dq('db_copy', 'DROP EXTENSION cdc_apply');
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type LIKE 'cdc_apply%' AND datname = 'db_copy'}),
	'DROP EXTENSION: the launcher leaves the database');
dq('db_copy', 'CREATE EXTENSION cdc_apply');
ok($dest->poll_query_until('db_copy', q{SELECT last_prune_at IS NOT NULL FROM cdc.horizon_status}),
	'CREATE EXTENSION again: looked at again (the new install\'s scheduled cdc.prune() ran at once)');
dq('postgres', 'DROP DATABASE db_copy');
ok(1, 'and dropped');

# ---------------------------------------------------------------------------
# 5. a restarted cluster launcher starts no second launcher, and the workers go on
# ---------------------------------------------------------------------------
my $workers = dq('postgres', q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity WHERE backend_type = 'cdc_apply worker'});
my $cluster = dq('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'cdc_apply cluster launcher'});
dq('postgres', "SELECT pg_terminate_backend($cluster)");
ok($dest->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'cdc_apply cluster launcher' AND pid <> $cluster}),
	'the cluster launcher restarts');
sq(q{INSERT INTO ta VALUES (102, 'a'); INSERT INTO tb VALUES (202, 'b');});
$lsn = sq('SELECT pg_current_wal_lsn()');
for my $x ([ 'db_a', 'sa' ], [ 'db_b', 'sb' ]) {
	ok($dest->poll_query_until($x->[0], qq{SELECT greatest(applied_lsn, flushed_lsn) >= '$lsn' FROM cdc.subscription_status WHERE name = '$x->[1]'}),
		"$x->[0]: $x->[1] still applies");
}
sleep 3;    # three naptimes of the new cluster launcher: it must not have started anything twice
is(connected(), 'db_a:cdc_apply launcher,db_a:cdc_apply worker,db_b:cdc_apply launcher,db_b:cdc_apply worker',
	'still one launcher and one worker per database');
is(dq('postgres', q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity WHERE backend_type = 'cdc_apply worker'}), $workers,
	'the same workers');

# ---------------------------------------------------------------------------
# 4 (end). without subscriptions, both databases can be dropped
# ---------------------------------------------------------------------------
dq('db_a', q{SELECT cdc.drop_subscription('sa', drop_slot => true)});
dq('db_b', q{SELECT cdc.drop_subscription('sb', drop_slot => true)});
for my $db (qw(db_a db_b)) {
	my $dropped = 0;
	for (my $i = 0; $i < 300 && !$dropped; $i++) {
		($rc, $out, $err) = $dest->psql('postgres', "DROP DATABASE $db");
		$dropped = $rc == 0;
		select(undef, undef, undef, 0.2) unless $dropped;
	}
	ok($dropped, "$db dropped once its launcher counted no subscription") or diag($err);
}
is(sq(q{SELECT count(*) FROM pg_replication_slots}), '0', 'no slot left on the source');
is(connected(), '', 'no cdc_apply process is connected to any database');

done_testing();

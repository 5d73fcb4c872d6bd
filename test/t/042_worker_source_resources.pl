# Source-side resources never leak (issue 12 item 7, scenario B37;
# docs/worker.md, "Dropping").
#
#   (a) DROP DATABASE of the destination database (cdc.database) is refused
#       while it has subscriptions, with and without FORCE; after
#       drop_subscription(..., drop_slot => true) it succeeds, and after 50 MB
#       of source activity and a CHECKPOINT no slot retains WAL;
#   (b) a subscription whose initial copy fails (a published table missing
#       at the destination) has a slot on the source although slot_ready is
#       false: drop_subscription(..., drop_slot => true) drops it;
#   (c) drop_subscription(..., drop_slot => true) inside a transaction block
#       (BEGIN, or several statements in one query): it drops the slot when
#       the transaction commits, so a ROLLBACK changes nothing (it was
#       refused with 25001 before; TAP 099); a slot that was never created
#       is no error.
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
cdc.database = 'dst'
cdc.naptime = 1
cdc.retry_backoff = 200ms
cdc.retry_backoff_max = 2
cdc.status_interval = 200ms
max_worker_processes = 16
});
$dest->start;
$dest->safe_psql('postgres', 'CREATE DATABASE dst');
$dest->safe_psql('dst', 'CREATE EXTENSION cdc_apply');

sub dq { return $dest->safe_psql('dst', $_[0]); }

# A subscription in database $db (default dst) of the source's database postgres.
sub create_sub
{
	my ($name, $pub, $extra, $db) = @_;
	(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
	$extra = $extra ? ", $extra" : '';
	$dest->safe_psql($db // 'dst', "SELECT cdc.create_subscription('$name', '$conn', ARRAY['$pub']$extra)");
}
sub slots { return $source->safe_psql('postgres', q{SELECT coalesce(string_agg(slot_name, ',' ORDER BY slot_name), '') FROM pg_replication_slots}); }

$source->safe_psql('postgres', q{
CREATE TABLE prod (id int PRIMARY KEY, v text);
CREATE TABLE missing_here (id int PRIMARY KEY);
CREATE PUBLICATION pub_prod FOR TABLE prod;
CREATE PUBLICATION pub_broken FOR TABLE prod, missing_here;
INSERT INTO prod VALUES (1, 'a');
INSERT INTO missing_here VALUES (1);
});
dq('CREATE TABLE prod (id int PRIMARY KEY, v text)');

# ---------------------------------------------------------------------------
# (b) the initial copy fails: the slot exists, slot_ready is false
# ---------------------------------------------------------------------------
create_sub('s_broken', 'pub_broken');
ok($dest->poll_query_until('dst', q{SELECT state = 'error' AND last_error ~ 'missing_here' FROM cdc.subscription_status WHERE name = 's_broken'}),
	'(b) the initial copy fails on the missing table');
is(dq(q{SELECT slot_ready FROM cdc.subscription WHERE name = 's_broken'}), 'f', '(b) the copy never finished');
like(slots(), qr/s_broken/, '(b) but the slot exists on the source');
dq(q{SELECT cdc.drop_subscription('s_broken', drop_slot => true)});
unlike(slots(), qr/s_broken/, '(b) drop_subscription(drop_slot => true) dropped it');

# ---------------------------------------------------------------------------
# (c) transaction blocks; a slot never created
# ---------------------------------------------------------------------------
create_sub('s_idle', 'pub_prod', 'enabled => false');
my ($rc, $out, $err) = $dest->psql('dst', q{BEGIN; SELECT cdc.drop_subscription('s_idle', drop_slot => true); ROLLBACK;});
is($rc, 0, '(c) drop_slot runs inside BEGIN ... ROLLBACK');
($rc, $out, $err) = $dest->psql('dst', '', extra_params => ['-c', q{SELECT cdc.drop_subscription('s_idle', drop_slot => true); SELECT 1/0}]);
like($err, qr/division by zero/, '(c) a multi-statement query failing after the drop (implicit transaction block)');
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name = 's_idle'}), '1', '(c) nothing dropped');
($rc, $out, $err) = $dest->psql('dst', q{BEGIN; SELECT cdc.drop_subscription('s_idle'); ROLLBACK;});
is($rc, 0, '(c) without drop_slot it runs in a transaction block');
dq(q{SELECT cdc.drop_subscription('s_idle', drop_slot => true)});
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name = 's_idle'}), '0', '(c) a subscription whose slot was never created drops');

# ---------------------------------------------------------------------------
# (a) DROP DATABASE of the destination database
# ---------------------------------------------------------------------------
create_sub('s_prod', 'pub_prod');
ok($dest->poll_query_until('dst', q{SELECT state = 'streaming' FROM cdc.subscription_status WHERE name = 's_prod'}),
	'(a) s_prod streaming');
($rc, $out, $err) = $dest->psql('postgres', 'DROP DATABASE dst WITH (FORCE)');
like($err, qr/database "dst" has cdc_apply subscriptions/, '(a) DROP DATABASE ... WITH (FORCE) refused');
like($err, qr/cdc\.drop_subscription/, '(a) the hint names the way');
($rc, $out, $err) = $dest->psql('postgres', 'DROP DATABASE dst');
like($err, qr/database "dst" has cdc_apply subscriptions/, '(a) DROP DATABASE refused');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM pg_database WHERE datname = 'dst'}), '1', '(a) the database is still there');
like(slots(), qr/s_prod/, '(a) the slot is still there (and consumed)');
# a subscription created in another database never runs: nothing to protect there
$dest->safe_psql('postgres', 'CREATE DATABASE other');
$dest->safe_psql('other', 'CREATE EXTENSION cdc_apply');
create_sub('s_other', 'pub_prod', 'enabled => false', 'other');
$dest->safe_psql('postgres', 'DROP DATABASE other');
ok(1, '(a) another database with a subscription that never runs can be dropped');

dq(q{SELECT cdc.drop_subscription('s_prod', drop_slot => true)});
my $dropped = 0;
for (my $i = 0; $i < 600 && !$dropped; $i++) {
	($rc, $out, $err) = $dest->psql('postgres', 'DROP DATABASE dst WITH (FORCE)');
	$dropped = $rc == 0;
	select(undef, undef, undef, 0.2) unless $dropped;
}
ok($dropped, '(a) without subscriptions the database can be dropped (once the launcher has counted them)');
$source->safe_psql('postgres', q{CREATE TABLE filler (pad text); INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 50000);});
$source->safe_psql('postgres', 'CHECKPOINT');
is(slots(), '', '(a) no slot is left on the source');
is($source->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots WHERE restart_lsn IS NOT NULL}), '0',
	'(a) no slot retains WAL');

done_testing();

# Database launchers and max_worker_processes (security review; docs/security.md,
# "Shared state"; docs/worker.md, "Every database").
#
# A database launcher used to stay resident in every database with the
# extension, each holding a max_worker_processes slot.  An ordinary role
# with CREATEDB that owns such a database cloned it (CREATE DATABASE ...
# TEMPLATE) until every slot was taken: no apply worker and no parallel
# query worker could start in any database any more.  Now a launcher stays
# only while its database has a subscription (which only superusers can
# create); elsewhere it does what is due (the scheduled cdc.prune()) and
# leaves, and the cluster launcher starts it again when the next prune is
# due or a subscription is created there.
#
#   1. mallory (CREATEDB, owner of victim, which has the extension) clones
#      victim 8 times (max_worker_processes = 8): every clone is looked at
#      and pruned once, then no launcher stays in any of them;
#   2. the scheduled cdc.prune() still runs again in a database without
#      subscriptions, after its launcher left;
#   3. a parallel query gets its two workers;
#   4. a superuser's subscription in victim starts its worker and applies;
#      victim keeps a launcher (and only victim); DROP DATABASE victim is
#      refused while the subscription exists, a clone is dropped at once;
#   5. once the subscription is dropped, victim's launcher leaves too.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('slots_source');
$source->safe_psql('postgres', q{
CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t SELECT g, 'v' FROM generate_series(1, 10) g;
CREATE PUBLICATION p FOR TABLE t;
});
# max_worker_processes = 8: the cluster launcher, PostgreSQL's logical
# replication launcher, and six more
my $dest = new_dest('slots_dest', "max_worker_processes = 8\ncdc.prune_interval = 4\ncdc.max_workers = 2\n");
sub dq { my ($db, $sql) = @_; return $dest->safe_psql($db, $sql); }

dq('postgres', 'CREATE ROLE mallory LOGIN CREATEDB');
dq('postgres', 'CREATE DATABASE victim OWNER mallory');
dq('victim', 'CREATE EXTENSION cdc_apply; CREATE TABLE t (id int PRIMARY KEY, v text)');
# victim has been looked at (the launcher pruned it once)
ok($dest->poll_query_until('victim', 'SELECT last_prune_at IS NOT NULL FROM cdc.horizon_status'), 'victim: the launcher pruned it');

# ---------------------------------------------------------------------------
# 1. mallory clones victim 8 times
# ---------------------------------------------------------------------------
my $t0 = dq('postgres', 'SELECT now()');
my $made = 0;
for my $i (1 .. 8) {
	my ($rc, $out, $err) = $dest->psql('postgres', "CREATE DATABASE clone$i TEMPLATE victim", extra_params => [ '-U', 'mallory' ]);
	$made++ if $rc == 0;
	diag("clone$i: $err") if $rc != 0;
}
is($made, 8, 'mallory (CREATEDB, owner of victim) cloned victim 8 times');
for my $i (1 .. 8) {
	ok($dest->poll_query_until("clone$i", "SELECT last_prune_at > '$t0' FROM cdc.horizon_status"),
		"clone$i: its launcher looked at it and ran the scheduled cdc.prune()");
}
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'cdc_apply launcher'}),
	'no launcher stays in any database without subscriptions')
  or diag(dq('postgres', q{SELECT string_agg(datname, ',') FROM pg_stat_activity WHERE backend_type = 'cdc_apply launcher'}));

# ---------------------------------------------------------------------------
# 2. the scheduled prune still runs, by a launcher started again for it
# ---------------------------------------------------------------------------
my $last = dq('clone3', 'SELECT last_prune_at FROM cdc.horizon_status');
ok($dest->poll_query_until('clone3', "SELECT last_prune_at > '$last' FROM cdc.horizon_status"),
	'clone3: cdc.prune() runs again on schedule (cdc.prune_interval) after its launcher left');

# ---------------------------------------------------------------------------
# 3. a parallel query gets its workers
# ---------------------------------------------------------------------------
dq('postgres', 'CREATE TABLE big AS SELECT g AS id FROM generate_series(1, 20000) g; ANALYZE big');
my $plan = '';
my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
while (time() < $deadline) {
	$plan = dq('postgres', q{SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
	                         SET min_parallel_table_scan_size = 0;
	                         EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM big});
	last if $plan =~ /Workers Launched: 2/;
	select(undef, undef, undef, 0.2);
}
like($plan, qr/Workers Launched: 2/, 'a parallel query launches its two workers');

# ---------------------------------------------------------------------------
# 4. a superuser's subscription in victim runs
# ---------------------------------------------------------------------------
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
dq('victim', "SELECT cdc.create_subscription('sv', '$conn', ARRAY['p'])");
ok($dest->poll_query_until('victim', q{SELECT state = 'streaming' FROM cdc.subscription_status WHERE name = 'sv'}),
	'victim: the subscription\'s worker starts and streams')
  or diag(dq('victim', q{SELECT state || ' ' || coalesce(last_error, '') FROM cdc.subscription_status}));
$source->safe_psql('postgres', q{INSERT INTO t VALUES (11, 'new')});
ok($dest->poll_query_until('victim', q{SELECT count(*) = 11 FROM t}), 'victim: copied and streamed');
is(dq('postgres', q{SELECT coalesce(string_agg(datname || ':' || backend_type, ',' ORDER BY backend_type), '')
                      FROM pg_stat_activity WHERE backend_type IN ('cdc_apply launcher', 'cdc_apply worker')
                       AND datname = 'victim'}),
	'victim:cdc_apply launcher,victim:cdc_apply worker', 'victim has its launcher and its worker');
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'cdc_apply launcher'
                                             AND datname <> 'victim'}),
	'no other database keeps a launcher');
my ($rc, $out, $err) = $dest->psql('postgres', 'DROP DATABASE victim', extra_params => [ '-U', 'mallory' ]);
like($err, qr/database "victim" has cdc_apply subscriptions/, 'DROP DATABASE victim is refused while it has a subscription');
($rc, $out, $err) = $dest->psql('postgres', 'DROP DATABASE clone8', extra_params => [ '-U', 'mallory' ]);
is($rc, 0, 'DROP DATABASE of a clone (no subscription) succeeds at once') or diag($err);

# ---------------------------------------------------------------------------
# 5. without its subscription, victim's launcher leaves as well
# ---------------------------------------------------------------------------
dq('victim', q{SELECT cdc.drop_subscription('sv', drop_slot => true)});
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type LIKE 'cdc_apply %'
                                             AND datname IS NOT NULL}),
	'the subscription dropped: victim\'s launcher and worker leave');
is($source->safe_psql('postgres', 'SELECT count(*) FROM pg_replication_slots'), '0', 'no slot left on the source');

$dest->stop;
$source->stop;
done_testing();

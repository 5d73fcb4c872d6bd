# cdc.prune_interval changed by a reload reaches the databases without
# subscriptions (docs/worker.md, "Every database"; review h1).
#
# A database with the extension and no subscription keeps no resident
# launcher: its launcher runs the due scheduled cdc.prune() and leaves, and
# the cluster launcher starts one again when the next is due.  That time
# was computed once, when the launcher left, from the cdc.prune_interval of
# that moment, and kept in the registry: with cdc.prune_interval = 0
# ("none"), no launcher was ever started again there after the interval was
# set back by a reload (until a restart or a new subscription), and a
# shortened interval took effect only after the old one had run out.  The
# cluster launcher now reads the schedule from the last prune and the
# current setting, as a resident launcher does.
#
#   1. cdc.prune_interval = 0: a subscription in database x starts, is
#      dropped, and x's launcher leaves (it pruned nothing);
#   2. cdc.prune_interval = '1h' by a reload: x's scheduled prune runs (it
#      never ran) and its launcher leaves again;
#   3. cdc.prune_interval = 1 (second) by a reload: x's prune runs again
#      without waiting for the hour.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('reload_source');
$source->safe_psql('postgres', q{
CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t VALUES (1, 'a');
CREATE PUBLICATION p FOR TABLE t;
});
my $dest = new_dest('reload_dest', "cdc.prune_interval = 0\n");
sub dq { my ($db, $sql) = @_; return $dest->safe_psql($db, $sql); }
my $no_launcher_in_x =
  q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type LIKE 'cdc_apply %' AND datname = 'x'};

# ---------------------------------------------------------------------------
# 1. cdc.prune_interval = 0: x looked at (its subscription ran), then left
# ---------------------------------------------------------------------------
dq('postgres', 'CREATE DATABASE x');
dq('x', 'CREATE EXTENSION cdc_apply; CREATE TABLE t (id int PRIMARY KEY, v text)');
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
dq('x', "SELECT cdc.create_subscription('sx', '$conn', ARRAY['p'])");
ok($dest->poll_query_until('x', q{SELECT count(*) = 1 FROM t}), 'x: the subscription copied its table');
dq('x', q{SELECT cdc.drop_subscription('sx', drop_slot => true)});
ok($dest->poll_query_until('postgres', $no_launcher_in_x), 'x: its subscription dropped, its launcher and worker leave');
is(dq('x', 'SELECT last_prune_at IS NULL FROM cdc.horizon_status'), 't',
	'x: no scheduled cdc.prune() ran (cdc.prune_interval = 0)');

# ---------------------------------------------------------------------------
# 2. cdc.prune_interval = '1h' by a reload: the prune that never ran is due
# ---------------------------------------------------------------------------
dq('postgres', q{ALTER SYSTEM SET cdc.prune_interval = '1h'; SELECT pg_reload_conf()});
ok($dest->poll_query_until('x', 'SELECT last_prune_at IS NOT NULL FROM cdc.horizon_status'),
	'x: after cdc.prune_interval is set by a reload, a launcher is started there and runs the scheduled cdc.prune()');
ok($dest->poll_query_until('postgres', $no_launcher_in_x), 'x: its launcher leaves again');

# ---------------------------------------------------------------------------
# 3. cdc.prune_interval = 1 s by a reload: no waiting for the hour
# ---------------------------------------------------------------------------
my $last = dq('x', 'SELECT last_prune_at FROM cdc.horizon_status');
dq('postgres', q{ALTER SYSTEM SET cdc.prune_interval = 1; SELECT pg_reload_conf()});
ok($dest->poll_query_until('x', "SELECT last_prune_at > '$last' FROM cdc.horizon_status"),
	'x: a shortened cdc.prune_interval takes effect at once, not after the hour');
ok($dest->poll_query_until('postgres', $no_launcher_in_x), 'x: and no launcher stays');

$dest->stop;
$source->stop;
done_testing();

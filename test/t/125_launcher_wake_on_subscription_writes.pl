# Every committed write that creates, enables or disables a subscription
# wakes the launchers (docs/worker.md, "Every database"; review h2).
#
# cdc.create_subscription marked its database in the launchers' registry
# and woke the cluster launcher at commit.  A subscription row written any
# other way woke nothing: a superuser's own INSERT into cdc.subscription in
# a database without subscriptions (which keeps no resident launcher)
# started only at that database's next scheduled cdc.prune() (hours with a
# long cdc.prune_interval, never with 0), and in a database with a
# resident launcher a new subscription, cdc.enable_subscription and
# cdc.disable_subscription took effect only at its next look, up to
# cdc.naptime later.  A trigger on cdc.subscription (ENABLE ALWAYS) now
# does it for every INSERT and every change of `enabled`, at commit.
#
# The destination runs with cdc.naptime = 1h and cdc.prune_interval = 1 day,
# so nothing here can be the effect of a scheduled look: every step waits
# for its positive effect (rows applied, a worker gone).
#
#   1. database x with the extension and no subscription: its launcher
#      looked (its first prune ran) and left; a superuser inserts a
#      subscription row by hand: the worker starts and copies the table;
#   2. x now has a resident launcher: cdc.disable_subscription stops the
#      worker, cdc.enable_subscription starts it again (a row inserted
#      meanwhile at the source arrives), and a second
#      cdc.create_subscription there starts at once;
#   3. PREPARE TRANSACTION of a transaction that created a subscription is
#      refused (0A000), in any way it was created: COMMIT PREPARED could
#      wake nothing, and the count of the creation ended at PREPARE.  A
#      creation rolled back to a savepoint does not count; one released
#      into its parent does.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('wake_source');
$source->safe_psql('postgres', q{
CREATE TABLE t (id int PRIMARY KEY, v text);
CREATE TABLE u (id int PRIMARY KEY, v text);
INSERT INTO t VALUES (1, 'a'), (2, 'b');
INSERT INTO u VALUES (1, 'u');
CREATE PUBLICATION p FOR TABLE t;
CREATE PUBLICATION pu FOR TABLE u;
});
my $dest = new_dest('wake_dest', "cdc.naptime = 3600\ncdc.prune_interval = 86400\nmax_prepared_transactions = 4\n");
sub dq { my ($db, $sql) = @_; return $dest->safe_psql($db, $sql); }
my $no_launcher_in_x =
  q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type LIKE 'cdc_apply %' AND datname = 'x'};
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;

# ---------------------------------------------------------------------------
# 1. a row inserted by hand in a database without subscriptions
# ---------------------------------------------------------------------------
dq('postgres', 'CREATE DATABASE x');
dq('x', 'CREATE EXTENSION cdc_apply; CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE u (id int PRIMARY KEY, v text)');
ok($dest->poll_query_until('x', 'SELECT last_prune_at IS NOT NULL FROM cdc.horizon_status'),
	'x: its launcher looked (the first scheduled cdc.prune() ran)');
ok($dest->poll_query_until('postgres', $no_launcher_in_x), 'x: no subscription, so its launcher left');

dq('x', qq{
BEGIN;
WITH s AS (
  INSERT INTO cdc.subscription (name, conninfo, publications, slot_name, owner)
  VALUES ('sx', '$conn', ARRAY['p'], 'sx', current_user::regrole) RETURNING subid),
st AS (INSERT INTO cdc.subscription_state (subid, state) SELECT subid, 'starting' FROM s RETURNING subid)
SELECT pg_replication_origin_create(cdc._origin_name(subid)) FROM st;
COMMIT;
});
ok($dest->poll_query_until('x', q{SELECT count(*) = 2 FROM t}),
	'x: the subscription inserted by hand starts at once and copies its table');
ok($dest->poll_query_until('x', q{SELECT state = 'streaming' FROM cdc.subscription_status WHERE name = 'sx'}),
	'x: sx streams');

# ---------------------------------------------------------------------------
# 2. x has a resident launcher (naptime 1 h): disable, enable, create
# ---------------------------------------------------------------------------
dq('x', q{SELECT cdc.disable_subscription('sx')});
ok($dest->poll_query_until('x', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'cdc_apply sx'}),
	'x: cdc.disable_subscription stops the worker at once');
$source->safe_psql('postgres', q{INSERT INTO t VALUES (3, 'c')});
dq('x', q{SELECT cdc.enable_subscription('sx')});
ok($dest->poll_query_until('x', q{SELECT count(*) = 3 FROM t}),
	'x: cdc.enable_subscription starts it again at once (the row inserted meanwhile arrives)');

dq('x', "SELECT cdc.create_subscription('sy', '$conn', ARRAY['pu'])");
ok($dest->poll_query_until('x', q{SELECT count(*) = 1 FROM u}),
	'x: a second subscription created where a launcher resides starts at once');

# ---------------------------------------------------------------------------
# 3. PREPARE TRANSACTION after creating a subscription is refused
# ---------------------------------------------------------------------------
my ($rc, $out, $err) = $dest->psql('postgres', qq{
\\set VERBOSITY verbose
BEGIN;
SELECT cdc.create_subscription('sp', '$conn', ARRAY['p']);
PREPARE TRANSACTION 'with_create';
});
like($err, qr/ERROR:\s+0A000: cannot PREPARE a transaction that creates a cdc_apply subscription/,
	'PREPARE after cdc.create_subscription: 0A000');
($rc, $out, $err) = $dest->psql('postgres', qq{
\\set VERBOSITY verbose
BEGIN;
INSERT INTO cdc.subscription (name, conninfo, publications, slot_name, owner)
VALUES ('sq', '$conn', ARRAY['p'], 'sq', current_user::regrole);
PREPARE TRANSACTION 'with_insert';
});
like($err, qr/ERROR:\s+0A000: cannot PREPARE a transaction that creates a cdc_apply subscription/,
	'PREPARE after an INSERT into cdc.subscription: 0A000');
is(dq('postgres', q{SELECT (SELECT count(*) FROM pg_prepared_xacts) || '|' || (SELECT count(*) FROM cdc.subscription)}),
	'0|0', 'nothing prepared, no subscription left');
# a prepared transaction that creates none is not refused
dq('postgres', q{BEGIN; CREATE TABLE other (i int); PREPARE TRANSACTION 'plain'; COMMIT PREPARED 'plain'});
is(dq('postgres', q{SELECT count(*) FROM other}), '0', 'a transaction without a subscription still prepares');
# A creation rolled back to a savepoint is no creation: the transaction
# prepares (before, it was refused as if the row had stayed).  One released
# into its parent is, at any depth.
dq('postgres', qq{BEGIN;
SAVEPOINT a;
INSERT INTO cdc.subscription (name, conninfo, publications, slot_name, owner)
VALUES ('sr', '$conn', ARRAY['p'], 'sr', current_user::regrole);
ROLLBACK TO SAVEPOINT a;
SAVEPOINT b;
SAVEPOINT c;
SELECT cdc.create_subscription('ss', '$conn', ARRAY['p'], create_slot => false, enabled => false);
RELEASE SAVEPOINT c;
ROLLBACK TO SAVEPOINT b;
CREATE TABLE after_rollback (i int);
PREPARE TRANSACTION 'rolled_back_create';
COMMIT PREPARED 'rolled_back_create'});
is(dq('postgres', q{SELECT (SELECT count(*) FROM after_rollback) || '|' || (SELECT count(*) FROM cdc.subscription)}),
	'0|0', 'PREPARE after creations rolled back to savepoints: prepared and committed, no subscription');
($rc, $out, $err) = $dest->psql('postgres', qq{
\\set VERBOSITY verbose
BEGIN;
SAVEPOINT a;
SAVEPOINT b;
INSERT INTO cdc.subscription (name, conninfo, publications, slot_name, owner)
VALUES ('st', '$conn', ARRAY['p'], 'st', current_user::regrole);
RELEASE SAVEPOINT b;
RELEASE SAVEPOINT a;
SAVEPOINT d;
ROLLBACK TO SAVEPOINT d;
PREPARE TRANSACTION 'released_create';
});
like($err, qr/ERROR:\s+0A000: cannot PREPARE a transaction that creates a cdc_apply subscription/,
	'PREPARE after a creation released from nested savepoints: 0A000');
is(dq('postgres', q{SELECT (SELECT count(*) FROM pg_prepared_xacts) || '|' || (SELECT count(*) FROM cdc.subscription)}),
	'0|0', 'nothing prepared, no subscription left');

$dest->stop;
$source->stop;
done_testing();

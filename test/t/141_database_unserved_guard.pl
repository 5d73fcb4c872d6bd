# The owner of a destination database with subscriptions, an ordinary role,
# may not make it one the launcher does not serve (security review h2;
# docs/security.md, "Shared state").
#
# DROP DATABASE of a database with subscriptions is refused (their slots on
# the sources would keep WAL for ever), but the guard knows only the
# databases the launcher serves: those that allow connections and are not
# templates.  The database's owner may ALTER DATABASE ... ALLOW_CONNECTIONS
# false or IS_TEMPLATE true without being a superuser; the workers already
# connected stayed, but after the next restart nothing served the database,
# and the owner's DROP DATABASE went through, leaving the subscription's
# slot on the source, inactive, holding WAL for ever (before: step 1's commands
# succeeded, step 2's DROP dropped the database and left the slot).
#
#   1. dbo (LOGIN, owner of the database) turns connections off or makes it
#      a template: refused while it has subscriptions, settings unchanged;
#   2. after a restart dbo's DROP DATABASE is still refused, the slot is
#      still the worker's, and the stream is applied;
#   3. other ALTER DATABASE options stay allowed;
#   4. once the subscription is dropped, the same ALTER is allowed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest');

owned_database_subscription($source, $dest, 'dbo', 'owned', 'os');

sub caught_up { my ($lsn) = @_; return wait_caught_up($source, $dest, 'os', $lsn, 'owned'); }
sub rows { my ($node, $db) = @_; return $node->safe_psql($db, q{SELECT count(*) || ':' || sum(n) FROM t}); }
sub as_dbo { my ($sql) = @_; return $dest->psql('postgres', $sql, extra_params => [ '-U', 'dbo' ]); }
sub db_flags { return $dest->safe_psql('postgres', q{SELECT datallowconn || ':' || datistemplate FROM pg_database WHERE datname = 'owned'}); }

ok(caught_up(source_lsn($source)), 'the copy is applied');

# ---------------------------------------------------------------------------
# 1. turning connections off or making a template: refused
# ---------------------------------------------------------------------------
# (every spelling of a boolean PostgreSQL takes: 0, 'off', 1, 'false')
for my $sql ('ALTER DATABASE owned ALLOW_CONNECTIONS false', 'ALTER DATABASE owned WITH IS_TEMPLATE = true',
	'ALTER DATABASE owned WITH CONNECTION LIMIT 5 ALLOW_CONNECTIONS = false', 'ALTER DATABASE owned ALLOW_CONNECTIONS = 0',
	q{ALTER DATABASE owned ALLOW_CONNECTIONS 'off'}, 'ALTER DATABASE owned IS_TEMPLATE 1',
	q{ALTER DATABASE owned WITH IS_TEMPLATE 'on' CONNECTION LIMIT 7}, q{ALTER DATABASE owned ALLOW_CONNECTIONS 'false'})
{
	my ($rc, $out, $err) = as_dbo($sql);
	isnt($rc, 0, "dbo: $sql is refused");
	like($err, qr/database "owned" has cdc_apply subscriptions/, "dbo: $sql: the database has subscriptions");
	is(db_flags(), 'true:false', "dbo: $sql: the database still allows connections and is no template");
}

# ---------------------------------------------------------------------------
# 2. after a restart the database is served: DROP DATABASE refused, slot kept
# ---------------------------------------------------------------------------
$dest->restart;
$source->safe_psql('postgres', q{INSERT INTO t SELECT g, g FROM generate_series(11, 20) g});
# (a template cannot be dropped: before, dbo made it none again first, which
# leaves it unserved while it allows no connections)
is((as_dbo('ALTER DATABASE owned IS_TEMPLATE false'))[0], 0, 'dbo: IS_TEMPLATE false is allowed');
my ($rc, $out, $err) = as_dbo('DROP DATABASE owned');
isnt($rc, 0, 'dbo: DROP DATABASE owned is refused');
like($err, qr/database "owned" has cdc_apply subscriptions/, 'dbo: DROP DATABASE: the database has subscriptions');
is($source->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'os'}), '1',
	'the subscription\'s slot is on the source');
ok(caught_up(source_lsn($source)), 'after the restart, the stream is applied');
is(rows($dest, 'owned'), rows($source, 'postgres'), 'the rows equal the source');

# ---------------------------------------------------------------------------
# 3. other options: allowed
# ---------------------------------------------------------------------------
# (DEFAULT: PostgreSQL's ALLOW_CONNECTIONS DEFAULT is true and IS_TEMPLATE
# DEFAULT false, the values that keep the database served; IS_TEMPLATE
# DEFAULT was refused by the guard, which read a DEFAULT as true: review h3)
for my $sql ('ALTER DATABASE owned ALLOW_CONNECTIONS true', 'ALTER DATABASE owned IS_TEMPLATE false',
	'ALTER DATABASE owned CONNECTION LIMIT 50', 'ALTER DATABASE owned IS_TEMPLATE DEFAULT',
	'ALTER DATABASE owned WITH ALLOW_CONNECTIONS DEFAULT IS_TEMPLATE = DEFAULT', q{ALTER DATABASE owned IS_TEMPLATE 'off'})
{
	my ($rc, $out, $err) = as_dbo($sql);
	is($rc, 0, "dbo: $sql is allowed") or diag($err);
	is(db_flags(), 'true:false', "dbo: $sql: the database still allows connections and is no template");
}

# ---------------------------------------------------------------------------
# 4. without subscriptions the owner may turn connections off
# ---------------------------------------------------------------------------
$dest->safe_psql('owned', q{SELECT cdc.drop_subscription('os', drop_slot => true)});
# (the guard's count of subscriptions is the launcher's, taken at its next
# look: refused until then, as DROP DATABASE is (TAP 124); retried until it
# goes through, the positive sync point; review h3 saw it refused once)
for (1 .. 100)
{
	($rc, $out, $err) = as_dbo('ALTER DATABASE owned ALLOW_CONNECTIONS false');
	last if $rc == 0;
	sleep 1;
}
is($rc, 0, 'without subscriptions, dbo turns connections off') or diag($err);
is(db_flags(), 'false:false', 'the database allows no connections');
is($source->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'os'}), '0',
	'the slot was dropped with the subscription');

$dest->stop;
$source->stop;
done_testing();

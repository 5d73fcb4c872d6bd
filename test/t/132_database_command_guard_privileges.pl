# The ProcessUtility hook's database guard acts only for a role that may run
# the command (security review h4; docs/security.md, "Shared state").
#
# The hook looks at DROP DATABASE, ALTER DATABASE ... RENAME and SET
# TABLESPACE and CREATE DATABASE ... TEMPLATE before PostgreSQL checks the
# command's privileges.  For a database with the extension and no
# subscription it stopped (SIGTERM) the database launcher visiting it for
# the scheduled cdc.prune() and kept every launcher away for 10 s: any role
# that may connect anywhere ran `DROP DATABASE victim` (refused afterwards
# with "must be owner") in a loop, and victim's launcher was killed in the
# middle of each prune, so the ledger and tombstones were never pruned.
# For a database with subscriptions it answered "has cdc_apply
# subscriptions" to a role that may not even drop it.
#
#   1. victim (a superuser's, the extension, no subscription): the launcher
#      visiting it for cdc.prune() waits for a lock a superuser holds;
#   2. mallory (LOGIN only) runs DROP DATABASE victim, ALTER DATABASE
#      victim RENAME and CREATE DATABASE ... TEMPLATE victim: each is
#      refused by PostgreSQL's own privilege check, and the launcher is
#      still there, waiting (before: gone after the first command);
#   3. the lock released, that launcher's prune completes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $dest = new_dest('dbguard_dest', "cdc.prune_interval = 2\n");
sub dq { my ($db, $sql) = @_; return $dest->safe_psql($db, $sql); }

dq('postgres', 'CREATE ROLE mallory LOGIN');
dq('postgres', 'CREATE DATABASE victim');
dq('victim', 'CREATE EXTENSION cdc_apply');
ok($dest->poll_query_until('victim', 'SELECT last_prune_at IS NOT NULL FROM cdc.horizon_status'),
	'victim: the launcher pruned it once');

# ---------------------------------------------------------------------------
# 1. the next scheduled prune waits for a superuser's lock on cdc.ledger
# ---------------------------------------------------------------------------
# read before the lock: cdc.horizon_status reads cdc.ledger
my $last = dq('victim', 'SELECT last_prune_at FROM cdc.horizon_status');
my $holder = $dest->background_psql('victim');
$holder->query_safe('BEGIN');
$holder->query_safe('LOCK TABLE cdc.ledger IN ACCESS EXCLUSIVE MODE');
my $waiting = q{SELECT count(*) = 1 FROM pg_stat_activity
                 WHERE backend_type = 'cdc_apply launcher' AND datname = 'victim' AND wait_event_type = 'Lock'};
ok($dest->poll_query_until('postgres', $waiting), 'victim\'s launcher visits it and waits in cdc.prune()');
my $pid = dq('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'cdc_apply launcher' AND datname = 'victim'});

# ---------------------------------------------------------------------------
# 2. mallory's commands on victim are refused by PostgreSQL, and touch nothing
# ---------------------------------------------------------------------------
my @commands = (
	[ 'DROP DATABASE victim',                  qr/must be owner of database victim/ ],
	[ 'ALTER DATABASE victim RENAME TO other', qr/must be owner of database victim/ ],
	[ 'CREATE DATABASE copy TEMPLATE victim',  qr/permission denied to create database/ ],
);
for my $c (@commands) {
	my ($sql, $expected) = @$c;
	my ($rc, $out, $err) = $dest->psql('postgres', $sql, extra_params => [ '-U', 'mallory' ]);
	isnt($rc, 0, "mallory: $sql is refused");
	like($err, $expected, "mallory: $sql is refused by PostgreSQL's privilege check");
	is(dq('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND wait_event_type = 'Lock'"),
		'1', "after mallory's $sql, victim's launcher (pid $pid) is still there, waiting in its prune");
}

# ---------------------------------------------------------------------------
# 3. the lock released, the same launcher's prune completes
# ---------------------------------------------------------------------------
$holder->query_safe('COMMIT');
$holder->quit;
ok($dest->poll_query_until('victim', "SELECT last_prune_at > '$last' FROM cdc.horizon_status"),
	'the lock released, victim is pruned');

$dest->stop;
done_testing();

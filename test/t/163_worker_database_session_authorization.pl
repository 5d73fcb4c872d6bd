# Security review h2: a destination database's owner, an ordinary role,
# runs ALTER DATABASE ... SET session_authorization = itself (which
# PostgreSQL lets a database owner do).  TAP 113 pinned role and
# default_transaction_read_only for the worker's and the database
# launcher's sessions, on the belief that a database's session_authorization
# is not applied to them: it is, to a background worker that connects
# without a role (BackgroundWorkerInitializeConnectionByOid with InvalidOid:
# InitializeSessionUserIdStandalone records no session_authorization
# setting, so the database's one is applied and makes the session user the
# owner).  The database launcher then failed at once reading cdc.subscription
# ("permission denied for table subscription") and was started again, about
# two processes a second, nothing of the database's subscriptions was
# applied, its scheduled prune never ran, and cdc.subscription_status kept
# its last state with no error; and since nothing served the database, the
# owner could then make it unserved (ALLOW_CONNECTIONS false) and drop it,
# past the guard of TAP 141.  Expected: after a restart under the setting,
# the launcher and the worker run as the bootstrap superuser they connect
# as, and apply, and the guard refuses ALLOW_CONNECTIONS false.
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

# The database belongs to an ordinary role.
owned_database_subscription($source, $dest, 'dbowner', 'sa', 'sa_sub');

# reads of the database 'sa' by the authenticated superuser, whatever its settings make the session
my $as_su = 'SET SESSION AUTHORIZATION DEFAULT; SET ROLE NONE; ';
sub sa_caught_up { return owned_database_caught_up($dest, 'sa', 'sa_sub', $_[0]); }
sub sa_rows { return owned_database_rows($dest, 'sa'); }
sub src_rows { return $source->safe_psql('postgres', q{SELECT count(*) || ':' || sum(n) FROM t}); }

ok(sa_caught_up(source_lsn($source)), 'the copy is applied');
is(sa_rows(), src_rows(), 'copy: the rows equal the source');

# The owner makes every new session of its database run as itself: not a superuser's act.
$dest->safe_psql('postgres', q{SET ROLE dbowner; ALTER DATABASE sa SET session_authorization = 'dbowner'});
# (a client's session user is the role it logs in as: PostgreSQL records it over the setting)
is($dest->safe_psql('postgres', q{SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
	WHERE d.datname = 'sa' AND s.setrole = 0}), '{session_authorization=dbowner}', 'the setting is recorded for sa');

# After a restart the database launcher and the worker start under the setting.
my $offset = -s $dest->logfile;
$dest->restart;
$source->safe_psql('postgres', q{
	INSERT INTO t SELECT g, g FROM generate_series(11, 20) g;
	UPDATE t SET n = n + 100 WHERE id <= 5;
	DELETE FROM t WHERE id = 20});
ok(sa_caught_up(source_lsn($source)), 'after a restart under the setting, launcher and worker stream');
is(sa_rows(), src_rows(), 'after the restart: the rows equal the source');
# (pg_stat_activity shows the session user a backend started with, here
# dbowner for both: PostgreSQL records it before the worker pins its own)
is($dest->safe_psql('sa', $as_su . q{
	SELECT string_agg(backend_type, ',' ORDER BY backend_type) FROM pg_stat_activity
	 WHERE datname = 'sa' AND backend_type IN ('cdc_apply launcher', 'cdc_apply worker')}),
	'cdc_apply launcher,cdc_apply worker', 'the launcher and the worker of sa run');
unlike(slurp_file($dest->logfile, $offset), qr/permission denied for table subscription/,
	'no background worker of sa failed reading cdc.subscription');
is($dest->safe_psql('sa', $as_su . q{SELECT count(*) FROM cdc.subscription_errors}), '0', 'no error was recorded');

# The database is served, so its guard holds (TAP 141): its owner may not
# make it unserved while it has subscriptions.  Before, nothing served it
# under the setting, and the owner's ALLOW_CONNECTIONS false (then DROP
# DATABASE after the next restart) went through, leaving the slot on the
# source.
my ($rc, $out, $err) = $dest->psql('postgres', 'SET ROLE dbowner; ALTER DATABASE sa ALLOW_CONNECTIONS false');
isnt($rc, 0, 'the owner may not set ALLOW_CONNECTIONS false');
like($err, qr/database "sa" has cdc_apply subscriptions/, 'refused: the database has subscriptions');
is($dest->safe_psql('postgres', q{SELECT datallowconn FROM pg_database WHERE datname = 'sa'}), 't',
	'the database still allows connections');

$dest->safe_psql('postgres', q{SET ROLE dbowner; ALTER DATABASE sa RESET session_authorization});
$dest->safe_psql('sa', q{SELECT cdc.drop_subscription('sa_sub', drop_slot => true)});
$dest->stop;
$source->stop;
done_testing();

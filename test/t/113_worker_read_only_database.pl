# A destination database whose owner sets default_transaction_read_only
# (ALTER DATABASE ... SET, which a database owner may do without being a
# superuser) must not stop the worker nor the launcher of that database.
# Before, each new worker process took the setting from pg_db_role_setting,
# failed at its first read of cdc.subscription (FOR SHARE in a read-only
# transaction), failed again writing its error record, and so exited
# without its backoff: the launcher restarted it at once, about fifty
# processes a second, while cdc.subscription_status showed 'starting'
# with no error and nothing was applied (review h4).  PostgreSQL's own
# apply worker writes through the executor's row routines and is not
# stopped by the setting either.  The same owner's ALTER DATABASE ... SET
# role = itself made the database launcher fail reading cdc.subscription,
# once per cdc.naptime, with the status row frozen.  The worker and the
# database launcher now pin default_transaction_read_only = off and role =
# none (the bootstrap superuser they connect as) for their sessions, as they
# pin search_path and session_replication_role.
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
owned_database_subscription($source, $dest, 'dbowner', 'ro', 'ro_sub');

# Every read below runs in the database 'ro', in sessions that take its
# settings, back to the authenticated superuser (the settings below may
# make a session another role; poll_query_until, whose psql is not quiet,
# reads only the public cdc.subscription_status).
my $as_su = 'SET SESSION AUTHORIZATION DEFAULT; SET ROLE NONE; ';
sub ro_caught_up { return owned_database_caught_up($dest, 'ro', 'ro_sub', $_[0]); }
sub ro_rows { return owned_database_rows($dest, 'ro'); }
sub src_rows { return $source->safe_psql('postgres', q{SELECT count(*) || ':' || sum(n) FROM t}); }

ok(ro_caught_up(source_lsn($source)), 'the copy is applied');
is(ro_rows(), src_rows(), 'copy: the rows equal the source');

# The owner makes the database read-only by default: not a superuser's act.
$dest->safe_psql('postgres', q{SET ROLE dbowner; ALTER DATABASE ro SET default_transaction_read_only = on});
is($dest->safe_psql('ro', 'SHOW default_transaction_read_only'), 'on', 'new sessions of ro are read-only by default');

# A new worker process takes the setting: end the running one.
my $pid = $dest->safe_psql('ro', $as_su . q{SELECT worker_pid FROM cdc.subscription_status WHERE name = 'ro_sub'});
$dest->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$source->safe_psql('postgres', q{
	INSERT INTO t SELECT g, g FROM generate_series(11, 20) g;
	UPDATE t SET n = n + 100 WHERE id <= 5;
	DELETE FROM t WHERE id = 20});
ok(ro_caught_up(source_lsn($source)), 'a new worker under the setting streams');
is(ro_rows(), src_rows(), 'stream: the rows equal the source');
isnt($dest->safe_psql('ro', $as_su . q{SELECT worker_pid FROM cdc.subscription_status WHERE name = 'ro_sub'}), $pid,
	'applied by a new worker process');

# After a restart the database launcher starts under the setting too, and
# so does the worker: the subscription's later changes still arrive.
$dest->restart;
$source->safe_psql('postgres', q{
	INSERT INTO t SELECT g, g FROM generate_series(21, 30) g;
	UPDATE t SET n = n + 1000 WHERE id > 25});
ok(ro_caught_up(source_lsn($source)), 'after a restart, launcher and worker under the setting stream');
is(ro_rows(), src_rows(), 'after the restart: the rows equal the source');
is($dest->safe_psql('ro', $as_su . q{SELECT count(*) FROM cdc.subscription_errors}), '0', 'no error was recorded');

# The owner makes every session of the database act as itself (SET role).
# After a restart the launcher and the worker still act as the superuser
# they connect as, and apply.
for my $setting ('role')
{
	$dest->safe_psql('postgres', qq{SET ROLE dbowner; ALTER DATABASE ro SET $setting = 'dbowner'});
	is($dest->safe_psql('ro', 'SELECT current_user'), 'dbowner', "with $setting set, sessions of ro act as dbowner");
	$dest->restart;
	$source->safe_psql('postgres', qq{
		INSERT INTO t VALUES ((SELECT max(id) + 1 FROM t), 7);
		UPDATE t SET n = n + 1 WHERE id % 3 = 0});
	ok(ro_caught_up(source_lsn($source)), "$setting: after a restart, launcher and worker stream");
	is(ro_rows(), src_rows(), "$setting: the rows equal the source");
	$dest->safe_psql('postgres', qq{SET ROLE dbowner; ALTER DATABASE ro RESET $setting});
}
is($dest->safe_psql('ro', $as_su . q{SELECT count(*) FROM cdc.subscription_errors}), '0', 'still no error recorded');

# Control functions run in the caller's session, which is read-only by
# default: they need the setting off, as any write there does.
$dest->safe_psql('ro', q{SET default_transaction_read_only = off; SELECT cdc.disable_subscription('ro_sub')});
$dest->poll_query_until('ro', q{SELECT worker_pid IS NULL FROM cdc.subscription_status WHERE name = 'ro_sub'})
  or diag('the worker did not exit');
$dest->safe_psql('ro', q{SET default_transaction_read_only = off; SELECT cdc.drop_subscription('ro_sub', drop_slot => true)});

$dest->stop;
$source->stop;
done_testing();

# A destination database (or role) with session_replication_role = replica
# set by ALTER DATABASE / ALTER ROLE ... SET, as an operator does for a
# database that is the target of PostgreSQL's own logical replication or of
# bulk loads (review h2).  Under replica, triggers enabled the default way
# (ENABLE ORIGIN) do not fire, and the extension's own triggers were such:
# the cache invalidations of cdc.mapping, cdc.table_barrier, cdc.source and
# cdc.outbox_source, and the guard of cdc.subscription.  So
#
#   mapping   cdc.register_mapping('t', outbox => false) in such a session
#             committed the new mapping, but the running worker (and every
#             other backend) kept its cached one: it went on writing an
#             outbox row for every change of t (three here) that the
#             mapping says has no outbox, and turning the outbox back on
#             would equally have written none;
#   guard     a role granted UPDATE on cdc.subscription rewrote a
#             subscription's conninfo, which only superusers may do;
#   triggers  every trigger on a table of the cdc schema fires under any
#             session_replication_role (ENABLE ALWAYS), as the sql_drop
#             event trigger already did.
#
# The worker itself always runs with replica (docs/worker.md): its own
# writes of cdc.table_barrier (an applied truncate) did not invalidate the
# other backends' cached barrier either (covered by "triggers").
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
sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { return $dest->safe_psql('postgres', $_[0]); }

sq(q{CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL);
	CREATE PUBLICATION p FOR TABLE t});
dq(q{CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL);
	SELECT cdc.register_mapping('t', outbox => true);
	ALTER DATABASE postgres SET session_replication_role = replica;
	CREATE ROLE bob LOGIN;
	GRANT USAGE ON SCHEMA cdc TO bob;
	GRANT SELECT, UPDATE ON cdc.subscription TO bob;
	ALTER ROLE bob SET session_replication_role = replica});
is(dq(q{SHOW session_replication_role}), 'replica', 'a new session of the database runs with replica');

# --- triggers ----------------------------------------------------------------
is(dq(q{SELECT coalesce(string_agg(c.relname || '.' || tg.tgname || '=' || tg.tgenabled::text, ', ' ORDER BY 1), '')
	  FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
	 WHERE c.relnamespace = 'cdc'::regnamespace AND NOT tg.tgisinternal AND tg.tgenabled <> 'A'}),
	'', 'triggers: every trigger of the extension is ENABLE ALWAYS');
is(dq(q{SELECT count(*) FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
	 WHERE c.relnamespace = 'cdc'::regnamespace AND NOT tg.tgisinternal}),
	'12', 'triggers: the twelve triggers of the extension are all there (with subscription_created and subscription_enabled, TAP 125)');

# --- mapping -------------------------------------------------------------------
create_subscription($dest, $source, 's', ['p']);
ok(wait_caught_up($source, $dest, 's'), 'mapping: streaming');
sq(q{INSERT INTO t SELECT g, 1 FROM generate_series(1, 3) g});
ok(wait_caught_up($source, $dest, 's'), 'mapping: first changes applied');
is(outbox_summary($dest), '3|3', 'mapping: one outbox row per change with the outbox on');

dq(q{SELECT cdc.register_mapping('t', outbox => false)});
sq(q{INSERT INTO t SELECT g, 2 FROM generate_series(4, 6) g; UPDATE t SET n = 3 WHERE id = 1});
ok(wait_caught_up($source, $dest, 's'), 'mapping: changes after the outbox was turned off applied');
same_id_n_rows($source, $dest, 't', 'mapping: outbox off');
is(outbox_summary($dest), '3|3', 'mapping: the worker follows the mapping turned off in a replica session: no outbox row');

dq(q{SELECT cdc.register_mapping('t', outbox => true)});
sq(q{INSERT INTO t VALUES (7, 4); DELETE FROM t WHERE id = 2});
ok(wait_caught_up($source, $dest, 's'), 'mapping: changes after the outbox was turned on again applied');
same_id_n_rows($source, $dest, 't', 'mapping: outbox on again');
is(outbox_summary($dest), '5|5', 'mapping: and turned on again: one outbox row per change');
is(dq(q{SELECT string_agg(op, '' ORDER BY id) FROM cdc.outbox}), 'ccccd', 'mapping: the outbox rows are c c c, then c d');

# --- guard ---------------------------------------------------------------------
my ($ret, $out, $err) = $dest->psql('postgres', q{UPDATE cdc.subscription SET conninfo = 'host=elsewhere' WHERE name = 's'},
	extra_params => ['-U', 'bob']);
isnt($ret, 0, 'guard: a role granted UPDATE on cdc.subscription is refused under replica too');
like($err, qr/superuser|permission denied/, 'guard: with the guard\'s error');
unlike(dq(q{SELECT conninfo FROM cdc.subscription WHERE name = 's'}), qr/elsewhere/, 'guard: the conninfo is unchanged');

dq(q{ALTER DATABASE postgres RESET session_replication_role});
dq(q{SELECT cdc.drop_subscription('s', drop_slot => true)});
$dest->stop;
$source->stop;
done_testing();

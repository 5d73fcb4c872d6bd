# Review h3 (fidelity): the source's own session timeouts, set for the
# replication role or the source database, must not end the worker's
# initial copy.  The copy holds one source transaction open across every
# published table, and a COPY statement stays active on the source for as
# long as the destination takes to apply what it sends.  Before the fix,
# ALTER ROLE repl SET statement_timeout = '300ms' made every copy of a table
# that takes longer than that fail with "canceling statement due to
# statement timeout", retried for ever (no table bigger than the timeout
# ever reached the destination); idle_in_transaction_session_timeout on the
# role ended the copy's transaction while the destination waited (the
# error came at COMMIT: "terminating connection due to idle-in-transaction
# timeout").  The worker now connects with statement_timeout,
# lock_timeout, idle_in_transaction_session_timeout and
# idle_session_timeout at 0, as pg_dump does (docs/worker.md, "Values on the
# wire"); the conninfo's own options may still set them.
#
# Determinism: a destination session holds a lock on the target, so the
# worker stops in the middle of the copy, with the source's COPY active
# (a large table: the socket's buffers are full) or its transaction idle (a
# small table: the COPY has ended).  A probe session of the same role on
# the source then proves that the timeout has passed for the worker's
# session too (the probe started later and was ended by it); only then is
# the worker's walsender checked to be the same and the lock released.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('stimeout_source');
my $dest = new_dest('stimeout_dest');

$source->safe_psql('postgres', q{
CREATE ROLE repl_stmt LOGIN REPLICATION;
CREATE ROLE repl_idle LOGIN REPLICATION;
CREATE TABLE public.big (id int PRIMARY KEY, v text);
INSERT INTO public.big SELECT g, repeat('x', 100) FROM generate_series(1, 200000) g;
CREATE TABLE public.small (id int PRIMARY KEY, v text);
INSERT INTO public.small SELECT g, 'v' || g FROM generate_series(1, 10) g;
GRANT SELECT ON public.big, public.small TO repl_stmt, repl_idle;
CREATE PUBLICATION pub_big FOR TABLE public.big;
CREATE PUBLICATION pub_small FOR TABLE public.small;
ALTER ROLE repl_stmt SET statement_timeout = '300ms';
ALTER ROLE repl_stmt SET lock_timeout = '300ms';
ALTER ROLE repl_idle SET idle_in_transaction_session_timeout = '300ms';
ALTER ROLE repl_idle SET idle_session_timeout = '300ms';
});
$dest->safe_psql('postgres', q{
CREATE TABLE public.big (id int PRIMARY KEY, v text);
CREATE TABLE public.small (id int PRIMARY KEY, v text);
});

# the walsender of a subscription on the source: pid and state
sub walsender
{
	my ($sub) = @_;
	return $source->safe_psql('postgres',
		"SELECT pid || '|' || state || '|' || left(query, 4) FROM pg_stat_activity "
		  . "WHERE application_name = 'cdc_apply_$sub' AND backend_type = 'walsender'");
}

(my $conn = $source->connstr('postgres')) =~ s/'/''/g;

# ---------------------------------------------------------------------------
# 1. statement_timeout: the COPY of a table stays active on the source while
#    the destination is held up
# ---------------------------------------------------------------------------
my $locker = $dest->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE public.big IN ACCESS EXCLUSIVE MODE');
$dest->safe_psql('postgres', "SELECT cdc.create_subscription('sub_big', '$conn user=repl_stmt', ARRAY['pub_big'])");
ok($source->poll_query_until('postgres',
		"SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'cdc_apply_sub_big' "
		  . "AND backend_type = 'walsender' AND state = 'active' AND query LIKE 'COPY%')"),
	'the source runs the copy of public.big');
my $before = walsender('sub_big');
# a statement of the same role started now is cancelled by the role's timeout
my ($rc, $out, $err) = $source->psql('postgres', 'SELECT pg_sleep(60)', extra_params => ['-U', 'repl_stmt']);
like($err, qr/canceling statement due to statement timeout/, 'the role\'s statement_timeout has passed (probe)');
is(walsender('sub_big'), $before, 'the copy is still running in the same walsender');
$locker->query_safe('COMMIT');
$locker->quit;
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 200000 FROM public.big}), 'public.big copied')
  or diag($dest->safe_psql('postgres', q{SELECT state, last_error FROM cdc.subscription_status}));
ok(wait_caught_up($source, $dest, 'sub_big'), 'sub_big streams');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.subscription_errors WHERE name = 'sub_big'}), '0',
	'the copy never failed');

# ---------------------------------------------------------------------------
# 2. idle_in_transaction_session_timeout: the copy's source transaction is
#    idle while the destination is held up
# ---------------------------------------------------------------------------
$locker = $dest->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE public.small IN ACCESS EXCLUSIVE MODE');
$dest->safe_psql('postgres', "SELECT cdc.create_subscription('sub_small', '$conn user=repl_idle', ARRAY['pub_small'])");
ok($dest->poll_query_until('postgres',
		q{SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN cdc.subscription_status s ON s.worker_pid = l.pid
		   WHERE s.name = 'sub_small' AND NOT l.granted AND l.relation = 'public.small'::regclass)}),
	'the worker waits for public.small in the middle of the copy');
ok($source->poll_query_until('postgres',
		"SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'cdc_apply_sub_small' "
		  . "AND backend_type = 'walsender' AND state = 'idle in transaction')"),
	'the copy\'s source transaction is idle');
$before = walsender('sub_small');
# a session of the same role that idles in a transaction from now on is ended by the role's timeout
my $probe = $source->background_psql('postgres', on_error_stop => 0, extra_params => ['-U', 'repl_idle']);
$probe->query_safe(q{SET application_name = 'idle_probe'});
$probe->query_safe('BEGIN');
$probe->query_safe('SELECT 1');
ok($source->poll_query_until('postgres',
		q{SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'idle_probe')}),
	'the role\'s idle_in_transaction_session_timeout has passed (probe)');
eval { $probe->quit };
is(walsender('sub_small'), $before, 'the copy\'s transaction is still open in the same walsender');
$locker->query_safe('COMMIT');
$locker->quit;
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 10 FROM public.small}), 'public.small copied')
  or diag($dest->safe_psql('postgres', q{SELECT state, last_error FROM cdc.subscription_status}));
ok(wait_caught_up($source, $dest, 'sub_small'), 'sub_small streams');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.subscription_errors WHERE name = 'sub_small'}), '0',
	'the copy never failed');

# ---------------------------------------------------------------------------
# 3. The conninfo's own options still set them: a statement_timeout chosen
#    there applies (the copy of public.big takes longer than 1 ms).
# ---------------------------------------------------------------------------
$source->safe_psql('postgres', q{INSERT INTO public.big VALUES (0, 'streamed')});
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.big WHERE id = 0}), 'sub_big streams changes');
$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('sub_big')});
$dest->safe_psql('postgres', q{TRUNCATE public.big});
$locker = $dest->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE public.big IN ACCESS EXCLUSIVE MODE');
$dest->safe_psql('postgres',
	"SELECT cdc.create_subscription('sub_opt', '$conn user=repl_stmt options=''-c statement_timeout=1''', ARRAY['pub_big'])");
ok($dest->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM cdc.subscription_errors
		   WHERE name = 'sub_opt' AND error LIKE '%canceling statement due to statement timeout%'}),
	'a statement_timeout in the conninfo\'s options applies');
$locker->query_safe('ROLLBACK');
$locker->quit;
$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('sub_opt')});

done_testing();

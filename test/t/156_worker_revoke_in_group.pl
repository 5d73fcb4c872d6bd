# Security review h4 (sec-review-16b): a privilege revoked while a group is
# open.  The worker applies several source transactions in one local
# transaction (a group) and decides once per group and target which role
# applies it (ApplyEngine::Authorize).  Does a REVOKE committed on the
# destination while the group is open stop the group's later source
# transactions (here one committed on the source after the REVOKE)?  Yes:
# every write checks the applying role's table privileges again, with
# PostgreSQL's ACL checks (the executor's, or pg_class_aclmask before a
# write without SQL, table_write.cpp), and the wait for the locked row took
# a new lock, which delivered the REVOKE's invalidation.  The group fails
# ("permission denied for table a"), nothing of it commits, and the retry
# refuses the first transaction too (applied under the rights of its local
# commit, which is after the REVOKE).  After GRANT everything is applied.
# Part 2: the role switch (the subscription owner applies as the table's
# owner because it is a member of it) was decided once per group and table:
# with the membership revoked while the group was open, the group's next
# source transaction (committed on the source after the REVOKE) was applied
# as the table's owner (rows 10 and 11 committed).  Now the worker takes the
# invalidations at each source transaction's BEGIN and a change of a role or
# membership makes Authorize decide again (docs/security.md, "The owner's
# lifecycle").
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('revgrp_source');
# change by change (the change before the lock is applied, not queued), and
# groups that stay open until the source has nothing more to send
my $dest = new_dest('revgrp_dest', "cdc.apply_batch_changes = 1\ncdc.group_max_delay = 60s\n");

my $tables = q{
CREATE TABLE public.a (id int PRIMARY KEY, n int);
CREATE TABLE public.x (id int PRIMARY KEY, n int);
};
$source->safe_psql('postgres', $tables . q{
CREATE PUBLICATION pub FOR TABLE public.a, public.x;
INSERT INTO public.x VALUES (1, 0);
});
$dest->safe_psql('postgres', $tables . q{
CREATE ROLE subo;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.a, public.x TO subo;
});
create_subscription($dest, $source, 'sub', ['pub'], "owner => 'subo', run_as_owner => true");
$source->safe_psql('postgres', 'INSERT INTO public.a VALUES (1, 1)');
ok(wait_caught_up($source, $dest, 'sub'), 'sub copies and streams');
same_id_n_rows($source, $dest, 'public.x', 'start');

# The worker applies a's row 10, then waits for x's row 1, locked here: the
# group is open, and it has authorized public.a.
my $locker = $dest->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('SELECT id FROM public.x WHERE id = 1 FOR UPDATE');
$source->safe_psql('postgres', 'BEGIN; INSERT INTO public.a VALUES (10, 10); UPDATE public.x SET n = n + 1 WHERE id = 1; COMMIT');
ok($dest->poll_query_until('postgres',
	q{SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'cdc_apply worker' AND wait_event_type = 'Lock')}),
	'the worker waits for the locked row, its group open');

# Revoked on the destination, then a source transaction inserts into a.
$dest->safe_psql('postgres', 'REVOKE INSERT ON public.a FROM subo');
$source->safe_psql('postgres', 'INSERT INTO public.a VALUES (11, 11)');
my $after = source_lsn($source);
$locker->query_safe('COMMIT');
$locker->quit;

# the sync point: the worker failed, or applied past the REVOKE's transaction
ok(wait_status($dest, 'sub', "state = 'error' OR greatest(applied_lsn, flushed_lsn) >= '$after'::pg_lsn"),
	'the worker failed or caught up');
ok(wait_status($dest, 'sub', "state = 'error' AND last_error LIKE '%permission denied for table%a%'"),
	'the REVOKE stops the group');
is($dest->safe_psql('postgres', 'SELECT string_agg(id::text, \',\' ORDER BY id) FROM public.a'), '1',
	'nothing of the group committed: neither row 10 nor row 11');
is($dest->safe_psql('postgres', 'SELECT n FROM public.x WHERE id = 1'), '0',
	'the first transaction, retried after the REVOKE, is refused too');
$dest->safe_psql('postgres', 'GRANT INSERT ON public.a TO subo');
ok(wait_caught_up($source, $dest, 'sub', $after), 'GRANT again: the worker catches up');
same_id_n_rows($source, $dest, 'public.a', 'end');
same_id_n_rows($source, $dest, 'public.x', 'end');

# ---------------------------------------------------------------------------
# 2. The membership that lets the subscription owner apply as the table's
#    owner, revoked while the group is open: the role switch was decided at
#    the group's first change of the table and is decided again
# ---------------------------------------------------------------------------
my $tables2 = q{
CREATE TABLE public.c (id int PRIMARY KEY, n int);
CREATE TABLE public.y (id int PRIMARY KEY, n int);
};
$source->safe_psql('postgres', $tables2 . q{
CREATE PUBLICATION pub2 FOR TABLE public.c, public.y;
INSERT INTO public.y VALUES (1, 0);
});
$dest->safe_psql('postgres', $tables2 . q{
CREATE ROLE carol;
CREATE ROLE cown IN ROLE carol;
ALTER TABLE public.c OWNER TO carol;
ALTER TABLE public.y OWNER TO carol;
});
create_subscription($dest, $source, 'sub2', ['pub2'], "owner => 'cown'");
$source->safe_psql('postgres', 'INSERT INTO public.c VALUES (1, 1)');
ok(wait_caught_up($source, $dest, 'sub2'), 'sub2 copies and streams');

$locker = $dest->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('SELECT id FROM public.y WHERE id = 1 FOR UPDATE');
$source->safe_psql('postgres', 'BEGIN; INSERT INTO public.c VALUES (10, 10); UPDATE public.y SET n = n + 1 WHERE id = 1; COMMIT');
ok($dest->poll_query_until('postgres',
	q{SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'cdc_apply worker' AND wait_event_type = 'Lock')}),
	'sub2: the worker waits for the locked row, its group open');
$dest->safe_psql('postgres', 'REVOKE carol FROM cown');
$source->safe_psql('postgres', 'INSERT INTO public.c VALUES (11, 11)');
$after = source_lsn($source);
$locker->query_safe('COMMIT');
$locker->quit;
ok(wait_status($dest, 'sub2', "state = 'error' OR greatest(applied_lsn, flushed_lsn) >= '$after'::pg_lsn"),
	'sub2: the worker failed or caught up');
ok(wait_status($dest, 'sub2', q{state = 'error' AND last_error LIKE '%subscription owner "cown" cannot apply changes to table public.c owned by "carol"%'}),
	'sub2: the membership revoked in the open group stops it');
is($dest->safe_psql('postgres', 'SELECT string_agg(id::text, \',\' ORDER BY id) FROM public.c'), '1',
	'sub2: nothing of the group committed: neither row 10 nor row 11');
$dest->safe_psql('postgres', 'GRANT carol TO cown');
ok(wait_caught_up($source, $dest, 'sub2', $after), 'sub2: membership again, the worker catches up');
same_id_n_rows($source, $dest, 'public.c', 'sub2 end');

$dest->stop;
$source->stop;
done_testing();

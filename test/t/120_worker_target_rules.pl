# Review: a target with rewrite rules, applied by the worker.  The engine
# writes rows partly through the executor, which fires no rules, and partly
# through SQL statements, which the rewriter rewrites; the worker's session
# runs with session_replication_role = replica, where ENABLE ALWAYS (and
# ENABLE REPLICA) rules fire on the statements.  A table with rules is now
# refused as a target (0A000, sql/target_rules.sql for the SQL path): the
# worker stops with state error naming the table, nothing applied and no
# rule fired, at the initial copy and, for a rule made later on a table it
# already applies to, at the next change; once the rule is dropped it
# applies everything from where it stopped.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('rules_source');
my $dest = new_dest('rules_dest');

$source->safe_psql('postgres', q{
CREATE TABLE public.t (id int PRIMARY KEY, n int NOT NULL);
CREATE PUBLICATION pub_t FOR TABLE public.t;
INSERT INTO public.t VALUES (1, 1), (2, 2);
});
$dest->safe_psql('postgres', q{
CREATE TABLE public.t (id int PRIMARY KEY, n int NOT NULL);
CREATE TABLE public.fired (what text, id int);
CREATE RULE t_ins AS ON INSERT TO public.t DO ALSO INSERT INTO public.fired VALUES ('insert', new.id);
ALTER TABLE public.t ENABLE ALWAYS RULE t_ins;
});

# ---------------------------------------------------------------------------
# 1. A rule before the copy: refused, nothing copied, the rule never fired
# ---------------------------------------------------------------------------
create_subscription($dest, $source, 'sub_t', ['pub_t']);
ok(wait_status($dest, 'sub_t', "state = 'error'"), 'sub_t stops with an error');
like(status_row($dest, 'sub_t', 'last_error'), qr/target public\.t has rewrite rules/, 'the error names the table');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.t}), '0', 'nothing was copied');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.fired}), '0', 'the rule never fired');

$dest->safe_psql('postgres', q{DROP RULE t_ins ON public.t});
ok(wait_caught_up($source, $dest, 'sub_t'), 'sub_t copies and streams once the rule is dropped');
same_id_n_rows($source, $dest, 'public.t', 'after the copy');

# ---------------------------------------------------------------------------
# 2. A rule made on a table the worker applies to: noticed at the next change
# ---------------------------------------------------------------------------
$source->safe_psql('postgres', q{UPDATE public.t SET n = 20 WHERE id = 2});
ok(wait_caught_up($source, $dest, 'sub_t'), 'an update streams');
$dest->safe_psql('postgres', q{
CREATE RULE t_del AS ON DELETE TO public.t DO INSTEAD NOTHING;
ALTER TABLE public.t ENABLE ALWAYS RULE t_del;
});
$source->safe_psql('postgres', q{DELETE FROM public.t WHERE id = 1; INSERT INTO public.t VALUES (3, 3)});
ok(wait_status($dest, 'sub_t', "state = 'error' AND last_error LIKE '%has rewrite rules%'"),
	'sub_t stops with an error at the change after the rule');
like(status_row($dest, 'sub_t', 'last_error'), qr/target public\.t has rewrite rules/, 'the error names the table');
is(id_n_rows($dest, 'public.t'), '2 1:1,2:20', 'nothing of the transaction was applied');

$dest->safe_psql('postgres', q{DROP RULE t_del ON public.t});
ok(wait_caught_up($source, $dest, 'sub_t'), 'sub_t goes on once the rule is dropped');
same_id_n_rows($source, $dest, 'public.t', 'after the rule is dropped');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.fired}), '0', 'no rule ever fired');

$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('sub_t', drop_slot => true)});
$dest->stop;
$source->stop;
done_testing();

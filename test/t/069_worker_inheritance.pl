# A published inheritance parent (docs/worker.md: the destination ends with
# the source's rows).  pgoutput sends a change of the parent's own row, and
# a TRUNCATE ONLY of the parent, for the parent alone; a child inherits
# from it on both sides and is published too (a publication's FOR TABLE
# includes the descendants).  The worker's statements on the parent
# (DELETE FROM parent, TRUNCATE parent) have no ONLY, so on the destination
# they also delete the child's rows, which the source keeps -- silently, no
# error (PostgreSQL's own apply worker changes exactly the relation named).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('inh_source');
my $dest = new_dest('inh_dest');

my $tables = q{
CREATE TABLE public.parent (id int PRIMARY KEY, v text);
CREATE TABLE public.child (PRIMARY KEY (id)) INHERITS (public.parent);
};
$source->safe_psql('postgres', $tables . q{
INSERT INTO public.parent VALUES (1, 'p1'), (2, 'p2');
INSERT INTO public.child VALUES (1, 'c1'), (2, 'c2'), (3, 'c3');
CREATE PUBLICATION pub FOR TABLE public.parent;
});
$dest->safe_psql('postgres', $tables);

create_subscription($dest, $source, 'sub_inh', ['pub']);
wait_caught_up($source, $dest, 'sub_inh') or diag 'sub_inh did not start';
my $rows = q{SELECT string_agg(tableoid::regclass || ':' || id || ':' || v, ',' ORDER BY tableoid::regclass::text, id) FROM public.parent};
is($dest->safe_psql('postgres', $rows), $source->safe_psql('postgres', $rows), 'the copies are equal');

# a delete of the parent's own row 1: the child's row 1 stays on the source
$source->safe_psql('postgres', q{DELETE FROM ONLY public.parent WHERE id = 1});
wait_caught_up($source, $dest, 'sub_inh') or diag 'sub_inh did not catch up (delete)';
is($dest->safe_psql('postgres', $rows), $source->safe_psql('postgres', $rows),
	'a delete of a parent row leaves the child row of the same key');

# TRUNCATE ONLY of the parent: the child keeps its rows on the source
$source->safe_psql('postgres', q{TRUNCATE ONLY public.parent});
wait_caught_up($source, $dest, 'sub_inh') or diag 'sub_inh did not catch up (truncate)';
is($dest->safe_psql('postgres', $rows), $source->safe_psql('postgres', $rows),
	'TRUNCATE ONLY of the parent leaves the child rows');

$source->stop;
$dest->stop;
done_testing();

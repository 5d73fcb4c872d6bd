# An UPDATE that moves a row into a publication's row filter, with a
# TOASTed column it leaves unchanged (docs/worker.md, "Limits of this
# version"; review h2).
#
# pgoutput (PostgreSQL 15) sends such an UPDATE as an INSERT of the new
# row.  The TOASTed value the UPDATE did not change is not in its WAL, and
# the old row sent with it carries only the key unless the table has
# REPLICA IDENTITY FULL: the column comes as "unchanged" ('u').  The engine
# took the INSERT as a change with an unavailable value for a row the
# destination does not have: a conflict (cdc.conflicts), and the worker
# streamed on without the row; PostgreSQL's own subscriber inserts NULL
# there.  Either way the destination differs from the source, silently.
# The worker now stops with 55000 naming the table and the column, and
# cdc.resync_table gets past it with the right rows.
#
# Source tables (tenant, id) keyed, a large text column of md5 strings
# (compresses poorly: stored out of line), published WHERE (tenant = 'a');
# a row of tenant 'b' moved to 'a':
#   - full_docs, REPLICA IDENTITY FULL: the INSERT carries every value and
#     is applied;
#   - docs, REPLICA IDENTITY DEFAULT: the worker stops (state error, the
#     message names docs and body); the destination has no wrong row;
#     after cdc.resync_table both tables equal the source's published rows
#     and a later UPDATE that leaves the value unchanged inside the filter
#     keeps it.
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
my $ddl = q{
CREATE TABLE docs (tenant text, id int, body text, note text, PRIMARY KEY (tenant, id));
CREATE TABLE full_docs (tenant text, id int, body text, note text, PRIMARY KEY (tenant, id));
};
$source->safe_psql('postgres', $ddl . q{
ALTER TABLE full_docs REPLICA IDENTITY FULL;
CREATE FUNCTION big(seed int) RETURNS text LANGUAGE sql AS
  $$SELECT string_agg(md5((seed * 1000 + g)::text), '') FROM generate_series(1, 200) g$$;
INSERT INTO docs VALUES ('a', 1, big(1), 'n1'), ('b', 2, big(2), 'n2');
INSERT INTO full_docs VALUES ('a', 1, big(1), 'n1'), ('b', 2, big(2), 'n2');
CREATE PUBLICATION p FOR TABLE docs WHERE (tenant = 'a'), full_docs WHERE (tenant = 'a');
});
$dest->safe_psql('postgres', $ddl);
create_subscription($dest, $source, 'sub', ['p']);
ok(wait_caught_up($source, $dest, 'sub'), 'the published rows are copied');
is($source->safe_psql('postgres', q{SELECT count(*) FROM pg_class c JOIN pg_class t ON t.reltoastrelid = c.oid
  WHERE t.relname = 'docs' AND pg_relation_size(c.oid) > 0}), '1', 'the source stores body out of line');

my $rows = q{SELECT tenant, id, md5(body), note FROM %s %s ORDER BY 1, 2};
sub same_rows
{
	my ($t, $label) = @_;
	is($dest->safe_psql('postgres', sprintf($rows, $t, '')),
		$source->safe_psql('postgres', sprintf($rows, $t, q{WHERE tenant = 'a'})), $label);
}

# REPLICA IDENTITY FULL: the INSERT carries the value
$source->safe_psql('postgres', q{UPDATE full_docs SET tenant = 'a' WHERE id = 2});
ok(wait_caught_up($source, $dest, 'sub'), 'full_docs: the moved row is applied');
same_rows('full_docs', 'full_docs: equal to the source (the INSERT carried body)');

# REPLICA IDENTITY DEFAULT: the INSERT lacks body
$source->safe_psql('postgres', q{UPDATE docs SET tenant = 'a' WHERE id = 2});
ok(wait_status($dest, 'sub', q{state = 'error' AND last_error LIKE
  'cdc_apply: the source sent an INSERT into table public.docs without the value of column "body"%'}),
	'docs: the worker stops, naming the table and the column');
like(status_row($dest, 'sub', 'last_error'), qr/HINT: Copy the table again with cdc\.resync_table\('sub'/,
	'the hint names cdc.resync_table');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM docs WHERE id = 2}), '0', 'no row without its body');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.conflicts}), '0', 'and no conflict recorded in its place');

$dest->safe_psql('postgres', q{SELECT cdc.resync_table('sub', 'docs')});
$source->safe_psql('postgres', q{UPDATE docs SET note = 'n2x' WHERE id = 2});
ok(wait_caught_up($source, $dest, 'sub'), 'after cdc.resync_table the worker streams again');
same_rows('docs', 'docs: equal to the source, body included');
same_rows('full_docs', 'full_docs: still equal');

$dest->stop;
$source->stop;
done_testing();

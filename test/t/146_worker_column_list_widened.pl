# A publication's column list widened while the worker streams (ALTER
# PUBLICATION ... SET TABLE t (id, a, b)): as PostgreSQL 15's own
# subscriber, the stream brings the new column's values only with the
# rows changed afterwards, and cdc.refresh_subscription does not copy a
# table the subscription already has, so rows unchanged since keep the
# destination's default (a documented limit, docs/worker.md "Limits of this
# version", as for a widened row filter).  cdc.resync_table copies the
# table again with the new list, and the destination then equals the source.
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
my $ddl = q{CREATE TABLE c (id int PRIMARY KEY, a int, b int);};
$source->safe_psql('postgres', $ddl . q{
CREATE PUBLICATION p FOR TABLE c (id, a);
INSERT INTO c VALUES (1, 1, 10), (2, 2, 20);});
$dest->safe_psql('postgres', $ddl);
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
$dest->safe_psql('postgres', "SELECT cdc.create_subscription('s', '$conn', ARRAY['p'])");
ok(wait_caught_up($source, $dest, 's'), 'initial copy of the listed columns');
is($dest->safe_psql('postgres', q{SELECT string_agg(concat_ws(',', id, a, b), ';' ORDER BY id) FROM c}), '1,1;2,2',
	'the unlisted column is not copied');

$source->safe_psql('postgres', q{
ALTER PUBLICATION p SET TABLE c (id, a, b);
UPDATE c SET a = 3 WHERE id = 1;
INSERT INTO c VALUES (3, 3, 30);});
ok(wait_caught_up($source, $dest, 's'), 'changes after the widening applied');
$dest->safe_psql('postgres', q{SELECT * FROM cdc.refresh_subscription('s')});
ok(wait_caught_up($source, $dest, 's'), 'refreshed');
is($dest->safe_psql('postgres', q{SELECT string_agg(concat_ws(',', id, a, b), ';' ORDER BY id) FROM c}), '1,3,10;2,2;3,3,30',
	'the limit: the rows changed after the widening carry the new column, row 2 (unchanged) does not, also after a refresh');
is(status_row($dest, 's', q{state || '|' || coalesce(last_error, '')}), 'streaming|', 'no error: the limit is silent, as for PostgreSQL\'s subscriber');

$dest->safe_psql('postgres', q{SELECT cdc.resync_table('s', 'c')});
ok(wait_caught_up($source, $dest, 's'), 'resync_table done');
is($dest->safe_psql('postgres', q{SELECT string_agg(concat_ws(',', id, a, b), ';' ORDER BY id) FROM c}),
	$source->safe_psql('postgres', q{SELECT string_agg(concat_ws(',', id, a, b), ';' ORDER BY id) FROM c}),
	'cdc.resync_table: the destination equals the source');
done_testing();

# A table waiting for its copy (state init) that the publications stopped
# publishing before the copy ran (review h2).  The copy read what the
# publications publish of it (TableScope) and found nothing: no column
# list, no row filter, so it copied every column and every row of a table
# that was no longer published, marked it ready, and the stream (which
# sends nothing of it) left the copy stale for ever, with the subscription
# streaming.  Here the publication had a column list without the column
# "secret": the copy read and wrote it all the same, although a column the
# publication does not publish is never read (docs/worker.md, "The
# publications' scope").
#
# The table was added (ALTER PUBLICATION ... ADD TABLE, then
# cdc.refresh_subscription) while its destination table was missing, so its
# copy failed and waited; then the source dropped it from the publication
# and the destination table was created.  Now the copy stops with 55000
# naming the table (nothing read from it, nothing written), and
# cdc.refresh_subscription removes it, after which the worker streams on.
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
	CREATE TABLE x (id int PRIMARY KEY, n int NOT NULL, secret text);
	INSERT INTO x VALUES (1, 1, 'hidden');
	CREATE PUBLICATION p FOR TABLE t});
dq(q{CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL);
	SELECT cdc.register_mapping('t', outbox => true)});
create_subscription($dest, $source, 's', ['p']);
ok(wait_caught_up($source, $dest, 's'), 'streaming');

# added with a column list, while the destination has no table for it
sq(q{ALTER PUBLICATION p ADD TABLE x (id, n)});
is(dq(q{SELECT string_agg(table_name || ':' || action, ',') FROM cdc.refresh_subscription('s')}), 'x:added', 'x added');
ok(wait_status($dest, 's', q{state = 'error' AND last_error LIKE '%published table public.x has no destination table%'}),
	'the copy of x waits for its destination table');

# no longer published; then the destination table appears
sq(q{ALTER PUBLICATION p DROP TABLE x; INSERT INTO x VALUES (2, 2, 'hidden too'); INSERT INTO t VALUES (1, 1)});
dq(q{CREATE TABLE x (id int PRIMARY KEY, n int NOT NULL, secret text)});
ok(wait_status($dest, 's', q{state = 'error' AND last_error LIKE '%table public.x is not published by publications%'}),
	'the copy stops: x is not published any more');
like(status_row($dest, 's', 'last_error'), qr/cdc\.refresh_subscription/, 'the error says how to go on');
is(dq(q{SELECT count(*) FROM x}), '0', 'nothing of x copied');
is(dq(q{SELECT state FROM cdc.subscription_tables WHERE table_name = 'x'}), 'init', 'x still waits');

is(dq(q{SELECT string_agg(table_name || ':' || action, ',') FROM cdc.refresh_subscription('s')}), 'x:removed',
	'the refresh removes x');
ok(wait_caught_up($source, $dest, 's'), 'streaming again');
is(dq(q{SELECT count(*) FROM x}), '0', 'x: never copied');
same_id_n_rows($source, $dest, 't', 't');
is(outbox_summary($dest), '1|1', 'one outbox row for the change of t');

# published again with its column list: copied, without the column
sq(q{ALTER PUBLICATION p ADD TABLE x (id, n)});
is(dq(q{SELECT string_agg(table_name || ':' || action, ',') FROM cdc.refresh_subscription('s')}), 'x:added', 'x added again');
$dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE table_name = 'x'});
ok(wait_caught_up($source, $dest, 's'), 'x copied');
same_id_n_rows($source, $dest, 'x', 'x');
is(dq(q{SELECT count(*) FROM x WHERE secret IS NOT NULL}), '0', 'x: the unpublished column never read');

dq(q{SELECT cdc.drop_subscription('s', drop_slot => true)});
$dest->stop;
$source->stop;
done_testing();

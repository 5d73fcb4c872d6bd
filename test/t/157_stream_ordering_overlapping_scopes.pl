# Stream ordering with two subscriptions of one source whose publications
# differ (found by fresh-user run h4).  A stream-ordered target keeps one
# high-water mark per (target, source): pfull publishes every change of t,
# pins only its inserts (publish = 'insert').  sub_ins applied a source
# transaction's INSERT first and moved the shared mark past the same
# transaction's UPDATE, which sub_full then found at or below the mark and
# dropped as a duplicate: 9 of 20 updates silently lost in a manual run.
# The mark orders several subscriptions only when they receive the same
# changes, so such a configuration is refused (docs/semantics.md, "Stream
# ordering"):
#   1. the worker stops (state error, last_error 55000 naming the table and
#      both subscriptions) before it uses the mark: nothing is applied out
#      of order, the rows applied before stay correct;
#   2. after the operator switches t to entity ordering both catch up and t
#      equals the source (every update applied);
#   3. cdc.set_ordering(t, 'stream') is refused (55000) while the two
#      subscriptions with different publications feed t;
#   4. after one subscription is dropped it is accepted and t keeps equal to
#      the source.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest', "cdc.database = 'postgres'\n");
my $ddl = "CREATE TABLE t (id int PRIMARY KEY, n int);";
$source->safe_psql('postgres', $ddl);
$dest->safe_psql('postgres', $ddl);
$source->safe_psql('postgres', q{
INSERT INTO t SELECT g, 1 FROM generate_series(1, 10) g;
CREATE PUBLICATION pfull FOR TABLE t;
CREATE PUBLICATION pins FOR TABLE t WITH (publish = 'insert');
});
$dest->safe_psql('postgres', "SELECT cdc.register_mapping('t')");
create_subscription($dest, $source, 'sub_full', ['pfull']);
ok(wait_caught_up($source, $dest, 'sub_full'), 'sub_full copied and streaming');
$dest->safe_psql('postgres', "SELECT cdc.set_ordering('t', 'stream')");
$source->safe_psql('postgres', "UPDATE t SET n = 2 WHERE id = 10");
ok(wait_caught_up($source, $dest, 'sub_full'), 'sub_full streams alone into the stream-ordered t');
compare_table($source, $dest, 'SELECT id, n FROM t ORDER BY id', 'one subscription: t equals the source');

# --- 1. a second subscription with other publications: refused --------------
# sub_full held back: sub_ins would apply each transaction's insert first
disable_and_wait($source, $dest, 'sub_full');
create_subscription($dest, $source, 'sub_ins', ['pins'], 'copy_data => false');
for my $i (1 .. 5) {
	$source->safe_psql('postgres', "BEGIN; UPDATE t SET n = n + 100 WHERE id = $i; INSERT INTO t VALUES (100 + $i, 1); COMMIT;");
}
ok(wait_status($dest, 'sub_ins',
		q{last_error LIKE '%table public.t is stream-ordered and fed by subscriptions "sub_full" and "sub_ins"%different publications%'}),
	'sub_ins stops: last_error names t and both subscriptions');
is($dest->safe_psql('postgres', 'SELECT count(*), sum(n) FROM t'), '10|11',
	'nothing of sub_ins applied: t holds the rows applied before, unchanged');
enable_subscription($dest, 'sub_full');
ok(wait_status($dest, 'sub_full', q{last_error LIKE '%table public.t is stream-ordered and fed by subscriptions%'}),
	'sub_full, restarted, stops too (the rule is symmetric)');
is($dest->safe_psql('postgres', 'SELECT count(*), sum(n) FROM t'), '10|11', 'still nothing applied out of order');

# --- 2. the operator switches t to entity ordering: both catch up ------------
$dest->safe_psql('postgres', "SELECT cdc.set_ordering('t', 'entity')");
ok(wait_caught_up($source, $dest, 'sub_full'), 'entity ordering: sub_full caught up');
ok(wait_caught_up($source, $dest, 'sub_ins'), 'entity ordering: sub_ins caught up');
compare_table($source, $dest, 'SELECT id, n FROM t ORDER BY id', 'entity ordering: t equals the source (every update applied)');

# --- 3. set_ordering refuses stream ordering up front ------------------------
my ($rc, $out, $err) = $dest->psql('postgres', "SELECT cdc.set_ordering('t', 'stream')",
	extra_params => ['-v', 'VERBOSITY=verbose']);
isnt($rc, 0, 'set_ordering(t, stream) refused');
like($err, qr/55000: table public.t cannot be stream-ordered: subscriptions "sub_full" and "sub_ins" both feed it with different publications/,
	'set_ordering: 55000 naming both subscriptions');
like($err, qr/HINT:\s+Use one subscription per stream-ordered target/, 'set_ordering: the hint says what to do');
is($dest->safe_psql('postgres', "SELECT ordering FROM cdc.mapping WHERE target = 't'::regclass"), 'entity',
	'set_ordering: t stays entity-ordered');

# --- 4. one subscription dropped: stream ordering accepted -------------------
$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('sub_ins', drop_slot => true)});
$dest->safe_psql('postgres', "SELECT cdc.set_ordering('t', 'stream')");
for my $i (6 .. 8) {
	$source->safe_psql('postgres', "BEGIN; UPDATE t SET n = n + 100 WHERE id = $i; INSERT INTO t VALUES (100 + $i, 1); COMMIT;");
}
ok(wait_caught_up($source, $dest, 'sub_full'), 'one subscription again: sub_full caught up');
compare_table($source, $dest, 'SELECT id, n FROM t ORDER BY id', 'one subscription again: t equals the source');
is(status_row($dest, 'sub_full', q{state}), 'streaming', 'sub_full streaming');
done_testing();

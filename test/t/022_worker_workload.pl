# Workloads through the apply worker: the shared fixture workload
# (../shared/fixtures/wal2json: schema.sql + workload.sql, every step S01..S22)
# streamed into a copy of its schema and compared with
# ../shared/fixtures/expected-final-state/*.csv; then a pgbench workload of
# inserts, updates and deletes on the tables with primary keys.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $shared = cdc_root() . '/../shared/fixtures';
plan skip_all => "shared fixtures not found at $shared" unless -d $shared;

my $source = new_source('source');
$source->append_conf('postgresql.conf', "timezone = 'UTC'\ndatestyle = 'iso, mdy'\n");
$source->restart;
my $dest = new_dest('dest', "timezone = 'UTC'\ndatestyle = 'iso, mdy'\n");

# --- the fixture workload --------------------------------------------------
my $schema = slurp_file("$shared/wal2json/schema.sql");
$source->safe_psql('postgres', $schema);
$dest->safe_psql('postgres', $schema);
# the destination publishes nothing (a FOR ALL TABLES publication there would
# refuse updates of page_views, which has no replica identity)
$dest->safe_psql('postgres', 'DROP PUBLICATION fixtures_pub');
# page_views has no primary key: its mapping names the key the rows are unique on
$dest->safe_psql('postgres', q{CREATE UNIQUE INDEX ON shop.page_views (viewed_at, path); SELECT cdc.register_mapping('shop.page_views', key_columns => ARRAY['viewed_at', 'path']::name[])});
create_subscription($dest, $source, 'fx', ['fixtures_pub']);
ok(wait_caught_up($source, $dest, 'fx'), 'fixture subscription streaming');

my ($ret, $out, $err) = $source->psql('postgres', undef,
	extra_params => [ '-v', 'ON_ERROR_STOP=1', '-f', "$shared/wal2json/workload.sql" ]);
is($ret, 0, 'workload.sql ran on the source') or diag($err);
ok(wait_caught_up($source, $dest, 'fx'), 'fixture workload applied');

my %order = (
	customers   => 'id',
	documents   => 'doc_id',
	inventory   => 'sku',
	order_items => 'order_id, line_no',
	orders      => 'order_id',
	page_views  => '1, 2, 3');
for my $t (sort keys %order) {
	my $file = "$shared/expected-final-state/shop.$t.csv";
	my $q = "SET bytea_output = hex; COPY (SELECT * FROM shop.$t ORDER BY $order{$t}) TO STDOUT WITH CSV HEADER";
	my $expected = slurp_file($file);
	$expected =~ s/\n\z//;
	is($dest->safe_psql('postgres', $q), $expected, "shop.$t equals expected-final-state/shop.$t.csv");
	compare_table($source, $dest, $q, "shop.$t: destination equals source");
}
is(status_row($dest, 'fx', 'state || \'|\' || retry_count || \'|\' || coalesce(last_error, \'\')'), 'streaming|0|',
	'fixture subscription: streaming, no error');

# --- pgbench ---------------------------------------------------------------
my $bench_tables = q{
CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84));
CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int, filler char(88));
CREATE TABLE pgbench_tellers (tid int PRIMARY KEY, bid int, tbalance int, filler char(84));
};
# The fixture's publication is FOR ALL TABLES, so it would also carry the
# pgbench tables created below: stop that subscription first, so that only
# 'bench' feeds them (two subscriptions applying one source table to one
# target is a misconfiguration: they would contend for the same rows).
$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('fx', drop_slot => true)});
$dest->safe_psql('postgres', $bench_tables);
for my $t (qw(pgbench_accounts pgbench_branches pgbench_tellers)) {
	$dest->safe_psql('postgres', "SELECT cdc.register_mapping('$t', outbox => true, source_name => 'bench')");
}
command_ok([ 'pgbench', '-i', '-s', '1', '-q', '-d', $source->connstr('postgres') ], 'pgbench -i -s 1 on the source');
$source->safe_psql('postgres', q{
CREATE SEQUENCE extra_aid START 1000001;
CREATE PUBLICATION bench FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers;
});
create_subscription($dest, $source, 'bench', ['bench']);
ok(wait_caught_up($source, $dest, 'bench'), 'pgbench tables copied');
is($dest->safe_psql('postgres', q{SELECT sum(snapshot_rows) FROM cdc.stats WHERE target::text LIKE 'pgbench%'}), '100011',
	'pgbench initial copy: 100011 snapshot rows');

my $script = PostgreSQL::Test::Utils::tempdir() . '/cdc_bench.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set aid random(1, 100000)
\set aid2 random(1, 100000)
\set bid 1
\set tid random(1, 10)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_accounts VALUES (nextval('extra_aid'), :bid, :delta, 'new');
END;
DELETE FROM pgbench_accounts WHERE aid = :aid2;
UPDATE pgbench_accounts SET aid = aid + 2000000 WHERE aid = :aid2 + 1;
});
command_ok([ 'pgbench', '-n', '-c', '4', '-j', '2', '-t', '250', '-f', $script, '-d', $source->connstr('postgres') ],
	'pgbench: 1000 transactions on the source while the worker streams');
ok(wait_caught_up($source, $dest, 'bench'), 'pgbench workload applied');
for my $t ([ 'pgbench_accounts', 'aid' ], [ 'pgbench_branches', 'bid' ], [ 'pgbench_tellers', 'tid' ]) {
	my ($name, $key) = @$t;
	compare_table($source, $dest,
		"SELECT count(*), sum(abs(hashtext(x::text))) , md5(string_agg(x::text, ',' ORDER BY $key)) FROM $name x",
		"$name: destination equals source");
}
is(status_row($dest, 'bench', 'state || \'|\' || retry_count || \'|\' || coalesce(last_error, \'\')'), 'streaming|0|',
	'pgbench subscription: streaming, no error');
is(outbox_summary($dest, q{target::text LIKE 'pgbench%'}),
	$dest->safe_psql('postgres', q{SELECT n || '|' || n FROM (SELECT sum(outbox_rows) n FROM cdc.stats WHERE target::text LIKE 'pgbench%') s}),
	'pgbench outbox: one row per applied change, keys distinct');

$dest->stop;
$source->stop;
done_testing();

# The recorded source relation OID (cdc.subscription_rel.source_relid,
# checked at every change of a ready table since 36d8bd5, learnt from the
# stream since 93b1235) must not stop the worker where the relation is the
# same (review h1):
#   viaroot   a partitioned table published with publish_via_partition_root:
#             ATTACH and DETACH PARTITION, ALTER COLUMN TYPE (a rewrite),
#             VACUUM FULL, CLUSTER, TRUNCATE — the root keeps its OID.
#   leaves    the same published per leaf partition (the default): DETACH
#             and ATTACH again of a leaf, rewrites, TRUNCATE.
#   streamed  a large transaction streamed before its commit (cdc.streaming,
#             logical_decoding_work_mem = 64kB on the source): applied;
#             then a large transaction that drops and re-creates the table
#             stops the worker (55000) with nothing of it applied.
#   learnt    a table not copied (copy_data => false) learns its OID from the
#             stream; dropped and re-created it stops the worker; after
#             cdc.resync_table (after a TRUNCATE: its rows were not the
#             worker's) the new OID is recorded and streaming goes on.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
$source->append_conf('postgresql.conf', "logical_decoding_work_mem = 64kB\n");
$source->restart;
my $dest = new_dest('dest', "cdc.streaming = on\n");
sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { return $dest->safe_psql('postgres', $_[0]); }
sub rows
{
	my ($node, $table) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) || ' ' || coalesce(md5(string_agg(id || ':' || n, ',' ORDER BY id)), '') FROM $table");
}
sub same_rows
{
	my ($table, $label, $srctable) = @_;
	return is(rows($dest, $table), rows($source, $srctable // $table), "$label: $table equals the source");
}
sub no_error
{
	my ($sub, $label) = @_;
	return is(status_row($dest, $sub, q{state || ' ' || retry_count || ' ' || coalesce(last_error, '')}), 'streaming 0 ', "$label: no error");
}

# --- viaroot -----------------------------------------------------------------
sq(q{CREATE TABLE pr (id int PRIMARY KEY, n int NOT NULL) PARTITION BY RANGE (id);
     CREATE TABLE pr1 PARTITION OF pr FOR VALUES FROM (0) TO (100);
     CREATE TABLE pr2 PARTITION OF pr FOR VALUES FROM (100) TO (200);
     INSERT INTO pr SELECT g, 0 FROM generate_series(1, 150, 7) g;
     CREATE PUBLICATION pvr FOR TABLE pr WITH (publish_via_partition_root = true);});
dq(q{CREATE TABLE pr (id int PRIMARY KEY, n int NOT NULL)});
create_subscription($dest, $source, 'svr', ['pvr']);
ok(wait_caught_up($source, $dest, 'svr'), 'viaroot: copied, streaming');
sq(q{UPDATE pr SET n = 1 WHERE id < 50});
sq(q{CREATE TABLE pr3 (id int PRIMARY KEY, n int NOT NULL); INSERT INTO pr3 VALUES (250, 3);
     ALTER TABLE pr ATTACH PARTITION pr3 FOR VALUES FROM (200) TO (300);
     INSERT INTO pr VALUES (260, 3); UPDATE pr SET n = 4 WHERE id = 250;});
sq(q{ALTER TABLE pr DETACH PARTITION pr2; UPDATE pr SET n = 5 WHERE id = 1;});
sq(q{ALTER TABLE pr ALTER COLUMN n TYPE bigint; UPDATE pr SET n = 6 WHERE id = 8;});
sq(q{VACUUM FULL pr1}); sq(q{CLUSTER pr1 USING pr1_pkey}); sq(q{UPDATE pr SET n = 7 WHERE id = 15});
sq(q{TRUNCATE pr; INSERT INTO pr VALUES (2, 8), (270, 8);});
ok(wait_caught_up($source, $dest, 'svr'), 'viaroot: caught up');
no_error('svr', 'viaroot');
same_rows('pr', 'viaroot');
dq(q{SELECT cdc.drop_subscription('svr', drop_slot => true)});

# --- leaves ------------------------------------------------------------------
sq(q{CREATE TABLE ql (id int PRIMARY KEY, n int NOT NULL) PARTITION BY RANGE (id);
     CREATE TABLE ql1 PARTITION OF ql FOR VALUES FROM (0) TO (100);
     CREATE TABLE ql2 PARTITION OF ql FOR VALUES FROM (100) TO (200);
     INSERT INTO ql SELECT g, 0 FROM generate_series(1, 150, 7) g;
     CREATE PUBLICATION pql FOR TABLE ql;});
dq(q{CREATE TABLE ql1 (id int PRIMARY KEY, n int NOT NULL); CREATE TABLE ql2 (id int PRIMARY KEY, n int NOT NULL);});
create_subscription($dest, $source, 'sql', ['pql']);
ok(wait_caught_up($source, $dest, 'sql'), 'leaves: copied, streaming');
sq(q{UPDATE ql SET n = 1});
sq(q{ALTER TABLE ql DETACH PARTITION ql2; UPDATE ql SET n = 2 WHERE id = 1;
     ALTER TABLE ql ATTACH PARTITION ql2 FOR VALUES FROM (100) TO (200); UPDATE ql SET n = 3 WHERE id > 100;});
sq(q{ALTER TABLE ql ALTER COLUMN n TYPE bigint; UPDATE ql SET n = 4 WHERE id IN (8, 106);});
sq(q{VACUUM FULL ql2}); sq(q{CLUSTER ql1 USING ql1_pkey}); sq(q{UPDATE ql SET n = 5 WHERE id IN (15, 113)});
sq(q{TRUNCATE ql; INSERT INTO ql VALUES (2, 6), (120, 6);});
ok(wait_caught_up($source, $dest, 'sql'), 'leaves: caught up');
no_error('sql', 'leaves');
same_rows('ql1', 'leaves');
same_rows('ql2', 'leaves');
dq(q{SELECT cdc.drop_subscription('sql', drop_slot => true)});

# --- streamed ----------------------------------------------------------------
my $t = 'CREATE TABLE big (id int PRIMARY KEY, n int NOT NULL, pad text);';
sq($t . q{INSERT INTO big SELECT g, 0, 'x' FROM generate_series(1, 10) g; CREATE PUBLICATION pbig FOR TABLE big;});
dq($t);
create_subscription($dest, $source, 'sbig', ['pbig']);
ok(wait_caught_up($source, $dest, 'sbig'), 'streamed: copied, streaming');
sq(q{BEGIN; INSERT INTO big SELECT g, 1, repeat('y', 100) FROM generate_series(11, 5000) g; UPDATE big SET n = 2 WHERE id <= 10; COMMIT;});
ok(wait_caught_up($source, $dest, 'sbig'), 'streamed: the large transaction applied');
no_error('sbig', 'streamed');
same_rows('big', 'streamed');
ok($source->poll_query_until('postgres', q{SELECT coalesce(max(stream_txns), 0) > 0 FROM pg_stat_replication_slots}),
	'streamed: the source streamed it before its commit');
my $old_oid = sq(q{SELECT 'big'::regclass::oid});
my $before = rows($dest, 'big');
sq(q{BEGIN; DROP TABLE big;} . $t . q{ALTER PUBLICATION pbig ADD TABLE big;
     INSERT INTO big SELECT g, 3, repeat('z', 100) FROM generate_series(1, 4000) g; COMMIT;});
my $new_oid = sq(q{SELECT 'big'::regclass::oid});
ok(wait_status($dest, 'sbig', qq{state = 'error' AND last_error LIKE '%public.big is another relation%OID $new_oid, recorded as OID $old_oid%'}),
	'streamed: a large transaction re-creating the table stops the worker (55000)');
is(rows($dest, 'big'), $before, 'streamed: nothing of it applied');
dq(q{SELECT cdc.resync_table('sbig', 'big')});
$dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE subscription = 'sbig' AND table_name = 'big'});
sq(q{UPDATE big SET n = 4 WHERE id = 1});
ok(wait_caught_up($source, $dest, 'sbig'), 'streamed: streaming after cdc.resync_table');
same_rows('big', 'streamed, resynced');
is(dq(q{SELECT source_relid FROM cdc.subscription_rel WHERE table_name = 'big'}), $new_oid, 'streamed: the new relation recorded');
dq(q{SELECT cdc.drop_subscription('sbig', drop_slot => true)});

# --- learnt ------------------------------------------------------------------
$t = 'CREATE TABLE lt (id int PRIMARY KEY, n int NOT NULL);';
sq($t . q{INSERT INTO lt SELECT g, 0 FROM generate_series(1, 5) g; CREATE PUBLICATION plt FOR TABLE lt;});
dq($t . q{INSERT INTO lt SELECT g, 0 FROM generate_series(1, 5) g;});
create_subscription($dest, $source, 'slt', ['plt'], 'copy_data => false');
ok(wait_caught_up($source, $dest, 'slt'), 'learnt: streaming without a copy');
sq(q{UPDATE lt SET n = 1 WHERE id = 1});
ok(wait_caught_up($source, $dest, 'slt'), 'learnt: a change applied');
my $lt_oid = sq(q{SELECT 'lt'::regclass::oid});
ok($dest->poll_query_until('postgres', qq{SELECT source_relid = $lt_oid FROM cdc.subscription_rel WHERE table_name = 'lt'}),
	'learnt: the OID learnt and saved');
sq(q{DROP TABLE lt;} . $t . q{INSERT INTO lt VALUES (1, 9), (7, 9); ALTER PUBLICATION plt ADD TABLE lt; UPDATE lt SET n = 10 WHERE id = 7;});
my $lt_new = sq(q{SELECT 'lt'::regclass::oid});
ok(wait_status($dest, 'slt', qq{state = 'error' AND last_error LIKE '%public.lt is another relation%OID $lt_new, recorded as OID $lt_oid%'}),
	'learnt: re-created, the worker stops (55000)');
# rows without a record of this source are left alone by the copy (docs/worker.md): truncate first
dq(q{TRUNCATE lt; SELECT cdc.resync_table('slt', 'lt')});
$dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE subscription = 'slt' AND table_name = 'lt'});
sq(q{UPDATE lt SET n = 11 WHERE id = 1});
ok(wait_caught_up($source, $dest, 'slt'), 'learnt: streaming after cdc.resync_table');
same_rows('lt', 'learnt');
is(dq(q{SELECT source_relid FROM cdc.subscription_rel WHERE table_name = 'lt'}), $lt_new, 'learnt: the new relation recorded');
dq(q{SELECT cdc.drop_subscription('slt', drop_slot => true)});

$dest->stop;
$source->stop;
done_testing();

# Two subscriptions of one source on overlapping publications (pa: t1, t2;
# pb: t2, t3), both feeding the one destination target t2 (docs/worker.md,
# "Positions and delivery keys").  A change of t2 reaches the destination
# twice, once per subscription; each subscription also receives changes of
# another table in the same source transactions, so the two count different
# changes.  The second arrival of every t2 change must be a duplicate: its
# version and delivery key come from the change's WAL position, which both
# subscriptions see alike, not from a count of the changes one subscription
# received (the defect this test was written for: one outbox row too many
# per t2 change that came second and counted higher).
#
# Workload: transactions touching t2 together with t1 and/or t3 in varying
# orders, a multi-row INSERT ... SELECT, COPY into t2 (a heap multi-insert:
# several changes at one WAL position, also spanning several records),
# updates, deletes, a TRUNCATE of all three tables (one record, received as
# t1+t2 by one subscription and t2+t3 by the other) and a streamed large
# transaction (cdc.streaming: its changes are spooled and replayed at its
# commit).  Asserted: rows equal the source for the three tables; exactly
# one outbox row per t2 change; for t2 one applied and one duplicate per
# change (no stale, no conflict), for t1 and t3 every change applied once;
# both subscriptions caught up.
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
my $dest = new_dest('dest', "cdc.database = 'postgres'\ncdc.streaming = on\n");

my $ddl = q{
CREATE TABLE t1 (id int PRIMARY KEY, n int);
CREATE TABLE t2 (id int PRIMARY KEY, n int);
CREATE TABLE t3 (id int PRIMARY KEY, n int);
};
$source->safe_psql('postgres', $ddl);
$dest->safe_psql('postgres', $ddl);
$source->safe_psql('postgres', q{
CREATE PUBLICATION pa FOR TABLE t1, t2;
CREATE PUBLICATION pb FOR TABLE t2, t3;
});
$dest->safe_psql('postgres', q{
SELECT cdc.register_mapping('t1');
SELECT cdc.register_mapping('t2', outbox => true);
SELECT cdc.register_mapping('t3');
});
create_subscription($dest, $source, 'sub_a', ['pa']);
create_subscription($dest, $source, 'sub_b', ['pb']);
ok(wait_caught_up($source, $dest, 'sub_a'), 'sub_a streaming');
ok(wait_caught_up($source, $dest, 'sub_b'), 'sub_b streaming');

my $stats = sub {
	my ($target) = @_;
	return $dest->safe_psql('postgres',
		"SELECT coalesce(sum(applied), 0) || '|' || coalesce(sum(duplicate), 0) || '|' || coalesce(sum(stale), 0) || '|' || coalesce(sum(conflict), 0)
		   FROM cdc.stats WHERE target = '$target'::regclass");
};
my $both_caught_up = sub {
	my ($label) = @_;
	my $lsn = source_lsn($source);
	ok(wait_caught_up($source, $dest, 'sub_a', $lsn), "$label: sub_a caught up");
	ok(wait_caught_up($source, $dest, 'sub_b', $lsn), "$label: sub_b caught up");
};
my $compare = sub {
	my ($label) = @_;
	for my $t ('t1', 't2', 't3') {
		compare_table($source, $dest, "SELECT * FROM $t ORDER BY id", "$label: $t equals the source");
	}
};

# The COPY input files (server side: COPY ... FROM '<file>').
my $dir = PostgreSQL::Test::Utils::tempdir;
my $write_copy = sub {
	my ($name, $from, $to, $n) = @_;
	open(my $fh, '>', "$dir/$name") or die "cannot write $dir/$name: $!";
	print $fh "$_\t" . ($_ * $n) . "\n" for $from .. $to;
	close($fh);
	return "$dir/$name";
};
my $copy_small = $write_copy->('small.tsv', 200, 229, 3);
my $copy_large = $write_copy->('large.tsv', 1000, 1599, 7); # several heap pages: several multi-insert records

my $t2_changes = 0;
my ($t1_changes, $t3_changes) = (0, 0);

# --- 1. t2 with t1 and/or t3, in varying orders ------------------------------
$source->safe_psql('postgres', q{
BEGIN;
INSERT INTO t1 VALUES (1, 1), (2, 2), (3, 3);
INSERT INTO t2 VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5);
INSERT INTO t3 VALUES (1, 1), (2, 2);
COMMIT;
BEGIN;
UPDATE t3 SET n = n + 10;
UPDATE t2 SET n = n + 1 WHERE id <= 3;
DELETE FROM t1 WHERE id = 1;
COMMIT;
BEGIN;
INSERT INTO t2 VALUES (6, 6);
INSERT INTO t1 VALUES (4, 4);
UPDATE t2 SET n = n * 2 WHERE id = 6;
INSERT INTO t3 VALUES (3, 3);
DELETE FROM t2 WHERE id = 5;
COMMIT;
BEGIN;
INSERT INTO t3 VALUES (4, 4);
UPDATE t2 SET n = 0 WHERE id = 4;
COMMIT;
BEGIN;
UPDATE t1 SET n = -n;
DELETE FROM t2 WHERE id = 1;
COMMIT;
});
$t2_changes += 5 + 3 + 3 + 1 + 1;
$t1_changes += 3 + 1 + 1 + 3;
$t3_changes += 2 + 2 + 1 + 1;
$both_caught_up->('mixed transactions');
$compare->('mixed transactions');

# --- 2. INSERT ... SELECT and COPY (multi-insert) between other tables' changes
$source->safe_psql('postgres', qq{
BEGIN;
INSERT INTO t1 VALUES (10, 10);
INSERT INTO t2 SELECT g, g FROM generate_series(100, 139) g;
INSERT INTO t3 VALUES (10, 10);
COMMIT;
BEGIN;
INSERT INTO t3 VALUES (11, 11);
COPY t2 FROM '$copy_small';
INSERT INTO t1 VALUES (11, 11);
UPDATE t2 SET n = n + 1 WHERE id BETWEEN 200 AND 204;
COMMIT;
BEGIN;
INSERT INTO t1 VALUES (12, 12);
COPY t2 FROM '$copy_large';
UPDATE t3 SET n = 0 WHERE id = 11;
DELETE FROM t2 WHERE id BETWEEN 1000 AND 1009;
COMMIT;
});
$t2_changes += 40 + 30 + 5 + 600 + 10;
$t1_changes += 1 + 1 + 1;
$t3_changes += 1 + 1 + 1;
$both_caught_up->('multi-inserts');
$compare->('multi-inserts');

# --- 3. a streamed transaction (spooled, replayed at its commit) ------------
$source->safe_psql('postgres', q{
BEGIN;
INSERT INTO t1 SELECT g, g FROM generate_series(100, 399) g;
INSERT INTO t3 SELECT g, g FROM generate_series(100, 399) g;
UPDATE t2 SET n = n + 100 WHERE id BETWEEN 1010 AND 1309;
UPDATE t1 SET n = 0 WHERE id BETWEEN 100 AND 149;
COMMIT;
});
$t2_changes += 300;
$t1_changes += 300 + 50;
$t3_changes += 300;
$both_caught_up->('streamed transaction');
$compare->('streamed transaction');
ok($source->poll_query_until('postgres', q{
	SELECT count(*) = 2 FROM pg_stat_replication_slots WHERE slot_name IN ('sub_a', 'sub_b') AND stream_txns > 0}),
	'both slots streamed an in-progress transaction');

# --- 4. TRUNCATE of the three tables in one statement, then new rows ---------
$source->safe_psql('postgres', q{
TRUNCATE t1, t2, t3;
BEGIN;
INSERT INTO t2 VALUES (1, 100), (2, 200);
INSERT INTO t3 VALUES (1, 100);
INSERT INTO t1 VALUES (1, 100);
COMMIT;
BEGIN;
INSERT INTO t1 VALUES (2, 200);
UPDATE t2 SET n = n + 1;
COMMIT;
});
$t2_changes += 1 + 2 + 2;
$t1_changes += 1 + 1 + 1;
$t3_changes += 1 + 1;
$both_caught_up->('truncate');
$compare->('truncate');

# --- the counts ---------------------------------------------------------------
is($dest->safe_psql('postgres', q{SELECT count(*) || '|' || count(DISTINCT idempotency_key) FROM cdc.outbox WHERE target = 't2'::regclass}),
	"$t2_changes|$t2_changes", "exactly one outbox row per t2 change ($t2_changes)");
is($stats->('t2'), "$t2_changes|$t2_changes|0|0", 't2: every change applied once and a duplicate once');
is($stats->('t1'), "$t1_changes|0|0|0", 't1: every change applied once');
is($stats->('t3'), "$t3_changes|0|0|0", 't3: every change applied once');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.conflicts}), '0', 'no conflict recorded');
# The version's position is the change's WAL position (source.lsn of the
# outbox row) plus its ordinal among the changes at that position.
is($dest->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE version[3] - (source->>'lsn')::bigint BETWEEN 0 AND 1000 AND version[4] = 0)
	       || '|' || count(*)
	  FROM cdc.outbox WHERE target = 't2'::regclass AND op <> 't'}),
	($t2_changes - 1) . '|' . ($t2_changes - 1), 'every t2 version carries the change\'s WAL position');
# COPY's rows share their multi-insert record's LSN: 30 + 600 rows, of
# which all but the first of each record have an ordinal above 0.
cmp_ok($dest->safe_psql('postgres', q{
	SELECT count(*) FROM cdc.outbox WHERE target = 't2'::regclass AND version[3] > (source->>'lsn')::bigint}), '>=', 29 + 500,
	'the rows of a multi-insert record are told apart by their ordinal');
# The truncate: the record's LSN, and the source relation OID of t2 as the
# version's fourth component.
my $t2_oid = $source->safe_psql('postgres', q{SELECT 't2'::regclass::oid});
is($dest->safe_psql('postgres', q{
	SELECT (version[3] = (source->>'lsn')::bigint) || '|' || version[4] FROM cdc.outbox WHERE target = 't2'::regclass AND op = 't'}),
	"true|$t2_oid", 'the truncate\'s version: the record\'s LSN and the source relation OID');
is($dest->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT version[2], version[3], count(*) FROM cdc.outbox WHERE target = 't2'::regclass
	                       GROUP BY 1, 2 HAVING count(*) > 1) d}), '0', 'no two t2 changes share a version');

$dest->stop;
$source->stop;
done_testing();

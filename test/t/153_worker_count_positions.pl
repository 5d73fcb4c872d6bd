# Transactions applied with count positions keep them when they are sent
# again (docs/worker.md, "Keys from before this version").
#
# cdc_apply 0.1.0 gave a change the count of the changes its transaction
# had sent so far as its position: version {epoch, commit LSN, count, 0},
# delivery key pgoutput:<source id>:<commit LSN>:<count>.  0.2.0 uses the
# change's WAL position.  The update from 0.1.0 sets
# cdc.subscription.count_positions_until to the replication origin's
# progress (TAP 054 checks that); a transaction committed at or below it is
# stamped with the count again, so that when it is sent again (the origin
# moved back by hand) its changes are duplicates, as they were under 0.1.0.
#
# The 0.1.0 worker cannot run here (its launcher would load this build's
# module), so the 0.2.0 worker plays it: with count_positions_until set
# beyond everything, it stamps every transaction with the count, as 0.1.0
# did (checked: delivery keys ...:1, :2, ..., the truncate's tables
# numbered in the message's order, a change of a table the subscription
# does not apply counted too, as 0.1.0 applied every table).  Then the mark
# is set to the origin's progress, as the update does, more transactions are
# applied (WAL positions), and the slot and the origin are moved back to
# before the first ones.  Every re-sent change must be a duplicate: no row,
# outbox row or entity record changes, the multi-table TRUNCATE is not
# applied again (the rows inserted after the mark stay), the entity changed
# twice in one transaction is not applied again.
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
};
$source->safe_psql('postgres', $ddl . 'CREATE TABLE tx (id int PRIMARY KEY, n int); CREATE PUBLICATION p FOR TABLE t1, t2;');
$dest->safe_psql('postgres', $ddl . q{
SELECT cdc.register_mapping('t1', outbox => true);
SELECT cdc.register_mapping('t2', outbox => true);
});
create_subscription($dest, $source, 'cp', ['p']);
ok(wait_caught_up($source, $dest, 'cp'), 'streaming');
is($dest->safe_psql('postgres', q{SELECT count_positions_until IS NULL FROM cdc.subscription WHERE name = 'cp'}), 't',
	'a subscription created on 0.2.0 has no count positions');

# tx joins the publication but not the subscription (no refresh): its
# changes are sent and not applied; 0.1.0 applied and counted them.
$source->safe_psql('postgres', 'ALTER PUBLICATION p ADD TABLE tx');

# "0.1.0": every transaction stamped with the count
disable_and_wait($source, $dest, 'cp');
$dest->safe_psql('postgres', q{UPDATE cdc.subscription SET count_positions_until = 'FFFFFFFF/FFFFFFFF' WHERE name = 'cp'});
slot_save($source, 'cp', 'cp_saved');
my $start = status_row($dest, 'cp', 'applied_lsn');
enable_subscription($dest, 'cp');

my $sysid = $source->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
my @p1 = (
	q{BEGIN; INSERT INTO t1 VALUES (1, 10), (2, 20); INSERT INTO t2 VALUES (1, 100); COMMIT;},
	# a change of tx first, then entity 3 changed twice
	q{BEGIN; INSERT INTO tx VALUES (1, 1); INSERT INTO t1 VALUES (3, 30); UPDATE t1 SET n = 31 WHERE id = 3; COMMIT;},
	q{TRUNCATE t1, t2;},
	q{BEGIN; INSERT INTO t1 VALUES (4, 40); INSERT INTO t2 VALUES (2, 200); UPDATE t2 SET n = 201 WHERE id = 2; COMMIT;},
	# streamed (logical_decoding_work_mem 64kB): spooled, applied at its commit
	q{BEGIN; INSERT INTO t2 SELECT g, g FROM generate_series(10, 3000) g; UPDATE t2 SET n = -10 WHERE id = 10; COMMIT;},);
$source->safe_psql('postgres', $_) for @p1;
ok(wait_caught_up($source, $dest, 'cp'), 'the first transactions applied');

# their commit LSNs, from the outbox rows' source positions
my $commits = $dest->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT (source->>'commit_lsn'), ',') FROM cdc.outbox});
my @c = sort { $a <=> $b } split /,/, $commits;
is(scalar(@c), 5, 'five source transactions with outbox rows');
sub lsn_text { my ($n) = @_; return sprintf('%X/%X', int($n / 4294967296), $n % 4294967296); }
sub processed
{
	my ($target, $commit, $count) = @_;
	my $key = "pgoutput:pg:$sysid:" . lsn_text($commit) . ":$count";
	return $dest->safe_psql('postgres', "SELECT cdc.delivery_processed('$target'::regclass, '$key')");
}
is(join(',', map { processed('t1', $c[0], $_) } 1 .. 2) . ' ' . processed('t2', $c[0], 3), 't,t t',
	'count keys: ...:1 and :2 (t1), :3 (t2)');
is(join(',', map { processed('t1', $c[1], $_) } 2 .. 3), 't,t',
	'the change of tx, not applied, is counted: entity 3\'s two changes are :2 and :3');
is(processed('t1', $c[1], 1), 'f', '... and :1 (tx) is not a key of t1');
is($dest->safe_psql('postgres', qq{SELECT string_agg(target::text || ' ' || array_to_string(version, ','), '; ' ORDER BY target::text)
	FROM cdc.outbox WHERE op = 't'}), "t1 0,$c[2],1,0; t2 0,$c[2],2,0",
	'the truncate: t1 and t2 numbered 1 and 2 in the message, fourth component 0, as 0.1.0 stamped them');
is($dest->safe_psql('postgres', qq{SELECT max(version[3]) FROM cdc.outbox WHERE (source->>'commit_lsn')::bigint = $c[4]}), '2992',
	'the streamed transaction: counts 1 .. 2992');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.outbox WHERE version[3] > 3000}), '0', 'no WAL position among them');

# The update's mark: the origin's progress
disable_and_wait($source, $dest, 'cp');
$dest->safe_psql('postgres', q{UPDATE cdc.subscription
	SET count_positions_until = pg_replication_origin_progress(cdc._origin_name(subid), true) WHERE name = 'cp'});
my $mark = $dest->safe_psql('postgres', q{SELECT count_positions_until FROM cdc.subscription WHERE name = 'cp'});
cmp_ok(lsn_num($mark), '>', $c[4], "the mark $mark is above the last of them");
enable_subscription($dest, 'cp');

# After the mark: WAL positions
$source->safe_psql('postgres', q{BEGIN; INSERT INTO t1 VALUES (5, 50); UPDATE t1 SET n = 41 WHERE id = 4; COMMIT;});
$source->safe_psql('postgres', q{BEGIN; UPDATE t2 SET n = 202 WHERE id = 2; INSERT INTO t2 VALUES (3, 300); COMMIT;});
ok(wait_caught_up($source, $dest, 'cp'), 'the later transactions applied');
is($dest->safe_psql('postgres', qq{SELECT count(*) || '|' || count(*) FILTER (WHERE version[3] = (source->>'lsn')::bigint)
	FROM cdc.outbox WHERE (source->>'commit_lsn')::bigint > $c[4]}), '4|4', 'after the mark: every version at the change\'s WAL position');
same_id_n_rows($source, $dest, 't1', 'before the rewind');
same_id_n_rows($source, $dest, 't2', 'before the rewind');

my %q = (
	t1 => 'SELECT * FROM t1 ORDER BY id',
	t2 => 'SELECT * FROM t2 ORDER BY id',
	outbox => 'SELECT id, idempotency_key, target, op, payload, version FROM cdc.outbox ORDER BY id',
	entities => 'SELECT * FROM cdc.entities ORDER BY 1, 2',
	barrier => 'SELECT target, version FROM cdc.table_barrier ORDER BY target::text',);
my %before = map { $_ => $dest->safe_psql('postgres', $q{$_}) } keys %q;
my $stats_q = q{SELECT string_agg(target::text || ' ' || applied || ' ' || duplicate || ' ' || stale || ' ' || conflict, ', ' ORDER BY target::text) FROM cdc.stats};
is($dest->safe_psql('postgres', $stats_q), 't1 8 0 0 0, t2 2998 0 0 0', 'stats before: every change applied once');

# The origin (and the slot) moved back to before the first transactions
my $end = status_row($dest, 'cp', 'applied_lsn');
disable_and_wait($source, $dest, 'cp');
slot_restore($source, 'cp', 'cp_saved');
origin_rewind($dest, 'cp', $start);
enable_subscription($dest, 'cp');
ok(wait_applied($dest, 'cp', $end), 'every transaction sent again and done');
is(status_row($dest, 'cp', q{state || '|' || coalesce(last_error, '')}), 'streaming|', 'no error');
for my $k (sort keys %q) {
	is($dest->safe_psql('postgres', $q{$k}), $before{$k}, "$k unchanged by the re-sent transactions");
}
is($dest->safe_psql('postgres', $stats_q), 't1 8 8 0 0, t2 2998 2998 0 0',
	'every re-sent change a duplicate: the truncate and the entity changed twice too, none applied, stale or a conflict');
is($dest->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM t2 WHERE id < 10}), '2,3',
	'the row inserted after the mark (t2 3) is still there: the truncate was not applied again');

done_testing();

# History and handler modes under crashes, on both input paths (SPEC §4.5,
# §9).
#
# SQL path: the running-total handler of docs/handlers.md fed through
# cdc_apply(), once on a reference database and once with a kill -9 of the
# postmaster between a commit and the consumer's acknowledgement (re-delivery
# from an earlier offset).  Totals, the shipped-orders counter and the
# number of handler calls must equal the reference.
#
# Worker path: a source with an orders table (handler mode: running totals)
# and a payments table (history mode).  Initial copy as snapshot rows, then
# COPY (a multi-row insert: its rows share one WAL record, so one LSN), a
# transaction updating one key twice, deletes; with the worker's fault point
# after_commit (crash between the local commit and the feedback to the
# source) and a kill -9 of the destination mid-stream.  Totals equal the
# source's sums; the history holds exactly one row per source change.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

# The handler of docs/handlers.md (running total per customer, shipped
# orders ignoring snapshot rows) and a log of its calls.
my $handler_schema = q{
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, amount numeric(12,2) NOT NULL, status text NOT NULL);
CREATE TABLE customer_totals (customer_id int PRIMARY KEY, total numeric(14,2) NOT NULL);
CREATE TABLE shipped_orders (n bigint NOT NULL);
INSERT INTO shipped_orders VALUES (0);
CREATE TABLE handler_calls (n bigserial PRIMARY KEY, op text, id int, is_snapshot boolean);
CREATE FUNCTION orders_handler(op text, old orders, new orders, meta jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
  INSERT INTO handler_calls (op, id, is_snapshot) VALUES (op, coalesce(new.id, old.id), (meta->>'is_snapshot')::boolean);
  IF old.id IS NOT NULL THEN
    INSERT INTO customer_totals AS t VALUES (old.customer_id, -old.amount)
    ON CONFLICT (customer_id) DO UPDATE SET total = t.total - old.amount;
  END IF;
  IF new.id IS NOT NULL THEN
    INSERT INTO customer_totals AS t VALUES (new.customer_id, new.amount)
    ON CONFLICT (customer_id) DO UPDATE SET total = t.total + new.amount;
  END IF;
  IF NOT (meta->>'is_snapshot')::boolean AND new.status = 'shipped' AND old.status IS DISTINCT FROM 'shipped' THEN
    UPDATE shipped_orders SET n = n + 1;
  END IF;
END $$;
};
my $totals_query = q{SELECT customer_id, total FROM customer_totals WHERE total <> 0 ORDER BY 1};
my $sums_query = q{SELECT customer_id, sum(amount) FROM orders GROUP BY 1 HAVING sum(amount) <> 0 ORDER BY 1};

# ===========================================================================
# SQL path
# ===========================================================================
my $node = PostgreSQL::Test::Cluster->new('sql');
$node->init;
$node->start;
for my $db (qw(reference replayed)) {
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION cdc_apply;\n" . $handler_schema . q{
SELECT cdc.register_mapping('orders', 'shop', 'orders', mode => 'handler',
                            handler => 'orders_handler(text, orders, orders, jsonb)');});
}

# Three snapshot rows, then per key: insert, update, ship (and move to
# another customer), delete, re-creation; interleaved over five keys.
my @events;
my $lsn = 0x1000;
for my $id (6 .. 8) {
	push @events, qq|{"op": "r", "after": {"id": $id, "customer_id": 9, "amount": "$id.00", "status": "shipped"}, "source": {"name": "shop-db", "schema": "shop", "table": "orders", "lsn": 4000, "snapshot": "true"}}|;
}
for my $round (0 .. 4) {
	for my $id (1 .. 5) {
		my $c = $id % 3;
		my ($op, $after) =
			$round == 0 ? ('c', qq|{"id": $id, "customer_id": $c, "amount": "$id.10", "status": "new"}|)
		  : $round == 1 ? ('u', qq|{"id": $id, "customer_id": $c, "amount": "$id.20", "status": "paid"}|)
		  : $round == 2 ? ('u', qq|{"id": $id, "customer_id": | . ($c + 1) . qq|, "amount": "$id.30", "status": "shipped"}|)
		  : $round == 3 ? ('d', 'null')
		  :               ('c', qq|{"id": $id, "customer_id": $c, "amount": "$id.50", "status": "new"}|);
		my $before = $op eq 'd' ? qq|{"id": $id}| : 'null';
		$lsn += 0x40;
		push @events, qq|{"op": "$op", "before": $before, "after": $after, "source": {"name": "shop-db", "schema": "shop", "table": "orders", "lsn": $lsn, "txId": |
		  . (700 + scalar @events) . '}}';
	}
}
my $n = scalar @events;

sub apply_sql
{
	my ($from, $to) = @_;
	my $sql = '';
	for my $i ($from .. $to) {
		(my $ev = $events[$i]) =~ s/'/''/g;
		$sql .= "SELECT cdc_apply('$ev'::jsonb, NULL, 'orders:0:$i');\n";
	}
	return $sql;
}

sub derived_state
{
	my ($db) = @_;
	return $node->safe_psql($db, qq{
		SELECT 'row', id, customer_id, amount::text FROM orders
		UNION ALL SELECT 'total', customer_id, NULL, total::text FROM customer_totals WHERE total <> 0
		UNION ALL SELECT 'shipped', n::int, NULL, NULL FROM shipped_orders
		UNION ALL SELECT 'calls', count(*)::int, count(*) FILTER (WHERE is_snapshot)::int, NULL FROM handler_calls
		ORDER BY 1, 2});
}

$node->safe_psql('reference', apply_sql($_, $_)) for 0 .. $n - 1;
my $expected = derived_state('reference');
is($node->safe_psql('reference', $totals_query), $node->safe_psql('reference', $sums_query),
	'reference: totals equal the sums of the mirrored rows');
like($expected, qr/^shipped\|5\|\|$/m, 'reference: five orders shipped (the three snapshot rows in status shipped do not count)');
like($expected, qr/^calls\|28\|3\|$/m, 'reference: one handler call per applied change, three of them snapshot rows');

# Replayed: one event per transaction; after every fourth commit kill -9 the
# postmaster, restart, and re-deliver from three events back.
my $pos = 0;
my $crashes = 0;
while ($pos < $n) {
	$node->safe_psql('replayed', apply_sql($pos, $pos));
	$pos++;
	if ($pos % 4 == 0 && $pos < $n) {
		$node->stop('immediate');
		$node->start;
		$crashes++;
		$node->safe_psql('replayed', apply_sql($pos >= 3 ? $pos - 3 : 0, $pos - 1));
	}
}
ok($crashes >= 6, "SQL path: postmaster killed $crashes times between a commit and its acknowledgement");
is(derived_state('replayed'), $expected,
	'SQL path after kill -9 and re-delivery: rows, totals, shipped counter and handler calls equal the reference');
my $outcomes = $node->safe_psql('replayed', apply_sql(0, $n - 1));
my %count;
$count{$_}++ for split /\n/, $outcomes;
is_deeply(\%count, { duplicate => $n }, 'SQL path: replaying everything gives duplicates only');
is(derived_state('replayed'), $expected, 'SQL path: and calls no handler');
$node->stop;

# ===========================================================================
# Worker path
# ===========================================================================
my $source = new_source('source');
my $dest = new_dest('dest');
my $source_tables = q{
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, amount numeric(12,2) NOT NULL, status text NOT NULL);
CREATE TABLE payments (id int PRIMARY KEY, order_id int, amount numeric(12,2), note text);
};
$source->safe_psql('postgres', $source_tables . q{
CREATE PUBLICATION pub FOR TABLE orders, payments;
INSERT INTO orders SELECT g, g % 4, g, CASE WHEN g % 2 = 0 THEN 'shipped' ELSE 'new' END FROM generate_series(1, 20) g;
INSERT INTO payments VALUES (1, 1, 1.00, 'copied');
});
$dest->safe_psql('postgres', $handler_schema . q{
CREATE TABLE payments (id int PRIMARY KEY, order_id int, amount numeric(12,2), note text);
SELECT cdc.create_history_table('payments_history', 'payments');
SELECT cdc.register_mapping('orders', mode => 'handler', handler => 'orders_handler(text, orders, orders, jsonb)',
                            source_name => 'sub1');
SELECT cdc.register_mapping('payments_history', source_table => 'payments', key_columns => '{id}',
                            mode => 'history', source_name => 'sub1');
});
create_subscription($dest, $source, 'sub1', ['pub']);
ok(wait_caught_up($source, $dest, 'sub1'), 'worker: initial copy done');
compare_table($source, $dest, 'SELECT * FROM orders ORDER BY 1', 'worker: orders copied');
is($dest->safe_psql('postgres', $totals_query), $source->safe_psql('postgres', $sums_query),
	'worker: totals after the copy equal the source sums');
is($dest->safe_psql('postgres', 'SELECT n FROM shipped_orders'), '0', 'worker: copied (snapshot) rows are not counted as shipped');
is($dest->safe_psql('postgres', q{SELECT count(*), bool_and(cdc_snapshot), min(cdc_op) FROM payments_history}), '1|t|r',
	'worker: the copied payment is a snapshot row of the history');

# COPY writes its rows with one multi-insert WAL record: they share an LSN.
my $copy_file = PostgreSQL::Test::Utils::tempdir() . '/payments.txt';
PostgreSQL::Test::Utils::append_to_file($copy_file, join('', map { "$_\t$_\t$_.00\tcopy\n" } 10 .. 19));
# The three source transactions are streamed one at a time (the worker
# caught up before the next is written): the worker groups consecutive
# source transactions into one local transaction when they arrive together
# (docs/worker.md), and the now() check below counts local transactions.
$source->safe_psql('postgres', qq{COPY payments FROM '$copy_file'});
ok(wait_caught_up($source, $dest, 'sub1'), 'worker: the COPY streamed');
$source->safe_psql('postgres', q{
BEGIN;
UPDATE payments SET amount = amount + 1 WHERE id = 10;
UPDATE payments SET amount = amount + 1, note = 'twice' WHERE id = 10;
COMMIT;
});
ok(wait_caught_up($source, $dest, 'sub1'), 'worker: the two updates streamed');
$source->safe_psql('postgres', q{DELETE FROM payments WHERE id IN (11, 12);});
ok(wait_caught_up($source, $dest, 'sub1'), 'worker: payments streamed');
is($dest->safe_psql('postgres', q{
	SELECT count(*), count(DISTINCT cdc_key), count(DISTINCT cdc_source->>'lsn'), count(DISTINCT cdc_source->>'commit_lsn')
	  FROM payments_history WHERE cdc_op = 'c'}),
	'10|10|1|1', 'worker: the 10 COPY rows share one LSN and one commit LSN and are 10 history rows');
is($dest->safe_psql('postgres', q{
	SELECT count(*), count(DISTINCT cdc_version), count(DISTINCT cdc_source->>'commit_lsn'), max(amount), (array_agg(note ORDER BY cdc_version))[2]
	  FROM payments_history WHERE cdc_op = 'u'}),
	'2|2|1|12.00|twice', 'worker: two updates of one key in one transaction are two history rows, in order');
is($dest->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM payments_history WHERE cdc_op = 'd'}),
	'11,12', 'worker: deletes recorded');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM payments_history WHERE cdc_source_ts IS NULL AND NOT cdc_snapshot}),
	'0', 'worker: every streamed history row has the source commit time');
# now() in the worker's transactions is each transaction's own start (the
# replay horizon compares claim and write times with it): the three
# streamed transactions, applied in three local transactions, have three
# distinct times.
is($dest->safe_psql('postgres', q{SELECT count(DISTINCT cdc_recorded_at) FROM payments_history WHERE NOT cdc_snapshot}),
	'3', 'worker: each applied transaction has its own now()');
my $history_rows = 1 + 10 + 2 + 2;
is($dest->safe_psql('postgres', 'SELECT count(*) FROM payments_history'), $history_rows, "worker: $history_rows history rows");

# Orders: single-row transactions with a crash between the local commit and
# the feedback (after_commit), then a kill -9 of the destination mid-stream.
sub orders_workload
{
	my ($from, $to) = @_;
	my $sql = '';
	for my $i ($from .. $to) {
		my $id = 1 + $i % 25;
		$sql .= $i % 7 == 0 ? "DELETE FROM orders WHERE id = $id;\n"
		      : "INSERT INTO orders VALUES ($id, $i % 5, $i, CASE WHEN $i % 3 = 0 THEN 'shipped' ELSE 'new' END) "
		      . "ON CONFLICT (id) DO UPDATE SET customer_id = EXCLUDED.customer_id, amount = EXCLUDED.amount, status = EXCLUDED.status;\n";
	}
	$source->safe_psql('postgres', $sql);
}
my $pid = status_row($dest, 'sub1', 'worker_pid');
my $log_offset = -s $dest->logfile;
$dest->safe_psql('postgres', "ALTER SYSTEM SET cdc.debug_fault = 'after_commit'");
$dest->reload;
$dest->poll_query_until('postgres', q{SELECT current_setting('cdc.debug_fault') = 'after_commit'});
$dest->safe_psql('postgres', 'SELECT pg_sleep(0.5)');
orders_workload(1, 1);
$dest->wait_for_log(qr/fault point after_commit reached/, $log_offset);
ok(1, 'worker: exited at after_commit (committed, not acknowledged)');
$dest->safe_psql('postgres', 'ALTER SYSTEM RESET cdc.debug_fault');
$dest->reload;
ok(wait_status($dest, 'sub1', "worker_pid <> $pid AND state = 'streaming'"), 'worker: restarted');
orders_workload(2, 60);
$dest->poll_query_until('postgres', 'SELECT count(*) >= 40 FROM handler_calls WHERE NOT is_snapshot');
$dest->stop('immediate');
$dest->start;
orders_workload(61, 120);
ok(wait_caught_up($source, $dest, 'sub1'), 'worker: caught up after the faults');
compare_table($source, $dest, 'SELECT * FROM orders ORDER BY 1', 'worker: orders equal the source');
is($dest->safe_psql('postgres', $totals_query), $source->safe_psql('postgres', $sums_query),
	'worker: running totals equal the source sums after the faults');
# The source's own history: row changes (a delete of a missing row is none)
# and transitions into status shipped.
my %status = map { $_ => ($_ % 2 == 0 ? 'shipped' : 'new') } 1 .. 20;
my ($changes, $shipped) = (0, 0);
for my $i (1 .. 120) {
	my $id = 1 + $i % 25;
	if ($i % 7 == 0) {
		$changes++ if exists $status{$id};
		delete $status{$id};
		next;
	}
	my $new = $i % 3 == 0 ? 'shipped' : 'new';
	$changes++;
	$shipped++ if $new eq 'shipped' && ($status{$id} // '') ne 'shipped';
	$status{$id} = $new;
}
is($dest->safe_psql('postgres', 'SELECT count(*) FROM handler_calls WHERE NOT is_snapshot'), $changes,
	"worker: exactly one handler call per source change ($changes), none repeated by the crashes");
is($dest->safe_psql('postgres', 'SELECT n FROM shipped_orders'), $shipped,
	"worker: shipped counter = $shipped transitions into shipped, counted once each");
is($dest->safe_psql('postgres', 'SELECT count(*) FROM payments_history'), $history_rows, 'worker: history unchanged by the faults');

# The launcher prunes on its schedule: with a zero horizon, the ledger and
# the tombstones go (live records stay), and streaming goes on correctly
# through the version records and the prune watermark.
$dest->safe_psql('postgres', 'ALTER SYSTEM SET cdc.replay_horizon = 0');
$dest->safe_psql('postgres', 'ALTER SYSTEM SET cdc.prune_interval = 1');
$dest->reload;
ok($dest->poll_query_until('postgres', q{
	SELECT ledger_rows = 0 AND tombstones = 0 AND watermarks > 0 AND last_full_sweep_at IS NOT NULL FROM cdc.horizon_status}),
	'worker: the launcher pruned the ledger and the tombstones')
  or diag($dest->safe_psql('postgres', 'SELECT * FROM cdc.horizon_status'));
is($dest->safe_psql('postgres', q{SELECT count(*) = (SELECT count(*) FROM orders) FROM cdc.entities WHERE target = 'orders'::regclass}),
	't', 'worker: live entity records are kept');
orders_workload(121, 160);
ok(wait_caught_up($source, $dest, 'sub1'), 'worker: streams after pruning');
compare_table($source, $dest, 'SELECT * FROM orders ORDER BY 1', 'worker: orders equal the source after pruning');
is($dest->safe_psql('postgres', $totals_query), $source->safe_psql('postgres', $sums_query),
	'worker: running totals still equal the source sums');
is($dest->safe_psql('postgres', q{SELECT coalesce(sum(expired), 0) FROM cdc.stats}), '0',
	'worker: no change of a stream in commit order is expired');

$dest->stop;
$source->stop;
done_testing();

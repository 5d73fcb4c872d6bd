# Crash and replay through cdc_apply() (SPEC §9): a deterministic history
# applied once on a reference database, then on a second database with a
# kill -9 of the postmaster between a commit and the next delivery, a backend
# terminated in the middle of a transaction, and re-delivery from an earlier
# position after each fault.  The final rows, tombstones, ledger and outbox
# must equal the reference, and no outbox idempotency key may repeat.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dest');
$node->init;
$node->start;

my $schema = q{
CREATE EXTENSION cdc_apply;
CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, amount numeric(12,2));
SELECT cdc.register_mapping('orders', 'shop', 'orders', outbox => true);
};
$node->safe_psql('postgres', 'CREATE DATABASE reference');
$node->safe_psql('postgres', 'CREATE DATABASE replayed');
$node->safe_psql($_, $schema) for qw(reference replayed);

# The history: per key, insert, two updates, delete, re-creation (the seed
# fixture), interleaved across five keys, LSNs increasing in commit order.
my @events;
my $lsn = 0x1000;
for my $round (0 .. 4) {
	for my $id (1 .. 5) {
		my ($op, $after) =
			$round == 0 ? ('c', qq|{"id": $id, "status": "new", "amount": "$id.10"}|)
		  : $round == 1 ? ('u', qq|{"id": $id, "status": "paid", "amount": "$id.20"}|)
		  : $round == 2 ? ('u', qq|{"id": $id, "status": "shipped", "amount": "$id.20"}|)
		  : $round == 3 ? ('d', 'null')
		  :               ('c', qq|{"id": $id, "status": "again", "amount": "$id.50"}|);
		my $before = $op eq 'd' ? qq|{"id": $id}| : 'null';
		$lsn += 0x40;
		push @events,
		  qq|{"op": "$op", "before": $before, "after": $after, "source": {"name": "shop-db", "db": "shop", "schema": "shop", "table": "orders", "lsn": $lsn, "txId": | . (700 + scalar @events) . '}}';
	}
}
my $n = scalar @events;

sub apply_sql
{
	my ($from, $to) = @_;
	my $sql = '';
	for my $i ($from .. $to) {
		(my $ev = $events[$i]) =~ s/'/''/g;
		$sql .= "SELECT cdc_apply('$ev'::jsonb);\n";
	}
	return $sql;
}

sub state
{
	my ($db) = @_;
	return $node->safe_psql($db, q{
		SELECT 'row', id, status, amount FROM orders
		UNION ALL SELECT 'tombstone', (entity_key->>'id')::int, array_to_string(version, ','), NULL FROM cdc.tombstones
		UNION ALL SELECT 'outbox', count(*)::int, count(DISTINCT idempotency_key)::text, NULL FROM cdc.outbox
		UNION ALL SELECT 'ledger', count(*)::int, NULL, NULL FROM cdc.ledger
		ORDER BY 1, 2, 3});
}

# Reference: every event once, one transaction each.
$node->safe_psql('reference', apply_sql($_, $_)) for 0 .. $n - 1;
my $expected = state('reference');
like($expected, qr/^outbox\|25\|25\|$/m, 'reference: 25 outbox rows, all keys distinct');
like($expected, qr/^row\|3\|again\|3\.50$/m, 'reference: re-created row present');

# Replayed: commit one event at a time; after every fifth commit kill -9 the
# postmaster, restart, and re-deliver from three events back (the consumer's
# last acknowledged offset lagged behind the destination's commits).
my $pos = 0;
my $crashes = 0;
while ($pos < $n) {
	$node->safe_psql('replayed', apply_sql($pos, $pos));
	$pos++;
	if ($pos % 5 == 0 && $pos < $n) {
		$node->stop('immediate');
		$node->start;
		$crashes++;
		my $rewind = $pos >= 3 ? $pos - 3 : 0;
		$node->safe_psql('replayed', "BEGIN;\n" . apply_sql($rewind, $pos - 1) . "COMMIT;");
	}
}
ok($crashes >= 4, "postmaster killed $crashes times between commit and next delivery");
is(state('replayed'), $expected, 'after kill -9 and re-delivery: rows, tombstones, ledger and outbox equal the reference');

# A backend terminated in the middle of a transaction: nothing of it stays.
my $outbox_before = $node->safe_psql('replayed', 'SELECT count(*) FROM cdc.outbox');
my $bg = $node->background_psql('replayed', on_error_stop => 0);
$bg->query_safe('BEGIN');
$bg->query_safe(q{SELECT cdc_apply('{"op": "u", "after": {"id": 1, "status": "late", "amount": "9.99"}, "source": {"name": "shop-db", "db": "shop", "schema": "shop", "table": "orders", "lsn": 999999}}'::jsonb)});
my $pid = $bg->query_safe('SELECT pg_backend_pid()');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
eval { $bg->quit; };
is($node->safe_psql('replayed', 'SELECT count(*) FROM cdc.outbox'), $outbox_before, 'terminated transaction wrote no outbox row');
is($node->safe_psql('replayed', 'SELECT status FROM orders WHERE id = 1'), 'again', 'terminated transaction changed no row');
is($node->safe_psql('replayed', q{SELECT cdc.delivery_processed('orders', 'dbz:shop-db:shop:shop.orders:u:999999:::{"id": "1"}')}),
	'f', 'its dedup claim rolled back');

# ... and the corrected retry of the same delivery applies.
is($node->safe_psql('replayed', q{SELECT cdc_apply('{"op": "u", "after": {"id": 1, "status": "late", "amount": "9.99"}, "source": {"name": "shop-db", "db": "shop", "schema": "shop", "table": "orders", "lsn": 999999}}'::jsonb)}),
	'applied', 'retry after the terminated transaction applies');

# Full replay of the whole history after everything: all duplicates.
my $outcomes = $node->safe_psql('replayed', apply_sql(0, $n - 1));
my %count;
$count{$_}++ for split /\n/, $outcomes;
is_deeply(\%count, { duplicate => $n }, 'replaying the whole history: every event is a duplicate');

$node->stop;
done_testing();

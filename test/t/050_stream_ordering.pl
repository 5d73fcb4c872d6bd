# Stream ordering (docs/semantics.md, "Stream ordering"): a target written
# only by one subscription's ordered stream keeps a per-(target, source)
# high-water mark instead of a ledger row and an entity record per change.
#
# Every case asserts the final rows (equal to the source), that no ledger row
# and no entity record was written for the stream-ordered target, the mark,
# and the outbox (exactly one row per source change after the copy):
#   1. initial copy + streaming (inserts, updates, deletes, a key change, an
#      unchanged-TOAST update, a truncate);
#   2. the replication origin rewound to an earlier LSN (with the slot moved
#      back too, so the source really re-sends): every re-sent change is a
#      duplicate, no row or outbox row changes;
#   3. a subscription re-created on the old slot, re-sent changes: duplicates;
#   4. two subscriptions of the same source on the same publications
#      into one target: the mark serialises them, one outbox row per change;
#   5. kill -9 at every fault point (before_commit, after_commit,
#      after_change:N) and of the destination postmaster;
#   6. skip_transaction of a failing source transaction;
#   7. another writer refused: cdc_apply() (55000) and a subscription of
#      another source cluster (state error, 55000 in last_error);
#   8. switching the ordering both ways while the source writes: equal rows,
#      the outbox exactly once, no stale or conflict outcome;
#   9. how the outbox rows of a stream-ordered target are written (straight
#      through the table AM): in change order, the column defaults and the
#      table's constraints evaluated; with a row trigger on cdc.outbox_rows
#      they go through INSERT and the trigger fires once per row.
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

my $ddl = q{
CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, amount numeric(12,2), note text);
ALTER TABLE orders ALTER COLUMN note SET STORAGE EXTERNAL;
CREATE TABLE items (id int PRIMARY KEY, order_id int, qty int);
};
$source->safe_psql('postgres', $ddl);
$dest->safe_psql('postgres', $ddl);
$source->safe_psql('postgres', q{
CREATE PUBLICATION p_all FOR TABLE orders, items;
INSERT INTO orders SELECT g, 'new', g * 1.5, NULL FROM generate_series(1, 20) g;
INSERT INTO items SELECT g, g, 1 FROM generate_series(1, 10) g;
});
$dest->safe_psql('postgres', q{
SELECT cdc.register_mapping('orders', outbox => true);
SELECT cdc.register_mapping('items');
SELECT cdc.set_ordering('orders', 'stream');
SELECT cdc.set_ordering('items', 'stream');
});

my $rows_q = 'SELECT * FROM orders ORDER BY id';
my $items_q = 'SELECT * FROM items ORDER BY id';
my $stats = sub {
	my ($target) = @_;
	return $dest->safe_psql('postgres',
		"SELECT applied || '|' || duplicate || '|' || stale || '|' || conflict || '|' || snapshot_rows FROM cdc.stats WHERE target = '$target'::regclass");
};
my $bookkeeping = sub {
	return $dest->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM cdc.ledger) || '|' || (SELECT count(*) FROM cdc.entity_state)});
};
my $mark = sub {
	my ($target) = @_;
	return $dest->safe_psql('postgres', "SELECT source_name || ' ' || version::text FROM cdc.stream_marks WHERE target = '$target'::regclass");
};

# --- 1. copy + streaming ----------------------------------------------------
create_subscription($dest, $source, 'sub1', ['p_all']);
ok(wait_caught_up($source, $dest, 'sub1'), 'copy done and caught up');
compare_table($source, $dest, $rows_q, 'copied orders equal the source');
is($stats->('orders'), '20|0|0|0|20', 'the 20 copied rows applied as snapshot rows');
is(outbox_summary($dest), '0|0', 'snapshot rows write no outbox row');
my $sysid = $source->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
like($mark->('orders'), qr/^pg:$sysid \{0,\d+,0,0\}$/, 'the mark is the copy\'s snapshot point');

$source->safe_psql('postgres', q{
BEGIN;
INSERT INTO orders VALUES (21, 'new', 10, repeat('x', 5000));
UPDATE orders SET status = 'paid' WHERE id <= 5;
DELETE FROM orders WHERE id = 20;
COMMIT;
UPDATE orders SET id = 100 WHERE id = 19;                     -- key change
UPDATE orders SET status = 'shipped' WHERE id = 21;           -- note (TOAST) unchanged
INSERT INTO items VALUES (11, 21, 3);
UPDATE items SET qty = qty + 1 WHERE id <= 3;
});
ok(wait_caught_up($source, $dest, 'sub1'), 'caught up after streaming');
compare_table($source, $dest, $rows_q, 'streamed orders equal the source (key change, unchanged TOAST)');
compare_table($source, $dest, $items_q, 'items equal the source');
# 1 insert + 5 updates + 1 delete + 1 key change + 1 update = 9 changes
is($stats->('orders'), '29|0|0|0|20', '9 streamed changes applied');
is(outbox_summary($dest), '10|10', 'one outbox row per change (the key change: delete + insert)');
is($dest->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE stream_ordered) || '|' || count(*) FROM cdc.outbox_rows}), '10|10',
	'the rows of a stream-ordered target are marked stream_ordered (unique by the mark, not in outbox_rows_ikey)');
is($bookkeeping->(), '0|0', 'no ledger row and no entity record for stream-ordered targets');
# The worker's outbox rows: every idempotency key follows the rule
# (docs/semantics.md, "Outbox"), and each entity's last payload is its row
# as written, to_jsonb() of it to the text (key order): the payload is
# built from the image, not by to_jsonb() (outbox.cpp, ImageJsonbFastPg).
is($dest->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE o.idempotency_key = md5(concat_ws(E'\n', o.source->>'name',
	         (o.source->>'schema') || '.' || (o.source->>'table'), o.op, o.version::text, o.entity_key::text)))
	       || '|' || count(*)
	  FROM cdc.outbox o WHERE o.target = 'orders'::regclass}), '10|10', 'every worker outbox key follows the rule');
is($dest->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE l.payload::text = to_jsonb(r)::text) || '|' || count(*)
	  FROM (SELECT DISTINCT ON (o.entity_key) o.entity_key, o.op, o.payload FROM cdc.outbox o
	         WHERE o.target = 'orders'::regclass ORDER BY o.entity_key, o.id DESC) l
	  JOIN orders r ON r.id = (l.entity_key->>'id')::int WHERE l.op <> 'd'}), '7|7',
	'the last payload of each entity is to_jsonb() of its row (ids 1-5, 21, 100)');
like($mark->('orders'), qr/^pg:$sysid \{0,\d+,\d+,0\}$/, 'the mark is the last change (its commit LSN and WAL position)');
is($dest->safe_psql('postgres', "SELECT cdc.delivery_processed('orders', 'pgoutput:pg:$sysid:0/1:1')"), 't',
	'delivery_processed answers from the mark (a change below it)');
is($dest->safe_psql('postgres', "SELECT cdc.delivery_processed('orders', 'pgoutput:pg:$sysid:FFFFFFFF/0:1')"), 'f',
	'delivery_processed: a change above the mark was not processed');

# truncate
$source->safe_psql('postgres', q{TRUNCATE items; INSERT INTO items VALUES (1, 1, 9);});
ok(wait_caught_up($source, $dest, 'sub1'), 'caught up after a truncate');
compare_table($source, $dest, $items_q, 'items after truncate equal the source');

# --- 2. origin rewound --------------------------------------------------------
disable_and_wait($source, $dest, 'sub1');
my $before = $dest->safe_psql('postgres', 'SELECT applied_lsn FROM cdc.subscription_status WHERE name = \'sub1\'');
slot_save($source, 'sub1', 'sub1_saved');
enable_subscription($dest, 'sub1');
$source->safe_psql('postgres', q{
INSERT INTO orders SELECT g, 'late', g, NULL FROM generate_series(200, 229) g;
UPDATE orders SET amount = amount + 1 WHERE id BETWEEN 200 AND 209;
DELETE FROM orders WHERE id BETWEEN 225 AND 229;
});
ok(wait_caught_up($source, $dest, 'sub1'), 'caught up before the rewind');
my $outbox_before = outbox_summary($dest);
my $rows_before = $dest->safe_psql('postgres', $rows_q);
my ($applied_before) = split /\|/, $stats->('orders');
disable_and_wait($source, $dest, 'sub1');
slot_restore($source, 'sub1', 'sub1_saved');
origin_rewind($dest, 'sub1', $before);
enable_subscription($dest, 'sub1');
ok(wait_caught_up($source, $dest, 'sub1'), 'caught up after the rewind');
is($dest->safe_psql('postgres', $rows_q), $rows_before, 'rewind: no row changed');
is(outbox_summary($dest), $outbox_before, 'rewind: no outbox row added');
my ($applied_after, $dup_after) = split /\|/, $stats->('orders');
is($applied_after, $applied_before, 'rewind: nothing applied again');
is($dup_after, 45, 'rewind: the 45 re-sent changes are duplicates');
is($bookkeeping->(), '0|0', 'rewind: still no ledger row or entity record');

# --- 3. a subscription re-created on the old slot ---------------------------
disable_and_wait($source, $dest, 'sub1');
slot_save($source, 'sub1', 'sub1_saved');
enable_subscription($dest, 'sub1');
$source->safe_psql('postgres', q{UPDATE orders SET note = 'n' WHERE id BETWEEN 1 AND 4});
ok(wait_caught_up($source, $dest, 'sub1'), 'caught up before re-creating the subscription');
$outbox_before = outbox_summary($dest);
disable_and_wait($source, $dest, 'sub1');
$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('sub1', drop_slot => false)});
slot_restore($source, 'sub1', 'sub1_saved');
create_subscription($dest, $source, 'sub1b', ['p_all'], q{slot_name => 'sub1', create_slot => false, copy_data => false});
ok(wait_caught_up($source, $dest, 'sub1b'), 'the re-created subscription caught up');
compare_table($source, $dest, $rows_q, 're-created subscription: rows equal the source');
is(outbox_summary($dest), $outbox_before, 're-created subscription: the re-sent changes add no outbox row');

# --- 4. two subscriptions of one source into one target ---------------------
$source->safe_psql('postgres', q{CREATE PUBLICATION p_orders FOR TABLE orders});
create_subscription($dest, $source, 'sub2', ['p_all'], q{copy_data => false});
ok(wait_status($dest, 'sub2', q{state = 'streaming'}), 'second subscription streaming');
$outbox_before = (split /\|/, outbox_summary($dest))[0];
$source->safe_psql('postgres', q{
INSERT INTO orders SELECT g, 'both', g, NULL FROM generate_series(300, 399) g;
UPDATE orders SET status = 'twice' WHERE id BETWEEN 300 AND 349;
});
ok(wait_caught_up($source, $dest, 'sub1b'), 'first subscription caught up');
ok(wait_caught_up($source, $dest, 'sub2'), 'second subscription caught up');
compare_table($source, $dest, $rows_q, 'two subscriptions: rows equal the source');
is((split /\|/, outbox_summary($dest))[0] - $outbox_before, 150, 'two subscriptions: exactly one outbox row per change');
is(outbox_summary($dest) =~ /^(\d+)\|\1$/ ? 'unique' : 'not unique', 'unique', 'two subscriptions: no idempotency key twice');
$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('sub2', drop_slot => true)});

# --- 5. crashes at every fault point ----------------------------------------
for my $fault ('before_commit', 'after_commit', 'after_change:7') {
	disable_and_wait($source, $dest, 'sub1b');
	set_fault($dest, $fault);
	enable_subscription($dest, 'sub1b');
	$outbox_before = (split /\|/, outbox_summary($dest))[0];
	my $offset = -s $dest->logfile;
	$source->safe_psql('postgres', q{
	INSERT INTO orders SELECT g, 'crash', g, NULL FROM generate_series(1000, 1019) g;
	UPDATE orders SET amount = 0 WHERE id BETWEEN 1000 AND 1009;
	DELETE FROM orders WHERE id BETWEEN 1000 AND 1019;
	});
	$dest->wait_for_log(qr/fault point \Q$fault\E reached/, $offset);
	set_fault($dest, undef);
	ok(wait_caught_up($source, $dest, 'sub1b'), "fault $fault: caught up");
	compare_table($source, $dest, $rows_q, "fault $fault: rows equal the source");
	is((split /\|/, outbox_summary($dest))[0] - $outbox_before, 50, "fault $fault: exactly one outbox row per change");
}
$dest->safe_psql('postgres', q{SELECT cdc.disable_subscription('sub1b')});
$dest->poll_query_until('postgres', q{SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'cdc_apply sub1b')});
$dest->safe_psql('postgres', q{SELECT cdc.enable_subscription('sub1b')});
$outbox_before = (split /\|/, outbox_summary($dest))[0];
$source->safe_psql('postgres', q{INSERT INTO orders SELECT g, 'kill9', g, NULL FROM generate_series(2000, 2499) g});
$dest->poll_query_until('postgres', q{SELECT count(*) > 0 FROM orders WHERE id >= 2000});
$dest->stop('immediate');
$dest->start;
ok(wait_caught_up($source, $dest, 'sub1b'), 'kill -9: caught up');
compare_table($source, $dest, $rows_q, 'kill -9: rows equal the source');
is((split /\|/, outbox_summary($dest))[0] - $outbox_before, 500, 'kill -9: exactly one outbox row per change');

# --- 6. skip_transaction -----------------------------------------------------
$dest->safe_psql('postgres', q{ALTER TABLE orders ADD CONSTRAINT no_bad CHECK (status <> 'bad')});
$source->safe_psql('postgres', q{INSERT INTO orders VALUES (3000, 'bad', 1, NULL)});
my $bad_lsn = $source->safe_psql('postgres', q{SELECT pg_current_wal_lsn()});
ok(wait_status($dest, 'sub1b', q{last_error LIKE '%no_bad%'}), 'the failing transaction stops the worker');
my $err_lsn = status_row($dest, 'sub1b', 'last_error_lsn');
$dest->safe_psql('postgres', qq{SELECT cdc.skip_transaction('sub1b', '$err_lsn', 'test: bad status')});
$source->safe_psql('postgres', q{INSERT INTO orders VALUES (3001, 'good', 1, NULL)});
ok(wait_caught_up($source, $dest, 'sub1b'), 'skip: caught up');
is($dest->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM orders WHERE id >= 3000}), '3001',
	'skip: the skipped row is missing, the next one applied');
$source->safe_psql('postgres', q{DELETE FROM orders WHERE id = 3000});
$dest->safe_psql('postgres', q{ALTER TABLE orders DROP CONSTRAINT no_bad});
ok(wait_caught_up($source, $dest, 'sub1b'), 'skip: caught up after deleting the skipped row on the source');
compare_table($source, $dest, $rows_q, 'skip: rows equal the source again');

# --- 7. other writers refused -----------------------------------------------
my ($ret, $out, $err) = $dest->psql('postgres', q{
SELECT cdc_apply('{"op": "c", "after": {"id": 5000, "status": "x"}, "source": {"name": "dbz", "schema": "public", "table": "orders", "lsn": 1}}', 'orders')});
like($err, qr/stream-ordered: only its subscription's worker may apply changes/, 'cdc_apply() on a stream-ordered target is refused');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM orders WHERE id = 5000}), '0', 'nothing of the refused call applied');

my $other = new_source('other');
$other->safe_psql('postgres', $ddl . q{CREATE PUBLICATION p_o FOR TABLE orders;});
create_subscription($dest, $other, 'sub_other', ['p_o'], q{copy_data => false});
ok(wait_status($dest, 'sub_other', q{state = 'streaming'}), 'the other source\'s subscription streams');
$other->safe_psql('postgres', q{INSERT INTO orders VALUES (6000, 'other', 1, NULL)});
ok(wait_status($dest, 'sub_other', q{state = 'error' AND last_error LIKE '%is stream-ordered and fed by source%'}),
	'a change of another source is refused (state error)');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM orders WHERE id = 6000}), '0', 'the other source\'s row is not applied');
$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('sub_other', drop_slot => true)});
$other->stop;

# --- 8. switching the ordering under load -----------------------------------
$outbox_before = (split /\|/, outbox_summary($dest))[0];
my ($applied0, $dup0, $stale0, $conflict0) = split /\|/, $stats->('orders');
my $load = $source->background_psql('postgres');
$load->query_safe(q{
CREATE PROCEDURE churn(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    INSERT INTO orders VALUES (10000 + i, 'churn', i, NULL);
    UPDATE orders SET amount = amount + 1 WHERE id = 10000 + i;
    IF i % 3 = 0 THEN DELETE FROM orders WHERE id = 10000 + i; END IF;
    COMMIT;
    PERFORM pg_sleep(0.01);
  END LOOP;
END $$});
$load->query_until(qr/^$/, "CALL churn(600);\n");
# each ordering applies part of the load: after every switch, wait until
# more of it has arrived
for my $i (1 .. 6) {
	my $to = $i % 2 ? 'entity' : 'stream';
	my $seen = $dest->safe_psql('postgres', q{SELECT coalesce(max(id), 0) FROM orders WHERE id > 10000});
	$dest->safe_psql('postgres', "SELECT cdc.set_ordering('orders', '$to')");
	$dest->poll_query_until('postgres', "SELECT coalesce(max(id), 0) > $seen + 20 FROM orders WHERE id > 10000")
	  or diag("no progress after switching to $to");
}
$load->quit;
ok($dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.ledger}) > 0, 'switching under load: part of the load was applied in entity ordering');
ok(wait_caught_up($source, $dest, 'sub1b'), 'switching under load: caught up');
compare_table($source, $dest, $rows_q, 'switching under load: rows equal the source');
is((split /\|/, outbox_summary($dest))[0] - $outbox_before, 600 + 600 + 200, 'switching under load: exactly one outbox row per change');
# Rows written in each ordering carry its flag; no idempotency key twice
# across the two kinds (the unique index holds only the entity-ordered ones).
my ($by_mark, $by_index, $distinct) = split /\|/, $dest->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE stream_ordered) || '|' || count(*) FILTER (WHERE NOT stream_ordered) || '|' || count(DISTINCT ikey)
  FROM cdc.outbox_rows WHERE target = 'orders'::regclass});
ok($by_mark > 0 && $by_index > 0, "switching under load: rows of both orderings ($by_mark stream-ordered, $by_index entity-ordered)");
is($distinct, $by_mark + $by_index, 'switching under load: every idempotency key once across both orderings');
my ($applied1, $dup1, $stale1, $conflict1) = split /\|/, $stats->('orders');
is("$stale1|$conflict1", "$stale0|$conflict0", 'switching under load: no stale and no conflict outcome');
is($dest->safe_psql('postgres', q{SELECT ordering FROM cdc.mapping WHERE target = 'orders'::regclass}), 'stream', 'ended stream-ordered');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.entity_state WHERE target = 'orders'::regclass}), '0',
	'back in stream ordering: the entity records were folded into the mark');

# --- 9. how the outbox rows are written --------------------------------------
# A column a relay added, with a default, and a CHECK constraint on it.
$dest->safe_psql('postgres', q{
ALTER TABLE cdc.outbox_rows ADD COLUMN relay_note text DEFAULT 'fresh' CHECK (relay_note <> 'bad')});
my $max_id = $dest->safe_psql('postgres', q{SELECT max(id) FROM cdc.outbox_rows});
$source->safe_psql('postgres', q{
BEGIN;
UPDATE orders SET status = 'o3' WHERE id = 3;
UPDATE orders SET status = 'o1' WHERE id = 1;
UPDATE orders SET status = 'o2' WHERE id = 2;
COMMIT;});
ok(wait_caught_up($source, $dest, 'sub1b'), 'outbox writes: caught up');
is($dest->safe_psql('postgres', qq{
SELECT string_agg(entity_key->>'id', ',' ORDER BY id) || '|' || count(DISTINCT created_at) || '|' || bool_and(relay_note = 'fresh')::int
       || '|' || bool_and(created_at <= now())::int
  FROM cdc.outbox_rows WHERE id > $max_id}), '3,1,2|1|1|1',
	'outbox rows in change order, one transaction start time, the added column\'s default');
$dest->safe_psql('postgres', q{ALTER TABLE cdc.outbox_rows ALTER COLUMN relay_note SET DEFAULT 'bad'});
my $status4 = $dest->safe_psql('postgres', q{SELECT status FROM orders WHERE id = 4});
$source->safe_psql('postgres', q{UPDATE orders SET status = 'o4' WHERE id = 4});
ok(wait_status($dest, 'sub1b', q{last_error LIKE '%outbox_rows_relay_note_check%'}),
	'a row violating a CHECK constraint of cdc.outbox_rows stops the worker');
is($dest->safe_psql('postgres', q{SELECT status FROM orders WHERE id = 4}), $status4,
	'the change whose outbox row failed is not applied');
# The default repaired and a relay's row trigger (ENABLE ALWAYS: the worker
# applies as a replica, as PostgreSQL's own apply does) added in one transaction:
# the retried change and the next ones go through INSERT.
$dest->safe_psql('postgres', q{
BEGIN;
ALTER TABLE cdc.outbox_rows ALTER COLUMN relay_note SET DEFAULT 'fresh';
CREATE TABLE relay_seen (ikey uuid PRIMARY KEY, note text);
CREATE FUNCTION relay_seen_f() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.relay_seen VALUES (NEW.ikey, NEW.relay_note); RETURN NEW; END $$;
CREATE TRIGGER relay_seen AFTER INSERT ON cdc.outbox_rows FOR EACH ROW EXECUTE FUNCTION relay_seen_f();
-- the worker applies with session_replication_role = replica, as native apply does
ALTER TABLE cdc.outbox_rows ENABLE ALWAYS TRIGGER relay_seen;
COMMIT;});
ok(wait_caught_up($source, $dest, 'sub1b'), 'outbox writes: caught up after the constraint error');
$source->safe_psql('postgres', q{UPDATE orders SET status = 'o5' WHERE id IN (1, 2, 5)});
ok(wait_caught_up($source, $dest, 'sub1b'), 'outbox writes with a trigger: caught up');
is($dest->safe_psql('postgres', qq{
SELECT (SELECT count(*) FROM relay_seen) || '|' || (SELECT count(*) FROM cdc.outbox_rows o JOIN relay_seen r USING (ikey) WHERE o.id > $max_id)}),
	'4|4', 'a row trigger on cdc.outbox_rows fires once for each row written (the retried change and the three after it)');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM relay_seen WHERE note = 'fresh'}), '4', 'the trigger saw the rows with their defaults');
compare_table($source, $dest, $rows_q, 'outbox writes: rows equal the source');
$dest->safe_psql('postgres', q{DROP TRIGGER relay_seen ON cdc.outbox_rows; ALTER TABLE cdc.outbox_rows DROP COLUMN relay_note});

done_testing();

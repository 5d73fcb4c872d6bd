# The apply worker streaming a source publication (SPEC §7): initial copy as
# snapshot rows, then inserts, updates, deletes, truncate, key changes and
# unchanged TOAST values on two tables (one REPLICA IDENTITY FULL); the
# destination must equal the source and the outbox must hold exactly one row
# per applied change.  Then the error paths: a published table missing on the
# destination (retried until it exists) and a failing transaction skipped by
# cdc.skip_transaction().
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

my $tables = q{
CREATE TABLE t1 (id int PRIMARY KEY, v text, big text);
CREATE TABLE t2 (id int PRIMARY KEY, a int, b text);
};
$source->safe_psql('postgres', $tables . q{
ALTER TABLE t2 REPLICA IDENTITY FULL;
CREATE PUBLICATION pub FOR TABLE t1, t2;
INSERT INTO t1 SELECT g, 'v' || g, NULL FROM generate_series(1, 5) g;
UPDATE t1 SET big = (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 3000) g) WHERE id = 4;
INSERT INTO t2 SELECT g, g * 10, 'b' || g FROM generate_series(1, 3) g;
});
$dest->safe_psql('postgres', $tables . q{
SELECT cdc.register_mapping('t1', outbox => true, source_name => 'sub1');
SELECT cdc.register_mapping('t2', outbox => true, source_name => 'sub1');
});
create_subscription($dest, $source, 'sub1', ['pub']);

# --- initial copy ----------------------------------------------------------
ok(wait_caught_up($source, $dest, 'sub1'), 'initial copy done, streaming');
compare_table($source, $dest, 'SELECT * FROM t1 ORDER BY 1', 't1 copied');
compare_table($source, $dest, 'SELECT * FROM t2 ORDER BY 1', 't2 copied');
is($dest->safe_psql('postgres', 'SELECT target::text, snapshot_rows, outbox_rows FROM cdc.stats ORDER BY 1'),
	"t1|5|0\nt2|3|0", 'copied rows counted as snapshot rows, no outbox rows');
is(outbox_summary($dest), '0|0', 'no outbox rows for the initial copy');

# --- streaming -------------------------------------------------------------
# Each statement is its own source transaction.  Expected outbox rows in
# comments (a key change is an implied delete plus the update: 2).
$source->safe_psql('postgres', q{
INSERT INTO t1 VALUES (6, 'six', (SELECT string_agg(md5((g * 7)::text), '') FROM generate_series(1, 3000) g)); -- 1
INSERT INTO t1 VALUES (7, 'seven', NULL), (8, 'eight', NULL); -- 2
UPDATE t1 SET v = 'one' WHERE id = 1;        -- 1
UPDATE t1 SET v = 'six!' WHERE id = 6;       -- 1 (big: unchanged TOAST)
UPDATE t1 SET v = 'four!' WHERE id = 4;      -- 1 (big from the copy: unchanged TOAST)
DELETE FROM t1 WHERE id = 2;                 -- 1
UPDATE t1 SET id = 30 WHERE id = 3;          -- 2
INSERT INTO t2 VALUES (4, 40, 'b4');         -- 1
UPDATE t2 SET b = 'x' WHERE id = 1;          -- 1
UPDATE t2 SET id = 20, a = 21 WHERE id = 2;  -- 2
DELETE FROM t2 WHERE id = 3;                 -- 1
TRUNCATE t2;                                 -- 1
INSERT INTO t2 VALUES (5, 50, NULL), (6, 60, 'b6'); -- 2
BEGIN;
UPDATE t1 SET v = v || '+' WHERE id IN (7, 8); -- 2
DELETE FROM t2 WHERE id = 5;                   -- 1
COMMIT;
});
ok(wait_caught_up($source, $dest, 'sub1'), 'stream applied');
compare_table($source, $dest, 'SELECT * FROM t1 ORDER BY 1', 't1: destination equals source');
compare_table($source, $dest, 'SELECT * FROM t2 ORDER BY 1', 't2 (replica identity full): destination equals source');
is($dest->safe_psql('postgres', 'SELECT length(big), md5(big) = md5((SELECT string_agg(md5((g * 7)::text), \'\') FROM generate_series(1, 3000) g)) FROM t1 WHERE id = 6'),
	'96000|t', 'TOASTed value kept by an update of another column');
is($dest->safe_psql('postgres', 'SELECT length(big) FROM t1 WHERE id = 4'), '96000', 'TOASTed value of a copied row kept by a streamed update');
is(outbox_summary($dest), '20|20', 'one outbox row per applied change, idempotency keys distinct');
is($dest->safe_psql('postgres', q{SELECT string_agg(op, '' ORDER BY id) FROM cdc.outbox WHERE target = 't2'::regclass}),
	'cududtccd', 't2 outbox ops in source order');
is($dest->safe_psql('postgres', q{SELECT string_agg(op, '' ORDER BY id) FROM cdc.outbox WHERE target = 't1'::regclass}),
	'cccuuudduuu', 't1 outbox ops in source order');
is($dest->safe_psql('postgres', 'SELECT target::text, snapshot_rows, outbox_rows FROM cdc.stats ORDER BY 1'),
	"t1|5|11\nt2|3|9", 'stats: outbox rows per table');

ok(wait_status($dest, 'sub1', q{state = 'streaming' AND lag_bytes IS NOT NULL AND lag_bytes < 65536 AND last_error IS NULL}),
	'status: streaming, small lag');
my $lsn = source_lsn($source);
ok($dest->safe_psql('postgres', "SELECT applied_lsn <= '$lsn' AND flushed_lsn <= applied_lsn AND received_lsn IS NOT NULL FROM cdc.subscription_status")
	eq 't', 'status: applied_lsn, flushed_lsn, received_lsn consistent');
ok(wait_status($dest, 'sub1', q{flushed_lsn = applied_lsn}), 'flushed_lsn reaches applied_lsn');

# --- a published table missing on the destination -------------------------
# (added to the subscription without a copy, so that its streamed changes
# meet the missing table; the copy's error is in 035_worker_tables.pl)
$source->safe_psql('postgres', q{
CREATE TABLE t3 (id int PRIMARY KEY, v text);
ALTER PUBLICATION pub ADD TABLE t3;
});
my $pid3 = status_row($dest, 'sub1', 'worker_pid');
is($dest->safe_psql('postgres', q{SELECT string_agg(table_name || ' ' || action, ',') FROM cdc.refresh_subscription('sub1', copy_data => false)}),
	't3 added', 'the added table joins the subscription without a copy');
ok(wait_status($dest, 'sub1', "worker_pid <> $pid3 AND state = 'streaming'"), 'a new worker streams');
my $before3 = source_lsn($source);
$source->safe_psql('postgres', q{INSERT INTO t3 VALUES (1, 'a'), (2, 'b')});
my $after3 = source_lsn($source);
ok(wait_status($dest, 'sub1', q{state = 'error' AND last_error LIKE '%t3%' AND last_error_lsn IS NOT NULL}),
	'missing destination table: state error naming the table');
# the context line names the change's source table (formatted only when an
# error needs it: the worker keeps a pointer to the relation per change)
like(status_row($dest, 'sub1', 'last_error'),
	qr/CONTEXT: .*cdc_apply subscription "sub1": source transaction \d+ committed at [0-9A-F]+\/[0-9A-F]+, table public\.t3/s,
	'the error context names the source transaction and its table');
is(status_row($dest, 'sub1', "last_error_lsn > '$before3' AND last_error_lsn < '$after3' AND applied_lsn < '$before3'::pg_lsn + 1000000"),
	't', 'last_error_lsn is the commit LSN of the failing transaction');
ok(wait_status($dest, 'sub1', q{retry_count >= 2}), 'the worker retries');
is(status_row($dest, 'sub1', "applied_lsn < last_error_lsn"), 't', 'the worker never advanced past the failing transaction');
$dest->safe_psql('postgres', 'CREATE TABLE t3 (id int PRIMARY KEY, v text)');
ok(wait_caught_up($source, $dest, 'sub1'), 'after creating the table the retry applies it');
compare_table($source, $dest, 'SELECT * FROM t3 ORDER BY 1', 't3 rows arrived');
ok(wait_status($dest, 'sub1', q{retry_count = 0}), 'retry_count reset after success');

# --- a failing transaction, skipped by the operator -----------------------
$dest->safe_psql('postgres', q{ALTER TABLE t1 ADD CONSTRAINT t1_v_not_bad CHECK (v IS DISTINCT FROM 'bad')});
my $before = source_lsn($source);
$source->safe_psql('postgres', q{
BEGIN;
INSERT INTO t1 VALUES (101, 'fine but in the bad transaction', NULL);
INSERT INTO t1 VALUES (100, 'bad', NULL);
COMMIT;
});
my $after = source_lsn($source);
$source->safe_psql('postgres', q{INSERT INTO t1 VALUES (102, 'after', NULL)});
ok(wait_status($dest, 'sub1', q{state = 'error' AND last_error_lsn IS NOT NULL AND last_error LIKE '%t1_v_not_bad%'}),
	'constraint violation: state error');
my $errlsn = status_row($dest, 'sub1', 'last_error_lsn');
ok($dest->safe_psql('postgres', "SELECT '$errlsn'::pg_lsn > '$before' AND '$errlsn'::pg_lsn < '$after'") eq 't',
	"last_error_lsn $errlsn within the failing transaction's range");
is($dest->safe_psql('postgres', 'SELECT count(*) FROM t1 WHERE id >= 100'), '0', 'nothing of it or after it applied');

$dest->safe_psql('postgres', "SELECT cdc.skip_transaction('sub1', '$errlsn', 'test')");
ok(wait_caught_up($source, $dest, 'sub1'), 'streaming resumes after the skip');
$source->safe_psql('postgres', q{INSERT INTO t1 VALUES (103, 'later', NULL)});
ok(wait_caught_up($source, $dest, 'sub1'), 'later transactions apply');
is($dest->safe_psql('postgres', 'SELECT id, v FROM t1 WHERE id >= 100 ORDER BY 1'), "102|after\n103|later",
	'skipped transaction absent, later ones present');
is($dest->safe_psql('postgres', q{SELECT name, commit_lsn = '} . $errlsn . q{', reason, xid IS NOT NULL, skipped_at IS NOT NULL FROM cdc.skipped_transactions}),
	"sub1|t|test|t|t", 'cdc.skipped_transactions records the skip');
compare_table($source, $dest, 'SELECT * FROM t1 WHERE id NOT IN (100, 101) ORDER BY 1', 't1 equals the source except the skipped rows');
is(outbox_summary($dest), '22|22', 'outbox: two more rows, none for the skipped transaction');
is(status_row($dest, 'sub1', 'state'), 'streaming', 'state streaming at the end');

# --- cdc.alter_subscription: another publication, picked up by a new worker --
$source->safe_psql('postgres', q{
CREATE TABLE t4 (id int PRIMARY KEY, v text);
CREATE PUBLICATION pub4 FOR TABLE t4;
});
$dest->safe_psql('postgres', 'CREATE TABLE t4 (id int PRIMARY KEY, v text)');
my $pid = status_row($dest, 'sub1', 'worker_pid');
$dest->safe_psql('postgres', q{SELECT cdc.alter_subscription('sub1', publications => ARRAY['pub', 'pub4'])});
ok(wait_status($dest, 'sub1', "worker_pid <> $pid AND state = 'streaming'"), 'alter_subscription: a new worker streams');
$source->safe_psql('postgres', q{INSERT INTO t4 VALUES (1, 'via pub4'); INSERT INTO t1 VALUES (104, 'still pub', NULL);});
ok(wait_caught_up($source, $dest, 'sub1'), 'alter_subscription: caught up');
compare_table($source, $dest, 'SELECT * FROM t4 ORDER BY 1', 't4 (the added publication) streams');
is($dest->safe_psql('postgres', 'SELECT v FROM t1 WHERE id = 104'), 'still pub', 'the first publication still streams');
is(status_row($dest, 'sub1', 'publications'), '{pub,pub4}', 'the status view shows both publications');

$dest->stop;
$source->stop;
done_testing();

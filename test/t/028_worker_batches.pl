# The worker hands each source transaction to the batch engine in queues
# (docs/worker.md, "Batches of changes"):
#   - a queue is applied when it holds cdc.apply_batch_changes changes, and
#     the rest at the local commit;
#   - a backlog of one-change source transactions is applied in queues of
#     1,000 changes across transactions;
#   - wide rows: a queue is also applied when its images reach
#     cdc.group_max_bytes, so a transaction of large values never sits whole
#     in memory;
#   - an error in the second queue of a transaction names the change's
#     position ("change N of the source transaction") and the transaction's
#     commit LSN, and nothing of the transaction commits, not even the queue
#     applied before;
#   - cdc.apply_batch_changes = 1 (change by change) gives the same state.
# Each part ends with the destination equal to the source, every source
# change claimed once (a ledger row, or within its transaction's offset
# range) and one outbox row per source change.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
# DEBUG1: the worker logs every queue it applies before a local commit.
# Groups close by count (1000 source transactions) or when the source has
# nothing more buffered, not by time, so the queue sizes below do not depend
# on the machine's speed.
my $dest = new_dest('dest', "cdc.apply_batch_changes = 1000\ncdc.group_max_delay = 60s\nlog_min_messages = debug1\n");

# n is text at the source and integer at the destination, so that one bad
# value fails one change of a transaction
$source->safe_psql('postgres', q{
CREATE TABLE wb (id int PRIMARY KEY, v text, n text);
CREATE PUBLICATION pub FOR TABLE wb;
});
$dest->safe_psql('postgres', q{
CREATE TABLE wb (id int PRIMARY KEY, v text, n int);
SELECT cdc.register_mapping('wb', outbox => true, source_name => 'bat');
});
create_subscription($dest, $source, 'bat', ['pub']);
ok(wait_caught_up($source, $dest, 'bat'), 'subscription streaming');

my $changes = 0;
my $compare = 'SELECT id, md5(v), n::text FROM wb ORDER BY 1';

sub check_state
{
	my ($label) = @_;
	ok(wait_caught_up($source, $dest, 'bat'), "$label: caught up");
	compare_table($source, $dest, $compare, "$label: destination equals source");
	is(outbox_summary($dest), "$changes|$changes", "$label: $changes outbox rows, one per source change");
	# a source transaction of at least 16 changes is claimed as one offset
	# range of its positions (docs/semantics.md, "Claims by offset range"),
	# a smaller one as a ledger row per change.  Positions are WAL
	# positions (docs/worker.md, "Positions and delivery keys"), so a range
	# covers more numbers than changes: each change (its outbox row's key
	# pgoutput:<source>:<commit LSN>:<position>) is held by exactly one
	# ledger row or range, and every ledger row is one change's
	is(changes_claimed_once($dest, 'wb', outbox_changes('wb')),
		"$changes|0", "$label: every source change claimed once, by a ledger row or in an offset range");
	is($dest->safe_psql('postgres', q{SELECT coalesce(sum(duplicate + stale + conflict + expired), 0) FROM cdc.stats}),
		'0', "$label: no duplicate, stale, conflict or expired outcome");
}

# Changes a worker setting and restarts the worker, so that the next source
# transaction is certainly applied with it.
sub worker_setting
{
	my ($name, $value) = @_;
	disable_and_wait($source, $dest, 'bat');
	$dest->safe_psql('postgres', defined $value ? "ALTER SYSTEM SET $name = $value" : "ALTER SYSTEM RESET $name");
	$dest->reload;
	enable_subscription($dest, 'bat');
}

# The "applying N queued changes" lines of source transaction $xid in the
# log since $offset: the sizes of the queues applied before its end.
sub queue_sizes
{
	my ($offset, $xid) = @_;
	my $log = slurp_file($dest->logfile, $offset);
	return [ $log =~ /applying (\d+) queued changes \(\d+ bytes of images\) inside source transaction $xid\b/g ];
}

# --- queues of cdc.apply_batch_changes changes ------------------------------
my $offset = -s $dest->logfile;
my $xid = $source->safe_psql('postgres', q{
BEGIN;
INSERT INTO wb SELECT g, 'v' || g, g::text FROM generate_series(1, 2500) g;
UPDATE wb SET v = v || 'u', n = (n::int + 1)::text WHERE id <= 1000;
SELECT txid_current();
COMMIT;
});
$changes += 3500;
check_state('3,500 changes in one transaction');
is(join(',', @{ queue_sizes($offset, $xid) }), '1000,1000,1000',
	'three full queues of 1,000 changes were applied inside the transaction, the last 500 at the local commit');

# --- a backlog of small source transactions: queues span transactions -------
# 2,400 source transactions of one change each, written while the worker is
# stopped: a group (up to cdc.group_max_transactions = 1000 transactions)
# is applied in queues of up to 1,000 changes, not one queue per transaction
disable_and_wait($source, $dest, 'bat');
$source->safe_psql('postgres', join('', map { "INSERT INTO wb VALUES ($_, 's$_', '$_');\n" } 30001 .. 32400));
$changes += 2400;
$offset = -s $dest->logfile;
enable_subscription($dest, 'bat');
check_state('2,400 single-change source transactions');
# every source transaction has one change, so a queue of more than one
# change spans transactions
my $log = slurp_file($dest->logfile, $offset);
my @queues = ($log =~ /applying (\d+) queued changes \(\d+ bytes of images\) (?:inside source transaction|at the local commit)/g);
note('queues of the backlog: ' . scalar(@queues) . ', largest ' . (sort { $b <=> $a } @queues)[0]);
ok((grep { $_ > 1 } @queues), 'the backlog was applied in queues spanning several source transactions');
my $sum = 0;
$sum += $_ for @queues;
is($sum, 2400, 'the queues hold exactly the 2,400 changes');

# --- wide rows: queues bounded by cdc.group_max_bytes -----------------------
worker_setting('cdc.group_max_bytes', 1024);    # kB
$offset = -s $dest->logfile;
# 30 rows of 200 kB (pgoutput sends them whole; the image keeps the value,
# and its JSON form only when something needs it: about 200 kB per change;
# a queue is applied once it holds more than the cap)
$xid = $source->safe_psql('postgres', q{
BEGIN;
INSERT INTO wb SELECT g, repeat(md5(g::text), 6250), g::text FROM generate_series(10001, 10030) g;
SELECT txid_current();
COMMIT;
});
$changes += 30;
check_state('30 rows of 200 kB');
my $sizes = queue_sizes($offset, $xid);
note('queues applied inside the wide transaction: ' . join(',', @$sizes));
cmp_ok(scalar(@$sizes), '>=', 5, 'the wide transaction was applied in queues of about 1 MB');
ok(!grep({ $_ > 6 } @$sizes), 'no queue held more than six 200 kB changes (1 MB and the change that passed it)');
worker_setting('cdc.group_max_bytes', undef);

# --- an error in the second queue of a transaction --------------------------
my $before = $dest->safe_psql('postgres', 'SELECT count(*) FROM wb');
$source->safe_psql('postgres', q{
INSERT INTO wb SELECT g, 'e' || g, CASE WHEN g = 21200 THEN 'bad' ELSE g::text END FROM generate_series(20001, 21500) g;
});
ok(wait_status($dest, 'bat', q{state = 'error' AND last_error LIKE '%change 1200 of the source transaction%'}),
	'the error names the failing change by its position in the source transaction')
  or diag(status_row($dest, 'bat', 'state, last_error'));
like(status_row($dest, 'bat', 'last_error'), qr/invalid input syntax for type integer: "bad"/, 'and the bad value');
like(status_row($dest, 'bat', 'last_error'), qr/source transaction \d+ committed at [0-9A-F]+\/[0-9A-F]+/,
	'and the source transaction with its commit LSN');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM wb'), $before,
	'nothing of the failing transaction is committed, not even its first queue of 1,000 changes');
$dest->safe_psql('postgres', 'ALTER TABLE wb ALTER COLUMN n TYPE text');
$changes += 1500;
check_state('after the column is fixed');

# --- reloads of cdc.apply_batch_changes while a transaction is applied -------
# Found by a fresh-user run: the worker re-read the setting between any two
# messages, so switching to 1 while changes were queued applied the next
# change ahead of the queued ones (rows left behind, changes counted as
# conflicts, outbox rows lost).  The limit now holds for a whole local
# transaction.  A transaction of 32,000 inserts and updates that leave an
# out-of-line (unchanged TOAST) column alone, applied while the setting
# flips as fast as psql can (every 20 ms plus a reload).  Most reloads land
# right after a queue was applied, when nothing is queued, so the test needs
# many flips: on the code before the fix it failed (3,000 flips: rows left
# behind, conflicts, lost outbox rows).
$source->safe_psql('postgres', q{
CREATE TABLE flip (id int PRIMARY KEY, v text, big text);
ALTER TABLE flip ALTER COLUMN big SET STORAGE EXTERNAL;
ALTER PUBLICATION pub ADD TABLE flip;
});
$dest->safe_psql('postgres', q{
CREATE TABLE flip (id int PRIMARY KEY, v text, big text);
SELECT cdc.register_mapping('flip', outbox => true, source_name => 'bat');
SELECT count(*) FROM cdc.refresh_subscription('bat', copy_data => false);
});
my $outbox_before = $dest->safe_psql('postgres', 'SELECT count(*) FROM cdc.outbox');
disable_and_wait($source, $dest, 'bat');
$source->safe_psql('postgres', q{
DO $$ BEGIN
  FOR b IN 0..319 LOOP
    INSERT INTO flip SELECT g, 'ins', repeat(md5(g::text), 80) FROM generate_series(b * 50 + 1, b * 50 + 50) g;
    UPDATE flip SET v = 'upd' WHERE id BETWEEN b * 50 + 1 AND b * 50 + 50;
  END LOOP;
END $$;
});
enable_subscription($dest, 'bat');
my $flips = 0;
until ($dest->safe_psql('postgres', 'SELECT count(*) FROM cdc.outbox') - $outbox_before >= 32000 || $flips >= 500) {
	$dest->safe_psql('postgres', 'ALTER SYSTEM SET cdc.apply_batch_changes = ' . ($flips % 2 ? 1000 : 1) . '; SELECT pg_reload_conf()');
	$flips++;
	select(undef, undef, undef, 0.02);
}
note("cdc.apply_batch_changes flipped $flips times during the transaction");
worker_setting('cdc.apply_batch_changes', 1000);
ok(wait_caught_up($source, $dest, 'bat'), 'flips: caught up');
compare_table($source, $dest, 'SELECT id, v, md5(big) FROM flip ORDER BY 1', 'flips: destination equals source');
is($dest->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE op = 'u') || '|' || count(*) FROM cdc.outbox WHERE target = 'flip'::regclass}),
	'16000|32000', 'flips: one outbox row per source change');
is($dest->safe_psql('postgres', q{SELECT coalesce(sum(conflict + stale), 0) FROM cdc.stats}), '0', 'flips: no conflict or stale outcome');
# the parts below count the outbox rows of table wb only
$dest->safe_psql('postgres', q{DELETE FROM cdc.outbox WHERE target = 'flip'::regclass});

# --- change by change gives the same state ----------------------------------
worker_setting('cdc.apply_batch_changes', 1);
# updates of every third row, deletes of every fifth, re-inserts of every
# fifth id up to 3,000 (those above 2,500 are new)
$changes += $source->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE id % 3 = 0) + count(*) FILTER (WHERE id % 5 = 0) + 600 FROM wb});
$offset = -s $dest->logfile;
$source->safe_psql('postgres', q{
BEGIN;
UPDATE wb SET v = v || 'w', n = 'x' || n WHERE id % 3 = 0;
DELETE FROM wb WHERE id % 5 = 0;
INSERT INTO wb SELECT g, 'r' || g, g::text FROM generate_series(5, 3000, 5) g;
COMMIT;
});
check_state('change by change');
is(scalar(@{ queue_sizes($offset, '\\d+') }), 0, 'change by change: nothing was queued');

# --- claims by offset range: what they keep, and an origin rewound ----------
# A source transaction of 40 changes (batched again) is claimed as one range
# of its positions; a transaction of 3 changes as three ledger rows.  Then
# the replication origin is moved back before both: the source sends them
# again, every re-sent change is a duplicate, and no row, outbox row, ledger
# row or range changes.
worker_setting('cdc.apply_batch_changes', undef);
ok(wait_caught_up($source, $dest, 'bat'), 'rewind: caught up before');
my $lsn_before = $dest->safe_psql('postgres', q{SELECT applied_lsn FROM cdc.subscription_status WHERE name = 'bat'});
slot_save($source, 'bat', 'bat_saved'); # the slot as it is now: it can send what follows again
$source->safe_psql('postgres', q{UPDATE wb SET v = v || 'g' WHERE id BETWEEN 1 AND 40});
$source->safe_psql('postgres', q{UPDATE wb SET v = v || 'h' WHERE id BETWEEN 41 AND 43});
$changes += 43;
check_state('a transaction of 40 changes and one of 3');
my $claims = q{SELECT (SELECT count(*) FROM cdc.ledger WHERE target = 'wb'::regclass) || '|' ||
                      (SELECT string_agg(p.name || ' ' || g.lo || '-' || g.hi, ',' ORDER BY p.id, g.lo) FROM cdc.ledger_range g
                         JOIN cdc.ledger_partition p ON p.id = g.partition_id WHERE p.target = 'wb'::regclass)};
my $claims_before = $dest->safe_psql('postgres', $claims);
my $sysid = $source->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
# The range runs from the first change's position to the 40th's: positions
# are the changes' WAL positions (docs/worker.md, "Positions and delivery
# keys"), 40 records apart.
like($claims_before, qr/pgoutput:pg:$sysid:[0-9A-F]+\/[0-9A-F]+ \d+-\d+$/,
	'rewind: the 40-change transaction is the last range, its first to its 40th change\'s position');
my ($range_part, $range_lo, $range_hi) = $claims_before =~ /(pgoutput:pg:$sysid:[0-9A-F]+\/[0-9A-F]+) (\d+)-(\d+)$/;
cmp_ok($range_hi - $range_lo, '>=', 39, 'rewind: the range spans 40 WAL positions');
is($dest->safe_psql('postgres', "SELECT cdc.delivery_processed('wb', '$range_part:' || p) FROM unnest(ARRAY[$range_lo, $range_hi, $range_hi + 1]) p"),
	"t\nt\nf", 'rewind: delivery_processed answers from the range (the first and last position processed, the next not)');
my $rows_before = $dest->safe_psql('postgres', 'SELECT md5(string_agg(wb::text, \',\' ORDER BY id)) FROM wb');
my $stats_before = $dest->safe_psql('postgres', q{SELECT applied || '|' || duplicate FROM cdc.stats WHERE target = 'wb'::regclass});
disable_and_wait($source, $dest, 'bat');
slot_restore($source, 'bat', 'bat_saved');
origin_rewind($dest, 'bat', $lsn_before);
enable_subscription($dest, 'bat');
ok(wait_caught_up($source, $dest, 'bat'), 'rewind: caught up again');
my ($applied_before, $dup_before) = split /\|/, $stats_before;
is($dest->safe_psql('postgres', q{SELECT applied || '|' || duplicate FROM cdc.stats WHERE target = 'wb'::regclass}),
	$applied_before . '|' . ($dup_before + 43), 'rewind: the 43 re-sent changes are duplicates, nothing applied');
is($dest->safe_psql('postgres', 'SELECT md5(string_agg(wb::text, \',\' ORDER BY id)) FROM wb'), $rows_before, 'rewind: rows unchanged');
is(outbox_summary($dest), "$changes|$changes", 'rewind: no outbox row added');
is($dest->safe_psql('postgres', $claims), $claims_before, 'rewind: ledger rows and ranges unchanged');
done_testing();

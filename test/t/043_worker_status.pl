# Status tells the truth (issue 12 item 10; docs/worker.md, "Status").
#
#   1. a caught-up idle subscription shows zero lag (lag_bytes and
#      lag_seconds), also while the source writes WAL that carries nothing
#      for it; a subscription that is stuck on a failing transaction shows
#      lag;
#   2. last_error keeps the error's HINT and DETAIL; cdc.subscription_errors
#      keeps the history; once the subscription streams again last_error and
#      retry_count are cleared;
#   3. a subscription waiting for a free worker slot (cdc.max_workers = 1)
#      says so in its state and last_error, and starts when one is free.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest', "cdc.max_workers = 1\n");

sub dq { return $dest->safe_psql('postgres', $_[0]); }
sub sq { return $source->safe_psql('postgres', $_[0]); }

sq(q{
CREATE TABLE s1 (id int PRIMARY KEY, v text);
CREATE TABLE s2 (id int PRIMARY KEY);
CREATE TABLE unrelated (id int);
CREATE PUBLICATION pub_s1 FOR TABLE s1;
CREATE PUBLICATION pub_s2 FOR TABLE s2;
});
dq('CREATE TABLE s2 (id int PRIMARY KEY)');

# ---------------------------------------------------------------------------
# 2. (first) the error and its hint; cleared when streaming again
# ---------------------------------------------------------------------------
# s1 has no destination table yet: every attempt fails with a hint
create_subscription($dest, $source, 's1', ['pub_s1'], 'copy_data => false');
ok(wait_status($dest, 's1', q{state = 'streaming'}), 's1: slot created');
sq(q{INSERT INTO s1 VALUES (1, 'a')});
ok(wait_status($dest, 's1', q{state = 'error' AND retry_count >= 2}), 's1 fails and retries');
my $err = status_row($dest, 's1', 'last_error');
like($err, qr/s1/, 'last_error names the table');
like($err, qr/HINT:\s+Create public\.s1/, 'last_error keeps the hint');
ok(dq(q{SELECT count(*) >= 2 FROM cdc.subscription_errors WHERE name = 's1' AND error ~ 'HINT'}) eq 't',
	'cdc.subscription_errors keeps the history with hints');
# stuck: lag is not zero
ok($dest->poll_query_until('postgres', q{SELECT lag_bytes > 0 FROM cdc.subscription_status WHERE name = 's1'}),
	'a stuck subscription shows lag_bytes > 0')
  or diag(dq(q{SELECT applied_lsn, flushed_lsn, received_lsn, source_end_lsn, lag_bytes FROM cdc.subscription_status WHERE name = 's1'}));
dq(q{CREATE TABLE s1 (id int PRIMARY KEY, v text)});
ok(wait_caught_up($source, $dest, 's1'), 's1 streams once the table exists');
is(dq('SELECT count(*) FROM s1'), '1', 'row 1 applied');
ok(wait_status($dest, 's1', q{last_error IS NULL AND retry_count = 0}), 'last_error and retry_count cleared');
ok(dq(q{SELECT count(*) >= 2 FROM cdc.subscription_errors WHERE name = 's1'}) eq 't', 'the error history stays');

# ---------------------------------------------------------------------------
# 1. Lag of a caught-up idle subscription
# ---------------------------------------------------------------------------
sq(q{INSERT INTO s1 VALUES (2, 'b')});
ok(wait_caught_up($source, $dest, 's1'), 'caught up');
for my $round (1 .. 3) {
	# WAL that carries nothing for s1
	sq('INSERT INTO unrelated SELECT generate_series(1, 500)');
	my $lsn = sq('SELECT pg_current_wal_lsn()');
	ok($dest->poll_query_until('postgres', qq{SELECT source_end_lsn >= '$lsn' AND lag_bytes = 0 AND lag_seconds = 0
	                                            FROM cdc.subscription_status WHERE name = 's1'}),
		"round $round: idle and caught up with unrelated source WAL: lag 0");
}
# stays at zero while nothing happens (it grew before)
my $updated = dq(q{SELECT updated_at FROM cdc.subscription_state st JOIN cdc.subscription s USING (subid) WHERE s.name = 's1'});
ok($dest->poll_query_until('postgres', qq{SELECT updated_at > '$updated'::timestamptz + interval '2 seconds'
                                            FROM cdc.subscription_state st JOIN cdc.subscription s USING (subid) WHERE s.name = 's1'}),
	'the worker kept writing its status');
is(status_row($dest, 's1', q{lag_bytes || '|' || lag_seconds}), '0|0', 'still zero lag after seconds of idleness');

# ---------------------------------------------------------------------------
# 3. Waiting for a free worker slot (cdc.max_workers = 1)
# ---------------------------------------------------------------------------
create_subscription($dest, $source, 's2', ['pub_s2']);
ok(wait_status($dest, 's2', q{state = 'waiting' AND last_error ~ 'no free worker slot \\(cdc\\.max_workers = 1\\)'}),
	's2 waits for a worker slot and says so');
is(status_row($dest, 's2', 'worker_pid IS NULL'), 't', 's2 has no worker');
sq('INSERT INTO s2 VALUES (1)');
dq(q{SELECT cdc.disable_subscription('s1')});
ok(wait_caught_up($source, $dest, 's2'), 's2 starts once s1 frees the slot');
is(status_row($dest, 's2', q{coalesce(last_error, '') || retry_count}), '0', 's2: no error left');
is(dq('SELECT count(*) FROM s2'), '1', 's2: row applied');
is(status_row($dest, 's1', 'state'), 'disabled', 's1 disabled');

done_testing();

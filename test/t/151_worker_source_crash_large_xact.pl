# A large source transaction cut off in the middle of its way to the worker
# (review h3, continuity of the stream):
#   A. cdc.streaming = on: an immediate stop of the source while a large
#      transaction is open and already streamed in chunks (spooled here);
#      then a large transaction streamed and committed after the restart
#   B. cdc.streaming = on: the walsender terminated while a large open
#      transaction is streamed; the transaction goes on and commits, so the
#      source streams it again from its first change into the spool
#   C. cdc.streaming = off: an immediate stop of the source right after a
#      large transaction committed (the worker receiving it) while another
#      large one is open
# After each: the destination's rows are the source's, nothing of a
# transaction the crash rolled back, one outbox row per committed change
# (distinct keys), the subscription streaming with retry_count 0.
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

my $table = 'CREATE TABLE big (id int PRIMARY KEY, n int NOT NULL, v text);';
sq($table . q{INSERT INTO big SELECT g, 0, 'seed' FROM generate_series(1, 100) g; CREATE PUBLICATION pub FOR TABLE big;});
dq($table . q{SELECT cdc.register_mapping('big', outbox => true);});
create_subscription($dest, $source, 's', ['pub']);
ok(wait_caught_up($source, $dest, 's'), 'initial copy, streaming');

sub outbox_rows { return dq(q{SELECT count(*) FROM cdc.outbox WHERE target = 'big'::regclass}); }
sub streamed { return sq(q{SELECT coalesce(max(stream_txns), 0) FROM pg_stat_replication_slots WHERE slot_name = 's'}); }

sub check
{
	my ($label, $before, $changes) = @_;
	ok(wait_caught_up($source, $dest, 's'), "$label: caught up");
	compare_table($source, $dest, q{SELECT count(*), sum(id::bigint), sum(n::bigint), md5(string_agg(id || ':' || n || ':' || v, ',' ORDER BY id)) FROM big},
		"$label: rows equal the source");
	is(outbox_rows() - $before, $changes, "$label: one outbox row per committed change");
	is(outbox_summary($dest) =~ /^(\d+)\|\1$/ ? 'distinct' : 'repeated', 'distinct', "$label: no idempotency key twice");
	ok(wait_status($dest, 's', q{state = 'streaming' AND retry_count = 0}), "$label: streaming, retry_count 0")
	  or diag(status_row($dest, 's', 'state, retry_count, last_error'));
}

# --- A. immediate stop of the source while a streamed transaction is open --
my $before = outbox_rows();
my $s0 = streamed();
my $bg = $source->background_psql('postgres', on_error_stop => 0);
$bg->query_safe('BEGIN');
$bg->query_safe(q{INSERT INTO big SELECT g, 1, repeat('a', 50) FROM generate_series(1001, 21000) g});
ok($source->poll_query_until('postgres', qq{SELECT coalesce(max(stream_txns), 0) > $s0 FROM pg_stat_replication_slots WHERE slot_name = 's'}),
	'A: the open transaction is streamed');
$source->stop('immediate');
eval { $bg->quit; };
$source->start;
$s0 = streamed();
sq(q{BEGIN;
INSERT INTO big SELECT g, 2, repeat('b', 50) FROM generate_series(21001, 41000) g;
UPDATE big SET n = n + 1 WHERE id % 10 = 0;
COMMIT;});
ok($source->poll_query_until('postgres', qq{SELECT coalesce(max(stream_txns), 0) > $s0 FROM pg_stat_replication_slots WHERE slot_name = 's'}),
	'A: the committed transaction was streamed');
sq(qq{INSERT INTO big VALUES ($_, 3, 'small')}) for 41001 .. 41010;
# 20000 inserts, 2000 + 10 updates (ids 10..100 and 21010..41000), 10 small inserts
check('A', $before, 20000 + 10 + 2000 + 10);
is(dq(q{SELECT count(*) FROM big WHERE id BETWEEN 1001 AND 21000}), '0', 'A: nothing of the transaction the crash rolled back');

# --- B. walsender terminated while a streamed open transaction goes on -----
$before = outbox_rows();
$s0 = streamed();
my $old_pid = sq(q{SELECT active_pid FROM pg_replication_slots WHERE slot_name = 's'});
$bg = $source->background_psql('postgres', on_error_stop => 1);
$bg->query_safe('BEGIN');
$bg->query_safe(q{INSERT INTO big SELECT g, 4, repeat('c', 50) FROM generate_series(50001, 70000) g});
ok($source->poll_query_until('postgres', qq{SELECT coalesce(max(stream_txns), 0) > $s0 FROM pg_stat_replication_slots WHERE slot_name = 's'}),
	'B: the open transaction is streamed');
sq(qq{SELECT pg_terminate_backend($old_pid)});
ok($source->poll_query_until('postgres', qq{SELECT active_pid IS NOT NULL AND active_pid <> $old_pid FROM pg_replication_slots WHERE slot_name = 's'}),
	'B: the worker connected again');
$bg->query_safe(q{SAVEPOINT sp1});
$bg->query_safe(q{UPDATE big SET n = n + 10 WHERE id > 50000 AND id % 10 = 0});
$bg->query_safe(q{SAVEPOINT sp2});
$bg->query_safe(q{DELETE FROM big WHERE id > 60000});
$bg->query_safe(q{ROLLBACK TO sp2});
$bg->query_safe(q{COMMIT});
$bg->quit;
check('B', $before, 20000 + 2000);

# --- C. streaming off: immediate stop right after a large commit -----------
dq(q{ALTER SYSTEM SET cdc.streaming = off; SELECT pg_reload_conf();});
disable_and_wait($source, $dest, 's');
enable_subscription($dest, 's');
ok(wait_caught_up($source, $dest, 's'), 'C: streaming again without cdc.streaming');
$before = outbox_rows();
$bg = $source->background_psql('postgres', on_error_stop => 0);
$bg->query_safe('BEGIN');
$bg->query_safe(q{INSERT INTO big SELECT g, 5, repeat('d', 50) FROM generate_series(80001, 100000) g});
my $changes = sq(q{SELECT count(*) FROM big WHERE id <= 41010});
sq(q{UPDATE big SET n = n + 100, v = 'c' WHERE id <= 41010});
$source->stop('immediate');
eval { $bg->quit; };
$source->start;
sq(q{DELETE FROM big WHERE id BETWEEN 41001 AND 41005});
check('C', $before, $changes + 5);
is(dq(q{SELECT count(*) FROM big WHERE id > 80000}), '0', 'C: nothing of the open transaction the crash rolled back');

# --- D. a failed group while a streamed transaction is open ---------------
# The backlog: a large transaction still open (streamed in chunks while
# decoded), then two small ones, the second refused by the destination.  The
# small ones are applied in one group, which fails in the second; the worker
# reconnects in the same process and applies one source transaction per
# local commit, so the open transaction is streamed again from its first
# change into the spool it already holds.  The refused one stops the
# worker; once the destination accepts it and the large one commits,
# everything is applied once.
dq(q{ALTER SYSTEM SET cdc.streaming = on; SELECT pg_reload_conf();});
disable_and_wait($source, $dest, 's');
$before = outbox_rows();
$bg = $source->background_psql('postgres', on_error_stop => 1);
$bg->query_safe('BEGIN');
$bg->query_safe(q{INSERT INTO big SELECT g, 6, repeat('e', 50) FROM generate_series(200001, 220000) g});
sq(q{INSERT INTO big VALUES (299999, 0, 'good')});
sq(q{INSERT INTO big VALUES (300000, 0, 'bad')});
dq(q{ALTER TABLE big ADD CONSTRAINT big_v_not_bad CHECK (v <> 'bad')});
my $log_offset = -s $dest->logfile;
enable_subscription($dest, 's');
ok(wait_status($dest, 's', q{state = 'error' AND last_error LIKE '%big_v_not_bad%'}), 'D: the refused transaction stops the worker');
ok($source->poll_query_until('postgres', q{SELECT coalesce(max(stream_txns), 0) > 0 FROM pg_stat_replication_slots WHERE slot_name = 's'}),
	'D: the open transaction was streamed');
is(dq(q{SELECT string_agg(v, ',') FROM big WHERE id >= 299999}), 'good', 'D: the transaction before the refused one is applied');
dq(q{ALTER TABLE big DROP CONSTRAINT big_v_not_bad});
$bg->query_safe(q{UPDATE big SET n = n + 1 WHERE id > 200000 AND id <= 220000 AND id % 10 = 0});
$bg->query_safe(q{COMMIT});
$bg->quit;
check('D', $before, 2 + 20000 + 2000);

$dest->stop;
$source->stop;
done_testing();

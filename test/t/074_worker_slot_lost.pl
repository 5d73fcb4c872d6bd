# A slot invalidated by max_slot_wal_keep_size (helper h1's load review,
# idea 4): the subscription is disabled while pgbench writes the source,
# the slot falls behind past max_slot_wal_keep_size and a checkpoint
# invalidates it (wal_status lost).  The worker must say so (state error,
# the runbook's message, SQLSTATE 55000 in the log and in
# cdc.worker_stats) and apply nothing of the stream past the hole; the way
# out docs/operations.md gives ("the same": cdc.accept_gap, then
# cdc.resync_table of each table) must bring the destination back to the
# source's rows, with the writer still running.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
$source->append_conf('postgresql.conf', "max_slot_wal_keep_size = 1MB\nlog_checkpoints = on\n");
$source->restart;
my $dest = new_dest('dest', "log_error_verbosity = verbose\n");

sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { return $dest->safe_psql('postgres', $_[0]); }

my $table = 'CREATE TABLE lw (id int PRIMARY KEY, n int NOT NULL);';
sq($table . 'INSERT INTO lw SELECT g, 0 FROM generate_series(1, 200) g; CREATE PUBLICATION pub_lw FOR TABLE lw;');
dq($table . q{SELECT cdc.register_mapping('lw', outbox => true, source_name => 'lw');});
create_subscription($dest, $source, 'lw', ['pub_lw']);
ok(wait_caught_up($source, $dest, 'lw'), 'copied, streaming');

my $script = PostgreSQL::Test::Utils::tempdir() . '/lw.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set id random(1, 400)
\set d random(-100, 100)
INSERT INTO lw VALUES (:id, :d) ON CONFLICT (id) DO UPDATE SET n = lw.n + :d;
DELETE FROM lw WHERE id = :id + 7;
});
my $log = "$script.log";
my $pgbench = IPC::Run::start([ 'pgbench', '-n', '-c', '2', '-j', '1', '-R', '200', '-T', '600', '-f', $script, $source->connstr('postgres') ],
	'<', '/dev/null', '>', $log, '2>&1');
sleep 2;
disable_and_wait($source, $dest, 'lw');
my $progress = status_row($dest, 'lw', 'applied_lsn');

# push the slot past max_slot_wal_keep_size and checkpoint until it is lost
for my $i (1 .. 40) {
	last if sq(q{SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'lw'}) eq 'lost';
	sq('SELECT pg_switch_wal(); INSERT INTO lw SELECT 100000 + g, 0 FROM generate_series(1, 10) g ON CONFLICT DO NOTHING; CHECKPOINT;');
}
is(sq(q{SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'lw'}), 'lost', 'the slot is invalidated (wal_status lost)');

my $offset = -s $dest->logfile;
enable_subscription($dest, 'lw');
ok(wait_status($dest, 'lw', q{state = 'error'}), 'lost slot: state error');
my $err = status_row($dest, 'lw', 'last_error');
like($err, qr/slot "lw" on the source has lost WAL it needs \(wal_status lost: max_slot_wal_keep_size\)/, 'lost slot: the runbook\'s message');
like($err, qr/cdc\.accept_gap/, 'lost slot: the way out is named');
ok(wait_for_log($dest, qr/ERROR:  55000: cdc_apply subscription "lw": slot "lw" on the source has lost WAL/, $offset),
	'lost slot: logged with SQLSTATE 55000');
is(status_row($dest, 'lw', 'applied_lsn'), $progress, 'lost slot: nothing applied past the hole');
is(dq(q{SELECT (errors_by_sqlstate->>'55000')::int >= 1 FROM cdc.worker_stats WHERE subscription = 'lw'}), 't',
	'lost slot: counted under 55000 in cdc.worker_stats');

# the runbook: accept the gap, then re-copy the table
dq(q{SELECT cdc.accept_gap('lw', 'slot invalidated by max_slot_wal_keep_size')});
ok(wait_status($dest, 'lw', q{state = 'streaming' AND retry_count = 0}), 'lost slot: streaming again after accept_gap')
  or diag(dq(q{SELECT string_agg(error, E'\n---\n' ORDER BY id) FROM (SELECT error, id FROM cdc.subscription_errors ORDER BY id DESC LIMIT 3) e}));
is(dq(q{SELECT to_lsn IS NOT NULL AND accepted_at IS NOT NULL FROM cdc.accepted_gaps WHERE name = 'lw'}), 't', 'lost slot: the gap is recorded');
is($source->safe_psql('postgres', q{SELECT wal_status <> 'lost' FROM pg_replication_slots WHERE slot_name = 'lw'}), 't',
	'lost slot: the subscription streams from a usable slot');
dq(q{SELECT cdc.resync_table('lw', 'lw')});
ok(wait_status($dest, 'lw', q{state = 'streaming'}), 'streaming after the re-copy');

$pgbench->kill_kill;
$pgbench->finish;
note('pgbench: ' . slurp_file($log));
ok(wait_caught_up($source, $dest, 'lw'), 'caught up');
compare_table($source, $dest, 'SELECT count(*), md5(coalesce(string_agg(id || \':\' || n, \',\' ORDER BY id), \'\')) FROM lw',
	'after accept_gap and resync_table the table equals the source');
is(dq(q{SELECT count(*) = count(DISTINCT idempotency_key) FROM cdc.outbox}), 't', 'outbox: idempotency keys distinct');

# ---------------------------------------------------------------------------
# The slot is invalidated while the worker runs: a session holds a lock on
# the destination table, so the worker stops applying while pgbench writes;
# the checkpoint terminates the walsender and invalidates the slot.
# ---------------------------------------------------------------------------
$pgbench = IPC::Run::start([ 'pgbench', '-n', '-c', '2', '-j', '1', '-R', '200', '-T', '600', '-f', $script, $source->connstr('postgres') ],
	'<', '/dev/null', '>', $log, '2>&1');
sleep 1;
my $locker = $dest->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE lw IN ACCESS EXCLUSIVE MODE;');
sleep 2;
# WAL past max_slot_wal_keep_size while the worker is held; the checkpoint
# that invalidates the slot must terminate the walsender, which cannot send
# its last message to a worker that does not read (PostgreSQL's behaviour,
# the same with its own subscriber): it waits until the lock is released
for my $i (1 .. 5) {
	sq('SELECT pg_switch_wal(); INSERT INTO lw SELECT 200000 + g, 0 FROM generate_series(1, 10) g ON CONFLICT DO NOTHING;');
}
my $ckpt = $source->background_psql('postgres');
$ckpt->query_until(qr/start/, "\\echo start\nCHECKPOINT;\n");
sleep 3;
$locker->query_safe('COMMIT;');
$locker->quit;
$ckpt->quit;
for my $i (1 .. 40) {
	last if sq(q{SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'lw'}) eq 'lost';
	sq('SELECT pg_switch_wal(); CHECKPOINT;');
}
is(sq(q{SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'lw'}), 'lost', 'active: the slot is invalidated');
ok(wait_status($dest, 'lw', q{state = 'error' AND last_error ~ 'lost WAL it needs'}), 'active: state error, lost WAL');
sleep 2;
ok(wait_status($dest, 'lw', q{state = 'error' AND last_error ~ 'lost WAL it needs'}), 'active: still in error (no silent skip)');
dq(q{SELECT cdc.accept_gap('lw', 'invalidated while active')});
ok(wait_status($dest, 'lw', q{state = 'streaming' AND retry_count = 0}), 'active: streaming after accept_gap');
dq(q{SELECT cdc.resync_table('lw', 'lw')});
ok(wait_status($dest, 'lw', q{state = 'streaming'}), 'active: streaming after the re-copy');
$pgbench->kill_kill;
$pgbench->finish;
ok(wait_caught_up($source, $dest, 'lw'), 'active: caught up');
compare_table($source, $dest, 'SELECT count(*), md5(coalesce(string_agg(id || \':\' || n, \',\' ORDER BY id), \'\')) FROM lw',
	'active: after accept_gap and resync_table the table equals the source');
is(dq(q{SELECT count(*) = count(DISTINCT idempotency_key) FROM cdc.outbox}), 't', 'active: outbox keys distinct');

$dest->stop;
$source->stop;
done_testing();

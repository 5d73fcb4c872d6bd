# Every background-worker case of shared/scenarios.md against a real source
# and destination cluster, with the scenario's expected state: rows,
# tombstones, outbox rows and the progress (the replication origin's LSN =
# the end LSN of the last applied source transaction).  The exact LSNs of
# what the worker is sent come from a probe slot on the source that sees the
# same stream (probe_read in CdcWorkerTest.pm).
#
#   B03  key-only delete under REPLICA IDENTITY DEFAULT (pgoutput variant)
#   B06  interleaved transactions: change LSNs not monotonic (pgoutput variant)
#   B08  several changes at one LSN; crash mid-transaction; resume
#   B10  snapshot -> stream transition: a transaction that began before the
#        slot's consistent point and committed after it (worker path)
#   B16  the slot goes backwards and the source re-sends applied transactions
#   B18  the destination commit fails: nothing is confirmed to the source; a
#        transaction whose change LSN is below the saved position still applies
#   B19  a partly applied transaction is replayed in full
#   B20  a subtransaction abort inside a large transaction and an aborted
#        transaction: with protocol version 1 (the source decodes them at
#        commit) and with streaming (protocol version 2, STREAM_* messages)
#   B21  truncate in its own transaction (pgoutput variant)
#
# Replays "through the engine" rewind both the slot and the replication
# origin, so that the re-sent changes reach the apply engine (which reports
# them as duplicates); replays "through the worker" rewind only the slot and
# the worker discards what its progress already covers.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
# small, so that the large transaction of B20 spills to disk on the source
$source->append_conf('postgresql.conf', "logical_decoding_work_mem = 64kB\n");
$source->restart;
my $dest = new_dest('dest');

# One scenario's tables on both sides, its publication pub_<name>, outbox
# mappings for source_name <name>, and rows that exist before the
# subscription (they arrive through the initial copy, as snapshot rows).
sub scenario_setup
{
	my (%a) = @_;
	my $name = $a{name};
	$source->safe_psql('postgres',
		$a{ddl} . ($a{source_ddl} // '') . "CREATE PUBLICATION pub_$name FOR TABLE " . join(', ', @{ $a{tables} }) . ";\n"
		  . ($a{initial} // ''));
	$dest->safe_psql('postgres',
		$a{ddl} . join('', map { "SELECT cdc.register_mapping('$_', outbox => true, source_name => '$name');\n" } @{ $a{outbox} // $a{tables} }));
}

sub start_subscription
{
	my ($name) = @_;
	create_subscription($dest, $source, $name, ["pub_$name"]);
	ok(wait_caught_up($source, $dest, $name), "$name: subscription streaming");
}

sub end_subscription
{
	my ($name) = @_;
	$dest->safe_psql('postgres', "SELECT cdc.drop_subscription('$name', drop_slot => true)");
}

# "ops in outbox order|distinct idempotency keys" of one target.
sub outbox_of
{
	my ($table) = @_;
	return $dest->safe_psql('postgres',
		"SELECT coalesce(string_agg(op, '' ORDER BY id), '') || '|' || count(DISTINCT idempotency_key) FROM cdc.outbox WHERE target = '$table'::regclass");
}

sub rows_of
{
	my ($query) = @_;
	return $dest->safe_psql('postgres', $query);
}

# The version the worker gives the change at position $pos of the source
# transaction committed at $commit_lsn: {epoch 0, commit LSN, position, 0}.
# The worker's version of a change: {epoch 0, commit LSN, position, 0}, the
# position being the change's WAL position (its LSN as probe_read shows it)
# plus its ordinal among the rows of one multi-insert record
# (docs/worker.md, "Positions and delivery keys").
sub version_of
{
	my ($commit_lsn, $change_lsn, $ordinal) = @_;
	$ordinal //= 0;
	return $dest->safe_psql('postgres',
		"SELECT ARRAY[0, ('$commit_lsn'::pg_lsn - '0/0')::bigint, ('$change_lsn'::pg_lsn - '0/0')::bigint + $ordinal, 0]::bigint[]::text");
}

sub applied_lsn
{
	my ($name) = @_;
	return status_row($dest, $name, 'applied_lsn');
}

# Rewinds the slot (and with $origin_lsn the replication origin too) to a
# point saved earlier with slot_save($source, $name, "${name}_saved").
sub rewind
{
	my ($name, $origin_lsn) = @_;
	disable_and_wait($source, $dest, $name);
	slot_restore($source, $name, "${name}_saved");
	origin_rewind($dest, $name, $origin_lsn) if defined $origin_lsn;
}

sub duplicates_of
{
	my ($table) = @_;
	return $dest->safe_psql('postgres', "SELECT coalesce((SELECT duplicate FROM cdc.stats WHERE target = '$table'::regclass), 0)");
}

# ---------------------------------------------------------------------------
# B03: key-only delete under REPLICA IDENTITY DEFAULT
# ---------------------------------------------------------------------------
{
	scenario_setup(name => 'b03', ddl => 'CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL);',
		tables => ['items']);
	start_subscription('b03');
	probe_create($source, 'probe03');
	slot_save($source, 'b03', 'b03_saved');
	my $saved = applied_lsn('b03');
	$source->safe_psql('postgres', q{
INSERT INTO items VALUES (7, 'bolt', 5);
UPDATE items SET qty = 4 WHERE id = 7;
DELETE FROM items WHERE id = 7;
});
	my $tx = probe_read($source, 'probe03', 'pub_b03');
	is(scalar(@$tx), 3, 'B03: three source transactions');
	ok(wait_applied($dest, 'b03', $tx->[2]{end_lsn}), 'B03: progress = end LSN of the delete');
	is(rows_of('SELECT count(*) FROM items WHERE id = 7'), '0', 'B03: no row 7');
	is(rows_of(q{SELECT entity_key::text || ' ' || version::text FROM cdc.tombstones WHERE target = 'items'::regclass}),
		'{"id": "7"} ' . version_of($tx->[2]{commit_lsn}, $tx->[2]{changes}[0][1]), 'B03: tombstone 7 at the delete\'s version (key columns only)');
	is(outbox_of('items'), 'cud|3', 'B03: outbox 3');
	is(status_row($dest, 'b03', q{state || '|' || retry_count || '|' || coalesce(last_error, '')}), 'streaming|0|',
		'B03: no error (no NOT NULL violation from the key-only old tuple)');

	# replay of all three (the late create included) through the engine
	rewind('b03', $saved);
	enable_subscription($dest, 'b03');
	ok(wait_applied($dest, 'b03', $tx->[2]{end_lsn}), 'B03 replay: progress back at the delete');
	is(duplicates_of('items'), '3', 'B03 replay: the engine saw all three again, as duplicates');
	is(rows_of('SELECT count(*) FROM items'), '0', 'B03 replay: the late create did not resurrect row 7');
	is(outbox_of('items'), 'cud|3', 'B03 replay: outbox still 3');
	end_subscription('b03');
	probe_drop($source, 'probe03');
}

# ---------------------------------------------------------------------------
# B06: interleaved transactions; change LSNs are not monotonic
# ---------------------------------------------------------------------------
{
	scenario_setup(name => 'b06', ddl => 'CREATE TABLE t06 (id int PRIMARY KEY, v text);', tables => ['t06'],
		initial => q{INSERT INTO t06 VALUES (1, 'a1'), (3, 'c1');});
	start_subscription('b06');
	probe_create($source, 'probe06');
	slot_save($source, 'b06', 'b06_saved');
	my $saved = applied_lsn('b06');
	my $a = $source->background_psql('postgres');
	$a->query_safe('BEGIN');
	$a->query_safe(q{UPDATE t06 SET v = 'a2' WHERE id = 1});          # tx A, first change
	$source->safe_psql('postgres', q{INSERT INTO t06 VALUES (2, 'b')}); # tx B commits first
	$a->query_safe(q{UPDATE t06 SET v = 'c2' WHERE id = 3});
	$a->query_safe('COMMIT');
	$a->quit;
	my $tx = probe_read($source, 'probe06', 'pub_b06');
	is(join(',', map { scalar @{ $_->{changes} } } @$tx), '1,2', 'B06: B (one insert) streams before A (two updates)');
	is($source->safe_psql('postgres', "SELECT '$tx->[1]{changes}[0][1]'::pg_lsn < '$tx->[0]{changes}[0][1]'::pg_lsn"), 't',
		'B06: A\'s first change LSN is below B\'s (change LSNs not monotonic)');
	ok(wait_applied($dest, 'b06', $tx->[1]{end_lsn}), 'B06: progress = A\'s end LSN');
	is(rows_of('SELECT id, v FROM t06 ORDER BY 1'), "1|a2\n2|b\n3|c2", 'B06: rows a2, b, c2');
	is(outbox_of('t06'), 'cuu|3', 'B06: outbox 3');

	rewind('b06', $saved);
	enable_subscription($dest, 'b06');
	ok(wait_applied($dest, 'b06', $tx->[1]{end_lsn}), 'B06 replay: progress back at A\'s end');
	is(duplicates_of('t06'), '3', 'B06 replay: three duplicates');
	is(rows_of('SELECT id, v FROM t06 ORDER BY 1'), "1|a2\n2|b\n3|c2", 'B06 replay: rows unchanged');
	is(outbox_of('t06'), 'cuu|3', 'B06 replay: outbox still 3');
	end_subscription('b06');
	probe_drop($source, 'probe06');
}

# ---------------------------------------------------------------------------
# B08: three inserts at one LSN (COPY); the worker dies after two of them
# ---------------------------------------------------------------------------
{
	scenario_setup(name => 'b08', ddl => 'CREATE TABLE t08 (a int PRIMARY KEY);', tables => ['t08']);
	start_subscription('b08');
	probe_create($source, 'probe08');
	disable_and_wait($source, $dest, 'b08');
	set_fault($dest, 'after_change:2');
	my $offset = -s $dest->logfile;
	enable_subscription($dest, 'b08');
	$source->safe_psql('postgres', "COPY t08 (a) FROM STDIN;\n1\n2\n3\n\\.\n");
	$offset = $dest->wait_for_log(qr/fault point after_change:2 reached/, $offset);
	my $tx = probe_read($source, 'probe08', 'pub_b08');
	is(scalar(@{ $tx->[0]{changes} }), 3, 'B08: one transaction of three inserts');
	is(join(',', map { $_->[1] } @{ $tx->[0]{changes} }), join(',', ($tx->[0]{changes}[0][1]) x 3),
		'B08: the three inserts share one LSN');
	# the crash happened with a=1 and a=2 applied and uncommitted; the worker
	# is restarted and crashes at the same point again until the fault is off
	$dest->wait_for_log(qr/fault point after_change:2 reached/, $offset);
	is(rows_of('SELECT count(*) FROM t08'), '0', 'B08: nothing of the interrupted transaction is committed');
	isnt(applied_lsn('b08'), $tx->[0]{end_lsn}, 'B08: progress did not move');
	set_fault($dest, undef);
	$source->safe_psql('postgres', 'INSERT INTO t08 VALUES (4)');
	$tx = probe_read($source, 'probe08', 'pub_b08');
	ok(wait_applied($dest, 'b08', $tx->[1]{end_lsn}), 'B08: progress = end LSN of the next transaction');
	is(rows_of('SELECT string_agg(a::text, \',\' ORDER BY a) FROM t08'), '1,2,3,4', 'B08: rows 1..4');
	is(outbox_of('t08'), 'cccc|4', 'B08: outbox 4, exactly once each');
	# the rows of the one record: its LSN plus their ordinal 0, 1, 2
	is(rows_of(q{SELECT string_agg(version::text, ' ' ORDER BY id) FROM cdc.outbox WHERE target = 't08'::regclass AND (payload->>'a')::int <= 3}),
		join(' ', map { version_of($tx->[0]{commit_lsn}, $tx->[0]{changes}[0][1], $_) } 0 .. 2),
		'B08: the three rows at one LSN: positions LSN, LSN + 1, LSN + 2');
	end_subscription('b08');
	probe_drop($source, 'probe08');
}

# ---------------------------------------------------------------------------
# B10: a transaction that began before the slot's consistent point S and
# committed after it.  The slot is created while transactions run: T0 makes
# the slot wait (building snapshot), T1 is running when the snapshot becomes
# full (committed before S: its row is in the copy), T2 starts after that,
# updates id=3 (change LSN < S) and commits after S.
# ---------------------------------------------------------------------------
{
	scenario_setup(name => 'b10', ddl => 'CREATE TABLE t10 (id int PRIMARY KEY, v text);', tables => ['t10'],
		source_ddl => 'CREATE TABLE t10_side (x int);', initial => q{INSERT INTO t10 VALUES (1, 'x1'), (3, 'z0');});
	probe_create($source, 'probe10');
	my $t0 = $source->background_psql('postgres');
	$t0->query_safe('BEGIN');
	$t0->query_safe('INSERT INTO t10_side VALUES (0)');
	my $t0_xid = $t0->query_safe('SELECT pg_current_xact_id()');
	my $offset = -s $dest->logfile;
	create_subscription($dest, $source, 'b10', ['pub_b10']);
	my $slot_waits_for = sub {
		my ($xid) = @_;
		return $source->poll_query_until('postgres', qq{
			SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			                WHERE a.backend_type = 'walsender' AND l.locktype = 'transactionid'
			                  AND NOT l.granted AND l.transactionid::text = '$xid')});
	};
	ok($slot_waits_for->($t0_xid), 'B10: slot creation waits for T0');
	my $t1 = $source->background_psql('postgres');
	$t1->query_safe('BEGIN');
	$t1->query_safe(q{INSERT INTO t10 VALUES (2, 'y1')});
	my $t1_xid = $t1->query_safe('SELECT pg_current_xact_id()');
	$t0->query_safe('COMMIT');
	ok($slot_waits_for->($t1_xid), 'B10: then for T1 (full snapshot reached)');
	my $t2 = $source->background_psql('postgres');
	$t2->query_safe('BEGIN');
	$t2->query_safe(q{UPDATE t10 SET v = 'z1' WHERE id = 3});
	$t1->query_safe('COMMIT');
	$dest->wait_for_log(qr/subscription "b10": slot b10 ready at/, $offset);
	my ($s) = slurp_file($dest->logfile, $offset) =~ m{subscription "b10": slot b10 ready at ([0-9A-F]+/[0-9A-F]+)};
	ok(wait_status($dest, 'b10', q{state = 'streaming'}), 'B10: copy done, streaming');
	is(rows_of('SELECT id, v FROM t10 ORDER BY 1'), "1|x1\n2|y1\n3|z0", 'B10: the copy saw T1, not T2');
	$source->safe_psql('postgres', q{UPDATE t10 SET v = 'x2' WHERE id = 1});   # d5, after S
	$t2->query_safe('COMMIT');                                                  # d6
	$t0->quit;
	$t1->quit;
	$t2->quit;
	my @tx = grep { $source->safe_psql('postgres', "SELECT '$_->{commit_lsn}'::pg_lsn > '$s'") eq 't' } @{ probe_read($source, 'probe10', 'pub_b10') };
	is(scalar(@tx), 2, "B10: two transactions committed after S = $s");
	is($source->safe_psql('postgres', "SELECT '$tx[1]{changes}[0][1]'::pg_lsn < '$s'"), 't',
		'B10: T2\'s change LSN is below S (the interleaving trap)');
	ok(wait_applied($dest, 'b10', $tx[1]{end_lsn}), 'B10: progress = end LSN of T2');
	is(rows_of('SELECT id, v FROM t10 ORDER BY 1'), "1|x2\n2|y1\n3|z1", 'B10: x2, y1, z1');
	is(outbox_of('t10'), 'uu|2', 'B10: outbox 2 (d5, d6); snapshot rows none');
	is(rows_of(q{SELECT snapshot_rows FROM cdc.stats WHERE target = 't10'::regclass}), '3', 'B10: three snapshot rows');
	end_subscription('b10');
	probe_drop($source, 'probe10');
}

# ---------------------------------------------------------------------------
# B16: the slot goes backwards after a source crash; the source re-sends
# transactions the destination has committed
# ---------------------------------------------------------------------------
{
	scenario_setup(name => 'b16', ddl => 'CREATE TABLE acct (id int PRIMARY KEY, bal int);', tables => ['acct']);
	start_subscription('b16');
	probe_create($source, 'probe16');
	slot_save($source, 'b16', 'b16_saved');
	$source->safe_psql('postgres', 'INSERT INTO acct VALUES (1, 100)');        # xid 1800
	$source->safe_psql('postgres', 'UPDATE acct SET bal = 90 WHERE id = 1');   # xid 1801
	my $tx = probe_read($source, 'probe16', 'pub_b16');
	ok(wait_applied($dest, 'b16', $tx->[1]{end_lsn}), 'B16: both applied');
	ok($source->poll_query_until('postgres', "SELECT confirmed_flush_lsn >= '$tx->[1]{end_lsn}' FROM pg_replication_slots WHERE slot_name = 'b16'"),
		'B16: the source confirmed both');
	# the source crashes before a checkpoint and its slot comes back at the
	# earlier position (made deterministic with the saved copy)
	rewind('b16');
	$source->stop('immediate');
	$source->start;
	is($source->safe_psql('postgres', "SELECT confirmed_flush_lsn < '$tx->[0]{commit_lsn}' FROM pg_replication_slots WHERE slot_name = 'b16'"),
		't', 'B16: the slot went back before both transactions');
	# the source streams from the slot's position (fault point request_from_slot
	# asks from 0/0): it re-sends both, and the worker discards them
	set_fault($dest, 'request_from_slot');
	my $offset = -s $dest->logfile;
	enable_subscription($dest, 'b16');
	$dest->wait_for_log(qr/source transaction $tx->[0]{xid} committed at $tx->[0]{commit_lsn} is already applied/, $offset);
	ok(1, 'B16: the source re-sent the first transaction and the worker recognised it');
	$source->safe_psql('postgres', 'UPDATE acct SET bal = 80 WHERE id = 1');    # xid 1802
	$tx = probe_read($source, 'probe16', 'pub_b16');
	ok(wait_applied($dest, 'b16', $tx->[2]{end_lsn}), 'B16: progress = end LSN of xid 1802');
	like(slurp_file($dest->logfile, $offset), qr/discarded 2 re-sent source transactions/, 'B16: both re-sent transactions discarded');
	is(rows_of('SELECT id, bal FROM acct'), '1|80', 'B16: bal = 80');
	is(outbox_of('acct'), 'cuu|3', 'B16: outbox 3');
	is(duplicates_of('acct'), '0', 'B16: the re-sent transactions never reached the engine');

	# by default the worker asks from its replication origin's progress, so a
	# slot that went back re-sends nothing at all
	disable_and_wait($source, $dest, 'b16');
	set_fault($dest, undef);
	enable_subscription($dest, 'b16');
	ok(wait_status($dest, 'b16', q{state = 'streaming'}), 'B16: streaming again');
	slot_save($source, 'b16', 'b16_saved');
	$source->safe_psql('postgres', 'UPDATE acct SET bal = 70 WHERE id = 1');
	$tx = probe_read($source, 'probe16', 'pub_b16');
	ok(wait_applied($dest, 'b16', $tx->[3]{end_lsn}), 'B16: one more transaction applied');
	ok($source->poll_query_until('postgres', "SELECT confirmed_flush_lsn >= '$tx->[3]{end_lsn}' FROM pg_replication_slots WHERE slot_name = 'b16'"),
		'B16: and confirmed');
	rewind('b16');
	$offset = -s $dest->logfile;
	enable_subscription($dest, 'b16');
	$source->safe_psql('postgres', 'UPDATE acct SET bal = 60 WHERE id = 1');
	$tx = probe_read($source, 'probe16', 'pub_b16');
	ok(wait_applied($dest, 'b16', $tx->[4]{end_lsn}), 'B16 default: the next transaction applied');
	unlike(slurp_file($dest->logfile, $offset), qr/already applied/, 'B16 default: asked from the origin\'s progress, nothing re-sent');
	is(rows_of('SELECT id, bal FROM acct'), '1|60', 'B16 default: bal = 60');
	is(outbox_of('acct'), 'cuuuu|5', 'B16 default: one outbox row per source transaction');
	is(duplicates_of('acct'), '0', 'B16 default: no duplicates reached the engine');
	end_subscription('b16');
	probe_drop($source, 'probe16');
}

# ---------------------------------------------------------------------------
# B18: the destination commit of xid 2001 fails; nothing of it may be
# confirmed to the source.  xid 2002 began before 2001 (change LSN below the
# saved position) and commits after it: it must still be applied.
# ---------------------------------------------------------------------------
{
	scenario_setup(name => 'b18', ddl => 'CREATE TABLE t18 (id int PRIMARY KEY); CREATE TABLE t18_other (id int PRIMARY KEY);',
		tables => [ 't18', 't18_other' ]);
	start_subscription('b18');
	probe_create($source, 'probe18');
	$source->safe_psql('postgres', 'INSERT INTO t18_other VALUES (1)');   # xid 2000
	my $tx = probe_read($source, 'probe18', 'pub_b18');
	ok(wait_applied($dest, 'b18', $tx->[0]{end_lsn}), 'B18: progress = end of xid 2000');
	my $a = $source->background_psql('postgres');
	$a->query_safe('BEGIN');
	$a->query_safe('INSERT INTO t18 VALUES (11)');                        # xid 2002, first change
	disable_and_wait($source, $dest, 'b18');
	set_fault($dest, 'before_commit');
	my $offset = -s $dest->logfile;
	enable_subscription($dest, 'b18');
	$source->safe_psql('postgres', 'INSERT INTO t18 VALUES (10)');        # xid 2001
	$offset = $dest->wait_for_log(qr/fault point before_commit reached/, $offset);
	# retried by a new worker, which fails the same way
	$dest->wait_for_log(qr/fault point before_commit reached/, $offset);
	$tx = probe_read($source, 'probe18', 'pub_b18');
	is(scalar(@$tx), 2, 'B18: xid 2001 committed on the source');
	is($source->safe_psql('postgres', "SELECT confirmed_flush_lsn <= '$tx->[1]{commit_lsn}' FROM pg_replication_slots WHERE slot_name = 'b18'"),
		't', 'B18: after the failed commits the slot never confirmed xid 2001');
	is(status_row($dest, 'b18', "applied_lsn = '$tx->[0]{end_lsn}' AND coalesce(flushed_lsn < '$tx->[1]{end_lsn}', true)"), 't',
		'B18: progress still at the end of xid 2000; nothing beyond it reported flushed');
	is(rows_of('SELECT count(*) FROM t18'), '0', 'B18: nothing of xid 2001 committed');
	set_fault($dest, undef);
	$a->query_safe('COMMIT');                                             # xid 2002 commits after 2001
	$a->quit;
	$tx = probe_read($source, 'probe18', 'pub_b18');
	is($source->safe_psql('postgres', "SELECT '$tx->[2]{changes}[0][1]'::pg_lsn < '$tx->[1]{end_lsn}'"), 't',
		'B18: xid 2002\'s change LSN is below the position saved after xid 2001');
	ok(wait_applied($dest, 'b18', $tx->[2]{end_lsn}), 'B18: progress = end of xid 2002');
	is(rows_of('SELECT string_agg(id::text, \',\' ORDER BY id) FROM t18'), '10,11', 'B18: rows 10 and 11');
	is(outbox_of('t18'), 'cc|2', 'B18: outbox 2');
	ok($source->poll_query_until('postgres', "SELECT confirmed_flush_lsn >= '$tx->[2]{end_lsn}' FROM pg_replication_slots WHERE slot_name = 'b18'"),
		'B18: confirmed once durable here');
	end_subscription('b18');
	probe_drop($source, 'probe18');
}

# ---------------------------------------------------------------------------
# B18, the destination commit itself fails (a deferred constraint trigger
# raises at commit): the transaction must stay unapplied and unconfirmed, the
# status must name it, and it applies once the cause is removed.
# ---------------------------------------------------------------------------
{
	scenario_setup(name => 'b18c', ddl => 'CREATE TABLE t18c (id int PRIMARY KEY, v text);', tables => ['t18c']);
	$dest->safe_psql('postgres', q{
CREATE FUNCTION t18c_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.v = 'bad' THEN RAISE EXCEPTION 'row % refused at commit', NEW.id; END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER t18c_check AFTER INSERT OR UPDATE ON t18c DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION t18c_check();
ALTER TABLE t18c ENABLE ALWAYS TRIGGER t18c_check;
});
	start_subscription('b18c');
	probe_create($source, 'probe18c');
	$source->safe_psql('postgres', q{INSERT INTO t18c VALUES (1, 'fine')});
	$source->safe_psql('postgres', q{INSERT INTO t18c VALUES (2, 'bad')});
	$source->safe_psql('postgres', q{INSERT INTO t18c VALUES (3, 'after')});
	my $tx = probe_read($source, 'probe18c', 'pub_b18c');
	ok(wait_status($dest, 'b18c', q{state = 'error' AND last_error LIKE '%refused at commit%' AND retry_count >= 2}),
		'B18 commit error: state error, retried');
	is(status_row($dest, 'b18c', 'last_error_lsn'), $tx->[1]{commit_lsn}, 'B18 commit error: last_error_lsn names the failing transaction');
	is(applied_lsn('b18c'), $tx->[0]{end_lsn}, 'B18 commit error: progress stays at the end of the transaction before it');
	is($source->safe_psql('postgres', "SELECT confirmed_flush_lsn <= '$tx->[1]{commit_lsn}' FROM pg_replication_slots WHERE slot_name = 'b18c'"),
		't', 'B18 commit error: the source never confirmed it');
	is(rows_of('SELECT string_agg(id::text, \',\' ORDER BY id) FROM t18c'), '1', 'B18 commit error: only the row before it');
	$dest->safe_psql('postgres', 'DROP TRIGGER t18c_check ON t18c');
	ok(wait_applied($dest, 'b18c', $tx->[2]{end_lsn}), 'B18 commit error: applies once the trigger is gone');
	is(rows_of('SELECT string_agg(id || v, \',\' ORDER BY id) FROM t18c'), '1fine,2bad,3after', 'B18 commit error: all rows');
	is(outbox_of('t18c'), 'ccc|3', 'B18 commit error: outbox 3');
	end_subscription('b18c');
	probe_drop($source, 'probe18c');
}

# ---------------------------------------------------------------------------
# B19: a six-change transaction; the worker dies after four changes; the
# source replays it in full
# ---------------------------------------------------------------------------
{
	scenario_setup(name => 'b19', ddl => 'CREATE TABLE t19 (id int PRIMARY KEY, v text);', tables => ['t19']);
	start_subscription('b19');
	probe_create($source, 'probe19');
	disable_and_wait($source, $dest, 'b19');
	set_fault($dest, 'after_change:4');
	my $offset = -s $dest->logfile;
	enable_subscription($dest, 'b19');
	$source->safe_psql('postgres', q{
BEGIN;
INSERT INTO t19 VALUES (21);
INSERT INTO t19 VALUES (22);
INSERT INTO t19 VALUES (23);
INSERT INTO t19 VALUES (24);
UPDATE t19 SET v = 'x' WHERE id = 21;
DELETE FROM t19 WHERE id = 22;
COMMIT;
});
	$offset = $dest->wait_for_log(qr/fault point after_change:4 reached/, $offset);
	$dest->wait_for_log(qr/fault point after_change:4 reached/, $offset);
	is(rows_of('SELECT count(*) FROM t19'), '0', 'B19: the four executed changes were rolled back');
	set_fault($dest, undef);
	my $tx = probe_read($source, 'probe19', 'pub_b19');
	is(join('', map { $_->[0] } @{ $tx->[0]{changes} }), 'IIIIUD', 'B19: one transaction of six changes');
	ok(wait_applied($dest, 'b19', $tx->[0]{end_lsn}), 'B19: progress = its end LSN');
	is(rows_of('SELECT id, v FROM t19 ORDER BY 1'), "21|x\n23|\n24|", 'B19: rows 21 (x), 23, 24');
	is(rows_of(q{SELECT entity_key::text || ' ' || version::text FROM cdc.tombstones WHERE target = 't19'::regclass}),
		'{"id": "22"} ' . version_of($tx->[0]{commit_lsn}, $tx->[0]{changes}[5][1]), 'B19: tombstone 22 at the delete\'s version');
	is(outbox_of('t19'), 'ccccud|6', 'B19: outbox 6');
	is(status_row($dest, 'b19', q{state || '|' || coalesce(last_error, '')}), 'streaming|', 'B19: no duplicate-key error');
	end_subscription('b19');
	probe_drop($source, 'probe19');
}

# ---------------------------------------------------------------------------
# B20 under protocol version 1: a large transaction (spilled to disk on the
# source) with a rolled-back savepoint, a destination crash while it is still
# open on the source, and an aborted transaction.  Version 1 sends a
# transaction only at its commit, with aborted subtransactions removed; in
# -progress streaming (protocol version 2) is not implemented.
# ---------------------------------------------------------------------------
{
	scenario_setup(name => 'b20', ddl => 'CREATE TABLE t20 (id int PRIMARY KEY); CREATE TABLE t20_bulk (id int PRIMARY KEY, pad text);',
		tables => [ 't20', 't20_bulk' ], outbox => ['t20']);
	start_subscription('b20');
	probe_create($source, 'probe20');
	my $a = $source->background_psql('postgres');
	$a->query_safe('BEGIN');
	$a->query_safe('INSERT INTO t20 VALUES (31)');
	$a->query_safe('INSERT INTO t20 VALUES (32)');
	$a->query_safe(q{INSERT INTO t20_bulk SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g});
	$a->query_safe('SAVEPOINT s');
	$a->query_safe('INSERT INTO t20 VALUES (33)');
	$a->query_safe('INSERT INTO t20 VALUES (34)');
	$a->query_safe('ROLLBACK TO SAVEPOINT s');
	$a->query_safe('INSERT INTO t20 VALUES (35)');
	is(rows_of('SELECT count(*) FROM t20'), '0', 'B20: nothing of the open transaction is visible');
	$dest->stop('immediate');
	$dest->start;
	$a->query_safe('COMMIT');
	$a->quit;
	$source->safe_psql('postgres', 'BEGIN; INSERT INTO t20 VALUES (41); ROLLBACK;');
	my $tx = probe_read($source, 'probe20', 'pub_b20');
	is(scalar(@$tx), 1, 'B20: the aborted transaction is never sent');
	is(scalar(@{ $tx->[0]{changes} }), 2003, 'B20: the committed one without its rolled-back savepoint');
	ok($source->poll_query_until('postgres', q{SELECT spill_txns > 0 FROM pg_stat_replication_slots WHERE slot_name = 'probe20'}),
		'B20: the source spilled the large transaction to disk while decoding it');
	ok(wait_applied($dest, 'b20', $tx->[0]{end_lsn}), 'B20: progress = its end LSN');
	is(rows_of('SELECT string_agg(id::text, \',\' ORDER BY id) FROM t20'), '31,32,35', 'B20: rows 31, 32, 35');
	is(rows_of('SELECT count(*) FROM t20_bulk'), '2000', 'B20: and the bulk rows');
	is(outbox_of('t20'), 'ccc|3', 'B20: outbox 3');
	end_subscription('b20');
	probe_drop($source, 'probe20');
}

# ---------------------------------------------------------------------------
# B20 with streaming (cdc.streaming = on, protocol version 2): the source
# sends the large transaction in chunks while it runs; a rolled-back
# savepoint arrives as STREAM ABORT of the subtransaction; the destination
# crashes between chunks and the commit (the source streams it again); an
# aborted transaction arrives as STREAM ABORT of the transaction.  Nothing of
# a streamed transaction may be visible before its STREAM COMMIT.
# ---------------------------------------------------------------------------
{
	scenario_setup(name => 'b20s', ddl => 'CREATE TABLE t20s (id int PRIMARY KEY); CREATE TABLE t20s_bulk (id int PRIMARY KEY, pad text);',
		tables => [ 't20s', 't20s_bulk' ], outbox => ['t20s']);
	$dest->safe_psql('postgres', 'ALTER SYSTEM SET cdc.streaming = on');
	$dest->reload;
	start_subscription('b20s');
	probe_create($source, 'probe20s');
	my $streamed = sub {
		my ($what, $n) = @_;
		return $source->poll_query_until('postgres',
			"SELECT $what >= $n FROM pg_stat_replication_slots WHERE slot_name = 'b20s'");
	};
	my $offset = -s $dest->logfile;
	my $a = $source->background_psql('postgres');
	$a->query_safe('BEGIN');
	$a->query_safe('INSERT INTO t20s VALUES (31)');
	$a->query_safe('INSERT INTO t20s VALUES (32)');
	$a->query_safe(q{INSERT INTO t20s_bulk SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g});
	ok($streamed->('stream_txns', 1), 'B20 streaming: the source streams the transaction while it runs');
	$a->query_safe('SAVEPOINT s');
	$a->query_safe('INSERT INTO t20s VALUES (33)');
	$a->query_safe('INSERT INTO t20s VALUES (34)');
	$a->query_safe(q{INSERT INTO t20s_bulk SELECT g, repeat('y', 200) FROM generate_series(2001, 4000) g});
	$a->query_safe('ROLLBACK TO SAVEPOINT s');
	$a->query_safe('INSERT INTO t20s VALUES (35)');
	$a->query_safe(q{INSERT INTO t20s_bulk SELECT g, repeat('z', 200) FROM generate_series(4001, 5000) g});
	ok($streamed->('stream_count', 3), 'B20 streaming: in several chunks');
	$dest->wait_for_log(qr/streamed subtransaction \d+ of transaction \d+ aborted/, $offset);
	ok(1, 'B20 streaming: the rolled-back savepoint arrived as STREAM ABORT of the subtransaction');
	is(rows_of('SELECT (SELECT count(*) FROM t20s) + (SELECT count(*) FROM t20s_bulk)'), '0',
		'B20 streaming: nothing of the open transaction is visible');
	# crash between the chunks and the commit
	$dest->stop('immediate');
	$dest->start;
	$a->query_safe('COMMIT');
	$a->quit;
	$offset = -s $dest->logfile;
	$source->safe_psql('postgres', q{BEGIN; INSERT INTO t20s VALUES (41);
INSERT INTO t20s_bulk SELECT g, repeat('w', 200) FROM generate_series(10001, 12000) g; ROLLBACK;});
	$dest->wait_for_log(qr/streamed transaction \d+ aborted/, $offset);
	ok(1, 'B20 streaming: the aborted transaction arrived as STREAM ABORT of the transaction');
	my $tx = probe_read($source, 'probe20s', 'pub_b20s');
	is(scalar(@$tx), 1, 'B20 streaming: one committed transaction');
	ok(wait_applied($dest, 'b20s', $tx->[0]{end_lsn}), 'B20 streaming: progress = its end LSN');
	is(rows_of('SELECT string_agg(id::text, \',\' ORDER BY id) FROM t20s'), '31,32,35', 'B20 streaming: rows 31, 32, 35');
	is(rows_of('SELECT count(*) || \'|\' || min(id) || \'|\' || max(id) || \'|\' || count(*) FILTER (WHERE pad LIKE \'y%\') FROM t20s_bulk'),
		'3000|1|5000|0', 'B20 streaming: the bulk rows outside the rolled-back savepoint');
	is(outbox_of('t20s'), 'ccc|3', 'B20 streaming: outbox 3');
	is(status_row($dest, 'b20s', q{state || '|' || retry_count}), 'streaming|0', 'B20 streaming: no error');
	end_subscription('b20s');
	probe_drop($source, 'probe20s');
	$dest->safe_psql('postgres', 'ALTER SYSTEM RESET cdc.streaming');
	$dest->reload;
}

# ---------------------------------------------------------------------------
# B21: truncate in its own transaction, then a replay of everything
# ---------------------------------------------------------------------------
{
	scenario_setup(name => 'b21', ddl => 'CREATE TABLE log (id int PRIMARY KEY, msg text);', tables => ['log']);
	start_subscription('b21');
	probe_create($source, 'probe21');
	slot_save($source, 'b21', 'b21_saved');
	my $saved = applied_lsn('b21');
	$source->safe_psql('postgres', q{
INSERT INTO log VALUES (1, 'a');
INSERT INTO log VALUES (2, 'b');
TRUNCATE log;
INSERT INTO log VALUES (3, 'c');
});
	my $tx = probe_read($source, 'probe21', 'pub_b21');
	is(join(',', map { $_->{changes}[0][0] } @$tx), 'I,I,T,I', 'B21: four transactions, the truncate on its own');
	ok(wait_applied($dest, 'b21', $tx->[3]{end_lsn}), 'B21: progress = end of the last insert');
	is(rows_of('SELECT id, msg FROM log ORDER BY 1'), '3|c', 'B21: only id=3');
	is(outbox_of('log'), 'cctc|4', 'B21: outbox 4');

	rewind('b21', $saved);
	enable_subscription($dest, 'b21');
	ok(wait_applied($dest, 'b21', $tx->[3]{end_lsn}), 'B21 replay: progress back at the end');
	is(duplicates_of('log'), '4', 'B21 replay: the pre-truncate inserts and the truncate came again, as duplicates');
	is(rows_of('SELECT id, msg FROM log ORDER BY 1'), '3|c', 'B21 replay: the truncate did not wipe id=3, id=1 not resurrected');
	is(outbox_of('log'), 'cctc|4', 'B21 replay: outbox still 4');
	end_subscription('b21');
	probe_drop($source, 'probe21');
}

$dest->stop;
$source->stop;
done_testing();

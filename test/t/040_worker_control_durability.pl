# Control state is durable before anything depends on it (issue 12 item 6;
# docs/worker.md, "Control state is durable").
#
# The destination's WAL writer is frozen (SIGSTOP) before each transition,
# and nothing else flushes WAL (autovacuum, the bgwriter's writes, timed
# checkpoints and the launcher's pruning are off): an asynchronous commit
# then stays in the WAL buffers, and the immediate shutdown that follows
# (crash_frozen) loses it for sure.  A transition that is durable survives.
#
#   1. the initial copy is marked done (pause_after:copy_done), the
#      destination crashes, a row is committed on the source meanwhile: it
#      must arrive streamed (one outbox row), not copied again with a new
#      slot (the B20 failure of a fresh-clone CI run), three times;
#   2. an explicit skip is performed (pause_after:skip) and the destination
#      crashes: skipped exactly once, the next transaction applied once;
#   3. the SQL control functions, called with synchronous_commit = off,
#      each followed by a crash: create, disable, enable, alter (epoch),
#      skip, accept_gap, drop — every one survives;
#   4. history rows and handler calls: crashes right after group commits
#      (pause_after:commit), repeatedly: one history row and one handler
#      call per source change, no more, no fewer.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest', qq{
autovacuum = off
bgwriter_lru_maxpages = 0
checkpoint_timeout = 1h
cdc.prune_interval = 0
cdc.max_workers = 8
});

sub dq { return $dest->safe_psql('postgres', $_[0]); }

# Resets the fault point for the next start (ALTER SYSTEM writes no WAL),
# crashes the destination with its WAL writer frozen, starts it again.
sub crash_and_restart
{
	my ($wpid) = @_;
	dq('ALTER SYSTEM RESET cdc.debug_fault');
	crash_frozen($dest, $wpid);
	$dest->start;
}

# ---------------------------------------------------------------------------
# 1. The copy-done transition, three times
# ---------------------------------------------------------------------------
for my $i (1 .. 3) {
	my $t = "cd$i";
	$source->safe_psql('postgres', "CREATE TABLE $t (id int PRIMARY KEY, v text); INSERT INTO $t VALUES (1, 'copied');"
		  . "CREATE PUBLICATION pub_$t FOR TABLE $t;");
	dq("CREATE TABLE $t (id int PRIMARY KEY, v text); SELECT cdc.register_mapping('$t', outbox => true, source_name => '$t');");
	set_fault($dest, 'pause_after:copy_done');
	my $wpid = freeze_walwriter($dest);
	my $off = -s $dest->logfile;
	create_subscription($dest, $source, $t, ["pub_$t"]);
	ok(wait_for_log($dest, qr/fault point pause_after:copy_done reached/, $off), "$t: the copy is marked done");
	# committed on the source after the slot's consistent point, while the destination is down
	$source->safe_psql('postgres', "INSERT INTO $t VALUES (2, 'streamed')");
	crash_and_restart($wpid);
	my $restarted = -s $dest->logfile;
	ok(wait_caught_up($source, $dest, $t), "$t: streaming after the crash");
	is(dq("SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM $t"), '1=copied,2=streamed', "$t: both rows");
	is(dq("SELECT coalesce(string_agg(op, ''), '') || '|' || count(*) FROM cdc.outbox WHERE target = '$t'::regclass"), 'c|1',
		"$t: row 2 was streamed (one outbox row), not copied again");
	is(dq("SELECT version[3] > 0 FROM cdc.entities WHERE target = '$t'::regclass AND entity_key->>'id' = '2'"), 't',
		"$t: row 2 has a streamed version");
	unlike(slurp_file($dest->logfile, $restarted), qr/dropping unfinished slot/, "$t: the slot was kept");
	is($source->safe_psql('postgres', "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$t'"), '1', "$t: one slot");
}

# ---------------------------------------------------------------------------
# 2. The worker's skip transition
# ---------------------------------------------------------------------------
{
	$source->safe_psql('postgres', 'CREATE TABLE sk (id int PRIMARY KEY, v int); CREATE PUBLICATION pub_sk FOR TABLE sk;');
	dq("CREATE TABLE sk (id int PRIMARY KEY, v int CHECK (v < 100)); SELECT cdc.register_mapping('sk', outbox => true, source_name => 'sk');");
	create_subscription($dest, $source, 'sk', ['pub_sk']);
	ok(wait_caught_up($source, $dest, 'sk'), 'skip: streaming');
	$source->safe_psql('postgres', 'INSERT INTO sk VALUES (1, 500)');
	ok(wait_status($dest, 'sk', q{state = 'error' AND last_error_lsn IS NOT NULL}), 'skip: the transaction fails');
	my $bad = status_row($dest, 'sk', 'last_error_lsn');
	set_fault($dest, 'pause_after:skip');
	my $off = -s $dest->logfile;
	my $wpid = freeze_walwriter($dest);
	dq("SELECT cdc.skip_transaction('sk', '$bad', 'violates the destination''s check')");
	ok(wait_for_log($dest, qr/fault point pause_after:skip reached/, $off), 'skip: performed');
	$source->safe_psql('postgres', 'INSERT INTO sk VALUES (2, 5)');
	crash_and_restart($wpid);
	ok(wait_caught_up($source, $dest, 'sk'), 'skip: streaming after the crash');
	is(dq('SELECT string_agg(id::text, \',\' ORDER BY id) FROM sk'), '2', 'skip: only row 2');
	is(dq(q{SELECT count(*) || '|' || count(skipped_at) FROM cdc.skipped_transactions WHERE name = 'sk'}), '1|1',
		'skip: requested once, performed once');
	is(dq(q{SELECT count(*) FROM cdc.outbox WHERE target = 'sk'::regclass}), '1', 'skip: one outbox row (row 2)');
}

# ---------------------------------------------------------------------------
# 3. SQL control functions called with synchronous_commit = off
# ---------------------------------------------------------------------------
sub sql_transition
{
	my ($sql, $check, $want, $label) = @_;
	my $wpid = freeze_walwriter($dest);
	dq("SET synchronous_commit = off; $sql");
	crash_and_restart($wpid);
	is(dq($check), $want, "$label survives a crash right after it");
}

{
	$source->safe_psql('postgres', 'CREATE TABLE ct (id int PRIMARY KEY); CREATE PUBLICATION pub_ct FOR TABLE ct;');
	dq('CREATE TABLE ct (id int PRIMARY KEY)');
	(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
	sql_transition("SELECT cdc.create_subscription('ct', '$conn', ARRAY['pub_ct'])",
		q{SELECT count(*) FROM cdc.subscription WHERE name = 'ct'}, '1', 'create_subscription');
	ok(wait_caught_up($source, $dest, 'ct'), 'ct: streaming');
	sql_transition(q{SELECT cdc.disable_subscription('ct')},
		q{SELECT enabled FROM cdc.subscription WHERE name = 'ct'}, 'f', 'disable_subscription');
	sql_transition(q{SELECT cdc.enable_subscription('ct')},
		q{SELECT enabled FROM cdc.subscription WHERE name = 'ct'}, 't', 'enable_subscription');
	sql_transition(q{SELECT cdc.alter_subscription('ct', source_epoch => 5)},
		q{SELECT source_epoch FROM cdc.subscription WHERE name = 'ct'}, '5', 'alter_subscription (epoch)');
	sql_transition(q{SELECT cdc.skip_transaction('ct', '7FFFFFFF/0', 'nothing there')},
		q{SELECT count(*) FROM cdc.skipped_transactions WHERE name = 'ct'}, '1', 'skip_transaction');
	ok(wait_caught_up($source, $dest, 'ct'), 'ct: streaming again');
	sql_transition(q{SELECT cdc.accept_gap('ct', 'a test')},
		q{SELECT count(*) FROM cdc.accepted_gaps WHERE name = 'ct'}, '1', 'accept_gap');
	sql_transition(q{SELECT cdc.drop_subscription('ct')},
		q{SELECT count(*) FROM cdc.subscription WHERE name = 'ct'}, '0', 'drop_subscription');
	$source->safe_psql('postgres', q{SELECT pg_drop_replication_slot('ct')});
}

# ---------------------------------------------------------------------------
# 4. History rows and handler calls across crashes after group commits
# ---------------------------------------------------------------------------
{
	$source->safe_psql('postgres', q{
CREATE TABLE hs (id int PRIMARY KEY, v int);
CREATE TABLE hd (id int PRIMARY KEY, v int);
CREATE PUBLICATION pub_hs FOR TABLE hs, hd;
});
	dq(q{
CREATE TABLE hs (id int PRIMARY KEY, v int);
SELECT cdc.create_history_table('hs_hist', 'hs');
SELECT cdc.register_mapping('hs_hist', source_schema => 'public', source_table => 'hs', key_columns => '{id}',
                            mode => 'history', source_name => 'hs');
CREATE TABLE hd (id int PRIMARY KEY, v int);
CREATE TABLE hd_calls (n bigserial PRIMARY KEY, op text, id int, v int);
-- the worker runs handlers with search_path = pg_catalog, pg_temp (docs/handlers.md): qualified
CREATE FUNCTION hd_handler(op text, old hd, new hd, meta jsonb) RETURNS void LANGUAGE sql AS $$
  INSERT INTO public.hd_calls (op, id, v) VALUES (op, coalesce(new.id, old.id), new.v)
$$;
SELECT cdc.register_mapping('hd', mode => 'handler', handler => 'hd_handler(text, hd, hd, jsonb)', source_name => 'hs');
});
	create_subscription($dest, $source, 'hs', ['pub_hs']);
	ok(wait_caught_up($source, $dest, 'hs'), 'modes: streaming');
	my $changes = 0;
	for my $round (1 .. 3) {
		set_fault($dest, 'pause_after:commit');
		my $wpid = freeze_walwriter($dest);
		my $off = -s $dest->logfile;
		for my $k (1 .. 5) {
			my $id = $round * 10 + $k;
			$source->safe_psql('postgres', "INSERT INTO hs VALUES ($id, 1); INSERT INTO hd VALUES ($id, 1);"
				  . "UPDATE hs SET v = 2 WHERE id = $id; UPDATE hd SET v = 2 WHERE id = $id;");
			$changes += 2;
		}
		ok(wait_for_log($dest, qr/fault point pause_after:commit reached/, $off), "modes round $round: a group committed");
		crash_and_restart($wpid);
		ok(wait_caught_up($source, $dest, 'hs'), "modes round $round: streaming after the crash");
	}
	is(dq('SELECT count(*) || \'|\' || count(DISTINCT (cdc_key, cdc_version)) FROM hs_hist'), "$changes|$changes",
		'modes: one history row per change');
	is(dq('SELECT count(*) || \'|\' || count(DISTINCT (op, id, v)) FROM hd_calls'), "$changes|$changes",
		'modes: one handler call per change');
	is(dq('SELECT count(*) || \'|\' || sum(v) FROM hd'), '15|30', 'modes: the handler target mirrors the source');
}

done_testing();

# Continuity of the stream against PostgreSQL's own logical replication
# (helper h1): one source, a destination with a native CREATE SUBSCRIPTION
# nat (streaming = on, two_phase = true) in the database "native" and the
# cdc_apply subscription fz (cdc.streaming = on; it does not decode two
# phases: a prepared transaction reaches it at COMMIT PREPARED, docs/worker.md)
# in "postgres", on the same publication, a seeded workload on the source
# (logical_decoding_work_mem = 64kB: large transactions are streamed):
#   t_ob   (id, n, v, body) with an outbox mapping in the cdc database; a
#          trigger on the source logs every row change into ob_log (not
#          published), the reference for the outbox
#   t_big  written by large transactions (1,500 rows, some TOASTed)
# Faults:
#   A  the destination stopped with stop('immediate') while the source
#      runs a round of transactions, started, and stopped again as soon as
#      the worker has applied part of the backlog (mid catch-up), three
#      times;
#   B  the walsenders of both subscriptions terminated on the source
#      (pg_terminate_backend) while a large transaction is open and both
#      slots have streamed it: committed, rolled back, and prepared
#      (terminated again between PREPARE TRANSACTION and COMMIT PREPARED);
#   C  a round running while walsenders are terminated and the destination
#      stopped immediately at random times.
# At the end both subscriptions are caught up and the rows of each table
# are the same in both databases and on the source; the outbox holds
# exactly one row per change of t_ob the source committed, in the
# source's order per key (no loss, no duplicate), each change claimed once,
# and cdc.stats counts them applied once.
#
# Seeds: CDC_FUZZ_SEED (one or several) overrides the default (1, 2); each
# seed runs on fresh clusters.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;
use lib cdc_root() . '/test/torture';
use CdcTorture::Rng;

my @seeds = defined $ENV{CDC_FUZZ_SEED} ? split(/[\s,]+/, $ENV{CDC_FUZZ_SEED}) : (1, 2);
my $xacts = $ENV{CDC_FUZZ_XACTS} // 60;

my $ddl = q{
CREATE TABLE t_ob (id int PRIMARY KEY, n int, v text, body text);
ALTER TABLE t_ob ALTER body SET STORAGE EXTERNAL;
CREATE TABLE t_big (id int PRIMARY KEY, v text, n int, body text);
ALTER TABLE t_big ALTER body SET STORAGE EXTERNAL;
};
# the source's log of t_ob's changes (rolled back with their transaction)
my $log_ddl = q{
CREATE TABLE ob_log (seq bigserial PRIMARY KEY, op text, id int, n int);
CREATE FUNCTION ob_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO ob_log (op, id, n) VALUES (CASE TG_OP WHEN 'INSERT' THEN 'c' WHEN 'UPDATE' THEN 'u' ELSE 'd' END,
    CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END, CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE NEW.n END);
  RETURN NULL;
END $$;
CREATE TRIGGER ob_note AFTER INSERT OR UPDATE OR DELETE ON t_ob FOR EACH ROW EXECUTE FUNCTION ob_note();
};

my $r;
my $gid = 0;

sub lit { my ($s) = @_; $s =~ s/'/''/g; return "'$s'"; }

# a change of t_ob (ids 1-200; prepared transactions use 1001-1030)
sub ob_statement
{
	my ($lo, $hi) = @_;
	my $id = $r->range($lo, $hi);
	my $n = $r->int(1000);
	my $kind = $r->weighted({ upsert => 4, update => 3, body => 1, delete => 1 });
	return "INSERT INTO t_ob VALUES ($id, $n, " . lit("v$n") . ", NULL) ON CONFLICT (id) DO UPDATE SET n = EXCLUDED.n, v = EXCLUDED.v;"
	  if $kind eq 'upsert';
	return "UPDATE t_ob SET n = n + 1, v = " . lit("u$n") . " WHERE id = $id;" if $kind eq 'update';
	return "UPDATE t_ob SET n = n + 1, body = repeat(md5('$n'), 100) WHERE id = $id;" if $kind eq 'body';
	return "DELETE FROM t_ob WHERE id = $id;";
}

# a large transaction's bulk write of t_big (ids $from..$from+1500)
sub bulk
{
	my ($from, $tag) = @_;
	return "INSERT INTO t_big SELECT g, '$tag', g, CASE WHEN g % 50 = 0 THEN repeat(md5(g::text), 100) END "
	  . "FROM generate_series($from, $from + 1500) g ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = t_big.n + 1;";
}

sub round_sql
{
	my $sql = '';
	for (1 .. $xacts) {
		my $shape = $r->weighted({ single => 50, block => 25, rollback => 6, savepoint => 6, large => 6, prepared => 7 });
		if ($shape eq 'single') {
			$sql .= ob_statement(1, 200) . "\n";
		} elsif ($shape eq 'block') {
			$sql .= "BEGIN;\n" . join("\n", map { ob_statement(1, 200) } 1 .. $r->range(2, 6)) . "\nCOMMIT;\n";
		} elsif ($shape eq 'rollback') {
			$sql .= "BEGIN;\n" . join("\n", map { ob_statement(1, 200) } 1 .. $r->range(1, 4)) . "\nROLLBACK;\n";
		} elsif ($shape eq 'savepoint') {
			$sql .= "BEGIN;\n" . ob_statement(1, 200) . "\nSAVEPOINT s;\n" . ob_statement(1, 200) . "\n"
			  . "ROLLBACK TO SAVEPOINT s;\n" . ob_statement(1, 200) . "\nCOMMIT;\n";
		} elsif ($shape eq 'large') {
			my $tag = 'bulk ' . $r->int(1000000);
			$sql .= "BEGIN;\n" . ob_statement(1, 200) . "\n" . bulk(1 + $r->int(500), $tag) . "\n"
			  . ob_statement(1, 200) . "\nSELECT pg_sleep(0.05);\n" . "UPDATE t_big SET n = n + 1 WHERE id % 7 = 0;\n"
			  . ob_statement(1, 200) . "\n" . ($r->chance(0.25) ? "ROLLBACK;\n" : "COMMIT;\n");
		} else {
			# two-phase, on keys nothing else writes (a prepared transaction
			# keeps its row locks until COMMIT PREPARED); sometimes large
			$gid++;
			$sql .= "BEGIN;\n" . join("\n", map { ob_statement(1001, 1030) } 1 .. $r->range(1, 4)) . "\n"
			  . ($r->chance(0.3) ? bulk(5000, "prepared $gid") . "\n" : '')
			  . "PREPARE TRANSACTION 'g$gid';\n" . join('', map { ob_statement(1, 200) . "\n" } 1 .. $r->range(0, 3))
			  . ($r->chance(0.25) ? "ROLLBACK PREPARED 'g$gid';\n" : "COMMIT PREPARED 'g$gid';\n");
		}
	}
	return $sql;
}

sub run_seed
{
	my ($seed) = @_;
	my $rng = CdcTorture::Rng->new("native-continuity:$seed");
	$r = $rng->fork('workload');
	my $frng = $rng->fork('faults');
	$gid = 0;
	diag("native continuity: seed $seed (CDC_FUZZ_SEED=$seed reproduces the workload), rounds of $xacts source transactions");

	my $source = new_source("source_$seed");
	$source->append_conf('postgresql.conf', "logical_decoding_work_mem = 64kB\nmax_wal_senders = 20\nmax_replication_slots = 20\n"
		  . "max_prepared_transactions = 5\n");
	$source->restart;
	my $dest = new_dest("dest_$seed", "cdc.streaming = on\nmax_logical_replication_workers = 6\nmax_prepared_transactions = 5\n"
		  . 'cdc.group_max_transactions = ' . $frng->pick(1, 3, 1000) . "\n" . 'cdc.apply_batch_changes = ' . $frng->pick(1, 7, 1000) . "\n");

	$source->safe_psql('postgres', $ddl . q{
INSERT INTO t_ob SELECT g, g, 'seed', CASE WHEN g % 10 = 0 THEN repeat(md5(g::text), 100) END FROM generate_series(1, 100) g;
INSERT INTO t_big SELECT g, 'seed', g, NULL FROM generate_series(1, 300) g;
CREATE PUBLICATION pub FOR TABLE t_ob, t_big;
} . $log_ddl);
	$dest->safe_psql('postgres', 'CREATE DATABASE native');
	$dest->safe_psql('native', $ddl);
	$dest->safe_psql('postgres', $ddl . q{SELECT cdc.register_mapping('t_ob', outbox => true);});
	(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
	$dest->safe_psql('native', "CREATE SUBSCRIPTION nat CONNECTION '$conn' PUBLICATION pub WITH (streaming = on, two_phase = true)");
	create_subscription($dest, $source, 'fz', ['pub']);
	$dest->wait_for_subscription_sync($source, 'nat', 'native');
	ok(wait_caught_up($source, $dest, 'fz'), "seed $seed: the cdc_apply subscription copied the tables");
	is($dest->safe_psql('native', q{SELECT subtwophasestate FROM pg_subscription WHERE subname = 'nat'}), 'e',
		"seed $seed: native two-phase decoding enabled");

	my $applied = sub {
		return $dest->safe_psql('postgres', q{SELECT applied_lsn FROM cdc.subscription_status WHERE name = 'fz'});
	};
	my $run_round = sub {
		my ($label, $n) = @_;
		my $file = PostgreSQL::Test::Utils::tempdir() . "/seed${seed}_$label.sql";
		PostgreSQL::Test::Utils::append_to_file($file, round_sql()) for 1 .. ($n // 1);
		return IPC::Run::start([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $source->connstr('postgres'), '-f', $file ],
			'<', '/dev/null', '>', "$file.log", '2>&1');
	};

	# --- A: the destination stopped immediately, also mid catch-up ---------
	my $mid = 0;
	for my $i (1 .. 3) {
		my $before = $applied->();
		$dest->stop('immediate');
		my $h = $run_round->("A$i", 3);
		ok($h->finish, "seed $seed A$i: a round of source transactions ran while the destination was down");
		$dest->start;
		# stopped again as soon as the worker applied part of the backlog
		$dest->poll_query_until('postgres', qq{SELECT applied_lsn > '$before'::pg_lsn FROM cdc.subscription_status WHERE name = 'fz'})
		  or diag("seed $seed A$i: no progress seen");
		my ($at, $src) = ($applied->(), source_lsn($source));
		$mid++ if $at ne $src;
		note("seed $seed A$i: stopped at applied_lsn $at (source at $src)");
	}
	diag("seed $seed A: $mid of 3 immediate stops before the worker had caught up");
	$dest->stop('immediate');
	$dest->start;

	# --- B: walsenders terminated while a large transaction is open --------
	my $streamed = sub {
		return $source->safe_psql('postgres', q{SELECT coalesce(string_agg(slot_name || ':' || stream_txns, ',' ORDER BY slot_name), '')
		    FROM pg_stat_replication_slots WHERE slot_name IN ('nat', 'fz')});
	};
	my $terminate = sub {
		return $source->safe_psql('postgres', q{SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication});
	};
	my $wait_streamed = sub {
		my ($s0, $label) = @_;
		my %before = map { split /:/ } split /,/, $s0;
		my $cond = join(' AND ', map { "coalesce((SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = '$_'), 0) > " . ($before{$_} // 0) } qw(nat fz));
		ok($source->poll_query_until('postgres', "SELECT $cond"), "seed $seed $label: both slots streamed the open transaction");
	};
	for my $end ('COMMIT', 'ROLLBACK', 'PREPARE') {
		ok(wait_caught_up($source, $dest, 'fz'), "seed $seed B $end: cdc_apply streaming before");
		$source->poll_query_until('postgres', q{SELECT count(*) = 2 FROM pg_stat_replication});
		my $s0 = $streamed->();
		my $bg = $source->background_psql('postgres', on_error_stop => 1);
		$bg->query_safe('BEGIN');
		$bg->query_safe(ob_statement($end eq 'PREPARE' ? (1001, 1030) : (1, 200)));
		$bg->query_safe(bulk($end eq 'PREPARE' ? 5000 : 2000, "open $end"));
		$wait_streamed->($s0, "B $end");
		my $n = $terminate->();
		note("seed $seed B $end: $n walsenders terminated mid-transaction");
		$bg->query_safe('SAVEPOINT s');
		$bg->query_safe(ob_statement($end eq 'PREPARE' ? (1001, 1030) : (1, 200)));
		$bg->query_safe(q{UPDATE t_big SET n = n + 1 WHERE id BETWEEN 2000 AND 3500 AND id % 3 = 0});
		$bg->query_safe('ROLLBACK TO SAVEPOINT s');
		$bg->query_safe(ob_statement($end eq 'PREPARE' ? (1001, 1030) : (1, 200)));
		$bg->query_safe(q{UPDATE t_big SET v = 'open, kept' WHERE id BETWEEN 2000 AND 3500 AND id % 5 = 0});
		if ($end eq 'PREPARE') {
			$bg->query_safe("PREPARE TRANSACTION 'open'");
			$source->poll_query_until('postgres', q{SELECT count(*) = 2 FROM pg_stat_replication});
			$source->wait_for_catchup('nat', 'replay', source_lsn($source));
			note("seed $seed B PREPARE: " . $terminate->() . ' walsenders terminated between PREPARE and COMMIT PREPARED');
			$source->safe_psql('postgres', ob_statement(1, 200));
			$source->safe_psql('postgres', q{COMMIT PREPARED 'open'});
		} else {
			$bg->query_safe($end);
		}
		$bg->quit;
	}

	# --- C: a round with faults at random times ----------------------------
	{
		my $h = $run_round->('C');
		my %count = (terminate => 0, immediate => 0);
		for (1 .. 4) {
			usleep(1000 * $frng->range(200, 1500));
			my $what = $frng->weighted({ terminate => 3, immediate => 1 });
			$count{$what}++;
			if ($what eq 'terminate') {
				$terminate->();
			} else {
				$dest->stop('immediate');
				$dest->start;
			}
		}
		ok($h->finish, "seed $seed C: a round of source transactions ran");
		note("seed $seed C: " . join(', ', map { "$_ $count{$_}" } sort keys %count));
	}

	# --- the check -----------------------------------------------------------
	my $lsn = source_lsn($source);
	$source->wait_for_catchup('nat', 'replay', $lsn);
	ok(wait_caught_up($source, $dest, 'fz', $lsn), "seed $seed: the cdc_apply subscription caught up to $lsn");
	for my $table ('t_ob', 't_big') {
		my $rows = "SELECT count(*) || ' ' || md5(coalesce(string_agg(x::text, E'\\n' ORDER BY id), '')) FROM $table x";
		my $native = $dest->safe_psql('native', $rows);
		is($dest->safe_psql('postgres', $rows), $native, "seed $seed: $table: cdc_apply equals native");
		is($source->safe_psql('postgres', $rows), $native, "seed $seed: $table: native equals the source");
	}
	is($dest->safe_psql('native', 'SELECT count(*) FROM pg_prepared_xacts'), '0', "seed $seed: no prepared transaction left at the destination");
	# the outbox: one row per committed change of t_ob, in the source's order per key
	my $changes = $source->safe_psql('postgres', 'SELECT count(*) FROM ob_log');
	my $per_key_src = $source->safe_psql('postgres',
		q{SELECT id || ' ' || string_agg(op || coalesce(n::text, ''), ',' ORDER BY seq) FROM ob_log GROUP BY id ORDER BY id});
	my $per_key_cdc = $dest->safe_psql('postgres', q{SELECT (entity_key->>'id') || ' ' || string_agg(op || CASE WHEN op = 'd' THEN '' ELSE payload->>'n' END, ',' ORDER BY id)
		  FROM cdc.outbox WHERE target = 't_ob'::regclass GROUP BY entity_key->>'id' ORDER BY (entity_key->>'id')::int});
	cmp_ok($changes, '>', 0, "seed $seed: the source changed t_ob $changes times");
	is(outbox_summary($dest, q{target = 't_ob'::regclass}), "$changes|$changes", "seed $seed: one outbox row per change of t_ob, distinct idempotency keys");
	is($per_key_cdc, $per_key_src, "seed $seed: the outbox rows are the source's changes in its order per key");
	# (the ledger's other rows: the 100 rows of the copy)
	is(changes_claimed_once($dest, 't_ob', outbox_changes('t_ob')), "$changes|100", "seed $seed: every change claimed once");
	is($dest->safe_psql('postgres', q{SELECT (applied - snapshot_rows) || '|' || outbox_rows || '|' || conflict FROM cdc.stats WHERE target = 't_ob'::regclass}),
		"$changes|$changes|0", "seed $seed: cdc.stats counts each change applied once, with its outbox row");
	is($dest->safe_psql('postgres', q{SELECT state || '|' || retry_count FROM cdc.subscription_status WHERE name = 'fz'}),
		'streaming|0', "seed $seed: cdc_apply streaming, no pending retry");
	# the only errors of either subscriber: the stream ended by the
	# terminated walsenders (pg_stat_subscription_stats counts those too,
	# and loses its counts at each immediate stop)
	my @errors = grep { /ERROR:/ && !/terminating connection due to administrator command/ } split /\n/, slurp_file($dest->logfile);
	is(scalar(@errors), 0, "seed $seed: no other error at the destination (native and cdc_apply)") or diag(join("\n", @errors[ 0 .. ($#errors < 9 ? $#errors : 9) ]));
	diag("seed $seed: source slots: " . $source->safe_psql('postgres',
		q{SELECT string_agg(slot_name || ': streamed ' || stream_txns || ', spilled ' || spill_txns, '; ' ORDER BY slot_name) FROM pg_stat_replication_slots WHERE slot_name IN ('nat', 'fz')}));
	$dest->safe_psql('native', 'DROP SUBSCRIPTION nat');
	$dest->stop;
	$source->stop;
}

run_seed($_) for @seeds;
done_testing();

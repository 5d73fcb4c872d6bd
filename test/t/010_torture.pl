# Replay torture suite of cdc_apply's SQL path (docs/torture.md).
#
# A reference model (test/torture/CdcTorture/Model.pm) computes the state
# the destination must reach for a delivery sequence; a generator
# (Generator.pm) makes seeded source histories and the deliveries a
# consumer sees (duplicates, a rebuilt topic, reorderings, batches); the
# driver (Driver.pm) applies them through cdc_apply() with crashes and
# concurrent appliers and compares the database with the model and with the
# order-independent properties (Oracle.pm).
#
# Fast configuration (the default, run by test/run_all.sh): a few hundred
# seeds in a few minutes.  Soak: see docs/torture.md, e.g.
#   CDC_TORTURE_SEEDS=5000 CDC_TORTURE_KEYS=8 CDC_TORTURE_CHANGES=60 prove ...
# Environment:
#   CDC_TORTURE_SEEDS            number of random seeds (250)
#   CDC_TORTURE_FIRST_SEED       first seed (1)
#   CDC_TORTURE_SEED             run this one seed only (and print its plan)
#   CDC_TORTURE_KEYS             keys per table (4: collisions are frequent)
#   CDC_TORTURE_CHANGES          row changes per history (20)
#   CDC_TORTURE_TERMINATE_EVERY  a run with backends terminated mid-transaction every N seeds (4)
#   CDC_TORTURE_CRASH_EVERY      a run with the postmaster crashed every N seeds (20)
#   CDC_TORTURE_CONCURRENT_EVERY a run with 2 or 4 concurrent appliers every N seeds (5)
#   CDC_TORTURE_EXPIRY_EVERY     a ledger-expiry run (prune everything, replay a window) every N seeds (3)
#   CDC_TORTURE_BATCH_EVERY      a run through cdc_apply_batch() every N seeds (2)
#   CDC_TORTURE_MODES_EVERY      the same deliveries applied one by one, in batches and in batches
#                                claimed by offset range, every N seeds (3)
#   CDC_TORTURE_SHRINKS          failing seeds to shrink (3)
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../torture";
use File::Path qw(make_path);
use Time::HiRes ();
use List::Util qw(max);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcTorture::Rng;
use CdcTorture::Schema qw(torture_tables json_encode json_decode);
use CdcTorture::Generator;
use CdcTorture::Driver;
use CdcTorture::Fixed;

my $t0 = Time::HiRes::time();
my %cfg = (
	seeds            => $ENV{CDC_TORTURE_SEEDS} // 250,
	first_seed       => $ENV{CDC_TORTURE_FIRST_SEED} // 1,
	keys             => $ENV{CDC_TORTURE_KEYS} // 4,
	changes          => $ENV{CDC_TORTURE_CHANGES} // 20,
	terminate_every  => $ENV{CDC_TORTURE_TERMINATE_EVERY} // 4,
	crash_every      => $ENV{CDC_TORTURE_CRASH_EVERY} // 20,
	concurrent_every => $ENV{CDC_TORTURE_CONCURRENT_EVERY} // 5,
	expiry_every     => $ENV{CDC_TORTURE_EXPIRY_EVERY} // 3,
	batch_every      => $ENV{CDC_TORTURE_BATCH_EVERY} // 2,
	modes_every      => $ENV{CDC_TORTURE_MODES_EVERY} // 3,
	shrinks          => $ENV{CDC_TORTURE_SHRINKS} // 3,
);
my @seeds = defined $ENV{CDC_TORTURE_SEED}
  ? ($ENV{CDC_TORTURE_SEED})
  : ($cfg{first_seed} .. $cfg{first_seed} + $cfg{seeds} - 1);
my $faildir = "$PostgreSQL::Test::Utils::tmp_check/torture-failures";

my $node = PostgreSQL::Test::Cluster->new('torture');
$node->init;
$node->append_conf('postgresql.conf', <<'CONF');
log_statement = none
log_min_messages = warning
deadlock_timeout = 50ms
max_connections = 40
shared_buffers = 64MB
CONF
$node->start;

my %tables = (%{ torture_tables() }, %{ CdcTorture::Fixed::tables() });
my $driver = CdcTorture::Driver->new(node => $node, db => 'torture', tables => \%tables,
	workdir => PostgreSQL::Test::Utils::tempdir('torture'));
$driver->setup;

my $failures = 0;
my $shrunk = 0;
my %stats;

sub report_failure
{
	my ($name, $r, $batches) = @_;
	$failures++;
	diag("$name FAILED:\n" . join("\n", @{ $r->{diffs} }[ 0 .. ($#{ $r->{diffs} } > 40 ? 40 : $#{ $r->{diffs} }) ]));
	return unless $batches && $shrunk < $cfg{shrinks};
	$shrunk++;
	my $s = $driver->shrink($r->{committed}, $batches);
	if (!$s)
	{
		diag("$name: the failure does not reproduce without its faults/interleaving; not shrunk");
		return;
	}
	my $again = $driver->run_plan({ batches => $s->{batches} });
	my ($text, $json) = $driver->reproduction($name, $s->{batches}, $again);
	diag($text);
	make_path($faildir);
	(my $file = "$faildir/$name.json") =~ s/[^\w\/.-]+/_/g;
	open my $fh, '>', $file or die "$file: $!";
	print $fh $json, "\n";
	close $fh;
	diag("kept as $file: copy it to test/torture/regressions/ to make it a fixed regression case");
}

# ---------------------------------------------------------------------------
# 1. Fixed histories: every Debezium-path case of shared/scenarios.md, with
#    the expected state written by hand from that file; the model must agree
#    with the hand-written expectation and the database with both.
# ---------------------------------------------------------------------------
for my $case (CdcTorture::Fixed::scenarios())
{
	my @problems = CdcTorture::Fixed::run_case($driver, $case);
	ok(!@problems, "fixed: $case->{name}") or diag(join("\n", @problems));
}

# Concurrent claim storm (SPEC §4.1): four sessions claim the same
# deliveries at the same moment; none may fail.
{
	my $r = $driver->run_concurrent(CdcTorture::Fixed::storm_lists(4, 20), batched => 0);
	ok($r->{ok}, 'fixed: concurrent claim storm (4 sessions, same deliveries, truncates included)')
	  or diag(join("\n", @{ $r->{diffs} }[ 0 .. ($#{ $r->{diffs} } > 6 ? 6 : $#{ $r->{diffs} }) ]));
}

# ---------------------------------------------------------------------------
# 2. Regression cases: shrunk counter-examples found by earlier runs.
# ---------------------------------------------------------------------------
for my $file (sort glob("$FindBin::RealBin/../torture/regressions/*.json"))
{
	my $case = do { local $/; open my $fh, '<', $file or die $!; json_decode(<$fh>) };
	my $batches = [ map { [ map { { %$_, text_arg => 0 } } @$_ ] } @{ $case->{batches} } ];
	my $r = $driver->run_plan({ batches => $batches });
	ok($r->{ok}, "regression: $case->{name}" . ($case->{rule} ? " ($case->{rule})" : ''))
	  or diag(join("\n", @{ $r->{diffs} }[ 0 .. ($#{ $r->{diffs} } > 20 ? 20 : $#{ $r->{diffs} }) ]));
}

# ---------------------------------------------------------------------------
# 3. Random histories.
# ---------------------------------------------------------------------------
for my $seed (@seeds)
{
	my $plan = CdcTorture::Rng->new($seed)->fork('plan');
	my $H = CdcTorture::Generator::history($seed, keys => $cfg{keys}, changes => $cfg{changes});
	$stats{$_} += $H->{stats}{$_} // 0 for keys %{ $H->{stats} };
	$stats{histories}++;
	if (defined $ENV{CDC_TORTURE_SEED})
	{
		diag("seed $seed: source history in production order (" . scalar(@{ $H->{messages} }) . " records):");
		diag(sprintf('  m%-3d %s', $_, $driver->describe({ json => $H->{messages}[$_]{json}, dk => undef })))
		  for 0 .. $#{ $H->{messages} };
	}
	# Every other seed writes through SQL statements only (cdc.direct_writes
	# off), the others through the table access method where the engine
	# may: both must reach the model's state (a differential test of the
	# two writers, docs/internals.md, "Writes without SQL").
	my $direct = $seed % 2 ? 'on' : 'off';
	$node->safe_psql('postgres', "ALTER DATABASE torture SET cdc.direct_writes = $direct");
	$stats{"direct_writes_$direct"}++;
	my @names;
	my $seed_ok = 1;
	my $mode = sub { return $plan->weighted({ inorder => 2, perkey => 5, arbitrary => 3 }); };
	my $last = Time::HiRes::time();
	my $check = sub {
		my ($name, $r, $batches) = @_;
		push @names, $name;
		$stats{"runs_$name"}++;
		my $now = Time::HiRes::time();
		(my $kind = $name) =~ s/-.*//;
		$stats{"seconds_$kind"} += $now - $last;
		$last = $now;
		return if $r->{ok};
		$seed_ok = 0;
		report_failure("seed-$seed-$name", $r, $batches);
	};

	# A: every record once, then the whole sequence again (all duplicates).
	{
		my $D = CdcTorture::Generator::deliveries($H, $seed, label => 'A', mode => $mode->(), dk => 'kafka',
			batch => $plan->chance(0.5) ? 'single' : 'random');
		$stats{"mode_$D->{mode}"}++;
		$check->("once+twice-$D->{mode}", $driver->run_plan({ batches => $D->{batches}, twice => 1 }), $D->{batches});
	}
	# B: random repeats, offset rewinds, a rebuilt topic, derived keys.
	{
		my $D = CdcTorture::Generator::deliveries($H, $seed, label => 'B', mode => $mode->(),
			dk => $plan->weighted({ kafka => 6, derived => 2, mixed => 2 }),
			rewinds => 0.06, copies => 0.2, gen2 => $plan->chance(0.5), batch => 'random');
		$stats{"mode_$D->{mode}"}++;
		$check->("repeats-$D->{mode}-$D->{dk}", $driver->run_plan({ batches => $D->{batches} }), $D->{batches});
	}
	# C: backends terminated mid-transaction, re-delivery from an earlier position.
	if ($seed % $cfg{terminate_every} == 0)
	{
		my $D = CdcTorture::Generator::deliveries($H, $seed, label => 'C', mode => $mode->(), dk => 'kafka',
			rewinds => 0.03, copies => 0.1, gen2 => $plan->chance(0.3), batch => 'random');
		my $n = @{ $D->{batches} };
		my @crashes = map {
			my $at = $plan->int($n);
			{ at => $at, kind => $plan->chance(0.7) ? 'terminate' : 'error', partial => $plan->range(0, 3),
			  rewind_to => $at - $plan->int(4) }
		} 1 .. $plan->range(1, 3);
		$_->{rewind_to} = 0 for grep { $_->{rewind_to} < 0 } @crashes;
		$check->("terminate-$D->{mode}", $driver->run_plan({ batches => $D->{batches}, crashes => \@crashes }), $D->{batches});
	}
	# D: the postmaster crashes between a commit and the next delivery (and
	# sometimes with a transaction in flight).
	if ($seed % $cfg{crash_every} == 0)
	{
		my $D = CdcTorture::Generator::deliveries($H, $seed, label => 'D', mode => $mode->(), dk => 'kafka',
			copies => 0.1, batch => 'random');
		my $n = @{ $D->{batches} };
		my $at = $plan->range(1, $n - 1);
		my @crashes = ({ at => $at, kind => 'postmaster', partial => $plan->chance(0.5) ? $plan->range(1, 2) : 0,
			rewind_to => $at - $plan->int(5) });
		$crashes[0]{rewind_to} = 0 if $crashes[0]{rewind_to} < 0;
		$check->("postmaster-crash-$D->{mode}", $driver->run_plan({ batches => $D->{batches}, crashes => \@crashes }),
			$D->{batches});
	}
	# E: two or four appliers sharing the deliveries (same keys claimed at once).
	if ($seed % $cfg{concurrent_every} == 0)
	{
		my $n = ($seed / $cfg{concurrent_every}) % 2 ? 2 : 4;
		my $batched = $plan->chance(0.4);
		my $m = $plan->weighted({ perkey => 3, arbitrary => 1 });
		my @lists = map {
			CdcTorture::Generator::deliveries($H, $seed, label => "E$_", mode => $m, dk => 'kafka',
				rewinds => 0.03, gen2 => 0, batch => $batched ? 'random' : 'single', max_batch => 3)->{batches}
		} 1 .. $n;
		my $r = $driver->run_concurrent(\@lists, batched => $batched, terminate => $plan->chance(0.3),
			terminate_after => $plan->range(1, 40) / 1000, terminate_victim => $plan->int($n));
		$check->("concurrent-$n-$m" . ($batched ? '-batched' : ''), $r, undef);
	}
	# F: ledger expiry (docs/retention.md): after a run, the whole ledger and
	# every tombstone are pruned and a window of the deliveries is replayed;
	# the remaining records and the prune watermark must keep the state
	# right, and pruned changes must come back expired, never applied again.
	# Every other expiry run goes through cdc_apply_batch() (batches of up to
	# 12, the replay in calls of up to 8); whether it does follows from the
	# seed alone, so the plan's draws are those of one-by-one runs.
	if ($seed % $cfg{expiry_every} == 0)
	{
		my $batched = ($seed / $cfg{expiry_every}) % 2;
		my $D = CdcTorture::Generator::deliveries($H, $seed, label => 'F', mode => $mode->(),
			dk => $plan->chance(0.5) ? 'kafka' : 'derived', batch => $batched ? 'random' : 'single', max_batch => 12);
		my $n = scalar map {@$_} @{ $D->{batches} };
		$check->("expiry-$D->{mode}" . ($batched ? '-batched' : ''),
			$driver->run_expiry($D->{batches}, $plan->int($n), batched => $batched), $D->{batches});
	}
	# G: deliveries through cdc_apply_batch(), one call per batch (larger
	# batches, so a key often changes several times inside one call), with
	# redeliveries and sometimes a backend terminated mid-batch: rows,
	# entity records, ledger, outbox, conflicts, counters and every outcome
	# must equal the model, exactly as one by one.  Drawn after the other
	# runs, so adding it changed none of them.
	if ($seed % $cfg{batch_every} == 0)
	{
		my $D = CdcTorture::Generator::deliveries($H, $seed, label => 'G', mode => $mode->(),
			dk => $plan->weighted({ kafka => 4, derived => 3, mixed => 3 }), rewinds => 0.04, copies => 0.2,
			gen2 => $plan->chance(0.3), batch => 'random', max_batch => 12);
		my $n = @{ $D->{batches} };
		my @crashes = $plan->chance(0.3)
		  ? ({ at => $plan->int($n), kind => 'terminate', partial => $plan->range(1, 3), rewind_to => 0 }) : ();
		$crashes[0]{rewind_to} = $crashes[0]{at} - $plan->int(3) if @crashes;
		$crashes[0]{rewind_to} = 0 if @crashes && $crashes[0]{rewind_to} < 0;
		local $driver->{apply_default} = 'batch';
		$check->("batched-$D->{mode}-$D->{dk}" . (@crashes ? '-terminate' : ''),
			$driver->run_plan({ batches => $D->{batches}, twice => $plan->chance(0.3), crashes => \@crashes }), $D->{batches});
	}
	# H: one delivery plan applied three times: one by one (cdc_apply()),
	# through cdc_apply_batch() with a delivery key per event, and through
	# cdc_apply_batch() with claims by offset range for every Kafka-keyed
	# delivery (source_partition and offsets).  Each run must equal the
	# model (outcomes included; in the offsets run cdc.delivery_processed()
	# stands in for the ledger rows), and the three must end with the same
	# rows, entity records, barriers, counters, conflicts and outbox, in
	# order.  Its draws come from a stream of its own, so adding it changed
	# no other run.
	if ($seed % $cfg{modes_every} == 0)
	{
		my $hp = CdcTorture::Rng->new($seed)->fork('plan-modes');
		my $D = CdcTorture::Generator::deliveries($H, $seed, label => 'H',
			mode => $hp->weighted({ partitions => 5, inorder => 1, perkey => 2, arbitrary => 2 }),
			dk => $hp->weighted({ kafka => 7, mixed => 3 }), rewinds => 0.04, copies => 0.15,
			gen2 => $hp->chance(0.3), batch => 'random', max_batch => 12);
		my $n = @{ $D->{batches} };
		my @crashes = $hp->chance(0.3)
		  ? ({ at => $hp->int($n), kind => 'terminate', partial => $hp->range(1, 3) }) : ();
		$crashes[0]{rewind_to} = max(0, $crashes[0]{at} - $hp->int(3)) if @crashes;
		my $twice = $hp->chance(0.3);
		my %state;
		for my $apply (qw(single batch offsets))
		{
			local $driver->{apply_default} = $apply;
			my $r = $driver->run_plan({ batches => $D->{batches}, twice => $twice, crashes => \@crashes });
			$check->("modes-$apply-$D->{mode}-$D->{dk}" . (@crashes ? '-terminate' : ''), $r, $D->{batches});
			$state{$apply} = [ grep { !/^(?:led|dp)\|/ } @{ $r->{lines} } ];
		}
		for my $apply (qw(batch offsets))
		{
			my @d = CdcTorture::Driver::diff_lines($state{single}, $state{$apply});
			next unless @d;
			s/expected, missing:/only one by one:   / for @d;
			s/unexpected:       /only in mode $apply:/ for @d;
			$check->("modes-equal-$apply", { ok => 0, diffs => [ "one by one and mode $apply end in different states:", @d ] },
				undef);
		}
	}
	ok($seed_ok, "seed $seed: " . join(', ', @names));
}

my $elapsed = Time::HiRes::time() - $t0;
my $c = $driver->counts;
my $summary = {
	%cfg,
	seeds_run          => scalar @seeds,
	failures           => $failures,
	wall_seconds       => sprintf('%.1f', $elapsed),
	cdc_apply_calls    => $c->{calls},
	%$c,
	%stats,
};
diag(sprintf("torture: %d seeds, %d runs, %d cdc_apply calls, %d backends terminated mid-transaction, "
		. "%d errors injected mid-transaction, %d postmaster crashes (%d with a transaction in flight), "
		. "%d concurrent runs (%d appliers, %d of them terminated, %d deadlocks), "
		. "%d ledger-expiry runs (%d replays, %d expired, %d former conflicts applied), %d cdc_apply_batch calls "
		. "(%d of them with claims by offset range, for %d events, %d calls with several), %d shrink trials, %.0f s",
		scalar @seeds, $c->{runs} + $c->{concurrent_runs}, $c->{calls}, $c->{terminations}, $c->{injected_errors} // 0,
		$c->{postmaster_crashes}, $c->{inflight_crashes}, $c->{concurrent_runs}, $c->{concurrent_appliers},
		$c->{concurrent_terminations} // 0, $c->{deadlocks}, $c->{expiry_runs} // 0, $c->{expiry_replays} // 0,
		$c->{expiry_expired} // 0, $c->{expiry_reapplied_conflicts} // 0, $c->{batch_calls} // 0,
		$c->{offsets_calls} // 0, $c->{offsets_events} // 0, $c->{offsets_multi_calls} // 0, $c->{shrink_trials},
		$elapsed));
diag('torture history stats: ' . join(', ', map {"$_=$stats{$_}"} sort keys %stats));
make_path($PostgreSQL::Test::Utils::tmp_check);
if (open my $fh, '>', "$PostgreSQL::Test::Utils::tmp_check/torture-summary.json")
{
	print $fh json_encode($summary), "\n";
	close $fh;
}

$node->stop;
done_testing();

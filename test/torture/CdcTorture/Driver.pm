# Applies deliveries through cdc_apply() on a real server and checks the
# result against the reference model (Model.pm) and the order-independent
# properties (Oracle.pm).
#
# One database is reused for every seed; reset() empties the targets and
# the engine's state between runs.  A run is one psql round trip (reset,
# every batch, and the state dump), so hundreds of seeds fit in minutes.
# Faults: a backend terminated in the middle of a transaction
# (pg_terminate_backend), the postmaster stopped in immediate mode (a crash:
# no shutdown checkpoint, WAL recovery at start) after a commit and
# optionally with a transaction in flight, each followed by re-delivery from
# an earlier position; several appliers sharing the same deliveries.
package CdcTorture::Driver;
use strict;
use warnings;
use IPC::Run ();
use Time::HiRes ();
use List::Util qw(min max);
use CdcTorture::Model;
use CdcTorture::Oracle;
use CdcTorture::Rng;
use CdcTorture::Schema qw(json_encode json_decode table_ddl mapping_sql canon_value version_text);

sub new
{
	my ($class, %a) = @_;
	my $self = bless {
		node   => $a{node},
		db     => $a{db} // 'torture',
		tables => $a{tables},    # name -> description (generated + fixed-case tables)
		counts => { runs => 0, calls => 0, terminations => 0, postmaster_crashes => 0, inflight_crashes => 0,
			concurrent_runs => 0, concurrent_appliers => 0, deadlocks => 0, shrink_trials => 0 },
		decoded => {},
	}, $class;
	return $self;
}

sub counts { return $_[0]{counts}; }

sub setup
{
	my ($self) = @_;
	my $node = $self->{node};
	$node->safe_psql('postgres', "CREATE DATABASE $self->{db}");
	my $sql = "SET client_min_messages = warning;\nCREATE EXTENSION cdc_apply;\n";
	for my $t (sort keys %{ $self->{tables} })
	{
		$sql .= table_ddl($self->{tables}{$t}) . "\n" . mapping_sql($self->{tables}{$t}) . "\n";
	}
	$node->safe_psql($self->{db}, $sql);
}

sub reset_sql
{
	my ($self) = @_;
	my $sql = 'TRUNCATE ' . join(', ', map {qq{"$_"}} sort keys %{ $self->{tables} }) . ";\n";
	$sql .= "DELETE FROM cdc.$_;\n" for qw(ledger entity_state table_barrier outbox conflicts counters);
	for my $t (sort keys %{ $self->{tables} })
	{
		# Mappings a fixed case may have changed (epoch bump) are restored.
		$sql .= mapping_sql($self->{tables}{$t}) . "\n" if $self->{tables}{$t}{remappable};
	}
	return $sql;
}

sub _lit
{
	my ($s) = @_;
	return 'NULL' unless defined $s;
	$s =~ s/'/''/g;
	return "'$s'";
}

# One cdc_apply() call; its output line is "<tag>|<n>|<outcome>".
sub delivery_sql
{
	my ($self, $d, $tag, $n) = @_;
	my $ev = !defined $d->{json} ? 'NULL::jsonb' : _lit($d->{json}) . ($d->{text_arg} ? '::text' : '::jsonb');
	my $target = defined $d->{target} ? _lit($d->{target}) . '::regclass' : 'NULL';
	return "SELECT '$tag|$n|' || cdc_apply($ev, $target, " . _lit($d->{dk}) . ");\n";
}

# SQL for a list of batches; a batch of several deliveries is one transaction.
sub batches_sql
{
	my ($self, $batches, $tag, $n0) = @_;
	my $sql = '';
	my $n = $n0 // 0;
	for my $b (@$batches)
	{
		my $tx = @$b > 1;
		$sql .= "BEGIN;\n" if $tx;
		$sql .= $self->delivery_sql($_, $tag, $n++) for @$b;
		$sql .= "COMMIT;\n" if $tx;
	}
	return $sql;
}

sub dump_sql
{
	my ($self) = @_;
	my $sql = '';
	for my $t (sort keys %{ $self->{tables} })
	{
		$sql .= qq{SELECT 'S|row|$t|' || to_jsonb(t)::text FROM "$t" t;\n};
	}
	$sql .= <<'SQL';
SELECT 'S|ent|' || target::text || '|' || entity_key::text || '|' || source_name || '|' || version::text || '|' || CASE WHEN deleted THEN 't' ELSE 'f' END FROM cdc.entity_state;
SELECT 'S|bar|' || target::text || '|' || source_name || '|' || version::text FROM cdc.table_barrier;
SELECT 'S|led|' || delivery_key || '|' || target::text || '|' || coalesce(entity_key::text, 'null') || '|' || version::text FROM cdc.ledger;
SELECT 'S|obx|' || idempotency_key || '|' || target::text || '|' || coalesce(entity_key::text, 'null') || '|' || op || '|' || version::text FROM cdc.outbox;
SELECT 'S|cfl|' || target::text || '|' || entity_key::text || '|' || delivery_key || '|' || op || '|' || event_version::text FROM cdc.conflicts;
SELECT 'S|st|' || target::text || '|' || applied || '|' || duplicate || '|' || stale || '|' || conflict || '|' || ignored || '|' || blocked_resurrections || '|' || outbox_rows || '|' || snapshot_rows FROM cdc.stats;
SQL
	return $sql;
}

# Parses psql output: outcomes (tag o only: committed deliveries) and the
# state as canonical lines (the form of Model::state_lines).
sub parse_output
{
	my ($self, $out) = @_;
	my (@outcomes, @lines);
	for my $l (split /\n/, $out // '')
	{
		if ($l =~ /^o\|(\d+)\|(\w+)$/) { push @outcomes, [ $1, $2 ]; next; }
		next unless $l =~ s/^S\|//;
		my ($kind, @f) = split /\|/, $l, -1;
		if ($kind eq 'row')
		{
			my ($t, $json) = ($f[0], join('|', @f[ 1 .. $#f ]));
			my $row = json_decode($json);
			my %types = map { $_->[0] => $_->[1] } @{ $self->{tables}{$t}{cols} };
			push @lines, "row|$t|" . json_encode({ map { $_ => canon_value($types{$_}, $row->{$_}) } keys %$row });
		}
		elsif ($kind eq 'ent')
		{
			$f[1] = CdcTorture::Model::canon_key($f[1]);
			push @lines, join('|', 'ent', @f);
		}
		elsif ($kind eq 'led' || $kind eq 'obx' || $kind eq 'cfl')
		{
			my $i = $kind eq 'cfl' ? 1 : 2;
			$f[$i] = CdcTorture::Model::canon_key($f[$i] eq 'null' ? undef : $f[$i]);
			push @lines, join('|', $kind, @f);
		}
		elsif ($kind eq 'st')
		{
			next unless grep { $_ } @f[ 1 .. $#f ];
			push @lines, join('|', 'st', @f);
		}
		else
		{
			push @lines, join('|', $kind, @f);
		}
	}
	return (\@outcomes, [ sort @lines ]);
}

# The decoded event of a delivery, for the model.
sub model_delivery
{
	my ($self, $d) = @_;
	my $ev;
	if (defined $d->{json})
	{
		$ev = $self->{decoded}{ $d->{json} } //= [ json_decode($d->{json}) ];
		$ev = $ev->[0];
	}
	return { event => $ev, dk => $d->{dk}, target => $d->{target} };
}

sub diff_lines
{
	my ($want, $have) = @_;
	my (%w, %h);
	$w{$_}++ for @$want;
	$h{$_}++ for @$have;
	my @d;
	for my $l (sort keys %{ { %w, %h } })
	{
		my $n = ($w{$l} // 0) - ($h{$l} // 0);
		push @d, "  expected, missing: $l" if $n > 0;
		push @d, "  unexpected:        $l" if $n < 0;
	}
	return @d;
}

sub _psql
{
	my ($self, $sql, %o) = @_;
	my ($out, $err) = ('', '');
	my $ret = $self->{node}->psql($self->{db}, $sql, stdout => \$out, stderr => \$err,
		on_error_stop => $o{on_error_stop} // 1, timeout => $o{timeout} // 600);
	return ($ret, $out, $err);
}

# ---------------------------------------------------------------------------
# Deterministic runs (one applier, crashes at chosen points)
# ---------------------------------------------------------------------------

# $plan = {batches => [...], twice => 0|1, crashes => [{at, kind => terminate
# | postmaster, partial, rewind_to}], label}.  Returns {ok, diffs, committed,
# outcomes, expected}.
sub run_plan
{
	my ($self, $plan) = @_;
	my $c = $self->{counts};
	my $batches = $plan->{batches};
	my @committed;    # deliveries in the order the destination committed them
	my @outcomes;
	my @errors;
	my $pos = 0;
	my $head = $self->reset_sql;
	for my $crash (sort { $a->{at} <=> $b->{at} } @{ $plan->{crashes} || [] })
	{
		next if $crash->{at} < $pos || $crash->{at} > $#$batches;
		my @seg = @$batches[ $pos .. $crash->{at} - 1 ];
		my $sql = $head . $self->batches_sql(\@seg, 'o', scalar @committed);
		my @partial = @{ $batches->[ $crash->{at} ] }[ 0 .. min($crash->{partial}, scalar @{ $batches->[ $crash->{at} ] }) - 1 ];
		$head = '';
		if ($crash->{kind} eq 'terminate')
		{
			# The applying backend is terminated in the middle of a transaction.
			$sql .= "BEGIN;\n" . $self->batches_sql([ map { [$_] } @partial ], 'x', 0)
			  . "SELECT pg_terminate_backend(pg_backend_pid());\nSELECT 'x|never|reached';\nCOMMIT;\n";
			my ($ret, $out, $err) = $self->_psql($sql);
			push @errors, "terminate: psql exit $ret, expected a lost connection: $err"
			  unless $ret && $err =~ /terminating connection|server closed the connection|connection to server was lost/;
			push @errors, "terminate: the statement after pg_terminate_backend ran" if $out =~ /never\|reached/;
			my ($o) = $self->parse_output($out);
			push @outcomes, @$o;
			$c->{terminations}++;
		}
		else
		{
			# Everything so far is committed; then the postmaster dies (immediate
			# stop: no checkpoint, crash recovery at start), optionally while a
			# transaction with part of the next batch is in flight.
			my ($ret, $out, $err) = $self->_psql($sql);
			push @errors, "psql failed before the crash: $err" if $ret;
			my ($o) = $self->parse_output($out);
			push @outcomes, @$o;
			my $bg;
			if (@partial)
			{
				$bg = $self->{node}->background_psql($self->{db}, on_error_stop => 0);
				$bg->query("BEGIN;\n" . $self->batches_sql([ map { [$_] } @partial ], 'x', 0));
				$c->{inflight_crashes}++;
			}
			$self->{node}->stop('immediate');
			eval { $bg->quit if $bg; 1 };
			$self->{node}->start;
			$c->{postmaster_crashes}++;
		}
		push @committed, map {@$_} @seg;
		$c->{calls} += @partial + scalar(map {@$_} @seg);
		$pos = $crash->{rewind_to} // $crash->{at};    # re-delivery from an earlier position
	}
	my @rest = @$batches[ $pos .. $#$batches ];
	push @rest, @$batches if $plan->{twice};
	my $sql = $head . $self->batches_sql(\@rest, 'o', scalar @committed) . $self->dump_sql;
	my ($ret, $out, $err) = $self->_psql($sql);
	push @errors, "psql failed: $err" if $ret;
	my ($o, $lines) = $self->parse_output($out);
	push @outcomes, @$o;
	push @committed, map {@$_} @rest;
	$c->{calls} += scalar map {@$_} @rest;
	$c->{runs}++;
	return $self->judge(\@committed, \@outcomes, $lines, \@errors);
}

# Compares a committed delivery sequence, its outcomes and the database
# state with the model and the oracle.
sub judge
{
	my ($self, $committed, $outcomes, $lines, $errors) = @_;
	my $model = CdcTorture::Model->new(tables => { map { $_ => { %{ $self->{tables}{$_} } } } keys %{ $self->{tables} } });
	my @md = map { $self->model_delivery($_) } @$committed;
	my @expected;
	my @diffs = @{ $errors || [] };
	for my $i (0 .. $#md)
	{
		my $o = eval { $model->deliver($md[$i]) };
		if (!defined $o)
		{
			push @diffs, "model rejected delivery $i: $@";
			last;
		}
		push @expected, $o;
	}
	my $want = $model->state_lines;
	push @diffs, diff_lines($want, $lines);
	my @bad_outcomes;
	for my $i (0 .. max($#expected, $#$outcomes))
	{
		my $have = $outcomes->[$i] ? $outcomes->[$i][1] : 'none';
		my $want = $expected[$i] // 'none';
		push @bad_outcomes, "  delivery $i: expected $want, got $have" if $have ne $want;
	}
	push @diffs, "outcomes differ:", @bad_outcomes if @bad_outcomes;
	my @v = CdcTorture::Oracle::check($self->{tables}, \@md, $lines, scalar @$committed);
	push @diffs, map {"oracle: $_"} @v;
	return {
		ok        => !@diffs,
		diffs     => \@diffs,
		committed => $committed,
		outcomes  => [ map { $_->[1] } @$outcomes ],
		expected  => \@expected,
		oracle    => \@v,
	};
}

# ---------------------------------------------------------------------------
# Concurrent appliers
# ---------------------------------------------------------------------------

# Runs several psql processes at once, each applying its own list of batches
# of the same deliveries; optionally terminates one of them at a random
# moment.  Then one pass applies every delivery once more (what a consumer
# does after a rebalance), and the state is checked with the oracle.
sub run_concurrent
{
	my ($self, $lists, %o) = @_;
	my $c = $self->{counts};
	my $node = $self->{node};
	my ($ret, $out, $err) = $self->_psql($self->reset_sql);
	die "reset failed: $err" if $ret;
	my (@h, @out, @err);
	local $ENV{PGAPPNAME};
	for my $i (0 .. $#$lists)
	{
		my $sql = $self->batches_sql($lists->[$i], 'o', 0);
		$out[$i] = '';
		$err[$i] = '';
		my $connstr = $node->connstr($self->{db}) . " application_name=torture_applier_$i";
		push @h, IPC::Run::start([ 'psql', '-XAtq', '-d', $connstr, '-f', '-' ],
			'<', \$sql, '>', \$out[$i], '2>', \$err[$i], IPC::Run::timeout(600));
		$c->{calls} += scalar map {@$_} @{ $lists->[$i] };
	}
	my $killed;
	if ($o{terminate})
	{
		Time::HiRes::sleep($o{terminate_after} // 0.05);
		$killed = $o{terminate_victim} // 0;
		$node->safe_psql('postgres',
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'torture_applier_$killed'");
		$c->{terminations}++;
	}
	$_->finish for @h;
	$c->{concurrent_runs}++;
	$c->{concurrent_appliers} += @$lists;
	my @problems;
	my $errors = 0;
	for my $i (0 .. $#$lists)
	{
		for my $l (split /\n/, $err[$i])
		{
			next unless $l =~ /(ERROR|FATAL):\s+(.*)/;
			my $msg = $2;
			$errors++;
			next if $msg =~ /current transaction is aborted/;
			next if defined $killed && $i == $killed && $msg =~ /terminating connection/;
			if ($msg =~ /deadlock detected/)
			{
				$c->{deadlocks}++;
				# Batches of several events may deadlock like any multi-row
				# transactions; a single event must not.
				next if $o{batched};
			}
			push @problems, "applier $i: $l";
		}
	}
	# Catch-up: every delivery once more, one session, one event per transaction.
	my %seen;
	my @all = grep { !$seen{"$_->{msg}/$_->{gen}"}++ } map {@$_} map {@$_} @$lists;
	($ret, $out, $err) = $self->_psql($self->batches_sql([ map { [$_] } @all ], 'o', 0) . $self->dump_sql);
	push @problems, "catch-up pass failed: $err" if $ret;
	$c->{calls} += @all;
	my (undef, $lines) = $self->parse_output($out);
	my $calls;
	if (!$errors && !defined $killed)
	{
		$calls = @all;
		$calls += scalar map {@$_} @{$_} for @$lists;
	}
	my @v = CdcTorture::Oracle::check($self->{tables}, [ map { $self->model_delivery($_) } @all ], $lines, $calls);
	return { ok => !@problems && !@v, diffs => [ @problems, map {"oracle: $_"} @v ], lines => $lines };
}

# ---------------------------------------------------------------------------
# Shrinking and reproduction
# ---------------------------------------------------------------------------

# Does this sequence of batches fail (model or oracle) when applied alone?
sub fails
{
	my ($self, $batches) = @_;
	$self->{counts}{shrink_trials}++;
	my $r = $self->run_plan({ batches => $batches });
	$self->{counts}{runs}--;
	return !$r->{ok};
}

# Delta debugging over a list; $fails->(\@subset) says whether a subset
# still fails.  Returns a 1-minimal failing subset (within $budget trials).
sub ddmin
{
	my ($items, $fails, $budget) = @_;
	my @items = @$items;
	my $n = 2;
	my $trials = 0;
	while (@items >= 2 && $trials < $budget)
	{
		my $chunk = int((@items + $n - 1) / $n);
		my $reduced = 0;
		for (my $i = 0; $i < @items && $trials < $budget; $i += $chunk)
		{
			my @rest = (@items[ 0 .. $i - 1 ], @items[ min($i + $chunk, scalar @items) .. $#items ]);
			next unless @rest;
			$trials++;
			if ($fails->(\@rest))
			{
				@items = @rest;
				$n = max($n - 1, 2);
				$reduced = 1;
				last;
			}
		}
		next if $reduced;
		last if $n >= @items;
		$n = min($n * 2, scalar @items);
	}
	return \@items;
}

# Shrinks a failing committed sequence: first as one event per transaction
# (then each element is a delivery), else keeping its batches.
sub shrink
{
	my ($self, $committed, $batches, $budget) = @_;
	$budget //= 250;
	my @single = map { [$_] } @$committed;
	if ($self->fails(\@single))
	{
		my $min = ddmin(\@single, sub { $self->fails($_[0]) }, $budget);
		return { batches => $min, single => 1 };
	}
	if ($batches && $self->fails($batches))
	{
		my $min = ddmin($batches, sub { $self->fails($_[0]) }, $budget);
		return { batches => $min, single => 0 };
	}
	return undef;
}

sub lsn_text
{
	my ($l) = @_;
	return 'null' unless defined $l;
	return sprintf('%X/%X', int($l / 4294967296), $l % 4294967296);
}

# One delivery in the notation of shared/scenarios.md.
sub describe
{
	my ($self, $d) = @_;
	my $md = $self->model_delivery($d);
	my $ev = $md->{event};
	my $p = (ref $ev eq 'HASH' && exists $ev->{payload} && !exists $ev->{op}) ? $ev->{payload} : $ev;
	my $dk = defined $d->{dk} ? "dk=$d->{dk}" : 'dk=(derived)';
	return "KAFKA-TOMBSTONE" . (defined $d->{target} ? " target=$d->{target}" : '') . " $dk" unless defined $p;
	return 'HEARTBEAT' unless defined $p->{op} || defined $p->{status};
	return "TX-$p->{status} id=$p->{id}" unless defined $p->{op};
	my $s = $p->{source};
	my $img = sub { defined $_[0] ? json_encode($_[0]) : 'null' };
	my $txt = "op=$p->{op} $s->{name}:$s->{schema}.$s->{table}";
	$txt .= ' before=' . $img->($p->{before}) if defined $p->{before};
	$txt .= ' after=' . $img->($p->{after}) if defined $p->{after};
	$txt .= ' lsn=' . lsn_text($s->{lsn});
	$txt .= ' clsn=' . lsn_text($s->{commit_lsn}) if defined $s->{commit_lsn};
	$txt .= " tx=$s->{txId}" if defined $s->{txId};
	$txt .= " total_order=$p->{transaction}{total_order}" if $p->{transaction};
	$txt .= " snap=$s->{snapshot}" if $p->{op} eq 'r';
	return "$txt $dk";
}

# The text printed for a failing case, and the regression file content.
sub reproduction
{
	my ($self, $name, $batches, $result) = @_;
	my $text = "minimal reproduction of $name (" . scalar(map {@$_} @$batches) . " deliveries, in this order):\n";
	my $i = 0;
	for my $b (@$batches)
	{
		my $tx = @$b > 1 ? ' [one transaction]' : '';
		for my $d (@$b)
		{
			my $exp = $result->{expected}[$i] // '?';
			my $got = $result->{outcomes}[$i] // '?';
			$text .= sprintf("  d%-3d %s%s  -> expected %s, got %s\n", $i, $self->describe($d), $tx, $exp, $got);
			$i++;
		}
	}
	$text .= "differences (model/oracle vs database):\n" . join("\n", @{ $result->{diffs} }) . "\n";
	$text .= "SQL:\n" . $self->batches_sql($batches, 'o', 0);
	my $file = json_encode({
		name       => $name,
		batches    => [ map { [ map { { json => $_->{json}, dk => $_->{dk}, target => $_->{target} } } @$_ ] } @$batches ],
	});
	return ($text, $file);
}

1;

# Applies deliveries through cdc_apply() on a real server and checks the
# result against the reference model (Model.pm) and the order-independent
# properties (Oracle.pm).
#
# One database is reused for every seed; reset() empties the targets and
# the engine's state between runs.  A run is one psql round trip (reset,
# every batch, and the state dump), so hundreds of seeds fit in minutes.
# Faults: a backend terminated in the middle of a transaction
# (pg_terminate_backend), an event failing in the middle of a transaction,
# the postmaster stopped in immediate mode (a crash: no shutdown checkpoint,
# WAL recovery at start) after a commit and optionally with a transaction in
# flight, each followed by re-delivery from an earlier position; two or four
# appliers sharing the same deliveries, started at the same moment, one of
# them possibly terminated at a random time.
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
		workdir => $a{workdir},  # scratch files of concurrent appliers
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
	# The OIDs of the targets: the ledger keeps digests of (target OID,
	# delivery key), which the model computes (Model::ledger_digest).
	for my $l (split /\n/, $node->safe_psql($self->{db}, q{SELECT oid::regclass::text || '|' || oid FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace}))
	{
		my ($t, $oid) = split /\|/, $l;
		$self->{tables}{$t}{oid} = $oid if $self->{tables}{$t};
	}
}

sub reset_sql
{
	my ($self) = @_;
	# DELETE rather than TRUNCATE: the tables are tiny, and TRUNCATE of a
	# dozen tables per run (new files each time) dominates a run's time.
	my $sql = join('', map {qq{DELETE FROM "$_";\n}} sort keys %{ $self->{tables} });
	$sql .= "DELETE FROM cdc.$_;\n"
	  for qw(ledger ledger_range ledger_partition entity_state table_barrier outbox conflicts counters prune_watermark dead_letter);
	# Every run re-uses the same delivery keys and entity keys; dead index
	# entries of earlier runs would make every unique check slower, so
	# vacuum now and then.
	if (++$self->{resets} % 8 == 0)
	{
		$sql .= 'VACUUM ' . join(', ', (map {qq{"$_"}} sort keys %{ $self->{tables} }),
			map {"cdc.$_"} qw(ledger ledger_range ledger_partition entity_state table_barrier outbox_rows conflicts counters)) . ";\n";
	}
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
	if ($d->{control})
	{
		# The operator re-registers a mapping (a new source epoch).
		my %t = (%{ $self->{tables}{ $d->{control}{table} } }, %{ $d->{control} }, name => $d->{control}{table});
		(my $sql = mapping_sql(\%t)) =~ s/^SELECT 1 /SELECT '$tag|$n|control' /;
		return "$sql\n";
	}
	my $ev = !defined $d->{json} ? 'NULL::jsonb' : _lit($d->{json}) . ($d->{text_arg} ? '::text' : '::jsonb');
	my $target = defined $d->{target} ? _lit($d->{target}) . '::regclass' : 'NULL';
	return "SELECT '$tag|$n|' || cdc_apply($ev, $target, " . _lit($d->{dk}) . ");\n";
}

# One cdc_apply_batch() call for deliveries that share their target
# argument; its output is one "<tag>|<n>|<outcome>" line per delivery, in
# order.  The three input forms rotate: jsonb[], a JSON array (jsonb), and
# the JSON array as text.
sub batch_call_sql
{
	my ($self, $group, $tag, $n0) = @_;
	my $dks = 'ARRAY[' . join(', ', map { _lit($_->{dk}) } @$group) . ']::text[]';
	$self->{counts}{batch_calls}++;
	return _batch_call($group, $tag, $n0, "$dks, true");
}

# One cdc_apply_batch() call with claims by offset range: the deliveries of
# $group share their target argument and the source partition $partition
# (topic:generation:partition), their offsets strictly increase, and the
# offsets between them hold no delivery to come (offsets_run_extends).  The
# delivery key of each is <partition>:<offset>, the one cdc_apply() gets in
# the other modes.
sub offsets_call_sql
{
	my ($self, $group, $tag, $n0, $partition) = @_;
	my $offs = 'ARRAY[' . join(', ', map { (_kafka_coordinates($_->{dk}))[1] } @$group) . ']::bigint[]';
	$self->{counts}{batch_calls}++;
	$self->{counts}{offsets_calls}++;
	$self->{counts}{offsets_events} += @$group;
	$self->{counts}{offsets_multi_calls}++ if @$group > 1;
	return _batch_call($group, $tag, $n0, 'NULL, true, ' . _lit($partition) . ", $offs");
}

# The call of cdc_apply_batch() with the events of $group and the arguments
# after the target ($rest); the three input forms rotate: jsonb[], a JSON
# array (jsonb), and the JSON array as text.
sub _batch_call
{
	my ($group, $tag, $n0, $rest) = @_;
	my $target = defined $group->[0]{target} ? _lit($group->[0]{target}) . '::regclass' : 'NULL';
	my $events;
	my $form = $n0 % 3;
	if ($form == 0)
	{
		$events = 'ARRAY[' . join(', ', map { defined $_->{json} ? _lit($_->{json}) . '::jsonb' : 'NULL::jsonb' } @$group) . ']::jsonb[]';
	}
	else
	{
		$events = _lit('[' . join(', ', map { $_->{json} // 'null' } @$group) . ']') . ($form == 1 ? '::jsonb' : '::text');
	}
	return "SELECT '$tag|' || ($n0 + o.ord - 1) || '|' || o.outcome FROM cdc_apply_batch($events, $target, $rest) r, "
	  . "unnest(r.outcomes) WITH ORDINALITY AS o(outcome, ord) ORDER BY o.ord;\n";
}

# (partition, offset) of a Kafka delivery key topic:generation:partition:offset.
sub _kafka_coordinates
{
	my ($dk) = @_;
	return unless defined $dk && $dk =~ /^(.+:\d+:\d+):(\d+)$/;
	return ($1, $2);
}

# The records of a plan for apply mode 'offsets': partition -> offset ->
# {change => the record is a change (not a Kafka tombstone), kafka => it is
# delivered under its Kafka key}, from every delivery of the plan.
sub offsets_records
{
	my ($batches) = @_;
	my %rec;
	for my $d (map {@$_} @$batches)
	{
		my ($p, $o) = _kafka_coordinates($d->{kafka} // $d->{dk}) or next;
		my $r = $rec{$p}{$o} //= {};
		$r->{change} = 1 if defined $d->{json} && $d->{json} ne 'null';
		$r->{kafka} = 1 if defined $d->{dk};
	}
	return \%rec;
}

# May a call with claims by offset range that ends at offset $a of
# $partition take the delivery at offset $b > $a as well?  Its range would
# cover every offset in between (ledger_range: "the offsets between them
# that the batch did not carry"), so each must be something no delivery to
# the target will ever bring: a Kafka tombstone, an offset that no delivery
# of the plan has (compacted away), or one delivered under its Kafka key
# and committed already (its own range lies in between, and the new claim
# stops short of it).  A change that comes later, or only under a derived
# key, ends the call: a consumer reads a partition in order, so it never
# skips a record it will deliver afterwards.
sub offsets_run_extends
{
	my ($self, $partition, $a, $b) = @_;
	my $rec = $self->{offsets_records}{$partition} || {};
	for my $o ($a + 1 .. $b - 1)
	{
		my $r = $rec->{$o} or next;
		next unless $r->{change};
		return 0 unless $r->{kafka} && $self->{offsets_done}{"$partition:$o"};
	}
	return 1;
}

# SQL for a list of batches; a batch of several deliveries is one
# transaction.  In apply mode 'batch' (run_plan's {apply => 'batch'}) the
# deliveries of a batch go through cdc_apply_batch(), one call per run of
# deliveries with the same target argument; control records stay single.
# In apply mode 'offsets' every delivery with a Kafka delivery key
# (topic:generation:partition:offset) goes through cdc_apply_batch() with
# source_partition and offsets: one call per run of deliveries with the same
# target argument, the same partition and strictly increasing offsets
# (offsets_run_extends says when a gap ends a run); the deliveries with
# derived keys go as in mode 'batch', control records stay single.  So no
# delivery key is ever claimed both by range and by a ledger row.  $tag 'o'
# marks deliveries that commit (later runs may then claim around their
# offsets), anything else a transaction that will not.
sub batches_sql
{
	my ($self, $batches, $tag, $n0) = @_;
	my $sql = '';
	my $n = $n0 // 0;
	my $apply = $self->{apply} // 'single';
	local $self->{offsets_done} = { %{ $self->{offsets_done} || {} } } if $tag ne 'o';
	for my $b (@$batches)
	{
		my $tx = @$b > 1;
		$sql .= "BEGIN;\n" if $tx;
		if ($apply eq 'single')
		{
			$sql .= $self->delivery_sql($_, $tag, $n++) for @$b;
		}
		else
		{
			my @group;
			my $partition;    # of the group: claims by offset range
			my $flush = sub {
				return unless @group;
				$sql .= defined $partition ? $self->offsets_call_sql([@group], $tag, $n, $partition)
				  : $self->batch_call_sql([@group], $tag, $n);
				$n += @group;
				@group = ();
			};
			for my $d (@$b)
			{
				if ($d->{control})
				{
					$flush->();
					$sql .= $self->delivery_sql($d, $tag, $n++);
					next;
				}
				my ($p, $o) = $apply eq 'offsets' ? _kafka_coordinates($d->{dk}) : ();
				die "apply mode $apply: unknown" unless $apply eq 'batch' || $apply eq 'offsets';
				if (@group)
				{
					my $same = ($group[0]{target} // '') eq ($d->{target} // '') && ($partition // '') eq ($p // '');
					if ($same && defined $p)
					{
						my $last = (_kafka_coordinates($group[-1]{dk}))[1];
						$same = $o > $last && $self->offsets_run_extends($p, $last, $o);
					}
					$flush->() unless $same;
				}
				$partition = $p;
				push @group, $d;
				$self->{offsets_done}{"$p:$o"} = 1 if defined $p;
			}
			$flush->();
		}
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
SELECT 'S|ent|' || target::text || '|' || entity_key::text || '|' || source_name || '|' || version::text || '|' || CASE WHEN is_tombstone THEN 't' ELSE 'f' END FROM cdc.entities;
SELECT 'S|bar|' || target::text || '|' || source_name || '|' || version::text FROM cdc.table_barrier;
SELECT 'S|led|' || target::text || '|' || digest FROM cdc.ledger;
SELECT 'S|obx|' || idempotency_key || '|' || target::text || '|' || coalesce(entity_key::text, 'null') || '|' || op || '|' || version::text || '|' || row_number() OVER (PARTITION BY target, entity_key ORDER BY id) FROM cdc.outbox;
SELECT 'S|obo|' || row_number() OVER (ORDER BY id) || '|' || idempotency_key FROM cdc.outbox;
SELECT 'S|cfl|' || target::text || '|' || entity_key::text || '|' || delivery_key || '|' || op || '|' || event_version::text || '|' || row_number() OVER (ORDER BY id) FROM cdc.conflicts;
SELECT 'S|st|' || target::text || '|' || applied || '|' || duplicate || '|' || stale || '|' || conflict || '|' || ignored || '|' || blocked_resurrections || '|' || outbox_rows || '|' || snapshot_rows FROM cdc.stats;
SQL
	# Claims by offset range leave no ledger row: what cdc.delivery_processed()
	# says about the probes of the run (offsets_probes).
	if (my @p = @{ $self->{dp_probes} || [] })
	{
		$sql .= "SELECT 'S|dp|' || x.t || '|' || x.dk || '|' || cdc.delivery_processed(x.t::regclass, x.dk)::text FROM unnest("
		  . 'ARRAY[' . join(', ', map { _lit($_->[0]) } @p) . ']::text[], '
		  . 'ARRAY[' . join(', ', map { _lit($_->[1]) } @p) . ']::text[]) AS x(t, dk);' . "\n";
	}
	return $sql;
}

# The (target, delivery key) pairs whose cdc.delivery_processed() a run in
# apply mode 'offsets' reads: every Kafka-keyed change or truncate of the
# plan (all are committed at least once, so each must be true), and keys
# that must be false: the offset after the last record of each partition,
# the Kafka coordinates of changes delivered only under derived keys (no
# range may cover them: offsets_run_extends), and each partition's first
# offset for another target.  The model and the oracle know which is
# which: a pair is processed when their ledger holds it.  Offsets of
# records that are no delivery to a target (Kafka tombstones, truncates of
# a table whose mapping ignores them) are not probed: a range covers them
# when they lie between claimed offsets, and the truncate's own offset is
# claimed as well (docs/torture.md, "Observations").
sub offsets_probes
{
	my ($self, $batches) = @_;
	my $m = CdcTorture::Model->new(tables => $self->{tables});
	my (%p, %last, %target_of);
	my $rec = $self->{offsets_records} || {};
	for my $d (map {@$_} @$batches)
	{
		next if $d->{control};
		my ($part, $o) = _kafka_coordinates($d->{kafka} // $d->{dk}) or next;
		my $x = eval { $m->interpret($self->model_delivery($d)) } or next;
		next if $x->{kind} eq 'ignored';
		$p{"$x->{target}\n$part:$o"} = [ $x->{target}, "$part:$o" ];
		$last{"$x->{target}\n$part"} = 1 + List::Util::max(keys %{ $rec->{$part} || {} }, $o);
		$target_of{$part} //= [ $x->{target}, $o ];
	}
	for my $k (keys %last)
	{
		my ($t, $part) = split /\n/, $k;
		$p{"$t\n$part:$last{$k}"} = [ $t, "$part:$last{$k}" ];
	}
	my @targets = sort grep { $self->{tables}{$_}{oid} } keys %{ $self->{tables} };
	for my $part (keys %target_of)
	{
		my ($t, $o) = @{ $target_of{$part} };
		my ($other) = grep { $_ ne $t } @targets or next;
		$p{"$other\n$part:$o"} = [ $other, "$part:$o" ];
	}
	return [ map { $p{$_} } sort keys %p ];
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
		elsif ($kind eq 'obx' || $kind eq 'cfl')
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

# Runs SQL in the driver's long-lived psql session (one backend for many
# runs: no connection and cache warm-up per run).  Returns (failed, stdout,
# stderr) like PostgreSQL::Test::Cluster::psql.  A session that died (its
# backend was terminated, the postmaster crashed) is replaced.
sub _psql
{
	my ($self, $sql, %o) = @_;
	my $t0 = Time::HiRes::time();
	my $s = $self->{session};
	if (!$s || !$s->{h}->pumpable)
	{
		eval { $s->{h}->finish if $s; 1 };
		$s = $self->{session} = { in => '', out => '', err => '', n => 0 };
		$s->{h} = IPC::Run::start([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=0', '-d', $self->{node}->connstr($self->{db}), '-f', '-' ],
			'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{err}, $s->{timer} = IPC::Run::timeout(600));
	}
	my $n = ++$s->{n};
	my $mark = "__torture_done_$n";
	$s->{out} = '';
	$s->{err} = '';
	$s->{timer}->start(600);
	$s->{in} .= $sql . "\n\\echo $mark\n\\warn $mark\n";
	my $dead = 0;
	while (!($s->{out} =~ /^$mark$/m && $s->{err} =~ /^$mark$/m))
	{
		if (!$s->{h}->pumpable)
		{
			$dead = 1;
			last;
		}
		eval { $s->{h}->pump; 1 } or do { $dead = 1; last; };
	}
	my ($out, $err) = ($s->{out}, $s->{err});
	$out =~ s/^$mark\n?//m;
	$err =~ s/^$mark\n?//m;
	if ($dead)
	{
		eval { $s->{h}->finish; 1 };
		delete $self->{session};
	}
	$self->{counts}{psql_seconds} += Time::HiRes::time() - $t0;
	my $failed = $dead || $err =~ /^(?:psql:.*?)?(?:ERROR|FATAL|PANIC):/m ? 1 : 0;
	return ($failed, $out, $err);
}

# Ends the session (before a crash: its backend would die anyway).
sub close_session
{
	my ($self) = @_;
	my $s = delete $self->{session} or return;
	$s->{in} .= "\\q\n";
	eval { $s->{h}->finish; 1 };
}

# ---------------------------------------------------------------------------
# Deterministic runs (one applier, crashes at chosen points)
# ---------------------------------------------------------------------------

# $plan = {batches => [...], twice => 0|1, apply => 'single' (one
# cdc_apply() per delivery, the default) | 'batch' (cdc_apply_batch() per
# batch), crashes => [{at, kind => terminate
# | error | postmaster, partial, rewind_to}]}: the batches before batch `at`
# commit, then `partial` events of batch `at` run in an open transaction and
# the fault hits; delivery resumes at batch `rewind_to` (<= at: re-delivery
# from an earlier position).  Returns {ok, diffs, committed, outcomes,
# expected, lines, model_lines}.
sub run_plan
{
	my ($self, $plan) = @_;
	my $c = $self->{counts};
	my $batches = $plan->{batches};
	local $self->{apply} = $plan->{apply} // $self->{apply_default} // 'single';
	my $offsets = $self->{apply} eq 'offsets';
	local $self->{offsets_records} = $offsets ? offsets_records($batches) : undef;
	local $self->{offsets_done} = {};
	local $self->{dp_probes} = $offsets ? $self->offsets_probes($batches) : undef;
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
		if ($crash->{kind} eq 'error')
		{
			# An event fails in the middle of a transaction (a bad record): the
			# whole transaction rolls back, its claims included; the session
			# lives on and the consumer re-delivers.
			$sql .= "BEGIN;\n" . $self->batches_sql([ map { [$_] } @partial ], 'x', 0)
			  . "SELECT cdc_apply('{\"op\": \"x\"}'::jsonb);\nSELECT 'x|never|reached';\nCOMMIT;\n";
			my ($ret, $out, $err) = $self->_psql($sql);
			push @errors, "error injection: expected the bad event's error, got: $err" unless $err =~ /unknown op "x"/;
			push @errors, "error injection: the session died: $err" if !$self->{session};
			my ($o) = $self->parse_output($out);
			push @outcomes, @$o;
			$c->{injected_errors}++;
		}
		elsif ($crash->{kind} eq 'terminate')
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
			$self->close_session;
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
	return $self->judge(\@committed, \@outcomes, $lines, \@errors, $plan->{no_oracle}, $offsets ? $self->{dp_probes} : undef);
}

# Compares a committed delivery sequence, its outcomes and the database
# state with the model and the oracle.  $probes (apply mode 'offsets'): the
# pairs of offsets_probes; then the deliveries with a delivery key given
# (all Kafka keys) were claimed by offset range: they have no ledger row,
# and cdc.delivery_processed() must say true for exactly the probes the
# model's ledger holds.
sub judge
{
	my ($self, $committed, $outcomes, $lines, $errors, $no_oracle, $probes) = @_;
	my $t0 = Time::HiRes::time();
	my $model = CdcTorture::Model->new(tables => { map { $_ => { %{ $self->{tables}{$_} } } } keys %{ $self->{tables} } });
	my @md = map { $self->model_delivery($_) } @$committed;
	my @expected;
	my @diffs = @{ $errors || [] };
	for my $i (0 .. $#md)
	{
		if ($committed->[$i]{control})
		{
			$model->set_epoch($committed->[$i]{control}{table}, $committed->[$i]{control}{epoch});
			push @expected, 'control';
			next;
		}
		my $o = eval { $model->deliver($md[$i]) };
		if (!defined $o)
		{
			push @diffs, "model rejected delivery $i: $@";
			last;
		}
		push @expected, $o;
	}
	my $want = $model->state_lines(ranged => !!$probes);
	if ($probes)
	{
		push @$want, map { "dp|$_->[0]|$_->[1]|" . ($model->claimed($_->[0], $_->[1]) ? 'true' : 'false') } @$probes;
		$want = [ sort @$want ];
	}
	push @diffs, diff_lines($want, $lines);
	my @bad_outcomes;
	for my $i (0 .. max($#expected, $#$outcomes))
	{
		my $have = $outcomes->[$i] ? $outcomes->[$i][1] : 'none';
		my $want = $expected[$i] // 'none';
		push @bad_outcomes, "  delivery $i: expected $want, got $have" if $have ne $want;
	}
	push @diffs, "outcomes differ:", @bad_outcomes if @bad_outcomes;
	my $t1 = Time::HiRes::time();
	my @v = $no_oracle ? () : CdcTorture::Oracle::check($self->{tables}, \@md, $lines, scalar @$committed, ranged => !!$probes);
	push @diffs, map {"oracle: $_"} @v;
	$self->{counts}{model_seconds} += $t1 - $t0;
	$self->{counts}{oracle_seconds} += Time::HiRes::time() - $t1;
	return {
		lines       => $lines,
		model_lines => $want,
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

# A batch as one statement (one transaction in autocommit), retried (up to
# eight attempts) when it fails, as a consumer retries a failed transaction before it moves
# on (so a deadlock never reorders a key's events).
sub retry_batches_sql
{
	my ($self, $batches) = @_;
	my $sql = '';
	my $n = 0;
	for my $b (@$batches)
	{
		# A delivery marked sync_tick is started at the next 100 ms boundary
		# of the clock, so that all appliers reach it together.
		$sql .= "SELECT pg_sleep((100 - (extract(epoch FROM clock_timestamp()) * 1000)::bigint % 100) / 1000.0);\n"
		  if grep { $_->{sync_tick} } @$b;
		my @rows;
		for my $d (@$b)
		{
			(my $call = $self->delivery_sql($d, 'o', $n++)) =~ s/^SELECT (.*);\n$/$1/s;
			push @rows, '(' . scalar(@rows) . ", $call)";
		}
		my $stmt = 'SELECT x FROM (VALUES ' . join(', ', @rows) . ") v(i, x) ORDER BY i;\n";
		my $tries = $self->{retries} // 8;
		$sql .= $stmt . ("\\if :ERROR\n" . $stmt) x ($tries - 1) . "\\if :ERROR\n\\echo gave up\n\\endif\n"
		  . "\\endif\n" x ($tries - 1);
	}
	return $sql;
}
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
	# The driver's session holds an advisory lock that every applier waits
	# for first, so that they all start at the same moment.
	my ($ret, $out, $err) = $self->_psql($self->reset_sql . "SELECT pg_advisory_lock(4242);\n");
	die "reset failed: $err" if $ret;
	my (@h, @out, @err);
	local $ENV{PGAPPNAME};
	# Scripts and outputs go through files: the appliers must run while
	# this process only polls (IPC::Run feeds scalars only when pumped).
	my $dir = $self->{workdir} // '/tmp';
	for my $i (0 .. $#$lists)
	{
		my $sql = "SELECT pg_advisory_lock_shared(4242);\nSELECT pg_advisory_unlock_shared(4242);\n"
		  . $self->retry_batches_sql($lists->[$i]);
		open my $fh, '>', "$dir/applier_$i.sql" or die "$dir/applier_$i.sql: $!";
		print $fh $sql;
		close $fh;
		my $connstr = $node->connstr($self->{db}) . " application_name=torture_applier_$i";
		push @h, IPC::Run::start([ 'psql', '-XAtq', '-d', $connstr, '-f', "$dir/applier_$i.sql" ],
			'<', '/dev/null', '>', "$dir/applier_$i.out", '2>', "$dir/applier_$i.err", IPC::Run::timeout(600));
		$c->{calls} += scalar map {@$_} @{ $lists->[$i] };
	}
	my $waiting = 0;
	for (1 .. 500)
	{
		(undef, $waiting) = $self->_psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted;");
		last if ($waiting // 0) =~ /^(\d+)/ && $1 >= @$lists;
		Time::HiRes::sleep(0.01);
	}
	$self->_psql("SELECT pg_advisory_unlock(4242);\n");
	my $killed;
	if ($o{terminate})
	{
		Time::HiRes::sleep($o{terminate_after} // 0.05);
		$killed = $o{terminate_victim} // 0;
		$node->safe_psql('postgres',
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'torture_applier_$killed'");
		$c->{concurrent_terminations}++;
	}
	for my $i (0 .. $#h)
	{
		# A terminated applier's psql exits before reading all its input.
		eval { $h[$i]->finish; 1 } or do { eval { $h[$i]->kill_kill; 1 }; $err[$i] .= "\nFATAL:  terminating connection (psql gone: $@)" };
		for my $f ([ out => \$out[$i] ], [ err => \$err[$i] ])
		{
			open my $fh, '<', "$dir/applier_$i.$f->[0]" or die $!;
			local $/;
			${ $f->[1] } = <$fh> . (${ $f->[1] } // '');
			close $fh;
		}
	}
	$c->{concurrent_runs}++;
	$c->{concurrent_appliers} += @$lists;
	my @problems;
	my $errors = 0;
	my $committed_calls = 0;
	for my $i (0 .. $#$lists)
	{
		$committed_calls += () = $out[$i] =~ /^o\|/mg;
		# psql error reports: "psql:<stdin>:N: ERROR: ..." then DETAIL/CONTEXT lines.
		my @reports = split /^(?=psql:|ERROR:|FATAL:)/m, $err[$i];
		for my $rep (@reports)
		{
			next unless $rep =~ /(ERROR|FATAL):\s+([^\n]*)/;
			my $msg = $2;
			$errors++;
			next if $msg =~ /current transaction is aborted/;
			next if defined $killed && $i == $killed && $msg =~ /terminating connection|psql gone/;
			if ($msg =~ /deadlock detected/)
			{
				$c->{deadlocks}++;
				# Batches of several events may deadlock like any multi-row
				# transactions (the batch is retried); a single event must not.
				next if $o{batched};
			}
			push @problems, "applier $i: $rep";
		}
		push @problems, "applier $i: a batch failed eight times in a row" if $out[$i] =~ /^gave up$/m;
	}
	# Catch-up: every delivery once more, one session, one event per transaction.
	my %seen;
	my @all = grep { !$seen{"$_->{msg}/$_->{gen}"}++ } map {@$_} map {@$_} @$lists;
	($ret, $out, $err) = $self->_psql($self->batches_sql([ map { [$_] } @all ], 'o', 0) . $self->dump_sql);
	push @problems, "catch-up pass failed: $err" if $ret;
	$c->{calls} += @all;
	my (undef, $lines) = $self->parse_output($out);
	# Outcome lines are printed only for committed statements, so the calls
	# are known exactly unless a backend was terminated (it may die after its
	# commit, before its result reached psql).
	my $calls = defined $killed ? undef : $committed_calls + @all;
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
	local $self->{apply} = $self->{apply_default} // 'single';
	local $self->{offsets_records} = offsets_records($batches);
	local $self->{offsets_done} = {};
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
	$text .= "SQL (apply mode $self->{apply}):\n" . $self->batches_sql($batches, 'o', 0);
	my $file = json_encode({
		name       => $name,
		batches    => [ map { [ map { { json => $_->{json}, dk => $_->{dk}, target => $_->{target} } } @$_ ] } @$batches ],
	});
	return ($text, $file);
}


# ---------------------------------------------------------------------------
# Ledger expiry (docs/retention.md): the deliveries are applied once and
# checked against the model; then everything is moved 30 days into the past
# and cdc.prune() removes the whole ledger and every tombstone (a horizon of
# one day); then a window of the same deliveries is replayed.  The state must
# still be right through the remaining records and the prune watermark, and
# the replay of a pruned change must be reported (expired, the default
# policy), never applied again:
#   X1 pruning: the ledger and the tombstones are gone, rows and live entity
#      records are untouched;
#   X2 no double apply: no replay is applied, except a change that was a
#      recorded conflict in the first run (never applied, now newer than the
#      entity's record); the outbox grows by exactly those, and its
#      idempotency keys stay distinct;
#   X3 rows and live entity records after the replay equal those before it
#      (tables without such applied replays);
#   X4 outcomes: a change of an entity with a live record is duplicate or
#      stale; one of an entity whose tombstone was pruned is expired (or
#      stale under a truncate barrier, or a conflict again); expired never
#      happens to an entity with a live record.
# With batched => 1 everything goes through cdc_apply_batch() (apply mode
# 'batch'), the replay in calls of up to 8 deliveries, so that the batch
# engine meets the prune watermark: its outcomes must be the same as one by
# one, so the same properties hold.
# ---------------------------------------------------------------------------
sub run_expiry
{
	my ($self, $batches, $window_start, %opt) = @_;
	my $r = $self->run_plan({ batches => $batches, ($opt{batched} ? (apply => 'batch') : ()) });
	return $r unless $r->{ok};
	my @committed = @{ $r->{committed} };
	my %before = _by_kind($r->{lines});

	my ($ret, $out, $err) = $self->_psql(q{
UPDATE cdc.ledger SET claimed_s = claimed_s - 30 * 86400;
UPDATE cdc.entity_state SET touched_s = touched_s - 30 * 86400;
SELECT 'p|' || relation || '|' || removed FROM cdc.prune(1000000, interval '1 day');
} . $self->dump_sql);
	my @diffs;
	push @diffs, "prune failed: $err" if $ret;
	my (undef, $pruned_lines) = $self->parse_output($out);
	my %pruned = _by_kind($pruned_lines);
	push @diffs, "X1 ledger not empty after pruning everything: " . scalar(@{ $pruned{led} || [] }) . " entries"
	  if @{ $pruned{led} || [] };
	my @tomb_left = grep { /\|t$/ } @{ $pruned{ent} || [] };
	push @diffs, "X1 tombstones left after pruning: @tomb_left" if @tomb_left;
	my @live_before = sort grep { /\|f$/ } @{ $before{ent} || [] };
	my @live_pruned = sort grep { /\|f$/ } @{ $pruned{ent} || [] };
	push @diffs, "X1 live entity records changed by pruning" if "@live_before" ne "@live_pruned";
	push @diffs, "X1 rows changed by pruning" if join("\n", sort @{ $before{row} || [] }) ne join("\n", sort @{ $pruned{row} || [] });

	# The window: the committed deliveries from $window_start on, again.
	my @window = @committed[ min($window_start, $#committed) .. $#committed ];
	my @replay = map { [$_] } grep { !$_->{control} } @window;
	my @replay_batches = @replay;
	if ($opt{batched})
	{
		@replay_batches = ();
		for (my $i = 0; $i < @replay; $i += 8)
		{
			my $j = min($i + 7, $#replay);
			push @replay_batches, [ map { $_->[0] } @replay[ $i .. $j ] ];
		}
	}
	{
		local $self->{apply} = $opt{batched} ? 'batch' : 'single';
		($ret, $out, $err) = $self->_psql($self->batches_sql(\@replay_batches, 'o', 0) . $self->dump_sql);
	}
	push @diffs, "replay failed: $err" if $ret;
	my ($outcomes, $after_lines) = $self->parse_output($out);
	my %after = _by_kind($after_lines);
	$self->{counts}{expiry_runs}++;
	$self->{counts}{expiry_replays} += @replay;

	# What each replayed change is about, from the model's reading of it.
	my $model = CdcTorture::Model->new(tables => $self->{tables});
	my %live = map { my @f = split /\|/; ("$f[1]|$f[2]" => 1) } @live_before;
	my %tomb = map { my @f = split /\|/; ("$f[1]|$f[2]" => 1) } grep { /\|t$/ } @{ $before{ent} || [] };
	my %conflicted = map { my @f = split /\|/; ("$f[1]|$f[3]" => 1) } @{ $before{cfl} || [] };
	my (%applied_tables, $applied, $expired);
	for my $i (0 .. $#replay)
	{
		my $o = $outcomes->[$i] ? $outcomes->[$i][1] : 'none';
		my $x = eval { $model->interpret($self->model_delivery($replay[$i][0])) } or do { push @diffs, "model: $@"; next; };
		$expired++ if $o eq 'expired';
		next if $x->{kind} eq 'ignored' || $x->{kind} eq 'truncate';
		my $ek = "$x->{target}|" . CdcTorture::Model::canon_key($x->{entity_key});
		my $what = $self->describe($replay[$i][0]);
		if ($o eq 'applied')
		{
			$applied++;
			$applied_tables{ $x->{target} } = 1;
			push @diffs, "X2 replay applied a change that was not a recorded conflict: $what"
			  unless $conflicted{"$x->{target}|$x->{delivery_key}"};
			next;
		}
		next if $x->{old_key};    # a key change: the outcome is the new key's, the old key's delete is implied
		if ($live{$ek})
		{
			push @diffs, "X4 replay of a change of live entity $ek: $o, expected duplicate or stale: $what"
			  unless $o eq 'duplicate' || $o eq 'stale';
		}
		elsif ($tomb{$ek})
		{
			push @diffs, "X4 replay of a change of pruned entity $ek: $o, expected expired: $what"
			  unless $o eq 'expired' || $o eq 'stale' || $o eq 'conflict';
		}
		elsif ($o eq 'duplicate')
		{
			push @diffs, "X4 replay of a change of unrecorded entity $ek: duplicate: $what";
		}
	}
	my $obx_before = @{ $before{obx} || [] };
	my $obx_after = @{ $after{obx} || [] };
	push @diffs, "X2 outbox rows: $obx_before before the replay, $obx_after after, $applied changes applied"
	  if $obx_after > $obx_before + ($applied // 0);
	my %ik;
	$ik{ (split /\|/)[1] }++ for @{ $after{obx} || [] };
	push @diffs, "X2 duplicate idempotency keys after the replay: " . join(' ', grep { $ik{$_} > 1 } sort keys %ik)
	  if grep { $_ > 1 } values %ik;
	for my $kind (qw(row ent))
	{
		my @b = sort grep { my $t = (split /\|/)[1]; !$applied_tables{$t} && ($kind eq 'row' || /\|f$/) } @{ $before{$kind} || [] };
		my @a = sort grep { my $t = (split /\|/)[1]; !$applied_tables{$t} && ($kind eq 'row' || /\|f$/) } @{ $after{$kind} || [] };
		push @diffs, "X3 $kind lines changed by the replay:\n  before " . join("\n         ", @b) . "\n  after  " . join("\n         ", @a)
		  if "@b" ne "@a";
	}
	$self->{counts}{expiry_expired} += $expired // 0;
	$self->{counts}{expiry_reapplied_conflicts} += $applied // 0;
	return { %$r, ok => !@diffs, diffs => \@diffs, expired => $expired // 0 };
}

sub _by_kind
{
	my ($lines) = @_;
	my %by;
	push @{ $by{ (split /\|/, $_, 2)[0] } }, $_ for @$lines;
	return %by;
}

1;

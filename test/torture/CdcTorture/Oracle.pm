# Order-independent checks of a destination state.
#
# The reference model (Model.pm) replays the deliveries in the order the
# destination committed them.  When that order is unknown -- several
# appliers racing on the same deliveries -- these properties must still
# hold, whatever the interleaving (they hold for any order, so they are
# also checked after every deterministic run, as a second opinion on the
# model):
#
#   P1 barrier   a table's barrier is the greatest delivered truncate version.
#   P2 version   for every entity, among the delivered changes above the
#                barrier, the stored version is the greatest one that was not
#                recorded as a conflict; every newer change is a recorded
#                conflict (unavailable values for a row the destination
#                lacked).  No change above the barrier: no record.
#   P3 image     the entity's row exists iff its stored change is not a
#                delete, and holds that change's available columns; no row
#                without an entity record; no placeholder is ever stored.
#   P4 ledger    the ledger holds exactly the (target, delivery key) pairs of
#                the delivered change records (as digests).  With claims by
#                offset range (ranged => 1: every delivery that names its
#                key is claimed by range) it holds exactly those with
#                derived keys, and cdc.delivery_processed() (the driver's
#                dp lines) is true for a probed pair if and only if it is
#                one of the delivered change records.
#   P5 outbox    every outbox row is one delivered non-snapshot change (or
#                truncate) with the idempotency key of its source identity;
#                the stored change of every entity, unless a snapshot read,
#                has its outbox row; the greatest truncate has its row;
#                per target, count(outbox) = cdc.stats.outbox_rows.
#   P6 counts    sum(cdc.stats.conflict) = count(cdc.conflicts); when the
#                number of committed calls is known, the outcome counters
#                add up to it.
#   P7 outbox =  the outbox holds exactly the applied changes, in per-key
#      applied   order: per target with an outbox, its rows are as many as
#                its applied changes that are no snapshot reads, plus the
#                implied deletes of applied key changes (applied -
#                snapshot_rows + implied deletes = rows), and the rows of
#                one entity (of a table's truncates), in insertion order,
#                have strictly increasing versions: a change applies only
#                above the stored version (or the barrier), so its row
#                comes after the rows of every older change of the key.
package CdcTorture::Oracle;
use strict;
use warnings;
use CdcTorture::Model;
use CdcTorture::Schema qw(json_encode json_decode version_text version_cmp $PLACEHOLDER $PLACEHOLDER_B64);

# $tables: table descriptions; $deliveries: every delivery that may have been
# committed (at least once) -- {event, dk, target}; $lines: the database
# state as lines (Driver::read_state); $calls: committed calls, if known;
# %opt: ranged => 1 when the deliveries that name their key were claimed by
# offset range (P4).  Returns a list of violations (strings).
sub check
{
	my ($tables, $deliveries, $lines, $calls, %opt) = @_;
	my $m = CdcTorture::Model->new(tables => $tables);
	my (%trunc, %cand, %dk, %ranged, %db);
	for my $d (@$deliveries)
	{
		my $x = $m->interpret($d);
		next if $x->{kind} eq 'ignored';
		if ($opt{ranged} && $x->{given_key})
		{
			$ranged{"$x->{target}|$x->{delivery_key}"} = 1;
		}
		else
		{
			$dk{ "$x->{target}|" . CdcTorture::Model::ledger_digest($tables->{ $x->{target} }{oid}, $x->{delivery_key}) } =
			  $x->{delivery_key};
		}
		if ($x->{kind} eq 'truncate')
		{
			$trunc{ $x->{target} } = $x
			  if !$trunc{ $x->{target} } || version_cmp($x->{version}, $trunc{ $x->{target} }{version}) > 0;
			next;
		}
		my @ents = ($x);
		push @ents, { %$x, entity_key => $x->{old_key}{entity_key}, is_delete => 1, op => 'd', image => {},
			is_snapshot => 0, implied => 1 } if $x->{old_key};
		for my $e (@ents)
		{
			my $ek = CdcTorture::Model::canon_key($e->{entity_key});
			$cand{ $e->{target} }{$ek}{ version_text($e->{version}) } = $e;
		}
	}

	for my $l (@$lines)
	{
		my ($kind, @f) = split /\|/, $l, -1;
		push @{ $db{$kind} }, \@f;
	}
	my @v;
	my %barrier = map { $_->[0] => $_ } @{ $db{bar} || [] };
	my %ent = map { ("$_->[0]|$_->[1]" => $_) } @{ $db{ent} || [] };
	my %row;
	for my $r (@{ $db{row} || [] })
	{
		my ($t, $json) = @$r;
		my $img = json_decode($json);
		my $ek = CdcTorture::Model::canon_key(
			json_encode({ map { $_ => $img->{$_} } @{ $tables->{$t}{key} } }));
		$row{"$t|$ek"} = $img;
		for my $c (keys %$img)
		{
			my $val = $img->{$c} // '';
			push @v, "P3 placeholder stored in $t $ek column $c" if index($val, $PLACEHOLDER) >= 0 || $val eq $PLACEHOLDER_B64;
		}
	}
	my %conflicted = map { ("$_->[0]|$_->[1]|$_->[4]" => 1) } @{ $db{cfl} || [] };
	my %outbox = map { ("$_->[0]|$_->[1]|$_->[2]|$_->[3]" => $_) } @{ $db{obx} || [] };

	# P1
	for my $t (sort keys %$tables)
	{
		my $want = $trunc{$t} ? version_text($trunc{$t}{version}) : undef;
		my $have = $barrier{$t} ? $barrier{$t}[2] : undef;
		push @v, "P1 barrier of $t: expected " . ($want // 'none') . ', found ' . ($have // 'none')
		  if ($want // '') ne ($have // '');
	}

	# P2, P3
	my %seen;
	for my $t (sort keys %cand)
	{
		my $bar = $trunc{$t} ? $trunc{$t}{version} : undef;
		for my $ek (sort keys %{ $cand{$t} })
		{
			$seen{"$t|$ek"} = 1;
			my @c = grep { !$bar || version_cmp($_->{version}, $bar) > 0 } values %{ $cand{$t}{$ek} };
			my @nc = grep { !$conflicted{"$t|$ek|" . version_text($_->{version})} } @c;
			my ($best) = sort { version_cmp($b->{version}, $a->{version}) } @nc;
			my $e = $ent{"$t|$ek"};
			if (!@c || (!$best && !$e))
			{
				push @v, "P2 $t $ek: no change above the barrier, but entity record $e->[3]" if $e && !@c;
				next;
			}
			if (!$e)
			{
				push @v, "P2 $t $ek: no entity record, expected version " . version_text($best->{version});
				next;
			}
			my ($stored) = grep { version_text($_->{version}) eq $e->[3] } @c;
			if (!$stored)
			{
				push @v, "P2 $t $ek: stored version $e->[3] is not one of its delivered changes above the barrier";
				next;
			}
			if ($best && version_cmp($stored->{version}, $best->{version}) < 0)
			{
				push @v, "P2 $t $ek: stored version $e->[3] is older than the newest non-conflicting change "
				  . version_text($best->{version}) . " ($best->{op})";
			}
			for my $n (@c)
			{
				next unless version_cmp($n->{version}, $stored->{version}) > 0;
				push @v, "P2 $t $ek: newer change " . version_text($n->{version}) . " neither stored nor a recorded conflict"
				  unless $conflicted{"$t|$ek|" . version_text($n->{version})};
			}
			my $deleted = $e->[4] eq 't';
			push @v, "P2 $t $ek: record deleted=$e->[4] but the stored change is op $stored->{op}"
			  if $deleted != !!$stored->{is_delete};
			my $r = $row{"$t|$ek"};
			if ($deleted)
			{
				push @v, "P3 $t $ek: tombstone " . $e->[3] . " but the row is present" if $r;
			}
			elsif (!$r)
			{
				push @v, "P3 $t $ek: live record $e->[3] ($stored->{op}) but no row";
			}
			else
			{
				my %types = map { $_->[0] => $_->[1] } @{ $tables->{$t}{cols} };
				for my $col (sort keys %{ $stored->{image} })
				{
					my $want = $stored->{image}{$col};
					next if ref $want;    # unavailable: keeps the destination value
					my $have = $r->{$col};    # already canonical (Driver::parse_output)
					push @v, "P3 $t $ek column $col: expected " . ($want // 'NULL') . ' (from ' . version_text($stored->{version})
					  . "), found " . ($have // 'NULL')
					  if ($want // "\0") ne ($have // "\0");
				}
			}
			# P5: the stored change has its outbox row.
			if (!$stored->{is_snapshot} && $tables->{$t}{outbox})
			{
				my $ik = CdcTorture::Model::idempotency_key($stored->{source_info}, $stored->{op}, $stored->{version},
					$stored->{entity_key});
				push @v, "P5 $t $ek: stored change " . version_text($stored->{version}) . " ($stored->{op}) has no outbox row"
				  unless $outbox{"$ik|$t|$ek|$stored->{op}"};
			}
		}
	}
	for my $k (sort keys %ent)
	{
		push @v, "P2 entity record $k without any delivered change" unless $seen{$k};
	}
	for my $k (sort keys %row)
	{
		push @v, "P3 row $k without an entity record" unless $ent{$k};
	}

	# P4
	my %led = map { ("$_->[0]|$_->[1]" => 1) } @{ $db{led} || [] };
	for my $k (sort keys %dk)
	{
		push @v, "P4 delivery key $dk{$k} ($k) missing from the ledger" if !exists $led{$k};
	}
	for my $k (sort keys %led)
	{
		push @v, "P4 ledger has $k, which was never delivered" unless exists $dk{$k};
	}
	my %dp;
	for my $p (@{ $db{dp} || [] })
	{
		my ($t, $key, $processed) = @$p;
		$dp{"$t|$key"} = 1;
		my $want = $ranged{"$t|$key"} ? 'true' : 'false';
		push @v, "P4 cdc.delivery_processed($t, $key) is $processed, expected $want"
		  . ($want eq 'true' ? ' (a delivered change claimed by offset range)' : ' (never delivered to that target)')
		  if $processed ne $want;
	}
	for my $k (sort keys %ranged)
	{
		push @v, "P4 delivered change $k (claimed by offset range) was not probed with cdc.delivery_processed()"
		  unless $dp{$k};
	}

	# P5: every outbox row is a delivered change.
	my %valid;
	for my $t (keys %cand)
	{
		for my $ek (keys %{ $cand{$t} })
		{
			for my $c (values %{ $cand{$t}{$ek} })
			{
				next if $c->{is_snapshot};
				my $ik = CdcTorture::Model::idempotency_key($c->{source_info}, $c->{op}, $c->{version}, $c->{entity_key});
				$valid{"$ik|$t|$ek|$c->{op}"} = $c->{implied} ? 'implied' : 'change';
			}
		}
	}
	my $m2 = CdcTorture::Model->new(tables => $tables);
	for my $d (@$deliveries)
	{
		my $x = $m2->interpret($d);
		next unless $x->{kind} eq 'truncate';
		my $ik = CdcTorture::Model::idempotency_key($x->{source_info}, 't', $x->{version}, '');
		$valid{"$ik|$x->{target}|null|t"} = 'truncate';
	}
	for my $k (sort keys %outbox)
	{
		push @v, "P5 outbox row $k is no delivered change" unless $valid{$k};
	}
	for my $t (sort keys %trunc)
	{
		next unless $tables->{$t}{outbox};
		my $ik = CdcTorture::Model::idempotency_key($trunc{$t}{source_info}, 't', $trunc{$t}{version}, '');
		push @v, "P5 greatest truncate of $t has no outbox row" unless $outbox{"$ik|$t|null|t"};
	}
	my ($sum_conflict, $sum_calls) = (0, 0);
	my %st = map { $_->[0] => $_ } @{ $db{st} || [] };
	for my $s (values %st)
	{
		$sum_conflict += $s->[4];
		$sum_calls += $s->[1] + $s->[2] + $s->[3] + $s->[4] + $s->[5];
	}
	my (%rows_of, %implied_of);
	for my $k (keys %outbox)
	{
		my $t = $outbox{$k}[1];
		$rows_of{$t}++;
		$implied_of{$t}++ if ($valid{$k} // '') eq 'implied';
	}
	for my $t (sort keys %{ { %rows_of, %st } })
	{
		my $s = $st{$t} || [ $t, (0) x 8 ];
		my $rows = $rows_of{$t} // 0;
		push @v, "P5 outbox has $rows rows of $t, cdc.stats says $s->[7]" if $s->[7] != $rows;
		next unless $tables->{$t} && $tables->{$t}{outbox};
		my $want = $s->[1] - $s->[8] + ($implied_of{$t} // 0);
		push @v, "P7 outbox has $rows rows of $t, expected one per applied change: $s->[1] applied - $s->[8] snapshot rows + "
		  . ($implied_of{$t} // 0) . " implied deletes of key changes = $want"
		  if $rows != $want;
	}
	# P7 per-key order: the rows of a key in insertion order (rank).
	my %by_key;
	push @{ $by_key{"$_->[1]|$_->[2]"} }, $_ for values %outbox;
	for my $k (sort keys %by_key)
	{
		my @r = sort { $a->[5] <=> $b->[5] } @{ $by_key{$k} };
		for my $i (1 .. $#r)
		{
			my ($p, $c) = ($r[ $i - 1 ][4], $r[$i][4]);
			push @v, "P7 outbox rows of $k out of order: row $r[$i][5] ($r[$i][3]) has version $c, row $r[$i-1][5] ($r[$i-1][3]) before it $p"
			  unless version_cmp(_version_of($c), _version_of($p)) > 0;
		}
	}
	my $ncfl = scalar @{ $db{cfl} || [] };
	push @v, "P6 cdc.conflicts has $ncfl rows, cdc.stats says $sum_conflict" if $ncfl != $sum_conflict;
	push @v, "P6 outcome counters add up to $sum_calls, $calls calls committed" if defined $calls && $calls != $sum_calls;
	return @v;
}

# A version from its text in cdc.outbox ({2,4096,4000,1}).
sub _version_of
{
	my ($text) = @_;
	return [ map { 0 + $_ } $text =~ /-?\d+/g ];
}

1;

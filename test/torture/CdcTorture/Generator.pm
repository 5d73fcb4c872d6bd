# Seeded, reproducible source histories and their deliveries.
#
# history($seed, %opt) simulates two PostgreSQL sources (srcA, srcB, each with
# its own LSN space and mapping epoch) running concurrent transactions over a
# small key space, and returns the Kafka records Debezium would produce, in
# production order:
#   - inserts, updates, deletes and re-creations of the same keys; primary key
#     changes (an update whose before-image carries the old key);
#   - row locks: a key touched by an open transaction is not touched by
#     another one until it commits, so per key the next change LSN is above
#     the previous commit LSN (what makes per-key versions correct);
#   - interleaved transactions: change LSNs of a later-committing transaction
#     are below those of an earlier-committing one (B06); several changes may
#     share one LSN (B08);
#   - an initial snapshot (op r) at a point S0 taken while transactions are
#     open (B10's interleaving trap: began before S0, committed after), with
#     transactions committed between the slot start and S0 streamed too
#     (snapshot/stream overlap), and re-snapshots taken after later streaming;
#   - truncates (a transaction of its own, when no open transaction holds
#     rows of the table) -- one table truncates, one ignores truncates;
#   - unchanged TOAST columns sent as the unavailable-value placeholder
#     (text, bytea as base64, jsonb, text[] as a one-element array);
#   - Kafka tombstones after deletes, heartbeats, transaction BEGIN/END.
# Every change carries source.commit_lsn, so snapshot/stream overlap is exact.
#
# deliveries($history, $seed, %opt) turns the records into what a consumer
# receives: delivery keys (topic:generation:partition:offset, or none so the
# engine derives one), an order (in production order; per-key order kept;
# arbitrary; or as a Kafka consumer polls the partitions), duplicates (offset rewinds, random re-deliveries), a rebuilt
# topic (generation 2: the same changes under new delivery keys) and batch
# boundaries (several events in one destination transaction).
package CdcTorture::Generator;
use strict;
use warnings;
use MIME::Base64 ();
use CdcTorture::Rng;
use CdcTorture::Schema qw(json_encode sources torture_tables $PLACEHOLDER $PLACEHOLDER_B64);

# ---------------------------------------------------------------------------
# Source histories
# ---------------------------------------------------------------------------

sub _fnv32
{
	my $h = 2166136261;
	for my $c (unpack 'C*', $_[0]) { $h ^= $c; $h = ($h * 16777619) & 0xffffffff; }
	return $h;
}

sub history
{
	my ($seed, %opt) = @_;
	my $keys    = $opt{keys}    // 4;     # keys per table (small: collisions are frequent)
	my $changes = $opt{changes} // 24;    # row changes in the streamed history
	my $unavail = $opt{unavailable} // 1; # allow unavailable-value columns
	my $rng     = CdcTorture::Rng->new($seed)->fork('history');
	my $tables  = torture_tables();
	my $sources = sources();

	my %S;                                # per source simulation state
	for my $name (sort keys %$sources)
	{
		$S{$name} = {
			%{ $sources->{$name} },
			lsn       => 0x1000 * $rng->range(1, 200),
			txid      => $rng->range(500, 5000),
			committed => {},                # table -> key text -> row (event values)
			open      => [],                # open transactions
			tables    => [ sort grep { $tables->{$_}{source} eq $name } keys %$tables ],
			ts        => 1700000000000 + $rng->int(1000000),
			snapshot_done => 0,
		};
	}
	my @msgs;
	my $H = { seed => $seed, tables => $tables, messages => \@msgs, keys => $keys, stats => {} };

	my $next_lsn = sub {
		my ($s) = @_;
		$s->{lsn} += 8 * $rng->range(1, 12);
		return $s->{lsn};
	};

	# Pre-existing rows, committed before the replication slot existed: they
	# reach the destination only through a snapshot.
	for my $s (map { $S{$_} } sort keys %S)
	{
		for my $t (@{ $s->{tables} })
		{
			for my $i (1 .. int($keys / 2))
			{
				my $row = _new_row($rng, $tables->{$t}, _random_key($rng, $tables->{$t}, $keys));
				$s->{committed}{$t}{ _ktext($tables->{$t}, $row) } = $row;
			}
			$next_lsn->($s);
		}
	}

	my $emit = sub {
		my ($s, %m) = @_;
		$m{id} = scalar @msgs;
		$m{src} = $s->{name};
		$s->{ts} += $rng->pick(0, 0, 1, 5);    # equal ts_ms happen (B15): never a version
		push @msgs, \%m;
		return \%m;
	};

	my $snapshot = sub {
		my ($s, $which) = @_;
		my $S = $next_lsn->($s);
		my @rows;
		for my $t (@{ $s->{tables} })
		{
			next if $which && $which ne $t;
			for my $k (sort keys %{ $s->{committed}{$t} || {} })
			{
				push @rows, [ $t, $s->{committed}{$t}{$k} ];
			}
		}
		for my $i (0 .. $#rows)
		{
			my ($t, $row) = @{ $rows[$i] };
			my $tab = $tables->{$t};
			my $ktext = _ktext($tab, $row);
			$emit->($s,
				kind => 'change', table => $t, op => 'r', kafka_key => $ktext, order_keys => ["$t|$ktext"],
				payload => _payload($s, $tab, 'r', undef, _event_image($tab, $row), $S, undef, $s->{txid}, undef,
					$i == $#rows ? 'last' : 'true'));
		}
		$H->{stats}{snapshot_rows} += @rows;
		$H->{stats}{snapshots}++;
	};

	my $locked_by_other = sub {
		my ($s, $tx, $lock) = @_;
		for my $o (@{ $s->{open} })
		{
			return 1 if $o != $tx && $o->{locks}{$lock};
		}
		return 0;
	};

	my $visible = sub {    # the row a transaction sees at a key, or undef
		my ($s, $tx, $t, $k) = @_;
		return $tx->{writes}{$t}{$k} if exists $tx->{writes}{$t}{$k};
		return $s->{committed}{$t}{$k};
	};

	my $change = sub {
		my ($s, $tx) = @_;
		my $t = $rng->pick(@{ $s->{tables} });
		my $tab = $tables->{$t};
		for my $try (1 .. 6)
		{
			my $key = _random_key($rng, $tab, $keys);
			my $k = _ktext($tab, $key);
			next if $locked_by_other->($s, $tx, "$t|$k") || $locked_by_other->($s, $tx, "$t|*");
			my $old = $visible->($s, $tx, $t, $k);
			my (%c, $new);
			if (!$old)
			{
				$new = _new_row($rng, $tab, $key);
				%c = (op => 'c', after => _event_image($tab, $new));
			}
			else
			{
				my $what = $rng->weighted({ update => 55, delete => 22, rekey => 12, same => 6 });
				if ($what eq 'rekey')
				{
					my $key2 = _random_key($rng, $tab, $keys);
					my $k2 = _ktext($tab, $key2);
					if ($k2 eq $k || $visible->($s, $tx, $t, $k2) || $locked_by_other->($s, $tx, "$t|$k2"))
					{
						$what = 'update';
					}
					else
					{
						my ($row, $img) = _updated_row($rng, $tab, $old, $unavail ? 0.25 : 0);
						$row->{$_} = $key2->{$_} for keys %$key2;
						$img->{$_} = $key2->{$_} for keys %$key2;
						%c = (op => 'u', after => $img, before => _before($s, $tab, $old), k2 => $k2);
						$tx->{writes}{$t}{$k} = undef;
						$tx->{writes}{$t}{$k2} = $row;
						$tx->{locks}{"$t|$k2"} = 1;
						$H->{stats}{key_changes}++;
					}
				}
				if ($what eq 'delete')
				{
					%c = (op => 'd', before => _before($s, $tab, $old, 1));
					$tx->{writes}{$t}{$k} = undef;
					$H->{stats}{deletes}++;
				}
				elsif ($what eq 'update' || $what eq 'same')
				{
					my ($row, $img) = $what eq 'same'
					  ? ({%$old}, _event_image($tab, $old))    # an update that changes nothing
					  : _updated_row($rng, $tab, $old, $unavail ? 0.35 : 0);
					%c = (op => 'u', after => $img, before => ($s->{full_before} ? _before($s, $tab, $old) : undef));
					$new = $row;
				}
			}
			$tx->{writes}{$t}{$k} = $new if $new;
			$H->{stats}{recreations}++ if $c{op} eq 'c' && $tx->{deleted}{"$t|$k"} || ($c{op} eq 'c' && $s->{ever}{"$t|$k"});
			$s->{ever}{"$t|$k"} = 1;
			$tx->{locks}{"$t|$k"} = 1;
			$tx->{deleted}{"$t|$k"} = 1 if $c{op} eq 'd';
			$H->{stats}{unavailable}++ if $c{after} && grep { !ref($_) ? ($_ // '') eq $PLACEHOLDER || ($_ // '') eq $PLACEHOLDER_B64 : ref($_) eq 'ARRAY' && @$_ == 1 && ($_->[0] // '') eq $PLACEHOLDER } values %{ $c{after} };

			# Several changes of one transaction may share an LSN (COPY, B08).
			my $prev = $tx->{changes}[-1];
			my $lsn = ($prev && $rng->chance(0.15) && $prev->{op} eq 'c' && $c{op} eq 'c' && $prev->{table} eq $t)
			  ? $prev->{lsn} : $next_lsn->($s);
			push @{ $tx->{changes} }, { %c, table => $t, k => $k, lsn => $lsn };
			$H->{stats}{changes}++;
			return 1;
		}
		return 0;
	};

	my $commit = sub {
		my ($s, $tx) = @_;
		my $clsn = $next_lsn->($s);
		for my $t (keys %{ $tx->{writes} })
		{
			for my $k (keys %{ $tx->{writes}{$t} })
			{
				my $row = $tx->{writes}{$t}{$k};
				if (defined $row) { $s->{committed}{$t}{$k} = $row; }
				else { delete $s->{committed}{$t}{$k}; }
			}
		}
		@{ $s->{open} } = grep { $_ != $tx } @{ $s->{open} };
		return unless @{ $tx->{changes} };
		$H->{stats}{transactions}++;
		my $meta = $s->{total_order} && $rng->chance(0.3);
		$emit->($s, kind => 'txmeta', order_keys => [], payload => {
			status => 'BEGIN', id => "$tx->{txid}:$tx->{changes}[0]{lsn}", event_count => undef, data_collections => undef,
			ts_ms => 0 + $s->{ts} }) if $meta;
		my $i = 0;
		for my $c (@{ $tx->{changes} })
		{
			$i++;
			my $tab = $tables->{ $c->{table} };
			my $kafka_key = $c->{k2} // $c->{k};
			my @ok = ("$c->{table}|$c->{k}");
			push @ok, "$c->{table}|$c->{k2}" if $c->{k2};
			$emit->($s,
				kind => 'change', table => $c->{table}, op => $c->{op}, kafka_key => $kafka_key, order_keys => \@ok,
				payload => _payload($s, $tab, $c->{op}, $c->{before}, $c->{after}, $c->{lsn}, $clsn, $tx->{txid},
					$s->{total_order} ? $i : undef, 'false'));
			if ($c->{op} eq 'd' && $rng->chance(0.7))
			{
				$emit->($s, kind => 'ktomb', table => $c->{table}, kafka_key => $c->{k}, order_keys => ["$c->{table}|$c->{k}"],
					payload => undef, sql_null => $rng->chance(0.5));
			}
		}
		$emit->($s, kind => 'txmeta', order_keys => [], payload => {
			status => 'END', id => "$tx->{txid}:$tx->{changes}[0]{lsn}", event_count => 0 + @{ $tx->{changes} },
			data_collections => [], ts_ms => 0 + $s->{ts} }) if $meta;
	};

	my $truncate = sub {
		my ($s) = @_;
		my $t = $rng->pick(@{ $s->{tables} });
		for my $o (@{ $s->{open} })
		{
			return 0 if grep { /^\Q$t\E\|/ } keys %{ $o->{locks} };
		}
		my $lsn = $next_lsn->($s);
		my $clsn = $next_lsn->($s);
		my $txid = ++$s->{txid};
		$s->{committed}{$t} = {};
		$emit->($s, kind => 'change', table => $t, op => 't', kafka_key => undef, order_keys => ["$t|*"],
			payload => _payload($s, $tables->{$t}, 't', undef, undef, $lsn, $clsn, $txid, $s->{total_order} ? 1 : undef, 'false'));
		$H->{stats}{truncates}++;
		return 1;
	};

	# Which sources take an initial snapshot, and after how many steps.
	my %snap_at = map { $_ => ($_ eq 'srcA' || $rng->chance(0.7)) ? $rng->range(0, 5) : -1 } sort keys %S;
	my $step = 0;
	while (($H->{stats}{changes} // 0) < $changes && $step < $changes * 8)
	{
		for my $name (sort keys %S)
		{
			if ($snap_at{$name} == $step)
			{
				$snapshot->($S{$name});
				$S{$name}{snapshot_done} = 1;
			}
		}
		$step++;
		my $s = $S{ $rng->weighted({ srcA => 65, srcB => 35 }) };
		my $open = scalar @{ $s->{open} };
		my $action = $rng->weighted({
			begin     => $open < 3 ? ($open ? 12 : 40) : 0,
			change    => $open ? 48 : 0,
			commit    => $open ? 22 : 0,
			truncate  => 3,
			snapshot  => $s->{snapshot_done} ? 3 : 0,
			heartbeat => 2,
		});
		if ($action eq 'begin')
		{
			push @{ $s->{open} }, { txid => ++$s->{txid}, changes => [], writes => {}, locks => {} };
		}
		elsif ($action eq 'change')
		{
			$change->($s, $rng->pick(@{ $s->{open} }));
		}
		elsif ($action eq 'commit')
		{
			$commit->($s, $rng->pick(@{ $s->{open} }));
		}
		elsif ($action eq 'truncate')
		{
			$truncate->($s);
		}
		elsif ($action eq 'snapshot')
		{
			$snapshot->($s, $rng->chance(0.5) ? $rng->pick(@{ $s->{tables} }) : undef);
			$H->{stats}{resnapshots}++;
		}
		elsif ($rng->chance(0.5))
		{
			$emit->($s, kind => 'heartbeat', order_keys => [], payload => { ts_ms => 0 + $s->{ts} });
		}
		else
		{
			# A logical decoding message (pg_logical_emit_message): not a change.
			$emit->($s, kind => 'message', order_keys => [], payload => {
				op => 'm', ts_ms => 0 + $s->{ts},
				source => { connector => 'postgresql', name => $s->{name}, db => $s->{db}, lsn => 0 + $next_lsn->($s), snapshot => 'false' },
				message => { prefix => 'audit', content => 'aGVsbG8=' } });
		}
	}
	for my $s (map { $S{$_} } sort keys %S)
	{
		$commit->($s, $s->{open}[0]) while @{ $s->{open} };
	}
	# The source's final state, for reports.
	$H->{source_state} = { map { $_ => $S{$_}{committed} } keys %S };

	for my $m (@msgs)
	{
		$m->{json} = defined $m->{payload} ? json_encode($m->{payload}) : ($m->{sql_null} ? undef : 'null');
		$m->{topic} = _topic($m, $tables);
	}
	return $H;
}

sub _topic
{
	my ($m, $tables) = @_;
	return "__debezium-heartbeat.$m->{src}" if $m->{kind} eq 'heartbeat';
	return "$m->{src}.transaction" if $m->{kind} eq 'txmeta';
	return "$m->{src}.message" if $m->{kind} eq 'message';
	my $t = $tables->{ $m->{table} };
	return "$m->{src}.$t->{source_schema}.$t->{source_table}";
}

sub _random_key
{
	my ($rng, $tab, $keys) = @_;
	return { g => $rng->pick('x', 'y'), id => $rng->range(1, int(($keys + 1) / 2)) } if @{ $tab->{key} } == 2;
	return { id => $rng->range(1, $keys) };
}

sub _ktext
{
	my ($tab, $row) = @_;
	return join(',', map { "$_=$row->{$_}" } @{ $tab->{key} });
}

# A row in source form: column -> Perl value (bytea as raw bytes).
sub _value
{
	my ($rng, $type, $col) = @_;
	if ($type eq 'int')   { return $rng->chance(0.15) ? undef : 0 + $rng->range(0, 3); }
	if ($type eq 'text')  { return $col eq 'body' ? 'body-' . $rng->range(0, 3) : 'v' . $rng->range(0, 4); }
	if ($type eq 'bytea') { return 'y' . $rng->range(0, 3) . "\x00\xff"; }
	if ($type eq 'jsonb') { return { k => 0 + $rng->range(0, 3), s => 'd' . $rng->range(0, 1) }; }
	if ($type eq 'text[]') { return [ map { 't' . $rng->range(0, 2) } 1 .. $rng->range(0, 2) ]; }
	die "type $type";
}

sub _new_row
{
	my ($rng, $tab, $key) = @_;
	my %row = %$key;
	for my $c (@{ $tab->{cols} })
	{
		next if exists $row{ $c->[0] };
		$row{ $c->[0] } = _value($rng, $c->[1], $c->[0]);
	}
	return \%row;
}

# A new version of $old; TOAST columns left unchanged may be sent as the
# unavailable-value placeholder.  Returns (source row, event image).
sub _updated_row
{
	my ($rng, $tab, $old, $p_unavailable) = @_;
	my %row = %$old;
	my %keyc = map { $_ => 1 } @{ $tab->{key} };
	my %toast = map { $_ => 1 } @{ $tab->{toast} };
	my %unavailable;
	for my $c (@{ $tab->{cols} })
	{
		my ($name, $type) = @$c;
		next if $keyc{$name};
		if ($toast{$name} && $rng->chance($p_unavailable))
		{
			$unavailable{$name} = 1;    # unchanged, not sent
			next;
		}
		$row{$name} = _value($rng, $type, $name) if $rng->chance(0.7);
	}
	my $img = _event_image($tab, \%row);
	for my $name (keys %unavailable)
	{
		my $type = (map { $_->[1] } grep { $_->[0] eq $name } @{ $tab->{cols} })[0];
		$img->{$name} = $type eq 'bytea' ? $PLACEHOLDER_B64 : $type eq 'text[]' ? [$PLACEHOLDER] : $PLACEHOLDER;
	}
	return (\%row, $img);
}

# The event form of a row (bytea as base64, numbers as JSON numbers).
sub _event_image
{
	my ($tab, $row) = @_;
	my %img;
	for my $c (@{ $tab->{cols} })
	{
		my ($name, $type) = @$c;
		my $v = $row->{$name};
		if (!defined $v) { $img{$name} = undef; }
		elsif ($type eq 'bytea') { $img{$name} = MIME::Base64::encode_base64($v, ''); }
		elsif ($type eq 'int') { $img{$name} = 0 + $v; }
		elsif ($type eq 'jsonb') { $img{$name} = { k => 0 + $v->{k}, s => "$v->{s}" }; }
		elsif ($type eq 'text[]') { $img{$name} = [ map {"$_"} @$v ]; }
		else { $img{$name} = "$v"; }
	}
	return \%img;
}

# The before-image: the key (REPLICA IDENTITY DEFAULT) or the full old row
# (REPLICA IDENTITY FULL).  A delete under DEFAULT sends the other columns
# as null (B03).
sub _before
{
	my ($s, $tab, $old, $for_delete) = @_;
	return _event_image($tab, $old) if $s->{full_before};
	my $img = _event_image($tab, $old);
	my %key = map { $_ => 1 } @{ $tab->{key} };
	for my $c (keys %$img)
	{
		next if $key{$c};
		if ($for_delete) { $img->{$c} = undef; }
		else { delete $img->{$c}; }
	}
	return $img;
}

sub _payload
{
	my ($s, $tab, $op, $before, $after, $lsn, $clsn, $txid, $total_order, $snap) = @_;
	my %src = (
		version   => '2.5.0.Final',
		connector => 'postgresql',
		name      => $s->{name},
		ts_ms     => 0 + $s->{ts},
		snapshot  => $snap,
		db        => $s->{db},
		schema    => $tab->{source_schema},
		table     => $tab->{source_table},
		txId      => 0 + $txid,
		lsn       => 0 + $lsn,
		xmin      => undef,
	);
	$src{commit_lsn} = 0 + $clsn if defined $clsn;
	my %p = (before => $before, after => $after, source => \%src, op => $op, ts_ms => 0 + $s->{ts} + 3);
	$p{transaction} = { id => "$txid:$lsn", total_order => 0 + $total_order, data_collection_order => 0 + $total_order }
	  if defined $total_order;
	return \%p;
}

# ---------------------------------------------------------------------------
# Deliveries
# ---------------------------------------------------------------------------

# Delivery keys for every record of one generation of the topics.
sub _kafka_keys
{
	my ($rng, $msgs, $gen) = @_;
	my %offset;
	my @dk;
	for my $m (@$msgs)
	{
		my $part = defined $m->{kafka_key} ? _fnv32($m->{kafka_key}) % 2 : $rng->int(2);
		my $o = $offset{"$m->{topic}:$part"}++;
		push @dk, "$m->{topic}:$gen:$part:" . ($o + ($gen - 1) * 1000);
	}
	return \@dk;
}

# Precedence for per-key order: j must come before i when they share an
# order key (an entity, or the table of a truncate).
sub _conflicts
{
	my ($a, $b) = @_;
	for my $x (@{ $a->{order_keys} })
	{
		for my $y (@{ $b->{order_keys} })
		{
			return 1 if $x eq $y;
			my ($tx, $kx) = split /\|/, $x, 2;
			my ($ty, $ky) = split /\|/, $y, 2;
			return 1 if $tx eq $ty && ($kx eq '*' || $ky eq '*');
		}
	}
	return 0;
}

# A random order of @$items (indexes into the production order) that keeps
# production order between conflicting records.
sub _per_key_order
{
	my ($rng, $msgs, $items) = @_;
	my $n = @$items;
	my @preds = (0) x $n;
	my @succ = map { [] } 1 .. $n;
	for my $i (0 .. $n - 1)
	{
		for my $j ($i + 1 .. $n - 1)
		{
			next unless _conflicts($msgs->[ $items->[$i] ], $msgs->[ $items->[$j] ]);
			$preds[$j]++;
			push @{ $succ[$i] }, $j;
		}
	}
	my @ready = grep { !$preds[$_] } 0 .. $n - 1;
	my @out;
	while (@ready)
	{
		my $r = $rng->int(scalar @ready);
		my $i = splice(@ready, $r, 1);
		push @out, $items->[$i];
		for my $j (@{ $succ[$i] })
		{
			push @ready, $j unless --$preds[$j];
		}
	}
	die "per-key order: cycle" unless @out == $n;
	return @out;
}

# The order in which a Kafka consumer of every partition sees the records
# (mode 'partitions'): each partition in offset order, the partitions
# interleaved in polls of 1-12 records from one partition at a time.  Per-key
# order holds within a partition; a truncate (a random partition) and the
# records of a key change's old key (the old key's partition) may come
# before or after the key's other records.  @$items: [id, gen, key2] in
# production order (so in offset order within each partition).
sub _partition_order
{
	my ($rng, $items, $keys1) = @_;
	my (%queue, @parts);
	for my $it (@$items)
	{
		my $dk = $it->[1] == 1 ? $keys1->[ $it->[0] ] : $it->[2];
		(my $p = $dk) =~ s/:\d+$//;
		push @parts, $p unless $queue{$p};
		push @{ $queue{$p} }, $it;
	}
	my @out;
	while (@parts)
	{
		my $i = $rng->int(scalar @parts);
		my $q = $queue{ $parts[$i] };
		push @out, splice(@$q, 0, $rng->range(1, 12));
		splice(@parts, $i, 1) unless @$q;
	}
	return @out;
}

# Returns {batches => [[delivery, ...], ...], mode => ..., ...}; a delivery is
#   {msg => id, gen => 1|2, dk => text|undef, kafka => text, json =>
#    text|undef, target => undef|table, text_arg => 0|1}
# where kafka is the record's topic:generation:partition:offset even when
# the delivery key sent is derived (dk undef).
sub deliveries
{
	my ($H, $seed, %opt) = @_;
	my $rng = CdcTorture::Rng->new($seed)->fork("deliveries/" . ($opt{label} // ''));
	my $msgs = $H->{messages};
	my $mode = $opt{mode} // 'perkey';             # inorder | perkey | arbitrary | partitions
	my $dkstyle = $opt{dk} // 'kafka';             # kafka | derived | mixed
	my $rewinds = $opt{rewinds} // 0;              # probability of an offset rewind after a delivery
	my $copies = $opt{copies} // 0;                # random re-deliveries, as a fraction of the records
	my $gen2 = $opt{gen2} // 0;                    # rebuilt topic: same changes, new delivery keys
	my $batch = $opt{batch} // 'random';           # single | random
	my $max_batch = $opt{max_batch} // 6;

	# Delivery keys depend on the history only (every consumer of the same
	# topics sees the same keys).
	my $krng = CdcTorture::Rng->new($seed)->fork('kafka');
	my $keys1 = _kafka_keys($krng, $msgs, 1);
	my @gen1 = map { [ $_, 1 ] } 0 .. $#$msgs;
	my @gen2;
	if ($gen2)
	{
		# The topics are rebuilt from a point of the history: every record from
		# there on is produced again, with new offsets in generation 2.
		my $from = $krng->int(scalar @$msgs);
		my @ids = grep { $msgs->[$_]{kind} eq 'change' || $msgs->[$_]{kind} eq 'ktomb' } $from .. $#$msgs;
		my $keys2 = _kafka_keys($krng, [ map { $msgs->[$_] } @ids ], 2);
		my %k2 = map { $ids[$_] => $keys2->[$_] } 0 .. $#ids;
		@gen2 = map { [ $_, 2, $k2{$_} ] } @ids;
	}
	my $order = sub {
		my @it = @_;
		return @it if $mode eq 'inorder';
		return $rng->shuffle(@it) if $mode eq 'arbitrary';
		return _partition_order($rng, \@it, $keys1) if $mode eq 'partitions';
		my @ids = map { $_->[0] } @it;
		my %by = map { $_->[0] => $_ } @it;
		return map { $by{$_} } _per_key_order($rng, $msgs, \@ids);
	};
	my @seq = $mode eq 'arbitrary' ? $rng->shuffle(@gen1, @gen2)
	  : $mode eq 'partitions' ? $order->(@gen1, @gen2)
	  : ($order->(@gen1), $order->(@gen2));

	# Offset rewinds (re-deliver the last few records) and random copies.
	my @out;
	for my $i (0 .. $#seq)
	{
		push @out, $seq[$i];
		if ($rewinds && $rng->chance($rewinds))
		{
			my $back = $rng->range(1, 6);
			$back = $i + 1 if $back > $i + 1;
			push @out, @seq[ $i - $back + 1 .. $i ];
		}
	}
	my $ncopies = int(@seq * $copies + 0.5);
	for (1 .. $ncopies)
	{
		my $from = $rng->int(scalar @out);
		my $to = $rng->range($from + 1, scalar @out);
		splice @out, $to, 0, $out[$from];
	}

	my @deliveries = map {
		my ($id, $gen, $k2) = @$_;
		my $m = $msgs->[$id];
		my $style = $dkstyle eq 'mixed' ? ($rng->chance(0.5) ? 'kafka' : 'derived') : $dkstyle;
		my $json = $m->{json};
		# Sometimes the JsonConverter wrapper with a null schema.
		$json = '{"schema":null,"payload":' . $json . '}' if defined $json && $json ne 'null' && $rng->chance(0.15);
		{
			msg      => $id,
			gen      => $gen,
			dk       => $style eq 'kafka' ? ($gen == 1 ? $keys1->[$id] : $k2) : undef,
			kafka    => $gen == 1 ? $keys1->[$id] : $k2,    # the record's coordinates, whatever key is sent
			json     => $json,
			target   => ($m->{kind} eq 'ktomb' && $rng->chance(0.5)) ? $m->{table} : undef,
			text_arg => $rng->chance(0.2) ? 1 : 0,
		}
	} @out;
	# A delivery key names a record: the same record always carries the same
	# key (derived keys are derived from the record, so that holds too).
	my %same;
	for my $d (@deliveries)
	{
		my $id = "$d->{msg}/$d->{gen}";
		if ($same{$id}) { $d->{dk} = $same{$id}{dk}; $d->{json} = $same{$id}{json}; }
		else { $same{$id} = $d; }
	}

	my @batches;
	my $i = 0;
	while ($i < @deliveries)
	{
		my $size = $batch eq 'single' ? 1 : $rng->range(1, $max_batch);
		push @batches, [ @deliveries[ $i .. ($i + $size - 1 > $#deliveries ? $#deliveries : $i + $size - 1) ] ];
		$i += $size;
	}
	return { batches => \@batches, mode => $mode, dk => $dkstyle, count => scalar @deliveries };
}

1;

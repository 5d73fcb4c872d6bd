# The reference model of cdc_apply's SQL path.
#
# A small, deliberately slow and obvious re-statement of the apply rules of
# SPEC §4 as documented in docs/semantics.md.  It reads the very same
# Debezium envelopes (decoded JSON) that the driver sends to cdc_apply(),
# one delivery at a time in the order the destination committed them, and
# keeps the destination state the engine must end up with:
#
#   rows       table -> entity key -> {column -> canonical text | undef}
#   entities   table -> entity key -> {source, version, deleted, content}
#   barriers   table -> {source, version}               (applied truncates)
#   ledger     "target\ndelivery key" -> {target, entity_key, version}
#              (the claim is per target and delivery key; the database keeps
#              a 64-bit digest of the pair, ledger_digest below)
#   outbox     idempotency key -> {target, entity_key, op, version}
#   conflicts  [{target, entity_key, delivery_key, op, version}]
#   stats      target -> {applied, duplicate, stale, conflict, ignored,
#                         blocked_resurrections, outbox_rows, snapshot_rows}
#
# and the outcome it expects for every delivery.  Nothing here looks at the
# engine's code; where the engine and this file disagree, the test fails and
# prints both.
#
# The rules, in the order they are applied to one change of one entity:
#   1. the stored record comes from another source         -> conflict
#   2. version <= the table's truncate barrier (same source) -> stale
#   3. version <  stored version                            -> stale
#      (a blocked resurrection when the stored record is a tombstone and
#       the change is not a delete)
#   4. version == stored version: same content -> duplicate, else conflict
#   5. an insert/update with unavailable columns for a row the destination
#      does not have                                       -> conflict
#   6. otherwise                                           -> applied:
#      the entity record takes the version (a delete makes it a tombstone);
#      the row takes the image's available columns (a delete removes it);
#      a non-snapshot change writes one outbox row keyed by its source
#      identity (never by its delivery key).
#      For a key change, the unavailable columns of the new key's row keep
#      the values the row had under its old key (the row moved; SPEC §4.4
#      "keep their current destination value"), so rule 5 does not apply
#      when the old key's row was there to move.
# Before those rules, the delivery key is claimed: a key seen before is a
# duplicate and nothing else happens.  Non-change messages are ignored and
# claim nothing.  A truncate claims its key, is stale at or below the
# barrier, and otherwise raises the barrier: every row and entity record
# whose version is at or below it disappears (rows with a newer version
# stay: "a change older than or equal to the barrier never applies", and
# nothing else is removed by it).  An update whose before-image carries
# another key is a delete of the old key and an upsert of the new one, both
# at the update's version; the delete contributes only its outbox row to
# the counters (one event, one outcome).
#
# Two of these rules are SPEC readings the engine first got wrong (bugs 1
# and 3 in docs/torture.md, now fixed): the truncate that keeps newer rows,
# and the key change that carries unsent columns to the new key.
package CdcTorture::Model;
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use CdcTorture::Schema qw(
  json_encode json_decode is_unavailable db_value_from_event entity_key_string
  version_text version_cmp);

my $UNAVAILABLE = \'unavailable';    # marker for a column the source did not send

sub new
{
	my ($class, %args) = @_;
	my $self = bless {
		tables    => $args{tables},    # name -> table description (Schema.pm)
		rows      => {},
		entities  => {},
		barriers  => {},
		ledger    => {},
		outbox    => {},
		conflicts => [],
		stats     => {},
		outcomes  => [],
	}, $class;
	return $self;
}

# Changes the epoch of a mapping (the operator re-registered it).
sub set_epoch
{
	my ($self, $table, $epoch) = @_;
	$self->{tables}{$table}{epoch} = $epoch;
}

sub _count
{
	my ($self, $target, $what, $n) = @_;
	$self->{stats}{$target}{$what} += defined $n ? $n : 1;
}

# ---------------------------------------------------------------------------
# Reading an envelope
# ---------------------------------------------------------------------------

# Returns the payload of a delivery's event, or undef for a Kafka tombstone.
sub _payload
{
	my ($ev) = @_;
	return undef unless defined $ev;
	if (ref $ev eq 'HASH' && exists $ev->{payload} && exists $ev->{schema} && !exists $ev->{op})
	{
		return $ev->{payload};
	}
	return $ev;
}

# What a delivery is, independent of any state: either
#   {kind => 'ignored', target => ..., why => ...}
#   {kind => 'truncate', ...} or {kind => 'change', ...}
# with the target, source, version, delivery key and images resolved.
sub interpret
{
	my ($self, $d) = @_;
	my $p = _payload($d->{event});
	my $target_arg = $d->{target};
	return { kind => 'ignored', target => $target_arg // '-', why => 'kafka tombstone' } unless defined $p;
	die "model: event is not an object\n" unless ref $p eq 'HASH';
	my $op = $p->{op};
	if (!defined $op)
	{
		return { kind => 'ignored', target => $target_arg // '-', why => 'transaction metadata' }
		  if defined $p->{status} && ($p->{status} eq 'BEGIN' || $p->{status} eq 'END') && exists $p->{id};
		return { kind => 'ignored', target => $target_arg // '-', why => 'heartbeat' }
		  if keys %$p && !grep { $_ ne 'ts_ms' } keys %$p;
		die "model: event without op\n";
	}
	return { kind => 'ignored', target => $target_arg // '-', why => 'message' } if $op eq 'm';

	my $src = $p->{source} || {};
	my $t = defined $target_arg ? $self->{tables}{$target_arg} : $self->_resolve($src);
	die "model: no mapping for $src->{schema}.$src->{table}\n" unless $t;
	my %x = (
		target      => $t->{name},
		table       => $t,
		op          => $op,
		source      => $src->{name} // '',
		source_info => $src,
		total_order => ($p->{transaction} && defined $p->{transaction}{total_order}) ? $p->{transaction}{total_order} : undef,
	);

	if ($op eq 't')
	{
		return { %x, kind => 'ignored', why => 'truncate policy ignore' } if $t->{truncate} eq 'ignore';
		$x{version} = $self->_version($t, $p);
		$x{delivery_key} = $d->{dk} // _derived_key($src, 't', $x{total_order}, '');
		$x{given_key} = defined $d->{dk} ? 1 : 0;
		return { %x, kind => 'truncate' };
	}

	my $after = _image($t, $p->{after});
	my $before = _image($t, $p->{before});
	my $is_delete = $op eq 'd';
	my $main = $is_delete ? $before : $after;
	die "model: op $op without its image\n" unless $main;
	$x{kind}         = 'change';
	$x{is_delete}    = $is_delete;
	$x{is_snapshot}  = $op eq 'r';
	$x{image}        = $main;
	$x{image_json}   = $is_delete ? $p->{before} : $p->{after};
	$x{entity_key}   = entity_key_string($t, $main);
	$x{version}      = $self->_version($t, $p);
	$x{delivery_key} = $d->{dk} // _derived_key($src, $op, $x{total_order}, $x{entity_key});
	$x{given_key}    = defined $d->{dk} ? 1 : 0;
	$x{content}      = $is_delete ? 'delete' : _content($t, $main);
	if ($op eq 'u' && $before && !_same_key($t, $before, $after))
	{
		$x{old_key} = {
			entity_key => entity_key_string($t, $before),
			image      => $before,
			image_json => $p->{before},
		};
	}
	return \%x;
}

sub _resolve
{
	my ($self, $src) = @_;
	my ($named, $any);
	for my $t (values %{ $self->{tables} })
	{
		next unless ($src->{schema} // '') eq $t->{source_schema} && ($src->{table} // '') eq $t->{source_table};
		if (!defined $t->{source}) { $any = $t; }
		elsif ($t->{source} eq ($src->{name} // '')) { $named = $t; }
	}
	return $named || $any;
}

# The source version (docs/semantics.md "What orders changes"):
#   streamed {epoch, commit_lsn or lsn, lsn, total_order or 0}
#   snapshot {epoch, lsn, 0, 0}
sub _version
{
	my ($self, $t, $p) = @_;
	my $s = $p->{source};
	my $lsn = $s->{lsn};
	return [ $t->{epoch}, $lsn, 0, 0 ] if $p->{op} eq 'r';
	my $to = ($p->{transaction} && defined $p->{transaction}{total_order}) ? $p->{transaction}{total_order} : 0;
	return [ $t->{epoch}, $s->{commit_lsn} // $lsn, $lsn, $to ];
}

sub _derived_key
{
	my ($src, $op, $total_order, $entity_key) = @_;
	return join(':',
		'dbz', $src->{name} // '', $src->{db} // '',
		($src->{schema} // '') . '.' . ($src->{table} // ''),
		$op, $src->{lsn} // '', $src->{txId} // '', $total_order // '', $entity_key);
}

# An image: column -> canonical destination text, undef (NULL) or $UNAVAILABLE.
sub _image
{
	my ($t, $obj) = @_;
	return undef unless defined $obj;
	my %types = map { $_->[0] => $_->[1] } @{ $t->{cols} };
	my %img;
	for my $col (keys %$obj)
	{
		die "model: unknown column $col\n" unless exists $types{$col};
		$img{$col} = is_unavailable($obj->{$col}) ? $UNAVAILABLE : db_value_from_event($types{$col}, $obj->{$col});
	}
	return \%img;
}

sub _has_unavailable
{
	my ($img) = @_;
	return scalar grep { ref $_ && $_ == $UNAVAILABLE } values %$img;
}

# Content identity of an upsert image: its available columns and values.
sub _content
{
	my ($t, $img) = @_;
	my @parts;
	for my $c (@{ $t->{cols} })
	{
		my $v = $img->{ $c->[0] };
		next unless exists $img->{ $c->[0] };
		next if ref $v && $v == $UNAVAILABLE;
		push @parts, $c->[0] . '=' . (defined $v ? json_encode($v) : 'null');
	}
	return join(';', @parts);
}

# Does the before-image name the same key as the after-image?  A before
# image that lacks a key column (or has it null/unavailable) says nothing.
sub _same_key
{
	my ($t, $before, $after) = @_;
	for my $k (@{ $t->{key} })
	{
		my ($x, $y) = ($before->{$k}, $after->{$k});
		return 1 if !defined $x || !defined $y || ref $x || ref $y;
		return 0 if $x ne $y;
	}
	return 1;
}

# ---------------------------------------------------------------------------
# Applying
# ---------------------------------------------------------------------------

# Feeds one committed delivery; returns the outcome it must have.
sub deliver
{
	my ($self, $d) = @_;
	my $x = $self->interpret($d);
	my $outcome = $self->_deliver($x);
	push @{ $self->{outcomes} }, $outcome;
	return $outcome;
}

sub _deliver
{
	my ($self, $x) = @_;
	if ($x->{kind} eq 'ignored')
	{
		$self->_count($x->{target}, 'ignored');
		return 'ignored';
	}
	my $target = $x->{target};
	if (exists $self->{ledger}{"$target\n$x->{delivery_key}"})
	{
		$self->_count($target, 'duplicate');
		return 'duplicate';
	}
	$self->{ledger}{"$target\n$x->{delivery_key}"} = {
		target     => $target,
		entity_key => $x->{kind} eq 'truncate' ? undef : $x->{entity_key},
		version    => $x->{version},
		given      => $x->{given_key},    # the delivery named its key (not derived)
	};

	return $self->_truncate($x) if $x->{kind} eq 'truncate';

	my $carry;
	if ($x->{old_key})
	{
		my $old_row = $self->{rows}{$target}{ $x->{old_key}{entity_key} };
		my $implied = {
			%$x,
			is_delete   => 1,
			is_snapshot => 0,
			op          => 'd',
			entity_key  => $x->{old_key}{entity_key},
			image       => $x->{old_key}{image},
			image_json  => $x->{old_key}{image_json},
			content     => 'delete',
		};
		my %discard;
		my $o = $self->_apply_entity($implied, \%discard);
		$self->_count($target, 'outbox_rows', $discard{outbox_rows} // 0);
		# The row moved to the new key: columns the source did not send keep
		# the value the row had under its old key (SPEC §4.4).
		$carry = {%$old_row} if $o eq 'applied' && $old_row;
	}
	my %counts;
	my $outcome = $self->_apply_entity($x, \%counts, $carry);
	$self->_count($target, $_, $counts{$_}) for keys %counts;
	return $outcome;
}

sub _truncate
{
	my ($self, $x) = @_;
	my $t = $x->{target};
	my $b = $self->{barriers}{$t};
	if ($b && $b->{source} eq $x->{source} && version_cmp($x->{version}, $b->{version}) <= 0)
	{
		$self->_count($t, 'stale');
		return 'stale';
	}
	$self->{barriers}{$t} = { source => $x->{source}, version => $x->{version} };
	my $ents = $self->{entities}{$t} ||= {};
	my $rows = $self->{rows}{$t} ||= {};
	for my $k (keys %$rows)
	{
		my $e = $ents->{$k};
		delete $rows->{$k} unless $e && $e->{source} eq $x->{source} && version_cmp($e->{version}, $x->{version}) > 0;
	}
	for my $k (keys %$ents)
	{
		delete $ents->{$k}
		  if $ents->{$k}{source} eq $x->{source} && version_cmp($ents->{$k}{version}, $x->{version}) <= 0;
	}
	$self->_count($t, 'applied');
	$self->_outbox($x, 't', '', $self->{tables}{$t}) and $self->_count($t, 'outbox_rows');
	return 'applied';
}

sub _apply_entity
{
	my ($self, $c, $counts, $carry) = @_;
	my $t = $c->{target};
	my $stored = $self->{entities}{$t}{ $c->{entity_key} };
	my $barrier = $self->{barriers}{$t};
	my $v = $c->{version};

	if ($stored && $stored->{source} ne $c->{source})
	{
		return $self->_conflict($c, $counts, 'other source');
	}
	if ($barrier && $barrier->{source} eq $c->{source} && version_cmp($v, $barrier->{version}) <= 0)
	{
		$counts->{stale}++;
		return 'stale';
	}
	if ($stored)
	{
		my $cmp = version_cmp($v, $stored->{version});
		if ($cmp < 0)
		{
			$counts->{stale}++;
			$counts->{blocked_resurrections}++ if $stored->{deleted} && !$c->{is_delete};
			return 'stale';
		}
		if ($cmp == 0)
		{
			if ($stored->{content} eq $c->{content} && !!$stored->{deleted} == !!$c->{is_delete})
			{
				$counts->{duplicate}++;
				return 'duplicate';
			}
			return $self->_conflict($c, $counts, 'same version, other content');
		}
	}
	my $rows = $self->{rows}{$t} ||= {};
	if (!$c->{is_delete} && _has_unavailable($c->{image}) && !$rows->{ $c->{entity_key} } && !$carry)
	{
		return $self->_conflict($c, $counts, 'unavailable values for a missing row');
	}

	# applied
	$self->{entities}{$t}{ $c->{entity_key} } = {
		source  => $c->{source},
		version => $v,
		deleted => $c->{is_delete} ? 1 : 0,
		content => $c->{content},
	};
	if ($c->{is_delete})
	{
		delete $rows->{ $c->{entity_key} };
	}
	else
	{
		my $row = $carry ? ($rows->{ $c->{entity_key} } = $carry) : $rows->{ $c->{entity_key} };
		if (!$row)
		{
			$row = $rows->{ $c->{entity_key} } = { map { $_->[0] => undef } @{ $self->{tables}{$t}{cols} } };
		}
		for my $col (keys %{ $c->{image} })
		{
			my $val = $c->{image}{$col};
			next if ref $val && $val == $UNAVAILABLE;
			$row->{$col} = $val;
		}
	}
	$counts->{applied}++;
	if ($c->{is_snapshot})
	{
		$counts->{snapshot_rows}++;
	}
	elsif ($self->_outbox($c, $c->{op}, $c->{entity_key}, $self->{tables}{$t}))
	{
		$counts->{outbox_rows}++;
	}
	return 'applied';
}

sub _conflict
{
	my ($self, $c, $counts, $why) = @_;
	push @{ $self->{conflicts} }, {
		target       => $c->{target},
		entity_key   => $c->{entity_key},
		delivery_key => $c->{delivery_key},
		op           => $c->{op},
		version      => $c->{version},
		why          => $why,
	};
	$counts->{conflict}++;
	return 'conflict';
}

# The outbox idempotency key: md5(source name, source schema.table, op,
# version, entity key) -- the source identity of the change.
sub idempotency_key
{
	my ($src, $op, $version, $entity_key) = @_;
	return md5_hex(join("\n",
		$src->{name} // '', ($src->{schema} // '') . '.' . ($src->{table} // ''),
		$op, version_text($version), $entity_key));
}

# Writes an outbox row unless the mapping has none; true when a row was added.
sub _outbox
{
	my ($self, $c, $op, $entity_key, $t) = @_;
	return 0 unless $t->{outbox};
	my $key = idempotency_key($c->{source_info}, $op, $c->{version}, $entity_key);
	return 0 if exists $self->{outbox}{$key};
	$self->{outbox}{$key} = {
		target     => $c->{target},
		entity_key => $entity_key eq '' ? undef : $entity_key,
		op         => $op,
		version    => $c->{version},
		seq        => ++$self->{outbox_seq},    # insertion order (cdc.outbox.id)
	};
	return 1;
}

# Does the ledger hold the delivery key for the target (was it processed)?
sub claimed
{
	my ($self, $target, $dk) = @_;
	return exists $self->{ledger}{"$target\n$dk"};
}

# ---------------------------------------------------------------------------
# The state as comparable lines (the driver reads the database into the
# same form)
# ---------------------------------------------------------------------------

# cdc.ledger.digest of a delivery: the first 64 bits of md5("<target
# oid>\n<delivery key>") as a signed integer (cdc.delivery_digest).  The
# driver puts the target tables' OIDs into the table descriptions.
sub ledger_digest
{
	my ($oid, $dk) = @_;
	die "no OID for a ledger digest" unless defined $oid;
	my $bytes = Digest::MD5::md5("$oid\n$dk");
	return unpack('q>', substr($bytes, 0, 8));
}

sub canon_key
{
	my ($k) = @_;
	return 'null' unless defined $k;
	return json_encode(json_decode($k));
}

# The state as lines.  With ranged => 1 (claims by offset range) the
# deliveries that named their key leave no ledger line: they are claimed
# by offset range, which the driver checks through
# cdc.delivery_processed() (claimed).  Outbox lines carry the row's rank
# among the rows of its entity (per-key order), obo lines the order of all
# rows, conflict lines their rank: all in insertion order.
sub state_lines
{
	my ($self, %opt) = @_;
	my @l;
	for my $t (sort keys %{ $self->{rows} })
	{
		push @l, "row|$t|" . json_encode($_) for values %{ $self->{rows}{$t} };
	}
	for my $t (sort keys %{ $self->{entities} })
	{
		while (my ($k, $e) = each %{ $self->{entities}{$t} })
		{
			push @l, join('|', 'ent', $t, canon_key($k), $e->{source}, version_text($e->{version}),
				$e->{deleted} ? 't' : 'f');
		}
	}
	while (my ($t, $b) = each %{ $self->{barriers} })
	{
		push @l, join('|', 'bar', $t, $b->{source}, version_text($b->{version}));
	}
	while (my ($k, $r) = each %{ $self->{ledger} })
	{
		next if $opt{ranged} && $r->{given};
		my (undef, $dk) = split /\n/, $k, 2;
		push @l, join('|', 'led', $r->{target}, ledger_digest($self->{tables}{ $r->{target} }{oid}, $dk));
	}
	my (%krank, $rank);
	for my $ik (sort { $self->{outbox}{$a}{seq} <=> $self->{outbox}{$b}{seq} } keys %{ $self->{outbox} })
	{
		my $r = $self->{outbox}{$ik};
		my $ek = canon_key($r->{entity_key});
		push @l, join('|', 'obx', $ik, $r->{target}, $ek, $r->{op}, version_text($r->{version}), ++$krank{"$r->{target}|$ek"});
		push @l, join('|', 'obo', ++$rank, $ik);
	}
	my $crank = 0;
	for my $c (@{ $self->{conflicts} })
	{
		push @l, join('|', 'cfl', $c->{target}, canon_key($c->{entity_key}), $c->{delivery_key}, $c->{op},
			version_text($c->{version}), ++$crank);
	}
	for my $t (sort keys %{ $self->{stats} })
	{
		my $s = $self->{stats}{$t};
		my @v = map { $s->{$_} // 0 }
		  qw(applied duplicate stale conflict ignored blocked_resurrections outbox_rows snapshot_rows);
		next unless grep { $_ } @v;
		push @l, join('|', 'st', $t, @v);
	}
	return [ sort @l ];
}

1;

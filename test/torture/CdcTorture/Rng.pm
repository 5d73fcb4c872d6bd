# Deterministic pseudo-random numbers for the torture suite.
#
# xorshift32 on plain integers (every intermediate value fits in 64 bits, so
# the sequence is identical on every Perl build), seeded through FNV-1a of
# the seed text.  fork($label) derives an independent stream, so that adding
# a draw to one part of the generator does not shift the others: a seed keeps
# producing the same history when delivery orders change, and vice versa.
package CdcTorture::Rng;
use strict;
use warnings;

my $M32 = 0xffffffff;

sub _fnv
{
	my ($text) = @_;
	my $h = 2166136261;
	for my $c (unpack 'C*', $text)
	{
		$h ^= $c;
		$h = ($h * 16777619) & $M32;
	}
	return $h || 0x9e3779b9;
}

sub new
{
	my ($class, $seed) = @_;
	my $self = bless { x => _fnv("cdc-torture:$seed"), label => "$seed" }, $class;
	$self->next for 1 .. 4;
	return $self;
}

# A new, independent stream named by $label (same parent + label => same stream).
sub fork
{
	my ($self, $label) = @_;
	return CdcTorture::Rng->new($self->{label} . "/$label");
}

sub next
{
	my ($self) = @_;
	my $x = $self->{x};
	$x ^= ($x << 13) & $M32;
	$x ^= $x >> 17;
	$x ^= ($x << 5) & $M32;
	$self->{x} = $x;
	return $x;
}

# Integer in [0, n).
sub int
{
	my ($self, $n) = @_;
	return 0 if $n <= 1;
	return CORE::int($self->next * $n / 4294967296);
}

# Integer in [lo, hi].
sub range
{
	my ($self, $lo, $hi) = @_;
	return $lo + $self->int($hi - $lo + 1);
}

# True with probability p.
sub chance
{
	my ($self, $p) = @_;
	return $self->next / 4294967296 < $p;
}

sub pick
{
	my ($self, @items) = @_;
	return $items[ $self->int(scalar @items) ];
}

# Picks a key of %$weights with probability proportional to its value
# (keys visited in sorted order, so the result is deterministic).
sub weighted
{
	my ($self, $weights) = @_;
	my @keys = sort grep { $weights->{$_} > 0 } keys %$weights;
	my $total = 0;
	$total += $weights->{$_} for @keys;
	my $r = $self->next / 4294967296 * $total;
	for my $k (@keys)
	{
		return $k if ($r -= $weights->{$k}) < 0;
	}
	return $keys[-1];
}

sub shuffle
{
	my ($self, @items) = @_;
	for (my $i = $#items; $i > 0; $i--)
	{
		my $j = $self->int($i + 1);
		@items[ $i, $j ] = @items[ $j, $i ];
	}
	return @items;
}

1;

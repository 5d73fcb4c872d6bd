# The destination schema of the torture suite and the value conventions
# shared by the generator, the reference model and the driver.
#
# A table description (a hash) says everything the model needs to know
# about a mapping: the source it accepts (source.name, schema, table), the
# mapping's epoch, outbox and truncate policy, the key columns and the
# column types.  Types used: int, numeric, text, bytea, jsonb, text[].
package CdcTorture::Schema;
use strict;
use warnings;
use JSON::PP ();
use MIME::Base64 ();
use Exporter 'import';

our @EXPORT_OK = qw(
  $PLACEHOLDER $PLACEHOLDER_B64 json_encode json_decode canon_value
  db_value_from_event is_unavailable entity_key_string version_text
  version_cmp table_ddl mapping_sql torture_tables sources);

our $PLACEHOLDER = '__debezium_unavailable_value';
our $PLACEHOLDER_B64 = MIME::Base64::encode_base64($PLACEHOLDER, '');

my $JSON = JSON::PP->new->canonical(1)->allow_nonref(1);

sub json_encode { return $JSON->encode($_[0]); }
sub json_decode { return $JSON->decode($_[0]); }

# The sources of generated histories: each has its own LSN space and epoch.
#   srcA: transaction metadata on (transaction.total_order is sent),
#         REPLICA IDENTITY DEFAULT (update before = null, delete before = key).
#   srcB: no transaction metadata, REPLICA IDENTITY FULL (full before images).
sub sources
{
	return {
		srcA => { name => 'srcA', db => 'dba', epoch => 2, total_order => 1, full_before => 0 },
		srcB => { name => 'srcB', db => 'dbb', epoch => 5, total_order => 0, full_before => 1 },
	};
}

# The tables of generated histories.  Sources are on disjoint tables, so
# versions of different sources are never compared (docs/semantics.md).
sub torture_tables
{
	return {
		ta => {
			name => 'ta', source => 'srcA', source_schema => 'public', source_table => 'ta', epoch => 2,
			key => ['id'], cols => [ [ id => 'int' ], [ v => 'text' ], [ n => 'int' ], [ body => 'text' ] ],
			toast => ['body'], outbox => 1, truncate => 'truncate',
		},
		tc => {
			name => 'tc', source => 'srcA', source_schema => 'inv', source_table => 'tc', epoch => 2,
			key => [ 'g', 'id' ], cols => [ [ g => 'text' ], [ id => 'int' ], [ v => 'text' ], [ blob => 'bytea' ] ],
			toast => ['blob'], outbox => 1, truncate => 'truncate',
		},
		tb => {
			name => 'tb', source => 'srcB', source_schema => 'public', source_table => 'tb', epoch => 5,
			key => ['id'], cols => [ [ id => 'int' ], [ v => 'text' ], [ doc => 'jsonb' ], [ tags => 'text[]' ] ],
			toast => [ 'doc', 'tags' ], outbox => 1, truncate => 'ignore',
		},
	};
}

sub col_type
{
	my ($t, $col) = @_;
	for my $c (@{ $t->{cols} })
	{
		return $c->[1] if $c->[0] eq $col;
	}
	return undef;
}

# CREATE TABLE for a description.
sub table_ddl
{
	my ($t) = @_;
	my @defs = map { qq{"$_->[0]" $_->[1]} . ($_->[2] ? " $_->[2]" : '') } @{ $t->{cols} };
	push @defs, 'PRIMARY KEY (' . join(', ', map { qq{"$_"} } @{ $t->{key} }) . ')';
	return qq{CREATE TABLE "$t->{name}" (} . join(', ', @defs) . ');';
}

# cdc.register_mapping() call for a description.
sub mapping_sql
{
	my ($t) = @_;
	my $src = defined $t->{source} ? "'$t->{source}'" : 'NULL';
	return sprintf(
		q{SELECT 1 FROM cdc.register_mapping('%s', '%s', '%s', outbox => %s, source_name => %s, source_epoch => %d, truncate_policy => '%s');},
		$t->{name}, $t->{source_schema}, $t->{source_table}, ($t->{outbox} ? 'true' : 'false'),
		$src, $t->{epoch}, $t->{truncate});
}

# True when an event value is Debezium's unavailable-value placeholder (the
# string, its padded base64, or a one-element array of either).
sub is_unavailable
{
	my ($v) = @_;
	return 0 unless defined $v;
	if (ref $v eq 'ARRAY')
	{
		return @$v == 1 && !ref $v->[0] && defined $v->[0] && ($v->[0] eq $PLACEHOLDER || $v->[0] eq $PLACEHOLDER_B64);
	}
	return !ref $v && ($v eq $PLACEHOLDER || $v eq $PLACEHOLDER_B64);
}

# The canonical text of a value as stored in the destination, from a value
# of the event (JSON decoded) for a column of type $type.  Equal texts mean
# equal destination values.  undef is SQL NULL.
sub db_value_from_event
{
	my ($type, $v) = @_;
	return undef unless defined $v;
	if ($type eq 'bytea')
	{
		return '\\x' . unpack('H*', MIME::Base64::decode_base64($v));
	}
	if ($type eq 'jsonb' || $type eq 'text[]')
	{
		return json_encode($v);
	}
	return "$v";
}

# The canonical text of a value read back from to_jsonb(row).
sub canon_value
{
	my ($type, $v) = @_;
	return undef unless defined $v;
	return json_encode($v) if $type eq 'jsonb' || $type eq 'text[]';
	return "$v";
}

# The entity key as the engine writes it: {"id": "7"} / {"g": "x", "id": "1"}
# (key columns in key order, values as output text).
sub entity_key_string
{
	my ($t, $image) = @_;
	my @parts;
	for my $k (@{ $t->{key} })
	{
		my $v = $image->{$k};
		push @parts, json_encode("$k") . ': ' . json_encode(defined $v ? "$v" : undef);
	}
	return '{' . join(', ', @parts) . '}';
}

sub version_text { return '{' . join(',', @{ $_[0] }) . '}'; }

sub version_cmp
{
	my ($a, $b) = @_;
	my $n = @$a < @$b ? @$a : @$b;
	for my $i (0 .. $n - 1)
	{
		my $c = $a->[$i] <=> $b->[$i];
		return $c if $c;
	}
	return @$a <=> @$b;
}

1;

# Fixed histories: every Debezium-path case of shared/scenarios.md (B01,
# B03, B04, B05, B06, B10, B11, B13, B15, B21, B23) and a few more (key
# change, cross-source event, epoch bump, truncate delivered late), each
# with the expected destination state written by hand from the scenario
# text.  run_case() applies them through the driver, which also compares
# the database with the reference model, so a case checks three things
# against each other: the hand-written expectation, the model, the engine.
package CdcTorture::Fixed;
use strict;
use warnings;
use MIME::Base64 ();
use CdcTorture::Rng;
use CdcTorture::Schema qw(json_encode json_decode $PLACEHOLDER $PLACEHOLDER_B64 version_text);

my $SRC = 'scen';

sub _t
{
	my ($name, $source_table, $key, @cols) = @_;
	return ($name => {
		name => $name, source => $SRC, source_schema => 'public', source_table => $source_table, epoch => 0,
		key => $key, cols => \@cols, toast => [], outbox => 1, truncate => 'truncate',
	});
}

# Destination tables of the fixed cases (s_ prefix: apart from the generated ones).
sub tables
{
	my %t = (
		_t('s_docs', 'docs', ['id'], [ id => 'int' ], [ body => 'jsonb' ], [ blob => 'bytea' ], [ status => 'text' ]),
		_t('s_items', 'items', ['id'], [ id => 'int' ], [ name => 'text', 'NOT NULL' ], [ qty => 'int', 'NOT NULL' ]),
		_t('s_accounts', 'accounts', ['id'], [ id => 'int' ], [ bal => 'numeric' ]),
		_t('s_stock', 'stock', ['sku'], [ sku => 'text' ], [ qty => 'int' ]),
		_t('s_b06', 'b06', ['id'], [ id => 'int' ], [ v => 'text' ]),
		_t('s_b10', 'b10', ['id'], [ id => 'int' ], [ v => 'text' ]),
		_t('s_dev', 'dev', ['k'], [ k => 'int' ], [ status => 'text' ]),
		_t('s_orders', 'orders', ['id'], [ id => 'int' ], [ status => 'text' ]),
		_t('s_cars', 'cars', ['id'], [ id => 'int' ], [ make => 'text' ]),
		_t('s_log', 'log', ['id'], [ id => 'int' ], [ msg => 'text' ]),
		_t('s_kc', 'kc', ['id'], [ id => 'int' ], [ v => 'text' ]),
		_t('s_cross', 'cross', ['id'], [ id => 'int' ], [ v => 'text' ]),
		_t('s_epoch', 'epoch', ['id'], [ id => 'int' ], [ v => 'text' ]),
		_t('s_late', 'late', ['id'], [ id => 'int' ], [ msg => 'text' ]),
		_t('s_kct', 'kct', ['id'], [ id => 'int' ], [ v => 'text' ], [ body => 'text' ]),
	);
	$t{s_cross}{source} = undef;    # accepts any source: lets two sources meet on one entity
	$t{s_epoch}{remappable} = 1;
	return \%t;
}

sub _lsn
{
	my ($text) = @_;
	my ($hi, $lo) = split m{/}, $text;
	return hex($hi) * 4294967296 + hex($lo);
}

# A Debezium envelope in the notation of shared/scenarios.md (like dbz() in
# sql/setup.sql).
sub dbz
{
	my (%a) = @_;
	my %src = (
		connector => 'postgresql', name => $a{src} // $SRC, db => 'src', schema => 'public', table => $a{table},
		snapshot => $a{snap} // ($a{op} eq 'r' ? 'true' : 'false'),
	);
	$src{lsn} = 0 + _lsn($a{lsn}) if defined $a{lsn};
	$src{commit_lsn} = 0 + _lsn($a{clsn}) if defined $a{clsn};
	$src{txId} = 0 + $a{tx} if defined $a{tx};
	$src{ts_ms} = 0 + $a{ts} if defined $a{ts};
	my %p = (op => $a{op}, source => \%src, before => $a{before}, after => $a{after});
	return json_encode(\%p);
}

# Expected versions: {epoch, commit or change lsn, lsn, 0}, snapshot {epoch, S, 0, 0}.
sub v
{
	my ($lsn, $clsn) = @_;
	return version_text([ 0, _lsn($clsn // $lsn), _lsn($lsn), 0 ]);
}

sub scenarios
{
	my @cases;
	my $d = sub { my ($name, $dk, %a) = @_; return { json => dbz(%a), dk => "$name:$dk", target => undef }; };
	my $single = sub { return [ map { [$_] } @_ ]; };

	# B01: placeholders keep the stored values (text/jsonb and bytea forms).
	{
		my $rng = CdcTorture::Rng->new('B01');
		my $J1 = { doc => 'j1-' . ('x' x 9000), n => 1 };
		my $J2 = { doc => 'j2-' . ('y' x 9000), n => 2 };
		my $Y1 = join('', map { chr($rng->int(256)) } 1 .. 12288);
		my $b = 'B01';
		my @d = (
			$d->($b, 'd1', op => 'c', table => 'docs', after => { id => 1, body => $J1, blob => MIME::Base64::encode_base64($Y1, ''), status => 'new' }, lsn => '0/1000', tx => 500),
			$d->($b, 'd2', op => 'u', table => 'docs', after => { id => 1, body => $PLACEHOLDER, blob => $PLACEHOLDER_B64, status => 'paid' }, lsn => '0/1100', tx => 501),
		);
		push @d, $d[1];
		push @d, $d->($b, 'd3', op => 'u', table => 'docs', after => { id => 1, body => $J2, blob => $PLACEHOLDER_B64, status => 'paid' }, lsn => '0/1200', tx => 502);
		push @d, $d->($b, 'd4', op => 'u', table => 'docs', after => { id => 1, body => $PLACEHOLDER, blob => $PLACEHOLDER_B64, status => 'shipped' }, lsn => '0/1300', tx => 503);
		push @d, $d->($b, 'd5', op => 'u', table => 'docs', after => { id => 2, body => $PLACEHOLDER, blob => $PLACEHOLDER_B64, status => 'x' }, lsn => '0/1400', tx => 504);
		push @cases, {
			name => 'B01 TOAST placeholder keeps stored values (+B01b: placeholder for an unknown row is a conflict)',
			batches => $single->(@d),
			expect => {
				rows => { s_docs => [ { id => 1, body => json_encode($J2), blob => '\\x' . unpack('H*', $Y1), status => 'shipped' } ] },
				outbox => { s_docs => 4 },
				conflicts => { s_docs => 1 },
				outcomes => [qw(applied applied duplicate applied applied conflict)],
			},
		};
	}

	# B03: key-only delete under REPLICA IDENTITY DEFAULT (NOT NULL columns).
	{
		my $b = 'B03';
		my $d1 = $d->($b, 'd1', op => 'c', table => 'items', after => { id => 7, name => 'bolt', qty => 5 }, lsn => '0/3000', tx => 600);
		my $d2 = $d->($b, 'd2', op => 'u', table => 'items', after => { id => 7, name => 'bolt', qty => 4 }, lsn => '0/3100', tx => 601);
		my $d3 = $d->($b, 'd3', op => 'd', table => 'items', before => { id => 7, name => undef, qty => undef }, lsn => '0/3200', tx => 602);
		push @cases, {
			name => 'B03 key-only delete, late create is stale',
			batches => $single->($d1, $d2, $d3, $d3, $d1),
			expect => {
				rows => { s_items => [] },
				tombstones => { s_items => [ [ '{"id":"7"}', v('0/3200') ] ] },
				outbox => { s_items => 3 },
				outcomes => [qw(applied applied applied duplicate duplicate)],
			},
		};
	}

	# B04: Kafka tombstones after a delete.
	{
		my $b = 'B04';
		my $d1 = $d->($b, 'd1', op => 'c', table => 'accounts', after => { id => 9, bal => 10 }, lsn => '0/4000', tx => 700);
		my $d2 = $d->($b, 'd2', op => 'd', table => 'accounts', before => { id => 9 }, lsn => '0/4100', tx => 701);
		my $d3 = { json => undef, dk => 'B04:d3', target => 's_accounts' };
		my $d4 = { json => 'null', dk => 'B04:d4', target => undef };
		# d1'' arrives under a new delivery key (a re-published topic): stale by version.
		my $d1n = { %$d1, dk => 'B04:d1-gen2' };
		push @cases, {
			name => 'B04 Kafka tombstones are ignored and never replace the tombstone',
			batches => $single->($d1, $d2, $d3, $d3, $d2, $d1, $d4, $d1n),
			expect => {
				rows => { s_accounts => [] },
				tombstones => { s_accounts => [ [ '{"id":"9"}', v('0/4100') ] ] },
				outbox => { s_accounts => 2 },
				outcomes => [qw(applied applied ignored ignored duplicate duplicate ignored stale)],
			},
		};
	}

	# B05: at-least-once duplicates.
	{
		my $b = 'B05';
		my $d1 = $d->($b, 'd1', op => 'c', table => 'stock', after => { sku => 'A', qty => 5 }, lsn => '0/5000', tx => 800);
		my $d2 = $d->($b, 'd2', op => 'u', table => 'stock', before => { sku => 'A', qty => 5 }, after => { sku => 'A', qty => 7 }, lsn => '0/5100', tx => 801);
		my $d3 = $d->($b, 'd3', op => 'u', table => 'stock', after => { sku => 'A', qty => 6 }, lsn => '0/5200', tx => 802);
		push @cases, {
			name => 'B05 duplicates after a connector restart',
			batches => $single->($d1, $d2, $d1, $d2, $d2, $d3, $d3),
			expect => {
				rows => { s_stock => [ { sku => 'A', qty => 6 } ] },
				outbox => { s_stock => 3 },
				ledger => { s_stock => 3 },
				outcomes => [qw(applied applied duplicate duplicate duplicate applied duplicate)],
			},
		};
	}

	# B06: interleaved transactions, change LSNs not monotonic.
	{
		my $b = 'B06';
		my @prior = (
			$d->($b, 'p1', op => 'r', table => 'b06', after => { id => 1, v => 'a1' }, lsn => '0/5F00'),
			$d->($b, 'p3', op => 'r', table => 'b06', after => { id => 3, v => 'c1' }, lsn => '0/5F10'),
		);
		my $d1 = $d->($b, 'd1', op => 'c', table => 'b06', after => { id => 2, v => 'b' }, lsn => '0/6020', tx => 911, clsn => '0/6030');
		my $d2 = $d->($b, 'd2', op => 'u', table => 'b06', after => { id => 1, v => 'a2' }, lsn => '0/6010', tx => 910, clsn => '0/6050');
		my $d3 = $d->($b, 'd3', op => 'u', table => 'b06', after => { id => 3, v => 'c2' }, lsn => '0/6040', tx => 910, clsn => '0/6050');
		push @cases, {
			name => 'B06 no global max-LSN skip',
			batches => $single->(@prior, $d1, $d2, $d3, $d1, $d2, $d3),
			expect => {
				rows => { s_b06 => [ { id => 1, v => 'a2' }, { id => 2, v => 'b' }, { id => 3, v => 'c2' } ] },
				outbox => { s_b06 => 3 },
				outcomes => [qw(applied applied applied applied applied duplicate duplicate duplicate)],
			},
		};
	}

	# B10: snapshot/stream overlap, with the interleaving trap d6.
	{
		my $b = 'B10';
		my @d = (
			$d->($b, 'd1', op => 'r', table => 'b10', after => { id => 1, v => 'x1' }, lsn => '0/A000', snap => 'true'),
			$d->($b, 'd2', op => 'r', table => 'b10', after => { id => 2, v => 'y1' }, lsn => '0/A000', snap => 'true'),
			$d->($b, 'd3', op => 'r', table => 'b10', after => { id => 3, v => 'z0' }, lsn => '0/A000', snap => 'last'),
			$d->($b, 'd4', op => 'c', table => 'b10', after => { id => 2, v => 'y1' }, lsn => '0/9F80', clsn => '0/9FC0', tx => 1200),
			$d->($b, 'd5', op => 'u', table => 'b10', after => { id => 1, v => 'x2' }, lsn => '0/A100', clsn => '0/A140', tx => 1201),
			$d->($b, 'd6', op => 'u', table => 'b10', after => { id => 3, v => 'z1' }, lsn => '0/9FF0', clsn => '0/A180', tx => 1199),
		);
		push @cases, {
			name => 'B10 snapshot/stream overlap (commit_lsn supplied)',
			batches => $single->(@d),
			expect => {
				rows => { s_b10 => [ { id => 1, v => 'x2' }, { id => 2, v => 'y1' }, { id => 3, v => 'z1' } ] },
				outbox => { s_b10 => 2 },
				outcomes => [qw(applied applied applied stale applied applied)],
			},
		};
	}

	# B11: delete and re-insert of one key in one batch; tombstone vs delayed insert.
	{
		my $b = 'B11';
		my $p = $d->($b, 'p', op => 'r', table => 'dev', after => { k => 1001, status => 'old' }, lsn => '0/B000');
		my $d1 = $d->($b, 'd1', op => 'd', table => 'dev', before => { k => 1001 }, lsn => '0/B100', tx => 1300);
		my $d2 = $d->($b, 'd2', op => 'c', table => 'dev', after => { k => 1001, status => 'new' }, lsn => '0/B110', tx => 1300);
		my $d3 = $d->($b, 'd3', op => 'd', table => 'dev', before => { k => 2002 }, lsn => '0/B200', tx => 1301);
		my $d4 = $d->($b, 'd4', op => 'c', table => 'dev', after => { k => 2002, status => 'late' }, lsn => '0/B050', tx => 1290);
		my $d5 = $d->($b, 'd5', op => 'c', table => 'dev', after => { k => 2002, status => 'again' }, lsn => '0/B300', tx => 1302);
		push @cases, {
			name => 'B11 delete + re-insert in one batch; older insert blocked by tombstone',
			batches => [ [$p], [ $d1, $d2 ], [$d1], [$d3], [$d4], [$d5] ],
			expect => {
				rows => { s_dev => [ { k => 1001, status => 'new' }, { k => 2002, status => 'again' } ] },
				outbox => { s_dev => 4 },
				outcomes => [qw(applied applied applied duplicate applied stale applied)],
				blocked => { s_dev => 1 },
			},
		};
	}

	# B13: stale redelivery after a rebalance.
	{
		my $b = 'B13';
		my @d = map {
			$d->($b, "d$_->[0]", op => $_->[0] == 1 ? 'c' : 'u', table => 'orders', after => { id => 9, status => $_->[1] },
				lsn => $_->[2], tx => 1499 + $_->[0])
		} ([ 1, 'A', '0/D000' ], [ 2, 'B', '0/D100' ], [ 3, 'C', '0/D200' ], [ 4, 'D', '0/D300' ]);
		push @cases, {
			name => 'B13 rebalance redelivers older versions',
			batches => $single->(@d[ 0, 1, 2, 0, 1, 3, 2 ]),
			expect => {
				rows => { s_orders => [ { id => 9, status => 'D' } ] },
				outbox => { s_orders => 4 },
				outcomes => [qw(applied applied applied duplicate duplicate applied duplicate)],
			},
		};
	}

	# B15: equal ts_ms; the log position decides.
	{
		my $b = 'B15';
		my @d = (
			$d->($b, 'd2', op => 'd', table => 'cars', before => { id => 6 }, lsn => '0/F040', ts => 1623851413000, tx => 1701),
			$d->($b, 'd1', op => 'c', table => 'cars', after => { id => 6, make => 'Opel' }, lsn => '0/F000', ts => 1623851413000, tx => 1700),
			$d->($b, 'd3', op => 'c', table => 'cars', after => { id => 4, make => 'BMW' }, lsn => '0/F100', ts => 1623851414000, tx => 1702),
			$d->($b, 'd4', op => 'd', table => 'cars', before => { id => 4 }, lsn => '0/F140', ts => 1623851414000, tx => 1703),
		);
		push @cases, {
			name => 'B15 ts_ms is never a version',
			batches => $single->(@d),
			expect => {
				rows => { s_cars => [] },
				tombstones => { s_cars => [ [ '{"id":"6"}', v('0/F040') ], [ '{"id":"4"}', v('0/F140') ] ] },
				outbox => { s_cars => 3 },
				outcomes => [qw(applied stale applied applied)],
			},
		};
	}

	# B21: truncate, then older and repeated deliveries.
	{
		my $b = 'B21';
		my $d1 = $d->($b, 'd1', op => 'c', table => 'log', after => { id => 1, msg => 'a' }, lsn => '0/15000', tx => 2400);
		my $d2 = $d->($b, 'd2', op => 'c', table => 'log', after => { id => 2, msg => 'b' }, lsn => '0/15040', tx => 2401);
		my $d3 = $d->($b, 'd3', op => 't', table => 'log', lsn => '0/15100', tx => 2402);
		my $d4 = $d->($b, 'd4', op => 'c', table => 'log', after => { id => 3, msg => 'c' }, lsn => '0/15200', tx => 2403);
		my $d1n = { %$d1, dk => 'B21:d1-gen2' };
		my $d3n = { %$d3, dk => 'B21:d3-gen2' };
		push @cases, {
			name => 'B21 truncate barrier; redelivered truncate does not wipe newer rows',
			batches => $single->($d1, $d2, $d3, $d4, $d1, $d3, $d1n, $d3n),
			expect => {
				rows => { s_log => [ { id => 3, msg => 'c' } ] },
				outbox => { s_log => 4 },
				barrier => { s_log => v('0/15100') },
				outcomes => [qw(applied applied applied applied duplicate duplicate stale stale)],
			},
		};
	}

	# B23: two destinations, identical idempotency keys.
	{
		my $b = 'B23';
		my $d1 = $d->($b, 'd1', op => 'c', table => 'orders', after => { id => 42, status => 'new' }, lsn => '0/17000', tx => 2600);
		my $d2 = $d->($b, 'd2', op => 'u', table => 'orders', after => { id => 42, status => 'paid' }, lsn => '0/17100', tx => 2601);
		my $d3 = $d->($b, 'd3', op => 'd', table => 'orders', before => { id => 42 }, lsn => '0/17200', tx => 2602);
		push @cases, {
			name => 'B23 outbox idempotency keys identical across destinations',
			runs => [ $single->($d1, $d2, $d3, $d1, $d2), [ [$d1], [$d2], [$d2], [ $d1, $d2, $d3 ], [$d3] ] ],
			same_outbox => 1,
			expect => { rows => { s_orders => [] }, outbox => { s_orders => 3 } },
		};
	}

	# K1: primary key change (update whose before-image has the old key).
	{
		my $b = 'K1';
		my $d1 = $d->($b, 'd1', op => 'c', table => 'kc', after => { id => 1, v => 'a' }, lsn => '0/100', tx => 1);
		my $d2 = $d->($b, 'd2', op => 'u', table => 'kc', before => { id => 1 }, after => { id => 2, v => 'b' }, lsn => '0/200', tx => 2);
		my $d3 = $d->($b, 'd3', op => 'u', table => 'kc', after => { id => 1, v => 'late' }, lsn => '0/180', tx => 3);
		push @cases, {
			name => 'K1 key change deletes the old key (tombstone) and inserts the new one',
			batches => [ [$d1], [ $d2, $d3 ], [$d2] ],
			expect => {
				rows => { s_kc => [ { id => 2, v => 'b' } ] },
				tombstones => { s_kc => [ [ '{"id":"1"}', v('0/200') ] ] },
				outbox => { s_kc => 3 },
				outcomes => [qw(applied applied stale duplicate)],
			},
		};
	}

	# K2: primary key change whose TOASTed column is unchanged (placeholder).
	{
		my $b = 'K2';
		my $d1 = $d->($b, 'd1', op => 'c', table => 'kct', after => { id => 1, v => 'a', body => 'BIG' }, lsn => '0/100', tx => 1);
		my $d2 = $d->($b, 'd2', op => 'u', table => 'kct', before => { id => 1 }, after => { id => 2, v => 'b', body => $PLACEHOLDER }, lsn => '0/200', tx => 2);
		push @cases, {
			name => 'K2 key change with an unchanged TOAST column keeps the moved row\'s value',
			batches => $single->($d1, $d2),
			expect => {
				rows => { s_kct => [ { id => 2, v => 'b', body => 'BIG' } ] },
				tombstones => { s_kct => [ [ '{"id":"1"}', v('0/200') ] ] },
				outbox => { s_kct => 3 },
				conflicts => { s_kct => 0 },
				outcomes => [qw(applied applied)],
			},
		};
	}

	# X1: an entity written by one source, then an event of another source.
	{
		my $b = 'X1';
		my $d1 = $d->($b, 'd1', op => 'c', table => 'cross', src => 'srcP', after => { id => 1, v => 'p' }, lsn => '0/100', tx => 1);
		my $d2 = $d->($b, 'd2', op => 'u', table => 'cross', src => 'srcQ', after => { id => 1, v => 'q' }, lsn => '0/200', tx => 1);
		my $d3 = $d->($b, 'd3', op => 'c', table => 'cross', src => 'srcQ', after => { id => 2, v => 'q' }, lsn => '0/50', tx => 2);
		push @cases, {
			name => 'X1 versions of different sources are never compared (conflict)',
			batches => $single->($d1, $d2, $d3),
			expect => {
				rows => { s_cross => [ { id => 1, v => 'p' }, { id => 2, v => 'q' } ] },
				conflicts => { s_cross => 1 },
				outbox => { s_cross => 2 },
				outcomes => [qw(applied conflict applied)],
			},
		};
	}

	# X2: the source cluster is rebuilt (LSNs restart); the operator bumps the epoch.
	{
		my $b = 'X2';
		my $d1 = $d->($b, 'd1', op => 'c', table => 'epoch', after => { id => 1, v => 'old-cluster' }, lsn => '0/50000', tx => 9);
		my $d2 = $d->($b, 'd2', op => 'u', table => 'epoch', after => { id => 1, v => 'new-cluster' }, lsn => '0/100', tx => 3);
		my $d2early = { %$d2, dk => 'X2:d2-before-bump' };
		push @cases, {
			name => 'X2 a higher source epoch is always newer',
			no_oracle => 1,
			batches => [ [$d1], [$d2early], [ { control => { table => 's_epoch', epoch => 1 } } ], [$d2], [$d2] ],
			expect => {
				rows => { s_epoch => [ { id => 1, v => 'new-cluster' } ] },
				outbox => { s_epoch => 2 },
				outcomes => [qw(applied stale control applied duplicate)],
			},
		};
	}
	return @cases;
}

# A claim storm: every applier gets the same deliveries in the same order,
# one event per transaction -- inserts, updates, deletes and truncates of one
# table -- so the same delivery keys are claimed at the same moment.  SPEC
# §4.1: exactly one session applies each, the others get duplicate, nobody
# gets an error.
sub storm_lists
{
	my ($appliers, $rounds) = @_;
	my @d;
	my $lsn = 0x100000;
	my $n = 0;
	my $add = sub {
		my (%a) = @_;
		$lsn += 0x40;
		my $l = sprintf('%X/%X', int($lsn / 4294967296), $lsn % 4294967296);
		# The appliers drift apart (the first one ahead finds only
		# duplicates); every truncate starts on a clock tick in all of them.
		push @d, { json => dbz(%a, table => 'late', lsn => $l, tx => 9000 + $n), dk => "storm:$n", msg => $n, gen => 1,
			sync_tick => $a{op} eq 't' };
		$n++;
	};
	for my $r (1 .. $rounds)
	{
		$add->(op => 'c', after => { id => $_, msg => "r$r" }) for 1 .. 3;
		$add->(op => 'u', after => { id => 2, msg => "r$r-u" });
		$add->(op => 'd', before => { id => 3 });
		$add->(op => 't');
		$add->(op => 'c', after => { id => 4, msg => "r$r-after-truncate" });
		$add->(op => 't');
		$add->(op => 'c', after => { id => 5, msg => "r$r-after-second-truncate" });
	}
	return [ map { [ map { [$_] } @d ] } 1 .. $appliers ];
}

# Checks the hand-written expectation against state lines; returns problems.
sub _expect
{
	my ($who, $case, $lines, $outcomes, $tables) = @_;
	my $e = $case->{expect};
	my @p;
	my %by;
	for my $l (@$lines)
	{
		my ($kind, $t, @rest) = split /\|/, $l, -1;
		if ($kind eq 'obx') { ($t) = @rest; }    # idem|target (led lines are target|digest)
		push @{ $by{$kind}{$t} }, $l;
	}
	for my $t (sort keys %{ $e->{rows} || {} })
	{
		my %types = map { $_->[0] => $_->[1] } @{ $tables->{$t}{cols} };
		my @want = sort map {
			my $r = $_;
			"row|$t|" . json_encode({ map { $_->[0] => (defined $r->{ $_->[0] } ? "$r->{$_->[0]}" : undef) } @{ $tables->{$t}{cols} } })
		} @{ $e->{rows}{$t} };
		my @have = sort @{ $by{row}{$t} || [] };
		push @p, "$who: rows of $t:\n    expected " . join("\n             ", @want) . "\n    found    " . join("\n             ", @have)
		  if "@want" ne "@have";
	}
	for my $t (sort keys %{ $e->{tombstones} || {} })
	{
		my @want = sort map { "$_->[0]\@$_->[1]" } @{ $e->{tombstones}{$t} };
		my @have = sort map { my @f = split /\|/; $f[5] eq 't' ? ("$f[2]\@$f[4]") : () } @{ $by{ent}{$t} || [] };
		push @p, "$who: tombstones of $t: expected @want, found @have" if "@want" ne "@have";
	}
	for my $t (sort keys %{ $e->{outbox} || {} })
	{
		my $n = @{ $by{obx}{$t} || [] };
		push @p, "$who: outbox rows of $t: expected $e->{outbox}{$t}, found $n" if $n != $e->{outbox}{$t};
	}
	for my $t (sort keys %{ $e->{ledger} || {} })
	{
		my $n = @{ $by{led}{$t} || [] };
		push @p, "$who: ledger rows of $t: expected $e->{ledger}{$t}, found $n" if $n != $e->{ledger}{$t};
	}
	for my $t (sort keys %{ $e->{conflicts} || {} })
	{
		my $n = @{ $by{cfl}{$t} || [] };
		push @p, "$who: conflicts of $t: expected $e->{conflicts}{$t}, found $n" if $n != $e->{conflicts}{$t};
	}
	for my $t (sort keys %{ $e->{barrier} || {} })
	{
		my ($b) = map { (split /\|/)[3] } @{ $by{bar}{$t} || [] };
		push @p, "$who: barrier of $t: expected $e->{barrier}{$t}, found " . ($b // 'none') if ($b // '') ne $e->{barrier}{$t};
	}
	for my $t (sort keys %{ $e->{blocked} || {} })
	{
		my ($n) = map { (split /\|/)[7] } @{ $by{st}{$t} || [] };
		push @p, "$who: blocked resurrections of $t: expected $e->{blocked}{$t}, found " . ($n // 0)
		  if ($n // 0) != $e->{blocked}{$t};
	}
	if ($e->{outcomes} && $outcomes)
	{
		push @p, "$who: outcomes: expected @{ $e->{outcomes} }, got @$outcomes" if "@{ $e->{outcomes} }" ne "@$outcomes";
	}
	return @p;
}

sub run_case
{
	my ($driver, $case) = @_;
	my @p;
	my @sets;
	my $tables = $driver->{tables};
	my @runs = $case->{runs} ? @{ $case->{runs} } : ($case->{batches});
	for my $i (0 .. $#runs)
	{
		my $r = $driver->run_plan({ batches => $runs[$i], no_oracle => $case->{no_oracle} });
		push @p, map {"run $i: $_"} @{ $r->{diffs} } unless $r->{ok};
		my %c = %$case;
		delete $c{expect}{outcomes} if $case->{runs};
		push @p, _expect("run $i model", \%c, $r->{model_lines}, $r->{expected}, $tables);
		push @p, _expect("run $i database", \%c, $r->{lines}, $r->{outcomes}, $tables);
		push @sets, join(',', sort map { (split /\|/)[1] } grep {/^obx\|/} @{ $r->{lines} });
	}
	push @p, "outbox idempotency keys differ between destinations:\n  " . join("\n  ", @sets)
	  if $case->{same_outbox} && grep { $_ ne $sets[0] } @sets;
	return @p;
}

1;

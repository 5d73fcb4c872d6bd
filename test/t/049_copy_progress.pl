# Long work shows its progress (issue 14 section 5; docs/worker.md,
# "Progress"; docs/retention.md).
#
#   A. the initial copy of a 300,000-row table: cdc.copy_progress, sampled
#      all through the copy, rises monotonically to 100 % and its rows to
#      the table's; the total is the source planner's estimate; rate and
#      time left are filled while it runs.  The copy is held at two points
#      deterministically, without timing: two sessions on the destination
#      hold uncommitted inserts of the keys 100000 and 200000, so the copy
#      (one local transaction, rows in the source's heap order) waits on
#      each of them in turn; the test samples while it waits, then rolls
#      the session back and the copy goes on.
#   B. the scheduled cdc.prune() over a ledger of many blocks, one block a
#      call: cdc.prune_progress shows the pass advancing, blocks and calls
#      left, and behind while a full pass takes longer than the replay
#      horizon; with more blocks per call it is no longer behind.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $rows = 300000;
my $source = new_source('source');
my $dest = new_dest('dest', qq{
cdc.prune_interval = 1
cdc.prune_max_pages = 1
cdc.replay_horizon = 3600
});

sub dq { return $dest->safe_psql('postgres', $_[0]); }

# ---------------------------------------------------------------------------
# A. the initial copy
# ---------------------------------------------------------------------------
$source->safe_psql('postgres', qq{
CREATE TABLE big (id int PRIMARY KEY, v text);
INSERT INTO big SELECT g, 'row ' || g FROM generate_series(1, $rows) g;
ANALYZE big;
CREATE PUBLICATION pbig FOR TABLE big;
});
dq('CREATE TABLE big (id int PRIMARY KEY, v text)');

# the two sessions the copy will wait on, in this order
my @holders;
for my $key (100000, 200000) {
	my $h = $dest->background_psql('postgres');
	$h->query_safe('BEGIN');
	$h->query_safe("INSERT INTO big VALUES ($key, 'held by the test')");
	my $pid = $h->query_safe('SELECT pg_backend_pid()');
	$pid =~ s/\s+//g;
	push @holders, { key => $key, psql => $h, pid => $pid };
}

create_subscription($dest, $source, 'cp', ['pbig']);

my $sample_sql = q{SELECT state || '|' || coalesce(rows_copied, -1) || '|' || coalesce(rows_estimated, -1) || '|'
       || coalesce(percent::float8, -1) || '|' || coalesce(rows_per_second::float8, -1) || '|' || coalesce(extract(epoch FROM time_left)::float8, -1)
  FROM cdc.copy_progress WHERE subscription = 'cp' AND table_name = 'big'};
my @samples;    # [state, rows, estimate, percent, rate, seconds_left]
sub sample
{
	my $s = dq($sample_sql);
	return undef if $s eq '';
	my @f = split /\|/, $s;
	push @samples, \@f;
	return \@f;
}

# Samples until the worker waits for $holder's transaction; returns the sample taken while it waits.
sub sample_until_blocked_by
{
	my ($holder) = @_;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $deadline) {
		sample();
		my $blocked = dq(qq{SELECT count(*) FROM pg_stat_activity
		                     WHERE backend_type = 'cdc_apply worker' AND $holder->{pid} = ANY (pg_blocking_pids(pid))});
		if ($blocked eq '1') {
			# the copy cannot move while blocked: this sample and the next are of the held point
			my $at = sample();
			is(sample()->[1], $at->[1], "held at key $holder->{key}: the progress stands still");
			return $at;
		}
	}
	return undef;
}

my @held;
for my $holder (@holders) {
	my $at = sample_until_blocked_by($holder);
	ok(defined $at, "the copy reached key $holder->{key} and waits for the test's session") or last;
	push @held, $at;
	is(status_row($dest, 'cp', 'state'), 'copying', "held at key $holder->{key}: the subscription is copying");
	my ($state, $copied, $estimate, $percent, $rate, $left) = @$at;
	is($state, 'copying', "held at key $holder->{key}: copy_progress says copying");
	cmp_ok($copied, '>', 0, "held at key $holder->{key}: $copied rows copied");
	# the count is updated every 1,000 rows read, and the rows are applied in queues of
	# cdc.apply_batch_changes (1,000): the key waited for is among the last 2,000 counted
	cmp_ok(abs($copied - $holder->{key}), '<=', 2000, "held at key $holder->{key}: the count is at the key it waits for");
	cmp_ok(abs($estimate - $rows), '<=', $rows / 10, "the total is the source planner's estimate ($estimate)");
	ok($percent > 0 && $percent < 100, "held at key $holder->{key}: $percent % is strictly between 0 and 100");
	cmp_ok($rate, '>', 0, "held at key $holder->{key}: a rate ($rate rows/s)");
	cmp_ok($left, '>', 0, "held at key $holder->{key}: a time left ($left s)");
	$holder->{psql}->query_safe('ROLLBACK');
	$holder->{psql}->quit;
}
cmp_ok($held[1][1], '>', $held[0][1], "rising: $held[0][1] rows at the first point, $held[1][1] at the second") if @held == 2;

# on to the end
my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
while (time() < $deadline) {
	my $s = sample();
	last if defined $s && $s->[0] eq 'done';
}
my $final = $samples[-1];
is(join('|', @$final[ 0, 1, 3, 5 ]), "done|$rows|100|0", "done: all $rows rows, 100 %, no time left");
ok(wait_status($dest, 'cp', q{state = 'streaming'}), 'the worker streams after the copy');

# every sample of the copy, in order: rows and percent never go down, below 100 % until done
my @copy = grep { $_->[0] ne 'waiting' } @samples;
note(scalar(@samples) . ' samples, ' . scalar(@copy) . ' of the copy; rows: ' . join(' ', map { $_->[1] } @copy[ 0 .. ($#copy < 9 ? $#copy : 9) ]) . ' ...');
my @down = grep { $copy[$_][1] < $copy[ $_ - 1 ][1] || $copy[$_][3] < $copy[ $_ - 1 ][3] } 1 .. $#copy;
is(scalar(@down), 0, 'rows copied and percent never go down') or diag(join("\n", map { join('|', @{ $copy[$_ - 1] }) . ' -> ' . join('|', @{ $copy[$_] }) } @down));
is(scalar(grep { $_->[0] eq 'copying' && !($_->[3] >= 0 && $_->[3] < 100) } @copy), 0, 'while copying the percent is below 100');
is(scalar(grep { $_->[0] eq 'done' && $_->[3] != 100 } @copy), 0, 'once done it is 100');
ok((grep { $_->[0] eq 'copying' && $_->[3] > 0 && $_->[3] < 100 } @copy) >= 2, 'samples strictly between 0 and 100 %');

# what the copy left: every source row, none of the test's, the table ready
is(dq(q{SELECT state || '|' || copied_rows FROM cdc.subscription_rel WHERE table_name = 'big'}), "ready|$rows",
	'cdc.subscription_rel: ready, with the rows copied');
compare_table($source, $dest, q{SELECT count(*), md5(string_agg(id || ':' || v, ',' ORDER BY id)) FROM big},
	'the destination equals the source (the rolled-back inserts left nothing)');
is(dq(q{SELECT snapshot_rows || '|' || duplicate || '|' || stale FROM cdc.stats WHERE target = 'big'::regclass}), "$rows|0|0",
	'cdc.stats: every row a snapshot row, once');

# ---------------------------------------------------------------------------
# B. the scheduled cdc.prune() behind its replay horizon
# ---------------------------------------------------------------------------
# the copy filled cdc.entity_state with one record per row: many blocks, one scanned a second
my $p = dq(q{SELECT table_blocks || '|' || blocks_per_call || '|' || extract(epoch FROM call_interval)::float8 || '|'
                  || extract(epoch FROM full_pass_time)::float8 || '|' || behind
               FROM cdc.prune_progress WHERE relation = 'entity_state'});
my ($blocks, $per_call, $every, $pass_s, $behind) = split /\|/, $p;
cmp_ok($blocks, '>', 100, "cdc.entity_state has $blocks blocks");
is("$per_call|$every", '1|1', 'one block a call, a call a second (cdc.prune_max_pages, cdc.prune_interval)');
is($pass_s, $blocks, "a full pass takes $blocks s");
dq(q{ALTER SYSTEM SET cdc.replay_horizon = 60; SELECT pg_reload_conf()});
ok($dest->poll_query_until('postgres', q{SELECT behind FROM cdc.prune_progress WHERE relation = 'entity_state'}),
	'with a horizon of 60 s the pruning is behind: a pass takes longer than the horizon');
my @pos;
for my $i (1 .. 3) {
	my $last = @pos ? $pos[-1][0] : -1;
	ok($dest->poll_query_until('postgres',
		qq{SELECT pass_position > $last FROM cdc.prune_progress WHERE relation = 'entity_state'}), "call $i advanced the pass");
	push @pos, [ split /\|/, dq(q{SELECT pass_position || '|' || blocks_left || '|' || pass_percent || '|' || calls_left || '|'
	                                  || extract(epoch FROM pass_time_left)::float8 || '|' || (last_run_at IS NOT NULL)
	                                FROM cdc.prune_progress WHERE relation = 'entity_state'}) ];
}
for my $q (@pos) {
	my ($at, $left, $pct, $calls, $secs, $ran) = @$q;
	is($at + $left, $blocks, "at block $at: $left blocks left of $blocks");
	is("$calls|$secs|$ran", "$left|$left|true", "at block $at: $calls calls and $secs s left, last run recorded");
	cmp_ok(abs($pct - 100 * $at / $blocks), '<=', 0.051, "at block $at: $pct % of the pass (rounded to 0.1)");
}
ok($pos[0][0] < $pos[1][0] && $pos[1][0] < $pos[2][0] && $pos[0][2] <= $pos[1][2] && $pos[1][2] <= $pos[2][2],
	'the pass advances: ' . join(', ', map { "block $_->[0] ($_->[2] %)" } @pos));
dq(q{ALTER SYSTEM SET cdc.prune_max_pages = 100000; SELECT pg_reload_conf()});
ok($dest->poll_query_until('postgres', q{SELECT NOT behind AND blocks_per_call = 100000 AND extract(epoch FROM full_pass_time) = 1
                                            FROM cdc.prune_progress WHERE relation = 'entity_state'}),
	'with every block in one call a pass takes one interval: no longer behind');
ok($dest->poll_query_until('postgres', q{SELECT bool_and(last_sweep_done_at IS NOT NULL AND pass_position = 0) FROM cdc.prune_progress}),
	'a pass over every table completed');
is(dq(q{SELECT count(*) FROM cdc.entity_state WHERE target = 'big'::regclass AND NOT deleted}), $rows,
	'pruning removed no live record (only tombstones and old ledger entries go)');

$dest->stop;
$source->stop;
done_testing();

# Counters that survive rollbacks, the rates view and the postgres_exporter
# queries (issue 14 section 4; docs/operations.md).
#
#   A. calls and failed calls of cdc_apply / cdc_apply_batch by SQLSTATE,
#      counted although the transaction rolls back (also inside an
#      exception block, and for a role without privileges), per database;
#      cdc.rates derives the outcome ratios; cdc.reset_shared_stats() is
#      refused to PUBLIC, grantable, and resets one database;
#   B. the apply worker: apply latency of every applied source transaction
#      in the histogram, errors by SQLSTATE, starts after an error and a
#      failed group retried one by one;
#   C. without shared_preload_libraries the views say so, never error;
#   D. every query of docs/postgres_exporter.yml runs, as a pg_monitor role
#      under a search_path with planted look-alikes, on both servers, and
#      returns exactly the columns its metrics name.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CPAN::Meta::YAML;
use JSON::PP;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest');
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION cdc_apply');

sub dq { return $dest->safe_psql('postgres', $_[0]); }
sub sq { return $source->safe_psql('postgres', $_[0]); }

# ---------------------------------------------------------------------------
# A. the SQL path
# ---------------------------------------------------------------------------
dq(q{
CREATE TABLE t (id int PRIMARY KEY, v text);
CREATE ROLE stranger LOGIN;
CREATE ROLE mon LOGIN IN ROLE pg_monitor;
});
my $ev = sub { my ($lsn, $id) = @_; qq{'{"op": "c", "source": {"name": "s", "lsn": $lsn}, "after": {"id": $id, "v": "x"}}'} };
my ($rc, $out, $err) = $dest->psql('postgres', 'BEGIN; SELECT cdc_apply(' . $ev->(16, 1) . q!::jsonb, 't'); SELECT cdc_apply('{"op": "c"', 't'); ROLLBACK;!);
like($err, qr/invalid input|JSON|syntax/i, 'a malformed event fails');
is(dq(q{SELECT count(*) FROM cdc.stats WHERE target = 't'::regclass}), '0', 'the transaction rolled back: cdc.stats counts nothing');
is(dq('SELECT count(*) FROM t'), '0', 'and applied nothing');
is(dq(q{SELECT calls || '|' || failed FROM cdc.call_stats WHERE function = 'cdc_apply'}), '2|1',
	'cdc.call_stats kept both calls of the rolled-back transaction, one failed');
is(dq(q{SELECT string_agg(function || ':' || sqlstate || ':' || failures, ',' ORDER BY 1) FROM cdc.failed_calls}), 'cdc_apply:22P02:1',
	'cdc.failed_calls: the malformed event by its SQLSTATE');
($rc, $out, $err) = $dest->psql('postgres', q{SELECT cdc_apply_batch('[{"op": "q"}]'::jsonb, 't')});
like($err, qr/unknown op/, 'a batch with an unknown op fails');
dq(q{DO $$ BEGIN PERFORM cdc_apply('{"op": "q"}'::jsonb, 't'); EXCEPTION WHEN invalid_parameter_value THEN NULL; END $$});
($rc, $out, $err) = $dest->psql('postgres', 'SELECT cdc_apply(' . $ev->(32, 2) . q{::jsonb, 't')}, extra_params => [ '-U', 'stranger' ]);
like($err, qr/permission denied|privilege/, 'a role without privileges on the target is refused');
is(dq(q{SELECT string_agg(function || ':' || sqlstate || ':' || failures, ',' ORDER BY function, sqlstate) FROM cdc.failed_calls}),
	'cdc_apply:22023:1,cdc_apply:22P02:1,cdc_apply:42501:1,cdc_apply_batch:22023:1',
	'failures by SQLSTATE: also inside an exception block (subtransaction) and for another role');
dq('SELECT cdc_apply(' . $ev->(48, 3) . q{::jsonb, 't')});
dq('SELECT cdc_apply(' . $ev->(48, 3) . q{::jsonb, 't')});
is(dq(q{SELECT calls || '|' || failed FROM cdc.call_stats WHERE function = 'cdc_apply'}), '6|3', 'cdc_apply: 6 calls, 3 failed');
is(dq(q{SELECT events || '|' || duplicate_rate || '|' || stale_rate || '|' || conflict_rate FROM cdc.rates WHERE kind = 'target' AND name = 'public.t'}),
	'2|0.5|0|0', 'cdc.rates: one applied and one duplicate make a duplicate rate of 0.5');
is(dq(q{SELECT events || '|' || errors || '|' || error_rate FROM cdc.rates WHERE kind = 'function' AND name = 'cdc_apply'}), '6|3|0.5',
	'cdc.rates: the failure rate of cdc_apply');

# another database counts apart
dq('CREATE DATABASE other');
$dest->safe_psql('other', 'CREATE EXTENSION cdc_apply; CREATE TABLE t (id int PRIMARY KEY, v text)');
$dest->psql('other', q!SELECT cdc_apply('{"op": "c"', 't')!);
is($dest->safe_psql('other', q{SELECT string_agg(function || ':' || sqlstate || ':' || failures, ',') FROM cdc.failed_calls}), 'cdc_apply:22P02:1',
	'database other sees its own failed call only');

# reset: refused to PUBLIC, grantable like pg_stat_statements_reset
($rc, $out, $err) = $dest->psql('postgres', 'SELECT cdc.reset_shared_stats()', extra_params => [ '-U', 'mon' ]);
like($err, qr/permission denied for function reset_shared_stats/, 'a pg_monitor member may not reset until granted');
dq('GRANT EXECUTE ON FUNCTION cdc.reset_shared_stats() TO pg_monitor');
my $before = dq(q{SELECT since FROM cdc.call_stats WHERE function = 'cdc_apply'});
my $reset = $dest->safe_psql('postgres', 'SELECT cdc.reset_shared_stats()', extra_params => [ '-U', 'mon' ]);
ok($reset ne '', 'granted, it resets and returns the time');
is(dq(q{SELECT calls || '|' || failed || '|' || (since > '} . $before . q{'::timestamptz) FROM cdc.call_stats WHERE function = 'cdc_apply'}),
	'0|0|true', 'the counters of this database are 0 since the reset');
is(dq(q{SELECT coalesce(sum(failures), 0) FROM cdc.failed_calls}), '0', 'failures by SQLSTATE too');
is($dest->safe_psql('other', q{SELECT sum(failures) FROM cdc.failed_calls}), '1', 'database other keeps its counters');
is(dq(q{SELECT applied || '|' || duplicate FROM cdc.stats WHERE target = 't'::regclass}), '1|1', 'cdc.stats (transactional) is not touched');

# ---------------------------------------------------------------------------
# B. the apply worker
# ---------------------------------------------------------------------------
sq(q{CREATE TABLE w (id int PRIMARY KEY, v int); CREATE PUBLICATION pw FOR TABLE w;});
dq(q{CREATE TABLE w (id int PRIMARY KEY, v int CHECK (v >= 0))});
create_subscription($dest, $source, 'sw', ['pw'], 'copy_data => false');
ok(wait_status($dest, 'sw', q{state = 'streaming'}), 'sw streams');
for my $i (1 .. 200) {
	sq("INSERT INTO w VALUES ($i, $i)");
}
ok(wait_caught_up($source, $dest, 'sw'), 'sw applied 200 source transactions');
is(dq(q{SELECT applied_xacts >= 200 AND errors = 0 FROM cdc.worker_stats WHERE subscription = 'sw'}), 't',
	'cdc.worker_stats: every applied source transaction has its latency');
my $hist = dq(q{SELECT string_agg(xacts::text, ',' ORDER BY le_ms) FROM cdc.apply_latency WHERE subscription = 'sw'});
my @cum = split /,/, $hist;
is(scalar(@cum), 20, 'the histogram has 20 buckets (1 ms to 262144 ms, and Infinity)');
ok(!grep({ $cum[$_] < $cum[ $_ - 1 ] } 1 .. $#cum), 'it is cumulative');
is($cum[-1], dq(q{SELECT applied_xacts FROM cdc.worker_stats WHERE subscription = 'sw'}), 'its Infinity bucket counts every transaction');
is($cum[-2], $cum[-1], 'none took more than 262 s');
is(dq(q{SELECT latency_p50_ms <= latency_p99_ms AND latency_sum_seconds > 0 AND latency_avg_ms > 0 FROM cdc.worker_stats WHERE subscription = 'sw'}),
	't', 'median, 99th percentile, sum and average are filled');

# a failing transaction in a group: the group is retried one by one, then the error is recorded.
# A backlog of 150 source transactions on either side of it, so that it is
# certainly applied in a group with others (a group closes early only when
# the socket runs dry: test/t/025_worker_grouping.pl does the same)
disable_and_wait($source, $dest, 'sw');
sq(join('', map { "INSERT INTO w VALUES ($_, 1);\n" } 1001 .. 1150) . "INSERT INTO w VALUES (1151, -1);\n"
	  . join('', map { "INSERT INTO w VALUES ($_, 1);\n" } 1152 .. 1301));
enable_subscription($dest, 'sw');
ok(wait_status($dest, 'sw', q{state = 'error' AND retry_count >= 2}), 'the transaction with v = -1 fails again and again');
is(dq('SELECT count(*) || \'|\' || max(id) FROM w WHERE id > 1000'), '150|1150', 'the 150 before it were applied');
is(dq(q{SELECT errors >= 2 AND group_retries >= 1 AND retries >= 1 FROM cdc.worker_stats WHERE subscription = 'sw'}), 't',
	'cdc.worker_stats: errors, the group retried one by one, starts after an error');
is(dq(q{SELECT errors_by_sqlstate ? '23514' AND (errors_by_sqlstate->>'23514')::int = errors FROM cdc.worker_stats WHERE subscription = 'sw'}), 't',
	'errors by SQLSTATE: 23514 (the CHECK constraint)');
# Polled: the worker keeps retrying the transaction, so a single read can
# land while it is starting again (state not 'error') or between the two
# reads of its error counter in the statement, which a retry moves (a
# fresh-clone run failed here once)
ok($dest->poll_query_until('postgres', q{SELECT errors = (SELECT errors FROM cdc.worker_stats WHERE subscription = 'sw') AND state = 'error' AND lag_bytes > 0
          FROM cdc.rates WHERE kind = 'subscription' AND name = 'sw'}), 'cdc.rates shows the subscription in error, with lag and its errors');
dq(q{SELECT cdc.skip_transaction('sw', last_error_lsn, 'negative v') FROM cdc.subscription_status WHERE name = 'sw'});
ok(wait_caught_up($source, $dest, 'sw'), 'after the skip it streams again');
is(dq('SELECT count(*) || \'|\' || bool_and(id <> 1151) FROM w WHERE id > 1000'), '300|true', 'all but the skipped one');

# ---------------------------------------------------------------------------
# D. the postgres_exporter queries (before C: here with data)
# ---------------------------------------------------------------------------
my $yaml = CPAN::Meta::YAML->read(cdc_root() . '/docs/postgres_exporter.yml') or die CPAN::Meta::YAML->errstr;
my $queries = $yaml->[0];
ok(scalar(keys %$queries) >= 8, 'docs/postgres_exporter.yml has its queries');

# the exporter's role, and look-alikes of what the queries use in a schema before pg_catalog
my $plant = q{
CREATE ROLE exporter LOGIN IN ROLE pg_monitor;
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE FUNCTION evil.planted() RETURNS void LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'planted object used'; END $$;
CREATE FUNCTION evil.power(float8, float8) RETURNS float8 LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); RETURN 0; END $$;
CREATE FUNCTION evil.format(text, name, name) RETURNS text LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); RETURN ''; END $$;
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); RETURN NULL; END $$;
CREATE FUNCTION evil.date_part(text, interval) RETURNS float8 LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); RETURN 0; END $$;
CREATE FUNCTION evil.generate_series(int, int) RETURNS SETOF int LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); END $$;
CREATE FUNCTION evil.jsonb_each_text(jsonb, OUT key text, OUT value text) RETURNS SETOF record LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); END $$;
CREATE FUNCTION evil.row_to_json(record) RETURNS json LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); RETURN NULL; END $$;
CREATE FUNCTION evil.eq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); RETURN false; END $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.eq);
CREATE FUNCTION evil.eqo(oid, oid) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); RETURN false; END $$;
CREATE OPERATOR evil.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = evil.eqo);
CREATE FUNCTION evil.lt(float8, float8) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); RETURN false; END $$;
CREATE OPERATOR evil.< (LEFTARG = float8, RIGHTARG = float8, FUNCTION = evil.lt);
CREATE FUNCTION evil.div(float8, float8) RETURNS float8 LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); RETURN 0; END $$;
CREATE OPERATOR evil./ (LEFTARG = float8, RIGHTARG = float8, FUNCTION = evil.div);
CREATE FUNCTION evil.minus(timestamptz, timestamptz) RETURNS interval LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.planted(); RETURN NULL; END $$;
CREATE OPERATOR evil.- (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.minus);
CREATE DOMAIN evil.float8 AS pg_catalog.float8 CHECK (false);
CREATE DOMAIN evil.int8 AS pg_catalog.int8 CHECK (false);
CREATE DOMAIN evil.oid AS pg_catalog.oid CHECK (false);
ALTER ROLE exporter SET search_path = evil, pg_catalog;
};

# Runs every query on $node (database postgres); returns { name => [rows as hashes] }.
sub run_exporter_queries
{
	my ($node, $label) = @_;
	my %result;
	for my $name (sort keys %$queries) {
		my $q = $queries->{$name}{query};
		$q =~ s/\s+$//;
		my @metrics = map { my ($col) = keys %$_; [ $col, $_->{$col}{usage} ] } @{ $queries->{$name}{metrics} };
		my @expected;
		for my $m (@metrics) {
			push @expected, $m->[0];
			push @expected, map { "$m->[0]_$_" } qw(bucket sum count) if $m->[1] eq 'HISTOGRAM';
		}
		# the columns, also when there is no row: a temporary view of the query
		my ($vrc, $cols, $verr) = $node->psql('postgres',
			"BEGIN; CREATE TEMP VIEW q AS $q; SELECT pg_catalog.string_agg(attname, ',' ORDER BY attnum) FROM pg_catalog.pg_attribute "
			  . "WHERE attrelid OPERATOR(pg_catalog.=) 'q'::pg_catalog.regclass AND attnum OPERATOR(pg_catalog.>) 0; ROLLBACK;",
			extra_params => [ '-U', 'exporter' ]);
		is($verr, '', "$label: $name parses as the exporter role");
		is(join(',', sort split(/,/, $cols)), join(',', sort @expected), "$label: $name returns exactly the columns of its metrics");
		my ($qrc, $json, $qerr) = $node->psql('postgres', "SELECT pg_catalog.row_to_json(r)::text FROM ($q) r",
			extra_params => [ '-U', 'exporter' ]);
		is($qerr, '', "$label: $name runs as the exporter role, untouched by the planted look-alikes");
		my @rows = map { decode_json($_) } grep { $_ ne '' } split /\n/, $json;
		for my $row (@rows) {
			for my $m (@metrics) {
				my ($col, $usage) = @$m;
				my $v = $row->{$col};
				if ($usage eq 'LABEL') {
					ok(defined $v && $v ne '', "$label: $name: label $col is set") or diag(encode_json($row));
				} elsif ($usage eq 'HISTOGRAM') {
					my ($bounds, $counts) = ($v, $row->{"${col}_bucket"});
					ok(ref $bounds eq 'ARRAY' && ref $counts eq 'ARRAY' && @$bounds == @$counts && @$bounds > 0,
						"$label: $name: $col has one cumulative count per bound");
					ok(!grep({ $counts->[$_] < $counts->[ $_ - 1 ] || $bounds->[$_] <= $bounds->[ $_ - 1 ] } 1 .. $#$counts)
						  && $row->{"${col}_count"} >= $counts->[-1] && defined $row->{"${col}_sum"},
						"$label: $name: $col is a well-formed histogram");
				} else {
					ok(!defined $v || $v =~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/i, "$label: $name: $col is a number (or NULL)")
					  or diag("$col = $v");
				}
			}
		}
		$result{$name} = \@rows;
	}
	return \%result;
}

$dest->safe_psql('postgres', $plant);
my $r = run_exporter_queries($dest, 'preloaded');
ok(scalar(@{ $r->{cdc_target} }) >= 2, 'cdc_target: a row per target');
is(join(',', map { "$_->{function}:$_->{calls}" } sort { $a->{function} cmp $b->{function} } @{ $r->{cdc_calls} }), 'cdc_apply:0,cdc_apply_batch:0',
	'cdc_calls: both entry points, reset to 0');
is(join(',', map { "$_->{subscription}:$_->{sqlstate}" } @{ $r->{cdc_worker_errors} }), 'sw:23514', 'cdc_worker_errors: sw:23514');
my ($sw) = grep { $_->{subscription} eq 'sw' } @{ $r->{cdc_subscription} };
is($sw->{streaming}, 1, 'cdc_subscription: sw streams');
my ($wk) = grep { $_->{subscription} eq 'sw' } @{ $r->{cdc_worker} };
is(scalar(@{ $wk->{apply_latency_seconds} }), 19, 'cdc_worker: 19 latency bounds (+Inf is the count)');
ok($wk->{apply_latency_seconds_count} >= 200, 'cdc_worker: the latency count');
is(join(',', sort map { $_->{relation} } @{ $r->{cdc_prune} }), 'entity_state,ledger,ledger_range,outbox',
	'cdc_prune: ledger, ledger_range, entity_state, outbox');
is($r->{cdc_shared_stats}[0]{available}, 1, 'cdc_shared_stats: available');

# ---------------------------------------------------------------------------
# C. without shared_preload_libraries
# ---------------------------------------------------------------------------
sub pq { return $plain->safe_psql('postgres', $_[0]); }
pq('CREATE TABLE t (id int PRIMARY KEY, v text)');
$plain->psql('postgres', q!SELECT cdc_apply('{"op": "c"', 't')!);
pq('SELECT cdc_apply(' . $ev->(16, 1) . q{::jsonb, 't')});
like(pq('SELECT available || note FROM cdc.shared_stats'), qr/^false.*not in shared_preload_libraries/,
	'cdc.shared_stats says the counters are not kept, and why');
is(pq('SELECT (SELECT count(*) FROM cdc.call_stats) + (SELECT count(*) FROM cdc.failed_calls) + (SELECT count(*) FROM cdc.worker_stats)
              + (SELECT count(*) FROM cdc.apply_latency) + (SELECT count(*) FROM cdc.copy_progress)'), '0',
	'the shared-memory views are empty, not an error');
is(pq(q{SELECT kind || '|' || name || '|' || events FROM cdc.rates}), 'target|public.t|1', 'cdc.rates still has the targets');
is(pq('SELECT cdc.reset_shared_stats() IS NULL'), 't', 'cdc.reset_shared_stats() returns NULL');
is(pq('SELECT bool_and(call_interval IS NULL AND blocks_per_call IS NULL AND NOT behind) FROM cdc.prune_progress'), 't',
	'cdc.prune_progress: no schedule without the launcher');
$plain->safe_psql('postgres', $plant);
$r = run_exporter_queries($plain, 'not preloaded');
is($r->{cdc_shared_stats}[0]{available}, 0, 'cdc_shared_stats: not available');
is(scalar(@{ $r->{cdc_calls} }) + scalar(@{ $r->{cdc_worker} }), 0, 'the shared-memory metrics have no rows');

# ---------------------------------------------------------------------------
# B (end). the reset covers the worker's counters too
# ---------------------------------------------------------------------------
dq('SELECT cdc.reset_shared_stats()');
is(dq(q{SELECT errors || '|' || retries || '|' || group_retries || '|' || applied_xacts || '|' || errors_by_sqlstate FROM cdc.worker_stats WHERE subscription = 'sw'}),
	'0|0|0|0|{}', 'after the reset the worker counters are 0');
sq('INSERT INTO w VALUES (2000, 1)');
ok(wait_caught_up($source, $dest, 'sw'), 'one more source transaction');
ok($dest->poll_query_until('postgres', q{SELECT applied_xacts = 1 FROM cdc.worker_stats WHERE subscription = 'sw'}),
	'counted from 0 again');

done_testing();

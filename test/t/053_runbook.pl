# The runbook works (docs/operations.md, state "error"): for the errors a
# destination schema or setting causes, the worker stops with the message
# the runbook lists, and the runbook's way out — fixing the cause, with no
# skip — lets the worker go on by itself from exactly the failing source
# transaction, with nothing lost.  Each case checks the message against
# docs/operations.md, so the runbook cannot drift from the worker.
#
#   42P01 a published table without destination table   → CREATE TABLE
#   42703 a source column the destination lacks         → ALTER TABLE ADD COLUMN
#   22P02 a value the destination type does not take    → ALTER COLUMN TYPE
#   54000 a change larger than cdc.max_event_size       → raise it, reload
#   23514 a CHECK constraint of the destination         → fix the constraint
#
# (The continuity errors and cdc.accept_gap: 041; waiting: 043 and 047;
# the slot-name collision: 047; an explicit skip: 020, 025 and 048;
# privileges: 036.)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest', "cdc.max_event_size = '64kB'\n");
my $runbook = slurp_file(cdc_root() . '/docs/operations.md');

sub dq { return $dest->safe_psql('postgres', $_[0]); }
sub sq { return $source->safe_psql('postgres', $_[0]); }

sq(q{
CREATE TABLE r1 (id int PRIMARY KEY, v text);
CREATE TABLE r2 (id int PRIMARY KEY, v text);
CREATE TABLE r3 (id int PRIMARY KEY, v text);
CREATE TABLE r4 (id int PRIMARY KEY, v text);
CREATE TABLE r5 (id int PRIMARY KEY, v int);
CREATE PUBLICATION prun FOR TABLE r1, r2, r3, r4, r5;
});
dq(q{
CREATE TABLE r2 (id int PRIMARY KEY, v text);
CREATE TABLE r3 (id int PRIMARY KEY, v int);
CREATE TABLE r4 (id int PRIMARY KEY, v text);
CREATE TABLE r5 (id int PRIMARY KEY, v int CONSTRAINT r5_v_ok CHECK (v >= 0));
});
create_subscription($dest, $source, 'rb', ['prun'], 'copy_data => false');
ok(wait_status($dest, 'rb', q{state = 'streaming'}), 'rb streams');

# One case: the source writes $write (after a good row in the same table,
# its own transaction), the worker stops with $message (a fragment the
# runbook quotes) and $sqlstate; $fix on the destination; it goes on by itself.
sub case
{
	my (%c) = @_;
	my $t = $c{table};
	sq("INSERT INTO $t (id, v) VALUES (1, $c{good})");
	ok(wait_caught_up($source, $dest, 'rb'), "$c{sqlstate}: a good row of $t applies") if $c{good_applies};
	sq($c{write});
	ok(wait_status($dest, 'rb', qq{state = 'error' AND retry_count >= 2 AND last_error LIKE '%$c{message}%'}),
		"$c{sqlstate}: the worker stops with \"$c{message}\" and retries")
	  or diag(status_row($dest, 'rb', 'last_error'));
	my $doc = $c{doc} // $c{message};
	like($runbook, qr/\Q$doc\E/, "$c{sqlstate}: docs/operations.md lists \"$doc\"");
	like($runbook, qr/\b$c{sqlstate}\b/, "$c{sqlstate}: docs/operations.md names its SQLSTATE");
	is(dq(qq{SELECT (errors_by_sqlstate->>'$c{sqlstate}')::int >= 2 FROM cdc.worker_stats WHERE subscription = 'rb'}), 't',
		"$c{sqlstate}: counted by its SQLSTATE in cdc.worker_stats");
	my $error_lsn = status_row($dest, 'rb', 'last_error_lsn');
	ok($error_lsn ne '', "$c{sqlstate}: last_error_lsn names the failing source transaction ($error_lsn)");
	is(status_row($dest, 'rb', "applied_lsn < '$error_lsn'"), 't', "$c{sqlstate}: nothing past it applied");
	$c{fix}->();
	ok(wait_caught_up($source, $dest, 'rb'), "$c{sqlstate}: after the runbook's fix it goes on by itself");
	compare_table($source, $dest, "SELECT count(*), md5(string_agg(id || ':' || v, ',' ORDER BY id)) FROM $t",
		"$c{sqlstate}: $t equals the source, the failing transaction applied");
	ok($dest->poll_query_until('postgres',
			q{SELECT state = 'streaming' AND retry_count = 0 AND last_error IS NULL FROM cdc.subscription_status WHERE name = 'rb'}),
		"$c{sqlstate}: streaming, the error cleared");
}

case(table => 'r1', sqlstate => '42P01', good => "'a'", write => q{INSERT INTO r1 VALUES (2, 'b')},
	message => 'published table public.r1 has no destination table', doc => 'has no destination table',
	fix => sub { dq('CREATE TABLE r1 (id int PRIMARY KEY, v text)') });

case(table => 'r2', sqlstate => '42703', good => "'a'", good_applies => 1,
	write => q{ALTER TABLE r2 ADD COLUMN c int; INSERT INTO r2 VALUES (2, 'b', 7)},
	message => 'has no column in table',
	fix => sub { dq('ALTER TABLE r2 ADD COLUMN c int') });
is(dq('SELECT c FROM r2 WHERE id = 2'), '7', '42703: the new column has the source value');

case(table => 'r3', sqlstate => '22P02', good => "'1'", good_applies => 1, write => q{INSERT INTO r3 VALUES (2, 'abc')},
	message => 'invalid input syntax for type integer',
	fix => sub { dq('ALTER TABLE r3 ALTER COLUMN v TYPE text') });

case(table => 'r4', sqlstate => '54000', good => "'a'", good_applies => 1,
	write => q{INSERT INTO r4 SELECT 2, string_agg(md5(g::text), '') FROM generate_series(1, 4000) g},
	message => 'more than cdc.max_event_size',
	fix => sub { dq(q{ALTER SYSTEM SET cdc.max_event_size = '1MB'; SELECT pg_reload_conf()}) });

case(table => 'r5', sqlstate => '23514', good => '1', good_applies => 1, write => q{INSERT INTO r5 VALUES (2, -1)},
	message => 'violates check constraint "r5_v_ok"', doc => 'violates check constraint',
	fix => sub { dq('ALTER TABLE r5 DROP CONSTRAINT r5_v_ok') });

is(dq(q{SELECT count(*) FROM cdc.skipped_transactions}), '0', 'nothing was skipped');
is(dq(q{SELECT string_agg(key, ',' ORDER BY key) FROM cdc.worker_stats, jsonb_each(errors_by_sqlstate) WHERE subscription = 'rb'}),
	'22P02,23514,42703,42P01,54000', 'cdc.worker_stats: the errors of the five cases by SQLSTATE');
is(dq(q{SELECT count(DISTINCT error_lsn) FROM cdc.subscription_errors WHERE name = 'rb'}), '5',
	'cdc.subscription_errors: five failing source transactions');

$dest->stop;
$source->stop;
done_testing();

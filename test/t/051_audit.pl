# cdc.audit and cdc.resync on a real source and destination while the
# worker streams (issue 14, sections 1, 2 and 5; docs/audit.md): pgbench
# keeps changing one key range of the source; rows are changed, deleted and
# inserted by hand on the destination in another.  The audit finds exactly
# the hand-made differences (none of the streamed changes in flight), the
# resync of its findings repairs exactly those keys (versions at its
# snapshot, no outbox rows, nothing else touched), the stream keeps
# running, a newer streamed change of a repaired key still wins and an older
# change of it stays stale.  Then the progress of a long, rate-capped audit
# as another session sees it, and its NOTICE lines.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest');

$source->safe_psql('postgres', q{
CREATE TABLE acc (id int PRIMARY KEY, bal int, note text, ts timestamptz, f float8);
CREATE TABLE pair (a int, b text, v jsonb, PRIMARY KEY (a, b));
INSERT INTO acc SELECT g, g * 10, 'n' || g, '2024-01-01 00:00+00'::timestamptz + g * interval '1 min', g / 7.0
  FROM generate_series(1, 10000) g;
INSERT INTO pair SELECT g % 100, CASE WHEN g >= 100 THEN 'y' ELSE 'x' END, jsonb_build_object('g', g) FROM generate_series(0, 199) g;
CREATE PUBLICATION pub FOR TABLE acc, pair;
});
$dest->safe_psql('postgres', q{
CREATE TABLE acc (id int PRIMARY KEY, bal int, note text, ts timestamptz, f float8, local text DEFAULT 'mine');
CREATE TABLE pair (a int, b text, v jsonb, PRIMARY KEY (a, b));
SELECT cdc.register_mapping('acc', outbox => true, source_name => 'sub');
});
create_subscription($dest, $source, 'sub', ['pub']);
ok(wait_caught_up($source, $dest, 'sub'), 'initial copy done, streaming');
my $acc_all = 'SELECT id, bal, note, ts, f FROM acc ORDER BY id';
compare_table($source, $dest, $acc_all, 'acc copied');

# A streamed change of a key that is then damaged by hand: its version is
# older than the resync's snapshot.
$source->safe_psql('postgres', q{UPDATE acc SET note = 'streamed before' WHERE id = 10});
ok(wait_caught_up($source, $dest, 'sub'), 'streamed an update of key 10');

# --- the stream keeps running: pgbench changes keys 5001..10000 and pair's 'x' rows
my $script = PostgreSQL::Test::Utils::tempdir() . '/churn.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set id random(5001, 10000)
\set id2 random(5001, 10000)
\set a random(0, 99)
BEGIN;
UPDATE acc SET bal = bal + 1, ts = now(), f = random() WHERE id = :id;
DELETE FROM acc WHERE id = :id2;
INSERT INTO acc VALUES (:id2, 0, 'again', now(), 0.5) ON CONFLICT (id) DO UPDATE SET note = 'conflict';
END;
UPDATE pair SET v = jsonb_build_object('r', random()) WHERE a = :a AND b = 'x';
});
my $bench_log = PostgreSQL::Test::Utils::tempdir() . '/pgbench.log';
my $bench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '2', '-j', '1', '-T', '600', '-R', '200', '-f', $script, $source->connstr('postgres') ],
	'<', '/dev/null', '>', $bench_log, '2>&1');
$source->poll_query_until('postgres', q{SELECT count(*) > 0 FROM acc WHERE note IN ('again', 'conflict')})
  or die 'pgbench did not start';

# --- damage by hand on the destination, away from the churned keys
my $outbox_before = $dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.outbox WHERE (entity_key->>'id')::int <= 5000});
my $untouched_q = q{SELECT string_agg(entity_key->>'id' || ':' || version::text, ',' ORDER BY (entity_key->>'id')::int)
  FROM cdc.entities WHERE target = 'acc'::regclass AND (entity_key->>'id')::int <= 5000
   AND (entity_key->>'id')::int NOT IN (0, 10, 20, 30, 40)};
my $untouched_before = $dest->safe_psql('postgres', $untouched_q);
$dest->safe_psql('postgres', q{
UPDATE acc SET note = 'by hand' WHERE id IN (10, 20);
UPDATE acc SET local = 'not published' WHERE id = 50;
DELETE FROM acc WHERE id IN (30, 40);
INSERT INTO acc (id, bal, note) VALUES (0, 0, 'only here'), (20000, 0, 'after the last key');
UPDATE pair SET v = '{"by": "hand"}' WHERE a = 1 AND b = 'y';
DELETE FROM pair WHERE a = 2 AND b = 'y';
INSERT INTO pair VALUES (500, 'y', '{}');
});

# --- the audit while the stream runs: exactly the damage
my ($stdout, $stderr);
$dest->psql('postgres', q{CALL cdc.audit('sub', page_rows => 1000, leaf_rows => 64)}, stdout => \$stdout, stderr => \$stderr);
my ($audit_id, $found) = split /\|/, $stdout;
is($found, 9, 'audit: 9 findings') or diag($stderr);
is($dest->safe_psql('postgres', qq{SELECT string_agg(target::text || ' ' || key::text || ' ' || kind, E'\\n' ORDER BY target::text, key::text)
  FROM cdc.audit_findings WHERE audit_id = $audit_id}),
	join("\n", 'acc {"id": "0"} extra', 'acc {"id": "10"} different', 'acc {"id": "20"} different',
		'acc {"id": "20000"} extra', 'acc {"id": "30"} missing', 'acc {"id": "40"} missing',
		'pair {"a": "1", "b": "y"} different', 'pair {"a": "2", "b": "y"} missing', 'pair {"a": "500", "b": "y"} extra'),
	'audit: the rows changed, deleted and inserted by hand, nothing the stream was changing');
like($stderr, qr/cdc.audit of subscription "sub" \(run $audit_id\): \d+ source rows of 2 tables compared, 9 findings/,
	'audit: summary NOTICE');
my $ranges = $dest->safe_psql('postgres', "SELECT ranges_done FROM cdc.audit_status WHERE id = $audit_id");
note("audit: $ranges key ranges hashed, unsettled keys: "
	  . $dest->safe_psql('postgres', "SELECT unsettled FROM cdc.audit_status WHERE id = $audit_id"));
is(status_row($dest, 'sub', 'state'), 'streaming', 'the stream kept running');

# --- the resync of its findings, still while the stream runs
$dest->psql('postgres', qq{CALL cdc.resync('sub', audit => $audit_id)}, stdout => \$stdout, stderr => \$stderr);
my ($resync_id, $repaired) = split /\|/, $stdout;
is($repaired, 9, 'resync: 9 keys written') or diag($stderr);
is($dest->safe_psql('postgres', qq{SELECT string_agg(DISTINCT repair_outcome, ',') || '|' || count(*) FILTER (WHERE repaired_at IS NULL)
  FROM cdc.audit_findings WHERE audit_id = $audit_id}), 'applied|0', 'resync: every finding applied and marked');
my $s = $dest->safe_psql('postgres', qq{SELECT DISTINCT repair_lsn FROM cdc.audit_findings WHERE audit_id = $audit_id AND target = 'acc'::regclass});
ok($s =~ m{^[0-9A-F]+/[0-9A-F]+$}, "resync of acc read its keys at one snapshot, $s");
compare_table($source, $dest, 'SELECT id, bal, note, ts, f FROM acc WHERE id IN (0, 10, 20, 30, 40, 20000) ORDER BY id',
	'resync: the damaged acc rows equal the source again');
compare_table($source, $dest, q{SELECT a, b, v FROM pair WHERE b = 'y' ORDER BY a}, 'resync: pair equals the source again');
is($dest->safe_psql('postgres', 'SELECT local FROM acc WHERE id = 50'), 'not published', 'an unpublished column keeps its value');
is($dest->safe_psql('postgres', qq{SELECT string_agg((entity_key->>'id') || ':' || is_tombstone || ':' || (version[2] = ('$s'::pg_lsn - '0/0')::bigint) || ':' || version[3], ',' ORDER BY (entity_key->>'id')::int)
  FROM cdc.entities WHERE target = 'acc'::regclass AND (entity_key->>'id')::int IN (0, 10, 20, 30, 40, 20000)}),
	'0:true:true:0,10:false:true:0,20:false:true:0,30:false:true:0,40:false:true:0,20000:true:true:0',
	'resync: versions {epoch, S, 0, 0}, tombstones at S for the removed keys');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.outbox WHERE (entity_key->>'id')::int <= 5000 OR entity_key->>'id' = '20000'}),
	$outbox_before, 'resync: no outbox rows');
is($dest->safe_psql('postgres', $untouched_q), $untouched_before, 'resync: no other entity record of the damaged key range changed');

# --- the stream goes on; stop it and compare everything
$bench->kill_kill;
$bench->finish;
ok(wait_caught_up($source, $dest, 'sub'), 'caught up after the churn');
compare_table($source, $dest, $acc_all, 'acc: destination equals source');
compare_table($source, $dest, 'SELECT a, b, v FROM pair ORDER BY a, b', 'pair: destination equals source');
$dest->psql('postgres', q{CALL cdc.audit('sub')}, stdout => \$stdout);
is((split /\|/, $stdout)[1], 0, 'a second audit finds nothing');
my $streamed = $dest->safe_psql('postgres', q{SELECT outbox_rows FROM cdc.stats WHERE target = 'acc'::regclass});
ok($streamed > 0, "the churn's $streamed changes of acc wrote outbox rows as usual");

# --- a newer streamed change of a repaired key wins; an older one stays stale
$source->safe_psql('postgres', q{UPDATE acc SET note = 'streamed after' WHERE id = 10});
ok(wait_caught_up($source, $dest, 'sub'), 'streamed an update of key 10 after the resync');
is($dest->safe_psql('postgres', 'SELECT note FROM acc WHERE id = 10'), 'streamed after', 'the newer streamed change wins over the resync');
# the same source's older change of pair (1, y), as a Debezium event of the worker's source id, is stale
my $sysid = $source->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
my $pair_s = $dest->safe_psql('postgres', qq{SELECT repair_lsn FROM cdc.audit_findings WHERE audit_id = $audit_id AND target = 'pair'::regclass LIMIT 1});
my $older = $dest->safe_psql('postgres', qq{SELECT ('$pair_s'::pg_lsn - '0/0')::bigint - 8});
is($dest->safe_psql('postgres', qq{SELECT cdc_apply(jsonb_build_object('op', 'u', 'after', jsonb_build_object('a', 1, 'b', 'y', 'v', '{"older": true}'),
  'source', jsonb_build_object('connector', 'postgresql', 'name', 'pg:$sysid', 'schema', 'public', 'table', 'pair', 'lsn', $older)), 'pair')}),
	'stale', 'an older change of a repaired key is stale');
compare_table($source, $dest, q{SELECT a, b, v FROM pair WHERE a = 1 AND b = 'y'}, 'and changes nothing');

# --- progress of a long audit, seen from another session; its NOTICE lines
$source->safe_psql('postgres', 'ANALYZE acc');
$dest->safe_psql('postgres', 'ALTER SYSTEM SET cdc.audit_max_rows_per_second = 1500');
$dest->reload;
my ($bg_out, $bg_err) = ('', '');
my $bg = IPC::Run::start(
	[ 'psql', '-X', '-d', $dest->connstr('postgres'), '-c', q{CALL cdc.audit('sub', 'acc', page_rows => 500)} ],
	'<', '/dev/null', '>', \$bg_out, '2>', \$bg_err);
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 1 FROM cdc.audit_status
  WHERE state = 'running' AND current_target = 'acc'::regclass AND rows_done > 0 AND rows_estimate = 10000
    AND percent > 0 AND rows_per_second > 0 AND time_left IS NOT NULL}),
	'cdc.audit_status shows the running audit: rows done of the estimate, rate, time left');
$bg->finish;
like($bg_err, qr/NOTICE:  cdc.audit of subscription "sub" \(run \d+\): \d+ of ~10000 rows \(\d+%\), \d+ rows\/s, about .* left, 0 findings so far/,
	'a NOTICE line with the progress every 5 s');
is($dest->safe_psql('postgres', q{SELECT state || ' ' || rows_done || ' ' || findings FROM cdc.audit_status ORDER BY id DESC LIMIT 1}),
	'done 10000 0', 'the capped audit finished');

is(status_row($dest, 'sub', q{state || '|' || retry_count || '|' || coalesce(last_error, '')}), 'streaming|0|', 'no worker error all along');

# --- errors raised after pages of work name what was running: with the
# subscription disabled, the wait for the destination fails (55000) with a
# CONTEXT line of the audit or resync (the text lives in the call's memory,
# not in a page's, which earlier pages' resets have freed)
disable_and_wait($source, $dest, 'sub');
$source->safe_psql('postgres', q{UPDATE acc SET note = 'while disabled' WHERE id = 20});
$dest->psql('postgres', q{CALL cdc.audit('sub')}, stdout => \$stdout, stderr => \$stderr);
like($stderr, qr/ERROR:  subscription "sub" is disabled: it cannot apply the source's stream up to [0-9A-F]+\/[0-9A-F]+, where the comparison is made\n.*CONTEXT:  cdc\.audit of subscription "sub", table public\.acc$/s,
	'an audit of a disabled subscription: 55000 with the CONTEXT of the audit');
$dest->psql('postgres', q{CALL cdc.resync('sub', 'pair', keys => '[{"a": 1, "b": "y"}]')}, stdout => \$stdout, stderr => \$stderr);
like($stderr, qr/ERROR:  subscription "sub" is disabled.*CONTEXT:  cdc\.resync of subscription "sub", table public\.pair at source position [0-9A-F]+\/[0-9A-F]+$/s,
	'a resync of a disabled subscription: 55000 with the CONTEXT of the resync');
is($dest->safe_psql('postgres', q{SELECT string_agg(kind || ' ' || state, ', ' ORDER BY id) FROM (SELECT * FROM cdc.audit_status ORDER BY id DESC LIMIT 2) r}),
	'audit failed, resync failed', 'both runs are shown as failed');
enable_subscription($dest, 'sub');
ok(wait_caught_up($source, $dest, 'sub'), 'enabled again, the change made meanwhile streams');
is($dest->safe_psql('postgres', 'SELECT note FROM acc WHERE id = 20'), 'while disabled', 'and is applied');
$dest->stop;
$source->stop;
done_testing();

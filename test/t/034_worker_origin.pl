# Origins and loops (issue 12, item 4; scenario B32 of shared/scenarios.md).
# A subscription's origin option has PostgreSQL 16's meaning: 'none' drops
# source transactions that carry a replication origin (pgoutput sends an
# Origin message for them), 'any' (the default) applies them.  The worker's
# own local transactions carry its replication origin cdc_<database oid>_<subid>, so any
# consumer downstream can tell them apart.
#
#   B32        two clusters subscribed to each other with origin = none:
#              every change is applied once by the other side, the echo is
#              dropped; one outbox row in all
#   tagged     a source transaction tagged with another origin: dropped by
#              origin = none, applied by origin = any; also when the source
#              streams it in chunks (cdc.streaming, protocol version 2);
#              alter_subscription switches the option
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

# ---------------------------------------------------------------------------
# B32: A and B both preload cdc_apply and publish t; A subscribes to B, B to A.
# ---------------------------------------------------------------------------
my $a = new_dest('node_a', '', allows_streaming => 'logical');
my $b = new_dest('node_b', '', allows_streaming => 'logical');
for my $node ($a, $b) {
	$node->safe_psql('postgres', 'CREATE TABLE t (id int PRIMARY KEY, v text); CREATE PUBLICATION p_t FOR TABLE t;');
}
$a->safe_psql('postgres', q{SELECT cdc.register_mapping('t', outbox => true, source_name => 'a_from_b')});
create_subscription($a, $b, 'a_from_b', ['p_t'], q{copy_data => false, origin => 'none'});
create_subscription($b, $a, 'b_from_a', ['p_t'], q{copy_data => false, origin => 'none'});
ok(wait_caught_up($b, $a, 'a_from_b') && wait_caught_up($a, $b, 'b_from_a'), 'B32: both subscriptions streaming');
probe_create($b, 'probe_b');

sub applied
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{SELECT coalesce((SELECT applied FROM cdc.stats WHERE target = 't'::regclass), 0)});
}

# Both directions caught up with everything the other side has written.
sub settle
{
	return wait_caught_up($a, $b, 'b_from_a') && wait_caught_up($b, $a, 'a_from_b') && wait_caught_up($a, $b, 'b_from_a');
}

$a->safe_psql('postgres', q{INSERT INTO t VALUES (1, 'inserted once on A')});
ok(settle(), 'B32: settled after the insert on A');
is($b->safe_psql('postgres', 'SELECT id, v FROM t'), '1|inserted once on A', 'B32: B applied the insert');
is(applied($b) . '|' . applied($a), '1|0', 'B32: counters B applied 1, A applied 0 (the echo was dropped)');
is(outbox_summary($a), '0|0', "B32: A's outbox: 0 rows");
my $origin_b = $b->safe_psql('postgres', q{SELECT cdc._origin_name(subid) FROM cdc.subscription WHERE name = 'b_from_a'});
is($b->safe_psql('postgres', q{
SELECT string_agg(convert_from(substring(data FROM 10 FOR length(data) - 10), 'SQL_ASCII'), ',')
  FROM pg_logical_slot_peek_binary_changes('probe_b', NULL, NULL, 'proto_version', '1', 'publication_names', 'p_t')
 WHERE get_byte(data, 0) = ascii('O')}), $origin_b,
	"B32: B's applied transaction carries B's replication origin (pgoutput's Origin message names $origin_b)");

# WAL quiet: another round trip each way changes nothing
ok(settle(), 'B32: settled again');
is(applied($b) . '|' . applied($a), '1|0', 'B32: still B applied 1, A applied 0: no loop');
is($a->safe_psql('postgres', 'SELECT count(*) FROM t') . '|' . $b->safe_psql('postgres', 'SELECT count(*) FROM t'), '1|1', 'B32: one row on each side');

# the other direction: B writes, A applies once (its one outbox row), B drops the echo
$b->safe_psql('postgres', q{INSERT INTO t VALUES (2, 'inserted once on B')});
ok(settle(), 'B32: settled after the insert on B');
is(applied($b) . '|' . applied($a), '1|1', 'B32: one apply each');
is(outbox_summary($a), '1|1', 'B32: one outbox row in all (A applied row 2)');
is($a->safe_psql('postgres', 'SELECT string_agg(id || v, \',\' ORDER BY id) FROM t'),
	$b->safe_psql('postgres', 'SELECT string_agg(id || v, \',\' ORDER BY id) FROM t'), 'B32: both sides hold rows 1 and 2');
ok(settle(), 'B32: settled again');
is(applied($b) . '|' . applied($a) . '|' . outbox_summary($a), '1|1|1|1', 'B32: quiet afterwards');
for my $pair ([ $a, 'a_from_b' ], [ $b, 'b_from_a' ]) {
	is(status_row($pair->[0], $pair->[1], q{state || '|' || retry_count}), 'streaming|0', "B32: $pair->[1] streaming, no error");
}
probe_drop($b, 'probe_b');
$a->stop;
$b->stop;

# ---------------------------------------------------------------------------
# Transactions tagged with another origin on a plain source
# ---------------------------------------------------------------------------
my $source = new_source('source');
$source->append_conf('postgresql.conf', "logical_decoding_work_mem = 64kB\n");
$source->restart;
my $dest = new_dest('dest');
$source->safe_psql('postgres', q{
CREATE TABLE o (id int PRIMARY KEY, v text);
CREATE PUBLICATION p_o FOR TABLE o;
INSERT INTO o VALUES (0, 'before');
SELECT pg_replication_origin_create('elsewhere');
});
my $ddl = 'CREATE TABLE %s (id int PRIMARY KEY, v text);';
$dest->safe_psql('postgres', sprintf($ddl, 'o_none') . sprintf($ddl, 'o_any') . q{
SELECT cdc.register_mapping('o_none', source_schema => 'public', source_table => 'o', source_name => 'o_none');
SELECT cdc.register_mapping('o_any', source_schema => 'public', source_table => 'o', source_name => 'o_any');
});
create_subscription($dest, $source, 'o_none', ['p_o'], q{origin => 'none'});
create_subscription($dest, $source, 'o_any', ['p_o']);
is($dest->safe_psql('postgres', q{SELECT string_agg(name || '=' || origin, ',' ORDER BY name) FROM cdc.subscription}),
	'o_any=any,o_none=none', 'the option is stored; any is the default');
ok(wait_caught_up($source, $dest, 'o_none') && wait_caught_up($source, $dest, 'o_any'), 'tagged: both copied, streaming');

sub tagged
{
	my ($sql) = @_;
	$source->safe_psql('postgres', "SELECT pg_replication_origin_session_setup('elsewhere');\n$sql");
}

sub ids
{
	my ($table) = @_;
	return $dest->safe_psql('postgres', "SELECT count(*) || ':' || coalesce(min(id), -1) || '-' || coalesce(max(id), -1) || ' ' || coalesce(string_agg(id::text, ',' ORDER BY id) FILTER (WHERE id < 100), '') FROM $table");
}

$source->safe_psql('postgres', q{INSERT INTO o VALUES (1, 'local')});
tagged(q{INSERT INTO o VALUES (2, 'replicated from elsewhere')});
$source->safe_psql('postgres', q{INSERT INTO o VALUES (3, 'local')});
ok(wait_caught_up($source, $dest, 'o_none') && wait_caught_up($source, $dest, 'o_any'), 'tagged: streamed');
is(ids('o_none'), '3:0-3 0,1,3', 'origin none: the tagged transaction is dropped');
is(ids('o_any'), '4:0-3 0,1,2,3', 'origin any: the tagged transaction is applied');

# the same when the source streams large transactions in chunks
$dest->safe_psql('postgres', 'ALTER SYSTEM SET cdc.streaming = on');
$dest->reload;
for my $sub ('o_none', 'o_any') {
	disable_and_wait($source, $dest, $sub);
	enable_subscription($dest, $sub);
}
tagged(q{INSERT INTO o SELECT g, 'bulk from elsewhere' FROM generate_series(1000, 4999) g});
$source->safe_psql('postgres', q{INSERT INTO o SELECT g, 'local bulk' FROM generate_series(5000, 8999) g});
ok(wait_caught_up($source, $dest, 'o_none') && wait_caught_up($source, $dest, 'o_any'), 'tagged streamed: caught up');
is($source->safe_psql('postgres', q{SELECT stream_txns >= 2 FROM pg_stat_replication_slots WHERE slot_name = 'o_none'}), 't',
	'tagged streamed: the source streamed both large transactions in chunks');
is(ids('o_none'), '4003:0-8999 0,1,3', 'origin none: the streamed tagged transaction is dropped, the local one applied');
is(ids('o_any'), '8004:0-8999 0,1,2,3', 'origin any: both streamed transactions applied');

# alter_subscription switches the option
$dest->safe_psql('postgres', q{SELECT cdc.alter_subscription('o_none', origin => 'any')});
ok(wait_status($dest, 'o_none', q{state = 'streaming'}), 'alter origin: a new worker streams');
tagged(q{INSERT INTO o VALUES (10, 'tagged after the switch')});
ok(wait_caught_up($source, $dest, 'o_none'), 'alter origin: caught up');
is(ids('o_none'), '4004:0-8999 0,1,3,10', 'alter origin: origin any applies tagged transactions from then on');
my ($ret, $out, $err) = $dest->psql('postgres', q{SELECT cdc.alter_subscription('o_none', origin => 'local')});
like($err, qr/origin must be 'none' or 'any'/, 'alter origin: another value is refused');
for my $sub ('o_none', 'o_any') {
	is(status_row($dest, $sub, q{state || '|' || retry_count}), 'streaming|0', "$sub: streaming, no error");
}

$dest->stop;
$source->stop;
done_testing();

# The outbox as logical decoding messages (outbox_via => 'message',
# docs/semantics.md, "Outbox as logical decoding messages") on the worker
# path, and its prerequisite wal_level = logical.
#
# Worker: a destination with wal_level = logical and a test_decoding slot;
# the initial copy (snapshot rows) writes no message, every streamed change
# exactly one, in source order, each with its own idempotency key, and the
# changes replayed after the slot and the origin were rewound none.
#
# Without wal_level = logical: cdc.register_mapping refuses the mapping
# (55000), and a mapping registered while it was logical refuses to apply
# after a restart with another wal_level (55000, nothing applied).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source();
my $dest = new_dest('dest', "wal_level = logical\nmax_replication_slots = 10\nmax_wal_senders = 10\n");

$source->safe_psql('postgres', q{
CREATE TABLE m (id int PRIMARY KEY, v text);
INSERT INTO m VALUES (1, 'copied'), (2, 'copied');
CREATE PUBLICATION pub FOR TABLE m;
});
$dest->safe_psql('postgres', q{
CREATE TABLE m (id int PRIMARY KEY, v text);
CREATE TABLE flush_marker (x int);
-- a message outbox needs this (sql/outbox_message_forged.sql)
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC;
SELECT cdc.register_mapping('m', outbox => true, outbox_via => 'message', source_name => 'sub1');
SELECT 1 FROM pg_create_logical_replication_slot('msgs', 'test_decoding');
});

# The cdc_outbox messages decoded since the last call: "op entity_key" per
# line, then the number of distinct idempotency keys.  Decoding reads only
# flushed WAL and the worker commits with synchronous_commit = off, so a
# synchronous commit first flushes everything it wrote.
sub messages
{
	$dest->safe_psql('postgres', q{SET synchronous_commit = on; INSERT INTO flush_marker VALUES (1)});
	return $dest->safe_psql('postgres', q{
WITH m AS (
  SELECT row_number() OVER () AS n, substring(data FROM 'content:(.*)$')::jsonb AS msg
    FROM pg_logical_slot_get_changes('msgs', NULL, NULL, 'skip-empty-xacts', '1')
   WHERE data LIKE 'message: transactional: 1 prefix: cdc_outbox,%')
SELECT coalesce(string_agg((msg->>'op') || ' ' || (msg->'entity_key'->>'id'), ',' ORDER BY n), '') || '|' ||
       count(DISTINCT msg->>'idempotency_key') FROM m});
}

create_subscription($dest, $source, 'sub1', ['pub']);
wait_caught_up($source, $dest, 'sub1');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM m'), '2', 'initial copy applied');
is(messages(), '|0', 'no message for the snapshot rows of the initial copy');

slot_save($source, 'sub1', 'sub1_saved');
my $saved = status_row($dest, 'sub1', 'applied_lsn');
$source->safe_psql('postgres', q{
INSERT INTO m VALUES (3, 'new');
BEGIN; UPDATE m SET v = 'changed' WHERE id = 1; DELETE FROM m WHERE id = 2; INSERT INTO m VALUES (2, 'again'); COMMIT;
UPDATE m SET v = 'last' WHERE id = 3;
});
wait_caught_up($source, $dest, 'sub1');
compare_table($source, $dest, 'SELECT * FROM m ORDER BY id', 'destination equals the source');
is(messages(), 'c 3,u 1,d 2,c 2,u 3|5', 'one message per streamed change, in source order, distinct keys');
is($dest->safe_psql('postgres', q{SELECT count(*) || '|' || (SELECT outbox_rows FROM cdc.stats WHERE target = 'm'::regclass)
                                  FROM cdc.outbox WHERE target = 'm'::regclass}),
	'0|5', 'no cdc.outbox rows; the messages are counted as outbox rows');

# The slot and the origin are rewound: the five changes reach the engine
# again, as duplicates, and write no message; then one new change, one.
disable_and_wait($source, $dest, 'sub1');
slot_restore($source, 'sub1', 'sub1_saved');
origin_rewind($dest, 'sub1', $saved);
enable_subscription($dest, 'sub1');
$source->safe_psql('postgres', q{UPDATE m SET v = 'after the replay' WHERE id = 1});
wait_caught_up($source, $dest, 'sub1');
is($dest->safe_psql('postgres', q{SELECT duplicate FROM cdc.stats WHERE target = 'm'::regclass}), '5',
	'the replayed changes are duplicates');
is(messages(), 'u 1|1', 'after the replay: one message, for the one new change');

# ---------------------------------------------------------------------------
# wal_level below logical
# ---------------------------------------------------------------------------
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;    # wal_level = minimal
$plain->start;
$plain->safe_psql('postgres', q{CREATE EXTENSION cdc_apply; CREATE TABLE p (id int PRIMARY KEY, v text);
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text), pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC;});
my ($ret, $out, $err) = $plain->psql('postgres',
	q{SELECT cdc.register_mapping('p', outbox => true, outbox_via => 'message')}, on_error_stop => 0,
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/55000/, 'register_mapping refuses outbox_via message without wal_level = logical (55000)');
like($err, qr/needs wal_level = logical/, '... and says why');

# Registered while logical, applied after a restart with wal_level = minimal.
$plain->append_conf('postgresql.conf', "wal_level = logical\nmax_wal_senders = 10\n");
$plain->restart;
$plain->safe_psql('postgres', q{SELECT cdc.register_mapping('p', outbox => true, outbox_via => 'message')});
$plain->append_conf('postgresql.conf', "wal_level = minimal\nmax_wal_senders = 0\n");
$plain->restart;
($ret, $out, $err) = $plain->psql('postgres',
	q{SELECT cdc_apply('{"op": "c", "source": {"name": "s", "lsn": 16}, "after": {"id": 1, "v": "x"}}'::jsonb, 'p')},
	on_error_stop => 0, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/55000/, 'applying to a message outbox without wal_level = logical raises 55000');
like($err, qr/outbox_via 'message'/, '... naming the mapping option');
is($plain->safe_psql('postgres', q{SELECT (SELECT count(*) FROM p) || '|' || (SELECT count(*) FROM cdc.ledger)}),
	'0|0', 'nothing of the change was applied or claimed');

done_testing();

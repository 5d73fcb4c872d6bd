# A logical backup of the destination (pg_dump, pg_restore into another
# database) carries the replay state with the target rows.  Before, no table
# of the extension was dumped (no pg_extension_config_dump): the restored
# database had its targets' rows but no mappings, entity records,
# tombstones, offset claims, truncate barriers or outbox rows, so a replay of
# changes from before the dump applied them again: the deleted row came back,
# the truncated table refilled, and the pending outbox rows were lost.  The
# restore gives every table a new OID; the state names targets by regclass
# and must follow them.  Not carried: the ledger (its digests include the
# old OID; the entity records decide those replays), the counters, and the
# worker's subscriptions (a restored copy must not consume the original's
# slot).  docs/operations.md, "Backups".
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $node = new_dest('dest');
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('postgres', 'CREATE DATABASE app2');
sub q1 { return $node->safe_psql('app', $_[0]); }
sub q2 { return $node->safe_psql('app2', $_[0]); }

my $setup = q{
CREATE EXTENSION cdc_apply;
CREATE FUNCTION dbz(op text, tbl text, after jsonb DEFAULT NULL, lsn bigint DEFAULT NULL, before jsonb DEFAULT NULL)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_strip_nulls(jsonb_build_object(
           'source', jsonb_build_object('connector', 'postgresql', 'name', 'shop', 'db', 'src',
              'schema', 'public', 'table', tbl, 'lsn', lsn, 'txId', lsn, 'snapshot', 'false'),
           'op', op)) || jsonb_build_object('before', before, 'after', after)
$$;
CREATE TABLE orders (id int PRIMARY KEY, n int NOT NULL);
CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL);
CREATE TABLE logs (id int PRIMARY KEY, n int NOT NULL);
SELECT 1 FROM cdc.register_mapping('orders', outbox => true, source_name => 'shop');
SELECT 1 FROM cdc.register_mapping('items', source_name => 'shop');
SELECT 1 FROM cdc.register_mapping('logs', source_name => 'shop');
};
q1($setup);
# The restored tables get OIDs other than the dumped ones.
q2('CREATE TABLE shift_oids (a int)');

q1(q{SELECT cdc_apply(dbz('c', 'orders', '{"id": 1, "n": 1}', 10));
     SELECT cdc_apply(dbz('c', 'orders', '{"id": 2, "n": 2}', 20));
     SELECT cdc_apply(dbz('c', 'orders', '{"id": 3, "n": 3}', 30));
     SELECT cdc_apply(dbz('u', 'orders', '{"id": 1, "n": 11}', 40));
     SELECT cdc_apply(dbz('d', 'orders', NULL, 50, '{"id": 2}'));
     SELECT cdc_apply(dbz('u', 'orders', '{"id": 3, "n": 99}', 30));
     SELECT cdc_apply_batch(jsonb_build_array(dbz('c', 'items', '{"id": 1, "n": 1}', 100),
                                              dbz('c', 'items', '{"id": 2, "n": 2}', 110)),
                            source_partition => 'items:0', offsets => ARRAY[1000, 1001]::bigint[]);
     SELECT cdc_apply(dbz('c', 'logs', '{"id": 1, "n": 1}', 150));
     SELECT cdc_apply(dbz('t', 'logs', NULL, 200));
     UPDATE cdc.outbox SET published_at = now() WHERE id = (SELECT min(id) FROM cdc.outbox);
     SELECT cdc.create_subscription('sub', 'host=/nonexistent dbname=src', ARRAY['p'], create_slot => false,
                                    enabled => false)});

# Everything a replay decision or a relay reads, as text (targets by name).
my %state = (
	rows => q{SELECT (SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM orders) || ' / ' ||
	                 (SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM items) || ' / ' ||
	                 (SELECT count(*) FROM logs)},
	mappings => q{SELECT string_agg(concat_ws(' ', target, source_name, outbox, ordering), ', ' ORDER BY target::text)
	              FROM cdc.mapping},
	entities => q{SELECT string_agg(concat_ws(' ', target, entity_key, source_name, version, is_tombstone), ', '
	                                ORDER BY target::text, entity_key::text) FROM cdc.entities},
	outbox => q{SELECT string_agg(concat_ws(' ', id, target, topic, idempotency_key, op, payload, version,
	                                        published_at IS NOT NULL), ', ' ORDER BY id) FROM cdc.outbox},
	offsets => q{SELECT string_agg(concat_ws(' ', p.id, p.target, p.name, r.lo, r.hi), ', ' ORDER BY p.id, r.hi)
	             FROM cdc.ledger_partition p JOIN cdc.ledger_range r ON r.partition_id = p.id},
	barriers => q{SELECT string_agg(concat_ws(' ', target, source_name, version), ', ') FROM cdc.table_barrier},
	conflicts => q{SELECT string_agg(concat_ws(' ', id, target, entity_key, reason, event_version), ', ' ORDER BY id)
	               FROM cdc.conflicts},
);
my %before = map { $_ => q1($state{$_}) } keys %state;
like($before{entities}, qr/orders \{"id": "2"\} shop \{0,50,50,0\} t/, 'the source database holds a tombstone');
like($before{conflicts}, qr/orders \{"id": "3"\}/, 'and a conflict');
is($before{rows}, '1:11,3:3 / 1:1,2:2 / 0', 'and the target rows');

my $dump = $node->basedir . '/app.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('app') ], 'pg_dump of the destination');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('app2'), $dump ], 'pg_restore into another database');

isnt(q2(q{SELECT 'orders'::regclass::oid}), q1(q{SELECT 'orders'::regclass::oid}), 'the restored target has another OID');
is(q2($state{$_}), $before{$_}, "restored: $_") for sort keys %state;
is(q2('SELECT count(*) FROM cdc.subscription'), '0', 'the worker\'s subscription is not restored');
is(q2('SELECT count(*) FROM cdc.ledger'), '0', 'nor the ledger (its digests hold the old OIDs)');

# Replays of changes from before the dump are decided by the restored state.
is(q2(q{SELECT cdc_apply(dbz('c', 'orders', '{"id": 2, "n": 2}', 20))}), 'stale', 'the deleted row stays deleted');
is(q2(q{SELECT cdc_apply(dbz('u', 'orders', '{"id": 1, "n": 11}', 40))}), 'duplicate', 'an applied update is a duplicate');
is(q2(q{SELECT cdc_apply(dbz('c', 'logs', '{"id": 1, "n": 1}', 150))}), 'stale', 'the truncate barrier holds');
is(q2(q{SELECT duplicate FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'items', '{"id": 1, "n": 1}', 100),
                                                                  dbz('c', 'items', '{"id": 2, "n": 2}', 110)),
                                               source_partition => 'items:0', offsets => ARRAY[1000, 1001]::bigint[])}),
	'2', 'claimed offsets stay claimed');
is(q2($state{rows}), $before{rows}, 'no row changed');
is(q2($state{outbox}), $before{outbox}, 'no outbox row was added');

# New changes continue the restored sequences.
is(q2(q{SELECT cdc_apply(dbz('c', 'orders', '{"id": 4, "n": 4}', 60))}), 'applied', 'a new change is applied');
is(q2(q{SELECT max(id) FROM cdc.outbox}), q1(q{SELECT max(id) + 1 FROM cdc.outbox}),
	'its outbox row follows the restored ones');
is(q2(q{SELECT applied FROM cdc_apply_batch(jsonb_build_array(dbz('c', 'items', '{"id": 3, "n": 3}', 120)),
                                            source_partition => 'items:1', offsets => ARRAY[5]::bigint[])}),
	'1', 'a new source partition is claimed');
is(q2(q{SELECT max(id) FROM cdc.ledger_partition}), q1(q{SELECT max(id) + 1 FROM cdc.ledger_partition}),
	'under a new partition id');

# A role that may not read the replay state cannot dump it: pg_dump fails
# rather than leave it out silently; --exclude-table-data leaves it out on
# purpose.
$node->safe_psql('postgres', 'CREATE ROLE alice LOGIN; ALTER DATABASE app OWNER TO alice');
q1('ALTER TABLE orders OWNER TO alice; ALTER TABLE items OWNER TO alice; ALTER TABLE logs OWNER TO alice;
    ALTER FUNCTION dbz OWNER TO alice');
$node->command_fails_like([ 'pg_dump', '-Fc', '-f', "$dump.alice", '-U', 'alice', '-d', $node->connstr('app') ],
	qr/permission denied for (?:table|sequence) \w+\n.*Query was: .*\bcdc\./,
	'pg_dump as a role without access to the state fails, naming what it could not read');
$node->command_ok(
	[ 'pg_dump', '-Fc', '-f', "$dump.alice", '-U', 'alice', '--exclude-table-data=cdc.*', '-d', $node->connstr('app') ],
	'with --exclude-table-data=cdc.* it dumps without the state');

$node->stop;
done_testing();

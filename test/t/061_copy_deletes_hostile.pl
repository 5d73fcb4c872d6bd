# A table's copy deletes the rows the source no longer has (docs/worker.md,
# "Rows the source no longer has"), and no row of another writer of the
# same target (docs/testing.md lists the cases).  Found by a hostile test:
# the copy of a second subscription of the same source cluster, whose
# publication's row filter took the other half of a table, deleted every
# row the first one had written (their entity records share the source id
# pg:<system identifier>).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest');
sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { return $dest->safe_psql('postgres', $_[0]); }
sub ready
{
	my ($sub, $t) = @_;
	return $dest->poll_query_until('postgres',
		"SELECT count(*) > 0 AND bool_and(state = 'ready') FROM cdc.subscription_tables WHERE subscription = '$sub'"
		  . ($t ? " AND table_name = '$t'" : ''));
}

# A: two subscriptions of one source database, each publishing a part of t
# (row filters), both writing destination t
sq(q{CREATE TABLE t (id int PRIMARY KEY, v text);
     INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g;
     CREATE PUBLICATION p_lo FOR TABLE t WHERE (id <= 50);
     CREATE PUBLICATION p_hi FOR TABLE t WHERE (id > 50);});
dq(q{CREATE TABLE t (id int PRIMARY KEY, v text);});
create_subscription($dest, $source, 'lo', ['p_lo']);
ok(ready('lo'), 'A: lo copied');
ok(wait_caught_up($source, $dest, 'lo'), 'A: lo caught up');
sq(q{UPDATE t SET v = 'upd' WHERE id IN (1, 2, 60)});
ok(wait_caught_up($source, $dest, 'lo'), 'A: lo caught up again');
create_subscription($dest, $source, 'hi', ['p_hi']);
ok(ready('hi'), 'A: hi copied');
ok(wait_caught_up($source, $dest, 'hi'), 'A: hi caught up');
ok(wait_caught_up($source, $dest, 'lo'), 'A: lo caught up after hi');
compare_table($source, $dest, q{SELECT count(*), md5(string_agg(x::text, ',' ORDER BY id)) FROM t x},
	'A: t equals the source after both copies');
is(dq(q{SELECT count(*) FROM cdc.tombstones WHERE target = 't'::regclass}), '0', 'A: no tombstones');
ok($dest->log_contains(qr/the copy of public\.t deletes no rows the source no longer has\n.*DETAIL:  Subscription "lo" also writes/),
	'A: the copy of hi says why it deletes nothing');
dq(q{SELECT cdc.resync_table('lo', 't')});
ok(ready('lo', 't'), 'A: lo resynced');
ok(wait_caught_up($source, $dest, 'lo'), 'A: lo caught up after resync');
ok(wait_caught_up($source, $dest, 'hi'), 'A: hi caught up after resync');
compare_table($source, $dest, q{SELECT count(*), md5(string_agg(x::text, ',' ORDER BY id)) FROM t x},
	'A: t equals the source after a resync of lo');
is(dq(q{SELECT count(*) FROM cdc.tombstones WHERE target = 't'::regclass}), '0', 'A: still no tombstones');
is(dq(q{SELECT count(*) FROM cdc.outbox}), '0', 'A: no outbox rows');

# B: keys that need quoting, numeric and timestamptz keys; and a Debezium
# writer of the same target
sq(q{CREATE TABLE k1 (k text PRIMARY KEY, n int);
     INSERT INTO k1 VALUES ('NULL', 1), ('null', 2), ('"', 3), ('\\', 4), ('{}', 5), ('a,b', 6), ('''', 7), ('', 8), (' sp ', 9), ('x', 10);
     CREATE TABLE k2 (a text, b text, n int, PRIMARY KEY (a, b));
     INSERT INTO k2 SELECT x, y, 1 FROM unnest(ARRAY['NULL', '"', '\\', '{', '}', 'a,b', '', ' ', 'k']) x,
                                     unnest(ARRAY['NULL', 'z', '\\"', '{a,b}']) y;
     CREATE TABLE k3 (a numeric, b timestamptz, n int, PRIMARY KEY (a, b));
     INSERT INTO k3 SELECT g / 4.0, timestamptz '2024-01-01 00:00:00.000001+00' + g * interval '1 hour 0.5 second', g FROM generate_series(1, 20) g;
     CREATE TABLE so (id int PRIMARY KEY, v text);
     INSERT INTO so SELECT g, 'v' FROM generate_series(1, 10) g;
     CREATE PUBLICATION p_b FOR TABLE k1, k2, k3, so;});
dq(q{CREATE TABLE k1 (k text PRIMARY KEY, n int); CREATE TABLE k2 (a text, b text, n int, PRIMARY KEY (a, b));
     CREATE TABLE k3 (a numeric, b timestamptz, n int, PRIMARY KEY (a, b)); CREATE TABLE so (id int PRIMARY KEY, v text);
     SELECT cdc.register_mapping('k1'); SELECT cdc.register_mapping('so', source_name => 'b');
     SELECT cdc.set_ordering('so', 'stream');
     ALTER DATABASE postgres SET DateStyle = 'SQL, DMY'; ALTER DATABASE postgres SET TimeZone = 'Asia/Kolkata';
     ALTER DATABASE postgres SET IntervalStyle = 'sql_standard';});
create_subscription($dest, $source, 'b', ['p_b']);
ok(ready('b'), 'B: copied');
ok(wait_caught_up($source, $dest, 'b'), 'B: caught up');
# a Debezium row in k1 (another source)
dq(q{SELECT cdc_apply(jsonb_build_object('op', 'c', 'source', jsonb_build_object('name', 'dbz', 'schema', 'public', 'table', 'k1', 'lsn', 5, 'txId', 5),
       'after', jsonb_build_object('k', 'from-debezium', 'n', 99)), 'k1'::regclass, 'dbz:1')});
# destination-only row in so (stream ordered)
dq(q{INSERT INTO so VALUES (1000, 'dest only')});
sq(q{ALTER PUBLICATION p_b DROP TABLE k1, k2, k3, so});
dq(q{SELECT cdc.refresh_subscription('b')});
sq(q{DELETE FROM k1 WHERE n % 2 = 0 OR k = 'NULL'; DELETE FROM k2 WHERE a IN ('NULL', chr(123), '') OR b = 'NULL';
     DELETE FROM k3 WHERE n % 3 = 0; DELETE FROM so WHERE id <= 3;
     ALTER PUBLICATION p_b ADD TABLE k1, k2, k3, so;});
dq(q{SELECT cdc.refresh_subscription('b')});
ok(ready('b'), 'B: copied again');
ok(wait_caught_up($source, $dest, 'b'), 'B: caught up again');
for my $q ([ 'k1', q{SELECT count(*), md5(string_agg(x::text, ',' ORDER BY k)) FROM k1 x WHERE k <> 'from-debezium'} ],
	[ 'k2', q{SELECT count(*), md5(string_agg(x::text, ',' ORDER BY a, b)) FROM k2 x} ],
	[ 'k3', q{SELECT count(*), md5(string_agg(a || '/' || extract(epoch from b) || '/' || n, ',' ORDER BY a, b)) FROM k3 x} ])
{
	compare_table($source, $dest, $q->[1], "B: $q->[0] equals the source");
}
is(dq(q{SELECT count(*) FROM k1 WHERE k = 'from-debezium'}), '1', 'B: the Debezium row stays');
is(dq(q{SELECT count(*) FROM so}), '11', 'B: stream-ordered so: nothing deleted (10 copied + dest-only)');
is(dq(q{SELECT count(*) FROM cdc.tombstones WHERE target = 'k1'::regclass}), '6', 'B: k1 tombstones');
is(dq(q{SELECT count(*) FROM cdc.tombstones WHERE target = 'k2'::regclass}), '18', 'B: k2 tombstones');
is(dq(q{SELECT count(*) FROM cdc.tombstones WHERE target = 'k3'::regclass}), '6', 'B: k3 tombstones');
is(dq(q{SELECT count(*) FROM cdc.outbox}), '0', 'B: no outbox rows');
done_testing();

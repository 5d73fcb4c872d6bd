# The worker against PostgreSQL's own logical replication (fidelity review
# h1, with TAP 166's set-up): one source, a destination with a native
# CREATE SUBSCRIPTION nat in the database "native" and the cdc_apply
# subscription fz in "postgres", on the same publications, a fixed
# workload; every table's rows compared between the two (and with the
# source).
#
#   t_swap   keys that move within one statement: the source's key is
#            DEFERRABLE (so REPLICA IDENTITY FULL), a swap of two keys and
#            UPDATE ... SET id = id + 1 over rows in ascending order, a
#            TOASTed column unchanged by both; an outbox in the cdc
#            database.  pgoutput sends (1 -> 2) while 2 still has its row,
#            then (2 -> 1).  Before, the worker wrote the first over the
#            row at 2 and the second deleted key 2: the swap left one row
#            and the shift one of three, silently (docs/worker.md, "Keys
#            that move within one statement").  Native's destination key
#            is DEFERRABLE as the source's; the worker refuses one (it
#            decides conflicts on an immediate unique index), so its
#            table has a plain primary key.  The shift again inside a
#            transaction large enough to be streamed (source
#            logical_decoding_work_mem = 64kB, cdc.streaming = on, native
#            streaming = on).
#   t_same   the shift over rows alike but for their key.
#   t_div    the cdc database's table has a row (50) the source never had;
#            one source transaction moves a row onto 50, then on to 60:
#            the row at 50 was no displaced source row, and goes (native
#            has no row 50 and moves its row twice).
#   t_nokey  the source has no key at all (REPLICA IDENTITY FULL): all six
#            keys reversed by one statement.
#   t_def    an INITIALLY DEFERRED source key: a row moved onto another's
#            key, then that other row deleted by a later statement of the
#            same transaction.
#   t_trunc  published with publish = 'truncate' only: nothing but the
#            TRUNCATE reaches either destination.
#   t_drop   a source column dropped mid-stream (the destination keeps
#            it): rows inserted, updated and moved to another key after.
#   t_val    the source database's bytea_output = escape and TimeZone
#            with a 5:45 offset: bytea, bytea[], timetz, timestamptz
#            (an LMT offset with seconds), tstzrange, money, interval,
#            text[] in the copy and the stream.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
# large transactions are streamed to both subscribers
$source->append_conf('postgresql.conf', "logical_decoding_work_mem = 64kB\n");
$source->reload;
my $dest = new_dest('dest', "cdc.streaming = on\n");

my $src_ddl = q{
CREATE TABLE t_swap (id int PRIMARY KEY DEFERRABLE INITIALLY IMMEDIATE, v text, body text);
ALTER TABLE t_swap ALTER body SET STORAGE EXTERNAL;
ALTER TABLE t_swap REPLICA IDENTITY FULL;
CREATE TABLE t_nokey (id int NOT NULL, v text);
ALTER TABLE t_nokey REPLICA IDENTITY FULL;
CREATE TABLE t_same (id int PRIMARY KEY DEFERRABLE, v text);
ALTER TABLE t_same REPLICA IDENTITY FULL;
CREATE TABLE t_div (id int PRIMARY KEY, v text);
ALTER TABLE t_div REPLICA IDENTITY FULL;
CREATE TABLE t_def (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, v text);
ALTER TABLE t_def REPLICA IDENTITY FULL;
CREATE TABLE t_trunc (id int PRIMARY KEY, v text);
CREATE TABLE t_big (id int PRIMARY KEY, pad text);
CREATE TABLE t_drop (id int PRIMARY KEY, v text, gone text, n int);
CREATE TABLE t_val (id int PRIMARY KEY, b bytea, ba bytea[], tz timetz, ts timestamptz, r tstzrange, m money, i interval, c text[]);
};
# native's key is DEFERRABLE where the source's is; the worker's plain
my $dst_ddl = q{
CREATE TABLE t_swap (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, v text, body text);
CREATE TABLE t_nokey (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, v text);
CREATE TABLE t_same (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, v text);
CREATE TABLE t_div (id int PRIMARY KEY, v text);
CREATE TABLE t_def (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, v text);
CREATE TABLE t_trunc (id int PRIMARY KEY, v text);
CREATE TABLE t_big (id int PRIMARY KEY, pad text);
CREATE TABLE t_drop (id int PRIMARY KEY, v text, gone text, n int);
CREATE TABLE t_val (id int PRIMARY KEY, b bytea, ba bytea[], tz timetz, ts timestamptz, r tstzrange, m money, i interval, c text[]);
};
(my $cdc_ddl = $dst_ddl) =~ s/ DEFERRABLE INITIALLY DEFERRED//g;

$source->safe_psql('postgres', $src_ddl . q{
INSERT INTO t_swap SELECT g, 'v' || g, repeat(md5(g::text), 200) FROM generate_series(1, 6) g;
INSERT INTO t_nokey SELECT g, 'v' || g FROM generate_series(1, 6) g;
INSERT INTO t_same SELECT g, 'same' FROM generate_series(1, 4) g;
INSERT INTO t_div SELECT g, 'v' || g FROM generate_series(1, 2) g;
INSERT INTO t_def SELECT g, 'v' || g FROM generate_series(1, 3) g;
INSERT INTO t_trunc SELECT g, 'v' || g FROM generate_series(1, 3) g;
INSERT INTO t_drop SELECT g, 'v' || g, 'gone' || g, g FROM generate_series(1, 4) g;
ALTER DATABASE postgres SET bytea_output = 'escape';
ALTER DATABASE postgres SET timezone = 'Asia/Kathmandu';
CREATE PUBLICATION pub FOR TABLE t_swap, t_nokey, t_same, t_div, t_def, t_drop, t_val, t_big;
CREATE PUBLICATION pub_tr FOR TABLE t_trunc WITH (publish = 'truncate');
});
# in a new session: the database's settings
$source->safe_psql('postgres', q{
INSERT INTO t_val VALUES (1, '\x00015c27ff'::bytea, ARRAY['\x00'::bytea, '\x5c5c'::bytea, NULL], '12:34:56+05:45',
  '1900-01-01 00:00:00+05:41:16', '[2020-01-01 00:00+05:45, 2021-01-01)', 12.34, '1 day -02:03:04', ARRAY['a"b', 'NULL', NULL, ' x ']);
});
is($source->safe_psql('postgres', q{SELECT b::text || ' ' || current_setting('TimeZone') FROM t_val}), '\000\001\\\\\'\377 Asia/Kathmandu',
	'the source prints bytea escaped, in its time zone');
$dest->safe_psql('postgres', 'CREATE DATABASE native');
$dest->safe_psql('native', $dst_ddl);
$dest->safe_psql('postgres', $cdc_ddl . q{SELECT cdc.register_mapping('t_swap', outbox => true);});
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
$dest->safe_psql('native', "CREATE SUBSCRIPTION nat CONNECTION '$conn' PUBLICATION pub, pub_tr WITH (streaming = on)");
create_subscription($dest, $source, 'fz', [ 'pub', 'pub_tr' ]);
$dest->wait_for_subscription_sync($source, 'nat', 'native');
ok(wait_caught_up($source, $dest, 'fz'), 'the cdc_apply subscription copied the tables');
$dest->safe_psql('postgres', q{INSERT INTO t_div VALUES (50, 'local')});

# a source trigger logs t_swap's changes: the reference for the outbox
$source->safe_psql('postgres', q{
CREATE TABLE swap_log (seq serial PRIMARY KEY, op text, id int);
CREATE FUNCTION swap_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO swap_log (op, id) VALUES (lower(left(TG_OP, 1)), CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END);
  RETURN NULL;
END $$;
CREATE TRIGGER swap_note AFTER INSERT OR UPDATE OR DELETE ON t_swap FOR EACH ROW EXECUTE FUNCTION swap_note();
});

my @steps = (
	# keys that move within one statement
	q{UPDATE t_swap SET id = CASE id WHEN 1 THEN 2 WHEN 2 THEN 1 END WHERE id IN (1, 2)},
	q{UPDATE t_swap SET id = id + 1 WHERE id >= 4},
	q{UPDATE t_swap SET id = id + 10, v = v || ' moved' WHERE id IN (1, 2)},
	q{UPDATE t_nokey SET id = 7 - id},
	q{UPDATE t_same SET id = id + 1},
	q{BEGIN; UPDATE t_div SET id = 50 WHERE id = 1; UPDATE t_div SET id = 60 WHERE id = 50; COMMIT},
	# the same in a transaction large enough to be streamed
	q{BEGIN; INSERT INTO t_big SELECT g, repeat('x', 100) FROM generate_series(1, 3000) g; UPDATE t_swap SET id = id + 1 WHERE id >= 5; COMMIT},
	q{BEGIN; UPDATE t_def SET id = 2 WHERE id = 1; DELETE FROM t_def WHERE v = 'v2'; COMMIT},
	q{UPDATE t_def SET v = v || '!' WHERE id = 3},
	# publish = 'truncate' only
	q{INSERT INTO t_trunc VALUES (10, 'after'); UPDATE t_trunc SET v = 'upd' WHERE id = 1},
	q{TRUNCATE t_trunc},
	q{INSERT INTO t_trunc VALUES (20, 'after truncate')},
	# a source column dropped mid-stream
	q{ALTER TABLE t_drop DROP COLUMN gone},
	q{INSERT INTO t_drop VALUES (5, 'v5', 5)},
	q{UPDATE t_drop SET v = 'u' || id WHERE id IN (1, 5)},
	q{UPDATE t_drop SET id = 10 + id WHERE id IN (2, 5)},
	# values printed with the source's settings
	q{INSERT INTO t_val VALUES (2, '\x5c30'::bytea, ARRAY['\xdeadbeef'::bytea], '00:00:00-00:00:30', '0044-03-15 12:00:00 BC', '(,)', -0.01, '-1 mon +1 day', '{}')},
	q{UPDATE t_val SET b = b || '\x27'::bytea, tz = '23:59:59.999999-15:59' WHERE id = 1},
);
$source->safe_psql('postgres', $_) for @steps;
$source->wait_for_catchup('nat');
ok(wait_caught_up($source, $dest, 'fz'), 'the cdc_apply subscription caught up');
ok($source->poll_query_until('postgres', q{SELECT count(*) = 2 FROM pg_stat_replication_slots WHERE slot_name IN ('nat', 'fz') AND stream_txns > 0}),
	'both slots streamed the large transaction');
is($dest->safe_psql('postgres', q{SELECT state || ' ' || coalesce(last_error, '') FROM cdc.subscription_status WHERE name = 'fz'}),
	'streaming ', 'no error');

my %expected = (
	t_swap => "3|v3|3\n6|v4|4\n7|v5|5\n8|v6|6\n12|v2 moved|2\n13|v1 moved|1",
	t_nokey => "1|v6\n2|v5\n3|v4\n4|v3\n5|v2\n6|v1",
	t_same => "2|same\n3|same\n4|same\n5|same",
	t_div => "2|v2\n60|v1",
	t_def => "2|v1\n3|v3!",
);
for my $t (qw(t_swap t_nokey t_same t_div t_def t_trunc t_drop t_val t_big)) {
	my $q = $t eq 't_swap'
	  ? q{SELECT id, v, (SELECT g FROM generate_series(1, 6) g WHERE body = repeat(md5(g::text), 200)) FROM t_swap ORDER BY id}
	  : "SELECT * FROM $t ORDER BY 1";
	$q = "SET bytea_output = hex; SET TimeZone = 'UTC'; $q";
	my ($s, $n, $c) = ($source->safe_psql('postgres', $q), $dest->safe_psql('native', $q), $dest->safe_psql('postgres', $q));
	is($c, $n, "$t: the cdc_apply subscription's rows equal native's");
	is($s, $expected{$t}, "$t: the source's rows as expected") if $expected{$t};
	# t_drop's destination keeps the dropped column; t_trunc keeps what was never sent
	is($c, $s, "$t: and the source's") unless $t eq 't_drop' || $t eq 't_trunc';
}
is($dest->safe_psql('native', 'SELECT * FROM t_trunc ORDER BY 1'), '', 't_trunc: native applied only the truncate');
is($dest->safe_psql('postgres', 'SELECT * FROM t_drop ORDER BY 1'), "1|u1|gone1|1\n3|v3|gone3|3\n4|v4|gone4|4\n12|v2|gone2|2\n15|u5||5",
	't_drop: the destination keeps the dropped column, moved with its row');

# the outbox: each source change of t_swap gives the rows of its keys
# (a key change: the old key's delete and the new key's row; a change
# that moves a row displaced by an earlier change of its statement: the
# new key's row only, the row at its old key stays), each change claimed
# once, and the last row of every key says what the destination holds
my $changes = $source->safe_psql('postgres', 'SELECT count(*) FROM swap_log');
is($changes, 12, 't_swap: twelve source changes');
is($dest->safe_psql('postgres', q{SELECT count(DISTINCT version) || '|' || count(*) || '|' || count(DISTINCT idempotency_key) FROM cdc.outbox WHERE target = 't_swap'::regclass}),
	'12|19|19', 't_swap: outbox rows of twelve changes: seven key changes (two rows each), five moves of a displaced row (one), all distinct');
is($dest->safe_psql('postgres', q{
	SELECT string_agg(k || ':' || op, ',' ORDER BY k::int) FROM (
	  SELECT DISTINCT ON (entity_key->>'id') entity_key->>'id' AS k, op FROM cdc.outbox
	   WHERE target = 't_swap'::regclass ORDER BY entity_key->>'id', id DESC) l}),
	'1:d,2:d,4:d,5:d,6:u,7:u,8:u,11:d,12:u,13:u', "t_swap: every key's last outbox row agrees with the rows");
is(changes_claimed_once($dest, 't_swap', 'SELECT DISTINCT * FROM (' . outbox_changes('t_swap') . ') o'), "$changes|6",
	't_swap: every change claimed once (and the six rows of the copy)');
is($dest->safe_psql('postgres', q{SELECT applied - snapshot_rows FROM cdc.stats WHERE target = 't_swap'::regclass}), $changes,
	't_swap: cdc.stats counts each change applied once');
done_testing();

# Two-phase transactions on the source (helper h2's review).  The worker
# does not decode two-phase (pgoutput without two_phase): a prepared
# transaction reaches it at COMMIT PREPARED, as an ordinary transaction,
# and one rolled back with ROLLBACK PREPARED never does (or, streamed
# before its PREPARE, ends with a STREAM ABORT).  After each step the
# destination must equal the source row for row, with exactly one outbox
# row per change applied and no error recorded.
#
#   prepared   PREPARE; a later transaction commits first; COMMIT PREPARED
#   rollback   PREPARE; ROLLBACK PREPARED (a delete and an insert in it)
#   restart    PREPARE; the destination restarts; COMMIT PREPARED
#   streamed   large prepared transactions (cdc.streaming on,
#              logical_decoding_work_mem 64kB): one rolled back, one
#              committed
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
$source->append_conf('postgresql.conf', "max_prepared_transactions = 10\nlogical_decoding_work_mem = 64kB\n");
$source->restart;
my $dest = new_dest('dest', "cdc.streaming = on\n");

sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { return $dest->safe_psql('postgres', $_[0]); }

my $table = "CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL, note text);\n";
sq($table . "CREATE PUBLICATION p FOR TABLE t;");
dq($table . "SELECT cdc.register_mapping('t', outbox => true);");
create_subscription($dest, $source, 's', ['p']);
ok(wait_caught_up($source, $dest, 's'), 'streaming');

sub same_rows
{
	my ($label) = @_;
	compare_table($source, $dest,
		"SELECT count(*), md5(coalesce(string_agg((id, n, note)::text, ',' ORDER BY id), '')) FROM t",
		"$label: t equals the source");
}

sub check
{
	my ($label, $outbox) = @_;
	ok(wait_caught_up($source, $dest, 's'), "$label: caught up");
	same_rows($label);
	is(outbox_summary($dest, "target = 't'::regclass"), "$outbox|$outbox", "$label: one outbox row per applied change");
	is(status_row($dest, 's', "coalesce(last_error, '')"), '', "$label: no error");
}

# prepared: applied at COMMIT PREPARED, after the transaction that
# committed while it was prepared
sq("BEGIN; INSERT INTO t VALUES (1, 1, 'a'); UPDATE t SET n = 2 WHERE id = 1; PREPARE TRANSACTION 'a';");
sq("INSERT INTO t VALUES (2, 1, 'b')");
check('while prepared', 1);
is(dq("SELECT count(*) FROM t WHERE id = 1"), '0', 'while prepared: nothing of it applied');
sq("COMMIT PREPARED 'a'");
check('commit prepared', 3);
is(dq("SELECT n FROM t WHERE id = 1"), '2', 'commit prepared: its last image');

# rollback: never applied
sq("BEGIN; INSERT INTO t VALUES (3, 1, 'c'); DELETE FROM t WHERE id = 2; PREPARE TRANSACTION 'b';");
sq("INSERT INTO t VALUES (4, 1, 'd')");
sq("ROLLBACK PREPARED 'b'");
check('rollback prepared', 4);
is(dq("SELECT string_agg(id::text, ',' ORDER BY id) FROM t"), '1,2,4', 'rollback prepared: its insert and delete not applied');
is(dq("SELECT count(*) FROM cdc.tombstones WHERE target = 't'::regclass"), '0', 'rollback prepared: no tombstone');

# restart: the destination restarts while the source holds a prepared
# transaction; applied once at COMMIT PREPARED
sq("BEGIN; INSERT INTO t VALUES (5, 1, 'e'); PREPARE TRANSACTION 'c';");
$dest->restart;
sq("COMMIT PREPARED 'c'");
check('restart', 5);

# streamed: large prepared transactions, streamed before their PREPARE
my $big = sub {
	my ($from, $gid) = @_;
	return "BEGIN; INSERT INTO t SELECT g, g, repeat('x', 100) FROM generate_series($from, $from + 4999) g;"
	  . " UPDATE t SET n = n + 1 WHERE id BETWEEN $from AND $from + 99; PREPARE TRANSACTION '$gid';";
};
sq($big->(1000, 'd'));
sq("INSERT INTO t VALUES (6, 1, 'f')");
sq("ROLLBACK PREPARED 'd'");
check('streamed, rollback prepared', 6);
is(dq("SELECT count(*) FROM t WHERE id >= 1000"), '0', 'streamed, rollback prepared: nothing of it applied');
like(slurp_file($dest->logfile), qr/streamed transaction \d+ aborted; its spooled changes are dropped/,
	'streamed, rollback prepared: streamed before its PREPARE, ended by STREAM ABORT');
sq($big->(10000, 'e'));
sq("INSERT INTO t VALUES (7, 1, 'g')");
sq("COMMIT PREPARED 'e'");
check('streamed, commit prepared', 5107);
is(dq("SELECT count(*) FROM t WHERE id >= 10000"), '5000', 'streamed, commit prepared: applied');

# the source transactions were applied once each
is(dq("SELECT applied FROM cdc.stats WHERE target = 't'::regclass"), '5107', 'applied once each');
is(dq("SELECT count(*) FROM pg_prepared_xacts"), '0', 'no prepared transaction on the destination');

done_testing();

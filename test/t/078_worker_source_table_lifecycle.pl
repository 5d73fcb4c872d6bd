# Source tables dropped and created again, and TRUNCATE, while the worker
# streams (review h1), compared with what PostgreSQL 15's own subscriber
# does.
#
#   recreated  a published table dropped on the source and created again
#              under its name (a new relation OID), written, added back
#              to the publication, written again, without a refresh in
#              between.  The subscription still lists the name, so the new
#              relation's changes were applied over the rows copied from
#              the dropped one: its rows that the source no longer has
#              stayed, the rows the new table got before it was published
#              never came, status streaming, nothing logged (fails on
#              integ 2ef6fad).  PostgreSQL's subscriber mixes them the same
#              way, but the worker records the copied relation's OID
#              (cdc.subscription_rel.source_relid): it must stop with
#              55000 naming both OIDs (not the rename error, which is for
#              a relation under a new name), apply nothing of the new
#              relation, and cdc.resync_table must end with the source's
#              rows.  cdc.refresh_subscription sees the same names and
#              changes nothing.
#   refreshed  the same with cdc.refresh_subscription while the table is
#              gone (removed) and after it is added back (added, copied):
#              the copy deletes the dropped table's rows, the stream goes on.
#   truncate   TRUNCATE of a published table with outbox on, alone, inside a
#              transaction between inserts, of two tables in one statement
#              (one without outbox), and while the worker is behind (a
#              backlog applied in groups): the rows equal the source's, one
#              outbox row per change and per truncate (op t), none for the
#              table without outbox.
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
sub outbox_ops
{
	my ($table) = @_;
	return dq(qq{SELECT count(*) || '|' || count(DISTINCT idempotency_key) || '|' || coalesce(string_agg(op, '' ORDER BY id), '')
	               FROM cdc.outbox WHERE target = '$table'::regclass});
}
sub wait_ready
{
	my ($sub, $table) = @_;
	return $dest->poll_query_until('postgres',
		qq{SELECT state = 'ready' FROM cdc.subscription_tables WHERE subscription = '$sub' AND table_name = '$table'});
}

# --- recreated --------------------------------------------------------------
my $t = 'CREATE TABLE ra (id int PRIMARY KEY, n int NOT NULL);';
sq($t . q{CREATE TABLE ro (id int PRIMARY KEY, n int NOT NULL); INSERT INTO ra SELECT g, 0 FROM generate_series(1, 6) g;
   CREATE PUBLICATION p3 FOR TABLE ra, ro;});
dq($t . q{CREATE TABLE ro (id int PRIMARY KEY, n int NOT NULL); SELECT cdc.register_mapping('ra', outbox => true);});
create_subscription($dest, $source, 's3', ['p3']);
ok(wait_caught_up($source, $dest, 's3'), 'recreated: copied, streaming');
sq(q{UPDATE ra SET n = 1 WHERE id = 1});
ok(wait_caught_up($source, $dest, 's3'), 'recreated: the old relation\'s change applied');
my $old_rows = id_n_rows($dest, 'ra');
my $old_oid = sq(q{SELECT 'ra'::regclass::oid});
my $offset = -s $dest->logfile;
sq(q{DROP TABLE ra});
sq($t . q{INSERT INTO ra VALUES (4, 10), (5, 10), (7, 10)});
my $new_oid = sq(q{SELECT 'ra'::regclass::oid});
sq(q{ALTER PUBLICATION p3 ADD TABLE ra});
sq(q{INSERT INTO ra VALUES (8, 20); UPDATE ra SET n = 21 WHERE id = 4; INSERT INTO ro VALUES (1, 1)});
ok(wait_status($dest, 's3', qq{state = 'error' AND last_error LIKE '%public.ra is another relation%OID $new_oid, recorded as OID $old_oid%'}),
	'recreated: the worker stops (55000) naming the new and the copied relation');
my $log = substr(slurp_file($dest->logfile), $offset);
unlike($log, qr/now called/, 'recreated: not taken for a rename');
is(id_n_rows($dest, 'ra'), $old_rows, 'recreated: nothing of the new relation applied over the old rows');
is(dq(q{SELECT count(*) FROM ro}), '0', 'recreated: nor the rest of its source transaction');
is(dq(q{SELECT count(*) FROM cdc.refresh_subscription('s3')}), '0', 'recreated: the refresh sees the same names');
dq(q{SELECT cdc.resync_table('s3', 'ra')});
wait_ready('s3', 'ra');
ok(wait_caught_up($source, $dest, 's3'), 'recreated: streams again after cdc.resync_table');
sq(q{UPDATE ra SET n = 22 WHERE id = 5});
ok(wait_caught_up($source, $dest, 's3'), 'recreated: caught up');
same_id_n_rows($source, $dest, 'ra', 'recreated');
same_id_n_rows($source, $dest, 'ro', 'recreated');
is(outbox_ops('ra'), '2|2|uu', 'recreated: outbox rows of the applied changes only (the copy wrote none)');
is(dq(q{SELECT source_relid FROM cdc.subscription_rel WHERE table_name = 'ra'}), $new_oid, 'recreated: the new relation recorded');
dq(q{SELECT cdc.drop_subscription('s3', drop_slot => true)});

# --- refreshed --------------------------------------------------------------
$t = 'CREATE TABLE rb (id int PRIMARY KEY, n int NOT NULL);';
sq($t . q{INSERT INTO rb SELECT g, 0 FROM generate_series(1, 6) g; CREATE PUBLICATION p3b FOR TABLE rb;});
dq($t . q{SELECT cdc.register_mapping('rb', outbox => true);});
create_subscription($dest, $source, 's3b', ['p3b']);
ok(wait_caught_up($source, $dest, 's3b'), 'refreshed: copied, streaming');
sq(q{DROP TABLE rb});
is(dq(q{SELECT string_agg(table_name || ' ' || action, ',') FROM cdc.refresh_subscription('s3b')}), 'rb removed',
	'refreshed: the dropped table removed');
sq($t . q{INSERT INTO rb VALUES (4, 10), (5, 10), (7, 10); ALTER PUBLICATION p3b ADD TABLE rb;});
is(dq(q{SELECT string_agg(table_name || ' ' || action, ',') FROM cdc.refresh_subscription('s3b')}), 'rb added',
	'refreshed: the new table added');
wait_ready('s3b', 'rb');
ok(wait_caught_up($source, $dest, 's3b'), 'refreshed: copied');
sq(q{INSERT INTO rb VALUES (8, 20); UPDATE rb SET n = 21 WHERE id = 4;});
ok(wait_caught_up($source, $dest, 's3b'), 'refreshed: caught up');
same_id_n_rows($source, $dest, 'rb', 'refreshed');
is(outbox_ops('rb'), '2|2|cu', 'refreshed: one outbox row per change after the copy');
is(status_row($dest, 's3b', 'retry_count'), '0', 'refreshed: no error');
dq(q{SELECT cdc.drop_subscription('s3b', drop_slot => true)});

# --- truncate ---------------------------------------------------------------
$t = 'CREATE TABLE ta (id int PRIMARY KEY, n int NOT NULL); CREATE TABLE tb (id int PRIMARY KEY, n int NOT NULL);';
sq($t . q{INSERT INTO ta SELECT g, 0 FROM generate_series(1, 5) g; INSERT INTO tb SELECT g, 0 FROM generate_series(1, 5) g;
   CREATE PUBLICATION p4 FOR TABLE ta, tb;});
dq($t . q{SELECT cdc.register_mapping('ta', outbox => true);});
create_subscription($dest, $source, 's4', ['p4']);
ok(wait_caught_up($source, $dest, 's4'), 'truncate: copied, streaming');
sq(q{INSERT INTO ta VALUES (6, 1); UPDATE ta SET n = 2 WHERE id = 1});
sq(q{TRUNCATE ta});
ok(wait_caught_up($source, $dest, 's4'), 'truncate: alone');
is(id_n_rows($dest, 'ta'), '0 ', 'truncate: alone, emptied');
sq(q{INSERT INTO ta VALUES (1, 3)});
sq(q{BEGIN; INSERT INTO ta VALUES (2, 4); TRUNCATE ta, tb; INSERT INTO ta VALUES (3, 5); INSERT INTO tb VALUES (3, 5); COMMIT;});
ok(wait_caught_up($source, $dest, 's4'), 'truncate: in a transaction, two tables');
same_id_n_rows($source, $dest, 'ta', 'truncate: in a transaction');
same_id_n_rows($source, $dest, 'tb', 'truncate: in a transaction');
is(outbox_ops('ta'), '7|7|cutcctc', 'truncate: one outbox row per change and per truncate');
is(dq(q{SELECT count(*) FROM cdc.outbox WHERE target = 'tb'::regclass}), '0', 'truncate: none for the table without outbox');
# behind: a backlog of small transactions around truncates, applied in groups
disable_and_wait($source, $dest, 's4');
sq(q{INSERT INTO ta SELECT g, 6 FROM generate_series(10, 29) g});
sq(join('', map { "INSERT INTO ta VALUES ($_, 7); " } 30 .. 39));
sq(q{TRUNCATE ta});
sq(join('', map { "INSERT INTO ta VALUES ($_, 8); UPDATE ta SET n = 9 WHERE id = $_; " } 40 .. 44));
sq(q{TRUNCATE tb, ta});
sq(join('', map { "INSERT INTO ta VALUES ($_, 10); INSERT INTO tb VALUES ($_, 10); " } 45 .. 49));
enable_subscription($dest, 's4');
ok(wait_caught_up($source, $dest, 's4'), 'truncate: behind, caught up');
same_id_n_rows($source, $dest, 'ta', 'truncate: behind');
same_id_n_rows($source, $dest, 'tb', 'truncate: behind');
# 20 + 10 inserts, a truncate, 5 inserts and 5 updates, a truncate, 5 inserts
is(outbox_ops('ta'), '54|54|cutcctc' . ('c' x 30) . 't' . ('cu' x 5) . 't' . ('c' x 5),
	'truncate: behind, one outbox row per change and per truncate, in source order');
# The counters are added to the status row every cdc.status_interval, after
# the commit that the catch-up check sees: read right after it, they could
# still hold only the transactions applied one by one before (5 commits for
# 5 transactions in a CI run).  Wait for the backlog's counts.
ok($dest->poll_query_until('postgres',
		q{SELECT apply_commits <> applied_xacts FROM cdc.subscription_status WHERE name = 's4'}),
	'truncate: behind, applied in groups')
  or diag(status_row($dest, 's4', 'apply_commits, applied_xacts'));

$dest->stop;
$source->stop;
done_testing();

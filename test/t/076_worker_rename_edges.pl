# Edges of the rename check (review h2b; src/pg/worker/pgoutput.cpp,
# relation_skipped; the source's relation OID recorded at the copy,
# cdc.subscription_rel.source_relid).
#
#   back     a table renamed and renamed back inside one source
#            transaction: the worker stops with 55000; the refresh cannot
#            add the intermediate name (the source no longer has it), so
#            cdc.skip_transaction, "the only way a change is ever skipped",
#            must get the worker past it (the check runs only for changes
#            the worker applies, never in a skipped transaction).
#   taken    the destination already has an unrelated table of the new
#            name: the changes are still those of the subscription's
#            table, so the worker stops with 55000 every time (one
#            outcome, also after its retries) and the unrelated table is
#            never written.
#   learnt   a table the worker did not copy (added by
#            cdc.refresh_subscription(copy_data => false): no OID recorded
#            at a copy nor with the slot, TAP 100) is recognised by the
#            OID of the stream's RELATION message: renamed on the source
#            after the worker streamed a change of it, it stops the worker
#            (55000) instead of being skipped as an unknown table, also
#            when the rename happens while the worker is stopped (the OID
#            is saved with the group's commit), and the hint's way out
#            ends equal to the source.
#   skipped  the same (k added by a refresh without a copy), when the
#            source's RELATION message of the table came inside a
#            transaction the worker skipped (cdc.skip_transaction):
#            the source sends it once per connection, so it was not sent
#            again with the next change, nothing was learnt, and a rename
#            was skipped as an unknown table with a WARNING while the
#            subscription showed streaming.  The OID is now learnt at the
#            first applied change.
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

# --- back -------------------------------------------------------------------
sq(q{CREATE TABLE r (id int PRIMARY KEY, n int NOT NULL); INSERT INTO r SELECT g, 0 FROM generate_series(1, 10) g;
     CREATE TABLE o (id int PRIMARY KEY, n int NOT NULL);
     CREATE PUBLICATION p_r FOR TABLE r, o;});
dq(q{CREATE TABLE r (id int PRIMARY KEY, n int NOT NULL); CREATE TABLE o (id int PRIMARY KEY, n int NOT NULL);});
create_subscription($dest, $source, 'sr', ['p_r']);
ok(wait_caught_up($source, $dest, 'sr'), 'back: copied, streaming');
sq(q{BEGIN; UPDATE r SET n = 1 WHERE id = 1; ALTER TABLE r RENAME TO r2; UPDATE r2 SET n = 2 WHERE id = 2;
     ALTER TABLE r2 RENAME TO r; UPDATE r SET n = 3 WHERE id = 3; COMMIT;});
ok(wait_status($dest, 'sr', q{state = 'error' AND last_error LIKE '%now called public.r2%'}),
	'back: the worker stops at the intermediate name (55000)');
my $elsn = status_row($dest, 'sr', 'last_error_lsn');
# the refresh cannot help: the source publishes r again
dq(q{SELECT cdc.refresh_subscription('sr', copy_data => false)});
dq(qq{SELECT cdc.skip_transaction('sr', '$elsn', 'renamed and renamed back; resync r afterwards')});
sq(q{INSERT INTO o VALUES (1, 1)});
ok(wait_caught_up($source, $dest, 'sr'), 'back: cdc.skip_transaction gets the worker past the transaction');
is(dq(q{SELECT count(*) FROM o}), '1', 'back: later transactions applied');
diag('back: ' . status_row($dest, 'sr', 'state, last_error'));
dq(q{SELECT cdc.drop_subscription('sr', drop_slot => true)});

# --- taken ------------------------------------------------------------------
sq(q{CREATE TABLE q (id int PRIMARY KEY, n int NOT NULL); INSERT INTO q SELECT g, 0 FROM generate_series(1, 10) g;
     CREATE PUBLICATION p_q FOR TABLE q;});
dq(q{CREATE TABLE q (id int PRIMARY KEY, n int NOT NULL); CREATE TABLE q2 (id int PRIMARY KEY, n int NOT NULL);});
create_subscription($dest, $source, 'sq', ['p_q']);
ok(wait_caught_up($source, $dest, 'sq'), 'taken: copied, streaming');
sq(q{UPDATE q SET n = 1 WHERE id = 1});
ok(wait_caught_up($source, $dest, 'sq'), 'taken: q seen under its name');
my $offset = -s $dest->logfile;
sq(q{ALTER TABLE q RENAME TO q2});
sq(q{UPDATE q2 SET n = 2 WHERE id = 2});
ok(wait_status($dest, 'sq', q{state = 'error' AND retry_count > 1 AND last_error LIKE '%now called public.q2%'}),
	'taken: the worker stops at the renamed table, again after its retry (55000)');
my $log = substr(slurp_file($dest->logfile), $offset);
unlike($log, qr/changes of public\.q2 are not applied/, 'taken: one outcome, never skipped with the WARNING');
is(dq(q{SELECT count(*) FROM q2}), '0', 'taken: the unrelated q2 untouched');
dq(q{SELECT cdc.drop_subscription('sq', drop_slot => true)});

# --- learnt -----------------------------------------------------------------
sq(q{CREATE TABLE l (id int PRIMARY KEY, n int NOT NULL); CREATE TABLE m (id int PRIMARY KEY, n int NOT NULL);
     INSERT INTO l SELECT g, 0 FROM generate_series(1, 10) g; INSERT INTO m SELECT g, 0 FROM generate_series(1, 10) g;
     CREATE PUBLICATION p_l;});
# the destination starts with the source's rows, as a user who loaded them himself
dq(q{CREATE TABLE l (id int PRIMARY KEY, n int NOT NULL); CREATE TABLE m (id int PRIMARY KEY, n int NOT NULL);
     INSERT INTO l SELECT g, 0 FROM generate_series(1, 10) g; INSERT INTO m SELECT g, 0 FROM generate_series(1, 10) g;});
create_subscription($dest, $source, 'sl', ['p_l'], 'copy_data => false');
ok(wait_caught_up($source, $dest, 'sl'), 'learnt: streaming without a copy');
# added after the slot was made, without a copy: no OID recorded
sq(q{ALTER PUBLICATION p_l ADD TABLE l, m});
is(dq(q{SELECT count(*) FROM cdc.refresh_subscription('sl', copy_data => false)}), '2', 'learnt: l and m added without a copy');
ok(wait_caught_up($source, $dest, 'sl'), 'learnt: streaming after the refresh');
is(dq(q{SELECT count(*) FROM cdc.subscription_rel WHERE source_relid IS NOT NULL}), '0',
	'learnt: no OID recorded without a copy');
sq(q{UPDATE l SET n = 1 WHERE id = 1; UPDATE m SET n = 1 WHERE id = 1});
ok(wait_caught_up($source, $dest, 'sl'), 'learnt: l and m seen under their names');
my $oids = sq(q{SELECT 'l=' || 'l'::regclass::oid || ',m=' || 'm'::regclass::oid});
is(dq(q{SELECT string_agg(table_name || '=' || source_relid, ',' ORDER BY table_name) FROM cdc.subscription_rel
        WHERE schema_name = 'public' AND table_name IN ('l', 'm')}),
	$oids, 'learnt: the OIDs of the stream saved with the commit');
# renamed while streaming
sq(q{ALTER TABLE l RENAME TO l2});
sq(q{UPDATE l2 SET n = 2 WHERE id = 2});
ok(wait_status($dest, 'sl', q{state = 'error' AND last_error LIKE '%source table public.l of the subscription is now called public.l2%'}),
	'learnt: the rename of an uncopied table stops the worker (55000)');
is(dq(q{SELECT n FROM l WHERE id = 2}), '0', 'learnt: nothing of l2 applied');
# the way out of the hint: the destination's table takes the new name, a refresh adds and copies it
dq(q{ALTER TABLE l RENAME TO l2});
dq(q{SELECT cdc.refresh_subscription('sl')});
ok(wait_caught_up($source, $dest, 'sl'), 'learnt: streaming again after the rename and the refresh');
# renamed while the worker is stopped: recognised by the saved OID after its restart
disable_and_wait($source, $dest, 'sl');
is(status_row($dest, 'sl', 'state, worker_pid IS NULL'), 'disabled|t',
	'learnt: a disabled subscription whose worker exited shows no worker_pid (the runbooks wait for it)');
sq(q{ALTER TABLE m RENAME TO m2});
sq(q{UPDATE m2 SET n = 2 WHERE id = 2});
dq(q{SELECT cdc.enable_subscription('sl')});
ok(wait_status($dest, 'sl', q{state = 'error' AND last_error LIKE '%source table public.m of the subscription is now called public.m2%'}),
	'learnt: a rename made while the worker was stopped stops it after its restart');
is(dq(q{SELECT n FROM m WHERE id = 2}), '0', 'learnt: nothing of m2 applied');
dq(q{ALTER TABLE m RENAME TO m2});
dq(q{SELECT cdc.refresh_subscription('sl')});
ok(wait_caught_up($source, $dest, 'sl'), 'learnt: streaming again after the second rename and refresh');
for my $t ('l2', 'm2') {
	is(dq(qq{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM $t}),
		sq(qq{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM $t}), "learnt: $t equals the source");
}
dq(q{SELECT cdc.drop_subscription('sl', drop_slot => true)});

# --- skipped ----------------------------------------------------------------
sq(q{CREATE TABLE k (id int PRIMARY KEY, n int NOT NULL); INSERT INTO k SELECT g, 0 FROM generate_series(1, 10) g;
     CREATE PUBLICATION p_k;});
dq(q{CREATE TABLE k (id int PRIMARY KEY, n int NOT NULL CHECK (n < 100)); INSERT INTO k SELECT g, 0 FROM generate_series(1, 10) g;});
create_subscription($dest, $source, 'sk', ['p_k'], 'copy_data => false');
ok(wait_caught_up($source, $dest, 'sk'), 'skipped: streaming without a copy');
sq(q{ALTER PUBLICATION p_k ADD TABLE k});
is(dq(q{SELECT count(*) FROM cdc.refresh_subscription('sk', copy_data => false)}), '1', 'skipped: k added without a copy');
ok(wait_caught_up($source, $dest, 'sk'), 'skipped: streaming after the refresh');
is(dq(q{SELECT count(*) FROM cdc.subscription_rel WHERE table_name = 'k' AND source_relid IS NULL}), '1',
	'skipped: no OID recorded for k');
# the first change of k in the connection fails on the destination's CHECK
sq(q{UPDATE k SET n = 100 WHERE id = 1});
ok(wait_status($dest, 'sk', q{state = 'error' AND last_error LIKE '%check constraint%'}),
	'skipped: the first change of k stops the worker (23514)');
my $klsn = status_row($dest, 'sk', 'last_error_lsn');
dq(qq{SELECT cdc.skip_transaction('sk', '$klsn', 'violates the destination''s check')});
# the next change of k, in the same connection as the skipped transaction
sq(q{UPDATE k SET n = 1 WHERE id = 2});
ok(wait_caught_up($source, $dest, 'sk'), 'skipped: the worker goes on past the skipped transaction');
is(dq(q{SELECT n FROM k WHERE id = 2}), '1', 'skipped: the next change applied');
is(dq(q{SELECT source_relid FROM cdc.subscription_rel WHERE schema_name = 'public' AND table_name = 'k'}),
	sq(q{SELECT 'k'::regclass::oid}), 'skipped: the OID learnt from the applied change and saved');
sq(q{ALTER TABLE k RENAME TO k2});
sq(q{UPDATE k2 SET n = 2 WHERE id = 3});
ok(wait_status($dest, 'sk', q{state = 'error' AND last_error LIKE '%source table public.k of the subscription is now called public.k2%'}),
	'skipped: the rename stops the worker (55000), not skipped as an unknown table');
is(dq(q{SELECT n FROM k WHERE id = 3}), '0', 'skipped: nothing of k2 applied');
dq(q{SELECT cdc.drop_subscription('sk', drop_slot => true)});

$dest->stop;
$source->stop;
done_testing();

# Review h2 of e62a8de (a published table the subscription does not know
# and no destination table stops the worker with 42P01; a rename seen in
# the stream stops it with 55000): edges of the rename check in
# handle_relation (src/pg/worker/pgoutput.cpp).
#
#   back     a table renamed and renamed back inside one source
#            transaction: the worker stops with 55000; the refresh cannot
#            add the intermediate name (the source no longer has it), so
#            cdc.skip_transaction, "the only way a change is ever skipped",
#            must get the worker past it.  handle_relation raises the 55000
#            for the relation message whatever the transaction's skip state,
#            so the skip never took effect.
#   taken    the destination already has an unrelated table of the new
#            name: docs/worker.md says its changes are skipped with the
#            WARNING until the refresh; the worker first stopped with 55000,
#            and after its own retry skipped them with the subscription
#            streaming (one stream, two outcomes).
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
ok(wait_caught_up($source, $dest, 'sq'), 'taken: streaming, the changes of q2 skipped');
my $log = substr(slurp_file($dest->logfile), $offset);
like($log, qr/changes of public\.q2 are not applied/, 'taken: ... with the WARNING');
unlike($log, qr/now called public\.q2/,
	'taken: one outcome, as docs/worker.md says (not first a 55000, then after the retry the WARNING)');
is(dq(q{SELECT count(*) FROM q2}), '0', 'taken: the unrelated q2 untouched');
dq(q{SELECT cdc.drop_subscription('sq', drop_slot => true)});

$dest->stop;
$source->stop;
done_testing();

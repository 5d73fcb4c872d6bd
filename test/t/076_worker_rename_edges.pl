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

$dest->stop;
$source->stop;
done_testing();

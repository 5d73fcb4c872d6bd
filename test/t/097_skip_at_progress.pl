# Review h2r: cdc.skip_transaction refuses an LSN "at or before" the
# subscription's progress (22023), but the progress is the end LSN of the
# last applied commit, which is the start LSN of the next WAL record: a
# failing transaction whose commit record directly follows the last applied
# one (two commits back to back, here two COMMIT PREPARED) has its commit
# LSN equal to the progress.  The worker does not take it for applied
# (begin_source_xact: final_lsn < progress), it fails, and
# cdc.subscription_status.last_error_lsn shows that LSN, which
# cdc.skip_transaction then refuses: the one way past the poison
# transaction is closed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = PostgreSQL::Test::Cluster->new('source');
$source->init(allows_streaming => 'logical');
$source->append_conf('postgresql.conf', "max_wal_senders = 10\nmax_replication_slots = 10\nmax_prepared_transactions = 10\n");
$source->start;
my $dest = new_dest('dest');
sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { return $dest->safe_psql('postgres', $_[0]); }

sq(q{CREATE TABLE t (id int PRIMARY KEY); CREATE PUBLICATION p FOR TABLE t;});
dq(q{CREATE TABLE t (id int PRIMARY KEY CHECK (id < 1000))});
create_subscription($dest, $source, 'sk', ['p'], 'copy_data => false');
sq(q{INSERT INTO t VALUES (1)});
$dest->poll_query_until('postgres', q{SELECT count(*) = 1 FROM t}) or die 'no start';

# a good transaction, then a failing one whose commit record follows at once
sq(q{BEGIN; INSERT INTO t VALUES (2); PREPARE TRANSACTION 'a';
     BEGIN; INSERT INTO t VALUES (5000); PREPARE TRANSACTION 'b';
     COMMIT PREPARED 'a'; COMMIT PREPARED 'b';
     INSERT INTO t VALUES (3);});
$dest->poll_query_until('postgres', q{SELECT last_error_lsn IS NOT NULL FROM cdc.subscription_status WHERE name = 'sk'})
  or die 'no error';
my $lsn = dq(q{SELECT last_error_lsn FROM cdc.subscription_status WHERE name = 'sk'});
my $progress = dq(q{SELECT pg_replication_origin_progress(cdc._origin_name(subid), false) FROM cdc.subscription WHERE name = 'sk'});
note("failing transaction at $lsn, progress $progress");
my ($ret, $out, $err) = $dest->psql('postgres', "SELECT cdc.skip_transaction('sk', '$lsn', 'poison row')");
is($ret, 0, "the failing transaction's LSN (last_error_lsn $lsn, progress $progress) can be skipped") or diag($err);
ok($dest->poll_query_until('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) = '1,2,3' FROM t}),
	'the skip happens and later changes apply');

$source->stop;
$dest->stop;
done_testing();

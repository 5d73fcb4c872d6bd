# A starting worker flushes the destination's WAL up to what is inserted
# (so that control state it acts on cannot be lost in a crash, docs/worker.md,
# "Control state is durable").  When the last record inserted ended exactly
# at the end of a WAL page, the insert position reads as the start of the
# next page's first record, past its page header, and XLogFlush of it fails:
# "xlog flush request … is not satisfied" — the worker exited, the launcher
# restarted it, and nothing but the server log said why (found by a
# fresh-user run).  Here the destination's WAL is padded with logical
# messages so that the worker's first transaction ends at a page boundary,
# for a range of offsets around the one that hits it, and the worker must
# start and stream every time.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source();
# no full-page images: the WAL the worker writes at start has the same size every time
my $dest = new_dest('dest', "full_page_writes = off\n");
sub dq { return $dest->safe_psql('postgres', $_[0]); }

$source->safe_psql('postgres', 'CREATE TABLE pb (id int PRIMARY KEY, v int); CREATE PUBLICATION pub_pb FOR TABLE pb;');
dq('CREATE TABLE pb (id int PRIMARY KEY, v int)');
create_subscription($dest, $source, 'pb', ['pub_pb']);
ok(wait_caught_up($source, $dest, 'pb'), 'streaming');

# Pads the WAL until the insert position's offset in its page is $target.
my $pad = q{
DO $$
DECLARE
  target int := %d;
  o int; need int; i int := 0;
BEGIN
  LOOP
    i := i + 1;
    o := ((pg_current_wal_insert_lsn() - '0/0'::pg_lsn) %% 8192)::int;
    EXIT WHEN o = target OR i > 10;
    need := target - o;
    IF need < 64 THEN need := need + 8192 - 24; END IF;
    PERFORM pg_logical_emit_message(false, 'pad', repeat('x', CASE WHEN need - 52 > 255 THEN need - 55 ELSE need - 52 END));
  END LOOP;
END $$;
};

my $failures = 0;
my $n = 0;
for (my $target = 7680; $target <= 7824; $target += 8) {
	disable_and_wait($source, $dest, 'pb');
	my $off = -s $dest->logfile;
	dq(sprintf($pad, $target) . "SELECT cdc.enable_subscription('pb');");
	$n++;
	$source->safe_psql('postgres', "INSERT INTO pb VALUES ($n, $target)");
	if (!wait_caught_up($source, $dest, 'pb')) {
		$failures++;
		next;
	}
	my $log = slurp_file($dest->logfile, $off);
	if ($log =~ /(xlog flush request [^\n]*)/) {
		diag("offset $target: $1");
		$failures++;
	}
}
is($failures, 0, "the worker started cleanly after WAL padded to $n offsets around a page end");
is(dq('SELECT count(*) FROM pb'), $n, 'every row streamed');
compare_table($source, $dest, 'SELECT * FROM pb ORDER BY id', 'destination equals source');

done_testing();

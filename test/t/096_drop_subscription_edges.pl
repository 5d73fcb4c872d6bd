# Review h2r: edges of cdc.drop_subscription(drop_slot => true) and of a
# subscription whose slot is gone.
#
#   lost        a copy_data => false subscription whose recorded slot
#               (cdc.subscription.slot_created_lsn) is gone on the source:
#               its worker made a new slot at once (prepare_slot) and the
#               source's changes between the two slots were lost without a
#               word; now it stops with 55000 naming the recorded point.
#   progress    a drop_subscription(drop_slot => true) ended by
#               statement_timeout while a client holds the slot (TAP 084's
#               "timeout") kept the subscription but cleared its replication
#               origin's progress: pg_replication_origin_drop clears the
#               origin's state in shared memory at once (not
#               transactionally), and it ran before the slot's drop, so the
#               worker then streamed "from 0/0".  Now the origin is dropped
#               after the slot.
# Not here: drop_subscription(drop_slot => true) in a DO block that then
# fails, or in a procedure that rolls back, dropped the slot while the
# subscription stayed (the open edge this file named); the slot is now
# dropped when the transaction commits (TAP 099_drop_slot_at_commit).
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

my $t = 'CREATE TABLE tk (id int PRIMARY KEY, n int NOT NULL);';
sq($t . 'CREATE PUBLICATION pk FOR TABLE tk;');
dq($t);

# --- lost: the recorded slot is gone, the worker must not start a new one ----
create_subscription($dest, $source, 'sc', ['pk'], 'copy_data => false, enabled => false');
sq(q{INSERT INTO tk VALUES (1, 1)});   # after the subscription's slot: the subscription's
sq(q{SELECT pg_drop_replication_slot('sc')});  # any way the slot goes (an operator, a source restored without it)
sq(q{INSERT INTO tk VALUES (2, 2)});
dq(q{SELECT cdc.enable_subscription('sc')});
ok(wait_status($dest, 'sc', q{state = 'error' AND last_error LIKE '%replication slot "sc" created at % is missing on the source%'}),
	'lost: the worker stops (55000) instead of making a new slot');
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sc'}), '0', 'lost: no new slot was made');
is(dq(q{SELECT count(*) FROM tk}), '0', 'lost: nothing applied');
dq(q{SELECT cdc.drop_subscription('sc')});

# --- progress -----------------------------------------------------------------
sq(q{CREATE TABLE tp (id int PRIMARY KEY); CREATE PUBLICATION pp FOR TABLE tp;});
dq(q{CREATE TABLE tp (id int PRIMARY KEY)});
create_subscription($dest, $source, 'sd', ['pp'], 'copy_data => false');
sq(q{INSERT INTO tp VALUES (1)});
$dest->poll_query_until('postgres', q{SELECT count(*) = 1 FROM tp});
disable_and_wait($source, $dest, 'sd');
my $before = dq(q{SELECT pg_replication_origin_progress(cdc._origin_name(subid), false) FROM cdc.subscription WHERE name = 'sd'});
my $recv = hold_slot($source, 'sd', 'pp');
ok($recv, 'progress: another client holds the slot');
my ($ret, $out, $err) = $dest->psql('postgres',
	q{SET statement_timeout = '1s'; SELECT cdc.drop_subscription('sd', drop_slot => true)});
like($err, qr/statement timeout/, 'progress: the drop is ended by statement_timeout');
release_slot($recv);
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name = 'sd'}), '1', 'progress: the subscription stays');
is(dq(q{SELECT coalesce(pg_replication_origin_progress(cdc._origin_name(subid), false)::text, 'NULL')
        FROM cdc.subscription WHERE name = 'sd'}),
	$before, "progress: the origin keeps its progress ($before)");

$source->stop;
$dest->stop;
done_testing();

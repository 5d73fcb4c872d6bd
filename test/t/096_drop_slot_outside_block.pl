# Review h2r: cdc.drop_subscription(drop_slot => true) refuses transaction
# blocks (25001) because the slot's drop cannot roll back, but
# cdc._prevent_transaction_block passes isTopLevel = true always, so a DO
# block or a procedure that calls it is not refused (DROP SUBSCRIPTION is:
# "cannot be executed from a function").  When the block then fails, or the
# procedure rolls back, the slot is gone on the source and the subscription
# stays.  Its worker then makes a new slot at once (prepare_slot: a
# copy_data => false subscription with no progress and no slot), although
# cdc.subscription.slot_created_lsn records the slot the subscription was
# created with: the source's changes between the two slots are lost without
# a word.
#
#   do_block    DO block: drop_subscription(drop_slot) then RAISE
#   procedure   CALL of a procedure that drops and then ROLLBACKs
#   lost        the worker of such a subscription (slot recorded, slot gone)
#               must not silently start from a new slot
#   progress    a drop_subscription(drop_slot => true) ended by
#               statement_timeout while a client holds the slot (TAP 084's
#               "timeout") keeps the subscription, but its replication
#               origin's progress is gone: pg_replication_origin_drop clears
#               the origin's state in shared memory at once (not
#               transactionally), before the slot's drop, and the worker
#               then streams "from 0/0" (its continuity checks have nothing
#               to compare with, a transaction before the old progress is not
#               recognised as applied)
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

# --- do_block ---------------------------------------------------------------
create_subscription($dest, $source, 'sa', ['pk'], 'copy_data => false, enabled => false');
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sa'}), '1', 'do_block: the slot exists');
my ($ret, $out, $err) = $dest->psql('postgres',
	q{DO $$ BEGIN PERFORM cdc.drop_subscription('sa', drop_slot => true); RAISE EXCEPTION 'later failure'; END $$});
isnt($ret, 0, 'do_block: the block fails');
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name = 'sa'}) . '/'
	. sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sa'}),
	'1/1', 'do_block: subscription and slot both stay (or the call is refused)');

# --- procedure --------------------------------------------------------------
create_subscription($dest, $source, 'sb', ['pk'], 'copy_data => false, enabled => false');
dq(q{CREATE PROCEDURE drop_then_rollback() LANGUAGE plpgsql AS $$
     BEGIN PERFORM cdc.drop_subscription('sb', drop_slot => true); ROLLBACK; END $$});
$dest->psql('postgres', 'CALL drop_then_rollback()');
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name = 'sb'}) . '/'
	. sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sb'}),
	'1/1', 'procedure: subscription and slot both stay (or the call is refused)');

# --- lost: the recorded slot is gone, the worker must not start a new one ----
create_subscription($dest, $source, 'sc', ['pk'], 'copy_data => false, enabled => false');
sq(q{INSERT INTO tk VALUES (1, 1)});   # after the subscription's slot: the subscription's
sq(q{SELECT pg_drop_replication_slot('sc')});  # any way the slot goes (the holes above, an operator)
sq(q{INSERT INTO tk VALUES (2, 2)});
dq(q{SELECT cdc.enable_subscription('sc')});
# give the worker the time to (wrongly) make a new slot and stream
$dest->poll_query_until('postgres',
	q{SELECT state IN ('streaming', 'error') OR last_error IS NOT NULL FROM cdc.subscription_status WHERE name = 'sc'});
sq(q{INSERT INTO tk VALUES (3, 3)});
sleep 3;
my $rows = dq(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM tk});
my $state = dq(q{SELECT state FROM cdc.subscription_status WHERE name = 'sc'});
ok(!($state eq 'streaming' && ($rows // '') !~ /\b1\b/),
	"lost: the worker does not stream from a new slot past the changes of the recorded one (state $state, rows applied: "
	. ($rows // '') . ')');

# --- progress -----------------------------------------------------------------
sq(q{CREATE TABLE tp (id int PRIMARY KEY); CREATE PUBLICATION pp FOR TABLE tp;});
dq(q{CREATE TABLE tp (id int PRIMARY KEY)});
create_subscription($dest, $source, 'sd', ['pp'], 'copy_data => false');
sq(q{INSERT INTO tp VALUES (1)});
$dest->poll_query_until('postgres', q{SELECT count(*) = 1 FROM tp});
disable_and_wait($source, $dest, 'sd');
my $before = dq(q{SELECT pg_replication_origin_progress(cdc._origin_name(subid), false) FROM cdc.subscription WHERE name = 'sd'});
my $recv = IPC::Run::start(
	[ $source->installed_command('pg_recvlogical'), '-d', $source->connstr('postgres'), '--slot', 'sd', '--start',
	  '-o', 'proto_version=1', '-o', 'publication_names=pp', '-f', '/dev/null', '-s', '1' ]);
ok($source->poll_query_until('postgres', q{SELECT active FROM pg_replication_slots WHERE slot_name = 'sd'}),
	'progress: another client holds the slot');
($ret, $out, $err) = $dest->psql('postgres',
	q{SET statement_timeout = '1s'; SELECT cdc.drop_subscription('sd', drop_slot => true)});
like($err, qr/statement timeout/, 'progress: the drop is ended by statement_timeout');
$recv->kill_kill;
$recv->finish;
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name = 'sd'}), '1', 'progress: the subscription stays');
is(dq(q{SELECT coalesce(pg_replication_origin_progress(cdc._origin_name(subid), false)::text, 'NULL')
        FROM cdc.subscription WHERE name = 'sd'}),
	$before, "progress: the origin keeps its progress ($before)");

$source->stop;
$dest->stop;
done_testing();

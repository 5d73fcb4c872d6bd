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

$source->stop;
$dest->stop;
done_testing();

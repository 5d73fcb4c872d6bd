# Tables subscribed with copy_data => false (review h2), as a new user
# follows the documented ways out.
#
#   preloaded  the destination table is loaded by hand with the source's
#              rows, subscribed with copy_data => false; after a change of
#              it is applied, the source drops it, creates it again with
#              other rows and adds it back to the publication.  The worker
#              stops with 55000; its HINT said that the copy "deletes the
#              rows the new table does not have", but the preloaded rows
#              carry no entity record and a copy leaves them.  The hint
#              now says so and to TRUNCATE first; the test follows it to
#              the source's rows.
#   disabled   created with copy_data => false and enabled => false: the
#              slot was only created when the worker first started, so
#              the changes the source made between create_subscription
#              and cdc.enable_subscription were never sent (PostgreSQL's
#              CREATE SUBSCRIPTION ... WITH (copy_data = false, enabled =
#              false) creates the slot at once).  cdc.create_subscription
#              now creates it too, and the worker adopts it.
#   block      the slot cannot roll back, so it is made when the creating
#              transaction commits (TAP 083): inside a transaction block
#              the slot exists after COMMIT, none after ROLLBACK (it was
#              refused with 25001); a slot name the source already has is
#              42710 and no subscription stays.
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

# --- preloaded --------------------------------------------------------------
my $t = 'CREATE TABLE te (id int PRIMARY KEY, n int NOT NULL); INSERT INTO te SELECT g, g FROM generate_series(1, 10) g;';
sq($t . 'CREATE PUBLICATION pe FOR TABLE te;');
dq($t);
create_subscription($dest, $source, 'se', ['pe'], 'copy_data => false');
ok(wait_caught_up($source, $dest, 'se'), 'preloaded: streaming');
sq(q{UPDATE te SET n = n + 1 WHERE id = 3});
ok(wait_caught_up($source, $dest, 'se'), 'preloaded: a change applied (the source OID learnt)');
sq(q{DROP TABLE te; CREATE TABLE te (id int PRIMARY KEY, n int NOT NULL);
     INSERT INTO te SELECT g, g * 5 FROM generate_series(2, 8) g; ALTER PUBLICATION pe ADD TABLE te;
     UPDATE te SET n = n + 1 WHERE id = 3;});
ok(wait_status($dest, 'se', q{state = 'error' AND last_error LIKE '%another relation%HINT%cdc.resync_table%TRUNCATE the destination table first%'}),
	'preloaded: the worker stops (55000) with the resync_table hint, which says to truncate rows loaded otherwise');
dq(q{TRUNCATE te; SELECT cdc.resync_table('se', 'te')});
$dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE subscription = 'se' AND table_name = 'te'});
ok(wait_caught_up($source, $dest, 'se'), 'preloaded: streams again after cdc.resync_table');
same_id_n_rows($source, $dest, 'te', 'preloaded: the hint\'s way out');
dq(q{SELECT cdc.drop_subscription('se', drop_slot => true)});

# --- disabled ---------------------------------------------------------------
$t = 'CREATE TABLE tg (id int PRIMARY KEY, n int NOT NULL); INSERT INTO tg SELECT g, g FROM generate_series(1, 5) g;';
sq($t . 'CREATE PUBLICATION pg FOR TABLE tg;');
dq($t);
create_subscription($dest, $source, 'sg', ['pg'], 'copy_data => false, enabled => false');
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sg'}), '1', 'disabled: the slot exists from the creation');
is(dq(q{SELECT slot_created_lsn IS NOT NULL AND NOT slot_ready FROM cdc.subscription WHERE name = 'sg'}), 't',
	'disabled: its consistent point recorded');
sq(q{UPDATE tg SET n = 100 WHERE id = 1});
dq(q{SELECT cdc.enable_subscription('sg')});
sq(q{UPDATE tg SET n = 200 WHERE id = 2});
ok(wait_caught_up($source, $dest, 'sg'), 'disabled: streaming after enable');
same_id_n_rows($source, $dest, 'tg', 'disabled: changes made between create and enable');
is(dq(q{SELECT slot_ready FROM cdc.subscription WHERE name = 'sg'}), 't', 'disabled: the worker adopted the slot');
dq(q{SELECT cdc.drop_subscription('sg', drop_slot => true)});

# --- block ------------------------------------------------------------------
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
my ($rc, $out, $err) = $dest->psql('postgres',
	qq{BEGIN; SELECT cdc.create_subscription('sb', '$conn', ARRAY['pg'], copy_data => false, enabled => false); ROLLBACK;});
is($err, '', 'block: accepted inside a transaction block');
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sb'}), '0', 'block: no slot after ROLLBACK');
($rc, $out, $err) = $dest->psql('postgres',
	qq{BEGIN; SELECT cdc.create_subscription('sb', '$conn', ARRAY['pg'], copy_data => false, enabled => false); COMMIT;});
is($err, '', 'block: committed');
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sb'}), '1', 'block: the slot made at COMMIT');
dq(q{SELECT cdc.drop_subscription('sb', drop_slot => true)});
sq(q{SELECT pg_create_logical_replication_slot('taken', 'pgoutput')});
($rc, $out, $err) = $dest->psql('postgres',
	qq{SELECT cdc.create_subscription('st', '$conn', ARRAY['pg'], slot_name => 'taken', copy_data => false)});
like($err, qr/could not create slot "taken" on the source: .*already exists/, 'block: a slot name the source has is refused');
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name = 'st'}), '0', 'block: no subscription stays');
sq(q{SELECT pg_drop_replication_slot('taken')});

$dest->stop;
$source->stop;
done_testing();

# A crash of the destination between the source's CREATE_REPLICATION_SLOT
# and the worker's record of the slot's consistent point
# (cdc.subscription.slot_created_lsn).  The slot existed with no record of
# it, so every later start of the worker refused it as "exists on the
# source and was not created by this subscription" (42710), and the
# subscription stayed stuck until an operator dropped the slot by hand
# (found as a failure of TAP 040 "ct" under load: its crash came 12 ms after
# the worker had created the slot).  Now the worker durably records its
# intent (0/0) before it creates a slot, and a slot that exists, is not in
# use and has that intent recorded is taken for its own unfinished attempt:
# with a copy it is dropped and made again, and the copy starts over.
# The fault point pause_after:slot_created holds the worker exactly there.
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

sq(q{CREATE TABLE sc (id int PRIMARY KEY, n int NOT NULL); INSERT INTO sc SELECT g, g FROM generate_series(1, 5) g;
     CREATE PUBLICATION p_sc FOR TABLE sc;});
dq(q{CREATE TABLE sc (id int PRIMARY KEY, n int NOT NULL)});
set_fault($dest, 'pause_after:slot_created');
my $off = -s $dest->logfile;
create_subscription($dest, $source, 'sc', ['p_sc']);
ok($dest->wait_for_log(qr/fault point pause_after:slot_created reached/, $off),
	'the worker created the slot and stopped before recording it');
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sc'}), '1', 'the slot exists on the source');
is(dq(q{SELECT slot_created_lsn FROM cdc.subscription WHERE name = 'sc'}), '0/0',
	'what the subscription records: the intent to create it');
dq('ALTER SYSTEM RESET cdc.debug_fault');
$dest->stop('immediate');
$dest->start;
sq(q{INSERT INTO sc VALUES (6, 6); UPDATE sc SET n = 10 WHERE id = 1});
ok(wait_caught_up($source, $dest, 'sc'), 'after the crash the worker takes the slot for its own, copies and streams');
is(dq(q{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM sc}),
	sq(q{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM sc}), 'the destination equals the source');
isnt(dq(q{SELECT slot_created_lsn FROM cdc.subscription WHERE name = 'sc'}), '0/0', 'the new slot is recorded');
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sc'}), '1', 'one slot on the source');
dq(q{SELECT cdc.drop_subscription('sc', drop_slot => true)});
is(sq(q{SELECT count(*) FROM pg_replication_slots}), '0', 'no slot left');

$dest->stop;
$source->stop;
done_testing();

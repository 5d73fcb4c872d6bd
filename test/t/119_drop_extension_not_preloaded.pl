# DROP EXTENSION cdc_apply while the database has subscriptions is refused
# (2BP01) also when cdc_apply is not in shared_preload_libraries.  The
# guard of TAP 111 was the module's ProcessUtility hook, installed only when
# the library is preloaded: on a server without it (no worker runs, but
# cdc.create_subscription(copy_data => false) makes the slot on the source
# at commit) a session that had never loaded the library dropped the
# extension with its subscriptions, and the slot stayed on the source,
# holding WAL for ever (review h1).  The guard is now also the event
# trigger cdc_guard_drop_extension (ddl_command_start, ENABLE ALWAYS),
# whose C function loads the library when it fires.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
$source->safe_psql('postgres', 'CREATE TABLE t (id int PRIMARY KEY); CREATE PUBLICATION p FOR TABLE t');
sub slots { return $source->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 's1'}); }

# A destination without shared_preload_libraries.
my $dest = PostgreSQL::Test::Cluster->new('dest');
$dest->init;
$dest->start;
sub dq { return $dest->safe_psql('postgres', $_[0]); }
is(dq('SHOW shared_preload_libraries'), '', 'cdc_apply is not preloaded');
dq('CREATE EXTENSION cdc_apply');
create_subscription($dest, $source, 's1', ['p'], 'copy_data => false, enabled => false');
is(slots(), '1', 'the subscription made its slot on the source at commit');

# A new session, which has not loaded the library, drops the extension.
my ($ret, $out, $err) = $dest->psql('postgres', 'DROP EXTENSION cdc_apply CASCADE');
isnt($ret, 0, 'DROP EXTENSION with a subscription fails without preload');
like($err, qr/ERROR:  cannot drop extension cdc_apply while it has subscriptions/, 'saying why');
like($err, qr/DETAIL:  Subscription s1 would leave its replication slot on the source/, 'naming the subscription');
is(dq(q{SELECT count(*) FROM pg_extension WHERE extname = 'cdc_apply'}), '1', 'the extension stays');
is(dq(q{SELECT count(*) FROM cdc.subscription}), '1', 'with its subscription');
is(slots(), '1', 'and the slot');

# Named among others, and under session_replication_role = replica.
($ret, $out, $err) = $dest->psql('postgres', q{SET session_replication_role = replica; DROP EXTENSION IF EXISTS plpgsql, cdc_apply CASCADE});
like($err, qr/cannot drop extension cdc_apply while it has subscriptions/, 'named among others, as replica');
is(dq(q{SELECT count(*) FROM pg_extension WHERE extname IN ('cdc_apply', 'plpgsql')}), '2', 'nothing was dropped');

# Another extension's drop is not in the way.
dq('CREATE EXTENSION IF NOT EXISTS pg_stat_statements; DROP EXTENSION pg_stat_statements');

# The subscription dropped first, in the same transaction: the extension
# goes, and the slot with it.
dq(q{BEGIN;
     SELECT cdc.drop_subscription('s1', drop_slot => true);
     DROP EXTENSION cdc_apply CASCADE;
     COMMIT});
is(dq(q{SELECT count(*) FROM pg_extension WHERE extname = 'cdc_apply'}), '0', 'dropped after its subscription');
is(slots(), '0', 'its slot dropped');

# Without subscriptions nothing is in the way.
dq('CREATE EXTENSION cdc_apply');
dq('DROP EXTENSION cdc_apply');
is(dq(q{SELECT count(*) FROM pg_extension WHERE extname = 'cdc_apply'}), '0', 'dropped without subscriptions');

$dest->stop;
$source->stop;
done_testing();

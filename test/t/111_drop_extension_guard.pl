# DROP EXTENSION cdc_apply while the database has subscriptions is refused
# (2BP01), as DROP DATABASE is: the drop took
# the subscriptions' rows and left each one's replication slot on its
# source (holding WAL for ever) and its replication origin here, silently
# (review h4).  Subscriptions dropped first, even in the same transaction,
# let it go ahead.  The guard is the module's ProcessUtility hook, installed
# when cdc_apply is in shared_preload_libraries (as the worker needs).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $dest = new_dest('dest');
sub dq { return $dest->safe_psql('postgres', $_[0]); }

dq(q{SELECT cdc.create_subscription('s1', 'host=/nonexistent dbname=x', ARRAY['p'], create_slot => false, enabled => false);
     SELECT cdc.create_subscription('s2', 'host=/nonexistent dbname=x', ARRAY['p'], create_slot => false, enabled => false)});
my ($ret, $out, $err) = $dest->psql('postgres', 'DROP EXTENSION cdc_apply CASCADE');
isnt($ret, 0, 'DROP EXTENSION with subscriptions fails');
like($err, qr/ERROR:  cannot drop extension cdc_apply while it has subscriptions/, 'saying why');
like($err, qr/DETAIL:  Subscriptions s1, s2 would leave their replication slots on the sources and their replication origins behind/,
	'naming the subscriptions');
like($err, qr/HINT:  Drop them first: cdc\.drop_subscription\(name, drop_slot => true\)/, 'and what to do');
is(dq(q{SELECT count(*) FROM cdc.subscription}), '2', 'the subscriptions stay');
is(dq(q{SELECT count(*) FROM pg_replication_origin WHERE roname LIKE 'cdc\_%'}), '2', 'and their origins');

# IF EXISTS, and the extension named among others, are guarded too.
($ret, $out, $err) = $dest->psql('postgres', 'DROP EXTENSION IF EXISTS plpgsql, cdc_apply CASCADE');
like($err, qr/cannot drop extension cdc_apply while it has subscriptions/, 'named among others');
is(dq(q{SELECT count(*) FROM pg_extension WHERE extname IN ('cdc_apply', 'plpgsql')}), '2', 'nothing was dropped');

# Dropped first in the same transaction: the extension goes, and so do the origins.
dq(q{BEGIN;
     SELECT cdc.drop_subscription(name) FROM cdc.subscription ORDER BY name;
     DROP EXTENSION cdc_apply CASCADE;
     COMMIT});
is(dq(q{SELECT count(*) FROM pg_extension WHERE extname = 'cdc_apply'}), '0', 'dropped after its subscriptions');
is(dq(q{SELECT count(*) FROM pg_replication_origin WHERE roname LIKE 'cdc\_%'}), '0', 'with their origins');

# Without subscriptions nothing is in the way.
dq('CREATE EXTENSION cdc_apply');
dq('DROP EXTENSION cdc_apply');
is(dq(q{SELECT count(*) FROM pg_extension WHERE extname = 'cdc_apply'}), '0', 'dropped without subscriptions');

# A cdc.prune() running when the drop comes (the launcher runs one right
# after CREATE EXTENSION): the drop waits for it before it locks any of the
# extension's tables, instead of taking some in ACCESS EXCLUSIVE mode and
# waiting for one the prune holds while the prune waits for one of its own
# (a CI run failed here with "deadlock detected").  The prune's transaction
# reads every table of the extension after the drop has started.
dq('CREATE EXTENSION cdc_apply');
my $pruner = $dest->background_psql('postgres');
$pruner->query_safe('BEGIN');
$pruner->query_safe('SELECT count(*) FROM cdc.prune()');
my $dropper = $dest->background_psql('postgres', on_error_stop => 0);
$dropper->query_until(qr/dropping/, "\\echo dropping\nDROP EXTENSION cdc_apply;\n");
ok($dest->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE 'DROP EXTENSION cdc_apply%' AND wait_event_type = 'Lock'}),
	'the drop waits for the running prune');
$pruner->query_safe(q{DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT c.oid::regclass AS t FROM pg_class c WHERE c.relnamespace = 'cdc'::regnamespace AND c.relkind = 'r' ORDER BY c.oid LOOP
    EXECUTE format('SELECT count(*) FROM %s', r.t);
  END LOOP;
END $$});
pass('the prune reads every table of the extension while the drop waits');
$pruner->query_safe('COMMIT');
$pruner->quit;
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_extension WHERE extname = 'cdc_apply'}),
	'the drop goes ahead once the prune has committed');
$dropper->quit;
unlike(slurp_file($dest->logfile), qr/deadlock detected/, 'no deadlock');

$dest->stop;
done_testing();

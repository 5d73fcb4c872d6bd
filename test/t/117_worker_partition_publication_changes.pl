# Partition changes on the source that alter what a publication publishes
# without a sign in the stream (review h2): the documented outcome
# (docs/worker.md, "Limits of this version"; PostgreSQL 15's own subscriber
# behaves the same) and its repair, pinned.
#
#   toggle   a partitioned table published per leaf (the default), then
#            ALTER PUBLICATION ... SET (publish_via_partition_root = true)
#            while the worker streams: pgoutput sends the changes under the
#            root's name, which is not part of the subscription; they are
#            skipped with the WARNING (no error, state streaming) until
#            cdc.refresh_subscription, which adds the root (copied: the
#            destination equals the source again, no outbox row for the
#            copy) and removes the leaves; later changes apply through the
#            root with one outbox row each.
#   attach   ATTACH PARTITION of a table holding rows, with the root
#            published: its existing rows never arrive (only its later
#            changes), the rows of a DETACHed partition stay;
#            cdc.resync_table of the root repairs both.
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

my $ddl = q{CREATE TABLE pr (id int PRIMARY KEY, n int NOT NULL) PARTITION BY RANGE (id);
	CREATE TABLE pr1 PARTITION OF pr FOR VALUES FROM (0) TO (100);
	CREATE TABLE pr2 PARTITION OF pr FOR VALUES FROM (100) TO (200);};
sq($ddl . q{INSERT INTO pr VALUES (1, 0), (101, 0); CREATE PUBLICATION pp FOR TABLE pr;});
dq($ddl . q{CREATE TABLE pr3 PARTITION OF pr FOR VALUES FROM (200) TO (300);
	SELECT cdc.register_mapping('pr', outbox => true);});
# Only the root is mapped (with an outbox): cdc.register_mapping refuses a
# partition of a mapped table (one row, two entity records: sql/partition_tree_mapping.sql).
# The leaves' changes sent before the toggle apply to the same-named leaves
# without a mapping, so without outbox rows.

# --- toggle ----------------------------------------------------------------------
create_subscription($dest, $source, 's', ['pp']);
ok(wait_caught_up($source, $dest, 's'), 'toggle: leaves copied, streaming');
is(dq(q{SELECT string_agg(table_name, ',' ORDER BY table_name) FROM cdc.subscription_tables}), 'pr1,pr2',
	'toggle: the leaves are the subscription\'s tables');
sq(q{INSERT INTO pr VALUES (2, 1)});
ok(wait_caught_up($source, $dest, 's'), 'toggle: a change of a leaf applied');

sq(q{ALTER PUBLICATION pp SET (publish_via_partition_root = true)});
sq(q{INSERT INTO pr VALUES (3, 2); UPDATE pr SET n = 2 WHERE id = 101});
ok(wait_caught_up($source, $dest, 's'), 'toggle: the stream goes on');
is(id_n_rows($dest, 'pr'), '3 1:0,2:1,101:0', 'toggle: the changes sent under the root\'s name are not applied');
is(status_row($dest, 's', q{state || ' ' || retry_count}), 'streaming 0', 'toggle: no error (the WARNING only)');
ok($dest->wait_for_log(qr/changes of public\.pr are not applied: the table is not part of subscription "s"/),
	'toggle: the WARNING names the root');

is(dq(q{SELECT string_agg(table_name || ':' || action, ',' ORDER BY table_name) FROM cdc.refresh_subscription('s')}),
	'pr:added,pr1:removed,pr2:removed', 'toggle: the refresh adds the root and removes the leaves');
$dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE table_name = 'pr'});
ok(wait_caught_up($source, $dest, 's'), 'toggle: the root copied');
same_id_n_rows($source, $dest, 'pr', 'toggle: after the refresh');
sq(q{INSERT INTO pr VALUES (4, 3); UPDATE pr SET n = 3 WHERE id = 1});
ok(wait_caught_up($source, $dest, 's'), 'toggle: later changes applied through the root');
same_id_n_rows($source, $dest, 'pr', 'toggle: later changes');
is(dq(q{SELECT string_agg(op || (entity_key->>'id'), ',' ORDER BY id) FROM cdc.outbox}), 'c4,u1',
	'toggle: one outbox row per change applied through the root\'s mapping, none for the skipped ones or the copy');

# --- attach ------------------------------------------------------------------------
sq(q{CREATE TABLE pr3 (id int PRIMARY KEY, n int NOT NULL); INSERT INTO pr3 VALUES (250, 4);
	ALTER TABLE pr ATTACH PARTITION pr3 FOR VALUES FROM (200) TO (300);
	INSERT INTO pr VALUES (260, 4)});
sq(q{ALTER TABLE pr DETACH PARTITION pr2; INSERT INTO pr VALUES (5, 5)});
ok(wait_caught_up($source, $dest, 's'), 'attach: caught up');
is(id_n_rows($dest, 'pr'), '7 1:3,2:1,3:2,4:3,5:5,101:2,260:4',
	'attach: the attached partition\'s rows never arrive, the detached one\'s stay');
is(id_n_rows($source, 'pr'), '7 1:3,2:1,3:2,4:3,5:5,250:4,260:4', 'attach: the source');
is(status_row($dest, 's', 'retry_count'), '0', 'attach: no error');
dq(q{SELECT cdc.resync_table('s', 'pr')});
$dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE table_name = 'pr'});
ok(wait_caught_up($source, $dest, 's'), 'attach: resynced');
same_id_n_rows($source, $dest, 'pr', 'attach: cdc.resync_table repairs both');
is(dq(q{SELECT string_agg(op || (entity_key->>'id'), ',' ORDER BY id) FROM cdc.outbox}), 'c4,u1,c260,c5',
	'attach: the resync wrote no outbox row (c260, c5 streamed)');

dq(q{SELECT cdc.drop_subscription('s', drop_slot => true)});
$dest->stop;
$source->stop;
done_testing();

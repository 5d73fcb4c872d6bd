# A publication that does not publish deletes (CREATE PUBLICATION ... WITH
# (publish = 'insert') or 'insert, update'): the classic archive, where the
# destination keeps every row the source ever had (review h2).  The stream
# never deletes there.  A later copy of the table (cdc.refresh_subscription
# after the table went out of the publication and back, cdc.resync_table,
# the repair after cdc.accept_gap) deleted every row of the destination the
# source no longer had ("Rows the source no longer has", docs/worker.md):
# the archived rows were gone, tombstoned, and could not come back.  A copy
# now deletes only what the stream would delete: when one of the
# publications of the table publishes deletes, or publishes updates with a
# row filter (pgoutput sends an update that leaves the filter as a
# delete, whatever the publish option says).
#
#   insert     publish = 'insert': copy, stream (the update and the delete
#              not sent), out and back in with a delete while out, refresh:
#              the deleted rows stay, the copy refreshes the others; then
#              cdc.resync_table: the same
#   insupd     publish = 'insert, update' without filter: the same
#   filter     publish = 'insert, update' with a row filter: an update
#              leaving the filter while the table was out is deleted by the
#              copy, as the stream deletes it; the copy cannot tell it from
#              a plain delete (the source has neither row in the filter), so
#              it deletes those too, as before (docs/worker.md)
#   default    the default publish: the copy deletes the row deleted while
#              out (docs/worker.md; test/t/035_worker_tables.pl)
#   audit      cdc.audit reports no row the source deleted of the
#              insert-only table as 'extra', and cdc.resync by keys keeps
#              them (outcome 'kept'), while a row changed by hand is still
#              found and repaired
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

my @tables = qw(a_ins a_iu a_flt a_def);
for my $t (@tables) {
	my $ddl = "CREATE TABLE $t (id int PRIMARY KEY, n int NOT NULL);";
	sq($ddl . "INSERT INTO $t SELECT g, 0 FROM generate_series(1, 5) g;");
	dq($ddl . "SELECT cdc.register_mapping('$t', outbox => true);");
}
# a row filter on a column that is not the key needs it in the replica identity
sq(q{ALTER TABLE a_flt REPLICA IDENTITY FULL});
sq(q{CREATE PUBLICATION p_ins FOR TABLE a_ins WITH (publish = 'insert');
	CREATE PUBLICATION p_iu FOR TABLE a_iu WITH (publish = 'insert, update');
	CREATE PUBLICATION p_flt FOR TABLE a_flt WHERE (n < 10) WITH (publish = 'insert, update');
	CREATE PUBLICATION p_def FOR TABLE a_def});
create_subscription($dest, $source, 's', [qw(p_ins p_iu p_flt p_def)]);
ok(wait_caught_up($source, $dest, 's'), 'copied and streaming');

# the stream: what each publication sends
for my $t (@tables) {
	sq("INSERT INTO $t VALUES (6, 1); UPDATE $t SET n = 2 WHERE id = 1; DELETE FROM $t WHERE id = 2;");
}
ok(wait_caught_up($source, $dest, 's'), 'stream applied');
is(id_n_rows($dest, 'a_ins'), '6 1:0,2:0,3:0,4:0,5:0,6:1', 'insert: only the insert streamed');
is(id_n_rows($dest, 'a_iu'), '6 1:2,2:0,3:0,4:0,5:0,6:1', 'insupd: the insert and the update streamed');
is(id_n_rows($dest, 'a_flt'), '6 1:2,2:0,3:0,4:0,5:0,6:1', 'filter: the insert and the update streamed');
same_id_n_rows($source, $dest, 'a_def', 'default');

# out of the publications and back in, with changes while out, then refresh
for my $p (qw(p_ins p_iu p_flt p_def)) {
	(my $t = $p) =~ s/^p_/a_/;
	sq("ALTER PUBLICATION $p DROP TABLE $t");
}
is(dq(q{SELECT count(*) FROM cdc.refresh_subscription('s')}), '4', 'out: four tables removed');
for my $t (@tables) {
	sq("DELETE FROM $t WHERE id = 3; UPDATE $t SET n = 5 WHERE id = 4;");
}
sq(q{UPDATE a_flt SET n = 50 WHERE id = 5});   # leaves the filter: the stream would send a delete
sq(q{ALTER PUBLICATION p_ins ADD TABLE a_ins; ALTER PUBLICATION p_iu ADD TABLE a_iu;
	ALTER PUBLICATION p_flt ADD TABLE a_flt WHERE (n < 10); ALTER PUBLICATION p_def ADD TABLE a_def});
is(dq(q{SELECT count(*) FROM cdc.refresh_subscription('s')}), '4', 'in: four tables added');
$dest->poll_query_until('postgres', q{SELECT count(*) = 4 FROM cdc.subscription_tables WHERE state = 'ready'})
  or diag(dq(q{SELECT * FROM cdc.subscription_status}));
ok(wait_caught_up($source, $dest, 's'), 'copied again');

is(id_n_rows($dest, 'a_ins'), '6 1:2,2:0,3:0,4:5,5:0,6:1',
	'insert: the copy refreshed the rows and deleted none (2 and 3 deleted on the source stay)');
is(id_n_rows($dest, 'a_iu'), '6 1:2,2:0,3:0,4:5,5:0,6:1', 'insupd: the same');
is(id_n_rows($dest, 'a_flt'), '3 1:2,4:5,6:1',
	'filter: the row that left the filter is deleted, as the stream deletes it, and so are the deleted ones');
same_id_n_rows($source, $dest, 'a_def', 'default: the copy deletes the row deleted while out');
is(dq(q{SELECT string_agg(target::text || ':' || (entity_key->>'id'), ',' ORDER BY target::text, entity_key->>'id') FROM cdc.tombstones}),
	'a_def:2,a_def:3,a_flt:2,a_flt:3,a_flt:5', 'tombstones: only where the publications delete rows');
is(dq(q{SELECT string_agg(target::text || ':' || op, ',' ORDER BY id) FROM cdc.outbox}),
	'a_ins:c,a_iu:c,a_iu:u,a_flt:c,a_flt:u,a_def:c,a_def:u,a_def:d',
	'outbox: one row per streamed change, none for the copies');

# cdc.resync_table copies a table again: it deletes nothing either
sq(q{DELETE FROM a_ins WHERE id = 4; INSERT INTO a_ins VALUES (7, 7)});
ok(wait_caught_up($source, $dest, 's'), 'insert: the insert after the refresh streamed');
dq(q{SELECT cdc.resync_table('s', 'a_ins')});
$dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE table_name = 'a_ins'});
ok(wait_caught_up($source, $dest, 's'), 'insert: resynced');
is(id_n_rows($dest, 'a_ins'), '7 1:2,2:0,3:0,4:5,5:0,6:1,7:7', 'insert: cdc.resync_table deletes none of the archived rows');
is(dq(q{SELECT count(*) FROM cdc.tombstones WHERE target = 'a_ins'::regclass}), '0', 'insert: no tombstone');
is(status_row($dest, 's', 'retry_count'), '0', 'no error');

# cdc.audit and cdc.resync follow the same rule: a row the source deleted
# is no finding of an insert-only table (it was 'extra', and the resync of
# the finding deleted it), while a hand-made change still is
dq(q{UPDATE a_ins SET n = 99 WHERE id = 5});
$dest->safe_psql('postgres', q{CALL cdc.audit('s', 'a_ins')});
is(dq(q{SELECT string_agg(kind || ':' || (key->>'id'), ',' ORDER BY key->>'id') FROM cdc.audit_findings WHERE target = 'a_ins'::regclass}),
	'different:5', 'audit: only the row changed by hand, not the rows the source deleted');
$dest->safe_psql('postgres', q{CALL cdc.resync('s', 'a_ins', keys => '[2, 3, 4, 5]')});
is(id_n_rows($dest, 'a_ins'), '7 1:2,2:0,3:0,4:5,5:0,6:1,7:7', 'resync by keys: the changed row repaired, the archived ones kept');
is(dq(q{SELECT count(*) FROM cdc.tombstones WHERE target = 'a_ins'::regclass}), '0', 'resync: no tombstone');

dq(q{SELECT cdc.drop_subscription('s', drop_slot => true)});
$dest->stop;
$source->stop;
done_testing();

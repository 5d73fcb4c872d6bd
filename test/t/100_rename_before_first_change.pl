# A table of a copy_data => false subscription renamed on the source before
# the worker applied any change of it (helper h2; docs/worker.md, "The
# subscription's tables").  The worker recognises a renamed table by the
# source relation OID recorded for it (cdc.subscription_rel.source_relid);
# a table it did not copy only learnt that OID at its first applied
# change, so a rename before it was not recognised: its changes arrived
# under the new name and were skipped as an unknown table with a WARNING
# while the subscription showed streaming.  The OIDs are now read with the
# slot, in its snapshot (the tables the publications published at its
# consistent point, and their OIDs then), so the rename stops the worker
# with 55000 as a rename after the first change does (TAP 076).
#
#   streaming  the worker streams, no change of the table yet; the source
#              renames it and changes it: the worker stops (55000, naming
#              both names), nothing of the new name applied; the hint's
#              way out (the destination table takes the new name, then
#              cdc.refresh_subscription) ends equal to the source.
#   disabled   created with enabled => false; the source changes the table,
#              renames it and changes it again before the worker first
#              runs: the change before the rename is applied (the worker
#              read the current publication at its first start, so the
#              table was known only under its new name and that change was
#              skipped with the WARNING), the worker stops at the first
#              change under the new name.
#   moved      ALTER TABLE ... SET SCHEMA before the first change: the same
#              stop, naming the new schema.
#   later      the subscription's tables are those its publications
#              published at the slot's consistent point, as for
#              PostgreSQL's CREATE SUBSCRIPTION: a table added to the
#              publication after the creation, before the worker first ran,
#              is not applied (the WARNING) until cdc.refresh_subscription
#              adds it (the worker read the publication at its first start
#              and took it).
#   missing    a publication that does not exist when the slot is made: no
#              table is recorded (refresh_pending), the worker reads the
#              tables when it starts, once the publication exists.
#   worker     a subscription without a copy whose slot the worker creates
#              itself (no slot recorded, as one of an earlier version): it
#              reads the tables and OIDs in the slot's snapshot too.
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

# The worker stopped, or applied everything up to the source's current
# position: a positive end either way, so that the old code (which skipped
# the changes and streamed on) fails at once instead of at a timeout.
sub wait_stop_or_caught_up
{
	my ($sub) = @_;
	my $lsn = source_lsn($source);
	return wait_status($dest, $sub,
		qq{state = 'error' OR (state = 'streaming' AND greatest(applied_lsn, flushed_lsn) >= '$lsn'::pg_lsn)});
}

my $t = 'CREATE TABLE %s (id int PRIMARY KEY, n int NOT NULL); INSERT INTO %s SELECT g, 0 FROM generate_series(1, 10) g;';

# --- streaming --------------------------------------------------------------
sq(sprintf($t, 'r', 'r') . sprintf($t, 'o', 'o') . 'CREATE PUBLICATION p_r FOR TABLE r, o;');
# the destination starts with the source's rows (no copy)
dq(sprintf($t, 'r', 'r') . sprintf($t, 'o', 'o'));
create_subscription($dest, $source, 'sr', ['p_r'], 'copy_data => false');
ok(wait_caught_up($source, $dest, 'sr'), 'streaming: the worker streams, no change of r applied yet');
is(dq(q{SELECT string_agg(table_name || '=' || coalesce(source_relid::text, 'NULL'), ',' ORDER BY table_name)
        FROM cdc.subscription_rel WHERE schema_name = 'public'}),
	sq(q{SELECT 'o=' || 'o'::regclass::oid || ',r=' || 'r'::regclass::oid}),
	'streaming: the source OIDs recorded with the slot');
sq(q{ALTER TABLE r RENAME TO r2});
sq(q{INSERT INTO r2 VALUES (11, 11); UPDATE r2 SET n = 2 WHERE id = 2});
sq(q{UPDATE o SET n = 1 WHERE id = 1});
ok(wait_stop_or_caught_up('sr'), 'streaming: the worker stopped or caught up');
like(status_row($dest, 'sr', q{coalesce(last_error, 'none')}),
	qr/source table public\.r of the subscription is now called public\.r2/s,
	'streaming: the rename before the first change stops the worker (55000), not skipped as an unknown table');
is(dq(q{SELECT count(*) FILTER (WHERE id = 11) || ' ' || sum(n) FROM r}), '0 0', 'streaming: nothing of r2 applied');
# the way out of the hint: the destination's table takes the new name, a refresh adds and copies it
dq(q{ALTER TABLE r RENAME TO r2});
dq(q{SELECT cdc.refresh_subscription('sr')});
ok(wait_caught_up($source, $dest, 'sr'), 'streaming: streams again after the rename and the refresh');
same_id_n_rows($source, $dest, 'r2', 'streaming');
same_id_n_rows($source, $dest, 'o', 'streaming');
dq(q{SELECT cdc.drop_subscription('sr', drop_slot => true)});

# --- disabled ---------------------------------------------------------------
sq(sprintf($t, 'd', 'd') . 'CREATE PUBLICATION p_d FOR TABLE d;');
dq(sprintf($t, 'd', 'd') . 'CREATE TABLE d2 (id int PRIMARY KEY, n int NOT NULL);');
create_subscription($dest, $source, 'sd', ['p_d'], 'copy_data => false, enabled => false');
sq(q{UPDATE d SET n = 1 WHERE id = 1});
sq(q{ALTER TABLE d RENAME TO d2});
sq(q{UPDATE d2 SET n = 2 WHERE id = 2});
dq(q{SELECT cdc.enable_subscription('sd')});
ok(wait_stop_or_caught_up('sd'), 'disabled: the worker stopped or caught up');
like(status_row($dest, 'sd', q{coalesce(last_error, 'none')}),
	qr/source table public\.d of the subscription is now called public\.d2/s,
	'disabled: a rename before the worker first ran stops it at the first change under the new name (55000)');
# (after a failed group the worker retries one source transaction at a time: the one before the rename commits alone)
ok($dest->poll_query_until('postgres', q{SELECT n = 1 FROM d WHERE id = 1}), 'disabled: the change before the rename applied to d');
is(dq(q{SELECT n FROM d WHERE id = 2}), '0', 'disabled: nothing of d2 applied to d');
is(dq(q{SELECT count(*) FROM d2}), '0', 'disabled: the unrelated destination table d2 untouched');
dq(q{SELECT cdc.drop_subscription('sd', drop_slot => true)});

# --- moved ------------------------------------------------------------------
sq(q{CREATE SCHEMA s2;} . sprintf($t, 'm', 'm') . 'CREATE PUBLICATION p_m FOR TABLE m;');
dq(sprintf($t, 'm', 'm'));
create_subscription($dest, $source, 'sm', ['p_m'], 'copy_data => false');
ok(wait_caught_up($source, $dest, 'sm'), 'moved: streaming');
sq(q{ALTER TABLE m SET SCHEMA s2});
sq(q{UPDATE s2.m SET n = 3 WHERE id = 3});
ok(wait_stop_or_caught_up('sm'), 'moved: the worker stopped or caught up');
like(status_row($dest, 'sm', q{coalesce(last_error, 'none')}),
	qr/source table public\.m of the subscription is now called s2\.m/s,
	'moved: SET SCHEMA before the first change stops the worker (55000)');
is(dq(q{SELECT n FROM m WHERE id = 3}), '0', 'moved: nothing of s2.m applied');
dq(q{SELECT cdc.drop_subscription('sm', drop_slot => true)});

# --- later ------------------------------------------------------------------
sq(sprintf($t, 'la', 'la') . sprintf($t, 'lb', 'lb') . 'CREATE PUBLICATION p_l FOR TABLE la;');
dq(sprintf($t, 'la', 'la') . sprintf($t, 'lb', 'lb'));
create_subscription($dest, $source, 'sl', ['p_l'], 'copy_data => false, enabled => false');
sq(q{ALTER PUBLICATION p_l ADD TABLE lb});
sq(q{UPDATE la SET n = 1 WHERE id = 1; UPDATE lb SET n = 1 WHERE id = 1});
my $offset = -s $dest->logfile;
dq(q{SELECT cdc.enable_subscription('sl')});
ok(wait_caught_up($source, $dest, 'sl'), 'later: streaming');
is(dq(q{SELECT string_agg(table_name, ',' ORDER BY table_name) FROM cdc.subscription_rel WHERE schema_name = 'public'}), 'la',
	'later: the tables published at the slot\'s start');
is(dq(q{SELECT (SELECT n FROM la WHERE id = 1) || ' ' || (SELECT n FROM lb WHERE id = 1)}), '1 0',
	'later: la applied, lb (added to the publication after the creation) not');
ok(wait_for_log($dest, qr/changes of public\.lb are not applied: the table is not part of subscription "sl"/, $offset),
	'later: with the WARNING');
is(dq(q{SELECT string_agg(table_name || ' ' || action, ',') FROM cdc.refresh_subscription('sl', copy_data => false)}), 'lb added',
	'later: the refresh adds lb');
sq(q{UPDATE lb SET n = 2 WHERE id = 2});
ok(wait_caught_up($source, $dest, 'sl'), 'later: streaming after the refresh');
is(dq(q{SELECT n FROM lb WHERE id = 2}), '2', 'later: lb applied after the refresh');
dq(q{SELECT cdc.drop_subscription('sl', drop_slot => true)});

# --- missing ----------------------------------------------------------------
sq(sprintf($t, 'x', 'x'));
dq(sprintf($t, 'x', 'x'));
create_subscription($dest, $source, 'sx', ['p_x'], 'copy_data => false, enabled => false');
is(dq(q{SELECT s.refresh_pending || ' ' || (SELECT count(*) FROM cdc.subscription_rel r WHERE r.subid = s.subid)
        FROM cdc.subscription s WHERE name = 'sx'}), 'true 0', 'missing: no table recorded, the worker reads them');
sq(q{CREATE PUBLICATION p_x FOR TABLE x});
dq(q{SELECT cdc.enable_subscription('sx')});
ok(wait_caught_up($source, $dest, 'sx'), 'missing: streaming');
sq(q{UPDATE x SET n = 4 WHERE id = 4});
ok(wait_caught_up($source, $dest, 'sx'), 'missing: caught up');
same_id_n_rows($source, $dest, 'x', 'missing');
dq(q{SELECT cdc.drop_subscription('sx', drop_slot => true)});

# --- worker -----------------------------------------------------------------
sq(sprintf($t, 'w', 'w') . 'CREATE PUBLICATION p_w FOR TABLE w;');
dq(sprintf($t, 'w', 'w'));
create_subscription($dest, $source, 'sw', ['p_w'], 'copy_data => false, enabled => false');
sq(q{SELECT pg_drop_replication_slot('sw')});
dq(q{UPDATE cdc.subscription SET slot_created_lsn = NULL WHERE name = 'sw'; DELETE FROM cdc.subscription_rel});
dq(q{SELECT cdc.enable_subscription('sw')});
ok(wait_caught_up($source, $dest, 'sw'), 'worker: the worker made the slot, streaming');
is(dq(q{SELECT table_name || '=' || coalesce(source_relid::text, 'NULL') FROM cdc.subscription_rel}),
	sq(q{SELECT 'w=' || 'w'::regclass::oid}), 'worker: the source OID recorded with the slot');
sq(q{ALTER TABLE w RENAME TO w2; UPDATE w2 SET n = 5 WHERE id = 5});
ok(wait_stop_or_caught_up('sw'), 'worker: the worker stopped or caught up');
like(status_row($dest, 'sw', q{coalesce(last_error, 'none')}),
	qr/source table public\.w of the subscription is now called public\.w2/s,
	'worker: the rename stops the worker (55000)');
dq(q{SELECT cdc.drop_subscription('sw', drop_slot => true)});

$dest->stop;
$source->stop;
done_testing();

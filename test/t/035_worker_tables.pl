# Tables come and go (issue 12, item 8): ALTER PUBLICATION ... ADD / DROP
# TABLE on the source and a destination table dropped and created again,
# handled as users of native subscriptions expect.  cdc.refresh_subscription
# (REFRESH PUBLICATION's equivalent) adds and removes tables; an added table
# is copied at the snapshot of a temporary slot and joins the running stream
# consistently: the stream skips that table's changes in source
# transactions committed before the copy's point (they are in the copy),
# applies the later ones.  cdc.resync_table copies one table again without
# copying the others.  Both run while pgbench writes the tables.
#
#   add      a table added to the publication is not applied before the
#            refresh (a warning says so); after it the destination equals
#            the source, the outbox holds exactly one row per change of it
#            committed at or after its copy point, the other tables are not
#            copied again
#   drop     a table dropped from the publication leaves the subscription
#   re-create a destination table dropped and created again: its changes are
#            skipped while it is gone (no error), cdc.resync_table copies it
#            again and only it
#   no copy  refresh with copy_data => false: changes from then on only
#   alter    alter_subscription with a new publication copies its tables
#   errors   unknown subscription, a table the publications do not publish
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest');

my $tables = join('', map { "CREATE TABLE $_ (id int PRIMARY KEY, n int NOT NULL, note text);\n" } qw(t1 t2 t3 t4 t5));
$source->safe_psql('postgres', $tables . q{
INSERT INTO t1 SELECT g, 0, 'one' FROM generate_series(1, 500) g;
INSERT INTO t2 SELECT g, 0, 'two' FROM generate_series(1, 500) g;
INSERT INTO t3 SELECT g, 0, 'three' FROM generate_series(1, 50) g;
INSERT INTO t4 SELECT g, 0, 'four' FROM generate_series(1, 50) g;
INSERT INTO t5 SELECT g, 0, 'five' FROM generate_series(1, 50) g;
CREATE SEQUENCE extra START 100000;
CREATE PUBLICATION p_tab FOR TABLE t1, t3;
CREATE PUBLICATION p_new FOR TABLE t5;
});
$dest->safe_psql('postgres', $tables . join('', map { "SELECT cdc.register_mapping('$_', outbox => true, source_name => 'tab');\n" } qw(t1 t2 t3 t4 t5)));
probe_create($source, 'probe');
create_subscription($dest, $source, 'tab', ['p_tab']);
ok(wait_caught_up($source, $dest, 'tab'), 'initial copy of t1 and t3, streaming');

sub rows { return $dest->safe_psql('postgres', $_[0]); }

sub tables_of
{
	return rows(q{SELECT string_agg(table_name || ':' || state, ',' ORDER BY table_name) FROM cdc.subscription_tables WHERE subscription = 'tab'});
}

sub sync_lsn
{
	my ($table) = @_;
	return rows(qq{SELECT sync_lsn FROM cdc.subscription_tables WHERE subscription = 'tab' AND table_name = '$table'});
}

sub snapshot_rows
{
	my ($table) = @_;
	return rows("SELECT coalesce((SELECT snapshot_rows FROM cdc.stats WHERE target = '$table'::regclass), 0)");
}

sub same_as_source
{
	my ($table, $label) = @_;
	compare_table($source, $dest, "SELECT count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY id), '')) FROM $table x", $label);
}

# Changes of $table in source transactions committed at or after $from (all
# if undef): [ changes, expected outbox rows (a key change counts two) ].
sub changes_of
{
	my ($table, $from) = @_;
	my $oid = $source->safe_psql('postgres', "SELECT '$table'::regclass::oid");
	my ($n, $rows) = (0, 0);
	for my $t (@{ probe_read($source, 'probe', 'p_tab,p_new') }) {
		next if defined $from && lsn_num($t->{commit_lsn}) < lsn_num($from);
		for my $c (@{ $t->{changes} }) {
			next unless defined $c->[3] && $c->[3] eq $oid;
			$n++;
			$rows += ($c->[0] eq 'U' && defined $c->[2] && $c->[2] eq 'K') ? 2 : 1;
		}
	}
	return [ $n, $rows ];
}

sub no_error
{
	my ($label) = @_;
	ok(wait_status($dest, 'tab', q{state = 'streaming' AND retry_count = 0}), "$label: streaming, no pending retry");
}

# pgbench writing t1 and $other: updates, inserts, deletes, one source
# transaction each or several in one.
sub start_writer
{
	my ($other) = @_;
	my $script = PostgreSQL::Test::Utils::tempdir() . "/writer_$other.sql";
	PostgreSQL::Test::Utils::append_to_file($script, qq{
\\set id random(1, 500)
\\set d random(-100, 100)
BEGIN;
UPDATE $other SET n = n + :d WHERE id = :id;
UPDATE t1 SET n = n + :d WHERE id = :id;
END;
INSERT INTO $other VALUES (nextval('extra'), :d, 'new');
DELETE FROM $other WHERE id = :id + 1;
});
	my $log = "$script.log";
	my $h = IPC::Run::start([ 'pgbench', '-n', '-c', '2', '-j', '1', '-t', '1000000', '-f', $script, $source->connstr('postgres') ],
		'<', '/dev/null', '>', $log, '2>&1');
	return [ $h, $log ];
}

sub stop_writer
{
	my ($w) = @_;
	$w->[0]->kill_kill;
	$w->[0]->finish;
	note('pgbench: ' . slurp_file($w->[1]));
}

is(tables_of(), 't1:ready,t3:ready', 'the subscription lists the published tables, ready');
my $slot_point = sync_lsn('t1');
is(sync_lsn('t3'), $slot_point, 'both copied at the slot\'s consistent point');
is(snapshot_rows('t1') . '|' . snapshot_rows('t3'), '500|50', 'initial copy: 500 and 50 snapshot rows');

# ---------------------------------------------------------------------------
# ALTER PUBLICATION ADD TABLE: not applied before the refresh; then copied
# while pgbench writes, and joined to the stream
# ---------------------------------------------------------------------------
my $offset = -s $dest->logfile;
$source->safe_psql('postgres', q{ALTER PUBLICATION p_tab ADD TABLE t2; INSERT INTO t2 VALUES (1001, 1, 'after add'); INSERT INTO t1 VALUES (1001, 1, 'after add');});
ok(wait_caught_up($source, $dest, 'tab'), 'add: caught up');
is(rows('SELECT count(*) FROM t2'), '0', 'add: the added table is not applied before the refresh');
is(rows('SELECT count(*) FROM t1 WHERE id = 1001'), '1', 'add: the other tables go on');
like(slurp_file($dest->logfile, $offset), qr/WARNING:.*changes of public\.t2 are not applied: the table is not part of subscription "tab"/,
	'add: a warning names the table and the subscription');
no_error('add');

my $writer = start_writer('t2');
$source->poll_query_until('postgres', q{SELECT count(*) >= 20 FROM t2 WHERE note = 'new'});
is(rows(q{SELECT string_agg(schema_name || '.' || table_name || ' ' || action, ',') FROM cdc.refresh_subscription('tab')}),
	'public.t2 added', 'add: cdc.refresh_subscription reports the added table');
ok($dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE subscription = 'tab' AND table_name = 't2'}),
	'add: t2 copied');
my $t2_point = sync_lsn('t2');
ok(lsn_num($t2_point) > lsn_num($slot_point), "add: t2 copied at its own point $t2_point");
my $after = source_lsn($source);
$source->poll_query_until('postgres', "SELECT pg_current_wal_lsn() > '$after'::pg_lsn + 200000");
stop_writer($writer);
ok(wait_caught_up($source, $dest, 'tab'), 'add: caught up after the writer stopped');
same_as_source('t1', 'add: t1 equals the source');
same_as_source('t2', 'add: t2 equals the source');
same_as_source('t3', 'add: t3 equals the source');
is(snapshot_rows('t1') . '|' . snapshot_rows('t3'), '500|50', 'add: t1 and t3 were not copied again');
my $t2 = changes_of('t2', $t2_point);
ok($t2->[0] > 0, "add: $t2->[0] changes of t2 committed after its copy point");
is(outbox_summary($dest, q{target = 't2'::regclass}), "$t2->[1]|$t2->[1]",
	'add: t2 outbox = exactly one row per change committed at or after its copy point (none for what the copy delivered)');
my $t1 = changes_of('t1', $slot_point);
is(outbox_summary($dest, q{target = 't1'::regclass}), "$t1->[1]|$t1->[1]", 'add: t1 outbox = one row per change, none twice');
is(rows(q{SELECT sum(duplicate) || '|' || sum(stale) || '|' || sum(conflict) FROM cdc.stats}), '0|0|0',
	'add: no change reached the engine twice (no duplicate, stale or conflict)');
is(tables_of(), 't1:ready,t2:ready,t3:ready', 'add: t2 is part of the subscription');
no_error('add');

# ---------------------------------------------------------------------------
# ALTER PUBLICATION DROP TABLE: the refresh removes it
# ---------------------------------------------------------------------------
$source->safe_psql('postgres', 'ALTER PUBLICATION p_tab DROP TABLE t3');
is(rows(q{SELECT string_agg(schema_name || '.' || table_name || ' ' || action, ',') FROM cdc.refresh_subscription('tab')}),
	'public.t3 removed', 'drop: cdc.refresh_subscription reports the removed table');
is(tables_of(), 't1:ready,t2:ready', 'drop: t3 left the subscription');
$source->safe_psql('postgres', q{UPDATE t3 SET n = 99 WHERE id = 1; INSERT INTO t1 VALUES (1002, 2, 'after drop');});
ok(wait_caught_up($source, $dest, 'tab'), 'drop: caught up');
is(rows('SELECT n FROM t3 WHERE id = 1') . '|' . rows('SELECT count(*) FROM t1 WHERE id = 1002'), '0|1', 'drop: t3 no longer changes, t1 does');
is(rows(q{SELECT string_agg(schema_name || '.' || table_name || ' ' || action, ',') FROM cdc.refresh_subscription('tab')}),
	'', 'drop: a second refresh changes nothing');
no_error('drop');

# ---------------------------------------------------------------------------
# A destination table dropped and created again; cdc.resync_table
# ---------------------------------------------------------------------------
$dest->safe_psql('postgres', 'DROP TABLE t1');
is(tables_of(), 't2:ready', 're-create: the dropped destination table left the subscription');
$source->safe_psql('postgres', q{INSERT INTO t1 VALUES (1003, 3, 'while gone'); INSERT INTO t2 VALUES (1003, 3, 'while t1 gone');});
ok(wait_caught_up($source, $dest, 'tab'), 're-create: caught up while t1 is gone');
is(rows('SELECT count(*) FROM t2 WHERE id = 1003'), '1', 're-create: the other table goes on');
no_error('re-create: no error while the table is gone');
$dest->safe_psql('postgres', q{
CREATE TABLE t1 (id int PRIMARY KEY, n int NOT NULL, note text);
SELECT cdc.register_mapping('t1', outbox => true, source_name => 'tab');
});
$writer = start_writer('t2');
$source->poll_query_until('postgres', q{SELECT count(*) >= 20 FROM t2 WHERE note = 'new' AND id > (SELECT max(id) - 20 FROM t2)});
my $t2_snapshots = snapshot_rows('t2');
is(rows(q{SELECT cdc.resync_table('tab', 't1')}), '', 're-create: cdc.resync_table');
ok($dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE subscription = 'tab' AND table_name = 't1'}),
	're-create: t1 copied again');
my $t1_point = sync_lsn('t1');
$after = source_lsn($source);
$source->poll_query_until('postgres', "SELECT pg_current_wal_lsn() > '$after'::pg_lsn + 200000");
stop_writer($writer);
ok(wait_caught_up($source, $dest, 'tab'), 're-create: caught up');
same_as_source('t1', 're-create: t1 equals the source');
same_as_source('t2', 're-create: t2 equals the source');
is(snapshot_rows('t2'), $t2_snapshots, 're-create: t2 was not copied again');
$t1 = changes_of('t1', $t1_point);
ok($t1->[0] > 0, "re-create: $t1->[0] changes of t1 committed after its new copy point $t1_point");
is(outbox_summary($dest, q{target = 't1'::regclass}), "$t1->[1]|$t1->[1]",
	're-create: the new t1\'s outbox = one row per change committed at or after the copy point');
is(rows(q{SELECT sum(duplicate) || '|' || sum(stale) || '|' || sum(conflict) FROM cdc.stats}), '0|0|0', 're-create: no duplicate, stale or conflict');
no_error('re-create');

# ---------------------------------------------------------------------------
# refresh with copy_data => false: changes from then on only
# ---------------------------------------------------------------------------
$source->safe_psql('postgres', q{ALTER PUBLICATION p_tab ADD TABLE t4; INSERT INTO t4 VALUES (100, 0, 'before refresh');});
ok(wait_caught_up($source, $dest, 'tab'), 'no copy: caught up');
is(rows(q{SELECT string_agg(schema_name || '.' || table_name || ' ' || action, ',') FROM cdc.refresh_subscription('tab', copy_data => false)}),
	'public.t4 added', 'no copy: t4 added');
ok(wait_status($dest, 'tab', q{state = 'streaming'}), 'no copy: streaming');
$source->safe_psql('postgres', q{INSERT INTO t4 VALUES (101, 0, 'after refresh'); UPDATE t4 SET n = 5 WHERE id = 1;});
ok(wait_caught_up($source, $dest, 'tab'), 'no copy: caught up');
is(rows(q{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM t4}), '1:5,101:0', 'no copy: only the changes after the refresh');
is(rows(q{SELECT state || '|' || (sync_lsn IS NULL) FROM cdc.subscription_tables WHERE subscription = 'tab' AND table_name = 't4'}), 'ready|true',
	'no copy: ready without a copy point');

# ---------------------------------------------------------------------------
# alter_subscription with another publication copies its tables
# ---------------------------------------------------------------------------
$dest->safe_psql('postgres', q{SELECT cdc.alter_subscription('tab', publications => ARRAY['p_tab', 'p_new'])});
ok($dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE subscription = 'tab' AND table_name = 't5'}),
	'alter: the new publication\'s table copied');
$source->safe_psql('postgres', q{UPDATE t5 SET n = 7 WHERE id = 3});
ok(wait_caught_up($source, $dest, 'tab'), 'alter: caught up');
same_as_source('t5', 'alter: t5 equals the source');
is(tables_of(), 't1:ready,t2:ready,t4:ready,t5:ready', 'alter: the subscription\'s tables');

# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
my ($ret, $out, $err) = $dest->psql('postgres', q{SELECT cdc.refresh_subscription('nosuch')});
like($err, qr/subscription "nosuch" does not exist/, 'refresh of an unknown subscription: 42704');
($ret, $out, $err) = $dest->psql('postgres', q{SELECT cdc.resync_table('tab', 't3')});
like($err, qr/table public\.t3 is not published by subscription "tab"/, 'resync of a table the publications do not publish: refused');

# ---------------------------------------------------------------------------
# re-add: a table dropped from the publication comes back.  Its new copy
# deletes the rows the source deleted while it was out (found by a fidelity
# review: they stayed, with no error), as snapshot deletes at the copy's
# point: tombstones, no outbox rows.
# ---------------------------------------------------------------------------
my $t3_outbox = rows(q{SELECT count(*) FROM cdc.outbox WHERE target = 't3'::regclass});
$source->safe_psql('postgres', q{DELETE FROM t3 WHERE id <= 5; INSERT INTO t3 VALUES (51, 1, 'while out');
                                 ALTER PUBLICATION p_tab ADD TABLE t3;});
is(rows(q{SELECT string_agg(schema_name || '.' || table_name || ' ' || action, ',') FROM cdc.refresh_subscription('tab')}),
	'public.t3 added', 're-add: t3 added again');
ok($dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE subscription = 'tab' AND table_name = 't3'}),
	're-add: t3 copied again');
ok(wait_caught_up($source, $dest, 'tab'), 're-add: caught up');
same_as_source('t3', 're-add: t3 equals the source (rows 1-5 gone, row 1\'s update and row 51 there)');
is(rows(q{SELECT string_agg(entity_key ->> 'id', ',' ORDER BY (entity_key ->> 'id')::int) FROM cdc.tombstones WHERE target = 't3'::regclass}),
	'1,2,3,4,5', 're-add: tombstones of the five deleted rows');
is(rows(qq{SELECT count(*) - $t3_outbox FROM cdc.outbox WHERE target = 't3'::regclass}), '0', 're-add: no outbox row from the copy');
ok($dest->log_contains(qr/copied 46 rows of public\.t3 .*\n.*DETAIL:  5 rows the source no longer had at that point were deleted/),
	're-add: the log says what the copy deleted');
# ... with a key of two columns, text values that need quoting in the
# compact key's array literal
my $t6 = q{CREATE TABLE t6 (a int, b text, n int, PRIMARY KEY (a, b));};
$source->safe_psql('postgres', $t6 . q{INSERT INTO t6 SELECT g, 'x, "' || g || '" {}', g FROM generate_series(1, 10) g;
                                       ALTER PUBLICATION p_tab ADD TABLE t6;});
$dest->safe_psql('postgres', $t6 . q{SELECT cdc.register_mapping('t6', outbox => true, source_name => 'tab');});
my $t6_added = sub {
	return rows(q{SELECT string_agg(schema_name || '.' || table_name || ' ' || action, ',') FROM cdc.refresh_subscription('tab')});
};
is($t6_added->(), 'public.t6 added', 're-add, two key columns: t6 added');
ok($dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE subscription = 'tab' AND table_name = 't6'}),
	're-add, two key columns: t6 copied');
$source->safe_psql('postgres', 'ALTER PUBLICATION p_tab DROP TABLE t6');
is($t6_added->(), 'public.t6 removed', 're-add, two key columns: t6 removed');
$source->safe_psql('postgres', q{DELETE FROM t6 WHERE a <= 3; ALTER PUBLICATION p_tab ADD TABLE t6;});
is($t6_added->(), 'public.t6 added', 're-add, two key columns: t6 added again');
ok($dest->poll_query_until('postgres', q{SELECT state = 'ready' FROM cdc.subscription_tables WHERE subscription = 'tab' AND table_name = 't6'}),
	're-add, two key columns: t6 copied again');
ok(wait_caught_up($source, $dest, 'tab'), 're-add, two key columns: caught up');
compare_table($source, $dest, q{SELECT count(*), md5(string_agg(x::text, ',' ORDER BY a, b)) FROM t6 x},
	're-add, two key columns: t6 equals the source (rows 1-3 gone)');
is(rows(q{SELECT count(*) FROM cdc.tombstones WHERE target = 't6'::regclass}), '3', 're-add, two key columns: three tombstones');
no_error('end');

probe_drop($source, 'probe');
$dest->stop;
$source->stop;
done_testing();

# Source-side events while pgbench writes the source (helper h1's load
# review).  After each event the destination must equal the source row for
# row, and the outbox hold exactly one row per change the stream applied
# (counted on a probe slot: the changes of each table in source
# transactions committed at or after its copy point), idempotency keys
# distinct.
#
#   pub      ALTER PUBLICATION ... SET TABLE (one table out, one in), then
#            the dropped table added back, each followed by
#            cdc.refresh_subscription
#   schema   ADD COLUMN on the source first (the worker stops on 42703, the
#            operator adds it here, the worker goes on), ALTER COLUMN TYPE
#            here first, then on the source, with values only the new type
#            holds, DROP COLUMN on the source first
#   ident    REPLICA IDENTITY DEFAULT -> FULL -> USING INDEX -> DEFAULT
#   crash    kill -9 of the destination while a large source transaction
#            is streamed (cdc.streaming, logical_decoding_work_mem 64kB)
#            and spooled, and while it is applied at its commit
#   copy     kill -9 of the destination during an initial copy
#   source   an immediate stop of the source
#   ddl      columns changed inside a large streamed transaction
#   refresh copy  kill -9 during the copy of cdc.resync_table, under load
#   source crash in copy  an immediate stop of the source during an initial copy
#   rename   a published table renamed on the source: the worker stops with
#            an error naming both names (it skipped the changes with a
#            WARNING while the subscription showed streaming), and the
#            hint's way out (the destination renamed too, a refresh) ends
#            with the source's rows
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
$source->append_conf('postgresql.conf', "logical_decoding_work_mem = 64kB\nwal_keep_size = 512MB\n");
$source->restart;
my $dest = new_dest('dest', "cdc.streaming = on\n");

sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { return $dest->safe_psql('postgres', $_[0]); }

my $tables = join('', map { "CREATE TABLE $_ (id int PRIMARY KEY, n int NOT NULL, note text);\n" } qw(a b c big));
sq($tables . q{
INSERT INTO a SELECT g, 0, 'a' FROM generate_series(1, 300) g;
INSERT INTO b SELECT g, 0, 'b' FROM generate_series(1, 300) g;
INSERT INTO c SELECT g, 0, 'c' FROM generate_series(1, 300) g;
INSERT INTO big SELECT g, 0, repeat('x', 200) FROM generate_series(1, 200000) g;
CREATE UNIQUE INDEX a_id_n ON a (id, n);
CREATE PUBLICATION p_ab FOR TABLE a, b;
CREATE PUBLICATION p_big FOR TABLE big;
CREATE PUBLICATION p_c FOR TABLE c;
});
dq($tables . join('', map { "SELECT cdc.register_mapping('$_', outbox => true);\n" } qw(a b c big)));
probe_create($source, 'probe');
create_subscription($dest, $source, 's', ['p_ab']);
ok(wait_caught_up($source, $dest, 's'), 'initial copy of a and b, streaming');

# pgbench writing a, b, c: one small source transaction per line or block
my $script = PostgreSQL::Test::Utils::tempdir() . '/w.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set id random(1, 600)
\set d random(-100, 100)
BEGIN;
UPDATE a SET n = n + :d WHERE id = :id;
INSERT INTO b VALUES (:id, :d, 'w') ON CONFLICT (id) DO UPDATE SET n = b.n + :d;
END;
INSERT INTO c VALUES (:id, :d, 'w') ON CONFLICT (id) DO UPDATE SET n = c.n - :d;
DELETE FROM a WHERE id = :id + 3;
INSERT INTO a VALUES (:id, :d, 'w') ON CONFLICT (id) DO NOTHING;
DELETE FROM b WHERE id = :id + 5;
});
my $writer;
sub start_writer
{
	my $log = "$script.log";
	my $h = IPC::Run::start([ 'pgbench', '-n', '-c', '2', '-j', '1', '-R', '150', '-T', '900', '-f', $script, $source->connstr('postgres') ],
		'<', '/dev/null', '>', $log, '2>&1');
	$writer = [ $h, $log ];
}
sub stop_writer
{
	return unless $writer;
	$writer->[0]->kill_kill;
	$writer->[0]->finish;
	$writer = undef;
}

sub sync_lsn
{
	my ($sub, $t) = @_;
	return dq(qq{SELECT sync_lsn FROM cdc.subscription_tables WHERE subscription = '$sub' AND table_name = '$t'});
}

# changes of $table committed at or after $from, per the probe slot
sub changes_of
{
	my ($table, $from, $upto) = @_;
	my $oid = sq("SELECT '$table'::regclass::oid");
	my $n = 0;
	for my $t (@{ probe_read($source, 'probe', 'p_ab,p_big,p_c') }) {
		next if defined $from && $from ne '' && lsn_num($t->{commit_lsn}) < lsn_num($from);
		next if defined $upto && lsn_num($t->{commit_lsn}) > lsn_num($upto);
		$n += scalar grep { defined $_->[3] && $_->[3] eq $oid && $_->[0] ne 'T' } @{ $t->{changes} };
	}
	return $n;
}

sub same_rows
{
	my ($table, $label, $cols) = @_;
	$cols //= 'id, n, note';
	compare_table($source, $dest, "SELECT count(*), md5(coalesce(string_agg(($cols)::text, ',' ORDER BY id), '')) FROM $table",
		"$label: $table equals the source");
}

# the outbox of $table holds one row per change of it after $from (up to $upto)
sub outbox_exact
{
	my ($table, $from, $label, $upto) = @_;
	my $want = changes_of($table, $from, $upto);
	is(dq("SELECT count(*) || '|' || count(DISTINCT idempotency_key) FROM cdc.outbox WHERE target = '$table'::regclass"),
		"$want|$want", "$label: outbox of $table: one row per applied change ($want), keys distinct");
}

sub settle
{
	my ($label, $sub) = @_;
	$sub //= 's';
	stop_writer();
	ok(wait_caught_up($source, $dest, $sub), "$label: caught up");
}

my $a_from = sync_lsn('s', 'a');

# ---------------------------------------------------------------------------
# pub: SET TABLE a, c (b out, c in), then b added back
# ---------------------------------------------------------------------------
start_writer();
sleep 3;
sq('ALTER PUBLICATION p_ab SET TABLE a, c');
sleep 2;
is(dq(q{SELECT string_agg(table_name || ':' || action, ',' ORDER BY table_name) FROM cdc.refresh_subscription('s')}),
	'b:removed,c:added', 'pub: refresh after SET TABLE');
ok(wait_status($dest, 's', q{state = 'streaming'}), 'pub: streaming after the refresh');
sleep 3;
sq('ALTER PUBLICATION p_ab ADD TABLE b');
is(dq(q{SELECT string_agg(table_name || ':' || action, ',' ORDER BY table_name) FROM cdc.refresh_subscription('s')}),
	'b:added', 'pub: refresh after b is added back');
sleep 3;
settle('pub');
same_rows($_, 'pub') for qw(a b c);
outbox_exact('a', $a_from, 'pub');
outbox_exact('c', sync_lsn('s', 'c'), 'pub');
is(dq(q{SELECT retry_count FROM cdc.subscription_status WHERE name = 's'}), '0', 'pub: no error');

# ---------------------------------------------------------------------------
# schema: ADD COLUMN (source first), ALTER COLUMN TYPE (destination first),
# DROP COLUMN (source first)
# ---------------------------------------------------------------------------
start_writer();
sleep 2;
sq(q{ALTER TABLE a ADD COLUMN extra int DEFAULT 7; UPDATE a SET extra = id WHERE id % 10 = 0});
ok(wait_status($dest, 's', q{state = 'error' AND last_error ~ 'extra'}), 'schema: a column the destination lacks stops the worker');
dq(q{ALTER TABLE a ADD COLUMN extra int DEFAULT 7});
ok(wait_status($dest, 's', q{state = 'streaming' AND last_error IS NULL}), 'schema: goes on once the column is added');
sleep 2;
dq(q{ALTER TABLE c ALTER COLUMN n TYPE bigint});
sq(q{ALTER TABLE c ALTER COLUMN n TYPE bigint; UPDATE c SET n = n + 5000000000 WHERE id % 7 = 0});
sleep 2;
sq(q{ALTER TABLE a DROP COLUMN extra});
sleep 2;
dq(q{ALTER TABLE a DROP COLUMN extra});
sleep 2;
settle('schema');
same_rows($_, 'schema') for qw(a b c);
outbox_exact('a', $a_from, 'schema');
outbox_exact('c', sync_lsn('s', 'c'), 'schema');

# ---------------------------------------------------------------------------
# ident: REPLICA IDENTITY DEFAULT -> FULL -> USING INDEX -> DEFAULT
# ---------------------------------------------------------------------------
start_writer();
for my $ri ('FULL', 'USING INDEX a_id_n', 'DEFAULT') {
	sleep 2;
	sq("ALTER TABLE a REPLICA IDENTITY $ri");
}
sleep 2;
settle('ident');
same_rows($_, 'ident') for qw(a b c);
outbox_exact('a', $a_from, 'ident');
is(dq(q{SELECT retry_count FROM cdc.subscription_status WHERE name = 's'}), '0', 'ident: no error');

# ---------------------------------------------------------------------------
# crash: kill -9 of the destination during a large streamed transaction
# ---------------------------------------------------------------------------
start_writer();
sleep 1;
my $bg = $source->background_psql('postgres');
$bg->query_safe(q{BEGIN;
INSERT INTO a SELECT g, 1, repeat('s', 100) FROM generate_series(100001, 130000) g;
SAVEPOINT s1; UPDATE b SET n = n + 1000; ROLLBACK TO s1;
UPDATE a SET note = 'big' WHERE id > 100000 AND id % 3 = 0;});
$source->poll_query_until('postgres', q{SELECT stream_txns > 0 FROM pg_stat_replication_slots WHERE slot_name = 's'})
  or diag 'the transaction was not streamed';
$dest->stop('immediate');
$dest->start;
sleep 1;
$bg->query_safe('COMMIT');
$bg->quit;
# the worker applies the spooled transaction at its commit: kill it again meanwhile
select(undef, undef, undef, 1.5);
$dest->stop('immediate');
$dest->start;
sleep 2;
settle('crash');
same_rows($_, 'crash') for qw(a b c);
outbox_exact('a', $a_from, 'crash');
outbox_exact('c', sync_lsn('s', 'c'), 'crash');

# ---------------------------------------------------------------------------
# copy: kill -9 of the destination during an initial copy, while big is written
# ---------------------------------------------------------------------------
PostgreSQL::Test::Utils::append_to_file($script, q{
\set bid random(1, 250000)
INSERT INTO big VALUES (:bid, :d, 'w') ON CONFLICT (id) DO UPDATE SET n = big.n + :d;
DELETE FROM big WHERE id = :bid + 11;
});
start_writer();
create_subscription($dest, $source, 'sbig', ['p_big']);
ok(wait_status($dest, 'sbig', q{state = 'copying'}), 'copy: copying');
$dest->poll_query_until('postgres', q{SELECT coalesce(max(rows_copied), 0) > 20000 FROM cdc.copy_progress});
$dest->stop('immediate');
$dest->start;
ok(wait_status($dest, 'sbig', q{state = 'streaming'}), 'copy: streaming after the crash');
sleep 3;
settle('copy', 'sbig');
ok(wait_caught_up($source, $dest, 's'), 'copy: s caught up');
same_rows('big', 'copy', 'id, n');
outbox_exact('big', sync_lsn('sbig', 'big'), 'copy');
same_rows($_, 'copy') for qw(a b c);

# ---------------------------------------------------------------------------
# source: an immediate stop of the source under load
# ---------------------------------------------------------------------------
start_writer();
sleep 3;
$source->stop('immediate');
stop_writer();
$source->start;
start_writer();
sleep 5;
settle('source');
ok(wait_caught_up($source, $dest, 'sbig'), 'source: sbig caught up');
same_rows($_, 'source') for qw(a b c);
same_rows('big', 'source', 'id, n');
outbox_exact('a', $a_from, 'source');
outbox_exact('big', sync_lsn('sbig', 'big'), 'source');
is(dq(q{SELECT count(*) = count(DISTINCT idempotency_key) FROM cdc.outbox}), 't', 'outbox keys distinct overall');

# ---------------------------------------------------------------------------
# ddl in a streamed transaction: a large transaction streamed in chunks
# that changes its table's columns halfway (one change rolled back with its
# savepoint), while pgbench writes the other tables
# ---------------------------------------------------------------------------
sq(q{CREATE TABLE d (id int PRIMARY KEY, n int, note text, extra int); CREATE PUBLICATION p_d FOR TABLE d;});
dq(q{CREATE TABLE d (id int PRIMARY KEY, n int, note text, extra int); SELECT cdc.register_mapping('d', outbox => true);});
create_subscription($dest, $source, 'sd', ['p_d']);
ok(wait_caught_up($source, $dest, 'sd'), 'ddl: streaming');
start_writer();
sq(q{BEGIN;
INSERT INTO d SELECT g, g, 'x' || g, g FROM generate_series(1, 20000) g;
SAVEPOINT s;
ALTER TABLE d ADD COLUMN tmp int DEFAULT 5;
INSERT INTO d SELECT g, g, 'y', g, 9 FROM generate_series(20001, 25000) g;
ROLLBACK TO s;
ALTER TABLE d DROP COLUMN n;
INSERT INTO d (id, note, extra) SELECT g, 'z' || g, -g FROM generate_series(25001, 40000) g;
UPDATE d SET extra = extra + 1 WHERE id % 100 = 0;
ALTER TABLE d ADD COLUMN n2 text DEFAULT 'd';
UPDATE d SET n2 = 'u' || id WHERE id % 7 = 0;
COMMIT;});
ok($source->poll_query_until('postgres', q{SELECT stream_txns > 0 FROM pg_stat_replication_slots WHERE slot_name = 'sd'}), 'ddl: the transaction was streamed');
dq(q{ALTER TABLE d ADD COLUMN n2 text DEFAULT 'd'});
stop_writer();
ok(wait_caught_up($source, $dest, 'sd'), 'ddl: caught up');
same_rows('d', 'ddl', 'id, note, extra, n2');
is(dq(q{SELECT count(*) FROM d WHERE id <= 20000 AND n IS DISTINCT FROM id}), '0', 'ddl: the rows written before the drop keep their n');
is(dq(q{SELECT count(*) || '|' || count(DISTINCT idempotency_key) FROM cdc.outbox WHERE target = 'd'::regclass}),
	sq(q{SELECT n || '|' || n FROM (SELECT count(*) + count(*) FILTER (WHERE id % 100 = 0) + count(*) FILTER (WHERE id % 7 = 0) AS n FROM d) x}),
	'ddl: one outbox row per change');
dq(q{SELECT cdc.drop_subscription('sd', drop_slot => true)});

# ---------------------------------------------------------------------------
# refresh copy: kill -9 of the destination while a table added by
# cdc.refresh_subscription is copied (a temporary slot's snapshot), under load
# ---------------------------------------------------------------------------
sq(q{CREATE TABLE e (id int PRIMARY KEY, n int NOT NULL, note text);
     INSERT INTO e SELECT g, 0, repeat('e', 200) FROM generate_series(1, 150000) g;
     CREATE PUBLICATION p_e FOR TABLE e;});
dq(q{CREATE TABLE e (id int PRIMARY KEY, n int NOT NULL, note text); SELECT cdc.register_mapping('e', outbox => true);});
create_subscription($dest, $source, 'se', ['p_e'], 'copy_data => false');
ok(wait_caught_up($source, $dest, 'se'), 'refresh copy: streaming without a copy');
PostgreSQL::Test::Utils::append_to_file($script, q{
\set eid random(1, 160000)
INSERT INTO e VALUES (:eid, :d, 'w') ON CONFLICT (id) DO UPDATE SET n = e.n + :d;
DELETE FROM e WHERE id = :eid + 13;
});
start_writer();
sleep 2;
dq(q{SELECT cdc.resync_table('se', 'e')});
ok($dest->poll_query_until('postgres', q{SELECT coalesce(max(rows_copied), 0) > 20000 FROM cdc.copy_progress WHERE table_name = 'e'}),
	'refresh copy: copying');
$dest->stop('immediate');
$dest->start;
ok(wait_status($dest, 'se', q{state = 'streaming'}), 'refresh copy: streaming after the crash');
is(dq(q{SELECT state FROM cdc.subscription_tables WHERE subscription = 'se'}), 'ready', 'refresh copy: the table is ready');
sleep 3;
settle('refresh copy', 'se');
same_rows('e', 'refresh copy');
is(dq(q{SELECT count(*) = count(DISTINCT idempotency_key) FROM cdc.outbox WHERE target = 'e'::regclass}), 't', 'refresh copy: outbox keys distinct');
dq(q{SELECT cdc.drop_subscription('se', drop_slot => true)});

# ---------------------------------------------------------------------------
# source crash during an initial copy: an immediate stop of the source
# while a new subscription copies e, under load
# ---------------------------------------------------------------------------
dq(q{TRUNCATE e});
create_subscription($dest, $source, 'se2', ['p_e']);
start_writer();
ok($dest->poll_query_until('postgres', q{SELECT coalesce(max(rows_copied), 0) > 20000 FROM cdc.copy_progress WHERE subscription = 'se2' AND state = 'copying'}),
	'source crash in copy: copying');
$source->stop('immediate');
stop_writer();
$source->start;
start_writer();
ok(wait_status($dest, 'se2', q{state = 'streaming'}), 'source crash in copy: streaming');
sleep 3;
settle('source crash in copy', 'se2');
same_rows('e', 'source crash in copy');
is(sq(q{SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots}), 'probe,s,sbig,se2',
	'source crash in copy: no slot left behind');
dq(q{SELECT cdc.drop_subscription('se2', drop_slot => true)});

# ---------------------------------------------------------------------------
# rename: a published table renamed on the source under load.  It stays
# published (same table, same publication), so its changes must either
# apply or stop the worker with an error, as PostgreSQL's own subscriber
# stops ("logical replication target relation "public.r2" does not
# exist"); never be dropped while the subscription shows streaming.
# ---------------------------------------------------------------------------
sq(q{CREATE TABLE r (id int PRIMARY KEY, n int NOT NULL); INSERT INTO r SELECT g, 0 FROM generate_series(1, 100) g;
     CREATE PUBLICATION p_r FOR TABLE r;});
dq(q{CREATE TABLE r (id int PRIMARY KEY, n int NOT NULL);});
create_subscription($dest, $source, 'sr', ['p_r']);
ok(wait_caught_up($source, $dest, 'sr'), 'rename: copied, streaming');
start_writer();
sq(q{UPDATE r SET n = 1 WHERE id <= 10});
sq(q{ALTER TABLE r RENAME TO r2});
sq(q{UPDATE r2 SET n = 2 WHERE id <= 20; INSERT INTO r2 VALUES (101, 2); DELETE FROM r2 WHERE id = 100});
my $lsn = source_lsn($source);
$dest->poll_query_until('postgres', qq{SELECT state = 'error' OR greatest(applied_lsn, flushed_lsn) >= '$lsn' FROM cdc.subscription_status WHERE name = 'sr'});
stop_writer();
# it stops at the table every time it reconnects (between two attempts the
# state shows the reconnection)
ok($dest->poll_query_until('postgres', q{SELECT state = 'error' AND retry_count > 0 FROM cdc.subscription_status WHERE name = 'sr'}),
	'rename: the worker stops at the renamed table');
like(status_row($dest, 'sr', 'last_error'), qr/public\.r2/,
	'rename: ... naming the new name');
is(dq(q{SELECT count(*) || ':' || sum(n) FROM r}), '100:10', 'rename: nothing of the renamed table applied past the rename');
# the hint's way out: the destination table renamed too, then a refresh
# (the new name joins the subscription and is copied again)
dq(q{ALTER TABLE r RENAME TO r2});
dq(q{SELECT cdc.refresh_subscription('sr')});
ok(wait_caught_up($source, $dest, 'sr'), 'rename: streaming again after the refresh');
sq(q{UPDATE r2 SET n = 3 WHERE id = 1});
ok(wait_caught_up($source, $dest, 'sr'), 'rename: caught up');
is(dq(q{SELECT count(*) || ':' || sum(n) FROM r2}), sq(q{SELECT count(*) || ':' || sum(n) FROM r2}),
	'rename: the destination has the source\'s rows');
dq(q{SELECT cdc.drop_subscription('sr', drop_slot => true)});

probe_drop($source, 'probe');
$dest->stop;
$source->stop;
done_testing();

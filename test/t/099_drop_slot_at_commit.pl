# cdc.drop_subscription(name, drop_slot => true) drops the slot on the
# source when the dropping transaction commits (its pre-commit,
# src/pg/worker/slot_at_commit.cpp), after the local state is gone, and the
# replication origin after the slot.  Dropped inside the call, the slot was
# gone whenever the transaction failed afterwards (a DO block raising after
# the call, a procedure rolling back: the open edge TAP 096 named), and the
# subscription stayed without it; so the call refused transaction blocks
# (25001) and still left that hole.
#
#   do         a DO block that fails after the call: the slot, the
#              subscription and the origin's progress stay; the worker
#              resumes and applies every change the source made meanwhile.
#   procedure  a procedure that rolls back after the call: both stay; one
#              that commits drops both.
#   savepoint  ROLLBACK TO SAVEPOINT, and a PL/pgSQL EXCEPTION block, around
#              the call: both stay, the worker resumes.
#   rollback   BEGIN ... ROLLBACK: both stay.
#   commit     BEGIN ... COMMIT: the slot is there until COMMIT, gone after,
#              with the subscription.
#   held       another client holds the slot: statement_timeout ends the
#              COMMIT (57014) with a CONTEXT naming the slot and the
#              subscription; the subscription, its slot and its progress stay,
#              the worker resumes once the client is gone.
#   unreachable  a source that cannot be reached: the COMMIT fails (08001),
#              the subscription stays; dropped in one transaction after
#              another subscription, that one keeps its slot too (every
#              source is connected to before any slot is dropped).
#   prepare    PREPARE TRANSACTION with a pending drop: 0A000, nothing
#              prepared, the subscription stays.
#   created    created and dropped in one transaction: no slot is made and
#              none dropped (a slot of that name that is not the
#              subscription's stays).
#   recreate   dropped and created again under the same name and slot name
#              in one transaction: the old slot dropped, a new one made.
#   twice      two drops of one subscription in one transaction: the second
#              is 42704, and the COMMIT of the first drops the slot.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest', "max_prepared_transactions = 2\n");
sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { return $dest->safe_psql('postgres', $_[0]); }
sub slots { return sq(qq{SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$_[0]'}); }
sub subs { return dq(qq{SELECT count(*) FROM cdc.subscription WHERE name = '$_[0]'}); }
sub progress
{
	return dq(qq{SELECT coalesce(pg_replication_origin_progress(cdc._origin_name(subid), false)::text, 'NULL')
	             FROM cdc.subscription WHERE name = '$_[0]'});
}
# psql with the SQLSTATE in the message; returns stderr
sub dpsql_err
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $dest->psql('postgres', "\\set VERBOSITY verbose\n$sql", on_error_stop => 0);
	return $err;
}
sub both_stay
{
	my ($name, $what) = @_;
	is(slots($name), '1', "$what: the slot $name stays on the source");
	is(subs($name), '1', "$what: the subscription $name stays");
}

my $t = 'CREATE TABLE tk (id int PRIMARY KEY, n int NOT NULL);';
sq($t . 'CREATE PUBLICATION pk FOR TABLE tk;');
dq($t);
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;

my $next = 0;
# A source change; the worker must apply every one of them.
sub change { $next++; sq(qq{INSERT INTO tk VALUES ($next, $next)}); }
# The worker streams again and has applied every change.
sub resumes
{
	my ($name, $what) = @_;
	change();
	ok(wait_caught_up($source, $dest, $name), "$what: the worker streams again");
	same_id_n_rows($source, $dest, 'tk', "$what: no change lost");
}

create_subscription($dest, $source, 'sa', ['pk'], 'copy_data => false');
change();
ok(wait_caught_up($source, $dest, 'sa'), 'the worker streams');

# --- do ---------------------------------------------------------------------
my $before = progress('sa');
my $err = dpsql_err(q{DO $$ BEGIN PERFORM cdc.drop_subscription('sa', drop_slot => true);
  RAISE EXCEPTION 'after the drop' USING ERRCODE = 'P0001'; END $$;});
like($err, qr/ERROR:  P0001: after the drop/, 'do: the block failed after the call');
both_stay('sa', 'do');
is(progress('sa'), $before, "do: the origin keeps its progress ($before)");
change();
resumes('sa', 'do');

# --- procedure --------------------------------------------------------------
dq(q{CREATE PROCEDURE drop_then(sub text, keep boolean) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM cdc.drop_subscription(sub, drop_slot => true);
  IF keep THEN ROLLBACK; ELSE COMMIT; END IF;
END $$});
dq(q{CALL drop_then('sa', true)});
both_stay('sa', 'procedure rolled back');
resumes('sa', 'procedure rolled back');

# --- savepoint --------------------------------------------------------------
my $b = $dest->background_psql('postgres');
$b->query_safe('BEGIN');
$b->query_safe('SAVEPOINT s');
$b->query_safe(q{SELECT cdc.drop_subscription('sa', drop_slot => true)});
$b->query_safe('ROLLBACK TO SAVEPOINT s');
$b->query_safe(q{DO $$ BEGIN
  BEGIN PERFORM cdc.drop_subscription('sa', drop_slot => true); RAISE EXCEPTION 'inside';
  EXCEPTION WHEN raise_exception THEN NULL; END; END $$});
change();
$b->query_safe('COMMIT');
both_stay('sa', 'savepoint');
resumes('sa', 'savepoint');

# --- rollback ---------------------------------------------------------------
$b->query_safe('BEGIN');
$b->query_safe(q{SELECT cdc.drop_subscription('sa', drop_slot => true)});
change();
$b->query_safe('ROLLBACK');
both_stay('sa', 'rollback');
resumes('sa', 'rollback');

# --- held: the COMMIT fails while another client holds the slot --------------
disable_and_wait($source, $dest, 'sa');
$before = progress('sa');
my $recv = IPC::Run::start(
	[ $source->installed_command('pg_recvlogical'), '-d', $source->connstr('postgres'), '--slot', 'sa', '--start',
	  '-o', 'proto_version=1', '-o', 'publication_names=pk', '-f', '/dev/null', '-s', '1' ]);
ok($source->poll_query_until('postgres', q{SELECT active FROM pg_replication_slots WHERE slot_name = 'sa'}),
	'held: another client holds the slot');
my ($stdout, $stderr) = ('', '');
IPC::Run::run([ $dest->installed_command('psql'), '-XAtq', '-v', 'VERBOSITY=verbose', '-d', $dest->connstr('postgres'),
	  '-c', q{SET statement_timeout = '1s'}, '-c', 'BEGIN', '-c', q{SELECT cdc.drop_subscription('sa', drop_slot => true)},
	  '-c', 'COMMIT' ],
	'>', \$stdout, '2>', \$stderr);
like($stderr, qr/ERROR:  57014: canceling statement due to statement timeout/, 'held: the COMMIT is interrupted');
like($stderr, qr/CONTEXT:  dropping replication slot "sa" of subscription "sa" on the source at commit/,
	'held: the CONTEXT names the slot and the subscription');
is(sq(q{SELECT active FROM pg_replication_slots WHERE slot_name = 'sa'}), 't', 'held: the client still holds the slot');
$recv->kill_kill;
$recv->finish;
both_stay('sa', 'held');
is(progress('sa'), $before, "held: the origin keeps its progress ($before)");
ok($source->poll_query_until('postgres', q{SELECT NOT active FROM pg_replication_slots WHERE slot_name = 'sa'}),
	'held: the client is gone');
enable_subscription($dest, 'sa');
resumes('sa', 'held');

# --- prepare ----------------------------------------------------------------
$err = dpsql_err(q{BEGIN; SELECT cdc.drop_subscription('sa', drop_slot => true); PREPARE TRANSACTION 'p1';});
like($err, qr/ERROR:  0A000: cannot PREPARE a transaction that drops a subscription's replication slot/,
	'prepare: refused with 0A000');
is(dq(q{SELECT count(*) FROM pg_prepared_xacts}), '0', 'prepare: nothing prepared');
both_stay('sa', 'prepare');
resumes('sa', 'prepare');

# --- commit -----------------------------------------------------------------
$b->query_safe('BEGIN');
$b->query_safe(q{SELECT cdc.drop_subscription('sa', drop_slot => true)});
is(slots('sa'), '1', 'commit: the slot is there before COMMIT');
$b->query_safe('COMMIT');
is(slots('sa'), '0', 'commit: no slot after COMMIT');
is(subs('sa'), '0', 'commit: no subscription after COMMIT');
is(dq(q{SELECT count(*) FROM pg_replication_origin WHERE roname LIKE 'cdc\_%'}), '0', 'commit: no origin left');

# --- procedure that commits ---------------------------------------------------
create_subscription($dest, $source, 'sp', ['pk'], 'copy_data => false, enabled => false');
is(slots('sp'), '1', 'procedure: a slot to drop');
dq(q{CALL drop_then('sp', false)});
is(slots('sp'), '0', 'procedure committed: no slot');
is(subs('sp'), '0', 'procedure committed: no subscription');

# --- unreachable --------------------------------------------------------------
my $nowhere = 'host=' . $source->host . ' port=' . PostgreSQL::Test::Cluster::get_free_port() . ' dbname=postgres';
dq(qq{SELECT cdc.create_subscription('su', '$nowhere', ARRAY['pk'], enabled => false)});
$err = dpsql_err(q{BEGIN; SELECT cdc.drop_subscription('su', drop_slot => true); COMMIT;});
like($err, qr/ERROR:  08001: could not connect to the source to drop slot "su"/, 'unreachable: the COMMIT fails with 08001');
like($err, qr/CONTEXT:  dropping replication slot "su" of subscription "su" on the source at commit/,
	'unreachable: the CONTEXT names the slot and the subscription');
is(subs('su'), '1', 'unreachable: the subscription stays');
# with another drop before it in the same transaction: every source is
# connected to before any slot is dropped, so the first slot stays too
create_subscription($dest, $source, 'sv', ['pk'], 'copy_data => false, enabled => false');
$err = dpsql_err(q{BEGIN; SELECT cdc.drop_subscription('sv', drop_slot => true);
  SELECT cdc.drop_subscription('su', drop_slot => true); COMMIT;});
like($err, qr/ERROR:  08001: could not connect to the source to drop slot "su"/,
	'unreachable, after another drop: the COMMIT fails with 08001');
unlike($err, qr/WARNING/, 'unreachable, after another drop: no slot was dropped for a transaction that aborted');
both_stay('sv', 'unreachable, after another drop');
is(subs('su'), '1', 'unreachable, after another drop: the unreachable one stays');
dq(q{SELECT cdc.drop_subscription('su')});
dq(q{SELECT cdc.drop_subscription('sv', drop_slot => true)});
is(slots('sv'), '0', 'unreachable, after another drop: dropped on its own');

# --- created: created and dropped in one transaction -------------------------
$b->query_safe('BEGIN');
$b->query_safe(qq{SELECT cdc.create_subscription('sc', '$conn', ARRAY['pk'], copy_data => false, enabled => false)});
$b->query_safe(q{SELECT cdc.drop_subscription('sc', drop_slot => true)});
$b->query_safe('COMMIT');
is(slots('sc'), '0', 'created: no slot');
is(subs('sc'), '0', 'created: no subscription');
sq(q{SELECT pg_create_logical_replication_slot('not_ours', 'pgoutput')});
$b->query_safe('BEGIN');
$b->query_safe(qq{SELECT cdc.create_subscription('sn', '$conn', ARRAY['pk'], slot_name => 'not_ours', enabled => false)});
$b->query_safe(q{SELECT cdc.drop_subscription('sn', drop_slot => true)});
$b->query_safe('COMMIT');
is(slots('not_ours'), '1', 'created: a slot of that name that is not the subscription\'s stays');
is(subs('sn'), '0', 'created: no subscription');
sq(q{SELECT pg_drop_replication_slot('not_ours')});

# --- recreate: dropped and created again in one transaction ------------------
create_subscription($dest, $source, 'sr', ['pk'], 'copy_data => false, enabled => false');
my $old = sq(q{SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'sr'});
change();
$b->query_safe('BEGIN');
$b->query_safe(q{SELECT cdc.drop_subscription('sr', drop_slot => true)});
$b->query_safe(qq{SELECT cdc.create_subscription('sr', '$conn', ARRAY['pk'], copy_data => false, enabled => false)});
$b->query_safe('COMMIT');
is(slots('sr'), '1', 'recreate: one slot sr');
is(dq(q{SELECT slot_created_lsn::text FROM cdc.subscription WHERE name = 'sr'}),
	sq(q{SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'sr'}),
	'recreate: the new subscription recorded the new slot');
ok(lsn_num(sq(q{SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'sr'})) > lsn_num($old),
	'recreate: the slot is a new one');

# --- twice: two drops in one transaction --------------------------------------
$err = dpsql_err(q{BEGIN;
SELECT cdc.drop_subscription('sr', drop_slot => true);
SELECT cdc.drop_subscription('sr', drop_slot => true);
ROLLBACK;});
like($err, qr/ERROR:  42704: subscription "sr" does not exist/, 'twice: the second drop is 42704');
both_stay('sr', 'twice, rolled back');
$err = dpsql_err(q{BEGIN;
SELECT cdc.drop_subscription('sr', drop_slot => true);
SAVEPOINT s;
SELECT cdc.drop_subscription('sr', drop_slot => true);
ROLLBACK TO SAVEPOINT s;
COMMIT;});
like($err, qr/ERROR:  42704: subscription "sr" does not exist/, 'twice: the second drop, in a savepoint, is 42704');
is(slots('sr'), '0', 'twice: the first drop\'s COMMIT dropped the slot');
is(subs('sr'), '0', 'twice: no subscription');

$b->quit;
$source->stop;
$dest->stop;
done_testing();

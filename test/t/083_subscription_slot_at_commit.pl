# cdc.create_subscription(copy_data => false) creates the subscription's
# slot on the source when the creating transaction commits (its
# pre-commit, src/pg/worker/slot_at_commit.cpp), not inside the call: a
# slot cannot roll back, and created in the call it stayed on the source
# whenever the transaction failed afterwards (TAP 082's open edges), so the
# call had to refuse transaction blocks (25001).
#
#   commit     in a transaction block: no slot before COMMIT, the slot and
#              its recorded consistent point after; changes the source
#              makes after the COMMIT and before the worker starts are
#              applied once it is enabled.
#   rollback   ROLLBACK: no slot, no subscription.
#   do         a DO block that calls it then raises: no slot, no
#              subscription (the open edge of TAP 082).
#   savepoint  ROLLBACK TO SAVEPOINT, and a PL/pgSQL EXCEPTION block,
#              around the call: that subscription gets no slot and no row,
#              while the call outside the savepoint in the same
#              transaction gets its slot.
#   two        two calls in one transaction, and two in one statement: two
#              slots, both at COMMIT.
#   procedure  a procedure's COMMIT makes the slot, its ROLLBACK none.
#   dropped    created and dropped again in one transaction: no slot.
#   taken      a slot name the source has: the COMMIT fails with 42710, no
#              subscription stays, the other slot of that transaction
#              (created first) is dropped again, the taken slot is left.
#   prepare    PREPARE TRANSACTION with a pending creation: 0A000, nothing
#              left, nothing prepared.
#   timeout    statement_timeout while CREATE_REPLICATION_SLOT waits at
#              COMMIT for a source transaction: the COMMIT fails with the
#              timeout, no slot, no subscription; a cancel and a
#              terminate of the session likewise.
#   serial     a serialization failure at COMMIT (after the slot was made
#              at pre-commit): the abort drops the slot again.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
$source->append_conf('postgresql.conf', "log_replication_commands = on\n");
$source->reload;
my $dest = new_dest('dest', "max_prepared_transactions = 2\n");
sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { return $dest->safe_psql('postgres', $_[0]); }
sub slots { return sq(qq{SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$_[0]'}); }
sub subs { return dq(qq{SELECT count(*) FROM cdc.subscription WHERE name = '$_[0]'}); }
sub nothing_left
{
	my ($name, $what) = @_;
	is(slots($name), '0', "$what: no slot $name on the source");
	is(subs($name), '0', "$what: no subscription $name");
}

my $t = 'CREATE TABLE tc (id int PRIMARY KEY, n int NOT NULL); INSERT INTO tc SELECT g, g FROM generate_series(1, 5) g;';
sq($t . 'CREATE PUBLICATION pc FOR TABLE tc;');
dq($t);
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
sub create_sql
{
	my ($name, $extra) = @_;
	$extra = $extra ? ", $extra" : '';
	return qq{SELECT cdc.create_subscription('$name', '$conn', ARRAY['pc'], copy_data => false, enabled => false$extra)};
}
# psql with the SQLSTATE in the message; returns stderr
sub dpsql_err
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $dest->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $err;
}

# --- commit -----------------------------------------------------------------
my $b = $dest->background_psql('postgres');
$b->query_safe('BEGIN');
$b->query_safe(create_sql('a1'));
is(slots('a1'), '0', 'commit: no slot before COMMIT');
is($b->query_safe(q{SELECT slot_created_lsn IS NULL FROM cdc.subscription WHERE name = 'a1'}), 't',
	'commit: no consistent point inside the transaction');
$b->query_safe('COMMIT');
is(slots('a1'), '1', 'commit: the slot exists after COMMIT');
is(dq(q{SELECT s.slot_created_lsn IS NOT NULL AND NOT s.slot_ready FROM cdc.subscription s WHERE name = 'a1'}), 't',
	'commit: its consistent point recorded, not yet taken over');
my $created = dq(q{SELECT slot_created_lsn FROM cdc.subscription WHERE name = 'a1'});
is(sq(q{SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'a1'}), $created,
	'commit: the recorded point is the slot\'s');
sq(q{UPDATE tc SET n = 100 WHERE id = 1; DELETE FROM tc WHERE id = 2; INSERT INTO tc VALUES (6, 6)});
dq(q{SELECT cdc.enable_subscription('a1')});
sq(q{UPDATE tc SET n = 300 WHERE id = 3});
ok(wait_caught_up($source, $dest, 'a1'), 'commit: streaming after enable');
same_id_n_rows($source, $dest, 'tc', 'commit: changes made between COMMIT and enable applied');
is(dq(q{SELECT id || ':' || n FROM tc WHERE id IN (1, 2, 6) ORDER BY id}), "1:100\n6:6", 'commit: final rows');
is(dq(q{SELECT slot_ready FROM cdc.subscription WHERE name = 'a1'}), 't', 'commit: the worker took the slot over');
dq(q{SELECT cdc.drop_subscription('a1', drop_slot => true)});
is(slots('a1'), '0', 'commit: drop_slot dropped it');

# --- rollback ---------------------------------------------------------------
$b->query_safe('BEGIN');
$b->query_safe(create_sql('a2'));
$b->query_safe('ROLLBACK');
nothing_left('a2', 'rollback');

# --- do ---------------------------------------------------------------------
my $err = dpsql_err(qq{DO \$\$ BEGIN PERFORM cdc.create_subscription('a3', '$conn', ARRAY['pc'], copy_data => false);
  RAISE EXCEPTION 'after the call' USING ERRCODE = 'P0001'; END \$\$;});
like($err, qr/ERROR:  P0001: after the call/, 'do: the block failed after the call');
nothing_left('a3', 'do');

# --- savepoint --------------------------------------------------------------
$b->query_safe('BEGIN');
$b->query_safe(create_sql('a4k'));
$b->query_safe('SAVEPOINT s');
$b->query_safe(create_sql('a4'));
$b->query_safe('ROLLBACK TO SAVEPOINT s');
$b->query_safe('SAVEPOINT s2');
$b->query_safe(create_sql('a4r'));
$b->query_safe('RELEASE SAVEPOINT s2');
$b->query_safe(qq{DO \$\$ BEGIN
  BEGIN PERFORM cdc.create_subscription('a4e', '$conn', ARRAY['pc'], copy_data => false, enabled => false);
    RAISE EXCEPTION 'inside';
  EXCEPTION WHEN raise_exception THEN NULL; END; END \$\$});
$b->query_safe('COMMIT');
nothing_left('a4', 'savepoint rolled back');
nothing_left('a4e', 'EXCEPTION block');
is(slots('a4k'), '1', 'savepoint: the call outside the savepoint made its slot');
is(slots('a4r'), '1', 'savepoint: the call in a released savepoint made its slot');
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name IN ('a4k', 'a4r') AND slot_created_lsn IS NOT NULL}), '2',
	'savepoint: both recorded');
dq(q{SELECT cdc.drop_subscription('a4k', drop_slot => true); SELECT cdc.drop_subscription('a4r', drop_slot => true)});

# --- two --------------------------------------------------------------------
$b->query_safe('BEGIN');
$b->query_safe(create_sql('a5a'));
$b->query_safe(create_sql('a5b'));
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name IN ('a5a', 'a5b')}), '0', 'two: no slot before COMMIT');
$b->query_safe('COMMIT');
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name IN ('a5a', 'a5b')}), '2', 'two: two slots at COMMIT');
dq(qq{SELECT cdc.create_subscription('a5c', '$conn', ARRAY['pc'], copy_data => false, enabled => false),
             cdc.create_subscription('a5d', '$conn', ARRAY['pc'], copy_data => false, enabled => false)});
is(sq(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name IN ('a5c', 'a5d')}), '2', 'two in one statement: two slots');
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name LIKE 'a5_' AND slot_created_lsn IS NOT NULL}), '4',
	'two: every consistent point recorded');
dq(qq{SELECT cdc.drop_subscription(n, drop_slot => true) FROM unnest(ARRAY['a5a', 'a5b', 'a5c', 'a5d']) n});

# --- a procedure that commits ------------------------------------------------
dq(qq{CREATE PROCEDURE make_two() LANGUAGE plpgsql AS \$\$ BEGIN
  PERFORM cdc.create_subscription('a11', '$conn', ARRAY['pc'], copy_data => false, enabled => false);
  COMMIT;
  PERFORM cdc.create_subscription('a12', '$conn', ARRAY['pc'], copy_data => false, enabled => false);
  ROLLBACK; END \$\$});
dq('CALL make_two()');
is(slots('a11'), '1', 'procedure: the slot made at its COMMIT');
is(dq(q{SELECT count(*) FROM cdc.subscription WHERE name = 'a11' AND slot_created_lsn IS NOT NULL}), '1',
	'procedure: recorded');
nothing_left('a12', 'procedure, rolled back');
dq(q{SELECT cdc.drop_subscription('a11', drop_slot => true)});

# --- dropped in the same transaction ---------------------------------------
$b->query_safe('BEGIN');
$b->query_safe(create_sql('a10'));
$b->query_safe(q{SELECT cdc.drop_subscription('a10')});
$b->query_safe('COMMIT');
nothing_left('a10', 'dropped in the same transaction');

# --- taken ------------------------------------------------------------------
sq(q{SELECT pg_create_logical_replication_slot('taken', 'pgoutput')});
$err = dpsql_err('BEGIN; ' . create_sql('a6a') . '; ' . create_sql('a6b', q{slot_name => 'taken'}) . '; COMMIT;');
like($err, qr/ERROR:  42710: could not create slot "taken" on the source: .*already exists/s, 'taken: the COMMIT fails with 42710');
nothing_left('a6b', 'taken');
nothing_left('a6a', 'taken, the slot created before it dropped again');
is(slots('taken'), '1', 'taken: the source\'s own slot is left alone');
ok($source->log_contains(qr/DROP_REPLICATION_SLOT "?a6a"?/), 'taken: a6a was created and dropped at the abort');
sq(q{SELECT pg_drop_replication_slot('taken')});

# --- prepare ----------------------------------------------------------------
$err = dpsql_err('BEGIN; ' . create_sql('a7') . q{; PREPARE TRANSACTION 'p7';});
like($err, qr/ERROR:  0A000: cannot PREPARE a transaction that creates a subscription's replication slot/,
	'prepare: refused with 0A000');
nothing_left('a7', 'prepare');
is(dq(q{SELECT count(*) FROM pg_prepared_xacts}), '0', 'prepare: nothing prepared');

# --- timeout ----------------------------------------------------------------
# CREATE_REPLICATION_SLOT waits for the source's running transactions: one
# holds an xid open until the COMMIT on the destination has failed.
sub walsenders_gone
{
	return $source->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'walsender'});
}
my $open = $source->background_psql('postgres');
$open->query_safe(q{BEGIN; SELECT txid_current()});
my ($stdout, $stderr) = ('', '');
IPC::Run::run([ $dest->installed_command('psql'), '-XAtq', '-v', 'VERBOSITY=verbose', '-d', $dest->connstr('postgres'),
	  '-c', q{SET statement_timeout = '1s'}, '-c', 'BEGIN', '-c', create_sql('a8'), '-c', 'COMMIT' ],
	'>', \$stdout, '2>', \$stderr);
like($stderr, qr/ERROR:  57014: canceling statement due to statement timeout/, 'timeout: the COMMIT is interrupted');
$open->query_safe('COMMIT');
ok(walsenders_gone(), 'timeout: the source\'s walsender ended');
nothing_left('a8', 'timeout');

$open->query_safe(q{BEGIN; SELECT txid_current()});
$b->query_safe('BEGIN');
$b->query_safe(create_sql('a8c'));
my $pid = $b->query_safe('SELECT pg_backend_pid()');
$b->{stdin} .= "COMMIT;\n";    # not waited for: it blocks until cancelled
$b->{run}->pump_nb;
ok($source->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'walsender' AND query LIKE 'CREATE_REPLICATION_SLOT%'}),
	'cancel: the COMMIT waits on the source');
dq(qq{SELECT pg_cancel_backend($pid)});
$b->{run}->finish;    # psql stops at the COMMIT's error (ON_ERROR_STOP)
like($b->{stderr}, qr/canceling statement due to user request/, 'cancel: the COMMIT is cancelled');
$open->query_safe('COMMIT');
ok(walsenders_gone(), 'cancel: the source\'s walsender ended');
nothing_left('a8c', 'cancel');
$b = $dest->background_psql('postgres');

$open->query_safe(q{BEGIN; SELECT txid_current()});
$b->query_safe('BEGIN');
$b->query_safe(create_sql('a8t'));
$pid = $b->query_safe('SELECT pg_backend_pid()');
$b->{stdin} .= "COMMIT;\n";
$b->{run}->pump_nb;
ok($source->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'walsender' AND query LIKE 'CREATE_REPLICATION_SLOT%a8t%'}),
	'terminate: the COMMIT waits on the source');
dq(qq{SELECT pg_terminate_backend($pid)});
$b->{run}->finish;
like($b->{stderr}, qr/terminating connection due to administrator command/, 'terminate: the session ends');
$open->query_safe('COMMIT');
ok(walsenders_gone(), 'terminate: the source\'s walsender ended');
nothing_left('a8t', 'terminate');
$b = $dest->background_psql('postgres');

# --- serial -----------------------------------------------------------------
# Write skew between two SERIALIZABLE transactions; the one creating the
# subscription commits second.  Its COMMIT waits at pre-commit for the
# slot (a source transaction is open) while the other commits, which dooms
# it: the slot is made, then the transaction fails with 40001 at pre-commit
# (its next read, or PreCommit_CheckForSerializationFailure), after the
# slot was made; the abort drops the slot again.
dq(q{CREATE TABLE ka (i int); CREATE TABLE kb (i int)});
my $t1 = $dest->background_psql('postgres');
$t1->query_safe('BEGIN ISOLATION LEVEL SERIALIZABLE');
$b->query_safe('BEGIN ISOLATION LEVEL SERIALIZABLE');
$t1->query_safe('SELECT count(*) FROM ka');
$b->query_safe('SELECT count(*) FROM kb');
$b->query_safe(create_sql('a9'));
$b->query_safe('INSERT INTO ka VALUES (1)');
$t1->query_safe('INSERT INTO kb VALUES (1)');
$open->query_safe(q{BEGIN; SELECT txid_current()});
$b->{stdin} .= "\\set VERBOSITY verbose\nCOMMIT;\n";
$b->{run}->pump_nb;
ok($source->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'walsender' AND query LIKE 'CREATE_REPLICATION_SLOT%a9%'}),
	'serial: the COMMIT waits on the source');
$t1->query_safe('COMMIT');
$open->query_safe('COMMIT');
$b->{run}->finish;
like($b->{stderr}, qr/ERROR:  40001: could not serialize access/, 'serial: the COMMIT fails with a serialization failure');
ok(walsenders_gone(), 'serial: the source\'s walsender ended');
nothing_left('a9', 'serial');
ok($source->log_contains(qr/DROP_REPLICATION_SLOT "?a9"?/), 'serial: the slot made at pre-commit was dropped at the abort');
$t1->quit;
$open->quit;

$dest->stop;
$source->stop;
done_testing();

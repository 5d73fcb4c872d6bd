# Shared fixture of the background-worker TAP tests (020..022): a source
# cluster with wal_level = logical and a destination cluster that preloads
# cdc_apply, plus helpers to wait for the worker and compare tables.
package CdcWorkerTest;
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Exporter 'import';

our @EXPORT = qw(planted_overloads_sql changes_claimed_once outbox_changes create_subscription new_source new_dest source_lsn wait_caught_up wait_status status_row
  compare_table id_n_rows same_id_n_rows outbox_summary cdc_root set_fault probe_create probe_read probe_drop disable_and_wait
  enable_subscription slot_save slot_restore origin_rewind wait_applied worker_running lsn_num
  freeze_walwriter crash_frozen wait_for_log owned_notes_subscription owned_database_subscription owned_database_caught_up owned_database_rows hold_slot release_slot);

sub new_source
{
	my ($name) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name // 'source');
	$node->init(allows_streaming => 'logical');
	$node->append_conf('postgresql.conf', "max_wal_senders = 10\nmax_replication_slots = 10\n");
	$node->start;
	return $node;
}

# The destination: preloads cdc_apply, short naptime and backoff.  $extra
# and the environment variable CDC_TEST_DEST_CONF add settings (for example
# CDC_TEST_DEST_CONF='cdc.group_max_transactions = 1' runs every worker test
# without grouping).  %init goes to PostgreSQL::Test::Cluster->init (for
# example extra => ['--encoding=LATIN1', '--locale=C'], or allows_streaming
# => 'logical' for a destination that also publishes).
sub new_dest
{
	my ($name, $extra, %init) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name // 'dest');
	$node->init(%init);
	$node->append_conf('postgresql.conf', "max_wal_senders = 10\nmax_replication_slots = 10\n") if $init{allows_streaming};
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cdc_apply'
cdc.naptime = 1
cdc.retry_backoff = 200ms
cdc.retry_backoff_max = 2
cdc.status_interval = 200ms
max_worker_processes = 16
} . ($extra // '') . ($ENV{CDC_TEST_DEST_CONF} // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION cdc_apply');
	return $node;
}

# The source's current WAL position (after a workload).
sub source_lsn
{
	my ($source) = @_;
	return $source->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
}

# Waits until the subscription's applied_lsn reaches $lsn (default: the
# source's current position) and the worker is streaming; $db: the
# destination database of the subscription (default postgres).
sub wait_caught_up
{
	my ($source, $dest, $sub, $lsn, $db) = @_;
	$lsn //= source_lsn($source);
	$db //= 'postgres';
	my $ok = $dest->poll_query_until($db, qq{
		SELECT greatest(applied_lsn, flushed_lsn) >= '$lsn'::pg_lsn AND state = 'streaming'
		  FROM cdc.subscription_status WHERE name = '$sub'});
	if (!$ok) {
		diag('not caught up to ' . $lsn . ': ' . $dest->safe_psql($db,
			"SELECT state, applied_lsn, flushed_lsn, received_lsn, retry_count, last_error FROM cdc.subscription_status WHERE name = '$sub'"));
	}
	return $ok;
}

# Waits until the status row satisfies the SQL condition $cond.
sub wait_status
{
	my ($dest, $sub, $cond) = @_;
	my $ok = $dest->poll_query_until('postgres',
		qq{SELECT count(*) > 0 FROM cdc.subscription_status WHERE name = '$sub' AND ($cond)}, 't');
	if (!$ok) {
		diag("status never satisfied [$cond]: " . $dest->safe_psql('postgres',
			"SELECT state, applied_lsn, retry_count, last_error, last_error_lsn, worker_pid FROM cdc.subscription_status WHERE name = '$sub'"));
	}
	return $ok;
}

sub status_row
{
	my ($dest, $sub, $cols) = @_;
	return $dest->safe_psql('postgres', "SELECT $cols FROM cdc.subscription_status WHERE name = '$sub'");
}

# is() of the same query's output on both clusters.
sub compare_table
{
	my ($source, $dest, $query, $label, $db) = @_;
	$db //= 'postgres';
	my $s = $source->safe_psql($db, $query);
	my $d = $dest->safe_psql($db, $query);
	return is($d, $s, $label);
}

# "<count> <id>:<n>,..." of a table (id, n, ...) on one node.
sub id_n_rows
{
	my ($node, $table, $db) = @_;
	return $node->safe_psql($db // 'postgres',
		"SELECT count(*) || ' ' || coalesce(string_agg(id || ':' || n, ',' ORDER BY id), '') FROM $table");
}

# The test that the destination's (id, n) rows of a table are the source's.
sub same_id_n_rows
{
	my ($source, $dest, $table, $label) = @_;
	return is(id_n_rows($dest, $table), id_n_rows($source, $table), "$label: $table equals the source");
}

# "rows|distinct keys" of cdc.outbox.
sub outbox_summary
{
	my ($dest, $where, $db) = @_;
	$where = $where ? "WHERE $where" : '';
	return $dest->safe_psql($db // 'postgres',
		"SELECT count(*) || '|' || count(DISTINCT idempotency_key) FROM cdc.outbox $where");
}

# How the worker's changes of $target are claimed (docs/semantics.md,
# "Claims by offset range"; docs/worker.md, "Positions and delivery keys"):
# "<changes held by exactly one ledger row or offset range>|<ledger rows of
# no change>".  $changes_sql lists one row per applied change with columns
# source_id ('pg:<system identifier>'), commit_lsn and pos (bigint, the
# version's second and third components), e.g. from cdc.outbox or a history
# table's cdc_version.  Positions are WAL positions, so an offset range
# covers more numbers than changes and its length says nothing.
sub changes_claimed_once
{
	my ($dest, $target, $changes_sql, $db) = @_;
	return $dest->safe_psql($db // 'postgres', qq{
		WITH o AS (
		  SELECT 'pgoutput:' || c.source_id || ':' || ('0/0'::pg_lsn + c.commit_lsn::numeric)::text AS part, c.pos
		    FROM ($changes_sql) c),
		k AS (
		  SELECT (SELECT count(*) FROM cdc.ledger l WHERE l.digest = cdc.delivery_digest('$target'::regclass, o.part || ':' || o.pos)) AS by_ledger,
		         (SELECT count(*) FROM cdc.ledger_range g JOIN cdc.ledger_partition p ON p.id = g.partition_id
		           WHERE p.target = '$target'::regclass AND p.name = o.part AND o.pos BETWEEN g.lo AND g.hi) AS by_range
		    FROM o)
		SELECT count(*) FILTER (WHERE by_ledger + by_range = 1) || '|' ||
		       ((SELECT count(*) FROM cdc.ledger WHERE target = '$target'::regclass) - coalesce(sum(by_ledger), 0))
		  FROM k});
}

# The changes of $target in cdc.outbox, for changes_claimed_once.
sub outbox_changes
{
	my ($target) = @_;
	return qq{SELECT source->>'name' AS source_id, (source->>'commit_lsn')::bigint AS commit_lsn, version[3] AS pos
	            FROM cdc.outbox WHERE target = '$target'::regclass};
}

# cdc.create_subscription($name, <source conninfo>, ARRAY[$pubs], $extra args SQL).
sub create_subscription
{
	my ($dest, $source, $name, $pubs, $extra, $db) = @_;
	(my $conn = $source->connstr($db // 'postgres')) =~ s/'/''/g;
	my $arr = join(', ', map { "'$_'" } @$pubs);
	$extra = $extra ? ", $extra" : '';
	return $dest->safe_psql($db // 'postgres', "SELECT cdc.create_subscription('$name', '$conn', ARRAY[$arr]$extra)");
}

# A database owned by an ordinary role (113, 141, 163): on the source,
# public.t (id, n) with rows 1-10 published by p; on the destination, role
# $owner owning database $db, with cdc_apply, an empty public.t and the
# superuser's subscription $sub of p.
sub owned_database_subscription
{
	my ($source, $dest, $owner, $db, $sub) = @_;
	$source->safe_psql('postgres', q{
		CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL);
		INSERT INTO t SELECT g, g FROM generate_series(1, 10) g;
		CREATE PUBLICATION p FOR TABLE t});
	$dest->safe_psql('postgres', "CREATE ROLE $owner LOGIN; CREATE DATABASE $db OWNER $owner");
	$dest->safe_psql($db, q{
		CREATE EXTENSION cdc_apply;
		CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL)});
	(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
	$dest->safe_psql($db, "SELECT cdc.create_subscription('$sub', '$conn', ARRAY['p'])");
}

# Reads of such a database by the authenticated superuser, whatever its
# settings make the session (113, 163): waits until subscription $sub has
# applied $lsn, streams and has no error (its status row as a diag
# otherwise); and public.t's rows as count:sum(n).
my $as_superuser = 'SET SESSION AUTHORIZATION DEFAULT; SET ROLE NONE; ';
sub owned_database_caught_up
{
	my ($dest, $db, $sub, $lsn) = @_;
	my $ok = $dest->poll_query_until($db, qq{
		SELECT applied_lsn >= '$lsn'::pg_lsn AND state = 'streaming' AND last_error IS NULL
		  FROM cdc.subscription_status WHERE name = '$sub'});
	diag('not caught up to ' . $lsn . ': ' . $dest->safe_psql($db, $as_superuser .
		qq{SELECT state, applied_lsn, retry_count, last_error FROM cdc.subscription_status WHERE name = '$sub'}))
	  unless $ok;
	return $ok;
}
sub owned_database_rows
{
	my ($dest, $db) = @_;
	return $dest->safe_psql($db, $as_superuser . q{SELECT count(*) || ':' || sum(n) FROM t});
}

# The resync attack fixture (070, 071): clusters named "$prefix"_source and
# "$prefix"_dest, public.notes (id, body) with rows 1 and 2 published by
# pub_notes, on the destination an ordinary role subo that owns the table
# and subscription sub_notes (copied and streaming), and public.ran
# (what, ran_as) that anyone may insert into.  Returns ($source, $dest).
sub owned_notes_subscription
{
	my ($prefix) = @_;
	my $source = new_source("${prefix}_source");
	my $dest = new_dest("${prefix}_dest");
	my $table = 'CREATE TABLE public.notes (id int PRIMARY KEY, body text);';
	$source->safe_psql('postgres', $table . q{
INSERT INTO public.notes VALUES (1, 'one'), (2, 'two');
CREATE PUBLICATION pub_notes FOR TABLE public.notes;
});
	$dest->safe_psql('postgres', $table . q{
CREATE ROLE subo;
GRANT CREATE ON SCHEMA public TO subo;
CREATE TABLE public.ran (what text, ran_as name);
GRANT INSERT ON public.ran TO PUBLIC;
ALTER TABLE public.notes OWNER TO subo;
});
	create_subscription($dest, $source, 'sub_notes', ['pub_notes'], "owner => 'subo'");
	wait_caught_up($source, $dest, 'sub_notes') or diag 'sub_notes did not start';
	is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.notes'), '2', 'copied');
	return ($source, $dest);
}

# Sets the test-only fault point cdc.debug_fault on the destination (undef:
# none) and waits until a new session sees it.  A worker that is running
# picks it up at its next message; set it while the subscription is
# disabled (or before creating it) when the first transaction must see it.
sub set_fault
{
	my ($dest, $value) = @_;
	if (defined $value) {
		$dest->safe_psql('postgres', "ALTER SYSTEM SET cdc.debug_fault = '$value'");
	} else {
		$dest->safe_psql('postgres', 'ALTER SYSTEM RESET cdc.debug_fault');
	}
	$dest->reload;
	my $want = $value // '';
	$dest->poll_query_until('postgres', "SELECT current_setting('cdc.debug_fault') = '$want'")
	  or die "cdc.debug_fault never became '$want'";
}

# A pgoutput slot on the source that nobody consumes: peeking it shows the
# exact LSNs of what the worker is sent (probe_read).
sub probe_create
{
	my ($source, $probe) = @_;
	$source->safe_psql('postgres', "SELECT pg_create_logical_replication_slot('$probe', 'pgoutput')");
}

sub probe_drop
{
	my ($source, $probe) = @_;
	$source->safe_psql('postgres', "SELECT pg_drop_replication_slot('$probe')");
}

# The source transactions of publication $pub seen by probe slot $probe, in
# stream (commit) order: a list of { xid, first_lsn, commit_lsn, end_lsn,
# changes => [ [ kind (I, U, D, T), change LSN, old tuple kind of an update
# (K: the key changed, O: full old row, N: none), source relation OID (I,
# U, D) ], ... ] }, LSNs as text.
sub probe_read
{
	my ($source, $probe, $pub) = @_;
	my $be = sub { my ($from, $len) = @_; "('x' || encode(substring(data FROM $from FOR $len), 'hex'))::bit(" . ($len * 8) . ")" };
	my $lsn = sub { "('0/0'::pg_lsn + " . $be->(@_) . "::bigint)::text" };
	my $out = $source->safe_psql('postgres', qq{
SELECT chr(get_byte(data, 0)), lsn,
       CASE chr(get_byte(data, 0)) WHEN 'B' THEN @{[ $be->(18, 4) ]}::int::text WHEN 'C' THEN @{[ $lsn->(3, 8) ]} END,
       CASE chr(get_byte(data, 0)) WHEN 'B' THEN @{[ $lsn->(2, 8) ]} WHEN 'C' THEN @{[ $lsn->(11, 8) ]}
                                   WHEN 'U' THEN chr(get_byte(data, 5)) END,
       CASE WHEN chr(get_byte(data, 0)) IN ('I', 'U', 'D') THEN @{[ $be->(2, 4) ]}::bigint::text END
  FROM pg_logical_slot_peek_binary_changes('$probe', NULL, NULL, 'proto_version', '1', 'publication_names', '$pub')});
	my (@txns, $cur);
	for my $line (split /\n/, $out) {
		my ($kind, $at, $a, $b, $rel) = split /\|/, $line;
		if ($kind eq 'B') {
			$cur = { xid => $a, first_lsn => $at, final_lsn => $b, changes => [] };
		} elsif ($kind eq 'C') {
			$cur->{commit_lsn} = $a;
			$cur->{end_lsn} = $b;
			push @txns, $cur;
		} elsif ($kind =~ /^[IUDT]$/) {
			push @{ $cur->{changes} }, [ $kind, $at, $b, $rel ];
		}
	}
	return \@txns;
}

# Disables the subscription and waits until its worker has released the slot.
sub disable_and_wait
{
	my ($source, $dest, $sub) = @_;
	$dest->safe_psql('postgres', "SELECT cdc.disable_subscription('$sub')");
	$dest->poll_query_until('postgres', "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'cdc_apply $sub')")
	  or die "worker of $sub did not stop";
	$source->poll_query_until('postgres', "SELECT NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '$sub' AND active)")
	  or die "slot $sub stayed active";
}

sub enable_subscription
{
	my ($dest, $sub) = @_;
	$dest->safe_psql('postgres', "SELECT cdc.enable_subscription('$sub')");
}

sub worker_running
{
	my ($dest, $sub) = @_;
	return $dest->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cdc_apply $sub'");
}

# A slot that goes backwards (what a source crash before a checkpoint does,
# scenario B16), made deterministic: slot_save copies the slot now,
# slot_restore (subscription disabled) replaces the slot by that copy.
sub slot_save
{
	my ($source, $slot, $copy) = @_;
	$source->safe_psql('postgres', "SELECT pg_copy_logical_replication_slot('$slot', '$copy')");
}

sub slot_restore
{
	my ($source, $slot, $copy) = @_;
	$source->safe_psql('postgres', "SELECT pg_drop_replication_slot('$slot')");
	$source->safe_psql('postgres', "SELECT pg_copy_logical_replication_slot('$copy', '$slot')");
	$source->safe_psql('postgres', "SELECT pg_drop_replication_slot('$copy')");
}

# Moves the subscription's replication origin back to $lsn (subscription
# disabled): the worker then asks the source for what it already applied,
# so the replays reach the apply engine.
sub origin_rewind
{
	my ($dest, $sub, $lsn) = @_;
	$dest->safe_psql('postgres', qq{SELECT pg_replication_origin_advance(cdc._origin_name(subid), '$lsn') FROM cdc.subscription WHERE name = '$sub'});
}

# Waits until applied_lsn (the replication origin's progress) equals $lsn.
sub wait_applied
{
	my ($dest, $sub, $lsn) = @_;
	my $ok = $dest->poll_query_until('postgres', "SELECT applied_lsn = '$lsn' FROM cdc.subscription_status WHERE name = '$sub'");
	diag("applied_lsn never became $lsn: " . status_row($dest, $sub, 'state, applied_lsn, last_error')) unless $ok;
	return $ok;
}

# An LSN in text form ("16/B374D848") as a number, to compare in Perl.
sub lsn_num
{
	my ($lsn) = @_;
	my ($hi, $lo) = split m{/}, $lsn;
	return hex($hi) * 4294967296 + hex($lo);
}

# Stops (SIGSTOP) the WAL writer of $node and returns its pid: from then on
# an asynchronous commit stays in the WAL buffers, unwritten, until a
# synchronous commit, an explicit flush or a full buffer writes it, so
# crash_frozen() loses it for sure.  Use with a destination that has
# autovacuum, the bgwriter's writes, checkpoints by time and the launcher's
# pruning off (nothing else flushes WAL meanwhile).
sub freeze_walwriter
{
	my ($node) = @_;
	my $pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'});
	die "no walwriter" unless $pid;
	kill 'STOP', $pid;
	return $pid;
}

# Crashes $node (an immediate shutdown: SIGQUIT to the postmaster, which
# SIGQUITs every child; nothing writes WAL on the way down), lets the frozen
# WAL writer $wpid receive its SIGQUIT, and waits until the postmaster is
# gone.  $crashed: the server is already going down (a PANIC).
sub crash_frozen
{
	my ($node, $wpid, $crashed) = @_;
	my $pidfile = $node->data_dir . '/postmaster.pid';
	kill 'QUIT', $node->{_pid} unless $crashed;
	kill 'CONT', $wpid;
	my $waited = 0;
	while (-f $pidfile && $waited < 300 * 10) {
		select(undef, undef, undef, 0.1);
		$waited++;
	}
	die "postmaster of " . $node->name . " did not exit" if -f $pidfile;
	$node->_update_pid(0);
}

# Waits until the server log of $node, from byte $offset on, matches $re.
# Another client holds logical slot $slot of the source: pg_recvlogical
# streams from it (pgoutput, publication $publication, output discarded)
# until release_slot.  Returns its IPC::Run handle once the source shows
# the slot active, or undef (with a diag) when it never does.
sub hold_slot
{
	my ($source, $slot, $publication) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ $source->installed_command('pg_recvlogical'), '-d', $source->connstr('postgres'), '--slot', $slot, '--start',
		  '-o', 'proto_version=1', '-o', "publication_names=$publication", '-f', '/dev/null', '-s', '1' ],
		'>', \$out, '2>', \$err);
	return $h if $source->poll_query_until('postgres', qq{SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'});
	$h->kill_kill;
	$h->finish;
	diag("pg_recvlogical never held slot $slot: $err");
	return undef;
}

# Ends the client of hold_slot (nothing for undef).
sub release_slot
{
	my ($h) = @_;
	return unless $h;
	$h->kill_kill;
	$h->finish;
	return;
}

sub wait_for_log
{
	my ($node, $re, $offset) = @_;
	for (my $i = 0; $i < 180 * 10; $i++) {
		return 1 if slurp_file($node->logfile, $offset) =~ $re;
		select(undef, undef, undef, 0.1);
	}
	diag("log never matched $re");
	return 0;
}

sub cdc_root
{
	return $ENV{CDC_ROOT} if $ENV{CDC_ROOT};
	require File::Basename;
	require Cwd;
	return Cwd::abs_path(File::Basename::dirname(Cwd::abs_path($0)) . '/../..');
}


# The objects sql/security.sql plants (docs/security.md), for the TAP
# security tests: as role `role`, a function `body`.sec_body(what) giving
# the PL/pgSQL lines every planted object runs (record the run in
# public.record_run, try ALTER ROLE `role` SUPERUSER), and in each schema
# of `schemas` (an array of names) overloads running them of every
# function, aggregate and operator the extension's SQL uses, with
# composite types named jsonb and text.  `typed_rows`: the VALUES rows
# (each ending in a comma) of the to_jsonb / jsonb_populate_record
# overloads for the test's row types.  Returns the SQL, for one safe_psql.
sub planted_overloads_sql
{
	my (%a) = @_;
	my $sql = <<'SQL';
SET search_path = pg_catalog, pg_temp;
SET ROLE @ROLE@;
CREATE FUNCTION @BODY@.sec_body(what text) RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog AS $b$
  SELECT pg_catalog.format($f$
    PERFORM pg_catalog.set_config('sec.caller', current_user, true);
    PERFORM pg_catalog.set_config('sec.restricted', 'false', true);
    PERFORM public.record_run(%L);
    BEGIN
      EXECUTE 'ALTER ROLE @ROLE@ SUPERUSER';
    EXCEPTION WHEN OTHERS THEN NULL;
    END;$f$, what)
$b$;
DO $plant$
DECLARE
  s text;
  f record;
  n int := 0;
BEGIN
  FOREACH s IN ARRAY ARRAY[@SCHEMAS@] LOOP
    FOR f IN SELECT * FROM (VALUES
@TYPED_ROWS@
        ('format', 'text, integer', 'text', 'pg_catalog.format($1, $2)'),
        ('format', 'text, text', 'text', 'pg_catalog.format($1, $2)'),
        ('unnest', 'integer[]', 'SETOF integer', NULL),
        ('unnest', 'text[]', 'SETOF text', NULL),
        ('unnest', 'bigint[]', 'SETOF bigint', NULL),
        ('unnest', 'oid[]', 'SETOF oid', NULL),
        ('unnest', 'smallint[]', 'SETOF smallint', NULL),
        ('unnest', 'boolean[]', 'SETOF boolean', NULL),
        ('jsonb_build_object', 'text, text', 'jsonb', 'pg_catalog.jsonb_build_object($1, $2)'),
        ('chr', 'integer', 'text', 'pg_catalog.chr($1)'),
        ('array_to_string', 'name[], text', 'text', 'pg_catalog.array_to_string($1, $2)'),
        ('quote_ident', 'text', 'text', 'pg_catalog.quote_ident($1)'),
        ('quote_literal', 'text', 'text', 'pg_catalog.quote_literal($1)'),
        ('to_regclass', 'text', 'regclass', 'pg_catalog.to_regclass($1)'),
        ('to_regprocedure', 'text', 'regprocedure', 'pg_catalog.to_regprocedure($1)'),
        ('now', '', 'timestamptz', 'pg_catalog.now()'),
        ('md5', 'text', 'text', 'pg_catalog.md5($1)'),
        ('substr', 'text, integer, integer', 'text', 'pg_catalog.substr($1, $2, $3)'),
        ('lower', 'text', 'text', 'pg_catalog.lower($1)'),
        ('pg_relation_size', 'regclass', 'bigint', 'pg_catalog.pg_relation_size($1)'),
        ('current_setting', 'text', 'text', 'pg_catalog.current_setting($1)'),
        ('greatest', 'integer, integer', 'integer', 'GREATEST($1, $2)'),
        ('cardinality', 'text[]', 'integer', 'pg_catalog.cardinality($1)')
      ) v(name, args, result, body) LOOP
      EXECUTE pg_catalog.format('CREATE FUNCTION %I.%I(%s) RETURNS %s LANGUAGE plpgsql AS $f$ BEGIN %s %s END $f$',
                     s, f.name, f.args, f.result, @BODY@.sec_body(s || '.' || f.name || '(' || f.args || ')'),
                     CASE WHEN f.body IS NULL THEN 'RETURN QUERY SELECT pg_catalog.unnest($1);'
                          ELSE 'RETURN ' || f.body || ';' END);
      n := n + 1;
    END LOOP;
    EXECUTE pg_catalog.format('CREATE FUNCTION %I.sec_agg_text(text[], text) RETURNS text[] LANGUAGE plpgsql AS $f$ BEGIN %s RETURN pg_catalog.array_append($1, $2); END $f$',
                   s, @BODY@.sec_body(s || '.array_agg(text)'));
    EXECUTE pg_catalog.format('CREATE AGGREGATE %I.array_agg(text) (SFUNC = %I.sec_agg_text, STYPE = text[])', s, s);
    EXECUTE pg_catalog.format('CREATE FUNCTION %I.sec_agg_cat(text, text, text) RETURNS text LANGUAGE plpgsql AS $f$ BEGIN %s RETURN $1 OPERATOR(pg_catalog.||) $2; END $f$',
                   s, @BODY@.sec_body(s || '.string_agg(text, text)'));
    EXECUTE pg_catalog.format('CREATE AGGREGATE %I.string_agg(text, text) (SFUNC = %I.sec_agg_cat, STYPE = text)', s, s);
    FOR f IN SELECT * FROM (VALUES
        ('=', 'integer', 'integer'), ('=', 'text', 'text'), ('=', 'bigint', 'bigint'), ('=', 'smallint', 'smallint'),
        ('=', 'oid', 'oid'), ('=', 'regclass', 'oid'), ('=', 'oid', 'regclass'), ('=', 'regclass', 'regclass'),
        ('=', 'tid', 'tid'), ('=', 'jsonb', 'jsonb'), ('=', 'bigint[]', 'bigint[]'), ('=', 'name', 'name'),
        ('=', 'name', 'text'), ('=', 'text', 'name'), ('=', 'pg_lsn', 'pg_lsn'),
        ('<>', 'text', 'text'), ('<>', 'integer', 'integer'),
        ('<', 'bigint[]', 'bigint[]'), ('<', 'integer', 'integer'), ('<', 'bigint', 'bigint'),
        ('>', 'integer', 'integer'), ('>', 'bigint', 'bigint'),
        ('<=', 'integer', 'integer'), ('<=', 'bigint', 'bigint'), ('>=', 'integer', 'integer'),
        ('||', 'text', 'text'), ('||', 'text', 'integer'), ('~', 'text', 'text'), ('->>', 'jsonb', 'text'),
        ('-', 'pg_lsn', 'pg_lsn')
      ) v(op, l, r) LOOP
      EXECUTE pg_catalog.format('CREATE FUNCTION %I.sec_op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS $f$ BEGIN %s RETURN $1 OPERATOR(pg_catalog.%s) $2; END $f$',
                     s, n, f.l, f.r,
                     CASE f.op WHEN '||' THEN 'text' WHEN '->>' THEN 'text' WHEN '-' THEN 'numeric' ELSE 'boolean' END,
                     @BODY@.sec_body(s || '.' || f.op || '(' || f.l || ', ' || f.r || ')'), f.op);
      EXECUTE pg_catalog.format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.sec_op_%s)', s, f.op, f.l, f.r, s, n);
      n := n + 1;
    END LOOP;
    EXECUTE pg_catalog.format('CREATE TYPE %I.jsonb AS (planted int)', s);
    EXECUTE pg_catalog.format('CREATE TYPE %I.text AS (planted int)', s);
  END LOOP;
END
$plant$;
SQL
	my $schemas = join(', ', map { "'$_'" } @{ $a{schemas} });
	$sql =~ s/\@ROLE\@/$a{role}/g;
	$sql =~ s/\@BODY\@/$a{body}/g;
	$sql =~ s/\@SCHEMAS\@/$schemas/g;
	(my $rows = $a{typed_rows}) =~ s/^\n//;
	$sql =~ s/\@TYPED_ROWS\@\n/$rows/g;
	return $sql;
}

1;

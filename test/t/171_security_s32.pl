# Security review h2, round 32: an ordinary role that wants a superuser's
# (or another role's) rights, and a table owner whose code runs when the
# worker applies to its table.  Each part is an attack tried that found
# nothing; it stays as the assertion that it keeps finding nothing.
#
#  1. Settings: every cdc.* setting that is not a user setting is refused to
#     an ordinary role through SET, set_config(), ALTER ROLE ... SET (its
#     own role), PGOPTIONS at connection, and to a database's owner (an
#     ordinary role) through ALTER DATABASE ... SET; the one user setting
#     is cdc.audit_max_rows_per_second (a new one must be reviewed).
#  2. The connection string: an ordinary role, and a subscription's own
#     (ordinary) owner, cannot choose where the server connects or with
#     which credentials (the server's socket, its .pgpass through passfile,
#     a service file, its keys through sslkey): every function that takes
#     or changes a conninfo is refused, and cdc.subscription refuses their
#     writes even when granted (PostgreSQL 16's password_required guards a
#     non-superuser's CREATE SUBSCRIPTION; here there is none).
#  3. A table owner's code in the worker: mallory's ENABLE ALWAYS trigger on
#     her destination table tries, during the initial copy and streaming,
#     what would outlive the security-restricted operation or reach the
#     superuser's rights (temporary objects, a session search_path, a
#     prepared statement, LISTEN, a held cursor, SET ROLE, SET SESSION
#     AUTHORIZATION, cdc settings, ALTER ROLE ... SUPERUSER, a nested
#     cdc_apply() into the superuser's table, the extension's definer and
#     internal functions, LOCK of cdc.mapping, server files).  Each is
#     refused, or undone with the operation; mallory stays ordinary and the
#     superuser's table keeps only what the source sent.
#  4. Identifiers from the source: schema, table and column names with
#     quotes, dots, spaces, a $1, keywords (user, select) and non-ASCII
#     letters are applied as names (insert, update of the key, delete),
#     with an outbox.
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

$dest->safe_psql('postgres', q{
	CREATE ROLE mallory LOGIN;
	CREATE ROLE sam LOGIN;
	CREATE ROLE dbowner LOGIN;
	CREATE DATABASE owned OWNER dbowner;
	GRANT CREATE ON SCHEMA public TO mallory});
$dest->safe_psql('owned', 'CREATE EXTENSION cdc_apply');

# psql as another role: (rc, stdout, stderr)
sub psql_as
{
	my ($role, $db, $sql, %env) = @_;
	local %ENV = (%ENV, %env);
	my ($out, $err);
	my $rc = $dest->psql($db, $sql, stdout => \$out, stderr => \$err, extra_params => ['-U', $role],
		on_error_stop => 0);
	return ($rc, $out, $err);
}

# ===========================================================================
# 1. Settings
# ===========================================================================
is($dest->safe_psql('postgres', q{
	SELECT string_agg(name, ',' ORDER BY name) FROM pg_settings WHERE name LIKE 'cdc.%' AND context = 'user'}),
	'cdc.audit_max_rows_per_second', 'the only cdc setting an ordinary role may set is the audit\'s rate');
my @guarded = split /\n/, $dest->safe_psql('postgres', q{
	SELECT name || '|' || setting || '|' || context FROM pg_settings
	 WHERE name LIKE 'cdc.%' AND context <> 'user' ORDER BY name});
cmp_ok(scalar(@guarded), '>=', 15, 'cdc settings reserved to superusers or the server: ' . scalar(@guarded));

# Every attempt in one session of mallory: the SQLSTATE of each (none may be 00000).
my $attempts = q{
CREATE TEMP TABLE tried (how text, name text, state text);
DO $$
DECLARE r record; how text; stmt text;
BEGIN
  FOR r IN SELECT name, setting FROM pg_settings WHERE name LIKE 'cdc.%' AND context <> 'user' LOOP
    FOREACH how IN ARRAY ARRAY['set', 'set_config', 'alter_role'] LOOP
      stmt := CASE how WHEN 'set' THEN format('SET %s = %L', r.name, r.setting)
                       WHEN 'set_config' THEN format('SELECT set_config(%L, %L, false)', r.name, r.setting)
                       ELSE format('ALTER ROLE CURRENT_USER SET %s = %L', r.name, r.setting) END;
      BEGIN
        EXECUTE stmt;
        INSERT INTO tried VALUES (how, r.name, '00000');
      EXCEPTION WHEN OTHERS THEN
        INSERT INTO tried VALUES (how, r.name, SQLSTATE);
      END;
    END LOOP;
  END LOOP;
END $$;
SELECT count(*) || ' ' || coalesce(string_agg(how || ':' || name, ',') FILTER (WHERE state = '00000'), '') FROM tried;
};
my ($rc, $out, $err) = psql_as('mallory', 'postgres', $attempts);
my $n_settings = scalar(@guarded);
is($out, (3 * $n_settings) . ' ', "mallory: SET, set_config() and ALTER ROLE SET of every reserved cdc setting refused ("
	. (3 * $n_settings) . ' attempts)');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM pg_db_role_setting WHERE setrole = 'mallory'::regrole}), '0',
	'nothing recorded for mallory');

# the database's owner, for its own database
my $db_attempts = q{
CREATE TEMP TABLE tried (name text, state text);
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT name, setting FROM pg_settings WHERE name LIKE 'cdc.%' AND context <> 'user' LOOP
    BEGIN
      EXECUTE format('ALTER DATABASE owned SET %s = %L', r.name, r.setting);
      INSERT INTO tried VALUES (r.name, '00000');
    EXCEPTION WHEN OTHERS THEN
      INSERT INTO tried VALUES (r.name, SQLSTATE);
    END;
  END LOOP;
END $$;
SELECT count(*) || ' ' || coalesce(string_agg(name, ',') FILTER (WHERE state = '00000'), '') FROM tried;
};
($rc, $out, $err) = psql_as('dbowner', 'owned', $db_attempts);
is($out, "$n_settings ", "the database's owner: ALTER DATABASE SET of every reserved cdc setting refused ($n_settings)");
is($dest->safe_psql('postgres', q{
	SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
	 WHERE d.datname = 'owned' AND s.setconfig::text LIKE '%cdc.%'}), '0', 'nothing recorded for the database');

# at connection (PGOPTIONS), the settings that bound a caller's resources
for my $setting ('cdc.max_event_size=1048576', 'cdc.plan_cache_size=1000000', 'cdc.row_location_cache=1048576',
	'cdc.direct_writes=off', 'cdc.replay_horizon=0')
{
	($rc, $out, $err) = psql_as('mallory', 'postgres', 'SELECT 1', PGOPTIONS => "-c $setting");
	isnt($rc, 0, "PGOPTIONS -c $setting: mallory's connection refused");
	like($err, qr/permission denied to set parameter/, "... permission denied ($setting)");
}

# ===========================================================================
# 2. The connection string
# ===========================================================================
# A subscription owned by sam, an ordinary role; sam and mallory then try
# to point the server at its own files and socket.
$source->safe_psql('postgres', q{
	CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL);
	INSERT INTO t SELECT g, g FROM generate_series(1, 5) g;
	CREATE PUBLICATION p_t FOR TABLE t});
$dest->safe_psql('postgres', q{
	CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL);
	ALTER TABLE t OWNER TO sam});
create_subscription($dest, $source, 'sub_t', ['p_t'], "owner => 'sam'");
ok(wait_caught_up($source, $dest, 'sub_t'), 'the subscription owned by sam streams');
my $datadir = $dest->data_dir;
my $host = $dest->host;
my $port = $dest->port;
my $server_conninfo = "host=$host port=$port dbname=postgres user=postgres passfile=$datadir/../pgpass "
	. "sslkey=$datadir/server.key service=x";
(my $q_conninfo = $server_conninfo) =~ s/'/''/g;
my @conninfo_calls = (
	"SELECT cdc.create_subscription('evil', '$q_conninfo', ARRAY['p_t'])",
	"SELECT cdc.create_subscription('evil', '$q_conninfo', ARRAY['p_t'], owner => 'mallory')",
	"SELECT cdc.alter_subscription('sub_t', conninfo => '$q_conninfo')",
	"SELECT cdc.refresh_subscription('sub_t')",
	"SELECT cdc.resync_table('sub_t', 't')",
	"SELECT cdc._check_conninfo('$q_conninfo')",
	"SELECT cdc._publication_tables('$q_conninfo', ARRAY['p_t'])",
	"SELECT cdc._create_source_slot(1)",
	"CALL cdc.audit('sub_t')",
	"SELECT cdc.enable_subscription('sub_t')",
	"SELECT cdc.skip_transaction('sub_t', '0/1', 'x')",
	"SELECT cdc.accept_gap('sub_t', 'x')",
	"SELECT cdc.drop_subscription('sub_t')",
	"UPDATE cdc.subscription SET conninfo = '$q_conninfo'",
	"INSERT INTO cdc.subscription (name, conninfo, publications, slot_name) VALUES ('evil', '$q_conninfo', '{p_t}', 'evil')");
for my $role ('mallory', 'sam')
{
	for my $call (@conninfo_calls)
	{
		($rc, $out, $err) = psql_as($role, 'postgres', $call);
		(my $short = $call) =~ s/'[^']*host=[^']*'/'<server conninfo>'/g;
		ok($err =~ /ERROR:  (permission denied|must be superuser|only superusers)/, "$role: refused: $short")
			or diag("rc $rc: $err");
	}
}
# granted the table, the trigger still refuses them
$dest->safe_psql('postgres', 'GRANT SELECT, INSERT, UPDATE ON cdc.subscription TO sam');
($rc, $out, $err) = psql_as('sam', 'postgres', "UPDATE cdc.subscription SET conninfo = '$q_conninfo' WHERE name = 'sub_t'");
ok($err =~ /ERROR:  permission denied to update cdc.subscription/, 'sam granted UPDATE on cdc.subscription: its conninfo is still refused')
	or diag("rc $rc: $err");
($rc, $out, $err) = psql_as('sam', 'postgres',
	"INSERT INTO cdc.subscription (name, conninfo, publications, slot_name) VALUES ('evil', '$q_conninfo', '{p_t}', 'evil')");
ok($err =~ /ERROR:  permission denied/, 'sam granted INSERT on cdc.subscription: a new subscription is still refused')
	or diag("rc $rc: $err");
$dest->safe_psql('postgres', 'REVOKE SELECT, INSERT, UPDATE ON cdc.subscription FROM sam');
is($dest->safe_psql('postgres', q{SELECT string_agg(name || ':' || (conninfo LIKE '%passfile%')::text, ',') FROM cdc.subscription}),
	'sub_t:false', 'one subscription, its conninfo the superuser\'s');
# sam reads no conninfo either
($rc, $out, $err) = psql_as('sam', 'postgres', 'SELECT conninfo FROM cdc.subscription');
ok($err =~ /ERROR:  permission denied/, 'sam cannot read cdc.subscription');

# ===========================================================================
# 3. A table owner's code in the worker
# ===========================================================================
$source->safe_psql('postgres', q{
	CREATE TABLE m_t (id int PRIMARY KEY, v text);
	INSERT INTO m_t VALUES (1, 'copied');
	CREATE TABLE victim (id int PRIMARY KEY, v text);
	INSERT INTO victim VALUES (1, 'source');
	CREATE PUBLICATION p_m FOR TABLE m_t, victim});
$dest->safe_psql('postgres', q{
	CREATE TABLE victim (id int PRIMARY KEY, v text);
	CREATE TABLE m_t (id int PRIMARY KEY, v text);
	ALTER TABLE m_t OWNER TO mallory;
	-- what mallory's code found: written by a definer helper of the superuser
	CREATE TABLE tried (phase text, what text, state text, by_user name, sess_user name);
	CREATE FUNCTION note(phase text, what text, state text, by_user name DEFAULT current_user,
	                     sess_user name DEFAULT session_user) RETURNS void LANGUAGE sql SECURITY DEFINER
	  SET search_path = pg_catalog, pg_temp
	  AS $$ INSERT INTO public.tried VALUES (phase, what, state, by_user, sess_user) $$;
	REVOKE ALL ON FUNCTION note(text, text, text, name, name) FROM PUBLIC;
	GRANT EXECUTE ON FUNCTION note(text, text, text, name, name) TO mallory;
	CREATE SCHEMA mallory_s AUTHORIZATION mallory});
# mallory's code: every attempt in its own subtransaction, its SQLSTATE noted
$dest->safe_psql('postgres', q{
SET ROLE mallory;
CREATE FUNCTION mallory_s.try(phase text, what text, stmt text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    EXECUTE stmt;
    PERFORM public.note(phase, what, '00000', current_user, session_user);
  EXCEPTION WHEN OTHERS THEN
    PERFORM public.note(phase, what, SQLSTATE, current_user, session_user);
  END;
END $$;
CREATE FUNCTION mallory_s.attempts() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE ph text := TG_OP || ':' || NEW.v;
BEGIN
  PERFORM mallory_s.try(ph, 'identity', 'SELECT 1');
  PERFORM mallory_s.try(ph, 'alter_role', 'ALTER ROLE mallory SUPERUSER');
  PERFORM mallory_s.try(ph, 'set_role', 'SET ROLE postgres');
  PERFORM mallory_s.try(ph, 'session_auth', 'SET SESSION AUTHORIZATION postgres');
  PERFORM mallory_s.try(ph, 'temp_table', 'CREATE TEMP TABLE tt (x int)');
  PERFORM mallory_s.try(ph, 'prepare', 'PREPARE mallory_p AS SELECT 1');
  PERFORM mallory_s.try(ph, 'listen', 'LISTEN mallory_c');
  PERFORM mallory_s.try(ph, 'held_cursor', 'DECLARE mallory_c CURSOR WITH HOLD FOR SELECT 1');
  PERFORM mallory_s.try(ph, 'cdc_setting', 'SELECT set_config(''cdc.max_event_size'', ''1048576'', false)');
  PERFORM mallory_s.try(ph, 'nested_apply', $q$SELECT public.cdc_apply('{"op": "u", "after": {"id": 1, "v": "mallory"}, "source": {"name": "m", "schema": "public", "table": "victim", "lsn": 999999999}}'::jsonb, 'public.victim')$q$);
  PERFORM mallory_s.try(ph, 'register_mapping', 'SELECT cdc.register_mapping(''public.victim'')');
  PERFORM mallory_s.try(ph, 'fold', 'SELECT cdc._fold_into_stream_mark(''public.victim'')');
  PERFORM mallory_s.try(ph, 'prune', 'SELECT count(*) FROM cdc.prune()');
  PERFORM mallory_s.try(ph, 'rename_source', 'SELECT cdc.rename_source(''a'', ''b'')');
  PERFORM mallory_s.try(ph, 'lock_mapping', 'LOCK TABLE cdc.mapping IN ACCESS EXCLUSIVE MODE');
  PERFORM mallory_s.try(ph, 'write_state', 'DELETE FROM cdc.entity_state');
  PERFORM mallory_s.try(ph, 'read_subscription', 'SELECT count(*) FROM cdc.subscription');
  PERFORM mallory_s.try(ph, 'read_file', 'SELECT pg_read_file(''postgresql.conf'')');
  PERFORM mallory_s.try(ph, 'copy_program', 'COPY (SELECT 1) TO PROGRAM ''true''');
  PERFORM mallory_s.try(ph, 'reload', 'SELECT pg_reload_conf()');
  -- a session-level search_path: undone with the operation (checked below)
  PERFORM set_config('search_path', 'mallory_s, pg_catalog', false);
  RETURN NEW;
END $$;
CREATE TRIGGER attempts BEFORE INSERT OR UPDATE ON m_t FOR EACH ROW EXECUTE FUNCTION mallory_s.attempts();
ALTER TABLE m_t ENABLE ALWAYS TRIGGER attempts;
-- planted in her schema: would run if an unqualified name of the engine reached it after her search_path
CREATE FUNCTION mallory_s.md5(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.note('planted', 'md5', 'ran'); RETURN pg_catalog.md5($1); END $$;
CREATE FUNCTION mallory_s.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.note('planted', 'now', 'ran'); RETURN pg_catalog.now(); END $$;
});
create_subscription($dest, $source, 'sub_m', ['p_m']);
ok(wait_caught_up($source, $dest, 'sub_m'), 'the copy of mallory\'s table and the victim is applied');
$source->safe_psql('postgres', q{
	INSERT INTO m_t VALUES (2, 'streamed');
	UPDATE m_t SET v = 'updated' WHERE id = 1;
	UPDATE victim SET v = 'source2' WHERE id = 1});
ok(wait_caught_up($source, $dest, 'sub_m'), 'the stream is applied');

is($dest->safe_psql('postgres', q{SELECT string_agg(DISTINCT phase, ',' ORDER BY phase) FROM tried}),
	'INSERT:copied,INSERT:streamed,UPDATE:updated', 'mallory\'s trigger ran in the copy and in the stream');
is($dest->safe_psql('postgres', q{SELECT string_agg(DISTINCT by_user || '/' || sess_user, ',') FROM tried WHERE phase <> 'planted'}),
	'mallory/postgres', 'as mallory (the session user is the worker\'s)');
my $n_tried = $dest->safe_psql('postgres', q{SELECT count(*) FROM tried WHERE what <> 'identity'});
is($dest->safe_psql('postgres', q{
	SELECT coalesce(string_agg(phase || ' ' || what, ', '), 'none') FROM tried WHERE state = '00000' AND what <> 'identity'}),
	'none', "every attempt of mallory's code was refused ($n_tried attempts)");
# the restricted operation's refusals, not some other failure
is($dest->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT what || ':' || state, ',' ORDER BY what || ':' || state) FROM tried
	 WHERE what IN ('temp_table', 'prepare', 'listen', 'held_cursor', 'set_role', 'session_auth')}),
	'held_cursor:42501,listen:42501,prepare:42501,session_auth:42501,set_role:42501,temp_table:42501',
	'what would outlive the operation: refused as a security-restricted operation (42501)');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM tried WHERE phase = 'planted'}), '0',
	'her search_path did not outlive her trigger: nothing planted ran');
is($dest->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f', 'mallory is no superuser');
is($dest->safe_psql('postgres', q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM victim}), '1:source2',
	'the victim has the source\'s rows only');
is($dest->safe_psql('postgres', q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM m_t}), '1:updated,2:streamed',
	'mallory\'s table has the source\'s rows');
is($dest->safe_psql('postgres', q{SELECT setting FROM pg_settings WHERE name = 'cdc.max_event_size'}), '16384',
	'cdc.max_event_size unchanged');
is(status_row($dest, 'sub_m', 'state'), 'streaming', 'sub_m streams');


# ===========================================================================
# 3b. Temporary objects of a table owner's code in the worker's session
# ===========================================================================
# The worker's session outlives each table owner's operation, and its
# temporary schema is shared by every table's code.  PostgreSQL refuses a
# temporary relation or type in a security-restricted operation, but not a
# temporary function, operator, aggregate, collation or text search
# configuration: mallory's code creates them (the first makes the worker's
# temporary schema), and they stay for the worker's life.  PostgreSQL never
# looks up any of those in pg_temp unless named with it, so the superuser's
# trigger on its own table, with SET search_path = public (pg_temp first,
# implicitly) and unqualified names that mallory planted in pg_temp (a
# type, an operator, a function, an aggregate, a collation, a
# configuration), in the same local transaction and in a later one,
# resolves them in public and pg_catalog only, and runs nothing of hers.
$source->safe_psql('postgres', q{
	CREATE TABLE m_tmp (id int PRIMARY KEY, v text);
	CREATE TABLE victim2 (id int PRIMARY KEY, v text);
	CREATE PUBLICATION p_x FOR TABLE m_tmp, victim2});
$dest->safe_psql('postgres', q{
	CREATE TABLE m_tmp (id int PRIMARY KEY, v text);
	ALTER TABLE m_tmp OWNER TO mallory;
	CREATE TABLE victim2 (id int PRIMARY KEY, v text);
	CREATE TYPE public.mood AS ENUM ('ok');
	CREATE FUNCTION public.victim2_check() RETURNS trigger LANGUAGE plpgsql SET search_path = public AS $$
	BEGIN
	  -- each name exists in public or pg_catalog, and mallory plants one in pg_temp
	  EXECUTE 'SELECT ''ok''::mood, lower(''X''), 1 + 1, ''a'' COLLATE "C", to_tsvector(''simple'', ''x''), $1 = ''x'', '
	          '(SELECT count(*) FROM (VALUES (1)) v(x))' USING NEW.v;
	  RETURN NEW;
	END $$;
	CREATE TRIGGER victim2_check BEFORE INSERT OR UPDATE ON victim2 FOR EACH ROW EXECUTE FUNCTION public.victim2_check();
	ALTER TABLE victim2 ENABLE ALWAYS TRIGGER victim2_check;
	SET ROLE mallory;
	CREATE FUNCTION mallory_s.grab(v anyelement) RETURNS boolean LANGUAGE plpgsql AS $$
	BEGIN
	  PERFORM public.note('grab', 'ran', '00000', current_user, session_user);
	  BEGIN
	    ALTER ROLE mallory SUPERUSER;
	  EXCEPTION WHEN OTHERS THEN
	    NULL;
	  END;
	  RETURN true;
	END $$;
	CREATE FUNCTION mallory_s.grab_text(a text) RETURNS text LANGUAGE plpgsql AS $$
	BEGIN PERFORM mallory_s.grab(a); RETURN pg_catalog.lower(a); END $$;
	CREATE FUNCTION mallory_s.grab_eq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $$
	BEGIN PERFORM mallory_s.grab(a); RETURN a OPERATOR(pg_catalog.=) b; END $$;
	CREATE FUNCTION mallory_s.grab_add(a int, b int) RETURNS int LANGUAGE plpgsql AS $$
	BEGIN PERFORM mallory_s.grab(a); RETURN a OPERATOR(pg_catalog.+) b; END $$;
	CREATE FUNCTION mallory_s.grab_sfunc(s bigint, x anyelement) RETURNS bigint LANGUAGE plpgsql AS $$
	BEGIN PERFORM mallory_s.grab(x); RETURN s OPERATOR(pg_catalog.+) 1; END $$;
	CREATE FUNCTION mallory_s.plant() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	  PERFORM mallory_s.try('plant', 'temp_domain', 'CREATE DOMAIN pg_temp.mood AS text CHECK (mallory_s.grab(VALUE))');
	  PERFORM mallory_s.try('plant', 'temp_enum', 'CREATE TYPE pg_temp.mood AS ENUM (''ok'')');
	  PERFORM mallory_s.try('plant', 'temp_view', 'CREATE VIEW pg_temp.v AS SELECT 1');
	  PERFORM mallory_s.try('plant', 'temp_sequence', 'CREATE SEQUENCE pg_temp.s');
	  PERFORM mallory_s.try('plant', 'temp_table', 'CREATE TABLE pg_temp.t (x int)');
	  PERFORM mallory_s.try('plant', 'temp_function', 'CREATE FUNCTION pg_temp.lower(text) RETURNS text LANGUAGE sql AS ''SELECT mallory_s.grab_text($1)''');
	  PERFORM mallory_s.try('plant', 'temp_operator_add', 'CREATE OPERATOR pg_temp.+ (leftarg = int, rightarg = int, function = mallory_s.grab_add)');
	  PERFORM mallory_s.try('plant', 'temp_operator_eq', 'CREATE OPERATOR pg_temp.= (leftarg = text, rightarg = text, function = mallory_s.grab_eq)');
	  PERFORM mallory_s.try('plant', 'temp_aggregate', 'CREATE AGGREGATE pg_temp.count(anyelement) (sfunc = mallory_s.grab_sfunc, stype = bigint, initcond = ''0'')');
	  PERFORM mallory_s.try('plant', 'temp_collation', 'CREATE COLLATION pg_temp."C" (locale = ''C'')');
	  PERFORM mallory_s.try('plant', 'temp_ts_config', 'CREATE TEXT SEARCH CONFIGURATION pg_temp.simple (COPY = pg_catalog.simple)');
	  RETURN NEW;
	END $$;
	CREATE TRIGGER plant BEFORE INSERT OR UPDATE ON m_tmp FOR EACH ROW EXECUTE FUNCTION mallory_s.plant();
	ALTER TABLE m_tmp ENABLE ALWAYS TRIGGER plant;
	RESET ROLE});
create_subscription($dest, $source, 'sub_x', ['p_x']);
ok(wait_caught_up($source, $dest, 'sub_x'), 'sub_x: the empty tables are copied');
# one source transaction (one local transaction), and then another
$source->safe_psql('postgres', q{BEGIN; INSERT INTO m_tmp VALUES (1, 'plant'); INSERT INTO victim2 VALUES (1, 'x'); COMMIT});
$source->safe_psql('postgres', q{UPDATE victim2 SET v = 'y'});
ok(wait_caught_up($source, $dest, 'sub_x'), 'sub_x: the changes are applied');
is($dest->safe_psql('postgres', q{
	SELECT string_agg(what || ':' || state, ',' ORDER BY what) FROM tried WHERE phase = 'plant'}),
	'temp_aggregate:00000,temp_collation:00000,temp_domain:42501,temp_enum:42501,temp_function:00000,'
	. 'temp_operator_add:00000,temp_operator_eq:00000,temp_sequence:42501,temp_table:42501,temp_ts_config:00000,'
	. 'temp_view:42501',
	'in pg_temp: relations and types refused (42501); functions, operators, aggregates, collations, configurations made');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM tried WHERE phase = 'grab'}), '0',
	'none of them ran in the superuser\'s trigger');
is($dest->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f', 'mallory is no superuser');
is($dest->safe_psql('postgres', q{
	SELECT (SELECT string_agg(id || ':' || v, ',') FROM m_tmp) || ' ' || (SELECT string_agg(id || ':' || v, ',') FROM victim2)}),
	'1:plant 1:y', 'both tables have the source\'s rows');
is(status_row($dest, 'sub_x', 'state'), 'streaming', 'sub_x streams');
$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('sub_x', drop_slot => true)});

# ===========================================================================
# 4. Identifiers from the source
# ===========================================================================
my $ddl = q{
	CREATE SCHEMA "we""ird.S";
	CREATE TABLE "we""ird.S"."Tåb.le ""x"" $1" ("i d" int PRIMARY KEY, "a""b" text, "x.y" text, "select" int, "user" text,
	                                           "ü €" text, "$1" text)};
$source->safe_psql('postgres', $ddl . q{;
	INSERT INTO "we""ird.S"."Tåb.le ""x"" $1" VALUES (1, 'q''uote', 'd.ot', 7, 'not current_user', 'ü', '$1');
	CREATE PUBLICATION p_w FOR TABLE "we""ird.S"."Tåb.le ""x"" $1"});
$dest->safe_psql('postgres', $ddl . q{;
	SELECT cdc.register_mapping('"we""ird.S"."Tåb.le ""x"" $1"', outbox => true)});
create_subscription($dest, $source, 'sub_w', ['p_w']);
ok(wait_caught_up($source, $dest, 'sub_w'), 'the table of odd names is copied');
$source->safe_psql('postgres', q{
	INSERT INTO "we""ird.S"."Tåb.le ""x"" $1" VALUES (2, E'back\\slash', '"', 8, 'u', '€', 'x');
	UPDATE "we""ird.S"."Tåb.le ""x"" $1" SET "i d" = 3, "select" = 9 WHERE "i d" = 1;
	DELETE FROM "we""ird.S"."Tåb.le ""x"" $1" WHERE "i d" = 2;
	INSERT INTO "we""ird.S"."Tåb.le ""x"" $1" VALUES (4, NULL, NULL, NULL, NULL, NULL, NULL)});
ok(wait_caught_up($source, $dest, 'sub_w'), 'its changes are applied');
compare_table($source, $dest, q{SELECT * FROM "we""ird.S"."Tåb.le ""x"" $1" ORDER BY 1}, 'the rows equal the source');
is($dest->safe_psql('postgres', q{
	SELECT string_agg(op || ':' || (entity_key->>'i d'), ',' ORDER BY id) FROM cdc.outbox
	 WHERE target = '"we""ird.S"."Tåb.le ""x"" $1"'::regclass}),
	'c:2,d:1,u:3,d:2,c:4', 'the outbox names the key column "i d" (a key change: the old key\'s delete, the new key\'s row)');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.subscription_errors}), '0', 'no worker error');

# ===========================================================================
# 5. The worker's session search_path, changed by code it runs unswitched
# ===========================================================================
# A subscription owned by subo, an ordinary role, of which mallory is a
# member: her table's code runs as subo, without a security-restricted
# operation or a GUC nest level (she could act as subo anyway), so her
# trigger's set_config('search_path', 'mallory_p, pg_catalog', false) stays
# in the worker's session after it.  Every statement the worker runs
# afterwards (the bookkeeping as the extension owner, the status, outbox and
# counters writes, a truncate, the copy of a table added by a refresh, an
# error and its record) then resolves names with her schema first, where
# she planted the overloads of sql/security.sql (functions, aggregates,
# operators, types that win resolution).  Expected: none of them runs, and
# she stays an ordinary role: the worker's statements name everything with
# its schema, as the SQL path's do.
$dest->safe_psql('postgres', q{
	CREATE ROLE subo;
	GRANT subo TO mallory;
	GRANT CREATE ON SCHEMA public TO subo;
	CREATE SCHEMA mallory_p AUTHORIZATION mallory;
	CREATE TABLE public.ran (id bigserial, what text, ran_as name, restricted boolean, backend text);
	CREATE FUNCTION public.record_run(what text) RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
	BEGIN
	  INSERT INTO public.ran (what, ran_as, restricted, backend)
	  VALUES (what, pg_catalog.current_setting('sec.caller'), pg_catalog.current_setting('sec.restricted')::boolean,
	          (SELECT a.backend_type FROM pg_catalog.pg_stat_activity a WHERE a.pid = pg_catalog.pg_backend_pid()));
	END $$;
	CREATE TABLE public.pm (id int PRIMARY KEY, v text);
	ALTER TABLE public.pm OWNER TO mallory;
	CREATE TABLE public.pn (id int PRIMARY KEY, v text);
	ALTER TABLE public.pn OWNER TO subo;
	CREATE TABLE public.pq (id int PRIMARY KEY, v text);
	ALTER TABLE public.pq OWNER TO subo;
	SELECT cdc.register_mapping('public.pn', outbox => true);
	-- the search_path the rest runs under, as a trigger of subo's on pn reads it
	CREATE TABLE public.seen_path (path text);
	GRANT INSERT ON public.seen_path TO subo;
	SET ROLE mallory;
	CREATE FUNCTION mallory_p.leave_path() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	  PERFORM pg_catalog.set_config('search_path', 'mallory_p, pg_catalog', false);
	  RETURN NEW;
	END $$;
	CREATE TRIGGER leave_path BEFORE INSERT OR UPDATE ON public.pm FOR EACH ROW EXECUTE FUNCTION mallory_p.leave_path();
	-- subo applies her table (she is a member of subo): it needs the privileges
	GRANT SELECT, INSERT, UPDATE, DELETE ON public.pm TO subo;
	ALTER TABLE public.pm ENABLE ALWAYS TRIGGER leave_path;
	RESET ROLE;
	SET ROLE subo;
	CREATE FUNCTION public.note_path() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	  INSERT INTO public.seen_path VALUES (pg_catalog.current_setting('search_path'));
	  RETURN NEW;
	END $$;
	CREATE TRIGGER note_path BEFORE INSERT ON public.pn FOR EACH ROW EXECUTE FUNCTION public.note_path();
	ALTER TABLE public.pn ENABLE ALWAYS TRIGGER note_path;
	RESET ROLE});
$dest->safe_psql('postgres', planted_overloads_sql(role => 'mallory', body => 'mallory_p', schemas => ['mallory_p'], typed_rows => q{
        ('to_jsonb', 'public.pn', 'jsonb', 'pg_catalog.to_jsonb($1)'),
        ('to_jsonb', 'public.pm', 'jsonb', 'pg_catalog.to_jsonb($1)'),
        ('to_jsonb', 'text', 'jsonb', 'pg_catalog.to_jsonb($1)'),
        ('jsonb_populate_record', 'public.pn, jsonb', 'public.pn', 'pg_catalog.jsonb_populate_record($1, $2)'),
}));
$source->safe_psql('postgres', q{
	CREATE TABLE public.pm (id int PRIMARY KEY, v text);
	CREATE TABLE public.pn (id int PRIMARY KEY, v text);
	CREATE TABLE public.pq (id int PRIMARY KEY, v text);
	INSERT INTO public.pq VALUES (1, 'copied later');
	CREATE PUBLICATION p_p FOR TABLE public.pm, public.pn});
create_subscription($dest, $source, 'sub_p', ['p_p'], "owner => 'subo'");
ok(wait_caught_up($source, $dest, 'sub_p'), 'sub_p (owned by subo) streams');
# her change first, then in the same and in later source transactions the others
$source->safe_psql('postgres', q{
	BEGIN; INSERT INTO public.pm VALUES (1, 'path'); INSERT INTO public.pn VALUES (1, 'a'); COMMIT;
	INSERT INTO public.pn VALUES (2, 'b');
	UPDATE public.pn SET v = 'c' WHERE id = 1;
	DELETE FROM public.pn WHERE id = 2;
	TRUNCATE public.pn;
	INSERT INTO public.pn VALUES (3, 'd');
	ALTER PUBLICATION p_p ADD TABLE public.pq});
ok(wait_caught_up($source, $dest, 'sub_p'), 'sub_p applied the changes');
is($dest->safe_psql('postgres', q{SELECT string_agg(DISTINCT path, ' | ') FROM public.seen_path}), 'mallory_p, pg_catalog',
	'her search_path stayed in the worker\'s session (what the rest ran under)');
# a table added to the publication: copied by the worker under that path
$dest->safe_psql('postgres', q{SELECT cdc.refresh_subscription('sub_p')});
ok($dest->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.pq}), 'the added table is copied');
# an error and its record, then the retry
$dest->safe_psql('postgres', q{ALTER TABLE public.pn ADD CONSTRAINT no_e CHECK (v <> 'e')});
$source->safe_psql('postgres', q{INSERT INTO public.pm VALUES (2, 'path again'); INSERT INTO public.pn VALUES (4, 'e')});
ok(wait_status($dest, 'sub_p', q{state = 'error'}), 'sub_p stops at the change its table refuses');
$dest->safe_psql('postgres', q{ALTER TABLE public.pn DROP CONSTRAINT no_e});
ok(wait_caught_up($source, $dest, 'sub_p'), 'and goes on once the table accepts it');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran WHERE what LIKE 'mallory_p.%'}), '0',
	'none of her planted objects ran in the worker');
is($dest->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f', 'mallory is no superuser');
compare_table($source, $dest, 'SELECT * FROM public.pn ORDER BY id', 'pn equals the source');
is($dest->safe_psql('postgres', q{SELECT string_agg(op, '' ORDER BY id) FROM cdc.outbox WHERE target = 'public.pn'::regclass}),
	'ccudtcc', 'pn\'s outbox rows');
$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('sub_p', drop_slot => true)});

done_testing();

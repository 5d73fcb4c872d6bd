# ALTER EXTENSION cdc_apply UPDATE from 0.1.0 runs no table owner's code
# as the superuser updating (security review h4; docs/security.md, "The
# update from 0.1.0").
#
# The update re-prints the cdc_key of history tables (numeric keys without
# trailing zeros, and so on: docs/sql-reference.md, "Upgrading") with an
# UPDATE of each history table.  That UPDATE fires the table's triggers and
# evaluates its CHECK constraints, index expressions and generated columns.
# It ran as the superuser: the owner of a history table (mallory, an
# ordinary role whose table a superuser had mapped, or who had been granted
# cdc.register_mapping in 0.1.0) added a BEFORE UPDATE trigger and a row
# whose key prints differently in 0.2.0, and her trigger's
# ALTER ROLE mallory SUPERUSER succeeded during the update.
#
#  1. mallory's trigger and CHECK constraint run as mallory, in a
#     security-restricted operation (her ALTER ROLE fails, 42501), and she
#     stays an ordinary role; the row is re-keyed.
#  2. A history table whose owner's trigger raises does not stop the
#     update: that table keeps its 0.1.0 keys, with a WARNING naming it and
#     the error's SQLSTATE.
#  3. The helper the update uses exists only during the update.
#  4. A mapping copied from 0.1.0 whose handler its table's owner may not
#     execute (0.1.0's register_mapping took any handler: a superuser's
#     SECURITY DEFINER function, revoked from PUBLIC, on mallory's table) is
#     named by a WARNING of the update; 0.2.0 refuses to write such a
#     mapping but keeps the copied one.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('upgrade_owner_code');
$node->init;
$node->start;
# up: the escalation (part 1); up2: an owner's error (part 2)
$node->safe_psql('postgres', 'CREATE DATABASE up; CREATE DATABASE up2; CREATE ROLE mallory');
sub uq { return $node->safe_psql('up', $_[0]); }
sub uq2 { return $node->safe_psql('up2', $_[0]); }

# 0.1.0, its SQL only: no 0.1.0 C function is called below (register_mapping
# is PL/pgSQL), and history rows are written by their owner directly.
for my $db ('up', 'up2') {
	$node->safe_psql($db, q{CREATE EXTENSION cdc_apply VERSION '0.1.0'; CREATE SCHEMA m AUTHORIZATION mallory});
	is($node->safe_psql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'cdc_apply'}), '0.1.0', "$db: installed as 0.1.0");
}

my $history_columns = q{id numeric, v text, cdc_seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  cdc_key jsonb, cdc_version bigint[], cdc_op text, cdc_snapshot boolean, cdc_source_ts timestamptz,
  cdc_source jsonb, cdc_delivery_key text, cdc_recorded_at timestamptz, UNIQUE (cdc_key, cdc_version)};
uq(qq{
SET ROLE mallory;
CREATE TABLE m.ran (what text, ran_as name, outcome text);
CREATE TABLE m.hist ($history_columns);
RESET ROLE;
-- the superuser maps its tenant's history table (or granted it
-- cdc.register_mapping in 0.1.0): what the update re-keys
SELECT cdc.register_mapping('m.hist', 'public', 's', key_columns => '{id}', mode => 'history', source_name => 'srv');
SET ROLE mallory;
-- each attempt records who ran it and whether ALTER ROLE went through
CREATE FUNCTION m.escalate(what text) RETURNS boolean LANGUAGE plpgsql AS \$\$
BEGIN
  BEGIN
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
    INSERT INTO m.ran VALUES (what, current_user, 'escalated');
  EXCEPTION WHEN OTHERS THEN
    INSERT INTO m.ran VALUES (what, current_user, SQLSTATE);
  END;
  RETURN true;
END \$\$;
CREATE FUNCTION m.on_update() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN PERFORM m.escalate('trigger'); RETURN NEW; END \$\$;
CREATE TRIGGER escalate BEFORE UPDATE ON m.hist FOR EACH ROW EXECUTE FUNCTION m.on_update();
ALTER TABLE m.hist ADD CONSTRAINT escalate CHECK (m.escalate('check'));
-- a row whose numeric key 0.2.0 prints without the trailing zero
INSERT INTO m.hist (id, v, cdc_key, cdc_version, cdc_op) VALUES (1.50, 'x', '{"id": "1.50"}', '{1,2,3,4}', 'c');
TRUNCATE m.ran;
RESET ROLE;
});
uq2(qq{
SET ROLE mallory;
CREATE TABLE m.noisy ($history_columns);
RESET ROLE;
SELECT cdc.register_mapping('m.noisy', 'public', 'n', key_columns => '{id}', mode => 'history', source_name => 'srv');
SET ROLE mallory;
CREATE FUNCTION m.refuse() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN RAISE EXCEPTION 'mallory refuses' USING ERRCODE = 'P0042'; END \$\$;
CREATE TRIGGER refuse BEFORE UPDATE ON m.noisy FOR EACH ROW EXECUTE FUNCTION m.refuse();
INSERT INTO m.noisy (id, v, cdc_key, cdc_version, cdc_op) VALUES (2.50, 'y', '{"id": "2.50"}', '{1,2,3,4}', 'c');
CREATE TABLE m.handled (id integer PRIMARY KEY, v text);
RESET ROLE;
-- part 4: a superuser's function mallory may not execute, as the handler of her table
CREATE FUNCTION public.secret(op text, old jsonb, new jsonb, meta jsonb) RETURNS void
  LANGUAGE sql SECURITY DEFINER AS 'SELECT NULL::void';
REVOKE EXECUTE ON FUNCTION public.secret(text, jsonb, jsonb, jsonb) FROM PUBLIC;
SELECT cdc.register_mapping('m.handled', 'public', 'h', mode => 'handler',
                            handler => 'public.secret(text, jsonb, jsonb, jsonb)', source_name => 'srv');
});
is(uq(q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f', 'mallory is an ordinary role before the update');

# ---------------------------------------------------------------------------
# 1. the update runs mallory's code as mallory
# ---------------------------------------------------------------------------
my ($rc, $out, $err) = $node->psql('up', q{ALTER EXTENSION cdc_apply UPDATE TO '0.2.0'});
is($rc, 0, 'the update succeeds') or diag($err);
is(uq(q{SELECT extversion FROM pg_extension WHERE extname = 'cdc_apply'}), '0.2.0', 'updated to 0.2.0');
is(uq(q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f',
	'mallory is still an ordinary role after the update');
is( uq(q{SELECT string_agg(what || ' ' || ran_as || ' ' || outcome, ', ' ORDER BY what) FROM m.ran}),
	'check mallory 42501, trigger mallory 42501',
	"mallory's trigger and CHECK constraint ran as mallory, and ALTER ROLE was refused (42501)");
is(uq(q{SELECT cdc_key::text FROM m.hist}), '{"id": "1.5"}', "mallory's history row was re-keyed the 0.2.0 way");
unlike($err, qr/handlers their table's owner may not execute/, 'no WARNING about handlers where every handler may be executed');

# ---------------------------------------------------------------------------
# 2. an error of the owner's code does not stop the update
# ---------------------------------------------------------------------------
($rc, $out, $err) = $node->psql('up2', q{ALTER EXTENSION cdc_apply UPDATE TO '0.2.0'});
is($rc, 0, 'the update succeeds where a history table owner\'s trigger raises') or diag($err);
is(uq2(q{SELECT extversion FROM pg_extension WHERE extname = 'cdc_apply'}), '0.2.0', 'up2: updated to 0.2.0');
is(uq2(q{SELECT cdc_key::text FROM m.noisy}), '{"id": "2.50"}', 'the table whose trigger raised keeps its 0.1.0 key');
like(
	$err,
	qr/WARNING:  cdc_apply 0.2.0: history table m.noisy keeps its 0.1.0 cdc_key values: re-keying it as its owner failed: mallory refuses \(SQLSTATE P0042\)/,
	'a WARNING names that table and the error');

# ---------------------------------------------------------------------------
# 4. the copied mapping whose handler its owner may not execute is named
# ---------------------------------------------------------------------------
like(
	$err,
	qr/WARNING:  mappings copied from 0.1.0 call handlers their table's owner may not execute: m.handled \(handler public\.secret\(text,jsonb,jsonb,jsonb\), owner mallory\)/,
	'a WARNING names the mapping, its handler and its owner');
is(uq2(q{SELECT handler::text FROM cdc.mapping WHERE target = 'm.handled'::regclass}), 'secret(text,jsonb,jsonb,jsonb)',
	'the copied mapping is kept');
# mallory, a 0.2.0 delegate, may not register it so again
uq2(q{GRANT EXECUTE ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
        bigint, text, text, text, regprocedure, text, text) TO mallory});
my ($rc4, $out4, $err4) = $node->psql('up2', q{\set VERBOSITY verbose
SET ROLE mallory;
SELECT cdc.register_mapping('m.handled', 'public', 'h', mode => 'handler',
                            handler => 'public.secret(text, jsonb, jsonb, jsonb)', source_name => 'srv')});
like($err4, qr/ERROR:  42501:/, '0.2.0 refuses mallory that handler (42501)') or diag($err4);

# ---------------------------------------------------------------------------
# 3. the helper is gone
# ---------------------------------------------------------------------------
for my $db ('up', 'up2') {
	is($node->safe_psql($db, q{SELECT count(*) FROM pg_proc WHERE proname = '_upgrade_history_keys'}), '0',
		"$db: cdc._upgrade_history_keys exists only during the update");
}

$node->stop;
done_testing();

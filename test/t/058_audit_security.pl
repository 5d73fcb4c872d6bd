# cdc.audit and cdc.resync run as a superuser; a table owner's code must
# still run as the table owner (docs/security.md, "The worker's identity",
# promise 1).  mallory, an ordinary role, owns a destination table whose key
# column is her domain with a CHECK constraint calling her function, which
# records who ran it and, when that is a superuser, makes mallory one.  The
# audit converts key values to the key's type (range bounds while it
# bisects, the keys of a leaf range, the keys it re-checks) and the resync
# the keys of the findings it repairs: that conversion used to run as the
# superuser who called them, so mallory became a superuser.  It must run
# as mallory, in a security-restricted operation, and find and repair the
# same rows as for any table.
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

$source->safe_psql('postgres', q{
CREATE TABLE acct (id int PRIMARY KEY, body text);
INSERT INTO acct SELECT g, 'b' || g FROM generate_series(1, 50) g;
CREATE PUBLICATION pub FOR TABLE acct;
});
$dest->safe_psql('postgres', q{
CREATE ROLE mallory;
CREATE SCHEMA m AUTHORIZATION mallory;
-- who ran mallory's code
CREATE TABLE public.ran (ran_as name, super boolean, restricted boolean);
GRANT INSERT ON public.ran TO mallory;
SET ROLE mallory;
CREATE FUNCTION m.check_key(v int) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  su boolean := (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user);
  restricted boolean := false;
BEGIN
  BEGIN
    CREATE TEMP TABLE probe_restricted (x int);  -- refused in a security-restricted operation
    DROP TABLE probe_restricted;
  EXCEPTION WHEN insufficient_privilege THEN
    restricted := true;
  END;
  INSERT INTO public.ran VALUES (current_user, su, restricted);
  IF su THEN
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
  END IF;
  RETURN true;
END $$;
CREATE DOMAIN m.k AS int CHECK (m.check_key(VALUE));
CREATE TABLE m.acct (id m.k PRIMARY KEY, body text);
RESET ROLE;
SELECT cdc.register_mapping('m.acct', source_schema => 'public', source_table => 'acct', source_name => 'sub');
});
create_subscription($dest, $source, 'sub', ['pub']);
ok(wait_caught_up($source, $dest, 'sub'), 'initial copy done, streaming');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM m.acct'), '50', 'the 50 rows were copied');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran WHERE ran_as <> 'mallory' OR super}),
	'0', 'the worker ran the domain constraint as mallory');

# mallory changes her own table: one row missing, one row different
$dest->safe_psql('postgres', q{
SET ROLE mallory;
DELETE FROM m.acct WHERE id = 7;
UPDATE m.acct SET body = 'changed' WHERE id = 33;
RESET ROLE;
TRUNCATE public.ran;
});

# page_rows 10: the audit bisects, so key bounds are converted too
my ($audit_id, $findings) = split /\|/,
  $dest->safe_psql('postgres', q{CALL cdc.audit('sub', page_rows => 10, leaf_rows => 4)});
is($findings, '2', 'the audit finds the two differences');
is($dest->safe_psql('postgres', "SELECT string_agg(key::text || ' ' || kind, ', ' ORDER BY key::text) "
	  . "FROM cdc.audit_findings WHERE audit_id = $audit_id"),
	'{"id": "33"} different, {"id": "7"} missing', 'the findings name keys 7 and 33');
is($dest->safe_psql('postgres', q{SELECT count(*) > 0 FROM public.ran}), 't',
	'the audit converted keys through the domain');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran WHERE ran_as <> 'mallory' OR super OR NOT restricted}),
	'0', 'the audit ran mallory\'s domain constraint as mallory, in a security-restricted operation');
is($dest->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f',
	'mallory is no superuser after the audit');

$dest->safe_psql('postgres', 'TRUNCATE public.ran');
my (undef, $repaired) = split /\|/, $dest->safe_psql('postgres', "CALL cdc.resync('sub', audit => $audit_id)");
is($repaired, '2', 'the resync repairs both keys');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran WHERE ran_as <> 'mallory' OR super OR NOT restricted}),
	'0', 'the resync ran mallory\'s domain constraint as mallory, in a security-restricted operation');
is($dest->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f',
	'mallory is no superuser after the resync');
is($dest->safe_psql('postgres', q{SELECT string_agg(id || ':' || body, ',' ORDER BY id) FROM m.acct WHERE id IN (7, 33)}),
	'7:b7,33:b33', 'keys 7 and 33 hold the source rows again');

done_testing();

# Review h2: a table owner's code that the worker applies drops tables
# (docs/security.md, "Targets"; sql/dangling_target_state.sql is the SQL
# side).  The worker's session runs with session_replication_role =
# replica, where the sql_drop event trigger cdc_drop_target_state, enabled
# for ORIGIN, did not fire: eve's ENABLE ALWAYS trigger dropped her mapped
# table eve.bait (mode handler, her function) and the mapping stayed,
# keyed by an OID that a later table gets once the OID counter wraps.
# Live, after pg_resetwal -o <that OID>, a superuser's new table got the
# OID, the mapping routed a published table to it and the worker ran eve's
# handler as the superuser.  Now the trigger is enabled ALWAYS; and since
# it stops the workers of a subscription whose table is dropped, it must
# not stop the worker that runs it: eve's trigger dropping a table of the
# same subscription made the worker terminate itself mid-transaction,
# restart at once and apply the same transaction again, without end.
#
# What must hold: the change that dropped the tables is applied once, the
# dropped tables' mapping and subscription entry are gone, the worker did
# not terminate itself, and the next change is applied.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('wdrop_source');
my $dest = new_dest('wdrop_dest');

my $tables = q{
CREATE TABLE public.evet (id int PRIMARY KEY, v text);
CREATE TABLE public.sub2 (id int PRIMARY KEY);
};
$source->safe_psql('postgres', $tables . q{
CREATE PUBLICATION pub FOR TABLE public.evet, public.sub2;
});
$dest->safe_psql('postgres', $tables . q{
CREATE ROLE eve;
CREATE SCHEMA eve AUTHORIZATION eve;
GRANT INSERT, UPDATE, DELETE ON cdc.mapping TO eve;
GRANT EXECUTE ON FUNCTION cdc.register_mapping(regclass, text, text, name[], name, boolean, text, text, text, text,
                                               bigint, text, text, text, regprocedure, text, text) TO eve;
ALTER TABLE public.evet OWNER TO eve;
ALTER TABLE public.sub2 OWNER TO eve;
SET ROLE eve;
CREATE TABLE eve.bait (id int PRIMARY KEY, v text);
CREATE FUNCTION eve.h(op text, old jsonb, new jsonb, meta jsonb) RETURNS void LANGUAGE sql AS $$ SELECT $$;
SELECT cdc.register_mapping('eve.bait', source_schema => 'public', source_table => 'ghost',
                            mode => 'handler', handler => 'eve.h(text,jsonb,jsonb,jsonb)');
CREATE FUNCTION eve.trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.v = 'drop' THEN
    DROP TABLE eve.bait;
    DROP TABLE public.sub2;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER trg BEFORE INSERT ON public.evet FOR EACH ROW EXECUTE FUNCTION eve.trg();
ALTER TABLE public.evet ENABLE ALWAYS TRIGGER trg;
RESET ROLE;
CREATE TABLE public.bait_oid AS SELECT 'eve.bait'::regclass::oid AS oid;
});

create_subscription($dest, $source, 'sub_drop', ['pub']);
ok(wait_caught_up($source, $dest, 'sub_drop'), 'the subscription streams');
my $terminated = qr/terminating background worker "cdc_apply worker" due to administrator command/;
my $log_offset = -s $dest->logfile;

$source->safe_psql('postgres', q{INSERT INTO public.evet VALUES (1, 'drop')});
$source->safe_psql('postgres', q{INSERT INTO public.evet VALUES (2, 'after')});
ok($dest->poll_query_until('postgres', 'SELECT count(*) = 2 FROM public.evet'), 'both changes applied')
  or diag($dest->safe_psql('postgres', q{SELECT state, retry_count, last_error FROM cdc.subscription_status}));

is($dest->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM cdc.mapping WHERE target::oid = (SELECT oid FROM public.bait_oid)),
       (SELECT count(*) FROM cdc.subscription_tables WHERE table_name = 'sub2'),
       to_regclass('eve.bait') IS NULL AND to_regclass('public.sub2') IS NULL}),
   '0|0|t', 'the tables dropped in the worker took their mapping and subscription entry with them');

my $log = slurp_file($dest->logfile, $log_offset);
my $n = () = $log =~ /$terminated/g;
is($n, 0, 'the worker did not terminate itself');
ok(wait_caught_up($source, $dest, 'sub_drop'), 'still streaming');
$source->safe_psql('postgres', q{INSERT INTO public.evet VALUES (3, 'later')});
ok($dest->poll_query_until('postgres', 'SELECT count(*) = 3 FROM public.evet'), 'a later change applied');

done_testing();

# Security review h2: the worker's newer write paths of state mode keep the
# identity and the checks of the path they replaced.
#  - An update of a table with a column the change does not carry (a
#    destination-only column) is written as an UPDATE of the columns it
#    carries, and as the upsert only when the key has no row
#    (single.cpp, UpdateBeforeUpsert; the fidelity fix e1b7d63).
#  - A key change of such a table reads the old row's destination-only
#    values and inserts the new key with them (the implied delete's
#    capture, 1218539).
# Both must run the table owner's code as the table's owner (default
# run_as_owner = false), never as the bootstrap superuser the worker
# connects as: the owner's ENABLE ALWAYS trigger here records current_user
# and tries ALTER ROLE ... SUPERUSER for every write.  A role subject to
# row-level security on the target must still be refused (the owner under
# FORCE ROW LEVEL SECURITY), with nothing of the change applied, and a
# revoked UPDATE must stop the UPDATE path as it stopped the upsert.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('ucid_source');
my $dest = new_dest('ucid_dest');

$source->safe_psql('postgres', q{
	CREATE TABLE public.t (id int PRIMARY KEY, n int NOT NULL);
	INSERT INTO public.t SELECT g, g FROM generate_series(1, 3) g;
	CREATE PUBLICATION pub FOR TABLE public.t});
# The destination's t belongs to tenant and has a destination-only column
# (note), set at the destination after the copy.
$dest->safe_psql('postgres', q{
	CREATE ROLE tenant;
	GRANT CREATE ON SCHEMA public TO tenant;
	SET ROLE tenant;
	CREATE TABLE public.t (id int PRIMARY KEY, n int NOT NULL, note text NOT NULL DEFAULT 'dest');
	RESET ROLE});
create_subscription($dest, $source, 'sub', ['pub']);
ok(wait_caught_up($source, $dest, 'sub'), 'the copy is applied');
$dest->safe_psql('postgres', q{UPDATE public.t SET note = 'kept' || id});
# Then tenant's trigger that logs every write and tries to escalate (created
# after the superuser's own writes above, which it would escalate through).
$dest->safe_psql('postgres', q{
	SET ROLE tenant;
	CREATE TABLE public.t_log (op text, id int, who name, escalated boolean);
	CREATE FUNCTION public.t_spy() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE esc boolean := true;
	BEGIN
	  BEGIN
	    EXECUTE 'ALTER ROLE tenant SUPERUSER';
	  EXCEPTION WHEN OTHERS THEN
	    esc := false;
	  END;
	  INSERT INTO public.t_log VALUES (TG_OP, CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END, current_user, esc);
	  RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
	END $$;
	CREATE TRIGGER t_spy BEFORE INSERT OR UPDATE OR DELETE ON public.t FOR EACH ROW EXECUTE FUNCTION public.t_spy();
	ALTER TABLE public.t ENABLE ALWAYS TRIGGER t_spy;
	RESET ROLE});

# an update (written as an UPDATE of id and n) and a key change (the new key
# inserted with the old row's note)
$source->safe_psql('postgres', q{UPDATE public.t SET n = n + 10 WHERE id = 1; UPDATE public.t SET id = 30 WHERE id = 3});
ok(wait_caught_up($source, $dest, 'sub'), 'the update and the key change are applied');
is($dest->safe_psql('postgres', q{SELECT string_agg(id || ':' || n || ':' || note, ',' ORDER BY id) FROM public.t}),
	'1:11:kept1,2:2:kept2,30:3:kept3', 'the update kept note, the key change moved it');
is($dest->safe_psql('postgres', q{SELECT string_agg(DISTINCT op, ',' ORDER BY op) FROM public.t_log}),
	'DELETE,INSERT,UPDATE', 'the trigger saw the update, the implied delete and the insert of the new key');
is($dest->safe_psql('postgres', q{SELECT string_agg(op || ':' || id, ',' ORDER BY op, id) FROM public.t_log}),
	'DELETE:3,INSERT:30,UPDATE:1', 'the update was written as an UPDATE alone (the upsert fired BEFORE INSERT too)');
is($dest->safe_psql('postgres', q{SELECT string_agg(DISTINCT who::text, ',') FROM public.t_log}),
	'tenant', "every write ran the owner's trigger as the owner");
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.t_log WHERE escalated}), '0', 'no ALTER ROLE ... SUPERUSER went through');
is($dest->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'tenant'}), 'f', 'tenant is no superuser');

# Row-level security applying to the owner: the UPDATE path is refused as the upsert was.
$dest->safe_psql('postgres', q{
	ALTER TABLE public.t ENABLE ROW LEVEL SECURITY;
	ALTER TABLE public.t FORCE ROW LEVEL SECURITY;
	CREATE POLICY t_all ON public.t USING (true)});
$source->safe_psql('postgres', q{UPDATE public.t SET n = n + 100 WHERE id = 2});
ok($dest->poll_query_until('postgres',
	q{SELECT last_error LIKE '%row-level security%' FROM cdc.subscription_status WHERE name = 'sub'}),
	'an update under FORCE ROW LEVEL SECURITY stops the worker naming row-level security');
is($dest->safe_psql('postgres', q{SELECT n FROM public.t WHERE id = 2}), '2', 'nothing of it applied');
$dest->safe_psql('postgres', q{ALTER TABLE public.t NO FORCE ROW LEVEL SECURITY});
ok(wait_caught_up($source, $dest, 'sub'), 'without FORCE the update is applied');
is($dest->safe_psql('postgres', q{SELECT n || ':' || note FROM public.t WHERE id = 2}), '102:kept2', 'applied as an update, note kept');

# UPDATE revoked from the owner: the UPDATE path stops as the upsert did.
$dest->safe_psql('postgres', q{REVOKE UPDATE ON public.t FROM tenant});
$source->safe_psql('postgres', q{UPDATE public.t SET n = n + 1000 WHERE id = 1});
ok($dest->poll_query_until('postgres',
	q{SELECT last_error LIKE '%permission denied%' FROM cdc.subscription_status WHERE name = 'sub'}),
	'without UPDATE the worker stops with permission denied');
is($dest->safe_psql('postgres', q{SELECT n FROM public.t WHERE id = 1}), '11', 'nothing of it applied');
$dest->safe_psql('postgres', q{GRANT UPDATE ON public.t TO tenant});
ok(wait_caught_up($source, $dest, 'sub'), 'after GRANT the update is applied');
is($dest->safe_psql('postgres', q{SELECT n || ':' || note FROM public.t WHERE id = 1}), '1011:kept1', 'the row as the source left it, note kept');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.t_log WHERE who <> 'tenant' OR escalated}), '0',
	'still no write as another role, no escalation');

$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('sub', drop_slot => true)});
done_testing();

# (review h2, holds) A DEFERRABLE exclusion constraint whose index
# expression is the table owner's code, on a table the worker applies as
# that owner in a security-restricted operation (subscription owned by the
# superuser who created it, the default).  The concern: PostgreSQL refuses
# to queue a user's deferred trigger in a security-restricted operation
# but queues the internal recheck trigger (unique_key_recheck) when an
# insert meets a potential conflict, and the worker fires deferred events
# before its commit as the subscription owner, unrestricted
# (run_commit_time_code_as_owner, src/pg/worker/progress.cpp): the recheck
# would evaluate the owner's IMMUTABLE function as the superuser.  It does
# not happen: the recheck trigger is enabled ORIGIN, so under the worker's
# session_replication_role = replica it is never queued (and when it is
# queued inside a security-restricted operation, PostgreSQL refuses to
# fire it: "cannot fire deferred trigger within security-restricted
# operation").  The owner's function gives every row the same value as
# mallory (a potential conflict for every second row) and calls a VOLATILE
# function that makes her a superuser when it runs as anyone else.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('drc_source');
my $dest = new_dest('drc_dest');

my $table = 'CREATE TABLE public.acct (id int PRIMARY KEY, body text);';
$source->safe_psql('postgres', $table . q{
INSERT INTO public.acct VALUES (1, 'one'), (2, 'two');
CREATE PUBLICATION pub_acct FOR TABLE public.acct;
});

$dest->safe_psql('postgres', $table . q{
CREATE ROLE mallory;
GRANT CREATE ON SCHEMA public TO mallory;
CREATE TABLE public.ran (what text, ran_as name);
GRANT INSERT ON public.ran TO PUBLIC;
ALTER TABLE public.acct OWNER TO mallory;
SET ROLE mallory;
CREATE FUNCTION public.escalate() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  INSERT INTO public.ran VALUES ('recheck', current_user);
  IF current_user <> 'mallory' THEN
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
  END IF;
  RETURN current_user = 'mallory';
END $$;
CREATE FUNCTION public.acct_key(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF public.escalate() THEN
    RETURN 0;
  END IF;
  RETURN $1;
END $$;
ALTER TABLE public.acct ADD CONSTRAINT acct_trap EXCLUDE USING btree ((public.acct_key(id)) WITH =)
  DEFERRABLE INITIALLY DEFERRED;
RESET ROLE;
});

# The subscription's owner is the superuser who creates it (the default).
create_subscription($dest, $source, 'sub_acct', ['pub_acct']);

wait_caught_up($source, $dest, 'sub_acct') or diag 'sub_acct did not start: '
	. $dest->safe_psql('postgres', q{SELECT state || ' ' || coalesce(last_error, '') FROM cdc.subscription_status});
# the stream: two rows in one source transaction
$source->safe_psql('postgres', q{INSERT INTO public.acct VALUES (3, 'three'), (4, 'four');});
wait_caught_up($source, $dest, 'sub_acct') or diag 'sub_acct did not catch up: '
	. $dest->safe_psql('postgres', q{SELECT state || ' ' || coalesce(last_error, '') FROM cdc.subscription_status});
is($dest->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM public.acct}), '1,2,3,4',
	'copied and streamed');
is($dest->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f',
	'the table owner did not make herself a superuser');
is($dest->safe_psql('postgres', q{SELECT coalesce(string_agg(DISTINCT ran_as, ','), '') FROM public.ran WHERE ran_as <> 'mallory'}),
	'', 'none of the table owner\'s code ran as another role')
	or diag $dest->safe_psql('postgres', 'SELECT * FROM public.ran');

$source->stop;
$dest->stop;
done_testing();

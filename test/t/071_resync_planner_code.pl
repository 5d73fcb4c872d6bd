# (review helper, of 572577f) cdc.resync's own reads of the destination
# (DestRowsByKeys and the audit's range reads, src/pg/audit/tables.cpp) ran
# as the superuser caller, unrestricted.  Planning a query on the table
# loads its index predicates and expressions into the relcache, and
# RelationGetIndexPredicate runs eval_const_expressions over them: an
# IMMUTABLE function of the table owner with constant arguments is executed
# then, as the superuser (it can call a VOLATILE function that does ALTER
# ROLE ... SUPERUSER).  Now those reads run as the table's owner in a
# security-restricted operation (ReaderOf).
# Not covered here: a session-level advisory lock a trigger takes inside
# the restricted operation (PostgreSQL allows it) stays with the caller's
# session until it ends; docs/security.md lists it as a limit.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my ($source, $dest) = owned_notes_subscription('rpc');

$dest->safe_psql('postgres', q{
SET ROLE subo;
DELETE FROM public.notes WHERE id = 2;
RESET ROLE;
});
my ($audit_id, $findings) = split /\|/, $dest->safe_psql('postgres', q{CALL cdc.audit('sub_notes')});
is($findings, '1', 'the audit finds the row subo deleted');

# subo's code: an index predicate folded by the planner, and a trigger taking a session-level advisory lock
$dest->safe_psql('postgres', q{
SET ROLE subo;
CREATE FUNCTION public.escalate() RETURNS bool LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  INSERT INTO public.ran VALUES ('index predicate in ' || pg_catalog.left(pg_catalog.current_query(), 22), current_user);
  IF current_user <> 'subo' THEN
    EXECUTE 'ALTER ROLE subo SUPERUSER';
  END IF;
  RETURN true;
END $$;
CREATE FUNCTION public.pred(int) RETURNS bool LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN public.escalate();
END $$;
CREATE INDEX notes_body ON public.notes (body) WHERE public.pred(0);
RESET ROLE;
});

# the superuser's session (a new backend: an empty relcache)
$dest->safe_psql('postgres', "CALL cdc.resync('sub_notes', audit => $audit_id)");
# (as subo: a superuser's query on the table would itself fold the predicate)
is($dest->safe_psql('postgres', 'SET ROLE subo; SELECT count(*) FROM public.notes'), '2', 'the resync put the row back');
is($dest->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'subo'}), 'f',
	'the subscription owner did not make itself a superuser');
is($dest->safe_psql('postgres', q{SELECT coalesce(string_agg(DISTINCT what || ' as ' || ran_as, ','), '') FROM public.ran WHERE ran_as <> 'subo'}),
	'', 'nothing of the subscription owner\'s ran as the superuser who called cdc.resync')
	or diag $dest->safe_psql('postgres', 'SELECT * FROM public.ran');

$source->stop;
$dest->stop;
done_testing();

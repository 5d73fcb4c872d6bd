# cdc.resync applies in the caller's own session (a procedure, committing
# after every page) "as the worker applies": as the subscription owner
# where the table owner and the subscription owner are the same role
# (docs/security.md, "The worker's identity").  Without a
# security-restricted operation the owner's code changed the caller's
# session for good (review helper): a session-level SET (search_path) and
# temporary objects (a temp view, searched before pg_catalog) outlived the
# CALL, and the superuser who ran the resync ran the owner's code with the
# next unqualified name.  Now the repairs always run in a restricted
# operation with a GUC nest level: the temp view is refused (the page
# rolled back), the SET undone.  (Deferred triggers and WITH HOLD cursors:
# 068.)
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my ($source, $dest) = owned_notes_subscription('rss');

# subo's code: an ENABLE ALWAYS trigger (it fires with session_replication_role = replica)
$dest->safe_psql('postgres', q{
SET ROLE subo;
CREATE FUNCTION public.lower(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.ran VALUES ('lower', current_user);
  RETURN pg_catalog.lower($1);
END $$;
CREATE FUNCTION public.spy() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.ran VALUES ('temp view', current_user);
  RETURN 0;
END $$;
CREATE FUNCTION public.leave_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_catalog.set_config('search_path', 'public, pg_catalog', false);
  EXECUTE 'CREATE TEMP VIEW pg_settings AS SELECT public.spy() AS name';
  RETURN NEW;
END $$;
CREATE TRIGGER leave_state BEFORE INSERT ON public.notes FOR EACH ROW EXECUTE FUNCTION public.leave_state();
ALTER TABLE public.notes ENABLE ALWAYS TRIGGER leave_state;
DELETE FROM public.notes WHERE id = 2;
RESET ROLE;
});

my ($audit_id, $findings) = split /\|/, $dest->safe_psql('postgres', q{CALL cdc.audit('sub_notes')});
is($findings, '1', 'the audit finds the row subo deleted');
# the superuser's session: the resync, then ordinary unqualified names
my ($rc, $after, $err) = $dest->psql('postgres', qq{
CALL cdc.resync('sub_notes', audit => $audit_id);
SELECT current_setting('search_path');
SELECT lower('X'::text);
SELECT count(*) > 100 FROM pg_settings;
}, on_error_stop => 0);
like($err, qr/cannot create temporary table within security-restricted operation/, 'the temp view is refused in the restricted operation');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.notes'), '1', 'nothing of that page applied');
is($after, qq{"\$user", public\nx\nt}, 'the session afterwards: its own search_path, the built-in lower, the real pg_settings')
	or diag $after;

# without the temp view: the resync applies, and the trigger's SET is undone at the end of the restricted operation
$dest->safe_psql('postgres', q{
CREATE OR REPLACE FUNCTION public.leave_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_catalog.set_config('search_path', 'public, pg_catalog', false);
  RETURN NEW;
END $$;
ALTER FUNCTION public.leave_state() OWNER TO subo;
});
$after = $dest->safe_psql('postgres', qq{
CALL cdc.resync('sub_notes', audit => $audit_id);
SELECT current_setting('search_path');
SELECT lower('X'::text);
});
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.notes'), '2', 'the resync put the row back');
unlike($after, qr/public, pg_catalog/, 'the owner\'s session-level SET did not outlive the resync');
is($dest->safe_psql('postgres', q{SELECT coalesce(string_agg(DISTINCT what || ' as ' || ran_as, ','), '') FROM public.ran WHERE ran_as <> 'subo'}),
	'', 'nothing of the subscription owner\'s ran as the superuser who called cdc.resync');

$source->stop;
$dest->stop;
done_testing();

# A DEFERRED constraint trigger on a worker target (docs/security.md,
# "The worker's identity": the worker never applies with more rights than
# the subscription owner; the table owner's code never runs as a superuser).
#
# When the worker applies without a security-restricted operation (the
# table's owner is the subscription owner or a member of it, or
# run_as_owner), a deferred constraint trigger is queued while the change
# is applied as that role, but PostgreSQL fires it at COMMIT
# (AfterTriggerFireDeferred in CommitTransaction) -- after the worker has
# switched back to its own identity, the bootstrap superuser.  The trigger
# then runs as that superuser and the ordinary role that owns the
# subscription (or, with run_as_owner, the table) makes itself a superuser.
# (In the restricted case PostgreSQL refuses to queue the deferred event:
# the subscription stops with an error, which is safe.)
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('dtr_source');
my $dest = new_dest('dtr_dest');

my $table = 'CREATE TABLE public.notes (id int PRIMARY KEY, body text);';
$source->safe_psql('postgres', $table . q{
INSERT INTO public.notes VALUES (1, 'copied');
CREATE PUBLICATION pub_notes FOR TABLE public.notes;
});

$dest->safe_psql('postgres', $table . q{
CREATE ROLE mallory;
CREATE ROLE subo;
GRANT CREATE ON SCHEMA public TO mallory, subo;
CREATE TABLE public.ran (what text, ran_as name, sess name);
GRANT INSERT ON public.ran TO PUBLIC;
ALTER TABLE public.notes OWNER TO subo;
SET ROLE subo;
CREATE FUNCTION public.deferred_code() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.ran VALUES ('deferred ' || TG_OP, current_user, session_user);
  BEGIN
    EXECUTE 'ALTER ROLE subo SUPERUSER';
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER mallory_at_commit AFTER INSERT OR UPDATE ON public.notes
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.deferred_code();
ALTER TABLE public.notes ENABLE ALWAYS TRIGGER mallory_at_commit;
RESET ROLE;
});

# 1. A subscription owned by the ordinary role subo, applying subo's table.
create_subscription($dest, $source, 'sub_notes', ['pub_notes'], "owner => 'subo'");
wait_caught_up($source, $dest, 'sub_notes') or diag 'sub_notes did not start';
$source->safe_psql('postgres', q{INSERT INTO public.notes VALUES (2, 'hello'); UPDATE public.notes SET body = 'again' WHERE id = 1;});
wait_caught_up($source, $dest, 'sub_notes') or diag 'sub_notes did not catch up';

is($dest->safe_psql('postgres', 'SELECT id, body FROM public.notes ORDER BY id'), "1|again\n2|hello", 'notes applied (copy and stream)');
is($dest->safe_psql('postgres', q{SELECT coalesce(string_agg(DISTINCT ran_as || '/' || sess, ','), '') FROM public.ran WHERE ran_as <> 'subo'}),
	'', 'the deferred trigger never ran as anyone but the subscription owner');
is($dest->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'subo'"), 'f', 'subo is not a superuser');

# 2. run_as_owner: mallory's table, applied as the ordinary role subo.
$dest->safe_psql('postgres', q{
ALTER ROLE subo NOSUPERUSER;
TRUNCATE public.ran;
SELECT cdc.disable_subscription('sub_notes');
ALTER TABLE public.notes OWNER TO mallory;
ALTER FUNCTION public.deferred_code() OWNER TO mallory;
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON public.notes TO subo;
SELECT cdc.alter_subscription('sub_notes', run_as_owner => true);
SELECT cdc.enable_subscription('sub_notes');
});
$source->safe_psql('postgres', q{INSERT INTO public.notes VALUES (3, 'three')});
wait_caught_up($source, $dest, 'sub_notes') or diag 'sub_notes did not catch up (run_as_owner)';
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.notes'), '3', 'applied as the subscription owner');
is($dest->safe_psql('postgres', q{SELECT coalesce(string_agg(DISTINCT ran_as || '/' || sess, ','), '') FROM public.ran WHERE ran_as <> 'subo'}),
	'', 'with run_as_owner the deferred trigger runs as the subscription owner, never as a superuser');
is($dest->safe_psql('postgres', "SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname IN ('subo', 'mallory') AND rolsuper"),
	'', 'neither subo nor mallory is a superuser');

# Takes the roles' superuser back, lets mallory delete row $id on the
# destination, empties public.ran, and audits: (audit id, findings).
sub lose_row_and_audit
{
	my ($id) = @_;
	$dest->safe_psql('postgres', qq{
ALTER ROLE subo NOSUPERUSER;
ALTER ROLE mallory NOSUPERUSER;
SET ROLE mallory;
DELETE FROM public.notes WHERE id = $id;
RESET ROLE;
TRUNCATE public.ran;
});
	return split /\|/, $dest->safe_psql('postgres', q{CALL cdc.audit('sub_notes')});
}

# 3. cdc.resync repairs "as the worker applies" and commits after every
# page (SPI_commit in the CALL), in its caller's session: it applies in a
# security-restricted operation even where the worker does not, so
# PostgreSQL refuses to queue the deferred trigger and the page is rolled
# back; it never fires as the superuser who runs the resync.
my ($audit_id, $findings) = lose_row_and_audit(3);
is($findings, '1', 'the audit finds the row mallory deleted');
my ($rc, $out, $err) = $dest->psql('postgres', "CALL cdc.resync('sub_notes', audit => $audit_id)", on_error_stop => 1);
isnt($rc, 0, 'the resync of a page that queues a deferred trigger fails');
like($err, qr/cannot fire deferred trigger within security-restricted operation/, 'refused by PostgreSQL in the restricted operation');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.notes'), '2', 'nothing of the page applied: row 3 still missing');
is($dest->safe_psql('postgres', q{SELECT coalesce(string_agg(DISTINCT ran_as || '/' || sess, ','), '') FROM public.ran WHERE ran_as <> 'subo'}),
	'', 'the deferred trigger never ran as a superuser');
is($dest->safe_psql('postgres', "SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname IN ('subo', 'mallory') AND rolsuper"),
	'', 'neither subo nor mallory is a superuser after the resync');
$dest->safe_psql('postgres', 'ALTER TABLE public.notes DISABLE TRIGGER mallory_at_commit');
$dest->safe_psql('postgres', "CALL cdc.resync('sub_notes', audit => $audit_id)");
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.notes'), '3', 'the resync put row 3 back once the trigger was disabled');

# 4. A cursor declared WITH HOLD by the subscription owner's code: the rest
# of its query runs at the commit (PreCommit_Portals), so the same rule.
$dest->safe_psql('postgres', q{
TRUNCATE public.ran;
DROP TRIGGER mallory_at_commit ON public.notes;
SET ROLE mallory;
CREATE FUNCTION public.held(int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.ran VALUES ('held cursor', current_user, session_user);
  BEGIN
    EXECUTE 'ALTER ROLE subo SUPERUSER';
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN $1;
END $$;
CREATE FUNCTION public.declare_held() RETURNS void LANGUAGE sql AS $$
  DECLARE held_c CURSOR WITH HOLD FOR SELECT public.held(g) FROM pg_catalog.generate_series(1, 2) g;
$$;
CREATE FUNCTION public.hold_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM public.declare_held();
  RETURN NEW;
END $$;
CREATE TRIGGER hold_always BEFORE INSERT ON public.notes FOR EACH ROW EXECUTE FUNCTION public.hold_trigger();
ALTER TABLE public.notes ENABLE ALWAYS TRIGGER hold_always;
RESET ROLE;
});
$source->safe_psql('postgres', q{INSERT INTO public.notes VALUES (4, 'four')});
wait_caught_up($source, $dest, 'sub_notes') or diag 'sub_notes did not catch up (held cursor)';
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.notes'), '4', 'applied with the cursor trigger');
ok($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran WHERE what = 'held cursor'}) > 0, 'the held cursor\'s query ran');
is($dest->safe_psql('postgres', q{SELECT coalesce(string_agg(DISTINCT ran_as || '/' || sess, ','), '') FROM public.ran WHERE ran_as <> 'subo'}),
	'', 'the held cursor\'s query runs as the subscription owner, never as a superuser');
is($dest->safe_psql('postgres', "SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname IN ('subo', 'mallory') AND rolsuper"),
	'', 'neither subo nor mallory is a superuser after the held cursor');

# 5. The held cursor through cdc.resync: SPI_commit would persist it as
# the superuser who runs the resync; in the restricted operation
# PostgreSQL refuses to declare it, and the page is rolled back with the
# cursor's query unrun.
($audit_id, $findings) = lose_row_and_audit(4);
($rc, $out, $err) = $dest->psql('postgres', "CALL cdc.resync('sub_notes', audit => $audit_id)", on_error_stop => 1);
isnt($rc, 0, 'the resync of the page whose trigger declares a held cursor fails');
like($err, qr/cannot create a cursor WITH HOLD within security-restricted operation/, 'refused by PostgreSQL in the restricted operation');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.notes'), '3', 'nothing of the page applied: row 4 still missing');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran WHERE what = 'held cursor'}), '0', 'the held cursor\'s query never ran');
is($dest->safe_psql('postgres', "SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname IN ('subo', 'mallory') AND rolsuper"),
	'', 'neither subo nor mallory is a superuser after the refused resync');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM pg_cursors'), '0', 'no cursor left behind');

# without the trigger the same audit's finding is repaired
$dest->safe_psql('postgres', 'DROP TRIGGER hold_always ON public.notes');
$dest->safe_psql('postgres', "CALL cdc.resync('sub_notes', audit => $audit_id)");
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.notes'), '4', 'the resync put row 4 back once the trigger was gone');

$source->stop;
$dest->stop;
done_testing();

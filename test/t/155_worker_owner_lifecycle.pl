# Security review h4 (sec-review-16b): the subscription owner's lifecycle
# while the worker runs.  Whether the worker notices, at the next source
# transaction, privileges and ownerships taken away after it started (it
# checks them once per local transaction, in ApplyEngine::Authorize, with
# the catalog caches' invalidations; nothing outlives the group), and what
# REASSIGN OWNED and DROP ROLE of the owner do: the owner is recorded as an
# OID (regrole) with no pg_shdepend entry, so DROP ROLE is not refused, the
# worker stops with "no longer exists", and a role created again under the
# same name is not taken for it (docs/security.md, "The owner's
# lifecycle").
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('ownlife_source');
my $dest = new_dest('ownlife_dest');

my $tables = q{
CREATE TABLE public.a (id int PRIMARY KEY, n int);
CREATE TABLE public.b (id int PRIMARY KEY, n int);
CREATE TABLE public.c (id int PRIMARY KEY, n int);
CREATE TABLE public.d (id int PRIMARY KEY, n int);
};
$source->safe_psql('postgres', $tables . q{
CREATE PUBLICATION pub_a FOR TABLE public.a;
CREATE PUBLICATION pub_b FOR TABLE public.b;
CREATE PUBLICATION pub_c FOR TABLE public.c;
CREATE PUBLICATION pub_d FOR TABLE public.d;
});
$dest->safe_psql('postgres', $tables . q{
CREATE ROLE subo;                 -- a: run_as_owner, privileges granted
GRANT SELECT, INSERT, UPDATE, DELETE ON public.a TO subo;
CREATE ROLE sup SUPERUSER;        -- b: a superuser owner of bob's table
CREATE ROLE bob;
ALTER TABLE public.b OWNER TO bob;
CREATE ROLE carol;                -- c: cown is a member of carol, the table's owner
CREATE ROLE cown IN ROLE carol;
CREATE ROLE dave;
ALTER TABLE public.c OWNER TO carol;
CREATE ROLE dan;                  -- d: dan owns the subscription and the table
CREATE ROLE erin;
ALTER TABLE public.d OWNER TO dan;
});
create_subscription($dest, $source, 'sub_a', ['pub_a'], "owner => 'subo', run_as_owner => true");
create_subscription($dest, $source, 'sub_b', ['pub_b'], "owner => 'sup'");
create_subscription($dest, $source, 'sub_c', ['pub_c'], "owner => 'cown'");
create_subscription($dest, $source, 'sub_d', ['pub_d'], "owner => 'dan'");
$source->safe_psql('postgres', q{
INSERT INTO public.a VALUES (1, 1);
INSERT INTO public.b VALUES (1, 1);
INSERT INTO public.c VALUES (1, 1);
INSERT INTO public.d VALUES (1, 1);
});
for my $s (qw(a b c d)) {
	ok(wait_caught_up($source, $dest, "sub_$s"), "sub_$s applies its first change");
	same_id_n_rows($source, $dest, "public.$s", "start");
}

# ---------------------------------------------------------------------------
# 1. REVOKE from a run_as_owner subscription's owner: the next change fails
# ---------------------------------------------------------------------------
$dest->safe_psql('postgres', 'REVOKE INSERT ON public.a FROM subo');
$source->safe_psql('postgres', 'INSERT INTO public.a VALUES (2, 2)');
ok(wait_status($dest, 'sub_a', "state = 'error' AND last_error LIKE '%permission denied%'"),
	'after REVOKE INSERT the next change is refused');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.a WHERE id = 2'), '0', 'row 2 was not applied');
$dest->safe_psql('postgres', 'GRANT INSERT ON public.a TO subo');
ok(wait_caught_up($source, $dest, 'sub_a'), 'GRANT again: sub_a catches up');
same_id_n_rows($source, $dest, 'public.a', 'after GRANT');

# ---------------------------------------------------------------------------
# 2. ALTER ROLE owner NOSUPERUSER: no longer a member of the table's owner
# ---------------------------------------------------------------------------
$dest->safe_psql('postgres', 'ALTER ROLE sup NOSUPERUSER');
$source->safe_psql('postgres', 'INSERT INTO public.b VALUES (2, 2)');
ok(wait_status($dest, 'sub_b', q{state = 'error' AND last_error LIKE '%subscription owner "sup" cannot apply changes to table public.b owned by "bob"%'}),
	'after NOSUPERUSER the next change is refused');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.b WHERE id = 2'), '0', 'row 2 was not applied');
$dest->safe_psql('postgres', 'ALTER ROLE sup SUPERUSER');
ok(wait_caught_up($source, $dest, 'sub_b'), 'SUPERUSER again: sub_b catches up');
same_id_n_rows($source, $dest, 'public.b', 'after SUPERUSER');

# ---------------------------------------------------------------------------
# 3. ALTER TABLE ... OWNER TO a role the owner is not a member of
# ---------------------------------------------------------------------------
$dest->safe_psql('postgres', 'ALTER TABLE public.c OWNER TO dave');
$source->safe_psql('postgres', 'INSERT INTO public.c VALUES (2, 2)');
ok(wait_status($dest, 'sub_c', q{state = 'error' AND last_error LIKE '%subscription owner "cown" cannot apply changes to table public.c owned by "dave"%'}),
	'after ALTER TABLE OWNER the next change is refused');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.c WHERE id = 2'), '0', 'row 2 was not applied');
# REVOKE of the membership, the table back to carol: refused the same way
$dest->safe_psql('postgres', 'REVOKE carol FROM cown; ALTER TABLE public.c OWNER TO carol');
ok(wait_status($dest, 'sub_c', q{state = 'error' AND last_error LIKE '%owned by "carol"%'}),
	'after REVOKE of the membership the change is refused');
$dest->safe_psql('postgres', 'GRANT carol TO cown');
ok(wait_caught_up($source, $dest, 'sub_c'), 'membership again: sub_c catches up');
same_id_n_rows($source, $dest, 'public.c', 'after GRANT carol');

# ---------------------------------------------------------------------------
# 4. REASSIGN OWNED BY the owner: the table moves, the subscription does not
# ---------------------------------------------------------------------------
$dest->safe_psql('postgres', 'REASSIGN OWNED BY dan TO erin');
is($dest->safe_psql('postgres', q{SELECT relowner::regrole || ' ' || (SELECT owner::regrole FROM cdc.subscription WHERE name = 'sub_d') FROM pg_class WHERE oid = 'public.d'::regclass}),
	'erin dan', 'REASSIGN OWNED moves the table to erin, the subscription keeps dan');
$source->safe_psql('postgres', 'INSERT INTO public.d VALUES (2, 2)');
ok(wait_status($dest, 'sub_d', q{state = 'error' AND last_error LIKE '%subscription owner "dan" cannot apply changes to table public.d owned by "erin"%'}),
	'after REASSIGN OWNED the next change is refused');

# ---------------------------------------------------------------------------
# 5. DROP ROLE of the owner: not refused; the worker stops; a role of the
#    same name created again is another OID and is not taken for the owner
# ---------------------------------------------------------------------------
my $old_oid = $dest->safe_psql('postgres', q{SELECT 'dan'::regrole::oid});
my ($rc, $out, $err) = $dest->psql('postgres', 'DROP ROLE dan');
is($rc, 0, 'DROP ROLE of a subscription owner is not refused (no pg_shdepend entry)');
is($dest->safe_psql('postgres', q{SELECT owner::oid FROM cdc.subscription WHERE name = 'sub_d'}), $old_oid,
	'the subscription still records the dropped OID');
ok(wait_status($dest, 'sub_d', qq{state = 'error' AND last_error LIKE '%the owner (role OID $old_oid) of subscription "sub_d" no longer exists%'}),
	'the worker stops: the owner no longer exists');
$dest->safe_psql('postgres', 'CREATE ROLE dan SUPERUSER');
isnt($dest->safe_psql('postgres', q{SELECT 'dan'::regrole::oid}), $old_oid, 'the new dan has another OID');
# a positive sync point: the worker retried after the new role's commit
my $retries = status_row($dest, 'sub_d', 'retry_count');
ok(wait_status($dest, 'sub_d', "retry_count > $retries + 1"), 'the worker retried after the new dan was created');
like(status_row($dest, 'sub_d', 'last_error'), qr/the owner \(role OID $old_oid\) of subscription "sub_d" no longer exists/,
	'the new dan, a superuser of the same name, is not taken for the owner');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.d WHERE id = 2'), '0', 'row 2 was not applied');
$dest->safe_psql('postgres', q{SELECT cdc.alter_subscription('sub_d', owner => 'dan')});
ok(wait_caught_up($source, $dest, 'sub_d'), 'alter_subscription(owner => the new dan): sub_d catches up');
same_id_n_rows($source, $dest, 'public.d', 'after the new owner');

$dest->stop;
$source->stop;
done_testing();

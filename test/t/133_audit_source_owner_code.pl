# cdc.audit and cdc.resync read the published tables on the source as the
# role of the subscription's conninfo; code of a source table's owner must
# not run with that role's rights (security review h4; docs/security.md,
# "The worker's identity").
#
# eve, an ordinary role on the source, owns a published table with a
# partial index whose predicate calls her IMMUTABLE function with a
# constant argument.  Planning any query on the table folds the predicate,
# so the function runs in every backend that plans one, as that backend's
# user.  The worker's copy (COPY table TO STDOUT) plans nothing, but its
# row estimate for the progress view (EXPLAIN of the table's SELECT) and
# the audit's range hashes, pages and row reads are queries: they ran
# eve's function as the conninfo's role, a superuser here (her function
# could then have done anything a superuser may, such as COPY ... TO
# PROGRAM).  Now the copy of a table without row filter estimates its rows
# from pg_class.reltuples, and the audit and the resync refuse a source
# table whose owner (or a partition's) lacks the privileges of the
# connected role, before any query on it, and a table of the connected
# role is audited as before.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('owner_code_source');
my $dest = new_dest('owner_code_dest');

$source->safe_psql('postgres', q{
CREATE ROLE eve;
GRANT CREATE ON SCHEMA public TO eve;
SET ROLE eve;
CREATE FUNCTION public.pred(i int) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RAISE LOG 'eve.pred ran as % (superuser %)', current_user,
    (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user);
  RETURN true;
END $$;
CREATE TABLE public.acct (id int PRIMARY KEY, body text);
CREATE INDEX acct_part ON public.acct (id) WHERE public.pred(1);
INSERT INTO public.acct SELECT g, 'b' || g FROM generate_series(1, 20) g;
RESET ROLE;
CREATE TABLE public.plain (id int PRIMARY KEY, body text);
INSERT INTO public.plain SELECT g, 'p' || g FROM generate_series(1, 20) g;
CREATE PUBLICATION pub FOR TABLE public.acct, public.plain;
});
$dest->safe_psql('postgres', q{
CREATE TABLE public.acct (id int PRIMARY KEY, body text);
CREATE TABLE public.plain (id int PRIMARY KEY, body text);
});
my $offset = -s $source->logfile;
create_subscription($dest, $source, 'sub', ['pub']);
ok(wait_caught_up($source, $dest, 'sub'), 'initial copy done, streaming');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.acct'), '20', 'the 20 rows of eve\'s table were copied');
unlike(slurp_file($source->logfile, $offset), qr/eve\.pred ran as \S+ \(superuser t\)/,
	'the copy did not run eve\'s function as a superuser (its row estimate planned the table)');

# a table of the connected role: audited as before
my (undef, $findings) = split /\|/, $dest->safe_psql('postgres', q{CALL cdc.audit('sub', 'public.plain')});
is($findings, '0', 'the audit of a table the connected role owns finds nothing to repair');

$offset = -s $source->logfile;
my ($rc, $out, $err) = $dest->psql('postgres', q{CALL cdc.audit('sub', 'public.acct')});
isnt($rc, 0, 'the audit of eve\'s table is refused');
like($err, qr/owned by "eve"/, 'the error names the table\'s owner');
($rc, $out, $err) = $dest->psql('postgres', q{CALL cdc.resync('sub', 'public.acct', keys => '[{"id": 1}]')});
isnt($rc, 0, 'the resync of eve\'s table is refused');
like($err, qr/owned by "eve"/, 'the error names the table\'s owner');
# positive sync point: the source still answers (the same connection role)
(undef, $findings) = split /\|/, $dest->safe_psql('postgres', q{CALL cdc.audit('sub', 'public.plain')});
is($findings, '0', 'the source still answers the audit of the other table');
my $log = slurp_file($source->logfile, $offset);
unlike($log, qr/eve\.pred ran as \S+ \(superuser t\)/, 'eve\'s function never ran as a superuser on the source');

$source->stop;
$dest->stop;
done_testing();

# (review helper, of 572577f) an ordinary cdc.resync of a handler-mode
# table, now that the repairs always run restricted: the row comes back and
# the handler (owned by the subscription owner) is called once, as that owner.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('rh_source');
my $dest = new_dest('rh_dest');
$source->safe_psql('postgres', q{
CREATE TABLE public.hd (id int PRIMARY KEY, v int);
INSERT INTO public.hd VALUES (1, 1), (2, 2);
CREATE PUBLICATION pub_hd FOR TABLE public.hd;
});
$dest->safe_psql('postgres', q{
CREATE ROLE subo;
GRANT CREATE ON SCHEMA public TO subo;
SET ROLE subo;
CREATE TABLE public.hd (id int PRIMARY KEY, v int);
CREATE TABLE public.hd_calls (n bigserial PRIMARY KEY, op text, id int, v int, snap bool, who name);
CREATE FUNCTION public.hd_handler(op text, old public.hd, new public.hd, meta jsonb) RETURNS void LANGUAGE sql AS $$
  INSERT INTO public.hd_calls (op, id, v, snap, who) VALUES (op, coalesce(new.id, old.id), new.v, (meta->>'is_snapshot')::bool, current_user)
$$;
RESET ROLE;
SELECT cdc.register_mapping('public.hd', mode => 'handler', handler => 'public.hd_handler(text, public.hd, public.hd, jsonb)', source_name => 'sub_hd');
});
create_subscription($dest, $source, 'sub_hd', ['pub_hd'], "owner => 'subo'");
wait_caught_up($source, $dest, 'sub_hd') or diag 'sub_hd did not start';
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.hd'), '2', 'copied');
$dest->safe_psql('postgres', 'SET ROLE subo; DELETE FROM public.hd WHERE id = 2; DELETE FROM public.hd_calls;');
my ($audit_id, $findings) = split /\|/, $dest->safe_psql('postgres', q{CALL cdc.audit('sub_hd')});
is($findings, '1', 'the audit finds the deleted row');
my ($rc, $out, $err) = $dest->psql('postgres', qq{CALL cdc.resync('sub_hd', audit => $audit_id)});
is($rc, 0, 'the resync succeeds') or diag $err;
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.hd'), '2', 'the row is back');
is($dest->safe_psql('postgres', q{SELECT string_agg(id || ' ' || coalesce(snap::text, '-') || ' ' || who, ',') FROM public.hd_calls}),
	'2 true subo', 'one handler call, a snapshot, as the subscription owner');
$source->stop;
$dest->stop;
done_testing();

# A hostile owner of the source database (no superuser anywhere) against the
# destination's own tables (docs/security.md, "Targets").  srcowner owns the
# source database and the publication a superuser subscribes to.  It
# publishes a table named cdc.mapping whose row routes its other published
# table, public.evil (keyed by oid), to pg_catalog.pg_authid.  The
# worker resolves a published table without a mapping by its schema and
# name, and applies as the (superuser) subscription owner: it used to copy
# the row into the destination's cdc.mapping, and a later delete in
# public.evil deleted the pg_authid row of the role with that oid.  A
# system catalog or a table of the cdc schema is never a target: the copy
# of cdc.mapping stops with 42501 naming it and nothing is written there,
# and cdc_apply() refuses such targets too, for a superuser as well.
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

$dest->safe_psql('postgres', q{
CREATE TABLE public.items (id int PRIMARY KEY, v text);
});

$source->safe_psql('postgres', q{
CREATE ROLE srcowner LOGIN;
CREATE DATABASE srcdb OWNER srcowner;
});
$source->safe_psql('srcdb', qq{
SET ROLE srcowner;
CREATE TABLE public.items (id int PRIMARY KEY, v text);
INSERT INTO public.items VALUES (1, 'one');
CREATE SCHEMA cdc;
CREATE TABLE cdc.mapping (target text PRIMARY KEY, source_name text, source_schema text NOT NULL, source_table text NOT NULL);
INSERT INTO cdc.mapping VALUES ('pg_catalog.pg_authid', NULL, 'public', 'evil');
CREATE TABLE public.evil (oid oid PRIMARY KEY, rolname name);
CREATE PUBLICATION pub FOR TABLE public.items, cdc.mapping, public.evil;
});
(my $conn = $source->connstr('srcdb')) =~ s/'/''/g;
$dest->safe_psql('postgres', "SELECT cdc.create_subscription('sub', '$conn', ARRAY['pub'])");

ok(wait_status($dest, 'sub', q{last_error LIKE '%table cdc.mapping cannot be a target%'}),
	'the copy of the published cdc.mapping stops: a table of cdc_apply is no target');
like($dest->safe_psql('postgres', q{SELECT last_error FROM cdc.subscription_status WHERE name = 'sub'}),
	qr/system catalog or a table of cdc_apply itself/, 'last_error says why');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.mapping}), '0',
	'nothing was written into the destination cdc.mapping');

# the SQL path refuses them as well, for a superuser too (42501): what a
# worker change routed there would have done
my ($rc, $out, $err) = $dest->psql('postgres', q{
SELECT cdc_apply('{"op": "c", "source": {"name": "x", "lsn": 1}, "after": {"target": "public.items", "source_schema": "a", "source_table": "b"}}'::jsonb, 'cdc.mapping');
});
like($err, qr/table cdc\.mapping cannot be a target/, 'cdc_apply() refuses cdc.mapping as a target');
($rc, $out, $err) = $dest->psql('postgres', q{
SELECT cdc_apply('{"op": "d", "source": {"name": "x", "lsn": 1}, "before": {"oid": 10}}'::jsonb, 'pg_catalog.pg_authid');
});
like($err, qr/pg_catalog\.pg_authid cannot be a target/, 'cdc_apply() refuses pg_catalog.pg_authid as a target');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM pg_roles WHERE oid = 10}), '1', 'the bootstrap superuser is still there');

done_testing();

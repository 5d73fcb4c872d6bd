# A destination database whose owner sets array_nulls = off (ALTER DATABASE
# ... SET, which a database owner may do without being a superuser, and
# which the worker's session takes from pg_db_role_setting) must not change
# what the worker applies.  pgoutput and COPY send an array as array_out
# prints it, a null element as a bare NULL and a string 'NULL' quoted; the
# worker read that text under the database's array_nulls = off, so every
# null element of a text[] was stored as the string 'NULL' (silently: the
# destination differed from the source, in tables the database's owner need
# not own) and an int[] with a null element stopped the worker with
# 'invalid input syntax for type integer: "NULL"' (security review h2).
# The engine now reads every value's text with array_nulls on
# (InputValuePg; regress array_nulls_setting covers cdc_apply()).
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

$source->safe_psql('postgres', q{
	CREATE TABLE t (id int PRIMARY KEY, a text[], n int[]);
	INSERT INTO t VALUES (1, '{x,NULL,"NULL"}', '{1,NULL}'), (2, '{NULL}', NULL), (3, '{y}', '{3}');
	CREATE PUBLICATION p FOR TABLE t});

# The database belongs to an ordinary role, which turns array_nulls off.
$dest->safe_psql('postgres', q{
	CREATE ROLE dbowner LOGIN;
	CREATE DATABASE an OWNER dbowner});
$dest->safe_psql('an', q{
	CREATE EXTENSION cdc_apply;
	CREATE TABLE t (id int PRIMARY KEY, a text[], n int[])});
$dest->safe_psql('postgres', q{SET ROLE dbowner; ALTER DATABASE an SET array_nulls = off});
is($dest->safe_psql('an', 'SHOW array_nulls'), 'off', 'new sessions of the database have array_nulls off');
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
$dest->safe_psql('an', "SELECT cdc.create_subscription('an_sub', '$conn', ARRAY['p'])");

sub caught_up { my ($lsn) = @_; return wait_caught_up($source, $dest, 'an_sub', $lsn, 'an'); }
# null elements as '*', the string 'NULL' as NULL: output only, the same under any array_nulls
my $rows_sql = q{SELECT string_agg(id || ':' || coalesce(array_to_string(a, ',', '*'), '-') || ':' ||
                                  coalesce(array_to_string(n, ',', '*'), '-'), ' ' ORDER BY id) FROM t};

ok(caught_up(source_lsn($source)), 'the copy is applied');
is($dest->safe_psql('an', $rows_sql), $source->safe_psql('postgres', $rows_sql), 'copy: the arrays equal the source');
is($dest->safe_psql('an', q{SELECT a[2] IS NULL AND a[3] = 'NULL' FROM t WHERE id = 1}), 't',
	'copy: a null element is NULL, the string NULL a string');

$source->safe_psql('postgres', q{
	INSERT INTO t VALUES (4, '{NULL,z}', '{NULL}'), (5, '{"NULL"}', '{5,NULL,6}');
	UPDATE t SET a = '{NULL,NULL}', n = '{NULL,7}' WHERE id = 3;
	UPDATE t SET a = a || NULL::text WHERE id = 1});
ok(caught_up(source_lsn($source)), 'the stream is applied');
is($dest->safe_psql('an', $rows_sql), $source->safe_psql('postgres', $rows_sql), 'stream: the arrays equal the source');
is($dest->safe_psql('an', q{SELECT count(*) FROM t, unnest(a) e WHERE e = 'NULL'}), '2',
	'only the two strings NULL of the source are strings');
is($dest->safe_psql('an', q{SELECT count(*) FROM cdc.subscription_errors}), '0', 'no error was recorded');

$dest->safe_psql('an', q{SELECT cdc.disable_subscription('an_sub')});
$dest->poll_query_until('an', q{SELECT worker_pid IS NULL FROM cdc.subscription_status WHERE name = 'an_sub'})
  or diag('the worker did not exit');
$dest->safe_psql('an', q{SELECT cdc.drop_subscription('an_sub', drop_slot => true)});

$dest->stop;
$source->stop;
done_testing();

# Destination table features on the worker path (issue 12, item 3; scenario
# B31 of shared/scenarios.md): the apply behaves as PostgreSQL's own
# subscription does, in the initial copy and in the stream, change by change
# and through the batch engine.  (The SQL path is sql/target_features.sql.)
#
#   B31        a GENERATED ALWAYS AS IDENTITY key takes the source's values
#   generated  a generated column is computed at the destination (the source
#              does not send its own generated columns; a source value for a
#              column that is generated here is not used)
#   defaults   destination columns the source does not have get their
#              defaults on insert and keep their values on update
#   domain     a domain with a CHECK: values pass through its input function;
#              a value it refuses is an error naming the column; so is a NULL
#              where the destination's domain is NOT NULL (PostgreSQL's own
#              apply stores it without asking the domain; an INSERT refuses it)
#   enum/array enums, enum arrays, arrays of text with quotes, commas, NULL
#              elements and braces, two-dimensional arrays, float8 arrays
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

sub rows { return $dest->safe_psql('postgres', $_[0]); }

# Runs every case twice: through the batch engine (the default) and change
# by change (cdc.apply_batch_changes = 1).
for my $mode ('batch', 'one') {
	my $s = "_$mode";
	if ($mode eq 'one') {
		$dest->safe_psql('postgres', 'ALTER SYSTEM SET cdc.apply_batch_changes = 1');
		$dest->reload;
	}
	my $types = $mode eq 'batch' ? q{
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
} : '';
	$source->safe_psql('postgres', $types . qq{
CREATE TABLE acct$s (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, owner text);
CREATE TABLE gen$s (id int PRIMARY KEY, a int, b int GENERATED ALWAYS AS (a * 2) STORED, c int);
CREATE TABLE dflt$s (id int PRIMARY KEY, v text);
CREATE TABLE dom$s (id int PRIMARY KEY, qty int);
CREATE TABLE arr$s (id int PRIMARY KEY, m mood, ms mood[], tags text[], grid int[][], fs float8[]);
INSERT INTO acct$s (owner) VALUES ('ann');
INSERT INTO gen$s (id, a, c) VALUES (1, 5, 100);
INSERT INTO dflt$s VALUES (1, 'one');
INSERT INTO dom$s VALUES (1, 7);
INSERT INTO arr$s VALUES (1, 'ok', '{sad,happy}', ARRAY['a,b', 'say "hi"', NULL, '{brace}', 'back\\slash', ''],
                          '{{1,2},{3,4}}', ARRAY[0.1::float8 + 0.2::float8, 1e-310]);
CREATE PUBLICATION pub$s FOR TABLE acct$s, gen$s, dflt$s, dom$s, arr$s;
});
	# the destination's domain also refuses NULL (the source's column is a plain int)
	my $dest_types = $mode eq 'batch' ? $types . "ALTER DOMAIN posint SET NOT NULL;\n" : '';
	$dest->safe_psql('postgres', $dest_types . qq{
CREATE TABLE acct$s (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, owner text);
CREATE TABLE gen$s (id int PRIMARY KEY, a int, b int GENERATED ALWAYS AS (a * 10) STORED, c int GENERATED ALWAYS AS (a + 1) STORED);
CREATE TABLE dflt$s (id int PRIMARY KEY, v text, created date NOT NULL DEFAULT '2000-01-01', flag boolean NOT NULL DEFAULT true);
CREATE TABLE dom$s (id int PRIMARY KEY, qty posint);
CREATE TABLE arr$s (id int PRIMARY KEY, m mood, ms mood[], tags text[], grid int[][], fs float8[]);
});
	create_subscription($dest, $source, "feat$s", ["pub$s"]);
	ok(wait_caught_up($source, $dest, "feat$s"), "$mode: copied, streaming");
	is(rows("SELECT id, owner FROM acct$s ORDER BY id"), '1|ann', "B31 $mode copy: row 1 with the source's identity value");
	is(rows("SELECT id, a, b, c FROM gen$s"), '1|5|50|6', "generated $mode copy: b and c computed here");
	is(rows("SELECT id, v, created, flag FROM dflt$s"), '1|one|2000-01-01|t', "defaults $mode copy: destination-only columns get their defaults");
	is(rows("SELECT id, qty FROM dom$s"), '1|7', "domain $mode copy");
	is(rows("SELECT m, ms, tags, grid, fs = ARRAY[0.1::float8 + 0.2::float8, 1e-310] FROM arr$s"),
		q(ok|{sad,happy}|{"a,b","say \"hi\"",NULL,"{brace}","back\\\\slash",""}|{{1,2},{3,4}}|t), "enum and arrays $mode copy: exact");

	$dest->safe_psql('postgres', "UPDATE dflt$s SET created = '2024-01-01', flag = false WHERE id = 1");
	$source->safe_psql('postgres', qq{
INSERT INTO acct$s (owner) VALUES ('bob');
UPDATE acct$s SET owner = 'ann2' WHERE id = 1;
INSERT INTO gen$s (id, a, c) VALUES (2, 7, 200);
UPDATE gen$s SET a = 6 WHERE id = 1;
INSERT INTO dflt$s VALUES (2, 'two');
UPDATE dflt$s SET v = 'one2' WHERE id = 1;
INSERT INTO dom$s VALUES (2, 9);
INSERT INTO arr$s VALUES (2, 'happy', '{}', '{}', '{{5},{6}}', '{NaN,-Infinity}');
UPDATE arr$s SET ms = array_append(ms, 'ok'), tags[3] = 'filled' WHERE id = 1;
});
	ok(wait_caught_up($source, $dest, "feat$s"), "$mode: streamed");
	is(rows("SELECT id, owner FROM acct$s ORDER BY id"), "1|ann2\n2|bob", "B31 $mode: rows 1 and 2 (the source's identity values), update applied");
	is(rows("SELECT id, a, b, c FROM gen$s ORDER BY id"), "1|6|60|7\n2|7|70|8", "generated $mode stream: computed here on insert and update");
	is(rows("SELECT id, v, created, flag FROM dflt$s ORDER BY id"), "1|one2|2024-01-01|f\n2|two|2000-01-01|t",
		"defaults $mode stream: inserts get the defaults, updates keep the destination's values");
	is(rows("SELECT id, qty FROM dom$s ORDER BY id"), "1|7\n2|9", "domain $mode stream");
	is(rows("SELECT md5(string_agg(x::text, ',' ORDER BY id)) FROM arr$s x"),
		$source->safe_psql('postgres', "SELECT md5(string_agg(x::text, ',' ORDER BY id)) FROM arr$s x"),
		"enum and arrays $mode stream: destination equals source");
	is(status_row($dest, "feat$s", q{state || '|' || retry_count}), 'streaming|0', "$mode: no error");

	# a value the destination's domain refuses: an error naming the column, nothing applied
	# (the type is schema-qualified: the worker's search_path is pg_catalog only, docs/security.md)
	$source->safe_psql('postgres', "INSERT INTO dom$s VALUES (3, -1); INSERT INTO dom$s VALUES (4, 4);");
	ok(wait_status($dest, "feat$s", q{state = 'error' AND last_error LIKE '%column "qty" of type public.posint%violates check constraint "posint_check"%'}),
		"domain $mode: a refused value is an error naming the column and the domain's check");
	is(rows("SELECT string_agg(id::text, ',' ORDER BY id) FROM dom$s"), '1,2', "domain $mode: nothing of it or after it applied");
	my $errlsn = status_row($dest, "feat$s", 'last_error_lsn');
	$dest->safe_psql('postgres', "SELECT cdc.skip_transaction('feat$s', '$errlsn', 'negative quantity')");
	ok(wait_caught_up($source, $dest, "feat$s"), "domain $mode: streaming again after the skip");
	is(rows("SELECT string_agg(id::text, ',' ORDER BY id) FROM dom$s"), '1,2,4', "domain $mode: the next transaction applied");

	# a NULL the domain's NOT NULL refuses: the same error, nothing applied (domain_null.sql on the SQL path)
	$source->safe_psql('postgres', "INSERT INTO dom$s VALUES (5, NULL); INSERT INTO dom$s VALUES (6, 6);");
	ok(wait_status($dest, "feat$s", q{state = 'error' AND last_error LIKE '%column "qty" of type public.posint%domain public.posint does not allow null values%'}),
		"domain $mode: a NULL its NOT NULL refuses is an error naming the column");
	is(rows("SELECT string_agg(id::text, ',' ORDER BY id) FROM dom$s"), '1,2,4', "domain $mode: nothing of the NULL's transaction applied");
	$errlsn = status_row($dest, "feat$s", 'last_error_lsn');
	$dest->safe_psql('postgres', "SELECT cdc.skip_transaction('feat$s', '$errlsn', 'missing quantity')");
	ok(wait_caught_up($source, $dest, "feat$s"), "domain $mode: streaming again after the second skip");
	is(rows("SELECT string_agg(id::text, ',' ORDER BY id) || ' ' || count(*) FILTER (WHERE qty IS NULL) FROM dom$s"), '1,2,4,6 0',
		"domain $mode: the next transaction applied, no NULL stored");
	$dest->safe_psql('postgres', "SELECT cdc.drop_subscription('feat$s', drop_slot => true)");
}

$dest->stop;
$source->stop;
done_testing();

# Schema changes on the source that the stream does not carry (review h3,
# fidelity): each stops the worker with an error naming the column, and the
# matching change on the destination lets it go on from the failing
# transaction, ending equal to the source.
#
#   enum       ALTER TYPE ... ADD VALUE on the source, a row with the new
#              value: 22P02 naming the column, then ADD VALUE here
#   column     ALTER TABLE ... ADD COLUMN z text DEFAULT 'zz' on the source:
#              42703 naming the field; the source's existing rows get the
#              default without any change in the stream, so the destination
#              column needs the same default (docs/worker.md, "Destination
#              table features") — added here with it, every row equals the
#              source's, also the rows the stream never sent again
#   composite  ALTER TYPE ... ADD ATTRIBUTE on the source: the wider text
#              is refused until the destination's type has it too
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
my $ddl = q{CREATE TYPE mood AS ENUM ('sad', 'ok'); CREATE DOMAIN pos AS int CHECK (VALUE > 0); CREATE TYPE pair AS (x int, y text);
CREATE TABLE e (id int PRIMARY KEY, m mood, p pos, pr pair, ma mood[]);};
$source->safe_psql('postgres', $ddl . q{
CREATE PUBLICATION p FOR TABLE e;
INSERT INTO e VALUES (1, 'ok', 1, '(1,"a b")', '{sad,ok}'), (4, 'sad', 4, '(4,d)', '{ok}');});
$dest->safe_psql('postgres', $ddl);
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
$dest->safe_psql('postgres', "SELECT cdc.create_subscription('s', '$conn', ARRAY['p'])");
ok(wait_caught_up($source, $dest, 's'), 'initial copy');

$source->safe_psql('postgres', q{ALTER TYPE mood ADD VALUE 'happy'});
$source->safe_psql('postgres', q{
INSERT INTO e VALUES (2, 'happy', 2, '(2,)', '{happy,NULL}');
ALTER TABLE e ADD COLUMN z text DEFAULT 'zz';
INSERT INTO e VALUES (3, 'sad', 3, NULL, '{}', 'z3');
ALTER TYPE pair ADD ATTRIBUTE w int;
UPDATE e SET pr = '(5,q,7)' WHERE id = 1;});

ok(wait_status($dest, 's', q{last_error LIKE '%column "m" of type public.mood%invalid input value for enum%happy%'}),
	'enum: the new value stops the worker, naming the column');
$dest->safe_psql('postgres', q{ALTER TYPE mood ADD VALUE 'happy'});
ok(wait_status($dest, 's', q{last_error LIKE '%field "after.z" has no column in table public.e%'}),
	'column: the added column stops the worker, naming the field');
$dest->safe_psql('postgres', q{ALTER TABLE e ADD COLUMN z text DEFAULT 'zz'});
ok(wait_status($dest, 's', q{last_error LIKE '%column "pr" of type public.pair%'}),
	'composite: the added attribute stops the worker, naming the column');
$dest->safe_psql('postgres', q{ALTER TYPE pair ADD ATTRIBUTE w int});
ok(wait_caught_up($source, $dest, 's'), 'caught up after the three destination changes');
is($dest->safe_psql('postgres', 'SELECT * FROM e ORDER BY id'), $source->safe_psql('postgres', 'SELECT * FROM e ORDER BY id'),
	'every row equals the source, row 4 (never sent again) with the column default too');
done_testing();

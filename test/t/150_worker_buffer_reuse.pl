# The worker writes each change's image and delivery key into the spent
# buffers of its earlier applied queues (core/buffer_pool.hpp, review h3):
# no value of an earlier change may show in a later one.  Queues of three
# changes (cdc.apply_batch_changes = 3) make every image after the first
# few one written over a spent vector, and the workload alternates what a
# spent vector held with what the next image needs:
#   - a wide table (12 columns, values shorter and longer than the 64 bytes
#     a kept string buffer holds) and a narrow one (2 columns) in turns, so a
#     narrow image is written over a wide one's vector and the other way;
#   - NULLs after values and values after NULLs, an unchanged TOASTed value
#     (sent as unchanged: the destination keeps its own) after texts;
#   - key-only before-images of deletes (REPLICA IDENTITY DEFAULT) and full
#     ones (REPLICA IDENTITY FULL) between full after-images;
#   - shorter values after longer ones in the same column.
# Every row of the destination equals the source's, column by column.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest', "cdc.apply_batch_changes = 3\n");

my $wide_cols = join(', ', map { "c$_ text" } 1 .. 10);
my $ddl = qq{
	CREATE TABLE wide (id int PRIMARY KEY, $wide_cols, big text);
	ALTER TABLE wide ALTER COLUMN big SET STORAGE EXTERNAL;
	CREATE TABLE narrow (id int PRIMARY KEY, v text);
	CREATE TABLE fullid (id int PRIMARY KEY, a text, b int[]);
	ALTER TABLE fullid REPLICA IDENTITY FULL;
};
$source->safe_psql('postgres', $ddl . 'CREATE PUBLICATION p FOR TABLE wide, narrow, fullid');
$dest->safe_psql('postgres', $ddl);
create_subscription($dest, $source, 'reuse', ['p']);

my $dump = q{
	SELECT 'wide ' || coalesce(string_agg(md5(w::text), ',' ORDER BY id), '') FROM wide w
	UNION ALL SELECT 'narrow ' || coalesce(string_agg(n::text, ',' ORDER BY id), '') FROM narrow n
	UNION ALL SELECT 'fullid ' || coalesce(string_agg(f::text, ',' ORDER BY id), '') FROM fullid f};
my $long = "repeat('L', 100)";
my $wide_vals = join(', ', map { $_ % 2 ? "repeat(chr(64 + $_), 70) || g" : "'s$_-' || g" } 1 .. 10);

ok(wait_caught_up($source, $dest, 'reuse'), 'the (empty) copy is done');

# 1. inserts, wide and narrow in turns, long values then short ones
$source->safe_psql('postgres', qq{
	INSERT INTO wide SELECT g, $wide_vals, repeat(md5(g::text), 200) FROM generate_series(1, 6) g;
	INSERT INTO narrow SELECT g, 'n' || g FROM generate_series(1, 4) g;
	INSERT INTO wide SELECT g, $wide_vals, repeat(md5(g::text), 200) FROM generate_series(7, 9) g;
	INSERT INTO fullid SELECT g, $long || g, ARRAY[g, NULL, g] FROM generate_series(1, 5) g;
	INSERT INTO narrow SELECT g, NULL FROM generate_series(5, 7) g});
ok(wait_caught_up($source, $dest, 'reuse'), 'the inserts are applied');
compare_table($source, $dest, $dump, 'after the inserts: every row equals the source');

# 2. one change per transaction, alternating tables and kinds of values
for my $i (1 .. 6) {
	$source->safe_psql('postgres', qq{
		UPDATE wide SET c1 = NULL, c2 = 'x$i', c3 = NULL WHERE id = $i;
		UPDATE narrow SET v = $long || '$i' WHERE id = $i;
		UPDATE wide SET c5 = 'short', c4 = NULL WHERE id = $i + 3;
		DELETE FROM fullid WHERE id = $i;
		INSERT INTO fullid VALUES ($i + 10, 'f', NULL);
		UPDATE narrow SET v = NULL WHERE id = $i + 1;
		UPDATE fullid SET a = NULL, b = '{}' WHERE id = $i + 10;
		DELETE FROM narrow WHERE id = $i + 2;
		INSERT INTO narrow VALUES ($i + 100, 'back');
		UPDATE wide SET c9 = $long, c10 = '' WHERE id = $i + 1});
}
ok(wait_caught_up($source, $dest, 'reuse'), 'the updates and deletes are applied');
compare_table($source, $dest, $dump, 'after the updates: every row equals the source');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM wide WHERE big IS NULL}), '0',
	'the unchanged TOASTed values are kept');

# 3. deletes of every wide row with key-only before-images, then new rows of
#    every table written over the spent vectors of those deletes
$source->safe_psql('postgres', qq{
	DELETE FROM wide WHERE id % 2 = 0;
	INSERT INTO narrow SELECT g, NULL FROM generate_series(200, 205) g;
	INSERT INTO wide (id, c3) SELECT g, 'only c3' FROM generate_series(300, 305) g;
	INSERT INTO fullid SELECT g, NULL, ARRAY[NULL]::int[] FROM generate_series(400, 403) g});
ok(wait_caught_up($source, $dest, 'reuse'), 'the last changes are applied');
compare_table($source, $dest, $dump, 'at the end: every row equals the source');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM wide WHERE id >= 300 AND num_nonnulls(c1, c2, c4, c5, c6, c7, c8, c9, c10, big) > 0}),
	'0', 'the columns a new row does not have are NULL');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.subscription_errors}), '0', 'no error was recorded');

$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('reuse', drop_slot => true)});
$dest->stop;
$source->stop;
done_testing();

# The initial copy has exactly the publication's scope (issue 12, item 2;
# scenarios B27 and B29 of shared/scenarios.md): row filters, column lists,
# partitioned tables with publish_via_partition_root on and off, a table in
# several publications.  After the copy and the stream the destination
# equals what the publication publishes, never more, and a column the
# publication does not publish is never read from the source (the
# subscription's role may not even read it).
#
#   B27         row filter on a REPLICA IDENTITY FULL table; updates that
#               leave or enter the filter (published as delete / insert)
#   filter/key  row filter on the key; key changes in and out of it
#   columns     column list: the unpublished column is never read (column
#               privileges), destination-only columns get their defaults on
#               insert and keep their values on update
#   both        a row filter and a column list on one table
#   union       a table in two publications with different filters (OR), and
#               with a publication without a filter (no filter at all)
#   lists       different column lists in two publications: a clear error
#   B29         a partitioned table published via its root
#   leaves      the same without publish_via_partition_root: each leaf
#               partition is its own published table
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

sub subscribe
{
	my ($name, $pubs, $user) = @_;
	(my $conn = $source->connstr('postgres') . ($user ? " user=$user" : '')) =~ s/'/''/g;
	my $arr = join(', ', map { "'$_'" } @$pubs);
	$dest->safe_psql('postgres', "SELECT cdc.create_subscription('$name', '$conn', ARRAY[$arr])");
}

sub rows { return $dest->safe_psql('postgres', $_[0]); }

sub snapshot_rows
{
	my ($table) = @_;
	return rows("SELECT coalesce((SELECT snapshot_rows FROM cdc.stats WHERE target = '$table'::regclass), 0)");
}

sub no_error
{
	my ($name) = @_;
	is(status_row($dest, $name, q{state || '|' || retry_count || '|' || coalesce(last_error, '')}), 'streaming|0|', "$name: streaming, no error");
}

sub unsubscribe { $dest->safe_psql('postgres', "SELECT cdc.drop_subscription('$_[0]', drop_slot => true)"); }

# ---------------------------------------------------------------------------
# B27: the row filter in the copy and in the stream
# ---------------------------------------------------------------------------
{
	my $ddl = 'CREATE TABLE t_rf (id int PRIMARY KEY, region text, v text);';
	$source->safe_psql('postgres', $ddl . q{
ALTER TABLE t_rf REPLICA IDENTITY FULL;
CREATE PUBLICATION p_rf FOR TABLE t_rf WHERE (region = 'eu');
INSERT INTO t_rf VALUES (1, 'eu', 'a'), (2, 'us', 'b');
});
	$dest->safe_psql('postgres', $ddl);
	subscribe('rf', ['p_rf']);
	ok(wait_caught_up($source, $dest, 'rf'), 'B27: copied, streaming');
	is(rows('SELECT id, region, v FROM t_rf ORDER BY id'), '1|eu|a', 'B27 copy: only the row the filter publishes');
	is(snapshot_rows('t_rf'), '1', 'B27 copy: one snapshot row');
	$source->safe_psql('postgres', q{
INSERT INTO t_rf VALUES (3, 'us', 'c'), (4, 'eu', 'd');
UPDATE t_rf SET region = 'us' WHERE id = 1;
UPDATE t_rf SET region = 'eu' WHERE id = 3;
});
	ok(wait_caught_up($source, $dest, 'rf'), 'B27: streamed');
	is(rows('SELECT id, region, v FROM t_rf ORDER BY id'), "3|eu|c\n4|eu|d", 'B27: exactly the source rows with region eu: 3 and 4');
	is(rows('SELECT count(*) FROM t_rf WHERE id = 2'), '0', 'B27: id 2 was never present');
	no_error('rf');
	unsubscribe('rf');
}

# ---------------------------------------------------------------------------
# A row filter on the key, with key changes into and out of it
# ---------------------------------------------------------------------------
{
	my $ddl = 'CREATE TABLE t_rk (id int PRIMARY KEY, v text);';
	$source->safe_psql('postgres', $ddl . q{
CREATE PUBLICATION p_rk FOR TABLE t_rk WHERE (id % 2 = 0);
INSERT INTO t_rk SELECT g, 'v' || g FROM generate_series(1, 6) g;
});
	$dest->safe_psql('postgres', $ddl);
	subscribe('rk', ['p_rk']);
	ok(wait_caught_up($source, $dest, 'rk'), 'filter on the key: copied, streaming');
	is(rows('SELECT string_agg(id::text, \',\' ORDER BY id) FROM t_rk'), '2,4,6', 'filter on the key: the copy has the even rows only');
	$source->safe_psql('postgres', q{
INSERT INTO t_rk VALUES (7, 'v7'), (8, 'v8');
UPDATE t_rk SET v = 'v8b' WHERE id = 8;
DELETE FROM t_rk WHERE id = 2;
UPDATE t_rk SET id = 10 WHERE id = 3;
UPDATE t_rk SET id = 11 WHERE id = 4;
});
	ok(wait_caught_up($source, $dest, 'rk'), 'filter on the key: streamed');
	is(rows('SELECT string_agg(id || v, \',\' ORDER BY id) FROM t_rk'),
		$source->safe_psql('postgres', 'SELECT string_agg(id || v, \',\' ORDER BY id) FROM t_rk WHERE id % 2 = 0'),
		'filter on the key: destination = the even source rows (a key change into the filter inserts, out of it deletes)');
	no_error('rk');
	unsubscribe('rk');
}

# ---------------------------------------------------------------------------
# A column list: the unpublished column is never read (the role may not);
# destination-only columns get their defaults on insert, keep their values
# on update.
# ---------------------------------------------------------------------------
{
	$source->safe_psql('postgres', q{
CREATE ROLE reader LOGIN REPLICATION;
CREATE TABLE t_cl (id int PRIMARY KEY, a text, secret text, b int);
GRANT SELECT (id, a, b) ON t_cl TO reader;
CREATE PUBLICATION p_cl FOR TABLE t_cl (id, a, b);
INSERT INTO t_cl VALUES (1, 'x', 's1', 10), (2, 'y', 's2', 20);
});
	$dest->safe_psql('postgres', q{
CREATE TABLE t_cl (id int PRIMARY KEY, a text, b int, secret text DEFAULT 'dest default', note text NOT NULL DEFAULT 'n/a');
});
	subscribe('cl', ['p_cl'], 'reader');
	ok(wait_caught_up($source, $dest, 'cl'), 'column list: copied by a role that cannot read the unpublished column, streaming');
	is(rows('SELECT id, a, b, secret, note FROM t_cl ORDER BY id'), "1|x|10|dest default|n/a\n2|y|20|dest default|n/a",
		'column list copy: published columns only, destination defaults for the others');
	$dest->safe_psql('postgres', q{UPDATE t_cl SET secret = 'kept', note = 'local' WHERE id = 1});
	$source->safe_psql('postgres', q{
UPDATE t_cl SET a = 'x2', secret = 's1b' WHERE id = 1;
INSERT INTO t_cl VALUES (3, 'z', 's3', 30);
UPDATE t_cl SET secret = 's2b' WHERE id = 2;
});
	ok(wait_caught_up($source, $dest, 'cl'), 'column list: streamed');
	is(rows('SELECT id, a, b, secret, note FROM t_cl ORDER BY id'),
		"1|x2|10|kept|local\n2|y|20|dest default|n/a\n3|z|30|dest default|n/a",
		'column list stream: updates keep the destination-only columns, inserts get their defaults');
	no_error('cl');
	unsubscribe('cl');
}

# ---------------------------------------------------------------------------
# A row filter and a column list on one table
# ---------------------------------------------------------------------------
{
	$source->safe_psql('postgres', q{
CREATE TABLE t_both (id int, region text NOT NULL, v text, hidden text, PRIMARY KEY (id));
CREATE UNIQUE INDEX t_both_ri ON t_both (id, region);
ALTER TABLE t_both REPLICA IDENTITY USING INDEX t_both_ri;
GRANT SELECT (id, region, v) ON t_both TO reader;
CREATE PUBLICATION p_both FOR TABLE t_both (id, region, v) WHERE (region = 'eu');
INSERT INTO t_both VALUES (1, 'eu', 'a', 'h1'), (2, 'us', 'b', 'h2'), (3, 'eu', 'c', 'h3');
});
	$dest->safe_psql('postgres', 'CREATE TABLE t_both (id int PRIMARY KEY, region text NOT NULL, v text, hidden text);');
	subscribe('both', ['p_both'], 'reader');
	ok(wait_caught_up($source, $dest, 'both'), 'filter and columns: copied, streaming');
	is(rows('SELECT id, region, v, hidden FROM t_both ORDER BY id'), "1|eu|a|\n3|eu|c|", 'filter and columns copy: eu rows, published columns');
	$source->safe_psql('postgres', q{
INSERT INTO t_both VALUES (4, 'eu', 'd', 'h4'), (5, 'us', 'e', 'h5');
UPDATE t_both SET region = 'us' WHERE id = 1;
UPDATE t_both SET region = 'eu', hidden = 'h2b' WHERE id = 2;
UPDATE t_both SET v = 'c2', hidden = 'h3b' WHERE id = 3;
});
	ok(wait_caught_up($source, $dest, 'both'), 'filter and columns: streamed');
	is(rows('SELECT id, region, v, hidden FROM t_both ORDER BY id'),
		$source->safe_psql('postgres', q{SELECT id, region, v, NULL FROM t_both WHERE region = 'eu' ORDER BY id}),
		'filter and columns: destination = the eu rows, published columns only');
	no_error('both');
	unsubscribe('both');
}

# ---------------------------------------------------------------------------
# A table in several publications: filters combined with OR; a publication
# without a filter means no filter.
# ---------------------------------------------------------------------------
{
	my $ddl = 'CREATE TABLE %s (id int PRIMARY KEY, region text NOT NULL, v text);';
	$source->safe_psql('postgres', sprintf($ddl, 't_mp') . q{
ALTER TABLE t_mp REPLICA IDENTITY FULL;
CREATE PUBLICATION p_eu FOR TABLE t_mp WHERE (region = 'eu');
CREATE PUBLICATION p_us FOR TABLE t_mp WHERE (region = 'us');
CREATE PUBLICATION p_all FOR TABLE t_mp;
INSERT INTO t_mp VALUES (1, 'eu', 'a'), (2, 'us', 'b'), (3, 'asia', 'c');
});
	$dest->safe_psql('postgres', sprintf($ddl, 't_mp_or') . sprintf($ddl, 't_mp_all') . q{
SELECT cdc.register_mapping('t_mp_or', source_schema => 'public', source_table => 't_mp', source_name => 'mp_or');
SELECT cdc.register_mapping('t_mp_all', source_schema => 'public', source_table => 't_mp', source_name => 'mp_all');
});
	subscribe('mp_or', [ 'p_eu', 'p_us' ]);
	subscribe('mp_all', [ 'p_eu', 'p_all' ]);
	ok(wait_caught_up($source, $dest, 'mp_or') && wait_caught_up($source, $dest, 'mp_all'), 'union: both copied, streaming');
	is(rows('SELECT string_agg(id::text, \',\' ORDER BY id) FROM t_mp_or'), '1,2', 'union copy: eu OR us');
	is(rows('SELECT string_agg(id::text, \',\' ORDER BY id) FROM t_mp_all'), '1,2,3', 'union copy with an unfiltered publication: every row');
	$source->safe_psql('postgres', q{
INSERT INTO t_mp VALUES (4, 'asia', 'd'), (5, 'eu', 'e');
UPDATE t_mp SET region = 'us' WHERE id = 3;
UPDATE t_mp SET region = 'asia' WHERE id = 1;
UPDATE t_mp SET v = 'b2' WHERE id = 2;
});
	ok(wait_caught_up($source, $dest, 'mp_or') && wait_caught_up($source, $dest, 'mp_all'), 'union: streamed');
	is(rows('SELECT string_agg(id || region || v, \',\' ORDER BY id) FROM t_mp_or'),
		$source->safe_psql('postgres', q{SELECT string_agg(id || region || v, ',' ORDER BY id) FROM t_mp WHERE region IN ('eu', 'us')}),
		'union: destination = the source rows with region eu or us');
	is(rows('SELECT string_agg(id || region || v, \',\' ORDER BY id) FROM t_mp_all'),
		$source->safe_psql('postgres', q{SELECT string_agg(id || region || v, ',' ORDER BY id) FROM t_mp}),
		'union with an unfiltered publication: destination = every source row');
	no_error('mp_or');
	no_error('mp_all');
	unsubscribe('mp_or');
	unsubscribe('mp_all');
}

# ---------------------------------------------------------------------------
# Different column lists for one table in two publications: refused, as
# PostgreSQL 15's own subscriber refuses it.
# ---------------------------------------------------------------------------
{
	my $ddl = 'CREATE TABLE t_dc (id int PRIMARY KEY, a text, b text);';
	$source->safe_psql('postgres', $ddl . q{
CREATE PUBLICATION p_dc1 FOR TABLE t_dc (id, a);
CREATE PUBLICATION p_dc2 FOR TABLE t_dc (id, b);
INSERT INTO t_dc VALUES (1, 'a', 'b');
});
	$dest->safe_psql('postgres', $ddl);
	subscribe('dc', [ 'p_dc1', 'p_dc2' ]);
	ok(wait_status($dest, 'dc', q{state = 'error' AND last_error LIKE '%different column lists for table "public.t_dc" in publications%'}),
		'different column lists: a clear error');
	is(rows('SELECT count(*) FROM t_dc'), '0', 'different column lists: nothing copied');
	unsubscribe('dc');
}

# ---------------------------------------------------------------------------
# B29: a partitioned table published via its root
# ---------------------------------------------------------------------------
{
	$source->safe_psql('postgres', q{
CREATE TABLE meas (id int, region text, v int, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE meas_eu PARTITION OF meas FOR VALUES IN ('eu');
CREATE TABLE meas_us PARTITION OF meas FOR VALUES IN ('us');
INSERT INTO meas VALUES (1, 'eu', 10), (2, 'us', 20);
CREATE PUBLICATION p_meas FOR TABLE meas WITH (publish_via_partition_root = true);
});
	$dest->safe_psql('postgres', 'CREATE TABLE meas (id int, region text, v int, PRIMARY KEY (id, region));');
	subscribe('b29', ['p_meas']);
	ok(wait_caught_up($source, $dest, 'b29'), 'B29: the copy of the partitioned root ran, streaming');
	is(rows('SELECT id, region, v FROM meas ORDER BY id'), "1|eu|10\n2|us|20", 'B29 copy: (1,eu,10) and (2,us,20)');
	$source->safe_psql('postgres', q{
INSERT INTO meas VALUES (3, 'eu', 30);
UPDATE meas SET region = 'us', v = 31 WHERE id = 3;
UPDATE meas SET v = 21 WHERE id = 2;
});
	ok(wait_caught_up($source, $dest, 'b29'), 'B29: streamed');
	is(rows('SELECT id, region, v FROM meas ORDER BY id'), "1|eu|10\n2|us|21\n3|us|31", 'B29: (1,eu,10), (2,us,21), (3,us,31)');
	is(rows(q{SELECT entity_key::text FROM cdc.tombstones WHERE target = 'meas'::regclass}), '{"id": "3", "region": "eu"}',
		'B29: a tombstone for (3, eu)');
	no_error('b29');
	unsubscribe('b29');
}

# ---------------------------------------------------------------------------
# The same without publish_via_partition_root: the leaf partitions are the
# published tables, each mapped to a destination table of its name.
# ---------------------------------------------------------------------------
{
	$source->safe_psql('postgres', q{
CREATE TABLE meas2 (id int, region text, v int, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE meas2_eu PARTITION OF meas2 FOR VALUES IN ('eu');
CREATE TABLE meas2_us PARTITION OF meas2 FOR VALUES IN ('us');
INSERT INTO meas2 VALUES (1, 'eu', 10), (2, 'us', 20);
CREATE PUBLICATION p_meas2 FOR TABLE meas2;
});
	$dest->safe_psql('postgres', q{
CREATE TABLE meas2_eu (id int, region text, v int, PRIMARY KEY (id, region));
CREATE TABLE meas2_us (id int, region text, v int, PRIMARY KEY (id, region));
});
	subscribe('leaves', ['p_meas2']);
	ok(wait_caught_up($source, $dest, 'leaves'), 'leaves: each partition copied, streaming');
	is(rows(q{SELECT 'eu:' || string_agg(id || '/' || v, ',' ORDER BY id) FROM meas2_eu}) . ' ' . rows(q{SELECT 'us:' || string_agg(id || '/' || v, ',' ORDER BY id) FROM meas2_us}),
		'eu:1/10 us:2/20', 'leaves copy: one row in each leaf');
	$source->safe_psql('postgres', q{
INSERT INTO meas2 VALUES (3, 'eu', 30);
UPDATE meas2 SET region = 'us', v = 31 WHERE id = 3;
UPDATE meas2 SET v = 21 WHERE id = 2;
});
	ok(wait_caught_up($source, $dest, 'leaves'), 'leaves: streamed');
	is(rows(q{SELECT 'eu:' || string_agg(id || '/' || v, ',' ORDER BY id) FROM meas2_eu}) . ' ' . rows(q{SELECT 'us:' || string_agg(id || '/' || v, ',' ORDER BY id) FROM meas2_us}),
		'eu:1/10 us:2/21,3/31', 'leaves: the row moved from the eu leaf to the us leaf');
	is(rows(q{SELECT entity_key::text FROM cdc.tombstones WHERE target = 'meas2_eu'::regclass}), '{"id": "3", "region": "eu"}',
		'leaves: a tombstone for (3, eu) in the eu leaf');
	no_error('leaves');
	unsubscribe('leaves');
}

$dest->stop;
$source->stop;
done_testing();

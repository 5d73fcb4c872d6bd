# cdc.audit and cdc.resync on the merged worker (docs/audit.md): a table
# published with a row filter and a column list (only the published rows and
# columns are compared; a destination row the source has outside the filter
# is extra, and removed by the resync); an accepted gap in the stream
# (cdc.accept_gap after the slot was dropped) found by an audit and repaired
# by a resync of its findings, with no outbox rows for the repair; a
# stream-ordered table (cdc.set_ordering) audited and resynced while the
# worker streams other tables, the mark moved to the resync's snapshot and
# newer streamed changes still applied.
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
sub sq { return $source->safe_psql('postgres', $_[0]); }
sub dq { return $dest->safe_psql('postgres', $_[0]); }

# audit $sub (optionally one table): "audit_id|findings", the findings as "table key kind"
sub audit
{
	my ($sub, $table) = @_;
	my $t = $table ? ", '$table'" : '';
	my ($out, $err);
	$dest->psql('postgres', "CALL cdc.audit('$sub'$t, leaf_rows => 8)", stdout => \$out, stderr => \$err);
	my ($id, $n) = split /\|/, $out // '';
	die "audit failed: $err" unless defined $n;
	my $list = dq("SELECT coalesce(string_agg(target::text || ' ' || key::text || ' ' || kind, E'\\n' ORDER BY target::text, key::text), '')
	                 FROM cdc.audit_findings WHERE audit_id = $id");
	return ($id, $n, $list);
}

sub resync_audit
{
	my ($sub, $id) = @_;
	my ($out, $err);
	$dest->psql('postgres', "CALL cdc.resync('$sub', audit => $id)", stdout => \$out, stderr => \$err);
	my (undef, $n) = split /\|/, $out // '';
	die "resync failed: $err" unless defined $n;
	return $n;
}

# --- one subscription: a filtered table with a column list, a plain one, a stream-ordered one
sq(q{
CREATE TABLE f (id int PRIMARY KEY, region text, note text, secret text);
CREATE TABLE g (id int PRIMARY KEY, v text);
CREATE TABLE s (id int PRIMARY KEY, v text);
CREATE TABLE other (id int PRIMARY KEY, v text);
INSERT INTO f SELECT n, CASE WHEN n % 3 = 0 THEN 'us' ELSE 'eu' END, 'n' || n, 's' || n FROM generate_series(1, 300) n;
-- a row filter on the key (PostgreSQL 15 wants the filter's columns in the replica identity)
INSERT INTO g SELECT n, 'g' || n FROM generate_series(1, 300) n;
INSERT INTO s SELECT n, 's' || n FROM generate_series(1, 300) n;
CREATE PUBLICATION pub FOR TABLE f (id, region, note) WHERE (id % 3 <> 0), g, s, other;
});
dq(q{
CREATE TABLE f (id int PRIMARY KEY, region text, note text, local text DEFAULT 'here');
CREATE TABLE g (id int PRIMARY KEY, v text);
CREATE TABLE s (id int PRIMARY KEY, v text);
CREATE TABLE other (id int PRIMARY KEY, v text);
SELECT cdc.register_mapping('g', outbox => true, source_name => 'sub');
SELECT cdc.register_mapping('s', outbox => true, source_name => 'sub');
});
create_subscription($dest, $source, 'sub', ['pub']);
ok(wait_caught_up($source, $dest, 'sub'), 'copied, streaming');
is(dq(q{SELECT count(*) || ' ' || count(*) FILTER (WHERE region = 'eu') FROM f}), '200 200', 'f: only the published rows');
dq(q{SELECT cdc.set_ordering('s', 'stream')});

# ---------------------------------------------------------------------------
# 1. Row filter and column list
# ---------------------------------------------------------------------------
sq(q{UPDATE f SET secret = 'changed, not published' WHERE id = 1});
sq(q{UPDATE f SET note = 'streamed' WHERE id = 2});
ok(wait_caught_up($source, $dest, 'sub'), 'streamed');
dq(q{
UPDATE f SET note = 'by hand' WHERE id = 4;
UPDATE f SET local = 'unpublished column' WHERE id = 5;
INSERT INTO f (id, region, note) VALUES (3, 'us', 'n3');   -- the source has it, outside the filter
INSERT INTO f (id, region, note) VALUES (1000, 'eu', 'x'); -- the source has no such row (1000 % 3 = 1)
DELETE FROM f WHERE id = 7;
});
my ($id, $n, $list) = audit('sub', 'f');
is($n, 4, 'filtered table: 4 findings');
is($list, join("\n", 'f {"id": "1000"} extra', 'f {"id": "3"} extra', 'f {"id": "4"} different', 'f {"id": "7"} missing'),
	'filtered table: exactly the damage, the unpublished column ignored');
is(dq("SELECT detail FROM cdc.audit_findings WHERE audit_id = $id AND key->>'id' = '3'"),
	q{the source's row is outside the publication's row filter}, 'the row outside the filter is named so');
is(resync_audit('sub', $id), 4, 'filtered table: 4 keys repaired');
compare_table($source, $dest, q{SELECT id, region, note FROM f WHERE id % 3 <> 0 ORDER BY id}, 'f: the published rows equal the source');
is(dq(q{SELECT count(*) FILTER (WHERE id % 3 = 0) || ' ' || count(*) FILTER (WHERE id = 1000) FROM f}), '0 0',
	'f: the rows outside the publication removed');
is(dq(q{SELECT local FROM f WHERE id = 5}), 'unpublished column', 'f: an unpublished column keeps its value');
($id, $n) = audit('sub', 'f');
is($n, 0, 'filtered table: a second audit finds nothing');

# ---------------------------------------------------------------------------
# 2. An accepted gap: the slot dropped, changes made meanwhile, accept_gap
# ---------------------------------------------------------------------------
my $outbox_before = dq(q{SELECT count(*) FROM cdc.outbox WHERE target = 'g'::regclass});
disable_and_wait($source, $dest, 'sub');
sq(q{SELECT pg_drop_replication_slot('sub')});
sq(q{UPDATE g SET v = 'in the gap' WHERE id IN (10, 11); DELETE FROM g WHERE id = 12; INSERT INTO g VALUES (301, 'new in the gap')});
enable_subscription($dest, 'sub');
ok(wait_status($dest, 'sub', q{state = 'error' AND last_error LIKE '%does not exist on the source%'}), 'gap: the worker stops');
dq(q{SELECT cdc.accept_gap('sub', 'slot dropped by mistake; audit and resync')});
ok(wait_caught_up($source, $dest, 'sub'), 'gap: streaming again after accept_gap');
is(dq(q{SELECT count(*) FROM cdc.accepted_gaps WHERE accepted_at IS NOT NULL}), '1', 'gap: recorded');
sq(q{UPDATE g SET v = 'after the gap' WHERE id = 20});
ok(wait_caught_up($source, $dest, 'sub'), 'gap: a change after it applied');
($id, $n, $list) = audit('sub');
is($list, join("\n", 'g {"id": "10"} different', 'g {"id": "11"} different', 'g {"id": "12"} extra', 'g {"id": "301"} missing'),
	'gap: the audit finds exactly what the stream missed');
is(resync_audit('sub', $id), 4, 'gap: the resync repairs it');
compare_table($source, $dest, 'SELECT id, v FROM g ORDER BY id', 'gap: g equals the source again');
is(dq(q{SELECT count(*) FROM cdc.outbox WHERE target = 'g'::regclass}), $outbox_before + 1,
	'gap: one outbox row (the change after the gap), none for the repair');
is(dq(q{SELECT string_agg(is_tombstone::text, ',' ORDER BY (entity_key->>'id')::int) FROM cdc.entities
         WHERE target = 'g'::regclass AND (entity_key->>'id')::int IN (10, 11, 12, 301)}), 'false,false,true,false',
	'gap: a tombstone for the key deleted in the gap');
($id, $n) = audit('sub');
is($n, 0, 'gap: a second audit of every table finds nothing');

# ---------------------------------------------------------------------------
# 3. A stream-ordered table, while the worker streams other tables
# ---------------------------------------------------------------------------
is(dq(q{SELECT count(*) FROM cdc.entities WHERE target = 's'::regclass}), '0', 'stream-ordered: no entity records');
dq(q{UPDATE s SET v = 'by hand' WHERE id = 5; DELETE FROM s WHERE id = 6; INSERT INTO s VALUES (999, 'by hand')});
sq(q{INSERT INTO other SELECT n, 'o' FROM generate_series(1, 100) n});
($id, $n, $list) = audit('sub', 's');
is($list, join("\n", 's {"id": "5"} different', 's {"id": "6"} missing', 's {"id": "999"} extra'),
	'stream-ordered: the damage found');
is(resync_audit('sub', $id), 3, 'stream-ordered: repaired through the stream intake');
my $s_lsn = dq("SELECT DISTINCT repair_lsn FROM cdc.audit_findings WHERE audit_id = $id");
is(dq(q{SELECT version[2] = ('} . $s_lsn . q{'::pg_lsn - '0/0')::bigint FROM cdc.stream_marks WHERE target = 's'::regclass}), 't',
	'stream-ordered: the mark moved to the resync\'s snapshot');
compare_table($source, $dest, 'SELECT id, v FROM s ORDER BY id', 's equals the source');
sq(q{UPDATE s SET v = 'newer' WHERE id = 5; INSERT INTO s VALUES (302, 'newer')});
ok(wait_caught_up($source, $dest, 'sub'), 'stream-ordered: streamed after the resync');
compare_table($source, $dest, 'SELECT id, v FROM s ORDER BY id', 's: newer streamed changes applied');
is(dq(q{SELECT count(*) FROM cdc.entities WHERE target = 's'::regclass}), '0', 'stream-ordered: still no entity records');

is(status_row($dest, 'sub', q{state || '|' || retry_count}), 'streaming|0', 'streaming without error');
$dest->stop;
$source->stop;
done_testing();

# Insert first, hostile (docs/internals.md, "Insert first"): wrong hints the
# destination makes, compared with the source's rows, cdc.stats and the
# outbox.
#   1. a destination session holds the key (its own uncommitted INSERT) while
#      the worker applies the source's INSERT of it: rolled back, then
#      committed;
#   2. a destination session deleting a hand-written row of the key, open
#      while the worker applies the source's INSERT: committed, rolled back;
#   3. shapes: stored generated column with a CHECK on it, identity key
#      (GENERATED ALWAYS), a key with a non-default collation;
#   4. chains split by cdc.apply_batch_changes = 3: insert, update, delete,
#      re-insert, key changes, a truncate in the middle, REPLICA IDENTITY
#      FULL, stream- and entity-ordered with outbox;
#   5. a second unique index (and a partial one) created while the worker
#      runs, on a table whose rows the destination already has;
#   6. a deadlock between the worker and a destination session;
#   7. entity records and tombstones; 8. lock_timeout on a held key;
#   9. unchanged TOAST values; 11. a row locked FOR SHARE or updated by a
#      session; 10. the destination's own logical decoding shows no
#      taken-back insert; last, no taken-back row live (n_live_tup).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest', "cdc.database = 'postgres'\ncdc.apply_batch_changes = 3\n", allows_streaming => 'logical');

my $ddl = q{
CREATE TABLE held (id int PRIMARY KEY, v text NOT NULL);
CREATE TABLE gen (id int PRIMARY KEY, a int NOT NULL, g int GENERATED ALWAYS AS (a * 2) STORED CHECK (g > 0));
CREATE TABLE ident (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);
CREATE TABLE coll (k text COLLATE "C" PRIMARY KEY, v text);
CREATE TABLE chain_s (id int PRIMARY KEY, v text);
CREATE TABLE chain_e (id int PRIMARY KEY, v text);
CREATE TABLE full_ri (id int PRIMARY KEY, v text);
CREATE TABLE late (id int PRIMARY KEY, code text, v text);
CREATE TABLE toasty (id int PRIMARY KEY, big text, n int);
};
$source->safe_psql('postgres', $ddl . q{ALTER TABLE full_ri REPLICA IDENTITY FULL;
CREATE PUBLICATION pub FOR TABLE held, gen, ident, coll, chain_s, chain_e, full_ri, late, toasty;});
$dest->safe_psql('postgres', $ddl);
$dest->safe_psql('postgres', q{
SELECT cdc.register_mapping('held');
SELECT cdc.register_mapping('gen');
SELECT cdc.register_mapping('ident');
SELECT cdc.register_mapping('coll');
SELECT cdc.register_mapping('chain_s', outbox => true);
SELECT cdc.register_mapping('chain_e', outbox => true);
SELECT cdc.register_mapping('full_ri');
SELECT cdc.register_mapping('late');
SELECT cdc.register_mapping('toasty', outbox => true);
SELECT cdc.set_ordering('held', 'stream');
SELECT cdc.set_ordering('chain_s', 'stream');
SELECT cdc.set_ordering('late', 'stream');
});
create_subscription($dest, $source, 'hf', ['pub'], 'copy_data => false');
ok(wait_caught_up($source, $dest, 'hf'), 'subscription streaming');

sub worker_waits
{
	return $dest->poll_query_until('postgres', q{
		SELECT count(*) > 0 FROM pg_stat_activity a JOIN cdc.subscription_status s ON a.pid = s.worker_pid
		 WHERE s.name = 'hf' AND a.wait_event_type = 'Lock'});
}

# 1. uncommitted destination INSERT of the key
for my $end (qw(ROLLBACK COMMIT)) {
	my $id = $end eq 'ROLLBACK' ? 1 : 2;
	my $bg = $dest->background_psql('postgres');
	$bg->query_safe('BEGIN');
	$bg->query_safe("INSERT INTO held VALUES ($id, 'local')");
	$source->safe_psql('postgres', "INSERT INTO held VALUES ($id, 'src'), ($id + 10, 'other')");
	ok(worker_waits(), "1/$end: the worker waits for the session holding key $id");
	$bg->query_safe($end);
	$bg->quit;
	ok(wait_caught_up($source, $dest, 'hf'), "1/$end: caught up");
	compare_table($source, $dest, 'SELECT * FROM held ORDER BY id', "1/$end: rows equal the source's");
}

# 2. a session deleting a hand-written row of the key
for my $end (qw(COMMIT ROLLBACK)) {
	my $id = $end eq 'COMMIT' ? 21 : 22;
	$dest->safe_psql('postgres', "INSERT INTO held VALUES ($id, 'local')");
	my $bg = $dest->background_psql('postgres');
	$bg->query_safe('BEGIN');
	$bg->query_safe("DELETE FROM held WHERE id = $id");
	$source->safe_psql('postgres', "INSERT INTO held VALUES ($id, 'src')");
	ok(worker_waits(), "2/$end: the worker waits for the session deleting key $id");
	$bg->query_safe($end);
	$bg->quit;
	ok(wait_caught_up($source, $dest, 'hf'), "2/$end: caught up");
	compare_table($source, $dest, 'SELECT * FROM held ORDER BY id', "2/$end: rows equal the source's");
}

# 3. shapes, the destination ahead
$dest->safe_psql('postgres', q{
INSERT INTO gen (id, a) SELECT g, 100 + g FROM generate_series(1, 10) g;
INSERT INTO ident OVERRIDING SYSTEM VALUE SELECT g, 'local' FROM generate_series(1, 10) g;
INSERT INTO coll SELECT 'k' || g, 'local' FROM generate_series(1, 10) g;
});
$source->safe_psql('postgres', q{
BEGIN;
INSERT INTO gen (id, a) SELECT g, g FROM generate_series(1, 20) g;
INSERT INTO ident (v) SELECT 'src' FROM generate_series(1, 20) g;
INSERT INTO coll SELECT 'k' || g, 'src' FROM generate_series(1, 20) g;
UPDATE gen SET a = a + 1 WHERE id % 2 = 0;
DELETE FROM ident WHERE id % 3 = 0;
INSERT INTO ident OVERRIDING SYSTEM VALUE SELECT g, 'again' FROM generate_series(1, 20) g WHERE g % 3 = 0;
COMMIT;
});
ok(wait_caught_up($source, $dest, 'hf'), '3: caught up');
is(status_row($dest, 'hf', 'state'), 'streaming', '3: no error');
for my $t (qw(gen ident coll)) {
	my $k = $t eq 'coll' ? 'k' : 'id';
	compare_table($source, $dest, "SELECT * FROM $t ORDER BY $k", "3: $t equals the source's");
}

# 4. chains in queues of three changes
$dest->safe_psql('postgres', q{
INSERT INTO chain_s SELECT g, 'local' FROM generate_series(1, 30, 2) g;
INSERT INTO chain_e SELECT g, 'local' FROM generate_series(1, 30, 2) g;
INSERT INTO full_ri SELECT g, 'local' FROM generate_series(1, 30, 2) g;
});
for my $t (qw(chain_s chain_e full_ri)) {
	$source->safe_psql('postgres', qq{
BEGIN;
INSERT INTO $t SELECT g, 'a' FROM generate_series(1, 10) g;
UPDATE $t SET v = 'b' WHERE id % 2 = 0;
DELETE FROM $t WHERE id % 3 = 0;
INSERT INTO $t SELECT g, 'c' FROM generate_series(1, 10) g WHERE g % 3 = 0;
UPDATE $t SET id = id + 100 WHERE id IN (4, 5);
INSERT INTO $t VALUES (4, 'd'), (5, 'd');
UPDATE $t SET id = id - 100 + 20 WHERE id IN (104, 105);
COMMIT;
INSERT INTO $t VALUES (11, 'x');
UPDATE $t SET v = 'y' WHERE id = 11;
DELETE FROM $t WHERE id = 11;
INSERT INTO $t VALUES (11, 'z');
BEGIN;
INSERT INTO $t VALUES (13, 'p');
UPDATE $t SET id = 15 WHERE id = 13;
UPDATE $t SET id = 13 WHERE id = 15;
DELETE FROM $t WHERE id = 13;
INSERT INTO $t VALUES (13, 'q'), (15, 'q');
COMMIT;
});
}
ok(wait_caught_up($source, $dest, 'hf'), '4: caught up');
is(status_row($dest, 'hf', 'state'), 'streaming', '4: no error');
for my $t (qw(chain_s chain_e full_ri)) {
	# rows the destination had and the source never touched stay
	compare_table($source, $dest, "SELECT * FROM $t WHERE id NOT IN (17, 19, 21, 23, 25, 27, 29) ORDER BY id",
		"4: $t equals the source's");
}
# 37 changes, 6 of them key changes, whose outbox rows are two (both
# entities, docs/semantics.md)
for my $t (qw(chain_s chain_e)) {
	is($dest->safe_psql('postgres', qq{SELECT applied || '|' || duplicate || '|' || stale || '|' || conflict FROM cdc.stats WHERE target = '$t'::regclass}),
		'37|0|0|0', "4: $t every change applied");
	is(outbox_summary($dest, qq{target = '$t'::regclass}), '43|43', "4: $t one outbox row per change (two per key change)");
}
$source->safe_psql('postgres', q{
BEGIN;
INSERT INTO chain_s VALUES (40, 'before');
TRUNCATE chain_s;
INSERT INTO chain_s VALUES (40, 'after'), (41, 'after');
COMMIT;
});
ok(wait_caught_up($source, $dest, 'hf'), '4/truncate: caught up');
compare_table($source, $dest, 'SELECT * FROM chain_s ORDER BY id', '4/truncate: chain_s equals the source\'s');

# 5. a unique index created while the worker runs
$dest->safe_psql('postgres', q{INSERT INTO late SELECT g, 'c' || g, 'local' FROM generate_series(1, 10) g;});
$source->safe_psql('postgres', q{INSERT INTO late VALUES (100, 'warm', 'x')});
ok(wait_caught_up($source, $dest, 'hf'), '5: caught up (warm)');
$dest->safe_psql('postgres', q{CREATE UNIQUE INDEX late_code ON late (code)});
$source->safe_psql('postgres', q{BEGIN; INSERT INTO late SELECT g, 'c' || g, 'src' FROM generate_series(1, 5) g; COMMIT;});
ok(wait_caught_up($source, $dest, 'hf'), '5: caught up (unique index)');
$dest->safe_psql('postgres', q{DROP INDEX late_code; CREATE UNIQUE INDEX late_code_p ON late (code) WHERE v <> 'zz'});
$source->safe_psql('postgres', q{BEGIN; INSERT INTO late SELECT g, 'c' || g, 'src' FROM generate_series(6, 10) g; COMMIT;});
ok(wait_caught_up($source, $dest, 'hf'), '5: caught up (partial unique index)');
is(status_row($dest, 'hf', 'state || coalesce(last_error, \'\')'), 'streaming', '5: no error');
compare_table($source, $dest, 'SELECT * FROM late ORDER BY id', '5: late equals the source\'s');

# 6. a deadlock: the worker inserted 51 and waits for a session's 52, the
# session then inserts 51; whichever is chosen, the rows end as the source's
{
	my $bg = $dest->background_psql('postgres', on_error_stop => 0);
	$bg->query_safe('BEGIN');
	$bg->query_safe(q{INSERT INTO held VALUES (52, 'local')});
	$source->safe_psql('postgres', q{BEGIN; INSERT INTO held VALUES (51, 'src'), (52, 'src'); COMMIT;});
	ok(worker_waits(), '6: the worker waits for the session');
	$bg->query(q{INSERT INTO held VALUES (51, 'local')});
	$bg->query('COMMIT');
	$bg->quit;
	ok(wait_caught_up($source, $dest, 'hf'), '6: caught up after the deadlock');
	compare_table($source, $dest, 'SELECT * FROM held ORDER BY id', '6: rows equal the source\'s');
}

# 7. entity records of the entity-ordered target: one live record per
# source row, tombstones for the rest of the 17 keys the source had
is($dest->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE NOT deleted) || '|' || count(*) FROM cdc.entity_state WHERE target = 'chain_e'::regclass}),
	$source->safe_psql('postgres', 'SELECT count(*) FROM chain_e') . '|17', '7: chain_e entity records and tombstones');

# 8. the worker under lock_timeout while a session holds the key: errors,
# retries, ends as the source
$dest->safe_psql('postgres', q{ALTER SYSTEM SET lock_timeout = '300ms'; SELECT pg_reload_conf();});
disable_and_wait($source, $dest, 'hf');
enable_subscription($dest, 'hf');
{
	my $bg = $dest->background_psql('postgres');
	$bg->query_safe('BEGIN');
	$bg->query_safe(q{INSERT INTO chain_e VALUES (61, 'local')});
	$source->safe_psql('postgres', q{BEGIN; INSERT INTO chain_e VALUES (60, 'src'), (61, 'src'), (62, 'src'); UPDATE chain_e SET v = 'src2' WHERE id = 61; COMMIT;});
	ok(wait_status($dest, 'hf', q{last_error LIKE '%lock timeout%'}), '8: the worker times out on the held key')
	  or diag(status_row($dest, 'hf', 'last_error'));
	$bg->query_safe('COMMIT');
	$bg->quit;
	ok(wait_caught_up($source, $dest, 'hf'), '8: caught up after the timeouts');
	compare_table($source, $dest, 'SELECT * FROM chain_e WHERE id >= 60 ORDER BY id', '8: rows equal the source\'s');
	is($dest->safe_psql('postgres', q{SELECT applied FROM cdc.stats WHERE target = 'chain_e'::regclass}), '41', '8: the four changes counted once');
	is(outbox_summary($dest, q{target = 'chain_e'::regclass}), '47|47', '8: one outbox row each');
}
$dest->safe_psql('postgres', q{ALTER SYSTEM RESET lock_timeout; SELECT pg_reload_conf();});

# 9. unchanged TOAST values after a source INSERT the destination already has
$dest->safe_psql('postgres', q{INSERT INTO toasty SELECT g, 'local', 0 FROM generate_series(1, 6) g;});
$source->safe_psql('postgres', q{
BEGIN;
INSERT INTO toasty SELECT g, (SELECT string_agg(md5(g::text || i::text), '') FROM generate_series(1, 300) i), 1 FROM generate_series(1, 6) g;
UPDATE toasty SET n = 2 WHERE id <= 3;
COMMIT;
UPDATE toasty SET n = 3 WHERE id IN (2, 4);
BEGIN;
INSERT INTO toasty VALUES (7, (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 300) i), 1);
UPDATE toasty SET n = 4 WHERE id = 7;
DELETE FROM toasty WHERE id = 5;
INSERT INTO toasty SELECT 5, big, 9 FROM toasty WHERE id = 7;
UPDATE toasty SET n = 10 WHERE id = 5;
COMMIT;
});
ok(wait_caught_up($source, $dest, 'hf'), '9: caught up');
is(status_row($dest, 'hf', 'state'), 'streaming', '9: no error');
compare_table($source, $dest, 'SELECT id, md5(big), n FROM toasty ORDER BY id', '9: toasty equals the source\'s');
is(outbox_summary($dest, q{target = 'toasty'::regclass}), '16|16', '9: one outbox row per change');

# 11. a session locking (FOR SHARE) or updating a hand-written row of the key
for my $how ('SELECT * FROM held WHERE id = 81 FOR SHARE', q{UPDATE held SET v = 'changed' WHERE id = 82}) {
	my $id = $how =~ /81/ ? 81 : 82;
	$dest->safe_psql('postgres', "INSERT INTO held VALUES ($id, 'local')");
	my $bg = $dest->background_psql('postgres');
	$bg->query_safe('BEGIN');
	$bg->query_safe($how);
	$source->safe_psql('postgres', "INSERT INTO held VALUES ($id, 'src')");
	ok(worker_waits(), "11/$id: the worker waits for the session");
	$bg->query_safe('COMMIT');
	$bg->quit;
	ok(wait_caught_up($source, $dest, 'hf'), "11/$id: caught up");
	compare_table($source, $dest, 'SELECT * FROM held ORDER BY id', "11/$id: rows equal the source's");
}

# 10. a wrong hint's taken-back insert does not reach the destination's own
# logical decoding: the key's row is decoded as an UPDATE only
$dest->safe_psql('postgres', q{SELECT pg_create_logical_replication_slot('h3dec', 'test_decoding')});
$dest->safe_psql('postgres', q{INSERT INTO held VALUES (70, 'local'), (71, 'local')});
$dest->safe_psql('postgres', q{SELECT count(*) FROM pg_logical_slot_get_changes('h3dec', NULL, NULL)});
$source->safe_psql('postgres', q{INSERT INTO held VALUES (70, 'src'), (71, 'src'), (72, 'src')});
ok(wait_caught_up($source, $dest, 'hf'), '10: caught up');
is($dest->safe_psql('postgres', q{SELECT string_agg(substring(data from '^table public.held: (\w+): id\[integer\]:(\d+)'), ',' ORDER BY lsn)
  FROM pg_logical_slot_get_changes('h3dec', NULL, NULL) WHERE data LIKE 'table public.held:%'}),
	'UPDATE,UPDATE,INSERT', '10: taken keys decoded as UPDATE, the new one as INSERT, nothing taken back');
$dest->safe_psql('postgres', q{SELECT pg_drop_replication_slot('h3dec')});

# taken-back inserts leave nothing live
$dest->safe_psql('postgres', 'ANALYZE held, gen, ident, coll, chain_s, chain_e, full_ri, late, toasty');
for my $t (qw(held gen ident coll chain_s chain_e full_ri late toasty)) {
	is($dest->safe_psql('postgres', qq{SELECT n_live_tup = (SELECT count(*) FROM $t) FROM pg_stat_user_tables WHERE relid = '$t'::regclass}),
		't', "$t: no taken-back row live");
}

done_testing();

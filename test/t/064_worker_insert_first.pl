# Insert first (docs/internals.md, "Insert first"): the worker writes a row
# whose source history begins with an INSERT (or follows a DELETE) without
# looking its key up first.  The hint comes from the source; the destination
# may disagree (a row written there by someone else, a divergence), and then
# the write must still end as the upsert it replaces: the key's row updated,
# no error, no row twice.
#
#   1. a stream-ordered target with only its primary key, whose rows 1-40
#      already exist on the destination with other values: the source
#      inserts 1-60 in one transaction (some updated after in the same
#      transaction, some deleted and inserted again): every row equals the
#      source's, and the first taken key turns insert first off for the rest
#      of the write (one taken-back insert, not 40: a DEBUG1 line each);
#   2. the same with a second unique index (code): the taken key must not
#      raise 23505 on that index.  Such a table is written change by change
#      today (its rows are not independent: IndependentRowsPg), and the
#      table writer would not insert first into it either (another unique
#      index or an exclusion constraint turns it off);
#   3. an entity-ordered target with outbox: the same rows, and one outbox
#      row per source change;
#   4. small source transactions (one change each) of the same kind, which
#      the worker applies in one queue: the same.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest', "cdc.database = 'postgres'\nlog_min_messages = debug1\n");

my $ddl = q{
CREATE TABLE pk_only (id int PRIMARY KEY, v text NOT NULL);
CREATE TABLE two_unique (id int PRIMARY KEY, code text NOT NULL UNIQUE, v text NOT NULL);
CREATE TABLE entity_ob (id int PRIMARY KEY, v text NOT NULL);
};
$source->safe_psql('postgres', $ddl . q{CREATE PUBLICATION pub FOR TABLE pk_only, two_unique, entity_ob;});
$dest->safe_psql('postgres', $ddl);
$dest->safe_psql('postgres', q{
SELECT cdc.register_mapping('pk_only');
SELECT cdc.register_mapping('two_unique');
SELECT cdc.register_mapping('entity_ob', outbox => true);
SELECT cdc.set_ordering('pk_only', 'stream');
SELECT cdc.set_ordering('two_unique', 'stream');
});
create_subscription($dest, $source, 'ins', ['pub'], 'copy_data => false');
ok(wait_caught_up($source, $dest, 'ins'), 'subscription streaming');

# rows the destination has and the source does not (yet): same keys, same
# unique codes, other values
$dest->safe_psql('postgres', q{
INSERT INTO pk_only SELECT g, 'local ' || g FROM generate_series(1, 40) g;
INSERT INTO two_unique SELECT g, 'code ' || g, 'local ' || g FROM generate_series(1, 40) g;
INSERT INTO entity_ob SELECT g, 'local ' || g FROM generate_series(1, 40) g;
});

# 1-3: one source transaction per table: inserts 1-60, then updates of every
# third, deletes and re-inserts of every fifth
my $log_offset = -s $dest->logfile;
for my $t (qw(pk_only two_unique entity_ob)) {
	my $cols = $t eq 'two_unique' ? q{g, 'code ' || g, 'src ' || g} : q{g, 'src ' || g};
	my $recols = $t eq 'two_unique' ? q{g, 'code ' || g, 'again ' || g} : q{g, 'again ' || g};
	$source->safe_psql('postgres', qq{
BEGIN;
INSERT INTO $t SELECT $cols FROM generate_series(1, 60) g;
UPDATE $t SET v = v || ' updated' WHERE id % 3 = 0;
DELETE FROM $t WHERE id % 5 = 0;
INSERT INTO $t SELECT $recols FROM generate_series(1, 60) g WHERE g % 5 = 0;
COMMIT;
});
}
ok(wait_caught_up($source, $dest, 'ins'), 'caught up after the large transactions');
is(status_row($dest, 'ins', 'state'), 'streaming', 'no error');
for my $t (qw(pk_only two_unique entity_ob)) {
	compare_table($source, $dest, "SELECT * FROM $t ORDER BY id", "$t: every row equals the source's (taken keys updated)");
}
# 60 inserts + 20 updates + 12 deletes + 12 inserts per table
is($dest->safe_psql('postgres', q{SELECT applied || '|' || duplicate || '|' || stale || '|' || conflict FROM cdc.stats WHERE target = 'entity_ob'::regclass}),
	'104|0|0|0', 'entity-ordered target: every change applied');
is(outbox_summary($dest, q{target = 'entity_ob'::regclass}), '104|104', 'one outbox row per source change');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM two_unique WHERE code = 'code 7'}), '1', 'no second row of a unique code');
# A wrong hint turns insert first off for the rest of its write: 40 taken
# keys in one write of each table leave one taken-back insert, not 40.
my $log = slurp_file($dest->logfile, $log_offset);
my %taken;
$taken{$1}++ while $log =~ /a key of table "(\w+)" expected to be new is taken on the destination/g;
is($taken{pk_only} // 0, 1, 'pk_only: one taken-back insert for the 40 taken keys of its write');
is($taken{entity_ob} // 0, 1, 'entity_ob: one taken-back insert for the 40 taken keys of its write');
ok(!$taken{two_unique}, 'two_unique (a second unique index): no insert first at all');

# 4. one change per source transaction, the destination ahead again
$dest->safe_psql('postgres', q{
INSERT INTO pk_only SELECT g, 'local ' || g FROM generate_series(101, 130) g;
INSERT INTO two_unique SELECT g, 'code ' || g, 'local ' || g FROM generate_series(101, 130) g;
INSERT INTO entity_ob SELECT g, 'local ' || g FROM generate_series(101, 130) g;
});
$source->safe_psql('postgres', join('', map {
	my $g = $_;
	"INSERT INTO pk_only VALUES ($g, 'src $g');\n"
	  . "INSERT INTO two_unique VALUES ($g, 'code $g', 'src $g');\n"
	  . "INSERT INTO entity_ob VALUES ($g, 'src $g');\n"
	  . ($g % 4 == 0 ? "UPDATE pk_only SET v = 'upd $g' WHERE id = $g;\nDELETE FROM entity_ob WHERE id = $g;\n" : '')
} 101 .. 150));
ok(wait_caught_up($source, $dest, 'ins'), 'caught up after the small transactions');
is(status_row($dest, 'ins', 'state'), 'streaming', 'no error');
for my $t (qw(pk_only two_unique entity_ob)) {
	compare_table($source, $dest, "SELECT * FROM $t ORDER BY id", "$t: every row equals the source's after the small transactions");
}
# 104 + 50 inserts + 12 deletes
is($dest->safe_psql('postgres', q{SELECT applied || '|' || conflict FROM cdc.stats WHERE target = 'entity_ob'::regclass}),
	'166|0', 'entity-ordered target: every change applied');
is(outbox_summary($dest, q{target = 'entity_ob'::regclass}), '166|166', 'one outbox row per source change');

done_testing();

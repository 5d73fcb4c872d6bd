# A source TRUNCATE of tables linked by a foreign key (the worker path;
# docs/worker.md, "Truncate").  pgoutput sends one TRUNCATE message listing
# every table; PostgreSQL refuses to truncate a referenced table alone, so
# the destination must truncate them together, as the source did, with one
# statement.  Also: each truncated table gets its outbox row 't', the
# tables truncated one at a time later still work, and a replay of the
# stream (slot and replication origin rewound) changes nothing.
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

sub dq { return $dest->safe_psql('postgres', $_[0]); }
sub sq { return $source->safe_psql('postgres', $_[0]); }

my $ddl = q{CREATE TABLE parent (id int PRIMARY KEY, name text);
CREATE TABLE child (id int PRIMARY KEY, parent_id int NOT NULL REFERENCES parent, note text);
CREATE TABLE other (id int PRIMARY KEY);};
sq($ddl . q{INSERT INTO parent VALUES (1, 'p1'), (2, 'p2');
INSERT INTO child VALUES (10, 1, 'c10'), (20, 2, 'c20');
INSERT INTO other VALUES (5);
CREATE PUBLICATION pub_fk FOR TABLE parent, child, other;});
dq($ddl . q{SELECT count(*) FROM cdc.register_mapping('parent', outbox => true);
SELECT count(*) FROM cdc.register_mapping('child', outbox => true);
SELECT count(*) FROM cdc.register_mapping('other');});
create_subscription($dest, $source, 'fk', ['pub_fk']);
ok(wait_caught_up($source, $dest, 'fk'), 'copied and streaming');
is(dq('SELECT (SELECT count(*) FROM parent) || ' . "'/'" . ' || (SELECT count(*) FROM child)'), '2/2', 'rows copied');

# One TRUNCATE of both tables (and a third one, unrelated), after changes in the same transaction.
slot_save($source, 'fk', 'fk_saved');
my $saved = dq(q{SELECT applied_lsn FROM cdc.subscription_status WHERE name = 'fk'});
sq(q{BEGIN; INSERT INTO parent VALUES (3, 'p3'); INSERT INTO child VALUES (30, 3, 'c30');
TRUNCATE parent, child, other; INSERT INTO parent VALUES (4, 'p4'); COMMIT;});
ok(wait_caught_up($source, $dest, 'fk'), 'the TRUNCATE of linked tables applies');
is(status_row($dest, 'fk', q{coalesce(last_error, '') || retry_count}), '0', 'no error, no retry');
is(dq(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM parent}), '4', 'parent: only the row inserted after the truncate');
is(dq('SELECT count(*) FROM child'), '0', 'child emptied');
is(dq('SELECT count(*) FROM other'), '0', 'the unrelated table emptied too');
is(dq(q{SELECT string_agg(target::text || ':' || op, ' ' ORDER BY id) FROM cdc.outbox WHERE op = 't'}),
	'parent:t child:t', 'one outbox row t per truncated table with an outbox, in the order of the message');

# Later truncates of one table at a time (the child first) still work.
sq(q{INSERT INTO child VALUES (40, 4, 'c40')});
sq('TRUNCATE child');
sq('DELETE FROM parent');
ok(wait_caught_up($source, $dest, 'fk'), 'single-table truncate and deletes apply');
is(dq('SELECT (SELECT count(*) FROM parent) || ' . "'/'" . ' || (SELECT count(*) FROM child)'), '0/0', 'both empty');
is(dq(q{SELECT count(*) FROM cdc.outbox WHERE op = 't'}), '3', 'the third truncate has its outbox row');

# The stream applied again from before the first TRUNCATE (slot and
# replication origin rewound): every change is a duplicate, nothing moves.
my $state = q{SELECT (SELECT string_agg(id::text, ',' ORDER BY id) FROM parent) || '|' || (SELECT count(*) FROM child)
  || '|' || (SELECT count(*) FROM cdc.outbox) || '|' || (SELECT count(*) FROM other)};
my $before = dq($state);
my $end = source_lsn($source);
disable_and_wait($source, $dest, 'fk');
slot_restore($source, 'fk', 'fk_saved');
origin_rewind($dest, 'fk', $saved);
enable_subscription($dest, 'fk');
ok(wait_caught_up($source, $dest, 'fk', $end), 'the replayed stream applies');
is(dq($state), $before, 'replay: rows and outbox unchanged');
is(status_row($dest, 'fk', q{coalesce(last_error, '') || retry_count}), '0', 'replay: no error');

done_testing();

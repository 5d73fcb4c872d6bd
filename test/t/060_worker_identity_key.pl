# A source table whose replica identity does not carry the destination key
# (docs/worker.md, "Replica identity and the destination key"): the source
# table keeps its primary key id but has REPLICA IDENTITY USING INDEX on
# code, the destination is keyed by id.  pgoutput then never sends the old
# id, so an update that changes id used to be applied as an insert of the
# new id, leaving the row under the old id behind: the destination held one
# row more than the source, in state streaming, with no error.
#
#   (a) updates that keep the key still apply (B36 (a), 044), also when the
#       row was inserted earlier in the same source transaction and is only
#       queued for the batch engine;
#   (b) an update that changes id stops the worker with 55000 naming the
#       column; nothing of its transaction is applied;
#   (c) keyed by the replica identity's column (register_mapping
#       key_columns => '{code}'), the retry applies it: destination equals
#       source.
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

sq(q{CREATE TABLE ri (id int PRIMARY KEY, code text NOT NULL, v text);
CREATE UNIQUE INDEX ri_code ON ri (code);
ALTER TABLE ri REPLICA IDENTITY USING INDEX ri_code;
INSERT INTO ri VALUES (1, 'a', 'x'), (2, 'b', 'y');
CREATE PUBLICATION pub_ri FOR TABLE ri;});
# the destination has no unique index on code: nothing else would notice a second row
dq(q{CREATE TABLE ri (id int PRIMARY KEY, code text NOT NULL, v text);
SELECT cdc.register_mapping('ri', outbox => true);});
create_subscription($dest, $source, 'ri', ['pub_ri']);
ok(wait_caught_up($source, $dest, 'ri'), 'copied and streaming');

my $rows = 'SELECT id, code, v FROM ri ORDER BY id';

# (a)
sq(q{UPDATE ri SET v = 'z' WHERE code = 'b'});
sq(q{BEGIN; INSERT INTO ri VALUES (3, 'c', 'n'); UPDATE ri SET v = 'm' WHERE id = 3; COMMIT});
ok(wait_caught_up($source, $dest, 'ri'), '(a) updates that keep the key apply');
compare_table($source, $dest, $rows, '(a) destination equals source');

# (b)
sq(q{BEGIN; UPDATE ri SET v = 'before' WHERE id = 2; UPDATE ri SET id = 10 WHERE id = 1; COMMIT});
my $lsn = source_lsn($source);
ok(wait_status($dest, 'ri', q{state = 'error' AND last_error ~ 'replica identity does not carry key column "id"'}),
	'(b) an update that changes the key stops the worker');
like(status_row($dest, 'ri', 'last_error'), qr/may have changed the key/, '(b) the error says why');
is(dq($rows), "1|a|x\n2|b|z\n3|c|m", '(b) nothing of the transaction applied, no second row');
is(dq(q{SELECT count(*) FROM cdc.outbox WHERE target = 'ri'::regclass}), '3', '(b) no outbox row for it');
is(dq(q{SELECT count(*) > 0 FROM cdc.subscription_errors WHERE name = 'ri' AND error ~ 'may have changed the key'}), 't',
	'(b) the error is in the history');

# (c) key the destination by the replica identity's column: the retry applies
dq(q{CREATE UNIQUE INDEX ri_code ON ri (code);
SELECT cdc.register_mapping('ri', outbox => true, key_columns => '{code}');});
ok(wait_caught_up($source, $dest, 'ri', $lsn), '(c) keyed by code, the retry applies');
compare_table($source, $dest, $rows, '(c) destination equals source');
is(dq(q{SELECT string_agg(op, '' ORDER BY id) FROM cdc.outbox WHERE target = 'ri'::regclass}), 'ucuuu',
	'(c) outbox: every change once');

done_testing();

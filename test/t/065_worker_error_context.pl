# Worker error context lines (hostile review h3 of 46e1db9 / 2a395d5): the
# CONTEXT of a worker error names the source transaction, the change's table
# (W->cur_rel, a pointer to the relation) and the engine's change; across a
# RELATION message in the middle of a source transaction (the relation map
# entry replaced), a queue spanning two tables, and the one-by-one retry.
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

my $tables = q{
CREATE TABLE ca (id int PRIMARY KEY, v text);
CREATE TABLE cb (id int PRIMARY KEY, v text);
};
$source->safe_psql('postgres', $tables . q{CREATE PUBLICATION pub FOR TABLE ca, cb;});
$dest->safe_psql('postgres', $tables . q{
SELECT cdc.register_mapping('ca', source_name => 'sub1');
SELECT cdc.register_mapping('cb', source_name => 'sub1');
ALTER TABLE cb ADD CONSTRAINT cb_v_not_bad CHECK (v IS DISTINCT FROM 'bad');
});
create_subscription($dest, $source, 'sub1', ['pub']);
ok(wait_caught_up($source, $dest, 'sub1'), 'streaming');

# 1. a RELATION message in the middle of a source transaction (ca gets a
# column the destination lacks), then a failing change of ca
$source->safe_psql('postgres', q{
BEGIN;
INSERT INTO ca VALUES (1, 'one');
INSERT INTO cb VALUES (1, 'one');
ALTER TABLE ca ADD COLUMN w int;
INSERT INTO ca VALUES (2, 'two', 2);
COMMIT;
});
ok(wait_status($dest, 'sub1', q{state = 'error' AND last_error LIKE '%after.w%'}), 'unknown column after a RELATION message: error');
my $err = status_row($dest, 'sub1', 'last_error');
note $err;
like($err, qr/CONTEXT: .*cdc_apply change 3 of the source transaction, target table public\.ca, delivery key "pgoutput:[^"]*:\d+"/s,
	'the engine line names change 3 and its table');
unlike($err, qr/table public\.cb/, 'nothing names the table of an earlier change');
like($err, qr/cdc_apply subscription "sub1": source transaction \d+ committed at [0-9A-F]+\/[0-9A-F]+/, 'the worker line names the transaction');
$dest->safe_psql('postgres', 'ALTER TABLE ca ADD COLUMN w int');
ok(wait_caught_up($source, $dest, 'sub1'), 'after adding the column the retry applies it');

# 2. a failing change of cb after changes of ca in one source transaction
# (the CHECK fails on the destination), several transactions in a group
$source->safe_psql('postgres', q{
INSERT INTO ca VALUES (10, 'ten', 10);
BEGIN;
INSERT INTO ca VALUES (11, 'eleven', 11);
INSERT INTO cb VALUES (11, 'bad');
INSERT INTO ca VALUES (12, 'twelve', 12);
COMMIT;
});
ok(wait_status($dest, 'sub1', q{state = 'error' AND last_error LIKE '%cb_v_not_bad%'}), 'check violation: error');
$err = status_row($dest, 'sub1', 'last_error');
note $err;
like($err, qr/cdc_apply change 2 of the source transaction, target table public\.cb, delivery key "pgoutput:[^"]*:\d+"/s,
	'the engine line names change 2 of cb');
unlike($err, qr/target table public\.ca/, 'not the change of ca before or after it');
$dest->safe_psql('postgres', 'ALTER TABLE cb DROP CONSTRAINT cb_v_not_bad');
ok(wait_caught_up($source, $dest, 'sub1'), 'applied once the constraint is gone');
compare_table($source, $dest, 'SELECT id, v FROM ca ORDER BY 1', 'ca equal');
compare_table($source, $dest, 'SELECT * FROM cb ORDER BY 1', 'cb equal');

# 3. the copy of an added table fails (a CHECK on the destination): the
# context names the table copied.  Failed before: copy_table set
# W->cur_table, but worker_error_context showed it only inside a source
# transaction, so the worker's line was the bare 'cdc_apply subscription
# "sub1"' (the engine's line still named the target).
$source->safe_psql('postgres', q{
CREATE TABLE cc (id int PRIMARY KEY, v text);
INSERT INTO cc VALUES (1, 'fine'), (2, 'bad');
ALTER PUBLICATION pub ADD TABLE cc;
});
$dest->safe_psql('postgres', q{
CREATE TABLE cc (id int PRIMARY KEY, v text CHECK (v IS DISTINCT FROM 'bad'));
SELECT cdc.register_mapping('cc', source_name => 'sub1');
});
$dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.refresh_subscription('sub1')});
ok(wait_status($dest, 'sub1', q{state = 'error' AND last_error LIKE '%cc_v_check%'}), 'copy: check violation, error');
$err = status_row($dest, 'sub1', 'last_error');
note $err;
like($err, qr/target table public\.cc/, 'the engine line names the copied table');
like($err, qr/cdc_apply subscription "sub1"[^\n]*public\.cc/, 'the worker line names the table being copied');

$dest->stop;
$source->stop;
done_testing();

# The worker applying through an unmapped partitioned root while one of its
# partitions has a mapping of its own (fresh-user review h3).
#
# The engine refuses a target in one partition tree with a mapped table
# other than itself (55000, sql/partition_apply_tree.sql).  The worker is
# exempt for its unmapped same-name leaf targets (leaves published without
# publish_via_partition_root while the root is mapped: TAP 117, documented
# in docs/worker.md), but the old code exempted every unmapped worker
# target: a root published with publish_via_partition_root applied through
# the unmapped destination root while the partition pr1 was mapped, so a
# row of pr1 got a second entity record, and a change applied through pr1's
# mapping (cdc_apply, an older version) overwrote the newer one the worker
# had applied (v 'w1' at the worker's LSN replaced by 'k-old' at 0/10).
# Now the worker stops with 55000 naming both tables and retries, nothing
# of the change applied; once the partition's mapping is unregistered the
# change applies through the root.
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

my $ddl = q{CREATE TABLE pr (id int PRIMARY KEY, n int NOT NULL) PARTITION BY RANGE (id);
	CREATE TABLE pr1 PARTITION OF pr FOR VALUES FROM (0) TO (100);
	CREATE TABLE pr2 PARTITION OF pr FOR VALUES FROM (100) TO (200);};
sq($ddl . q{INSERT INTO pr VALUES (1, 0), (101, 0);
	CREATE PUBLICATION pp FOR TABLE pr WITH (publish_via_partition_root = true);});
dq($ddl);
create_subscription($dest, $source, 's', ['pp']);
ok(wait_caught_up($source, $dest, 's'), 'the root copied, streaming');
is(id_n_rows($dest, 'pr'), '2 1:0,101:0', 'the copy');

# the partition pr1 mapped at the destination (fed by another pipeline)
dq(q{SELECT cdc.register_mapping('pr1', source_table => 'pr1')});
sq(q{UPDATE pr SET n = 1 WHERE id = 1});
ok(wait_status($dest, 's', q{state = 'error' AND last_error LIKE '%in one partition tree%'}),
	'the worker stops on the change through the root');
like(status_row($dest, 's', 'last_error'), qr/table public\.pr and table public\.pr1 are in one partition tree/,
	'the error names both tables');
is(id_n_rows($dest, 'pr'), '2 1:0,101:0', 'nothing of the change applied');

# one mapping in the tree again: the change applies through the root
dq(q{SELECT cdc.unregister_mapping('pr1')});
ok(wait_caught_up($source, $dest, 's'), 'caught up after the unregistration');
is(id_n_rows($dest, 'pr'), '2 1:1,101:0', 'the change applied');
done_testing();

# cdc.audit and cdc.resync of a table whose schema name holds a dot and a
# double quote (fresh-user review h3; failed on integ 51e935b).  The worker
# copies and streams such a table, and cdc.audit of the whole subscription
# finds a row changed by hand; but every call that names the destination
# table - cdc.resync(audit => id), which repairs each finding's target,
# cdc.resync(target => ...) and cdc.audit(target => ...) - failed with 55000
# "table Sch"x.y.Tab."le (feeding ...) is not part of subscription": the
# source table's schema and name were taken back from the display text
# "schema.table" by its first dot (SourceNameOf, src/pg/audit/tables.cpp).
# Expected: all three find the table; the resync repairs the row.  And a
# resync whose from_key is after its to_key says so (it gave 0A000 "the
# keys ... are ordered differently on the source and the destination").
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('dotted_source');
my $dest = new_dest('dotted_dest');
my $ddl = q{CREATE SCHEMA "Sch""x.y";
CREATE TABLE "Sch""x.y"."Tab.""le" ("Id" int PRIMARY KEY, "co""l.1" text);};
$source->safe_psql('postgres', $ddl . q{
INSERT INTO "Sch""x.y"."Tab.""le" SELECT g, 'v' || g FROM generate_series(1, 5) g;
CREATE PUBLICATION pub_dotted FOR TABLE "Sch""x.y"."Tab.""le";});
$dest->safe_psql('postgres', $ddl);
create_subscription($dest, $source, 'dotted', ['pub_dotted']);
$source->safe_psql('postgres', q{UPDATE "Sch""x.y"."Tab.""le" SET "co""l.1" = 'streamed' WHERE "Id" = 1});
ok(wait_caught_up($source, $dest, 'dotted'), 'copied and streaming');
my $rows = q{SELECT string_agg("Id" || ':' || "co""l.1", ',' ORDER BY "Id") FROM "Sch""x.y"."Tab.""le"};
compare_table($source, $dest, $rows, 'the copy and the stream apply the table');

$dest->safe_psql('postgres', q{UPDATE "Sch""x.y"."Tab.""le" SET "co""l.1" = 'by hand' WHERE "Id" = 2});
my ($audit_id, $findings) = split /\|/, $dest->safe_psql('postgres', q{CALL cdc.audit('dotted')});
is($findings, '1', 'cdc.audit of the subscription finds the row changed by hand');

my ($rc, $out, $err) = $dest->psql('postgres', qq{CALL cdc.audit('dotted', target => '"Sch""x.y"."Tab.""le"')});
is($rc, 0, 'cdc.audit(target => the table) runs') or diag($err);
like($out, qr/\|1$/, 'cdc.audit(target => the table) finds the row');

($rc, $out, $err) = $dest->psql('postgres', qq{CALL cdc.resync('dotted', audit => $audit_id)});
is($rc, 0, 'cdc.resync(audit => id) runs') or diag($err);
compare_table($source, $dest, $rows, 'cdc.resync(audit => id) repairs the row');

$dest->safe_psql('postgres', q{UPDATE "Sch""x.y"."Tab.""le" SET "co""l.1" = 'by hand again' WHERE "Id" = 3});
($rc, $out, $err) = $dest->psql('postgres', q{CALL cdc.resync('dotted', target => '"Sch""x.y"."Tab.""le"', keys => '[3]')});
is($rc, 0, 'cdc.resync(target => the table, keys => ...) runs') or diag($err);
compare_table($source, $dest, $rows, 'cdc.resync(target => the table) repairs the row');

# from_key after to_key (also review h3): the error said the key columns
# sort differently on the two sides and to give them the same collation,
# for an integer key; it must say that the range is reversed.
($rc, $out, $err) = $dest->psql('postgres', q{CALL cdc.resync('dotted', target => '"Sch""x.y"."Tab.""le"', from_key => '{"Id": 4}', to_key => '{"Id": 2}')});
isnt($rc, 0, 'cdc.resync with from_key after to_key is refused');
like($err, qr/from_key.*after.*to_key/s, 'the error says from_key is after to_key');

$dest->safe_psql('postgres', q{SELECT cdc.drop_subscription('dotted', drop_slot => true)});
done_testing();

# The destination database's own settings (ALTER DATABASE ... SET, which a
# database owner may do; ALTER ROLE ... SET of the bootstrap superuser the
# worker connects as) must not change the values the worker applies.  The
# worker reads every source value as text with the destination columns'
# input functions, in a session that takes those settings; two of them
# change what the input functions read:
#
#   array_nulls = off   an unquoted NULL array element is the string
#                       "NULL": a text[] {a,NULL} became {a,"NULL"} (no
#                       error), an int[] {1,NULL} was refused (22P02) and
#                       the initial copy retried without end
#   xmloption = document an xml value the source holds as content
#                       ('<a/><b/>') was refused (2200M)
#
# and the ones that change only how values are printed or how ambiguous
# input is read (DateStyle 'SQL, DMY', IntervalStyle sql_standard,
# extra_float_digits 0, TimeZone) must not matter either: the rows, in the
# initial copy and streamed, equal the source's, and the outbox payloads
# carry the same values.  The worker now pins array_nulls = on and
# xmloption = content, as it pins search_path and session_replication_role.
# Shown failing before the fix: the copy stopped with 'field "after.ia"
# (column "ia" of type integer[]): invalid input syntax for type integer:
# "NULL"'.
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

my $ddl = q{CREATE TABLE v (id int PRIMARY KEY, ta text[], ia int[], x xml, iv interval, d date, tz timestamptz,
                            f float8, b bytea, dr daterange, note text);};
my $row = q{'{a,NULL,"NULL",""}', '{1,NULL}', '<a/><b/>', '-1 days +02:03:04', '2024-03-04', '2024-03-04 10:00+02',
            0.1::float8 + 0.2::float8, '\\x00ff'::bytea, '[2024-03-04,2024-03-05)'};
$source->safe_psql('postgres', $ddl . qq{
CREATE PUBLICATION p FOR TABLE v;
INSERT INTO v VALUES (1, $row, 'copied');
});
$dest->safe_psql('postgres', q{
CREATE DATABASE dst;
ALTER DATABASE dst SET array_nulls = off;
ALTER DATABASE dst SET xmloption = document;
ALTER DATABASE dst SET DateStyle = 'SQL, DMY';
ALTER DATABASE dst SET IntervalStyle = 'sql_standard';
ALTER DATABASE dst SET extra_float_digits = 0;
ALTER DATABASE dst SET TimeZone = 'Asia/Kathmandu';
ALTER DATABASE dst SET bytea_output = 'escape';
});
$dest->safe_psql('dst', 'CREATE EXTENSION cdc_apply; ' . $ddl . q{ SELECT cdc.register_mapping('v', outbox => true, source_name => 's');});
(my $conn = $source->connstr('postgres')) =~ s/'/''/g;
$dest->safe_psql('dst', "SELECT cdc.create_subscription('s', '$conn', ARRAY['p'])");

# Caught up with the source, or stopped with an error (then false at once,
# with the error shown).
sub caught_up
{
	my $lsn = source_lsn($source);
	$dest->poll_query_until('dst', qq{
		SELECT (applied_lsn >= '$lsn'::pg_lsn AND state = 'streaming') OR last_error IS NOT NULL
		  FROM cdc.subscription_status WHERE name = 's'}) or return 0;
	my $st = $dest->safe_psql('dst', q{SELECT state || '|' || coalesce(last_error, '') FROM cdc.subscription_status WHERE name = 's'});
	diag($st) unless $st eq 'streaming|';
	return $st eq 'streaming|';
}

# Both sides read in one session's settings, the defaults.
my $q = q{SET array_nulls = on; SET xmloption = content; SET DateStyle = ISO; SET IntervalStyle = postgres;
          SET extra_float_digits = 3; SET TimeZone = UTC; SET bytea_output = hex;
          SELECT id, ta, ta[2] IS NULL, ta[3] IS NULL, ia, x::text, iv, d, tz, f, b, dr, note FROM v ORDER BY id};

ok(caught_up(), 'initial copy done, no error');
is($dest->safe_psql('dst', $q), $source->safe_psql('postgres', $q), 'copy: the row equals the source (NULL element, xml content, interval, date, timestamptz, float8)');

$source->safe_psql('postgres', qq{
INSERT INTO v VALUES (2, $row, 'streamed');
UPDATE v SET ta = '{NULL}', ia = '{NULL,2}', note = 'updated' WHERE id = 1;
});
ok(caught_up(), 'streamed changes applied, no error');
is($dest->safe_psql('dst', $q), $source->safe_psql('postgres', $q), 'stream: the rows equal the source');
is($dest->safe_psql('dst', q{SELECT ta[1] IS NULL AND ia[1] IS NULL FROM v WHERE id = 1}), 't', 'stream: the updated arrays hold NULL elements');

# The outbox payloads (to_jsonb() of the row in the worker's session) carry
# the values applied, in the same text whatever the database's settings:
# the float8 exact (extra_float_digits 0 printed 0.3), the interval in the
# postgres style (sql_standard printed "+0-0 -1 +2:03:04"), bytea in hex,
# the daterange's bounds in ISO (DateStyle 'SQL, DMY' printed 04/03/2024).
is($dest->safe_psql('dst', q{SELECT concat_ws(' ', payload->'ta', payload->'ia', payload->'f',
                                         payload->'iv', payload->'b', payload->'dr',
                                         payload->'x')
                               FROM cdc.outbox WHERE entity_key->>'id' = '2'}),
	'["a", null, "NULL", ""] [1, null] 0.30000000000000004 "-1 days +02:03:04" "\\\\x00ff" "[2024-03-04,2024-03-05)" "<a/><b/>"',
	'outbox: the streamed row\'s payload has the NULL elements, the exact float8, the postgres interval, hex bytea, ISO range bounds');
# timestamptz is not pinned: JSON's ISO form with the offset of the
# database's TimeZone, the same instant.
is($dest->safe_psql('dst', q{SELECT (payload->>'tz')::timestamptz = '2024-03-04 10:00+02' FROM cdc.outbox WHERE entity_key->>'id' = '2'}),
	't', 'outbox: the timestamptz is the same instant');

# cdc.resync applies in the caller's session "as the worker applies": the
# same settings pinned for its repairs.  The caller's session here takes the
# database's array_nulls = off and xmloption = document.
$dest->safe_psql('dst', q{SET session_replication_role = replica; DELETE FROM v WHERE id = 2});
my ($audit_id, $findings) = split /\|/, $dest->safe_psql('dst', q{CALL cdc.audit('s')});
is($findings, '1', 'resync: the audit finds the row deleted at the destination');
my ($rc, $out, $err) = $dest->psql('dst', qq{CALL cdc.resync('s', audit => $audit_id)});
is($rc, 0, 'resync: no error') or diag($err);
is($dest->safe_psql('dst', $q), $source->safe_psql('postgres', $q), 'resync: the rows equal the source (the NULL elements and the xml content too)');

done_testing();

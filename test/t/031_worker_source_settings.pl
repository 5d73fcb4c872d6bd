# Values do not depend on the source's session settings (issue 12, item 1;
# scenario B25 of shared/scenarios.md).  pgoutput and COPY ... TO STDOUT
# render values with the output functions of the walsender's session, so a
# source database or role with DateStyle, IntervalStyle or
# extra_float_digits of its own would change the text the worker receives.
# The worker pins what PostgreSQL's own subscriber pins (DateStyle ISO,
# IntervalStyle postgres, extra_float_digits 3, client_encoding = the
# destination's encoding) and checks that the source applied it.
#
#   B25          a source database (DateStyle 'SQL, DMY', extra_float_digits
#                0) and role (IntervalStyle sql_standard, extra_float_digits
#                -3) with odd settings: dates, timestamps, intervals, float8
#                and float4 arrive exact, in the initial copy and streamed
#   unpinned     the check: a connection that does not get the settings
#                (test-only fault point source_settings_unpinned, what a
#                pooler that drops startup options does) stops the worker
#                with an error naming the setting, before anything is copied
#   LATIN1->UTF8 a source database in another encoding: converted exactly
#   UTF8->LATIN1 a character the destination encoding cannot hold: a clear
#                error (copy and stream), never a substitution; the
#                documented way past it
#   SQL_ASCII    bytes that are not valid in the destination encoding: a
#                clear error
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $source = new_source('source');
my $dest = new_dest('dest', '', extra => [ '--encoding=UTF8', '--locale=C' ]);

$source->safe_psql('postgres', q{
CREATE ROLE shopper LOGIN REPLICATION;
CREATE DATABASE shop ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
CREATE DATABASE latin ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
CREATE DATABASE ascii_db ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
ALTER DATABASE shop SET DateStyle = 'SQL, DMY';
ALTER DATABASE shop SET extra_float_digits = 0;
ALTER ROLE shopper IN DATABASE shop SET IntervalStyle = 'sql_standard';
ALTER ROLE shopper SET extra_float_digits = -3;
});

my $ev = 'CREATE TABLE ev (id int PRIMARY KEY, d date, ts timestamp, tz timestamptz, f float8, r float4, iv interval, note text);';
$source->safe_psql('shop', $ev . q{
GRANT SELECT ON ev TO shopper;
CREATE PUBLICATION shop_pub FOR TABLE ev;
INSERT INTO ev VALUES (1, '2024-03-04', '2024-03-04 10:00', '2024-03-04 10:00+02', 0.1::float8 + 0.2::float8,
                       '1.0000001', '-1 days -02:03:04', 'copied');
});
$dest->safe_psql('postgres', $ev);

# What a session of the subscription's role sees on the source: every value
# rendered ambiguously or rounded.
is($source->safe_psql('shop', 'SELECT d, ts, f, r, iv FROM ev', extra_params => [ '-U', 'shopper' ]),
	'04/03/2024|04/03/2024 10:00:00|0.3|1|-1 2:03:04',
	'B25 set-up: a source session of the role renders day/month, rounded floats, a sql_standard interval');

(my $shop_conn = $source->connstr('shop') . ' user=shopper') =~ s/'/''/g;
$dest->safe_psql('postgres', "SELECT cdc.create_subscription('shop', '$shop_conn', ARRAY['shop_pub'])");
ok(wait_caught_up($source, $dest, 'shop'), 'B25: initial copy done, streaming');

# Each value compared with the destination's own reading of the literal.
my $exact = q{SELECT id, d = '2024-03-04', ts = '2024-03-04 10:00', tz = '2024-03-04 10:00+02',
                     f = 0.1::float8 + 0.2::float8, r = '1.0000001'::float4,
                     iv = '-1 days -02:03:04'::interval AND iv::text = '-1 days -02:03:04', note
                FROM ev WHERE id IN (1, 2) ORDER BY id};
is($dest->safe_psql('postgres', $exact), '1|t|t|t|t|t|t|copied', 'B25 copy: row 1 exact (date, timestamps, float8, float4, interval)');

$source->safe_psql('shop', q{
INSERT INTO ev VALUES (2, '2024-03-04', '2024-03-04 10:00', '2024-03-04 10:00+02', 0.1::float8 + 0.2::float8,
                       '1.0000001', '-1 days -02:03:04', 'streamed');
INSERT INTO ev (id, d) VALUES (3, '2024-03-25');
INSERT INTO ev VALUES (4, '4713-01-01 BC', 'infinity', '-infinity', '-1e-310', '3.4028235e38',
                       '1 year 2 mons -3 days +04:05:06.789', 'extremes');
});
ok(wait_caught_up($source, $dest, 'shop'), 'B25: streamed rows applied');
is($dest->safe_psql('postgres', $exact), "1|t|t|t|t|t|t|copied\n2|t|t|t|t|t|t|streamed",
	'B25 stream: row 2 exact, like the copied row 1');
is($dest->safe_psql('postgres', 'SELECT id, d FROM ev WHERE id = 3'), '3|2024-03-25', 'B25 stream: id 3 has d = 2024-03-25');
is($dest->safe_psql('postgres', q{SELECT d = '4713-01-01 BC', ts = 'infinity', tz = '-infinity', f = '-1e-310'::float8,
                                         r = '3.4028235e38'::float4, iv = '1 year 2 mons -3 days +04:05:06.789'::interval
                                    FROM ev WHERE id = 4}),
	't|t|t|t|t|t', 'stream: BC date, infinities, a subnormal float8, the largest float4, a mixed-sign interval exact');
is($dest->safe_psql('postgres', q{SELECT string_agg(float8send(f)::text, ',' ORDER BY id) FROM ev WHERE f IS NOT NULL}),
	$source->safe_psql('shop', q{SELECT string_agg(float8send(f)::text, ',' ORDER BY id) FROM ev WHERE f IS NOT NULL}),
	'float8 values bit-identical to the source');
is(status_row($dest, 'shop', q{state || '|' || retry_count || '|' || coalesce(last_error, '')}), 'streaming|0|', 'B25: state streaming, no error');

# ---------------------------------------------------------------------------
# The check: a connection that did not get the pinned settings stops the
# worker with an error naming the setting, before anything is copied.
# ---------------------------------------------------------------------------
$dest->safe_psql('postgres', q{
CREATE TABLE ev_unpinned (LIKE ev INCLUDING ALL);
SELECT cdc.register_mapping('ev_unpinned', source_schema => 'public', source_table => 'ev', source_name => 'shop_unpinned');
});
set_fault($dest, 'source_settings_unpinned');
$dest->safe_psql('postgres', "SELECT cdc.create_subscription('shop_unpinned', '$shop_conn', ARRAY['shop_pub'])");
ok(wait_status($dest, 'shop_unpinned', q{state = 'error' AND last_error LIKE '%DateStyle%SQL, DMY%' AND retry_count >= 2}),
	'unpinned: the worker stops with an error naming DateStyle and the value the source uses');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM ev_unpinned'), '0', 'unpinned: nothing copied');
set_fault($dest, undef);
ok(wait_caught_up($source, $dest, 'shop_unpinned'), 'unpinned: with the settings pinned again the copy runs');
is($dest->safe_psql('postgres', 'SELECT md5(string_agg(x::text, \',\' ORDER BY id)) FROM ev_unpinned x'),
	$dest->safe_psql('postgres', 'SELECT md5(string_agg(x::text, \',\' ORDER BY id)) FROM ev x'),
	'unpinned: then the same values as the first subscription');
$dest->safe_psql('postgres', "SELECT cdc.drop_subscription('shop_unpinned', drop_slot => true)");

# ---------------------------------------------------------------------------
# A LATIN1 source database: values arrive converted to UTF8, exactly.
# ---------------------------------------------------------------------------
$source->safe_psql('latin', q{
CREATE TABLE lat (id int PRIMARY KEY, t text);
CREATE PUBLICATION lat_pub FOR TABLE lat;
INSERT INTO lat VALUES (1, U&'caf\00E9'), (2, U&'Gr\00F6\00DFe \00BD \00FF');
});
is($source->safe_psql('latin', q{SELECT string_agg(encode(convert_to(t, 'LATIN1'), 'hex'), ',' ORDER BY id) FROM lat}),
	'636166e9,4772f6df6520bd20ff', 'LATIN1 set-up: stored as LATIN1 bytes');
$dest->safe_psql('postgres', 'CREATE TABLE lat (id int PRIMARY KEY, t text)');
(my $lat_conn = $source->connstr('latin')) =~ s/'/''/g;
$dest->safe_psql('postgres', "SELECT cdc.create_subscription('lat', '$lat_conn', ARRAY['lat_pub'])");
ok(wait_caught_up($source, $dest, 'lat'), 'LATIN1: copied, streaming');
$source->safe_psql('latin', q{INSERT INTO lat VALUES (3, U&'\00E0 la carte')});
ok(wait_caught_up($source, $dest, 'lat'), 'LATIN1: streamed row applied');
is($dest->safe_psql('postgres', q{SELECT string_agg(encode(convert_to(t, 'UTF8'), 'hex'), ',' ORDER BY id) FROM lat}),
	'636166c3a9,4772c3b6c39f6520c2bd20c3bf,c3a0206c61206361727465', 'LATIN1 -> UTF8: copied and streamed values converted exactly');

# ---------------------------------------------------------------------------
# A LATIN1 destination: a character it cannot hold is a clear error from
# the source's conversion, in the copy and in the stream; nothing is
# substituted.
# ---------------------------------------------------------------------------
my $dest_l1 = new_dest('dest_l1', '', extra => [ '--encoding=LATIN1', '--locale=C' ]);
$source->safe_psql('shop', q{
CREATE TABLE u8 (id int PRIMARY KEY, t text);
CREATE TABLE u8c (id int PRIMARY KEY, t text);
CREATE PUBLICATION u8_pub FOR TABLE u8;
CREATE PUBLICATION u8c_pub FOR TABLE u8c;
INSERT INTO u8 VALUES (1, U&'caf\00E9');
INSERT INTO u8c VALUES (1, U&'\03A9 omega');
});
$dest_l1->safe_psql('postgres', 'CREATE TABLE u8 (id int PRIMARY KEY, t text); CREATE TABLE u8c (id int PRIMARY KEY, t text);');
(my $u8_conn = $source->connstr('shop')) =~ s/'/''/g;
$dest_l1->safe_psql('postgres', "SELECT cdc.create_subscription('u8c', '$u8_conn', ARRAY['u8c_pub'])");
ok(wait_status($dest_l1, 'u8c', q{state = 'error' AND last_error LIKE '%initial copy of public.u8c%has no equivalent in encoding "LATIN1"%'}),
	'UTF8 -> LATIN1 copy: error naming the table and the character the destination cannot hold');
is($dest_l1->safe_psql('postgres', 'SELECT count(*) FROM u8c'), '0', 'UTF8 -> LATIN1 copy: nothing copied, nothing substituted');
$source->safe_psql('shop', q{UPDATE u8c SET t = 'O omega'});
ok(wait_caught_up($source, $dest_l1, 'u8c'), 'UTF8 -> LATIN1 copy: the next attempt copies once the source row is fixed');
is($dest_l1->safe_psql('postgres', 'SELECT t FROM u8c'), 'O omega', 'UTF8 -> LATIN1 copy: the fixed row');

$dest_l1->safe_psql('postgres', "SELECT cdc.create_subscription('u8', '$u8_conn', ARRAY['u8_pub'])");
ok(wait_caught_up($source, $dest_l1, 'u8'), 'UTF8 -> LATIN1: copied, streaming');
is($dest_l1->safe_psql('postgres', q{SELECT encode(convert_to(t, 'LATIN1'), 'hex') FROM u8 WHERE id = 1}), '636166e9',
	'UTF8 -> LATIN1: a convertible value arrives converted');
$source->safe_psql('shop', q{INSERT INTO u8 VALUES (2, U&'\03A9 omega')});
my $bad_commit = $source->safe_psql('shop', 'SELECT pg_current_wal_lsn()');
$source->safe_psql('shop', q{INSERT INTO u8 VALUES (3, 'after')});
ok(wait_status($dest_l1, 'u8', q{state = 'error' AND last_error LIKE '%has no equivalent in encoding "LATIN1"%' AND last_error_lsn IS NOT NULL}),
	'UTF8 -> LATIN1 stream: a clear error naming the encodings, with the failing source transaction');
my $errlsn = status_row($dest_l1, 'u8', 'last_error_lsn');
ok($source->safe_psql('shop', "SELECT '$errlsn'::pg_lsn < '$bad_commit'::pg_lsn") eq 't', "UTF8 -> LATIN1 stream: last_error_lsn $errlsn is the insert of row 2");
is($dest_l1->safe_psql('postgres', 'SELECT string_agg(id::text, \',\' ORDER BY id) FROM u8'), '1',
	'UTF8 -> LATIN1 stream: neither the row nor anything after it applied');
# The source cannot send that transaction at all, so the way past it (docs/worker.md)
# is to move the replication origin just beyond its commit LSN.
disable_and_wait($source, $dest_l1, 'u8');
$dest_l1->safe_psql('postgres', "SELECT pg_replication_origin_advance(cdc._origin_name(subid), '$errlsn'::pg_lsn + 1) FROM cdc.subscription WHERE name = 'u8'");
enable_subscription($dest_l1, 'u8');
ok(wait_caught_up($source, $dest_l1, 'u8'), 'UTF8 -> LATIN1 stream: streaming again after the origin moved past the transaction');
is($dest_l1->safe_psql('postgres', q{SELECT string_agg(id || ':' || encode(convert_to(t, 'LATIN1'), 'hex'), ',' ORDER BY id) FROM u8}),
	'1:636166e9,3:6166746572',
	'UTF8 -> LATIN1 stream: row 2 never substituted, row 3 applied');

# ---------------------------------------------------------------------------
# A SQL_ASCII source holding bytes that are not UTF8: a clear error.
# ---------------------------------------------------------------------------
$source->safe_psql('ascii_db', q{
CREATE TABLE asc_t (id int PRIMARY KEY, t text);
CREATE PUBLICATION asc_pub FOR TABLE asc_t;
INSERT INTO asc_t VALUES (1, 'plain'), (2, E'caf\351');
});
$dest->safe_psql('postgres', 'CREATE TABLE asc_t (id int PRIMARY KEY, t text)');
(my $asc_conn = $source->connstr('ascii_db')) =~ s/'/''/g;
$dest->safe_psql('postgres', "SELECT cdc.create_subscription('asc', '$asc_conn', ARRAY['asc_pub'])");
ok(wait_status($dest, 'asc', q{state = 'error' AND last_error LIKE '%initial copy of public.asc_t%invalid byte sequence for encoding "UTF8": 0xe9%'}),
	'SQL_ASCII -> UTF8 copy: error naming the table and the invalid byte');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM asc_t'), '0', 'SQL_ASCII -> UTF8 copy: nothing copied');
$source->safe_psql('ascii_db', q{UPDATE asc_t SET t = 'cafe' WHERE id = 2});
ok(wait_caught_up($source, $dest, 'asc'), 'SQL_ASCII -> UTF8: copied once the source row is fixed');
is($dest->safe_psql('postgres', 'SELECT string_agg(id || t, \',\' ORDER BY id) FROM asc_t'), '1plain,2cafe', 'SQL_ASCII -> UTF8: rows');

$dest_l1->stop;
$dest->stop;
$source->stop;
done_testing();

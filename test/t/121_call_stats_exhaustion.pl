# Review h3: the shared-memory call counters (cdc.call_stats,
# cdc.failed_calls) are one fixed table for every database of the cluster,
# with one entry per (database, entry point, SQLSTATE), never freed while
# the database exists.  A table owner whose trigger raises a new SQLSTATE at
# every cdc_apply() call (RAISE ... USING ERRCODE accepts any five digits
# and capital letters) filled it in one DO block, and from then on no other
# database's calls were counted at all (cdc.shared_stats.lost grew instead)
# until the server restarted.  Each (database, entry point) now keeps at
# most 32 SQLSTATEs apart; the failures of any other SQLSTATE are counted
# under sqlstate 'other'.  Asserts: the failures are all counted, in at most
# 32 + 1 rows per entry point; another database's calls are counted; nothing
# is lost.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $dest = new_dest('dest');
sub dq { return $dest->safe_psql('postgres', $_[0]); }

dq(q{
CREATE ROLE mallory LOGIN;
CREATE SCHEMA m AUTHORIZATION mallory;
CREATE DATABASE victim;
});
$dest->safe_psql('victim', 'CREATE EXTENSION cdc_apply; CREATE TABLE t (id int PRIMARY KEY, v text)');

# mallory's own table: its trigger fails every insert with SQLSTATE Q<n>
$dest->safe_psql('postgres', q{
CREATE TABLE m.t (id int PRIMARY KEY, v text);
CREATE FUNCTION m.boom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'no' USING ERRCODE = 'Q' || lpad(current_setting('m.n'), 4, '0');
END $$;
CREATE TRIGGER boom BEFORE INSERT ON m.t FOR EACH ROW EXECUTE FUNCTION m.boom();
DO $$
BEGIN
  FOR i IN 1..1100 LOOP
    PERFORM set_config('m.n', i::text, true);
    BEGIN
      IF i % 2 = 0 THEN
        PERFORM cdc_apply(format('{"op": "c", "source": {"name": "s", "lsn": %s}, "after": {"id": %s}}', i, i)::jsonb, 'm.t');
      ELSE
        PERFORM cdc_apply_batch(format('[{"op": "c", "source": {"name": "s", "lsn": %s}, "after": {"id": %s}}]', i, i)::jsonb, 'm.t');
      END IF;
    EXCEPTION WHEN others THEN NULL;
    END;
  END LOOP;
END $$;
}, extra_params => [ '-U', 'mallory' ]);

is(dq(q{SELECT string_agg(function || ':' || calls || ':' || failed, ',' ORDER BY function) FROM cdc.call_stats}),
	'cdc_apply:550:550,cdc_apply_batch:550:550', 'every call and every failure of mallory is counted');
is(dq(q{SELECT string_agg(function || ':' || n || ':' || other, ',' ORDER BY function)
          FROM (SELECT function, count(*) AS n, sum(failures) FILTER (WHERE sqlstate = 'other') AS other
                  FROM cdc.failed_calls GROUP BY function) f}),
	'cdc_apply:33:518,cdc_apply_batch:33:518',
	'32 SQLSTATEs kept apart per entry point, the other failures counted under sqlstate other');
is(dq(q{SELECT count(*) FROM cdc.failed_calls WHERE sqlstate LIKE 'Q%' AND failures = 1}), '64',
	'the first 32 SQLSTATEs of each entry point have their own row');

# another database's calls are still counted
$dest->safe_psql('victim', q{SELECT cdc_apply('{"op": "c", "source": {"name": "s", "lsn": 1}, "after": {"id": 1}}'::jsonb, 't')});
$dest->psql('victim', q!SELECT cdc_apply('{"op": "c"', 't')!);
is($dest->safe_psql('victim', q{SELECT string_agg(function || ':' || calls || ':' || failed, ',') FROM cdc.call_stats}),
	'cdc_apply:2:1', 'database victim counts its calls');
is($dest->safe_psql('victim', q{SELECT string_agg(function || ':' || sqlstate || ':' || failures, ',') FROM cdc.failed_calls}),
	'cdc_apply:22P02:1', 'and its failed call by SQLSTATE');
is(dq('SELECT lost FROM cdc.shared_stats'), '0', 'no count was lost');

# a reset zeroes the counts but keeps the SQLSTATEs' places: still bounded
dq('SELECT cdc.reset_shared_stats()');
$dest->safe_psql('postgres', q{
DO $$
BEGIN
  FOR i IN 2001..2100 LOOP
    PERFORM set_config('m.n', i::text, true);
    BEGIN
      PERFORM cdc_apply(format('{"op": "c", "source": {"name": "s", "lsn": %s}, "after": {"id": %s}}', i, i)::jsonb, 'm.t');
    EXCEPTION WHEN others THEN NULL;
    END;
  END LOOP;
END $$;
}, extra_params => [ '-U', 'mallory' ]);
is(dq(q{SELECT count(*) || ':' || sum(failures) FILTER (WHERE sqlstate = 'other') FROM cdc.failed_calls WHERE function = 'cdc_apply'}),
	'33:100', 'after a reset new SQLSTATEs still count under other');
is(dq(q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f', 'mallory is still an ordinary role');

$dest->stop;
done_testing();

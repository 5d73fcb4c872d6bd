# ALTER EXTENSION cdc_apply UPDATE from the release 0.1.0 (commit f919c47)
# to 0.2.0 (docs/sql-reference.md, "Upgrading"):
#
#   A. 0.1.0 is installed from its own script, and state is written by the
#      0.1.0 engine itself (the release's module, built from f919c47, bound
#      to the 0.1.0 functions): mappings, applied events with outbox rows
#      (one published), a tombstone, a truncate barrier, a conflict,
#      counters, a history table, a handler, a subscription with
#      replication-origin progress, a relay role's privileges;
#   B. with the 0.2.0 module preloaded, the launcher starts no worker for
#      the 0.1.0 schema and says why, cdc_apply() fails and writes nothing; the update refuses to run while a
#      user's view depends on cdc.outbox, leaving 0.1.0 untouched;
#   C. after the update, the extension's catalog equals that of a fresh
#      0.2.0 installation, fact by fact (test/t/054_upgrade_catalog.sql);
#   D. the state is there: the outbox rows (ids, idempotency keys, source,
#      version, published_at) and every table read through the same queries
#      as before; replays are duplicates, the tombstone still blocks a stale
#      resurrection, the barrier a stale insert; new events apply and write
#      outbox rows after the old ones; source ids follow the 0.2.0 scheme;
#      the origin progress moved to the 0.2.0 origin name and recorded as
#      count_positions_until (refused while the 0.1.0 origin is in use:
#      part B); the relay still
#      marks rows published; moved to EXECUTE on cdc.outbox_claim and
#      cdc.outbox_delete with its UPDATE revoked, it claims and deletes rows
#      and cannot LOCK the outbox (review h3).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

my $release_commit = 'f919c47';

# The release's module: built by test/run_all.sh (CDC_RELEASE_0_1_0_SO), or
# here from the repository's history.
my $old_so = $ENV{CDC_RELEASE_0_1_0_SO};
if (!$old_so || !-f $old_so) {
	my $dir = tempdir('cdc010XXXX', DIR => $PostgreSQL::Test::Utils::tmp_check, CLEANUP => 1);
	my $root = cdc_root();
	my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
	system("git -c safe.directory='*' -C '$root' archive $release_commit | tar -x -C '$dir' && "
		  . "make -s -C '$dir' PG_CONFIG='$pg_config' >'$dir/build.log' 2>&1") == 0
	  or BAIL_OUT("cannot build the 0.1.0 module from $release_commit (set CDC_RELEASE_0_1_0_SO)");
	$old_so = "$dir/cdc_apply.so";
}
ok(-f $old_so, "the release 0.1.0 module is at $old_so");

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', "cdc.naptime = 1\nmax_worker_processes = 16\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE up');
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
sub uq { return $node->safe_psql('up', $_[0]); }

# ---------------------------------------------------------------------------
# A. 0.1.0 with state written by the 0.1.0 engine
# ---------------------------------------------------------------------------
uq(q{CREATE EXTENSION cdc_apply VERSION '0.1.0'});
is(uq(q{SELECT extversion FROM pg_extension WHERE extname = 'cdc_apply'}), '0.1.0', 'installed as 0.1.0');
is(uq(q{SELECT count(*) FROM pg_catalog.pg_class WHERE relname = 'outbox' AND relkind = 'r'
          AND relnamespace = 'cdc'::regnamespace}), '1', '0.1.0 has the outbox as a table');
# The 0.1.0 functions load the release's module (this server's module is
# 0.2.0's); set back before the update, as a user's functions would be.
uq(qq{UPDATE pg_catalog.pg_proc SET probin = '$old_so' WHERE probin = '\$libdir/cdc_apply'});

sub ev
{
	my ($op, $id, $v, $lsn, $src, $table) = @_;
	$src //= 'srv';
	$table //= 't';
	my $img = defined $v ? sprintf('{"id": %d, "v": "%s"}', $id, $v) : sprintf('{"id": %d}', $id);
	my $img_key = $op eq 'd' ? 'before' : 'after';
	return sprintf('{"op": "%s", "%s": %s, "source": {"name": "%s", "db": "d", "schema": "public", "table": "%s", '
		  . '"lsn": %d, "txId": %d}}',
		$op, $img_key, $img, $src, $table, $lsn, $lsn);
}
# [event, target, delivery key, outcome under 0.1.0]
my @events = (
	[ ev('c', 1, 'a', 100), 't', 'k1', 'applied' ],
	[ ev('c', 2, 'b', 110), 't', 'k2', 'applied' ],
	[ ev('u', 1, 'a2', 115), 't', 'k3', 'applied' ],
	[ ev('d', 2, 'b', 120), 't', 'k4', 'applied' ],
	[ ev('c', 3, 'c', 125), 't', 'k5', 'applied' ],
	[ ev('c', 3, 'other', 125), 't', 'k5-conflict', 'conflict' ],
	[ ev('c', 10, 'x', 200, 'other', 't2'), 't2', 'm1', 'applied' ],
	[ '{"op": "t", "source": {"name": "other", "db": "d", "schema": "public", "table": "t2", "lsn": 210, "txId": 210}}',
		't2', 'm2', 'applied' ],);
uq(q{
CREATE TABLE public.t (id integer PRIMARY KEY, v text);
CREATE TABLE public.t2 (id integer PRIMARY KEY, v text);
SELECT cdc.register_mapping('public.t', 'public', 't', outbox => true, source_name => 'srv', outbox_topic => 'topic.t');
SELECT cdc.register_mapping('public.t2', 'public', 't2', outbox => true, source_name => 'other');
});
for my $e (@events) {
	my ($json, $target, $key, $want) = @$e;
	is(uq(qq{SELECT cdc_apply('$json'::jsonb, 'public.$target', '$key')}), $want, "0.1.0 engine: $key is $want");
}
# a history table and a handler (user objects the update leaves alone)
uq(q{
CREATE TABLE public.s (id integer PRIMARY KEY, v text);
SELECT cdc.create_history_table('public.h', 'public.s');
SELECT cdc.register_mapping('public.h', 'public', 's', key_columns => '{id}', mode => 'history', source_name => 'srv');
CREATE TABLE public.handled (op text, new jsonb);
CREATE FUNCTION public.on_change(op text, old jsonb, new jsonb, meta jsonb) RETURNS void LANGUAGE sql
  AS $$ INSERT INTO public.handled VALUES (op, new) $$;
CREATE TABLE public.hh (id integer PRIMARY KEY, v text);
SELECT cdc.register_mapping('public.hh', 'public', 'hh', mode => 'handler', source_name => 'srv',
                            handler => 'public.on_change(text, jsonb, jsonb, jsonb)');
});
is(uq(qq{SELECT cdc_apply('${\ ev('c', 1, 'h-a', 100, 'srv', 's')}'::jsonb, 'public.h', 'h1')}), 'applied', '0.1.0 engine: history');
is(uq(qq{SELECT cdc_apply('${\ ev('c', 1, 'x', 100, 'srv', 'hh')}'::jsonb, 'public.hh', 'x1')}), 'applied', '0.1.0 engine: handler');
# A timestamptz key written by the 0.1.0 engine from two sessions with
# different TimeZones: 0.1.0 printed the key as each session did, so the
# same row got two entity records (and the older change was applied).
uq(q{CREATE TABLE public.tz (at timestamptz PRIMARY KEY, v text);
     SELECT cdc.register_mapping('public.tz', 'public', 'tz', source_name => 'srv');});
sub tzev
{
	my ($v, $lsn) = @_;
	return sprintf('{"op": "u", "after": {"at": "2024-03-01T10:00:00Z", "v": "%s"}, "source": {"name": "srv", "db": "d", '
		  . '"schema": "public", "table": "tz", "lsn": %d, "txId": %d}}', $v, $lsn, $lsn);
}
is(uq(qq{SET TimeZone = 'Asia/Tokyo'; SELECT cdc_apply('${\ tzev('tokyo', 400)}'::jsonb, 'public.tz', 'z1')}), 'applied',
	'0.1.0 engine: a timestamptz key from a session in Asia/Tokyo');
is(uq(qq{SET TimeZone = 'UTC'; SELECT cdc_apply('${\ tzev('utc', 300)}'::jsonb, 'public.tz', 'z2')}), 'applied',
	'0.1.0 engine: an older change of that row from a session in UTC was applied as another entity');
is(uq(q{SET TimeZone = 'UTC'; SELECT string_agg(key, ' | ' ORDER BY key) FROM cdc.entity_state WHERE target = 'public.tz'::regclass}),
	'2024-03-01 10:00:00+00 | 2024-03-01 19:00:00+09', '0.1.0: two records for one row');
# and a history table keyed by a timestamptz, written from Asia/Tokyo
uq(q{SELECT cdc.create_history_table('public.hz', 'public.tz');
     SELECT cdc.register_mapping('public.hz', 'public', 'tzh', key_columns => '{at}', mode => 'history', source_name => 'srv');});
(my $hzev = tzev('h', 400)) =~ s/"table": "tz"/"table": "tzh"/;
is(uq(qq{SET TimeZone = 'Asia/Tokyo'; SELECT cdc_apply('$hzev'::jsonb, 'public.hz', 'hz1')}), 'applied',
	'0.1.0 engine: a history row of a timestamptz key from Asia/Tokyo');
# A row with a timestamptz value, applied by the 0.1.0 engine from Asia/Tokyo:
# 0.1.0 hashed the content as the session printed it (the entity record's
# chash), 0.2.0 hashes it in fixed settings (UTC).
uq(q{CREATE TABLE public.ch (id integer PRIMARY KEY, at timestamptz, amount numeric);
     SELECT cdc.register_mapping('public.ch', 'public', 'ch', source_name => 'srv');});
sub chev
{
	my ($id, $lsn) = @_;
	return sprintf('{"op": "c", "after": {"id": %d, "at": "2024-03-01T10:00:00Z", "amount": 10.50}, "source": {"name": "srv", '
		  . '"db": "d", "schema": "public", "table": "ch", "lsn": %d, "txId": %d}}', $id, $lsn, $lsn);
}
is(uq(qq{SET TimeZone = 'Asia/Tokyo'; SELECT cdc_apply('${\ chev(1, 600)}'::jsonb, 'public.ch', 'c1')
         || ' ' || cdc_apply('${\ chev(2, 610)}'::jsonb, 'public.ch', 'c2')}), 'applied applied',
	'0.1.0 engine: rows with a timestamptz value from a session in Asia/Tokyo');
uq(q{SELECT cdc.outbox_mark_published(ARRAY[1, 2]::bigint[])});
uq(q{SELECT cdc.create_subscription('sub1', 'host=/nonexistent dbname=x', ARRAY['pub'], create_slot => false, enabled => false)});
uq(q{SELECT pg_replication_origin_advance('cdc_1', '0/5A0B0C0')});
uq(q{CREATE ROLE relay; GRANT SELECT, UPDATE ON cdc.outbox TO relay;
     GRANT EXECUTE ON FUNCTION cdc.outbox_mark_published(bigint[]) TO relay;
     REVOKE SELECT ON cdc.horizon_status FROM PUBLIC});
is(uq(q{SELECT count(*) FILTER (WHERE deleted) || '/' || count(*) FROM cdc.entity_state WHERE target = 'public.t'::regclass}), '1/3',
	'0.1.0: three entity records of t, one a tombstone');

# What must survive, read through queries that mean the same in both versions.
my %state_queries = (
	outbox => q{SELECT id, idempotency_key, topic, target, entity_key, op, payload, source, version, created_at, published_at
	              FROM cdc.outbox ORDER BY id},
	# (public.tz's records are re-keyed by the update: checked below)
	entities => q{SELECT * FROM cdc.entities WHERE target <> 'public.tz'::regclass ORDER BY 1, 2},
	tombstones => q{SELECT * FROM cdc.tombstones ORDER BY 1, 2},
	entity_state => q{SELECT e.target, e.key, e.v0, e.v1, e.v2, e.v3, e.chash, e.touched_s, e.deleted, s.name
	                    FROM cdc.entity_state e JOIN cdc.source s ON s.id = e.src
	                   WHERE e.target <> 'public.tz'::regclass ORDER BY 1, 2},
	ledger => q{SELECT digest, target, claimed_s FROM cdc.ledger ORDER BY digest},
	stats => q{SELECT * FROM cdc.stats ORDER BY target::text},
	conflicts => q{SELECT * FROM cdc.conflicts ORDER BY id},
	barrier => q{SELECT * FROM cdc.table_barrier ORDER BY target::text},
	mapping => q{SELECT target, source_name, source_schema, source_table, key_columns, version_column, source_epoch, outbox,
	                    outbox_topic, truncate_policy, unavailable_placeholder, temporal_unit, conflict_policy, mode, handler,
	                    expired_policy, created_at FROM cdc.mapping ORDER BY target::text},
	subscription => q{SELECT subid, name, conninfo, publications, slot_name, create_slot, enabled, source_epoch, slot_ready,
	                         skip_lsn, created_at FROM cdc.subscription ORDER BY subid},
	subscription_state => q{SELECT subid, state, received_lsn, flushed_lsn, retry_count, last_error, applied_xacts
	                          FROM cdc.subscription_state ORDER BY subid},
	# (the relations of 0.1.0: ledger_range is new in 0.2.0, checked below)
	prune_state => q{SELECT relation, last_run_at, last_sweep_done_at, removed FROM cdc.prune_state
	                   WHERE relation <> 'ledger_range' ORDER BY relation},
	t => q{SELECT * FROM public.t ORDER BY id},
	t2 => q{SELECT * FROM public.t2 ORDER BY id},
	h => q{SELECT id, v, cdc_key, cdc_version, cdc_op FROM public.h ORDER BY cdc_seq},
	handled => q{SELECT * FROM public.handled ORDER BY 1, 2},);
my %before = map { $_ => uq($state_queries{$_}) } keys %state_queries;
like($before{outbox}, qr/^1\|.*\|\d{4}-\d\d-\d\d [^|]+$/m, 'outbox row 1 is published before the update');
like($before{outbox}, qr/^3\|.*\|$/m, 'outbox row 3 is not');
is(scalar(() = $before{outbox} =~ /\n/g) + 1, 7, 'seven outbox rows before the update (t: 5, t2: 2 with the truncate)');

# ---------------------------------------------------------------------------
# B. the 0.2.0 module preloaded over a 0.1.0 schema; a refused update
# ---------------------------------------------------------------------------
uq(q{UPDATE pg_catalog.pg_proc SET probin = '$libdir/cdc_apply' WHERE probin LIKE '%/cdc_apply.so'});
# (no scheduled prune: cdc.prune_state must read as before the update)
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cdc_apply'\ncdc.prune_interval = 0\n");
my $log_offset = -s $node->logfile;
$node->restart;
ok(wait_for_log($node, qr/extension installed in this database is version 0\.1\.0, the loaded module is 0\.2\.0/, $log_offset),
	'the launcher starts nothing for a 0.1.0 schema and says why');

# the SQL path before the update: an error, nothing applied
my ($rc, $out, $err) = $node->psql('up', qq{SELECT cdc_apply('${\ ev('c', 50, 'early', 500)}'::jsonb, 'public.t', 'early')});
isnt($rc, 0, 'cdc_apply() of the 0.2.0 module over the 0.1.0 schema fails');
like($err, qr/column "ordering" does not exist/, 'it fails on the first 0.2.0 column it reads');
is(uq($state_queries{t}), $before{t}, 'nothing applied');
is(uq($state_queries{ledger}), $before{ledger}, 'nothing claimed');

uq(q{CREATE VIEW public.my_outbox AS SELECT id, topic FROM cdc.outbox});
($rc, $out, $err) = $node->psql('up', q{ALTER EXTENSION cdc_apply UPDATE TO '0.2.0'});
isnt($rc, 0, 'the update is refused while a view of the user depends on cdc.outbox');
like($err, qr/objects outside the extension depend on its objects: view public.my_outbox/, 'the refusal names the view');
is(uq(q{SELECT extversion FROM pg_extension WHERE extname = 'cdc_apply'}), '0.1.0', 'still 0.1.0 after the refusal');
is(uq($state_queries{outbox}), $before{outbox}, 'the outbox is untouched by the refused update');
is(uq(q{SELECT count(*) FROM pg_replication_origin WHERE roname = 'cdc_1'}), '1', 'the 0.1.0 origin is untouched');
uq(q{DROP VIEW public.my_outbox});
# A worker of the 0.1.0 module still running (the server not restarted
# after installing 0.2.0) holds its origin: the update must not read the
# origin's progress (count_positions_until) while that worker may still
# commit.  A session holding cdc_1 stands in for it.
my $holder = $node->background_psql('up');
$holder->query_safe(q{SELECT pg_replication_origin_session_setup('cdc_1')});
($rc, $out, $err) = $node->psql('up', q{ALTER EXTENSION cdc_apply UPDATE TO '0.2.0'});
isnt($rc, 0, 'the update is refused while the 0.1.0 origin is in use');
like($err, qr/ERROR:  cannot update cdc_apply to 0\.2\.0: replication origin cdc_1 of subscription 1 is in use/,
	'the refusal names the origin');
$holder->quit;
is(uq(q{SELECT extversion FROM pg_extension WHERE extname = 'cdc_apply'}), '0.1.0', 'still 0.1.0 after that refusal');
is(uq(q{SELECT remote_lsn FROM pg_replication_origin_status WHERE external_id = 'cdc_1'}), '0/5A0B0C0',
	'the 0.1.0 origin keeps its progress');

# ---------------------------------------------------------------------------
# C. the update; the catalog equals a fresh 0.2.0 installation
# ---------------------------------------------------------------------------
($rc, $out, $err) = $node->psql('up', q{ALTER EXTENSION cdc_apply UPDATE TO '0.2.0'});
is($rc, 0, 'ALTER EXTENSION cdc_apply UPDATE succeeds');
# the relay's UPDATE on cdc.outbox is carried over, and named: with it the
# relay may LOCK the view's base tables (review h3; docs/security.md)
like($err, qr/WARNING:  roles other than the extension owner can lock tables of cdc_apply: relay on cdc\.outbox\b/,
	'the update names the carried-over privileges that let a role lock cdc\'s tables');
is(uq(q{SELECT extversion FROM pg_extension WHERE extname = 'cdc_apply'}), '0.2.0', 'updated to 0.2.0');
is(uq(q{SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'cdc\_0\_1\_0%'}), '0', 'the old schema is gone');

$node->safe_psql('fresh', q{CREATE EXTENSION cdc_apply});
# the same privileges changes by the user, made after the fresh installation
$node->safe_psql('fresh', q{GRANT SELECT, UPDATE ON cdc.outbox TO relay;
     GRANT EXECUTE ON FUNCTION cdc.outbox_mark_published(bigint[]) TO relay;
     REVOKE SELECT ON cdc.horizon_status FROM PUBLIC});
my $catalog_sql = slurp_file("$FindBin::Bin/054_upgrade_catalog.sql");
my @fresh = split /\n/, $node->safe_psql('fresh', $catalog_sql);
my @updated = split /\n/, uq($catalog_sql);
cmp_ok(scalar(@fresh), '>', 1000, 'the catalog description of 0.2.0 has ' . scalar(@fresh) . ' lines');
# Privileges re-applied by the update script are recorded as the
# extension's initial privileges (pg_init_privs), as every GRANT run by an
# extension script is; after a fresh install they are not.  Documented.
my $user_acl = qr/^init privs (view cdc\.outbox|view cdc\.horizon_status|function cdc\.outbox_mark_published\(bigint\[\]\)):/;
my @fresh_cmp = grep { $_ !~ $user_acl } @fresh;
my @updated_cmp = grep { $_ !~ $user_acl } @updated;
my %seen;
$seen{$_}++ for @fresh_cmp;
$seen{$_}-- for @updated_cmp;
my @diff = map { ($seen{$_} > 0 ? 'only fresh: ' : 'only updated: ') . $_ } grep { $seen{$_} != 0 } sort keys %seen;
is(scalar(@diff), 0, 'the updated catalog equals a fresh 0.2.0 installation') or diag(join("\n", @diff[0 .. ($#diff < 60 ? $#diff : 60)]));
my @init = sort grep { $_ =~ $user_acl } @updated;
like(join("\n", @init), qr/function cdc\.outbox_mark_published\(bigint\[\]\): \{[^}]*relay=X/, 'init privileges record the carried-over EXECUTE');

# ---------------------------------------------------------------------------
# D. the state
# ---------------------------------------------------------------------------
for my $q (sort keys %state_queries) {
	is(uq($state_queries{$q}), $before{$q}, "$q is as before the update");
}
is(uq(q{SELECT relation, last_run_at, last_sweep_done_at, removed FROM cdc.prune_state WHERE relation = 'ledger_range'}),
	'ledger_range|||0', 'prune_state: ledger_range (claims by offset range, new in 0.2.0) has not run yet');
is(uq(q{SELECT count(*) FROM cdc.source WHERE id <> (('x' || substr(md5(name), 1, 8))::bit(32)::integer & 2147483647)}), '0',
	'every source id is the 0.2.0 hash of its name');
is(uq(q{SELECT count(*) FROM cdc.outbox_source}), '2', 'two outbox source identities (t, t2)');
is(uq(q{SELECT has_table_privilege('relay', 'cdc.outbox', 'UPDATE') AND has_function_privilege('relay', 'cdc.outbox_mark_published(bigint[])', 'EXECUTE')
          AND NOT has_table_privilege('public', 'cdc.horizon_status', 'SELECT')}), 't', 'privileges carried over');

# replication origin: the progress moved to cdc_<database oid>_<subid>
is(uq(q{SELECT remote_lsn FROM pg_replication_origin_status WHERE external_id = cdc._origin_name(1)}), '0/5A0B0C0',
	'the 0.2.0 origin has the 0.1.0 progress');
is(uq(q{SELECT count(*) FROM pg_replication_origin WHERE roname = 'cdc_1'}), '0', 'the 0.1.0 origin is gone');
is(uq(q{SELECT applied_lsn FROM cdc.subscription_status WHERE name = 'sub1'}), '0/5A0B0C0', 'cdc.subscription_status shows it');
is(uq(q{SELECT count_positions_until FROM cdc.subscription WHERE name = 'sub1'}), '0/5A0B0C0',
	'count_positions_until: the origin\'s progress (transactions up to it keep 0.1.0\'s count positions)');
is(uq(q{SELECT owner::text || ' ' || run_as_owner || ' ' || origin || ' ' || refresh_pending FROM cdc.subscription}),
	'postgres false any true', 'subscription: the new columns as documented');

# replays of every event: duplicates (ledger), outcome counts
for my $e (@events) {
	my ($json, $target, $key) = @$e;
	is(uq(qq{SELECT cdc_apply('$json'::jsonb, 'public.$target', '$key')}), 'duplicate', "replay of $key is a duplicate");
}
# the same changes under new delivery keys: decided by the entity records
is(uq(qq{SELECT cdc_apply('$events[1][0]'::jsonb, 'public.t', 'k2-again')}), 'stale',
	'a stale insert of the deleted entity 2 is refused by its tombstone');
is(uq(q{SELECT count(*) FROM public.t WHERE id = 2}), '0', 'entity 2 stays deleted');
is(uq(qq{SELECT cdc_apply('$events[0][0]'::jsonb, 'public.t', 'k1-again')}), 'stale', 'an old version of entity 1 is stale');
is(uq(qq{SELECT cdc_apply('${\ ev('c', 11, 'y', 205, 'other', 't2')}'::jsonb, 'public.t2', 'm3')}), 'stale',
	'an insert older than the truncate barrier is stale');
is(uq(q{SELECT blocked_resurrections FROM cdc.stats WHERE target = 'public.t'::regclass}), '1', 'counted as a blocked resurrection');

# the timestamptz key: one record, printed in UTC, with the greater version
is(uq(q{SELECT key || ' ' || v1 FROM cdc.entity_state WHERE target = 'public.tz'::regclass}), '2024-03-01 10:00:00+00 400',
	'the update re-keyed the timestamptz records: one, in UTC, the greater version');
is(uq(qq{SET TimeZone = 'Asia/Tokyo'; SELECT cdc_apply('${\ tzev('late', 350)}'::jsonb, 'public.tz', 'z3')}), 'stale',
	'an older change from a session in Asia/Tokyo is stale');
is(uq(qq{SET TimeZone = 'America/New_York'; SELECT cdc_apply('${\ tzev('new', 500)}'::jsonb, 'public.tz', 'z4')}), 'applied',
	'a newer change applies');
is(uq(q{SELECT v || ' ' || (SELECT count(*) FROM cdc.entity_state WHERE target = 'public.tz'::regclass) FROM public.tz}), 'new 1',
	'one row, one record');
is(uq(q{SELECT cdc_key::text FROM public.hz}), '{"at": "2024-03-01 10:00:00+00"}', "the update re-keyed the history row's cdc_key");
is(uq(qq{SET TimeZone = 'Asia/Tokyo'; SELECT cdc_apply('$hzev'::jsonb, 'public.hz', 'hz2')}), 'duplicate',
	'the same change under another delivery key is a duplicate of the history row');
is(uq(q{SELECT count(*) FROM public.hz}), '1', 'one history row');
# The same changes under other delivery keys, from a session with the same
# settings: 0.1.0's content hash is recognised (AdoptReleaseHash), one by one
# and in a batch: duplicates, not conflicts.
is(uq(qq{SET TimeZone = 'Asia/Tokyo'; SELECT cdc_apply('${\ chev(1, 600)}'::jsonb, 'public.ch', 'c1-again')}), 'duplicate',
	"a change the 0.1.0 engine applied, delivered again from the same settings, is a duplicate");
is(uq(qq{SET TimeZone = 'Asia/Tokyo'; SELECT duplicate || ' ' || conflict FROM cdc_apply_batch(jsonb_build_array('${\ chev(2, 610)}'::jsonb),
         'public.ch', ARRAY['c2-again'])}), '1 0', '... and in a batch');
is(uq(q{SELECT count(*) FROM cdc.conflicts WHERE target = 'public.ch'::regclass}), '0', 'no conflict recorded');

# new events apply and write outbox rows after the old ones
is(uq(qq{SELECT cdc_apply('${\ ev('u', 1, 'a3', 300)}'::jsonb, 'public.t', 'k6')}), 'applied', 'a new update applies');
is(uq(qq{SELECT cdc_apply('${\ ev('c', 2, 'b2', 310)}'::jsonb, 'public.t', 'k7')}), 'applied',
	'a newer insert of entity 2 applies over its tombstone');
is(uq(q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM public.t}), '1:a3,2:b2,3:c', 'target rows');
is(uq(q{SELECT string_agg(id || ' ' || op || ' ' || topic || ' ' || (published_at IS NULL), ',' ORDER BY id) FROM cdc.outbox WHERE id > 7}),
	'8 u topic.t true,9 c topic.t true', 'new outbox rows follow the old ids');
# The migrated rows keep their payloads whole (their dictionary entries have
# no payload names); the new rows' entry is the same identity with the
# payload's member names, the rows holding only the values.
is(uq(q{SELECT count(*) FILTER (WHERE payload_keys = '{}') || ' ' || count(*) FILTER (WHERE payload_keys <> '{}') FROM cdc.outbox_source}),
	'2 1', 'with the migrated source identities, and one entry with the payload names of the new rows');
is(uq(q{SELECT applied || ' ' || duplicate || ' ' || stale || ' ' || outbox_rows FROM cdc.stats WHERE target = 'public.t'::regclass}),
	'7 6 2 7', 'counters went on from the 0.1.0 counts');

# the history table and the handler go on
is(uq(qq{SELECT cdc_apply('${\ ev('c', 1, 'h-a', 100, 'srv', 's')}'::jsonb, 'public.h', 'h1')}), 'duplicate', 'history: replay');
is(uq(qq{SELECT cdc_apply('${\ ev('u', 1, 'h-b', 300, 'srv', 's')}'::jsonb, 'public.h', 'h2')}), 'applied', 'history: a new change');
is(uq(q{SELECT string_agg(v || ' ' || cdc_op, ',' ORDER BY cdc_seq) FROM public.h}), 'h-a c,h-b u', 'history rows');
is(uq(qq{SELECT cdc_apply('${\ ev('c', 1, 'x', 100, 'srv', 'hh')}'::jsonb, 'public.hh', 'x1')}), 'duplicate', 'handler: replay');
is(uq(qq{SELECT cdc_apply('${\ ev('u', 1, 'y', 300, 'srv', 'hh')}'::jsonb, 'public.hh', 'x2')}), 'applied', 'handler: a new change');
is(uq(q{SELECT string_agg(op || ' ' || (new ->> 'v'), ',' ORDER BY op) FROM public.handled}), 'c x,u y',
	'the handler was called once per applied change, never for the replay');

# the relay marks the rest published through the view
is($node->safe_psql('up', q{SET ROLE relay; SELECT cdc.outbox_mark_published(ARRAY[1, 3, 4, 8]::bigint[])}), '3',
	'the relay marks the unpublished rows (row 1 was published by 0.1.0)');
is(uq(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM cdc.outbox WHERE published_at IS NULL}), '5,6,7,9', 'unpublished rows');
# the operator moves the relay to 0.2.0's grants (EXECUTE only, review h3):
# it claims and deletes rows, and can no longer lock the outbox's tables
uq(q{REVOKE UPDATE ON cdc.outbox FROM relay;
     GRANT EXECUTE ON FUNCTION cdc.outbox_claim(integer, text), cdc.outbox_delete(bigint[]) TO relay});
is($node->safe_psql('up', q{SET ROLE relay; BEGIN;
     SELECT cdc.outbox_delete(ARRAY(SELECT id FROM cdc.outbox_claim(2))); COMMIT}), '2',
	'the relay claims two rows and deletes them with EXECUTE only');
is(uq(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM cdc.outbox WHERE published_at IS NULL}), '7,9',
	'the first two unpublished rows are gone');
($rc, $out, $err) = $node->psql('up', q{SET ROLE relay; BEGIN; LOCK TABLE cdc.outbox IN ACCESS EXCLUSIVE MODE});
like($err, qr/permission denied for view outbox/, 'the relay without UPDATE cannot LOCK the outbox');

# the launcher serves the database now
$log_offset = -s $node->logfile;
$node->restart;
is(uq(q{SELECT string_agg(relation, ',' ORDER BY relation) FROM cdc.prune_state}), 'entity_state,ledger,ledger_range,outbox',
	'restart with the updated extension');
ok(!(slurp_file($node->logfile, $log_offset) =~ /is version 0\.1\.0/), 'no version warning after the update');

done_testing();

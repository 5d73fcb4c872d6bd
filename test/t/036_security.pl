# Hostile roles against the background worker (issue 11, docs/security.md;
# the SQL path is sql/security.sql).  Every part ends with what must hold:
# no role gained rights, nothing was poisoned, and the real pipeline still
# applies.
#
#  1. search_path: alice (CREATE on public and on the targets' schema)
#     plants overloads of every function, aggregate and operator name the
#     generated statements use, and types named like pg_catalog's, before
#     the subscription exists; the worker copies (initial copy) and streams
#     into targets of every mode (state with outbox, history, handler), the
#     launcher prunes.  None of the planted code runs.
#  2. The table owner's code runs as the table owner (scenario B33):
#     mallory's ENABLE ALWAYS trigger, column default, CHECK constraint,
#     domain constraint and handler record current_user and try ALTER ROLE
#     mallory SUPERUSER; they run as mallory (in a security-restricted
#     operation), during the initial copy and streaming, and mallory stays
#     an ordinary role.
#  3. A subscription owned by an ordinary role: a table whose owner it is
#     no member of is refused (state error, a clear last_error), then
#     applied once it is granted membership; with run_as_owner it needs the
#     table privileges instead, and the table owner's code runs as it.
#  4. Row-level security: a target on which the applying role is subject
#     to a policy (FORCE ROW LEVEL SECURITY for its owner) is refused with
#     42501 before anything is written; without FORCE the owner applies.
#  5. cdc.max_event_size: a change larger than the limit stops the worker
#     with 54000 (nothing applied); raising the limit lets it through.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use CdcWorkerTest;

# This script's own statements resolve names in pg_catalog only (the planted
# operators below would capture them otherwise): what is tested is the
# extension's immunity.  The worker and the launcher are not psql sessions.
$ENV{PGOPTIONS} = '-c search_path=pg_catalog,pg_temp';

my $source = new_source('sec_source');
my $dest = new_dest('sec_dest', "cdc.prune_interval = 1\ncdc.max_workers = 8\n");

# ---------------------------------------------------------------------------
# Roles and tables
# ---------------------------------------------------------------------------
my $tables = q{
CREATE SCHEMA shared;
CREATE TABLE shared.orders (id int PRIMARY KEY, note text, qty int);
CREATE TABLE shared.orders_h (id int PRIMARY KEY, note text, qty int);
CREATE TABLE shared.handled (id int PRIMARY KEY, note text, qty int);
CREATE TABLE public.notes (id int PRIMARY KEY, body text);
CREATE TABLE public.owned (id int PRIMARY KEY, body text);
CREATE TABLE public.guarded (id int PRIMARY KEY, body text);
CREATE TABLE public.big (id int PRIMARY KEY, body text);
};
$source->safe_psql('postgres', $tables . q{
ALTER TABLE shared.orders_h REPLICA IDENTITY FULL;
INSERT INTO shared.orders VALUES (1, 'copied', 1), (2, 'copied', 2);
INSERT INTO shared.orders_h VALUES (1, 'copied', 1);
INSERT INTO shared.handled VALUES (1, 'copied', 1);
INSERT INTO public.notes VALUES (1, 'copied');
CREATE PUBLICATION pub_shared FOR TABLE shared.orders, shared.orders_h, shared.handled;
CREATE PUBLICATION pub_notes FOR TABLE public.notes;
CREATE PUBLICATION pub_owned FOR TABLE public.owned;
CREATE PUBLICATION pub_guarded FOR TABLE public.guarded;
CREATE PUBLICATION pub_big FOR TABLE public.big;
});

$dest->safe_psql('postgres', $tables . q{
CREATE ROLE alice;
CREATE ROLE mallory;
CREATE ROLE subo;
GRANT CREATE ON SCHEMA public TO alice, mallory;
GRANT USAGE, CREATE ON SCHEMA shared TO alice;
-- what planted or table-owner code records: written by a SECURITY DEFINER
-- helper, so whoever runs the code can write it
CREATE TABLE public.ran (id bigserial, what text, ran_as name, restricted boolean, backend text);
CREATE FUNCTION public.record_run(what text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  -- the caller's current_user is the definer here: session_user and the
  -- outer role are read by the caller and passed in through the GUC
  INSERT INTO public.ran (what, ran_as, restricted, backend)
  VALUES (what, pg_catalog.current_setting('sec.caller'), pg_catalog.current_setting('sec.restricted')::boolean,
          (SELECT a.backend_type FROM pg_catalog.pg_stat_activity a WHERE a.pid = pg_catalog.pg_backend_pid()));
END $$;
-- the history target and the handler (owned by the extension owner)
CREATE TABLE shared.orders_history (id int, note text, qty int, cdc_key jsonb NOT NULL, cdc_version bigint[] NOT NULL,
                                    cdc_op text NOT NULL, UNIQUE (cdc_key, cdc_version));
CREATE TABLE shared.totals (id int PRIMARY KEY, qty int);
CREATE FUNCTION shared.on_change(op text, old shared.handled, new shared.handled, meta jsonb)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  INSERT INTO shared.totals AS t VALUES (coalesce(new.id, old.id), coalesce(new.qty, 0) - coalesce(old.qty, 0))
    ON CONFLICT (id) DO UPDATE SET qty = t.qty + EXCLUDED.qty;
END $$;
SELECT cdc.register_mapping('shared.orders', outbox => true, source_name => 'sub_shared');
SELECT cdc.register_mapping('shared.orders_history', source_schema => 'shared', source_table => 'orders_h',
                            key_columns => '{id}', mode => 'history', outbox => true, source_name => 'sub_shared');
SELECT cdc.register_mapping('shared.handled', mode => 'handler', source_name => 'sub_shared',
                            handler => 'shared.on_change(text, shared.handled, shared.handled, jsonb)');
});

# ===========================================================================
# 1. search_path
# ===========================================================================
# The same planted objects as sql/security.sql, in public and in shared.
$dest->safe_psql('postgres', planted_overloads_sql(role => 'alice', body => 'public', schemas => ['public', 'shared'], typed_rows => q{
        ('to_jsonb', 'shared.orders', 'jsonb', 'pg_catalog.to_jsonb($1)'),
        ('to_jsonb', 'shared.orders_history', 'jsonb', 'pg_catalog.to_jsonb($1)'),
        ('to_jsonb', 'shared.handled', 'jsonb', 'pg_catalog.to_jsonb($1)'),
        ('to_jsonb', 'text', 'jsonb', 'pg_catalog.to_jsonb($1)'),
        ('jsonb_populate_record', 'shared.handled, jsonb', 'shared.handled', 'pg_catalog.jsonb_populate_record($1, $2)'),
}));

create_subscription($dest, $source, 'sub_shared', ['pub_shared']);
wait_caught_up($source, $dest, 'sub_shared') or die 'sub_shared did not start';
$source->safe_psql('postgres', q{
INSERT INTO shared.orders VALUES (3, 'streamed', 3);
UPDATE shared.orders SET note = 'updated', qty = qty + 10 WHERE id <= 2;
DELETE FROM shared.orders WHERE id = 3;
INSERT INTO shared.orders_h VALUES (2, 'streamed', 2);
UPDATE shared.orders_h SET qty = 5;
INSERT INTO shared.handled VALUES (2, 'streamed', 2);
UPDATE shared.handled SET qty = qty * 3;
TRUNCATE shared.handled;
INSERT INTO shared.handled VALUES (3, 'after truncate', 7);
});
wait_caught_up($source, $dest, 'sub_shared') or die 'sub_shared did not catch up';
# let the launcher's scheduled prune (cdc.prune_interval = 1s) run at least once
my $pruned = $dest->safe_psql('postgres', 'SELECT last_prune_at FROM cdc.horizon_status');
$dest->poll_query_until('postgres', "SELECT last_prune_at IS DISTINCT FROM " .
	($pruned eq '' ? 'NULL' : "'$pruned'::timestamptz") . " FROM cdc.horizon_status")
  or die 'the launcher did not prune';

is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran WHERE what LIKE '%.%'}), '0',
	'planted code never ran in the worker or the launcher');
is($dest->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'alice'"), 'f', 'alice is not a superuser');
compare_table($source, $dest, 'SELECT * FROM shared.orders ORDER BY id', 'state target equals the source');
is($dest->safe_psql('postgres', q{SELECT string_agg(id || cdc_op || qty, ',' ORDER BY cdc_version, id) FROM shared.orders_history}),
	$dest->safe_psql('postgres', q{SELECT '1r1,2c2,1u5,2u5'}), 'history target: one row per change');
is($dest->safe_psql('postgres', q{SELECT string_agg(id || ':' || qty, ',' ORDER BY id) FROM shared.totals WHERE qty <> 0}),
	'3:7', 'handler target: totals follow the source');
compare_table($source, $dest, 'SELECT * FROM shared.handled ORDER BY id', 'handler target equals the source');
is($dest->safe_psql('postgres', q{SELECT string_agg(op, '' ORDER BY id) FROM cdc.outbox WHERE target = 'shared.orders'::regclass}),
	'cuud', 'outbox rows of the state target (none for copied rows)');

# ===========================================================================
# 2. The table owner's code runs as the table owner (B33)
# ===========================================================================
$dest->safe_psql('postgres', q{
ALTER TABLE public.notes OWNER TO mallory;
SET ROLE mallory;
CREATE FUNCTION public.mallory_code(what text) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM pg_catalog.set_config('sec.caller', current_user, true);
  -- a security-restricted operation refuses CREATE TEMP TABLE
  BEGIN
    CREATE TEMP TABLE mallory_probe (x int);
    DROP TABLE mallory_probe;
    PERFORM pg_catalog.set_config('sec.restricted', 'false', true);
  EXCEPTION WHEN OTHERS THEN
    PERFORM pg_catalog.set_config('sec.restricted', 'true', true);
  END;
  PERFORM public.record_run(what);
  BEGIN
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN true;
END $$;
CREATE FUNCTION public.mallory_trigger() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM public.mallory_code('trigger ' || TG_OP);
  RETURN NEW;
END $$;
CREATE TRIGGER mallory_always BEFORE INSERT OR UPDATE ON public.notes FOR EACH ROW EXECUTE FUNCTION public.mallory_trigger();
ALTER TABLE public.notes ENABLE ALWAYS TRIGGER mallory_always;
CREATE DOMAIN public.checked_text AS text CHECK (public.mallory_code('domain'));
ALTER TABLE public.notes ALTER COLUMN body TYPE public.checked_text;
ALTER TABLE public.notes ADD COLUMN stamp boolean DEFAULT public.mallory_code('default');
ALTER TABLE public.notes ADD CONSTRAINT mallory_check CHECK (public.mallory_code('check'));
CREATE FUNCTION public.mallory_handler(op text, old public.notes, new public.notes, meta jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM public.mallory_code('handler ' || op);
END $$;
RESET ROLE;
DELETE FROM public.ran WHERE what NOT LIKE '%.%';
SELECT cdc.register_mapping('public.notes', mode => 'handler',
                            handler => 'public.mallory_handler(text, public.notes, public.notes, jsonb)');
});
create_subscription($dest, $source, 'sub_notes', ['pub_notes']);
wait_caught_up($source, $dest, 'sub_notes') or die 'sub_notes did not start';
$source->safe_psql('postgres', q{INSERT INTO public.notes VALUES (2, 'hello'); UPDATE public.notes SET body = 'again' WHERE id = 1;});
wait_caught_up($source, $dest, 'sub_notes') or die 'sub_notes did not catch up';
is($dest->safe_psql('postgres', 'SELECT id, body FROM public.notes ORDER BY id'), "1|again\n2|hello", 'notes applied (copy and stream)');
is($dest->safe_psql('postgres', q{SELECT string_agg(DISTINCT ran_as || ':' || restricted, ',') FROM public.ran}),
	'mallory:true', 'every piece of the table owner\'s code ran as mallory, in a security-restricted operation');
is($dest->safe_psql('postgres', q{SELECT string_agg(DISTINCT split_part(what, ' ', 1), ',' ORDER BY split_part(what, ' ', 1)) FROM public.ran}),
	'check,default,domain,handler,trigger', 'trigger, default, CHECK, domain and handler all ran');
ok($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran WHERE what = 'trigger INSERT'}) >= 2,
	'the ALWAYS trigger fired during the initial copy and for the streamed insert');
is($dest->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f', 'mallory is not a superuser');

# ===========================================================================
# 3. A subscription owned by an ordinary role
# ===========================================================================
$dest->safe_psql('postgres', q{
ALTER TABLE public.owned OWNER TO mallory;
CREATE TRIGGER owned_always BEFORE INSERT ON public.owned FOR EACH ROW EXECUTE FUNCTION public.mallory_trigger();
ALTER TABLE public.owned ENABLE ALWAYS TRIGGER owned_always;
DELETE FROM public.ran WHERE what NOT LIKE '%.%';
});
$source->safe_psql('postgres', q{INSERT INTO public.owned VALUES (1, 'one')});
create_subscription($dest, $source, 'sub_owned', ['pub_owned'], "owner => 'subo'");
wait_status($dest, 'sub_owned', "state = 'error'") or die 'sub_owned was not refused';
like(status_row($dest, 'sub_owned', 'last_error'),
	qr/subscription owner "subo" cannot apply changes to table public\.owned owned by "mallory"/,
	'a table whose owner the subscription owner cannot act for is refused, naming both roles');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.owned'), '0', 'nothing of it was applied');
$dest->safe_psql('postgres', 'GRANT mallory TO subo');
wait_caught_up($source, $dest, 'sub_owned') or die 'sub_owned did not apply after the grant';
is($dest->safe_psql('postgres', 'SELECT id, body FROM public.owned'), '1|one', 'applied once subo may act as mallory');
is($dest->safe_psql('postgres', q{SELECT string_agg(DISTINCT ran_as || ':' || restricted, ',') FROM public.ran}),
	'mallory:true', 'the trigger ran as the table owner');

# run_as_owner: the subscription owner applies itself and needs the privileges
$dest->safe_psql('postgres', q{
REVOKE mallory FROM subo;
DELETE FROM public.ran WHERE what NOT LIKE '%.%';
SELECT cdc.alter_subscription('sub_owned', run_as_owner => true);
});
$source->safe_psql('postgres', q{INSERT INTO public.owned VALUES (2, 'two')});
wait_status($dest, 'sub_owned', "state = 'error' AND last_error LIKE '%permission denied for table public.owned%'")
  or die 'run_as_owner without privileges was not refused';
like(status_row($dest, 'sub_owned', 'last_error'), qr/role "subo"/, 'the error names the subscription owner');
$dest->safe_psql('postgres', 'GRANT SELECT, INSERT, UPDATE, DELETE ON public.owned TO subo');
wait_caught_up($source, $dest, 'sub_owned') or die 'sub_owned did not apply after the grants';
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.owned'), '2', 'applied as the subscription owner');
is($dest->safe_psql('postgres', q{SELECT string_agg(DISTINCT ran_as, ',') FROM public.ran}),
	'subo', 'with run_as_owner the trigger runs as the subscription owner, never as a superuser');

# ===========================================================================
# 4. Row-level security
# ===========================================================================
$dest->safe_psql('postgres', q{
ALTER TABLE public.guarded OWNER TO mallory;
ALTER TABLE public.guarded ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.guarded FORCE ROW LEVEL SECURITY;
CREATE POLICY only_even ON public.guarded USING (id % 2 = 0);
});
$source->safe_psql('postgres', q{INSERT INTO public.guarded VALUES (1, 'odd'), (2, 'even')});
create_subscription($dest, $source, 'sub_guarded', ['pub_guarded'], 'copy_data => false');
wait_status($dest, 'sub_guarded', "state = 'streaming'") or die 'sub_guarded did not start';
$source->safe_psql('postgres', q{INSERT INTO public.guarded VALUES (3, 'odd'), (4, 'even')});
wait_status($dest, 'sub_guarded', "state = 'error'") or die 'the row-level security target was not refused';
like(status_row($dest, 'sub_guarded', 'last_error'), qr/row-level security/, 'refused: row-level security applies to the applying role');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.guarded}) . '|' .
   $dest->safe_psql('postgres', q{SELECT count(*) FROM cdc.entity_state WHERE target = 'public.guarded'::regclass}),
	'0|0', 'no row and no entity record was written');
$dest->safe_psql('postgres', 'ALTER TABLE public.guarded NO FORCE ROW LEVEL SECURITY');
wait_caught_up($source, $dest, 'sub_guarded') or die 'sub_guarded did not apply without FORCE';
is($dest->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM public.guarded}), '3,4',
	'the owner, not subject to its policies, applies every row');

# ===========================================================================
# 5. cdc.max_event_size
# ===========================================================================
$dest->safe_psql('postgres', q{ALTER SYSTEM SET cdc.max_event_size = '8kB'; SELECT pg_reload_conf();});
create_subscription($dest, $source, 'sub_big', ['pub_big'], 'copy_data => false');
wait_status($dest, 'sub_big', "state = 'streaming'") or die 'sub_big did not start';
$source->safe_psql('postgres', q{INSERT INTO public.big VALUES (1, 'small'), (2, repeat('x', 20000))});
wait_status($dest, 'sub_big', "state = 'error'") or die 'the oversize change was not refused';
like(status_row($dest, 'sub_big', 'last_error'), qr/cdc\.max_event_size/, 'the error names cdc.max_event_size');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.big'), '0', 'nothing of that transaction was applied');
$dest->safe_psql('postgres', q{ALTER SYSTEM RESET cdc.max_event_size; SELECT pg_reload_conf();});
wait_caught_up($source, $dest, 'sub_big') or die 'sub_big did not apply with the default limit';
is($dest->safe_psql('postgres', 'SELECT id, length(body) FROM public.big ORDER BY id'), "1|5\n2|20000", 'applied once the limit allows it');

# ===========================================================================
# The real pipeline still applies; nobody gained anything.
# ===========================================================================
$source->safe_psql('postgres', q{INSERT INTO shared.orders VALUES (10, 'last', 1); INSERT INTO public.notes VALUES (10, 'last');});
wait_caught_up($source, $dest, 'sub_shared') or die 'sub_shared stopped';
wait_caught_up($source, $dest, 'sub_notes') or die 'sub_notes stopped';
compare_table($source, $dest, 'SELECT * FROM shared.orders ORDER BY id', 'the state target still follows the source');
is($dest->safe_psql('postgres', 'SELECT count(*) FROM public.notes WHERE id = 10'), '1', 'notes still follow the source');
is($dest->safe_psql('postgres', q{SELECT string_agg(rolname || ':' || (rolsuper OR rolcreaterole OR rolcreatedb OR rolbypassrls OR rolreplication), ',' ORDER BY rolname)
                                    FROM pg_roles WHERE rolname IN ('alice', 'mallory', 'subo')}),
	'alice:false,mallory:false,subo:false', 'no role gained an attribute');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran WHERE what LIKE '%.%'}), '0',
	'no planted code ran at any time');

done_testing();

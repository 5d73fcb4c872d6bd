# Review h3 (security): a partitioned target whose partitions have other
# owners.  The worker applies a partitioned table's changes as one role (the
# table's owner, switched to in a security-restricted operation, or the
# subscription owner when the table's owner is a member of it), and rows
# routed to a partition run that partition's code (triggers, defaults,
# constraints) as that role.  Before the fix, a superuser-owned partitioned
# table with a partition given to mallory ran mallory's ENABLE ALWAYS
# trigger as the superuser: it made mallory a superuser.  Likewise alice's
# partitioned table with mallory's partition ran mallory's code as alice.
# Now such a table is refused (state error, 42501, naming the partition and
# both roles) before anything is applied; a partition whose owner is a
# member of the applying role is fine (docs/security.md, "The worker's
# identity").
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CdcWorkerTest;

my $source = new_source('partown_source');
my $dest = new_dest('partown_dest');

$source->safe_psql('postgres', q{
CREATE TABLE public.sp (id int PRIMARY KEY, v text);
CREATE TABLE public.ap (id int PRIMARY KEY, v text);
CREATE PUBLICATION pub_sp FOR TABLE public.sp;
CREATE PUBLICATION pub_ap FOR TABLE public.ap;
INSERT INTO public.sp VALUES (1, 'copied');
INSERT INTO public.ap VALUES (1, 'copied');
});
$dest->safe_psql('postgres', q{
CREATE ROLE mallory;
CREATE ROLE alice;
CREATE SCHEMA m AUTHORIZATION mallory;
CREATE TABLE public.ran (what text, ran_as name);
GRANT INSERT ON public.ran TO PUBLIC;
SET ROLE mallory;
CREATE FUNCTION m.trg() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
  INSERT INTO public.ran VALUES (TG_TABLE_NAME || ' ' || NEW.id, current_user);
  BEGIN
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN NEW;
END $$;
RESET ROLE;
-- the superuser's partitioned table, one partition given to mallory
CREATE TABLE public.sp (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE public.sp_low PARTITION OF public.sp FOR VALUES FROM (0) TO (100);
CREATE TABLE public.sp_high PARTITION OF public.sp FOR VALUES FROM (100) TO (200);
ALTER TABLE public.sp_low OWNER TO mallory;
SET ROLE mallory;
CREATE TRIGGER t BEFORE INSERT OR UPDATE ON public.sp_low FOR EACH ROW EXECUTE FUNCTION m.trg();
ALTER TABLE public.sp_low ENABLE ALWAYS TRIGGER t;
RESET ROLE;
-- alice's partitioned table, a sub-partition given to mallory
CREATE TABLE public.ap (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE public.ap_all PARTITION OF public.ap FOR VALUES FROM (0) TO (1000) PARTITION BY RANGE (id);
CREATE TABLE public.ap_low PARTITION OF public.ap_all FOR VALUES FROM (0) TO (100);
ALTER TABLE public.ap OWNER TO alice;
ALTER TABLE public.ap_all OWNER TO alice;
ALTER TABLE public.ap_low OWNER TO mallory;
SET ROLE mallory;
CREATE TRIGGER t BEFORE INSERT OR UPDATE ON public.ap_low FOR EACH ROW EXECUTE FUNCTION m.trg();
ALTER TABLE public.ap_low ENABLE ALWAYS TRIGGER t;
RESET ROLE;
});

# ---------------------------------------------------------------------------
# 1. The superuser's table with mallory's partition: refused, nothing ran
# ---------------------------------------------------------------------------
create_subscription($dest, $source, 'sub_sp', ['pub_sp']);
ok(wait_status($dest, 'sub_sp', "state = 'error'"), 'sub_sp stops with an error');
like(status_row($dest, 'sub_sp', 'last_error'), qr/partition public\.sp_low of table public\.sp is owned by "mallory", whose code would run as "\w+"/,
	'the error names the partition and both roles');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.sp}), '0', 'nothing of public.sp was applied');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran}), '0', 'mallory\'s trigger never ran');
is($dest->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f', 'mallory is not a superuser');

# The partition given to the table's owner (without mallory's trigger): applied.
$dest->safe_psql('postgres', q{DROP TRIGGER t ON public.sp_low; ALTER TABLE public.sp_low OWNER TO CURRENT_USER});
$source->safe_psql('postgres', q{INSERT INTO public.sp VALUES (2, 'streamed'), (150, 'high')});
ok(wait_caught_up($source, $dest, 'sub_sp'), 'sub_sp streams once the partition has the table\'s owner');
is($dest->safe_psql('postgres', q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM public.sp}),
	'1:copied,2:streamed,150:high', 'public.sp copied and streamed');

# ---------------------------------------------------------------------------
# 2. alice's table with mallory's sub-partition: refused; with a partition
#    owner that is a member of alice, applied as alice
# ---------------------------------------------------------------------------
create_subscription($dest, $source, 'sub_ap', ['pub_ap']);
ok(wait_status($dest, 'sub_ap', "state = 'error'"), 'sub_ap stops with an error');
like(status_row($dest, 'sub_ap', 'last_error'), qr/partition public\.ap_low of table public\.ap is owned by "mallory", whose code would run as "alice"/,
	'the error names the sub-partition, its owner and alice');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ap}), '0', 'nothing of public.ap was applied');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran}), '0', 'mallory\'s trigger never ran');

# mallory becomes a member of alice: her code gains nothing running as alice
$dest->safe_psql('postgres', q{GRANT alice TO mallory});
$source->safe_psql('postgres', q{INSERT INTO public.ap VALUES (2, 'streamed')});
ok(wait_caught_up($source, $dest, 'sub_ap'), 'sub_ap streams once mallory is a member of alice');
is($dest->safe_psql('postgres', q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM public.ap}),
	'1:copied,2:streamed', 'public.ap copied and streamed');
is($dest->safe_psql('postgres', q{SELECT string_agg(DISTINCT ran_as, ',') FROM public.ran}), 'alice',
	'the partition\'s trigger ran as alice');
is($dest->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f', 'mallory is still not a superuser');

# ---------------------------------------------------------------------------
# 3. cdc.audit reads a partitioned table as its owner, and planning the read
#    folds every partition's index predicates: mallory's partition of the
#    superuser's table with an IMMUTABLE predicate is refused, not run as the
#    superuser calling cdc.audit.  (This session never reads public.sp again:
#    a superuser's own query on it would fold the predicate too.)
# ---------------------------------------------------------------------------
$dest->safe_psql('postgres', q{
CREATE TABLE public.sp_mid PARTITION OF public.sp FOR VALUES FROM (200) TO (300);
ALTER TABLE public.sp_mid OWNER TO mallory;
GRANT CREATE ON SCHEMA public TO mallory;
SET ROLE mallory;
CREATE FUNCTION m.escalate() RETURNS bool LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog AS $$
BEGIN
  INSERT INTO public.ran VALUES ('index predicate', current_user);
  BEGIN
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN true;
END $$;
CREATE FUNCTION m.pred(int) RETURNS bool LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog AS $$
BEGIN
  RETURN m.escalate();
END $$;
CREATE INDEX sp_mid_v ON public.sp_mid (v) WHERE m.pred(0);
RESET ROLE;
DELETE FROM public.ran;
});
my ($rc, $out, $err) = $dest->psql('postgres', q{CALL cdc.audit('sub_sp')});
like($err, qr/partition public\.sp_mid of table public\.sp is owned by "mallory", whose code would run as "\w+"/,
	'cdc.audit refuses the table with mallory\'s partition');
is($dest->safe_psql('postgres', q{SELECT count(*) FROM public.ran}), '0', 'mallory\'s predicate never ran');
is($dest->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f', 'mallory is not a superuser');

done_testing();

# A destination table's trigger (ENABLE ALWAYS: the worker runs with
# session_replication_role = replica, docs/worker.md) that ALTERs another
# destination table while the worker applies a batch holding changes of
# both (review h4).  The batch reads the second table's metadata and
# converts its values before the trigger runs; the direct writer
# (cdc.direct_writes) then placed the int Datums in the altered table's
# descriptor, where they were read as text pointers, and the destination
# server crashed at every retry.  Now such a write takes the statement,
# which PostgreSQL re-plans after the DDL (regress nested_ddl_direct covers
# cdc_apply_batch(); this file the worker's own segments).
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

sq(q{CREATE TABLE a (id int PRIMARY KEY, v int);
	CREATE TABLE b (id int PRIMARY KEY, v int);
	CREATE PUBLICATION p FOR TABLE a, b});
dq(q{CREATE TABLE a (id int PRIMARY KEY, v int);
	CREATE TABLE b (id int PRIMARY KEY, v int);
	CREATE FUNCTION b_alters_a() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	  IF (SELECT atttypid FROM pg_attribute WHERE attrelid = 'public.a'::regclass AND attname = 'v') = 'int4'::regtype THEN
	    ALTER TABLE public.a ALTER COLUMN v TYPE text;
	  END IF;
	  RETURN NEW;
	END $$;
	CREATE TRIGGER b_t AFTER INSERT ON b FOR EACH ROW EXECUTE FUNCTION b_alters_a();
	ALTER TABLE b ENABLE ALWAYS TRIGGER b_t});

create_subscription($dest, $source, 's', ['p']);
ok(wait_caught_up($source, $dest, 's'), 'streaming');
# Rows of a before b's in one source transaction would be written before the
# trigger; a's rows after b's are the ones converted before it ran.
sq(q{BEGIN;
	INSERT INTO a VALUES (1, 10);
	INSERT INTO b VALUES (1, 1);
	INSERT INTO a VALUES (2, 12345), (3, 7);
	UPDATE a SET v = 11 WHERE id = 1;
	COMMIT});
ok(wait_caught_up($source, $dest, 's'), 'the transaction whose trigger altered a is applied');
is(dq(q{SELECT string_agg(id || ':' || v || ':' || pg_typeof(v), ',' ORDER BY id) FROM a}),
	'1:11:text,2:12345:text,3:7:text', 'a: every row, in the altered column type');
is(dq(q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM b}), '1:1', 'b: its row');
is(dq(q{SELECT count(*) FROM cdc.entities WHERE target = 'a'::regclass}), '3', 'a: an entity record per key');

sq(q{INSERT INTO a VALUES (4, 4); INSERT INTO b VALUES (2, 2)});
ok(wait_caught_up($source, $dest, 's'), 'later changes applied with the altered table\'s metadata');
is(dq(q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM a}), '1:11,2:12345,3:7,4:4', 'a: the later row too');
is(dq(q{SELECT retry_count || ':' || coalesce(last_error, '') FROM cdc.subscription_status WHERE name = 's'}), '0:',
	'no worker error, no retry');

dq(q{SELECT cdc.drop_subscription('s', drop_slot => true)});
$dest->stop;
$source->stop;
done_testing();

# The module's ProcessUtility hook (cdc_apply preloaded) runs two statements
# before DROP EXTENSION cdc_apply and DROP OWNED BY the extension's owner:
# it reads cdc.subscription (refusing the drop while it has rows) and takes
# cdc.prune()'s mutex (the FOR UPDATE lock on cdc.prune_state that keeps a
# running prune out of the drop's way).  They run in the dropping session,
# as its role, with the session's own search_path: the hook is no function
# with a SET clause.  Security review h2: a role with CREATE on a schema
# plants there overloads of every operator and function name the
# statements use (=, count, string_agg, quote_ident) and of the casts'
# names, each calling a probe that reports who ran it and tries ALTER ROLE
# ... SUPERUSER; a superuser then drops with that schema before pg_catalog
# in its search_path (refused while a subscription exists, and later a drop
# that goes ahead, rolled back).  No probe runs and the role stays an
# ordinary one: every name in the statements is qualified.  A control
# query under the same search_path shows that the planted operator takes
# an unqualified name there.
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
is(dq('SHOW shared_preload_libraries'), 'cdc_apply', 'cdc_apply is preloaded: the hook guards the drops');

dq(q{CREATE ROLE mallory;
     CREATE SCHEMA evil AUTHORIZATION mallory;
     GRANT USAGE ON SCHEMA evil TO PUBLIC});
dq(q{SET ROLE mallory;
CREATE FUNCTION evil.probe(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE WARNING 'probe % ran as %', what, current_user;
  BEGIN
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN true;
END $$;
CREATE FUNCTION evil.eq_text(text, text) RETURNS boolean LANGUAGE plpgsql
  AS $$ BEGIN RETURN evil.probe('text = text') AND $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.eq_text);
CREATE FUNCTION evil.eq_name(name, text) RETURNS boolean LANGUAGE plpgsql
  AS $$ BEGIN RETURN evil.probe('name = text') AND $1::text OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR evil.= (LEFTARG = name, RIGHTARG = text, FUNCTION = evil.eq_name);
CREATE FUNCTION evil.count(anyelement) RETURNS bigint LANGUAGE plpgsql
  AS $$ BEGIN RETURN CASE WHEN evil.probe('count()') THEN 0::bigint END; END $$;
CREATE FUNCTION evil.count() RETURNS bigint LANGUAGE plpgsql
  AS $$ BEGIN RETURN CASE WHEN evil.probe('count(*)') THEN 0::bigint END; END $$;
CREATE FUNCTION evil.quote_ident(text) RETURNS text LANGUAGE plpgsql
  AS $$ BEGIN RETURN CASE WHEN evil.probe('quote_ident()') THEN $1 END; END $$;
CREATE FUNCTION evil.quote_ident(name) RETURNS text LANGUAGE plpgsql
  AS $$ BEGIN RETURN CASE WHEN evil.probe('quote_ident(name)') THEN $1::text END; END $$;
CREATE FUNCTION evil.int4(bigint) RETURNS int LANGUAGE plpgsql
  AS $$ BEGIN RETURN CASE WHEN evil.probe('int4()') THEN 0 END; END $$;
CREATE FUNCTION evil.string_agg_step(text, text, text) RETURNS text LANGUAGE plpgsql
  AS $$ BEGIN RETURN CASE WHEN evil.probe('string_agg()') THEN $2 END; END $$;
CREATE AGGREGATE evil.string_agg(text, text) (SFUNC = evil.string_agg_step, STYPE = text)});

my $hostile = 'SET search_path = evil, pg_catalog, public; ';
# (rolled back: the probe runs as the superuser there, and its ALTER ROLE would stay)
my ($ret, $out, $err) = $dest->psql('postgres', 'BEGIN; ' . $hostile . q{SELECT 'a'::text = 'b'::text; ROLLBACK});
like($err, qr/WARNING:  probe text = text ran as /, 'control: the planted operator takes an unqualified = there');

dq(q{SELECT cdc.create_subscription('s1', 'host=/nonexistent dbname=x', ARRAY['p'], create_slot => false, enabled => false)});

# refused while the subscription exists: the hook read cdc.subscription
($ret, $out, $err) = $dest->psql('postgres', $hostile . 'DROP EXTENSION cdc_apply CASCADE');
like($err, qr/ERROR:  cannot drop extension cdc_apply while it has subscriptions/, 'DROP EXTENSION refused by the hook');
unlike($err, qr/probe/, 'no planted code ran in the DROP EXTENSION guard');
($ret, $out, $err) = $dest->psql('postgres', $hostile . 'DROP OWNED BY CURRENT_USER CASCADE');
like($err, qr/ERROR:  cannot drop extension cdc_apply while it has subscriptions/, 'DROP OWNED BY the owner refused by the hook');
unlike($err, qr/probe/, 'no planted code ran in the DROP OWNED guard');

# without subscriptions the drop goes ahead past both statements (rolled back)
dq(q{SELECT cdc.drop_subscription('s1')});
($ret, $out, $err) = $dest->psql('postgres', $hostile . 'BEGIN; DROP EXTENSION cdc_apply CASCADE; ROLLBACK');
is($ret, 0, 'DROP EXTENSION went through the guard');
unlike($err, qr/probe/, 'no planted code ran while it took the prune mutex');
is(dq(q{SELECT count(*) FROM pg_extension WHERE extname = 'cdc_apply'}), '1', 'the extension stays (rolled back)');

is(dq(q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f', 'mallory is still an ordinary role');

$dest->stop;
done_testing();

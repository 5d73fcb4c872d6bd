# B36 on the worker path (issue 12 item 9; docs/semantics.md, "Changing the
# key"): the source's replica identity moves to another unique index, so
# updates and deletes carry only that index's columns as the old key.
#
#   (a) the two updates apply; the delete, whose old key has no id, stops
#       the worker with an error naming the missing key column (no skip, no
#       wrong row deleted);
#   (b) the operator keys the destination by that index
#       (cdc.register_mapping(key_columns => '{email}'), which re-keys the
#       entity records): the delete applies, and the records keep their
#       versions (a replay of the old changes is a duplicate, not applied).
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

sub dq { return $dest->safe_psql('postgres', $_[0]); }
sub sq { return $source->safe_psql('postgres', $_[0]); }

my $ddl = q{CREATE TABLE users (id int PRIMARY KEY, email text NOT NULL, name text);
CREATE UNIQUE INDEX users_email ON users (email);};
sq($ddl . q{INSERT INTO users VALUES (1, 'a@example.org', 'ann'), (2, 'b@example.org', 'bob');
CREATE PUBLICATION pub_users FOR TABLE users;});
dq($ddl . q{SELECT cdc.register_mapping('users', outbox => true);});
create_subscription($dest, $source, 'users', ['pub_users']);
ok(wait_caught_up($source, $dest, 'users'), 'copied and streaming');

# (a)
sq('ALTER TABLE users REPLICA IDENTITY USING INDEX users_email');
sq(q{UPDATE users SET name = 'ann2' WHERE id = 1});
sq(q{UPDATE users SET email = 'a2@example.org' WHERE id = 1});
ok(wait_caught_up($source, $dest, 'users'), '(a) the two updates apply');
is(dq('SELECT id, email, name FROM users ORDER BY id'), "1|a2\@example.org|ann2\n2|b\@example.org|bob", '(a) rows after the updates');
sq('DELETE FROM users WHERE id = 2');
ok(wait_status($dest, 'users', q{state = 'error' AND last_error ~ 'before\.id'}), '(a) the delete stops the worker');
like(status_row($dest, 'users', 'last_error'), qr/key/i, '(a) the error is about the key');
is(dq('SELECT count(*) FROM users'), '2', '(a) nothing deleted');

# (b) key the destination by the replica identity's index
is(dq(q{SELECT key_columns FROM cdc.register_mapping('users', outbox => true, key_columns => '{email}')}), '{email}',
	'(b) re-keyed to email');
is(dq(q{SELECT string_agg(entity_key::text, ' ' ORDER BY entity_key::text) FROM cdc.entities WHERE target = 'users'::regclass}),
	'{"email": "a2@example.org"} {"email": "b@example.org"}', '(b) the entity records moved to the email keys');
ok(wait_caught_up($source, $dest, 'users'), '(b) the delete applies');
is(dq('SELECT id, email FROM users'), "1|a2\@example.org", '(b) row 2 deleted');
is(dq(q{SELECT count(*) FROM cdc.tombstones WHERE target = 'users'::regclass AND entity_key->>'email' = 'b@example.org'}), '1',
	'(b) its tombstone under the email key');
is(status_row($dest, 'users', q{coalesce(last_error, '') || retry_count}), '0', '(b) no error left');
is(dq(q{SELECT string_agg(op, '' ORDER BY id) FROM cdc.outbox WHERE target = 'users'::regclass}), 'uud',
	'(b) outbox: the two updates and the delete, once each');

done_testing();

# Shared fixture of the background-worker TAP tests (020..022): a source
# cluster with wal_level = logical and a destination cluster that preloads
# cdc_apply, plus helpers to wait for the worker and compare tables.
package CdcWorkerTest;
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Exporter 'import';

our @EXPORT = qw(create_subscription new_source new_dest source_lsn wait_caught_up wait_status status_row
  compare_table outbox_summary cdc_root);

sub new_source
{
	my ($name) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name // 'source');
	$node->init(allows_streaming => 'logical');
	$node->append_conf('postgresql.conf', "max_wal_senders = 10\nmax_replication_slots = 10\n");
	$node->start;
	return $node;
}

sub new_dest
{
	my ($name, $extra) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name // 'dest');
	$node->init;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cdc_apply'
cdc.naptime = 1
cdc.retry_backoff = 200ms
cdc.retry_backoff_max = 2
cdc.status_interval = 200ms
max_worker_processes = 16
} . ($extra // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION cdc_apply');
	return $node;
}

# The source's current WAL position (after a workload).
sub source_lsn
{
	my ($source) = @_;
	return $source->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
}

# Waits until the subscription's applied_lsn reaches $lsn (default: the
# source's current position) and the worker is streaming.
sub wait_caught_up
{
	my ($source, $dest, $sub, $lsn) = @_;
	$lsn //= source_lsn($source);
	my $ok = $dest->poll_query_until('postgres', qq{
		SELECT greatest(applied_lsn, flushed_lsn) >= '$lsn'::pg_lsn AND state = 'streaming'
		  FROM cdc.subscription_status WHERE name = '$sub'});
	if (!$ok) {
		diag('not caught up to ' . $lsn . ': ' . $dest->safe_psql('postgres',
			"SELECT state, applied_lsn, flushed_lsn, received_lsn, retry_count, last_error FROM cdc.subscription_status WHERE name = '$sub'"));
	}
	return $ok;
}

# Waits until the status row satisfies the SQL condition $cond.
sub wait_status
{
	my ($dest, $sub, $cond) = @_;
	my $ok = $dest->poll_query_until('postgres',
		qq{SELECT count(*) > 0 FROM cdc.subscription_status WHERE name = '$sub' AND ($cond)}, 't');
	if (!$ok) {
		diag("status never satisfied [$cond]: " . $dest->safe_psql('postgres',
			"SELECT state, applied_lsn, retry_count, last_error, last_error_lsn, worker_pid FROM cdc.subscription_status WHERE name = '$sub'"));
	}
	return $ok;
}

sub status_row
{
	my ($dest, $sub, $cols) = @_;
	return $dest->safe_psql('postgres', "SELECT $cols FROM cdc.subscription_status WHERE name = '$sub'");
}

# is() of the same query's output on both clusters.
sub compare_table
{
	my ($source, $dest, $query, $label, $db) = @_;
	$db //= 'postgres';
	my $s = $source->safe_psql($db, $query);
	my $d = $dest->safe_psql($db, $query);
	return is($d, $s, $label);
}

# "rows|distinct keys" of cdc.outbox.
sub outbox_summary
{
	my ($dest, $where, $db) = @_;
	$where = $where ? "WHERE $where" : '';
	return $dest->safe_psql($db // 'postgres',
		"SELECT count(*) || '|' || count(DISTINCT idempotency_key) FROM cdc.outbox $where");
}

# cdc.create_subscription($name, <source conninfo>, ARRAY[$pubs], $extra args SQL).
sub create_subscription
{
	my ($dest, $source, $name, $pubs, $extra, $db) = @_;
	(my $conn = $source->connstr($db // 'postgres')) =~ s/'/''/g;
	my $arr = join(', ', map { "'$_'" } @$pubs);
	$extra = $extra ? ", $extra" : '';
	return $dest->safe_psql($db // 'postgres', "SELECT cdc.create_subscription('$name', '$conn', ARRAY[$arr]$extra)");
}

sub cdc_root
{
	return $ENV{CDC_ROOT} if $ENV{CDC_ROOT};
	require File::Basename;
	require Cwd;
	return Cwd::abs_path(File::Basename::dirname(Cwd::abs_path($0)) . '/../..');
}

1;

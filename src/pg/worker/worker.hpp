// The background-worker path as the rest of the module sees it
// (docs/worker.md): registering the launcher from _PG_init, and creating
// and dropping a slot on a source for cdc._create_source_slot and
// cdc._drop_at_commit (sql_api.cpp).  Everything
// else of the worker is internal to src/pg/worker/ (worker_state.hpp).
// PostgreSQL regime: both functions may ereport; no C++ objects.
#pragma once

#include "pg/guard.hpp"

extern "C" {
#include "access/xlogdefs.h"
#include "libpq-fe.h"
}

namespace cdc::pg {

// Registers the launcher when the library is loaded through
// shared_preload_libraries (`preloaded`), not during a binary upgrade.
// Called by _PG_init after InitGUC.
void InitLauncher(bool preloaded);

} // namespace cdc::pg

// Connects to the source over the replication protocol to drop `slot`
// there.  PostgreSQL regime.  Errors 08001 when the source cannot be
// reached.
PGconn *connect_for_slot_drop_pg(text *conninfo_text, const char *slot);

// Drops the slot over `conn` (from connect_for_slot_drop_pg; closed here,
// whatever happens) with DROP_REPLICATION_SLOT ... WAIT, interruptibly: a
// cancel or statement_timeout cancels the command on the source.  A slot
// that does not exist is skipped with a NOTICE.  Returns whether the source
// dropped it.  For the pending drops of cdc.drop_subscription(drop_slot =>
// true), done at the pre-commit of its transaction (slot_at_commit.cpp).
// PostgreSQL regime.  Errors 08001 when the connection fails, 55006 when
// the slot cannot be dropped.
bool drop_source_slot_pg(PGconn *conn, const char *slot);

// The tables publications publish, as pgoutput names them, with each one's
// source relation OID (source_published_tables).  n = -1: not read, a
// publication did not exist on the source (`missing` names it).
typedef struct PublishedTables {
	int n;
	char **schemas;
	char **tables;
	Oid *relids;
	char *missing;
} PublishedTables;

// Connects to the source over the replication protocol and creates the
// logical slot `slot` (pgoutput); returns its consistent point and the open
// connection in *keep (the caller closes it, after dropping the slot over
// it if need be; set as soon as the slot exists, so that an error after it
// leaves the slot to the caller's drop).  The slot's snapshot is exported
// and imported on a second connection, which reads what the publications
// (`publications_sql`: their names as SQL literals, comma-separated)
// published at the consistent point, with their OIDs, into *published (n =
// -1 when one of the publications did not exist then).  For the slot of
// cdc.create_subscription(copy_data => false), created at the pre-commit of
// its transaction (slot_at_commit.cpp), so that the slot exists from the
// subscription's creation, as with CREATE SUBSCRIPTION, and its tables are
// those of the slot's start.  Waits interruptibly and cancels the command
// on the source on an interrupt.  PostgreSQL regime.  Errors 08001 when the
// source cannot be reached; the source's SQLSTATE otherwise (42710 the slot
// exists).
XLogRecPtr create_source_slot_pg(text *conninfo_text, const char *slot, const char *publications_sql, PGconn **keep,
                                 PublishedTables *published);

// cdc._create_source_slot(subid): the slot of subscription `subid` is
// created when the calling transaction commits (slot_at_commit.cpp).
// PostgreSQL regime: call it through PgCall.  Errors 42501 not a superuser.
void create_source_slot_at_commit_pg(int32 subid);

// cdc._drop_at_commit(...): cdc.drop_subscription's drop of the
// subscription's replication origin `origin` and, when `slot` is not NULL,
// of its slot on the source (over `conninfo`, both as of the call), done
// when the calling transaction commits (slot_at_commit.cpp).  `origin_xmin`
// is the xmin of the origin's pg_replication_origin row
// (InvalidTransactionId: none): a subscription created in this very
// transaction has no slot of its own on the source.  PostgreSQL regime:
// call it through PgCall.  Errors 42501 not a superuser.
void drop_at_commit_pg(const char *name, const char *conninfo, const char *slot, const char *origin,
                       TransactionId origin_xmin);

// Refuses (22P02, naming conninfo) a conninfo libpq cannot parse
// (PQconninfoParse, as CREATE SUBSCRIPTION's walrcv_check_conninfo).
// PostgreSQL regime: call it through PgCall.
void check_conninfo_pg(text *conninfo_text);

// Pins what a database setting (ALTER DATABASE ... SET, which the
// database's owner may run without being a superuser) must not change in the
// launcher's and the workers' own sessions: default_transaction_read_only
// off, and the bootstrap superuser they connected as (session_authorization
// and role none; a database's session_authorization made its owner the
// session user, and the launcher failed reading cdc.subscription at once,
// again and again: security review h2, TAP 163).  With
// default_transaction_read_only = on every worker failed at its first
// statement and again writing its error record, and was restarted at once
// without backoff; with role set to the owner the launcher failed reading
// cdc.subscription every cdc.naptime: in
// both cases nothing was applied and the status row kept its last state
// (review h4, test/t/113_worker_read_only_database.pl).  PostgreSQL regime;
// call it right after connecting.
void cdc_pin_bgworker_session(void);

// The session settings the worker pins on every source connection, so that
// a value's text is unambiguous and exact whatever the source database or
// role sets (issue 12 item 1, B25; source_conn.cpp): DateStyle ISO,
// IntervalStyle postgres, extra_float_digits 3.  cdc.audit pins the same
// (src/pg/audit/source.cpp) and adds its own.
struct SourceSetting {
	const char *name;
	const char *value;
};
extern const SourceSetting cdc_source_settings[];
extern const int cdc_source_settings_count;
// The source's session timeouts, off (0) on every connection to a source
// unless the conninfo's own options set them (review h3, TAP 101): an
// initial copy keeps one transaction open, and a COPY statement active, for
// as long as the destination takes, which a statement_timeout or
// idle_in_transaction_session_timeout of the replication role or the
// source database cut short, for ever.  As pg_dump sets them.
extern const SourceSetting cdc_source_timeouts[];
extern const int cdc_source_timeouts_count;

// What the publications (`publications_sql`: their names as SQL literals,
// comma-separated) publish of one source table, read over `conn` as
// PostgreSQL 15's table synchronisation does (table_copy.cpp): relkind 'r'
// or 'p' (a partitioned root published through it), the columns (without
// generated ones, only those of the column list if there is one), the row
// filter (the publications' filters OR-ed; NULL when one of them has none).
// Allocated in the current memory context.  PostgreSQL regime: call it
// through PgCall.  Errors 42P01 no such table, 0A000 different column lists.
typedef struct TableScope {
	Oid relid; /* the source's pg_class OID */
	char relkind;
	int ncols;
	char **cols;
	char *filter;
	/*
	 * The stream can delete its rows: one of the publications publishes
	 * deletes, or updates with a row filter (pgoutput sends an update that
	 * leaves the filter as a delete).  Not with publish = 'insert' or
	 * 'insert, update' alone: a copy then deletes nothing (TAP 116).
	 */
	bool deletes_published;
} TableScope;
void read_table_scope(PGconn *conn, const char *publications_sql, const char *schema, const char *table,
                      TableScope *scope);

// cdc._publication_tables(conninfo text, publications text[]): the tables
// the publications publish, read over a connection with the worker's
// session settings, into the call's tuplestore (materialize mode).
// PostgreSQL regime: call it through PgCall.  Errors 08001 when the source
// cannot be reached, 42704 for a publication the source does not have.
void publication_tables_pg(FunctionCallInfo fcinfo);

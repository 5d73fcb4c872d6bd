// The connection to the source (libpq, replication=database): connecting
// and IDENTIFY_SYSTEM (the source id "pg:<system identifier>"), running a
// command with its SQLSTATE kept on failure (source_exec), standby status
// updates that report as flushed only what is durable here (send_feedback),
// the one-off connections of the slots cdc.drop_subscription drops and
// cdc.create_subscription creates at commit, and the conninfo check
// of cdc.create_subscription / cdc.alter_subscription (cdc._check_conninfo).
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames, and enters C++ only through RunCpp().
// libpq results are freed with PQclear/PQfreemem, never by C++.
#include "pg/guc.hpp"
#include "pg/worker/worker.hpp"
#include "pg/worker/worker_state.hpp"

extern "C" {
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
}

/* ------------------------------------------------------------------------
 * Talking to the source
 * ------------------------------------------------------------------------ */

PGresult *
source_exec(const char *sql, ExecStatusType expected)
{
	return conn_exec(W->conn, sql, expected);
}

/*
 * Waits on the latch and on the connection's socket for `events`
 * (WL_SOCKET_READABLE / WL_SOCKET_WRITEABLE) at most `timeout_ms` (-1: no
 * limit), handling interrupts meanwhile: a SIGTERM (cdc.drop_subscription,
 * a server shutdown) or a cancel ends the wait with the process's own
 * exit or error, as PostgreSQL's walreceiver waits (libpqwalreceiver.c).
 * Returns the WaitLatchOrSocket result.
 */
static int
wait_for_source(PGconn *conn, int events, long timeout_ms)
{
	int rc = WaitLatchOrSocket(MyLatch, WL_EXIT_ON_PM_DEATH | WL_LATCH_SET | events | (timeout_ms >= 0 ? WL_TIMEOUT : 0),
	                           PQsocket(conn), timeout_ms, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET) {
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return rc;
}

PGresult *
get_result_until(PGconn *conn, TimestampTz deadline, ResultWait *how)
{
	*how = RESULT_READY;
	while (PQisBusy(conn)) {
		long timeout_ms = -1;
		if (deadline != DT_NOEND) {
			timeout_ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			if (timeout_ms <= 0) {
				*how = RESULT_TIMEOUT;
				return NULL;
			}
		}
		(void) wait_for_source(conn, WL_SOCKET_READABLE, timeout_ms);
		if (PQconsumeInput(conn) == 0) {
			*how = RESULT_BROKEN;
			return NULL; /* PQerrorMessage says why */
		}
	}
	return PQgetResult(conn);
}

PGresult *
exec_interruptible(PGconn *conn, const char *sql)
{
	/*
	 * The results of the command before (the end of a COPY) are read to the
	 * end first, as PQexec does: PQsendQuery refuses to start while any is
	 * pending ("another command is already in progress").
	 */
	ResultWait how = RESULT_READY;
	for (PGresult *r; (r = get_result_until(conn, DT_NOEND, &how)) != NULL;) {
		ExecStatusType st = PQresultStatus(r);
		PQclear(r);
		if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH)
			return NULL; /* a copy not ended by its reader: a bug of ours, not something to wait for */
	}
	if (how != RESULT_READY || !PQsendQuery(conn, sql))
		return NULL;
	PGresult *last = NULL;
	for (;;) {
		PGresult *res = get_result_until(conn, DT_NOEND, &how);
		if (how != RESULT_READY) {
			PQclear(last);
			return NULL;
		}
		if (res == NULL)
			break;
		ExecStatusType st = PQresultStatus(res);
		if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
			PQclear(last);
			return res; /* the caller reads or writes the copy data */
		}
		PQclear(last);
		last = res;
		if (PQstatus(conn) == CONNECTION_BAD)
			break;
	}
	return last;
}

int
get_copy_data_interruptible(PGconn *conn, char **buf)
{
	for (;;) {
		int len = PQgetCopyData(conn, buf, /* async */ 1);
		if (len != 0)
			return len;
		(void) wait_for_source(conn, WL_SOCKET_READABLE, -1);
		if (PQconsumeInput(conn) == 0)
			return -2;
	}
}

int
source_sqlstate(const PGresult *res, int fallback)
{
	const char *s = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	if (s == NULL || strlen(s) != 5)
		return fallback;
	return MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
}

/* Runs a command on a source connection; an error keeps the source's SQLSTATE. */
PGresult *
conn_exec(PGconn *conn, const char *sql, ExecStatusType expected)
{
	PGresult *res = exec_interruptible(conn, sql);
	if (PQresultStatus(res) != expected) {
		char *msg = pstrdup(res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(conn));
		int code = source_sqlstate(res, ERRCODE_CONNECTION_FAILURE);
		PQclear(res);
		ereport(ERROR, (errcode(code), errmsg("cdc_apply: the source failed \"%s\": %s", sql, msg)));
	}
	return res;
}

/*
 * The session settings that make the text of every value unambiguous and
 * exact, whatever the source database or role is configured to (issue 12,
 * item 1; scenario B25): the options PostgreSQL's own subscriber sends
 * (libpqrcv_connect), and pg_dump's.  client_encoding is the destination
 * database's encoding, so the source converts every value (and fails with
 * its own clear error for a character the destination cannot hold, never
 * substituting it).  pinned_options is cdc_source_settings as -c switches.
 */
const SourceSetting cdc_source_settings[] = {{"DateStyle", "ISO"}, {"IntervalStyle", "postgres"}, {"extra_float_digits", "3"}};
const int cdc_source_settings_count = 3;
static const char pinned_options[] = "-c datestyle=ISO -c intervalstyle=postgres -c extra_float_digits=3";

/*
 * Timeouts of the source's sessions that would end the worker's long but
 * legitimate waits: a COPY active on the source for as long as the
 * destination takes to apply what it sends, the copy's one transaction held
 * open across all tables (idle while the destination applies or commits),
 * a connection idle between commands while the destination works.  A
 * statement_timeout of the replication role or the source database made
 * every copy of a table bigger than it fail and start over, without end
 * (review h3, TAP 101).  They come before the conninfo's own options, which
 * may set them (a later -c wins); the pinned value settings come last.
 */
const SourceSetting cdc_source_timeouts[] = {{"statement_timeout", "0"},
                                             {"lock_timeout", "0"},
                                             {"idle_in_transaction_session_timeout", "0"},
                                             {"idle_session_timeout", "0"}};
const int cdc_source_timeouts_count = 4;

/*
 * Opens a libpq connection to a source with the pinned settings:
 * `conninfo` as the user wrote it (its own options come first, ours after
 * them, so ours win), `replication` adds replication=database.  The
 * search_path of the session is emptied, as PostgreSQL's subscriber does,
 * so that the worker's own queries and the publications' row filters
 * (pg_get_expr qualifies what is not in pg_catalog) mean the same whatever
 * the source's search_path is.  Then the settings are checked: a connection
 * that did not get them (a pooler that drops startup options) would deliver
 * values that read differently here.  Returns NULL with *err set when the
 * connection fails; ereports 55000 when a setting did not take.
 */
PGconn *
connect_pinned(const char *conninfo, bool replication, const char *appname, char **err)
{
	const char *keys[10];
	const char *vals[10];
	int n = 0;
	char *user_options = NULL;

	/* the options of the conninfo, if it sets any (libpqrcv_get_option_from_conninfo) */
	PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
	if (opts != NULL) {
		for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
			if (strcmp(o->keyword, "options") == 0 && o->val != NULL && o->val[0] != '\0')
				user_options = pstrdup(o->val);
		PQconninfoFree(opts);
	}
	keys[n] = "dbname";
	vals[n++] = conninfo;
	if (replication) {
		keys[n] = "replication";
		vals[n++] = "database";
	}
	keys[n] = "application_name";
	vals[n++] = appname;
	keys[n] = "fallback_application_name";
	vals[n++] = "cdc_apply";
	keys[n] = "connect_timeout";
	vals[n++] = "10";
	/* test-only: a connection that does not get the settings, as through a pooler that drops them */
	if (!fault("source_settings_unpinned")) {
		keys[n] = "client_encoding";
		vals[n++] = GetDatabaseEncodingName();
		StringInfoData options;
		initStringInfo(&options);
		for (int i = 0; i < cdc_source_timeouts_count; i++)
			appendStringInfo(&options, "-c %s=%s ", cdc_source_timeouts[i].name, cdc_source_timeouts[i].value);
		if (user_options)
			appendStringInfo(&options, "%s ", user_options);
		appendStringInfoString(&options, pinned_options);
		keys[n] = "options";
		vals[n++] = options.data;
	}
	keys[n] = NULL;
	vals[n] = NULL;
	/*
	 * Connected without blocking, so that a SIGTERM or a cancel can end the
	 * wait (libpqwalreceiver.c, libpqrcv_connect); the 10 s the worker gives
	 * a connection attempt are counted here, as PQconnectPoll does not.
	 */
	PGconn *conn = PQconnectStartParams(keys, vals, /* expand_dbname */ 1);
	PostgresPollingStatusType status = PQstatus(conn) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;
	TimestampTz give_up = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 10 * 1000);
	while (status != PGRES_POLLING_OK && status != PGRES_POLLING_FAILED) {
		long left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), give_up);
		int io = status == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
		int rc = left > 0 ? wait_for_source(conn, io, left) : WL_TIMEOUT;
		if (rc & io)
			status = PQconnectPoll(conn);
		else if (rc & WL_TIMEOUT) {
			*err = pstrdup("timeout expired (10 s)");
			PQfinish(conn);
			return NULL;
		}
	}
	if (PQstatus(conn) != CONNECTION_OK) {
		*err = pstrdup(PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	PGresult *res = exec_interruptible(conn, "SELECT pg_catalog.set_config('search_path', '', false), "
	                             "pg_catalog.current_setting('DateStyle'), pg_catalog.current_setting('IntervalStyle'), "
	                             "pg_catalog.current_setting('extra_float_digits'), pg_catalog.current_setting('client_encoding')");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		*err = psprintf("could not set up the session: %s", res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(conn));
		PQclear(res);
		PQfinish(conn);
		return NULL;
	}
	struct {
		const char *name, *want, *got;
		bool ok;
	} check[] = {
		/* ISO is the output format; the order part (MDY, DMY) only concerns input */
		{"DateStyle", "ISO", PQgetvalue(res, 0, 1), strncmp(PQgetvalue(res, 0, 1), "ISO", 3) == 0},
		{"IntervalStyle", "postgres", PQgetvalue(res, 0, 2), strcmp(PQgetvalue(res, 0, 2), "postgres") == 0},
		{"extra_float_digits", "3", PQgetvalue(res, 0, 3), strcmp(PQgetvalue(res, 0, 3), "3") == 0},
		{"client_encoding", GetDatabaseEncodingName(), PQgetvalue(res, 0, 4),
		 strcmp(PQgetvalue(res, 0, 4), GetDatabaseEncodingName()) == 0},
	};
	for (const auto &c : check) {
		if (c.ok)
			continue;
		char *name = pstrdup(c.name), *want = pstrdup(c.want), *got = pstrdup(c.got);
		PQclear(res);
		PQfinish(conn);
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("cdc_apply: the source session runs with %s = \"%s\", not %s", name, got, want),
		                errdetail("Values would arrive in a text form the destination reads differently, or rounded."),
		                errhint("The worker sets %s in the connection's startup options (options, client_encoding); something "
		                        "between it and the source, such as a connection pooler, dropped them.", name)));
	}
	PQclear(res);
	return conn;
}

void
connect_source(void)
{
	char *err = NULL;
	PGconn *conn = connect_pinned(W->conninfo, true, psprintf("cdc_apply_%s", W->name), &err);
	if (conn == NULL)
		ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
		                errmsg("cdc_apply: could not connect to the source of subscription \"%s\": %s", W->name, err)));
	/* the session's search_path is empty (connect_pinned): no statement on the source depends on the role's */
	W->conn = conn;
	PGresult *res = source_exec("IDENTIFY_SYSTEM", PGRES_TUPLES_OK);
	MemoryContext old = MemoryContextSwitchTo(CdcWorkerContext);
	W->source_id = psprintf("pg:%s", PQgetvalue(res, 0, 0));
	W->system_id = pstrdup(PQgetvalue(res, 0, 0));
	W->timeline = (uint32) strtoul(PQgetvalue(res, 0, 1), NULL, 10);
	W->source_wal_at_connect = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(PQgetvalue(res, 0, 2))));
	W->source_db = pstrdup(PQgetisnull(res, 0, 3) ? "" : PQgetvalue(res, 0, 3));
	MemoryContextSwitchTo(old);
	PQclear(res);
	/*
	 * The walsender's wal_sender_timeout, as this session has it (a role's or
	 * database's setting included): how often the worker must reply while it
	 * applies a long batch (keep_source_alive).  -1 when the source does not
	 * say (a replication connection that refuses SHOW): a conservative
	 * interval is assumed then.
	 */
	W->source_sender_timeout = -1;
	res = exec_interruptible(W->conn, "SHOW wal_sender_timeout");
	int ms;
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && PQnfields(res) == 1 &&
	    parse_int(PQgetvalue(res, 0, 0), &ms, GUC_UNIT_MS, NULL) && ms >= 0)
		W->source_sender_timeout = ms;
	PQclear(res);
}

/*
 * Reports as flushed the source transactions whose local commit is durable
 * (W->flushes whose local end the local WAL has flushed).
 */
static void
advance_reported_flush(void)
{
	XLogRecPtr flushed = GetFlushRecPtr(NULL);
	int keep = 0;

	/* report as flushed only source transactions whose local commit is durable */
	for (int i = 0; i < W->nflushes; i++) {
		if (W->flushes[i].local_end <= flushed) {
			if (W->flushes[i].remote_end > W->reported_flush)
				W->reported_flush = W->flushes[i].remote_end;
		} else {
			W->flushes[keep++] = W->flushes[i];
		}
	}
	W->nflushes = keep;
}

/*
 * One standby status update: write = what was received, flush = apply =
 * what is durable here (W->reported_flush).  The walsender counts any
 * message from us as a reply (walsender.c, ProcessRepliesIfAny:
 * last_reply_timestamp), so each one also restarts its wal_sender_timeout.
 */
static void
send_status_message(TimestampTz now, bool request_reply)
{
	StringInfoData buf;
	initStringInfo(&buf);
	pq_sendbyte(&buf, 'r');
	pq_sendint64(&buf, W->received > W->reported_flush ? W->received : W->reported_flush); /* write: received */
	pq_sendint64(&buf, W->reported_flush);                                                  /* flush */
	pq_sendint64(&buf, W->reported_flush);                                                  /* apply */
	pq_sendint64(&buf, now);
	pq_sendbyte(&buf, request_reply ? 1 : 0);
	if (PQputCopyData(W->conn, buf.data, buf.len) <= 0 || PQflush(W->conn))
		ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
		                errmsg("cdc_apply: could not send feedback to the source: %s", PQerrorMessage(W->conn))));
	pfree(buf.data);
	W->last_reply_sent = now;
}

void
send_feedback(bool force, bool request_reply)
{
	TimestampTz now = GetCurrentTimestamp();

	advance_reported_flush();
	if (!force && !TimestampDifferenceExceeds(W->last_status, now, cdc_status_interval))
		return;

	if (W->nflushes == 0 && !W->in_xact && !W->group_open && !W->in_stream) {
		/*
		 * Nothing of ours is waiting for a local flush and no source
		 * transaction or group is open: everything received so far is either applied
		 * and durable or carried no change for us.  Reporting it lets the
		 * source release WAL and lets its shutdown complete (its walsenders
		 * wait for the subscriber to confirm the end of WAL), as PostgreSQL's
		 * own apply worker does.  Unlike it, the position is recorded
		 * durably first (confirm_idle_position): the slot's confirmed
		 * position must never pass what this destination can prove it has,
		 * or a slot advanced by someone else could not be told from it
		 * (docs/worker.md, "Continuity").
		 */
		XLogRecPtr idle = Max(W->received, W->progress);
		if (idle > W->reported_flush) {
			if (idle > W->progress && idle > W->confirmed_lsn)
				confirm_idle_position(idle);
			W->reported_flush = idle;
		}
	}

	send_status_message(now, request_reply);
}

/*
 * How often the worker replies while it applies (keep_source_alive):
 * cdc.status_interval, and at most a quarter of the source's
 * wal_sender_timeout, so that a change up to three quarters of the timeout
 * long still leaves the walsender a reply in time.  The source not saying
 * its timeout: at most every second.
 */
static long
keepalive_interval_ms(void)
{
	long ms = cdc_status_interval;
	if (W->source_sender_timeout > 0)
		ms = Min(ms, W->source_sender_timeout / 4);
	else if (W->source_sender_timeout < 0)
		ms = Min(ms, 1000);
	return Max(ms, 1);
}

/*
 * The apply engine's progress hook in the worker (SetApplyProgressHook,
 * pg/apply/engine.hpp): called per change the engine applies (and per row
 * of its direct writes).  While the stream is open, it sends a standby
 * status update every keepalive_interval_ms(), so that a batch that takes
 * longer than the source's wal_sender_timeout does not lose the connection
 * in the middle of a source transaction (applied again from its start, and
 * lost again, without end: review h3, TAP 112).
 *
 * The update reports what send_feedback reports, never more as flushed than
 * is durable here; in the middle of a batch the idle-stream position is
 * never confirmed (send_feedback does that only with no transaction or
 * group open).  Nothing is read from the connection: the source's data and
 * keepalives stay in the socket and libpq's buffer, in order, for the
 * stream loop, which answers the keepalives that ask for a reply when it
 * reads them; the walsender, while its socket is full, keeps reading our
 * replies (WalSndWriteData / ProcessPendingWrites) and checks its timeout
 * against the last of them.  Errors: 08006 when the update cannot be sent
 * (the batch fails like any lost connection).
 */
void
keep_source_alive(void)
{
	if (W == NULL || !W->streaming || W->conn == NULL)
		return;
	TimestampTz now = GetCurrentTimestamp();
	if (now < TimestampTzPlusMilliseconds(W->last_reply_sent, keepalive_interval_ms()))
		return;
	advance_reported_flush();
	send_status_message(now, false);
}

/*
 * The tables the publications (`publications_sql`: their names as SQL
 * literals, comma-separated) publish, as pgoutput names them: the leaf
 * partitions of a partitioned table, or its root with
 * publish_via_partition_root (pg_publication_tables, PostgreSQL 10 and
 * later), each with its pg_class OID, which pgoutput's RELATION message
 * carries and which a rename or SET SCHEMA keeps.  Sorted, each once.  A
 * publication the source does not have is an error (42704), as for
 * PostgreSQL's own subscriber: without it a typo would be a subscription
 * with no tables; with missing_ok, out->n = -1 and out->missing names it.
 * Arrays palloc'd in the current memory context.
 */
void
source_published_tables(PGconn *conn, const char *publications_sql, bool missing_ok, PublishedTables *out)
{
	memset(out, 0, sizeof(*out));
	PGresult *res = conn_exec(conn,
	                          psprintf("SELECT p.name FROM pg_catalog.unnest(ARRAY[%s]::pg_catalog.text[]) AS p(name) "
	                                   "WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication x WHERE x.pubname OPERATOR(pg_catalog.=) p.name)",
	                                   publications_sql),
	                          PGRES_TUPLES_OK);
	if (PQntuples(res) > 0) {
		char *missing = pstrdup(PQgetvalue(res, 0, 0));
		PQclear(res);
		if (missing_ok) {
			out->n = -1;
			out->missing = missing;
			return;
		}
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("cdc_apply: publication \"%s\" does not exist on the source", missing)));
	}
	PQclear(res);
	res = conn_exec(conn,
	                psprintf("SELECT DISTINCT t.schemaname::pg_catalog.text, t.tablename::pg_catalog.text, c.oid "
	                         "FROM pg_catalog.pg_publication_tables t "
	                         "JOIN pg_catalog.pg_namespace n ON n.nspname OPERATOR(pg_catalog.=) t.schemaname "
	                         "JOIN pg_catalog.pg_class c ON c.relnamespace OPERATOR(pg_catalog.=) n.oid "
	                         "AND c.relname OPERATOR(pg_catalog.=) t.tablename "
	                         "WHERE t.pubname OPERATOR(pg_catalog.=) ANY (ARRAY[%s]::pg_catalog.name[]) "
	                         "ORDER BY 1, 2",
	                         publications_sql),
	                PGRES_TUPLES_OK);
	int n = PQntuples(res);
	out->n = n;
	out->schemas = (char **) palloc(sizeof(char *) * (n + 1));
	out->tables = (char **) palloc(sizeof(char *) * (n + 1));
	out->relids = (Oid *) palloc(sizeof(Oid) * (n + 1));
	for (int i = 0; i < n; i++) {
		out->schemas[i] = pstrdup(PQgetvalue(res, i, 0));
		out->tables[i] = pstrdup(PQgetvalue(res, i, 1));
		out->relids[i] = (Oid) strtoul(PQgetvalue(res, i, 2), NULL, 10);
	}
	PQclear(res);
}

/*
 * cdc._publication_tables(conninfo, publications): the same list for
 * cdc.refresh_subscription and cdc.resync_table, over a connection of its
 * own (not a replication connection) with the worker's settings.  Fills
 * the call's tuplestore (materialize mode).  Errors: 08001 when the source
 * cannot be reached, 42704 for a publication the source does not have, the
 * source's error otherwise.
 */
void
publication_tables_pg(FunctionCallInfo fcinfo)
{
	char *conninfo = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ArrayType *pubs = PG_GETARG_ARRAYTYPE_P(1);
	Datum *elems;
	bool *nulls;
	int npubs;
	deconstruct_array(pubs, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &npubs);
	StringInfoData list;
	initStringInfo(&list);
	for (int i = 0; i < npubs; i++) {
		if (nulls[i])
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("a publication name is NULL")));
		appendStringInfo(&list, "%s%s", i ? ", " : "", quote_literal_cstr(TextDatumGetCString(elems[i])));
	}
	if (npubs == 0)
		appendStringInfoString(&list, "NULL");

	InitMaterializedSRF(fcinfo, 0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char *err = NULL;
	PGconn *volatile conn = connect_pinned(conninfo, false, "cdc_apply", &err);
	if (conn == NULL)
		ereport(ERROR, (errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
		                errmsg("could not connect to the source: %s", err)));
	PG_TRY();
	{
		PublishedTables pub;
		source_published_tables(conn, list.data, false, &pub);
		for (int i = 0; i < pub.n; i++) {
			Datum values[2] = {CStringGetTextDatum(pub.schemas[i]), CStringGetTextDatum(pub.tables[i])};
			bool isnull[2] = {false, false};
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
		}
	}
	PG_FINALLY();
	{
		PQfinish(conn);
	}
	PG_END_TRY();
}

/* ------------------------------------------------------------------------
 * cdc._check_conninfo(conninfo text)
 * ------------------------------------------------------------------------ */

/*
 * Refuses a conninfo that libpq cannot parse, as CREATE SUBSCRIPTION does
 * (walrcv_check_conninfo -> PQconninfoParse), before it is stored: libpq's
 * connect functions would take a bare word for a database name
 * (expand_dbname), so a typo would only show when the worker connects to the
 * wrong database.  PQconninfoParse takes key=value strings and URIs, never
 * a bare word.  Errors: 22P02 naming the parameter, with libpq's reason;
 * 22023 for a conninfo that sets no parameter (empty, blank, a bare
 * "postgresql://").
 */
void
check_conninfo_pg(text *conninfo_text)
{
	char *conninfo = text_to_cstring(conninfo_text);
	char *err = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &err);
	if (opts == NULL) {
		char *msg = err ? pstrdup(err) : pstrdup("out of memory");
		if (err)
			PQfreemem(err);
		size_t len = strlen(msg);
		while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
			msg[--len] = '\0';
		ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
		                errmsg("invalid conninfo: %s", msg),
		                errhint("conninfo is a libpq connection string (host=... dbname=...) or URI (postgresql://...).")));
	}
	bool sets_any = false;
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
		sets_any = sets_any || (o->val != NULL && o->val[0] != '\0');
	PQconninfoFree(opts);
	/*
	 * An empty conninfo (or "postgresql://") parses, and libpq would then
	 * connect with its defaults: this server's socket, the OS user's name as
	 * role and database.  A source named by nothing is a mistake, not a
	 * choice: refused, as "conninfo ... required" says.
	 */
	if (!sets_any)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("conninfo sets no connection parameter"),
		                errhint("Name the source, e.g. 'host=... dbname=...'; for libpq's defaults name one of them "
		                        "(e.g. 'dbname=postgres').")));
}

/*
 * A one-off replication connection (replication=database) to the source, for
 * an action on a slot outside the worker: the conninfo expanded as dbname
 * (key=value or URI, as the worker's connect_pinned), our options after it
 * so they win; appending them to the text would break a URI.  08001 when the
 * source cannot be reached; `what` names the action in the message.
 */
static PGconn *
connect_for_slot(text *conninfo_text, const char *what, const char *slot)
{
	const char *keys[] = {"dbname", "replication", "connect_timeout", "fallback_application_name", NULL};
	const char *vals[] = {text_to_cstring(conninfo_text), "database", "10", "cdc_apply", NULL};
	PGconn *conn = PQconnectdbParams(keys, vals, /* expand_dbname */ 1);
	if (PQstatus(conn) != CONNECTION_OK) {
		char *msg = pstrdup(PQerrorMessage(conn));
		PQfinish(conn);
		ereport(ERROR, (errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
		                errmsg("could not connect to the source to %s slot \"%s\": %s", what, slot, msg)));
	}
	return conn;
}

/*
 * On an interrupt of a replication command (an ERROR about to be re-thrown):
 * cancels the command on the source, so that its walsender stops waiting
 * instead of finishing the command for nobody, then closes the connection.
 * A walsender waiting in CREATE_REPLICATION_SLOT or DROP_REPLICATION_SLOT
 * ... WAIT does not notice a closed connection until the wait ends.
 */
static void
cancel_and_finish(PGconn *conn)
{
	char errbuf[256];
	PGcancel *cancel = PQgetCancel(conn);
	if (cancel != NULL) {
		(void) PQcancel(cancel, errbuf, sizeof(errbuf));
		PQfreeCancel(cancel);
	}
	PQfinish(conn);
}

/*
 * Runs a replication command (CREATE_REPLICATION_SLOT, DROP_REPLICATION_SLOT
 * ... WAIT) whose source side may wait, interruptibly (a cancel,
 * statement_timeout, a terminate): on an interrupt the command is cancelled
 * on the source and the connection closed before the ERROR goes on.  Returns
 * as exec_interruptible.
 */
static PGresult *
exec_replication_command(PGconn *conn, const char *sql)
{
	PGresult *volatile res = NULL;
	PG_TRY();
	{
		res = exec_interruptible(conn, sql);
	}
	PG_CATCH();
	{
		cancel_and_finish(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return res;
}

/* ------------------------------------------------------------------------
 * The slot of cdc.create_subscription(copy_data => false), created at the
 * creating transaction's pre-commit (slot_at_commit.cpp), with the tables
 * its publications published at its consistent point
 * ------------------------------------------------------------------------ */

/*
 * What the publications published at the snapshot `snapshot` the slot
 * exported: read on a connection of its own (the worker's session
 * settings), whose REPEATABLE READ transaction imports it, so that the
 * slot's connection stays idle (the snapshot lives until its next command,
 * and an abort drops the slot over it).
 */
static void
tables_at_slot_snapshot(text *conninfo_text, const char *slot, const char *snapshot, const char *publications_sql,
                        PublishedTables *published)
{
	char *err = NULL;
	PGconn *volatile conn = connect_pinned(text_to_cstring(conninfo_text), false, "cdc_apply", &err);
	if (conn == NULL)
		ereport(ERROR, (errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
		                errmsg("could not connect to the source to read the tables of slot \"%s\": %s", slot, err)));
	PG_TRY();
	{
		PQclear(conn_exec(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", PGRES_COMMAND_OK));
		PQclear(conn_exec(conn, psprintf("SET TRANSACTION SNAPSHOT %s", quote_literal_cstr(snapshot)), PGRES_COMMAND_OK));
		source_published_tables(conn, publications_sql, true, published);
		PQclear(conn_exec(conn, "COMMIT", PGRES_COMMAND_OK));
	}
	PG_FINALLY();
	{
		PQfinish(conn);
	}
	PG_END_TRY();
}

XLogRecPtr
create_source_slot_pg(text *conninfo_text, const char *slot, const char *publications_sql, PGconn **keep,
                      PublishedTables *published)
{
	PGconn *conn = connect_for_slot(conninfo_text, "create", slot);
	const char *sql = psprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'export')", quote_identifier(slot));
	/*
	 * The source waits for its running transactions before the slot exists:
	 * on an interrupt its walsender drops the not yet persistent slot
	 * instead of finishing it for nobody (review h2, TAP 082).
	 */
	PGresult *res = exec_replication_command(conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) < 3 || PQgetisnull(res, 0, 2)) {
		int code = source_sqlstate(res, ERRCODE_CONNECTION_FAILURE);
		char *msg = pstrdup(res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
		PQclear(res);
		PQfinish(conn);
		ereport(ERROR, (errcode(code), errmsg("could not create slot \"%s\" on the source: %s", slot, msg),
		                code == ERRCODE_DUPLICATE_OBJECT
		                    ? errhint("Give the subscription another slot_name, or drop the slot on the source if nobody uses it.")
		                    : 0));
	}
	XLogRecPtr cp = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(PQgetvalue(res, 0, 1))));
	char *snapshot = pstrdup(PQgetvalue(res, 0, 2));
	PQclear(res);
	*keep = conn; /* the caller drops the slot over it if its transaction aborts, and closes it */
	/*
	 * The tables as the slot's stream starts: their names and OIDs at the
	 * consistent point, so that a table renamed on the source afterwards,
	 * even before any change of it was applied, is recognised by its OID
	 * (docs/worker.md, "The subscription's tables"; TAP 100).  Read now,
	 * the names would be those after such a rename.
	 */
	tables_at_slot_snapshot(conninfo_text, slot, snapshot, publications_sql, published);
	return cp;
}

/* ------------------------------------------------------------------------
 * The slot of cdc.drop_subscription(drop_slot => true), dropped at the
 * dropping transaction's pre-commit (slot_at_commit.cpp)
 * ------------------------------------------------------------------------ */

PGconn *
connect_for_slot_drop_pg(text *conninfo_text, const char *slot)
{
	return connect_for_slot(conninfo_text, "drop", slot);
}

bool
drop_source_slot_pg(PGconn *conn, const char *slot)
{
	const char *sql = psprintf("DROP_REPLICATION_SLOT %s WAIT", quote_identifier(slot));
	/*
	 * WAIT waits while another process (a worker not yet gone, a client)
	 * holds the slot: a cancel or statement_timeout ends the COMMIT and the
	 * command on the source.  Closing the connection alone was not enough:
	 * the walsender dropped the slot once it was free, under a subscription
	 * whose drop had rolled back (TAP 084).
	 */
	PGresult *res = exec_replication_command(conn, sql);
	if (PQresultStatus(res) == PGRES_COMMAND_OK) {
		PQclear(res);
		PQfinish(conn);
		return true;
	}
	int code = source_sqlstate(res, ERRCODE_CONNECTION_FAILURE);
	char *msg = pstrdup(res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(conn));
	PQclear(res);
	PQfinish(conn);
	if (code == ERRCODE_UNDEFINED_OBJECT) {
		/* never created (the worker had not started), or already gone: nothing holds WAL */
		ereport(NOTICE, (errmsg("slot \"%s\" does not exist on the source, skipping", slot)));
		return false;
	}
	ereport(ERROR, (errcode(code == ERRCODE_CONNECTION_FAILURE ? code : ERRCODE_OBJECT_IN_USE),
	                errmsg("could not drop slot \"%s\" on the source: %s", slot, msg)));
	return false; /* not reached */
}

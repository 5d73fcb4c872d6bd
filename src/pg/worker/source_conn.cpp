// The connection to the source (libpq, replication=database): connecting
// and IDENTIFY_SYSTEM (the source id "pg:<system identifier>"), running a
// command with its SQLSTATE kept on failure (source_exec), standby status
// updates that report as flushed only what is durable here (send_feedback),
// and the one-off connection of cdc._drop_source_slot.
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames, and enters C++ only through RunCpp().
// libpq results are freed with PQclear/PQfreemem, never by C++.
#include "pg/guc.hpp"
#include "pg/worker/worker.hpp"
#include "pg/worker/worker_state.hpp"

extern "C" {
#include "access/xlog.h"
#include "libpq/pqformat.h"
#include "utils/builtins.h"
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
	PGresult *res = PQexec(W->conn, sql);
	if (PQresultStatus(res) != expected) {
		char *msg = pstrdup(PQresultErrorMessage(res));
		char *sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		int code = sqlstate && strlen(sqlstate) == 5
		               ? MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2], sqlstate[3], sqlstate[4])
		               : ERRCODE_CONNECTION_FAILURE;
		PQclear(res);
		ereport(ERROR, (errcode(code), errmsg("cdc_apply: the source failed \"%s\": %s", sql, msg)));
	}
	return res;
}

void
connect_source(void)
{
	char *conninfo = psprintf("%s replication=database application_name=cdc_apply_%s connect_timeout=10 fallback_application_name=cdc_apply",
	                          W->conninfo, W->name);
	PGconn *conn = PQconnectdb(conninfo);
	if (PQstatus(conn) != CONNECTION_OK) {
		char *msg = pstrdup(PQerrorMessage(conn));
		PQfinish(conn);
		ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
		                errmsg("cdc_apply: could not connect to the source of subscription \"%s\": %s", W->name, msg)));
	}
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
}

void
send_feedback(bool force, bool request_reply)
{
	TimestampTz now = GetCurrentTimestamp();
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
}

/* ------------------------------------------------------------------------
 * cdc._drop_source_slot(conninfo text, slot_name name)
 * ------------------------------------------------------------------------ */

void
drop_source_slot_pg(text *conninfo_text, Name slot_name)
{
	char *conninfo = psprintf("%s replication=database connect_timeout=10", text_to_cstring(conninfo_text));
	char *slot = NameStr(*slot_name);
	PGconn *conn = PQconnectdb(conninfo);
	if (PQstatus(conn) != CONNECTION_OK) {
		char *msg = pstrdup(PQerrorMessage(conn));
		PQfinish(conn);
		ereport(ERROR, (errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
		                errmsg("could not connect to the source to drop slot \"%s\": %s", slot, msg)));
	}
	PGresult *res = PQexec(conn, psprintf("DROP_REPLICATION_SLOT %s WAIT", quote_identifier(slot)));
	const char *sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (PQresultStatus(res) != PGRES_COMMAND_OK && sqlstate != NULL && strcmp(sqlstate, "42704") == 0) {
		/* never created (the worker had not started), or already gone: nothing holds WAL */
		PQclear(res);
		PQfinish(conn);
		ereport(NOTICE, (errmsg("slot \"%s\" does not exist on the source, skipping", slot)));
		return;
	}
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		char *msg = pstrdup(PQresultErrorMessage(res));
		PQclear(res);
		PQfinish(conn);
		ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE), errmsg("could not drop slot \"%s\" on the source: %s", slot, msg)));
	}
	PQclear(res);
	PQfinish(conn);
}

// Continuity of the stream and durable control transitions (issue 12 items
// 5 and 6; docs/worker.md, "Continuity" and "Control state is durable").
//
// On every connection, before START_REPLICATION, verify_continuity() proves
// that the slot continues exactly after this destination's progress: it is
// the slot whose identity was recorded when it was created (the source's
// system identifier and timeline), it is a pgoutput slot whose WAL is not
// lost, and its confirmed_flush_lsn is at or below our durable progress (the
// replication origin's, or the position confirmed while idle).  Otherwise
// the worker stops with an error that says what it found and what to do, or
// — when the operator asked for it with cdc.accept_gap — continues from the
// slot it finds (a new one when there is none) and records the gap.  It
// never creates a slot on its own once the subscription has progress.
//
// commit_control_transition() commits a control transition and flushes its
// commit record before the worker acts on it: the worker's transactions are
// asynchronous (cdc.synchronous_commit), and a crash must not take back a
// state the worker or the source already acted on.
//
// PostgreSQL-regime code: no C++ objects with destructors in these frames.
#include "pg/guc.hpp"
#include "pg/shared_stats.hpp"
#include "pg/worker/worker_state.hpp"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "catalog/pg_replication_origin.h"
#include "executor/spi.h"
#include "replication/origin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

static XLogRecPtr
parse_lsn(const char *text)
{
	return DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(text)));
}

/* See worker_state.hpp: flushes the WAL inserted so far, backed up out of an unwritten page header. */
void
flush_inserted_wal(void)
{
	XLogRecPtr upto = GetXLogInsertRecPtr();
	if (XLogSegmentOffset(upto, wal_segment_size) == SizeOfXLogLongPHD)
		upto -= SizeOfXLogLongPHD; /* the first page of a segment has the long header */
	else if (upto % XLOG_BLCKSZ == SizeOfXLogShortPHD)
		upto -= SizeOfXLogShortPHD;
	XLogFlush(upto);
}

/* Commits the current transaction and flushes its commit record (a control transition). */
void
commit_control_transition(void)
{
	run_commit_time_code_as_owner(); /* an initial copy's deferred triggers (progress.cpp) */
	CommitTransactionCommand();
	XLogFlush(XactLastCommitEnd);
}

/* Starts a transaction of the worker's own with SPI connected and a snapshot. */
static void
begin_own_xact(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
}

static void
end_own_xact_durable(void)
{
	SPI_finish();
	PopActiveSnapshot();
	commit_control_transition();
}

/*
 * Records the identity of the slot the worker streams from (inside the
 * caller's transaction: the one that marks a new slot ready, or accepts a
 * gap): the source's system identifier and timeline on this connection and
 * `start_lsn` (the consistent point of a new slot, or where the stream goes
 * on).  The idle confirmation of an earlier slot no longer counts.
 */
void
record_slot_identity(XLogRecPtr start_lsn)
{
	const char *args[4] = {psprintf("%d", W->subid), W->system_id, psprintf("%u", W->timeline), lsn_text(start_lsn)};
	spi_exec("UPDATE cdc.subscription SET slot_system_id = $2, slot_timeline = $3::pg_catalog.int4, "
	         "slot_created_lsn = $4::pg_catalog.pg_lsn WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4",
	         4, args);
	spi_exec("UPDATE cdc.subscription_state SET confirmed_lsn = NULL WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4",
	         1, args);
	MemoryContext old = MemoryContextSwitchTo(CdcWorkerContext);
	W->slot_system_id = pstrdup(W->system_id);
	MemoryContextSwitchTo(old);
	W->slot_timeline = W->timeline;
	W->confirmed_lsn = InvalidXLogRecPtr;
}

/*
 * The idle stream confirms `lsn` (WAL that carried nothing for this
 * subscription) to the source: record it durably first, so that a slot
 * whose confirmed_flush_lsn is above the replication origin's progress can
 * still be told from a slot advanced by someone else.  Called outside any
 * transaction.
 */
void
confirm_idle_position(XLogRecPtr lsn)
{
	const char *args[2] = {psprintf("%d", W->subid), lsn_text(lsn)};
	begin_own_xact();
	spi_exec("UPDATE cdc.subscription_state SET confirmed_lsn = $2::pg_catalog.pg_lsn "
	         "WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4",
	         2, args);
	end_own_xact_durable();
	W->confirmed_lsn = lsn;
}

/* The subscription streams again: clear last_error and retry_count (once). */
void
mark_healthy(void)
{
	if (W->healthy)
		return;
	W->healthy = true;
	W->retry_count = 0;
	/* errors that could not be recorded are no longer in a row (status.cpp's backoff) */
	(void) cdc::pg::WorkerUnrecordedErrors(W->subid, false);
	const char *args[1] = {psprintf("%d", W->subid)};
	exec_in_own_xact("UPDATE cdc.subscription_state SET retry_count = 0, last_error = NULL, last_error_lsn = NULL, "
	                 "updated_at = pg_catalog.now() WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4 "
	                 "AND (retry_count OPERATOR(pg_catalog.<>) 0 OR last_error IS NOT NULL)",
	                 1, args);
}

/* Moves the replication origin to `lsn`, also backwards (an accepted gap after a failover). */
static void
move_origin(XLogRecPtr lsn)
{
	/* replorigin_advance refuses an origin this session holds: release it meanwhile */
	replorigin_session_reset();
	replorigin_session_origin = InvalidRepOriginId;
	StartTransactionCommand();
	LockRelationOid(ReplicationOriginRelationId, RowExclusiveLock);
	replorigin_advance(W->origin, lsn, InvalidXLogRecPtr, true /* go backward */, true /* WAL-log */);
	commit_control_transition();
	flush_inserted_wal();
	StartTransactionCommand();
	replorigin_session_setup(W->origin);
	replorigin_session_origin = W->origin;
	CommitTransactionCommand();
}

/*
 * Acts on a pending cdc.accept_gap request: continues from `to` (the slot's
 * confirmed position, or the consistent point of the slot just created),
 * records the slot's identity and the gap in cdc.accepted_gaps, and moves
 * the replication origin there; durable before streaming starts.
 */
static void
accept_gap(XLogRecPtr to, const char *problem)
{
	XLogRecPtr from = W->progress;
	const char *args[5] = {psprintf("%d", W->subid), psprintf(INT64_FORMAT, W->gap_request), lsn_text(from), lsn_text(to),
	                       problem};
	if (to < from)
		move_origin(to); /* first: a crash before the record below only repeats the error */
	begin_own_xact();
	spi_exec("UPDATE cdc.accepted_gaps SET from_lsn = $3::pg_catalog.pg_lsn, to_lsn = $4::pg_catalog.pg_lsn, detail = $5, "
	         "accepted_at = pg_catalog.now() "
	         "WHERE id OPERATOR(pg_catalog.=) $2::pg_catalog.int8 AND subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4",
	         5, args);
	record_slot_identity(to);
	SPI_finish();
	PopActiveSnapshot();
	/* forwards, the origin moves with the record in one commit */
	commit_with_progress(to >= from ? to : InvalidXLogRecPtr, GetCurrentTimestamp());
	XLogFlush(XactLastCommitEnd);
	ereport(WARNING, (errmsg("cdc_apply subscription \"%s\": accepted a gap in the stream from %X/%X to %X/%X as requested",
	                         W->name, CDC_LSN_ARGS(from), CDC_LSN_ARGS(to)),
	                  errdetail("%s", problem),
	                  errhint("Source transactions committed in between may be missing; re-copy the affected tables "
	                          "(cdc.resync_table).")));
	W->progress = to;
	W->reported_flush = InvalidXLogRecPtr;
	W->gap_request = 0;
	fault_pause("accept_gap");
}

/* Closes a pending request when the stream is continuous: nothing is skipped. */
static void
close_needless_request(void)
{
	const char *args[3] = {psprintf("%d", W->subid), psprintf(INT64_FORMAT, W->gap_request), lsn_text(W->progress)};
	begin_own_xact();
	spi_exec("UPDATE cdc.accepted_gaps SET from_lsn = $3::pg_catalog.pg_lsn, to_lsn = $3::pg_catalog.pg_lsn, "
	         "detail = 'the stream was continuous: nothing skipped', accepted_at = pg_catalog.now() "
	         "WHERE id OPERATOR(pg_catalog.=) $2::pg_catalog.int8 AND subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4",
	         3, args);
	end_own_xact_durable();
	W->gap_request = 0;
}

void
verify_continuity(void)
{
	char *slot_lit = PQescapeLiteral(W->conn, W->slot_name, strlen(W->slot_name));
	PGresult *res = source_exec(psprintf("SELECT plugin, database, confirmed_flush_lsn, wal_status FROM pg_catalog.pg_replication_slots "
	                                     "WHERE slot_name OPERATOR(pg_catalog.=) %s AND slot_type OPERATOR(pg_catalog.=) 'logical'",
	                                     slot_lit),
	                            PGRES_TUPLES_OK);
	PQfreemem(slot_lit);
	bool exists = PQntuples(res) == 1;
	char *plugin = exists ? pstrdup(PQgetvalue(res, 0, 0)) : NULL;
	char *database = exists ? pstrdup(PQgetvalue(res, 0, 1)) : NULL;
	XLogRecPtr confirmed = exists && !PQgetisnull(res, 0, 2) ? parse_lsn(PQgetvalue(res, 0, 2)) : InvalidXLogRecPtr;
	char *wal_status = exists && !PQgetisnull(res, 0, 3) ? pstrdup(PQgetvalue(res, 0, 3)) : pstrdup("");
	PQclear(res);

	XLogRecPtr ours = Max(W->progress, W->confirmed_lsn);
	const char *problem = NULL;
	bool acceptable = true;
	if (!exists)
		problem = psprintf("slot \"%s\" does not exist on the source: it was dropped, or the source failed over to a standby "
		                   "(PostgreSQL 15 copies no logical slot to standbys)",
		                   W->slot_name);
	else if (W->slot_system_id != NULL && strcmp(W->slot_system_id, W->system_id) != 0) {
		problem = psprintf("the source is another cluster: system identifier %s, the slot \"%s\" was created on %s",
		                   W->system_id, W->slot_name, W->slot_system_id);
		acceptable = false;
	} else if (W->slot_system_id != NULL && W->slot_timeline != W->timeline)
		problem = psprintf("the source is on timeline %u, the slot \"%s\" was created on timeline %u: the source failed over "
		                   "to a standby, which has no copy of the slot (PostgreSQL 15), so this slot was created there later",
		                   W->timeline, W->slot_name, W->slot_timeline);
	else if (strcmp(plugin, "pgoutput") != 0 || strcmp(database, W->source_db) != 0) {
		problem = psprintf("slot \"%s\" on the source is not a pgoutput slot of database \"%s\" (plugin %s, database %s)",
		                   W->slot_name, W->source_db, plugin, database);
		acceptable = false;
	} else if (strcmp(wal_status, "lost") == 0)
		problem = psprintf("slot \"%s\" on the source has lost WAL it needs (wal_status lost: max_slot_wal_keep_size)",
		                   W->slot_name);
	else if (W->progress != InvalidXLogRecPtr && confirmed > ours)
		problem = psprintf("the slot's confirmed position %X/%X is past this subscription's progress %X/%X: slot \"%s\" was "
		                   "created again or advanced by hand (pg_replication_slot_advance), or this destination lost commits "
		                   "it had confirmed (restored from a backup)",
		                   CDC_LSN_ARGS(confirmed), CDC_LSN_ARGS(ours), W->slot_name);

	if (problem == NULL) {
		if (W->slot_system_id == NULL) {
			/* a slot the worker did not create (create_slot => false), first used: record its identity */
			begin_own_xact();
			record_slot_identity(confirmed);
			end_own_xact_durable();
		}
		if (W->gap_request != 0)
			close_needless_request();
		return;
	}
	if (W->gap_request != 0 && acceptable) {
		XLogRecPtr to = confirmed;
		bool lost = exists && strcmp(wal_status, "lost") == 0;
		if (lost) {
			/*
			 * An invalidated slot can never be read again (START_REPLICATION
			 * fails with "This slot has been invalidated"): accepting the gap
			 * at its confirmed position would record an acceptance and fail
			 * at once, forever.  Replace it by a new slot, as for a missing one.
			 */
			PQclear(source_exec(psprintf("DROP_REPLICATION_SLOT %s WAIT", quote_identifier(W->slot_name)), PGRES_COMMAND_OK));
		}
		if (!exists || lost) {
			/* the one case the worker creates a slot with progress: the operator accepted the gap */
			res = source_exec(psprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'nothing')",
			                           quote_identifier(W->slot_name)),
			                  PGRES_TUPLES_OK);
			to = parse_lsn(PQgetvalue(res, 0, 1));
			PQclear(res);
		}
		accept_gap(to, problem);
		return;
	}
	if (!acceptable)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("cdc_apply subscription \"%s\": %s", W->name, problem),
		                errdetail("Nothing is applied from it: it is not the stream this subscription's progress %X/%X belongs to.",
		                          CDC_LSN_ARGS(W->progress)),
		                errhint("Point the subscription back at its source (cdc.alter_subscription(conninfo => ...)), or create a "
		                        "new subscription for this one; cdc.accept_gap does not apply.")));
	ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	                errmsg("cdc_apply subscription \"%s\": %s", W->name, problem),
	                errdetail("Continuity after this subscription's progress %X/%X cannot be proven: committed source "
	                          "transactions may be missing from the stream. The worker stops instead of skipping them, and "
	                          "never creates a slot once the subscription has progress.",
	                          CDC_LSN_ARGS(W->progress)),
	                errhint("To continue anyway, accept the gap: SELECT cdc.accept_gap('%s', '<reason>'); the worker then "
	                        "continues from the slot it finds (or a new slot) and records the gap in cdc.accepted_gaps. "
	                        "Re-copy the affected tables to repair what it misses (docs/worker.md, \"Continuity\").",
	                        W->name)));
}

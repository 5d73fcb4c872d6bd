// The apply worker's main (SPEC §7, docs/worker.md; the counterpart of the
// main loop of PostgreSQL's worker.c): it consumes one subscription's
// logical replication slot over the replication protocol (pgoutput) and
// applies every source transaction through the same ApplyEngine as
// cdc_apply(), with the replication origin's progress committed in the same
// local transaction.  Here: subscription and origin set-up, the
// connect/stream loop with its waits and feedback, the error path with the
// one-by-one retry of a failed group, the test-only fault points, and the
// definition of W and the memory contexts; the other steps are in the files
// worker_state.hpp lists.
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames.  The C++ engine is entered through RunCpp(),
// which turns exceptions into ERRORs after its catch block.
#include "pg/guc.hpp"
#include "pg/shared_stats.hpp"
#include "pg/worker/registry.hpp"
#include "pg/worker/worker_state.hpp"

#include <malloc.h>

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/origin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

extern "C" {
PGDLLEXPORT void cdc_apply_worker_main(Datum arg);
}

WorkerState *W = NULL;
MemoryContext CdcWorkerContext = NULL;
MemoryContext CdcMessageContext = NULL;
MemoryContext CdcStreamContext = NULL; /* the open chunk's file handle; reset at STREAM STOP */

bool
fault(const char *point)
{
	return cdc_debug_fault && strcmp(cdc_debug_fault, point) == 0;
}

/* Fault point after_change:N — true when `nchanges` (changes applied in the open local transaction) is N. */
bool
fault_after_change(int nchanges)
{
	static const char prefix[] = "after_change:";
	if (cdc_debug_fault == NULL || strncmp(cdc_debug_fault, prefix, sizeof(prefix) - 1) != 0)
		return false;
	return atoi(cdc_debug_fault + sizeof(prefix) - 1) == nchanges;
}

/*
 * Fault point pause_after:<transition> (tests of durable control state,
 * test/t/040_worker_control_durability.pl): right after the transition
 * (copy_done, skip, commit, accept_gap; origin: the replication origin set
 * up at start, before the status row names the worker; slot_created: the
 * source created the slot, its consistent point is not recorded yet) has committed, the worker logs it and
 * waits until it is terminated, so the test can crash the server exactly
 * there.
 */
void
fault_pause(const char *transition)
{
	static const char prefix[] = "pause_after:";
	if (cdc_debug_fault == NULL || strncmp(cdc_debug_fault, prefix, sizeof(prefix) - 1) != 0 ||
	    strcmp(cdc_debug_fault + sizeof(prefix) - 1, transition) != 0)
		return;
	ereport(LOG, (errmsg("cdc_apply: fault point pause_after:%s reached, pausing", transition)));
	pgstat_report_activity(STATE_IDLE, "paused at a fault point");
	for (;;) {
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

static void
worker_error_context(void *arg)
{
	if (W == NULL)
		return;
	/*
	 * cur_rel is set while the current change is handled (its target
	 * resolved, its images built, queued) and cleared before any queue is
	 * applied (Submit, GuardKeyOutsideIdentity, flush_queue): an error
	 * with cur_rel set is the current change's, even when the queue spans
	 * earlier source transactions of the group (TAP 066).
	 */
	if (W->in_xact && W->cur_rel != NULL)
		errcontext("cdc_apply subscription \"%s\": source transaction %u committed at %X/%X, table %s.%s", W->name,
		           W->xid, CDC_LSN_ARGS(W->final_lsn), W->cur_rel->nspname, W->cur_rel->relname);
	else if (W->in_xact && W->queue_spans)
		errcontext("cdc_apply subscription \"%s\": source transaction %u committed at %X/%X or one of the %d before it "
		           "in this local transaction (the delivery key names the change)",
		           W->name, W->xid, CDC_LSN_ARGS(W->final_lsn), W->group_xacts);
	else if (W->in_xact)
		errcontext("cdc_apply subscription \"%s\": source transaction %u committed at %X/%X%s%s", W->name, W->xid,
		           CDC_LSN_ARGS(W->final_lsn), W->cur_table[0] ? ", table " : "", W->cur_table);
	else if (W->cur_table[0] != '\0')
		/* the initial copy of a table (table_copy.cpp): one local transaction, no source transaction */
		errcontext("cdc_apply subscription \"%s\": initial copy of table %s", W->name, W->cur_table);
	else if (W->committing_group && W->group_xacts == 1)
		errcontext("cdc_apply subscription \"%s\": source transaction %u committed at %X/%X, at its local commit", W->name,
		           W->group_last_xid, CDC_LSN_ARGS(W->group_last_final));
	else if (W->committing_group)
		errcontext("cdc_apply subscription \"%s\": local commit of %d source transactions, the last committed at %X/%X",
		           W->name, W->group_xacts, CDC_LSN_ARGS(W->group_last_final));
	else
		errcontext("cdc_apply subscription \"%s\"", W->name);
}

static void
load_subscription(int subid)
{
	MemoryContext old;
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	const char *args[1] = {psprintf("%d", subid)};
	spi_exec("SELECT name, conninfo, slot_name, "
	         "  (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(p), ',') FROM pg_catalog.unnest(publications) p), "
	         "  (SELECT pg_catalog.string_agg(pg_catalog.quote_literal(p), ',') FROM pg_catalog.unnest(publications) p), "
	         "  create_slot, copy_data, slot_ready, source_epoch, skip_lsn::pg_catalog.text, "
	         "  (SELECT retry_count FROM cdc.subscription_state st WHERE st.subid OPERATOR(pg_catalog.=) s.subid), "
	         "  owner::pg_catalog.oid, run_as_owner, origin, refresh_pending, "
	         "  slot_system_id, slot_timeline, "
	         "  (SELECT confirmed_lsn::pg_catalog.text FROM cdc.subscription_state st "
	         "    WHERE st.subid OPERATOR(pg_catalog.=) s.subid), "
	         "  (SELECT pg_catalog.max(g.id) FROM cdc.accepted_gaps g "
	         "    WHERE g.subid OPERATOR(pg_catalog.=) s.subid AND g.accepted_at IS NULL), "
	         "  count_positions_until::pg_catalog.text "
	         "FROM cdc.subscription s WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND enabled "
	         /* a row locked by cdc.drop_subscription() reads as gone: the drop owns the slot now */
	         "FOR SHARE SKIP LOCKED",
	         1, args);
	if (SPI_processed != 1) {
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		ereport(LOG, (errmsg("cdc_apply worker: subscription %d is gone or disabled; exiting", subid)));
		proc_exit(0);
	}
	old = MemoryContextSwitchTo(CdcWorkerContext);
	HeapTuple tup = SPI_tuptable->vals[0];
	TupleDesc desc = SPI_tuptable->tupdesc;
	W->subid = subid;
	W->name = SPI_getvalue(tup, desc, 1);
	W->conninfo = SPI_getvalue(tup, desc, 2);
	W->slot_name = SPI_getvalue(tup, desc, 3);
	W->publications = SPI_getvalue(tup, desc, 4);
	W->publications_sql = SPI_getvalue(tup, desc, 5);
	W->create_slot = strcmp(SPI_getvalue(tup, desc, 6), "t") == 0;
	W->copy_data = strcmp(SPI_getvalue(tup, desc, 7), "t") == 0;
	W->slot_ready = strcmp(SPI_getvalue(tup, desc, 8), "t") == 0 || !W->create_slot;
	W->epoch = pg_strtoint64(SPI_getvalue(tup, desc, 9));
	char *skip = SPI_getvalue(tup, desc, 10);
	W->skip_lsn = skip ? DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(skip))) : InvalidXLogRecPtr;
	char *retries = SPI_getvalue(tup, desc, 11);
	W->retry_count = retries ? atoi(retries) : 0;
	W->owner = (Oid) strtoul(SPI_getvalue(tup, desc, 12), NULL, 10);
	W->run_as_owner = strcmp(SPI_getvalue(tup, desc, 13), "t") == 0;
	W->origin_none = strcmp(SPI_getvalue(tup, desc, 14), "none") == 0;
	W->refresh_pending = strcmp(SPI_getvalue(tup, desc, 15), "t") == 0;
	W->slot_system_id = SPI_getvalue(tup, desc, 16);
	char *tli = SPI_getvalue(tup, desc, 17);
	W->slot_timeline = tli ? (uint32) strtoul(tli, NULL, 10) : 0;
	char *confirmed = SPI_getvalue(tup, desc, 18);
	W->confirmed_lsn = confirmed ? DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(confirmed))) : InvalidXLogRecPtr;
	char *request = SPI_getvalue(tup, desc, 19);
	W->gap_request = request ? pg_strtoint64(request) : 0;
	char *count_until = SPI_getvalue(tup, desc, 20);
	W->count_positions_until =
	    count_until ? DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(count_until))) : InvalidXLogRecPtr;
	MemoryContextSwitchTo(old);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	/*
	 * The worker acts on this control state (a skip, an accepted gap, the
	 * settings): make sure no crash can take it back.  The control
	 * functions commit synchronously; this covers a state committed any
	 * other way.
	 */
	flush_inserted_wal();
}

/* ------------------------------------------------------------------------
 * The apply worker
 * ------------------------------------------------------------------------ */

/*
 * Session settings of the worker: cdc.synchronous_commit for its local
 * transactions.  "off" (the default) is safe because feedback reports as
 * flushed only source transactions whose local commit record is durable
 * (send_feedback), as PostgreSQL's own apply worker does.
 */
static void
apply_session_settings(void)
{
	const char *value = "off";
	for (const struct config_enum_entry *e = cdc_synchronous_commit_options; e->name; e++)
		if (e->val == cdc_synchronous_commit) {
			value = e->name;
			break;
		}
	SetConfigOption("synchronous_commit", value, PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * The stream loop's wait: the latch, the source connection's socket and
 * postmaster death, in one wait event set made once per connection
 * (stream()) instead of per wait (WaitLatchOrSocket builds and frees one
 * each time: epoll_create, three epoll_ctl, close).  Kept in
 * CdcWorkerContext; the set of an earlier connection (left by an error) is
 * freed when the next one streams.
 */
static WaitEventSet *stream_wait_set = NULL;

static void
make_stream_wait_set(void)
{
	if (stream_wait_set != NULL) {
		FreeWaitEventSet(stream_wait_set);
		stream_wait_set = NULL; /* not left dangling if making the next one fails */
	}
	stream_wait_set = CreateWaitEventSet(CdcWorkerContext, 3);
	AddWaitEventToSet(stream_wait_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(stream_wait_set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(stream_wait_set, WL_SOCKET_READABLE, PQsocket(W->conn), NULL, NULL);
}

/* As WaitLatchOrSocket(latch | socket readable | timeout) on the set above: the WL_* bits that fired. */
static int
wait_stream(long timeout_ms)
{
	WaitEvent events[3];
	int n = WaitEventSetWait(stream_wait_set, timeout_ms, events, lengthof(events), PG_WAIT_EXTENSION);
	int rc = n == 0 ? WL_TIMEOUT : 0;
	for (int i = 0; i < n; i++)
		rc |= events[i].events;
	return rc;
}

static void
stream(void)
{
	/*
	 * Stream from the replication origin's progress, never from the slot's
	 * own position: the slot may have gone backwards (B16).  The test-only
	 * fault point request_from_slot asks from 0/0 (the slot decides) to
	 * exercise the guard against re-sent transactions in handle_begin().
	 */
	XLogRecPtr from = fault("request_from_slot") ? InvalidXLogRecPtr : W->progress;
	char *cmd = psprintf("START_REPLICATION SLOT %s LOGICAL %X/%X (proto_version '%d'%s, publication_names %s)",
	                     quote_identifier(W->slot_name), CDC_LSN_ARGS(from),
	                     cdc_streaming ? LOGICALREP_PROTO_STREAM_VERSION_NUM : LOGICALREP_PROTO_VERSION_NUM,
	                     cdc_streaming ? ", streaming 'on'" : "", quote_literal_cstr(W->publications));
	PQclear(source_exec(cmd, PGRES_COPY_BOTH));
	W->streaming = true; /* status updates may go out now, also from inside a batch (keep_source_alive) */
	W->last_reply_sent = GetCurrentTimestamp();
	make_stream_wait_set();
	/*
	 * The progress read at start is durable (flushed in
	 * cdc_apply_worker_main); after a reconnect within this process, commits
	 * not yet flushed are still in W->flushes and must not be reported here.
	 */
	if (W->reported_flush == InvalidXLogRecPtr)
		W->reported_flush = W->progress;
	/*
	 * What the previous connection received but did not apply (a group that
	 * failed and is now retried one by one) will be sent again: it must not
	 * count as received, or the idle-stream rule in send_feedback() would
	 * confirm it to the source before it is applied, and the source would
	 * never send it again.
	 */
	W->received = W->progress;
	W->keepalive_seen = false;
	write_status("streaming", false);
	ereport(LOG, (errmsg("cdc_apply subscription \"%s\": streaming from %X/%X", W->name, CDC_LSN_ARGS(W->progress))));

	for (;;) {
		char *buf = NULL;
		int len;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending) {
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			apply_session_settings();
		}
		/* per-message allocations; transaction work allocates in transaction contexts */
		MemoryContextSwitchTo(CdcMessageContext);
		MemoryContextReset(CdcMessageContext);

		len = PQgetCopyData(W->conn, &buf, 1);
		if (len == 0) {
			/*
			 * Nothing buffered: read what the socket holds before waiting for
			 * it, as PostgreSQL's walreceiver does (libpqrcv_receive).  While
			 * the worker catches up the socket nearly always holds more, and
			 * the read saves a wait (with WaitLatchOrSocket per wait, the
			 * waits were 8 % of the worker's CPU: docs/benchmarks.md,
			 * "Reading before waiting").
			 */
			if (PQconsumeInput(W->conn) == 0)
				ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
				                errmsg("cdc_apply: lost the connection to the source: %s", PQerrorMessage(W->conn))));
			len = PQgetCopyData(W->conn, &buf, 1);
			/*
			 * Between source transactions with a group open: the source has
			 * sent nothing more, so the group commits now rather than wait
			 * for more (grouping never adds latency to an idle stream).
			 */
			if (len == 0 && W->group_open && !W->in_xact)
				close_group();
		}
		if (len == 0) {
			/* nothing buffered: wait for the socket, the latch or the status interval */
			long timeout = cdc_status_interval;
			if (!W->in_xact && !W->in_stream) {
				/* ask for a keepalive too: its WAL end lets an idle stream confirm progress */
				send_feedback(false, true);
				/*
				 * Caught up: idle, and everything the source had written when
				 * this connection began was received (a keepalive says how
				 * far the source has decoded): the subscription streams again.
				 */
				if (!W->healthy && W->keepalive_seen && W->received >= W->source_wal_at_connect)
					mark_healthy();
				if (TimestampDifferenceExceeds(W->last_status, GetCurrentTimestamp(), cdc_status_interval))
					write_status("streaming", false);
				/*
				 * The next status is due cdc.status_interval after the last
				 * one, whatever wakes the loop meanwhile (a keepalive, a
				 * reload): wait only for what is left of it.
				 */
				long since = TimestampDifferenceMilliseconds(W->last_status, GetCurrentTimestamp());
				timeout = Max(cdc_status_interval - since, 1);
			}
			int rc = wait_stream(timeout);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if (PQconsumeInput(W->conn) == 0)
				ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
				                errmsg("cdc_apply: lost the connection to the source: %s", PQerrorMessage(W->conn))));
			continue;
		}
		if (len == -1) {
			/* the source's error, with its SQLSTATE (a character the destination encoding cannot hold: 22P05) */
			PGresult *res = PQgetResult(W->conn);
			int code = source_sqlstate(res, ERRCODE_CONNECTION_FAILURE);
			char *msg = pstrdup(res && PQresultErrorMessage(res)[0] ? PQresultErrorMessage(res) : "no error given");
			PQclear(res);
			/*
			 * A publication dropped and created again while the slot had
			 * changes to decode: the walsender looks the publication up in
			 * the catalog as it was at each change, so it fails on every
			 * retry, even after the re-creation, as for PostgreSQL's own
			 * subscriber (review h1, TAP 077 "recreated").
			 */
			bool publication_gone = code == ERRCODE_UNDEFINED_OBJECT && strstr(msg, "publication") != NULL;
			ereport(ERROR,
			        (errcode(code), errmsg("cdc_apply: the source ended the stream: %s", msg),
			         publication_gone
			             ? errhint("Changes the source made while a publication did not exist cannot be decoded. Disable "
			                       "the subscription, move its replication origin to the source's current WAL position "
			                       "(pg_replication_origin_advance(cdc._origin_name(subid), <pg_current_wal_lsn() of the "
			                       "source>)), enable it, and copy its tables again with cdc.resync_table.")
			             : 0));
		}
		if (len < 0)
			ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
			                errmsg("cdc_apply: could not read from the source: %s", PQerrorMessage(W->conn))));
		/* one pgoutput message is at most one change: cdc.max_event_size bounds it (docs/security.md) */
		if ((int64) len > (int64) cdc_max_event_size * 1024) {
			PQfreemem(buf);
			ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			                errmsg("cdc_apply: a change of %d bytes is more than cdc.max_event_size (%d kB)", len,
			                       cdc_max_event_size),
			                errhint("Raise cdc.max_event_size (a superuser, then reload), or skip the source "
			                        "transaction with cdc.skip_transaction().")));
		}

		StringInfoData s;
		s.data = (char *) palloc(len + 1);
		memcpy(s.data, buf, len);
		s.data[len] = '\0';
		s.len = len;
		s.maxlen = len + 1;
		s.cursor = 0;
		PQfreemem(buf);

		char kind = pq_getmsgbyte(&s);
		if (kind == 'w') {
			handle_xlogdata(&s);
		} else if (kind == 'k') {
			XLogRecPtr end = pq_getmsgint64(&s);
			(void) pq_getmsgint64(&s);
			bool reply = pq_getmsgbyte(&s);
			W->keepalive_seen = true;
			if (end > W->source_end)
				W->source_end = end;
			if (end > W->received)
				W->received = end;
			if (reply)
				send_feedback(true, false);
		}
		/*
		 * Between source transactions with no group open: status and
		 * feedback every cdc.status_interval also while the socket always
		 * holds more (a catch-up), not only when the loop is about to wait
		 * (test/t/062_worker_status_during_catch_up.pl).
		 */
		if (!W->in_xact && !W->in_stream && !W->group_open &&
		    TimestampDifferenceExceeds(W->last_status, GetCurrentTimestamp(), cdc_status_interval)) {
			send_feedback(false, false);
			write_status("streaming", false);
		}
	}
}

void
cdc_apply_worker_main(Datum arg)
{
	int subid = DatumGetInt32(arg);
	Oid dboid;
	ErrorContextCallback errcallback;

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	/*
	 * The worker slot its database launcher reserved (one of the
	 * cdc.max_workers of all databases, registry.hpp): attach to it before
	 * anything else, so that it is released whichever way this process
	 * exits.  A slot that is not ours any more (the reservation timed out)
	 * means another worker may run: exit.
	 */
	CdcWorkerStart start;
	memcpy(&start, MyBgworkerEntry->bgw_extra, sizeof(start));
	dboid = start.dboid;
	if (!registry_worker_attach(start.slot, start.generation, dboid, subid)) {
		ereport(LOG, (errmsg("cdc_apply worker: worker slot %d of subscription %d was given up; exiting", start.slot, subid)));
		proc_exit(0);
	}
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);

	CdcWorkerContext = AllocSetContextCreate(TopMemoryContext, "CdcWorkerContext", ALLOCSET_DEFAULT_SIZES);
	CdcMessageContext = AllocSetContextCreate(TopMemoryContext, "CdcMessageContext", ALLOCSET_DEFAULT_SIZES);
	CdcStreamContext = AllocSetContextCreate(TopMemoryContext, "CdcStreamContext", ALLOCSET_DEFAULT_SIZES);
	W = (WorkerState *) MemoryContextAllocZero(CdcWorkerContext, sizeof(WorkerState));
	W->name = psprintf("%d", subid);

	/* while the engine applies a batch, the source's walsender keeps hearing from us (TAP 112) */
	cdc::pg::SetApplyProgressHook(keep_source_alive);

	errcallback.callback = worker_error_context;
	errcallback.arg = NULL;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	/* the worker applies like PostgreSQL's own: triggers and rules of the target fire only when enabled ALWAYS/REPLICA */
	SetConfigOption("session_replication_role", "replica", PGC_SUSET, PGC_S_OVERRIDE);
	/*
	 * Every statement of this session resolves names in pg_catalog only,
	 * whatever a database or role setting says: code of the tables' owners
	 * must not capture a name through a schema they may create objects in
	 * (docs/security.md, "search_path").  The statements run as the
	 * subscription's or the tables' owners (ApplyEngine::Authorize).
	 */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	/*
	 * The settings that change how the columns' input functions read the
	 * source's text, at their defaults whatever a database or role setting
	 * of the destination says (docs/worker.md, "Values on the wire"): with
	 * array_nulls = off an array element NULL was read as the string
	 * "NULL" into a text[] (a silent difference) and refused in an int[]
	 * (the copy and the stream retried without end); with xmloption =
	 * document an xml value the source holds as content was refused
	 * (TAP 145).  As pg_dump's restore sets xmloption = content.
	 */
	SetConfigOption("array_nulls", "on", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("xmloption", "content", PGC_SUSET, PGC_S_OVERRIDE);
	/*
	 * And the ones that change the text of the outbox payloads (to_jsonb()
	 * of the written row, which prints ranges, intervals, bytea and floats
	 * with their output functions), at their defaults: extra_float_digits
	 * = 0 printed the applied 0.30000000000000004 as 0.3, IntervalStyle,
	 * bytea_output and DateStyle (a range's bounds) changed the payload's
	 * text with the database (TAP 145).  TimeZone is left to the database:
	 * a timestamptz's JSON text carries its offset.
	 */
	SetConfigOption("extra_float_digits", "1", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("IntervalStyle", "postgres", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("bytea_output", "hex", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("DateStyle", "ISO, MDY", PGC_SUSET, PGC_S_OVERRIDE);
	/*
	 * The worker writes, as the bootstrap superuser it connected as, whatever
	 * the database's settings say (default_transaction_read_only, role:
	 * worker.hpp).  PostgreSQL's own apply worker is
	 * not stopped by default_transaction_read_only either.
	 */
	cdc_pin_bgworker_session();
	apply_session_settings();
	/*
	 * The batch engine allocates and frees blocks of a few hundred kilobytes
	 * per queue (its vectors, SPI's results, array parameters): above glibc's
	 * default mmap threshold (128 kB) every one of them is a fresh mmap whose
	 * pages the kernel faults in and zeroes (8 % of the worker's time when
	 * measured).  Serving them from the heap, and keeping freed heap up to
	 * the threshold below instead of returning it at once, does not change
	 * the peak: what the worker holds is bounded by cdc.group_max_bytes
	 * (docs/worker.md, "Memory").
	 */
	mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);

	/*
	 * One pass per connection.  A pass ends with an error; the worker then
	 * records it, backs off and exits (the launcher restarts it) — except
	 * after a failed group that held more than the failing source
	 * transaction: then it reconnects at once and applies one source
	 * transaction per local commit up to the failing one, so that what
	 * fails again is exactly one source transaction (named in the error
	 * state, skippable on its own) and everything before it is committed.
	 */
	volatile bool started = false;
	for (;;) {
		volatile bool retry = false;
		PG_TRY();
		{
			if (!started) {
				load_subscription(subid);
				pgstat_report_appname(psprintf("cdc_apply %s", W->name));
				if (W->retry_count > 0)
					cdc::pg::WorkerCountRetry(subid, false); /* a start after a recorded error */

				HASHCTL ctl;
				memset(&ctl, 0, sizeof(ctl));
				ctl.keysize = sizeof(LogicalRepRelId);
				ctl.entrysize = sizeof(RelEntry);
				ctl.hcxt = CdcWorkerContext;
				W->relations = hash_create("cdc_apply relations", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

				/* replication origin: created with the subscription */
				StartTransactionCommand();
				/* cdc_<database oid>_<subid>: origins are cluster-wide (cdc._origin_name) */
				W->origin = replorigin_by_name(psprintf("cdc_%u_%d", MyDatabaseId, subid), false);
				W->setting_up_origin = true;
				replorigin_session_setup(W->origin);
				W->setting_up_origin = false;
				replorigin_session_origin = W->origin;
				/*
				 * Flush the local WAL up to the commit that set this progress:
				 * a previous worker may have committed it asynchronously
				 * (cdc.synchronous_commit = off) and stopped before it was
				 * flushed.  stream() reports the progress to the source as
				 * flushed; reporting a commit a crash can still lose would let
				 * the source release transactions we never keep (found by the
				 * worker torture suite, test/t/027_worker_async_commit.pl).
				 */
				W->progress = replorigin_session_get_progress(true);
				CommitTransactionCommand();
				/* the origin is ours, the status row does not name us yet (test/t/056_worker_drop_many.pl) */
				fault_pause("origin");

				write_status("starting", false);
				started = true;
			}
			connect_source();
			if (!W->slot_ready)
				prepare_slot();
			else
				verify_continuity(); /* before any copy: the stream the copies join must be the subscription's */
			/* tables added since (refresh, resync): copied at a temporary slot's snapshot, never through prepare_slot */
			sync_tables();
			load_table_states();
			stream();
		}
		PG_CATCH();
		{
			ErrorData *edata;
			MemoryContextSwitchTo(CdcWorkerContext);
			edata = CopyErrorData();
			EmitErrorReport();
			FlushErrorState();
			AbortOutOfAnyTransaction();
			/* a failed commit must not lend its progress to the error record's transaction */
			replorigin_session_origin_lsn = InvalidXLogRecPtr;
			replorigin_session_origin_timestamp = 0;
			if (W->setting_up_origin && edata->sqlerrcode == ERRCODE_OBJECT_IN_USE) {
				/* another worker of this subscription runs: it owns the stream */
				ereport(LOG, (errmsg("cdc_apply worker: subscription %d already has a worker; exiting", subid)));
				proc_exit(0);
			}
			W->streaming = false;
			if (W->conn) {
				PQfinish(W->conn);
				W->conn = NULL;
			}
			/* the engine of the aborted group holds only C++ copies: nothing of PostgreSQL to release */
			delete W->engine;
			W->engine = NULL;
			bool failed_in_group = W->one_by_one_until == InvalidXLogRecPtr &&
			                       ((W->in_xact && W->group_open && W->group_xacts > 0) ||
			                        (W->committing_group && W->group_xacts > 1));
			W->latency_n = 0; /* nothing of the aborted group committed */
			if (failed_in_group) {
				cdc::pg::WorkerCountRetry(subid, true);
				W->one_by_one_until = W->in_xact ? W->final_lsn : W->group_last_final;
				ereport(LOG, (errmsg("cdc_apply subscription \"%s\": a local transaction of %d source transactions failed; "
				                     "applying them one by one up to %X/%X",
				                     W->name, W->group_xacts + (W->in_xact ? 1 : 0), CDC_LSN_ARGS(W->one_by_one_until))));
				W->in_xact = false;
				W->group_open = false;
				W->committing_group = false;
				/* the chunk's file was closed with the aborted transaction; the source streams it again */
				W->in_stream = false;
				W->stream_file = NULL;
				MemoryContextReset(CdcStreamContext);
				W->already_applied = false;
				W->skipping = false;
				clear_cur_table();
				retry = true;
			} else {
				error_context_stack = NULL;
				record_error_and_exit(edata);
			}
		}
		PG_END_TRY();
		if (!retry)
			break;
	}
	proc_exit(0);
}

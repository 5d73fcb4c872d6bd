// The background-worker path (SPEC §7, docs/worker.md): a launcher that
// starts one apply worker per enabled subscription, and the apply worker
// that consumes a logical replication slot on a source PostgreSQL over the
// replication protocol (pgoutput, protocol version 1), decodes it with
// PostgreSQL's own readers (replication/logicalproto.h), and applies every
// source transaction through the same ApplyEngine as cdc_apply(), with the
// replication origin's progress committed in the same local transaction.
//
// This file is PostgreSQL-regime code (it may ereport): it owns no C++
// objects with destructors in its frames.  The C++ engine is entered through
// RunCpp(), which turns exceptions into ERRORs after its catch block.
#include "pg/apply/engine.hpp"
#include "pg/guard.hpp"
#include "pg/apply/horizon.hpp"
#include "pg/worker.hpp"

#include "core/copy_text.hpp"
#include "core/errors.hpp"
#include "core/version.hpp"

#include <string>

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/logicalproto.h"
#include "replication/origin.h"
#include "storage/buffile.h"
#include "storage/fileset.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

/* LSN_FORMAT_ARGS uses a C-only type check; the same for C++. */
#define CDC_LSN_ARGS(lsn) (uint32) ((lsn) >> 32), (uint32) (lsn)

/* ------------------------------------------------------------------------
 * Settings (docs/worker.md lists them with units)
 * ------------------------------------------------------------------------ */

static char *cdc_database = NULL;     /* cdc.database */
static int cdc_naptime = 5;           /* cdc.naptime, seconds */
static int cdc_max_workers = 4;       /* cdc.max_workers */
static int cdc_retry_backoff = 1000;  /* cdc.retry_backoff, ms: first retry delay, doubled per failure */
static int cdc_retry_backoff_max = 60; /* cdc.retry_backoff_max, seconds */
static int cdc_status_interval = 1000; /* cdc.status_interval, ms */
static char *cdc_debug_fault = NULL;  /* cdc.debug_fault: test-only fault point */
static int cdc_group_max_transactions = 1000; /* cdc.group_max_transactions: source transactions per local commit */
static int cdc_group_max_bytes = 16384;      /* cdc.group_max_bytes, kB of pgoutput messages per local commit */
static int cdc_group_max_delay = 200;        /* cdc.group_max_delay, ms a group stays open */
static int cdc_synchronous_commit = SYNCHRONOUS_COMMIT_OFF; /* cdc.synchronous_commit of the worker's transactions */
static bool cdc_streaming = false;           /* cdc.streaming: protocol version 2, in-progress transactions */
static int cdc_apply_batch_changes = 1000;   /* cdc.apply_batch_changes: changes applied set-based at once */

static const struct config_enum_entry cdc_synchronous_commit_options[] = {
	{"local", SYNCHRONOUS_COMMIT_LOCAL_FLUSH, false},
	{"remote_write", SYNCHRONOUS_COMMIT_REMOTE_WRITE, false},
	{"remote_apply", SYNCHRONOUS_COMMIT_REMOTE_APPLY, false},
	{"on", SYNCHRONOUS_COMMIT_REMOTE_FLUSH, false},
	{"off", SYNCHRONOUS_COMMIT_OFF, false},
	{NULL, 0, false}};

extern "C" {
PGDLLEXPORT void cdc_launcher_main(Datum arg);
PGDLLEXPORT void cdc_apply_worker_main(Datum arg);
}

void
cdc::pg::DefineWorkerSettings(bool preloaded)
{
	/* PGC_POSTMASTER settings can only be defined while the server starts */
	if (preloaded) {
		DefineCustomStringVariable("cdc.database", "Database whose cdc.subscription the launcher serves.", NULL,
		                           &cdc_database, "postgres", PGC_POSTMASTER, 0, NULL, NULL, NULL);
		DefineCustomIntVariable("cdc.max_workers", "Maximum number of apply workers the launcher runs.", NULL,
		                        &cdc_max_workers, 4, 1, 64, PGC_POSTMASTER, 0, NULL, NULL, NULL);
	}
	DefineCustomIntVariable("cdc.naptime", "How often the launcher looks for subscriptions to start or stop.", NULL,
	                        &cdc_naptime, 5, 1, 3600, PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.retry_backoff", "Delay before the first retry after a worker error; doubled per consecutive failure.",
	                        NULL, &cdc_retry_backoff, 1000, 10, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.retry_backoff_max", "Upper bound of the retry delay.", NULL, &cdc_retry_backoff_max,
	                        60, 1, 86400, PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.status_interval", "How often a worker writes cdc.subscription_state and sends standby status to the source.",
	                        NULL, &cdc_status_interval, 1000, 10, 60000, PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("cdc.debug_fault", "Test-only fault point of the apply worker (empty: none).",
	                           "before_commit: exit before the local commit of a source transaction; "
	                           "after_commit: exit after the local commit, before feedback to the source; "
	                           "after_change:N: exit after the N-th change applied in the open local transaction, uncommitted; "
	                           "request_from_slot: ask the source to stream from the slot's confirmed position "
	                           "instead of the replication origin's progress.",
	                           &cdc_debug_fault, "", PGC_SIGHUP, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.group_max_transactions",
	                        "Most source transactions the apply worker commits in one local transaction (1: no grouping).",
	                        "Consecutive source transactions that are already received are applied in one local "
	                        "transaction, committed with the replication origin's progress of the last one.",
	                        &cdc_group_max_transactions, 1000, 1, 1000000, PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.group_max_bytes", "Most pgoutput bytes the apply worker applies in one local transaction.",
	                        "A group is committed after the source transaction that reaches this size.",
	                        &cdc_group_max_bytes, 16384, 1, 1048576, PGC_SIGHUP, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.group_max_delay", "Longest time a group of source transactions stays open before its local commit.",
	                        "A group is committed after the source transaction that ends past this delay, and always as soon "
	                        "as the source has sent nothing more.",
	                        &cdc_group_max_delay, 200, 1, 60000, PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable("cdc.streaming",
	                         "Ask the source to stream large in-progress transactions (pgoutput protocol version 2).",
	                         "The worker spools the streamed changes to temporary files and applies them at the "
	                         "transaction's commit; aborted transactions and subtransactions are dropped. Takes effect "
	                         "when a worker starts.",
	                         &cdc_streaming, false, PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.apply_batch_changes",
	                        "Most changes the apply worker hands to the batch engine at once (1: change by change).",
	                        "The changes of the source transactions of a group (and the rows of an initial copy) are queued "
	                        "and applied set-based, with the same result as one by one, before the local commit or when "
	                        "the queue is full.",
	                        &cdc_apply_batch_changes, 1000, 1, 100000, PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("cdc.synchronous_commit", "synchronous_commit of the apply worker's local transactions.",
	                         "off is safe: the worker reports to the source as flushed only what is durable here.",
	                         &cdc_synchronous_commit, SYNCHRONOUS_COMMIT_OFF, cdc_synchronous_commit_options, PGC_SIGHUP, 0,
	                         NULL, NULL, NULL);
	MarkGUCPrefixReserved("cdc");

	if (!preloaded || IsBinaryUpgrade)
		return;

	BackgroundWorker bgw;
	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 5;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "cdc_apply");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "cdc_launcher_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "cdc_apply launcher");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "cdc_apply launcher");
	RegisterBackgroundWorker(&bgw);
}

/* ------------------------------------------------------------------------
 * Small SPI helpers for the worker's own transactions
 * ------------------------------------------------------------------------ */

/* Runs one statement with text parameters inside the current transaction. */
static int
spi_exec(const char *sql, int nargs, const char **args)
{
	Oid types[10];
	Datum values[10];
	char nulls[10];
	Assert(nargs <= 10);
	for (int i = 0; i < nargs; i++) {
		types[i] = TEXTOID;
		values[i] = args[i] ? CStringGetTextDatum(args[i]) : (Datum) 0;
		nulls[i] = args[i] ? ' ' : 'n';
	}
	int rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "cdc_apply worker: SPI failed (%s) for \"%s\"", SPI_result_code_string(rc), sql);
	return rc;
}

/* Runs one statement in a transaction of its own. */
static void
exec_in_own_xact(const char *sql, int nargs, const char **args)
{
	SetCurrentStatementStartTimestamp(); /* now() of this transaction */
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	spi_exec(sql, nargs, args);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

static const char *
lsn_text(XLogRecPtr lsn)
{
	return psprintf("%X/%X", CDC_LSN_ARGS(lsn));
}

/* ------------------------------------------------------------------------
 * Launcher
 * ------------------------------------------------------------------------ */

typedef struct LauncherSlot {
	int subid;
	BackgroundWorkerHandle *handle;
} LauncherSlot;

static void
start_apply_worker(LauncherSlot *slot, int subid)
{
	BackgroundWorker bgw;
	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART; /* the launcher restarts it */
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "cdc_apply");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "cdc_apply_worker_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "cdc_apply worker for subscription %d", subid);
	snprintf(bgw.bgw_type, BGW_MAXLEN, "cdc_apply worker");
	bgw.bgw_main_arg = Int32GetDatum(subid);
	memcpy(bgw.bgw_extra, &MyDatabaseId, sizeof(Oid));
	bgw.bgw_notify_pid = MyProcPid;
	/* the handle outlives the launcher's transaction: keep it in TopMemoryContext */
	if (slot->handle)
		pfree(slot->handle);
	slot->handle = NULL;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	bool ok = RegisterDynamicBackgroundWorker(&bgw, &slot->handle);
	MemoryContextSwitchTo(old);
	if (!ok) {
		ereport(WARNING, (errmsg("cdc_apply launcher: could not start a worker for subscription %d", subid),
		                  errhint("Raise max_worker_processes.")));
		slot->handle = NULL;
		return;
	}
	slot->subid = subid;
}

static bool
slot_running(LauncherSlot *slot)
{
	pid_t pid;
	if (slot->handle == NULL)
		return false;
	BgwHandleStatus st = GetBackgroundWorkerPid(slot->handle, &pid);
	return st == BGWH_STARTED || st == BGWH_NOT_YET_STARTED;
}

void
cdc_launcher_main(Datum arg)
{
	LauncherSlot *slots;

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(cdc_database, NULL, 0);
	pgstat_report_appname("cdc_apply launcher");

	slots = (LauncherSlot *) MemoryContextAllocZero(TopMemoryContext, sizeof(LauncherSlot) * cdc_max_workers);

	for (;;) {
		int nsubs = 0;
		int *subids = NULL;
		bool *enabled = NULL;
		bool *alive = NULL;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending) {
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		SPI_connect();
		pgstat_report_activity(STATE_RUNNING, "reading cdc.subscription");
		bool isnull = false;
		if (SPI_execute("SELECT to_regclass('cdc.subscription') IS NOT NULL", true, 1) == SPI_OK_SELECT &&
		    DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull))) {
			/*
			 * alive: a worker for the subscription runs although this launcher
			 * did not start it (a previous launcher did, before it restarted).
			 */
			if (SPI_execute("SELECT s.subid, s.enabled, EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a "
			                "  WHERE a.backend_type = 'cdc_apply worker' AND a.application_name = 'cdc_apply ' || s.name) "
			                "FROM cdc.subscription s ORDER BY s.subid",
			                true, 0) == SPI_OK_SELECT) {
				nsubs = (int) SPI_processed;
				subids = (int *) MemoryContextAlloc(TopTransactionContext, sizeof(int) * (nsubs + 1));
				enabled = (bool *) MemoryContextAlloc(TopTransactionContext, sizeof(bool) * (nsubs + 1));
				alive = (bool *) MemoryContextAlloc(TopTransactionContext, sizeof(bool) * (nsubs + 1));
				for (int i = 0; i < nsubs; i++) {
					bool isnull;
					subids[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
					enabled[i] = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
					alive[i] = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
				}
			}
		}

		/* stop workers of disabled or dropped subscriptions */
		for (int s = 0; s < cdc_max_workers; s++) {
			if (!slot_running(&slots[s]))
				continue;
			bool keep = false;
			for (int i = 0; i < nsubs; i++)
				if (subids[i] == slots[s].subid && enabled[i])
					keep = true;
			if (!keep)
				TerminateBackgroundWorker(slots[s].handle);
		}
		/* start workers of enabled subscriptions that have none */
		for (int i = 0; i < nsubs; i++) {
			if (!enabled[i])
				continue;
			bool running = false;
			int free_slot = -1;
			for (int s = 0; s < cdc_max_workers; s++) {
				if (slot_running(&slots[s])) {
					if (slots[s].subid == subids[i])
						running = true;
				} else if (free_slot < 0) {
					free_slot = s;
				}
			}
			if (!running && alive[i])
				continue; /* started by an earlier launcher; the worker itself guards its origin */
			if (!running && free_slot >= 0)
				start_apply_worker(&slots[free_slot], subids[i]);
			else if (!running)
				ereport(LOG, (errmsg("cdc_apply launcher: cdc.max_workers (%d) reached; subscription %d waits",
				                     cdc_max_workers, subids[i])));
		}
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_activity(STATE_IDLE, NULL);
		cdc::pg::LauncherPruneIfDue(); /* the replay horizon's schedule (pg/horizon.hpp) */

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, cdc_naptime * 1000L,
		                 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* ------------------------------------------------------------------------
 * Apply worker state
 * ------------------------------------------------------------------------ */

typedef struct RelEntry {
	LogicalRepRelId remoteid; /* hash key */
	LogicalRepRelation *rel;  /* copied into CdcWorkerContext */
} RelEntry;

typedef struct FlushPosition {
	XLogRecPtr local_end;
	XLogRecPtr remote_end;
} FlushPosition;

typedef struct WorkerState {
	int subid;
	char *name;
	char *conninfo;
	char *slot_name;
	char *publications; /* "\"a\",\"b\"" for START_REPLICATION */
	char *publications_sql; /* 'a','b' for SQL */
	bool create_slot;
	bool copy_data;
	bool slot_ready;
	int64 epoch;
	XLogRecPtr skip_lsn;
	int retry_count;

	RepOriginId origin;
	bool setting_up_origin;
	PGconn *conn;
	char *source_id; /* "pg:<system identifier>" */
	char *source_db;
	HTAB *relations;

	XLogRecPtr progress;      /* origin progress: end LSN of the last applied source transaction */
	XLogRecPtr received;      /* highest LSN received */
	XLogRecPtr source_end;    /* source WAL end from the last message */
	XLogRecPtr reported_flush;
	FlushPosition *flushes;   /* commits not yet known to be flushed locally */
	int nflushes;
	int maxflushes;
	TimestampTz last_status;
	TimestampTz last_commit_time;

	/* the source transaction being applied */
	bool in_xact;
	bool skipping;        /* explicit operator skip */
	bool already_applied; /* commit before our progress: replayed by the source (B16) */
	XLogRecPtr final_lsn;
	TransactionId xid;
	TimestampTz committime;
	int seq;
	XLogRecPtr change_lsn;
	int64 replays_discarded; /* source transactions re-sent below our progress since the last one applied */
	char cur_table[2 * NAMEDATALEN + 2]; /* for error context; "" when none */
	cdc::pg::ApplyEngine *engine;

	/*
	 * The group: the local transaction that holds the source transactions
	 * applied since the last local commit (docs/worker.md, "Grouping").
	 */
	bool group_open;
	int group_xacts;              /* source transactions completed in it */
	int group_changes;            /* changes applied in it (fault point after_change:N) */
	int64 group_bytes;            /* pgoutput bytes received for it */
	TimestampTz group_start;
	XLogRecPtr group_end_lsn;     /* end LSN of its last completed source transaction */
	XLogRecPtr group_last_final;  /* commit LSN of that transaction */
	TransactionId group_last_xid; /* and its xid */
	bool queue_spans;             /* the engine's queue holds changes of an earlier source transaction of the group */
	int batch_limit;              /* cdc.apply_batch_changes as it was when the local transaction began */
	TimestampTz group_commit_time;
	bool committing_group;        /* inside its local commit (error attribution) */
	XLogRecPtr one_by_one_until;  /* after a failed group: one local commit per source transaction up to this commit LSN */
	/*
	 * In-progress transactions the source streams (protocol version 2,
	 * cdc.streaming): their changes are spooled to one temporary file per
	 * transaction and applied when STREAM COMMIT arrives.
	 */
	FileSet *stream_fileset;
	HTAB *streams;                /* TransactionId -> StreamXact */
	bool in_stream;               /* between STREAM START and STREAM STOP */
	TransactionId stream_xid;     /* the transaction of the open chunk */
	BufFile *stream_file;         /* its spool file while the chunk is open */
	int64 stat_xacts;             /* source transactions applied, not yet added to cdc.subscription_state */
	int64 stat_commits;           /* local commits of them, likewise */
} WorkerState;

/* Where a subtransaction's first streamed change starts in the spool file. */
typedef struct StreamSubxact {
	TransactionId xid;
	int fileno;
	off_t offset;
} StreamSubxact;

/* A transaction the source streams while it is in progress. */
typedef struct StreamXact {
	TransactionId xid; /* hash key */
	int nsubxacts;
	int maxsubxacts;
	StreamSubxact *subxacts; /* in CdcWorkerContext, in the order they were first seen */
} StreamXact;

static WorkerState *W = NULL;
static MemoryContext CdcWorkerContext = NULL;
static MemoryContext CdcMessageContext = NULL;
static MemoryContext CdcStreamContext = NULL; /* the open chunk's file handle; reset at STREAM STOP */

static void
worker_error_context(void *arg)
{
	if (W == NULL)
		return;
	if (W->in_xact && W->queue_spans)
		errcontext("cdc_apply subscription \"%s\": source transaction %u committed at %X/%X or one of the %d before it "
		           "in this local transaction (the delivery key names the change)",
		           W->name, W->xid, CDC_LSN_ARGS(W->final_lsn), W->group_xacts);
	else if (W->in_xact)
		errcontext("cdc_apply subscription \"%s\": source transaction %u committed at %X/%X%s%s", W->name, W->xid,
		           CDC_LSN_ARGS(W->final_lsn), W->cur_table[0] ? ", table " : "", W->cur_table);
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
	         "  (SELECT string_agg(quote_ident(p), ',') FROM unnest(publications) p), "
	         "  (SELECT string_agg(quote_literal(p), ',') FROM unnest(publications) p), "
	         "  create_slot, copy_data, slot_ready, source_epoch, skip_lsn::text, "
	         "  (SELECT retry_count FROM cdc.subscription_state st WHERE st.subid = s.subid) "
	         "FROM cdc.subscription s WHERE subid = $1::int AND enabled "
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
	MemoryContextSwitchTo(old);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* Writes the worker's view of its progress (received, flushed, lag, pid). */
static void
write_status(const char *state, bool reset_retries)
{
	const char *args[10] = {psprintf("%d", W->subid),
	                        state,
	                        W->received ? lsn_text(W->received) : NULL,
	                        W->reported_flush ? lsn_text(W->reported_flush) : NULL,
	                        W->source_end ? lsn_text(W->source_end) : NULL,
	                        W->last_commit_time ? timestamptz_to_str(W->last_commit_time) : NULL,
	                        psprintf("%d", MyProcPid),
	                        reset_retries ? "t" : "f",
	                        psprintf(INT64_FORMAT, W->stat_xacts),
	                        psprintf(INT64_FORMAT, W->stat_commits)};
	exec_in_own_xact("UPDATE cdc.subscription_state SET state = $2, received_lsn = $3::pg_lsn, "
	                 "flushed_lsn = $4::pg_lsn, source_end_lsn = $5::pg_lsn, last_commit_at = $6::timestamptz, "
	                 "last_msg_at = now(), worker_pid = $7::int, "
	                 "retry_count = CASE WHEN $8::bool THEN 0 ELSE retry_count END, "
	                 "applied_xacts = applied_xacts + $9::bigint, apply_commits = apply_commits + $10::bigint, "
	                 "updated_at = now() "
	                 "WHERE subid = $1::int",
	                 10, args);
	W->stat_xacts = 0;
	W->stat_commits = 0;
	W->last_status = GetCurrentTimestamp();
}

/* ------------------------------------------------------------------------
 * Talking to the source
 * ------------------------------------------------------------------------ */

static PGresult *
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

static void
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
	W->source_db = pstrdup(PQgetisnull(res, 0, 3) ? "" : PQgetvalue(res, 0, 3));
	MemoryContextSwitchTo(old);
	PQclear(res);
}

static void
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
	if (W->nflushes == 0 && !W->in_xact && !W->group_open && !W->in_stream) {
		/*
		 * Nothing of ours is waiting for a local flush and no source
		 * transaction or group is open: everything received so far is either applied
		 * and durable or carried no change for us.  Reporting it lets the
		 * source release WAL and lets its shutdown complete (its walsenders
		 * wait for the subscriber to confirm the end of WAL), as PostgreSQL's
		 * own apply worker does.
		 */
		if (W->received > W->reported_flush)
			W->reported_flush = W->received;
		if (W->progress > W->reported_flush)
			W->reported_flush = W->progress;
	}

	if (!force && !TimestampDifferenceExceeds(W->last_status, now, cdc_status_interval))
		return;

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

static void
remember_flush(XLogRecPtr local_end, XLogRecPtr remote_end)
{
	if (W->nflushes == W->maxflushes) {
		W->maxflushes = W->maxflushes ? W->maxflushes * 2 : 64;
		W->flushes = W->flushes ? (FlushPosition *) repalloc(W->flushes, sizeof(FlushPosition) * W->maxflushes)
		                        : (FlushPosition *) MemoryContextAlloc(CdcWorkerContext, sizeof(FlushPosition) * W->maxflushes);
	}
	W->flushes[W->nflushes].local_end = local_end;
	W->flushes[W->nflushes].remote_end = remote_end;
	W->nflushes++;
}

static bool
fault(const char *point)
{
	return cdc_debug_fault && strcmp(cdc_debug_fault, point) == 0;
}

/* Fault point after_change:N — true when `nchanges` (changes applied in the open local transaction) is N. */
static bool
fault_after_change(int nchanges)
{
	static const char prefix[] = "after_change:";
	if (cdc_debug_fault == NULL || strncmp(cdc_debug_fault, prefix, sizeof(prefix) - 1) != 0)
		return false;
	return atoi(cdc_debug_fault + sizeof(prefix) - 1) == nchanges;
}

/* ------------------------------------------------------------------------
 * Applying one change (C++ side)
 * ------------------------------------------------------------------------ */

namespace {

using cdc::DecodedValue;
using cdc::Op;
using cdc::pg::ChangeRequest;
using cdc::pg::RawImage;

// The JSON object of an image, for cdc.conflicts and delete outbox payloads.
void
AppendImageJson(RawImage &img)
{
	std::string j = "{";
	for (size_t i = 0; i < img.values.size(); i++) {
		if (i)
			j += ", ";
		cdc::AppendJsonString(j, img.values[i].first);
		j += ": ";
		const DecodedValue &v = img.values[i].second;
		if (v.kind == DecodedValue::Kind::Text)
			cdc::AppendJsonString(j, v.text);
		else if (v.kind == DecodedValue::Kind::Null)
			j += "null";
		else
			j += "\"__unchanged_toast__\"";
	}
	j += "}";
	img.json = std::move(j);
}

// A pgoutput tuple as a RawImage.  key_only: a replica-identity key tuple
// ('K'), whose non-key columns are sent as NULL and must not be read as NULL.
RawImage
TupleImage(const LogicalRepRelation *rel, const LogicalRepTupleData *tup, bool key_only)
{
	RawImage img;
	for (int i = 0; i < tup->ncols && i < rel->natts; i++) {
		if (key_only && !bms_is_member(i, rel->attkeys))
			continue;
		const char *name = rel->attnames[i];
		switch (tup->colstatus[i]) {
		case LOGICALREP_COLUMN_NULL:
			img.values.emplace_back(name, DecodedValue::Null());
			break;
		case LOGICALREP_COLUMN_UNCHANGED:
			img.values.emplace_back(name, DecodedValue::Unavailable());
			break;
		case LOGICALREP_COLUMN_TEXT:
			img.values.emplace_back(name, DecodedValue::Text(std::string(tup->colvalues[i].data, tup->colvalues[i].len)));
			break;
		default:
			throw cdc::InputError("0A000", std::string("column \"") + name + "\" arrived in binary format, which the worker does not request");
		}
	}
	AppendImageJson(img);
	return img;
}

cdc::SourceInfo
SourceOf(const LogicalRepRelation *rel)
{
	cdc::SourceInfo s;
	s.connector = "pgoutput";
	s.name = W->source_id;
	s.db = W->source_db;
	s.schema = rel->nspname;
	s.table = rel->relname;
	s.lsn = int64_t(W->change_lsn);
	s.commit_lsn = int64_t(W->final_lsn);
	s.tx_id = int64_t(W->xid);
	/* source commit time as Unix milliseconds (history rows, handler metadata) */
	s.ts_ms = W->committime / 1000 + int64_t(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
	return s;
}

// Hands a change to the engine: applied at once when cdc.apply_batch_changes
// is 1, else queued for the batch engine.  The queue is applied when it
// holds cdc.apply_batch_changes changes or cdc.group_max_bytes of images (so
// wide rows never pile up in memory), at the group's local commit (Finish),
// at the end of each source transaction while the worker retries one by one
// (flush_queue()), and at the end of a copied table.
// The DEBUG1 line for a queue the worker is about to apply (none for an
// empty one); `when` ends it ("inside source transaction 728").
void
LogQueue(const std::string &when)
{
	size_t n = W->engine->QueuedChanges(), bytes = W->engine->QueuedBytes();
	if (n > 0)
		cdc::pg::PgCall([&]() {
			elog(DEBUG1, "cdc_apply: applying %zu queued changes (%zu bytes of images) %s", n, bytes, when.c_str());
		});
}

void
Submit(ChangeRequest req, size_t position)
{
	/*
	 * The limit is the one read when the local transaction began: a reload
	 * (SIGHUP, read between any two messages) must not switch to change by
	 * change while changes are queued, or a later change would be applied
	 * before earlier ones.
	 */
	if (W->batch_limit <= 1) {
		W->engine->ApplyChange(req);
		return;
	}
	W->engine->Enqueue(std::move(req), position);
	if (W->engine->QueuedChanges() >= size_t(W->batch_limit) ||
	    W->engine->QueuedBytes() >= size_t(cdc_group_max_bytes) * 1024) {
		W->cur_table[0] = '\0'; /* the queue spans tables: the engine's context names the change's table */
		LogQueue("inside source transaction " + std::to_string(W->xid));
		W->engine->ApplyQueued();
		W->queue_spans = false;
	}
}

// Source identity, version {epoch, commit LSN, position, 0} and delivery key
// of the next change of the current source transaction.
void
StampNextChange(ChangeRequest &req, const LogicalRepRelation *rel)
{
	req.source = SourceOf(rel);
	W->seq++;
	req.total_order = W->seq;
	req.version = cdc::Version{{W->epoch, int64_t(W->final_lsn), W->seq, 0}};
	req.delivery_key = "pgoutput:" + std::string(W->source_id) + ":" + cdc::FormatLsn(int64_t(W->final_lsn)) + ":" +
	                   std::to_string(W->seq);
}

// Applies one decoded pgoutput change through the engine.
void
ApplyTuple(const LogicalRepRelation *rel, Op op, const LogicalRepTupleData *oldtup, char old_kind,
           const LogicalRepTupleData *newtup)
{
	ChangeRequest req;
	req.target = W->engine->ResolveSourceTable(W->name, rel->nspname, rel->relname, true);
	req.op = op;
	if (newtup)
		req.after = TupleImage(rel, newtup, false);
	if (oldtup)
		req.before = TupleImage(rel, oldtup, old_kind == 'K');
	StampNextChange(req, rel);
	Submit(std::move(req), size_t(W->seq));
}

void
ApplyTruncate(const LogicalRepRelation *rel)
{
	ChangeRequest req;
	req.target = W->engine->ResolveSourceTable(W->name, rel->nspname, rel->relname, true);
	req.op = Op::Truncate;
	StampNextChange(req, rel);
	Submit(std::move(req), size_t(W->seq));
}

// One row of the initial copy, applied as a snapshot row at point `cp`;
// `row` is its 1-based number in the copy of the table.
void
ApplyCopyRow(const char *schema, const char *table, char **columns, int ncolumns, const char *line, int len,
             XLogRecPtr cp, long row)
{
	auto values = cdc::ParseCopyTextRow(std::string_view(line, size_t(len)));
	if (int(values.size()) != ncolumns)
		throw cdc::InputError("22P02", "COPY row of " + std::string(schema) + "." + table + " has " +
		                                   std::to_string(values.size()) + " columns, expected " + std::to_string(ncolumns));
	ChangeRequest req;
	req.target = W->engine->ResolveSourceTable(W->name, schema, table, true);
	req.op = Op::Read;
	RawImage img;
	for (int i = 0; i < ncolumns; i++)
		img.values.emplace_back(columns[i], values[size_t(i)] ? DecodedValue::Text(*values[size_t(i)]) : DecodedValue::Null());
	AppendImageJson(img);
	req.after = std::move(img);
	req.source.connector = "pgoutput";
	req.source.name = W->source_id;
	req.source.db = W->source_db;
	req.source.schema = schema;
	req.source.table = table;
	req.source.lsn = int64_t(cp);
	req.version = cdc::Version{{W->epoch, int64_t(cp), 0, 0}};
	/* delivery key derived from the source identity: dbz-style, with op r and the snapshot point */
	Submit(std::move(req), size_t(row));
}

} // namespace

/* ------------------------------------------------------------------------
 * Source transactions
 * ------------------------------------------------------------------------ */

/*
 * Commits the current transaction with the replication origin's progress set
 * to `remote_end` (the end LSN of the last source transaction it applies), so
 * that the position commits with the rows, as PostgreSQL's own apply worker
 * does.  The origin LSN is cleared again afterwards (and in the error path,
 * if the commit itself fails): any other transaction of this worker — a
 * status write, the error record after a failed commit — would otherwise
 * carry it and move the progress past a transaction that never committed.
 */
static void
commit_with_progress(XLogRecPtr remote_end, TimestampTz remote_time)
{
	replorigin_session_origin_lsn = remote_end;
	replorigin_session_origin_timestamp = remote_time;
	CommitTransactionCommand();
	replorigin_session_origin_lsn = InvalidXLogRecPtr;
	replorigin_session_origin_timestamp = 0;
}

static void
begin_local_xact(void)
{
	/*
	 * A background worker must start the statement clock itself: now() (the
	 * ledger's claim time, entity records' write time, outbox created_at, all
	 * compared with the replay horizon) is the transaction's start.
	 */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	cdc::pg::RunCpp([&]() {
		W->engine = new cdc::pg::ApplyEngine();
		W->engine->SetPositionNames("change", "of the source transaction");
	});
	W->queue_spans = false;
	W->batch_limit = cdc_apply_batch_changes;
}

/* Applies the changes queued for the batch engine (Submit). */
static void
flush_queue(void)
{
	if (W->engine != NULL)
		cdc::pg::RunCpp([&]() { W->engine->ApplyQueued(); });
	W->queue_spans = false;
}

/*
 * Grouping (SPEC §7, docs/worker.md): consecutive source transactions are
 * applied in one local transaction (the group), committed with the
 * replication origin's progress set to the end LSN of the last of them.  A
 * group is committed after the source transaction that reaches
 * cdc.group_max_transactions, cdc.group_max_bytes or cdc.group_max_delay,
 * and as soon as the source has nothing more to send (stream()), so grouping
 * never waits for data.  Rows, versions, tombstones, ledger, outbox and the
 * progress of every source transaction in a group commit together, so a
 * crash loses or keeps whole groups, never parts of a source transaction.
 */
static void
open_group(void)
{
	begin_local_xact();
	W->group_open = true;
	W->group_xacts = 0;
	W->group_changes = 0;
	W->group_bytes = 0;
	W->group_start = GetCurrentTimestamp();
}

static bool
group_full(void)
{
	return W->group_xacts >= cdc_group_max_transactions || W->group_bytes >= (int64) cdc_group_max_bytes * 1024 ||
	       TimestampDifferenceExceeds(W->group_start, GetCurrentTimestamp(), cdc_group_max_delay);
}

/* The local commit of the open group: progress = its last source transaction. */
static void
close_group(void)
{
	Assert(W->group_open && !W->in_xact && W->group_xacts > 0);
	W->committing_group = true;
	cdc::pg::RunCpp([&]() {
		LogQueue("at the local commit of " + std::to_string(W->group_xacts) + " source transactions");
		W->engine->Finish();
		delete W->engine;
	});
	W->engine = NULL;
	W->queue_spans = false;
	PopActiveSnapshot();
	if (fault("before_commit")) {
		ereport(LOG, (errmsg("cdc_apply: fault point before_commit reached, exiting")));
		proc_exit(1);
	}
	commit_with_progress(W->group_end_lsn, W->group_commit_time);
	W->committing_group = false;
	W->group_open = false;
	remember_flush(XactLastCommitEnd, W->group_end_lsn);
	W->progress = W->group_end_lsn;
	W->last_commit_time = W->group_commit_time;
	W->stat_commits++;
	pgstat_report_activity(STATE_IDLE, NULL);
	if (fault("after_commit")) {
		ereport(LOG, (errmsg("cdc_apply: fault point after_commit reached, exiting")));
		proc_exit(1);
	}
}

/*
 * A source transaction starts: from BEGIN, or from STREAM COMMIT before its
 * spooled changes are applied.  final_lsn is its commit LSN.
 */
static void
begin_source_xact(XLogRecPtr final_lsn, TransactionId xid, TimestampTz committime)
{
	bool already_applied = final_lsn < W->progress;
	bool skipping = !already_applied && W->skip_lsn != InvalidXLogRecPtr && final_lsn == W->skip_lsn;
	/* an explicit skip commits on its own: close the group before it */
	if (skipping && W->group_open)
		close_group();
	W->in_xact = true;
	W->final_lsn = final_lsn;
	W->xid = xid;
	W->committime = committime;
	W->seq = 0;
	W->cur_table[0] = '\0';
	W->already_applied = already_applied;
	W->skipping = skipping;
	if (W->already_applied) {
		/* B16: the source went backwards (or was asked from an earlier point) and re-sends what we have */
		if (W->replays_discarded++ == 0)
			ereport(LOG, (errmsg("cdc_apply subscription \"%s\": source transaction %u committed at %X/%X is already applied "
			                     "(replication origin progress %X/%X); discarding what the source re-sends",
			                     W->name, xid, CDC_LSN_ARGS(final_lsn), CDC_LSN_ARGS(W->progress))));
	} else if (W->replays_discarded > 0) {
		ereport(LOG, (errmsg("cdc_apply subscription \"%s\": discarded %lld re-sent source transactions that were already applied",
		                     W->name, (long long) W->replays_discarded)));
		W->replays_discarded = 0;
	}
	if (W->skipping)
		ereport(LOG, (errmsg("cdc_apply subscription \"%s\": skipping source transaction %u committed at %X/%X as requested",
		                     W->name, xid, CDC_LSN_ARGS(final_lsn))));
	if (!W->already_applied && !W->skipping && !W->group_open)
		open_group();
}

static void
handle_begin(StringInfo s)
{
	LogicalRepBeginData begin;
	logicalrep_read_begin(s, &begin);
	begin_source_xact(begin.final_lsn, begin.xid, begin.committime);
}

/* A source transaction ends (COMMIT, or STREAM COMMIT after its changes). */
static void
end_source_xact(const LogicalRepCommitData &commit)
{
	if (W->already_applied) {
		/* replayed by the source after it went backwards: our progress already covers it */
		W->in_xact = false;
		return;
	}
	if (!W->skipping) {
		W->cur_table[0] = '\0';
		if (W->one_by_one_until != InvalidXLogRecPtr)
			flush_queue(); /* retrying one by one: an error names exactly this transaction */
		else if (W->engine != NULL && W->engine->QueuedChanges() > 0)
			W->queue_spans = true; /* the queue goes on with the next source transaction of the group */
	}
	W->in_xact = false;
	W->cur_table[0] = '\0';
	if (W->skipping) {
		const char *args[3] = {psprintf("%d", W->subid), lsn_text(W->final_lsn), psprintf("%u", W->xid)};
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		SPI_connect();
		spi_exec("UPDATE cdc.skipped_transactions SET skipped_at = now(), xid = $3::bigint "
		         "WHERE subid = $1::int AND commit_lsn = $2::pg_lsn AND skipped_at IS NULL",
		         3, args);
		spi_exec("UPDATE cdc.subscription SET skip_lsn = NULL WHERE subid = $1::int", 1, args);
		SPI_finish();
		PopActiveSnapshot();
		commit_with_progress(commit.end_lsn, commit.committime);
		W->skip_lsn = InvalidXLogRecPtr;
		W->skipping = false;
		remember_flush(XactLastCommitEnd, commit.end_lsn);
		W->progress = commit.end_lsn;
		W->last_commit_time = commit.committime;
		pgstat_report_activity(STATE_IDLE, NULL);
		return;
	}

	/* the source transaction is complete inside the group */
	W->group_xacts++;
	W->group_end_lsn = commit.end_lsn;
	W->group_last_final = W->final_lsn;
	W->group_last_xid = W->xid;
	W->group_commit_time = commit.committime;
	W->stat_xacts++;
	bool alone = W->one_by_one_until != InvalidXLogRecPtr;
	if (alone && W->final_lsn >= W->one_by_one_until) {
		ereport(LOG, (errmsg("cdc_apply subscription \"%s\": applied one by one up to %X/%X; grouping again",
		                     W->name, CDC_LSN_ARGS(W->one_by_one_until))));
		W->one_by_one_until = InvalidXLogRecPtr;
	}
	if (alone || group_full())
		close_group();
}

static void
handle_commit(StringInfo s)
{
	LogicalRepCommitData commit;
	logicalrep_read_commit(s, &commit);
	end_source_xact(commit);
}

static RelEntry *
lookup_relation(LogicalRepRelId relid)
{
	bool found;
	RelEntry *e = (RelEntry *) hash_search(W->relations, &relid, HASH_FIND, &found);
	if (!found)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION),
		                errmsg("cdc_apply: change for unknown relation %u (no RELATION message)", relid)));
	snprintf(W->cur_table, sizeof(W->cur_table), "%s.%s", e->rel->nspname, e->rel->relname);
	return e;
}

static void
handle_relation(StringInfo s)
{
	MemoryContext old = MemoryContextSwitchTo(CdcWorkerContext);
	LogicalRepRelation *rel = logicalrep_read_rel(s);
	bool found;
	RelEntry *e = (RelEntry *) hash_search(W->relations, &rel->remoteid, HASH_ENTER, &found);
	e->rel = rel; /* the previous copy stays in CdcWorkerContext: relation messages are rare */
	MemoryContextSwitchTo(old);
}

static void
handle_change(char action, StringInfo s)
{
	LogicalRepTupleData newtup, oldtup;
	bool has_old = false;
	LogicalRepRelId relid;

	if (!W->in_xact)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: change outside a transaction")));
	switch (action) {
	case 'I': {
		relid = logicalrep_read_insert(s, &newtup);
		if (W->already_applied || W->skipping)
			return;
		RelEntry *e = lookup_relation(relid);
		cdc::pg::RunCpp([&]() { ApplyTuple(e->rel, Op::Create, NULL, 0, &newtup); });
		break;
	}
	case 'U': {
		/* the old tuple kind ('K' key, 'O' full) is the byte after the relid */
		char kind = s->len > s->cursor + 4 ? s->data[s->cursor + 4] : 'N';
		relid = logicalrep_read_update(s, &has_old, &oldtup, &newtup);
		if (W->already_applied || W->skipping)
			return;
		RelEntry *e = lookup_relation(relid);
		cdc::pg::RunCpp([&]() { ApplyTuple(e->rel, Op::Update, has_old ? &oldtup : NULL, kind, &newtup); });
		break;
	}
	case 'D': {
		char kind = s->len > s->cursor + 4 ? s->data[s->cursor + 4] : 'K';
		relid = logicalrep_read_delete(s, &oldtup);
		if (W->already_applied || W->skipping)
			return;
		RelEntry *e = lookup_relation(relid);
		cdc::pg::RunCpp([&]() { ApplyTuple(e->rel, Op::Delete, &oldtup, kind, NULL); });
		break;
	}
	case 'T': {
		bool cascade, restart_seqs;
		List *relids = logicalrep_read_truncate(s, &cascade, &restart_seqs);
		if (W->already_applied || W->skipping)
			return;
		ListCell *lc;
		foreach (lc, relids) {
			RelEntry *e = lookup_relation(lfirst_oid(lc));
			cdc::pg::RunCpp([&]() { ApplyTruncate(e->rel); });
		}
		break;
	}
	}
	W->group_changes++;
	if (fault_after_change(W->group_changes)) {
		flush_queue(); /* "after the N-th change applied": applied, not only queued */
		ereport(LOG, (errmsg("cdc_apply: fault point after_change:%d reached, exiting", W->group_changes)));
		proc_exit(1);
	}
}

/* ------------------------------------------------------------------------
 * Streamed in-progress transactions (protocol version 2, cdc.streaming)
 *
 * The source sends a large transaction in chunks (STREAM START .. STREAM
 * STOP) before it commits, each change tagged with its (sub)transaction id.
 * Nothing of it may be applied before STREAM COMMIT (it may still abort), so
 * the chunks are spooled to a temporary file per transaction (a FileSet, as
 * PostgreSQL's own apply worker does); STREAM ABORT of a subtransaction cuts
 * the file back to where that subtransaction's first change was written,
 * STREAM ABORT of the transaction drops the file, and STREAM COMMIT applies
 * the file like a transaction sent at its commit (same versions, delivery
 * keys, grouping, progress).  A worker that restarts has lost nothing: the
 * source streams every uncommitted transaction again from its first change.
 * ------------------------------------------------------------------------ */

/* Deletes the spool files when the worker exits (before_shmem_exit). */
static void
stream_cleanup(int code, Datum arg) noexcept
{
	if (W != NULL && W->stream_fileset != NULL)
		FileSetDeleteAll(W->stream_fileset);
}

static char *
stream_file_name(TransactionId xid)
{
	return psprintf("cdc-%d-%u.changes", W->subid, xid);
}

static void
stream_setup(void)
{
	if (W->stream_fileset != NULL)
		return;
	MemoryContext old = MemoryContextSwitchTo(CdcWorkerContext);
	W->stream_fileset = (FileSet *) palloc(sizeof(FileSet));
	FileSetInit(W->stream_fileset);
	HASHCTL ctl;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(TransactionId);
	ctl.entrysize = sizeof(StreamXact);
	ctl.hcxt = CdcWorkerContext;
	W->streams = hash_create("cdc_apply streamed transactions", 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	MemoryContextSwitchTo(old);
	before_shmem_exit(stream_cleanup, (Datum) 0);
}

/* Runs f inside a transaction (the open group's, or a short one of its own): file handles need a resource owner. */
template <typename F>
static void
with_transaction(F &&f)
{
	bool own = !IsTransactionState();
	if (own)
		StartTransactionCommand();
	f();
	if (own)
		CommitTransactionCommand(); /* no xid was assigned: writes no WAL */
}

static void
handle_stream_start(StringInfo s)
{
	bool first_segment;
	if (W->in_stream || W->in_xact)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: STREAM START inside a transaction or stream")));
	TransactionId xid = logicalrep_read_stream_start(s, &first_segment);
	if (!TransactionIdIsValid(xid))
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: STREAM START without a transaction id")));
	stream_setup();
	/* the chunk's file handle lives in a transaction of its own: commit the group first */
	if (W->group_open)
		close_group();
	StartTransactionCommand();
	MemoryContext old = MemoryContextSwitchTo(CdcStreamContext);
	bool found;
	StreamXact *x = (StreamXact *) hash_search(W->streams, &xid, HASH_ENTER, &found);
	if (first_segment || !found) {
		/* the first chunk (again, after a restart of the stream): start an empty file */
		x->nsubxacts = 0;
		if (!found) {
			x->maxsubxacts = 0;
			x->subxacts = NULL;
		}
		W->stream_file = BufFileCreateFileSet(W->stream_fileset, stream_file_name(xid));
	} else {
		W->stream_file = BufFileOpenFileSet(W->stream_fileset, stream_file_name(xid), O_RDWR, false);
		BufFileSeek(W->stream_file, 0, 0, SEEK_END);
	}
	MemoryContextSwitchTo(old);
	W->in_stream = true;
	W->stream_xid = xid;
}

static void
handle_stream_stop(void)
{
	if (!W->in_stream)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: STREAM STOP outside a stream")));
	BufFileClose(W->stream_file);
	W->stream_file = NULL;
	W->in_stream = false;
	CommitTransactionCommand();
	MemoryContextReset(CdcStreamContext);
}

/* Appends one change of the open chunk (its xid already read) to the spool file. */
static void
stream_spool(char action, TransactionId xid, StringInfo s)
{
	StreamXact *x = (StreamXact *) hash_search(W->streams, &W->stream_xid, HASH_FIND, NULL);
	if (xid != W->stream_xid) {
		bool seen = false;
		for (int i = 0; i < x->nsubxacts && !seen; i++)
			seen = x->subxacts[i].xid == xid;
		if (!seen) {
			if (x->nsubxacts == x->maxsubxacts) {
				x->maxsubxacts = x->maxsubxacts ? x->maxsubxacts * 2 : 16;
				x->subxacts = x->subxacts ? (StreamSubxact *) repalloc(x->subxacts, sizeof(StreamSubxact) * x->maxsubxacts)
				                          : (StreamSubxact *) MemoryContextAlloc(CdcWorkerContext, sizeof(StreamSubxact) * x->maxsubxacts);
			}
			StreamSubxact *sub = &x->subxacts[x->nsubxacts++];
			sub->xid = xid;
			BufFileTell(W->stream_file, &sub->fileno, &sub->offset);
		}
	}
	/* record: length, change LSN, action, the message after the xid */
	int rest = s->len - s->cursor;
	int len = (int) sizeof(XLogRecPtr) + 1 + rest;
	BufFileWrite(W->stream_file, &len, sizeof(len));
	BufFileWrite(W->stream_file, &W->change_lsn, sizeof(XLogRecPtr));
	BufFileWrite(W->stream_file, &action, 1);
	BufFileWrite(W->stream_file, s->data + s->cursor, rest);
	s->cursor = s->len;
}

static void
handle_stream_abort(StringInfo s)
{
	TransactionId xid, subxid;
	if (W->in_stream || W->in_xact)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: STREAM ABORT inside a transaction or stream")));
	logicalrep_read_stream_abort(s, &xid, &subxid);
	stream_setup();
	bool found;
	StreamXact *x = (StreamXact *) hash_search(W->streams, &xid, HASH_FIND, &found);
	if (!found)
		return; /* nothing of it was spooled by this worker */
	with_transaction([&]() {
		if (subxid == xid) {
			/* the whole transaction aborted (B20: xid 2300) */
			ereport(LOG, (errmsg("cdc_apply subscription \"%s\": streamed transaction %u aborted; its spooled changes are dropped",
			                     W->name, xid)));
			BufFileDeleteFileSet(W->stream_fileset, stream_file_name(xid), true);
			hash_search(W->streams, &xid, HASH_REMOVE, NULL);
			return;
		}
		/* a subtransaction aborted: drop its changes and those of every subtransaction streamed after it */
		for (int i = 0; i < x->nsubxacts; i++) {
			if (x->subxacts[i].xid != subxid)
				continue;
			BufFile *f = BufFileOpenFileSet(W->stream_fileset, stream_file_name(xid), O_RDWR, false);
			BufFileTruncateFileSet(f, x->subxacts[i].fileno, x->subxacts[i].offset);
			BufFileClose(f);
			x->nsubxacts = i;
			ereport(LOG, (errmsg("cdc_apply subscription \"%s\": streamed subtransaction %u of transaction %u aborted; its spooled changes are dropped",
			                     W->name, subxid, xid)));
			break;
		}
	});
}

static void
handle_stream_commit(StringInfo s)
{
	LogicalRepCommitData commit;
	if (W->in_stream || W->in_xact)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION), errmsg("cdc_apply: STREAM COMMIT inside a transaction or stream")));
	TransactionId xid = logicalrep_read_stream_commit(s, &commit);
	stream_setup();
	bool found;
	(void) hash_search(W->streams, &xid, HASH_FIND, &found);
	if (!found)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION),
		                errmsg("cdc_apply: STREAM COMMIT of transaction %u, which was never streamed to this worker", xid)));

	begin_source_xact(commit.commit_lsn, xid, commit.committime);
	with_transaction([&]() {
		if (!W->already_applied && !W->skipping) {
			/* apply the spooled changes in the group's transaction, in the order they were streamed */
			MemoryContext replay = AllocSetContextCreate(CurrentMemoryContext, "CdcStreamReplay", ALLOCSET_DEFAULT_SIZES);
			BufFile *f = BufFileOpenFileSet(W->stream_fileset, stream_file_name(xid), O_RDONLY, false);
			XLogRecPtr saved_lsn = W->change_lsn;
			for (;;) {
				int len;
				size_t got = BufFileRead(f, &len, sizeof(len));
				if (got == 0)
					break;
				if (got != sizeof(len) || len < (int) sizeof(XLogRecPtr) + 1)
					ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("cdc_apply: spool file of transaction %u is damaged", xid)));
				MemoryContext old = MemoryContextSwitchTo(replay);
				StringInfoData rec;
				initStringInfo(&rec);
				enlargeStringInfo(&rec, len);
				if (BufFileRead(f, rec.data, len) != (size_t) len)
					ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("cdc_apply: spool file of transaction %u is damaged", xid)));
				rec.len = len;
				rec.data[len] = '\0';
				memcpy(&W->change_lsn, rec.data, sizeof(XLogRecPtr));
				rec.cursor = sizeof(XLogRecPtr);
				char action = pq_getmsgbyte(&rec);
				if (W->group_open)
					W->group_bytes += len;
				if (action == 'R')
					handle_relation(&rec);
				else if (action == 'I' || action == 'U' || action == 'D' || action == 'T')
					handle_change(action, &rec);
				/* 'Y' (type) and 'M' (message): nothing to apply */
				MemoryContextSwitchTo(old);
				MemoryContextReset(replay);
			}
			W->change_lsn = saved_lsn;
			BufFileClose(f);
			MemoryContextDelete(replay);
		}
		BufFileDeleteFileSet(W->stream_fileset, stream_file_name(xid), true);
	});
	hash_search(W->streams, &xid, HASH_REMOVE, NULL);
	end_source_xact(commit);
}

static void
handle_xlogdata(StringInfo s)
{
	XLogRecPtr start = pq_getmsgint64(s);
	XLogRecPtr end = pq_getmsgint64(s);
	(void) pq_getmsgint64(s); /* send time */
	if (start > W->received)
		W->received = start;
	if (end > W->received)
		W->received = end;
	if (end > W->source_end)
		W->source_end = end;
	W->change_lsn = start;

	char action = pq_getmsgbyte(s);
	if (W->in_stream) {
		/* inside a chunk of a streamed transaction: spool, apply at its commit */
		switch (action) {
		case 'E': handle_stream_stop(); return;
		case 'R':
		case 'Y':
		case 'I':
		case 'U':
		case 'D':
		case 'T':
		case 'M': {
			TransactionId xid = pq_getmsgint(s, 4);
			if (action != 'Y' && action != 'M')
				stream_spool(action, xid, s);
			return;
		}
		default:
			ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION),
			                errmsg("cdc_apply: unexpected pgoutput message type \"%c\" inside a stream", action)));
		}
	}
	if (W->group_open)
		W->group_bytes += s->len;
	switch (action) {
	case 'S': handle_stream_start(s); break;
	case 'A': handle_stream_abort(s); break;
	case 'c': handle_stream_commit(s); break;
	case 'B': handle_begin(s); break;
	case 'C': handle_commit(s); break;
	case 'R': handle_relation(s); break;
	case 'I':
	case 'U':
	case 'D':
	case 'T': handle_change(action, s); break;
	case 'O': /* origin of a transaction replicated into the source: applied like any other */
	case 'Y': /* type: values arrive as text and go through the destination types' input functions */
	case 'M': /* logical decoding message: not a change */
		break;
	default:
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION),
		                errmsg("cdc_apply: unexpected pgoutput message type \"%c\"", action)));
	}
}

/* ------------------------------------------------------------------------
 * Slot creation and initial copy
 * ------------------------------------------------------------------------ */

static void
copy_table(const char *schema, const char *table, XLogRecPtr cp)
{
	char *qual = psprintf("%s.%s", quote_identifier(schema), quote_identifier(table));
	char *lit = PQescapeLiteral(W->conn, qual, strlen(qual));
	PGresult *res = source_exec(psprintf("SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = %s::regclass "
	                                     "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
	                                     lit),
	                            PGRES_TUPLES_OK);
	PQfreemem(lit);
	int ncols = PQntuples(res);
	char **cols = (char **) palloc(sizeof(char *) * (ncols + 1));
	StringInfoData collist;
	initStringInfo(&collist);
	for (int i = 0; i < ncols; i++) {
		cols[i] = pstrdup(PQgetvalue(res, i, 0));
		appendStringInfo(&collist, "%s%s", i ? ", " : "", quote_identifier(cols[i]));
	}
	PQclear(res);

	res = source_exec(psprintf("COPY %s (%s) TO STDOUT", qual, collist.data), PGRES_COPY_OUT);
	PQclear(res);
	snprintf(W->cur_table, sizeof(W->cur_table), "%s.%s", schema, table);
	begin_local_xact();
	cdc::pg::RunCpp([&]() { W->engine->SetPositionNames("row", "of the initial copy"); });
	/* per row (and per queue applied with a row): the copy is one local transaction */
	MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext, "CdcCopyRow", ALLOCSET_DEFAULT_SIZES);
	MemoryContext copy_context = MemoryContextSwitchTo(row_context);
	long rows = 0;
	for (;;) {
		MemoryContextReset(row_context);
		char *buf = NULL;
		int len = PQgetCopyData(W->conn, &buf, 0);
		if (len == -1)
			break;
		if (len < 0)
			ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
			                errmsg("cdc_apply: initial copy of %s failed: %s", qual, PQerrorMessage(W->conn))));
		rows++;
		cdc::pg::RunCpp([&]() { ApplyCopyRow(schema, table, cols, ncols, buf, len, cp, rows); });
		PQfreemem(buf);
		CHECK_FOR_INTERRUPTS();
	}
	res = PQgetResult(W->conn);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
		                errmsg("cdc_apply: initial copy of %s failed: %s", qual, PQresultErrorMessage(res))));
	PQclear(res);
	MemoryContextReset(row_context);
	cdc::pg::RunCpp([&]() {
		W->engine->Finish();
		delete W->engine;
	});
	MemoryContextSwitchTo(copy_context);
	MemoryContextDelete(row_context);
	W->engine = NULL;
	PopActiveSnapshot();
	CommitTransactionCommand();
	W->cur_table[0] = '\0';
	ereport(LOG, (errmsg("cdc_apply subscription \"%s\": copied %ld rows of %s.%s", W->name, rows, schema, table)));
}

static void
prepare_slot(void)
{
	char *slot = pstrdup(quote_identifier(W->slot_name));
	char *slot_lit = PQescapeLiteral(W->conn, W->slot_name, strlen(W->slot_name));
	PGresult *res = source_exec(psprintf("SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = %s", slot_lit),
	                            PGRES_TUPLES_OK);
	bool exists = PQntuples(res) > 0;
	PQclear(res);
	PQfreemem(slot_lit);
	if (exists) {
		/* left by an attempt that did not finish its initial copy: start over */
		ereport(LOG, (errmsg("cdc_apply subscription \"%s\": dropping unfinished slot %s", W->name, W->slot_name)));
		PQclear(source_exec(psprintf("DROP_REPLICATION_SLOT %s WAIT", slot), PGRES_COMMAND_OK));
	}

	XLogRecPtr cp;
	if (W->copy_data) {
		write_status("copying", false);
		PQclear(source_exec("BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ", PGRES_COMMAND_OK));
		res = source_exec(psprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'use')", slot), PGRES_TUPLES_OK);
		cp = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(PQgetvalue(res, 0, 1))));
		PQclear(res);
		res = source_exec(psprintf("SELECT DISTINCT schemaname, tablename FROM pg_catalog.pg_publication_tables "
		                           "WHERE pubname IN (%s) ORDER BY 1, 2",
		                           W->publications_sql),
		                  PGRES_TUPLES_OK);
		int ntables = PQntuples(res);
		char **schemas = (char **) palloc(sizeof(char *) * (ntables + 1));
		char **tables = (char **) palloc(sizeof(char *) * (ntables + 1));
		for (int i = 0; i < ntables; i++) {
			schemas[i] = pstrdup(PQgetvalue(res, i, 0));
			tables[i] = pstrdup(PQgetvalue(res, i, 1));
		}
		PQclear(res);
		for (int i = 0; i < ntables; i++)
			copy_table(schemas[i], tables[i], cp);
		PQclear(source_exec("COMMIT", PGRES_COMMAND_OK));
	} else {
		res = source_exec(psprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'nothing')", slot), PGRES_TUPLES_OK);
		cp = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(PQgetvalue(res, 0, 1))));
		PQclear(res);
	}

	/* the slot is ready: progress = its start point, committed with the flag */
	const char *args[1] = {psprintf("%d", W->subid)};
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	spi_exec("UPDATE cdc.subscription SET slot_ready = true WHERE subid = $1::int", 1, args);
	SPI_finish();
	PopActiveSnapshot();
	commit_with_progress(cp, GetCurrentTimestamp());
	W->progress = cp;
	W->slot_ready = true;
	ereport(LOG, (errmsg("cdc_apply subscription \"%s\": slot %s ready at %X/%X", W->name, W->slot_name, CDC_LSN_ARGS(cp))));
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
		if (len == 0 && W->group_open && !W->in_xact) {
			/*
			 * Between source transactions with a group open: read what the
			 * socket holds; if the source has sent nothing more, commit the
			 * group now rather than wait for more (grouping never adds
			 * latency to an idle stream).
			 */
			if (PQconsumeInput(W->conn) == 0)
				ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
				                errmsg("cdc_apply: lost the connection to the source: %s", PQerrorMessage(W->conn))));
			len = PQgetCopyData(W->conn, &buf, 1);
			if (len == 0)
				close_group();
		}
		if (len == 0) {
			/* nothing buffered: wait for the socket, the latch or the status interval */
			if (!W->in_xact && !W->in_stream) {
				/* ask for a keepalive too: its WAL end lets an idle stream confirm progress */
				send_feedback(false, true);
				if (TimestampDifferenceExceeds(W->last_status, GetCurrentTimestamp(), cdc_status_interval))
					write_status("streaming", true);
			}
			int rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
			                           PQsocket(W->conn), cdc_status_interval, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if (PQconsumeInput(W->conn) == 0)
				ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
				                errmsg("cdc_apply: lost the connection to the source: %s", PQerrorMessage(W->conn))));
			continue;
		}
		if (len == -1)
			ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE), errmsg("cdc_apply: the source ended the stream")));
		if (len < 0)
			ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
			                errmsg("cdc_apply: could not read from the source: %s", PQerrorMessage(W->conn))));

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
			if (end > W->source_end)
				W->source_end = end;
			if (end > W->received)
				W->received = end;
			if (reply)
				send_feedback(true, false);
		}
	}
}

static void
record_error_and_exit(ErrorData *edata)
{
	int delay_ms;
	const char *args[4];

	W->retry_count++;
	args[0] = psprintf("%d", W->subid);
	args[1] = psprintf("%s%s%s", edata->message ? edata->message : "unknown error", edata->context ? "\nCONTEXT: " : "",
	                   edata->context ? edata->context : "");
	/* the failing source transaction: the one being applied, or the only one of a group whose commit failed */
	args[2] = W->in_xact ? lsn_text(W->final_lsn)
	          : (W->committing_group && W->group_xacts == 1) ? lsn_text(W->group_last_final)
	                                                          : NULL;
	args[3] = psprintf("%d", MyProcPid);
	exec_in_own_xact("UPDATE cdc.subscription_state SET state = 'error', last_error = $2, "
	                 "last_error_lsn = $3::pg_lsn, last_error_at = now(), retry_count = retry_count + 1, "
	                 "worker_pid = $4::int, updated_at = now() WHERE subid = $1::int",
	                 4, args);

	/* back off: cdc.retry_backoff doubled per consecutive failure, at most cdc.retry_backoff_max */
	double d = (double) cdc_retry_backoff;
	for (int i = 1; i < W->retry_count && d < cdc_retry_backoff_max * 1000.0; i++)
		d *= 2;
	delay_ms = (int) Min(d, cdc_retry_backoff_max * 1000.0);
	pgstat_report_activity(STATE_IDLE, "waiting to retry after an error");
	/* sleep the whole delay: a latch set by someone else must not cut it short */
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), delay_ms);
	for (;;) {
		long left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);
		if (left <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	proc_exit(1);
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
	memcpy(&dboid, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);

	CdcWorkerContext = AllocSetContextCreate(TopMemoryContext, "CdcWorkerContext", ALLOCSET_DEFAULT_SIZES);
	CdcMessageContext = AllocSetContextCreate(TopMemoryContext, "CdcMessageContext", ALLOCSET_DEFAULT_SIZES);
	CdcStreamContext = AllocSetContextCreate(TopMemoryContext, "CdcStreamContext", ALLOCSET_DEFAULT_SIZES);
	W = (WorkerState *) MemoryContextAllocZero(CdcWorkerContext, sizeof(WorkerState));
	W->name = psprintf("%d", subid);

	errcallback.callback = worker_error_context;
	errcallback.arg = NULL;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	/* the worker applies like PostgreSQL's own: triggers and rules of the target fire only when enabled ALWAYS/REPLICA */
	SetConfigOption("session_replication_role", "replica", PGC_SUSET, PGC_S_OVERRIDE);
	apply_session_settings();

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

				HASHCTL ctl;
				memset(&ctl, 0, sizeof(ctl));
				ctl.keysize = sizeof(LogicalRepRelId);
				ctl.entrysize = sizeof(RelEntry);
				ctl.hcxt = CdcWorkerContext;
				W->relations = hash_create("cdc_apply relations", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

				/* replication origin: created with the subscription */
				StartTransactionCommand();
				W->origin = replorigin_by_name(psprintf("cdc_%d", subid), false);
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

				write_status("starting", false);
				started = true;
			}
			connect_source();
			if (!W->slot_ready)
				prepare_slot();
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
			if (failed_in_group) {
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
				W->cur_table[0] = '\0';
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

/* ------------------------------------------------------------------------
 * cdc._drop_source_slot(conninfo text, slot_name name)
 * ------------------------------------------------------------------------ */

static void
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
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		char *msg = pstrdup(PQresultErrorMessage(res));
		PQclear(res);
		PQfinish(conn);
		ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE), errmsg("could not drop slot \"%s\" on the source: %s", slot, msg)));
	}
	PQclear(res);
	PQfinish(conn);
}

/*
 * cdc._drop_source_slot(conninfo text, slot_name name) RETURNS void
 * Used by cdc.drop_subscription(..., drop_slot => true).  Errors: 08001 when
 * the source cannot be reached, 55006 when the slot cannot be dropped.
 */
CDC_PG_FUNCTION(cdc_drop_source_slot)
{
	cdc::pg::PgCall([&]() { drop_source_slot_pg(PG_GETARG_TEXT_PP(0), PG_GETARG_NAME(1)); });
	PG_RETURN_VOID();
}

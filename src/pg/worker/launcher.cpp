// The launcher (the counterpart of PostgreSQL's logical/launcher.c): one
// background worker per server that reads cdc.subscription in cdc.database
// every cdc.naptime, starts an apply worker for each enabled subscription
// that has none (at most cdc.max_workers), stops those of disabled or
// dropped ones, and runs the replay horizon's scheduled cdc.prune()
// (apply/horizon.hpp).  InitLauncher registers it from _PG_init.
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames, and enters C++ only through RunCpp().
// It holds no worker state: that is the apply worker's (worker_state.hpp).
#include "pg/apply/horizon.hpp"
#include "pg/guc.hpp"
#include "pg/worker/lifecycle.hpp"
#include "pg/worker/worker.hpp"

extern "C" {
#include "utils/guc.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
}

extern "C" {
PGDLLEXPORT void cdc_launcher_main(Datum arg);
}

void
cdc::pg::InitLauncher(bool preloaded)
{
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

typedef struct LauncherSlot {
	int subid;
	BackgroundWorkerHandle *handle;
} LauncherSlot;

static bool
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
		slot->handle = NULL;
		return false;
	}
	slot->subid = subid;
	return true;
}

/*
 * A subscription that has no worker because no worker slot is free says so
 * (state waiting, last_error naming the limit); written and logged only
 * when it changes.  Inside the launcher's transaction.
 */
static void
mark_waiting(int subid, const char *why)
{
	Oid types[2] = {INT4OID, TEXTOID};
	Datum values[2] = {Int32GetDatum(subid), CStringGetTextDatum(why)};
	int rc = SPI_execute_with_args("UPDATE cdc.subscription_state SET state = 'waiting', last_error = $2, worker_pid = NULL, "
	                               "updated_at = pg_catalog.now() "
	                               "WHERE subid OPERATOR(pg_catalog.=) $1 AND (state OPERATOR(pg_catalog.<>) 'waiting' "
	                               "OR (last_error OPERATOR(pg_catalog.=) $2) IS NOT TRUE)",
	                               2, types, values, NULL, false, 0);
	if (rc == SPI_OK_UPDATE && SPI_processed > 0)
		ereport(LOG, (errmsg("cdc_apply launcher: subscription %d waits: %s", subid, why)));
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
	/* every statement of this session (and cdc.prune()) resolves names in pg_catalog only (docs/security.md) */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

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
		if (SPI_execute("SELECT pg_catalog.to_regclass('cdc.subscription') IS NOT NULL", true, 1) == SPI_OK_SELECT &&
		    DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull))) {
			/*
			 * alive: a worker for the subscription runs although this launcher
			 * did not start it (a previous launcher did, before it restarted).
			 */
			if (SPI_execute("SELECT s.subid, s.enabled, EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a "
			                "  WHERE a.backend_type OPERATOR(pg_catalog.=) 'cdc_apply worker' "
			                "    AND a.application_name OPERATOR(pg_catalog.=) ('cdc_apply ' OPERATOR(pg_catalog.||) s.name)) "
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
			if (!running && free_slot >= 0) {
				if (!start_apply_worker(&slots[free_slot], subids[i]))
					mark_waiting(subids[i], psprintf("no free background worker slot (max_worker_processes = %d)",
					                                 max_worker_processes));
			} else if (!running)
				mark_waiting(subids[i], psprintf("no free worker slot (cdc.max_workers = %d)", cdc_max_workers));
		}
		cdc::pg::ReportSubscriptionCount(nsubs); /* DROP DATABASE of this database is refused while it has any */
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

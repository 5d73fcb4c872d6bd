// The launchers (the counterpart of PostgreSQL's logical/launcher.c; the
// pattern of TimescaleDB's cluster launcher and per-database schedulers;
// docs/worker.md, "Every database"):
//
//  * the **cluster launcher** (`cdc_apply cluster launcher`, one per server,
//    registered by InitLauncher from _PG_init) is connected to no database:
//    it reads pg_database every cdc.naptime (and when woken) and starts a
//    database launcher in every database that allows connections, is not a
//    template and needs one: not looked at yet, with subscriptions, or
//    without subscriptions but with its scheduled cdc.prune() due or a
//    subscription just created there (CDC_DB_IDLE, prune_scheduled, last_prune and wanted in
//    registry.hpp).  Looks at databases without a resident launcher run
//    CDC_CONCURRENT_CHECKS at a time;
//  * a **database launcher** (`cdc_apply launcher`, one per database) looks
//    whether cdc_apply is installed there.  If not, it says so in the
//    registry and exits at once, so it never holds a connection to such a
//    database.  If it is and the database has subscriptions, it stays:
//    every cdc.naptime it reads cdc.subscription, starts an apply worker for
//    each enabled subscription that has none (taking one of the
//    cdc.max_workers slots shared by all databases, registry.hpp), stops
//    those of disabled or dropped ones, counts the subscriptions for the
//    DROP DATABASE guard (lifecycle.cpp), and runs the replay horizon's
//    scheduled cdc.prune() (apply/horizon.hpp).  If the database has no
//    subscription, it runs that prune if due, records in the registry when
//    the next one is due, and exits: nothing else is to be done there until
//    a subscription is created, and every transaction that inserts one
//    into cdc.subscription (or changes its `enabled`) wakes the cluster
//    launcher and the database's resident launcher at commit (the trigger
//    cdc._subscription_changed, lifecycle.cpp; a launcher looking at that
//    moment sees the `wanted` flag, or its latch set, and looks again
//    instead of leaving or sleeping cdc.naptime).
//    After DROP EXTENSION it stops its workers and exits.
//
// Why one launcher per database rather than one process visiting each
// database in turn: a background worker connects to one database for its
// life, cdc.subscription and cdc.prune() are per database, and a
// database's launcher reacts within cdc.naptime without a process start
// per database per cdc.naptime.  Why only where there are subscriptions
// (security review, TAP 122): a resident launcher costs a
// max_worker_processes slot, and any role with CREATEDB that owns a
// database with cdc_apply can copy it (CREATE DATABASE ... TEMPLATE) as
// often as it likes; a launcher per copy took every slot, and no apply or
// parallel query worker could start in any database.  Subscriptions are
// created by superusers only, so only they decide how many launchers stay;
// a copy without one costs a visit per cdc.prune_interval, at most
// CDC_CONCURRENT_CHECKS at a time.
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames, and enters C++ only through RunCpp().
// It holds no worker state: that is the apply worker's (worker_state.hpp).
#include "pg/apply/horizon.hpp"
#include "pg/guc.hpp"
#include "pg/shared_stats.hpp"
#include "pg/worker/registry.hpp"
#include "pg/worker/worker.hpp"

extern "C" {
#include "utils/guc.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

extern "C" {
PGDLLEXPORT void cdc_launcher_main(Datum arg);
PGDLLEXPORT void cdc_database_launcher_main(Datum arg);
}

/* databases the cluster launcher looks at, at most, at the same time */
#define CDC_CONCURRENT_CHECKS 2
/* a reservation of a worker slot that no worker took for this long is released */
#define CDC_RESERVATION_TIMEOUT_MS 60000

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
	snprintf(bgw.bgw_name, BGW_MAXLEN, "cdc_apply cluster launcher");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "cdc_apply cluster launcher");
	RegisterBackgroundWorker(&bgw);
}

/* ------------------------------------------------------------------------
 * The cluster launcher
 * ------------------------------------------------------------------------ */

typedef struct DatabaseRow {
	Oid oid;
	bool eligible; /* allows connections, not a template, valid, and not excluded by cdc.database */
} DatabaseRow;

/* A database launcher this process started: its handle (local hash entry). */
typedef struct LaunchEntry {
	Oid dboid; /* key */
	BackgroundWorkerHandle *handle;
} LaunchEntry;

/*
 * Every database of the cluster, read from the shared catalog pg_database
 * (as launcher.c reads pg_subscription), into the current memory context.
 */
static int
read_databases(DatabaseRow **rows)
{
	MemoryContext caller = CurrentMemoryContext;
	int n = 0, max = 16;
	*rows = (DatabaseRow *) palloc(sizeof(DatabaseRow) * max);
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	Relation rel = table_open(DatabaseRelationId, AccessShareLock);
	TableScanDesc scan = table_beginscan_catalog(rel, 0, NULL);
	HeapTuple tup;
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection))) {
		Form_pg_database form = (Form_pg_database) GETSTRUCT(tup);
		MemoryContext old = MemoryContextSwitchTo(caller);
		if (n == max) {
			max *= 2;
			*rows = (DatabaseRow *) repalloc(*rows, sizeof(DatabaseRow) * max);
		}
		(*rows)[n].oid = form->oid;
		(*rows)[n].eligible = form->datallowconn && !form->datistemplate && !database_is_invalid_form(form) &&
		                      (cdc_database == NULL || cdc_database[0] == '\0' ||
		                       strcmp(NameStr(form->datname), cdc_database) == 0);
		n++;
		MemoryContextSwitchTo(old);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return n;
}

static bool
start_database_launcher(Oid db, BackgroundWorkerHandle **handle)
{
	BackgroundWorker bgw;
	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART; /* the cluster launcher restarts it */
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "cdc_apply");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "cdc_database_launcher_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "cdc_apply launcher for database %u", db);
	snprintf(bgw.bgw_type, BGW_MAXLEN, "cdc_apply launcher");
	bgw.bgw_main_arg = ObjectIdGetDatum(db);
	bgw.bgw_notify_pid = MyProcPid;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	bool ok = RegisterDynamicBackgroundWorker(&bgw, handle);
	MemoryContextSwitchTo(old);
	return ok;
}

static bool
handle_alive(BackgroundWorkerHandle *handle)
{
	pid_t pid;
	BgwHandleStatus st = GetBackgroundWorkerPid(handle, &pid);
	return st == BGWH_STARTED || st == BGWH_NOT_YET_STARTED;
}

/* before_shmem_exit: nobody wakes this process any more */
static void
cluster_launcher_exit(int code, Datum arg) noexcept
{
	CdcRegistry->cluster_launcher = NULL;
}

void
cdc_launcher_main(Datum arg)
{
	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	/* no database: it reads the shared catalog pg_database only */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("cdc_apply cluster launcher");
	CdcRegistry->cluster_launcher = MyProc;
	before_shmem_exit(cluster_launcher_exit, (Datum) 0);

	HASHCTL ctl;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(LaunchEntry);
	HTAB *launched = hash_create("cdc_apply database launchers", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	MemoryContext loop_context = AllocSetContextCreate(TopMemoryContext, "CdcLauncherLoop", ALLOCSET_DEFAULT_SIZES);
	bool warned_full = false;

	for (;;) {
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending) {
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		MemoryContextReset(loop_context);
		MemoryContext old = MemoryContextSwitchTo(loop_context);

		DatabaseRow *rows;
		int nrows = read_databases(&rows);
		TimestampTz now = GetCurrentTimestamp();

		/* the database launchers this process started that are gone now */
		Oid *ended = (Oid *) palloc(sizeof(Oid) * (hash_get_num_entries(launched) + 1));
		int nended = 0;
		HASH_SEQ_STATUS seq;
		hash_seq_init(&seq, launched);
		LaunchEntry *le;
		while ((le = (LaunchEntry *) hash_seq_search(&seq)) != NULL)
			if (!handle_alive(le->handle))
				ended[nended++] = le->dboid;
		for (int i = 0; i < nended; i++) {
			le = (LaunchEntry *) hash_search(launched, &ended[i], HASH_FIND, NULL);
			pfree(le->handle);
			hash_search(launched, &ended[i], HASH_REMOVE, NULL);
		}

		Oid *to_start = (Oid *) palloc(sizeof(Oid) * (nrows + 1));
		int nstart = 0;
		Oid *forgotten = (Oid *) palloc(sizeof(Oid) * (CdcRegistry->ndatabases + 1));
		int nforgotten = 0;
		bool full = false;
		LWLockAcquire(CdcRegistryLock(), LW_EXCLUSIVE);
		CdcDatabase *dbs = registry_databases();
		/* databases dropped (or no longer eligible) are forgotten once nobody serves them */
		for (int i = 0; i < CdcRegistry->ndatabases; i++) {
			if (dbs[i].state == CDC_DB_FREE)
				continue;
			bool eligible = false;
			for (int r = 0; r < nrows; r++)
				if (rows[r].oid == dbs[i].dboid)
					eligible = rows[r].eligible;
			if (!eligible && dbs[i].launcher_pid == 0) {
				forgotten[nforgotten++] = dbs[i].dboid;
				dbs[i].state = CDC_DB_FREE;
			}
		}
		/* a launcher that ended without reporting (it failed): look again after cdc.naptime */
		for (int i = 0; i < nended; i++) {
			CdcDatabase *d = registry_find_database(ended[i], false);
			if (d != NULL && d->launcher_pid == 0 && d->state != CDC_DB_NONE && !(d->state == CDC_DB_IDLE && d->reported)) {
				if (d->state == CDC_DB_CHECKING)
					d->state = CDC_DB_UNKNOWN;
				TimestampTz retry = TimestampTzPlusMilliseconds(now, cdc_naptime * 1000L);
				if (d->hold_until < retry && !d->urgent)
					d->hold_until = retry;
			}
		}
		/* every eligible database has an entry */
		for (int r = 0; r < nrows; r++)
			if (rows[r].eligible && registry_find_database(rows[r].oid, true) == NULL)
				full = true;
		/*
		 * Start the database launchers that are missing: served ones and idle
		 * ones where a subscription was just created, then the ones not looked
		 * at yet (urgent first), then idle ones whose scheduled cdc.prune() is
		 * due.  Looks at databases without a resident launcher (not looked at
		 * yet, or idle) run CDC_CONCURRENT_CHECKS at a time, so that however
		 * many such databases exist (anyone with CREATEDB can copy one) they
		 * take at most that many max_worker_processes slots.
		 */
		int checking = 0;
		for (int i = 0; i < CdcRegistry->ndatabases; i++)
			if (dbs[i].state == CDC_DB_CHECKING ||
			    (dbs[i].state == CDC_DB_IDLE && !dbs[i].wanted &&
			     (dbs[i].launcher_pid != 0 || hash_search(launched, &dbs[i].dboid, HASH_FIND, NULL) != NULL)))
				checking++;
		for (int pass = 0; pass < 4; pass++) {
			for (int i = 0; i < CdcRegistry->ndatabases; i++) {
				CdcDatabase *d = &dbs[i];
				/*
				 * From the last prune and the current cdc.prune_interval, not a
				 * time fixed when its launcher left: a reload that sets the
				 * interval (from 0, or shorter) applies at once (TAP 123).
				 */
				bool idle_due = false;
				if (d->state == CDC_DB_IDLE && d->prune_scheduled) {
					TimestampTz due = cdc::pg::LauncherNextPrune(d->last_prune);
					idle_due = due != 0 && (d->last_prune == 0 || due <= now);
				}
				bool wanted = pass == 0   ? d->state == CDC_DB_SERVED || (d->state == CDC_DB_IDLE && d->wanted)
				              : pass == 1 ? d->state == CDC_DB_UNKNOWN && d->urgent
				              : pass == 2 ? d->state == CDC_DB_UNKNOWN && !d->urgent
				                          : idle_due && !d->wanted;
				if (!wanted || d->launcher_pid != 0 || hash_search(launched, &d->dboid, HASH_FIND, NULL) != NULL)
					continue;
				if (d->hold_until > now && !(pass == 1 && d->state == CDC_DB_UNKNOWN))
					continue;
				if (d->state == CDC_DB_UNKNOWN || pass == 3) {
					if (checking >= CDC_CONCURRENT_CHECKS)
						continue;
					checking++;
					if (d->state == CDC_DB_UNKNOWN)
						d->state = CDC_DB_CHECKING;
				}
				d->started_at = now;
				d->reported = false;
				to_start[nstart++] = d->dboid;
			}
		}
		LWLockRelease(CdcRegistryLock());

		if (full && !warned_full) {
			ereport(WARNING, (errmsg("cdc_apply cluster launcher: more databases than cdc.max_databases (%d); the others are "
			                         "not served",
			                         cdc_max_databases)));
			warned_full = true;
		}
		for (int i = 0; i < nforgotten; i++)
			cdc::pg::SharedStatsForgetDatabase(forgotten[i]);
		/* reservations of databases whose launcher left before their worker started */
		registry_reclaim_stale_reservations(InvalidOid, CDC_RESERVATION_TIMEOUT_MS);
		for (int i = 0; i < nstart; i++) {
			BackgroundWorkerHandle *handle = NULL;
			if (start_database_launcher(to_start[i], &handle)) {
				le = (LaunchEntry *) hash_search(launched, &to_start[i], HASH_ENTER, NULL);
				le->handle = handle;
				continue;
			}
			/* no free background worker slot: try again after cdc.naptime */
			ereport(LOG, (errmsg("cdc_apply cluster launcher: no free background worker slot for the launcher of database %u "
			                     "(max_worker_processes = %d)",
			                     to_start[i], max_worker_processes)));
			LWLockAcquire(CdcRegistryLock(), LW_EXCLUSIVE);
			CdcDatabase *d = registry_find_database(to_start[i], false);
			if (d != NULL && d->state == CDC_DB_CHECKING && d->launcher_pid == 0)
				d->state = CDC_DB_UNKNOWN;
			LWLockRelease(CdcRegistryLock());
		}
		MemoryContextSwitchTo(old);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, cdc_naptime * 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* ------------------------------------------------------------------------
 * A database launcher
 * ------------------------------------------------------------------------ */

/* The workers this database launcher started: their handles, by worker slot. */
typedef struct StartedWorker {
	BackgroundWorkerHandle *handle; /* NULL: none */
	uint32 generation;
} StartedWorker;

static bool
start_apply_worker(StartedWorker *started, int slot, uint32 generation, int subid)
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
	CdcWorkerStart start = {MyDatabaseId, slot, generation};
	memcpy(bgw.bgw_extra, &start, sizeof(start));
	bgw.bgw_notify_pid = MyProcPid;
	/* the handle outlives the launcher's transaction: keep it in TopMemoryContext */
	if (started[slot].handle)
		pfree(started[slot].handle);
	started[slot].handle = NULL;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	bool ok = RegisterDynamicBackgroundWorker(&bgw, &started[slot].handle);
	MemoryContextSwitchTo(old);
	if (!ok) {
		started[slot].handle = NULL;
		return false;
	}
	started[slot].generation = generation;
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

void
cdc_pin_bgworker_session(void)
{
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	/*
	 * The session user: the bootstrap superuser the session connected as.
	 * A database's session_authorization is applied to a background worker
	 * that connects without a role (InitializeSessionUserIdStandalone
	 * records no setting of it, as a client's InitializeSessionUserId does
	 * with PGC_S_OVERRIDE), and made the owner, who need not be a superuser,
	 * the session user: the launcher failed at once reading cdc.subscription
	 * and was started again, without end (security review h2,
	 * test/t/163_worker_database_session_authorization.pl).  Its check hook
	 * reads the catalog: in a transaction.
	 */
	const bool own_xact = !IsTransactionState();
	if (own_xact)
		StartTransactionCommand();
	SetConfigOption("session_authorization", GetUserNameFromId(BOOTSTRAP_SUPERUSERID, false), PGC_SUSET,
	                PGC_S_OVERRIDE);
	if (own_xact)
		CommitTransactionCommand();
	/* and no other role on top of it */
	SetConfigOption("role", "none", PGC_SUSET, PGC_S_OVERRIDE);
}

void
cdc_database_launcher_main(Datum arg)
{
	Oid db = DatumGetObjectId(arg);

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(db, InvalidOid, 0);
	if (!registry_attach_database_launcher())
		proc_exit(0); /* another launcher serves this database */
	pgstat_report_appname("cdc_apply launcher");
	/* every statement of this session (and cdc.prune()) resolves names in pg_catalog only (docs/security.md) */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	/* it reads cdc.subscription and writes (status rows, cdc.prune()) whatever the database's settings say */
	cdc_pin_bgworker_session();

	StartedWorker *started = (StartedWorker *) MemoryContextAllocZero(TopMemoryContext,
	                                                                  sizeof(StartedWorker) * CdcRegistry->nslots);
	bool served = false;
	bool version_warned = false; /* said once per mismatch that the schema is of another version */

	for (;;) {
		int nsubs = 0;
		int *subids = NULL;
		bool *enabled = NULL;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending) {
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/* before the snapshot: a subscription committed after this is seen by the next look (registry_report_idle) */
		TimestampTz last_prune = registry_begin_look();
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		SPI_connect();
		pgstat_report_activity(STATE_RUNNING, "reading cdc.subscription");
		bool isnull = false;
		bool installed = SPI_execute("SELECT pg_catalog.to_regclass('cdc.subscription') IS NOT NULL", true, 1) == SPI_OK_SELECT &&
		                 DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		if (!installed) {
			SPI_finish();
			PopActiveSnapshot();
			CommitTransactionCommand();
			/* not installed (or dropped: DROP EXTENSION): stop what still runs, hold no connection here */
			int stopped = registry_stop_workers(MyDatabaseId, NULL, 0);
			registry_report_database(false, 0);
			if (served || stopped > 0)
				ereport(LOG, (errmsg("cdc_apply launcher: cdc_apply is no longer installed in this database; %d workers "
				                     "stopped",
				                     stopped)));
			proc_exit(0);
		}
		/*
		 * The schema is that of another version than this module (the .so was
		 * replaced and ALTER EXTENSION cdc_apply UPDATE has not run yet): the
		 * workers and cdc.prune() would read tables and replication origins
		 * named as this version names them.  Start nothing, stop what runs,
		 * and look again every cdc.naptime (the update script wakes us).
		 */
		char *extversion = NULL;
		if (SPI_execute("SELECT e.extversion, (SELECT pg_catalog.count(*)::integer FROM cdc.subscription) "
		                "FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'cdc_apply'",
		                true, 1) == SPI_OK_SELECT &&
		    SPI_processed == 1)
			extversion = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		if (extversion != NULL && strcmp(extversion, CDC_EXTVERSION) != 0) {
			int nold = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
			if (!version_warned)
				ereport(WARNING, (errmsg("cdc_apply launcher: the extension installed in this database is version %s, "
				                         "the loaded module is %s: no apply worker starts until the update",
				                         extversion, CDC_EXTVERSION),
				                  errhint("Run ALTER EXTENSION cdc_apply UPDATE in this database.")));
			version_warned = true;
			SPI_finish();
			PopActiveSnapshot();
			CommitTransactionCommand();
			pgstat_report_activity(STATE_IDLE, NULL);
			(void) registry_stop_workers(MyDatabaseId, NULL, 0);
			if (nold == 0) {
				/* nothing to guard and nothing to run until the update (whose script wakes the cluster launcher) */
				if (registry_report_idle(false))
					proc_exit(0);
				continue;
			}
			registry_report_database(true, nold); /* the DROP DATABASE guard still counts them */
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, cdc_naptime * 1000L,
			                 PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}
		version_warned = false;
		if (!served)
			ereport(DEBUG1, (errmsg("cdc_apply launcher: serving this database")));
		served = true;
		if (SPI_execute("SELECT s.subid, s.enabled FROM cdc.subscription s ORDER BY s.subid", true, 0) == SPI_OK_SELECT) {
			nsubs = (int) SPI_processed;
			subids = (int *) MemoryContextAlloc(TopTransactionContext, sizeof(int) * (nsubs + 1));
			enabled = (bool *) MemoryContextAlloc(TopTransactionContext, sizeof(bool) * (nsubs + 1));
			for (int i = 0; i < nsubs; i++) {
				subids[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
				enabled[i] = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
			}
		}

		/* stop workers of disabled or dropped subscriptions */
		int *keep = (int *) MemoryContextAlloc(TopTransactionContext, sizeof(int) * (nsubs + 1));
		int nkeep = 0;
		for (int i = 0; i < nsubs; i++)
			if (enabled[i])
				keep[nkeep++] = subids[i];
		(void) registry_stop_workers(MyDatabaseId, keep, nkeep);

		/* reservations whose worker never started (it failed, or an earlier launcher made them) */
		for (int s = 0; s < CdcRegistry->nslots; s++)
			if (started[s].handle != NULL && !handle_alive(started[s].handle)) {
				registry_release_reservation(s, started[s].generation);
				pfree(started[s].handle);
				started[s].handle = NULL;
			}
		registry_reclaim_stale_reservations(MyDatabaseId, CDC_RESERVATION_TIMEOUT_MS);

		/* start workers of enabled subscriptions that have none: one of the cdc.max_workers slots of all databases */
		for (int i = 0; i < nsubs; i++) {
			if (!enabled[i] || registry_subscription_has_worker(MyDatabaseId, subids[i]))
				continue;
			int slot;
			uint32 generation;
			if (!registry_reserve_slot(subids[i], &slot, &generation)) {
				mark_waiting(subids[i], psprintf("no free worker slot (cdc.max_workers = %d)", cdc_max_workers));
				continue;
			}
			if (!start_apply_worker(started, slot, generation, subids[i])) {
				registry_release_reservation(slot, generation);
				mark_waiting(subids[i], psprintf("no free background worker slot (max_worker_processes = %d)",
				                                 max_worker_processes));
			}
		}
		/* DROP DATABASE of this database is refused while it has any (lifecycle.cpp) */
		registry_report_database(true, nsubs);
		/* the shared counters of dropped subscriptions go (shared_stats.hpp) */
		cdc::pg::SharedStatsForgetSubscriptions(MyDatabaseId, subids, nsubs);
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_activity(STATE_IDLE, NULL);
		/* the replay horizon's schedule (pg/horizon.hpp), kept in the registry across launchers */
		TimestampTz pruned = cdc::pg::LauncherPruneIfDue(last_prune);
		if (pruned != last_prune)
			registry_note_prune(pruned);

		/*
		 * No subscription: nothing to start, stop or guard until one is
		 * created, whose transaction wakes the cluster launcher at commit
		 * (lifecycle.cpp).  This launcher's max_worker_processes slot is
		 * freed; the cluster launcher starts one again when the next
		 * scheduled cdc.prune() is due (docs/security.md, "Shared
		 * state").
		 */
		if (nsubs == 0) {
			if (registry_report_idle(true)) {
				ereport(DEBUG1, (errmsg("cdc_apply launcher: no subscription in this database; leaving until the next "
				                        "scheduled cdc.prune() or a new subscription")));
				proc_exit(0);
			}
			/* a subscription was created since this look began: look again at once */
			if (!registry_creates_pending())
				continue;
			/* or one is being created: its commit wakes the cluster launcher, and this one looks again after cdc.naptime */
		}

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, cdc_naptime * 1000L,
		                 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

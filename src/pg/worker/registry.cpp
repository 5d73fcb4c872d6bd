// The launchers' registry in shared memory: see registry.hpp.
//
// PostgreSQL-regime code: no C++ objects with destructors.  The critical
// sections under CdcRegistryLock() only read and write the structs (and
// send a signal); nothing in them can ereport.
#include "core/stats_math.hpp"

#include "pg/guc.hpp"
#include "pg/worker/registry.hpp"

#include <csignal>

extern "C" {
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

CdcRegistryData *CdcRegistry = NULL;

namespace {

shmem_request_hook_type prev_shmem_request_hook = NULL;
shmem_startup_hook_type prev_shmem_startup_hook = NULL;
LWLock *registry_lock = NULL;

/* this process's own worker slot (apply worker) */
int my_slot = -1;
uint32 my_generation = 0;

Size
registry_size(void)
{
	Size size = MAXALIGN(sizeof(CdcRegistryData));
	size = add_size(size, mul_size(sizeof(CdcDatabase), cdc_max_databases));
	size = add_size(size, mul_size(sizeof(CdcWorkerSlot), cdc_max_workers));
	return size;
}

void
registry_shmem_request(void) noexcept
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(registry_size());
	RequestNamedLWLockTranche("cdc_apply registry", 1);
}

void
registry_shmem_startup(void) noexcept
{
	bool found;
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	CdcRegistry = (CdcRegistryData *) ShmemInitStruct("cdc_apply registry", registry_size(), &found);
	if (!found) {
		memset(CdcRegistry, 0, registry_size());
		CdcRegistry->ndatabases = cdc_max_databases;
		CdcRegistry->nslots = cdc_max_workers;
		CdcWorkerSlot *slots = registry_slots();
		for (int i = 0; i < CdcRegistry->nslots; i++) {
			pg_atomic_init_u64(&slots[i].copy_rows, 0);
			pg_atomic_init_u64(&slots[i].copy_bytes, 0);
		}
	}
	registry_lock = &(GetNamedLWLockTranche("cdc_apply registry"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

/* before_shmem_exit of a database launcher: its database has no launcher any more */
void
database_launcher_detach(int code, Datum arg) noexcept
{
	Oid db = DatumGetObjectId(arg);
	LWLockReleaseAll();
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcDatabase *d = registry_find_database(db, false);
	if (d != NULL && d->launcher_pid == MyProcPid) {
		d->launcher_pid = 0;
		d->launcher_proc = NULL;
		if (d->state == CDC_DB_CHECKING)
			d->state = CDC_DB_UNKNOWN; /* exited without reporting: look again */
	}
	LWLockRelease(registry_lock);
	registry_wake_cluster_launcher();
}

/* before_shmem_exit of an apply worker: its slot is free again */
void
worker_detach(int code, Datum arg) noexcept
{
	LWLockReleaseAll();
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcWorkerSlot *s = &registry_slots()[my_slot];
	if (s->in_use && s->generation == my_generation && s->pid == MyProcPid) {
		s->in_use = false;
		s->pid = 0;
		s->copy_state = CDC_COPY_NONE;
	}
	LWLockRelease(registry_lock);
	my_slot = -1;
}

} // namespace

void
cdc::pg::InstallRegistry(bool preloaded)
{
	if (!preloaded)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = registry_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = registry_shmem_startup;
}

LWLock *
CdcRegistryLock(void)
{
	return registry_lock;
}

CdcDatabase *
registry_databases(void)
{
	return (CdcDatabase *) ((char *) CdcRegistry + MAXALIGN(sizeof(CdcRegistryData)));
}

CdcWorkerSlot *
registry_slots(void)
{
	return (CdcWorkerSlot *) (registry_databases() + CdcRegistry->ndatabases);
}

CdcDatabase *
registry_find_database(Oid db, bool create)
{
	CdcDatabase *dbs = registry_databases();
	CdcDatabase *free_entry = NULL;
	for (int i = 0; i < CdcRegistry->ndatabases; i++) {
		if (dbs[i].state != CDC_DB_FREE && dbs[i].dboid == db)
			return &dbs[i];
		if (dbs[i].state == CDC_DB_FREE && free_entry == NULL)
			free_entry = &dbs[i];
	}
	if (!create)
		return NULL;
	if (free_entry == NULL) {
		CdcRegistry->untracked++;
		return NULL;
	}
	memset(free_entry, 0, sizeof(CdcDatabase));
	free_entry->dboid = db;
	free_entry->state = CDC_DB_UNKNOWN;
	free_entry->nsubs = -1;
	return free_entry;
}

void
registry_wake_cluster_launcher(void)
{
	if (CdcRegistry == NULL)
		return;
	PGPROC *proc = CdcRegistry->cluster_launcher; /* a pointer read is atomic; a stale one only wakes someone in vain */
	if (proc != NULL)
		SetLatch(&proc->procLatch);
}

bool
registry_attach_database_launcher(void)
{
	if (CdcRegistry == NULL)
		return false;
	bool ok = false;
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcDatabase *d = registry_find_database(MyDatabaseId, true);
	if (d != NULL && d->launcher_pid == 0) {
		d->launcher_pid = MyProcPid;
		d->launcher_proc = MyProc;
		if (d->state == CDC_DB_UNKNOWN || d->state == CDC_DB_NONE)
			d->state = CDC_DB_CHECKING;
		ok = true;
	}
	LWLockRelease(registry_lock);
	if (ok)
		before_shmem_exit(database_launcher_detach, ObjectIdGetDatum(MyDatabaseId));
	return ok;
}

void
registry_report_database(bool installed, int nsubs)
{
	if (CdcRegistry == NULL)
		return;
	bool changed = false;
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcDatabase *d = registry_find_database(MyDatabaseId, true);
	if (d != NULL) {
		int state = installed ? CDC_DB_SERVED : CDC_DB_NONE;
		changed = d->state != state || d->urgent;
		d->state = state;
		/* a subscription being created (its transaction still open) counts: DROP DATABASE must wait for it */
		d->nsubs = installed ? Max(nsubs, d->pending_creates > 0 ? 1 : 0) : 0;
		d->urgent = false;
		d->reported = true;
	}
	LWLockRelease(registry_lock);
	if (changed)
		registry_wake_cluster_launcher(); /* a waiting DROP DATABASE, or the next check */
}

TimestampTz
registry_begin_look(void)
{
	if (CdcRegistry == NULL)
		return 0;
	TimestampTz last = 0;
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcDatabase *d = registry_find_database(MyDatabaseId, false);
	if (d != NULL) {
		d->wanted = false;
		last = d->last_prune;
	}
	LWLockRelease(registry_lock);
	return last;
}

void
registry_note_prune(TimestampTz at)
{
	if (CdcRegistry == NULL)
		return;
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcDatabase *d = registry_find_database(MyDatabaseId, false);
	if (d != NULL)
		d->last_prune = at;
	LWLockRelease(registry_lock);
}

bool
registry_report_idle(bool prune_scheduled)
{
	if (CdcRegistry == NULL)
		return true;
	bool idle = true;
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcDatabase *d = registry_find_database(MyDatabaseId, true);
	if (d != NULL) {
		if (d->wanted || d->pending_creates > 0)
			idle = false; /* committed after this look began, or a subscription is being created: look again */
		else {
			d->state = CDC_DB_IDLE;
			d->nsubs = 0;
			d->prune_scheduled = prune_scheduled;
			d->urgent = false;
			d->reported = true;
		}
	}
	LWLockRelease(registry_lock);
	if (idle)
		registry_wake_cluster_launcher(); /* a waiting DROP DATABASE, or the next check */
	return idle;
}

bool
registry_creates_pending(void)
{
	if (CdcRegistry == NULL)
		return false;
	LWLockAcquire(registry_lock, LW_SHARED);
	CdcDatabase *d = registry_find_database(MyDatabaseId, false);
	bool pending = d != NULL && d->pending_creates > 0;
	LWLockRelease(registry_lock);
	return pending;
}

bool
registry_reserve_slot(int subid, int *index, uint32 *generation)
{
	if (CdcRegistry == NULL)
		return false;
	bool ok = false;
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcWorkerSlot *slots = registry_slots();
	for (int i = 0; i < CdcRegistry->nslots; i++) {
		if (slots[i].in_use)
			continue;
		slots[i].in_use = true;
		slots[i].generation++;
		slots[i].dboid = MyDatabaseId;
		slots[i].subid = subid;
		slots[i].pid = 0;
		slots[i].reserved_at = GetCurrentTimestamp();
		slots[i].copy_state = CDC_COPY_NONE;
		*index = i;
		*generation = slots[i].generation;
		ok = true;
		break;
	}
	LWLockRelease(registry_lock);
	return ok;
}

void
registry_release_reservation(int index, uint32 generation)
{
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcWorkerSlot *s = &registry_slots()[index];
	if (s->in_use && s->generation == generation && s->pid == 0)
		s->in_use = false;
	LWLockRelease(registry_lock);
}

bool
registry_worker_attach(int index, uint32 generation, Oid db, int subid)
{
	if (CdcRegistry == NULL || index < 0 || index >= CdcRegistry->nslots)
		return false;
	bool ok = false;
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcWorkerSlot *s = &registry_slots()[index];
	if (s->in_use && s->generation == generation && s->pid == 0 && s->dboid == db && s->subid == subid) {
		s->pid = MyProcPid;
		ok = true;
	}
	LWLockRelease(registry_lock);
	if (ok) {
		my_slot = index;
		my_generation = generation;
		before_shmem_exit(worker_detach, (Datum) 0);
	}
	return ok;
}

bool
registry_subscription_has_worker(Oid db, int subid)
{
	bool found = false;
	LWLockAcquire(registry_lock, LW_SHARED);
	CdcWorkerSlot *slots = registry_slots();
	for (int i = 0; i < CdcRegistry->nslots && !found; i++)
		found = slots[i].in_use && slots[i].dboid == db && slots[i].subid == subid;
	LWLockRelease(registry_lock);
	return found;
}

/*
 * SIGTERM to the attached workers of database `db` whose subscription is
 * not in keep_subids (all of them when nkeep is 0); returns how many were
 * signalled.  The signal is sent under the lock (shared), so the worker
 * cannot detach and its pid be reused meanwhile, as in launcher.c's
 * logicalrep_worker_stop.
 */
int
registry_stop_workers(Oid db, const int *keep_subids, int nkeep)
{
	int n = 0;
	LWLockAcquire(registry_lock, LW_SHARED);
	CdcWorkerSlot *slots = registry_slots();
	for (int i = 0; i < CdcRegistry->nslots; i++) {
		if (!slots[i].in_use || slots[i].dboid != db || slots[i].pid == 0)
			continue;
		bool keep = false;
		for (int k = 0; k < nkeep && !keep; k++)
			keep = keep_subids[k] == slots[i].subid;
		if (keep)
			continue;
		kill(slots[i].pid, SIGTERM);
		n++;
	}
	LWLockRelease(registry_lock);
	return n;
}

int
registry_stop_subscription_workers(Oid db, int subid, int *pids, int max)
{
	int n = 0;
	if (CdcRegistry == NULL)
		return 0;
	LWLockAcquire(registry_lock, LW_SHARED);
	CdcWorkerSlot *slots = registry_slots();
	for (int i = 0; i < CdcRegistry->nslots; i++) {
		if (!slots[i].in_use || slots[i].dboid != db || slots[i].subid != subid || slots[i].pid == 0)
			continue;
		/*
		 * Never the calling worker itself: a table owner's trigger code that
		 * the worker applies may drop a table of its subscription, and the
		 * sql_drop event trigger (enabled ALWAYS, so also in the worker's
		 * replica session) then stops that subscription's workers.  The
		 * worker would end mid-transaction, be restarted at once and apply
		 * the same transaction again, without end.  It reads its tables
		 * again at its next restart.
		 */
		if (slots[i].pid == MyProcPid)
			continue;
		kill(slots[i].pid, SIGTERM);
		if (n < max)
			pids[n] = slots[i].pid;
		n++;
	}
	LWLockRelease(registry_lock);
	return n;
}

void
registry_copy_start(const char *schema, const char *table, int64 estimate)
{
	if (CdcRegistry == NULL || my_slot < 0)
		return;
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcWorkerSlot *s = &registry_slots()[my_slot];
	namestrcpy(&s->copy_schema, schema);
	namestrcpy(&s->copy_table, table);
	s->copy_estimate = estimate;
	s->copy_started = GetCurrentTimestamp();
	s->copy_finished = 0;
	pg_atomic_write_u64(&s->copy_rows, 0);
	pg_atomic_write_u64(&s->copy_bytes, 0);
	s->copy_state = CDC_COPY_RUNNING;
	LWLockRelease(registry_lock);
}

void
registry_copy_progress(uint64 rows, uint64 bytes)
{
	if (CdcRegistry == NULL || my_slot < 0)
		return;
	CdcWorkerSlot *s = &registry_slots()[my_slot];
	pg_atomic_write_u64(&s->copy_rows, rows);
	pg_atomic_write_u64(&s->copy_bytes, bytes);
}

void
registry_copy_done(uint64 rows, uint64 bytes)
{
	if (CdcRegistry == NULL || my_slot < 0)
		return;
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcWorkerSlot *s = &registry_slots()[my_slot];
	pg_atomic_write_u64(&s->copy_rows, rows);
	pg_atomic_write_u64(&s->copy_bytes, bytes);
	s->copy_finished = GetCurrentTimestamp();
	s->copy_state = CDC_COPY_DONE;
	LWLockRelease(registry_lock);
}

void
registry_reclaim_stale_reservations(Oid db, int max_age_ms)
{
	if (CdcRegistry == NULL)
		return;
	TimestampTz now = GetCurrentTimestamp();
	LWLockAcquire(registry_lock, LW_EXCLUSIVE);
	CdcWorkerSlot *slots = registry_slots();
	for (int i = 0; i < CdcRegistry->nslots; i++)
		if (slots[i].in_use && slots[i].pid == 0 && (!OidIsValid(db) || slots[i].dboid == db) &&
		    TimestampDifferenceExceeds(slots[i].reserved_at, now, max_age_ms))
			slots[i].in_use = false;
	LWLockRelease(registry_lock);
}

/*
 * cdc._copy_progress() RETURNS TABLE (subid integer, worker_pid integer,
 * schema_name text, table_name text, state text, rows_copied bigint,
 * bytes_copied bigint, rows_estimated bigint, percent float8,
 * rows_per_second float8, seconds_left float8, started_at timestamptz,
 * finished_at timestamptz): the table copy of each apply worker of this
 * database, running (state copying) or the last one it finished (done),
 * from shared memory (docs/worker.md, "Progress").  rows_estimated is the
 * source planner's estimate (NULL unknown); percent stays below 100 until
 * the copy is done.  No rows without shared_preload_libraries.  No errors.
 */
CDC_PG_FUNCTION(cdc_copy_progress)
{
	cdc::pg::PgCall([&]() {
		InitMaterializedSRF(fcinfo, 0);
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		if (CdcRegistry == NULL)
			return;
		struct Row {
			int subid, pid, state;
			NameData schema, table;
			int64 rows, bytes, estimate;
			TimestampTz started, finished;
		};
		Row *rows = (Row *) palloc(sizeof(Row) * (CdcRegistry->nslots + 1));
		int n = 0;
		LWLockAcquire(registry_lock, LW_SHARED);
		CdcWorkerSlot *slots = registry_slots();
		for (int i = 0; i < CdcRegistry->nslots; i++) {
			CdcWorkerSlot *s = &slots[i];
			if (!s->in_use || s->dboid != MyDatabaseId || s->copy_state == CDC_COPY_NONE)
				continue;
			Row *r = &rows[n++];
			r->subid = s->subid;
			r->pid = s->pid;
			r->state = s->copy_state;
			r->schema = s->copy_schema;
			r->table = s->copy_table;
			r->rows = (int64) pg_atomic_read_u64(&s->copy_rows);
			r->bytes = (int64) pg_atomic_read_u64(&s->copy_bytes);
			r->estimate = s->copy_estimate;
			r->started = s->copy_started;
			r->finished = s->copy_finished;
		}
		LWLockRelease(registry_lock);
		TimestampTz now = GetCurrentTimestamp();
		for (int i = 0; i < n; i++) {
			Row *r = &rows[i];
			bool done = r->state == CDC_COPY_DONE;
			double elapsed = (double) ((done ? r->finished : now) - r->started) / 1e6;
			cdc::CopyProgress p = cdc::EstimateCopyProgress(r->rows, r->estimate, elapsed, done);
			Datum values[13];
			bool nulls[13] = {false};
			values[0] = Int32GetDatum(r->subid);
			values[1] = Int32GetDatum(r->pid);
			values[2] = CStringGetTextDatum(NameStr(r->schema));
			values[3] = CStringGetTextDatum(NameStr(r->table));
			values[4] = CStringGetTextDatum(done ? "done" : "copying");
			values[5] = Int64GetDatum(r->rows);
			values[6] = Int64GetDatum(r->bytes);
			values[7] = Int64GetDatum(r->estimate);
			nulls[7] = r->estimate < 0;
			values[8] = Float8GetDatum(p.percent.value_or(0));
			nulls[8] = !p.percent;
			values[9] = Float8GetDatum(p.rows_per_second.value_or(0));
			nulls[9] = !p.rows_per_second;
			values[10] = Float8GetDatum(p.seconds_left.value_or(0));
			nulls[10] = !p.seconds_left;
			values[11] = TimestampTzGetDatum(r->started);
			values[12] = TimestampTzGetDatum(r->finished);
			nulls[12] = !done;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	});
	return (Datum) 0;
}

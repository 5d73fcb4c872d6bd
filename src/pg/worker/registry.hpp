// The launchers' registry in shared memory (docs/worker.md, "Every
// database"): what the cluster launcher knows of each database (is
// cdc_apply installed there, how many subscriptions it has, which
// database launcher serves it; for one without subscriptions, which keeps
// no resident launcher, when its next scheduled cdc.prune() is due and
// whether a new subscription wants one now), and the apply-worker slots that
// cdc.max_workers caps across all databases, each with the progress of the
// table copy its worker runs (docs/worker.md, "Progress").
//
// The counterpart of LogicalRepCtx in PostgreSQL's launcher.c: one LWLock
// (CdcRegistryLock()) protects every field but the copy counters, which the
// worker alone writes (atomics).  Allocated by the shmem hooks that
// InstallRegistry() installs from _PG_init when the library is preloaded;
// CdcRegistry is NULL in a backend of a server that did not preload
// cdc_apply (the SQL path), and every function here then does nothing.
//
// PostgreSQL regime; plain C structs, no C++ objects.  Never ereport while
// holding the lock.
#pragma once

#include "pg/guard.hpp"

extern "C" {
#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
}

struct PGPROC;

/* What the cluster launcher knows of a database (CdcDatabase.state) */
#define CDC_DB_FREE 0     /* the entry is free */
#define CDC_DB_UNKNOWN 1  /* not looked at yet (new, after a server start, or after CREATE EXTENSION) */
#define CDC_DB_CHECKING 2 /* its database launcher was started and has not reported yet */
#define CDC_DB_SERVED 3   /* cdc_apply is installed: a database launcher serves its subscriptions */
#define CDC_DB_NONE 4     /* cdc_apply is not installed there: nobody stays connected to it */
#define CDC_DB_IDLE 5     /* installed, no subscription: no resident launcher; one is started when its prune is due or when wanted */

typedef struct CdcDatabase {
	Oid dboid;
	int state;              /* CDC_DB_* */
	int nsubs;              /* CDC_DB_SERVED: its subscriptions (enabled or not) as last counted */
	int launcher_pid;       /* the database launcher attached to it, 0 when none runs */
	PGPROC *launcher_proc;  /* its PGPROC (NULL when none runs): a commit that creates or enables a subscription sets its latch */
	bool urgent;            /* a DROP DATABASE waits for its state: look at it before the others */
	TimestampTz hold_until; /* no database launcher is started in it before this (a command needs it without sessions) */
	TimestampTz started_at; /* when its database launcher was last started */
	bool reported;          /* its database launcher reported since it was last started */
	bool wanted;            /* a transaction that created a subscription (or the extension) committed: look at it now */
	bool prune_scheduled;   /* CDC_DB_IDLE: a launcher is started when the scheduled cdc.prune() is due (last_prune + the current cdc.prune_interval) */
	TimestampTz last_prune; /* when a launcher last ran its scheduled cdc.prune() (0: not since the server started) */
	int pending_creates;    /* transactions that called cdc._note_subscription_database() and have not ended: counted as a subscription */
} CdcDatabase;

/* CdcWorkerSlot.copy_state */
#define CDC_COPY_NONE 0
#define CDC_COPY_RUNNING 1
#define CDC_COPY_DONE 2

typedef struct CdcWorkerSlot {
	bool in_use;
	uint32 generation;       /* bumped at every reservation: a late worker of an earlier one sees it is not its slot */
	Oid dboid;
	int subid;
	int pid;                 /* the apply worker once attached, 0 while it starts */
	TimestampTz reserved_at;
	/* the table copy of this worker (written by the worker only) */
	int copy_state;          /* CDC_COPY_* */
	NameData copy_schema;
	NameData copy_table;
	int64 copy_estimate;     /* the source planner's estimate of the rows, -1 unknown */
	TimestampTz copy_started;
	TimestampTz copy_finished;
	pg_atomic_uint64 copy_rows;
	pg_atomic_uint64 copy_bytes;
} CdcWorkerSlot;

typedef struct CdcRegistryData {
	PGPROC *cluster_launcher; /* set while the cluster launcher runs: woken with SetLatch */
	int ndatabases;           /* capacity: cdc.max_databases */
	int nslots;               /* cdc.max_workers */
	int64 untracked;          /* databases that found no free entry (logged) */
	/* followed by CdcDatabase[ndatabases] and CdcWorkerSlot[nslots] */
} CdcRegistryData;

extern CdcRegistryData *CdcRegistry;

namespace cdc::pg {

// Requests and initializes the registry's shared memory (shmem_request_hook
// and shmem_startup_hook).  Only when preloaded; called by _PG_init.
void InstallRegistry(bool preloaded);

} // namespace cdc::pg

LWLock *CdcRegistryLock(void);
CdcDatabase *registry_databases(void); /* [CdcRegistry->ndatabases] */
CdcWorkerSlot *registry_slots(void);   /* [CdcRegistry->nslots] */

/* Under the lock: the entry of database `db`, or NULL; `create`: take a free entry for it (NULL when full). */
CdcDatabase *registry_find_database(Oid db, bool create);

/* Wakes the cluster launcher (no lock needed). */
void registry_wake_cluster_launcher(void);

/*
 * Database launcher: attaches to its database's entry (false: another
 * launcher serves it, or the registry is full), detaching when the process
 * exits; reports the database's state (served with `nsubs`
 * subscriptions, or not installed).
 */
bool registry_attach_database_launcher(void);
void registry_report_database(bool installed, int nsubs);
/*
 * Database launcher, at the start of each look at cdc.subscription (before
 * its snapshot): clears the database's `wanted` flag, and returns when the
 * scheduled cdc.prune() last ran in this database (0: not yet).
 */
TimestampTz registry_begin_look(void);
/* Database launcher: its scheduled cdc.prune() ran at `at`. */
void registry_note_prune(TimestampTz at);
/*
 * Database launcher of a database with the extension and no subscription:
 * records that it needs no resident launcher until its scheduled
 * cdc.prune() is due (`prune_scheduled`; false: only when woken) and
 * returns true, the launcher then exits; false when a subscription was
 * created (or the extension created) since its look began (`wanted`): it
 * must look again.  When the prune is due is not fixed here: the cluster
 * launcher reckons it from last_prune and the cdc.prune_interval of the
 * moment, so that a reload changing it (from 0, or shorter) is followed.
 */
bool registry_report_idle(bool prune_scheduled);
/*
 * Whether a transaction creating a subscription in this database is still
 * open (cdc._note_subscription_database() counted it, its end uncounts it):
 * the database launcher then stays and looks again after cdc.naptime, and
 * the DROP DATABASE guard counts a subscription (a drop that went through
 * left the slot the creation makes at commit on the source: review h1).
 */
bool registry_creates_pending(void);

/*
 * Apply-worker slots.  A database launcher reserves one for a subscription
 * (false: all cdc.max_workers are taken, in any database), releases it if
 * its worker never started, and stops the worker of a subscription;
 * the worker attaches to it (false: not its slot) and is detached when it
 * exits.
 */
bool registry_reserve_slot(int subid, int *index, uint32 *generation);
void registry_release_reservation(int index, uint32 generation);
bool registry_worker_attach(int index, uint32 generation, Oid db, int subid);
bool registry_subscription_has_worker(Oid db, int subid);
int registry_stop_workers(Oid db, const int *keep_subids, int nkeep);
/*
 * SIGTERM to every attached worker of subscription `subid` of database
 * `db` (whatever pid its status row recorded: a worker that just started
 * has not written it yet); up to `max` of their pids go to pids[].
 * Returns how many were signalled.
 */
int registry_stop_subscription_workers(Oid db, int subid, int *pids, int max);

/* The worker's table copy (docs/worker.md, "Progress"): started, rows so far, finished. */
void registry_copy_start(const char *schema, const char *table, int64 estimate);
void registry_copy_progress(uint64 rows, uint64 bytes);
void registry_copy_done(uint64 rows, uint64 bytes);

/* What the database launcher passes to an apply worker (bgw_extra). */
typedef struct CdcWorkerStart {
	Oid dboid;
	int slot;
	uint32 generation;
} CdcWorkerStart;

/*
 * Frees the reservations of database `db` (InvalidOid: of every database;
 * the cluster launcher, for databases without a resident launcher) that no
 * worker took within `max_age_ms`.
 */
void registry_reclaim_stale_reservations(Oid db, int max_age_ms);

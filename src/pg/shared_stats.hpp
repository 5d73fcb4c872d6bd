// Counters in shared memory that survive rollbacks (docs/operations.md,
// "Counters"): what a transactional table cannot record.
//
//  * calls of cdc_apply() and cdc_apply_batch() and their failures by
//    SQLSTATE, per database: counted at the entry points (CDC_PG_ENTRY_POINT
//    in guard.hpp), the failure in the error path of the wrapper, so a call
//    whose transaction rolls back is still counted.  Lock-free (a fixed
//    open-addressing table whose keys are claimed by compare-and-swap, and
//    atomic adds): no allocation, no lock, nothing that can fail;
//  * per subscription: the worker's errors (by SQLSTATE), its restarts
//    after an error and its one-by-one retries of a failed group, and the
//    apply latency (source commit to local commit) of every applied source
//    transaction as a histogram of fixed buckets (core/stats_math.hpp).
//    Entries are created and removed under an LWLock, counted with atomics.
//
// Like pg_stat_statements, the memory is allocated only when the library is
// preloaded (shared_preload_libraries); without it every function here does
// nothing and the views say so (cdc.shared_stats.available = false).
// cdc.reset_shared_stats() zeroes the counters of the current database.
//
// PostgreSQL regime; the Count* functions are noexcept and safe in error
// paths (no palloc, no ereport, no lock).
#pragma once

#include "pg/guard.hpp"

namespace cdc::pg {

// Requests the shared memory (shmem_request_hook / shmem_startup_hook).
// Only when preloaded; called by _PG_init.
void InstallSharedStats(bool preloaded);

// Which entry point a call counter belongs to.
enum CallKind { kCallApply = 1, kCallApplyBatch = 2 };

// A call of an entry point started (counted before its body runs).
void CountCall(int kind) noexcept;
// The call failed with `sqlerrcode` (PostgreSQL's packed SQLSTATE).
void CountFailedCall(int kind, int sqlerrcode) noexcept;

// The apply worker of subscription `subid` (this database): an error it
// records, a start after an error (`group` false) or a failed group
// re-applied one by one (`group` true), and the latencies (microseconds,
// source commit to local commit) of the `n` source transactions of a
// local commit.  May take the LWLock; never ereport.
void WorkerCountError(int subid, int sqlerrcode) noexcept;
void WorkerCountRetry(int subid, bool group) noexcept;
void WorkerCountLatencies(int subid, const int64 *micros, int n) noexcept;
// The apply worker's consecutive errors that it could not record in
// cdc.subscription_state (whose retry_count then stays as it was): `failed`
// true counts one more and returns how many in a row (at least 1), false
// (an error recorded, or streaming again) resets them and returns 0.  Its
// backoff adds them to retry_count, so that it doubles also while the
// record cannot be written (review h2, TAP 126).  May take the LWLock;
// never ereport.
int WorkerUnrecordedErrors(int subid, bool failed) noexcept;

// Launchers: forget the counters of a dropped database, and those of the
// subscriptions of database `db` that are not in subids[n].
void SharedStatsForgetDatabase(Oid db) noexcept;
void SharedStatsForgetSubscriptions(Oid db, const int *subids, int n) noexcept;

} // namespace cdc::pg

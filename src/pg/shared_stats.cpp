// Counters in shared memory that survive rollbacks: see shared_stats.hpp.
//
// PostgreSQL-regime code: plain C structs in shared memory, no C++ objects.
// The call counters are lock-free; the subscription counters' entries are
// created and removed under the LWLock "cdc_apply shared stats" and counted
// with atomics.  The SQL functions at the end read them (docs/operations.md).
#include "core/stats_math.hpp"

#include "pg/shared_stats.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace {

/* Capacity of the call counters: (database, entry point, SQLSTATE) triples, plus one per (database, entry point) for the calls. */
constexpr int kCallEntries = 1024;
/*
 * SQLSTATEs of failed calls kept apart per (database, entry point); the
 * failures of any other SQLSTATE count under kOtherSqlstate.  The table is
 * shared by every database and an entry is never freed while its database
 * exists: a table owner whose trigger raised a new SQLSTATE at every call
 * (RAISE accepts any five digits and capital letters) filled it, and no
 * other database's calls were counted until the server restarted (review
 * h3, test/t/121_call_stats_exhaustion.pl).  One database now takes at
 * most 2 * (1 + 32 + 1) entries.
 */
constexpr int kCallSqlstatesPerEntryPoint = 32;
/* every 6-bit field 63: no SQLSTATE packs to it (its characters are 0-9 and A-Z); shown as 'other' */
constexpr int kOtherSqlstate = 0x3FFFFFFF;
/* Capacity of the subscription counters (every database together). */
constexpr int kSubscriptionEntries = 512;
/* SQLSTATEs of worker errors kept apart per subscription; others count as "other". */
constexpr int kWorkerSqlstates = 8;

/*
 * One call counter.  key = database OID << 32 | entry point << 30 |
 * SQLSTATE (30 bits, PostgreSQL's packed form; 0 for the calls counter);
 * 0 = free.  A key is claimed once by compare-and-swap and never freed
 * while its database exists.
 */
struct CallEntry {
	pg_atomic_uint64 key;
	pg_atomic_uint64 count;
	pg_atomic_uint64 since; /* TimestampTz: created or last reset */
};

struct SubscriptionEntry {
	Oid dboid; /* InvalidOid: free */
	int subid;
	TimestampTz since;
	pg_atomic_uint64 errors;
	pg_atomic_uint64 retries;
	pg_atomic_uint64 group_retries;
	pg_atomic_uint32 unrecorded;             /* consecutive errors the worker could not record (its backoff) */
	pg_atomic_uint64 xacts;
	pg_atomic_uint64 latency_sum_us;
	pg_atomic_uint64 buckets[cdc::kLatencyBuckets];
	int sqlstates[kWorkerSqlstates];        /* under the lock */
	int64 sqlstate_errors[kWorkerSqlstates]; /* under the lock */
	int64 other_errors;                      /* errors whose SQLSTATE found no place */
};

struct SharedStats {
	pg_atomic_uint64 lost; /* counts not kept because a table was full */
	CallEntry calls[kCallEntries];
	SubscriptionEntry subs[kSubscriptionEntries];
};

SharedStats *stats = NULL;
LWLock *stats_lock = NULL;
shmem_request_hook_type prev_shmem_request_hook = NULL;
shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* the apply worker's own entry (index), checked against its key before use */
int my_entry = -1;

void
stats_shmem_request(void) noexcept
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(SharedStats)));
	RequestNamedLWLockTranche("cdc_apply shared stats", 1);
}

void
stats_shmem_startup(void) noexcept
{
	bool found;
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	stats = (SharedStats *) ShmemInitStruct("cdc_apply shared stats", sizeof(SharedStats), &found);
	if (!found) {
		memset(stats, 0, sizeof(SharedStats));
		pg_atomic_init_u64(&stats->lost, 0);
		for (int i = 0; i < kCallEntries; i++) {
			pg_atomic_init_u64(&stats->calls[i].key, 0);
			pg_atomic_init_u64(&stats->calls[i].count, 0);
			pg_atomic_init_u64(&stats->calls[i].since, 0);
		}
		for (int i = 0; i < kSubscriptionEntries; i++) {
			SubscriptionEntry *e = &stats->subs[i];
			pg_atomic_init_u64(&e->errors, 0);
			pg_atomic_init_u64(&e->retries, 0);
			pg_atomic_init_u64(&e->group_retries, 0);
			pg_atomic_init_u32(&e->unrecorded, 0);
			pg_atomic_init_u64(&e->xacts, 0);
			pg_atomic_init_u64(&e->latency_sum_us, 0);
			for (int k = 0; k < cdc::kLatencyBuckets; k++)
				pg_atomic_init_u64(&e->buckets[k], 0);
		}
	}
	stats_lock = &(GetNamedLWLockTranche("cdc_apply shared stats"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

uint64
call_key(Oid db, int kind, int sqlerrcode)
{
	return (uint64(db) << 32) | (uint64(kind & 3) << 30) | uint64(sqlerrcode & 0x3FFFFFFF);
}

/* The entry of `key`, NULL when it has none.  Lock-free: the whole probe sequence (a freed key leaves a hole). */
CallEntry *
find_call_entry(uint64 key, uint32 start) noexcept
{
	for (int probe = 0; probe < kCallEntries; probe++) {
		CallEntry *e = &stats->calls[(start + probe) % kCallEntries];
		if (pg_atomic_read_u64(&e->key) == key)
			return e;
	}
	return NULL;
}

uint32
call_start(uint64 key) noexcept
{
	return uint32((key * UINT64CONST(0x9E3779B97F4A7C15)) >> 40) % kCallEntries;
}

/*
 * The number of SQLSTATEs of the (database, entry point) `pair_key` (a key
 * with sqlstate 0) that have their own entry: neither the pair's call count
 * nor its kOtherSqlstate entry, which is returned in *other_entry when that
 * is not NULL (NULL when it has none).  Lock-free reads: exact only under
 * the lock.
 */
int
kept_sqlstates(uint64 pair_key, CallEntry **other_entry) noexcept
{
	const uint64 other_key = pair_key | uint64(kOtherSqlstate);
	int kept = 0;
	if (other_entry != NULL)
		*other_entry = NULL;
	for (int i = 0; i < kCallEntries; i++) {
		uint64 k = pg_atomic_read_u64(&stats->calls[i].key);
		if (k == other_key) {
			if (other_entry != NULL)
				*other_entry = &stats->calls[i];
		} else if (k != 0 && (k & ~uint64(0x3FFFFFFF)) == pair_key && k != pair_key)
			kept++;
	}
	return kept;
}

/*
 * Adds 1 to the counter of `key`.  Counting in an existing entry is
 * lock-free; a new entry is claimed under the lock (once per key), where a
 * failed-call key beyond kCallSqlstatesPerEntryPoint SQLSTATEs of its
 * (database, entry point) becomes that pair's kOtherSqlstate key.  No
 * allocation, no error: called in the error path of a call.
 */
void
count_key(uint64 key) noexcept
{
	CallEntry *e = find_call_entry(key, call_start(key));
	if (e != NULL) {
		pg_atomic_fetch_add_u64(&e->count, 1);
		return;
	}
	const uint64 pair_of_key = key & ~uint64(0x3FFFFFFF);
	const uint64 other_of_key = pair_of_key | uint64(kOtherSqlstate);
	if (key != pair_of_key && key != other_of_key) {
		/*
		 * A SQLSTATE without an entry once its pair has all its SQLSTATEs
		 * (entries are only freed with their database): straight to the
		 * pair's 'other', without the lock, so that failures beyond the cap
		 * do not queue on it (the apply workers' counters take it too).
		 */
		CallEntry *other_entry = NULL;
		if (kept_sqlstates(pair_of_key, &other_entry) >= kCallSqlstatesPerEntryPoint && other_entry != NULL) {
			pg_atomic_fetch_add_u64(&other_entry->count, 1);
			return;
		}
	}
	LWLockAcquire(stats_lock, LW_EXCLUSIVE);
	e = find_call_entry(key, call_start(key)); /* claimed meanwhile? */
	if (e == NULL && key != pair_of_key && key != other_of_key) {
		/* under the lock the count is exact: no pair ever has more than the cap */
		if (kept_sqlstates(pair_of_key, NULL) >= kCallSqlstatesPerEntryPoint) {
			key = other_of_key;
			e = find_call_entry(key, call_start(key));
		}
	}
	if (e == NULL) {
		const uint32 start = call_start(key);
		for (int probe = 0; probe < kCallEntries && e == NULL; probe++) {
			CallEntry *f = &stats->calls[(start + probe) % kCallEntries];
			if (pg_atomic_read_u64(&f->key) == 0) {
				/* count and since before the key: a lock-free reader finds the key with them set */
				pg_atomic_write_u64(&f->count, 0);
				pg_atomic_write_u64(&f->since, uint64(GetCurrentTimestamp()));
				pg_write_barrier();
				pg_atomic_write_u64(&f->key, key);
				e = f;
			}
		}
	}
	if (e != NULL)
		pg_atomic_fetch_add_u64(&e->count, 1);
	else
		pg_atomic_fetch_add_u64(&stats->lost, 1);
	LWLockRelease(stats_lock);
}

/* Under the lock: the entry of (db, subid), created when `create` (NULL when full or absent). */
SubscriptionEntry *
find_subscription(Oid db, int subid, bool create)
{
	SubscriptionEntry *free_entry = NULL;
	for (int i = 0; i < kSubscriptionEntries; i++) {
		SubscriptionEntry *e = &stats->subs[i];
		if (e->dboid == db && e->subid == subid)
			return e;
		if (e->dboid == InvalidOid && free_entry == NULL)
			free_entry = e;
	}
	if (!create || free_entry == NULL)
		return NULL;
	free_entry->dboid = db;
	free_entry->subid = subid;
	free_entry->since = GetCurrentTimestamp();
	pg_atomic_write_u64(&free_entry->errors, 0);
	pg_atomic_write_u64(&free_entry->retries, 0);
	pg_atomic_write_u64(&free_entry->group_retries, 0);
	pg_atomic_write_u32(&free_entry->unrecorded, 0);
	pg_atomic_write_u64(&free_entry->xacts, 0);
	pg_atomic_write_u64(&free_entry->latency_sum_us, 0);
	for (int k = 0; k < cdc::kLatencyBuckets; k++)
		pg_atomic_write_u64(&free_entry->buckets[k], 0);
	memset(free_entry->sqlstates, 0, sizeof(free_entry->sqlstates));
	memset(free_entry->sqlstate_errors, 0, sizeof(free_entry->sqlstate_errors));
	free_entry->other_errors = 0;
	return free_entry;
}

/*
 * The apply worker's entry, with the lock held in `mode` on return (the
 * caller releases it); NULL (lock released) when the table is full.
 */
SubscriptionEntry *
worker_entry(int subid, LWLockMode mode)
{
	LWLockAcquire(stats_lock, mode);
	if (my_entry >= 0 && stats->subs[my_entry].dboid == MyDatabaseId && stats->subs[my_entry].subid == subid)
		return &stats->subs[my_entry];
	SubscriptionEntry *e = find_subscription(MyDatabaseId, subid, false);
	if (e == NULL) {
		/* first count of this subscription: create its entry */
		LWLockRelease(stats_lock);
		LWLockAcquire(stats_lock, LW_EXCLUSIVE);
		e = find_subscription(MyDatabaseId, subid, true);
		if (e != NULL && mode == LW_SHARED) {
			LWLockRelease(stats_lock);
			LWLockAcquire(stats_lock, LW_SHARED);
			e = find_subscription(MyDatabaseId, subid, false);
		}
	}
	if (e == NULL) {
		LWLockRelease(stats_lock);
		pg_atomic_fetch_add_u64(&stats->lost, 1);
		return NULL;
	}
	my_entry = int(e - stats->subs);
	return e;
}

} // namespace

namespace cdc::pg {

void
InstallSharedStats(bool preloaded)
{
	if (!preloaded)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = stats_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = stats_shmem_startup;
}

void
CountCall(int kind) noexcept
{
	if (stats != NULL)
		count_key(call_key(MyDatabaseId, kind, 0));
}

void
CountFailedCall(int kind, int sqlerrcode) noexcept
{
	if (stats != NULL)
		count_key(call_key(MyDatabaseId, kind, sqlerrcode == 0 ? ERRCODE_INTERNAL_ERROR : sqlerrcode));
}

void
WorkerCountError(int subid, int sqlerrcode) noexcept
{
	if (stats == NULL)
		return;
	SubscriptionEntry *e = worker_entry(subid, LW_EXCLUSIVE);
	if (e == NULL)
		return;
	pg_atomic_fetch_add_u64(&e->errors, 1);
	int slot = -1;
	for (int i = 0; i < kWorkerSqlstates && slot < 0; i++)
		if (e->sqlstates[i] == sqlerrcode || e->sqlstates[i] == 0)
			slot = i;
	if (slot < 0)
		e->other_errors++;
	else {
		e->sqlstates[slot] = sqlerrcode;
		e->sqlstate_errors[slot]++;
	}
	LWLockRelease(stats_lock);
}

void
WorkerCountRetry(int subid, bool group) noexcept
{
	if (stats == NULL)
		return;
	SubscriptionEntry *e = worker_entry(subid, LW_SHARED);
	if (e == NULL)
		return;
	pg_atomic_fetch_add_u64(group ? &e->group_retries : &e->retries, 1);
	LWLockRelease(stats_lock);
}

int
WorkerUnrecordedErrors(int subid, bool failed) noexcept
{
	if (stats == NULL)
		return failed ? 1 : 0;
	SubscriptionEntry *e = worker_entry(subid, LW_SHARED);
	if (e == NULL)
		return failed ? 1 : 0;
	int n = 0;
	if (failed)
		n = int(pg_atomic_add_fetch_u32(&e->unrecorded, 1));
	else
		pg_atomic_write_u32(&e->unrecorded, 0);
	LWLockRelease(stats_lock);
	return n;
}

void
WorkerCountLatencies(int subid, const int64 *micros, int n) noexcept
{
	if (stats == NULL || n <= 0)
		return;
	uint64 buckets[cdc::kLatencyBuckets] = {};
	uint64 sum = 0;
	for (int i = 0; i < n; i++) {
		int64 us = micros[i] < 0 ? 0 : micros[i];
		sum += uint64(us);
		buckets[cdc::LatencyBucket(us)]++;
	}
	SubscriptionEntry *e = worker_entry(subid, LW_SHARED);
	if (e == NULL)
		return;
	pg_atomic_fetch_add_u64(&e->xacts, uint64(n));
	pg_atomic_fetch_add_u64(&e->latency_sum_us, sum);
	for (int k = 0; k < cdc::kLatencyBuckets; k++)
		if (buckets[k] != 0)
			pg_atomic_fetch_add_u64(&e->buckets[k], buckets[k]);
	LWLockRelease(stats_lock);
}

void
SharedStatsForgetDatabase(Oid db) noexcept
{
	if (stats == NULL)
		return;
	/* no session of a dropped database counts any more: its call keys can be freed */
	for (int i = 0; i < kCallEntries; i++)
		if ((pg_atomic_read_u64(&stats->calls[i].key) >> 32) == uint64(db)) {
			pg_atomic_write_u64(&stats->calls[i].count, 0);
			pg_atomic_write_u64(&stats->calls[i].key, 0);
		}
	LWLockAcquire(stats_lock, LW_EXCLUSIVE);
	for (int i = 0; i < kSubscriptionEntries; i++)
		if (stats->subs[i].dboid == db)
			stats->subs[i].dboid = InvalidOid;
	LWLockRelease(stats_lock);
}

void
SharedStatsForgetSubscriptions(Oid db, const int *subids, int n) noexcept
{
	if (stats == NULL)
		return;
	LWLockAcquire(stats_lock, LW_EXCLUSIVE);
	for (int i = 0; i < kSubscriptionEntries; i++) {
		SubscriptionEntry *e = &stats->subs[i];
		if (e->dboid != db)
			continue;
		bool keep = false;
		for (int k = 0; k < n && !keep; k++)
			keep = subids[k] == e->subid;
		if (!keep)
			e->dboid = InvalidOid;
	}
	LWLockRelease(stats_lock);
}

} // namespace cdc::pg

/* ------------------------------------------------------------------------
 * SQL functions (sql/cdc_apply--0.2.0.sql, "Counters that survive
 * rollbacks"): each reads the current database's counters; without
 * shared_preload_libraries they return no rows.
 * ------------------------------------------------------------------------ */

namespace {

const char *
kind_name(int kind)
{
	return kind == cdc::pg::kCallApply ? "cdc_apply" : kind == cdc::pg::kCallApplyBatch ? "cdc_apply_batch" : "unknown";
}

Datum
nullable_float(std::optional<double> v, bool *isnull)
{
	*isnull = !v.has_value();
	return v ? Float8GetDatum(*v) : (Datum) 0;
}

} // namespace

/*
 * cdc._call_stats() RETURNS TABLE (function text, sqlstate text, count
 * bigint, since timestamptz): per entry point of this database, one row
 * with sqlstate NULL counting its calls, and one per SQLSTATE counting
 * its failed calls.  No errors.
 */
CDC_PG_FUNCTION(cdc_call_stats)
{
	cdc::pg::PgCall([&]() {
		InitMaterializedSRF(fcinfo, 0);
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		if (stats == NULL)
			return;
		for (int i = 0; i < kCallEntries; i++) {
			CallEntry *e = &stats->calls[i];
			uint64 key = pg_atomic_read_u64(&e->key);
			if (key == 0 || (key >> 32) != uint64(MyDatabaseId))
				continue;
			int kind = int((key >> 30) & 3);
			int code = int(key & 0x3FFFFFFF);
			Datum values[4];
			bool nulls[4] = {false, code == 0, false, false};
			values[0] = CStringGetTextDatum(kind_name(kind));
			values[1] = code == 0                ? (Datum) 0
			            : code == kOtherSqlstate ? CStringGetTextDatum("other")
			                                     : CStringGetTextDatum(unpack_sql_state(code));
			values[2] = Int64GetDatum(int64(pg_atomic_read_u64(&e->count)));
			values[3] = TimestampTzGetDatum(TimestampTz(pg_atomic_read_u64(&e->since)));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	});
	return (Datum) 0;
}

/*
 * cdc._worker_stats() RETURNS TABLE (subid integer, errors bigint,
 * errors_by_sqlstate jsonb, retries bigint, group_retries bigint, xacts
 * bigint, latency_sum_seconds float8, latency_buckets bigint[],
 * latency_p50_ms float8, latency_p99_ms float8, since timestamptz): the
 * counters of the subscriptions of this database whose worker counted
 * something.  latency_buckets[k] (1-based k) counts the transactions whose
 * latency is at most 2^(k-1) ms and more than the bucket before; the last
 * counts the rest.  No errors.
 */
CDC_PG_FUNCTION(cdc_worker_stats)
{
	cdc::pg::PgCall([&]() {
		InitMaterializedSRF(fcinfo, 0);
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		if (stats == NULL)
			return;
		/* a consistent copy of this database's entries, read under the lock */
		struct Snapshot {
			int subid;
			int64 errors, retries, group_retries, xacts, latency_sum_us, other_errors;
			int64 buckets[cdc::kLatencyBuckets];
			int sqlstates[kWorkerSqlstates];
			int64 sqlstate_errors[kWorkerSqlstates];
			TimestampTz since;
		};
		Snapshot *snaps = (Snapshot *) palloc(sizeof(Snapshot) * kSubscriptionEntries);
		int n = 0;
		LWLockAcquire(stats_lock, LW_SHARED);
		for (int i = 0; i < kSubscriptionEntries; i++) {
			SubscriptionEntry *e = &stats->subs[i];
			if (e->dboid != MyDatabaseId)
				continue;
			Snapshot *s = &snaps[n++];
			s->subid = e->subid;
			s->errors = int64(pg_atomic_read_u64(&e->errors));
			s->retries = int64(pg_atomic_read_u64(&e->retries));
			s->group_retries = int64(pg_atomic_read_u64(&e->group_retries));
			s->xacts = int64(pg_atomic_read_u64(&e->xacts));
			s->latency_sum_us = int64(pg_atomic_read_u64(&e->latency_sum_us));
			for (int k = 0; k < cdc::kLatencyBuckets; k++)
				s->buckets[k] = int64(pg_atomic_read_u64(&e->buckets[k]));
			memcpy(s->sqlstates, e->sqlstates, sizeof(s->sqlstates));
			memcpy(s->sqlstate_errors, e->sqlstate_errors, sizeof(s->sqlstate_errors));
			s->other_errors = e->other_errors;
			s->since = e->since;
		}
		LWLockRelease(stats_lock);
		for (int i = 0; i < n; i++) {
			Snapshot *e = &snaps[i];
			Datum bucket_datums[cdc::kLatencyBuckets];
			for (int k = 0; k < cdc::kLatencyBuckets; k++)
				bucket_datums[k] = Int64GetDatum(e->buckets[k]);
			StringInfoData json;
			initStringInfo(&json);
			appendStringInfoChar(&json, '{');
			bool first = true;
			for (int k = 0; k < kWorkerSqlstates; k++)
				if (e->sqlstates[k] != 0) {
					appendStringInfo(&json, "%s\"%s\": " INT64_FORMAT, first ? "" : ", ", unpack_sql_state(e->sqlstates[k]),
					                 e->sqlstate_errors[k]);
					first = false;
				}
			if (e->other_errors > 0)
				appendStringInfo(&json, "%s\"other\": " INT64_FORMAT, first ? "" : ", ", e->other_errors);
			appendStringInfoChar(&json, '}');
			Datum values[11];
			bool nulls[11] = {false};
			values[0] = Int32GetDatum(e->subid);
			values[1] = Int64GetDatum(e->errors);
			values[2] = DirectFunctionCall1(jsonb_in, CStringGetDatum(json.data));
			values[3] = Int64GetDatum(e->retries);
			values[4] = Int64GetDatum(e->group_retries);
			values[5] = Int64GetDatum(e->xacts);
			values[6] = Float8GetDatum(double(e->latency_sum_us) / 1e6);
			values[7] = PointerGetDatum(construct_array(bucket_datums, cdc::kLatencyBuckets, INT8OID, 8, FLOAT8PASSBYVAL,
			                                            TYPALIGN_DOUBLE));
			values[8] = nullable_float(cdc::LatencyQuantileUpperMs(e->buckets, 0.5), &nulls[8]);
			values[9] = nullable_float(cdc::LatencyQuantileUpperMs(e->buckets, 0.99), &nulls[9]);
			values[10] = TimestampTzGetDatum(e->since);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	});
	return (Datum) 0;
}

/*
 * cdc._shared_stats_status() RETURNS TABLE (available boolean,
 * call_entries integer, call_capacity integer, subscription_entries
 * integer, subscription_capacity integer, lost bigint): whether the
 * counters are kept (cdc_apply preloaded), how full their tables are (all
 * databases), and how many counts were lost because one was full.  One
 * row.  No errors.
 */
CDC_PG_FUNCTION(cdc_shared_stats_status)
{
	cdc::pg::PgCall([&]() {
		InitMaterializedSRF(fcinfo, 0);
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		Datum values[6];
		bool nulls[6] = {false, stats == NULL, false, stats == NULL, false, stats == NULL};
		int calls = 0, subs = 0;
		if (stats != NULL) {
			for (int i = 0; i < kCallEntries; i++)
				calls += pg_atomic_read_u64(&stats->calls[i].key) != 0;
			LWLockAcquire(stats_lock, LW_SHARED);
			for (int i = 0; i < kSubscriptionEntries; i++)
				subs += stats->subs[i].dboid != InvalidOid;
			LWLockRelease(stats_lock);
		}
		values[0] = BoolGetDatum(stats != NULL);
		values[1] = Int32GetDatum(calls);
		values[2] = Int32GetDatum(kCallEntries);
		values[3] = Int32GetDatum(subs);
		values[4] = Int32GetDatum(kSubscriptionEntries);
		values[5] = stats != NULL ? Int64GetDatum(int64(pg_atomic_read_u64(&stats->lost))) : (Datum) 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	});
	return (Datum) 0;
}

/*
 * cdc.reset_shared_stats() RETURNS timestamptz: zeroes this database's
 * shared counters (calls and failed calls, worker errors, among them the
 * errors in a row that could not be recorded, which the backoff counts,
 * retries and latencies) and returns the time of the reset, which becomes their
 * `since`; NULL without shared_preload_libraries.  EXECUTE is revoked from
 * PUBLIC (grant it, for example to pg_monitor).  No errors.
 */
CDC_PG_FUNCTION(cdc_reset_shared_stats)
{
	TimestampTz now = 0;
	bool available = stats != NULL;
	cdc::pg::PgCall([&]() {
		if (stats == NULL)
			return;
		now = GetCurrentTimestamp();
		for (int i = 0; i < kCallEntries; i++)
			if ((pg_atomic_read_u64(&stats->calls[i].key) >> 32) == uint64(MyDatabaseId)) {
				pg_atomic_write_u64(&stats->calls[i].count, 0);
				pg_atomic_write_u64(&stats->calls[i].since, uint64(now));
			}
		LWLockAcquire(stats_lock, LW_EXCLUSIVE);
		for (int i = 0; i < kSubscriptionEntries; i++) {
			SubscriptionEntry *e = &stats->subs[i];
			if (e->dboid != MyDatabaseId)
				continue;
			e->since = now;
			pg_atomic_write_u64(&e->errors, 0);
			pg_atomic_write_u64(&e->retries, 0);
			pg_atomic_write_u64(&e->group_retries, 0);
			/* the errors in a row the worker could not record, a count of errors too (TAP 128) */
			pg_atomic_write_u32(&e->unrecorded, 0);
			pg_atomic_write_u64(&e->xacts, 0);
			pg_atomic_write_u64(&e->latency_sum_us, 0);
			for (int k = 0; k < cdc::kLatencyBuckets; k++)
				pg_atomic_write_u64(&e->buckets[k], 0);
			memset(e->sqlstates, 0, sizeof(e->sqlstates));
			memset(e->sqlstate_errors, 0, sizeof(e->sqlstate_errors));
			e->other_errors = 0;
		}
		LWLockRelease(stats_lock);
	});
	if (!available)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(now);
}

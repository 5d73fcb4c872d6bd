// Outcome counters written once per transaction: see counters.hpp.
//
// Before, every call upserted its target's cdc.counters row at its end
// (ApplyEngine::Finish), so a transaction of 1,000 cdc_apply() calls
// updated one row 1,000 times: a statement per call and a HOT chain of
// 1,000 versions that each upsert walked.  Now the counts collect in
// backend memory and one upsert per target runs at XACT_EVENT_PRE_COMMIT
// (or PRE_PREPARE: the counts are then part of the prepared transaction).
//
// Glue.  The pending counts are a plain C array in TopMemoryContext,
// tagged with the nesting level of the subtransaction that took them; the
// callbacks are noexcept PostgreSQL-regime functions (they may raise an
// ERROR, which aborts the committing transaction as a failed write would
// have aborted the call), entering C++ only through RunCpp.
#include "pg/apply/counters.hpp"

#include "pg/spi.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/backendid.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

#include <cstring>

namespace cdc::pg {

namespace {

struct PendingCount {
	Oid target;
	int level; /* GetCurrentTransactionNestLevel() of the subtransaction that holds them */
	Counters counts;
};

PendingCount *pending = nullptr; /* TopMemoryContext */
int npending = 0;
int maxpending = 0;
/* cdc.counters when the counts were taken: a DROP EXTENSION later in the transaction drops them */
Oid pending_relid = InvalidOid;

Oid
CountersRelidPg()
{
	Oid nsp = get_namespace_oid("cdc", true);
	return OidIsValid(nsp) ? get_relname_relid("counters", nsp) : InvalidOid;
}

/* Adds `c` to the entry of (target, level), creating it.  PostgreSQL regime (palloc). */
void
AddPendingPg(Oid target, int level, const Counters &c)
{
	for (int i = 0; i < npending; i++)
		if (pending[i].target == target && pending[i].level == level) {
			AddCounts(pending[i].counts, c);
			return;
		}
	if (npending == maxpending) {
		int n = maxpending ? maxpending * 2 : 8;
		pending = pending ? (PendingCount *) repalloc(pending, sizeof(PendingCount) * n)
		                  : (PendingCount *) MemoryContextAlloc(TopMemoryContext, sizeof(PendingCount) * n);
		maxpending = n;
	}
	pending[npending].target = target;
	pending[npending].level = level;
	pending[npending].counts = c;
	npending++;
}

// Writes per-target counts: one upsert of the target's row for this
// backend slot, as the extension owner.  SPI must be connected.
//
// A prepared transaction's counts go to a row of their own (backend_id < 0):
// written into this backend's row, they would hold its lock until COMMIT or
// ROLLBACK PREPARED, and the next transaction of this backend (or of the
// next backend in this slot) counting for the same target would wait for
// it at its commit, where statement_timeout does not reach — for ever when
// it is the session that would resolve the prepared one (two_phase).  The
// row is one no open transaction holds (SKIP LOCKED), else a new one named
// after the transaction id, so their number stays at most the number of
// transactions prepared at once.  Both statements read with the latest
// snapshot: under REPEATABLE READ a free row that another transaction's
// COMMIT PREPARED updated after this transaction's snapshot would otherwise
// fail the PREPARE with 40001, for a table the caller never touched
// (review h1, isolation prepared_counters_concurrent).
void
WriteCounts(const std::map<Oid, Counters> &counts, bool prepare)
{
	const int backend = PgCall([]() { return int(MyBackendId); });
	const int prepared_slot =
		prepare ? PgCall([]() { return -int(uint32(GetTopTransactionId()) % uint32(PG_INT32_MAX)) - 1; }) : 0;
	static const char *const kSums =
		"applied = c.applied OPERATOR(pg_catalog.+) $3, "
		"duplicate = c.duplicate OPERATOR(pg_catalog.+) $4, "
		"stale = c.stale OPERATOR(pg_catalog.+) $5, "
		"conflict = c.conflict OPERATOR(pg_catalog.+) $6, "
		"ignored = c.ignored OPERATOR(pg_catalog.+) $7, "
		"blocked_resurrections = c.blocked_resurrections OPERATOR(pg_catalog.+) $8, "
		"outbox_rows = c.outbox_rows OPERATOR(pg_catalog.+) $9, "
		"snapshot_rows = c.snapshot_rows OPERATOR(pg_catalog.+) $10, "
		"expired = c.expired OPERATOR(pg_catalog.+) $11";
	RunAs as = RunAs::ExtensionOwner();
	as.latest_snapshot = prepare;
	for (const auto &[relid, c] : counts) {
		Params p;
		p.AddOid(relid);
		p.Add(INT4OID, Int32GetDatum(prepare ? prepared_slot : backend), false);
		for (int64_t x : {c.applied, c.duplicate, c.stale, c.conflict, c.ignored, c.blocked_resurrections,
		                  c.outbox_rows, c.snapshot_rows, c.expired})
			p.AddInt8(x);
		if (prepare &&
		    Execute(std::string("WITH free AS (SELECT f.backend_id FROM cdc.counters f WHERE f.target OPERATOR(pg_catalog.=) $1 "
		                        "AND f.backend_id OPERATOR(pg_catalog.<) 0 AND $2 OPERATOR(pg_catalog.<) 0 "
		                        "ORDER BY f.backend_id DESC LIMIT 1 FOR UPDATE SKIP LOCKED) "
		                        "UPDATE cdc.counters AS c SET ") +
		                kSums + " FROM free WHERE c.target OPERATOR(pg_catalog.=) $1 AND c.backend_id OPERATOR(pg_catalog.=) free.backend_id",
		            p, as) > 0)
			continue;
		Execute("INSERT INTO cdc.counters AS c (target, backend_id, applied, duplicate, stale, conflict, ignored, "
		        "blocked_resurrections, outbox_rows, snapshot_rows, expired) "
		        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
		        "ON CONFLICT (target, backend_id) DO UPDATE SET applied = c.applied OPERATOR(pg_catalog.+) EXCLUDED.applied, "
		        "duplicate = c.duplicate OPERATOR(pg_catalog.+) EXCLUDED.duplicate, "
		        "stale = c.stale OPERATOR(pg_catalog.+) EXCLUDED.stale, "
		        "conflict = c.conflict OPERATOR(pg_catalog.+) EXCLUDED.conflict, "
		        "ignored = c.ignored OPERATOR(pg_catalog.+) EXCLUDED.ignored, "
		        "blocked_resurrections = c.blocked_resurrections OPERATOR(pg_catalog.+) EXCLUDED.blocked_resurrections, "
		        "outbox_rows = c.outbox_rows OPERATOR(pg_catalog.+) EXCLUDED.outbox_rows, "
		        "snapshot_rows = c.snapshot_rows OPERATOR(pg_catalog.+) EXCLUDED.snapshot_rows, "
		        "expired = c.expired OPERATOR(pg_catalog.+) EXCLUDED.expired",
		        p, as);
	}
}

/*
 * Writes the transaction's counts (PRE_COMMIT, PRE_PREPARE), summed over
 * its levels, for the targets that still exist (a target dropped later in
 * the transaction had its counters deleted by cdc._drop_target_state), as
 * long as cdc.counters is the table they were taken for.  The counts were
 * taken while the transaction could write: a transaction_read_only set
 * since then does not stop them (the write is the calls' own, deferred).
 * PostgreSQL regime; an ERROR aborts the commit.
 */
void
FlushPendingPg(bool prepare)
{
	bool write = OidIsValid(pending_relid) && CountersRelidPg() == pending_relid;
	/* copy out first: nothing below may see (or add to) the pending array */
	int n = npending;
	PendingCount *copy = (PendingCount *) palloc(sizeof(PendingCount) * (n + 1));
	memcpy(copy, pending, sizeof(PendingCount) * n);
	npending = 0;
	pending_relid = InvalidOid;
	if (!write)
		return;
	bool save_read_only = XactReadOnly;
	XactReadOnly = false;
	/* no portal is left at this point: the statements need a snapshot of their own */
	PushActiveSnapshot(GetTransactionSnapshot());
	PG_TRY();
	{
		RunCpp([&]() {
			std::map<Oid, Counters> sums;
			for (int i = 0; i < n; i++) {
				const Oid target = copy[i].target;
				if (OidIsValid(target) &&
				    !PgCall([&]() { return SearchSysCacheExists1(RELOID, ObjectIdGetDatum(target)); }))
					continue;
				AddCounts(sums[target], copy[i].counts);
			}
			if (sums.empty())
				return;
			Connect();
			WriteCounts(sums, prepare);
			cdc::pg::Finish();
		});
	}
	PG_FINALLY();
	{
		XactReadOnly = save_read_only;
	}
	PG_END_TRY();
	PopActiveSnapshot();
	pfree(copy);
}

void
CountersXactCallback(XactEvent event, void *) noexcept
{
	switch (event) {
	case XACT_EVENT_PRE_COMMIT:
	case XACT_EVENT_PRE_PREPARE:
		if (npending > 0)
			FlushPendingPg(event == XACT_EVENT_PRE_PREPARE);
		break;
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PREPARE:
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_COMMIT:
	case XACT_EVENT_PARALLEL_ABORT:
	case XACT_EVENT_PARALLEL_PRE_COMMIT:
		npending = 0;
		pending_relid = InvalidOid;
		break;
	}
}

/*
 * A subtransaction ends: a rolled-back one's counts go, a committed one's
 * join its parent's.  The callback runs while the subtransaction is still
 * the current one (its nesting level).  Cannot fail: no allocation.
 */
void
CountersSubXactCallback(SubXactEvent event, SubTransactionId, SubTransactionId, void *) noexcept
{
	if (npending == 0 || (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB))
		return;
	const int level = GetCurrentTransactionNestLevel();
	int kept = 0;
	for (int i = 0; i < npending; i++) {
		PendingCount e = pending[i];
		if (e.level >= level) {
			if (event == SUBXACT_EVENT_ABORT_SUB)
				continue;
			e.level = level - 1;
			bool merged = false;
			for (int j = 0; j < kept; j++)
				if (pending[j].target == e.target && pending[j].level == e.level) {
					AddCounts(pending[j].counts, e.counts);
					merged = true;
					break;
				}
			if (merged)
				continue;
		}
		pending[kept++] = e;
	}
	npending = kept;
}

} // namespace

void
InitTransactionCounts()
{
	RegisterXactCallback(CountersXactCallback, nullptr);
	RegisterSubXactCallback(CountersSubXactCallback, nullptr);
}

void
AddTransactionCounts(const std::map<Oid, Counters> &counts)
{
	if (counts.empty())
		return;
	if (PgCall([]() { return XactReadOnly; })) {
		WriteCounts(counts, false);
		return;
	}
	const Oid relid = PgCall([]() { return CountersRelidPg(); });
	PgCall([&]() {
		if (npending > 0 && pending_relid != relid) {
			/* the extension was re-created in this transaction: the earlier counts went with the old table */
			npending = 0;
		}
		pending_relid = relid;
		const int level = GetCurrentTransactionNestLevel();
		for (const auto &[target, c] : counts)
			AddPendingPg(target, level, c);
	});
}

std::vector<std::pair<Oid, Counters>>
PendingTransactionCounts()
{
	std::map<Oid, Counters> sums;
	for (int i = 0; i < npending; i++)
		AddCounts(sums[pending[i].target], pending[i].counts);
	return std::vector<std::pair<Oid, Counters>>(sums.begin(), sums.end());
}

} // namespace cdc::pg

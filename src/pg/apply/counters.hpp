// Outcome counters (cdc.counters, read through cdc.stats): counted in
// backend memory for the whole transaction and written once, just before
// it commits or is prepared (docs/internals.md, "Counters").  A call adds
// its counts to the (sub)transaction it runs in; a rolled-back
// subtransaction's share is discarded, an aborted transaction's too, so
// cdc.counters stays exactly as transactional as a write per call: a
// rolled-back call counts nothing, a committed one exactly once.
//
// Internal to src/pg/apply/ (and the SQL entry point of
// cdc._pending_counters).  The counts live in TopMemoryContext as plain C
// data; the transaction callbacks are PostgreSQL-regime functions that
// enter C++ only through RunCpp.
#pragma once

#include "core/batch_plan.hpp"
#include "pg/guard.hpp"

#include <map>
#include <utility>
#include <vector>

namespace cdc::pg {

// Registers the transaction and subtransaction callbacks (once per process;
// _PG_init).
void InitTransactionCounts();

// Adds the counts of one engine (per target; InvalidOid for events ignored
// before a target was known) to the current subtransaction.  In a
// read-only transaction (a hot standby) they are written at once, so the
// error PostgreSQL raises for the write comes from the call, as before.
// Errors: the counters statement's (read-only transaction).
void AddTransactionCounts(const std::map<Oid, Counters> &counts);

// The counts this backend has taken in its open transaction and not
// written yet, summed per target (cdc._pending_counters(), which cdc.stats
// adds to cdc.counters so that a transaction sees its own counts).
std::vector<std::pair<Oid, Counters>> PendingTransactionCounts();

} // namespace cdc::pg

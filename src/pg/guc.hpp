// Every cdc.* setting of the module (docs/worker.md and docs/retention.md
// list them with units and defaults), defined once by InitGUC() from
// _PG_init, and the variables behind them for the files that read them
// (the launcher, the apply worker, the replay horizon's schedule).
//
// PostgreSQL regime: plain C variables owned by PostgreSQL's GUC machinery
// (assigned on reload between any two statements); read them, never write
// them.  No C++ objects.
#pragma once

#include "pg/guard.hpp"

extern "C" {
#include "utils/guc.h"
}

namespace cdc::pg {

// Defines every cdc.* setting and reserves the cdc prefix.  The
// PGC_POSTMASTER settings (cdc.database, cdc.max_workers,
// cdc.max_databases) only when the
// library is loaded through shared_preload_libraries (`preloaded`).
void InitGUC(bool preloaded);

} // namespace cdc::pg

/* the worker path (docs/worker.md) */
extern char *cdc_database;
extern int cdc_max_databases;
extern int cdc_naptime;
extern int cdc_max_workers;
extern int cdc_retry_backoff;
extern int cdc_retry_backoff_max;
extern int cdc_status_interval;
extern char *cdc_debug_fault;
extern int cdc_group_max_transactions;
extern int cdc_group_max_bytes;
extern int cdc_group_max_delay;
extern int cdc_synchronous_commit;
extern bool cdc_streaming;
extern int cdc_apply_batch_changes;
extern const struct config_enum_entry cdc_synchronous_commit_options[];

/* audit and resync (docs/audit.md) */
extern int cdc_audit_max_rows_per_second;

/* both paths (docs/security.md, "Event size") */
extern int cdc_max_event_size; /* kB */

/* the apply engine's prepared statements per backend (docs/security.md, "Shared state") */
extern int cdc_plan_cache_size;

/* the apply engine (docs/internals.md, "Writes without SQL") */
extern bool cdc_direct_writes;
extern int cdc_row_location_cache; /* kB; 0 = off (table_write.cpp, RowLocationsPg) */

/* the replay horizon (docs/retention.md) */
extern int cdc_replay_horizon;
extern int cdc_prune_interval;
extern int cdc_prune_max_pages;

// The module: PG_MODULE_MAGIC and _PG_init, which initializes each
// subsystem in order: the cdc.* settings (pg/guc.hpp), then, when the
// library is loaded through shared_preload_libraries, the launcher of the
// background-worker path (pg/worker/worker.hpp) and the lifecycle hooks
// (DROP DATABASE refusal, pg/worker/lifecycle.hpp), and the transaction and
// invalidation callbacks of the apply engine (pg/apply/counters.hpp,
// pg/apply/id_cache.hpp).  The SQL path
// (cdc_apply(), sql_api.cpp) needs no preloading.
//
// PostgreSQL regime, run once per process that loads the library.  Must
// not touch the database, start anything, or create C++ objects: only
// definitions and registrations.
#include "pg/apply/counters.hpp"
#include "pg/apply/id_cache.hpp"
#include "pg/guard.hpp"
#include "pg/guc.hpp"
#include "pg/shared_stats.hpp"
#include "pg/spi.hpp"
#include "pg/worker/lifecycle.hpp"
#include "pg/worker/registry.hpp"
#include "pg/worker/worker.hpp"

extern "C" {
#include "miscadmin.h"

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);
}

/*
 * _PG_init: defines the cdc.* settings; when loaded through
 * shared_preload_libraries also registers the launcher of the background
 * worker path.
 */
void
_PG_init(void)
{
	cdc::pg::InitGUC(process_shared_preload_libraries_in_progress);
	cdc::pg::InitTransactionCounts();
	cdc::pg::InitIdCaches();
	cdc::pg::InitLauncher(process_shared_preload_libraries_in_progress);
	cdc::pg::InstallRegistry(process_shared_preload_libraries_in_progress);
	cdc::pg::InstallSharedStats(process_shared_preload_libraries_in_progress);
	cdc::pg::InstallLifecycleHooks(process_shared_preload_libraries_in_progress && !IsBinaryUpgrade);
	cdc::pg::InstallMessageClip();
}

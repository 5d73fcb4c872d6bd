// The background-worker path: settings and registration (worker.cpp).
#pragma once

namespace cdc::pg {

// Defines the cdc.* settings, and registers the launcher when the library is
// loaded through shared_preload_libraries (`preloaded`).  Called by _PG_init.
void DefineWorkerSettings(bool preloaded);

} // namespace cdc::pg

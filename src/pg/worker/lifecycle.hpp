// Lifecycle of subscriptions and their source-side resources (lifecycle.cpp;
// docs/worker.md, "Control state is durable", "Dropping" and "Every
// database").
#pragma once

namespace cdc::pg {

// Installs the ProcessUtility hook that refuses DROP DATABASE of a
// database with subscriptions and stops the launcher of a database
// without subscriptions that a command needs without other sessions
// (docs/worker.md, "Every database").  Only when preloaded
// (shared_preload_libraries); called by _PG_init after InstallRegistry.
void InstallLifecycleHooks(bool preloaded);

} // namespace cdc::pg

// Lifecycle of subscriptions and their source-side resources (lifecycle.cpp;
// docs/worker.md, "Control state is durable" and "Dropping").
#pragma once

namespace cdc::pg {

// Installs the shared-memory registry of the launcher's database and the
// ProcessUtility hook that refuses DROP DATABASE of it while it has
// subscriptions.  Only when preloaded (shared_preload_libraries); called by
// _PG_init.
void InstallLifecycleHooks(bool preloaded);

// PostgreSQL regime, launcher only: this database (MyDatabaseId) has
// `nsubs` subscriptions (0 when the extension is not installed).
void ReportSubscriptionCount(int nsubs);

} // namespace cdc::pg

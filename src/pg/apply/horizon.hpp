// The replay horizon (SPEC §3, fourth answer; §8 retention): its settings
// and the launcher's scheduled call of cdc.prune().  Pruning itself is the
// SQL function cdc.prune() (sql/cdc_apply--0.1.0.sql); what may be pruned
// and how expired changes are detected is described in docs/retention.md.
#pragma once

#include "pg/guard.hpp"

namespace cdc::pg {

// Defines cdc.replay_horizon (seconds, default 7 days), cdc.prune_interval
// (seconds, default 60; 0 disables the launcher's pruning) and
// cdc.prune_max_pages (blocks per table per scheduled call, default 10000).
// Called from _PG_init before the cdc prefix is reserved.
void DefineHorizonSettings();

// PostgreSQL regime (called from the launcher's loop, outside a
// transaction): when cdc.prune_interval has passed since the last run, runs
// SELECT cdc.prune(cdc.prune_max_pages) in a transaction of its own.  An
// error is reported as a WARNING and does not stop the launcher.
void LauncherPruneIfDue();

} // namespace cdc::pg

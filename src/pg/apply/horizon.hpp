// The replay horizon (SPEC §3, fourth answer; §8 retention): the
// launcher's scheduled call of cdc.prune().  Its settings (cdc.replay_horizon,
// cdc.prune_interval, cdc.prune_max_pages) are defined in pg/guc.cpp.  Pruning itself is the
// SQL function cdc.prune() (sql/cdc_apply--0.2.0.sql); what may be pruned
// and how expired changes are detected is described in docs/retention.md.
#pragma once

#include "pg/guard.hpp"

namespace cdc::pg {

// PostgreSQL regime (called from the launcher's loop, outside a
// transaction): when cdc.prune_interval has passed since the last run, runs
// SELECT cdc.prune(cdc.prune_max_pages) in a transaction of its own.  An
// error is reported as a WARNING and does not stop the launcher.
void LauncherPruneIfDue();

} // namespace cdc::pg

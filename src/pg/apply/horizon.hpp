// The replay horizon (SPEC §3, fourth answer; §8 retention): the
// launcher's scheduled call of cdc.prune().  Its settings (cdc.replay_horizon,
// cdc.prune_interval, cdc.prune_max_pages) are defined in pg/guc.cpp.  Pruning itself is the
// SQL function cdc.prune() (sql/cdc_apply--0.2.0.sql); what may be pruned
// and how expired changes are detected is described in docs/retention.md.
#pragma once

#include "pg/guard.hpp"

extern "C" {
#include "datatype/timestamp.h"
}

namespace cdc::pg {

// PostgreSQL regime (called from the launcher's loop, outside a
// transaction): when cdc.prune_interval has passed since `last_prune` (the
// last run in this database, 0: none since the server started, kept in the
// launchers' registry so that a launcher started again later keeps the
// schedule), runs SELECT cdc.prune(cdc.prune_max_pages) in a transaction of
// its own.  Returns when it last ran (`last_prune`, or now).  An error is
// reported as a WARNING and does not stop the launcher.
TimestampTz LauncherPruneIfDue(TimestampTz last_prune);

// When the next scheduled cdc.prune() is due after one at `last_prune`
// (0: none while cdc.prune_interval is 0).
TimestampTz LauncherNextPrune(TimestampTz last_prune);

} // namespace cdc::pg

// The background-worker path as the rest of the module sees it
// (docs/worker.md): registering the launcher from _PG_init, and dropping a
// slot on a source for cdc._drop_source_slot (sql_api.cpp).  Everything
// else of the worker is internal to src/pg/worker/ (worker_state.hpp).
// PostgreSQL regime: both functions may ereport; no C++ objects.
#pragma once

#include "pg/guard.hpp"

namespace cdc::pg {

// Registers the launcher when the library is loaded through
// shared_preload_libraries (`preloaded`), not during a binary upgrade.
// Called by _PG_init after InitGUC.
void InitLauncher(bool preloaded);

} // namespace cdc::pg

// Connects to the source over the replication protocol and drops the slot
// (DROP_REPLICATION_SLOT ... WAIT); a slot that does not exist is skipped
// with a NOTICE.  PostgreSQL regime: call it through PgCall.  Errors 08001
// when the source cannot be reached, 55006 when the slot cannot be dropped.
void drop_source_slot_pg(text *conninfo_text, Name slot_name);

// cdc._publication_tables(conninfo text, publications text[]): the tables
// the publications publish, read over a connection with the worker's
// session settings, into the call's tuplestore (materialize mode).
// PostgreSQL regime: call it through PgCall.  Errors 08001 when the source
// cannot be reached, 42704 for a publication the source does not have.
void publication_tables_pg(FunctionCallInfo fcinfo);

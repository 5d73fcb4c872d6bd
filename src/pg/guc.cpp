// Every cdc.* setting: see guc.hpp.  The worker's settings (formerly in
// worker.cpp) and the replay horizon's (formerly in horizon.cpp), defined
// in the order _PG_init always defined them: the horizon's first, then the
// worker's, which end by reserving the cdc prefix.
//
// PostgreSQL regime: runs only inside _PG_init.  The variables are plain C
// data with trivial destructors.
#include "pg/guc.hpp"

#include <climits>

extern "C" {
#include "access/xact.h"
#include "utils/guc.h"
}

/* ------------------------------------------------------------------------
 * The worker path (docs/worker.md lists them with units)
 * ------------------------------------------------------------------------ */

char *cdc_database = NULL;     /* cdc.database (deprecated): '' = every database */
int cdc_max_databases = 1024;  /* cdc.max_databases */
int cdc_naptime = 5;           /* cdc.naptime, seconds */
int cdc_max_workers = 4;       /* cdc.max_workers */
int cdc_retry_backoff = 1000;  /* cdc.retry_backoff, ms: first retry delay, doubled per failure */
int cdc_retry_backoff_max = 60; /* cdc.retry_backoff_max, seconds */
int cdc_status_interval = 1000; /* cdc.status_interval, ms */
char *cdc_debug_fault = NULL;  /* cdc.debug_fault: test-only fault point */
int cdc_group_max_transactions = 1000; /* cdc.group_max_transactions: source transactions per local commit */
int cdc_group_max_bytes = 16384;      /* cdc.group_max_bytes, kB of pgoutput messages per local commit */
int cdc_group_max_delay = 200;        /* cdc.group_max_delay, ms a group stays open */
int cdc_synchronous_commit = SYNCHRONOUS_COMMIT_OFF; /* cdc.synchronous_commit of the worker's transactions */
bool cdc_streaming = false;           /* cdc.streaming: protocol version 2, in-progress transactions */
int cdc_apply_batch_changes = 1000;   /* cdc.apply_batch_changes: changes applied set-based at once */
int cdc_max_event_size = 16 * 1024;   /* cdc.max_event_size, kB: one event (or worker change) at most */
int cdc_plan_cache_size = 4096;       /* cdc.plan_cache_size: prepared statements a backend keeps */

const struct config_enum_entry cdc_synchronous_commit_options[] = {
	{"local", SYNCHRONOUS_COMMIT_LOCAL_FLUSH, false},
	{"remote_write", SYNCHRONOUS_COMMIT_REMOTE_WRITE, false},
	{"remote_apply", SYNCHRONOUS_COMMIT_REMOTE_APPLY, false},
	{"on", SYNCHRONOUS_COMMIT_REMOTE_FLUSH, false},
	{"off", SYNCHRONOUS_COMMIT_OFF, false},
	{NULL, 0, false}};

/* ------------------------------------------------------------------------
 * The replay horizon (docs/retention.md)
 * ------------------------------------------------------------------------ */

int cdc_replay_horizon = 7 * 24 * 3600; /* seconds; read by cdc.replay_horizon() through current_setting */
int cdc_prune_interval = 60;            /* seconds; 0 = the launcher does not prune */
int cdc_prune_max_pages = 10000;

/* ------------------------------------------------------------------------
 * Audit and resync (docs/audit.md)
 * ------------------------------------------------------------------------ */

int cdc_audit_max_rows_per_second = 0; /* cdc.audit_max_rows_per_second: 0 = no cap */

/* ------------------------------------------------------------------------
 * The apply engine (docs/internals.md, "Writes without SQL")
 * ------------------------------------------------------------------------ */

bool cdc_direct_writes = true; /* cdc.direct_writes: the engine's rows through the executor where it is the same */
int cdc_row_location_cache = 2048; /* cdc.row_location_cache, kB: where each key's row was last seen, per backend */

namespace {

void
DefineEngineSettings()
{
	DefineCustomBoolVariable("cdc.direct_writes",
	                         "Write the engine's rows through the executor and the table access method where an SQL "
	                         "statement would give the same result.",
	                         "On (the default), the dedup claim and the entity records (change by change), target rows "
	                         "of plain tables and outbox rows are written as PostgreSQL's own apply worker writes rows; "
	                         "off runs the SQL statements instead. The results are the same either way (for diagnosis "
	                         "and differential tests); under REPEATABLE READ or SERIALIZABLE the claim and the entity "
	                         "records always use the statements.",
	                         &cdc_direct_writes, true, PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.row_location_cache",
	                        "Memory a backend uses to remember where the apply engine last found each key's row (0: none).",
	                        "A look-up of a key's row (a target row, an entity record) first fetches the heap tuple at the "
	                        "remembered location and takes it only if it is visible, not being written, and has the key; "
	                        "otherwise, and without the memory, it descends the key's index. 16 bytes per remembered key "
	                        "(docs/internals.md, \"Rows found where they were last seen\").",
	                        &cdc_row_location_cache, 2048, 0, 1024 * 1024, PGC_SUSET, GUC_UNIT_KB, NULL, NULL, NULL);
}

void
DefineAuditSettings()
{
	DefineCustomIntVariable("cdc.audit_max_rows_per_second",
	                        "Most source rows cdc.audit and cdc.resync compare per second (0: no cap).",
	                        "Between pages the procedure sleeps until the rows compared so far have taken at least "
	                        "rows / this setting seconds, which bounds the load it puts on the source and the destination.",
	                        &cdc_audit_max_rows_per_second, 0, 0, INT_MAX, PGC_USERSET, 0, NULL, NULL, NULL);
}

void
DefineHorizonSettings()
{
	DefineCustomIntVariable("cdc.replay_horizon",
	                        "How long ledger entries, tombstones and published outbox rows are kept at least.",
	                        "cdc.prune() removes only what is older; a change for an entity whose records were pruned "
	                        "and that is not newer than the prune watermark is expired (docs/retention.md).",
	                        &cdc_replay_horizon, 7 * 24 * 3600, 0, INT_MAX, PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.prune_interval", "How often the launcher calls cdc.prune(); 0 disables it.", NULL,
	                        &cdc_prune_interval, 60, 0, 86400, PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.prune_max_pages", "Blocks of each table one scheduled cdc.prune() call scans.", NULL,
	                        &cdc_prune_max_pages, 10000, 1, INT_MAX, PGC_SIGHUP, 0, NULL, NULL, NULL);
}

void
DefineWorkerSettings(bool preloaded)
{
	/* PGC_POSTMASTER settings can only be defined while the server starts */
	if (preloaded) {
		DefineCustomStringVariable("cdc.database",
		                           "Deprecated: restricts the launcher to this one database (empty: every database).",
		                           "The launcher serves every database where cdc_apply is installed; a database name here "
		                           "serves that database only, as before subscriptions ran in every database.",
		                           &cdc_database, "", PGC_POSTMASTER, 0, NULL, NULL, NULL);
		DefineCustomIntVariable("cdc.max_databases", "Most databases the launcher keeps track of.",
		                        "Every database that allows connections takes one entry (a few dozen bytes of shared "
		                        "memory); databases beyond it are not served.",
		                        &cdc_max_databases, 1024, 1, 1000000, PGC_POSTMASTER, 0, NULL, NULL, NULL);
		DefineCustomIntVariable("cdc.max_workers", "Maximum number of apply workers, in all databases together.", NULL,
		                        &cdc_max_workers, 4, 1, 64, PGC_POSTMASTER, 0, NULL, NULL, NULL);
	}
	DefineCustomIntVariable("cdc.naptime", "How often the launcher looks for subscriptions to start or stop.", NULL,
	                        &cdc_naptime, 5, 1, 3600, PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.retry_backoff", "Delay before the first retry after a worker error; doubled per consecutive failure.",
	                        NULL, &cdc_retry_backoff, 1000, 10, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.retry_backoff_max", "Upper bound of the retry delay.", NULL, &cdc_retry_backoff_max,
	                        60, 1, 86400, PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.status_interval", "How often a worker writes cdc.subscription_state and sends standby status to the source (while it applies a batch, standby status at most a quarter of the source's wal_sender_timeout apart).",
	                        NULL, &cdc_status_interval, 1000, 10, 60000, PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("cdc.debug_fault", "Test-only fault point of the apply worker (empty: none).",
	                           "before_commit: exit before the local commit of a source transaction; "
	                           "after_commit: exit after the local commit, before feedback to the source; "
	                           "after_change:N: exit after the N-th change applied in the open local transaction, uncommitted; "
	                           "request_from_slot: ask the source to stream from the slot's confirmed position "
	                           "instead of the replication origin's progress; "
	                           "source_settings_unpinned: connect to the source without the pinned session settings "
	                           "(as through a pooler that drops them), so that their check fails; "
	                           "record_error: the write of the error record after an error fails.",
	                           &cdc_debug_fault, "", PGC_SIGHUP, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.group_max_transactions",
	                        "Most source transactions the apply worker commits in one local transaction (1: no grouping).",
	                        "Consecutive source transactions that are already received are applied in one local "
	                        "transaction, committed with the replication origin's progress of the last one.",
	                        &cdc_group_max_transactions, 1000, 1, 1000000, PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.group_max_bytes", "Most pgoutput bytes the apply worker applies in one local transaction.",
	                        "A group is committed after the source transaction that reaches this size.",
	                        &cdc_group_max_bytes, 16384, 1, 1048576, PGC_SIGHUP, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.group_max_delay", "Longest time a group of source transactions stays open before its local commit.",
	                        "A group is committed after the source transaction that ends past this delay, and always as soon "
	                        "as the source has sent nothing more.",
	                        &cdc_group_max_delay, 200, 1, 60000, PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable("cdc.streaming",
	                         "Ask the source to stream large in-progress transactions (pgoutput protocol version 2).",
	                         "The worker spools the streamed changes to temporary files and applies them at the "
	                         "transaction's commit; aborted transactions and subtransactions are dropped. Takes effect "
	                         "when a worker starts.",
	                         &cdc_streaming, false, PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.apply_batch_changes",
	                        "Most changes the apply worker hands to the batch engine at once (1: change by change).",
	                        "The changes of the source transactions of a group (and the rows of an initial copy) are queued "
	                        "and applied set-based, with the same result as one by one, before the local commit or when "
	                        "the queue is full.",
	                        &cdc_apply_batch_changes, 1000, 1, 100000, PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("cdc.synchronous_commit", "synchronous_commit of the apply worker's local transactions.",
	                         "off is safe: the worker reports to the source as flushed only what is durable here.",
	                         &cdc_synchronous_commit, SYNCHRONOUS_COMMIT_OFF, cdc_synchronous_commit_options, PGC_SIGHUP, 0,
	                         NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.max_event_size",
	                        "Largest event cdc_apply() and cdc_apply_batch() accept, and largest change the apply worker "
	                        "receives.",
	                        "A larger one raises 54000 before it is parsed, so that no caller can make a backend allocate "
	                        "memory without bound (docs/security.md). Superusers may change it, for a role or a database too.",
	                        &cdc_max_event_size, 16 * 1024, 1, 1024 * 1024, PGC_SUSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("cdc.plan_cache_size",
	                        "Most prepared statements of the apply engine a backend keeps.",
	                        "The columns an event carries choose the column lists of its statements, so that a caller "
	                        "could make a backend keep ever more plans (docs/security.md, \"Shared state\"). Beyond "
	                        "this many, a statement is prepared for its execution and freed after it. Superusers may "
	                        "change it, for a role or a database too.",
	                        &cdc_plan_cache_size, 4096, 0, 1000000, PGC_SUSET, 0, NULL, NULL, NULL);
	MarkGUCPrefixReserved("cdc");
}

} // namespace

/*
 * InitGUC: the settings of every subsystem.  The horizon's, the audit's and the engine's
 * come before DefineWorkerSettings reserves the cdc prefix.
 */
void
cdc::pg::InitGUC(bool preloaded)
{
	DefineHorizonSettings();
	DefineAuditSettings();
	DefineEngineSettings();
	DefineWorkerSettings(preloaded);
}

// Lifecycle of subscriptions and their resources (issue 12 items 6 and 7;
// docs/worker.md, "Control state is durable" and "Dropping"):
//
//  * cdc._force_sync_commit(): the subscription control functions commit
//    synchronously whatever synchronous_commit says, as CREATE DATABASE
//    does (ForceSyncCommit), so no crash loses a transition that the worker
//    or the source already acted on;
//  * cdc._prevent_transaction_block(command): drop_subscription(...,
//    drop_slot => true) refuses to run inside a transaction block, as DROP
//    SUBSCRIPTION does, because the slot's drop on the source cannot roll back;
//  * a registry in shared memory of the database whose subscriptions run
//    (cdc.database) and how many it has, kept by the launcher and by
//    cdc.create_subscription(), and a ProcessUtility hook that refuses DROP
//    DATABASE of it while it has subscriptions (B37 (a)): their slots on the
//    sources would otherwise keep WAL for ever.
//
// PostgreSQL-regime code: no C++ objects with destructors in these frames.
#include "pg/guard.hpp"
#include "pg/guc.hpp"
#include "pg/worker/lifecycle.hpp"

extern "C" {
#include "access/xact.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
}

namespace {

// The registry: the launcher's database and its number of subscriptions.
struct LifecycleShared {
	slock_t mutex;
	Oid dboid;  /* InvalidOid: the launcher has not reported yet */
	int nsubs;  /* subscriptions in dboid (-1: unknown) */
};

LifecycleShared *shared = NULL;
shmem_request_hook_type prev_shmem_request_hook = NULL;
shmem_startup_hook_type prev_shmem_startup_hook = NULL;
ProcessUtility_hook_type prev_process_utility_hook = NULL;

void
lifecycle_shmem_request(void) noexcept
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(LifecycleShared)));
}

void
lifecycle_shmem_startup(void) noexcept
{
	bool found;
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = (LifecycleShared *) ShmemInitStruct("cdc_apply lifecycle", sizeof(LifecycleShared), &found);
	if (!found) {
		SpinLockInit(&shared->mutex);
		shared->dboid = InvalidOid;
		shared->nsubs = -1;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * DROP DATABASE of the database whose subscriptions run is refused while it
 * has subscriptions (PostgreSQL refuses it for a database with
 * subscriptions for the same reason).  Before the launcher's first report
 * after a server start, the database named by cdc.database is refused too:
 * it may have subscriptions.
 */
void
lifecycle_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree, ProcessUtilityContext context,
                          ParamListInfo params, QueryEnvironment *queryEnv, DestReceiver *dest,
                          QueryCompletion *qc) noexcept
{
	if (shared != NULL && IsA(pstmt->utilityStmt, DropdbStmt)) {
		DropdbStmt *stmt = (DropdbStmt *) pstmt->utilityStmt;
		Oid db = get_database_oid(stmt->dbname, true);
		SpinLockAcquire(&shared->mutex);
		Oid served = shared->dboid;
		int nsubs = shared->nsubs;
		SpinLockRelease(&shared->mutex);
		const char *configured = cdc_database;
		bool unknown = served == InvalidOid && configured != NULL && strcmp(configured, stmt->dbname) == 0;
		if (OidIsValid(db) && ((db == served && nsubs != 0) || unknown))
			ereport(ERROR,
			        (errcode(ERRCODE_OBJECT_IN_USE),
			         errmsg("database \"%s\" has cdc_apply subscriptions", stmt->dbname),
			         unknown ? errdetail("The cdc_apply launcher has not reported this database's subscriptions since the server started.")
			                 : errdetail("Their replication slots on the source servers would keep WAL for ever."),
			         errhint("Drop them first in that database with cdc.drop_subscription(name, drop_slot => true).")));
	}
	if (prev_process_utility_hook)
		prev_process_utility_hook(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
}

} // namespace

void
cdc::pg::InstallLifecycleHooks(bool preloaded)
{
	if (!preloaded)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = lifecycle_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = lifecycle_shmem_startup;
	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = lifecycle_process_utility;
}

void
cdc::pg::ReportSubscriptionCount(int nsubs)
{
	if (shared == NULL)
		return;
	SpinLockAcquire(&shared->mutex);
	shared->dboid = MyDatabaseId;
	shared->nsubs = nsubs;
	SpinLockRelease(&shared->mutex);
}

/*
 * cdc._force_sync_commit() RETURNS void: the current transaction commits
 * synchronously (ForceSyncCommit).  No errors.
 */
CDC_PG_FUNCTION(cdc_force_sync_commit)
{
	cdc::pg::PgCall([&]() { ForceSyncCommit(); });
	PG_RETURN_VOID();
}

/*
 * cdc._prevent_transaction_block(command text) RETURNS void: 25001 inside a
 * transaction block, a subtransaction or a pipeline (PreventInTransactionBlock).
 * The function is only ever called directly by a subscription function
 * that the user called as a statement of its own, hence isTopLevel = true:
 * what is checked is the transaction block around that statement.
 */
CDC_PG_FUNCTION(cdc_prevent_transaction_block)
{
	cdc::pg::PgCall([&]() { PreventInTransactionBlock(true, text_to_cstring(PG_GETARG_TEXT_PP(0))); });
	PG_RETURN_VOID();
}

/*
 * cdc._note_subscription_database() RETURNS void: this database has
 * subscriptions from now on (until the launcher counts them again), so
 * DROP DATABASE of it is refused at once.  Only for the database the
 * launcher serves; a no-op without shared_preload_libraries.
 */
CDC_PG_FUNCTION(cdc_note_subscription_database)
{
	cdc::pg::PgCall([&]() {
		if (shared == NULL)
			return;
		const char *configured = cdc_database;
		char *current = get_database_name(MyDatabaseId);
		if (configured == NULL || current == NULL || strcmp(configured, current) != 0)
			return;
		SpinLockAcquire(&shared->mutex);
		shared->dboid = MyDatabaseId;
		if (shared->nsubs < 1)
			shared->nsubs = 1;
		SpinLockRelease(&shared->mutex);
	});
	PG_RETURN_VOID();
}

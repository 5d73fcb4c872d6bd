// Lifecycle of subscriptions and their resources (issue 12 items 6 and 7;
// docs/worker.md, "Control state is durable" and "Dropping"):
//
//  * cdc._force_sync_commit(): the subscription control functions commit
//    synchronously whatever synchronous_commit says, as CREATE DATABASE
//    does (ForceSyncCommit), so no crash loses a transition that the worker
//    or the source already acted on;
//  * the ProcessUtility hook that keeps the launchers' connections out of
//    the way of commands that need a database without other sessions, and
//    refuses DROP DATABASE of a database with subscriptions (B37 (a)): their
//    slots on the sources would otherwise keep WAL for ever.  It reads the
//    launchers' registry (registry.hpp): every database the launcher serves
//    is guarded;
//  * cdc._note_subscription_database() and cdc._notify_launcher(): a new
//    subscription counts at once, and after CREATE EXTENSION (or a new
//    subscription) commits the launcher looks at the database at once.
//
// PostgreSQL-regime code: no C++ objects with destructors in these frames.
#include "pg/guard.hpp"
#include "pg/guc.hpp"
#include "pg/worker/lifecycle.hpp"
#include "pg/worker/registry.hpp"

#include <csignal>

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_extension.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "commands/defrem.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "commands/dbcommands.h"
#include "catalog/namespace.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

namespace {

ProcessUtility_hook_type prev_process_utility_hook = NULL;

/* how long a command waits for the launcher to look at a database it has not looked at yet */
const int kWaitForLauncherMs = 10000;
/* how long a database launcher stopped for such a command stays away */
const int kHoldMs = 10000;

/*
 * Whether the launcher would serve database `db` (named `dbname`): it
 * allows connections, is not a template, and cdc.database (deprecated)
 * does not restrict the launcher to another database.
 */
bool
database_eligible(Oid db, const char *dbname)
{
	if (cdc_database != NULL && cdc_database[0] != '\0' && strcmp(cdc_database, dbname) != 0)
		return false;
	HeapTuple tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(db));
	if (!HeapTupleIsValid(tup))
		return false;
	Form_pg_database form = (Form_pg_database) GETSTRUCT(tup);
	bool eligible = form->datallowconn && !form->datistemplate && !database_is_invalid_form(form);
	ReleaseSysCache(tup);
	return eligible;
}

/*
 * A command needs database `dbname` without other sessions (DROP DATABASE,
 * ALTER DATABASE RENAME or SET TABLESPACE, CREATE DATABASE ... TEMPLATE),
 * or drops it (`dropping`).  If the launcher has not looked at it yet
 * (after a server start, or a new database), this waits until it has (at
 * most kWaitForLauncherMs).  Then:
 *  - cdc_apply is not installed there: nothing to do;
 *  - it has subscriptions: DROP DATABASE is refused (their replication
 *    slots on the sources would keep WAL for ever, B37 (a)); the other
 *    commands meet the apply workers' sessions as PostgreSQL's own
 *    subscriptions' workers would be met;
 *  - it has none (served with none counted yet, or idle: no resident
 *    launcher, one may be visiting for the scheduled cdc.prune()): its
 *    database launcher, if one runs, is stopped (waiting for it to exit)
 *    and none is started for kHoldMs, so that the command does not fail
 *    with "being accessed by other users".
 * Only for a role that PostgreSQL will let run the command: the owner of the
 * database (a superuser), with CREATEDB where the command needs it
 * (`needs_createdb`: RENAME, and CREATE DATABASE, whose template, not a
 * template database here, only its owner may copy).  This hook runs before
 * PostgreSQL's own privilege checks, and any role that may connect ran
 * `DROP DATABASE victim` (refused afterwards with "must be owner"): each
 * stopped victim's launcher in the middle of its scheduled cdc.prune() and
 * kept the next away for kHoldMs, so a loop of them stopped its pruning for
 * good, and a database with subscriptions was named so to that role
 * (review h4, TAP 132).
 * With `unserving` (ALTER DATABASE ... ALLOW_CONNECTIONS false or
 * IS_TEMPLATE true, database_unserving) the command is refused, as DROP
 * DATABASE is, while the database has subscriptions, and nothing is
 * stopped otherwise: it does not need the database to itself.
 */
void
guard_database_command(const char *dbname, bool dropping, bool needs_createdb, bool unserving = false)
{
	if (CdcRegistry == NULL || dbname == NULL)
		return;
	Oid db = get_database_oid(dbname, true);
	if (!OidIsValid(db) || !database_eligible(db, dbname))
		return;
	if (!pg_database_ownercheck(db, GetUserId()) || (needs_createdb && !have_createdb_privilege()))
		return; /* PostgreSQL refuses the command (after this hook) */
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kWaitForLauncherMs);
	for (;;) {
		LWLockAcquire(CdcRegistryLock(), LW_EXCLUSIVE);
		CdcDatabase *d = registry_find_database(db, true);
		if (d == NULL) {
			LWLockRelease(CdcRegistryLock());
			ereport(WARNING, (errmsg("cdc_apply does not track database \"%s\": whether it has subscriptions was not checked",
			                         dbname),
			                  errhint("Raise cdc.max_databases (%d) and restart the server.", cdc_max_databases)));
			return;
		}
		int state = d->state;
		int nsubs = d->nsubs;
		int launcher = d->launcher_pid;
		if (state == CDC_DB_UNKNOWN || state == CDC_DB_CHECKING)
			d->urgent = true;
		else if (((state == CDC_DB_SERVED && nsubs == 0) || state == CDC_DB_IDLE) && !unserving)
			d->hold_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kHoldMs);
		LWLockRelease(CdcRegistryLock());

		if (state == CDC_DB_NONE)
			return;
		if (state == CDC_DB_SERVED && nsubs != 0) {
			if (dropping)
				ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
				                errmsg("database \"%s\" has cdc_apply subscriptions", dbname),
				                errdetail("Their replication slots on the source servers would keep WAL for ever."),
				                errhint("Drop them first in that database with cdc.drop_subscription(name, drop_slot => true).")));
			if (unserving)
				ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
				                errmsg("database \"%s\" has cdc_apply subscriptions", dbname),
				                errdetail("A database that allows no connections, or a template, is not served: its "
				                          "subscriptions would stop, and DROP DATABASE would no longer be refused, leaving "
				                          "their replication slots on the source servers to keep WAL for ever."),
				                errhint("Drop them first in that database with cdc.drop_subscription(name, drop_slot => true).")));
			return;
		}
		if (unserving)
			return; /* nothing to stop: the command does not need the database to itself */
		if (state == CDC_DB_SERVED || state == CDC_DB_IDLE) {
			/* no subscriptions: at most the database launcher is connected (an idle one is visiting); stop it */
			if (launcher != 0) {
				kill(launcher, SIGTERM);
				TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 5000);
				for (;;) {
					LWLockAcquire(CdcRegistryLock(), LW_SHARED);
					CdcDatabase *e = registry_find_database(db, false);
					bool gone = e == NULL || e->launcher_pid != launcher;
					LWLockRelease(CdcRegistryLock());
					if (gone || GetCurrentTimestamp() >= until)
						break;
					(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 20L, PG_WAIT_EXTENSION);
					ResetLatch(MyLatch);
					CHECK_FOR_INTERRUPTS();
				}
			}
			return;
		}
		/* not looked at yet: ask the launcher to look at it first, and wait */
		registry_wake_cluster_launcher();
		if (GetCurrentTimestamp() >= deadline)
			ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
			                errmsg("cannot tell whether database \"%s\" has cdc_apply subscriptions", dbname),
			                errdetail("The cdc_apply launcher has not looked at this database since the server started or the "
			                          "database was created."),
			                errhint("Try again in a few seconds; the launcher needs a free background worker slot "
			                        "(max_worker_processes) to look at it.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 50L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * ALTER DATABASE's options make the database one the launcher does not serve
 * (database_eligible): ALLOW_CONNECTIONS false or IS_TEMPLATE true.  Its
 * owner, who need not be a superuser, could otherwise stop its
 * subscriptions and, once its workers were gone (a restart), drop it
 * unguarded with their slots left on the sources (security review h2,
 * TAP 141).  A bad value is PostgreSQL's error, raised here as there;
 * DEFAULT is AlterDatabase's default (connections allowed, no template).
 */
bool
database_unserving(List *options)
{
	ListCell *lc;
	foreach (lc, options) {
		DefElem *opt = (DefElem *) lfirst(lc);
		/*
		 * OPTION DEFAULT (no value) is PostgreSQL's default, allow
		 * connections and no template, where defGetBoolean reads true:
		 * IS_TEMPLATE DEFAULT was refused (review h3, TAP 141)
		 */
		if (opt->arg == NULL)
			continue;
		if ((strcmp(opt->defname, "allow_connections") == 0 && !defGetBoolean(opt)) ||
		    (strcmp(opt->defname, "is_template") == 0 && defGetBoolean(opt)))
			return true;
	}
	return false;
}

/* The database named by option `name` (e.g. CREATE DATABASE's template) of a utility statement, or NULL. */
const char *
database_option(List *options, const char *name)
{
	ListCell *lc;
	foreach (lc, options) {
		DefElem *opt = (DefElem *) lfirst(lc);
		if (strcmp(opt->defname, name) == 0 && opt->arg != NULL)
			return defGetString(opt);
	}
	return NULL;
}

/*
 * Before DROP EXTENSION cdc_apply (or DROP OWNED of its owner) goes ahead,
 * in one SPI session:
 *
 * - Refused while the database has subscriptions, as DROP DATABASE is
 *   (guard_database_command).  The drop took their rows and left behind
 *   what lives outside the database's tables: each subscription's
 *   replication slot on its source (holding WAL there for ever) and its
 *   replication origin here (review h4, regress subscriptions).
 *   Subscriptions dropped earlier in the same transaction
 *   (cdc.drop_subscription drops slot and origin at its commit) are gone
 *   from the table this reads, so that order goes ahead (2BP01, as
 *   PostgreSQL's own refusals of a drop).
 * - Waits for a cdc.prune() that is running in this database, and keeps
 *   new ones from starting until the drop's transaction ends: it takes the
 *   row lock that cdc.prune() takes first as its one-pruner-at-a-time
 *   mutex (cdc.prune_state's entity_state row, FOR UPDATE; a prune that
 *   finds it taken returns at once).  The drop locks the extension's
 *   tables one after the other in ACCESS EXCLUSIVE mode, and the prune
 *   locks them in another order: the launcher's scheduled prune, started
 *   right after a CREATE EXTENSION, held one the drop wanted and waited for
 *   one the drop held, and the drop failed with "deadlock detected" (TAP
 *   111 in a CI run).  Holding the mutex first, the drop takes nothing a
 *   prune could be waiting for.
 *
 * Only the command of a role with the privileges of the extension's owner
 * is looked at (droppable_extension_owner): nobody else may drop the
 * extension, and PostgreSQL's own refusal then comes first.  PostgreSQL
 * regime.
 */
static void
prepare_extension_drop(void)
{
	const Oid nsp = get_namespace_oid("cdc", true);
	if (!OidIsValid(nsp))
		return;
	const bool subscriptions = OidIsValid(get_relname_relid("subscription", nsp));
	const bool prune_state = OidIsValid(get_relname_relid("prune_state", nsp));
	if (!subscriptions && !prune_state)
		return;
	MemoryContext caller = CurrentMemoryContext;
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "cdc_apply: SPI_connect failed");
	int n = 0;
	char *names = NULL;
	if (subscriptions) {
		if (SPI_execute("SELECT pg_catalog.count(*)::pg_catalog.int4, "
		                "pg_catalog.string_agg(pg_catalog.quote_ident(name), ', ' ORDER BY name) FROM cdc.subscription",
		                true, 1) != SPI_OK_SELECT)
			elog(ERROR, "cdc_apply: could not read cdc.subscription");
		bool isnull = false;
		n = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		if (n > 0)
			names = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2));
	}
	if (n == 0 && prune_state &&
	    SPI_execute("SELECT 1 FROM cdc.prune_state WHERE relation OPERATOR(pg_catalog.=) 'entity_state' FOR UPDATE",
	                false, 0) != SPI_OK_SELECT)
		elog(ERROR, "cdc_apply: could not lock cdc.prune_state");
	SPI_finish();
	PopActiveSnapshot();
	if (n > 0)
		ereport(ERROR, (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
		                errmsg("cannot drop extension cdc_apply while it has subscriptions"),
		                errdetail_plural("Subscription %s would leave its replication slot on the source and its replication "
		                                 "origin behind.",
		                                 "Subscriptions %s would leave their replication slots on the sources and their "
		                                 "replication origins behind.",
		                                 n, names),
		                errhint("Drop them first: cdc.drop_subscription(name, drop_slot => true).")));
}

/*
 * The role that owns cdc_apply in this database, if the current user has
 * its privileges (so that PostgreSQL lets it drop the extension: a
 * superuser, the owner, or a member of the owner that inherits); otherwise
 * InvalidOid, and PostgreSQL's own refusal comes first.  Not only a
 * superuser: a member of the owning role dropped the extension with its
 * subscriptions unchecked (review h4, pg_regress drop_owned_guard).
 */
static Oid
droppable_extension_owner(void)
{
	const Oid ext = get_extension_oid("cdc_apply", true);
	if (!OidIsValid(ext))
		return InvalidOid;
	Oid owner = InvalidOid;
	Relation rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(ext));
	SysScanDesc scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	HeapTuple tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(owner) || !has_privs_of_role(GetUserId(), owner))
		return InvalidOid;
	return owner;
}

static void
guard_extension_drop(DropStmt *d)
{
	if (d->removeType != OBJECT_EXTENSION)
		return;
	bool ours = false;
	ListCell *lc;
	foreach (lc, d->objects)
		ours = ours || strcmp(strVal(lfirst(lc)), "cdc_apply") == 0;
	if (!ours || !OidIsValid(droppable_extension_owner()))
		return;
	prepare_extension_drop();
}

/*
 * DROP OWNED BY the role that owns cdc_apply drops the extension too (its
 * owner is recorded in pg_shdepend), with the same loss: refused in the
 * same way (review h4, pg_regress drop_owned_guard).  Another role's DROP
 * OWNED is not looked at.
 */
static void
guard_owned_drop(DropOwnedStmt *d)
{
	const Oid owner = droppable_extension_owner();
	if (!OidIsValid(owner))
		return;
	bool ours = false;
	ListCell *lc;
	foreach (lc, d->roles)
		ours = ours || get_rolespec_oid((RoleSpec *) lfirst(lc), true) == owner;
	if (ours)
		prepare_extension_drop();
}

void
lifecycle_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree, ProcessUtilityContext context,
                          ParamListInfo params, QueryEnvironment *queryEnv, DestReceiver *dest,
                          QueryCompletion *qc) noexcept
{
	Node *stmt = pstmt->utilityStmt;
	switch (nodeTag(stmt)) {
	case T_DropdbStmt:
		guard_database_command(((DropdbStmt *) stmt)->dbname, true, false);
		break;
	case T_DropStmt:
		guard_extension_drop((DropStmt *) stmt);
		break;
	case T_DropOwnedStmt:
		guard_owned_drop((DropOwnedStmt *) stmt);
		break;
	case T_RenameStmt:
		if (((RenameStmt *) stmt)->renameType == OBJECT_DATABASE)
			guard_database_command(((RenameStmt *) stmt)->subname, false, true);
		break;
	case T_AlterDatabaseStmt:
		if (database_option(((AlterDatabaseStmt *) stmt)->options, "tablespace") != NULL)
			guard_database_command(((AlterDatabaseStmt *) stmt)->dbname, false, false);
		if (database_unserving(((AlterDatabaseStmt *) stmt)->options))
			guard_database_command(((AlterDatabaseStmt *) stmt)->dbname, false, false, true);
		break;
	case T_CreatedbStmt:
		guard_database_command(database_option(((CreatedbStmt *) stmt)->options, "template"), false, true);
		break;
	default:
		break;
	}
	if (prev_process_utility_hook)
		prev_process_utility_hook(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
}

/*
 * After a transaction that created the extension or a subscription
 * commits: the launcher looks at this database again (a database it found
 * without cdc_apply is looked at anew, one it found without subscriptions,
 * which has no resident launcher, gets one) and at once.  Set by
 * cdc._notify_launcher() and cdc._note_subscription_database(); done at
 * commit, so that the look sees what the transaction committed.
 */
bool notify_at_commit = false;
bool create_counted = false; /* this transaction counted itself in its database's pending_creates */
/*
 * The subtransaction whose INSERT counted it: the outermost open one that
 * wrote a subscription row.  Rolled back, the count goes with it;
 * released, it moves to the parent (subxact_callback).
 */
SubTransactionId create_subid = InvalidSubTransactionId;
bool new_schedule_at_commit = false; /* the extension was (re)created: its scheduled cdc.prune() runs at the first look */
bool xact_callback_registered = false;

/*
 * May raise a PostgreSQL ERROR at XACT_EVENT_PRE_PREPARE (a longjmp through
 * PostgreSQL's frames, none of ours with destructors), never at the other
 * events.
 */
void
notify_xact_callback(XactEvent event, void *arg) noexcept
{
	if (!notify_at_commit && !create_counted)
		return;
	/*
	 * A prepared transaction that created a subscription would wake nothing
	 * when COMMIT PREPARED (in any session) commits it: no callback of this
	 * backend runs then, and its count in pending_creates ends here.  In a
	 * database without subscriptions, which keeps no resident launcher,
	 * the subscription would start only at the next scheduled cdc.prune()
	 * (never with cdc.prune_interval = 0).  Refused, as PostgreSQL refuses
	 * PREPARE after some operations (review h2, TAP 125).
	 */
	if (event == XACT_EVENT_PRE_PREPARE && create_counted)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("cannot PREPARE a transaction that creates a cdc_apply subscription"),
		                errdetail("The launcher is told to start the subscription's worker when the transaction "
		                          "commits, which COMMIT PREPARED cannot do."),
		                errhint("Create the subscription in a transaction that is not prepared.")));
	const bool ends = event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_COMMIT ||
	                  event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE;
	if (ends && create_counted && CdcRegistry != NULL) {
		LWLockAcquire(CdcRegistryLock(), LW_EXCLUSIVE);
		CdcDatabase *d = registry_find_database(MyDatabaseId, false);
		if (d != NULL && d->pending_creates > 0) {
			d->pending_creates--;
			/* committed: the subscription exists until a look counts it (nsubs was kept at 1 or more meanwhile) */
			if (event == XACT_EVENT_COMMIT && d->state != CDC_DB_CHECKING) {
				d->state = CDC_DB_SERVED;
				if (d->nsubs < 1)
					d->nsubs = 1;
			}
		}
		LWLockRelease(CdcRegistryLock());
	}
	if (ends)
		create_counted = false;
	if (!notify_at_commit)
		return;
	if (event == XACT_EVENT_COMMIT && CdcRegistry != NULL) {
		LWLockAcquire(CdcRegistryLock(), LW_EXCLUSIVE);
		CdcDatabase *d = registry_find_database(MyDatabaseId, true);
		if (d != NULL) {
			if (d->state == CDC_DB_NONE)
				d->state = CDC_DB_UNKNOWN;
			/* an idle database (no resident launcher) gets one now; one looking now looks again (registry_report_idle) */
			d->wanted = true;
			if (new_schedule_at_commit)
				d->last_prune = 0;
			/* a resident launcher looks now rather than after cdc.naptime (SetLatch never fails) */
			if (d->launcher_proc != NULL)
				SetLatch(&d->launcher_proc->procLatch);
		}
		LWLockRelease(CdcRegistryLock());
		registry_wake_cluster_launcher();
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_COMMIT ||
	    event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE) {
		notify_at_commit = false;
		new_schedule_at_commit = false;
	}
}

/*
 * A subscription row inserted in a subtransaction that is rolled back was
 * never created: its count in pending_creates ends there, so that PREPARE
 * TRANSACTION is not refused for it (before, it was) and DROP DATABASE no
 * longer waits for it.  Released, the count belongs to the parent.  The
 * wake at commit stays: a look that finds nothing new is harmless.  Never
 * raises an error.
 */
void
notify_subxact_callback(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void *arg) noexcept
{
	if (!create_counted || create_subid != mySubid)
		return;
	if (event == SUBXACT_EVENT_COMMIT_SUB) {
		create_subid = parentSubid;
	} else if (event == SUBXACT_EVENT_ABORT_SUB) {
		if (CdcRegistry != NULL) {
			LWLockAcquire(CdcRegistryLock(), LW_EXCLUSIVE);
			CdcDatabase *d = registry_find_database(MyDatabaseId, false);
			if (d != NULL && d->pending_creates > 0)
				d->pending_creates--;
			LWLockRelease(CdcRegistryLock());
		}
		create_counted = false;
		create_subid = InvalidSubTransactionId;
	}
}

void
notify_launcher_at_commit(void)
{
	if (CdcRegistry == NULL)
		return;
	if (!xact_callback_registered) {
		RegisterXactCallback(notify_xact_callback, NULL);
		RegisterSubXactCallback(notify_subxact_callback, NULL);
		xact_callback_registered = true;
	}
	notify_at_commit = true;
}

} // namespace

void
cdc::pg::InstallLifecycleHooks(bool preloaded)
{
	if (!preloaded)
		return;
	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = lifecycle_process_utility;
}

/*
 * cdc._guard_extension_drop() RETURNS event_trigger: the event trigger
 * cdc_guard_drop_extension (ddl_command_start, tag DROP EXTENSION, ENABLE
 * ALWAYS) makes the check of guard_extension_drop.  The ProcessUtility hook
 * is installed only when cdc_apply is preloaded: without it (no worker runs,
 * but cdc.create_subscription(copy_data => false) makes the slot on the
 * source at commit) a session that had never loaded the library dropped the
 * extension with its subscriptions and the slots stayed on the sources
 * (review h1, TAP 119).  This function's call loads the library.  With the
 * hook the check runs twice; the hook's comes first.
 */
CDC_PG_FUNCTION(cdc_guard_extension_drop)
{
	cdc::pg::PgCall([&]() {
		if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
			ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			                errmsg("cdc._guard_extension_drop() must be called as an event trigger")));
		Node *tree = ((EventTriggerData *) fcinfo->context)->parsetree;
		if (tree != NULL && IsA(tree, DropStmt))
			guard_extension_drop((DropStmt *) tree);
		else if (tree != NULL && IsA(tree, DropOwnedStmt))
			guard_owned_drop((DropOwnedStmt *) tree);
	});
	PG_RETURN_VOID();
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
 * cdc._stop_subscription_workers(subid integer, timeout_ms bigint) RETURNS
 * integer: SIGTERM to every apply worker of the subscription that the
 * registry knows (registry_stop_subscription_workers), then, with
 * timeout_ms > 0, waits up to that long (milliseconds) for each to leave
 * the process array, which it does after releasing its replication
 * origin (on_shmem_exit runs ReplicationOriginExitCleanup before ProcKill).
 * Returns how many were signalled; -1 without shared_preload_libraries
 * (no registry, and so no launcher and no worker to stop).
 * A worker still there at the timeout is left (a WARNING, as
 * pg_terminate_backend gives): the caller's origin drop then reports it
 * (55006).  Why the registry and not the status row's pid: a worker the
 * launcher started a moment ago has read its subscription but not written
 * its pid yet, and would take the origin the caller is about to drop
 * (found by a fresh-user run dropping two subscriptions in one
 * transaction, one of them retrying).
 */
CDC_PG_FUNCTION(cdc_stop_subscription_workers)
{
	int subid = PG_GETARG_INT32(0);
	int64 timeout_ms = PG_GETARG_INT64(1);
	int n = cdc::pg::PgCall([&]() {
		if (CdcRegistry == NULL)
			return -1;
		int pids[8];
		int stopped = registry_stop_subscription_workers(MyDatabaseId, subid, pids, 8);
		TimestampTz give_up = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
		for (int i = 0; i < stopped && i < 8 && timeout_ms > 0; i++) {
			while (BackendPidGetProc(pids[i]) != NULL) {
				if (GetCurrentTimestamp() >= give_up) {
					ereport(WARNING, (errmsg("cdc_apply worker with PID %d did not exit within %lld milliseconds",
					                         pids[i], (long long) timeout_ms)));
					break;
				}
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10, PG_WAIT_EXTENSION);
				ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
			}
		}
		return stopped;
	});
	PG_RETURN_INT32(n);
}

/*
 * cdc._note_subscription_database() RETURNS void: this database has
 * subscriptions from now on (until its launcher counts them again), so
 * DROP DATABASE of it is refused at once; after the transaction commits,
 * the launcher looks at the database at once.  A no-op without
 * shared_preload_libraries.
 */
static void
note_subscription_database(void)
{
	if (CdcRegistry == NULL)
		return;
	LWLockAcquire(CdcRegistryLock(), LW_EXCLUSIVE);
	CdcDatabase *d = registry_find_database(MyDatabaseId, true);
	if (d != NULL) {
		if (d->state != CDC_DB_CHECKING)
			d->state = CDC_DB_SERVED;
		if (d->nsubs < 1)
			d->nsubs = 1;
		/* counted until the transaction ends, so that no launcher's look, made before it commits, uncounts it */
		if (!create_counted) {
			d->pending_creates++;
			create_counted = true;
			create_subid = GetCurrentSubTransactionId();
		}
	}
	LWLockRelease(CdcRegistryLock());
	notify_launcher_at_commit();
}

CDC_PG_FUNCTION(cdc_note_subscription_database)
{
	cdc::pg::PgCall([&]() { note_subscription_database(); });
	PG_RETURN_VOID();
}

/*
 * cdc._subscription_changed() RETURNS trigger: the AFTER ROW trigger of
 * cdc.subscription (ENABLE ALWAYS) for INSERT, and for an UPDATE that
 * changes `enabled`.  A row inserted counts as a subscription being
 * created (as cdc._note_subscription_database(): DROP DATABASE is refused
 * at once, PREPARE TRANSACTION is refused); after the transaction commits,
 * the cluster launcher and the database's own launcher look at it at once.
 * Whatever wrote the row: cdc.create_subscription, cdc.enable_subscription
 * and cdc.disable_subscription, or a superuser's own INSERT or UPDATE,
 * which before woke nothing: in a database without subscriptions (no
 * resident launcher) the subscription started only at the next scheduled
 * cdc.prune(), never with cdc.prune_interval = 0, and in one with a
 * launcher only after cdc.naptime (review h2, TAP 125).  A no-op without
 * shared_preload_libraries.  Errors: 39P01 when not called as a trigger.
 */
CDC_PG_FUNCTION(cdc_subscription_changed)
{
	cdc::pg::PgCall([&]() {
		if (!CALLED_AS_TRIGGER(fcinfo))
			ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			                errmsg("cdc._subscription_changed() must be called as a trigger")));
		TriggerData *trigdata = (TriggerData *) fcinfo->context;
		if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
			note_subscription_database();
		else
			notify_launcher_at_commit();
	});
	return PointerGetDatum(NULL);
}

/*
 * cdc._notify_launcher() RETURNS void: after the current transaction (the
 * extension's install script) commits, the launcher looks at this database
 * at once, even if it found it without cdc_apply before, and runs the
 * scheduled cdc.prune() at that look (the extension's tables are new: the
 * schedule of an earlier install does not apply).  A no-op without
 * shared_preload_libraries.  No errors.
 */
CDC_PG_FUNCTION(cdc_notify_launcher)
{
	cdc::pg::PgCall([&]() {
		notify_launcher_at_commit();
		new_schedule_at_commit = CdcRegistry != NULL;
	});
	PG_RETURN_VOID();
}

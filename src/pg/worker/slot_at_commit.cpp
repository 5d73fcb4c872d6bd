// The slot cdc.create_subscription(copy_data => false) creates on the
// source, created when the creating transaction commits (docs/worker.md,
// "The slot of a subscription without a copy").
//
// A replication slot cannot roll back with a transaction.  Created inside
// the call, as CREATE SUBSCRIPTION does, it stayed on the source whenever
// the calling transaction failed later (a DO block or function raising
// after the call, a ROLLBACK, one statement calling it twice), so the call
// had to refuse transaction blocks (25001) and still left those holes.  So
// cdc._create_source_slot only records a pending creation (the
// subscription's id), and the pre-commit of the transaction creates every
// pending slot (the way postgres_fdw does its remote work at pre-commit):
//   * a ROLLBACK, an error before COMMIT, a rolled-back subtransaction
//     (ROLLBACK TO SAVEPOINT, a PL/pgSQL EXCEPTION block) that registered
//     it: no slot is ever made;
//   * at pre-commit the subscription's row is read again (conninfo,
//     slot_name, publications: an alter_subscription of the same
//     transaction counts; a row dropped in it makes no slot), the slot
//     created (interruptibly; an interrupt cancels CREATE_REPLICATION_SLOT
//     on the source), and its consistent point written to
//     cdc.subscription.slot_created_lsn in the same transaction, which the
//     worker needs to recognise the slot as this subscription's
//     (prepare_slot): an error there aborts the transaction, so no
//     subscription row stays;
//   * with it, the subscription's tables (cdc.subscription_rel): those the
//     publications published at the slot's consistent point, read in the
//     slot's exported snapshot, with their source OIDs, so that a table
//     renamed on the source before the worker applied any change of it is
//     still recognised (docs/worker.md, TAP 100); the worker takes them as
//     they are;
//   * the connection that created a slot stays open to the end of the
//     transaction: if the transaction aborts after the slot was made (a
//     later pending creation failed, the UPDATE failed, a serialization
//     failure or a deferred constraint at commit), the abort callback drops
//     the slot over it (best effort, bounded, a WARNING when it fails);
//   * PREPARE TRANSACTION with a pending creation is refused (0A000): the
//     slot could be made neither at PREPARE (a ROLLBACK PREPARED could not
//     undo it) nor at COMMIT PREPARED (no callback runs there).
// What remains: the backend or server dying between the creation and the
// commit record (no abort callback runs), a drop at abort that fails (the
// WARNING names the slot), and a slot the source finished just as an
// interrupt cancelled its creation.  The operator drops such a slot on the
// source with pg_drop_replication_slot.
//
// The drop has the mirror problem (docs/worker.md, "Dropping"): dropped
// inside cdc.drop_subscription(drop_slot => true), the slot was gone
// whenever the calling transaction failed afterwards (a DO block raising
// after the call, a procedure rolling back), while the subscription stayed
// and its worker stopped with 55000; the 25001 refusal of transaction
// blocks could not see those.  So cdc._drop_at_commit only records a
// pending drop (conninfo and slot name as of the call, and the replication
// origin's name), and the pre-commit drops it:
//   * a ROLLBACK, an error before COMMIT, a rolled-back subtransaction that
//     registered it: nothing is dropped, the subscription, its slot and its
//     origin's progress stay, and its worker resumes (the launcher starts it
//     again once the row is no longer locked);
//   * at pre-commit, first every pending slot drop (every source connected
//     to before any slot is dropped, so that an unreachable one fails the
//     commit with every slot still there; each drop interruptible, as before
//     in the call: DROP_REPLICATION_SLOT ... WAIT cancelled on the source on
//     a cancel or statement_timeout), then the pending creations (so that a
//     subscription dropped and created again under the same slot name in
//     one transaction gets a new slot), then the replication origins (last:
//     pg_replication_origin_drop clears the origin's progress in shared
//     memory at once, not with the transaction, review h2r, TAP 096).  An
//     error there (08001 unreachable, 55006, 57014 the slot held until
//     statement_timeout) aborts the transaction: the subscription stays;
//   * a slot that does not exist is skipped with a NOTICE; a subscription
//     created in this very transaction (its origin's row is this
//     transaction's) has no slot of its own, so none is dropped (a slot of
//     that name is someone else's) and its pending creation makes none;
//   * PREPARE TRANSACTION with a pending slot drop is refused (0A000); an
//     origin alone is dropped at PREPARE, as it was inside the call.
// What remains: the transaction aborting after the slot was dropped at
// pre-commit (a later drop failing on the source, a creation of the same
// commit failing, a
// serialization failure, the backend or server dying before the commit
// record): the subscription stays without its slot (a WARNING names it at
// the abort; its worker stops with 55000, drop the subscription).
//
// PostgreSQL-regime code (it may ereport): no C++ objects with destructors
// in its frames; the callbacks are plain functions PostgreSQL calls, and an
// ERROR raised in the pre-commit one longjmps through PostgreSQL frames
// only.  libpq connections are closed with PQfinish, never by C++.
#include "pg/worker/worker.hpp"
#include "pg/worker/worker_state.hpp"

extern "C" {
#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "pgstat.h"
#include "replication/origin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
}

namespace {

/* One subscription whose slot is created at commit. */
struct PendingSlot {
	int32 subid;
	Oid userid;              /* the superuser who called cdc.create_subscription: reads and writes the row */
	SubTransactionId subxid; /* the subtransaction that registered it (moves to the parent when it commits) */
	char *name;              /* the subscription's, read from the row at pre-commit */
	char *slot;              /* as created, read from the row at pre-commit */
	PGconn *conn;            /* the connection that created it, open to the end of the transaction */
};

/* The pending creations of the current transaction: PendingSlot *, in TopTransactionContext. */
List *pending = NIL;

/* One subscription dropped by cdc.drop_subscription, whose slot and origin go at commit. */
struct PendingDrop {
	SubTransactionId subxid; /* the subtransaction that registered it (moves to the parent when it commits) */
	char *name;              /* the subscription's */
	char *conninfo;          /* as of the call */
	char *slot;              /* as of the call; NULL: the slot stays on the source */
	char *origin;            /* the replication origin's name */
	PGconn *conn;            /* connected at pre-commit, until the drop (which closes it) */
	bool slot_dropped;       /* the source dropped it at pre-commit */
};

/* The pending drops of the current transaction: PendingDrop *, in TopTransactionContext. */
List *drops = NIL;
bool callbacks_registered = false;

/* The abort's drop of a slot made at pre-commit waits this long for the source at most. */
constexpr long kDropAtAbortMs = 10 * 1000;

/* The caller's identity, saved while SPI runs as the registrant (begin_as_registrant). */
struct SavedUser {
	Oid userid;
	int sec_context;
};

/*
 * An SPI session as the role that registered the pending work, with a
 * snapshot of the transaction; end_as_registrant ends it and restores the
 * caller's identity.
 */
static SavedUser
begin_as_registrant(const PendingSlot *p)
{
	SavedUser saved;
	GetUserIdAndSecContext(&saved.userid, &saved.sec_context);
	SetUserIdAndSecContext(p->userid, saved.sec_context | SECURITY_LOCAL_USERID_CHANGE);
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "cdc_apply: SPI_connect failed");
	return saved;
}

static void
end_as_registrant(const SavedUser &saved)
{
	SPI_finish();
	PopActiveSnapshot();
	SetUserIdAndSecContext(saved.userid, saved.sec_context);
}

/*
 * Runs `sql` (args as text) through SPI as the role that registered the
 * creation, with a snapshot of the transaction; returns whether it found a
 * row, and the first row's first `ncols` columns in cols[], copied into
 * TopTransactionContext.
 */
static bool
row_as_registrant(const PendingSlot *p, const char *sql, int nargs, const char **args, int ncols, char **cols)
{
	const SavedUser saved = begin_as_registrant(p);
	spi_exec(sql, nargs, args);
	bool found = SPI_processed >= 1 && SPI_tuptable != NULL;
	for (int i = 0; found && i < ncols; i++)
		cols[i] = MemoryContextStrdup(TopTransactionContext, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1));
	end_as_registrant(saved);
	return found;
}

/* The CONTEXT line of an error while the slot of a subscription is made at commit. */
static void
creation_context(void *arg)
{
	const PendingSlot *p = (const PendingSlot *) arg;
	errcontext("creating replication slot \"%s\" of subscription \"%s\" on the source at commit", p->slot, p->name);
}

/*
 * Records, in the creating transaction as the role that registered the
 * creation, the slot's consistent point `cp` and the subscription's tables
 * as the publications published them at that point, each with its source
 * OID (cdc.subscription_rel, state ready without a copy point, as the
 * worker records the tables of a slot it creates), replacing any row of
 * the subscription.  When a publication did not exist then, no table is
 * recorded and refresh_pending tells the worker to read them at its first
 * start (it waits for the publication, 42704, as before).
 */
static void
record_creation(const PendingSlot *p, const char *cp, const PublishedTables *published)
{
	const SavedUser saved = begin_as_registrant(p);
	const char *args[4] = {psprintf("%d", p->subid), cp, published->n >= 0 ? "false" : "true", NULL};
	spi_exec("UPDATE cdc.subscription SET slot_created_lsn = $2::pg_catalog.pg_lsn, refresh_pending = $3::pg_catalog.bool "
	         "WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4",
	         3, args);
	if (published->n >= 0)
		spi_exec("DELETE FROM cdc.subscription_rel WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4", 1, args);
	for (int i = 0; i < published->n; i++) {
		const char *row[4] = {args[0], published->schemas[i], published->tables[i], psprintf("%u", published->relids[i])};
		spi_exec("INSERT INTO cdc.subscription_rel (subid, schema_name, table_name, state, source_relid) "
		         "VALUES ($1::pg_catalog.int4, $2, $3, 'ready', $4::pg_catalog.oid)",
		         4, row);
	}
	end_as_registrant(saved);
	if (published->n < 0)
		ereport(NOTICE, (errmsg("publication \"%s\" does not exist on the source: the worker of subscription \"%s\" reads "
		                        "its tables when it starts",
		                        published->missing, p->name)));
}

/* Creates the slot of `p` and records its consistent point and tables (XACT_EVENT_PRE_COMMIT). */
static void
create_one(PendingSlot *p)
{
	const char *args[1] = {psprintf("%d", p->subid)};
	char *cols[4];
	/*
	 * The row as this transaction leaves it: a conninfo or publications
	 * altered after the creation count; a subscription dropped again in the
	 * same transaction gets no slot.
	 */
	if (!row_as_registrant(p,
	                       "SELECT name, slot_name::pg_catalog.text, conninfo, "
	                       "pg_catalog.array_to_string(ARRAY(SELECT pg_catalog.quote_literal(x) "
	                       "FROM pg_catalog.unnest(publications) AS x), ',') FROM cdc.subscription "
	                       "WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND create_slot AND NOT copy_data "
	                       "AND slot_created_lsn IS NULL",
	                       1, args, 4, cols))
		return;
	p->name = cols[0];
	p->slot = cols[1];
	ErrorContextCallback context = {error_context_stack, creation_context, p};
	error_context_stack = &context;
	PublishedTables published;
	/* p->conn is set as soon as the slot exists: from there on, an abort drops it */
	XLogRecPtr cp = create_source_slot_pg(cstring_to_text(cols[2]), p->slot, cols[3], &p->conn, &published);
	/*
	 * Its consistent point, in the same transaction: the worker adopts a slot
	 * of this name only when it is the one recorded (prepare_slot); the
	 * record cannot exist without the subscription, nor the subscription
	 * without it.  The tables go with it: the worker that adopts the slot
	 * takes them as they are.
	 */
	record_creation(p, DatumGetCString(DirectFunctionCall1(pg_lsn_out, LSNGetDatum(cp))), &published);
	error_context_stack = context.previous;
}

/* The CONTEXT line of an error while the slot of a dropped subscription is dropped at commit. */
static void
slot_drop_context(void *arg)
{
	const PendingDrop *d = (const PendingDrop *) arg;
	errcontext("dropping replication slot \"%s\" of subscription \"%s\" on the source at commit", d->slot, d->name);
}

/* The CONTEXT line of an error while the origin of a dropped subscription is dropped at commit. */
static void
origin_drop_context(void *arg)
{
	const PendingDrop *d = (const PendingDrop *) arg;
	errcontext("dropping replication origin \"%s\" of subscription \"%s\" at commit", d->origin, d->name);
}

/*
 * Connects to the source of `d` to drop its slot (XACT_EVENT_PRE_COMMIT,
 * before any slot is dropped: a source that cannot be reached fails the
 * commit while every slot is still there).
 */
static void
connect_one(PendingDrop *d)
{
	if (d->slot == NULL)
		return;
	ErrorContextCallback context = {error_context_stack, slot_drop_context, d};
	error_context_stack = &context;
	d->conn = connect_for_slot_drop_pg(cstring_to_text(d->conninfo), d->slot);
	error_context_stack = context.previous;
}

/* Drops the slot of `d` on the source over its connection (XACT_EVENT_PRE_COMMIT). */
static void
drop_slot_one(PendingDrop *d)
{
	if (d->slot == NULL)
		return;
	ErrorContextCallback context = {error_context_stack, slot_drop_context, d};
	error_context_stack = &context;
	PGconn *conn = d->conn;
	d->conn = NULL; /* closed by the drop, also when it raises */
	d->slot_dropped = drop_source_slot_pg(conn, d->slot);
	error_context_stack = context.previous;
}

/*
 * Drops the replication origin of `d` (XACT_EVENT_PRE_COMMIT, or
 * XACT_EVENT_PRE_PREPARE without a slot), after its slot: its progress in
 * shared memory is cleared at once, not with the transaction.  Its worker
 * is gone (cdc.drop_subscription waited for it) and a new one reads the
 * locked row as gone before it takes the origin; one still holding it is
 * 55006.
 */
static void
drop_origin_one(PendingDrop *d)
{
	ErrorContextCallback context = {error_context_stack, origin_drop_context, d};
	error_context_stack = &context;
	replorigin_drop_by_name(d->origin, /* missing_ok */ true, /* nowait */ true);
	error_context_stack = context.previous;
}

/*
 * XACT_EVENT_PRE_COMMIT: the pending slot drops (connected to every source
 * first, then dropped one by one), then the pending creations, then the
 * origins of the drops, each in the order registered.
 * statement_timeout is disabled before a transaction commits (postgres.c,
 * finish_xact_command), but the waits on the source (for its running
 * transactions before a slot exists, for a slot another process holds)
 * belong to the statement that commits: they keep the timeout it had
 * (counted from that statement's start), as when they ran inside the call.
 */
static void
run_at_commit(void)
{
	bool timer = false;
	if (StatementTimeout > 0 && !get_timeout_active(STATEMENT_TIMEOUT)) {
		enable_timeout_at(STATEMENT_TIMEOUT,
		                  TimestampTzPlusMilliseconds(GetCurrentStatementStartTimestamp(), StatementTimeout));
		timer = true;
	}
	PG_TRY();
	{
		ListCell *lc;
		foreach (lc, drops)
			connect_one((PendingDrop *) lfirst(lc));
		foreach (lc, drops)
			drop_slot_one((PendingDrop *) lfirst(lc));
		foreach (lc, pending)
			create_one((PendingSlot *) lfirst(lc));
		foreach (lc, drops)
			drop_origin_one((PendingDrop *) lfirst(lc));
	}
	PG_FINALLY();
	{
		if (timer)
			disable_timeout(STATEMENT_TIMEOUT, false);
	}
	PG_END_TRY();
}

/*
 * XACT_EVENT_ABORT after the slot of `p` was made at pre-commit: drop it
 * over the connection that made it (not active: the walsender released it).
 * Interrupts are held during an abort, so the wait is bounded by itself;
 * never raises.
 */
static void
drop_at_abort(PendingSlot *p)
{
	const char *why = NULL;
	if (!PQsendQuery(p->conn, psprintf("DROP_REPLICATION_SLOT %s", quote_identifier(p->slot))))
		why = PQerrorMessage(p->conn);
	TimestampTz give_up = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kDropAtAbortMs);
	while (why == NULL) {
		ResultWait how;
		PGresult *res = get_result_until(p->conn, give_up, &how);
		if (how == RESULT_TIMEOUT)
			why = "no answer from the source within 10 s";
		else if (how == RESULT_BROKEN)
			why = PQerrorMessage(p->conn);
		if (res == NULL)
			break;
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			why = pstrdup(PQresultErrorMessage(res));
		PQclear(res);
	}
	if (why != NULL)
		ereport(WARNING,
		        (errcode(ERRCODE_CONNECTION_FAILURE),
		         errmsg("could not drop replication slot \"%s\" on the source after the transaction that created it "
		                "for subscription \"%s\" aborted: %s",
		                p->slot, p->name, why),
		         errhint("The slot holds WAL on the source: drop it there with pg_drop_replication_slot('%s').", p->slot)));
}

/*
 * End of the transaction: closes the connections of the creations (after
 * dropping their slots again when it aborts: `abort`) and forgets them and
 * the drops.  A slot dropped at pre-commit by a transaction that then
 * aborted cannot come back: a WARNING names it.
 */
static void
forget_all(bool abort)
{
	ListCell *lc;
	foreach (lc, pending) {
		PendingSlot *p = (PendingSlot *) lfirst(lc);
		if (p->conn == NULL)
			continue;
		if (abort)
			drop_at_abort(p);
		PQfinish(p->conn);
		p->conn = NULL;
	}
	foreach (lc, drops) {
		PendingDrop *d = (PendingDrop *) lfirst(lc);
		if (d->conn != NULL) /* connected, not dropped: an earlier step failed */
			PQfinish(d->conn);
		d->conn = NULL;
		if (abort && d->slot_dropped)
			ereport(WARNING,
			        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			         errmsg("replication slot \"%s\" of subscription \"%s\" was dropped on the source, but the "
			                "transaction that dropped it aborted",
			                d->slot, d->name),
			         errdetail("The subscription stays without its slot: its worker stops with 55000."),
			         errhint("Drop the subscription with cdc.drop_subscription('%s').", d->name)));
	}
	pending = NIL; /* the lists live in TopTransactionContext, freed with it */
	drops = NIL;
}

/*
 * May raise a PostgreSQL ERROR at XACT_EVENT_PRE_COMMIT and
 * XACT_EVENT_PRE_PREPARE (a longjmp through PostgreSQL's frames, none of
 * ours with destructors), never at the other events.
 */
void
slot_xact_callback(XactEvent event, void *) noexcept
{
	if (pending == NIL && drops == NIL)
		return;
	switch (event) {
	case XACT_EVENT_PRE_COMMIT: run_at_commit(); break;
	case XACT_EVENT_PRE_PREPARE: {
		if (pending != NIL)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("cannot PREPARE a transaction that creates a subscription's replication slot"),
			                errdetail("cdc.create_subscription(..., copy_data => false) creates the slot on the source when "
			                          "the transaction commits."),
			                errhint("Create the subscription in a transaction of its own.")));
		ListCell *lc;
		foreach (lc, drops)
			if (((PendingDrop *) lfirst(lc))->slot != NULL)
				ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				                errmsg("cannot PREPARE a transaction that drops a subscription's replication slot"),
				                errdetail("cdc.drop_subscription(..., drop_slot => true) drops the slot on the source when "
				                          "the transaction commits, which COMMIT PREPARED cannot do."),
				                errhint("Drop the subscription in a transaction that is not prepared.")));
		/* without a slot: the origins go now, as they did inside the call */
		foreach (lc, drops)
			drop_origin_one((PendingDrop *) lfirst(lc));
		break;
	}
	case XACT_EVENT_ABORT: forget_all(true); break;
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PREPARE: forget_all(false); break;
	default: break;
	}
}

/*
 * A creation or drop registered in a subtransaction that rolls back is
 * forgotten; one that commits moves to the parent.
 */
void
slot_subxact_callback(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void *) noexcept
{
	if (pending == NIL && drops == NIL)
		return;
	ListCell *lc;
	if (event == SUBXACT_EVENT_ABORT_SUB) {
		foreach (lc, pending)
			if (((PendingSlot *) lfirst(lc))->subxid == mySubid)
				pending = foreach_delete_current(pending, lc);
		foreach (lc, drops)
			if (((PendingDrop *) lfirst(lc))->subxid == mySubid)
				drops = foreach_delete_current(drops, lc);
	} else if (event == SUBXACT_EVENT_COMMIT_SUB) {
		foreach (lc, pending) {
			PendingSlot *p = (PendingSlot *) lfirst(lc);
			if (p->subxid == mySubid)
				p->subxid = parentSubid;
		}
		foreach (lc, drops) {
			PendingDrop *d = (PendingDrop *) lfirst(lc);
			if (d->subxid == mySubid)
				d->subxid = parentSubid;
		}
	}
}

/* The transaction callbacks, once per backend. */
void
register_callbacks(void)
{
	if (!callbacks_registered) {
		RegisterXactCallback(slot_xact_callback, NULL);
		RegisterSubXactCallback(slot_subxact_callback, NULL);
		callbacks_registered = true;
	}
}

} // namespace

void
create_source_slot_at_commit_pg(int32 subid)
{
	if (!superuser())
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("permission denied to create the replication slot of a subscription"),
		                errhint("Only superusers may create subscriptions.")));
	register_callbacks();
	ListCell *lc;
	foreach (lc, pending)
		if (((PendingSlot *) lfirst(lc))->subid == subid)
			return;
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	PendingSlot *p = (PendingSlot *) palloc0(sizeof(PendingSlot));
	p->subid = subid;
	p->userid = GetUserId();
	p->subxid = GetCurrentSubTransactionId();
	pending = lappend(pending, p);
	MemoryContextSwitchTo(old);
}

void
drop_at_commit_pg(const char *name, const char *conninfo, const char *slot, const char *origin,
                  TransactionId origin_xmin)
{
	if (!superuser())
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("permission denied to drop the replication slot of a subscription"),
		                errhint("Only superusers may drop subscriptions.")));
	register_callbacks();
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	PendingDrop *d = (PendingDrop *) palloc0(sizeof(PendingDrop));
	d->subxid = GetCurrentSubTransactionId();
	d->name = pstrdup(name);
	d->conninfo = pstrdup(conninfo);
	/*
	 * A subscription created in this transaction (the origin's row is this
	 * transaction's: origins are only ever created with their subscription)
	 * never had a worker, and its pending creation, if any, makes no slot
	 * for a row that is gone: a slot of its name on the source is not its
	 * own.
	 */
	bool created_here = TransactionIdIsValid(origin_xmin) && TransactionIdIsCurrentTransactionId(origin_xmin);
	d->slot = slot != NULL && !created_here ? pstrdup(slot) : NULL;
	d->origin = pstrdup(origin);
	drops = lappend(drops, d);
	MemoryContextSwitchTo(old);
}

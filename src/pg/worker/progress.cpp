// Progress (the counterpart of how PostgreSQL's worker.c uses origin.c):
// the replication origin's LSN committed atomically with the rows of the
// source transactions it covers (commit_with_progress), and the flush
// positions {local commit end, source end} that send_feedback later
// reports once the local commit is durable (remember_flush, like
// store_flush_position's lsn_mapping).
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames, and enters C++ only through RunCpp().
// Must not commit anything but the transaction its caller opened.
#include "pg/worker/worker_state.hpp"

extern "C" {
#include "access/xact.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "replication/origin.h"
#include "utils/memutils.h"
#include "utils/portal.h"
}

/*
 * The code a transaction runs at its commit -- deferred triggers (a
 * constraint trigger DEFERRABLE INITIALLY DEFERRED, or one SET CONSTRAINTS
 * deferred) and the rest of the query of a cursor declared WITH HOLD --
 * was queued while the changes were applied as the subscription owner
 * (docs/security.md, "The worker's identity"; the table owner's
 * security-restricted operations cannot queue either), but CommitTransaction
 * would run it as the worker's own identity, the bootstrap superuser: a
 * table owner's deferred trigger made an ordinary role a superuser
 * (test/t/068_worker_deferred_trigger.pl).  It runs here, as the
 * subscription owner, before the commit, as CommitTransaction runs it; an
 * error aborts the transaction, which restores the user.  Called before
 * every commit of applied rows: commit_with_progress (streamed groups) and
 * commit_control_transition (an initial copy).
 */
void
run_commit_time_code_as_owner(void)
{
	Oid save_userid;
	int save_sec_context;
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(W->owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	for (;;) {
		AfterTriggerFireDeferred();
		if (!PreCommit_Portals(false))
			break;
	}
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

/*
 * Commits the current transaction with the replication origin's progress set
 * to `remote_end` (the end LSN of the last source transaction it applies), so
 * that the position commits with the rows, as PostgreSQL's own apply worker
 * does.  The origin LSN is cleared again afterwards (and in the error path,
 * if the commit itself fails): any other transaction of this worker — a
 * status write, the error record after a failed commit — would otherwise
 * carry it and move the progress past a transaction that never committed.
 */
void
commit_with_progress(XLogRecPtr remote_end, TimestampTz remote_time)
{
	/*
	 * A transaction that wrote nothing (every change of its source
	 * transactions was skipped: a table not in the subscription, origin =
	 * none) has no xid, and PostgreSQL writes no commit record for it, so
	 * the origin would not move although the caller reports remote_end to
	 * the source as flushed.  The slot's confirmed position would then pass
	 * the durable progress, which the next worker cannot tell from a slot
	 * advanced by someone else (continuity.cpp).  An xid makes the commit
	 * record, and with it the progress, durable like any other.
	 */
	if (remote_end != InvalidXLogRecPtr)
		(void) GetTopTransactionId();
	run_commit_time_code_as_owner();
	replorigin_session_origin_lsn = remote_end;
	replorigin_session_origin_timestamp = remote_time;
	CommitTransactionCommand();
	replorigin_session_origin_lsn = InvalidXLogRecPtr;
	replorigin_session_origin_timestamp = 0;
}

void
remember_flush(XLogRecPtr local_end, XLogRecPtr remote_end)
{
	if (W->nflushes == W->maxflushes) {
		W->maxflushes = W->maxflushes ? W->maxflushes * 2 : 64;
		W->flushes = W->flushes ? (FlushPosition *) repalloc(W->flushes, sizeof(FlushPosition) * W->maxflushes)
		                        : (FlushPosition *) MemoryContextAlloc(CdcWorkerContext, sizeof(FlushPosition) * W->maxflushes);
	}
	W->flushes[W->nflushes].local_end = local_end;
	W->flushes[W->nflushes].remote_end = remote_end;
	W->nflushes++;
}

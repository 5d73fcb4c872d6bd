// Source transactions and grouping (docs/worker.md, "Grouping"): the local
// transaction with its ApplyEngine (begin_local_xact), a source
// transaction's start and end (begin_source_xact, end_source_xact: replays
// below the origin's progress are discarded, an explicit skip commits on its
// own), and the group of consecutive source transactions committed together
// with the progress of the last one (open_group, group_full, close_group).
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames, and enters C++ only through RunCpp().
// The engine lives from begin_local_xact to close_group; C++ only via
// RunCpp.
#include "pg/guc.hpp"
#include "pg/shared_stats.hpp"
#include "pg/worker/worker_state.hpp"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

void
begin_local_xact(void)
{
	/*
	 * A background worker must start the statement clock itself: now() (the
	 * ledger's claim time, entity records' write time, outbox created_at, all
	 * compared with the replay horizon) is the transaction's start.
	 */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	cdc::pg::RunCpp([&]() {
		W->engine = new cdc::pg::ApplyEngine();
		W->engine->SetPositionNames("change", "of the source transaction");
		W->engine->SetWorkerIdentity(W->owner, W->run_as_owner, W->name);
		/* one complete ordered stream: may write stream-ordered targets (docs/semantics.md) */
		W->engine->SetStreamIntake(true);
		/* the spent buffers of the worker's earlier queues, for this group's changes */
		W->engine->UseBufferPool(&WorkerBufferPool());
	});
	W->queue_spans = false;
	W->batch_limit = cdc_apply_batch_changes;
}

/* Applies the changes queued for the batch engine (Submit). */
void
flush_queue(void)
{
	clear_cur_table(); /* the queue may hold other tables' changes: the engine's context names the change's table */
	if (W->engine != NULL)
		cdc::pg::RunCpp([&]() { W->engine->ApplyQueued(); });
	W->queue_spans = false;
}

/*
 * Grouping (SPEC §7, docs/worker.md): consecutive source transactions are
 * applied in one local transaction (the group), committed with the
 * replication origin's progress set to the end LSN of the last of them.  A
 * group is committed after the source transaction that reaches
 * cdc.group_max_transactions, cdc.group_max_bytes or cdc.group_max_delay,
 * and as soon as the source has nothing more to send (stream()), so grouping
 * never waits for data.  Rows, versions, tombstones, ledger, outbox and the
 * progress of every source transaction in a group commit together, so a
 * crash loses or keeps whole groups, never parts of a source transaction.
 */
static void
open_group(void)
{
	begin_local_xact();
	W->group_open = true;
	W->group_xacts = 0;
	W->group_changes = 0;
	W->group_bytes = 0;
	W->group_start = GetCurrentTimestamp();
}

static bool
group_full(void)
{
	return W->group_xacts >= cdc_group_max_transactions || W->group_bytes >= (int64) cdc_group_max_bytes * 1024 ||
	       TimestampDifferenceExceeds(W->group_start, GetCurrentTimestamp(), cdc_group_max_delay);
}

/*
 * Apply latency (docs/operations.md, "Counters"): the source commit time of
 * each source transaction applied in the group is kept, and after the
 * group's local commit the latency of each (local commit minus source
 * commit) goes to the subscription's histogram in shared memory.
 */
static void
note_latency(TimestampTz source_commit)
{
	if (W->latency_n == W->latency_max) {
		W->latency_max = W->latency_max ? W->latency_max * 2 : 64;
		W->latency_pending = W->latency_pending
		                         ? (TimestampTz *) repalloc(W->latency_pending, sizeof(TimestampTz) * W->latency_max)
		                         : (TimestampTz *) MemoryContextAlloc(CdcWorkerContext, sizeof(TimestampTz) * W->latency_max);
	}
	W->latency_pending[W->latency_n++] = source_commit;
}

static void
count_latencies(void)
{
	if (W->latency_n == 0)
		return;
	TimestampTz now = GetCurrentTimestamp();
	for (int i = 0; i < W->latency_n; i++)
		W->latency_pending[i] = now - W->latency_pending[i]; /* microseconds */
	cdc::pg::WorkerCountLatencies(W->subid, W->latency_pending, W->latency_n);
	W->latency_n = 0;
}

/* The local commit of the open group: progress = its last source transaction. */
void
close_group(void)
{
	Assert(W->group_open && !W->in_xact && W->group_xacts > 0);
	W->committing_group = true;
	cdc::pg::RunCpp([&]() {
		LogQueue("at the local commit of " + std::to_string(W->group_xacts) + " source transactions");
		W->engine->Finish();
		delete W->engine;
	});
	W->engine = NULL;
	W->queue_spans = false;
	PopActiveSnapshot();
	save_learnt_relids();
	if (fault("before_commit")) {
		ereport(LOG, (errmsg("cdc_apply: fault point before_commit reached, exiting")));
		proc_exit(1);
	}
	commit_with_progress(W->group_end_lsn, W->group_commit_time);
	count_latencies();
	W->committing_group = false;
	W->group_open = false;
	remember_flush(XactLastCommitEnd, W->group_end_lsn);
	W->progress = W->group_end_lsn;
	W->last_commit_time = W->group_commit_time;
	W->stat_commits++;
	pgstat_report_activity(STATE_IDLE, NULL);
	if (fault("after_commit")) {
		ereport(LOG, (errmsg("cdc_apply: fault point after_commit reached, exiting")));
		proc_exit(1);
	}
	fault_pause("commit");
	mark_healthy(); /* a source transaction committed: the subscription streams again */
}

/*
 * A source transaction starts: from BEGIN, or from STREAM COMMIT before its
 * spooled changes are applied.  final_lsn is its commit LSN.
 */
void
begin_source_xact(XLogRecPtr final_lsn, TransactionId xid, TimestampTz committime)
{
	bool already_applied = final_lsn < W->progress;
	bool skipping = !already_applied && W->skip_lsn != InvalidXLogRecPtr && final_lsn == W->skip_lsn;
	/*
	 * The source's WAL reaches at least this transaction's commit (the data
	 * messages of a logical stream do not always carry their position): a
	 * subscription stuck on it shows that lag.
	 */
	if (final_lsn > W->source_end)
		W->source_end = final_lsn;
	/* an explicit skip commits on its own: close the group before it */
	if (skipping && W->group_open)
		close_group();
	W->in_xact = true;
	W->final_lsn = final_lsn;
	W->xid = xid;
	W->xact_serial++;
	W->committime = committime;
	W->seq = 0;
	W->pos_lsn = InvalidXLogRecPtr;
	W->pos_ordinal = 0;
	W->pos_row_seen = false;
	W->count_positions = W->count_positions_until != InvalidXLogRecPtr && final_lsn <= W->count_positions_until;
	W->count_seq = 0;
	clear_cur_table();
	W->already_applied = already_applied;
	W->skipping = skipping;
	W->foreign_origin = false; /* set by an Origin message with origin = none */
	if (W->already_applied) {
		/* B16: the source went backwards (or was asked from an earlier point) and re-sends what we have */
		if (W->replays_discarded++ == 0)
			ereport(LOG, (errmsg("cdc_apply subscription \"%s\": source transaction %u committed at %X/%X is already applied "
			                     "(replication origin progress %X/%X); discarding what the source re-sends",
			                     W->name, xid, CDC_LSN_ARGS(final_lsn), CDC_LSN_ARGS(W->progress))));
	} else if (W->replays_discarded > 0) {
		ereport(LOG, (errmsg("cdc_apply subscription \"%s\": discarded %lld re-sent source transactions that were already applied",
		                     W->name, (long long) W->replays_discarded)));
		W->replays_discarded = 0;
	}
	if (W->skipping)
		ereport(LOG, (errmsg("cdc_apply subscription \"%s\": skipping source transaction %u committed at %X/%X as requested",
		                     W->name, xid, CDC_LSN_ARGS(final_lsn))));
	if (!W->already_applied && !W->skipping && !W->group_open)
		open_group();
	else if (W->group_open)
		/*
		 * A role's or membership's change committed since the group began
		 * (REVOKE owner_role FROM subscription_owner, ALTER ROLE ...
		 * NOSUPERUSER) is seen by this source transaction, whose changes the
		 * engine authorizes again (ApplyEngine::Authorize; TAP 156), as a
		 * transaction of its own would see it.
		 */
		AcceptInvalidationMessages();
}

/* A source transaction ends (COMMIT, or STREAM COMMIT after its changes). */
void
end_source_xact(const LogicalRepCommitData &commit)
{
	if (W->already_applied) {
		/* replayed by the source after it went backwards: our progress already covers it */
		W->in_xact = false;
		return;
	}
	if (!W->skipping) {
		clear_cur_table();
		if (W->one_by_one_until != InvalidXLogRecPtr)
			flush_queue(); /* retrying one by one: an error names exactly this transaction */
		else if (W->engine != NULL && W->engine->QueuedChanges() > 0)
			W->queue_spans = true; /* the queue goes on with the next source transaction of the group */
	}
	W->in_xact = false;
	clear_cur_table();
	if (W->skipping) {
		const char *args[3] = {psprintf("%d", W->subid), lsn_text(W->final_lsn), psprintf("%u", W->xid)};
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		SPI_connect();
		spi_exec("UPDATE cdc.skipped_transactions SET skipped_at = pg_catalog.now(), xid = $3::bigint "
		         "WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4 "
		         "AND commit_lsn OPERATOR(pg_catalog.=) $2::pg_catalog.pg_lsn AND skipped_at IS NULL",
		         3, args);
		spi_exec("UPDATE cdc.subscription SET skip_lsn = NULL WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4", 1,
		         args);
		SPI_finish();
		PopActiveSnapshot();
		commit_with_progress(commit.end_lsn, commit.committime);
		/* a control transition: durable before anything later is applied or confirmed */
		XLogFlush(XactLastCommitEnd);
		W->skip_lsn = InvalidXLogRecPtr;
		W->skipping = false;
		remember_flush(XactLastCommitEnd, commit.end_lsn);
		W->progress = commit.end_lsn;
		W->last_commit_time = commit.committime;
		pgstat_report_activity(STATE_IDLE, NULL);
		fault_pause("skip");
		mark_healthy();
		return;
	}

	/* the source transaction is complete inside the group */
	W->group_xacts++;
	W->group_end_lsn = commit.end_lsn;
	W->group_last_final = W->final_lsn;
	W->group_last_xid = W->xid;
	W->group_commit_time = commit.committime;
	if (!W->foreign_origin) {
		W->stat_xacts++; /* one of another origin that origin = none dropped is not counted as applied */
		note_latency(commit.committime);
	}
	W->foreign_origin = false;
	bool alone = W->one_by_one_until != InvalidXLogRecPtr;
	if (alone && W->final_lsn >= W->one_by_one_until) {
		ereport(LOG, (errmsg("cdc_apply subscription \"%s\": applied one by one up to %X/%X; grouping again",
		                     W->name, CDC_LSN_ARGS(W->one_by_one_until))));
		W->one_by_one_until = InvalidXLogRecPtr;
	}
	if (alone || group_full())
		close_group();
}

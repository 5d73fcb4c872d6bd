// What the apply worker records about itself: its own small statements
// (spi_exec, exec_in_own_xact), the cdc.subscription_state row (state,
// received/flushed LSNs, counts; write_status), and after an error the
// error record, the backoff (cdc.retry_backoff doubled per consecutive
// failure, at most cdc.retry_backoff_max) and the exit that lets the
// launcher restart it (record_error_and_exit).
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames, and enters C++ only through RunCpp().
// It must not apply anything: every statement here is bookkeeping in a
// transaction of its own or the caller's.
#include "pg/guc.hpp"
#include "pg/shared_stats.hpp"
#include "pg/worker/worker_state.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

/* ------------------------------------------------------------------------
 * Small SPI helpers for the worker's own transactions
 * ------------------------------------------------------------------------ */

/* Runs one statement with text parameters inside the current transaction. */
int
spi_exec(const char *sql, int nargs, const char **args)
{
	Oid types[10];
	Datum values[10];
	char nulls[10] = {0}; /* initialized: spi_exec is no longer inlined, and gcc cannot see nargs */
	Assert(nargs <= 10);
	for (int i = 0; i < nargs; i++) {
		types[i] = TEXTOID;
		values[i] = args[i] ? CStringGetTextDatum(args[i]) : (Datum) 0;
		nulls[i] = args[i] ? ' ' : 'n';
	}
	int rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "cdc_apply worker: SPI failed (%s) for \"%s\"", SPI_result_code_string(rc), sql);
	return rc;
}

/* Runs one statement in a transaction of its own. */
void
exec_in_own_xact(const char *sql, int nargs, const char **args)
{
	SetCurrentStatementStartTimestamp(); /* now() of this transaction */
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	spi_exec(sql, nargs, args);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

const char *
lsn_text(XLogRecPtr lsn)
{
	return psprintf("%X/%X", CDC_LSN_ARGS(lsn));
}

/* Writes the worker's view of its progress (received, flushed, lag, pid). */
void
write_status(const char *state, bool reset_retries)
{
	const char *args[10] = {psprintf("%d", W->subid),
	                        state,
	                        W->received ? lsn_text(W->received) : NULL,
	                        W->reported_flush ? lsn_text(W->reported_flush) : NULL,
	                        W->source_end ? lsn_text(W->source_end) : NULL,
	                        W->last_commit_time ? timestamptz_to_str(W->last_commit_time) : NULL,
	                        psprintf("%d", MyProcPid),
	                        reset_retries ? "t" : "f",
	                        psprintf(INT64_FORMAT, W->stat_xacts),
	                        psprintf(INT64_FORMAT, W->stat_commits)};
	exec_in_own_xact("UPDATE cdc.subscription_state SET state = $2, received_lsn = $3::pg_catalog.pg_lsn, "
	                 "flushed_lsn = $4::pg_catalog.pg_lsn, source_end_lsn = $5::pg_catalog.pg_lsn, "
	                 "last_commit_at = $6::pg_catalog.timestamptz, "
	                 "last_msg_at = pg_catalog.now(), worker_pid = $7::pg_catalog.int4, "
	                 "retry_count = CASE WHEN $8::pg_catalog.bool THEN 0 ELSE retry_count END, "
	                 "applied_xacts = applied_xacts OPERATOR(pg_catalog.+) $9::bigint, "
	                 "apply_commits = apply_commits OPERATOR(pg_catalog.+) $10::bigint, "
	                 "updated_at = pg_catalog.now() "
	                 "WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4",
	                 10, args);
	W->stat_xacts = 0;
	W->stat_commits = 0;
	W->last_status = GetCurrentTimestamp();
}

void
record_error_and_exit(ErrorData *edata)
{
	int delay_ms;
	const char *args[7];

	W->retry_count++;
	/* the shared counters keep every error, whatever happens to the rows below (cdc.worker_stats) */
	cdc::pg::WorkerCountError(W->subid, edata->sqlerrcode);
	args[0] = psprintf("%d", W->subid);
	/* the whole error: message, DETAIL, HINT (what to do) and CONTEXT (where) */
	args[1] = psprintf("%s%s%s%s%s%s%s", edata->message ? edata->message : "unknown error",
	                   edata->detail ? "\nDETAIL: " : "", edata->detail ? edata->detail : "",
	                   edata->hint ? "\nHINT: " : "", edata->hint ? edata->hint : "",
	                   edata->context ? "\nCONTEXT: " : "", edata->context ? edata->context : "");
	/* the failing source transaction: the one being applied, or the only one of a group whose commit failed */
	args[2] = W->in_xact ? lsn_text(W->final_lsn)
	          : (W->committing_group && W->group_xacts == 1) ? lsn_text(W->group_last_final)
	                                                          : NULL;
	args[3] = psprintf("%d", MyProcPid);
	args[4] = W->source_end ? lsn_text(W->source_end) : NULL;
	args[5] = W->received ? lsn_text(W->received) : NULL;
	args[6] = W->name;
	/*
	 * The current error in cdc.subscription_state (what cdc.subscription_status
	 * shows, with where the source is, so lag shows how far behind it is
	 * stuck), and the history in cdc.subscription_errors, the last 100 kept.
	 *
	 * Guarded: this runs inside the main loop's PG_CATCH, where an ERROR of
	 * its own (a read-only session, a lock or statement timeout, a full
	 * disk) went to the background worker's top level, which exits at once:
	 * no backoff, the launcher restarted the worker within milliseconds,
	 * over and over, and nothing said that the error was not recorded (TAP
	 * 114).  Now a failed write is rolled back, logged with the original
	 * error, and the worker backs off as usual.
	 */
	MemoryContext ctx = CurrentMemoryContext;
	ErrorData *volatile unrecorded = NULL;
	PG_TRY();
	{
		SetCurrentStatementStartTimestamp(); /* now() of this transaction */
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		SPI_connect();
		spi_exec("WITH st AS ("
		         "  UPDATE cdc.subscription_state SET state = 'error', last_error = $2, "
		         "    last_error_lsn = $3::pg_catalog.pg_lsn, last_error_at = pg_catalog.now(), "
		         "    retry_count = retry_count OPERATOR(pg_catalog.+) 1, worker_pid = $4::pg_catalog.int4, "
		         "    source_end_lsn = COALESCE($5::pg_catalog.pg_lsn, source_end_lsn), "
		         "    received_lsn = COALESCE($6::pg_catalog.pg_lsn, received_lsn), updated_at = pg_catalog.now() "
		         "  WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4 RETURNING retry_count), "
		         "ins AS (INSERT INTO cdc.subscription_errors (subid, name, error, error_lsn, retry) "
		         "  SELECT $1::pg_catalog.int4, $7, $2, $3::pg_catalog.pg_lsn, st.retry_count FROM st) "
		         "DELETE FROM cdc.subscription_errors e WHERE e.subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4 "
		         "  AND e.id OPERATOR(pg_catalog.<=) (SELECT x.id FROM cdc.subscription_errors x "
		         "    WHERE x.subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4 ORDER BY x.id DESC OFFSET 99 LIMIT 1)",
		         7, args);
		/* test-only (TAP 114): the write fails, as in a read-only session or at a lock timeout */
		if (fault("record_error"))
			ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
			                errmsg("cdc_apply: fault point record_error: the error record is not written")));
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(ctx);
		unrecorded = CopyErrorData();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		MemoryContextSwitchTo(ctx);
	}
	PG_END_TRY();

	/*
	 * back off: cdc.retry_backoff doubled per consecutive failure, at most
	 * cdc.retry_backoff_max.  The failures are the recorded retry_count plus
	 * those in a row that could not be recorded (shared memory): before,
	 * a record that kept failing left retry_count as it was, and every
	 * restart waited the same first delay (TAP 126).
	 */
	int unrecorded_in_row = cdc::pg::WorkerUnrecordedErrors(W->subid, unrecorded != NULL);
	int failures = W->retry_count + (unrecorded_in_row > 0 ? unrecorded_in_row - 1 : 0);
	double d = (double) cdc_retry_backoff;
	for (int i = 1; i < failures && d < cdc_retry_backoff_max * 1000.0; i++)
		d *= 2;
	delay_ms = (int) Min(d, cdc_retry_backoff_max * 1000.0);

	const char *who = W->name ? psprintf("subscription \"%s\"", W->name) : psprintf("subscription %d", W->subid);
	if (unrecorded != NULL) {
		/* both errors: the original one (logged above by the caller too) and why it is not in the status row */
		ereport(WARNING,
		        (errmsg("cdc_apply %s: could not record the error \"%s\" in cdc.subscription_state: %s", who,
		                edata->message ? edata->message : "unknown error",
		                unrecorded->message ? unrecorded->message : "unknown error"),
		         errdetail("The error: %s", args[1]),
		         errhint("cdc.subscription_status and cdc.subscription_errors do not show this error; "
		                 "the worker retries in %d ms.",
		                 delay_ms)));
		pgstat_report_activity(STATE_IDLE, "waiting to retry after an error that could not be recorded");
	} else
		pgstat_report_activity(STATE_IDLE, "waiting to retry after an error");
	/* sleep the whole delay: a latch set by someone else must not cut it short */
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), delay_ms);
	for (;;) {
		long left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);
		if (left <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (unrecorded != NULL)
		ereport(LOG, (errmsg("cdc_apply %s: waited %d ms after the error that could not be recorded; exiting", who,
		                     delay_ms)));
	proc_exit(1);
}

// The launcher's pruning schedule: see horizon.hpp.  The settings it reads
// (cdc.prune_interval, cdc.prune_max_pages) are defined in pg/guc.cpp.
#include "pg/apply/horizon.hpp"
#include "pg/guc.hpp"

extern "C" {
#include "access/xact.h"
#include "executor/spi.h"
#include "pgstat.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

namespace cdc::pg {

TimestampTz
LauncherNextPrune(TimestampTz last_prune)
{
	if (cdc_prune_interval <= 0)
		return 0;
	if (last_prune == 0)
		return GetCurrentTimestamp();
	return TimestampTzPlusMilliseconds(last_prune, cdc_prune_interval * 1000L);
}

TimestampTz
LauncherPruneIfDue(TimestampTz last_prune)
{
	if (cdc_prune_interval <= 0)
		return last_prune;
	TimestampTz now = GetCurrentTimestamp();
	if (last_prune != 0 && !TimestampDifferenceExceeds(last_prune, now, cdc_prune_interval * 1000))
		return last_prune;
	last_prune = now;

	MemoryContext caller = CurrentMemoryContext;
	PG_TRY();
	{
		SetCurrentStatementStartTimestamp(); /* now(): the prune cutoff is now() - horizon */
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "cdc_apply launcher: SPI_connect failed");
		pgstat_report_activity(STATE_RUNNING, "cdc.prune()");
		bool isnull = false;
		if (SPI_execute("SELECT pg_catalog.to_regprocedure('cdc.prune(integer,interval)') IS NOT NULL", true, 1) == SPI_OK_SELECT &&
		    DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull))) {
			char sql[128];
			snprintf(sql, sizeof sql, "SELECT pg_catalog.count(*) FROM cdc.prune(%d)", cdc_prune_max_pages);
			if (SPI_execute(sql, false, 0) != SPI_OK_SELECT)
				elog(ERROR, "cdc_apply launcher: cdc.prune() failed");
		}
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(caller);
		ErrorData *edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ereport(WARNING, (errmsg("cdc_apply launcher: cdc.prune() failed: %s", edata->message)));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);
	return last_prune;
}

} // namespace cdc::pg

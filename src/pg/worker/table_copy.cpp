// Slot creation and initial copy (the counterpart of PostgreSQL's
// tablesync.c, done inside the worker before it streams): CREATE_REPLICATION_SLOT
// with an exported snapshot, COPY of every published table in one
// REPEATABLE READ source transaction, each table applied as snapshot rows
// (op r at the slot's consistent point) in one local transaction, then
// slot_ready committed with the origin's progress set to that point.
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames, and enters C++ only through RunCpp().
// The C++ half (ApplyCopyRow) runs only inside RunCpp.
#include "pg/worker/worker_state.hpp"

#include "core/copy_text.hpp"
#include "core/errors.hpp"
#include "core/version.hpp"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

namespace {

using cdc::DecodedValue;
using cdc::Op;
using cdc::pg::ChangeRequest;
using cdc::pg::RawImage;

// One row of the initial copy, applied as a snapshot row at point `cp`;
// `row` is its 1-based number in the copy of the table.
void
ApplyCopyRow(const char *schema, const char *table, char **columns, int ncolumns, const char *line, int len,
             XLogRecPtr cp, long row)
{
	auto values = cdc::ParseCopyTextRow(std::string_view(line, size_t(len)));
	if (int(values.size()) != ncolumns)
		throw cdc::InputError("22P02", "COPY row of " + std::string(schema) + "." + table + " has " +
		                                   std::to_string(values.size()) + " columns, expected " + std::to_string(ncolumns));
	ChangeRequest req;
	req.target = W->engine->ResolveSourceTable(W->name, schema, table, true);
	req.op = Op::Read;
	RawImage img;
	for (int i = 0; i < ncolumns; i++)
		img.values.emplace_back(columns[i], values[size_t(i)] ? DecodedValue::Text(*values[size_t(i)]) : DecodedValue::Null());
	AppendImageJson(img);
	req.after = std::move(img);
	req.source.connector = "pgoutput";
	req.source.name = W->source_id;
	req.source.db = W->source_db;
	req.source.schema = schema;
	req.source.table = table;
	req.source.lsn = int64_t(cp);
	req.version = cdc::Version{{W->epoch, int64_t(cp), 0, 0}};
	/* delivery key derived from the source identity: dbz-style, with op r and the snapshot point */
	Submit(std::move(req), size_t(row));
}

} // namespace

static void
copy_table(const char *schema, const char *table, XLogRecPtr cp)
{
	char *qual = psprintf("%s.%s", quote_identifier(schema), quote_identifier(table));
	char *lit = PQescapeLiteral(W->conn, qual, strlen(qual));
	PGresult *res = source_exec(psprintf("SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = %s::regclass "
	                                     "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
	                                     lit),
	                            PGRES_TUPLES_OK);
	PQfreemem(lit);
	int ncols = PQntuples(res);
	char **cols = (char **) palloc(sizeof(char *) * (ncols + 1));
	StringInfoData collist;
	initStringInfo(&collist);
	for (int i = 0; i < ncols; i++) {
		cols[i] = pstrdup(PQgetvalue(res, i, 0));
		appendStringInfo(&collist, "%s%s", i ? ", " : "", quote_identifier(cols[i]));
	}
	PQclear(res);

	res = source_exec(psprintf("COPY %s (%s) TO STDOUT", qual, collist.data), PGRES_COPY_OUT);
	PQclear(res);
	snprintf(W->cur_table, sizeof(W->cur_table), "%s.%s", schema, table);
	begin_local_xact();
	cdc::pg::RunCpp([&]() { W->engine->SetPositionNames("row", "of the initial copy"); });
	/* per row (and per queue applied with a row): the copy is one local transaction */
	MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext, "CdcCopyRow", ALLOCSET_DEFAULT_SIZES);
	MemoryContext copy_context = MemoryContextSwitchTo(row_context);
	long rows = 0;
	for (;;) {
		MemoryContextReset(row_context);
		char *buf = NULL;
		int len = PQgetCopyData(W->conn, &buf, 0);
		if (len == -1)
			break;
		if (len < 0)
			ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
			                errmsg("cdc_apply: initial copy of %s failed: %s", qual, PQerrorMessage(W->conn))));
		rows++;
		cdc::pg::RunCpp([&]() { ApplyCopyRow(schema, table, cols, ncols, buf, len, cp, rows); });
		PQfreemem(buf);
		CHECK_FOR_INTERRUPTS();
	}
	res = PQgetResult(W->conn);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
		                errmsg("cdc_apply: initial copy of %s failed: %s", qual, PQresultErrorMessage(res))));
	PQclear(res);
	MemoryContextReset(row_context);
	cdc::pg::RunCpp([&]() {
		W->engine->Finish();
		delete W->engine;
	});
	MemoryContextSwitchTo(copy_context);
	MemoryContextDelete(row_context);
	W->engine = NULL;
	PopActiveSnapshot();
	CommitTransactionCommand();
	W->cur_table[0] = '\0';
	ereport(LOG, (errmsg("cdc_apply subscription \"%s\": copied %ld rows of %s.%s", W->name, rows, schema, table)));
}

void
prepare_slot(void)
{
	char *slot = pstrdup(quote_identifier(W->slot_name));
	char *slot_lit = PQescapeLiteral(W->conn, W->slot_name, strlen(W->slot_name));
	PGresult *res = source_exec(psprintf("SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = %s", slot_lit),
	                            PGRES_TUPLES_OK);
	bool exists = PQntuples(res) > 0;
	PQclear(res);
	PQfreemem(slot_lit);
	if (exists) {
		/* left by an attempt that did not finish its initial copy: start over */
		ereport(LOG, (errmsg("cdc_apply subscription \"%s\": dropping unfinished slot %s", W->name, W->slot_name)));
		PQclear(source_exec(psprintf("DROP_REPLICATION_SLOT %s WAIT", slot), PGRES_COMMAND_OK));
	}

	XLogRecPtr cp;
	if (W->copy_data) {
		write_status("copying", false);
		PQclear(source_exec("BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ", PGRES_COMMAND_OK));
		res = source_exec(psprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'use')", slot), PGRES_TUPLES_OK);
		cp = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(PQgetvalue(res, 0, 1))));
		PQclear(res);
		res = source_exec(psprintf("SELECT DISTINCT schemaname, tablename FROM pg_catalog.pg_publication_tables "
		                           "WHERE pubname IN (%s) ORDER BY 1, 2",
		                           W->publications_sql),
		                  PGRES_TUPLES_OK);
		int ntables = PQntuples(res);
		char **schemas = (char **) palloc(sizeof(char *) * (ntables + 1));
		char **tables = (char **) palloc(sizeof(char *) * (ntables + 1));
		for (int i = 0; i < ntables; i++) {
			schemas[i] = pstrdup(PQgetvalue(res, i, 0));
			tables[i] = pstrdup(PQgetvalue(res, i, 1));
		}
		PQclear(res);
		for (int i = 0; i < ntables; i++)
			copy_table(schemas[i], tables[i], cp);
		PQclear(source_exec("COMMIT", PGRES_COMMAND_OK));
	} else {
		res = source_exec(psprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'nothing')", slot), PGRES_TUPLES_OK);
		cp = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(PQgetvalue(res, 0, 1))));
		PQclear(res);
	}

	/* the slot is ready: progress = its start point, committed with the flag */
	const char *args[1] = {psprintf("%d", W->subid)};
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	spi_exec("UPDATE cdc.subscription SET slot_ready = true WHERE subid = $1::int", 1, args);
	SPI_finish();
	PopActiveSnapshot();
	commit_with_progress(cp, GetCurrentTimestamp());
	/*
	 * Durable before anything else happens: the worker commits with
	 * synchronous_commit = off, and a crash that loses this commit would
	 * make the next worker drop the slot and copy again, turning the
	 * changes committed since this point into snapshot rows (no outbox
	 * rows: TAP 023, B20, when the destination is stopped right after).
	 */
	XLogFlush(XactLastCommitEnd);
	W->progress = cp;
	W->slot_ready = true;
	ereport(LOG, (errmsg("cdc_apply subscription \"%s\": slot %s ready at %X/%X", W->name, W->slot_name, CDC_LSN_ARGS(cp))));
}

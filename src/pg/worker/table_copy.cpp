// Slot creation, the subscription's tables and their copies (the
// counterpart of PostgreSQL's tablesync.c, done inside the worker before it
// streams).  The first time: CREATE_REPLICATION_SLOT with its snapshot, the
// publications' tables recorded in cdc.subscription_rel, and COPY of each
// in that REPEATABLE READ source transaction, applied as snapshot rows (op
// r at the slot's consistent point), one local transaction per table; then
// slot_ready committed with the origin's progress set to that point.  Later
// (cdc.refresh_subscription, cdc.resync_table, alter_subscription): the
// tables waiting for a copy are copied at the snapshot of a temporary slot,
// and the stream skips their changes committed before its point
// (pgoutput.cpp).  Every copy reads exactly what the publications publish
// (fetch_remote_table_info in tablesync.c): the column list, the row
// filters (OR-ed, none if one publication has none), the partitioned root
// through a SELECT.
//
// PostgreSQL-regime code (it may ereport): it owns no C++ objects with
// destructors in its frames, and enters C++ only through RunCpp().
// The C++ half (ApplyCopyRow) runs only inside RunCpp.
#include "pg/guc.hpp"
#include "pg/worker/worker.hpp"
#include "pg/worker/registry.hpp"
#include "pg/worker/worker_state.hpp"

#include "core/copy_text.hpp"
#include "core/errors.hpp"
#include "core/version.hpp"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
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

// A change of source table schema.table known from its copy at point `cp`
// (a snapshot row, or a snapshot delete): the source identity of the
// subscription and the copy's version {epoch, cp, 0, 0}; its delivery key
// is derived from that identity (dbz-style, with the op and the snapshot
// point).
ChangeRequest
CopyChange(Oid target, Op op, const char *schema, const char *table, XLogRecPtr cp)
{
	ChangeRequest req;
	req.target = target;
	req.op = op;
	req.source.connector = "pgoutput";
	req.source.name = W->source_id;
	req.source.db = W->source_db;
	req.source.schema = schema;
	req.source.table = table;
	req.source.lsn = int64_t(cp);
	req.version = cdc::Version{{W->epoch, int64_t(cp), 0, 0}};
	return req;
}

// One row of the initial copy, applied as a snapshot row at point `cp`;
// `row` is its 1-based number in the copy of the table.
void
ApplyCopyRow(const char *schema, const char *table, char **columns, int ncolumns, const char *line, int len,
             XLogRecPtr cp, long row)
{
	auto values = cdc::ParseCopyTextRow(std::string_view(line, size_t(len)));
	if (int(values.size()) != ncolumns)
		throw cdc::InputError("22P02", "COPY row of " + cdc::pg::QuoteIdent(schema) + "." + cdc::pg::QuoteIdent(table) + " has " +
		                                   std::to_string(values.size()) + " columns, expected " + std::to_string(ncolumns));
	ChangeRequest req = CopyChange(W->engine->ResolveSourceTable(W->name, schema, table, true), Op::Read, schema, table, cp);
	RawImage img;
	for (int i = 0; i < ncolumns; i++)
		img.values.emplace_back(columns[i], values[size_t(i)] ? DecodedValue::Text(*values[size_t(i)]) : DecodedValue::Null());
	req.after = std::move(img);
	Submit(std::move(req), size_t(row));
}

// After the copy of a table at `cp`, in its local transaction: the rows the
// copy did not refresh (ApplyEngine::KeysOlderThan: entity records of this
// source older than the snapshot version), which the source no longer
// published at cp, deleted as snapshot deletes at cp (no outbox row, as
// cdc.resync deletes them).  Found by a fidelity review: a table dropped
// from the publication, refreshed, added back and refreshed kept the rows
// deleted on the source meanwhile.  None when another subscription writes
// the same target (ApplyEngine::OtherSubscriptionWriting: its rows have the
// same source id), with a WARNING; none when the publications do not
// delete the table's rows (`deletes_published` false: TableScope).
// `rows`: the copy's rows, numbered before these.  Returns how many were
// deleted.
long
DeleteRowsNotCopied(const char *schema, const char *table, XLogRecPtr cp, long rows, bool deletes_published)
{
	const Oid relid = W->engine->ResolveSourceTable(W->name, schema, table, true);
	W->engine->ApplyQueued(); /* the copy's rows first: their records move to the snapshot version */
	const cdc::Version v{{W->epoch, int64_t(cp), 0, 0}};
	/*
	 * The publications never delete its rows (publish = 'insert', or
	 * 'insert, update' without a row filter): the destination keeps the rows
	 * the source deleted, as the stream keeps them.  Deleting them here made
	 * every later copy (a refresh after the table went out of the
	 * publication and back, cdc.resync_table) delete an archive's rows
	 * (review h2, TAP 116).
	 */
	if (!deletes_published)
		return 0;
	if (std::optional<std::string> other = W->engine->OtherSubscriptionWriting(relid, W->name, W->system_id)) {
		cdc::pg::PgCall([&]() {
			ereport(WARNING,
			        (errmsg("cdc_apply subscription \"%s\": the copy of %s.%s deletes no rows the source no longer has", W->name,
			                schema, table),
			         errdetail("Subscription \"%s\" also writes its destination table, and the entity records do not "
			                   "tell its rows from this subscription's.",
			                   other->c_str()),
			         errhint("Compare the table with the source (CALL cdc.audit) and repair it with CALL cdc.resync.")));
		});
		return 0;
	}
	std::vector<std::string> names;
	std::vector<std::vector<std::string>> keys = W->engine->KeysOlderThan(relid, W->source_id, v, &names);
	for (const std::vector<std::string> &key : keys) {
		ChangeRequest req = CopyChange(relid, Op::Delete, schema, table, cp);
		req.snapshot_delete = true;
		RawImage img;
		for (size_t i = 0; i < names.size() && i < key.size(); i++)
			img.values.emplace_back(names[i], DecodedValue::Text(key[i]));
		req.before = std::move(img);
		Submit(std::move(req), size_t(++rows));
	}
	return long(keys.size());
}

} // namespace

/*
 * What the publications publish of one source table, read as PostgreSQL
 * 15's tablesync does (fetch_remote_table_info): the columns (without
 * generated ones, and only those of the column list if there is one) and
 * the row filter (the publications' filters OR-ed, none if one of them has
 * none).  Different column lists in two publications are refused, as
 * PostgreSQL 15 refuses them.  Allocated in the current memory context.
 * Declared in worker.hpp: cdc.audit reads the scope of a table the same way
 * (src/pg/audit/tables.cpp).
 */
static char *
literal(PGconn *conn, const char *s)
{
	char *q = PQescapeLiteral(conn, s, strlen(s));
	char *r = pstrdup(q);
	PQfreemem(q);
	return r;
}

void
read_table_scope(PGconn *conn, const char *publications_sql, const char *schema, const char *table, TableScope *scope)
{
	PGresult *res = conn_exec(conn,
	                          psprintf("SELECT c.oid, c.relkind FROM pg_catalog.pg_class c "
	                                   "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
	                                   "WHERE n.nspname OPERATOR(pg_catalog.=) %s AND c.relname OPERATOR(pg_catalog.=) %s",
	                                   literal(conn, schema), literal(conn, table)),
	                          PGRES_TUPLES_OK);
	if (PQntuples(res) != 1) {
		PQclear(res);
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("cdc_apply: table %s.%s not found on the source", schema, table)));
	}
	char *relid = pstrdup(PQgetvalue(res, 0, 0));
	scope->relid = (Oid) strtoul(relid, NULL, 10);
	scope->relkind = PQgetvalue(res, 0, 1)[0];
	PQclear(res);
	bool pg15 = PQserverVersion(conn) >= 150000;

	/* the column list: one for all publications, or none (NULL) */
	char *attrs = NULL;
	if (pg15) {
		res = conn_exec(conn, psprintf("SELECT DISTINCT (CASE WHEN pg_catalog.array_length(gpt.attrs, 1) OPERATOR(pg_catalog.=) c.relnatts "
		                           "THEN NULL ELSE gpt.attrs END)::pg_catalog.text "
		                           "FROM pg_catalog.pg_publication p, "
		                           "LATERAL pg_catalog.pg_get_publication_tables(p.pubname::pg_catalog.text) gpt, pg_catalog.pg_class c "
		                           "WHERE gpt.relid OPERATOR(pg_catalog.=) %s AND c.oid OPERATOR(pg_catalog.=) gpt.relid "
		                           "AND p.pubname OPERATOR(pg_catalog.=) ANY (ARRAY[%s]::pg_catalog.name[])",
		                           relid, publications_sql),
		                  PGRES_TUPLES_OK);
		if (PQntuples(res) > 1) {
			PQclear(res);
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("cdc_apply: cannot use different column lists for table \"%s.%s\" in publications %s", schema,
			                       table, publications_sql),
			                errhint("Publish the table with one column list (or none) in all of the subscription's publications.")));
		}
		if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
			attrs = psprintf(" %s ", PQgetvalue(res, 0, 0)); /* int2vector: "1 2 4" */
		PQclear(res);
	}

	/* the columns, in attribute order */
	res = conn_exec(conn, psprintf("SELECT a.attnum, a.attname FROM pg_catalog.pg_attribute a "
	                           "WHERE a.attrelid OPERATOR(pg_catalog.=) %s AND a.attnum OPERATOR(pg_catalog.>) 0::pg_catalog.int2 "
	                           "AND NOT a.attisdropped%s ORDER BY a.attnum",
	                           relid, PQserverVersion(conn) >= 120000 ? " AND a.attgenerated OPERATOR(pg_catalog.=) ''" : ""),
	                  PGRES_TUPLES_OK);
	int n = PQntuples(res);
	scope->cols = (char **) palloc(sizeof(char *) * (n + 1));
	scope->ncols = 0;
	for (int i = 0; i < n; i++) {
		if (attrs != NULL && strstr(attrs, psprintf(" %s ", PQgetvalue(res, i, 0))) == NULL)
			continue; /* not published: never read */
		scope->cols[scope->ncols++] = pstrdup(PQgetvalue(res, i, 1));
	}
	PQclear(res);

	/* the table's entries in the subscription's publications, for the two queries below */
	const char *pub_entries = psprintf("FROM pg_catalog.pg_publication p, "
	                                   "LATERAL pg_catalog.pg_get_publication_tables(p.pubname::pg_catalog.text) gpt "
	                                   "WHERE gpt.relid OPERATOR(pg_catalog.=) %s "
	                                   "AND p.pubname OPERATOR(pg_catalog.=) ANY (ARRAY[%s]::pg_catalog.name[])",
	                                   relid, publications_sql);

	/* the row filters: OR-ed; one publication without a filter means none */
	scope->filter = NULL;
	if (pg15) {
		res = conn_exec(conn, psprintf("SELECT DISTINCT pg_catalog.pg_get_expr(gpt.qual, gpt.relid) %s", pub_entries),
		                  PGRES_TUPLES_OK);
		StringInfoData where;
		initStringInfo(&where);
		bool all_rows = PQntuples(res) == 0;
		for (int i = 0; i < PQntuples(res) && !all_rows; i++) {
			if (PQgetisnull(res, i, 0))
				all_rows = true;
			else
				appendStringInfo(&where, "%s(%s)", i ? " OR " : "", PQgetvalue(res, i, 0));
		}
		PQclear(res);
		if (!all_rows)
			scope->filter = where.data;
	}

	/* what the stream sends of it: pgoutput ORs the publish options of the table's publications */
	res = conn_exec(conn, psprintf("SELECT pg_catalog.count(*), pg_catalog.bool_or(p.pubdelete)::pg_catalog.text, "
	                           "pg_catalog.bool_or(p.pubupdate)::pg_catalog.text %s",
	                           pub_entries),
	                  PGRES_TUPLES_OK);
	bool published = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "0") != 0;
	bool pubdelete = !published || strcmp(PQgetvalue(res, 0, 1), "true") == 0;
	bool pubupdate = !published || strcmp(PQgetvalue(res, 0, 2), "true") == 0;
	PQclear(res);
	/*
	 * Not published (any more): the queries above found no column list and
	 * no filter, which read as "every column, every row".  A table waiting
	 * for its copy that the publications stopped publishing was copied
	 * whole, unpublished columns included, marked ready and never streamed
	 * (review h2, TAP 118).
	 */
	if (!published)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("cdc_apply: table %s.%s is not published by publications %s", schema, table, publications_sql),
		                errdetail("It was published when it was added to the subscription; nothing of it is copied."),
		                errhint("Run cdc.refresh_subscription to remove it from the subscription, or publish it again.")));
	scope->deletes_published = pubdelete || (pubupdate && scope->filter != NULL);
}

static void
fetch_table_scope(const char *schema, const char *table, TableScope *scope)
{
	read_table_scope(W->conn, W->publications_sql, schema, table, scope);
}

/*
 * Marks a copied table ready in cdc.subscription_rel, in the copy's local
 * transaction: its changes committed before `cp` are in the copy.
 */
static void
mark_table_ready(const char *schema, const char *table, XLogRecPtr cp, long rows, Oid source_relid)
{
	const char *args[6] = {psprintf("%d", W->subid), schema, table, lsn_text(cp), psprintf("%ld", rows),
	                       psprintf("%u", source_relid)};
	SPI_connect();
	spi_exec("UPDATE cdc.subscription_rel SET state = 'ready', sync_lsn = $4::pg_catalog.pg_lsn, "
	         "copied_rows = $5::pg_catalog.int8, source_relid = $6::pg_catalog.oid, updated_at = pg_catalog.now() "
	         "WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND schema_name OPERATOR(pg_catalog.=) $2 "
	         "AND table_name OPERATOR(pg_catalog.=) $3",
	         6, args);
	SPI_finish();
}

/*
 * The source planner's estimate of the rows `select` returns (EXPLAIN):
 * the total of a copy's progress (docs/worker.md, "Progress").  Unlike
 * pg_class.reltuples it accounts for the row filters, sums the partitions
 * of a partitioned root and has a value for a table never analyzed (from
 * its size).  -1 when the plan does not say.
 */
static int64
estimate_rows(const char *select)
{
	PGresult *res = source_exec(psprintf("EXPLAIN (FORMAT JSON) %s", select), PGRES_TUPLES_OK);
	int64 estimate = -1;
	if (PQntuples(res) == 1) {
		const char *plan = PQgetvalue(res, 0, 0);
		const char *rows = strstr(plan, "\"Plan Rows\":"); /* the first is the top plan node's */
		if (rows != NULL)
			estimate = (int64) strtod(rows + strlen("\"Plan Rows\":"), NULL);
	}
	PQclear(res);
	return estimate;
}

/*
 * The row estimate of a table copied whole (COPY table TO STDOUT, which
 * plans nothing): estimate_rows's, but only when the table's owner has the
 * privileges of the role the worker connected as.  EXPLAIN plans the table,
 * and planning folds its index expressions and predicates: an IMMUTABLE
 * function of the owner there, with constant arguments, ran as that role,
 * a superuser in most conninfos, at every copy (review h4, TAP 133).
 * Otherwise pg_class.reltuples (a catalog read), -1 for a table never
 * analyzed.  (A table with a row filter, or a partitioned root, is copied
 * by a query, as PostgreSQL's own table sync copies it: planned anyway.)
 */
static int64
plain_table_estimate(const char *qual, const char *select)
{
	PGresult *res = source_exec(psprintf("SELECT pg_catalog.pg_has_role(c.relowner, CURRENT_USER, 'USAGE'), "
	                                     "pg_catalog.floor(GREATEST(c.reltuples, -1))::pg_catalog.int8 "
	                                     "FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) %s::pg_catalog.regclass",
	                                     quote_literal_cstr(qual)),
	                            PGRES_TUPLES_OK);
	const bool trusted = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	const int64 reltuples = PQntuples(res) == 1 ? (int64) strtoll(PQgetvalue(res, 0, 1), NULL, 10) : -1;
	PQclear(res);
	return trusted ? estimate_rows(select) : reltuples;
}

/*
 * Copies one published table, inside the source's REPEATABLE READ
 * transaction whose snapshot is that of the slot with consistent point
 * `cp`: snapshot rows at version {epoch, cp, 0, 0}, in one local
 * transaction that also marks the table ready at cp.  The COPY reads only
 * what the publications publish (TableScope): the plain form for a table
 * without row filter, else COPY (SELECT <published columns> FROM [ONLY]
 * <table> WHERE <filters>), which a partitioned root needs anyway (B29).
 */
static void
copy_table(const char *schema, const char *table, XLogRecPtr cp)
{
	TableScope scope;
	fetch_table_scope(schema, table, &scope);
	char *qual = psprintf("%s.%s", quote_identifier(schema), quote_identifier(table));
	StringInfoData collist;
	initStringInfo(&collist);
	for (int i = 0; i < scope.ncols; i++)
		appendStringInfo(&collist, "%s%s", i ? ", " : "", quote_identifier(scope.cols[i]));
	char *cmd;
	/* what the copy reads, as a query: the source planner estimates its rows (the progress's total) */
	char *select = psprintf("SELECT %s FROM %s%s%s%s", collist.data, scope.relkind == 'r' ? "ONLY " : "", qual,
	                        scope.filter ? " WHERE " : "", scope.filter ? scope.filter : "");
	if (scope.relkind == 'r' && scope.filter == NULL)
		cmd = scope.ncols > 0 ? psprintf("COPY %s (%s) TO STDOUT", qual, collist.data) : psprintf("COPY %s TO STDOUT", qual);
	else
		cmd = psprintf("COPY (%s) TO STDOUT", select);
	registry_copy_start(schema, table,
	                    scope.relkind == 'r' && scope.filter == NULL ? plain_table_estimate(qual, select) : estimate_rows(select));
	PGresult *res = source_exec(cmd, PGRES_COPY_OUT);
	PQclear(res);
	W->cur_rel = NULL;
	snprintf(W->cur_table, sizeof(W->cur_table), "%s.%s", schema, table);
	char **cols = scope.cols;
	int ncols = scope.ncols;
	begin_local_xact();
	cdc::pg::RunCpp([&]() { W->engine->SetPositionNames("row", "of the initial copy"); });
	/* per row (and per queue applied with a row): the copy is one local transaction */
	MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext, "CdcCopyRow", ALLOCSET_DEFAULT_SIZES);
	MemoryContext copy_context = MemoryContextSwitchTo(row_context);
	long rows = 0;
	uint64 bytes = 0;
	for (;;) {
		MemoryContextReset(row_context);
		char *buf = NULL;
		int len = get_copy_data_interruptible(W->conn, &buf);
		if (len == -1)
			break;
		if (len < 0)
			ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
			                errmsg("cdc_apply: initial copy of %s failed: %s", qual, PQerrorMessage(W->conn))));
		rows++;
		bytes += (uint64) len;
		if (rows % 1000 == 0)
			registry_copy_progress((uint64) rows, bytes); /* shared memory, every 1,000 rows (cdc.copy_progress) */
		if ((int64) len > (int64) cdc_max_event_size * 1024) {
			PQfreemem(buf);
			ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			                errmsg("cdc_apply: row %ld of the initial copy of %s is %d bytes, more than cdc.max_event_size "
			                       "(%d kB)",
			                       rows, qual, len, cdc_max_event_size),
			                errhint("Raise cdc.max_event_size (a superuser, then reload).")));
		}
		cdc::pg::RunCpp([&]() { ApplyCopyRow(schema, table, cols, ncols, buf, len, cp, rows); });
		PQfreemem(buf);
		CHECK_FOR_INTERRUPTS();
	}
	res = PQgetResult(W->conn);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		/* the source's error (a character the destination encoding cannot hold: 22P05) */
		int code = source_sqlstate(res, ERRCODE_CONNECTION_FAILURE);
		ereport(ERROR, (errcode(code), errmsg("cdc_apply: initial copy of %s failed: %s", qual, PQresultErrorMessage(res))));
	}
	PQclear(res);
	MemoryContextReset(row_context);
	long removed = 0;
	cdc::pg::RunCpp([&]() { removed = DeleteRowsNotCopied(schema, table, cp, rows, scope.deletes_published); });
	cdc::pg::RunCpp([&]() {
		W->engine->Finish();
		delete W->engine;
	});
	MemoryContextSwitchTo(copy_context);
	MemoryContextDelete(row_context);
	W->engine = NULL;
	mark_table_ready(schema, table, cp, rows, scope.relid);
	PopActiveSnapshot();
	/*
	 * A control transition, durable now although the worker commits
	 * asynchronously (cdc.synchronous_commit): a copy lost in a crash of the
	 * destination would be redone from a new snapshot, in vain.
	 */
	commit_control_transition();
	registry_copy_done((uint64) rows, bytes);
	clear_cur_table();
	ereport(LOG, (errmsg("cdc_apply subscription \"%s\": copied %ld rows of %s.%s at %X/%X", W->name, rows, schema, table,
	                     CDC_LSN_ARGS(cp)),
	              removed > 0 ? errdetail("%ld rows the source no longer had at that point were deleted.", removed) : 0));
}

/* A text[] Datum of `n` C strings. */
static Datum
text_array(char **items, int n)
{
	Datum *d = (Datum *) palloc(sizeof(Datum) * (n + 1));
	for (int i = 0; i < n; i++)
		d[i] = CStringGetTextDatum(items[i]);
	return PointerGetDatum(construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* An oid[] Datum of `n` OIDs. */
static Datum
oid_array(const Oid *items, int n)
{
	Datum *d = (Datum *) palloc(sizeof(Datum) * (n + 1));
	for (int i = 0; i < n; i++)
		d[i] = ObjectIdGetDatum(items[i]);
	return PointerGetDatum(construct_array(d, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
}

/*
 * Makes the subscription's tables (cdc.subscription_rel) the tables its
 * publications publish now, in a local transaction of its own
 * (cdc._reconcile_tables): added tables wait for their copy (copy_data) or
 * are ready at once; tables no longer published leave.  `from_scratch`
 * (a new slot) forgets every earlier row first.  `at_slot_start`: read in
 * the snapshot of the slot just created, so the names and OIDs are those
 * at its consistent point, where the stream starts: each table's source
 * OID is recorded (docs/worker.md, "The subscription's tables"; a copy
 * records it again).  Clears refresh_pending.
 */
static void
refresh_tables(bool copy_data, bool from_scratch, bool at_slot_start)
{
	PublishedTables pub;
	source_published_tables(W->conn, W->publications_sql, false, &pub);
	int n = pub.n;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	Oid types[5] = {INT4OID, TEXTARRAYOID, TEXTARRAYOID, BOOLOID, OIDARRAYOID};
	Datum values[5] = {Int32GetDatum(W->subid), text_array(pub.schemas, n), text_array(pub.tables, n), BoolGetDatum(copy_data),
	                   oid_array(pub.relids, n)};
	if (from_scratch && SPI_execute_with_args("DELETE FROM cdc.subscription_rel WHERE subid OPERATOR(pg_catalog.=) $1", 1, types, values, NULL,
	                                          false, 0) != SPI_OK_DELETE)
		elog(ERROR, "cdc_apply worker: could not reset the subscription's tables");
	if (SPI_execute_with_args("SELECT pg_catalog.count(*) FROM cdc._reconcile_tables($1, $2, $3, $4)", 4, types, values, NULL, false, 0) !=
	        SPI_OK_SELECT ||
	    SPI_execute_with_args("UPDATE cdc.subscription SET refresh_pending = false WHERE subid OPERATOR(pg_catalog.=) $1", 1, types, values, NULL,
	                          false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "cdc_apply worker: could not record the subscription's tables");
	if (at_slot_start &&
	    SPI_execute_with_args("UPDATE cdc.subscription_rel r SET source_relid = p.relid "
	                          "FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($5)) AS p(n, t, relid) "
	                          "WHERE r.subid OPERATOR(pg_catalog.=) $1 AND r.schema_name OPERATOR(pg_catalog.=) p.n "
	                          "AND r.table_name OPERATOR(pg_catalog.=) p.t",
	                          5, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "cdc_apply worker: could not record the source OIDs of the subscription's tables");
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	W->refresh_pending = false;
	ereport(LOG, (errmsg("cdc_apply subscription \"%s\": its publications publish %d tables", W->name, n)));
}

/* The subscription's tables that wait for a copy, as (schema, table) arrays; returns their number. */
static int
tables_to_copy(char ***schemas, char ***tables)
{
	const char *args[1] = {psprintf("%d", W->subid)};
	MemoryContext caller = CurrentMemoryContext;
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	spi_exec("SELECT schema_name, table_name FROM cdc.subscription_rel "
	         "WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND state OPERATOR(pg_catalog.=) 'init' ORDER BY 1, 2",
	         1, args);
	int n = (int) SPI_processed;
	*schemas = (char **) MemoryContextAlloc(caller, sizeof(char *) * (n + 1));
	*tables = (char **) MemoryContextAlloc(caller, sizeof(char *) * (n + 1));
	for (int i = 0; i < n; i++) {
		(*schemas)[i] = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		(*tables)[i] = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	return n;
}

/*
 * The slot this subscription created, recorded (its consistent point, in
 * cdc.subscription.slot_created_lsn) and flushed before anything is copied:
 * a later attempt drops an unfinished slot only when it is this one
 * (prepare_slot).  Subscriptions of several databases may name the same
 * slot on one source; without the record, a new one would take another's
 * slot for a leftover of its own.
 */
static void
record_slot_created(XLogRecPtr cp)
{
	const char *args[2] = {psprintf("%d", W->subid), lsn_text(cp)};
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	spi_exec("UPDATE cdc.subscription SET slot_created_lsn = $2::pg_catalog.pg_lsn WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4",
	         2, args);
	SPI_finish();
	PopActiveSnapshot();
	commit_control_transition();
}

/*
 * The record written, durably, just before the worker creates a slot
 * (record_slot_created(InvalidXLogRecPtr)): a crash of the destination
 * between the source's CREATE_REPLICATION_SLOT and the record of its
 * consistent point left a slot nobody recorded, which every later start
 * refused as "not created by this subscription" (TAP 040 "ct", under
 * load).  No consistent point is 0/0.
 */
static const char *const kSlotCreationIntent = "0/0";

/* This subscription's record of the slot it created (record_slot_created), or NULL. */
static char *
recorded_slot_lsn(void)
{
	const char *args[1] = {psprintf("%d", W->subid)};
	MemoryContext caller = CurrentMemoryContext;
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	spi_exec("SELECT slot_created_lsn::pg_catalog.text FROM cdc.subscription WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4", 1,
	         args);
	char *lsn = SPI_processed == 1 ? SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1) : NULL;
	lsn = lsn ? MemoryContextStrdup(caller, lsn) : NULL;
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	return lsn;
}

void
prepare_slot(void)
{
	/*
	 * Never a new slot once the subscription has progress: the new slot
	 * would start after transactions the old one still had to send
	 * (docs/worker.md, "Continuity").
	 */
	if (W->progress != InvalidXLogRecPtr)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("cdc_apply subscription \"%s\": will not create slot \"%s\": the subscription has progress %X/%X",
		                       W->name, W->slot_name, CDC_LSN_ARGS(W->progress)),
		                errhint("Use cdc.accept_gap to continue from a new slot.")));
	char *slot = pstrdup(quote_identifier(W->slot_name));
	char *slot_lit = PQescapeLiteral(W->conn, W->slot_name, strlen(W->slot_name));
	PGresult *res = source_exec(psprintf("SELECT confirmed_flush_lsn::pg_catalog.text, active_pid FROM pg_catalog.pg_replication_slots "
	                                     "WHERE slot_name OPERATOR(pg_catalog.=) %s",
	                                     slot_lit),
	                            PGRES_TUPLES_OK);
	bool exists = PQntuples(res) > 0;
	char *confirmed = exists && !PQgetisnull(res, 0, 0) ? pstrdup(PQgetvalue(res, 0, 0)) : NULL;
	bool active = exists && !PQgetisnull(res, 0, 1);
	PQclear(res);
	PQfreemem(slot_lit);
	XLogRecPtr cp;
	bool adopted = false;
	bool crashed_attempt = false; /* our attempt that recorded only its intent made the slot */
	if (exists) {
		/*
		 * Left by an attempt of ours that did not finish its initial copy
		 * (the slot we recorded, never consumed: its confirmed position is
		 * still its consistent point): start over.  Any other slot of that
		 * name belongs to someone else, for example a subscription of the
		 * same name in another database of this server.  Without a copy the
		 * slot is kept: cdc.create_subscription(copy_data => false) created
		 * it (or an earlier attempt of ours did), and the changes since its
		 * consistent point are the subscription's; a new slot would start
		 * after them.
		 */
		char *recorded = recorded_slot_lsn();
		/*
		 * Created by an attempt of ours that crashed before it recorded the
		 * slot's consistent point (the intent is recorded, the slot is not
		 * in use): never consumed, so its confirmed position is still its
		 * consistent point.
		 */
		crashed_attempt = recorded != NULL && strcmp(recorded, kSlotCreationIntent) == 0 && confirmed != NULL && !active;
		if (crashed_attempt) {
			ereport(LOG, (errmsg("cdc_apply subscription \"%s\": slot %s was created by an attempt that did not record it",
			                     W->name, W->slot_name)));
			recorded = confirmed;
		}
		if (recorded == NULL || confirmed == NULL || strcmp(recorded, confirmed) != 0 || active)
			ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
			                errmsg("cdc_apply subscription \"%s\": replication slot \"%s\" exists on the source and was not "
			                       "created by this subscription",
			                       W->name, W->slot_name),
			                errdetail("Another subscription (perhaps one of another database of this server) may use it."),
			                errhint("Give this subscription a slot of its own (cdc.drop_subscription, then "
			                        "cdc.create_subscription(..., slot_name => ...)), or drop the slot on the source "
			                        "(pg_drop_replication_slot) if nobody uses it.")));
		if (!W->copy_data) {
			cp = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(recorded)));
			adopted = true;
			ereport(LOG, (errmsg("cdc_apply subscription \"%s\": using slot %s created at %X/%X", W->name, W->slot_name,
			                     CDC_LSN_ARGS(cp))));
		} else {
			ereport(LOG, (errmsg("cdc_apply subscription \"%s\": dropping unfinished slot %s", W->name, W->slot_name)));
			PQclear(source_exec(psprintf("DROP_REPLICATION_SLOT %s WAIT", slot), PGRES_COMMAND_OK));
		}
	} else if (!W->copy_data) {
		/*
		 * The slot this subscription was created with (recorded) is gone: a
		 * new one would start after the source's changes since the
		 * recorded consistent point, and nothing would copy them (review
		 * h2r, TAP 096 "lost").
		 */
		char *recorded = recorded_slot_lsn();
		if (recorded != NULL && strcmp(recorded, kSlotCreationIntent) != 0)
			ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			                errmsg("cdc_apply subscription \"%s\": replication slot \"%s\" created at %s is missing on the "
			                       "source",
			                       W->name, W->slot_name, recorded),
			                errdetail("A new slot would miss the source's changes since %s, and the subscription copies "
			                          "no data.",
			                          recorded),
			                errhint("Drop the subscription and create it again (copy_data => true copies the tables).")));
	}

	if (adopted) {
		/*
		 * cdc.create_subscription recorded the tables with the slot, as its
		 * publications published them at the consistent point (or set
		 * refresh_pending, read by sync_tables, when a publication did not
		 * exist then).  An attempt of ours that did not record the slot
		 * recorded no tables either: they are read now (their OIDs are
		 * learnt from the stream, as at the worker's first start before).
		 */
		if (crashed_attempt)
			refresh_tables(false, true, false);
	} else if (W->copy_data) {
		write_status("copying", false);
		record_slot_created(InvalidXLogRecPtr); /* the intent (kSlotCreationIntent) */
		PQclear(source_exec("BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ", PGRES_COMMAND_OK));
		res = source_exec(psprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'use')", slot), PGRES_TUPLES_OK);
		cp = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(PQgetvalue(res, 0, 1))));
		PQclear(res);
		fault_pause("slot_created"); /* the slot exists, its consistent point is not recorded (TAP 098) */
		record_slot_created(cp);
		/* the publications' tables in the slot's snapshot; each is copied and marked ready at cp */
		refresh_tables(true, true, false);
		char **schemas, **tables;
		int ntables = tables_to_copy(&schemas, &tables);
		for (int i = 0; i < ntables; i++)
			copy_table(schemas[i], tables[i], cp);
		PQclear(source_exec("COMMIT", PGRES_COMMAND_OK));
	} else {
		/*
		 * No copy, and no slot made with the subscription (one created by an
		 * earlier version, or our attempt that had recorded only its intent
		 * when the destination crashed): the tables and their OIDs as the
		 * publications published them at the slot's consistent point, read
		 * in its snapshot, as cdc.create_subscription reads them
		 * (source_conn.cpp, create_source_slot_pg).  Recorded before the
		 * slot: a crash in between leaves the intent, and the next attempt
		 * reads the tables again (crashed_attempt).
		 */
		record_slot_created(InvalidXLogRecPtr); /* the intent (kSlotCreationIntent) */
		PQclear(source_exec("BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ", PGRES_COMMAND_OK));
		res = source_exec(psprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'use')", slot), PGRES_TUPLES_OK);
		cp = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(PQgetvalue(res, 0, 1))));
		PQclear(res);
		fault_pause("slot_created");
		refresh_tables(false, true, true);
		PQclear(source_exec("COMMIT", PGRES_COMMAND_OK));
		record_slot_created(cp);
	}

	/* the slot is ready: progress = its start point, committed with the flag */
	const char *args[1] = {psprintf("%d", W->subid)};
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	spi_exec("UPDATE cdc.subscription SET slot_ready = true WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4", 1,
	         args);
	record_slot_identity(cp);
	SPI_finish();
	PopActiveSnapshot();
	commit_with_progress(cp, GetCurrentTimestamp());
	/*
	 * A control transition (docs/worker.md, "Control state is durable"):
	 * streaming starts on it.  Lost in a crash of the destination (the
	 * worker commits asynchronously), the next worker would drop the slot
	 * and copy everything again at a later snapshot, and what was committed
	 * on the source in between would arrive as snapshot rows, without its
	 * outbox rows (TAP 023, B20; TAP 040 crashes right here).
	 */
	XLogFlush(XactLastCommitEnd);
	W->progress = cp;
	W->slot_ready = true;
	ereport(LOG, (errmsg("cdc_apply subscription \"%s\": slot %s ready at %X/%X", W->name, W->slot_name, CDC_LSN_ARGS(cp))));
	fault_pause("copy_done");
}

/*
 * Before streaming: the tables added since the slot was created (by
 * cdc.refresh_subscription, cdc.resync_table, or alter_subscription, whose
 * new publications are read here first, with the subscription's copy_data)
 * are copied at the snapshot of a
 * temporary slot created now, with consistent point L, in one REPEATABLE
 * READ source transaction: tablesync.c's handshake, without a second
 * worker.  The worker's progress P is below L (L is newer than anything
 * the source has sent it), so it then streams from P; for each copied
 * table the changes of source transactions committed before L are in the
 * copy and skipped (pgoutput.cpp), the later ones applied as usual.
 * Snapshot rows carry version {epoch, L, 0, 0}, so a streamed change newer
 * than the copy wins over it in the engine as well.  The other tables are
 * not copied again.
 */
void
sync_tables(void)
{
	/* new publications, or a subscription created on an existing slot: read their tables first */
	if (W->refresh_pending)
		refresh_tables(W->copy_data, false, false);
	char **schemas, **tables;
	int ntables = tables_to_copy(&schemas, &tables);
	if (ntables == 0)
		return;
	write_status("copying", false);
	char *tmp = psprintf("cdc_%llu_%d_%d", (unsigned long long) GetSystemIdentifier(), W->subid, MyProcPid);
	PQclear(source_exec("BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ", PGRES_COMMAND_OK));
	PGresult *res = source_exec(psprintf("CREATE_REPLICATION_SLOT %s TEMPORARY LOGICAL pgoutput (SNAPSHOT 'use')", tmp),
	                            PGRES_TUPLES_OK);
	XLogRecPtr cp = DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(PQgetvalue(res, 0, 1))));
	PQclear(res);
	ereport(LOG, (errmsg("cdc_apply subscription \"%s\": copying %d added tables at %X/%X (temporary slot %s); the stream "
	                     "joins them there",
	                     W->name, ntables, CDC_LSN_ARGS(cp), tmp)));
	for (int i = 0; i < ntables; i++)
		copy_table(schemas[i], tables[i], cp);
	PQclear(source_exec("COMMIT", PGRES_COMMAND_OK));
	PQclear(source_exec(psprintf("DROP_REPLICATION_SLOT %s", tmp), PGRES_COMMAND_OK));
}

static void
table_key(char *key, const char *schema, const char *table)
{
	snprintf(key, sizeof(((TableState *) 0)->key), "%s.%s", quote_identifier(schema), quote_identifier(table));
}

/*
 * Marks the subscription's tables whose publications publish no inserts of
 * them (pgoutput ORs the publish options of a table's publications; the
 * names are those pgoutput sends: the root with
 * publish_via_partition_root).  A row inserted on the source after the
 * copy never reaches the destination, and PostgreSQL's subscriber skips
 * its later updates, which find no row; the worker, which applies an
 * update as an upsert, would insert it (found by TAP 161).  Read on the
 * worker's connection at each start, before it streams: a publication
 * altered while the worker streams counts from the next start.
 */
static void
mark_tables_without_inserts(void)
{
	PGresult *res = conn_exec(W->conn,
	                          psprintf("SELECT t.schemaname::pg_catalog.text, t.tablename::pg_catalog.text "
	                                   "FROM pg_catalog.pg_publication_tables t "
	                                   "JOIN pg_catalog.pg_publication p ON p.pubname OPERATOR(pg_catalog.=) t.pubname "
	                                   "WHERE t.pubname OPERATOR(pg_catalog.=) ANY (ARRAY[%s]::pg_catalog.name[]) "
	                                   "GROUP BY 1, 2 HAVING NOT pg_catalog.bool_or(p.pubinsert)",
	                                   W->publications_sql),
	                          PGRES_TUPLES_OK);
	for (int i = 0; i < PQntuples(res); i++) {
		TableState *t = find_table_state(PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
		if (t != NULL)
			t->updates_need_row = true;
	}
	PQclear(res);
}

void
load_table_states(void)
{
	if (W->tables != NULL)
		hash_destroy(W->tables);
	HASHCTL ctl;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(((TableState *) 0)->key);
	ctl.entrysize = sizeof(TableState);
	ctl.hcxt = CdcWorkerContext;
	W->tables = hash_create("cdc_apply subscription tables", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	const char *args[1] = {psprintf("%d", W->subid)};
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	spi_exec("SELECT schema_name, table_name, state, sync_lsn::pg_catalog.text, source_relid FROM cdc.subscription_rel "
	         "WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4",
	         1, args);
	for (uint64 i = 0; i < SPI_processed; i++) {
		HeapTuple tup = SPI_tuptable->vals[i];
		TupleDesc desc = SPI_tuptable->tupdesc;
		char key[sizeof(((TableState *) 0)->key)];
		table_key(key, SPI_getvalue(tup, desc, 1), SPI_getvalue(tup, desc, 2));
		TableState *t = (TableState *) hash_search(W->tables, key, HASH_ENTER, NULL);
		strlcpy(t->schema, SPI_getvalue(tup, desc, 1), NAMEDATALEN);
		strlcpy(t->table, SPI_getvalue(tup, desc, 2), NAMEDATALEN);
		t->learnt = false;
		t->state = strcmp(SPI_getvalue(tup, desc, 3), "ready") == 0 ? TABLE_READY : TABLE_INIT;
		char *lsn = SPI_getvalue(tup, desc, 4);
		t->sync_lsn = lsn ? DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(lsn))) : InvalidXLogRecPtr;
		char *relid = SPI_getvalue(tup, desc, 5);
		t->source_relid = relid ? (Oid) strtoul(relid, NULL, 10) : InvalidOid;
		t->updates_need_row = false;
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	W->relids_learnt = false;
	mark_tables_without_inserts();
}

/*
 * The subscription's entry for a published table, or NULL when the table is
 * not part of it: its state, copy point and the source relation it was
 * copied from (InvalidOid: not recorded).
 */
TableState *
find_table_state(const char *schema, const char *table)
{
	if (W->tables == NULL)
		return NULL;
	char key[sizeof(((TableState *) 0)->key)];
	table_key(key, schema, table);
	return (TableState *) hash_search(W->tables, key, HASH_FIND, NULL);
}

/*
 * The subscription's table (as quoted "schema.table") that was copied from
 * the source relation `relid`, or NULL: a relation the stream names
 * otherwise was renamed or moved on the source since its copy.  Also NULL
 * where the change is in that table's copy (waiting for it, or committed
 * before its copy point `final_lsn`): changes made under the old name
 * before a rename, decoded after a refresh added the new name.
 */
const char *
table_copied_from(Oid relid, XLogRecPtr final_lsn)
{
	if (W->tables == NULL || !OidIsValid(relid))
		return NULL;
	HASH_SEQ_STATUS it;
	hash_seq_init(&it, W->tables);
	for (TableState *t; (t = (TableState *) hash_seq_search(&it)) != NULL;)
		if (t->source_relid == relid) {
			hash_seq_term(&it);
			return t->state == TABLE_READY && final_lsn >= t->sync_lsn ? t->key : NULL;
		}
	return NULL;
}

/*
 * A table of the subscription without a recorded source OID (added without
 * a copy after its slot was made: cdc.refresh_subscription(copy_data =>
 * false), new publications of a subscription without a copy, a slot not
 * created by the subscription (create_slot => false); or copied before the
 * OID was recorded at the copy) would have its rename on the source
 * skipped as an unknown table (the tables of a slot the subscription made
 * have their OIDs from its snapshot, TAP 100): the stream
 * names its relation with its OID, so that OID is the one to recognise it
 * by when a later RELATION message calls it otherwise (relation_skipped).
 * Only a change the worker applies teaches it (at or after the copy
 * point), as for the check itself; relation_skipped calls this at each
 * such change until the OID is known.
 */
bool
learn_source_relid(TableState *t, Oid relid, XLogRecPtr final_lsn)
{
	if (t == NULL || t->state != TABLE_READY || OidIsValid(t->source_relid) || !OidIsValid(relid) ||
	    final_lsn < t->sync_lsn)
		return false;
	t->source_relid = relid;
	t->learnt = true;
	W->relids_learnt = true;
	ereport(DEBUG1, (errmsg("cdc_apply subscription \"%s\": table %s is source relation %u", W->name, t->key, relid)));
	return true;
}

/*
 * Saves the OIDs learnt from the stream with the group's local commit, so
 * that a rename made while the worker is stopped is recognised after its
 * restart too.  A row that already has an OID keeps it (a copy recorded it
 * meanwhile).
 */
void
save_learnt_relids(void)
{
	if (!W->relids_learnt || W->tables == NULL)
		return;
	HASH_SEQ_STATUS it;
	hash_seq_init(&it, W->tables);
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	for (TableState *t; (t = (TableState *) hash_seq_search(&it)) != NULL;) {
		if (!t->learnt)
			continue;
		const char *args[4] = {psprintf("%d", W->subid), t->schema, t->table, psprintf("%u", t->source_relid)};
		spi_exec("UPDATE cdc.subscription_rel SET source_relid = $4::pg_catalog.oid "
		         "WHERE subid OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND schema_name OPERATOR(pg_catalog.=) $2 "
		         "AND table_name OPERATOR(pg_catalog.=) $3 AND source_relid IS NULL",
		         4, args);
		t->learnt = false;
	}
	SPI_finish();
	PopActiveSnapshot();
	W->relids_learnt = false;
}

// CALL cdc.audit(subscription, target, page_rows, leaf_rows, wait_timeout) (docs/audit.md):
// for each table of the subscription (or `target`), a snapshot of the
// source at a temporary slot's consistent point S; the destination waits
// until its worker has applied the stream up to S; the table is walked in
// pages of source rows in key order, pages whose hashes differ are bisected
// down to keys (core/audit_diff), and the differing keys are re-checked at
// a newer snapshot once the destination has caught up again, so that only
// keys that still differ, and that the stream did not change since, become
// rows of cdc.audit_findings.  Progress in cdc.audit_runs.
//
// Also cdc.range_hash_sql(), the statement users of cdc_apply() run on a
// source of their own.
//
// Glue, C++ regime: entry points through CDC_PG_FUNCTION, PostgreSQL calls
// through PgCall.  The procedure commits after every page (DestSession).
#include "core/audit_diff.hpp"
#include "core/audit_sql.hpp"
#include "core/errors.hpp"
#include "pg/apply/engine.hpp"
#include "pg/audit/common.hpp"
#include "pg/audit/session.hpp"
#include "pg/audit/source.hpp"
#include "pg/audit/tables.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

#include <map>

namespace cdc::pg::audit {

namespace {

constexpr size_t kRecheckBatch = 10000;  // candidates re-checked at once
constexpr int kRecheckRounds = 3;        // rounds for keys the stream keeps changing

// One table's comparison state.
struct TableAudit {
	DestSession &dest;
	Source &source;
	const Subscription &sub;
	Run &run;
	DestTable &dt;
	SourceTable &st;
	std::optional<int32_t> source_id;
	int64_t timeout_ms;
	std::optional<SourceConn> recheck;

	// Re-checks `keys` at newer snapshots until each is settled (equal, or
	// a finding) or kRecheckRounds rounds have passed (unsettled).
	void Recheck(std::vector<Key> keys)
	{
		for (int round = 1; !keys.empty() && round <= kRecheckRounds; round++) {
			if (!recheck)
				recheck.emplace(source.Connect());
			uint64_t cp = source.OpenSnapshot(*recheck);
			WaitApplied(dest, sub, cp, timeout_ms);
			std::vector<SourceKeyRow> src = SourceRowsByKeys(*recheck, st, keys, false);
			recheck->Simple("COMMIT", PGRES_COMMAND_OK);
			std::vector<cdc::audit::DestRow> dst = DestRowsByKeys(dest, dt, keys, source_id, sub.epoch, cp);
			std::vector<Key> again;
			for (size_t i = 0; i < keys.size(); i++) {
				cdc::audit::Verdict v = cdc::audit::Classify(src[i].row, dst[i]);
				if (v == cdc::audit::Verdict::InFlight) {
					again.push_back(keys[i]);
					continue;
				}
				if (v == cdc::audit::Verdict::Equal)
					continue;
				if (v == cdc::audit::Verdict::Extra && !st.deletes_published)
					continue; /* kept, as the stream keeps it: the publications never delete its rows */
				std::optional<std::string> detail;
				if (v == cdc::audit::Verdict::Extra)
					detail = src[i].row.found ? "the source's row is outside the publication's row filter"
					                          : "the source has no row with this key";
				Params p;
				p.AddInt8(run.Id());
				p.AddText(sub.name);
				p.AddOid(dt.relid);
				p.AddText(KeyJson(dt, keys[i]));
				p.AddText(cdc::audit::VerdictName(v));
				p.AddTextOrNull(src[i].row.found ? std::optional<std::string>(src[i].row.md5) : std::nullopt);
				p.AddTextOrNull(dst[i].found ? std::optional<std::string>(dst[i].md5) : std::nullopt);
				p.AddText(LsnText(cp));
				p.AddTextOrNull(detail);
				Execute("INSERT INTO cdc.audit_findings (audit_id, subscription, target, key, kind, source_hash, dest_hash, "
				        "source_lsn, detail) VALUES ($1, $2, $3::pg_catalog.regclass, $4::pg_catalog.jsonb, $5, $6, $7, "
				        "$8::pg_catalog.pg_lsn, $9)",
				        p, false);
				run.counters.findings++;
			}
			run.counters.source_lsn = cp;
			run.Progress();
			keys = std::move(again);
		}
		if (!keys.empty()) {
			run.counters.unsettled += int64_t(keys.size());
			std::string first = KeyJson(dt, keys[0]);
			std::string msg = "cdc.audit: " + std::to_string(keys.size()) + " keys of " + dt.display +
			                  " kept changing on the source while they were re-checked and are not reported, such as " + first;
			PgCall([&]() { ereport(NOTICE, (errmsg("%s", msg.c_str()), errhint("Audit the table again when it is quieter."))); });
			run.Progress();
		}
	}

	void Compare(int64_t page_rows, int64_t leaf_rows, int64_t rows_before, int64_t ranges_before)
	{
		SourceConn walk = source.Connect();
		uint64_t cp = source.OpenSnapshot(walk);
		st = LoadSourceTable(walk, sub, st.schema, st.name, dt);
		run.counters.current_target = dt.relid;
		run.counters.source_lsn = cp;
		dest.SetContext("cdc.audit of subscription \"" + sub.name + "\", table " + dt.display);
		run.Progress();
		WaitApplied(dest, sub, cp, timeout_ms);

		SourceSide src(walk, st);
		DestSide dst(dest, dt);
		std::vector<Key> pending;
		std::map<Key, bool> seen;
		cdc::audit::WalkStats stats;
		cdc::audit::Walk(
		    src, dst, cdc::audit::Range{}, page_rows, leaf_rows,
		    [&](cdc::audit::Candidate c) {
			    if (seen.emplace(c.key, true).second)
				    pending.push_back(std::move(c.key));
		    },
		    [&](const cdc::audit::WalkStats &s, const std::optional<Key> &) {
			    run.counters.rows_done = rows_before + s.source_rows;
			    run.counters.ranges_done = ranges_before + s.ranges;
			    if (pending.size() >= kRecheckBatch) {
				    Recheck(std::move(pending));
				    pending.clear();
				    seen.clear();
			    }
			    run.Progress();
			    return true;
		    },
		    stats);
		walk.Simple("COMMIT", PGRES_COMMAND_OK);
		Recheck(std::move(pending));
	}
};

} // namespace

} // namespace cdc::pg::audit

using namespace cdc::pg;
using namespace cdc::pg::audit;

/*
 * CALL cdc.audit(subscription text, target regclass DEFAULT NULL,
 *                page_rows integer DEFAULT 10000, leaf_rows integer DEFAULT 16384,
 *                wait_timeout interval DEFAULT '5 min',
 *                INOUT audit_id bigint DEFAULT NULL, INOUT findings bigint DEFAULT NULL)
 *
 * Compares the destination tables of a subscription (or only `target`)
 * with the source, records every key that differs in cdc.audit_findings
 * and returns the run's id and the number of findings.  Errors: 22004
 * subscription, page_rows, leaf_rows or wait_timeout NULL, 22023 page_rows or leaf_rows < 1 or a negative wait_timeout, 25001
 * inside a transaction block, 42501 not a superuser, 42704 unknown
 * subscription, 55000 initial copy not finished / subscription disabled /
 * the worker did not reach the source's snapshot in wait_timeout / table
 * not published, 0A000 a history table / keys ordered differently on the
 * two sides, 42P10 no key, 42703 a published column the destination lacks,
 * 08001 source unreachable, the source's own errors.
 */
CDC_PG_FUNCTION(cdc_audit)
{
	const CommonArgs args = ParseCommonArgs(fcinfo, 2);

	DestSession dest(fcinfo, "cdc.audit");
	Subscription sub = ReadSubscription(args.subscription);
	if (!sub.slot_ready)
		throw cdc::InputError("55000", "subscription \"" + args.subscription + "\" has not finished its initial copy",
		                      "There is no stream to compare with yet.", "Audit it once cdc.subscription_status shows it streaming.");
	std::vector<TableRef> tables = SubscriptionTables(dest, sub, args.target);
	Source source(sub.conninfo, sub.name);
	Run run(dest, "audit", sub, args.target, std::nullopt);
	run.counters.tables_total = int(tables.size());
	std::optional<int32_t> source_id = SourceIdOf("pg:" + source.SystemId());
	dest.Commit();

	std::vector<DestTable> dts;
	for (const TableRef &t : tables)
		dts.push_back(LoadDestTable(t.target));
	run.counters.rows_estimate = EstimateRows(source, tables);
	run.Progress();
	for (size_t i = 0; i < tables.size(); i++) {
		SourceTable st;
		st.schema = tables[i].schema;
		st.name = tables[i].name;
		TableAudit audit{dest, source, sub, run, dts[i], st, source_id, args.timeout_ms, std::nullopt};
		audit.Compare(args.page_rows, args.leaf_rows, run.counters.rows_done, run.counters.ranges_done);
		run.counters.tables_done++;
		run.Progress();
	}
	run.Done();
	std::string summary = "cdc.audit of subscription \"" + args.subscription + "\" (run " + std::to_string(run.Id()) + "): " +
	                      std::to_string(run.counters.rows_done) + " source rows of " + std::to_string(tables.size()) +
	                      " tables compared, " + std::to_string(run.counters.findings) + " findings";
	cdc::pg::PgCall([&]() { ereport(NOTICE, (errmsg("%s", summary.c_str()))); });
	dest.Finish();
	return ProcedureResult(fcinfo, run.Id(), run.counters.findings);
}

/*
 * cdc.range_hash_sql(schema_name text, table_name text, columns text[],
 *                    key_columns text[], after text[] DEFAULT NULL,
 *                    up_to text[] DEFAULT NULL, row_filter text DEFAULT NULL,
 *                    only_table boolean DEFAULT true) RETURNS text
 *
 * The statement that computes the range hash (rows, hash) of the key range
 * (after, up_to] of table schema_name.table_name: the text the audit sends
 * to the source and runs on the destination (docs/audit.md, "The row
 * hash"), with the bounds as literals.  Errors: 22004 a NULL name, column,
 * key column or only_table, 22023 no columns, no key columns, or a bound with another
 * number of values than key_columns.
 */
CDC_PG_FUNCTION(cdc_range_hash_sql)
{
	RequireArgsNotNull(fcinfo, 0, {"schema_name", "table_name", "columns", "key_columns"});
	std::string schema = cdc::pg::PgCall([&]() { return text_to_cstring(PG_GETARG_TEXT_PP(0)); });
	std::string table = cdc::pg::PgCall([&]() { return text_to_cstring(PG_GETARG_TEXT_PP(1)); });
	auto texts = [&](int n, const char *what) {
		std::vector<std::optional<std::string>> out = TextArrayArg(fcinfo, n);
		std::vector<std::string> values;
		for (auto &v : out) {
			if (!v)
				throw cdc::InputError("22004", std::string(what) + " must not contain NULL");
			values.push_back(*v);
		}
		return values;
	};
	cdc::audit::HashedTable t;
	t.relation = cdc::pg::QuoteIdent(schema) + "." + cdc::pg::QuoteIdent(table);
	for (const std::string &c : texts(2, "columns"))
		t.columns.push_back(cdc::pg::QuoteIdent(c));
	for (const std::string &c : texts(3, "key_columns"))
		t.key.push_back(cdc::pg::QuoteIdent(c));
	if (t.columns.empty())
		throw cdc::InputError("22023", "columns must not be empty");
	if (t.key.empty())
		throw cdc::InputError("22023", "key_columns must not be empty");
	cdc::audit::RangeExprs r;
	for (int n : {4, 5}) {
		if (PG_NARGS() <= n || PG_ARGISNULL(n))
			continue;
		std::vector<std::string> bound = texts(n, n == 4 ? "after" : "up_to");
		if (bound.size() != t.key.size())
			throw cdc::InputError("22023", std::string(n == 4 ? "after" : "up_to") + " has " + std::to_string(bound.size()) +
			                                   " values, key_columns " + std::to_string(t.key.size()));
		for (const std::string &v : bound)
			(n == 4 ? r.lower : r.upper).push_back(cdc::audit::QuoteLiteral(v));
	}
	if (PG_NARGS() > 6 && !PG_ARGISNULL(6))
		t.filter = cdc::pg::PgCall([&]() { return text_to_cstring(PG_GETARG_TEXT_PP(6)); });
	/* NULL was taken as true (the default) */
	if (PG_NARGS() > 7 && PG_ARGISNULL(7))
		throw cdc::InputError("22004", "only_table must not be NULL");
	t.only = PG_NARGS() <= 7 || PG_GETARG_BOOL(7);
	std::string sql = cdc::audit::RangeHashSql(t, r, false);
	return cdc::pg::PgCall([&]() { return PointerGetDatum(cstring_to_text_with_len(sql.data(), int(sql.size()))); });
}

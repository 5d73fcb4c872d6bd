// What cdc.audit and cdc.resync share: see common.hpp.
#include "pg/audit/common.hpp"

#include "core/audit_sql.hpp"
#include "core/errors.hpp"
#include "pg/apply/engine.hpp"
#include "pg/audit/tables.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

namespace cdc::pg::audit {

std::vector<TableRef>
SubscriptionTables(DestSession &dest, const Subscription &sub, Oid target)
{
	/* the subscription's tables (cdc.subscription_rel, as the worker applies them) */
	Params p;
	p.Add(INT4OID, Int32GetDatum(sub.subid), false);
	uint64_t n = Execute("SELECT r.schema_name, r.table_name, r.state FROM cdc.subscription_rel r "
	                     "WHERE r.subid OPERATOR(pg_catalog.=) $1 ORDER BY 1, 2",
	                     p, false);
	struct Rel {
		std::string schema, name, state;
	};
	std::vector<Rel> rels;
	for (uint64_t i = 0; i < n; i++)
		rels.push_back(Rel{*ResultText(i, 1), *ResultText(i, 2), *ResultText(i, 3)});
	std::vector<TableRef> out;
	if (OidIsValid(target)) {
		DestTable dt = LoadDestTable(target);
		auto [schema, name] = SourceNameOf(sub, dt);
		for (const Rel &r : rels)
			if (r.schema == schema && r.name == name) {
				if (r.state != "ready")
					throw InputError("55000", "table " + QuoteIdent(schema) + "." + QuoteIdent(name) + " of subscription \"" + sub.name +
					                              "\" has not been copied yet",
					                 "The worker copies it before it applies its changes.",
					                 "Compare it once cdc.subscription_tables shows it ready.");
				out.push_back(TableRef{target, schema, name});
				return out;
			}
		throw InputError("55000", "table " + QuoteIdent(schema) + "." + QuoteIdent(name) + " (feeding " + dt.display +
		                              ") is not part of subscription \"" + sub.name + "\"",
		                 "cdc.subscription_tables lists the tables the subscription applies.",
		                 "cdc.refresh_subscription adds the tables its publications publish.");
	}
	/* each to the destination table the worker applies it to; tables waiting for their copy are left out */
	ApplyEngine engine;
	for (const Rel &r : rels) {
		if (r.state != "ready") {
			std::string msg = "cdc.audit: table " + QuoteIdent(r.schema) + "." + QuoteIdent(r.name) + " of subscription \"" + sub.name +
			                  "\" is not compared: it has not been copied yet";
			PgCall([&]() { ereport(NOTICE, (errmsg("%s", msg.c_str()))); });
			continue;
		}
		out.push_back(TableRef{engine.ResolveSourceTable(sub.name, r.schema, r.name, true), r.schema, r.name});
	}
	engine.Finish();
	dest.ResetContext();
	dest.Commit();
	return out;
}

int64_t
EstimateRows(Source &source, const std::vector<TableRef> &tables)
{
	if (tables.empty())
		return 0;
	std::vector<std::string> schemas, names;
	for (const TableRef &t : tables) {
		schemas.push_back(t.schema);
		names.push_back(t.name);
	}
	SourceConn q = source.Connect();
	Result res = q.Exec("SELECT pg_catalog.sum(greatest(c.reltuples, 0))::pg_catalog.int8 "
	                    "FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) AS r(s, t) "
	                    "JOIN pg_catalog.pg_namespace n ON n.nspname OPERATOR(pg_catalog.=) r.s "
	                    "JOIN pg_catalog.pg_class c ON c.relnamespace OPERATOR(pg_catalog.=) n.oid "
	                    "AND c.relname OPERATOR(pg_catalog.=) r.t",
	                    {cdc::audit::ArrayLiteral(schemas), cdc::audit::ArrayLiteral(names)});
	return res.IsNull(0, 0) ? 0 : std::stoll(res.Text(0, 0));
}

int64_t
IntervalMillis(Datum d)
{
	Interval *iv = DatumGetIntervalP(d);
	return iv->time / 1000 + int64_t(iv->day) * 86400000 + int64_t(iv->month) * 30 * 86400000;
}

CommonArgs
ParseCommonArgs(FunctionCallInfo fcinfo, int sizing)
{
	CommonArgs a;
	if (PG_ARGISNULL(0))
		throw cdc::InputError("22004", "subscription must not be NULL");
	a.subscription = PgCall([&]() { return text_to_cstring(PG_GETARG_TEXT_PP(0)); });
	if (!PG_ARGISNULL(1)) {
		a.target = PG_GETARG_OID(1);
		/* '-'::regclass names no relation: it was taken for NULL (every table, or resync's 22004; review h3) */
		if (!OidIsValid(a.target))
			throw cdc::InputError("42P01", "target relation with OID 0 does not exist", {},
			                      "Pass NULL (or leave the target out) for every table of the subscription.");
	}
	/* NULL was taken as the default (docs/sql-reference.md gives none for it) */
	RequireArgsNotNull(fcinfo, sizing, {"page_rows", "leaf_rows", "wait_timeout"});
	a.page_rows = PG_GETARG_INT32(sizing);
	if (a.page_rows < 1)
		throw cdc::InputError("22023", "page_rows must be at least 1, not " + std::to_string(a.page_rows));
	a.leaf_rows = PG_GETARG_INT32(sizing + 1);
	if (a.leaf_rows < 1)
		throw cdc::InputError("22023", "leaf_rows must be at least 1, not " + std::to_string(a.leaf_rows));
	a.timeout_ms = IntervalMillis(PG_GETARG_DATUM(sizing + 2));
	if (a.timeout_ms < 0)
		throw cdc::InputError("22023", "wait_timeout must not be negative");
	return a;
}

void
RequireArgsNotNull(FunctionCallInfo fcinfo, int first, std::initializer_list<const char *> names)
{
	int n = first;
	for (const char *name : names) {
		if (PG_ARGISNULL(n))
			throw cdc::InputError("22004", std::string(name) + " must not be NULL");
		n++;
	}
}

std::vector<std::optional<std::string>>
TextArrayArg(FunctionCallInfo fcinfo, int n)
{
	std::vector<std::optional<std::string>> out;
	if (PG_NARGS() <= n || PG_ARGISNULL(n))
		return out;
	Datum *values = nullptr;
	bool *nulls = nullptr;
	int count = 0;
	PgCall([&]() {
		ArrayType *arr = PG_GETARG_ARRAYTYPE_P(n);
		if (ARR_NDIM(arr) > 1)
			ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR), errmsg("argument %d must be a one-dimensional array", n + 1)));
		deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &values, &nulls, &count);
	});
	for (int i = 0; i < count; i++) {
		if (nulls[i])
			out.emplace_back();
		else
			out.emplace_back(std::string(PgCall([&]() { return TextDatumGetCString(values[i]); })));
	}
	return out;
}

Datum
ProcedureResult(FunctionCallInfo fcinfo, int64_t first, int64_t second)
{
	return PgCall([&]() {
		TupleDesc desc;
		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "cdc_apply: a procedure with INOUT parameters must return a record");
		desc = BlessTupleDesc(desc);
		Datum values[2] = {Int64GetDatum(first), Int64GetDatum(second)};
		bool nulls[2] = {false, false};
		return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
	});
}

} // namespace cdc::pg::audit

// What cdc.audit and cdc.resync share besides the sides and the session
// (docs/audit.md): the tables of a subscription with the source table that
// feeds each, the source's row estimates for progress, and the small
// argument and result helpers of their SQL entry points (ParseCommonArgs:
// the arguments both take, read and checked once).
//
// C++ regime: PostgreSQL calls through PgCall.
#pragma once

#include "pg/audit/session.hpp"
#include "pg/audit/source.hpp"

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace cdc::pg::audit {

// A destination table and the source table that feeds it.
struct TableRef {
	Oid target = InvalidOid;
	std::string schema, name; // the source table, as pgoutput names it
};

// `target` with its source table (its mapping for the subscription, else
// the same name; 55000 unless cdc.subscription_rel has it ready); with
// InvalidOid every ready table of the subscription, each with the
// destination table the worker applies it to (cdc.mapping or the same name;
// 42P01 when there is none), and a NOTICE for each table waiting for its copy.
std::vector<TableRef> SubscriptionTables(DestSession &dest, const Subscription &sub, Oid target);

// The source's row estimates (pg_class.reltuples) of these tables, summed.
int64_t EstimateRows(Source &source, const std::vector<TableRef> &tables);

// An interval argument in milliseconds (a month counts 30 days).
int64_t IntervalMillis(Datum d);

// The arguments cdc.audit and cdc.resync share: the subscription (argument
// 0), the target (argument 1, InvalidOid when NULL), and page_rows,
// leaf_rows and wait_timeout at arguments sizing, sizing + 1, sizing + 2
// (the SQL defaults 10000, 16384 and 5 min when left out).  Errors: 22004 a
// NULL subscription, page_rows, leaf_rows or wait_timeout, 22023 page_rows
// or leaf_rows < 1 or a negative wait_timeout.
struct CommonArgs {
	std::string subscription;
	Oid target = InvalidOid;
	int64_t page_rows = 0;
	int64_t leaf_rows = 0;
	int64_t timeout_ms = 0;
};
CommonArgs ParseCommonArgs(FunctionCallInfo fcinfo, int sizing);

// 22004 '<name> must not be NULL' for the first of the arguments at
// positions first, first + 1, ... (named `names`) that is NULL.
void RequireArgsNotNull(FunctionCallInfo fcinfo, int first, std::initializer_list<const char *> names);

// A text[] argument (empty when NULL or absent).
std::vector<std::optional<std::string>> TextArrayArg(FunctionCallInfo fcinfo, int n);

// The result row of a procedure with two INOUT bigint parameters.
Datum ProcedureResult(FunctionCallInfo fcinfo, int64_t first, int64_t second);

} // namespace cdc::pg::audit

// SQL-callable entry points of cdc_apply.  Every one is defined with
// CDC_PG_FUNCTION, so C++ exceptions never reach PostgreSQL frames.
#include "pg/engine.hpp"
#include "pg/guard.hpp"
#include "pg/horizon.hpp"
#include "pg/worker.hpp"

#include "core/json.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "miscadmin.h"

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);
}

namespace {

using cdc::Json;
using cdc::pg::PgCall;

std::optional<std::string>
OptTextArg(FunctionCallInfo fcinfo, int n)
{
	if (PG_NARGS() <= n || PG_ARGISNULL(n))
		return std::nullopt;
	char *s = PgCall([&]() { return text_to_cstring(PG_GETARG_TEXT_PP(n)); });
	return std::string(s);
}

Oid
OptOidArg(FunctionCallInfo fcinfo, int n)
{
	if (PG_NARGS() <= n || PG_ARGISNULL(n))
		return InvalidOid;
	return PG_GETARG_OID(n);
}

Datum
OutcomeText(cdc::Outcome o)
{
	const char *name = cdc::OutcomeName(o);
	return PgCall([&]() { return PointerGetDatum(cstring_to_text(name)); });
}

// Applies one event with a fresh engine; the event is already parsed.
Datum
ApplyOne(FunctionCallInfo fcinfo, const Json &event)
{
	cdc::pg::ApplyEngine engine;
	cdc::Outcome o = engine.ApplyDebezium(event, OptOidArg(fcinfo, 1), OptTextArg(fcinfo, 2));
	engine.Finish();
	return OutcomeText(o);
}

} // namespace

/*
 * cdc_apply(event jsonb, target regclass DEFAULT NULL, delivery_key text DEFAULT NULL) RETURNS text
 *
 * Applies one Debezium change event replay-safely in the caller's
 * transaction and returns its outcome: applied, duplicate, stale, conflict
 * or ignored.  A NULL or JSON-null event is a Kafka tombstone (ignored).
 * Errors and SQLSTATEs: docs/sql-reference.md.
 */
CDC_PG_FUNCTION(cdc_apply_jsonb)
{
	Json event;
	if (!PG_ARGISNULL(0)) {
		char *raw = PgCall([&]() {
			Jsonb *jb = PG_GETARG_JSONB_P(0);
			return JsonbToCString(NULL, &jb->root, VARSIZE(jb));
		});
		event = Json::Parse(raw);
	}
	return ApplyOne(fcinfo, event);
}

/*
 * cdc_apply(event text, ...): the same for raw JSON text (for example a
 * Kafka record value as received).  Malformed JSON: SQLSTATE 22P02.
 */
CDC_PG_FUNCTION(cdc_apply_text)
{
	Json event;
	if (!PG_ARGISNULL(0)) {
		char *raw = PgCall([&]() { return text_to_cstring(PG_GETARG_TEXT_PP(0)); });
		event = Json::Parse(raw);
	}
	return ApplyOne(fcinfo, event);
}

/*
 * _PG_init: defines the cdc.* settings; when loaded through
 * shared_preload_libraries also registers the launcher of the background
 * worker path.  The SQL path (cdc_apply()) needs no preloading.
 */
void
_PG_init(void)
{
	cdc::pg::DefineHorizonSettings(); /* before DefineWorkerSettings reserves the cdc prefix */
	cdc::pg::DefineWorkerSettings(process_shared_preload_libraries_in_progress);
}

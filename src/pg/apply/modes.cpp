// History and handler modes: see modes.hpp.
#include "pg/apply/modes.hpp"

#include "core/errors.hpp"
#include "pg/apply/outbox.hpp"
#include "pg/spi.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/timestamp.h"
}

namespace cdc::pg {

namespace {

[[noreturn]] void
Fail(const char *sqlstate, const std::string &msg, const std::string &detail = {}, const std::string &hint = {})
{
	throw InputError(sqlstate, msg, detail, hint);
}

// Unix milliseconds -> TimestampTz (microseconds since 2000-01-01).  A
// value outside PostgreSQL's timestamp range (or whose microseconds do not
// fit 64 bits) is refused naming the field, never wrapped around.
TimestampTz
TimestampFromUnixMs(int64_t ms)
{
	int64_t since_2000 = 0, us = 0;
	if (__builtin_sub_overflow(ms, int64_t(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000, &since_2000) ||
	    __builtin_mul_overflow(since_2000, int64_t(1000), &us) || !IS_VALID_TIMESTAMP(us))
		Fail("22008", "field \"source.ts_ms\" is out of range for a timestamp: " + std::to_string(ms), {},
		     "source.ts_ms is milliseconds since 1970-01-01 00:00:00 UTC; the history column cdc_source_ts holds it.");
	return TimestampTz(us);
}

} // namespace

ModeConfig
LoadModeConfig(Oid relid, const std::string &qualified)
{
	ModeConfig cfg;
	Params p;
	p.AddOid(relid);
	/* Every function, operator and type schema-qualified (docs/security.md, "search_path"). */
	uint64_t n = Execute(
	    "SELECT m.mode, m.handler::pg_catalog.oid::pg_catalog.text, m.handler::pg_catalog.text, "
	    "       pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' "
	    "         OPERATOR(pg_catalog.||) pg_catalog.quote_ident(pr.proname), "
	    "       pr.proargtypes[1] OPERATOR(pg_catalog.=) 'pg_catalog.jsonb'::pg_catalog.regtype, "
	    "       (SELECT pg_catalog.string_agg(a.attname::pg_catalog.text, ',') FROM pg_catalog.pg_attribute a "
	    "         WHERE a.attrelid OPERATOR(pg_catalog.=) m.target AND a.attnum OPERATOR(pg_catalog.>) 0 "
	    "           AND NOT a.attisdropped "
	    "           AND a.attname OPERATOR(pg_catalog.=) ANY ('{cdc_key,cdc_version,cdc_op,cdc_snapshot,cdc_source_ts,"
	    "cdc_source,cdc_delivery_key}'::pg_catalog.name[])), "
	    "       m.expired_policy "
	    "  FROM cdc.mapping m "
	    "  LEFT JOIN pg_catalog.pg_proc pr ON pr.oid OPERATOR(pg_catalog.=) m.handler "
	    "  LEFT JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) pr.pronamespace "
	    " WHERE m.target OPERATOR(pg_catalog.=) $1",
	    p, true);
	if (n == 0)
		return cfg;
	std::string mode = ResultText(0, 1).value_or("state");
	cfg.mode = ParseMode(mode).value_or(Mode::State);
	std::string expired = ResultText(0, 7).value_or("refuse");
	cfg.expired_policy = expired == "apply"         ? ModeConfig::ExpiredPolicy::Apply
	                     : expired == "dead_letter" ? ModeConfig::ExpiredPolicy::DeadLetter
	                                                : ModeConfig::ExpiredPolicy::Refuse;
	if (cfg.mode == Mode::Handler) {
		std::optional<std::string> fn = ResultText(0, 4);
		if (!fn)
			Fail("42883", "the handler function of the mapping of table " + qualified + " no longer exists",
			     {}, "Register the mapping again with an existing handler, or with mode => 'state'.");
		cfg.handler_name = ResultText(0, 3).value_or(*fn);
		bool jsonb_images = ResultBool(0, 5);
		std::string image = jsonb_images ? std::string("$%d::pg_catalog.jsonb")
		                                 : "pg_catalog.jsonb_populate_record(NULL::" + qualified + ", $%d::pg_catalog.jsonb)";
		auto arg = [&](int i) {
			std::string s = image;
			s.replace(s.find("%d"), 2, std::to_string(i));
			return s;
		};
		/* the handler's schema-qualified name with its exact argument types: only it can match */
		cfg.handler_sql = "SELECT " + *fn + "($1::pg_catalog.text, " + arg(2) + ", " + arg(3) + ", $4::pg_catalog.jsonb)";
	}
	if (cfg.mode == Mode::History) {
		std::string cols = "," + ResultText(0, 6).value_or("") + ",";
		auto has = [&](const char *c) { return cols.find(std::string(",") + c + ",") != std::string::npos; };
		for (const char *req : {history_column::kKey, history_column::kVersion, history_column::kOp})
			if (!has(req))
				Fail("42P10", "history table " + qualified + " has no column \"" + req + "\"", {},
				     "A history table needs cdc_key jsonb, cdc_version bigint[] and cdc_op text with a unique index "
				     "on (cdc_key, cdc_version); cdc.create_history_table() creates one.");
		cfg.has_snapshot = has(history_column::kSnapshot);
		cfg.has_source_ts = has(history_column::kSourceTs);
		cfg.has_source = has(history_column::kSource);
		cfg.has_delivery_key = has(history_column::kDeliveryKey);
	}
	return cfg;
}

HistoryResult
AppendHistory(const ModeConfig &cfg, const std::string &qualified, const std::string &own_rows,
              const std::vector<ModeValue> &values, const ChangeIdentity &id, std::optional<std::string> *row,
              const RunAs &as)
{
	Params p;
	p.AddText(id.entity_key);              // $1
	p.AddText(id.version.ToArrayLiteral()); // $2
	const std::string key_pred = "p.cdc_key OPERATOR(pg_catalog.=) $1::pg_catalog.jsonb "
	                             "AND p.cdc_version OPERATOR(pg_catalog.<) $2::pg_catalog.int8[]";

	bool has_unavailable = false;
	for (const ModeValue &v : values)
		has_unavailable = has_unavailable || v.unavailable;
	if (has_unavailable) {
		/* Unchanged columns take the value of the key's previous change; there must be one. */
		Params q;
		q.AddText(id.entity_key);
		q.AddText(id.version.ToArrayLiteral());
		if (Execute("SELECT 1 FROM " + own_rows + " AS p WHERE " + key_pred + " LIMIT 1", q, as) == 0) {
			if (Execute("SELECT 1 FROM " + own_rows + " AS p WHERE p.cdc_key OPERATOR(pg_catalog.=) $1::pg_catalog.jsonb "
			            "AND p.cdc_version OPERATOR(pg_catalog.=) $2::pg_catalog.int8[]",
			            q, as) > 0)
				return HistoryResult::Exists;
			return HistoryResult::NoEarlierRow;
		}
	}

	std::string cols, vals;
	auto add = [&](const std::string &col, const std::string &expr) {
		if (!cols.empty()) {
			cols += ", ";
			vals += ", ";
		}
		cols += QuoteIdent(col);
		vals += expr;
	};
	for (const ModeValue &v : values) {
		if (v.unavailable) {
			std::string qc = QuoteIdent(v.column);
			add(v.column, "(SELECT p." + qc + " FROM " + own_rows + " AS p WHERE " + key_pred +
			                  " ORDER BY p.cdc_version DESC LIMIT 1)");
			continue;
		}
		p.Add(v.type, v.value, v.isnull);
		add(v.column, "$" + std::to_string(p.Count()));
	}
	add(history_column::kKey, "$1::pg_catalog.jsonb");
	add(history_column::kVersion, "$2::pg_catalog.int8[]");
	p.AddText(std::string(1, id.op));
	add(history_column::kOp, "$" + std::to_string(p.Count()));
	if (cfg.has_snapshot) {
		p.AddBool(id.is_snapshot);
		add(history_column::kSnapshot, "$" + std::to_string(p.Count()));
	}
	if (cfg.has_source_ts) {
		if (id.source_ts_ms)
			p.Add(TIMESTAMPTZOID, TimestampTzGetDatum(TimestampFromUnixMs(*id.source_ts_ms)), false);
		else
			p.Add(TIMESTAMPTZOID, (Datum) 0, true);
		add(history_column::kSourceTs, "$" + std::to_string(p.Count()));
	}
	if (cfg.has_source) {
		p.AddText(id.source_json);
		add(history_column::kSource, "$" + std::to_string(p.Count()) + "::pg_catalog.jsonb");
	}
	if (cfg.has_delivery_key) {
		p.AddText(id.delivery_key);
		add(history_column::kDeliveryKey, "$" + std::to_string(p.Count()));
	}
	std::string sql = "INSERT INTO " + qualified + " AS h (" + cols + ") VALUES (" + vals +
	                  ") ON CONFLICT (cdc_key, cdc_version) DO NOTHING RETURNING " + RowDatumSql("h", qualified);
	if (Execute(sql, p, as) == 0)
		return HistoryResult::Exists;
	if (row) /* under the payload settings, after the statement and its triggers (outbox.hpp) */
		*row = ResultRowsJsonText(1, 1, as)[0];
	return HistoryResult::Appended;
}

void
CallHandler(const ModeConfig &cfg, const std::string &target_display, const std::string &target_qualified,
            const ChangeIdentity &id,
            const std::optional<std::string> &old_row, const std::optional<std::string> &new_row, const RunAs &as)
{
	HandlerMeta meta;
	meta.target = target_display;
	meta.op = id.op;
	meta.is_snapshot = id.is_snapshot;
	meta.entity_key = id.entity_key;
	meta.version = id.version;
	meta.delivery_key = id.delivery_key;
	meta.source_json = id.source_json;
	meta.source_ts_ms = id.source_ts_ms;

	Params p;
	p.AddText(std::string(1, id.op));
	p.AddTextOrNull(old_row);
	p.AddTextOrNull(new_row);
	p.AddText(HandlerMetaJson(meta));
	try {
		Execute(cfg.handler_sql, p, as);
	} catch (const PgError &e) {
		/* Keep the handler's SQLSTATE and message; say which change it was handling. */
		ErrorData *ed = e.edata();
		std::string line = "cdc_apply handler " + cfg.handler_name + " for op " + std::string(1, id.op) + " of key " +
		                   id.entity_key + " of table " + target_qualified + " at version " +
		                   id.version.ToArrayLiteral() + ", delivery key \"" + ForContextLine(id.delivery_key) + "\"";
		PgCall([&]() {
			ed->context = ed->context ? psprintf("%s\n%s", ed->context, line.c_str()) : pstrdup(line.c_str());
		});
		throw;
	}
}

} // namespace cdc::pg

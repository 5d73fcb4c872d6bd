// The audit's libpq sessions to the source: see source.hpp.
#include "pg/audit/source.hpp"

#include "core/audit_sql.hpp"
#include "pg/worker/worker.hpp"

#include <cstdio>
#include <cstring>
#include <stdexcept>

extern "C" {
#include "access/xlog.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/wait_event.h"
}

namespace cdc::pg::audit {

namespace {

// Raises the source's error as a PostgreSQL ERROR (thrown as PgError): the
// source's SQLSTATE when it sent one, else `fallback`.
[[noreturn]] void
SourceError(const char *sqlstate, int fallback, const std::string &message)
{
	int code = sqlstate && std::strlen(sqlstate) == 5
	               ? MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2], sqlstate[3], sqlstate[4])
	               : fallback;
	PgCall([&]() { ereport(ERROR, (errcode(code), errmsg("%s", message.c_str()))); });
	throw std::logic_error("unreachable");
}

std::string
Trimmed(const char *s)
{
	std::string out = s ? s : "";
	while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
		out.pop_back();
	return out;
}

} // namespace

/* ------------------------------------------------------------------------ */

Result::~Result()
{
	if (res_)
		PQclear(res_);
}

int
Result::Rows() const
{
	return PQntuples(res_);
}

bool
Result::IsNull(int row, int col) const
{
	return PQgetisnull(res_, row, col) != 0;
}

std::string
Result::Text(int row, int col) const
{
	return PQgetisnull(res_, row, col) ? std::string() : std::string(PQgetvalue(res_, row, col), size_t(PQgetlength(res_, row, col)));
}

std::optional<std::string>
Result::Value(int row, int col) const
{
	if (PQgetisnull(res_, row, col))
		return std::nullopt;
	return Text(row, col);
}

/* ------------------------------------------------------------------------ */

const std::vector<std::pair<std::string, std::string>> &
PinnedSettings()
{
	/* a function-local static of trivial lifetime: never destroyed (no exit-time destructor) */
	static std::vector<std::pair<std::string, std::string>> *settings = nullptr;
	if (!settings) {
		settings = new std::vector<std::pair<std::string, std::string>>;
		/* the worker's (src/pg/worker/source_conn.cpp): values read as the worker reads them */
		for (int i = 0; i < cdc_source_settings_count; i++)
			settings->emplace_back(cdc_source_settings[i].name, cdc_source_settings[i].value);
		/* the text of timestamptz, bytea and money values, whatever the session's defaults */
		settings->emplace_back("TimeZone", "UTC");
		settings->emplace_back("bytea_output", "hex");
		settings->emplace_back("lc_monetary", "C");
	}
	return *settings;
}

SourceConn::SourceConn(const std::string &conninfo, bool replication, const std::string &application_name,
                       const std::string &subscription)
{
	/*
	 * The source's timeouts off (the walk's transaction waits between pages
	 * while the destination compares; a page's statement may take long), as
	 * the worker's (cdc_source_timeouts); then the conninfo's own options,
	 * which may set them; then ours: ours win.
	 */
	std::string options;
	for (int i = 0; i < cdc_source_timeouts_count; i++)
		options += std::string("-c ") + cdc_source_timeouts[i].name + "=" + cdc_source_timeouts[i].value + " ";
	PQconninfoOption *parsed = PQconninfoParse(conninfo.c_str(), nullptr);
	if (parsed) {
		for (PQconninfoOption *o = parsed; o->keyword; o++)
			if (std::strcmp(o->keyword, "options") == 0 && o->val && o->val[0])
				options += std::string(o->val) + " ";
		PQconninfoFree(parsed);
	}
	for (const auto &[name, value] : PinnedSettings())
		options += "-c " + name + "=" + value + " ";
	const char *encoding = PgCall([]() { return GetDatabaseEncodingName(); });

	std::vector<const char *> keys, values;
	keys.push_back("dbname");
	values.push_back(conninfo.c_str());
	if (replication) {
		keys.push_back("replication");
		values.push_back("database");
	}
	keys.push_back("application_name");
	values.push_back(application_name.c_str());
	keys.push_back("fallback_application_name");
	values.push_back("cdc_apply");
	keys.push_back("connect_timeout");
	values.push_back("10");
	keys.push_back("client_encoding");
	values.push_back(encoding);
	keys.push_back("options");
	values.push_back(options.c_str());
	keys.push_back(nullptr);
	values.push_back(nullptr);

	PGconn *conn = PgCall([&]() { return libpqsrv_connect_params(keys.data(), values.data(), 1, PG_WAIT_EXTENSION); });
	if (PQstatus(conn) != CONNECTION_OK) {
		std::string msg = Trimmed(PQerrorMessage(conn));
		PgCall([&]() { libpqsrv_disconnect(conn); });
		SourceError(nullptr, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
		            "could not connect to the source of subscription \"" + subscription + "\": " + msg);
	}
	conn_ = conn;
	if (replication)
		return;
	/*
	 * As the worker's sessions: nothing the statements name depends on the
	 * role's search_path.  The settings are set again here: libpq sends
	 * PGDATESTYLE, PGTZ and PGOPTIONS of the server's environment as startup
	 * parameters of their own, which win over the options' -c switches.
	 */
	std::string check = "SELECT pg_catalog.set_config('search_path', '', false)";
	for (const auto &[name, value] : PinnedSettings())
		check += ", pg_catalog.set_config(" + cdc::audit::QuoteLiteral(name) + ", " + cdc::audit::QuoteLiteral(value) + ", false)";
	Simple(check, PGRES_TUPLES_OK);
	check = "SELECT NULL";
	for (const auto &[name, value] : PinnedSettings())
		check += ", pg_catalog.current_setting(" + cdc::audit::QuoteLiteral(name) + ")";
	check += ", pg_catalog.current_setting('client_encoding')";
	Result res = Simple(check, PGRES_TUPLES_OK);
	int col = 1;
	for (const auto &[name, value] : PinnedSettings()) {
		std::string got = res.Text(0, col++);
		bool ok = name == "DateStyle" ? got.compare(0, 3, "ISO") == 0 : got == value;
		if (!ok)
			SourceError("55000", 0,
			            "the audit's session on the source of subscription \"" + subscription + "\" runs with " + name +
			                " = \"" + got + "\", not " + value + " (something between it and the source, such as a "
			                "connection pooler, dropped the connection's startup options)");
	}
	if (res.Text(0, col) != encoding)
		SourceError("55000", 0, "the audit's session on the source of subscription \"" + subscription +
		                            "\" runs with client_encoding = \"" + res.Text(0, col) + "\", not " + encoding);
}

SourceConn::~SourceConn()
{
	if (!conn_)
		return;
	if (PQtransactionStatus(conn_) == PQTRANS_ACTIVE) {
		/* a statement still runs (we were interrupted): stop it on the source */
		char err[256];
		PGcancel *cancel = PQgetCancel(conn_);
		if (cancel) {
			(void) PQcancel(cancel, err, sizeof err);
			PQfreeCancel(cancel);
		}
	}
	libpqsrv_disconnect(conn_);
}

Result
SourceConn::Exec(const std::string &sql, const std::vector<std::optional<std::string>> &params, ExecStatusType expected)
{
	std::vector<const char *> values;
	for (const auto &p : params)
		values.push_back(p ? p->c_str() : nullptr);
	PGresult *raw = PgCall([&]() {
		return libpqsrv_exec_params(conn_, sql.c_str(), int(values.size()), nullptr, values.data(), nullptr, nullptr, 0,
		                            PG_WAIT_EXTENSION);
	});
	Result res(raw);
	if (!raw || PQresultStatus(raw) != expected) {
		std::string msg = Trimmed(raw ? PQresultErrorMessage(raw) : PQerrorMessage(conn_));
		SourceError(raw ? PQresultErrorField(raw, PG_DIAG_SQLSTATE) : nullptr, ERRCODE_CONNECTION_FAILURE,
		            "the source failed \"" + sql + "\": " + msg);
	}
	return res;
}

Result
SourceConn::Simple(const std::string &sql, ExecStatusType expected)
{
	PGresult *raw = PgCall([&]() { return libpqsrv_exec(conn_, sql.c_str(), PG_WAIT_EXTENSION); });
	Result res(raw);
	if (!raw || PQresultStatus(raw) != expected) {
		std::string msg = Trimmed(raw ? PQresultErrorMessage(raw) : PQerrorMessage(conn_));
		SourceError(raw ? PQresultErrorField(raw, PG_DIAG_SQLSTATE) : nullptr, ERRCODE_CONNECTION_FAILURE,
		            "the source failed \"" + sql + "\": " + msg);
	}
	return res;
}

int
SourceConn::ServerVersion() const
{
	return PQserverVersion(conn_);
}

/* ------------------------------------------------------------------------ */

Source::Source(const std::string &conninfo, const std::string &subscription)
    : conninfo_(conninfo), subscription_(subscription), appname_("cdc_apply_audit_" + subscription),
      repl_(conninfo, true, appname_, subscription)
{
	Result id = repl_.Simple("IDENTIFY_SYSTEM", PGRES_TUPLES_OK);
	system_id_ = id.Text(0, 0);
	db_name_ = id.Text(0, 3);
}

uint64_t
Source::OpenSnapshot(SourceConn &q)
{
	char name[64];
	unsigned long long sysid = PgCall([]() { return (unsigned long long) GetSystemIdentifier(); });
	int pid = PgCall([]() { return MyProcPid; });
	snprintf(name, sizeof name, "cdc_audit_%llu_%d_%d", sysid, pid, ++slots_);
	Result slot = repl_.Simple(std::string("CREATE_REPLICATION_SLOT ") + name + " TEMPORARY LOGICAL pgoutput (SNAPSHOT 'export')",
	                           PGRES_TUPLES_OK);
	uint64_t cp = LsnFromText(slot.Text(0, 1));
	std::string snapshot = slot.Text(0, 2);
	q.Simple("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", PGRES_COMMAND_OK);
	q.Simple("SET TRANSACTION SNAPSHOT " + cdc::audit::QuoteLiteral(snapshot), PGRES_COMMAND_OK);
	/* the importing transaction holds the snapshot now; the slot would only keep WAL */
	repl_.Simple(std::string("DROP_REPLICATION_SLOT ") + name, PGRES_COMMAND_OK);
	return cp;
}

uint64_t
LsnFromText(const std::string &text)
{
	unsigned int hi = 0, lo = 0;
	if (std::sscanf(text.c_str(), "%X/%X", &hi, &lo) != 2)
		throw std::runtime_error("not an LSN: " + text);
	return (uint64_t(hi) << 32) | lo;
}

std::string
LsnText(uint64_t lsn)
{
	char buf[32];
	snprintf(buf, sizeof buf, "%X/%X", unsigned(lsn >> 32), unsigned(lsn));
	return buf;
}

} // namespace cdc::pg::audit

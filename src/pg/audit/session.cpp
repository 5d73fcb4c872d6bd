// The destination half of cdc.audit and cdc.resync: see session.hpp.
#include "pg/audit/session.hpp"

#include "core/audit_sql.hpp"
#include "core/errors.hpp"
#include "pg/audit/source.hpp"
#include "pg/guc.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include <algorithm>

namespace cdc::pg::audit {

namespace {

int64_t
NowMicros()
{
	return PgCall([]() { return (int64_t) GetCurrentTimestamp(); });
}

// Sleeps `ms` milliseconds, waking for interrupts (a cancel raises here).
void
Sleep(long ms)
{
	PgCall([&]() {
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	});
}

std::string
SetConfigSql(const std::vector<std::pair<std::string, std::string>> &settings)
{
	std::string sql = "SELECT ";
	for (size_t i = 0; i < settings.size(); i++)
		sql += (i ? ", " : "") + std::string("pg_catalog.set_config(") + cdc::audit::QuoteLiteral(settings[i].first) + ", " +
		       cdc::audit::QuoteLiteral(settings[i].second) + ", true)";
	return sql;
}

} // namespace

/* ------------------------------------------------------------------------ */

DestSession::DestSession(FunctionCallInfo fcinfo, const char *what)
{
	const bool nonatomic = fcinfo->context && IsA(fcinfo->context, CallContext) && !((CallContext *) fcinfo->context)->atomic;
	if (!nonatomic)
		throw InputError("25001", std::string(what) + " cannot run inside a transaction block",
		                 "It commits after every page so that it holds no long transaction on the destination.",
		                 std::string("Run CALL ") + what + "(...) on its own, outside BEGIN ... COMMIT and not from a function.");
	if (!PgCall([]() { return superuser(); }))
		throw InputError("42501", std::string("permission denied for ") + what,
		                 "It reads the subscription's connection string and compares or writes any table.",
		                 "Only superusers may run it.");
	PgCall([&]() {
		MemoryContext caller = CurrentMemoryContext;
		if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
			elog(ERROR, "cdc_apply: SPI_connect_ext failed");
		/* the call's context lives across the commits (the portal's); the page's is a child of it */
		entry_context_ = caller;
		page_context_ = AllocSetContextCreate(caller, "cdc_apply audit page", ALLOCSET_DEFAULT_SIZES);
		MemoryContextSwitchTo(page_context_);
	});
	/* the session's own values, to restore them after statements that pin them */
	for (const auto &[name, value] : PinnedSettings()) {
		const char *v = PgCall([&]() { return GetConfigOptionByName(name.c_str(), NULL, false); });
		saved_.emplace_back(name, v ? v : "");
	}
	/* the CALL's own snapshot would be held for the whole run: end that transaction now */
	Commit();
}

void
DestSession::Commit()
{
	PgCall([]() {
		MemoryContext caller = CurrentMemoryContext;
		SPI_commit();
		/*
		 * What a function's SET search_path clause gives the engine's and our
		 * statements (a procedure that commits cannot have one), for each
		 * transaction: set_config(..., true) ends with it.
		 */
		(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0,
		                         false);
		MemoryContextSwitchTo(caller);
	});
	pinned_ = false; /* set_config(..., true) ends with the transaction */
}

void
DestSession::ResetPage()
{
	/* the engine's error context text of the last batch lives in the page's context: back to ours */
	ResetContext();
	PgCall([&]() {
		if (CurrentMemoryContext != page_context_)
			elog(ERROR, "cdc_apply: the audit's memory context is not current");
		MemoryContextReset(page_context_);
	});
}

void
DestSession::SetContext(const std::string &text)
{
	/* in the call's context: the ERROR that reports it is raised after the C++ frames are gone */
	context_ = PgCall([&]() { return MemoryContextStrdup(entry_context_, text.c_str()); });
	SetErrorContext(context_);
}

void
DestSession::Finish()
{
	if (finished_)
		return;
	finished_ = true;
	PgCall([&]() {
		SPI_finish();
		MemoryContextSwitchTo(entry_context_);
	});
}

void
DestSession::Pin()
{
	if (pinned_)
		return;
	Params none;
	Execute(SetConfigSql(PinnedSettings()), none, false);
	pinned_ = true;
}

void
DestSession::Unpin()
{
	if (!pinned_)
		return;
	Params none;
	Execute(SetConfigSql(saved_), none, false);
	pinned_ = false;
}

/* ------------------------------------------------------------------------ */

std::string
Subscription::PublicationLiterals() const
{
	std::string out;
	for (size_t i = 0; i < publications.size(); i++)
		out += (i ? ", " : "") + cdc::audit::QuoteLiteral(publications[i]);
	return out;
}

std::string
Subscription::PublicationsSql() const
{
	return "ARRAY[" + PublicationLiterals() + "]::pg_catalog.text[]";
}

Subscription
ReadSubscription(const std::string &name)
{
	Params p;
	p.AddText(name);
	uint64_t n = Execute("SELECT s.subid, s.conninfo, s.publications::pg_catalog.text, s.source_epoch, s.enabled, s.slot_ready, "
	                     "s.owner::pg_catalog.oid, s.run_as_owner FROM cdc.subscription s WHERE s.name OPERATOR(pg_catalog.=) $1",
	                     p, false);
	if (n == 0)
		throw InputError("42704", "subscription \"" + name + "\" does not exist");
	Subscription s;
	s.name = name;
	s.subid = std::stoi(*ResultText(0, 1));
	s.conninfo = *ResultText(0, 2);
	s.epoch = std::stoll(*ResultText(0, 4));
	s.enabled = ResultBool(0, 5);
	s.slot_ready = ResultBool(0, 6);
	s.owner = Oid(std::stoul(*ResultText(0, 7)));
	s.run_as_owner = ResultBool(0, 8);
	/* text[] of lower-case publication names: parse with PostgreSQL's own array input */
	Params q;
	q.AddText(*ResultText(0, 3));
	n = Execute("SELECT pg_catalog.unnest($1::pg_catalog.text[])", q, false);
	for (uint64_t i = 0; i < n; i++)
		s.publications.push_back(*ResultText(i, 1));
	return s;
}

void
WaitApplied(DestSession &dest, const Subscription &sub, uint64_t lsn, int64_t timeout_ms)
{
	const int64_t start = NowMicros();
	for (;;) {
		Params p;
		p.AddText(sub.name);
		p.AddText(LsnText(lsn));
		uint64_t n = Execute("SELECT greatest(s.applied_lsn, s.flushed_lsn) OPERATOR(pg_catalog.>=) $2::pg_catalog.pg_lsn, "
		                     "s.state, coalesce(greatest(s.applied_lsn, s.flushed_lsn)::pg_catalog.text, 'nothing'), "
		                     "coalesce(s.last_error, '') FROM cdc.subscription_status s WHERE s.name OPERATOR(pg_catalog.=) $1",
		                     p, false);
		if (n == 0)
			throw InputError("42704", "subscription \"" + sub.name + "\" does not exist");
		const bool done = ResultBool(0, 1);
		const std::string state = *ResultText(0, 2);
		const std::string at = *ResultText(0, 3);
		const std::string error = *ResultText(0, 4);
		dest.Commit(); /* the next look needs a new snapshot, and nothing stays open meanwhile */
		if (done)
			return;
		if (state == "disabled")
			throw InputError("55000", "subscription \"" + sub.name + "\" is disabled: it cannot apply the source's stream up to " +
			                              LsnText(lsn) + ", where the comparison is made",
			                 "It has applied up to " + at + ".", "Enable it with cdc.enable_subscription().");
		if ((NowMicros() - start) / 1000 > timeout_ms)
			throw InputError("55000", "subscription \"" + sub.name + "\" did not apply the source's stream up to " + LsnText(lsn) +
			                              " within " + std::to_string(timeout_ms / 1000) + " s",
			                 "It is " + state + " and has applied up to " + at + "." +
			                     (error.empty() ? std::string() : " Its last error: " + error),
			                 "The comparison needs the destination at the source's snapshot. Fix what stops the worker, "
			                 "or pass a longer wait_timeout.");
		Sleep(100);
	}
}

std::optional<int32_t>
SourceIdOf(const std::string &source_name)
{
	Params p;
	p.AddText(source_name);
	if (Execute("SELECT s.id::pg_catalog.int4 FROM cdc.source s WHERE s.name OPERATOR(pg_catalog.=) $1", p, false) == 0)
		return std::nullopt;
	return std::stoi(*ResultText(0, 1));
}

/* ------------------------------------------------------------------------ */

Run::Run(DestSession &dest, const char *kind, const Subscription &sub, Oid target, std::optional<int64_t> of_audit)
    : dest_(dest), kind_(kind), subscription_(sub.name)
{
	started_us_ = last_notice_us_ = NowMicros();
	Params p;
	p.AddText(kind);
	p.AddText(sub.name);
	p.Add(OIDOID, ObjectIdGetDatum(target), !OidIsValid(target));
	p.Add(INT8OID, Int64GetDatum(of_audit.value_or(0)), !of_audit.has_value());
	Execute("INSERT INTO cdc.audit_runs (kind, subscription, target, of_audit) VALUES ($1, $2, $3::pg_catalog.regclass, $4) "
	        "RETURNING id",
	        p, false);
	id_ = std::stoll(*ResultText(0, 1));
	dest_.Commit();
}

double
Run::ElapsedSeconds() const
{
	return double(NowMicros() - started_us_) / 1e6;
}

void
Run::Write(bool done)
{
	const RunCounters &c = counters;
	Params p;
	p.AddInt8(id_);
	p.Add(INT4OID, Int32GetDatum(c.tables_total), false);
	p.Add(INT4OID, Int32GetDatum(c.tables_done), false);
	p.Add(OIDOID, ObjectIdGetDatum(c.current_target.value_or(InvalidOid)), !c.current_target);
	p.AddTextOrNull(c.source_lsn ? std::optional<std::string>(LsnText(*c.source_lsn)) : std::nullopt);
	p.AddInt8(c.rows_estimate);
	p.AddInt8(c.rows_done);
	p.AddInt8(c.ranges_done);
	p.AddInt8(c.findings);
	p.AddInt8(c.unsettled);
	p.AddInt8(c.repaired);
	p.AddInt8(c.unchanged);
	p.AddBool(done);
	Execute("UPDATE cdc.audit_runs SET tables_total = $2, tables_done = $3, current_target = $4::pg_catalog.regclass, "
	        "source_lsn = $5::pg_catalog.pg_lsn, rows_estimate = $6, rows_done = $7, ranges_done = $8, findings = $9, "
	        "unsettled = $10, repaired = $11, unchanged = $12, updated_at = pg_catalog.clock_timestamp(), "
	        "finished_at = CASE WHEN $13 THEN pg_catalog.clock_timestamp() END "
	        "WHERE id OPERATOR(pg_catalog.=) $1",
	        p, false);
}

void
Run::Progress()
{
	Write(false);
	dest_.Commit();
	dest_.ResetPage();
	const int64_t now = NowMicros();
	const double elapsed = double(now - started_us_) / 1e6;
	if (now - last_notice_us_ >= 5 * 1000000) {
		last_notice_us_ = now;
		std::string line = "cdc." + kind_ + " of subscription \"" + subscription_ + "\" (run " + std::to_string(id_) +
		                   "): " + cdc::audit::ProgressText(counters.rows_done, counters.rows_estimate, elapsed) + ", " +
		                   std::to_string(counters.findings) + (kind_ == "audit" ? " findings" : " keys repaired") +
		                   " so far";
		PgCall([&]() { ereport(NOTICE, (errmsg("%s", line.c_str()))); });
	}
	/* the rate cap: sleep until the rows so far have taken rows / cap seconds */
	double wait = cdc::audit::ThrottleSeconds(counters.rows_done, elapsed, cdc_audit_max_rows_per_second);
	while (wait > 0) {
		long ms = long(std::min(wait, 1.0) * 1000) + 1;
		Sleep(ms);
		wait -= double(ms) / 1000;
	}
}

void
Run::Done()
{
	Write(true);
	dest_.Commit();
}

} // namespace cdc::pg::audit

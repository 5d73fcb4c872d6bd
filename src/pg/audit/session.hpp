// The destination half of cdc.audit and cdc.resync (docs/audit.md): the
// procedure's SPI connection, which commits between pages so that no
// transaction stays open on the destination; the session settings the row
// text is computed under; the subscription being audited and the wait for
// its worker to apply the stream up to a source position; and the run's
// row in cdc.audit_runs with its progress, NOTICE lines and rate cap.
//
// C++ regime: PostgreSQL calls through PgCall.  The procedure must have
// been called with CALL outside a transaction block (a non-atomic context),
// which DestSession checks.
#pragma once

#include "core/audit_diff.hpp"
#include "pg/guard.hpp"
#include "pg/spi.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cdc::pg::audit {

class DestSession {
  public:
	// Opens a non-atomic SPI connection: 25001 when `fcinfo` is not a CALL
	// outside a transaction block (`what` names the procedure), 42501 for a
	// caller who is not a superuser.
	DestSession(FunctionCallInfo fcinfo, const char *what);
	DestSession(const DestSession &) = delete;
	DestSession &operator=(const DestSession &) = delete;
	// Commits the current transaction and starts the next one (SPI_commit).
	void Commit();
	// Frees what the last page allocated in the PostgreSQL regime (converted
	// values, result texts): the procedure runs in a memory context of its
	// own, reset after every page, so that a long walk does not accumulate
	// them.  Nothing outside the C++ objects may outlive a page.
	void ResetPage();
	// The CONTEXT line of errors from here on ("cdc.audit of subscription
	// "x", table public.t"), as the engine's SetErrorContext.
	void SetContext(const std::string &text);
	// Back to that text after the engine set its own.
	void ResetContext() { SetErrorContext(context_); }
	// Closes the SPI connection after success (on error the abort does it)
	// and returns to the caller's memory context.
	void Finish();
	// Pinned: the settings of PinnedSettings() for the rest of the
	// transaction, for statements that compute row texts; Unpinned: the
	// session's own again, for the engine and the entity-key lookups, whose
	// text forms are those of an ordinary apply in this session.
	void Pin();
	void Unpin();

  private:
	std::vector<std::pair<std::string, std::string>> saved_;
	MemoryContext entry_context_ = nullptr;
	MemoryContext page_context_ = nullptr;
	const char *context_ = nullptr; // SetContext's text, in entry_context_
	bool pinned_ = false;
	bool finished_ = false;
};

// The subscription an audit or resync works for.
struct Subscription {
	int subid = 0;
	std::string name;
	std::string conninfo;
	std::vector<std::string> publications;
	int64_t epoch = 0;
	bool enabled = false;
	bool slot_ready = false;
	Oid owner = InvalidOid;    // the role the worker acts as (docs/security.md)
	bool run_as_owner = false;
	// The publications as a SQL array literal for statements on the source.
	std::string PublicationsSql() const;
	// The publications as comma-separated SQL literals (the worker's
	// publications_sql, for read_table_scope).
	std::string PublicationLiterals() const;
};
// Reads it (42704 when there is none).
Subscription ReadSubscription(const std::string &name);

// Waits until the subscription's worker has applied the source's stream up
// to `lsn` (applied or confirmed position at or past it), committing
// between looks.  Errors 55000: the subscription is disabled, or it did not
// get there within `timeout_ms` (with its state and last error).
void WaitApplied(DestSession &dest, const Subscription &sub, uint64_t lsn, int64_t timeout_ms);

// The run's row in cdc.audit_runs and everything it reports.
struct RunCounters {
	int tables_total = 0;
	int tables_done = 0;
	std::optional<Oid> current_target;
	std::optional<uint64_t> source_lsn;
	int64_t rows_estimate = 0;
	int64_t rows_done = 0;
	int64_t ranges_done = 0;
	int64_t findings = 0;
	int64_t unsettled = 0;
	int64_t repaired = 0;
	int64_t unchanged = 0;
};

class Run {
  public:
	// Inserts the run's row (committed at once, so cdc.audit_status shows it).
	Run(DestSession &dest, const char *kind, const Subscription &sub, Oid target, std::optional<int64_t> of_audit);
	int64_t Id() const { return id_; }
	RunCounters counters;
	// Writes the counters and commits (with whatever the caller wrote in
	// the transaction), every 5 s a NOTICE line with the progress, then
	// sleeps as long as cdc.audit_max_rows_per_second asks.
	void Progress();
	// Marks the run finished and commits.
	void Done();
	double ElapsedSeconds() const;

  private:
	void Write(bool done);
	DestSession &dest_;
	std::string kind_;
	std::string subscription_;
	int64_t id_ = 0;
	int64_t started_us_ = 0;
	int64_t last_notice_us_ = 0;
};

// The source system's pg:<system identifier> and its id in cdc.source
// (nullopt when no change of it was ever applied here).
std::optional<int32_t> SourceIdOf(const std::string &source_name);

} // namespace cdc::pg::audit

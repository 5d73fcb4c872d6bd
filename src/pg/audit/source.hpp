// The audit's connections to the source of a subscription (docs/audit.md,
// "Consistency"): libpq sessions with the worker's pinned settings plus
// those the row text needs (TimeZone, bytea_output, lc_monetary), driven
// through PostgreSQL's interruptible libpq helpers, and snapshots taken at
// the consistent point of a temporary logical slot, so that the position
// the comparison is made at is exact.
//
// C++ regime: every libpq and PostgreSQL call goes through PgCall; a
// connection is closed (its running statement cancelled) by the destructor.
// Nothing here ever logs or returns the conninfo (it may hold a password).
#pragma once

#include "pg/guard.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

extern "C" {
#include "libpq-fe.h"
}

namespace cdc::pg::audit {

// A libpq result, cleared by the destructor.
class Result {
  public:
	explicit Result(PGresult *res) : res_(res) {}
	Result(Result &&o) noexcept : res_(o.res_) { o.res_ = nullptr; }
	Result(const Result &) = delete;
	Result &operator=(const Result &) = delete;
	~Result();
	int Rows() const;
	bool IsNull(int row, int col) const;
	std::string Text(int row, int col) const; // "" for NULL
	std::optional<std::string> Value(int row, int col) const;

  private:
	PGresult *res_;
};

// The settings of every audit session on either side: the worker's pinned
// settings (cdc_source_settings, so values read as the worker reads them)
// and those that make a value's text independent of the session
// (docs/audit.md, "The row hash").  Pairs of (name, value), in this order.
const std::vector<std::pair<std::string, std::string>> &PinnedSettings();

class SourceConn {
  public:
	// Connects with the subscription's conninfo (its own options first,
	// the pinned settings after them), empties search_path and checks the
	// settings took (55000 otherwise, as behind a pooler that drops
	// startup options).  replication: a replication=database connection.
	// Errors: 08001 when the source cannot be reached.
	SourceConn(const std::string &conninfo, bool replication, const std::string &application_name,
	           const std::string &subscription);
	SourceConn(SourceConn &&o) noexcept : conn_(o.conn_) { o.conn_ = nullptr; }
	SourceConn(const SourceConn &) = delete;
	SourceConn &operator=(const SourceConn &) = delete;
	~SourceConn();

	// Runs `sql` with text parameters (NULL: SQL NULL; their types are
	// inferred as for untyped literals).  An error of the source keeps its
	// SQLSTATE and names the statement.  Interruptible (query cancel).
	Result Exec(const std::string &sql, const std::vector<std::optional<std::string>> &params = {},
	            ExecStatusType expected = PGRES_TUPLES_OK);
	// A statement without parameters in the simple protocol (replication
	// commands, BEGIN, SET TRANSACTION SNAPSHOT).
	Result Simple(const std::string &sql, ExecStatusType expected);
	int ServerVersion() const;
	// The libpq connection, for the worker's readers of the source
	// (read_table_scope, PostgreSQL regime: through PgCall).
	PGconn *Raw() const { return conn_; }

  private:
	PGconn *conn_ = nullptr;
};

// The source of one audit or resync: the replication connection that
// creates the temporary slots, and what IDENTIFY_SYSTEM says.
class Source {
  public:
	Source(const std::string &conninfo, const std::string &subscription);
	// Opens a REPEATABLE READ READ ONLY transaction on `q` whose snapshot is
	// that of a temporary logical slot created now, and drops the slot:
	// the snapshot sees exactly the source transactions that committed
	// before the returned consistent point (the position a change of the
	// stream compares with, as for the worker's initial copy).
	uint64_t OpenSnapshot(SourceConn &q);
	// A new query connection to the source.
	SourceConn Connect() const { return SourceConn(conninfo_, false, appname_, subscription_); }
	const std::string &SystemId() const { return system_id_; }
	const std::string &DbName() const { return db_name_; }

  private:
	std::string conninfo_;
	std::string subscription_;
	std::string appname_;
	SourceConn repl_;
	std::string system_id_;
	std::string db_name_;
	int slots_ = 0;
};

// LSN text ("16/B374D848") to its value, and back.
uint64_t LsnFromText(const std::string &text);
std::string LsnText(uint64_t lsn);

} // namespace cdc::pg::audit

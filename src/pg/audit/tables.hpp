// One table of an audit or resync on both sides (docs/audit.md, "What is
// compared"): the source table as the subscription's publications publish
// it (the column list, the row filter, a partitioned root with its
// partitions), the destination table with its entity key, the statements
// of core/audit_sql over each, and the Side implementations the walk and
// bisection of core/audit_diff use: SourceSide over libpq in the source's
// snapshot transaction, DestSide over SPI under the pinned settings.
//
// C++ regime: PostgreSQL calls through PgCall.  The key texts passed around
// are the key columns' output texts under the pinned settings, read from
// either side; they go back to a side only as typed values (the
// destination's input functions) or as arrays cast to the source's types.
#pragma once

#include "core/audit_diff.hpp"
#include "core/audit_sql.hpp"
#include "pg/audit/session.hpp"
#include "pg/audit/source.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cdc::pg::audit {

using cdc::audit::Key;

struct SourceTable {
	std::string schema, name;         // as pgoutput names it
	cdc::audit::HashedTable hashed;   // published columns (those the destination does not generate), key, filter
	std::vector<std::string> columns; // the hashed columns' names, unquoted
	std::vector<std::string> key_types; // format_type of each key column on the source
	int64_t estimate = 0;             // reltuples
	// The publications delete rows of it (TableScope::deletes_published):
	// else (publish = 'insert', 'insert, update' without a row filter) the
	// stream keeps the rows the source deletes, so a destination row the
	// source does not publish is no finding and is never deleted (TAP 116).
	bool deletes_published = true;
};

struct KeyColumn {
	std::string name;
	Oid type = InvalidOid;
	int32 typmod = -1;
	Oid input = InvalidOid;
	Oid ioparam = InvalidOid;
	Oid array_type = InvalidOid;
	int16 typlen = 0;
	bool typbyval = false;
	char typalign = 'i';
	// Its type is not built in (a domain, composite, enum, range or array
	// created by a role): its input function may run that role's code (a
	// domain's CHECK constraint), so KeyDatum runs it as the table's owner.
	bool user_type = false;
};

struct DestTable {
	Oid relid = InvalidOid;
	Oid owner = InvalidOid;           // pg_class.relowner: whose code its key types' input may run
	std::string display;              // schema.table
	std::string schema, name;         // its own names (display cannot be split: a name may hold a dot)
	cdc::audit::HashedTable hashed;   // the same columns and key as the source's
	std::vector<KeyColumn> key;
	std::map<std::string, bool> columns; // name -> generated
	bool version_column = false;      // its mapping orders changes by a column
	bool stream_ordered = false;      // its mapping's ordering is 'stream' (no entity records: a mark per source)
};

// The destination table `relid` with its entity key (the mapping's
// key_columns or the primary key).  Errors: 42P10 no key, 0A000 a history
// mapping (not a mirror of the source) or a key type whose ordering is not
// built in (its comparison operators are not in pg_catalog).
DestTable LoadDestTable(Oid relid);

// The source table feeding `dest` for subscription `sub`: its mapping's
// source_schema/source_table (source_name NULL or the subscription), else
// the same schema and name.
std::pair<std::string, std::string> SourceNameOf(const Subscription &sub, const DestTable &dest);

// Reads what the publications publish of source table schema.name (on `q`,
// in the snapshot transaction when there is one) and completes both tables:
// the hashed columns are the published ones the destination does not
// generate, in the source's order.  Errors: 42P01 no such source table,
// 55000 not published by the subscription, 0A000 different column lists in
// two publications or a key column that is not published, 42703 a
// published column the destination lacks.
SourceTable LoadSourceTable(SourceConn &q, const Subscription &sub, const std::string &schema, const std::string &name,
                            DestTable &dest);

// The source side, in the snapshot transaction of `q`.
class SourceSide : public cdc::audit::Side {
  public:
	SourceSide(SourceConn &q, const SourceTable &t) : q_(q), t_(t) {}
	cdc::audit::RangeHash Hash(const cdc::audit::Range &r) override;
	Key KeyAt(const cdc::audit::Range &r, int64_t offset) override;
	std::vector<cdc::audit::RowDigest> Rows(const cdc::audit::Range &r) override;
	cdc::audit::Page PageOf(const cdc::audit::Range &r, int64_t limit) override;

  private:
	cdc::audit::RangeExprs Exprs(const cdc::audit::Range &r, std::vector<std::optional<std::string>> &params) const;
	SourceConn &q_;
	const SourceTable &t_;
};

// The destination side: short statements, each under the pinned settings.
class DestSide : public cdc::audit::Side {
  public:
	DestSide(DestSession &dest, const DestTable &t) : dest_(dest), t_(t) {}
	cdc::audit::RangeHash Hash(const cdc::audit::Range &r) override;
	Key KeyAt(const cdc::audit::Range &r, int64_t offset) override;
	std::vector<cdc::audit::RowDigest> Rows(const cdc::audit::Range &r) override;
	cdc::audit::Page PageOf(const cdc::audit::Range &r, int64_t limit) override;

  private:
	cdc::audit::RangeExprs Exprs(const cdc::audit::Range &r, Params &p) const;
	DestSession &dest_;
	const DestTable &t_;
};

// A source row read by key: the re-check's view, and (with values) the
// after-image a resync applies.
struct SourceKeyRow {
	cdc::audit::SourceRow row;
	std::vector<std::optional<std::string>> values; // the hashed columns' texts, with_values only
};
// The rows of `keys` on the source (in the snapshot transaction of `q`),
// by position in `keys`; absent keys are not found.
std::vector<SourceKeyRow> SourceRowsByKeys(SourceConn &q, const SourceTable &t, const std::vector<Key> &keys,
                                           bool with_values);

// What the destination holds for `keys`, by position in `keys`: the row's
// digest and whether the entity record (live or tombstone) of source
// `source_id` is newer than the snapshot {epoch, lsn, 0, 0}: a change the
// stream applied after the snapshot (never for mappings ordered by a
// version column, whose versions are not positions).  A stream-ordered
// target has no entity records: when its stream mark is newer than the
// snapshot once the rows are read, the stream changed the table since, and
// every key counts as newer.
std::vector<cdc::audit::DestRow> DestRowsByKeys(DestSession &dest, const DestTable &t, const std::vector<Key> &keys,
                                                std::optional<int32_t> source_id, int64_t epoch, uint64_t lsn);

// A key as JSON, {"id": "7"}, like an entity key (cdc.entities).
std::string KeyJson(const DestTable &t, const Key &key);
// A key from JSON: an object naming every key column (values as strings or
// numbers), or for a one-column key a bare string or number.  Errors 22023
// naming what is wrong; `what` names the argument.
Key KeyFromJson(const DestTable &t, const std::string &json, const std::string &what);

} // namespace cdc::pg::audit

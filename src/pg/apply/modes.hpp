// History and handler modes (SPEC §4.5) against the database.  The apply
// engine calls these hooks; everything else about an event (claim, version
// decision, target mutation, outbox) stays in single.cpp, segment.cpp and
// outbox.cpp.  The pure parts are in core/modes.hpp; the contract is in
// docs/semantics.md ("Modes") and docs/handlers.md.
#pragma once

#include "core/envelope.hpp"
#include "core/modes.hpp"
#include "core/version.hpp"
#include "pg/guard.hpp"
#include "pg/spi.hpp"

#include <optional>
#include <string>
#include <vector>

namespace cdc::pg {

// What the mapping of a target says about its mode, read once per engine
// call (LoadModeConfig).
struct ModeConfig {
	Mode mode = Mode::State;
	// history: optional metadata columns the history table has
	bool has_snapshot = false, has_source_ts = false, has_source = false, has_delivery_key = false;
	// handler
	std::string handler_name; // regprocedure text, for messages
	std::string handler_sql;  // the call statement, $1 op, $2 old, $3 new, $4 meta
	// What an expired change becomes (cdc.mapping.expired_policy, docs/retention.md).
	enum class ExpiredPolicy { Refuse, Apply, DeadLetter } expired_policy = ExpiredPolicy::Refuse;
};

// Reads the mode of target `relid` from cdc.mapping (state when there is no
// mapping).  `qualified` is the quoted schema.table of the target (its row
// type, for handlers taking rows).  Errors: 42883 when the mapping's handler
// function no longer exists; 42P10 when a history target lacks cdc_key,
// cdc_version or cdc_op (registration checks the rest).
ModeConfig LoadModeConfig(Oid relid, const std::string &qualified);

// One column value of an image, as the engine converted it (column type,
// Datum in the call's memory).
struct ModeValue {
	std::string column;
	Oid type = InvalidOid;
	Datum value = (Datum) 0;
	bool isnull = true;
	bool unavailable = false; // not sent by the source (unchanged TOAST)
};

// The identity of the change a hook acts on.
struct ChangeIdentity {
	char op = 'c';              // c, u, d, r or t
	bool is_snapshot = false;
	std::string entity_key;     // JSON object text; "{}" for a truncate
	Version version;
	std::string delivery_key;
	std::string source_json;    // the source identity document (as in cdc.outbox.source)
	std::optional<int64_t> source_ts_ms; // source commit time, Unix milliseconds
};

enum class HistoryResult {
	Appended,     // a new history row; *row holds it as JSON text
	Exists,       // (cdc_key, cdc_version) is already recorded: a replay
	NoEarlierRow, // unavailable values and no earlier row of the key to take them from
};

// Appends one history row to `qualified` (history mode): the image's
// columns, then cdc_key, cdc_version, cdc_op and the optional metadata
// columns, with ON CONFLICT (cdc_key, cdc_version) DO NOTHING.  Unavailable
// columns take their value from the key's latest earlier row (by version).
// Those reads name `own_rows` (Target::own_rows: "ONLY schema.table" for a
// plain table), because the unique index that decides a replay covers the
// history table alone, not its inheritance children: an earlier row or an
// "already recorded" answer taken from a child would make the same change
// `duplicate` with unchanged values and `applied` without them
// (docs/semantics.md, "history").  Runs as `as` (the caller on the SQL
// path; docs/security.md for the worker).  Errors: the history table's own
// (constraints, triggers, types).
HistoryResult AppendHistory(const ModeConfig &cfg, const std::string &qualified, const std::string &own_rows,
                            const std::vector<ModeValue> &values, const ChangeIdentity &id,
                            std::optional<std::string> *row, const RunAs &as);

// Calls the mapping's handler (handler mode) as `as` (the calling user on
// the SQL path, the table's owner or the subscription's on the worker):
// handler(op, old, new, meta) where old/new are the destination row before
// and after the change (JSON text, nullopt for none), passed as the
// target's row type or as jsonb (whichever the function takes), and meta is
// HandlerMetaJson.  A handler ERROR propagates with its own SQLSTATE and
// message; a CONTEXT line names the handler, op, entity key, version and
// delivery key.  `target_display` is the unquoted schema.table the meta
// carries (data); `target_qualified` the quoted name the CONTEXT line shows.
void CallHandler(const ModeConfig &cfg, const std::string &target_display, const std::string &target_qualified,
                 const ChangeIdentity &id,
                 const std::optional<std::string> &old_row, const std::optional<std::string> &new_row, const RunAs &as);

} // namespace cdc::pg

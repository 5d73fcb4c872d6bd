// Mapping modes (SPEC §4.5): what an applied change does to its target.
//
//   state    the target mirrors the source row (upsert the after-image,
//            delete on delete); the default.
//   history  the target is an append-only history table: one row per source
//            change, unique on (cdc_key, cdc_version), so a replay inserts
//            nothing.  No per-entity version record is kept: the history
//            table's own unique index is the replay guard, for ever.
//   handler  as state, and a user SQL function is called in the same
//            transaction with the operation, the previous destination row
//            (old), the new one and the event's metadata — only when the
//            change is applied, never for duplicate or stale events.
//
// This file holds the pure parts (names, the handler metadata document);
// src/pg/apply/modes.* runs them against the database.  docs/semantics.md
// ("Modes") and docs/handlers.md describe the contract.
#pragma once
#include "core/version.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace cdc {

enum class Mode { State, History, Handler };

// "state", "history", "handler" -> Mode; nullopt for anything else.
std::optional<Mode> ParseMode(std::string_view s);
const char *ModeName(Mode m);

// Metadata columns of a history table (docs/semantics.md, "history mode").
// The first three are required; the others are filled when the table has them.
namespace history_column {
inline constexpr const char *kKey = "cdc_key";                 // jsonb: entity key {"col": "text"}
inline constexpr const char *kVersion = "cdc_version";         // bigint[]: source version
inline constexpr const char *kOp = "cdc_op";                   // text: c, u, d, r or t
inline constexpr const char *kSnapshot = "cdc_snapshot";       // boolean: a snapshot row (op r)
inline constexpr const char *kSourceTs = "cdc_source_ts";      // timestamptz: source commit time
inline constexpr const char *kSource = "cdc_source";           // jsonb: source identity
inline constexpr const char *kDeliveryKey = "cdc_delivery_key"; // text: delivery key of the record
} // namespace history_column

// True for a column name reserved for history metadata: every name that
// starts with "cdc_" (event fields may not write them).
bool IsHistoryMetaColumn(std::string_view column);

// What a handler is told about the change (its fourth argument, jsonb).
struct HandlerMeta {
	std::string target;        // destination table, schema.table
	char op = 'c';             // c, u, d, r (snapshot row) or t (row removed by a truncate)
	bool is_snapshot = false;  // op r: state only, not a new business action
	std::string entity_key;    // JSON object text ({"id": "7"}); empty for none
	Version version;
	std::string delivery_key;
	std::string source_json;   // JSON object text: the source identity (name, db, schema, table, lsn, ...)
	std::optional<int64_t> source_ts_ms; // source commit time, Unix milliseconds
};

// {"target": ..., "op": ..., "is_snapshot": ..., "entity_key": {...},
//  "version": [...], "delivery_key": ..., "source": {...}, "source_ts_ms": ...}
std::string HandlerMetaJson(const HandlerMeta &m);

} // namespace cdc

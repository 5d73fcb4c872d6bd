// Backend caches of the two dictionaries' ids: cdc.source (source name ->
// id, state_store.cpp) and cdc.outbox_source (topic and source identity ->
// id, outbox.cpp), so that a call does not look its ids up again
// (docs/internals.md, "Dictionary ids").
//
// What makes an id safe to keep:
//   * an id taken or created by the open transaction is kept only for it
//     (tagged with its subtransaction's nesting level) and becomes a
//     backend-wide entry when the transaction commits; a rolled-back
//     (sub)transaction's entries go with it, and so do a prepared
//     transaction's (ROLLBACK PREPARED may still remove its rows);
//   * an entry is never served for another table: an UPDATE, DELETE or
//     TRUNCATE of the dictionary (cdc.rename_source renames and merges
//     sources) sends a relcache invalidation of it (the trigger
//     cdc._invalidate_dictionary), as does dropping it (DROP EXTENSION),
//     and the invalidation empties the cache (taken with the next lock, at
//     the latest at the start of the next transaction);
//   * under REPEATABLE READ and SERIALIZABLE the caches are not used: an
//     id committed after the transaction's snapshot must not be used there
//     (the lookup raises 40001 instead, as without a cache).
//
// Internal to src/pg/apply/.  The maps are plain pointers created on first
// use (no C++ global with a destructor); the callbacks are noexcept and
// call nothing of PostgreSQL but the nesting level.
#pragma once

#include "pg/guard.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace cdc::pg {

enum class Dictionary : uint8_t { Source, OutboxSource };

// Registers the invalidation and transaction callbacks (once; _PG_init).
void InitIdCaches();

// The cached id of `key`, if any (never under REPEATABLE READ or
// SERIALIZABLE).
std::optional<int32_t> CachedId(Dictionary d, const std::string &key);

// Remembers the id of `key`, found or created by the open transaction's
// current subtransaction (nothing under REPEATABLE READ or SERIALIZABLE).
void RememberId(Dictionary d, const std::string &key, int32_t id);

} // namespace cdc::pg

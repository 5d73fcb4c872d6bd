// On-disk layout of the engine's bookkeeping (docs/retention.md, "Layout").
//
// cdc.ledger keeps a 64-bit digest of (target, delivery key) instead of the
// key's text; cdc.entity_state keeps the entity key in a compact exact form,
// the version in fixed-width columns and a 32-bit content hash.  This file
// holds the pure encodings so that they are unit-tested and identical to the
// SQL the views and cdc.prune() use (cdc.delivery_digest, cdc.entity_key_json).
#pragma once

#include "core/version.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cdc {

// The text whose md5 gives a ledger digest: "<target oid>\n<delivery key>".
// SQL: cdc.delivery_digest(target, delivery_key).
std::string LedgerDigestInput(uint32_t target_oid, std::string_view delivery_key);

// The first 16 hex digits of an md5 digest as a signed 64-bit integer (two's
// complement, like SQL's ('x' || substr(md5(..), 1, 16))::bit(64)::bigint).
// The first 8 hex digits as a signed 32-bit integer for Int32FromMd5Hex.
// Throws std::invalid_argument when `hex` is not hexadecimal or too short.
int64_t Int64FromMd5Hex(std::string_view hex);
int32_t Int32FromMd5Hex(std::string_view hex);
// The same as Int64FromMd5Hex of the digest's hex form, read from its 16
// bytes (the first 8, big-endian): no hex text in between.
int64_t Int64FromMd5(const unsigned char digest[16]);

// The id of a source name in cdc.source (docs/security.md, "Shared state"):
// the first 31 bits of md5(name) (`name_md5_hex`), or on the n-th collision
// with another name the n-th id after it (wrapping within 0 .. 2^31-1).  No
// sequence is involved, so a rolled-back call leaves nothing behind, and
// 2^31 ids are never exhausted by committed use.
int32_t SourceIdCandidate(std::string_view name_md5_hex, uint32_t collisions);

// The compact entity key stored in cdc.entity_state.key: for one key
// column its output text; for several, a text[] literal of the output texts
// quoted exactly like PostgreSQL's array_out ({1,"a b"}), so that SQL can
// rebuild it as ARRAY[format('%s', a), ...]::text and parse it as ::text[].
std::string CompactEntityKey(const std::vector<std::string> &values);
// One element of such a literal: the text itself, or double-quoted with
// backslash escapes when array_in would read it otherwise.
std::string ArrayElementText(const std::string &value);

// A version in cdc.entity_state's fixed-width columns:
//   v0 integer (source epoch), v1 bigint, v2 bigint, v3 integer.
// Versions have 3 components (mappings ordered by a version column:
// {epoch, value, is_delete}) or 4 ({epoch, commit LSN, LSN or position,
// order}); a 3-component version is stored with v3 = 0.
struct StoredVersion {
	int32_t v0 = 0;
	int64_t v1 = 0;
	int64_t v2 = 0;
	int32_t v3 = 0;
};

// Throws InputError 22003 when a component does not fit (an epoch or an
// order above 2147483647) and 0A000 for another number of components.
StoredVersion ToStoredVersion(const Version &v);
// Back to a Version of `arity` (3 or 4) components.
Version FromStoredVersion(const StoredVersion &s, size_t arity);

// Seconds since 2000-01-01 00:00 UTC (PostgreSQL's epoch) of a TimestampTz
// value in microseconds, rounded down, clamped to the int32 range
// (2068-01-19 is the last second it can hold).
int32_t CoarseSeconds(int64_t timestamptz_micros);

} // namespace cdc

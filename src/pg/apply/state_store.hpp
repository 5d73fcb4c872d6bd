// The engine's bookkeeping tables in their compact layout (core/layout.hpp,
// docs/retention.md): the dedup ledger (cdc.ledger: a 64-bit digest of
// target and delivery key, and a coarse claim time), the per-entity version
// records and tombstones (cdc.entity_state: exact compact key, fixed-width
// version, 32-bit content hash, source id, coarse time) and the source-name
// dictionary (cdc.source).  Every function runs its statement through SPI as
// the extension owner, in the caller's transaction; the dedup claim and the
// entity records' lock and writes go through the executor instead, with
// the same results (state_direct.hpp; docs/internals.md, "Writes without
// SQL"), where it can (else, and with cdc.direct_writes off, the statement).
#pragma once

#include "core/decision.hpp"
#include "core/version.hpp"
#include "pg/apply/state_direct.hpp"
#include "pg/guard.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cdc::pg {

// The transaction start time in whole seconds since 2000-01-01 UTC: the
// claim time of ledger entries and the write time of entity records.
int32_t TransactionSeconds();

// Id of a source name in cdc.source, created on first use: the name's hash
// (core/layout.hpp, SourceIdCandidate), probing on a collision with another
// name; no sequence, so a rolled-back call leaves nothing behind.  `cache`
// holds the ids of one engine call; behind it the backend's cache
// (id_cache.hpp) keeps ids across calls, an id created by a transaction
// only until that transaction ends and backend-wide once it committed.
// Errors: 54000 if 1,000 ids in a row are taken by other names (2^31 ids:
// not by any real use); 40001 under REPEATABLE READ when a concurrent
// transaction the snapshot cannot see created the name.
int32_t SourceId(const std::string &name, std::map<std::string, int32_t> &cache);

// The ledger digest of (target, delivery key): cdc.delivery_digest's value
// (the first 64 bits of the md5 of LedgerDigestInput), without its hex text.
int64_t LedgerDigest(Oid target, const std::string &delivery_key);

// Inserts the ledger entry of (target, delivery key).  Returns false when
// the digest is already there: the delivery was processed before (or, with
// probability ~2^-64 per pair, another delivery of this target has the same
// digest; the caller then decides by the version records, so a collision
// can only change an outcome's label, never skip a change).  Waits for a
// concurrent transaction holding the same claim.
bool ClaimDelivery(Oid target, const std::string &delivery_key, int32_t now_s);

// Claims by offset range (core/offset_claims.hpp; docs/semantics.md,
// "Claims by offset range"): the changes of one batch read from source
// partition `partition` at offsets[k] (strictly increasing), change k for
// target[k].  Per target, in OID order: updates (or creates) its
// cdc.ledger_partition row, which waits for a concurrent batch of the same
// partition and target and serialises the two, reads the ranges that may
// overlap, and inserts the ranges of the new claims (one per run, usually
// one per batch).  Returns per change whether its claim is new; a change
// whose offset a range already holds goes on to the version decision as a
// delivery the ledger had.  Errors: the statements' (40001 under
// REPEATABLE READ when a concurrent batch of the partition committed).
std::vector<char> ClaimOffsetRanges(const std::string &partition, const std::vector<Oid> &target,
                                    const std::vector<int64_t> &offsets, int32_t now_s);

// True when cdc.conflicts holds a conflict recorded for this delivery of
// `target`: a processed delivery whose outcome was a conflict, which a
// later re-decision might otherwise apply.
bool DeliveryHadConflict(Oid target, const std::string &delivery_key);

// Locks (FOR UPDATE) and reads the record of an entity; nullopt when there
// is none.  `lock` false: reads it unlocked where the direct path can
// (ReadEntityRecordsDirectPg: the latest committed record, no wait), else
// locks it as the statement does; WriteEntityRecord then finds out whether
// it changed since.  `arity`: components of the target's versions (3 for mappings
// with a version column, 4 otherwise).  `known`: source names and their
// cdc.source ids that the caller has resolved (the call's sources), which
// spares the lookup of the record's source name (SourceNameOf).  `loc`:
// where the record is, for WriteEntityRecord's update (set when the direct
// path found it).  Locking, waits for a concurrent transaction writing the
// record.
std::optional<EntityRecord> LockEntityRecord(Oid target, const std::string &key, size_t arity,
                                             const std::map<std::string, int32_t> &known, EntityLocation *loc,
                                             bool lock = true);

// The name of cdc.source id `id`: from `known` (name -> id) when it is
// there, else read from cdc.source; nullopt when no source has the id.
std::optional<std::string> SourceNameOf(int32_t id, const std::map<std::string, int32_t> &known);

// An entity record from columns first .. first + 5 of result row `row`:
// v0, v1, v2, v3, deleted, chash (cdc.entity_state), read as Datums; the
// source name is the caller's.
EntityRecord EntityRecordFromResult(uint64_t row, int first, size_t arity);

// The columns of an entity record as stored (state_direct.hpp), and back:
// a record read from them has no source name yet (the caller's, from
// row.src).  content_hash: decimal text of a 32-bit hash, as below.
EntityRow EntityRowOf(int32_t src, const Version &v, bool deleted, const std::string &content_hash, int32_t now_s);
EntityRecord EntityRecordOfRow(const EntityRow &row, size_t arity);

// Writes an entity record: UPDATE when `existed`, else INSERT ... ON
// CONFLICT DO NOTHING, returning false when a concurrent transaction created
// it first, or (a record read unlocked) updated or deleted it since it was
// read: the caller then locks it and decides again.  content_hash: decimal text of a 32-bit hash ("0" for deletes).
// `loc`: what LockEntityRecord returned for the record (the update goes to
// the row it locked).
bool WriteEntityRecord(Oid target, const std::string &key, int32_t src, const Version &v, bool deleted,
                       const std::string &content_hash, int32_t now_s, bool existed, const EntityLocation &loc);

// The prune watermark of (target, source id): the greatest version of a
// tombstone cdc.prune() removed; nullopt when none was.  Read it after the
// entity lock found no record (a new statement sees a concurrent prune that
// committed meanwhile).
std::optional<Version> ReadWatermark(Oid target, int32_t src, size_t arity);

// Keeps a change refused as expired in cdc.dead_letter.
void RecordDeadLetter(Oid target, const std::string &entity_key, const std::string &delivery_key, char op,
                      const Version &v, const Version &watermark, const std::string &image_json,
                      const std::string &source_json);

// The compact keys (as a text[] literal) of live entities of `target` from
// source `src` whose version is newer than `v`: the rows a late truncate
// keeps.
std::string LiveKeysNewerThan(Oid target, int32_t src, const Version &v);
// The keys of target's live entity records (not tombstones) from source
// id `src` older than `v`, each as its nkey column texts (the compact key
// split, core/layout.hpp), in key order: the rows a copy of the table at
// `v` did not refresh (ApplyEngine::KeysOlderThan).  As the extension owner.
std::vector<std::vector<std::string>> LiveKeysOlderThan(Oid target, int32_t src, size_t nkey, const Version &v);

// Deletes the entity records of `target` from source `src` with versions at
// or below `v` (a truncate barrier covers them).
void DropEntityRecordsUpTo(Oid target, int32_t src, const Version &v);

// Stream ordering: 55000 when two subscriptions of `source` feed the target
// with different publications (cdc._stream_scope_conflict), which one mark
// cannot order (docs/semantics.md, "Stream ordering").
void CheckStreamScope(Oid target, const std::string &display, const std::string &source);

// Stream ordering (docs/semantics.md, "Stream ordering"): locks (FOR UPDATE)
// the high-water mark of (target, source id), creating it at version
// {0,0,0,0} (below every change) when there is none, and returns it.  The
// row lock serialises two subscriptions of one source.  Errors 55000 when
// the target has a mark of another source (a stream-ordered target is
// written by one source only); `display` and `source` name them.
Version LockStreamMark(Oid target, int32_t src, const std::string &display, const std::string &source);

// Moves the mark of (target, source id), locked by LockStreamMark, to `v`.
void WriteStreamMark(Oid target, int32_t src, const Version &v, int32_t now_s);

// Every stream mark of `target` (source id -> version), without locking:
// the implicit records of a target that was stream-ordered before.
std::map<int32_t, Version> ReadStreamMarks(Oid target);

} // namespace cdc::pg

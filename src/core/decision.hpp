// The apply decision for one change event (SPEC §4.1–4.3, 4.7, 4.8).
//
// Pure function of what the engine read under the entity lock: the stored
// per-entity record (version, tombstone flag, content hash, source), the
// table-level truncate barrier, and whether a destination row exists.  The
// dedup claim (§4.1) happens before this, in the glue, under the ledger's
// unique constraint.
#pragma once
#include "core/version.hpp"

#include <optional>
#include <string>

namespace cdc {

enum class Outcome { Applied, Duplicate, Stale, Conflict, Ignored, Expired };
const char *OutcomeName(Outcome o); // "applied", "duplicate", ..., "expired" 

// The per-entity record kept in cdc.entity_state.
struct EntityRecord {
	Version version;
	bool deleted = false;      // true: this record is a delete tombstone
	std::string content_hash;  // hash of the image that set this version
	std::string source;        // source id that produced `version` ("" when versions come from a column)
};

struct DecisionInput {
	Version version;           // the event's version
	std::string source;        // the event's source id ("" for column versions)
	bool is_delete = false;
	std::string content_hash;  // hash of the event's image
	bool has_unavailable = false; // some after-image column was not sent (TOAST placeholder)
	bool row_exists = false;   // a destination row exists for the key
	std::optional<EntityRecord> stored;
	std::optional<Version> barrier; // truncate barrier of the target (same source only)
	// Prune watermark of the target and source (docs/retention.md): the
	// greatest version of a tombstone removed by cdc.prune().  Only read
	// when there is no stored record.
	std::optional<Version> watermark;
	// Stream mark of the target and the event's source (cdc.stream_mark) when
	// the target was stream-ordered before (docs/semantics.md, "Stream
	// ordering"): the implicit record of every key without one.  Only read
	// when there is no stored record.
	std::optional<Version> stream_mark;
};

struct Decision {
	Outcome outcome = Outcome::Applied;
	bool blocked_resurrection = false; // stale because a newer tombstone exists
	std::string reason;                // for conflicts (recorded) and for stale/duplicate (docs, tests)
};

// Rules, in order:
//  1. a stored record from another source        -> conflict ("versions from different sources are not ordered")
//  2. version <= truncate barrier                 -> stale
//  3. version <  stored version                   -> stale (blocked_resurrection when the record is a tombstone
//                                                     and the event is not a delete)
//  4. version == stored version, same content     -> duplicate
//     version == stored version, other content    -> conflict
//  5a. no stored record, version <= stream mark   -> duplicate (processed while the target was stream-ordered)
//  5. no stored record, version <= watermark      -> expired (the entity's records may have been pruned:
//                                                     neither new nor old can be proven; SPEC §3, fourth answer)
//  6. not a delete, unavailable columns, no row   -> conflict ("unavailable values for a row the destination does not have")
//  7. otherwise                                   -> applied
Decision Decide(const DecisionInput &in);

// Does Decide read in.content_hash for this input?  Only rule 4 does: a
// stored record of the same source, the event not at or below the
// barrier, and the same version.  Lets the glue compute the event's
// content hash (and convert its non-key values) only when it decides
// something, or when the change is written (docs/semantics.md).
bool ContentHashDecides(const DecisionInput &in);

// Stream ordering (docs/semantics.md, "Stream ordering"): has one ordered
// stream already delivered a change of version `v`, given the target's
// high-water mark of that stream?  A change at or below the mark was
// processed; snapshot rows of one copy share the version of its snapshot
// point, so a snapshot row is processed only when strictly below it.
bool StreamProcessed(const Version &v, bool is_snapshot, const Version &mark);

} // namespace cdc

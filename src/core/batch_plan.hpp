// The batch planner (docs/semantics.md, "Batches"): what a set-based
// segment of cdc_apply_batch() or of the worker's queue decides in memory,
// free of PostgreSQL.  The glue (pg/apply/segment.cpp) groups a segment's
// changes into one Chain per entity, locks and reads the entity records,
// fills one SimInput per change, and asks Simulate() for each chain's
// outcomes, counts and final record; RoundWrite() says which of a chain's
// applied changes is written in which round (collapsed to the last one, or
// one per round).  Decide() (core/decision.hpp) is the rule for each change.
//
// Pure C++: no postgres.h (core/cpp_only.hpp), unit-tested in
// test/unit/test_batch_plan.cpp.  Nothing here reads or writes a table.
#pragma once

#include "core/decision.hpp"
#include "core/version.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cdc {

// Per-target outcome counts accumulated during one call and added to
// cdc.counters when the call finishes.
struct Counters {
	int64_t applied = 0, duplicate = 0, stale = 0, conflict = 0, ignored = 0;
	int64_t blocked_resurrections = 0, outbox_rows = 0, snapshot_rows = 0, expired = 0;
};

// Adds every count of `from` to `to`.
void AddCounts(Counters &to, const Counters &from);

// A target's truncate barrier (cdc.table_barrier): the source and version of
// the last truncate applied to it.
struct Barrier {
	std::string source;
	Version version;
};

// What Simulate() needs to know per change of the segment: the claim (false:
// the ledger had the delivery, or an earlier change of the segment claimed
// it), the source name compared with stored records ("" for column
// versions), the content hash as cdc.entity_state.chash holds it ("0" for
// deletes), the prune watermark of its target and source (read after the
// entity locks, like ReadWatermark one by one), and the change itself: its
// version, whether it is a delete or a snapshot row (op r), and whether its
// after-image has NULL in a NOT NULL column.
struct SimInput {
	bool claimed = true;
	std::string source;
	std::string content_hash;
	std::optional<Version> watermark;
	std::optional<Version> stream_mark; // the target's stream mark of this source, if any (DecisionInput)
	Version version;
	bool is_delete = false;
	bool is_snapshot = false;
	bool violates_not_null = false;
};

// The changes of one entity within a segment, in input order, and what the
// batch decided for them.
struct Chain {
	std::string entity_key;  // JSON ({"id": "7"})
	std::string compact_key; // cdc.entity_state.key
	std::vector<size_t> events; // indexes into the segment (and into Simulate's `sim`)
	bool set_based = true;      // decided in memory and written set-based (else change by change)
	std::optional<EntityRecord> stored; // the record under lock before the batch
	// Simulate() results:
	std::vector<Outcome> outcomes;      // per event
	std::vector<size_t> applied;        // the applied events, in order
	std::optional<EntityRecord> final_record;
	Counters counts;
};

/*
 * Decides the chain's changes one after another in memory, exactly as
 * ApplyEntity() decides them one by one: each applied change becomes the
 * stored record the next one is compared with.  A change whose claim was
 * not new (the ledger had its delivery) is a duplicate unless the decision
 * is "applied".  Returns false, and the chain is then applied change by
 * change, whenever one by one would do more than the set-based writes can:
 * a conflict (the conflict record holds the row as it is at that change,
 * and the policy may raise), an expired change (the mapping's
 * expired_policy may dead-letter or apply it), an applied decision for a
 * change whose claim was not new (one by one checks cdc.conflicts for the
 * delivery first), or an applied image that would violate NOT NULL (one by
 * one raises the error at that change).
 * `barrier`: the target's truncate barrier, if any (it applies to changes of
 * its source only).
 */
bool Simulate(Chain &c, const std::vector<SimInput> &sim, const std::optional<Barrier> &barrier);

// The change a chain writes in round `round` of its target's row writes,
// if any: with `collapse` only the last applied change, in round 0; else
// the round-th applied change (the n-th applied change of every entity in
// round n, so no statement touches a row twice and each row image is
// written in order).
std::optional<size_t> RoundWrite(const Chain &c, bool collapse, size_t round);

// What a change does to its row, as far as the row's presence goes.
enum class RowEffect : char {
	Create, // a source INSERT (op c): the source had no row of the key before it
	Delete, // removes the row
	Other,  // an update or a snapshot row: the row may or may not be there
};
// Whether the chain's row is expected to be absent just before its write of
// round `round` (RoundWrite): in round 0 (and collapsed) when its first
// applied change is a Create, in a later round when the change written in
// the round before was a Delete.  Only a hint, from the source's history:
// the writer then tries the insert first and looks the key up only if the
// key turns out taken (docs/internals.md, "Insert first").  `effects` is
// indexed like Chain::events' values.
bool RowExpectedAbsent(const Chain &c, bool collapse, size_t round, const std::vector<RowEffect> &effects);

// The same hint where op c promises nothing (cdc_apply_batch(): a producer
// may send c for a row the destination has), from what the entity records
// say instead: the first applied change of set-based chain `c`, if its
// stored record is missing (the key was never applied) or a tombstone (its
// row was deleted) becomes a Create in `effects`, unless it is a Delete.
// Only for entity-ordered targets: a stream-ordered target keeps no records,
// so every key would look new.  A destination row that no record knows of
// (a preloaded table) makes the hint wrong; the writer then turns it off for
// the rest of its write (docs/internals.md, "Insert first").
void MarkCreateFromRecord(const Chain &c, std::vector<RowEffect> &effects);

} // namespace cdc

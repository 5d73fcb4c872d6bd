// Ranged dedup claims (docs/semantics.md, "Claims by offset range"): the
// deliveries of a cdc_apply_batch() call read from one ordered source
// partition (a Kafka topic partition: strictly increasing offsets) are
// claimed as offset ranges per target instead of one ledger row each.
// This file owns the arithmetic only: which changes are new given the
// ranges already claimed, and which ranges to add.  The glue that locks the
// partition, reads and writes cdc.ledger_range is pg/apply/state_store.cpp
// (ClaimOffsetRanges); nothing here reads or writes a table.
//
// Pure C++: no postgres.h (core/cpp_only.hpp), unit-tested in
// test/unit/test_offset_claims.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cdc {

// A closed interval of offsets [lo, hi] claimed for one target.
struct OffsetRange {
	int64_t lo = 0;
	int64_t hi = 0;
	bool operator==(const OffsetRange &o) const { return lo == o.lo && hi == o.hi; }
};

// A range to add for group `group` (an index into the caller's targets).
struct NewOffsetRange {
	size_t group = 0;
	OffsetRange range;
	bool operator==(const NewOffsetRange &o) const { return group == o.group && range == o.range; }
};

struct OffsetClaimPlan {
	// Per change: 1 when its offset lies in no range its group had (a new
	// claim), 0 when it was processed before (a duplicate delivery).
	std::vector<char> claimed;
	// The ranges that record the new claims, in input order: maximal runs of
	// consecutive changes of one group that are all new, with no change of
	// another group between them and no range the group had between their
	// offsets.  A run covers the offsets between its changes that no change
	// of the batch has (a Kafka tombstone, a transaction marker, a compacted
	// record): none of them is a delivery to another target.
	std::vector<NewOffsetRange> ranges;
};

// Plans the claims of one batch.  offsets[k] and group[k]: change k's
// offset (strictly increasing in k: the caller checks) and the index of its
// target; existing[g]: the ranges group g had that may overlap the batch's
// offsets, disjoint, in any order.  Pure: no error.
OffsetClaimPlan PlanOffsetClaims(const std::vector<int64_t> &offsets, const std::vector<size_t> &group,
                                 std::vector<std::vector<OffsetRange>> existing);

} // namespace cdc

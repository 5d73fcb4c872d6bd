// Ranged dedup claims: see offset_claims.hpp.
#include "core/offset_claims.hpp"

#include "core/cpp_only.hpp"

#include <algorithm>

namespace cdc {

namespace {

// The range of `sorted` (disjoint, ascending) containing `offset`, if any.
bool
Covered(const std::vector<OffsetRange> &sorted, int64_t offset)
{
	auto it = std::lower_bound(sorted.begin(), sorted.end(), offset,
	                           [](const OffsetRange &r, int64_t o) { return r.hi < o; });
	return it != sorted.end() && it->lo <= offset;
}

// True when a range of `sorted` has an offset in (a, b).
bool
RangeBetween(const std::vector<OffsetRange> &sorted, int64_t a, int64_t b)
{
	auto it = std::upper_bound(sorted.begin(), sorted.end(), a,
	                           [](int64_t o, const OffsetRange &r) { return o < r.hi; });
	/* the first range ending after a: it has an offset in (a, b) when it starts before b */
	return it != sorted.end() && it->lo < b && it->hi > a;
}

} // namespace

OffsetClaimPlan
PlanOffsetClaims(const std::vector<int64_t> &offsets, const std::vector<size_t> &group,
                 std::vector<std::vector<OffsetRange>> existing)
{
	for (std::vector<OffsetRange> &e : existing)
		std::sort(e.begin(), e.end(), [](const OffsetRange &a, const OffsetRange &b) { return a.lo < b.lo; });
	const std::vector<OffsetRange> none; /* empty: allocates nothing; not static (no destructor at process exit) */
	auto had = [&](size_t g) -> const std::vector<OffsetRange> & { return g < existing.size() ? existing[g] : none; };

	OffsetClaimPlan plan;
	plan.claimed.assign(offsets.size(), 0);
	bool open = false; /* plan.ranges.back() is a run that the next change may extend */
	for (size_t k = 0; k < offsets.size(); k++) {
		const size_t g = group[k];
		const std::vector<OffsetRange> &ranges = had(g);
		if (Covered(ranges, offsets[k])) {
			open = false;
			continue;
		}
		plan.claimed[k] = 1;
		if (open && plan.ranges.back().group == g && !RangeBetween(ranges, plan.ranges.back().range.hi, offsets[k])) {
			plan.ranges.back().range.hi = offsets[k];
			continue;
		}
		plan.ranges.push_back(NewOffsetRange{g, OffsetRange{offsets[k], offsets[k]}});
		open = true;
	}
	return plan;
}

} // namespace cdc

// GoogleTest units for ranged dedup claims (core/offset_claims.hpp): which
// changes of a batch are new against the ranges a target already claimed,
// and which ranges record them.  The glue is ClaimOffsetRanges in
// pg/apply/state_store.cpp; sql/batch_offsets.sql checks the same through
// cdc_apply_batch().
#include "core/offset_claims.hpp"

#include <gtest/gtest.h>

using namespace cdc;

namespace {

std::vector<char>
Claimed(std::initializer_list<int> bits)
{
	std::vector<char> v;
	for (int b : bits)
		v.push_back(char(b));
	return v;
}

} // namespace

TEST(OffsetClaims, FreshBatchIsOneRange)
{
	OffsetClaimPlan p = PlanOffsetClaims({10, 11, 12, 13}, {0, 0, 0, 0}, {});
	EXPECT_EQ(p.claimed, Claimed({1, 1, 1, 1}));
	ASSERT_EQ(p.ranges.size(), 1u);
	EXPECT_EQ(p.ranges[0], (NewOffsetRange{0, {10, 13}}));
}

TEST(OffsetClaims, GapsInsideTheBatchAreCovered)
{
	/* 11 and 13: Kafka tombstones or transaction markers, not passed as changes */
	OffsetClaimPlan p = PlanOffsetClaims({10, 12, 14}, {0, 0, 0}, {});
	EXPECT_EQ(p.claimed, Claimed({1, 1, 1}));
	ASSERT_EQ(p.ranges.size(), 1u);
	EXPECT_EQ(p.ranges[0].range, (OffsetRange{10, 14}));
}

TEST(OffsetClaims, RedeliveryWithOverlap)
{
	/* 10..13 claimed before; the consumer rewinds to 12 and reads on to 15 */
	OffsetClaimPlan p = PlanOffsetClaims({12, 13, 14, 15}, {0, 0, 0, 0}, {{{10, 13}}});
	EXPECT_EQ(p.claimed, Claimed({0, 0, 1, 1}));
	ASSERT_EQ(p.ranges.size(), 1u);
	EXPECT_EQ(p.ranges[0].range, (OffsetRange{14, 15}));
}

TEST(OffsetClaims, WholeBatchSeenBefore)
{
	OffsetClaimPlan p = PlanOffsetClaims({5, 6, 7}, {0, 0, 0}, {{{0, 4}, {5, 9}}});
	EXPECT_EQ(p.claimed, Claimed({0, 0, 0}));
	EXPECT_TRUE(p.ranges.empty());
}

TEST(OffsetClaims, ARangeInsideAGapSplitsTheRun)
{
	/*
	 * 20..21 were claimed by an earlier delivery that had them; this one
	 * does not (compacted away): the new claim must not swallow that range.
	 */
	OffsetClaimPlan p = PlanOffsetClaims({18, 19, 23, 24}, {0, 0, 0, 0}, {{{20, 21}}});
	EXPECT_EQ(p.claimed, Claimed({1, 1, 1, 1}));
	ASSERT_EQ(p.ranges.size(), 2u);
	EXPECT_EQ(p.ranges[0].range, (OffsetRange{18, 19}));
	EXPECT_EQ(p.ranges[1].range, (OffsetRange{23, 24}));
}

TEST(OffsetClaims, ClaimedChangeInTheMiddleSplitsTheRun)
{
	OffsetClaimPlan p = PlanOffsetClaims({1, 2, 3, 4, 5}, {0, 0, 0, 0, 0}, {{{3, 3}}});
	EXPECT_EQ(p.claimed, Claimed({1, 1, 0, 1, 1}));
	ASSERT_EQ(p.ranges.size(), 2u);
	EXPECT_EQ(p.ranges[0].range, (OffsetRange{1, 2}));
	EXPECT_EQ(p.ranges[1].range, (OffsetRange{4, 5}));
}

TEST(OffsetClaims, TwoTargetsInterleaved)
{
	/* a topic routed to two tables: each target claims only its own offsets */
	OffsetClaimPlan p = PlanOffsetClaims({1, 2, 3, 4, 5, 6}, {0, 0, 1, 0, 1, 1}, {});
	EXPECT_EQ(p.claimed, Claimed({1, 1, 1, 1, 1, 1}));
	std::vector<NewOffsetRange> want = {{0, {1, 2}}, {1, {3, 3}}, {0, {4, 4}}, {1, {5, 6}}};
	EXPECT_EQ(p.ranges, want);
}

TEST(OffsetClaims, OtherTargetsRangesDoNotCount)
{
	/* target 1 claimed 1..6; target 0 has claimed nothing */
	OffsetClaimPlan p = PlanOffsetClaims({1, 2, 3}, {0, 0, 0}, {{}, {{1, 6}}});
	EXPECT_EQ(p.claimed, Claimed({1, 1, 1}));
	ASSERT_EQ(p.ranges.size(), 1u);
	EXPECT_EQ(p.ranges[0], (NewOffsetRange{0, {1, 3}}));
}

TEST(OffsetClaims, ExistingRangesInAnyOrder)
{
	OffsetClaimPlan p = PlanOffsetClaims({0, 4, 8, 12}, {0, 0, 0, 0}, {{{8, 9}, {0, 1}, {4, 4}}});
	EXPECT_EQ(p.claimed, Claimed({0, 0, 0, 1}));
	ASSERT_EQ(p.ranges.size(), 1u);
	EXPECT_EQ(p.ranges[0].range, (OffsetRange{12, 12}));
}

TEST(OffsetClaims, ExtremeOffsets)
{
	const int64_t top = INT64_MAX;
	OffsetClaimPlan p = PlanOffsetClaims({top - 2, top - 1, top}, {0, 0, 0}, {{{top - 1, top - 1}}});
	EXPECT_EQ(p.claimed, Claimed({1, 0, 1}));
	std::vector<NewOffsetRange> want = {{0, {top - 2, top - 2}}, {0, {top, top}}};
	EXPECT_EQ(p.ranges, want);
}

TEST(OffsetClaims, EmptyBatch)
{
	OffsetClaimPlan p = PlanOffsetClaims({}, {}, {});
	EXPECT_TRUE(p.claimed.empty());
	EXPECT_TRUE(p.ranges.empty());
}

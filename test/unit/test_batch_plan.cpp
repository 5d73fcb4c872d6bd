// GoogleTest units for the batch planner (core/batch_plan.hpp): what a
// set-based segment decides in memory for each entity's chain of changes
// (applied, duplicate, stale, blocked resurrection, the hand-over to the
// change-by-change path), the counts and final record it writes, and which
// applied change is written in which round (collapsed or round by round).
// The glue that feeds it is pg/apply/segment.cpp; the one-by-one rule it
// must match is Decide() (core/decision.hpp) applied change after change.
#include "core/batch_plan.hpp"

#include <gtest/gtest.h>

using namespace cdc;

namespace {

// A change of source "pg:1" at version {1, v}: an upsert with content hash
// `hash`, or a delete (hash "0").
SimInput
Upsert(int64_t v, const std::string &hash = "h")
{
	SimInput s;
	s.source = "pg:1";
	s.version = Version{{1, v}};
	s.content_hash = hash;
	return s;
}

SimInput
Delete(int64_t v)
{
	SimInput s = Upsert(v, "0");
	s.is_delete = true;
	return s;
}

EntityRecord
Record(int64_t v, bool deleted = false, const std::string &hash = "h", const std::string &source = "pg:1")
{
	return EntityRecord{Version{{1, v}}, deleted, hash, source};
}

// One chain over events 0..n-1 of `sim`.
Chain
ChainOver(size_t n, std::optional<EntityRecord> stored = std::nullopt)
{
	Chain c;
	c.entity_key = "{\"id\": \"7\"}";
	c.compact_key = "7";
	for (size_t k = 0; k < n; k++)
		c.events.push_back(k);
	c.stored = std::move(stored);
	return c;
}

} // namespace

TEST(BatchPlan, NewEntityAppliesEveryNewerChangeAndKeepsTheLastAsRecord)
{
	std::vector<SimInput> sim = {Upsert(1, "a"), Upsert(2, "b"), Upsert(3, "c")};
	Chain c = ChainOver(sim.size());
	ASSERT_TRUE(Simulate(c, sim, std::nullopt));
	EXPECT_EQ(c.outcomes, (std::vector<Outcome>{Outcome::Applied, Outcome::Applied, Outcome::Applied}));
	EXPECT_EQ(c.applied, (std::vector<size_t>{0, 1, 2}));
	ASSERT_TRUE(c.final_record);
	EXPECT_EQ(c.final_record->version, (Version{{1, 3}}));
	EXPECT_EQ(c.final_record->content_hash, "c");
	EXPECT_FALSE(c.final_record->deleted);
	EXPECT_EQ(c.final_record->source, "pg:1");
	EXPECT_EQ(c.counts.applied, 3);
	EXPECT_EQ(c.counts.stale + c.counts.duplicate + c.counts.conflict, 0);
}

TEST(BatchPlan, EachAppliedChangeIsTheRecordTheNextIsComparedWith)
{
	/* 2 applies, 1 is then older than 2 (stale), 2 again with its content is a duplicate */
	std::vector<SimInput> sim = {Upsert(2, "b"), Upsert(1, "a"), Upsert(2, "b"), Upsert(4, "d")};
	Chain c = ChainOver(sim.size());
	ASSERT_TRUE(Simulate(c, sim, std::nullopt));
	EXPECT_EQ(c.outcomes,
	          (std::vector<Outcome>{Outcome::Applied, Outcome::Stale, Outcome::Duplicate, Outcome::Applied}));
	EXPECT_EQ(c.applied, (std::vector<size_t>{0, 3}));
	EXPECT_EQ(c.counts.applied, 2);
	EXPECT_EQ(c.counts.stale, 1);
	EXPECT_EQ(c.counts.duplicate, 1);
	EXPECT_EQ(c.counts.blocked_resurrections, 0);
	EXPECT_EQ(c.final_record->version, (Version{{1, 4}}));
}

TEST(BatchPlan, StoredRecordDecidesTheFirstChange)
{
	std::vector<SimInput> sim = {Upsert(5, "h"), Upsert(4, "x"), Upsert(6, "y")};
	Chain c = ChainOver(sim.size(), Record(5, false, "h"));
	ASSERT_TRUE(Simulate(c, sim, std::nullopt));
	EXPECT_EQ(c.outcomes, (std::vector<Outcome>{Outcome::Duplicate, Outcome::Stale, Outcome::Applied}));
	EXPECT_EQ(c.applied, (std::vector<size_t>{2}));
	EXPECT_EQ(c.final_record->content_hash, "y");
}

TEST(BatchPlan, NothingAppliedLeavesNoFinalRecord)
{
	std::vector<SimInput> sim = {Upsert(3), Upsert(5, "h")};
	Chain c = ChainOver(sim.size(), Record(5, false, "h"));
	ASSERT_TRUE(Simulate(c, sim, std::nullopt));
	EXPECT_EQ(c.outcomes, (std::vector<Outcome>{Outcome::Stale, Outcome::Duplicate}));
	EXPECT_TRUE(c.applied.empty());
	EXPECT_FALSE(c.final_record);
}

TEST(BatchPlan, TombstoneBlocksOlderResurrection)
{
	/* stored tombstone at 5: an older upsert is stale and counted as a blocked resurrection, a newer one applies */
	std::vector<SimInput> sim = {Upsert(4), Delete(3), Upsert(6)};
	Chain c = ChainOver(sim.size(), Record(5, true, "0"));
	ASSERT_TRUE(Simulate(c, sim, std::nullopt));
	EXPECT_EQ(c.outcomes, (std::vector<Outcome>{Outcome::Stale, Outcome::Stale, Outcome::Applied}));
	EXPECT_EQ(c.counts.stale, 2);
	EXPECT_EQ(c.counts.blocked_resurrections, 1); /* the older delete is stale, not a resurrection */
	EXPECT_FALSE(c.final_record->deleted);
}

TEST(BatchPlan, DeleteInsideTheChainBlocksALaterOlderUpsert)
{
	std::vector<SimInput> sim = {Upsert(1), Delete(3), Upsert(2)};
	Chain c = ChainOver(sim.size());
	ASSERT_TRUE(Simulate(c, sim, std::nullopt));
	EXPECT_EQ(c.outcomes, (std::vector<Outcome>{Outcome::Applied, Outcome::Applied, Outcome::Stale}));
	EXPECT_EQ(c.counts.blocked_resurrections, 1);
	ASSERT_TRUE(c.final_record);
	EXPECT_TRUE(c.final_record->deleted);
	EXPECT_EQ(c.final_record->content_hash, "0");
	EXPECT_EQ(c.applied, (std::vector<size_t>{0, 1}));
}

TEST(BatchPlan, ClaimTakenBeforeIsADuplicateUnlessTheDecisionIsApplied)
{
	/* the ledger had the delivery and the records agree: duplicate */
	std::vector<SimInput> sim = {Upsert(5, "h")};
	sim[0].claimed = false;
	Chain c = ChainOver(1, Record(5, false, "h"));
	ASSERT_TRUE(Simulate(c, sim, std::nullopt));
	EXPECT_EQ(c.outcomes, (std::vector<Outcome>{Outcome::Duplicate}));
	EXPECT_EQ(c.counts.duplicate, 1);
	/* a taken claim whose decision is "applied" (one by one checks cdc.conflicts first): not decided here */
	std::vector<SimInput> newer = {Upsert(6)};
	newer[0].claimed = false;
	Chain d = ChainOver(1, Record(5));
	EXPECT_FALSE(Simulate(d, newer, std::nullopt));
	/* a stale change with a taken claim is a duplicate too */
	std::vector<SimInput> older = {Upsert(4)};
	older[0].claimed = false;
	Chain e = ChainOver(1, Record(5));
	ASSERT_TRUE(Simulate(e, older, std::nullopt));
	EXPECT_EQ(e.outcomes, (std::vector<Outcome>{Outcome::Duplicate}));
	EXPECT_EQ(e.counts.stale, 0);
}

TEST(BatchPlan, ConflictsGoChangeByChange)
{
	/* same version, other content */
	std::vector<SimInput> sim = {Upsert(5, "other")};
	Chain c = ChainOver(1, Record(5, false, "h"));
	EXPECT_FALSE(Simulate(c, sim, std::nullopt));
	/* a record from another source */
	std::vector<SimInput> sim2 = {Upsert(9)};
	Chain d = ChainOver(1, Record(5, false, "h", "pg:2"));
	EXPECT_FALSE(Simulate(d, sim2, std::nullopt));
	/* inside the chain: two changes at one version with different content */
	std::vector<SimInput> sim3 = {Upsert(2, "a"), Upsert(2, "b")};
	Chain e = ChainOver(2);
	EXPECT_FALSE(Simulate(e, sim3, std::nullopt));
}

TEST(BatchPlan, WatermarkWithoutRecordIsExpiredAndGoesChangeByChange)
{
	std::vector<SimInput> sim = {Upsert(5)};
	sim[0].watermark = Version{{1, 10}};
	Chain c = ChainOver(1);
	EXPECT_FALSE(Simulate(c, sim, std::nullopt));
	/* newer than the watermark: applied */
	std::vector<SimInput> newer = {Upsert(11)};
	newer[0].watermark = Version{{1, 10}};
	Chain d = ChainOver(1);
	EXPECT_TRUE(Simulate(d, newer, std::nullopt));
	/* a stored record makes the watermark irrelevant */
	Chain e = ChainOver(1, Record(4));
	ASSERT_TRUE(Simulate(e, sim, std::nullopt));
	EXPECT_EQ(e.outcomes, (std::vector<Outcome>{Outcome::Applied}));
	/* and so does a change applied earlier in the chain */
	std::vector<SimInput> chain = {Upsert(12), Upsert(13)};
	chain[1].watermark = Version{{1, 20}};
	Chain f = ChainOver(2);
	ASSERT_TRUE(Simulate(f, chain, std::nullopt));
	EXPECT_EQ(f.applied, (std::vector<size_t>{0, 1}));
}

TEST(BatchPlan, TruncateBarrierOfTheSameSourceMakesOlderChangesStale)
{
	std::vector<SimInput> sim = {Upsert(4), Upsert(5), Upsert(6)};
	Chain c = ChainOver(sim.size());
	ASSERT_TRUE(Simulate(c, sim, Barrier{"pg:1", Version{{1, 5}}}));
	EXPECT_EQ(c.outcomes, (std::vector<Outcome>{Outcome::Stale, Outcome::Stale, Outcome::Applied}));
	/* another source's barrier does not order these changes */
	Chain d = ChainOver(sim.size());
	ASSERT_TRUE(Simulate(d, sim, Barrier{"pg:2", Version{{1, 5}}}));
	EXPECT_EQ(d.counts.applied, 3);
}

TEST(BatchPlan, NotNullViolationMattersOnlyForAnAppliedChange)
{
	std::vector<SimInput> sim = {Upsert(1), Upsert(2)};
	sim[1].violates_not_null = true;
	Chain c = ChainOver(2);
	EXPECT_FALSE(Simulate(c, sim, std::nullopt)); /* one by one raises the error at that change */
	/* the same image, stale: nothing would be written, nothing raised */
	Chain d = ChainOver(2, Record(9));
	ASSERT_TRUE(Simulate(d, sim, std::nullopt));
	EXPECT_EQ(d.counts.stale, 2);
}

TEST(BatchPlan, SnapshotRowsAreCountedAsApplied)
{
	std::vector<SimInput> sim = {Upsert(1), Upsert(2)};
	sim[0].is_snapshot = true;
	Chain c = ChainOver(2);
	ASSERT_TRUE(Simulate(c, sim, std::nullopt));
	EXPECT_EQ(c.counts.applied, 2);
	EXPECT_EQ(c.counts.snapshot_rows, 1);
}

TEST(BatchPlan, ChainsPerEntityReadOnlyTheirOwnEvents)
{
	/* one segment, two entities interleaved: events 0, 2 of entity A, 1, 3 of entity B */
	std::vector<SimInput> sim = {Upsert(1), Upsert(7), Upsert(2), Upsert(6)};
	Chain a, b;
	a.events = {0, 2};
	b.events = {1, 3};
	b.stored = Record(5);
	ASSERT_TRUE(Simulate(a, sim, std::nullopt));
	ASSERT_TRUE(Simulate(b, sim, std::nullopt));
	EXPECT_EQ(a.applied, (std::vector<size_t>{0, 2}));
	EXPECT_EQ(a.final_record->version, (Version{{1, 2}}));
	EXPECT_EQ(b.final_record->version, (Version{{1, 7}}));
	/* entity B: 7 applies over the stored 5, then 6 is older than 7 */
	EXPECT_EQ(b.outcomes, (std::vector<Outcome>{Outcome::Applied, Outcome::Stale}));
	EXPECT_EQ(b.applied, (std::vector<size_t>{1}));
}

TEST(BatchPlan, SimulatingAgainStartsFromTheStoredRecord)
{
	/* a record created concurrently meanwhile: the chain is decided again against it */
	std::vector<SimInput> sim = {Upsert(3), Upsert(4)};
	Chain c = ChainOver(2);
	ASSERT_TRUE(Simulate(c, sim, std::nullopt));
	EXPECT_EQ(c.counts.applied, 2);
	c.stored = Record(4, false, "h");
	ASSERT_TRUE(Simulate(c, sim, std::nullopt));
	EXPECT_EQ(c.outcomes, (std::vector<Outcome>{Outcome::Stale, Outcome::Duplicate}));
	EXPECT_TRUE(c.applied.empty());
	EXPECT_FALSE(c.final_record);
	EXPECT_EQ(c.counts.applied, 0);
	EXPECT_EQ(c.counts.stale, 1);
	EXPECT_EQ(c.counts.duplicate, 1);
}

TEST(BatchPlan, CollapseWritesOnlyTheLastAppliedChangeInRoundZero)
{
	Chain c;
	c.applied = {0, 3, 5};
	EXPECT_EQ(RoundWrite(c, true, 0), std::optional<size_t>(5));
	EXPECT_EQ(RoundWrite(c, true, 1), std::nullopt);
	EXPECT_EQ(RoundWrite(c, true, 2), std::nullopt);
}

TEST(BatchPlan, WithoutCollapseEachRoundWritesTheNextAppliedChange)
{
	Chain c;
	c.applied = {0, 3, 5};
	EXPECT_EQ(RoundWrite(c, false, 0), std::optional<size_t>(0));
	EXPECT_EQ(RoundWrite(c, false, 1), std::optional<size_t>(3));
	EXPECT_EQ(RoundWrite(c, false, 2), std::optional<size_t>(5));
	EXPECT_EQ(RoundWrite(c, false, 3), std::nullopt);
	Chain none;
	EXPECT_EQ(RoundWrite(none, false, 0), std::nullopt);
	EXPECT_EQ(RoundWrite(none, true, 0), std::nullopt);
}

TEST(BatchPlan, RowExpectedAbsentFollowsTheChainsHistory)
{
	using E = RowEffect;
	/* changes 0..5 of a segment: insert, update, delete, insert, update, snapshot row */
	const std::vector<RowEffect> effects{E::Create, E::Other, E::Delete, E::Create, E::Other, E::Other};
	Chain c;
	c.applied = {0, 1, 2, 3, 4};
	/* collapsed: one write of the last image, onto what was there before the segment (nothing: it began with an insert) */
	EXPECT_TRUE(RowExpectedAbsent(c, true, 0, effects));
	EXPECT_FALSE(RowExpectedAbsent(c, true, 1, effects));
	/* round by round: absent before the first insert and after the delete, present otherwise */
	EXPECT_TRUE(RowExpectedAbsent(c, false, 0, effects));
	EXPECT_FALSE(RowExpectedAbsent(c, false, 1, effects));
	EXPECT_FALSE(RowExpectedAbsent(c, false, 2, effects));
	EXPECT_TRUE(RowExpectedAbsent(c, false, 3, effects)) << "the round before wrote the delete";
	EXPECT_FALSE(RowExpectedAbsent(c, false, 4, effects));
	EXPECT_FALSE(RowExpectedAbsent(c, false, 5, effects)) << "past the last round";
	/* a chain that begins with an update, or whose insert was not applied (a duplicate), says nothing */
	Chain u;
	u.applied = {1, 3};
	EXPECT_FALSE(RowExpectedAbsent(u, true, 0, effects));
	EXPECT_FALSE(RowExpectedAbsent(u, false, 0, effects));
	EXPECT_FALSE(RowExpectedAbsent(u, false, 1, effects)) << "change 1 is an update";
	Chain snap;
	snap.applied = {5};
	EXPECT_FALSE(RowExpectedAbsent(snap, true, 0, effects)) << "a snapshot row may find its row";
	Chain none;
	EXPECT_FALSE(RowExpectedAbsent(none, true, 0, effects));
	EXPECT_FALSE(RowExpectedAbsent(none, false, 0, effects));
}

TEST(BatchPlan, MarkCreateFromRecordTrustsTheRecordNotTheOp)
{
	using E = RowEffect;
	/* changes 0..7 of a segment; only deletes are marked before (op c promises nothing here) */
	std::vector<RowEffect> effects(8, E::Other);
	effects[4] = E::Delete;
	std::vector<Chain> chains(6);
	chains[0].applied = {0, 1};                     /* no record: the key was never applied */
	chains[1].applied = {2};                        /* a live record: the row is there */
	chains[1].stored = EntityRecord{};
	chains[2].applied = {3};                        /* a tombstone: the row was deleted */
	chains[2].stored = EntityRecord{};
	chains[2].stored->deleted = true;
	chains[3].applied = {4, 5};                     /* no record, but its first applied change is a delete */
	chains[4].applied = {6};                        /* no record, decided change by change: not written here */
	chains[4].set_based = false;
	chains[5].events = {7};                         /* nothing applied (a stale change) */
	for (const Chain &c : chains)
		MarkCreateFromRecord(c, effects);
	EXPECT_EQ(effects, (std::vector<RowEffect>{E::Create, E::Other, E::Other, E::Create, E::Delete, E::Other, E::Other,
	                                           E::Other}));
	/* and the writer's hint follows: absent before chains 0 and 2, present for 1, a delete first for 3 */
	EXPECT_TRUE(RowExpectedAbsent(chains[0], true, 0, effects));
	EXPECT_FALSE(RowExpectedAbsent(chains[1], true, 0, effects));
	EXPECT_TRUE(RowExpectedAbsent(chains[2], true, 0, effects));
	EXPECT_FALSE(RowExpectedAbsent(chains[3], true, 0, effects));
	EXPECT_TRUE(RowExpectedAbsent(chains[3], false, 1, effects)) << "after its delete";
}

TEST(BatchPlan, AddCountsAddsEveryCount)
{
	Counters to{1, 2, 3, 4, 5, 6, 7, 8, 9};
	Counters from{10, 20, 30, 40, 50, 60, 70, 80, 90};
	AddCounts(to, from);
	EXPECT_EQ(to.applied, 11);
	EXPECT_EQ(to.duplicate, 22);
	EXPECT_EQ(to.stale, 33);
	EXPECT_EQ(to.conflict, 44);
	EXPECT_EQ(to.ignored, 55);
	EXPECT_EQ(to.blocked_resurrections, 66);
	EXPECT_EQ(to.outbox_rows, 77);
	EXPECT_EQ(to.snapshot_rows, 88);
	EXPECT_EQ(to.expired, 99);
}

TEST(BatchPlan, AStreamMarkIsTheRecordOfAnEntityWithoutOne)
{
	/* the target was stream-ordered up to version 5: a replay of 3 is a duplicate, 6 applies and is then the record */
	std::vector<SimInput> sim = {Upsert(3, "a"), Upsert(6, "b"), Upsert(5, "c")};
	for (SimInput &s : sim)
		s.stream_mark = Version{{1, 5}};
	Chain c = ChainOver(sim.size());
	ASSERT_TRUE(Simulate(c, sim, std::nullopt));
	EXPECT_EQ(c.outcomes, (std::vector<Outcome>{Outcome::Duplicate, Outcome::Applied, Outcome::Stale}));
	EXPECT_EQ(c.applied, (std::vector<size_t>{1}));
	EXPECT_EQ(c.final_record->version, (Version{{1, 6}}));
}

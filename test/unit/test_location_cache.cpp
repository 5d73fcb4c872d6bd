// GoogleTest units for the row location cache (core/location_cache.hpp):
// sizing, what Get returns after Put, Forget and Clear, the reserved empty
// tag, and that the tags of one set push the oldest out (never returning
// another tag's location).  The glue is FindRowPg and
// NoteRowLocationPg in pg/apply/table_write.cpp.
#include "core/location_cache.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace cdc;

namespace {

struct Storage {
	explicit Storage(size_t capacity) : entries(capacity, LocationCache::Entry{0, 0, 0, 0}), cache(entries.data(), capacity) {}
	std::vector<LocationCache::Entry> entries;
	LocationCache cache;
};

} // namespace

TEST(LocationCache, CapacityIsThePowerOfTwoThatFits)
{
	EXPECT_EQ(LocationCache::CapacityFor(0), 0u);
	EXPECT_EQ(LocationCache::CapacityFor(16), 0u) << "less than one set of four entries";
	EXPECT_EQ(LocationCache::CapacityFor(63), 0u);
	EXPECT_EQ(LocationCache::CapacityFor(64), 4u);
	EXPECT_EQ(LocationCache::CapacityFor(127), 4u);
	EXPECT_EQ(LocationCache::CapacityFor(128), 8u);
	EXPECT_EQ(LocationCache::CapacityFor(2048 * 1024), 131072u);
	EXPECT_EQ(LocationCache::CapacityFor(2048 * 1024 + 100), 131072u);
	EXPECT_EQ(LocationCache::CapacityFor(3 * 1024 * 1024), 131072u);
}

TEST(LocationCache, GetReturnsWhatWasPut)
{
	Storage s(8);
	RowLocation out;
	EXPECT_FALSE(s.cache.Get(42, &out));
	s.cache.Put(42, RowLocation{7, 3});
	ASSERT_TRUE(s.cache.Get(42, &out));
	EXPECT_EQ(out.block, 7u);
	EXPECT_EQ(out.offset, 3u);
	/* a newer location of the same key replaces it */
	s.cache.Put(42, RowLocation{0xFFFFFFFEu, 291});
	ASSERT_TRUE(s.cache.Get(42, &out));
	EXPECT_EQ(out.block, 0xFFFFFFFEu);
	EXPECT_EQ(out.offset, 291u);
}

TEST(LocationCache, TagsOfOneSetPushTheOldestOut)
{
	Storage s(8); /* two sets of four: odd tags in one, even tags in the other */
	RowLocation out;
	for (uint64_t t : {1, 3, 5, 7})
		s.cache.Put(t, RowLocation{uint32_t(t), uint16_t(t)});
	for (uint64_t t : {1, 3, 5, 7}) {
		ASSERT_TRUE(s.cache.Get(t, &out)) << t;
		EXPECT_EQ(out.block, t);
	}
	/* a fifth tag of the set pushes the oldest put out */
	s.cache.Put(9, RowLocation{9, 9});
	EXPECT_FALSE(s.cache.Get(1, &out)) << "the oldest tag must be gone, not answered with another's location";
	for (uint64_t t : {3, 5, 7, 9})
		EXPECT_TRUE(s.cache.Get(t, &out)) << t;
	/* a tag put again moves to the front: 5 then survives two new tags, 3 does not */
	s.cache.Put(5, RowLocation{55, 5});
	s.cache.Put(11, RowLocation{11, 11});
	s.cache.Put(13, RowLocation{13, 13});
	EXPECT_FALSE(s.cache.Get(3, &out));
	EXPECT_FALSE(s.cache.Get(7, &out));
	ASSERT_TRUE(s.cache.Get(5, &out));
	EXPECT_EQ(out.block, 55u);
	/* the other set is untouched */
	EXPECT_FALSE(s.cache.Get(2, &out));
	s.cache.Put(2, RowLocation{2, 2});
	EXPECT_TRUE(s.cache.Get(2, &out));
	EXPECT_TRUE(s.cache.Get(13, &out));
}

TEST(LocationCache, ForgetFreesTheEntryForTheNext)
{
	Storage s(4);
	RowLocation out;
	for (uint64_t t : {1, 2, 3, 4})
		s.cache.Put(t, RowLocation{uint32_t(t), 1});
	s.cache.Forget(3);
	EXPECT_FALSE(s.cache.Get(3, &out));
	s.cache.Forget(42); /* not held: nothing */
	/* the freed entry takes the next tag, pushing nobody out */
	s.cache.Put(5, RowLocation{5, 1});
	for (uint64_t t : {1, 2, 4, 5})
		EXPECT_TRUE(s.cache.Get(t, &out)) << t;
	/* forgetting every tag empties the set */
	for (uint64_t t : {1, 2, 4, 5})
		s.cache.Forget(t);
	for (uint64_t t : {1, 2, 4, 5})
		EXPECT_FALSE(s.cache.Get(t, &out)) << t;
}

TEST(LocationCache, TagZeroIsKeptAsOne)
{
	Storage s(4);
	RowLocation out;
	/* an empty entry (tag 0) is never a hit, even for a hash of 0 */
	EXPECT_FALSE(s.cache.Get(0, &out));
	s.cache.Put(0, RowLocation{5, 6});
	ASSERT_TRUE(s.cache.Get(0, &out));
	EXPECT_EQ(out.block, 5u);
	/* 0 and 1 are one tag: the price of reserving 0 */
	EXPECT_TRUE(s.cache.Get(1, &out));
}

TEST(LocationCache, ClearForgetsEverything)
{
	Storage s(16);
	for (uint64_t t = 1; t <= 16; t++)
		s.cache.Put(t, RowLocation{uint32_t(t), uint16_t(t)});
	RowLocation out;
	ASSERT_TRUE(s.cache.Get(9, &out));
	s.cache.Clear();
	for (uint64_t t = 1; t <= 16; t++)
		EXPECT_FALSE(s.cache.Get(t, &out));
}

TEST(LocationCache, EmptyCacheKeepsNothing)
{
	LocationCache c(nullptr, 0);
	LocationCache::Entry few[2] = {};
	LocationCache small(few, 2); /* less than a set: keeps nothing */
	small.Put(5, RowLocation{1, 1});
	RowLocation none;
	EXPECT_FALSE(small.Get(5, &none));
	RowLocation out;
	c.Put(5, RowLocation{1, 1});
	EXPECT_FALSE(c.Get(5, &out));
	c.Forget(5);
	c.Clear();
	EXPECT_EQ(c.capacity(), 0u);
}

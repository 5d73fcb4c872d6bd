// Where each key's row was last seen (issue 13: one index descent less per
// change).  The apply engine finds the row of a key, in a target table or
// in cdc.entity_state, through the key's unique index: a B-tree descent per
// change, 11-16 % of a batch's CPU in the twenty-seventh round's profiles.
// A LocationCache remembers, per key, the TID of the row's HOT chain root
// (what the index entry points to), so that the next look-up of the key can
// fetch that heap tuple directly (pg/apply/table_write.cpp, FindRowPg).
//
// A remembered location is only ever a hint: the look-up accepts the tuple
// it points to only if it is visible, nobody is writing it, and its key
// equals the key looked for under the index's own equality operators; any
// other outcome (a moved, deleted, vacuumed or reused slot, a rewritten
// table, a tag collision) falls back to the index.  So the cache needs no
// invalidation, and losing or overwriting an entry costs a descent, never a
// result.
//
// The table is 4-way set-associative: a tag's low bits choose a set of
// four entries (64 bytes, one cache line), a tag put again moves to the
// set's front, and a new tag takes the front and pushes the set's oldest
// entry out (a direct-mapped table lost about half of its keys to
// collisions at the load of the benchmark's 92,000 keys in 131,072
// entries).  Over storage the caller provides and owns (PostgreSQL's
// memory: pg/apply/table_write.cpp allocates it in TopMemoryContext, sized
// by cdc.row_location_cache).  A tag is a 64-bit hash of the relation and
// the key's bytes; 0 is reserved for an empty entry.
//
// Pure C++: no postgres.h (core/cpp_only.hpp), unit-tested in
// test/unit/test_location_cache.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cdc {

// A heap tuple's TID: block number and line pointer (offset) number.
struct RowLocation {
	uint32_t block = 0;
	uint16_t offset = 0;
};

class LocationCache {
  public:
	struct Entry {
		uint64_t tag;
		uint32_t block;
		uint16_t offset;
		uint16_t unused;
	};
	static_assert(sizeof(Entry) == 16, "an entry is 16 bytes");

	static constexpr size_t kWays = 4;
	// The largest power of two of entries, at least one set, that fits in
	// `bytes` (0 when not even one set does).
	static size_t CapacityFor(size_t bytes);
	// The tag as stored: 0 is the empty entry's, so a hash of 0 becomes 1.
	static uint64_t Normal(uint64_t tag) { return tag == 0 ? 1 : tag; }

	// Over `entries[0..capacity)`, zeroed (empty); `capacity` a power of two
	// of at least kWays (CapacityFor), or 0 for a cache that keeps nothing.
	LocationCache(Entry *entries, size_t capacity)
	    : entries_(entries), set_mask_(capacity < kWays ? 0 : capacity / kWays - 1), capacity_(capacity < kWays ? 0 : capacity)
	{
	}

	size_t capacity() const { return capacity_; }
	// The location remembered for `tag`; false when there is none (never
	// put, forgotten, or pushed out of its set by four newer tags).
	bool Get(uint64_t tag, RowLocation *out) const;
	// Remembers `loc` for `tag` at the front of its set, replacing the
	// tag's older location, else pushing the set's oldest entry out.
	void Put(uint64_t tag, RowLocation loc);
	// Forgets `tag` (nothing when its set does not hold it).
	void Forget(uint64_t tag);
	// Forgets everything.
	void Clear();

  private:
	Entry *Set(uint64_t tag) const { return entries_ + (tag & set_mask_) * kWays; }

	Entry *entries_;
	size_t set_mask_;
	size_t capacity_;
};

} // namespace cdc

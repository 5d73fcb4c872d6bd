// See location_cache.hpp.
#include "core/location_cache.hpp"

#include <cstring>

namespace cdc {

size_t
LocationCache::CapacityFor(size_t bytes)
{
	size_t n = bytes / sizeof(Entry);
	if (n < kWays)
		return 0;
	size_t p = kWays;
	while (p <= n / 2)
		p *= 2;
	return p;
}

bool
LocationCache::Get(uint64_t tag, RowLocation *out) const
{
	if (capacity_ == 0)
		return false;
	tag = Normal(tag);
	const Entry *set = Set(tag);
	for (size_t w = 0; w < kWays; w++)
		if (set[w].tag == tag) {
			out->block = set[w].block;
			out->offset = set[w].offset;
			return true;
		}
	return false;
}

void
LocationCache::Put(uint64_t tag, RowLocation loc)
{
	if (capacity_ == 0)
		return;
	tag = Normal(tag);
	Entry *set = Set(tag);
	/* the entries before the tag's own (or all but the oldest) move down one: the tag goes to the front */
	size_t last = kWays - 1;
	for (size_t w = 0; w < kWays; w++)
		if (set[w].tag == tag || set[w].tag == 0) {
			last = w;
			break;
		}
	std::memmove(static_cast<void *>(set + 1), set, last * sizeof(Entry));
	set[0] = Entry{tag, loc.block, loc.offset, 0};
}

void
LocationCache::Forget(uint64_t tag)
{
	if (capacity_ == 0)
		return;
	tag = Normal(tag);
	Entry *set = Set(tag);
	for (size_t w = 0; w < kWays; w++)
		if (set[w].tag == tag) {
			/* the later entries move up, so that the set's empty entries stay at its end */
			std::memmove(static_cast<void *>(set + w), set + w + 1, (kWays - 1 - w) * sizeof(Entry));
			set[kWays - 1] = Entry{0, 0, 0, 0};
			return;
		}
}

void
LocationCache::Clear()
{
	if (capacity_ > 0)
		std::memset(static_cast<void *>(entries_), 0, capacity_ * sizeof(Entry));
}

} // namespace cdc

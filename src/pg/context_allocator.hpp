// A C++ allocator that allocates in a PostgreSQL memory context, so that a
// backend cache built of standard containers shows up, by its context's name,
// in pg_backend_memory_contexts (and in MemoryContextStats) instead of being
// invisible malloc memory.
//
// allocate() is C++ regime: MemoryContextAllocExtended with MCXT_ALLOC_NO_OOM
// reports an out-of-memory as NULL instead of an ERROR, which becomes
// std::bad_alloc (a size beyond the limit is refused before the call), so no
// PostgreSQL ERROR can come out of it.  deallocate() is pfree of a chunk of
// the context, which raises nothing, so containers may be cleared or erased
// in noexcept callbacks (invalidation and transaction callbacks).
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/memutils.h"
}

#include <cstddef>
#include <functional>
#include <new>
#include <string>
#include <string_view>

namespace cdc::pg {

template <class T> struct ContextAllocator {
	using value_type = T;
	MemoryContext context;

	explicit ContextAllocator(MemoryContext c) noexcept : context(c) {}
	template <class U> ContextAllocator(const ContextAllocator<U> &o) noexcept : context(o.context) {}

	T *allocate(std::size_t n)
	{
		if (n > MaxAllocHugeSize / sizeof(T))
			throw std::bad_alloc();
		void *p = MemoryContextAllocExtended(context, n * sizeof(T), MCXT_ALLOC_NO_OOM | MCXT_ALLOC_HUGE);
		if (p == nullptr)
			throw std::bad_alloc();
		return static_cast<T *>(p);
	}
	void deallocate(T *p, std::size_t) noexcept { pfree(p); }

	template <class U> bool operator==(const ContextAllocator<U> &o) const noexcept { return context == o.context; }
	template <class U> bool operator!=(const ContextAllocator<U> &o) const noexcept { return context != o.context; }
};

// A string whose characters live in a memory context.
using ContextString = std::basic_string<char, std::char_traits<char>, ContextAllocator<char>>;

struct ContextStringHash {
	std::size_t operator()(const ContextString &s) const noexcept
	{
		return std::hash<std::string_view>()(std::string_view(s.data(), s.size()));
	}
};

} // namespace cdc::pg

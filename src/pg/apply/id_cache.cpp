// Backend caches of dictionary ids: see id_cache.hpp.
//
// Glue.  RememberId and CachedId are C++ regime (PostgreSQL calls through
// PgCall); the callbacks are noexcept plain C++ on the maps (erasing and
// updating entries allocates nothing; a freed entry is a pfree of a chunk of
// the cache's context, which raises nothing) plus
// GetCurrentTransactionNestLevel.
//
// Each cache keeps at most kMaxIdCacheEntries entries, in a memory context of
// its own ("cdc_apply id cache", identified by its dictionary, "source" or
// "outbox_source"): the keys are event values (source names, topics and
// source identities), and a caller sending events with ever new names grew
// its backend without limit (with the cache of resolved source tables,
// target.cpp: 200,000 distinct source names took 84 MB, all of it malloc
// memory invisible in pg_backend_memory_contexts; sql/event_cache_bound.sql).  A new entry that
// would pass the limit empties the cache first: an entry is only ever a
// shortcut for a lookup of the dictionary.
#include "pg/apply/id_cache.hpp"
#include "pg/context_allocator.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/namespace.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
}

#include <unordered_map>

namespace cdc::pg {

namespace {

constexpr size_t kMaxIdCacheEntries = 1024; /* per dictionary */

struct Entry {
	int32_t id;
	int level; // 0: committed; else the nesting level of the subtransaction that took it
};

using IdMap = std::unordered_map<ContextString, Entry, ContextStringHash, std::equal_to<ContextString>,
                                 ContextAllocator<std::pair<const ContextString, Entry>>>;

struct IdCache {
	const char *table;     // the dictionary, in schema cdc
	IdMap *map;            // created on first use, never freed
	MemoryContext context; // the map's nodes and keys (created with the map)
	Oid relid;             // the dictionary the entries came from
	int pending;           // entries with level > 0
};

IdCache caches[2] = {{"source", nullptr, nullptr, InvalidOid, 0}, {"outbox_source", nullptr, nullptr, InvalidOid, 0}};

IdCache &
Of(Dictionary d)
{
	return caches[d == Dictionary::Source ? 0 : 1];
}

void
Clear(IdCache &c) noexcept
{
	if (c.map)
		c.map->clear();
	c.relid = InvalidOid;
	c.pending = 0;
}

// An UPDATE, DELETE, TRUNCATE or DROP of a dictionary (or a reset of the
// whole relcache) empties its cache.
void
IdCacheRelcacheCallback(Datum, Oid relid) noexcept
{
	for (IdCache &c : caches)
		if (c.relid != InvalidOid && (relid == InvalidOid || relid == c.relid))
			Clear(c);
}

// Entries of levels >= `level`: dropped (rolled back), or moved to `to`
// (0: committed; else the parent subtransaction).
void
EndLevel(IdCache &c, int level, bool commit, int to) noexcept
{
	if (c.pending == 0 || c.map == nullptr)
		return;
	int pending = 0;
	for (auto it = c.map->begin(); it != c.map->end();) {
		if (it->second.level >= level) {
			if (!commit) {
				it = c.map->erase(it);
				continue;
			}
			it->second.level = to;
		}
		pending += it->second.level > 0 ? 1 : 0;
		++it;
	}
	c.pending = pending;
}

void
IdCacheXactCallback(XactEvent event, void *) noexcept
{
	switch (event) {
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PARALLEL_COMMIT:
		for (IdCache &c : caches)
			EndLevel(c, 1, true, 0);
		break;
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_ABORT:
	case XACT_EVENT_PREPARE: /* ROLLBACK PREPARED may still remove what it created */
		for (IdCache &c : caches)
			EndLevel(c, 1, false, 0);
		break;
	default: break;
	}
}

void
IdCacheSubXactCallback(SubXactEvent event, SubTransactionId, SubTransactionId, void *) noexcept
{
	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	if (caches[0].pending == 0 && caches[1].pending == 0)
		return;
	const int level = GetCurrentTransactionNestLevel(); /* the ending subtransaction's */
	for (IdCache &c : caches)
		EndLevel(c, level, event == SUBXACT_EVENT_COMMIT_SUB, level - 1);
}

bool
CacheUsable()
{
	return PgCall([]() { return !IsolationUsesXactSnapshot(); });
}

} // namespace

void
InitIdCaches()
{
	CacheRegisterRelcacheCallback(IdCacheRelcacheCallback, (Datum) 0);
	RegisterXactCallback(IdCacheXactCallback, nullptr);
	RegisterSubXactCallback(IdCacheSubXactCallback, nullptr);
}

std::optional<int32_t>
CachedId(Dictionary d, const std::string &key)
{
	IdCache &c = Of(d);
	if (c.map == nullptr || c.relid == InvalidOid || !CacheUsable())
		return std::nullopt;
	auto it = c.map->find(ContextString(key.data(), key.size(), ContextAllocator<char>(c.context)));
	if (it == c.map->end())
		return std::nullopt;
	return it->second.id;
}

void
RememberId(Dictionary d, const std::string &key, int32_t id)
{
	if (!CacheUsable())
		return;
	IdCache &c = Of(d);
	if (c.relid == InvalidOid) {
		const char *table = c.table;
		Oid relid = PgCall([&]() {
			Oid nsp = get_namespace_oid("cdc", true);
			return OidIsValid(nsp) ? get_relname_relid(table, nsp) : InvalidOid;
		});
		if (!OidIsValid(relid))
			return;
		if (c.map == nullptr) {
			const char *name = c.table; /* a literal: it outlives the context */
			c.context = PgCall([&]() {
				MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "cdc_apply id cache", ALLOCSET_SMALL_SIZES);
				MemoryContextSetIdentifier(cxt, name);
				return cxt;
			});
			c.map = new IdMap(16, ContextStringHash(), std::equal_to<ContextString>(),
			                  ContextAllocator<std::pair<const ContextString, Entry>>(c.context));
		}
		c.map->clear();
		c.pending = 0;
		c.relid = relid;
	}
	const int level = PgCall([]() { return GetCurrentTransactionNestLevel(); });
	ContextString ckey(key.data(), key.size(), ContextAllocator<char>(c.context));
	if (c.map->size() >= kMaxIdCacheEntries && c.map->find(ckey) == c.map->end()) {
		c.map->clear(); /* full: start again rather than grow with every new name */
		c.pending = 0;
	}
	auto [it, inserted] = c.map->try_emplace(std::move(ckey), Entry{id, level});
	if (!inserted) {
		if (it->second.level > 0 && level < it->second.level)
			it->second.level = level;
		it->second.id = id;
		return;
	}
	c.pending++;
}

} // namespace cdc::pg

// The apply engine: see engine.hpp and docs/semantics.md.
//
// Structure of one event (ApplyDebezium):
//   parse envelope (pure) -> resolve target + mapping -> privilege check ->
//   convert images to Datums (decode.hpp + the column types' input
//   functions) -> entity key, version, delivery key -> dedup claim in
//   cdc.ledger -> per entity: lock cdc.entity_state row, Decide() (pure),
//   write state, mutate target, outbox row -> counters.
#include "pg/engine.hpp"

#include "core/decode.hpp"
#include "core/envelope.hpp"
#include "core/errors.hpp"
#include "core/layout.hpp"
#include "pg/modes.hpp"
#include "pg/spi.hpp"
#include "pg/state_store.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"
}

#include <algorithm>
#include <set>

namespace cdc::pg {

namespace {

[[noreturn]] void
Fail(const char *sqlstate, const std::string &msg, const std::string &detail = {}, const std::string &hint = {})
{
	throw InputError(sqlstate, msg, detail, hint);
}

} // namespace

/* ------------------------------------------------------------------------
 * Target metadata
 * ------------------------------------------------------------------------ */

struct Column {
	std::string name;
	AttrNumber attnum = 0;
	Oid type = InvalidOid;
	int32 typmod = -1;
	bool generated = false;
	bool not_null = false;
	ColumnType ctype;
	FmgrInfo *in_fn = nullptr; // palloc'd in the call's memory context
	Oid ioparam = InvalidOid;
	FmgrInfo *out_fn = nullptr;
	std::string eq_op; // "OPERATOR(schema.=)": the type's default equality, schema-qualified
	Oid array_type = InvalidOid; // for set-based batch writes (unnest of one array per column)
	bool deterministic = true;   // its collation (if any) is deterministic: equal means equal text
	int16 typlen = 0;
	bool typbyval = false;
	char typalign = 'i';
};

struct Mapping {
	bool registered = false;
	std::vector<std::string> key_columns;
	std::string version_column;
	int64_t epoch = 0;
	bool outbox = false;
	std::optional<std::string> topic;
	bool truncate_ignore = false;
	bool conflict_error = false;
	DecodeOptions decode;
};

struct Barrier {
	std::string source;
	Version version;
};

struct Target {
	Oid relid = InvalidOid;
	std::string qualified; // quoted schema.table, for SQL text
	std::string display;   // schema.table, for messages and outbox
	std::vector<Column> columns;
	std::map<std::string, int> by_name;
	std::vector<int> key; // indexes into columns
	int version_col = -1;
	bool independent_rows = false; // nothing relates one row to another (IndependentRowsPg)
	Mapping mapping;
	ModeConfig modes; // state, history or handler (pg/modes.hpp)
	std::optional<Barrier> barrier;
};

namespace {

/* What the PostgreSQL regime reads about a relation (plain C data). */
struct RelInfoPg {
	char relkind;
	char *nspname;
	char *relname;
	int natts;
	Form_pg_attribute *attrs; /* copies */
	int npk;
	AttrNumber pk[INDEX_MAX_KEYS];
};

RelInfoPg *
ReadRelationPg(Oid relid)
{
	RelInfoPg *info = (RelInfoPg *) palloc0(sizeof(RelInfoPg));
	Relation rel = table_open(relid, RowExclusiveLock);
	TupleDesc desc = RelationGetDescr(rel);

	info->relkind = rel->rd_rel->relkind;
	info->nspname = get_namespace_name(RelationGetNamespace(rel));
	info->relname = pstrdup(RelationGetRelationName(rel));
	info->natts = desc->natts;
	info->attrs = (Form_pg_attribute *) palloc(sizeof(Form_pg_attribute) * desc->natts);
	for (int i = 0; i < desc->natts; i++) {
		info->attrs[i] = (Form_pg_attribute) palloc(ATTRIBUTE_FIXED_PART_SIZE);
		memcpy(info->attrs[i], TupleDescAttr(desc, i), ATTRIBUTE_FIXED_PART_SIZE);
	}
	Oid pkoid = RelationGetPrimaryKeyIndex(rel);
	if (OidIsValid(pkoid)) {
		HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pkoid));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", pkoid);
		Form_pg_index idx = (Form_pg_index) GETSTRUCT(tup);
		info->npk = idx->indnkeyatts;
		for (int i = 0; i < idx->indnkeyatts; i++)
			info->pk[i] = idx->indkey.values[i];
		ReleaseSysCache(tup);
	}
	table_close(rel, NoLock); /* keep the lock until end of transaction */
	return info;
}

/* Is there a valid, immediate, non-partial unique index on exactly these columns? */
bool
HasUniqueIndexPg(Oid relid, const AttrNumber *cols, int ncols)
{
	Relation rel = table_open(relid, NoLock);
	List *indexes = RelationGetIndexList(rel);
	bool found = false;
	ListCell *lc;
	foreach (lc, indexes) {
		HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		if (!HeapTupleIsValid(tup))
			continue;
		Form_pg_index idx = (Form_pg_index) GETSTRUCT(tup);
		bool ok = idx->indisunique && idx->indimmediate && idx->indisvalid && idx->indnkeyatts == ncols &&
		          heap_attisnull(tup, Anum_pg_index_indpred, NULL) && heap_attisnull(tup, Anum_pg_index_indexprs, NULL);
		for (int i = 0; ok && i < ncols; i++) {
			bool in = false;
			for (int j = 0; j < ncols; j++)
				if (idx->indkey.values[j] == cols[i])
					in = true;
			ok = in;
		}
		ReleaseSysCache(tup);
		if (ok) {
			found = true;
			break;
		}
	}
	table_close(rel, NoLock);
	return found;
}

/*
 * Are the rows of this table independent of each other, so that writing
 * one row earlier, later or not at all can only be seen in that row?  A
 * plain table (not partitioned) with no triggers (which also rules out
 * foreign keys in either direction: they are triggers), no rules, no
 * row-level security, no CHECK constraints, and no unique or exclusion
 * index other than the one on the key columns.
 */
bool
IndependentRowsPg(Oid relid, const AttrNumber *key, int nkey)
{
	Relation rel = table_open(relid, NoLock);
	bool ok = rel->rd_rel->relkind == RELKIND_RELATION && rel->trigdesc == NULL && rel->rd_rules == NULL &&
	          !rel->rd_rel->relrowsecurity && rel->rd_rel->relchecks == 0;
	List *indexes = ok ? RelationGetIndexList(rel) : NIL;
	ListCell *lc;
	foreach (lc, indexes) {
		HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
		Form_pg_index idx = (Form_pg_index) GETSTRUCT(tup);
		if (idx->indisunique || idx->indisexclusion) {
			bool is_key = idx->indnkeyatts == nkey && !idx->indisexclusion;
			for (int i = 0; is_key && i < nkey; i++) {
				bool in = false;
				for (int j = 0; j < nkey; j++)
					if (idx->indkey.values[j] == key[i])
						in = true;
				is_key = in;
			}
			ok = ok && is_key;
		}
		ReleaseSysCache(tup);
	}
	table_close(rel, NoLock);
	return ok;
}

/*
 * The default equality operator of a type as schema-qualified SQL
 * ("OPERATOR(pg_catalog.=)"), so key predicates work for types whose
 * operators live outside pg_catalog (citext, ...) although the entry points
 * run with search_path = pg_catalog.
 */
char *
EqualityOperatorPg(Oid type)
{
	TypeCacheEntry *tce = lookup_type_cache(type, TYPECACHE_EQ_OPR);
	if (!OidIsValid(tce->eq_opr))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
		                errmsg("key column type %s has no default equality operator", format_type_be(type))));
	HeapTuple tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(tce->eq_opr));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", tce->eq_opr);
	Form_pg_operator op = (Form_pg_operator) GETSTRUCT(tup);
	char *result = psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(op->oprnamespace)),
	                        NameStr(op->oprname));
	ReleaseSysCache(tup);
	return result;
}

/* Family of a (base) type, for decoding.  Sets *elem for arrays. */
ColumnType::Family
FamilyPg(Oid type, Oid *elem)
{
	Oid base = getBaseType(type);
	*elem = InvalidOid;
	switch (base) {
	case BOOLOID: return ColumnType::Family::Bool;
	case INT2OID:
	case INT4OID:
	case INT8OID: return ColumnType::Family::Integer;
	case NUMERICOID: return ColumnType::Family::Numeric;
	case FLOAT4OID:
	case FLOAT8OID: return ColumnType::Family::Float;
	case DATEOID: return ColumnType::Family::Date;
	case TIMEOID: return ColumnType::Family::Time;
	case TIMETZOID: return ColumnType::Family::TimeTz;
	case TIMESTAMPOID: return ColumnType::Family::Timestamp;
	case TIMESTAMPTZOID: return ColumnType::Family::TimestampTz;
	case INTERVALOID: return ColumnType::Family::Interval;
	case BYTEAOID: return ColumnType::Family::Bytea;
	case JSONOID:
	case JSONBOID: return ColumnType::Family::Json;
	case UUIDOID: return ColumnType::Family::Uuid;
	case BITOID:
	case VARBITOID: return ColumnType::Family::Bit;
	case TEXTOID:
	case VARCHAROID:
	case BPCHAROID:
	case NAMEOID:
	case CHAROID: return ColumnType::Family::Text;
	default: break;
	}
	Oid e = get_element_type(base);
	if (OidIsValid(e)) {
		*elem = e;
		return ColumnType::Family::Array;
	}
	if (get_typtype(base) == TYPTYPE_ENUM)
		return ColumnType::Family::Text;
	return ColumnType::Family::Other;
}

ColumnType
MakeColumnType(const std::string &column, Oid type, int32 typmod)
{
	ColumnType ct;
	ct.column = column;
	Oid elem = InvalidOid;
	ct.family = PgCall([&]() { return FamilyPg(type, &elem); });
	ct.type_name = PgCall([&]() { return format_type_with_typemod(type, typmod); });
	if (ct.family == ColumnType::Family::Array)
		ct.element = std::make_shared<ColumnType>(MakeColumnType(column, elem, -1));
	return ct;
}

/* Reads the cdc.mapping row of a target, if any. */
void
ReadMapping(Oid relid, Mapping &m)
{
	Params p;
	p.AddOid(relid);
	uint64_t n = Execute("SELECT array_to_string(key_columns, chr(1)), version_column, source_epoch, outbox, "
	                     "outbox_topic, truncate_policy, unavailable_placeholder, temporal_unit, conflict_policy "
	                     "FROM cdc.mapping WHERE target = $1",
	                     p, true);
	if (n == 0)
		return;
	m.registered = true;
	if (auto keys = ResultText(0, 1)) {
		size_t start = 0;
		while (start <= keys->size()) {
			size_t sep = keys->find('\x01', start);
			m.key_columns.push_back(keys->substr(start, sep == std::string::npos ? std::string::npos : sep - start));
			if (sep == std::string::npos)
				break;
			start = sep + 1;
		}
	}
	m.version_column = ResultText(0, 2).value_or("");
	m.epoch = std::stoll(ResultText(0, 3).value_or("0"));
	m.outbox = ResultBool(0, 4);
	m.topic = ResultText(0, 5);
	m.truncate_ignore = ResultText(0, 6).value_or("truncate") == "ignore";
	m.decode.placeholder = ResultText(0, 7).value_or("__debezium_unavailable_value");
	std::string unit = ResultText(0, 8).value_or("");
	m.decode.integer_time_unit = unit == "milli"   ? TemporalUnit::Milli
	                             : unit == "micro" ? TemporalUnit::Micro
	                             : unit == "nano"  ? TemporalUnit::Nano
	                                               : TemporalUnit::Unset;
	m.conflict_error = ResultText(0, 9).value_or("record") == "error";
}

void
ReadBarrier(Target &t)
{
	Params p;
	p.AddOid(t.relid);
	uint64_t n = Execute("SELECT source_name, version::text FROM cdc.table_barrier WHERE target = $1", p, true);
	if (n == 0)
		return;
	auto v = Version::FromArrayLiteral(ResultText(0, 2).value_or(""));
	if (v)
		t.barrier = Barrier{ResultText(0, 1).value_or(""), *v};
}

/*
 * The backend's cache of target metadata (columns, types, key, mapping
 * including its mode, handler and expired policy, truncate barrier) and of
 * source-table resolutions, so that a call does not read the catalogs and
 * cdc.mapping again for every event.  An entry lives until a relcache
 * invalidation of its target: DDL on the table, and every change of its
 * cdc.mapping or cdc.table_barrier row (the triggers of those tables send
 * one, cdc._invalidate_target; cdc.register_mapping changing the mode, the
 * handler, the outbox or the expired policy is such a change).  An
 * invalidation of cdc.mapping itself (any change of a mapping, a truncate of
 * either table) empties the cache.  Any change of pg_proc drops the entries
 * of handler targets, so a dropped or replaced handler function is looked up
 * again (LoadModeConfig).  The prune watermark is not cached (it is read
 * under the entity lock, docs/retention.md).
 * Invalidations arrive when the target is locked at the start of a call, or
 * at the next transaction; a backend that already holds the target's lock
 * keeps its entry until then, as for any cached plan.  Entries are shared
 * with the engines using them, so an invalidation in the middle of a call
 * never frees what the call still uses.  A plain pointer, created on first
 * use and never destroyed (no C++ global with a destructor).
 */
struct TargetCache {
	std::map<Oid, std::shared_ptr<Target>> targets;
	std::map<std::string, Oid> resolved; // "source\nschema\ntable" -> target
	Oid mapping_relid = InvalidOid;      // cdc.mapping: its invalidation empties the cache
	MemoryContext context = nullptr;     // FmgrInfo of cached targets (a reload leaks its few bytes here)
	uint64_t invalidations = 0;          // callbacks so far: a load that saw one is not cached
};
TargetCache *target_cache = nullptr;

// Relcache invalidation callback: plain C++ that cannot throw and calls
// nothing of PostgreSQL.
void
InvalidateTargets(Datum, Oid relid) noexcept
{
	if (target_cache == nullptr)
		return;
	target_cache->invalidations++;
	if (relid == InvalidOid || relid == target_cache->mapping_relid) {
		target_cache->targets.clear();
		target_cache->resolved.clear();
		target_cache->mapping_relid = InvalidOid; /* looked up again: the extension may have been re-created */
		return;
	}
	target_cache->targets.erase(relid);
	for (auto it = target_cache->resolved.begin(); it != target_cache->resolved.end();)
		it = it->second == relid ? target_cache->resolved.erase(it) : std::next(it);
}

// pg_proc syscache invalidation callback: drops every handler target (the
// handler's name and argument types are part of its cached ModeConfig).
// Plain C++ that cannot throw and calls nothing of PostgreSQL.
void
InvalidateHandlerTargets(Datum, int, uint32) noexcept
{
	if (target_cache == nullptr)
		return;
	target_cache->invalidations++;
	for (auto it = target_cache->targets.begin(); it != target_cache->targets.end();)
		it = it->second->modes.mode == Mode::Handler ? target_cache->targets.erase(it) : std::next(it);
}

TargetCache &
Cache()
{
	if (target_cache == nullptr) {
		MemoryContext cxt = PgCall([]() {
			CacheRegisterRelcacheCallback(InvalidateTargets, (Datum) 0);
			CacheRegisterSyscacheCallback(PROCOID, InvalidateHandlerTargets, (Datum) 0);
			return AllocSetContextCreate(CacheMemoryContext, "cdc_apply target cache", ALLOCSET_SMALL_SIZES);
		});
		target_cache = new TargetCache();
		target_cache->context = cxt;
	}
	if (!OidIsValid(target_cache->mapping_relid))
		target_cache->mapping_relid =
			PgCall([]() { return get_relname_relid("mapping", get_namespace_oid("cdc", false)); });
	return *target_cache;
}

} // namespace

/*
 * A truncate takes the target's ACCESS EXCLUSIVE lock before anything else
 * (before the claim and before the ROW EXCLUSIVE lock of LoadTarget), so two
 * sessions applying the same truncate queue on the lock instead of
 * deadlocking on a lock upgrade; the second then finds the claim taken.
 */
void
ApplyEngine::LockForTruncate(Oid relid)
{
	PgCall([&]() { LockRelationOid(relid, AccessExclusiveLock); });
}

Target &
ApplyEngine::LoadTarget(Oid relid)
{
	auto it = targets_.find(relid);
	if (it != targets_.end())
		return *it->second;

	/* The lock first: taking it delivers pending invalidations to the cache. */
	PgCall([&]() { LockRelationOid(relid, RowExclusiveLock); });
	bool exists = PgCall([&]() { return SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)); });
	if (!exists)
		Fail("42P01", "target relation with OID " + std::to_string(relid) + " does not exist");
	TargetCache &cache = Cache();
	auto hit = cache.targets.find(relid);
	if (hit != cache.targets.end()) {
		targets_[relid] = hit->second;
		return *hit->second;
	}
	/*
	 * An invalidation that arrives while the metadata is read (a mapping
	 * committed meanwhile) may concern what was already read: then the
	 * result serves this call only and the next call reads again.
	 */
	const uint64_t invalidations_before = cache.invalidations;

	auto t = std::make_shared<Target>();
	t->relid = relid;
	RelInfoPg *info = PgCall([&]() { return ReadRelationPg(relid); });
	t->display = std::string(info->nspname) + "." + info->relname;
	t->qualified = QuoteIdent(info->nspname) + "." + QuoteIdent(info->relname);
	if (info->relkind != RELKIND_RELATION && info->relkind != RELKIND_PARTITIONED_TABLE)
		Fail("42809", "target \"" + t->display + "\" is not a table");

	for (int i = 0; i < info->natts; i++) {
		Form_pg_attribute a = info->attrs[i];
		if (a->attisdropped)
			continue;
		Column c;
		c.name = NameStr(a->attname);
		c.attnum = a->attnum;
		c.type = a->atttypid;
		c.typmod = a->atttypmod;
		c.generated = a->attgenerated != '\0';
		c.not_null = a->attnotnull;
		c.ctype = MakeColumnType(c.name, c.type, c.typmod);
		PgCall([&]() {
			Oid infunc, outfunc;
			bool varlena;
			c.in_fn = (FmgrInfo *) MemoryContextAlloc(cache.context, sizeof(FmgrInfo));
			c.out_fn = (FmgrInfo *) MemoryContextAlloc(cache.context, sizeof(FmgrInfo));
			getTypeInputInfo(c.type, &infunc, &c.ioparam);
			fmgr_info_cxt(infunc, c.in_fn, cache.context);
			getTypeOutputInfo(c.type, &outfunc, &varlena);
			fmgr_info_cxt(outfunc, c.out_fn, cache.context);
			c.array_type = get_array_type(c.type);
			get_typlenbyvalalign(c.type, &c.typlen, &c.typbyval, &c.typalign);
			c.deterministic = !OidIsValid(a->attcollation) || get_collation_isdeterministic(a->attcollation);
		});
		t->by_name[c.name] = int(t->columns.size());
		t->columns.push_back(std::move(c));
	}

	ReadMapping(relid, t->mapping);
	t->modes = LoadModeConfig(relid, t->qualified);
	const bool history = t->modes.mode == Mode::History;

	/* The key: the mapping's key_columns (backed by a unique index) or the primary key. */
	if (!t->mapping.key_columns.empty()) {
		std::vector<AttrNumber> attrs;
		for (const auto &k : t->mapping.key_columns) {
			auto f = t->by_name.find(k);
			if (f == t->by_name.end())
				Fail("42703", "key column \"" + k + "\" of the mapping does not exist in table " + t->display);
			t->key.push_back(f->second);
			attrs.push_back(t->columns[size_t(f->second)].attnum);
		}
		/* A history table holds many rows per key: its unique index is (cdc_key, cdc_version). */
		bool unique = history || PgCall([&]() { return HasUniqueIndexPg(relid, attrs.data(), int(attrs.size())); });
		if (!unique)
			Fail("42P10", "table " + t->display + " has no unique index on the mapping's key columns", {},
			     "Create a unique index (not partial, not deferrable) on exactly the key columns.");
	} else {
		if (history)
			Fail("42P10", "history table " + t->display + " needs the mapping's key_columns", {},
			     "Register the mapping with key_columns naming the entity key columns of the history table.");
		if (info->npk == 0)
			Fail("42P10", "table " + t->display + " has no primary key and its mapping declares no key columns",
			     {}, "Add a primary key, or register the mapping with key_columns backed by a unique index.");
		for (int i = 0; i < info->npk; i++)
			for (size_t c = 0; c < t->columns.size(); c++)
				if (t->columns[c].attnum == info->pk[i])
					t->key.push_back(int(c));
	}
	for (int k : t->key) {
		Column &kc = t->columns[size_t(k)];
		kc.eq_op = PgCall([&]() { return EqualityOperatorPg(kc.type); });
	}
	{
		std::vector<AttrNumber> key_attrs;
		for (int k : t->key)
			key_attrs.push_back(t->columns[size_t(k)].attnum);
		t->independent_rows = PgCall([&]() { return IndependentRowsPg(relid, key_attrs.data(), int(key_attrs.size())); });
	}
	if (!t->mapping.version_column.empty()) {
		auto f = t->by_name.find(t->mapping.version_column);
		if (f == t->by_name.end())
			Fail("42703", "version column \"" + t->mapping.version_column + "\" does not exist in table " +
			                  t->display);
		t->version_col = f->second;
	}
	ReadBarrier(*t);

	targets_[relid] = t;
	if (cache.invalidations == invalidations_before)
		cache.targets[relid] = t;
	return *t;
}

Oid
ApplyEngine::ResolveTarget(const std::string &source_name, const std::string &schema, const std::string &table)
{
	if (table.empty())
		Fail("22023", "field \"source.table\" is missing and no target was given",
		     {}, "Pass the target table as the second argument of cdc_apply().");
	return ResolveSourceTable(source_name, schema, table, false);
}

Oid
ApplyEngine::ResolveSourceTable(const std::string &source_name, const std::string &schema, const std::string &table,
                                bool same_name_fallback)
{
	std::string cache_key = source_name + "\n" + schema + "\n" + table;
	TargetCache &cache = Cache();
	auto cached = cache.resolved.find(cache_key);
	if (cached != cache.resolved.end())
		return cached->second;
	const uint64_t invalidations_before = cache.invalidations;
	Oid target = ResolveUncached(source_name, schema, table, same_name_fallback);
	if (cache.invalidations == invalidations_before) /* else it may be outdated already: not cached */
		cache.resolved[cache_key] = target;
	return target;
}

Oid
ApplyEngine::ResolveUncached(const std::string &source_name, const std::string &schema, const std::string &table,
                             bool same_name_fallback)
{
	Params p;
	p.AddText(schema);
	p.AddText(table);
	p.AddText(source_name);
	uint64_t n = Execute("SELECT target::oid FROM cdc.mapping WHERE source_schema = $1 AND source_table = $2 "
	                     "AND (source_name IS NULL OR source_name = $3) ORDER BY source_name IS NULL LIMIT 1",
	                     p, true);
	if (n > 0)
		return Oid(std::stoul(*ResultText(0, 1)));
	if (same_name_fallback) {
		Params q;
		q.AddText(QuoteIdent(schema) + "." + QuoteIdent(table));
		n = Execute("SELECT to_regclass($1)::oid", q, true);
		if (n > 0 && ResultText(0, 1))
			return Oid(std::stoul(*ResultText(0, 1)));
		Fail("42P01", "published table \"" + schema + "." + table + "\" has no destination table", {},
		     "Create " + schema + "." + table + " in the destination database, or map it with cdc.register_mapping(..., source_name => <subscription name>).");
	}
	Fail("42P01", "no mapping for source table \"" + schema + "." + table + "\"",
	     "source.name is \"" + source_name + "\"",
	     "Register one with cdc.register_mapping(), or pass the target table to cdc_apply().");
}

void
ApplyEngine::SetContext(const Target *t, const std::string &delivery_key)
{
	std::string s = "cdc_apply";
	if (!event_label_.empty())
		s += " " + event_label_;
	if (t)
		s += ", target table " + t->display;
	if (!delivery_key.empty())
		s += ", delivery key \"" + delivery_key + "\"";
	const char *c = PgCall([&]() { return pstrdup(s.c_str()); });
	SetErrorContext(c);
}

/* ------------------------------------------------------------------------
 * Images: event JSON objects converted to the target's column types
 * ------------------------------------------------------------------------ */

namespace {

struct Cell {
	bool present = false;
	bool unavailable = false;
	bool isnull = true;
	Datum value = (Datum) 0;
	std::string text; // output-function text (canonical), when present and not null
};

struct Image {
	std::vector<Cell> cells; // one per target column
	bool has_unavailable = false;
	std::string json;        // the event's JSON object, for conflicts and outbox
};

// Decodes a Debezium JSON image (`after` or `before`) for target `t`: every
// field must name a column; values become text input form (decode.hpp).
RawImage
DecodeJsonImage(const Target &t, const Json &obj, const FieldSchema *schema, const char *which)
{
	RawImage raw;
	raw.json = obj.Serialize();
	for (const auto &member : obj.Members()) {
		const std::string &field = member.first;
		std::string path = std::string(which) + "." + field;
		if (field.empty() || field.size() >= NAMEDATALEN)
			Fail("42602", "field \"" + path + "\" is not a valid column name");
		auto f = t.by_name.find(field);
		if (f == t.by_name.end())
			Fail("42703", "field \"" + path + "\" has no column in table " + t.display, {},
			     "Add the column to the target table; events are applied column by column by name.");
		const Column &col = t.columns[size_t(f->second)];
		const FieldSchema *fs = schema ? schema->Member(field) : nullptr;
		raw.values.emplace_back(field, DecodeValue(member.second, fs, col.ctype, t.mapping.decode, path));
	}
	return raw;
}

// Converts a RawImage into Datums of the target's column types (the types'
// input functions, with typmod); errors name the field and the column.
Image
ConvertImage(const Target &t, const RawImage &raw, const char *which)
{
	Image img;
	img.cells.resize(t.columns.size());
	img.json = raw.json;
	for (const auto &[name, dv] : raw.values) {
		std::string path = std::string(which) + "." + name;
		auto f = t.by_name.find(name);
		if (f == t.by_name.end())
			Fail("42703", "field \"" + path + "\" has no column in table " + t.display);
		const Column &col = t.columns[size_t(f->second)];
		if (col.generated)
			continue; /* generated columns are computed by the destination */
		Cell &cell = img.cells[size_t(f->second)];
		cell.present = true;
		if (dv.kind == DecodedValue::Kind::Unavailable) {
			cell.unavailable = true;
			img.has_unavailable = true;
			continue;
		}
		if (dv.kind == DecodedValue::Kind::Null)
			continue;
		try {
			cell.value = PgCall([&]() { return InputFunctionCall(col.in_fn, const_cast<char *>(dv.text.c_str()), col.ioparam, col.typmod); });
			cell.text = PgCall([&]() { return OutputFunctionCall(col.out_fn, cell.value); });
		} catch (const PgError &e) {
			/* Name the field and column in the primary message; keep SQLSTATE, detail, hint. */
			ErrorData *ed = e.edata();
			std::string prefix = "field \"" + path + "\" (column \"" + col.name + "\" of type " + col.ctype.type_name + "): ";
			PgCall([&]() { ed->message = psprintf("%s%s", prefix.c_str(), ed->message ? ed->message : ""); });
			throw;
		}
		cell.isnull = false;
	}
	return img;
}

// Canonical hash of an image: column names and output texts in column order.
std::string
ImageHash(const Target &t, const Image &img)
{
	std::string s;
	for (size_t i = 0; i < t.columns.size(); i++) {
		const Cell &c = img.cells[i];
		if (!c.present || c.unavailable)
			continue;
		AppendJsonString(s, t.columns[i].name);
		s += c.isnull ? "=null;" : "=";
		if (!c.isnull) {
			AppendJsonString(s, c.text);
			s += ';';
		}
	}
	return Md5Hex(s);
}

// The entity key as JSON ({"id": "7"}), from the key columns of `img`.
std::string
EntityKey(const Target &t, const Image &img, const char *which)
{
	std::string k = "{";
	bool first = true;
	for (int idx : t.key) {
		const Column &col = t.columns[size_t(idx)];
		const Cell &c = img.cells[size_t(idx)];
		std::string path = std::string(which) + "." + col.name;
		if (!c.present)
			Fail("22023", "field \"" + path + "\" is missing: it is a key column of table " + t.display);
		if (c.unavailable)
			Fail("22023", "field \"" + path + "\" is the unavailable-value placeholder: it is a key column of table " + t.display);
		if (c.isnull)
			Fail("22004", "field \"" + path + "\" is null: it is a key column of table " + t.display);
		if (!first)
			k += ", ";
		first = false;
		AppendJsonString(k, col.name);
		k += ": ";
		AppendJsonString(k, c.text);
	}
	k += "}";
	return k;
}

// The compact entity key of cdc.entity_state (core/layout.hpp): the output
// texts of the key columns of `img` (EntityKey has checked them).
std::string
CompactKey(const Target &t, const Image &img)
{
	std::vector<std::string> values;
	for (int idx : t.key)
		values.push_back(img.cells[size_t(idx)].text);
	return CompactEntityKey(values);
}

// The same as a SQL expression over the target's row `t`: format('%s', col)
// is the column type's output function, as Cell::text.
std::string
CompactKeySql(const Target &t)
{
	if (t.key.size() == 1)
		return "format('%s', t." + QuoteIdent(t.columns[size_t(t.key[0])].name) + ")";
	std::string e = "ARRAY[";
	for (size_t i = 0; i < t.key.size(); i++)
		e += (i ? ", " : "") + std::string("format('%s', t.") + QuoteIdent(t.columns[size_t(t.key[i])].name) + ")";
	return e + "]::text";
}

// Content hash of an image as stored in cdc.entity_state.chash ("0" for deletes).
std::string
ContentHash32(const std::string &md5_hex)
{
	return std::to_string(Int32FromMd5Hex(md5_hex));
}

bool
SameKey(const Target &t, const Image &a, const Image &b)
{
	for (int idx : t.key) {
		const Cell &x = a.cells[size_t(idx)];
		const Cell &y = b.cells[size_t(idx)];
		if (!x.present || !y.present || x.unavailable || y.unavailable || x.isnull || y.isnull)
			return true; /* the before-image does not say: no key change */
		if (x.text != y.text)
			return false;
	}
	return true;
}

int64
VersionIntPg(Oid type, Datum d)
{
	switch (getBaseType(type)) {
	case INT2OID: return DatumGetInt16(d);
	case INT4OID: return DatumGetInt32(d);
	case INT8OID: return DatumGetInt64(d);
	case TIMESTAMPOID:
	case TIMESTAMPTZOID: return DatumGetTimestamp(d);
	case DATEOID: return DatumGetDateADT(d);
	default:
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
		                errmsg("version column must be smallint, integer, bigint, date, timestamp or timestamptz")));
	}
	return 0;
}

// Adds the key columns of `img` as typed parameters; returns "k1 = $n AND ...".
std::string
KeyPredicate(const Target &t, const Image &img, Params &p)
{
	std::string w;
	for (size_t i = 0; i < t.key.size(); i++) {
		const Column &col = t.columns[size_t(t.key[i])];
		const Cell &c = img.cells[size_t(t.key[i])];
		p.Add(col.type, c.value, false);
		if (i)
			w += " AND ";
		w += "t." + QuoteIdent(col.name) + " " + col.eq_op + " $" + std::to_string(p.Count());
	}
	return w;
}

std::optional<std::string>
SelectRowImage(const Target &t, const Image &key_img)
{
	Params p;
	std::string where = KeyPredicate(t, key_img, p);
	uint64_t n = Execute("SELECT to_jsonb(t)::text FROM " + t.qualified + " AS t WHERE " + where, p, false);
	if (n == 0)
		return std::nullopt;
	return ResultText(0, 1);
}

} // namespace

/* ------------------------------------------------------------------------
 * Apply
 * ------------------------------------------------------------------------ */

namespace {

struct EntityChange {
	const Target *t;
	const SourceInfo *source_info;
	bool is_snapshot;
	bool is_delete;
	const Image *key_img;   // image holding the key columns
	const Image *image;     // after-image (upsert) or before-image (delete)
	std::string entity_key;   // JSON ({"id": "7"}): outbox, conflicts, history, handlers
	std::string compact_key;  // cdc.entity_state.key (core/layout.hpp)
	Version version;
	std::string source;     // source id for version comparison ("" for column versions)
	int16_t src = 0;        // its id in cdc.source
	int32_t now_s = 0;      // transaction start, seconds since 2000 (TransactionSeconds)
	bool claimed_before = false; // the ledger already had the delivery: only the version records can make it applied
	std::string content_hash;
	std::string delivery_key;
	char op;                // outbox op: 'c', 'u', 'd', 'r'
	// Deletes only: when set, the removed row's values of these columns are
	// read (as output-function text, NULL as nullopt) just before the row is
	// deleted, under the entity lock.  Used by key-changing updates to move
	// unsent columns to the new key (SPEC §4.4).
	const std::vector<int> *capture_cols = nullptr;
	std::optional<std::vector<std::optional<std::string>>> *captured = nullptr;
};

// Reads columns `cols` of the row with the key of `key_img` as text.
std::optional<std::vector<std::optional<std::string>>>
SelectColumnsText(const Target &t, const Image &key_img, const std::vector<int> &cols)
{
	Params p;
	std::string where = KeyPredicate(t, key_img, p);
	std::string list;
	for (size_t i = 0; i < cols.size(); i++)
		list += (i ? ", t." : "t.") + QuoteIdent(t.columns[size_t(cols[i])].name) + "::text";
	uint64_t n = Execute("SELECT " + list + " FROM " + t.qualified + " AS t WHERE " + where, p, false);
	if (n == 0)
		return std::nullopt;
	std::vector<std::optional<std::string>> out;
	for (size_t i = 0; i < cols.size(); i++)
		out.push_back(ResultText(0, int(i) + 1));
	return out;
}

std::optional<EntityRecord>
LockEntity(const EntityChange &c)
{
	return LockEntityRecord(c.t->relid, c.compact_key, c.t->version_col >= 0 ? 3 : 4);
}

// Writes the entity record.  Returns false when a concurrent transaction
// created the record first (the caller then locks it and decides again).
bool
WriteEntity(const EntityChange &c, bool existed)
{
	return WriteEntityRecord(c.t->relid, c.compact_key, c.src, c.version, c.is_delete, c.content_hash, c.now_s, existed);
}

// Mutates the target table; returns the resulting row (upsert) or the removed
// row (delete) as JSON text, if any.
std::optional<std::string>
MutateTarget(const EntityChange &c)
{
	const Target &t = *c.t;
	Params p;
	std::string sql;
	if (c.is_delete) {
		std::string where = KeyPredicate(t, *c.key_img, p);
		sql = "DELETE FROM " + t.qualified + " AS t WHERE " + where + " RETURNING to_jsonb(t)::text";
	} else if (c.image->has_unavailable) {
		/* The row exists (Decide checked): set only the columns the source sent. */
		std::string set;
		for (size_t i = 0; i < t.columns.size(); i++) {
			const Cell &cell = c.image->cells[i];
			if (!cell.present || cell.unavailable)
				continue;
			p.Add(t.columns[i].type, cell.value, cell.isnull);
			if (!set.empty())
				set += ", ";
			set += QuoteIdent(t.columns[i].name) + " = $" + std::to_string(p.Count());
		}
		std::string where = KeyPredicate(t, *c.key_img, p);
		sql = "UPDATE " + t.qualified + " AS t SET " + set + " WHERE " + where + " RETURNING to_jsonb(t)::text";
	} else {
		std::string cols, vals, set, conflict;
		for (size_t i = 0; i < t.columns.size(); i++) {
			const Cell &cell = c.image->cells[i];
			if (!cell.present)
				continue;
			p.Add(t.columns[i].type, cell.value, cell.isnull);
			std::string q = QuoteIdent(t.columns[i].name);
			if (!cols.empty()) {
				cols += ", ";
				vals += ", ";
				set += ", ";
			}
			cols += q;
			vals += "$" + std::to_string(p.Count());
			set += q + " = EXCLUDED." + q;
		}
		for (size_t i = 0; i < t.key.size(); i++) {
			if (i)
				conflict += ", ";
			conflict += QuoteIdent(t.columns[size_t(t.key[i])].name);
		}
		sql = "INSERT INTO " + t.qualified + " AS t (" + cols + ") VALUES (" + vals + ") ON CONFLICT (" + conflict +
		      ") DO UPDATE SET " + set + " RETURNING to_jsonb(t)::text";
	}
	uint64_t n = Execute(sql, p, false);
	if (n == 0)
		return std::nullopt;
	return ResultText(0, 1);
}

std::string
SourceJson(const SourceInfo &src, const Version &v)
{
	std::string s = "{\"name\": ";
	AppendJsonString(s, src.name);
	s += ", \"db\": ";
	AppendJsonString(s, src.db);
	s += ", \"schema\": ";
	AppendJsonString(s, src.schema);
	s += ", \"table\": ";
	AppendJsonString(s, src.table);
	s += ", \"lsn\": " + (src.lsn ? std::to_string(*src.lsn) : std::string("null"));
	s += ", \"commit_lsn\": " + (src.commit_lsn ? std::to_string(*src.commit_lsn) : std::string("null"));
	s += ", \"txId\": " + (src.tx_id ? std::to_string(*src.tx_id) : std::string("null"));
	s += ", \"version\": [";
	for (size_t i = 0; i < v.parts.size(); i++)
		s += (i ? ", " : "") + std::to_string(v.parts[i]);
	s += "]}";
	return s;
}

// The outbox idempotency key: md5 of the source identity of the change
// (source id, source table, op, version, entity key) — never of the
// delivery key, so a re-published change gets the same key (docs/outbox.md).
std::string
IdempotencyKey(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key)
{
	std::string table = src.table.empty() ? t.display : src.schema + "." + src.table;
	std::string s = src.name + "\n" + table + "\n" + std::string(1, op) + "\n" + v.ToArrayLiteral() + "\n" + entity_key;
	return Md5Hex(s);
}

// An outbox row held back by a batch, inserted with the batch's other outbox
// rows in input order (FlushOutbox in the "Batches" section).
struct OutboxRow {
	size_t position; // input position of the event: rows are inserted in this order
	Oid target;
	std::string idempotency_key;
	std::optional<std::string> topic, entity_key, payload;
	std::string op, source, version;
};
struct DeferredOutbox {
	std::vector<OutboxRow> rows;
	size_t position = 0; // of the event being applied
};
// Set while a batch segment runs (a plain pointer: no C++ global with a
// destructor); reset by every ApplyEngine.
DeferredOutbox *deferred_outbox = nullptr;

OutboxRow
MakeOutboxRow(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key,
              const std::optional<std::string> &payload, size_t position)
{
	OutboxRow r;
	r.position = position;
	r.target = t.relid;
	r.idempotency_key = IdempotencyKey(t, src, op, v, entity_key);
	r.topic = t.mapping.topic ? t.mapping.topic : std::optional<std::string>(t.display);
	r.entity_key = entity_key.empty() ? std::nullopt : std::optional<std::string>(entity_key);
	r.op = std::string(1, op);
	r.payload = payload;
	r.source = SourceJson(src, v);
	r.version = v.ToArrayLiteral();
	return r;
}

// Writes the outbox row of an applied change (ON CONFLICT DO NOTHING: a
// replay never adds a second one).  Returns whether a row was inserted.
// Inside a batch the row is queued instead (and counted when the batch
// inserts it): false.
bool
WriteOutbox(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key,
            const std::optional<std::string> &payload)
{
	if (deferred_outbox != nullptr) {
		deferred_outbox->rows.push_back(MakeOutboxRow(t, src, op, v, entity_key, payload, deferred_outbox->position));
		return false;
	}
	Params p;
	p.AddText(IdempotencyKey(t, src, op, v, entity_key));
	p.AddTextOrNull(t.mapping.topic ? t.mapping.topic : std::optional<std::string>(t.display));
	p.AddOid(t.relid);
	p.AddTextOrNull(entity_key.empty() ? std::nullopt : std::optional<std::string>(entity_key));
	p.AddText(std::string(1, op));
	p.AddTextOrNull(payload);
	p.AddText(SourceJson(src, v));
	p.AddText(v.ToArrayLiteral());
	uint64_t n = Execute("INSERT INTO cdc.outbox (idempotency_key, topic, target, entity_key, op, payload, source, version) "
	                     "VALUES ($1, $2, $3, $4::jsonb, $5, $6::jsonb, $7::jsonb, $8::bigint[]) "
	                     "ON CONFLICT (idempotency_key) DO NOTHING",
	                     p, true);
	return n == 1;
}

void
RecordConflict(const EntityChange &c, const Decision &d, const std::optional<EntityRecord> &stored)
{
	std::optional<std::string> stored_image = SelectRowImage(*c.t, *c.key_img);
	Params p;
	p.AddOid(c.t->relid);
	p.AddText(c.entity_key);
	p.AddText(c.delivery_key);
	p.AddText(d.reason);
	p.AddTextOrNull(stored ? std::optional<std::string>(stored->version.ToArrayLiteral()) : std::nullopt);
	p.AddText(c.version.ToArrayLiteral());
	p.AddTextOrNull(stored_image);
	p.AddText(c.image->json);
	p.AddText(std::string(1, c.op));
	Execute("INSERT INTO cdc.conflicts (target, entity_key, delivery_key, reason, stored_version, event_version, "
	        "stored_image, event_image, op) "
	        "VALUES ($1, $2::jsonb, $3, $4, $5::bigint[], $6::bigint[], $7::jsonb, $8::jsonb, $9)",
	        p, true);
	if (c.t->mapping.conflict_error)
		Fail("23000", "conflicting change for key " + c.entity_key + " of table " + c.t->display + ": " + d.reason, {},
		     "The mapping's conflict_policy is 'error'; use 'record' to record conflicts in cdc.conflicts instead.");
}

/* ---- mode hooks (pg/modes.hpp) ---- */

ChangeIdentity
IdentityOf(const EntityChange &c)
{
	ChangeIdentity id;
	id.op = c.op;
	id.is_snapshot = c.is_snapshot;
	id.entity_key = c.entity_key;
	id.version = c.version;
	id.delivery_key = c.delivery_key;
	id.source_json = SourceJson(*c.source_info, c.version);
	id.source_ts_ms = c.source_info->ts_ms;
	return id;
}

// History mode: one history row per change; a replay finds its
// (cdc_key, cdc_version) taken.  No entity record: the history table's unique
// index is the replay guard.
Outcome
ApplyHistory(const EntityChange &c, Counters &cnt)
{
	const Target &t = *c.t;
	if (c.claimed_before && DeliveryHadConflict(t.relid, c.delivery_key)) {
		cnt.duplicate++;
		return Outcome::Duplicate;
	}
	std::vector<ModeValue> values;
	for (size_t i = 0; i < t.columns.size(); i++) {
		const Cell &cell = c.image->cells[i];
		if (!cell.present)
			continue;
		if (IsHistoryMetaColumn(t.columns[i].name))
			Fail("42703", std::string("field \"") + (c.is_delete ? "before." : "after.") + t.columns[i].name +
			                  "\" collides with a metadata column of history table " + t.display,
			     {}, "Columns named cdc_* of a history table are written by cdc_apply only.");
		ModeValue v;
		v.column = t.columns[i].name;
		v.type = t.columns[i].type;
		v.value = cell.value;
		v.isnull = cell.isnull;
		v.unavailable = cell.unavailable;
		values.push_back(std::move(v));
	}
	std::optional<std::string> row;
	switch (AppendHistory(t.modes, t.qualified, values, IdentityOf(c), &row)) {
	case HistoryResult::Exists:
		cnt.duplicate++;
		return Outcome::Duplicate;
	case HistoryResult::NoEarlierRow: {
		if (c.claimed_before) {
			cnt.duplicate++;
			return Outcome::Duplicate;
		}
		Decision d;
		d.outcome = Outcome::Conflict;
		d.reason = "the event has unavailable (unchanged TOAST) values and the history has no earlier row of the key";
		RecordConflict(c, d, std::nullopt);
		cnt.conflict++;
		return Outcome::Conflict;
	}
	case HistoryResult::Appended:
		break;
	}
	cnt.applied++;
	if (c.is_snapshot)
		cnt.snapshot_rows++;
	else if (t.mapping.outbox && WriteOutbox(t, *c.source_info, c.op, c.version, c.entity_key, row))
		cnt.outbox_rows++;
	return Outcome::Applied;
}

std::string QuoteLiteralText(const std::string &s);
std::string CompactKeySql(const Target &t);

// History mode, truncate: one history row with op t and key {} (no data
// columns); a replay finds it taken.
Outcome
ApplyHistoryTruncate(const Target &t, const ChangeRequest &req, const std::string &dk, Counters &cnt)
{
	ChangeIdentity id;
	id.op = 't';
	id.entity_key = "{}";
	id.version = req.version;
	id.delivery_key = dk;
	id.source_json = SourceJson(req.source, req.version);
	id.source_ts_ms = req.source.ts_ms;
	std::optional<std::string> row;
	if (AppendHistory(t.modes, t.qualified, {}, id, &row) == HistoryResult::Exists) {
		cnt.duplicate++;
		return Outcome::Duplicate;
	}
	cnt.applied++;
	if (t.mapping.outbox && WriteOutbox(t, req.source, 't', req.version, "", std::nullopt))
		cnt.outbox_rows++;
	return Outcome::Applied;
}

// Handler mode, truncate: the rows go one by one (DELETE ... RETURNING) and
// the handler sees each removed row as op t with old = the row, so derived
// aggregates stay exact.  `keep`: jsonb[] literal of the entity keys that
// survive (their entity moved past the truncate), as compact keys.
void
TruncateWithHandler(const Target &t, const std::string &keep, const ChangeRequest &req, const std::string &dk)
{
	std::string key = "jsonb_build_object(";
	for (size_t i = 0; i < t.key.size(); i++) {
		const std::string &name = t.columns[size_t(t.key[i])].name;
		key += (i ? ", " : "") + QuoteLiteralText(name) + ", t." + QuoteIdent(name) + "::text";
	}
	key += ")";
	Params del;
	del.AddText(keep);
	uint64_t n = Execute("DELETE FROM " + t.qualified + " AS t WHERE " + CompactKeySql(t) + " <> ALL ($1::text[]) " +
	                         "RETURNING to_jsonb(t)::text, " + key + "::text",
	                     del, false);
	std::vector<std::pair<std::string, std::string>> removed; /* (row, entity key): SPI results are overwritten by the calls */
	for (uint64_t i = 0; i < n; i++)
		removed.emplace_back(ResultText(i, 1).value_or("null"), ResultText(i, 2).value_or("{}"));
	ChangeIdentity id;
	id.op = 't';
	id.version = req.version;
	id.delivery_key = dk;
	id.source_json = SourceJson(req.source, req.version);
	id.source_ts_ms = req.source.ts_ms;
	for (const auto &[row, entity_key] : removed) {
		id.entity_key = entity_key;
		CallHandler(t.modes, t.display, id, row, std::nullopt);
	}
}

Outcome
ApplyEntity(const EntityChange &c, Counters &cnt)
{
	const Target &t = *c.t;
	if (t.modes.mode == Mode::History)
		return ApplyHistory(c, cnt);
	for (int attempt = 0;; attempt++) {
		std::optional<EntityRecord> stored = LockEntity(c);
		DecisionInput in;
		in.version = c.version;
		in.source = c.source;
		in.is_delete = c.is_delete;
		in.content_hash = c.content_hash;
		in.has_unavailable = !c.is_delete && c.image->has_unavailable;
		in.stored = stored;
		if (t.barrier && t.barrier->source == c.source)
			in.barrier = t.barrier->version;
		if (!stored) /* records may have been pruned: the watermark tells what can be proven */
			in.watermark = ReadWatermark(t.relid, c.src, t.version_col >= 0 ? 3 : 4);
		if (in.has_unavailable)
			in.row_exists = SelectRowImage(t, *c.key_img).has_value();
		Decision d = Decide(in);
		if (c.claimed_before &&
		    (d.outcome != Outcome::Applied || DeliveryHadConflict(t.relid, c.delivery_key))) {
			/*
			 * The ledger had it and the records agree (or it was a recorded
			 * conflict that a re-decision must not turn into an apply): a
			 * duplicate delivery.
			 */
			cnt.duplicate++;
			return Outcome::Duplicate;
		}

		switch (d.outcome) {
		case Outcome::Stale:
			cnt.stale++;
			if (d.blocked_resurrection)
				cnt.blocked_resurrections++;
			return d.outcome;
		case Outcome::Duplicate:
			cnt.duplicate++;
			return d.outcome;
		case Outcome::Conflict:
			RecordConflict(c, d, stored);
			cnt.conflict++;
			return d.outcome;
		case Outcome::Ignored:
			cnt.ignored++;
			return d.outcome;
		case Outcome::Expired:
			/* cannot be proven new or old (docs/retention.md): the mapping's expired_policy decides */
			cnt.expired++;
			if (t.modes.expired_policy == ModeConfig::ExpiredPolicy::DeadLetter)
				RecordDeadLetter(t.relid, c.entity_key, c.delivery_key, c.op, c.version, *in.watermark, c.image->json,
				                 SourceJson(*c.source_info, c.version));
			if (t.modes.expired_policy != ModeConfig::ExpiredPolicy::Apply)
				return d.outcome;
			break;
		case Outcome::Applied:
			break;
		}
		if (!WriteEntity(c, stored.has_value())) {
			if (attempt >= 3)
				throw std::runtime_error("entity record for " + c.entity_key + " keeps changing concurrently");
			continue; /* created concurrently: lock it and decide again */
		}
		if (c.is_delete && c.capture_cols && c.captured)
			*c.captured = SelectColumnsText(t, *c.key_img, *c.capture_cols);
		const bool handler = t.modes.mode == Mode::Handler;
		std::optional<std::string> old_row;
		if (handler && !c.is_delete)
			old_row = SelectRowImage(t, *c.key_img);
		std::optional<std::string> row = MutateTarget(c);
		if (handler) /* a delete's RETURNING row is the removed (old) row */
			CallHandler(t.modes, t.display, IdentityOf(c), c.is_delete ? row : old_row,
			            c.is_delete ? std::nullopt : row);
		if (c.is_delete && !row)
			row = c.image->json; /* the destination never had the row: publish the before-image */
		cnt.applied++;
		if (c.is_snapshot)
			cnt.snapshot_rows++;
		else if (t.mapping.outbox && WriteOutbox(t, *c.source_info, c.op, c.version, c.entity_key, row))
			cnt.outbox_rows++;
		return Outcome::Applied;
	}
}

std::string
QuoteLiteralText(const std::string &s)
{
	const char *q = PgCall([&]() { return quote_literal_cstr(s.c_str()); });
	return std::string(q);
}

// The dedup claim (SPEC §4.1) in the compact ledger (pg/state_store.hpp).
bool
Claim(const std::string &delivery_key, Oid relid, int32_t now_s)
{
	return ClaimDelivery(relid, delivery_key, now_s);
}

void
CheckPrivileges(const Target &t)
{
	/* INSERT ... ON CONFLICT DO UPDATE ... RETURNING needs SELECT as well. */
	AclMode needed = ACL_SELECT | ACL_INSERT | ACL_UPDATE | ACL_DELETE;
	AclMode have = PgCall([&]() { return pg_class_aclmask(t.relid, GetUserId(), needed, ACLMASK_ALL); });
	if ((have & needed) != needed) {
		std::string user = PgCall([&]() { return GetUserNameFromId(GetUserId(), false); });
		Fail("42501", "permission denied for table " + t.display,
		     "cdc_apply() needs SELECT, INSERT, UPDATE and DELETE on the target; role \"" + user + "\" lacks some of them.");
	}
}

// One change converted to the target's column types and identified: what
// every input path has before the dedup claim.
struct PreparedChange {
	bool is_delete = false;
	std::optional<Image> after, before;
	std::string entity_key; // of the after-image (upsert) or the before-image (delete)
	Version version;
	std::string delivery_key;
	const Image &Main() const { return is_delete ? *before : *after; }
};

// Converts the images of `req` (not a truncate), derives the entity key,
// the version (the request's, or the mapping's version_column) and the
// delivery key.  Errors name the event field (22023, 22004, 42703, the
// column types' input errors).
PreparedChange
PrepareChange(const Target &t, const ChangeRequest &req)
{
	PreparedChange p;
	const bool is_delete = p.is_delete = req.op == Op::Delete;
	if (is_delete && !req.before)
		Fail("22023", "field \"before\" is missing: a delete needs the before-image (at least the key columns)");
	if (!is_delete && !req.after)
		Fail("22023", std::string("field \"after\" is missing: op \"") + OpName(req.op) + "\" needs the after-image");
	if (req.after)
		p.after = ConvertImage(t, *req.after, "after");
	if (req.before)
		p.before = ConvertImage(t, *req.before, "before");
	const Image &main = p.Main();
	p.entity_key = EntityKey(t, main, is_delete ? "before" : "after");

	if (t.version_col >= 0) {
		const Column &vc = t.columns[size_t(t.version_col)];
		const Cell &cell = main.cells[size_t(t.version_col)];
		std::string path = std::string(is_delete ? "before." : "after.") + vc.name;
		if (!cell.present || cell.unavailable || cell.isnull)
			Fail("22023", "field \"" + path + "\" is missing or null: the mapping orders changes by this column", {},
			     is_delete ? "Deletes need the version column in the before-image (REPLICA IDENTITY FULL on the source)."
			               : "");
		int64_t x = PgCall([&]() { return VersionIntPg(vc.type, cell.value); });
		/*
		 * A delete carries the version of the row it removes, so at one column
		 * version the delete ranks after the upsert: {epoch, value, 0} for
		 * upserts, {epoch, value, 1} for deletes.
		 */
		p.version = Version{{t.mapping.epoch, x, is_delete ? 1 : 0}};
	} else {
		p.version = req.version;
	}
	p.delivery_key =
		req.delivery_key ? *req.delivery_key : DeriveDeliveryKey(req.source, req.op, req.total_order, p.entity_key);
	return p;
}

} // namespace

ApplyEngine::ApplyEngine()
{
	deferred_outbox = nullptr; /* a failed batch of an earlier call may have left it set */
	Connect();
}

ApplyEngine::~ApplyEngine() = default;

Outcome
ApplyEngine::ApplyDebezium(const Json &event, Oid target_arg, const std::optional<std::string> &delivery_key_arg)
{
	SetContext(nullptr, delivery_key_arg.value_or(""));
	ChangeEvent ev = ParseDebeziumEnvelope(event);
	if (ev.ignored) {
		counters_[target_arg].ignored++;
		return Outcome::Ignored;
	}
	Oid target = OidIsValid(target_arg) ? target_arg : ResolveTarget(ev.source.name, ev.source.schema, ev.source.table);
	if (ev.op == Op::Truncate)
		LockForTruncate(target);
	return ApplyChange(DebeziumRequest(ev, target, delivery_key_arg));
}

ChangeRequest
ApplyEngine::DebeziumRequest(const ChangeEvent &ev, Oid target, const std::optional<std::string> &delivery_key)
{
	ChangeRequest req;
	req.target = target;
	Target &t = LoadTarget(req.target);
	SetContext(&t, delivery_key.value_or(""));
	req.op = ev.op;
	req.source = ev.source;
	req.total_order = ev.total_order;
	req.delivery_key = delivery_key;
	if (ev.after)
		req.after = DecodeJsonImage(t, *ev.after, ev.after_schema ? &*ev.after_schema : nullptr, "after");
	if (ev.before)
		req.before = DecodeJsonImage(t, *ev.before, ev.before_schema ? &*ev.before_schema : nullptr, "before");
	if (t.version_col < 0 && !(ev.op == Op::Truncate && t.mapping.truncate_ignore))
		req.version = DeriveDebeziumVersion(ev, t.mapping.epoch);
	return req;
}

bool
ApplyEngine::TakeClaim(const std::string &delivery_key, Oid relid, int32_t now_s)
{
	if (pending_claim_) {
		bool claimed = *pending_claim_;
		pending_claim_.reset();
		return claimed;
	}
	return Claim(delivery_key, relid, now_s);
}

Outcome
ApplyEngine::ApplyChange(const ChangeRequest &req)
{
	Oid relid = req.target;
	Target &t = LoadTarget(relid);
	SetContext(&t, req.delivery_key.value_or(""));
	CheckPrivileges(t);
	Counters &cnt = counters_[relid];
	bool column_version = t.version_col >= 0;
	std::string source = column_version ? std::string() : req.source.name;

	if (req.op == Op::Truncate) {
		LockForTruncate(relid);
		if (t.mapping.truncate_ignore) {
			cnt.ignored++;
			return Outcome::Ignored;
		}
		if (column_version)
			Fail("0A000", "truncate events cannot be ordered for table " + t.display +
			                  ": its mapping orders changes by version_column",
			     {}, "Register the mapping with truncate_policy => 'ignore'.");
		const Version &v = req.version;
		std::string dk = req.delivery_key ? *req.delivery_key : DeriveDeliveryKey(req.source, req.op, req.total_order, "");
		SetContext(&t, dk);
		const bool claimed = TakeClaim(dk, relid, TransactionSeconds());
		if (t.modes.mode == Mode::History)
			return ApplyHistoryTruncate(t, req, dk, cnt);
		if (t.barrier && t.barrier->source == source && Version::Compare(v, t.barrier->version) <= 0) {
			/* a processed delivery (claim taken) or an older truncate */
			if (!claimed) {
				cnt.duplicate++;
				return Outcome::Duplicate;
			}
			cnt.stale++;
			return Outcome::Stale;
		}
		const int16_t src = SourceId(source, source_ids_);
		/*
		 * Rows whose entity moved past the truncate's version (a newer change
		 * applied before this late truncate arrived) survive it; everything
		 * else goes.  Usually there are none and TRUNCATE does the job.
		 */
		std::string keep = LiveKeysNewerThan(relid, src, v);
		if (t.modes.mode == Mode::Handler) {
			TruncateWithHandler(t, keep, req, dk);
		} else if (keep == "{}") {
			Params none;
			Execute("TRUNCATE " + t.qualified, none, false);
		} else {
			Params del;
			del.AddText(keep);
			Execute("DELETE FROM " + t.qualified + " AS t WHERE " + CompactKeySql(t) + " <> ALL ($1::text[])", del, false);
		}
		Params p;
		p.AddOid(relid);
		p.AddText(source);
		p.AddText(v.ToArrayLiteral());
		Execute("INSERT INTO cdc.table_barrier AS b (target, source_name, version) VALUES ($1, $2, $3::bigint[]) "
		        "ON CONFLICT (target) DO UPDATE SET source_name = EXCLUDED.source_name, version = EXCLUDED.version, "
		        "truncated_at = now()",
		        p, true);
		DropEntityRecordsUpTo(relid, src, v);
		t.barrier = Barrier{source, v};
		cnt.applied++;
		if (t.mapping.outbox && WriteOutbox(t, req.source, 't', v, "", std::nullopt))
			cnt.outbox_rows++;
		return Outcome::Applied;
	}

	PreparedChange prep = PrepareChange(t, req);
	const bool is_delete = prep.is_delete;
	std::optional<Image> &after = prep.after, &before = prep.before;
	const Image &main = prep.Main();
	const std::string &entity_key = prep.entity_key;
	const Version &v = prep.version;
	const std::string &dk = prep.delivery_key;
	SetContext(&t, dk);
	/*
	 * The dedup claim.  When the ledger already has the delivery the change
	 * still goes through the version decision (under the entity lock), but
	 * only an "applied" decision counts: it proves the change new, so the
	 * ledger hit was a digest collision.  Anything else is a duplicate.
	 */
	const int32_t now_s = TransactionSeconds();
	const bool claimed_before = !TakeClaim(dk, relid, now_s);
	const int16_t src = SourceId(source, source_ids_);

	/* The hash covers what the event sent, so a replay compares equal. */
	const std::string content_hash = is_delete ? std::string("0") : ContentHash32(ImageHash(t, main));
	const Image *image = &main;
	Image moved; /* the after-image with unsent columns taken from the row under the old key */

	/* An update whose before-image carries another key: delete the old key first. */
	if (req.op == Op::Update && before && !SameKey(t, *before, *after)) {
		std::vector<int> unsent;
		for (size_t i = 0; i < t.columns.size(); i++)
			if (after->cells[i].present && after->cells[i].unavailable)
				unsent.push_back(int(i));
		std::optional<std::vector<std::optional<std::string>>> captured;
		EntityChange old;
		old.t = &t;
		old.source_info = &req.source;
		old.is_snapshot = false;
		old.is_delete = true;
		old.key_img = &*before;
		old.image = &*before;
		old.entity_key = EntityKey(t, *before, "before");
		old.compact_key = CompactKey(t, *before);
		old.version = v;
		old.source = source;
		old.src = src;
		old.now_s = now_s;
		old.claimed_before = claimed_before;
		old.content_hash = "0";
		old.delivery_key = dk;
		old.op = 'd';
		if (!unsent.empty()) {
			old.capture_cols = &unsent;
			old.captured = &captured;
		}
		/* One event, one outcome: the implied delete adds only its outbox row to the counts. */
		Counters implied;
		Outcome implied_outcome = ApplyEntity(old, implied);
		cnt.outbox_rows += implied.outbox_rows;
		/*
		 * The row moved: columns the source did not send keep the values they
		 * had under the old key (SPEC §4.4).  Only when the implied delete
		 * applied and removed a row; otherwise the unsent columns stay
		 * unavailable and the decision below treats them as usual.
		 */
		if (implied_outcome == Outcome::Applied && captured) {
			moved = *after;
			for (size_t j = 0; j < unsent.size(); j++) {
				size_t i = size_t(unsent[j]);
				Cell &cell = moved.cells[i];
				const Column &col = t.columns[i];
				cell.unavailable = false;
				const std::optional<std::string> &text = (*captured)[j];
				if (!text) {
					cell.isnull = true;
					continue;
				}
				cell.value = PgCall([&]() { return InputFunctionCall(col.in_fn, const_cast<char *>(text->c_str()), col.ioparam, col.typmod); });
				cell.text = *text;
				cell.isnull = false;
			}
			moved.has_unavailable = false;
			image = &moved;
		}
		cnt.expired += implied.expired;
	}

	EntityChange c;
	c.t = &t;
	c.source_info = &req.source;
	c.is_snapshot = req.op == Op::Read;
	c.is_delete = is_delete;
	c.key_img = image;
	c.image = image;
	c.entity_key = entity_key;
	c.compact_key = CompactKey(t, main);
	c.version = v;
	c.source = source;
	c.src = src;
	c.now_s = now_s;
	c.claimed_before = claimed_before;
	c.content_hash = content_hash;
	c.delivery_key = dk;
	c.op = OpName(req.op)[0];
	return ApplyEntity(c, cnt);
}

void
ApplyEngine::Finish()
{
	if (finished_)
		return;
	ApplyQueued();
	finished_ = true;
	int backend = PgCall([]() { return int(MyBackendId); });
	for (const auto &[relid, c] : counters_) {
		Params p;
		p.AddOid(relid);
		p.Add(INT4OID, Int32GetDatum(backend), false);
		for (int64_t x : {c.applied, c.duplicate, c.stale, c.conflict, c.ignored, c.blocked_resurrections,
		                  c.outbox_rows, c.snapshot_rows, c.expired})
			p.AddInt8(x);
		Execute("INSERT INTO cdc.counters AS c (target, backend_id, applied, duplicate, stale, conflict, ignored, "
		        "blocked_resurrections, outbox_rows, snapshot_rows, expired) "
		        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
		        "ON CONFLICT (target, backend_id) DO UPDATE SET applied = c.applied + EXCLUDED.applied, "
		        "duplicate = c.duplicate + EXCLUDED.duplicate, stale = c.stale + EXCLUDED.stale, "
		        "conflict = c.conflict + EXCLUDED.conflict, ignored = c.ignored + EXCLUDED.ignored, "
		        "blocked_resurrections = c.blocked_resurrections + EXCLUDED.blocked_resurrections, "
		        "outbox_rows = c.outbox_rows + EXCLUDED.outbox_rows, "
		        "snapshot_rows = c.snapshot_rows + EXCLUDED.snapshot_rows, expired = c.expired + EXCLUDED.expired",
		        p, true);
	}
	cdc::pg::Finish();
}

/* ------------------------------------------------------------------------
 * Batches (cdc_apply_batch): docs/semantics.md, "Batches"
 * ------------------------------------------------------------------------ */

namespace {

/*
 * May the changes of a segment on this target be decided in memory and
 * written with one statement per kind (set-based), instead of change by
 * change?  Only if writing a row earlier, later, or an intermediate image
 * not at all can be seen in that row alone: the rows are independent
 * (IndependentRowsPg: no triggers, so no foreign keys either, no rules, no
 * row-level security, no CHECK constraints, no unique index besides the
 * key), every column has an array type (the rows travel as one array per
 * column), and the key's text form identifies a row (types whose equality
 * is equality of their output text, so two entity keys never name one row;
 * text keys only under a deterministic collation).
 * Only state mappings: in history mode every change is a row, in handler
 * mode a call that sees the row of that moment (docs/semantics.md, "Modes").
 * The expired policy and the prune watermark need no exclusion here:
 * Simulate() hands every change they could affect to the change-by-change
 * path.
 */
bool
SetBasedAllowed(const Target &t)
{
	if (t.modes.mode != Mode::State || !t.independent_rows)
		return false;
	for (const Column &c : t.columns)
		if (!c.generated && !OidIsValid(c.array_type))
			return false;
	for (int k : t.key) {
		const Column &c = t.columns[size_t(k)];
		switch (c.type) {
		case TEXTOID:
		case VARCHAROID:
		case NAMEOID:
			/* under a nondeterministic collation 'A' and 'a' can be one row */
			if (!c.deterministic)
				return false;
			break;
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case UUIDOID:
		case BOOLOID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID: break;
		default: return false;
		}
	}
	return true;
}

/*
 * May several changes of one entity inside a batch be merged into the
 * newest one, writing only the final entity record and row?  Set-based
 * targets whose mapping writes no outbox rows (each applied change owes its
 * own, with the row image of that moment; those targets are written round
 * by round instead).  NOT NULL is checked per image (ViolatesNotNull), and
 * a merged change must carry all columns (FullImage), so no column default
 * is evaluated either way.
 */
bool
CollapseAllowed(const Target &t)
{
	return SetBasedAllowed(t) && !t.mapping.outbox;
}

// Does an upsert image carry every column the destination does not compute
// itself, none of them unavailable?  (Deletes need only the key.)
bool
FullImage(const Target &t, const PreparedChange &p)
{
	if (p.is_delete)
		return true;
	for (size_t i = 0; i < t.columns.size(); i++) {
		const Cell &cell = p.after->cells[i];
		if (!t.columns[i].generated && (!cell.present || cell.unavailable))
			return false;
	}
	return true;
}

// Would writing this after-image fail a NOT NULL constraint?
bool
ViolatesNotNull(const Target &t, const Image &img)
{
	for (size_t i = 0; i < t.columns.size(); i++)
		if (t.columns[i].not_null && !t.columns[i].generated && img.cells[i].isnull)
			return true;
	return false;
}

bool
IsKeyChange(const Target &t, const ChangeRequest &req, const PreparedChange &p)
{
	return req.op == Op::Update && p.before && p.after && !SameKey(t, *p.before, *p.after);
}

void
AddCounts(Counters &to, const Counters &from)
{
	to.applied += from.applied;
	to.duplicate += from.duplicate;
	to.stale += from.stale;
	to.conflict += from.conflict;
	to.ignored += from.ignored;
	to.blocked_resurrections += from.blocked_resurrections;
	to.outbox_rows += from.outbox_rows;
	to.snapshot_rows += from.snapshot_rows;
	to.expired += from.expired;
}


// A one-dimensional array parameter built element by element.
class ArrayParam {
  public:
	ArrayParam(Oid elemtype, int16 typlen, bool typbyval, char typalign)
	    : elemtype_(elemtype), typlen_(typlen), typbyval_(typbyval), typalign_(typalign)
	{
	}
	static ArrayParam Text() { return ArrayParam(TEXTOID, -1, false, TYPALIGN_INT); }
	void Add(Datum d, bool isnull)
	{
		values_.push_back(d);
		nulls_.push_back(isnull ? 1 : 0);
	}
	void AddText(const std::string &s)
	{
		Add(PgCall([&]() { return PointerGetDatum(cstring_to_text_with_len(s.data(), int(s.size()))); }), false);
	}
	void AddTextOrNull(const std::optional<std::string> &s)
	{
		if (s)
			AddText(*s);
		else
			Add((Datum) 0, true);
	}
	size_t Size() const { return values_.size(); }
	// Adds the array to `p` as a parameter of the array type.
	void AddTo(Params &p, Oid array_type) const
	{
		Datum d = PgCall([&]() {
			int n = int(values_.size());
			bool *nulls = (bool *) palloc(sizeof(bool) * (n + 1));
			for (int i = 0; i < n; i++)
				nulls[i] = nulls_[size_t(i)] != 0;
			int dims[1] = {n};
			int lbs[1] = {1};
			return PointerGetDatum(construct_md_array(const_cast<Datum *>(values_.data()), nulls, 1, dims, lbs,
			                                          elemtype_, typlen_, typbyval_, typalign_));
		});
		p.Add(array_type, d, false);
	}

  private:
	Oid elemtype_;
	int16 typlen_;
	bool typbyval_;
	char typalign_;
	std::vector<Datum> values_;
	std::vector<char> nulls_;
};

// Claims the delivery keys of a segment in cdc.ledger with one statement, in
// input order (the digests of pg/state_store.hpp, ClaimDelivery).  Returns
// per change whether its claim is new: false when the ledger had the digest
// already, or an earlier change of the segment claimed it (the same delivery
// twice in one batch).  As one by one, a change whose claim is not new still
// goes through the version decision (Simulate, ApplyEntity).
std::vector<char>
ClaimAll(const std::vector<Target *> &target, const std::vector<PreparedChange> &prep, int32_t now_s)
{
	ArrayParam digests(INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	ArrayParam targets(OIDOID, sizeof(Oid), true, TYPALIGN_INT);
	std::vector<int64_t> digest(prep.size());
	for (size_t k = 0; k < prep.size(); k++) {
		digest[k] = Int64FromMd5Hex(Md5Hex(LedgerDigestInput(uint32_t(target[k]->relid), prep[k].delivery_key)));
		digests.Add(Int64GetDatum(digest[k]), false);
		targets.Add(ObjectIdGetDatum(target[k]->relid), false);
	}
	Params p;
	digests.AddTo(p, INT8ARRAYOID);
	targets.AddTo(p, OIDARRAYOID);
	p.Add(INT4OID, Int32GetDatum(now_s), false);
	uint64_t n = Execute("INSERT INTO cdc.ledger (digest, target, claimed_s) "
	                     "SELECT x.d, x.t::regclass, $3 FROM unnest($1, $2) WITH ORDINALITY AS x(d, t, ord) "
	                     "ORDER BY x.ord ON CONFLICT (digest) DO NOTHING RETURNING digest",
	                     p, true);
	std::multiset<int64_t> inserted;
	for (uint64_t i = 0; i < n; i++)
		inserted.insert(std::stoll(ResultText(i, 1).value_or("0")));
	std::vector<char> claimed(prep.size());
	for (size_t k = 0; k < prep.size(); k++) {
		auto it = inserted.find(digest[k]);
		claimed[k] = it != inserted.end();
		if (claimed[k])
			inserted.erase(it);
	}
	return claimed;
}

// The changes of one entity within a segment, in input order, and what the
// batch decided for them.
struct Chain {
	Target *t = nullptr;
	std::string entity_key;  // JSON ({"id": "7"})
	std::string compact_key; // cdc.entity_state.key
	std::vector<size_t> events; // indexes into the segment
	bool set_based = true;      // decided in memory and written set-based (else change by change)
	std::optional<EntityRecord> stored; // the record under lock before the batch
	// Simulate() results:
	std::vector<Outcome> outcomes;      // per event
	std::vector<size_t> applied;        // the applied events, in order
	std::optional<EntityRecord> final_record;
	Counters counts;
};

// What Simulate() needs to know per change of the segment besides its
// PreparedChange: the claim, the source name compared with stored records
// ("" for column versions), the content hash as cdc.entity_state.chash
// holds it ("0" for deletes), and the prune watermark of its target and
// source (read after the entity locks, like ReadWatermark one by one).
struct SimInput {
	bool claimed = true;
	std::string source;
	std::string content_hash;
	std::optional<Version> watermark;
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
 */
bool
Simulate(Chain &c, const std::vector<ChangeRequest> &reqs, size_t begin, const std::vector<PreparedChange> &prep,
         const std::vector<SimInput> &sim)
{
	const Target &t = *c.t;
	std::optional<EntityRecord> record = c.stored;
	c.outcomes.assign(c.events.size(), Outcome::Applied);
	c.applied.clear();
	c.final_record.reset();
	c.counts = Counters{};
	for (size_t j = 0; j < c.events.size(); j++) {
		const size_t k = c.events[j];
		const PreparedChange &p = prep[k];
		const ChangeRequest &req = reqs[begin + k];
		DecisionInput in;
		in.version = p.version;
		in.source = sim[k].source;
		in.is_delete = p.is_delete;
		in.content_hash = sim[k].content_hash;
		in.stored = record;
		if (t.barrier && t.barrier->source == in.source)
			in.barrier = t.barrier->version;
		if (!record)
			in.watermark = sim[k].watermark;
		Decision d = Decide(in);
		if (!sim[k].claimed) {
			if (d.outcome == Outcome::Applied)
				return false;
			c.outcomes[j] = Outcome::Duplicate;
			c.counts.duplicate++;
			continue;
		}
		c.outcomes[j] = d.outcome;
		switch (d.outcome) {
		case Outcome::Stale:
			c.counts.stale++;
			if (d.blocked_resurrection)
				c.counts.blocked_resurrections++;
			break;
		case Outcome::Duplicate:
			c.counts.duplicate++;
			break;
		case Outcome::Ignored:
			c.counts.ignored++;
			break;
		case Outcome::Conflict:
		case Outcome::Expired:
			return false;
		case Outcome::Applied:
			if (!p.is_delete && ViolatesNotNull(t, *p.after))
				return false;
			record = EntityRecord{p.version, p.is_delete, in.content_hash, in.source};
			c.final_record = record;
			c.applied.push_back(k);
			c.counts.applied++;
			if (req.op == Op::Read)
				c.counts.snapshot_rows++;
			break;
		}
	}
	return true;
}

// Locks and reads the entity records of chains (one statement per target),
// as LockEntityRecord does for one.
void
LockRecords(std::vector<Chain *> &chains)
{
	std::map<Oid, std::vector<Chain *>> by_target;
	for (Chain *c : chains)
		by_target[c->t->relid].push_back(c);
	for (auto &[relid, list] : by_target) {
		ArrayParam keys = ArrayParam::Text();
		for (Chain *c : list)
			keys.AddText(c->compact_key);
		Params p;
		p.AddOid(relid);
		keys.AddTo(p, TEXTARRAYOID);
		/* A LATERAL subquery with FOR UPDATE is never flattened: one index probe per key, whatever the statistics. */
		uint64_t n = Execute("SELECT x.ord, s.name, s.v0, s.v1, s.v2, s.v3, s.deleted, s.chash "
		                     "FROM unnest($2) WITH ORDINALITY AS x(k, ord), "
		                     "LATERAL (SELECT c.name, e.v0, e.v1, e.v2, e.v3, e.deleted, e.chash "
		                     "FROM cdc.entity_state e JOIN cdc.source c ON c.id = e.src "
		                     "WHERE e.target = $1 AND e.key = x.k FOR UPDATE OF e) s",
		                     p, true);
		const size_t arity = list.front()->t->version_col >= 0 ? 3 : 4;
		for (uint64_t i = 0; i < n; i++) {
			size_t ord = std::stoul(ResultText(i, 1).value_or("0"));
			EntityRecord r;
			r.source = ResultText(i, 2).value_or("");
			StoredVersion sv;
			sv.v0 = std::stoi(ResultText(i, 3).value_or("0"));
			sv.v1 = std::stoll(ResultText(i, 4).value_or("0"));
			sv.v2 = std::stoll(ResultText(i, 5).value_or("0"));
			sv.v3 = std::stoi(ResultText(i, 6).value_or("0"));
			r.version = FromStoredVersion(sv, arity);
			r.deleted = ResultBool(i, 7);
			r.content_hash = ResultText(i, 8).value_or("");
			list[ord - 1]->stored = r;
		}
	}
}

// The prune watermarks of the targets of `chains`: (target, source id) ->
// version.  Read after the entity locks in a statement of its own, so that
// it sees a concurrent cdc.prune() that removed a tombstone the locks waited
// for (docs/retention.md, "Concurrency").
std::map<std::pair<Oid, int16_t>, Version>
ReadWatermarks(const std::vector<Chain *> &chains)
{
	std::map<Oid, size_t> arity;
	for (const Chain *c : chains)
		arity[c->t->relid] = c->t->version_col >= 0 ? 3 : 4;
	std::map<std::pair<Oid, int16_t>, Version> out;
	for (const auto &[relid, n_parts] : arity) {
		Params p;
		p.AddOid(relid);
		uint64_t n = Execute("SELECT src, v0, v1, v2, v3 FROM cdc.prune_watermark WHERE target = $1", p, true);
		for (uint64_t i = 0; i < n; i++) {
			StoredVersion sv;
			int16_t src = int16_t(std::stoi(ResultText(i, 1).value_or("0")));
			sv.v0 = std::stoi(ResultText(i, 2).value_or("0"));
			sv.v1 = std::stoll(ResultText(i, 3).value_or("0"));
			sv.v2 = std::stoll(ResultText(i, 4).value_or("0"));
			sv.v3 = std::stoi(ResultText(i, 5).value_or("0"));
			out[{relid, src}] = FromStoredVersion(sv, n_parts);
		}
	}
	return out;
}

// The final records of chains as arrays of cdc.entity_state's columns:
// $2 key, $3 src, $4 v0, $5 v1, $6 v2, $7 v3, $8 deleted, $9 chash ($1 is
// the target, $10 the write time).
void
AddRecordArrays(Params &p, const std::vector<Chain *> &list, const std::map<std::string, int16_t> &source_ids)
{
	ArrayParam keys = ArrayParam::Text();
	ArrayParam srcs(INT2OID, sizeof(int16), true, TYPALIGN_SHORT);
	ArrayParam v0(INT4OID, sizeof(int32), true, TYPALIGN_INT), v3(INT4OID, sizeof(int32), true, TYPALIGN_INT),
	    chash(INT4OID, sizeof(int32), true, TYPALIGN_INT);
	ArrayParam v1(INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE),
	    v2(INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	ArrayParam deleted(BOOLOID, 1, true, TYPALIGN_CHAR);
	for (const Chain *c : list) {
		const EntityRecord &r = *c->final_record;
		StoredVersion sv = ToStoredVersion(r.version);
		keys.AddText(c->compact_key);
		srcs.Add(Int16GetDatum(source_ids.at(r.source)), false);
		v0.Add(Int32GetDatum(sv.v0), false);
		v1.Add(Int64GetDatum(sv.v1), false);
		v2.Add(Int64GetDatum(sv.v2), false);
		v3.Add(Int32GetDatum(sv.v3), false);
		deleted.Add(BoolGetDatum(r.deleted), false);
		chash.Add(Int32GetDatum(int32_t(std::stol(r.content_hash))), false);
	}
	keys.AddTo(p, TEXTARRAYOID);
	srcs.AddTo(p, INT2ARRAYOID);
	v0.AddTo(p, INT4ARRAYOID);
	v1.AddTo(p, INT8ARRAYOID);
	v2.AddTo(p, INT8ARRAYOID);
	v3.AddTo(p, INT4ARRAYOID);
	deleted.AddTo(p, BOOLARRAYOID);
	chash.AddTo(p, INT4ARRAYOID);
}

/*
 * Inserts the final records of new entities (one statement per target), as
 * WriteEntityRecord does for one.  Returns the chains whose record a
 * concurrent transaction created first (ON CONFLICT DO NOTHING inserted
 * nothing for them).
 */
std::vector<Chain *>
InsertRecords(const std::vector<Chain *> &chains, const std::map<std::string, int16_t> &source_ids, int32_t now_s)
{
	std::map<Oid, std::vector<Chain *>> by_target;
	for (Chain *c : chains)
		by_target[c->t->relid].push_back(c);
	std::vector<Chain *> lost;
	for (auto &[relid, list] : by_target) {
		Params p;
		p.AddOid(relid);
		AddRecordArrays(p, list, source_ids);
		p.Add(INT4OID, Int32GetDatum(now_s), false);
		uint64_t n = Execute("INSERT INTO cdc.entity_state (target, key, src, v0, v1, v2, v3, deleted, chash, touched_s) "
		                     "SELECT $1, x.k, x.s, x.v0, x.v1, x.v2, x.v3, x.d, x.h, $10 "
		                     "FROM unnest($2, $3, $4, $5, $6, $7, $8, $9) AS x(k, s, v0, v1, v2, v3, d, h) "
		                     "ON CONFLICT (target, key) DO NOTHING RETURNING key",
		                     p, true);
		if (n == list.size())
			continue;
		std::set<std::string> inserted;
		for (uint64_t i = 0; i < n; i++)
			inserted.insert(ResultText(i, 1).value_or(""));
		for (Chain *c : list)
			if (!inserted.count(c->compact_key))
				lost.push_back(c);
	}
	return lost;
}

// Writes the final records of entities that had one, locked by LockRecords
// (one statement per target; ON CONFLICT finds each through the key index).
void
UpdateRecords(const std::vector<Chain *> &chains, const std::map<std::string, int16_t> &source_ids, int32_t now_s)
{
	std::map<Oid, std::vector<Chain *>> by_target;
	for (Chain *c : chains)
		by_target[c->t->relid].push_back(c);
	for (auto &[relid, list] : by_target) {
		Params p;
		p.AddOid(relid);
		AddRecordArrays(p, list, source_ids);
		p.Add(INT4OID, Int32GetDatum(now_s), false);
		Execute("INSERT INTO cdc.entity_state AS e (target, key, src, v0, v1, v2, v3, deleted, chash, touched_s) "
		        "SELECT $1, x.k, x.s, x.v0, x.v1, x.v2, x.v3, x.d, x.h, $10 "
		        "FROM unnest($2, $3, $4, $5, $6, $7, $8, $9) AS x(k, s, v0, v1, v2, v3, d, h) "
		        "ON CONFLICT (target, key) DO UPDATE SET src = EXCLUDED.src, v0 = EXCLUDED.v0, v1 = EXCLUDED.v1, "
		        "v2 = EXCLUDED.v2, v3 = EXCLUDED.v3, deleted = EXCLUDED.deleted, chash = EXCLUDED.chash, "
		        "touched_s = EXCLUDED.touched_s",
		        p, true);
	}
}

/*
 * Writes one image per entity to the target with one upsert and one delete
 * statement: writes[i] = (segment index of the change, chain).  Each entity
 * appears at most once, so no statement touches a row twice.  Returns the
 * resulting (upsert) or removed (delete) row of each write as JSON when
 * `returning` (for outbox payloads; nullopt: a delete found no row).
 */
std::vector<std::optional<std::string>>
WriteRows(const Target &t, const std::vector<std::pair<size_t, const Chain *>> &writes,
          const std::vector<PreparedChange> &prep, bool returning)
{
	std::vector<std::optional<std::string>> rows(writes.size());
	std::vector<size_t> upserts, deletes;
	for (size_t i = 0; i < writes.size(); i++)
		(prep[writes[i].first].is_delete ? deletes : upserts).push_back(i);

	if (!upserts.empty()) {
		Params p;
		std::string cols, set, conflict;
		for (size_t c = 0; c < t.columns.size(); c++) {
			const Column &col = t.columns[c];
			if (col.generated)
				continue;
			ArrayParam a(col.type, col.typlen, col.typbyval, col.typalign);
			for (size_t i : upserts) {
				const Cell &cell = prep[writes[i].first].after->cells[c];
				a.Add(cell.value, cell.isnull);
			}
			a.AddTo(p, col.array_type);
			std::string q = QuoteIdent(col.name);
			cols += (cols.empty() ? "" : ", ") + q;
			set += (set.empty() ? "" : ", ") + q + " = EXCLUDED." + q;
		}
		for (size_t i = 0; i < t.key.size(); i++)
			conflict += (i ? ", " : "") + QuoteIdent(t.columns[size_t(t.key[i])].name);
		std::string args;
		for (int i = 1; i <= p.Count(); i++)
			args += (i > 1 ? ", $" : "$") + std::to_string(i);
		uint64_t n = Execute("INSERT INTO " + t.qualified + " AS t (" + cols + ") SELECT * FROM unnest(" + args +
		                         ") ON CONFLICT (" + conflict + ") DO UPDATE SET " + set +
		                         (returning ? " RETURNING to_jsonb(t)::text" : ""),
		                     p, false);
		if (returning)
			for (uint64_t r = 0; r < n && r < upserts.size(); r++)
				rows[upserts[r]] = ResultText(r, 1);
	}
	if (!deletes.empty()) {
		Params p;
		std::string names, where;
		for (size_t i = 0; i < t.key.size(); i++) {
			const Column &col = t.columns[size_t(t.key[i])];
			ArrayParam a(col.type, col.typlen, col.typbyval, col.typalign);
			for (size_t d : deletes)
				a.Add(prep[writes[d].first].before->cells[size_t(t.key[i])].value, false);
			a.AddTo(p, col.array_type);
			names += "k" + std::to_string(i + 1) + ", ";
			where += std::string(i ? " AND " : "") + "t." + QuoteIdent(col.name) + " " + col.eq_op + " x.k" +
			         std::to_string(i + 1);
		}
		std::string args;
		for (int i = 1; i <= p.Count(); i++)
			args += (i > 1 ? ", $" : "$") + std::to_string(i);
		/*
		 * The rows are found by one index probe per key (a LATERAL subquery
		 * with OFFSET 0 is never flattened into a join) and deleted by ctid,
		 * so the cost follows the batch, not the table, whatever the
		 * statistics the cached plan was made with.
		 */
		uint64_t n = Execute("WITH d AS MATERIALIZED (SELECT x.ord, l.c FROM unnest(" + args + ") WITH ORDINALITY AS x(" +
		                         names + "ord), LATERAL (SELECT t.ctid AS c FROM " + t.qualified + " AS t WHERE " + where +
		                         " OFFSET 0) l) DELETE FROM " + t.qualified +
		                         " AS t USING d WHERE t.ctid = d.c AND t.ctid = ANY (ARRAY(SELECT c FROM d))" +
		                         (returning ? " RETURNING d.ord, to_jsonb(t)::text" : ""),
		                     p, false);
		if (returning)
			for (uint64_t r = 0; r < n; r++) {
				size_t ord = std::stoul(ResultText(r, 1).value_or("0"));
				if (ord >= 1 && ord <= deletes.size())
					rows[deletes[ord - 1]] = ResultText(r, 2);
			}
	}
	return rows;
}

// Inserts the queued outbox rows in input order (one statement) and counts
// the inserted ones per target.
void
FlushOutbox(DeferredOutbox &q, std::map<Oid, Counters> &counters)
{
	if (q.rows.empty())
		return;
	std::stable_sort(q.rows.begin(), q.rows.end(),
	                 [](const OutboxRow &a, const OutboxRow &b) { return a.position < b.position; });
	ArrayParam ikeys = ArrayParam::Text(), topics = ArrayParam::Text(), ekeys = ArrayParam::Text(),
	           ops = ArrayParam::Text(), payloads = ArrayParam::Text(), sources = ArrayParam::Text(),
	           versions = ArrayParam::Text();
	ArrayParam targets(OIDOID, sizeof(Oid), true, TYPALIGN_INT);
	for (const OutboxRow &r : q.rows) {
		ikeys.AddText(r.idempotency_key);
		topics.AddTextOrNull(r.topic);
		targets.Add(ObjectIdGetDatum(r.target), false);
		ekeys.AddTextOrNull(r.entity_key);
		ops.AddText(r.op);
		payloads.AddTextOrNull(r.payload);
		sources.AddText(r.source);
		versions.AddText(r.version);
	}
	Params p;
	ikeys.AddTo(p, TEXTARRAYOID);
	topics.AddTo(p, TEXTARRAYOID);
	targets.AddTo(p, OIDARRAYOID);
	ekeys.AddTo(p, TEXTARRAYOID);
	ops.AddTo(p, TEXTARRAYOID);
	payloads.AddTo(p, TEXTARRAYOID);
	sources.AddTo(p, TEXTARRAYOID);
	versions.AddTo(p, TEXTARRAYOID);
	uint64_t n = Execute("INSERT INTO cdc.outbox (idempotency_key, topic, target, entity_key, op, payload, source, version) "
	                     "SELECT x.i, x.tp, x.t::regclass, x.e::jsonb, x.o, x.p::jsonb, x.s::jsonb, x.v::bigint[] "
	                     "FROM unnest($1, $2, $3, $4, $5, $6, $7, $8) WITH ORDINALITY AS x(i, tp, t, e, o, p, s, v, ord) "
	                     "ORDER BY x.ord ON CONFLICT (idempotency_key) DO NOTHING RETURNING target::oid",
	                     p, true);
	for (uint64_t i = 0; i < n; i++)
		counters[Oid(std::stoul(ResultText(i, 1).value_or("0")))].outbox_rows++;
	q.rows.clear();
}

} // namespace

std::vector<Outcome>
ApplyEngine::ApplyDebeziumBatch(const std::vector<Json> &events, Oid target_arg,
                                const std::vector<std::optional<std::string>> &delivery_keys)
{
	auto dk_of = [&](size_t i) {
		return i < delivery_keys.size() ? delivery_keys[i] : std::optional<std::string>();
	};
	std::vector<Outcome> out(events.size(), Outcome::Ignored);
	struct Parsed {
		size_t index;
		ChangeEvent ev;
		Oid target;
	};
	std::vector<Parsed> parsed;
	for (size_t i = 0; i < events.size(); i++) {
		SetEventLabel(PositionLabel(i + 1));
		SetContext(nullptr, dk_of(i).value_or(""));
		ChangeEvent ev = ParseDebeziumEnvelope(events[i]);
		if (ev.ignored) {
			counters_[target_arg].ignored++;
			continue;
		}
		Oid target = OidIsValid(target_arg) ? target_arg : ResolveTarget(ev.source.name, ev.source.schema, ev.source.table);
		parsed.push_back(Parsed{i, std::move(ev), target});
	}
	/* Truncated targets are locked before anything else (LockForTruncate). */
	for (const Parsed &p : parsed)
		if (p.ev.op == Op::Truncate) {
			SetEventLabel(PositionLabel(p.index + 1));
			LockForTruncate(p.target);
		}
	std::vector<ChangeRequest> reqs;
	std::vector<size_t> positions;
	for (const Parsed &p : parsed) {
		SetEventLabel(PositionLabel(p.index + 1));
		reqs.push_back(DebeziumRequest(p.ev, p.target, dk_of(p.index)));
		positions.push_back(p.index + 1);
	}
	std::vector<Outcome> applied = ApplyChanges(reqs, positions);
	for (size_t j = 0; j < applied.size(); j++)
		out[positions[j] - 1] = applied[j];
	return out;
}

void
ApplyEngine::Enqueue(ChangeRequest req, size_t position)
{
	for (const std::optional<RawImage> *img : {&req.before, &req.after})
		if (*img) {
			queued_bytes_ += (*img)->json.size();
			for (const auto &[name, value] : (*img)->values)
				queued_bytes_ += name.size() + value.text.size();
		}
	queued_.push_back(std::move(req));
	queued_positions_.push_back(position);
}

void
ApplyEngine::ApplyQueued()
{
	if (queued_.empty())
		return;
	std::vector<ChangeRequest> reqs;
	std::vector<size_t> positions;
	reqs.swap(queued_);
	positions.swap(queued_positions_);
	queued_bytes_ = 0;
	ApplyChanges(reqs, positions);
}

std::vector<Outcome>
ApplyEngine::ApplyChanges(const std::vector<ChangeRequest> &reqs, const std::vector<size_t> &positions)
{
	std::vector<Outcome> out(reqs.size(), Outcome::Ignored);
	for (size_t i = 0; i < reqs.size(); i++)
		if (reqs[i].op == Op::Truncate) {
			SetEventLabel(PositionLabel(positions[i]));
			LockForTruncate(reqs[i].target);
		}
	/* A truncate is a table-level barrier: the changes between two truncates form a segment. */
	size_t begin = 0;
	for (size_t i = 0; i <= reqs.size(); i++) {
		if (i < reqs.size() && reqs[i].op != Op::Truncate)
			continue;
		if (i > begin)
			ApplySegment(reqs, positions, begin, i, out);
		if (i < reqs.size()) {
			SetEventLabel(PositionLabel(positions[i]));
			out[i] = ApplyChange(reqs[i]);
		}
		begin = i + 1;
	}
	SetEventLabel("");
	return out;
}

/*
 * One segment (no truncate inside): see docs/semantics.md, "Batches".
 *   1. convert every change; 2. claim every delivery key (one statement);
 *   3. if every target allows it (SetBasedAllowed), group the changes by
 *      entity, lock the entity records (one statement per target), read the
 *      prune watermarks and decide each entity's changes in memory
 *      (Simulate); entities with a key change, a partial image, a conflict,
 *      an expired change, an applied decision for a delivery the ledger had,
 *      or a NOT NULL violation, and every entity of a segment with a target
 *      that does not allow it, are applied change by change instead
 *      (ApplyChange, with the claim already made);
 *   4. write the final entity records (insert / update, one statement per
 *      target and kind), then the rows: the final image of each entity where
 *      CollapseAllowed, else every applied image, round by round (the n-th
 *      applied change of every entity in round n);
 *   5. insert the outbox rows of the whole segment in input order (they are
 *      queued meanwhile, including those of change-by-change entities).
 */
void
ApplyEngine::ApplySegment(const std::vector<ChangeRequest> &reqs, const std::vector<size_t> &positions, size_t begin,
                          size_t end, std::vector<Outcome> &out)
{
	const size_t n = end - begin;
	std::vector<Target *> target(n);
	std::vector<PreparedChange> prep(n);
	bool set_based = true;
	for (size_t k = 0; k < n; k++) {
		const ChangeRequest &req = reqs[begin + k];
		SetEventLabel(PositionLabel(positions[begin + k]));
		Target &t = LoadTarget(req.target);
		SetContext(&t, req.delivery_key.value_or(""));
		CheckPrivileges(t);
		prep[k] = PrepareChange(t, req);
		target[k] = &t;
		set_based = set_based && SetBasedAllowed(t);
	}

	auto stage = [&](const std::string &what, const Target *t) {
		SetEventLabel(position_unit_ + "s " + std::to_string(positions[begin]) + " to " +
		              std::to_string(positions[end - 1]) + " " + position_scope_ + " (" + what + ")");
		SetContext(t, "");
	};
	stage("claiming their delivery keys", nullptr);
	const int32_t now_s = TransactionSeconds();
	std::vector<char> claimed = ClaimAll(target, prep, now_s);

	/* Change by change, with the batch's claim (ApplyChange -> TakeClaim). */
	auto apply_one = [&](size_t k) {
		SetEventLabel(PositionLabel(positions[begin + k]));
		if (deferred_outbox)
			deferred_outbox->position = k;
		pending_claim_ = claimed[k] != 0;
		out[begin + k] = ApplyChange(reqs[begin + k]);
		pending_claim_.reset();
	};
	if (!set_based) {
		for (size_t k = 0; k < n; k++)
			apply_one(k);
		return;
	}

	/*
	 * What the decision needs per change.  The source ids are taken in input
	 * order, as one by one takes them (SourceId creates a cdc.source row on
	 * first use).
	 */
	std::vector<SimInput> sim(n);
	std::vector<int16_t> src(n);
	for (size_t k = 0; k < n; k++) {
		const Target &t = *target[k];
		sim[k].claimed = claimed[k] != 0;
		sim[k].source = t.version_col >= 0 ? std::string() : reqs[begin + k].source.name;
		sim[k].content_hash = prep[k].is_delete ? std::string("0") : ContentHash32(ImageHash(t, prep[k].Main()));
		src[k] = SourceId(sim[k].source, source_ids_);
	}

	/* The changes by entity. */
	std::map<std::pair<Oid, std::string>, size_t> chain_index;
	std::vector<Chain> chains;
	std::vector<size_t> chain_of(n);
	auto chain_for = [&](Target *t, const Image &img, const char *which) {
		std::string entity_key = EntityKey(*t, img, which);
		auto [it, inserted] = chain_index.emplace(std::make_pair(t->relid, entity_key), chains.size());
		if (inserted) {
			chains.emplace_back();
			chains.back().t = t;
			chains.back().entity_key = entity_key;
			chains.back().compact_key = CompactKey(*t, img);
		}
		return it->second;
	};
	for (size_t k = 0; k < n; k++) {
		Target &t = *target[k];
		const ChangeRequest &req = reqs[begin + k];
		size_t c = chain_for(&t, prep[k].Main(), prep[k].is_delete ? "before" : "after");
		chains[c].events.push_back(k);
		chain_of[k] = c;
		bool key_change = IsKeyChange(t, req, prep[k]);
		if (key_change)
			chains[chain_for(&t, *prep[k].before, "before")].set_based = false;
		if (key_change || !FullImage(t, prep[k]))
			chains[c].set_based = false;
	}

	/* Lock and read the records, decide in memory. */
	stage("locking their entities", nullptr);
	std::vector<Chain *> decided;
	for (Chain &c : chains)
		if (c.set_based && !c.events.empty())
			decided.push_back(&c);
	LockRecords(decided);
	/* The watermarks only after the locks (ReadWatermarks); only entities without a record consult them. */
	std::map<std::pair<Oid, int16_t>, Version> watermarks = ReadWatermarks(decided);
	for (size_t k = 0; k < n; k++) {
		auto w = watermarks.find({target[k]->relid, src[k]});
		if (w != watermarks.end())
			sim[k].watermark = w->second;
	}
	for (Chain *c : decided)
		c->set_based = Simulate(*c, reqs, begin, prep, sim);

	DeferredOutbox queue;
	deferred_outbox = &queue;
	struct ResetDeferred { /* also when an error unwinds: a plain pointer store, nothing of PostgreSQL */
		~ResetDeferred() { deferred_outbox = nullptr; }
	} reset_deferred;

	/* Change by change: entities the batch could not decide in memory. */
	for (size_t k = 0; k < n; k++)
		if (!chains[chain_of[k]].set_based)
			apply_one(k);

	/* Entity records: new ones first; one created concurrently meanwhile is decided again. */
	stage("writing their entity records", nullptr);
	std::vector<Chain *> fresh, existing;
	for (Chain &c : chains)
		if (c.set_based && !c.events.empty() && c.final_record)
			(c.stored ? existing : fresh).push_back(&c);
	for (int attempt = 0; !fresh.empty(); attempt++) {
		std::vector<Chain *> lost = InsertRecords(fresh, source_ids_, now_s);
		fresh.clear();
		if (lost.empty())
			break;
		if (attempt >= 3)
			throw std::runtime_error("entity records keep being created concurrently");
		LockRecords(lost);
		for (Chain *c : lost) {
			if (!Simulate(*c, reqs, begin, prep, sim)) {
				c->set_based = false;
				for (size_t k : c->events)
					apply_one(k);
			} else if (c->final_record) {
				(c->stored ? existing : fresh).push_back(c);
			}
		}
	}
	UpdateRecords(existing, source_ids_, now_s);

	/* Rows: per target, the final image of each entity, or round by round. */
	std::map<Oid, std::vector<const Chain *>> by_target;
	for (const Chain &c : chains)
		if (c.set_based && !c.applied.empty())
			by_target[c.t->relid].push_back(&c);
	for (const auto &[relid, list] : by_target) {
		const Target &t = *list.front()->t;
		stage("writing their rows", &t);
		const bool collapse = CollapseAllowed(t);
		for (size_t round = 0;; round++) {
			std::vector<std::pair<size_t, const Chain *>> writes;
			for (const Chain *c : list) {
				if (collapse && round == 0)
					writes.emplace_back(c->applied.back(), c);
				else if (!collapse && round < c->applied.size())
					writes.emplace_back(c->applied[round], c);
			}
			if (writes.empty())
				break;
			const bool outbox = t.mapping.outbox;
			std::vector<std::optional<std::string>> rows = WriteRows(t, writes, prep, outbox);
			if (!outbox)
				continue;
			for (size_t i = 0; i < writes.size(); i++) {
				const size_t k = writes[i].first;
				const ChangeRequest &req = reqs[begin + k];
				if (req.op == Op::Read)
					continue; /* snapshot rows set state only */
				std::optional<std::string> row = rows[i];
				if (prep[k].is_delete && !row)
					row = prep[k].Main().json; /* the destination never had the row: publish the before-image */
				queue.rows.push_back(MakeOutboxRow(t, req.source, OpName(req.op)[0], prep[k].version,
				                                   prep[k].entity_key, row, k));
			}
		}
	}

	/* Outcomes and counts of the entities decided in memory; the outbox rows, in input order. */
	for (const Chain &c : chains) {
		if (!c.set_based || c.events.empty())
			continue;
		AddCounts(counters_[c.t->relid], c.counts);
		for (size_t j = 0; j < c.events.size(); j++)
			out[begin + c.events[j]] = c.outcomes[j];
	}
	stage("writing their outbox rows", nullptr);
	deferred_outbox = nullptr;
	FlushOutbox(queue, counters_);
}

} // namespace cdc::pg

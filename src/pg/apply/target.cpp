// Target metadata and its backend cache (see target.hpp): reading a
// destination table's columns, key, unique indexes and row independence
// from the catalogs, its cdc.mapping and cdc.table_barrier rows, and the
// resolution of source tables to targets.  The cache is a plain pointer
// created on first use; its invalidation callbacks are noexcept plain C++
// that call nothing of PostgreSQL.
//
// Glue: the *Pg functions are PostgreSQL regime (plain C data, called only
// through PgCall); everything else is C++ regime.  Must not write anything:
// writes belong to single.cpp, segment.cpp and outbox.cpp.
#include "pg/apply/target.hpp"
#include "pg/apply/state_store.hpp"

#include "core/errors.hpp"
#include "core/json.hpp"
#include "pg/apply/internal.hpp"
#include "pg/apply/target.hpp"
#include "pg/context_allocator.hpp"
#include "pg/spi.hpp"

#include <algorithm>

extern "C" {
#include "access/genam.h"
#include "access/nbtree.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/catalog.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/rls.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

namespace cdc::pg {

/*
 * Whether the key columns of index `idx` are exactly `cols` (any order, as
 * ON CONFLICT (cols) infers an index); with `pos`, pos[i] gets the position
 * in `cols` of the index's i-th key column.  PostgreSQL regime.
 */
static bool
IndexKeyIsPg(Form_pg_index idx, const AttrNumber *cols, int ncols, int *pos)
{
	if (idx->indnkeyatts != ncols)
		return false;
	for (int i = 0; i < ncols; i++) {
		int at = -1, in_index = 0;
		for (int k = 0; k < ncols; k++) {
			if (idx->indkey.values[i] == cols[k])
				at = k;
			if (idx->indkey.values[k] == cols[i])
				in_index++;
		}
		/* both ways: an index on (a, a) is not one on (a, b) */
		if (at < 0 || in_index == 0)
			return false;
		if (pos != NULL)
			pos[i] = at;
	}
	return true;
}

int
PrimaryKeyColumnsPg(Relation rel, AttrNumber *cols)
{
	const Oid pkoid = RelationGetPrimaryKeyIndex(rel);
	if (!OidIsValid(pkoid))
		return 0;
	HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pkoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for index %u", pkoid);
	Form_pg_index idx = (Form_pg_index) GETSTRUCT(tup);
	const int n = idx->indnkeyatts;
	for (int i = 0; i < n; i++)
		cols[i] = idx->indkey.values[i];
	ReleaseSysCache(tup);
	return n;
}

/*
 * The valid, immediate, non-partial unique index without expressions whose
 * key columns are exactly `cols` (in any order), as ON CONFLICT (cols)
 * infers it; InvalidOid if there is none.  PostgreSQL regime.
 */
Oid
UniqueIndexOnPg(Relation rel, const AttrNumber *cols, int ncols)
{
	List *indexes = RelationGetIndexList(rel);
	Oid found = InvalidOid;
	ListCell *lc;
	foreach (lc, indexes) {
		HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		if (!HeapTupleIsValid(tup))
			continue;
		Form_pg_index idx = (Form_pg_index) GETSTRUCT(tup);
		const bool ok = idx->indisunique && idx->indimmediate && idx->indisvalid && IndexKeyIsPg(idx, cols, ncols, NULL) &&
		                heap_attisnull(tup, Anum_pg_index_indpred, NULL) && heap_attisnull(tup, Anum_pg_index_indexprs, NULL);
		ReleaseSysCache(tup);
		if (ok) {
			found = lfirst_oid(lc);
			break;
		}
	}
	list_free(indexes);
	return found;
}

namespace {

/* What the PostgreSQL regime reads about a relation (plain C data). */
struct RelInfoPg {
	char relkind;
	bool relispartition;
	Oid relowner;
	bool has_rules; /* rewrite rules (pg_rewrite rows) on the table itself */
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
	info->relispartition = rel->rd_rel->relispartition;
	info->relowner = rel->rd_rel->relowner;
	/* pg_class.relhasrules stays true after the last DROP RULE: the relcache's rules are exact */
	info->has_rules = rel->rd_rules != NULL && rel->rd_rules->numLocks > 0;
	info->nspname = get_namespace_name(RelationGetNamespace(rel));
	info->relname = pstrdup(RelationGetRelationName(rel));
	info->natts = desc->natts;
	info->attrs = (Form_pg_attribute *) palloc(sizeof(Form_pg_attribute) * desc->natts);
	for (int i = 0; i < desc->natts; i++) {
		info->attrs[i] = (Form_pg_attribute) palloc(ATTRIBUTE_FIXED_PART_SIZE);
		memcpy(info->attrs[i], TupleDescAttr(desc, i), ATTRIBUTE_FIXED_PART_SIZE);
	}
	info->npk = PrimaryKeyColumnsPg(rel, info->pk);
	table_close(rel, NoLock); /* keep the lock until end of transaction */
	return info;
}

} // namespace

/* pg_type.typname of `type`, or NULL */
static char *
TypeNamePg(Oid type)
{
	HeapTuple tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
	if (!HeapTupleIsValid(tup))
		return NULL;
	char *name = pstrdup(NameStr(((Form_pg_type) GETSTRUCT(tup))->typname));
	ReleaseSysCache(tup);
	return name;
}

/*
 * Do equal values of operator class `opclass` under `collation` print
 * alike?  The operator class's BTEQUALIMAGE_PROC answers where it has one
 * (as nbtree's deduplication asks it).  Without one: not under a
 * nondeterministic collation, not for jsonb ('{"a": 1.0}' = '{"a": 1}') nor
 * citext ('a' = 'A'); other types that do not say (extension types such as
 * ltree or isbn, whose output is canonical) are trusted, as before.
 */
static bool
OpclassPrintsAlikePg(Oid opclass, Oid collation)
{
	const Oid family = get_opclass_family(opclass);
	const Oid intype = get_opclass_input_type(opclass);
	const Oid proc = get_opfamily_proc(family, intype, intype, BTEQUALIMAGE_PROC);
	if (OidIsValid(proc))
		return DatumGetBool(OidFunctionCall1Coll(proc, collation, ObjectIdGetDatum(intype)));
	if (OidIsValid(collation) && !get_collation_isdeterministic(collation))
		return false;
	const Oid base = getBaseType(intype);
	if (base == JSONBOID)
		return false;
	char *name = TypeNamePg(base);
	const bool citext = name != NULL && strcmp(name, "citext") == 0;
	return !citext;
}

/* Do equal values of `type` under `collation` always print one key text?  (AmbiguousKeyColumnPg) */
static bool
KeyTextIdentityPg(Oid type, int32 typmod, Oid collation)
{
	check_stack_depth();
	type = getBaseTypeAndTypmod(type, &typmod);
	switch (type) {
	case NUMERICOID:
	case FLOAT4OID:
	case FLOAT8OID: return true; /* KeyTextPg prints every equal number alike (1.0 as 1, -0 as 0) */
	/*
	 * Not normalised, and accepted: '1 day' and '24:00:00' are equal and
	 * print differently, but a source holds one of them per key, and
	 * Debezium's interval encodings (microseconds, ISO 8601) reach the
	 * engine as one spelling per value (docs/semantics.md, "Destination
	 * tables").
	 */
	case INTERVALOID: return true;
	case BPCHAROID:
		/*
		 * char(n) pads every value to n, so equal values print alike
		 * (bpchar_ops has no image equality: trailing blanks are
		 * insignificant); an unpadded bpchar prints 'a' and 'a ' apart.
		 */
		return typmod >= 0;
	default: break;
	}
	const Oid elem = get_element_type(type);
	if (OidIsValid(elem))
		return KeyTextIdentityPg(elem, typmod, collation); /* an array's typmod is its elements' (char(n)[] pads them) */
	if (type_is_range(type))
		return KeyTextIdentityPg(get_range_subtype(type), -1, get_range_collation(type));
	if (type_is_multirange(type))
		return KeyTextIdentityPg(get_multirange_range(type), -1, collation);
	if (get_typtype(type) == TYPTYPE_COMPOSITE) {
		TupleDesc desc = lookup_rowtype_tupdesc(type, -1);
		bool same = true;
		for (int i = 0; i < desc->natts && same; i++) {
			Form_pg_attribute a = TupleDescAttr(desc, i);
			if (!a->attisdropped)
				same = KeyTextIdentityPg(a->atttypid, a->atttypmod, a->attcollation);
		}
		ReleaseTupleDesc(desc);
		return same;
	}
	const Oid opclass = GetDefaultOpClass(type, BTREE_AM_OID);
	/* no btree operator class: no unique index can hold it as a key */
	return !OidIsValid(opclass) || OpclassPrintsAlikePg(opclass, collation);
}

/* Key columns whose equal values can print different key texts: target.hpp. */
int
AmbiguousKeyColumnPg(Oid relid, const AttrNumber *attrs, int nattrs, Oid *by_index)
{
	*by_index = InvalidOid;
	for (int k = 0; k < nattrs; k++) {
		Oid type, collation;
		int32 typmod;
		get_atttypetypmodcoll(relid, attrs[k], &type, &typmod, &collation);
		if (!KeyTextIdentityPg(type, typmod, collation))
			return k;
	}
	/* the unique indexes on exactly the key columns decide which rows are one row */
	Relation rel = table_open(relid, NoLock);
	List *indexes = RelationGetIndexList(rel);
	int found = -1;
	ListCell *lc;
	foreach (lc, indexes) {
		HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
		Form_pg_index idx = (Form_pg_index) GETSTRUCT(tup);
		if (idx->indisunique) {
			bool isnull;
			oidvector *classes = (oidvector *) DatumGetPointer(SysCacheGetAttr(INDEXRELID, tup, Anum_pg_index_indclass, &isnull));
			oidvector *collations =
				(oidvector *) DatumGetPointer(SysCacheGetAttr(INDEXRELID, tup, Anum_pg_index_indcollation, &isnull));
			/* the index's columns, each matched with a key column (an expression or another column: not this key's index) */
			int pos[INDEX_MAX_KEYS];
			const bool exact = IndexKeyIsPg(idx, attrs, nattrs, pos);
			for (int i = 0; exact && i < nattrs && found < 0; i++) {
				Oid type, collation;
				int32 typmod;
				get_atttypetypmodcoll(relid, attrs[pos[i]], &type, &typmod, &collation);
				const Oid opclass = classes->values[i];
				const bool same = opclass == GetDefaultOpClass(type, BTREE_AM_OID)
				                      ? KeyTextIdentityPg(type, typmod, collations->values[i])
				                      : OpclassPrintsAlikePg(opclass, collations->values[i]);
				if (!same) {
					found = pos[i];
					*by_index = idx->indexrelid;
				}
			}
		}
		ReleaseSysCache(tup);
		if (found >= 0)
			break;
	}
	list_free(indexes);
	table_close(rel, NoLock);
	return found;
}

char *
AmbiguousKeyMessagePg(const char *column, const char *display, const char *type_name, const char *by_index)
{
	if (by_index != NULL)
		return psprintf("key column \"%s\" of table %s is compared by unique index \"%s\" under a collation or operator "
		                "class that takes values of different text as equal, which entity records cannot tell apart",
		                column, display, by_index);
	return psprintf("key column \"%s\" of table %s is of type %s, whose equal values can differ in text, which entity "
	                "records cannot tell apart",
	                column, display, type_name);
}

void
AmbiguousKeyErrorPg(const char *column, const char *display, const char *type_name, const char *by_index)
{
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	                errmsg_internal("%s", AmbiguousKeyMessagePg(column, display, type_name, by_index)),
	                errdetail("%s", kAmbiguousKeyDetail), errhint("%s", kAmbiguousKeyHint)));
}

namespace {

/* Is there such a unique index on exactly these columns? */
bool
HasUniqueIndexPg(Oid relid, const AttrNumber *cols, int ncols)
{
	Relation rel = table_open(relid, NoLock);
	bool found = OidIsValid(UniqueIndexOnPg(rel, cols, ncols));
	table_close(rel, NoLock);
	return found;
}

/*
 * Are the rows of this table independent of each other, so that writing
 * one row earlier, later or not at all can only be seen in that row?  A
 * plain table (not partitioned) with no triggers (which also rules out
 * foreign keys in either direction: they are triggers), no rules, no
 * row-level security, no CHECK constraints, no inheritance children (the
 * statements now reach only the parent's own rows, Target::own_rows, but
 * such a parent stays on the statement path), and no unique or exclusion index
 * other than the one on the key columns.
 */
bool
IndependentRowsPg(Oid relid, const AttrNumber *key, int nkey)
{
	Relation rel = table_open(relid, NoLock);
	bool ok = rel->rd_rel->relkind == RELKIND_RELATION && rel->trigdesc == NULL && rel->rd_rules == NULL &&
	          !rel->rd_rel->relrowsecurity && !rel->rd_rel->relhassubclass && rel->rd_rel->relchecks == 0;
	List *indexes = ok ? RelationGetIndexList(rel) : NIL;
	ListCell *lc;
	foreach (lc, indexes) {
		HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
		Form_pg_index idx = (Form_pg_index) GETSTRUCT(tup);
		if (idx->indisunique || idx->indisexclusion)
			ok = ok && !idx->indisexclusion && IndexKeyIsPg(idx, key, nkey, NULL);
		ReleaseSysCache(tup);
	}
	table_close(rel, NoLock);
	return ok;
}

/*
 * May an INSERT ... ON CONFLICT DO UPDATE of the table fire triggers
 * when it finds the row that an UPDATE does not fire: BEFORE INSERT row
 * triggers and INSERT statement triggers, whatever their enabled state
 * (the session's session_replication_role decides which fire).  A
 * partitioned table counts as having them: its partitions' own row
 * triggers, which the upsert routed to the partition fires, are not in its
 * descriptor, and a trigger created on a partition later does not reach
 * the cached target (regress update_suppressed).
 */
static bool
UpsertFiresInsertTriggersPg(Oid relid)
{
	Relation rel = table_open(relid, NoLock);
	const TriggerDesc *td = rel->trigdesc;
	bool found = rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE ||
	             (td != NULL && (td->trig_insert_before_row || td->trig_insert_before_statement ||
	                             td->trig_insert_after_statement || td->trig_insert_instead_row));
	table_close(rel, NoLock);
	return found;
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

ColumnType
MakeColumnType(const std::string &column, Oid type, int32 typmod)
{
	ColumnType ct;
	ct.column = column;
	Oid elem = InvalidOid;
	ct.family = PgCall([&]() { return FamilyPg(type, &elem); });
	ct.type_name = PgCall([&]() { return format_type_with_typemod(type, typmod); });
	if (ct.family == ColumnType::Family::Array) {
		ct.element = std::make_shared<ColumnType>(MakeColumnType(column, elem, -1));
		ct.element->column_type_name = ct.type_name; /* the column's type in an element's messages */
	}
	return ct;
}

/* Reads the cdc.mapping row of a target, if any. */
void
ReadMapping(Oid relid, Mapping &m)
{
	Params p;
	p.AddOid(relid);
	uint64_t n = Execute("SELECT pg_catalog.array_to_string(key_columns, pg_catalog.chr(1)), version_column, "
	                     "source_epoch, outbox, outbox_topic, truncate_policy, unavailable_placeholder, temporal_unit, "
	                     "conflict_policy, source_name, ordering, outbox_via "
	                     "FROM cdc.mapping WHERE target OPERATOR(pg_catalog.=) $1",
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
	m.source_name = ResultText(0, 10);
	m.stream_ordered = ResultText(0, 11).value_or("entity") == "stream";
	m.outbox_message = ResultText(0, 12).value_or("table") == "message";
}

void
ReadBarrier(Target &t)
{
	Params p;
	p.AddOid(t.relid);
	uint64_t n = Execute("SELECT source_name, version::pg_catalog.text FROM cdc.table_barrier "
	                     "WHERE target OPERATOR(pg_catalog.=) $1",
	                     p, true);
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
/*
 * Resolutions of (source name, schema, table) of events sent without a
 * target, keyed by event values: at most kMaxResolvedEntries, in a context of
 * their own ("cdc_apply resolved source tables"), and emptied rather than
 * grown past that (a caller sending ever new source names to a mapping
 * without source_name grew its backend without limit; with the id caches,
 * 200,000 names took 84 MB of malloc memory; sql/event_cache_bound.sql).
 */
constexpr size_t kMaxResolvedEntries = 1024;
using ResolvedMap = std::unordered_map<ContextString, Oid, ContextStringHash, std::equal_to<ContextString>,
                                       ContextAllocator<std::pair<const ContextString, Oid>>>;

struct TargetCache {
	std::map<Oid, std::shared_ptr<Target>> targets;
	ResolvedMap *resolved = nullptr;     // "source\nschema\ntable" -> target (created with the cache)
	MemoryContext resolved_context = nullptr;
	Oid mapping_relid = InvalidOid;      // cdc.mapping: its invalidation empties the cache
	MemoryContext context = nullptr;     // FmgrInfo of cached targets (a reload leaks its few bytes here)
	uint64_t invalidations = 0;          // callbacks so far: a load that saw one is not cached
};
TargetCache *target_cache = nullptr;

// Changes of roles and memberships (pg_authid, pg_auth_members) delivered
// to this backend so far: an engine's Authorize() decided before one is
// decided again (the role a group applies a table as, security review h4,
// TAP 156).  Plain C++ that cannot throw.
uint64_t role_changes = 0;
void
RoleChanged(Datum, int, uint32) noexcept
{
	role_changes++;
}

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
		target_cache->resolved->clear();
		target_cache->mapping_relid = InvalidOid; /* looked up again: the extension may have been re-created */
		return;
	}
	target_cache->targets.erase(relid);
	/* a target whose partition tree holds relid: an ATTACH or DETACH may have changed the tree */
	for (auto it = target_cache->targets.begin(); it != target_cache->targets.end();)
		it = std::find(it->second->tree.begin(), it->second->tree.end(), relid) != it->second->tree.end()
		         ? target_cache->targets.erase(it)
		         : std::next(it);
	for (auto it = target_cache->resolved->begin(); it != target_cache->resolved->end();)
		it = it->second == relid ? target_cache->resolved->erase(it) : std::next(it);
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
		struct Contexts {
			MemoryContext targets, resolved;
		};
		Contexts cxt = PgCall([]() {
			Contexts c;
			c.targets = AllocSetContextCreate(CacheMemoryContext, "cdc_apply target cache", ALLOCSET_SMALL_SIZES);
			c.resolved = AllocSetContextCreate(CacheMemoryContext, "cdc_apply resolved source tables", ALLOCSET_SMALL_SIZES);
			CacheRegisterRelcacheCallback(InvalidateTargets, (Datum) 0);
			CacheRegisterSyscacheCallback(PROCOID, InvalidateHandlerTargets, (Datum) 0);
			CacheRegisterSyscacheCallback(AUTHOID, RoleChanged, (Datum) 0);
			CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, RoleChanged, (Datum) 0);
			return c;
		});
		auto *resolved = new ResolvedMap(16, ContextStringHash(), std::equal_to<ContextString>(),
		                                 ContextAllocator<std::pair<const ContextString, Oid>>(cxt.resolved));
		target_cache = new TargetCache();
		target_cache->context = cxt.targets;
		target_cache->resolved_context = cxt.resolved;
		target_cache->resolved = resolved;
	}
	if (!OidIsValid(target_cache->mapping_relid))
		target_cache->mapping_relid =
			PgCall([]() { return get_relname_relid("mapping", get_namespace_oid("cdc", false)); });
	return *target_cache;
}

} // namespace

// Family of a (base) type, for decoding and key texts: see target.hpp.
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

/*
 * A truncate takes the target's ACCESS EXCLUSIVE lock before anything else
 * (before the claim and before the ROW EXCLUSIVE lock of LoadTarget), so two
 * sessions applying the same truncate queue on the lock instead of
 * deadlocking on a lock upgrade; the second then finds the claim taken.
 */
void
ApplyEngine::LockForTruncate(Oid relid)
{
	CheckBeforeLock(relid);
	CheckTruncateBeforeLock(relid);
	PgCall([&]() { LockRelationOid(relid, AccessExclusiveLock); });
}

Target &
ApplyEngine::LoadTarget(Oid relid)
{
	auto it = targets_.find(relid);
	if (it != targets_.end())
		return *it->second;

	/* The lock first: taking it delivers pending invalidations to the cache. */
	CheckBeforeLock(relid);
	PgCall([&]() { LockRelationOid(relid, RowExclusiveLock); });
	bool exists = PgCall([&]() { return SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)); });
	if (!exists)
		Fail("42P01", "target relation with OID " + std::to_string(relid) + " does not exist");
	TargetCache &cache = Cache();
	auto hit = cache.targets.find(relid);
	if (hit != cache.targets.end()) {
		CheckPartitionTree(*hit->second);
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
	t->owner = info->relowner;
	if (info->relkind != RELKIND_RELATION && info->relkind != RELKIND_PARTITIONED_TABLE)
		Fail("42809", "target " + t->qualified + " is not a table");
	/*
	 * Never a table with rewrite rules (review, sql/target_rules.sql).  The
	 * engine writes rows partly through the executor, which fires no rules
	 * (as PostgreSQL's own logical replication apply), and partly through
	 * SQL statements, which the rewriter rewrites: a DO INSTEAD NOTHING
	 * delete rule answered 'applied' with a tombstone while the row stayed,
	 * an insert rule made the upsert fail, and which of the two a change
	 * took depended on the path.  Both paths and every op (a truncate, which
	 * fires no rule, too) load the target here, under its lock.  Read once
	 * per metadata read: CREATE RULE and DROP RULE invalidate the cached
	 * metadata, which never holds a table with rules, so a cache hit costs
	 * nothing.  The table's own rules only: a row routed to a partition
	 * never fires the partition's rules, by the executor or by a statement.
	 * Errors: 0A000.
	 */
	if (info->has_rules)
		FailHasRules(t->qualified.c_str(), relid);
	t->own_rows = info->relkind == RELKIND_RELATION ? "ONLY " + t->qualified : t->qualified;

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
		c.identity_always = a->attidentity == ATTRIBUTE_IDENTITY_ALWAYS;
		c.not_null = a->attnotnull;
		c.ctype = MakeColumnType(c.name, c.type, c.typmod);
		c.user_type = c.type >= FirstNormalObjectId;
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
			c.domain = get_typtype(c.type) == TYPTYPE_DOMAIN;
			get_typlenbyvalalign(c.type, &c.typlen, &c.typbyval, &c.typalign);
			c.deterministic = !OidIsValid(a->attcollation) || get_collation_isdeterministic(a->attcollation);
		});
		t->by_name[c.name] = int(t->columns.size());
		t->columns.push_back(std::move(c));
	}

	t->jsonb_order.resize(t->columns.size());
	for (size_t i = 0; i < t->columns.size(); i++)
		t->jsonb_order[i] = int(i);
	std::stable_sort(t->jsonb_order.begin(), t->jsonb_order.end(), [&](int a, int b) {
		const std::string &x = t->columns[size_t(a)].name, &y = t->columns[size_t(b)].name;
		return x.size() != y.size() ? x.size() < y.size() : x.compare(y) < 0; /* bytewise, as memcmp */
	});

	ReadMapping(relid, t->mapping);
	t->modes = LoadModeConfig(relid, t->qualified);
	const bool history = t->modes.mode == Mode::History;

	/* The key: the mapping's key_columns (backed by a unique index) or the primary key. */
	if (!t->mapping.key_columns.empty()) {
		std::vector<AttrNumber> attrs;
		for (const auto &k : t->mapping.key_columns) {
			auto f = t->by_name.find(k);
			if (f == t->by_name.end())
				Fail("42703", "key column \"" + k + "\" of the mapping does not exist in table " + t->qualified);
			t->key.push_back(f->second);
			attrs.push_back(t->columns[size_t(f->second)].attnum);
		}
		/* A history table holds many rows per key: its unique index is (cdc_key, cdc_version). */
		bool unique = history || PgCall([&]() { return HasUniqueIndexPg(relid, attrs.data(), int(attrs.size())); });
		if (!unique)
			Fail("42P10", "table " + t->qualified + " has no unique index on the mapping's key columns", {},
			     "Create a unique index (not partial, not deferrable) on exactly the key columns.");
	} else {
		if (history)
			Fail("42P10", "history table " + t->qualified + " needs the mapping's key_columns", {},
			     "Register the mapping with key_columns naming the entity key columns of the history table.");
		if (info->npk == 0)
			Fail("42P10", "table " + t->qualified + " has no primary key and its mapping declares no key columns",
			     "A DEFERRABLE primary key does not count: conflicts are decided by an immediate unique index.",
			     "Add a primary key (not deferrable), or register the mapping with key_columns backed by a "
			     "non-deferrable unique index.");
		for (int i = 0; i < info->npk; i++)
			for (size_t c = 0; c < t->columns.size(); c++)
				if (t->columns[c].attnum == info->pk[i])
					t->key.push_back(int(c));
	}
	for (int k : t->key) {
		Column &kc = t->columns[size_t(k)];
		/*
		 * Entity records name an entity by its key's text; under a
		 * nondeterministic collation 'abc' and 'ABC' are one row with two
		 * texts, so a delete of one would not stop a late change of the
		 * other (found by a fresh-user run: a deleted row came back).
		 */
		if (!kc.deterministic)
			Fail("0A000",
			     "key column \"" + kc.name + "\" of table " + t->qualified +
			         " has a nondeterministic collation: equal keys can differ in text, which entity records cannot "
			         "tell apart",
			     {}, "Give the key column a deterministic collation (ALTER TABLE ... ALTER COLUMN ... TYPE ... COLLATE \"C\"), "
			         "or key the mapping by other columns (key_columns).");
		/*
		 * The destination computes a generated column and the engine never
		 * writes one (ConvertImage drops its value, as PostgreSQL's own
		 * subscriber does), so a generated key column has no value to name
		 * the entity with: every change failed with 'field "after.g" is
		 * missing' although the event carried it (found by a fresh-user run).
		 */
		if (kc.generated)
			Fail("0A000",
			     "key column \"" + kc.name + "\" of table " + t->qualified +
			         " is a generated column: the destination computes it, so an event cannot name a row by it",
			     {}, "Key the mapping by other columns backed by a unique index (key_columns), or make the column an "
			         "ordinary one (ALTER TABLE ... ALTER COLUMN ... DROP EXPRESSION).");
		kc.eq_op = PgCall([&]() { return EqualityOperatorPg(kc.type); });
	}
	{
		std::vector<AttrNumber> key_attrs;
		for (int k : t->key)
			key_attrs.push_back(t->columns[size_t(k)].attnum);
		/*
		 * Where entity records decide (not on a stream-ordered target, which
		 * keeps none: its key texts only name outbox rows).
		 */
		if (!t->mapping.stream_ordered)
			PgCall([&]() {
				Oid by_index;
				const int k = AmbiguousKeyColumnPg(relid, key_attrs.data(), int(key_attrs.size()), &by_index);
				if (k >= 0) {
					const Column &kc = t->columns[size_t(t->key[size_t(k)])];
					AmbiguousKeyErrorPg(kc.name.c_str(), t->qualified.c_str(), kc.ctype.type_name.c_str(),
					                    OidIsValid(by_index) ? get_rel_name(by_index) : NULL);
				}
			});
		t->independent_rows = PgCall([&]() { return IndependentRowsPg(relid, key_attrs.data(), int(key_attrs.size())); });
		t->upsert_fires_insert_triggers = PgCall([&]() { return UpsertFiresInsertTriggersPg(relid); });
	}
	for (size_t c = 0; c < t->columns.size(); c++) {
		if (!t->columns[c].identity_always)
			continue;
		t->has_identity_always = true;
		if (std::find(t->key.begin(), t->key.end(), int(c)) == t->key.end()) {
			t->has_nonkey_identity_always = true;
			/* MutateTarget compares it with the change's value (single.cpp, SameIdentity) */
			Column &ic = t->columns[c];
			ic.eq_op = PgCall([&]() { return EqualityOperatorPg(ic.type); });
		}
	}
	if (!t->mapping.version_column.empty()) {
		auto f = t->by_name.find(t->mapping.version_column);
		if (f == t->by_name.end())
			Fail("42703", "version column \"" + t->mapping.version_column + "\" does not exist in table " +
			                  t->qualified);
		t->version_col = f->second;
		/* computed by the destination, never written: its value in an event is dropped like a generated key's */
		if (t->columns[size_t(f->second)].generated)
			Fail("0A000",
			     "version column \"" + t->mapping.version_column + "\" of table " + t->qualified +
			         " is a generated column: the destination computes it, so an event cannot order changes by it",
			     {}, "Register the mapping without version_column (changes are then ordered by their source position), "
			         "or make the column an ordinary one (ALTER TABLE ... ALTER COLUMN ... DROP EXPRESSION).");
		if (t->mapping.stream_ordered)
			Fail("55000", "table " + t->qualified + " is stream-ordered but its mapping orders changes by version_column",
			     "Stream ordering compares source positions (docs/semantics.md, \"Stream ordering\").",
			     "Switch it to entity ordering with cdc.set_ordering(target, 'entity'), or register the mapping "
			     "without version_column.");
	}
	ReadBarrier(*t);
	if (t->mapping.registered && !t->mapping.stream_ordered)
		t->stream_marks = ReadStreamMarks(relid);
	if (info->relkind == RELKIND_PARTITIONED_TABLE || info->relispartition)
		ReadPartitionTree(*t);

	if (cache.invalidations == invalidations_before)
		cache.targets[relid] = t;
	CheckPartitionTree(*t);
	targets_[relid] = t;
	return *t;
}

/*
 * The other members of t's partition tree and the first of them (by name)
 * that has a mapping.  Read with the metadata, under the target's lock.
 * Partitions are found in pg_inherits, not with pg_partition_tree(), which
 * takes ACCESS SHARE on every partition of the tree: a call whose rows go to
 * one partition waited for a lock on another (a VACUUM FULL, an ALTER TABLE
 * of it), where PostgreSQL's own INSERT does not, and the load locked every
 * partition however many (review h1; isolation partition_tree_lock).
 * pg_partition_ancestors() locks nothing.  t.tree keeps the members whose
 * relcache invalidation can mean a changed tree: the ancestors and the
 * partitioned descendants (ATTACH, DETACH, CREATE TABLE ... PARTITION OF and
 * DROP of a partition invalidate its parent, a change of a mapping empties
 * the cache), not the leaves, whose ANALYZE or autovacuum would otherwise
 * drop the entry and read the whole tree again.
 */
void
ApplyEngine::ReadPartitionTree(Target &t)
{
	Params p;
	p.AddOid(t.relid);
	uint64_t n = Execute("WITH RECURSIVE d(relid) AS ("
	                     "  SELECT i.inhrelid FROM pg_catalog.pg_inherits i WHERE i.inhparent OPERATOR(pg_catalog.=) $1 "
	                     "  UNION SELECT i.inhrelid FROM pg_catalog.pg_inherits i "
	                     "  JOIN d ON i.inhparent OPERATOR(pg_catalog.=) d.relid) "
	                     "SELECT tr.relid::pg_catalog.oid, "
	                     "  (SELECT pg_catalog.quote_ident(ns.nspname) OPERATOR(pg_catalog.||) '.' "
	                     "          OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname) "
	                     "     FROM cdc.mapping mp JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) mp.target "
	                     "     JOIN pg_catalog.pg_namespace ns ON ns.oid OPERATOR(pg_catalog.=) c.relnamespace "
	                     "    WHERE mp.target OPERATOR(pg_catalog.=) tr.relid) AS mapped, "
	                     "  tr.relid OPERATOR(pg_catalog.<>) ALL (SELECT d.relid FROM d) "
	                     "  OR (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) tr.relid) "
	                     "     OPERATOR(pg_catalog.=) 'p' AS watched, tr.below "
	                     "FROM (SELECT a.relid, false AS below FROM pg_catalog.pg_partition_ancestors($1) a "
	                     "      UNION SELECT d.relid, true FROM d) tr "
	                     "WHERE tr.relid OPERATOR(pg_catalog.<>) $1 ORDER BY 2 NULLS LAST, 1",
	                     p, true);
	/* columns: the member, its mapped name (NULL: none), watched (kept in t.tree), below t */
	for (uint64_t r = 0; r < n; r++) {
		const Oid member = Oid(std::stoul(*ResultText(r, 1)));
		if (ResultText(r, 3).value_or("f") == "t")
			t.tree.push_back(member);
		if (auto name = ResultText(r, 2)) {
			if (!OidIsValid(t.tree_mapped)) {
				t.tree_mapped = member;
				t.tree_mapped_name = *name;
			}
			if (!OidIsValid(t.tree_mapped_below) && ResultText(r, 4).value_or("f") == "t") {
				t.tree_mapped_below = member;
				t.tree_mapped_below_name = *name;
			}
		}
	}
}

/*
 * A target in one partition tree with a mapped table (a partition and its
 * partitioned parent or any ancestor) is refused, 55000 naming both:
 * changes applied through each would give one row two entity records, so
 * a stale change through one could overwrite a newer one applied through
 * the other, or bring a deleted row back.  cdc.register_mapping refuses
 * registering such a pair (23505), but cannot see a later ATTACH PARTITION
 * of a mapped table to a mapped parent, nor a call naming an unmapped
 * partition (or parent) as its target (fresh-user review; regress
 * partition_apply_tree).  The worker's unmapped same-name targets with a
 * mapped ancestor (leaf changes of a partitioned table published without
 * publish_via_partition_root) are not refused: docs/worker.md "Limits of
 * this version"; with a mapped partition they are (TAP 129).
 */
void
ApplyEngine::CheckPartitionTree(const Target &t) const
{
	/*
	 * The worker's unmapped targets are exempt only from a mapped ancestor
	 * (the documented limit above); an unmapped root (or a partitioned
	 * partition) the worker applies through while one of its partitions is
	 * mapped is refused like any other target: the old code exempted it
	 * too, so the partition's rows got a second entity record (TAP 129).
	 */
	const bool worker_unmapped = worker_identity_ && !t.mapping.registered;
	const std::string &mapped_name = worker_unmapped ? t.tree_mapped_below_name : t.tree_mapped_name;
	if (!OidIsValid(worker_unmapped ? t.tree_mapped_below : t.tree_mapped))
		return;
	Fail("55000",
	     "table " + t.qualified + " and table " + mapped_name + " are in one partition tree and " + mapped_name +
	         " is mapped: changes cannot be applied to " + t.qualified,
	     "A row of a partition is also a row of its partitioned ancestors: applied through both tables, it would "
	     "have two entity records, and a stale change through one could overwrite a newer one applied through the "
	     "other, or bring a deleted row back.",
	     "Apply the changes through the mapped table, or keep one mapping in the tree (cdc.unregister_mapping); "
	     "a table attached as a partition after both were mapped needs one of them unregistered.");
}

Oid
ApplyEngine::ResolveTarget(const cdc::SourceInfo &source)
{
	/* "" said "missing" too (fresh-user review h3, regress input_polish) */
	if (source.table.empty())
		Fail("22023",
		     std::string("field \"source.table\" is ") + (source.table_empty ? "empty" : "missing") +
		         " and no target was given",
		     {}, "Pass the target table as the second argument of cdc_apply().");
	return ResolveSourceTable(source.name, source.schema, source.table, false);
}

Oid
ApplyEngine::ResolveSourceTable(const std::string &source_name, const std::string &schema, const std::string &table,
                                bool same_name_fallback)
{
	TargetCache &cache = Cache();
	const LastResolved *last = last_resolved_ ? &*last_resolved_ : nullptr;
	if (last && last->invalidations == cache.invalidations && last->same_name_fallback == same_name_fallback &&
	    last->table == table && last->schema == schema && last->source_name == source_name)
		return last->target;
	ContextString cache_key(ContextAllocator<char>(cache.resolved_context));
	cache_key.reserve(source_name.size() + schema.size() + table.size() + 2);
	cache_key.append(source_name).append("\n").append(schema).append("\n").append(table);
	auto cached = cache.resolved->find(cache_key);
	Oid target;
	if (cached != cache.resolved->end()) {
		target = cached->second;
	} else {
		const uint64_t invalidations_before = cache.invalidations;
		target = ResolveUncached(source_name, schema, table, same_name_fallback);
		if (cache.invalidations != invalidations_before)
			return target; /* it may be outdated already: not cached */
		if (cache.resolved->size() >= kMaxResolvedEntries)
			cache.resolved->clear(); /* full: start again rather than grow with every new name */
		cache.resolved->emplace(std::move(cache_key), target);
	}
	last_resolved_ = LastResolved{source_name, schema, table, same_name_fallback, cache.invalidations, target};
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
	uint64_t n = Execute("SELECT target::pg_catalog.oid FROM cdc.mapping "
	                     "WHERE source_schema OPERATOR(pg_catalog.=) $1 AND source_table OPERATOR(pg_catalog.=) $2 "
	                     "AND (source_name IS NULL OR source_name OPERATOR(pg_catalog.=) $3) "
	                     "ORDER BY source_name IS NULL LIMIT 1",
	                     p, true);
	if (n > 0)
		return Oid(std::stoul(*ResultText(0, 1)));
	if (same_name_fallback) {
		Params q;
		q.AddText(QuoteIdent(schema) + "." + QuoteIdent(table));
		n = Execute("SELECT pg_catalog.to_regclass($1)::pg_catalog.oid", q, true);
		if (n > 0 && ResultText(0, 1))
			return Oid(std::stoul(*ResultText(0, 1)));
		Fail("42P01", "published table " + QuoteIdent(schema) + "." + QuoteIdent(table) + " has no destination table", {},
		     "Create " + QuoteIdent(schema) + "." + QuoteIdent(table) +
		         " in the destination database, or map it with cdc.register_mapping(..., source_name => <subscription name>).");
	}
	/*
	 * An event without source.schema (a MySQL connector's, say) matches no
	 * mapping: every mapping names a source schema (review h3: the message
	 * read ".t").
	 */
	/*
	 * The names are cut beyond a PostgreSQL identifier's 63 bytes only, not
	 * at the 40 bytes of other values: two 63-byte table names that differ
	 * at the end gave one message (fresh-user review h3,
	 * sql/long_source_names.sql).
	 */
	constexpr std::size_t name_bytes = NAMEDATALEN - 1;
	if (schema.empty())
		Fail("42P01", "no mapping for source table " + cdc::QuotedField(cdc::ClippedForMessage(table, name_bytes)) +
		                  ": the event has no source.schema",
		     "source.name is " + cdc::QuotedField(cdc::ClippedForMessage(source_name)),
		     "Pass the target table to cdc_apply(): a mapping always names the source schema it routes.");
	/* event values, cut (a table name can be up to kMaxSourceIdentifierBytes) */
	Fail("42P01", "no mapping for source table " + cdc::QuotedField(cdc::ClippedForMessage(schema, name_bytes) + "." +
	                                                                 cdc::ClippedForMessage(table, name_bytes)),
	     "source.name is " + cdc::QuotedField(cdc::ClippedForMessage(source_name)),
	     "Register one with cdc.register_mapping(), or pass the target table to cdc_apply().");
}

void
CheckPrivileges(Oid relid, const std::string &display, Oid role, bool worker)
{
	AclMode needed = ACL_SELECT | ACL_INSERT | ACL_UPDATE | ACL_DELETE;
	AclMode have = PgCall([&]() { return pg_class_aclmask(relid, role, needed, ACLMASK_ALL); });
	if ((have & needed) == needed)
		return;
	std::string user = PgCall([&]() { return GetUserNameFromId(role, false); });
	if (worker)
		Fail("42501", "permission denied for table " + display + ": role \"" + user +
		                  "\" lacks SELECT, INSERT, UPDATE or DELETE on it",
		     {}, "Grant them to that role, or let the subscription apply as the table's owner (run_as_owner => false).");
	Fail("42501", "permission denied for table " + display,
	     "cdc_apply() needs SELECT, INSERT, UPDATE and DELETE on the target; role \"" + user + "\" lacks some of them.");
}

namespace {

/* "schema.table" of a relation without locking it; NULL if it does not exist. */
char *
RelationDisplayPg(Oid relid)
{
	char *rel = get_rel_name(relid);
	if (rel == NULL)
		return NULL;
	char *nsp = get_namespace_name(get_rel_namespace(relid));
	return pstrdup(quote_qualified_identifier(nsp ? nsp : "?", rel));
}

/*
 * The first partition, at any level, of partitioned table `relid` whose
 * pg_class row satisfies `pred` (InvalidOid if none, or if relid is not a
 * partitioned table); the partitions are locked with `lockmode` (NoLock:
 * read without locks).  A partition dropped meanwhile is skipped: no rows
 * can be routed to it.  PostgreSQL regime; pred must not throw.
 */
template <typename Pred>
Oid
FindPartitionPg(Oid relid, LOCKMODE lockmode, Pred pred)
{
	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return InvalidOid;
	List *all = find_all_inheritors(relid, lockmode, NULL);
	Oid found = InvalidOid;
	ListCell *lc;
	foreach (lc, all) {
		const Oid part = lfirst_oid(lc);
		if (part == relid)
			continue;
		HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(part));
		if (!HeapTupleIsValid(tup))
			continue;
		const bool match = pred((Form_pg_class) GETSTRUCT(tup));
		ReleaseSysCache(tup);
		if (match) {
			found = part;
			break;
		}
	}
	list_free(all);
	return found;
}

} // namespace

/* The engine's and cdc._write_mapping's classification of targets (target.hpp). */
TargetClass
ClassifyTargetPg(Oid relid, Oid *unlogged)
{
	*unlogged = InvalidOid;
	if (IsCatalogRelationOid(relid))
		return TargetClass::Internal;
	HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		return TargetClass::Usable;
	const Form_pg_class form = (Form_pg_class) GETSTRUCT(tup);
	const Oid nsp = form->relnamespace;
	const char persistence = form->relpersistence;
	ReleaseSysCache(tup);
	if (nsp == PG_CATALOG_NAMESPACE || IsToastNamespace(nsp) || nsp == get_namespace_oid("cdc", true))
		return TargetClass::Internal;
	if (persistence == RELPERSISTENCE_TEMP)
		return TargetClass::Temporary;
	*unlogged = persistence == RELPERSISTENCE_UNLOGGED
	                ? relid
	                : FindPartitionPg(relid, NoLock, [](Form_pg_class part) {
		                  return part->relpersistence == RELPERSISTENCE_UNLOGGED;
	                  });
	return OidIsValid(*unlogged) ? TargetClass::Unlogged : TargetClass::Usable;
}

/* A target with rewrite rules (LoadTarget): 0A000 naming it. */
void
ApplyEngine::FailHasRules(const char *display, Oid relid)
{
	const std::string what = display ? std::string(display) : std::to_string(relid);
	Fail("0A000", "target " + what + " has rewrite rules",
	     "cdc_apply writes a target's rows both through the executor, which fires no rules (as PostgreSQL's logical "
	     "replication apply does not), and through SQL statements, which do: its rows would not be what the "
	     "outcomes say.",
	     "Drop the table's rules (DROP RULE ... ON " + what +
	         "; \\d lists them), or do their work in a trigger (ENABLE ALWAYS to fire under the worker too).");
}

void
ApplyEngine::CheckBeforeLock(Oid relid)
{
	/*
	 * Never a system catalog or a table of cdc_apply itself, on either path
	 * and before any lock: the worker resolves a published table by a
	 * mapping or by its schema and name, both of which the source controls
	 * (a published table named cdc.mapping would be copied into the
	 * destination's cdc.mapping and route another published table to, say,
	 * pg_catalog.pg_authid), and it applies as a superuser when the
	 * subscription's owner is one.  Errors: 42501.
	 */
	Oid unlogged = InvalidOid;
	const TargetClass cls = PgCall([&]() { return ClassifyTargetPg(relid, &unlogged); });
	if (cls == TargetClass::Internal) {
		const char *display = PgCall([&]() { return RelationDisplayPg(relid); });
		Fail("42501", "table " + std::string(display ? display : std::to_string(relid)) +
		                  " cannot be a target: it is a system catalog or a table of cdc_apply itself",
		     worker_identity_ ? "A published table of this schema and name, or a mapping, resolved to it." : "",
		     "Apply to a table of your own schema; map the source table to it with cdc.register_mapping().");
	}
	/*
	 * Never a temporary table: its entity records, tombstones and counters
	 * are keyed by its OID and would outlive it, since a temporary table
	 * leaves without the sql_drop event trigger (at the session's end,
	 * ON COMMIT DROP, DISCARD TEMP), and a later table given the same OID
	 * would inherit them (cdc.register_mapping refuses it for the same
	 * reason; sql/dangling_target_state.sql).  Errors: 42809.
	 */
	if (cls == TargetClass::Temporary) {
		/* its schema (pg_temp_N) differs between sessions: the name alone, quoted when needed */
		const char *display = PgCall([&]() -> const char * {
			const char *rel = get_rel_name(relid);
			return rel ? quote_identifier(rel) : NULL;
		});
		Fail("42809", "target " + std::string(display ? display : std::to_string(relid)) + " is a temporary table",
		     "Entity records and ledger entries outlive the session; the table does not.",
		     "Apply to a permanent table.");
	}
	/*
	 * Never an unlogged table, nor a partitioned table with an unlogged
	 * partition: a crash empties it, while the ledger entries and entity
	 * records saying its rows were applied are WAL-logged and stay, so every
	 * redelivery of the lost rows (a whole replay too) is a duplicate and
	 * they never come back (review h4, sql/unlogged_target.sql).  Both paths.
	 * Errors: 42809.
	 */
	if (cls == TargetClass::Unlogged) {
		const char *display = PgCall([&]() { return RelationDisplayPg(unlogged); });
		const char *target_display = PgCall([&]() { return RelationDisplayPg(relid); });
		const std::string what = display ? std::string(display) : std::to_string(unlogged);
		Fail("42809",
		     unlogged == relid ? "target " + what + " is an unlogged table"
		                       : "target " + std::string(target_display ? target_display : "?") +
		                             " has an unlogged partition " + what,
		     "A crash empties an unlogged table, while the ledger entries and entity records of its rows stay: "
		     "their redeliveries would be duplicates and the rows would never come back.",
		     "ALTER TABLE " + what + " SET LOGGED, or apply to a permanent table.");
	}
	/* The worker applies to the tables its superuser-made subscription names. */
	if (worker_identity_)
		return;
	const char *display = PgCall([&]() { return RelationDisplayPg(relid); });
	if (display == nullptr)
		Fail("42P01", "target relation with OID " + std::to_string(relid) + " does not exist");
	Oid user = PgCall([]() { return GetUserId(); });
	CheckPrivileges(relid, display, user, false);
}

/*
 * cdc_apply(): a truncate event that may run TRUNCATE on the target (a state
 * mapping under truncate_policy 'truncate', or no mapping) needs the
 * caller's TRUNCATE privilege, checked here with the others before the
 * ACCESS EXCLUSIVE lock, as TRUNCATE itself checks it before locking
 * (truncate_check_perms).  History and handler mappings write rows instead,
 * and policy 'ignore' writes nothing: they need no TRUNCATE.  The mapping is
 * read without a lock (the statement's own check stays the last word).
 * Errors: 42501 naming the table, the role and the privilege.
 */
void
ApplyEngine::CheckTruncateBeforeLock(Oid relid)
{
	if (worker_identity_)
		return;
	Oid user = PgCall([]() { return GetUserId(); });
	if (PgCall([&]() { return pg_class_aclcheck(relid, user, ACL_TRUNCATE); }) == ACLCHECK_OK)
		return;
	Params p;
	p.AddOid(relid);
	if (Execute("SELECT 1 FROM cdc.mapping WHERE target OPERATOR(pg_catalog.=) $1 "
	            "AND (truncate_policy OPERATOR(pg_catalog.=) 'ignore' OR mode OPERATOR(pg_catalog.<>) 'state')",
	            p, true) > 0)
		return;
	const char *display = PgCall([&]() { return RelationDisplayPg(relid); });
	std::string name = PgCall([&]() { return GetUserNameFromId(user, false); });
	Fail("42501", "permission denied for table " + std::string(display ? display : "?"),
	     "A truncate event under truncate_policy 'truncate' needs TRUNCATE on the target; role \"" + name +
	         "\" lacks it.",
	     "Grant TRUNCATE on the table to that role, or register the mapping with truncate_policy => 'ignore'.");
}

/*
 * The worker applies a partitioned target's changes as one role (`applier`)
 * for all of its partitions: the code attached to a partition (its
 * triggers, defaults, constraints, index expressions) runs as that role
 * when a row is routed to it.  A partition owned by a role that is not a
 * member of `applier` would run its owner's code with rights that owner
 * lacks: a superuser-owned partitioned table with a tenant's partition ran
 * the tenant's ENABLE ALWAYS trigger as the superuser (review h3, TAP 102).
 * Finds such a partition (any level; the partitions stay locked ACCESS
 * SHARE until the transaction ends, so none changes owner or joins the
 * table while the group applies): false if there is none.  PostgreSQL
 * regime.
 */
bool
ForeignOwnedPartitionPg(Oid relid, Oid applier, Oid *partition, Oid *owner)
{
	Oid o = InvalidOid;
	const Oid part = FindPartitionPg(relid, AccessShareLock, [&](Form_pg_class form) {
		o = form->relowner;
		return o != applier && !is_member_of_role(o, applier);
	});
	if (!OidIsValid(part))
		return false;
	*partition = part;
	*owner = o;
	return true;
}

const RunAs &
ApplyEngine::Authorize(const Target &t)
{
	/*
	 * Decided once per engine (a group of the worker) and target, again
	 * after a change of a role or membership reached this backend: the
	 * worker takes the invalidations at each source transaction's BEGIN
	 * (begin_source_xact), so a membership revoked while a group is open
	 * stops its next source transaction, as PostgreSQL's apply worker
	 * checks per transaction.  The table privileges themselves are checked
	 * again by every write.  Replaced in place: callers hold references.
	 */
	auto known = access_.find(t.relid);
	if (known != access_.end() && known->second.role_changes == role_changes)
		return known->second.as;
	RunAs as = RunAs::Caller();
	Oid applier = PgCall([]() { return GetUserId(); });
	if (worker_identity_) {
		const bool exists = PgCall([&]() { return SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(owner_)); });
		if (!exists)
			Fail("42704", "the owner (role OID " + std::to_string(owner_) + ") of subscription \"" + subscription_ +
			                  "\" no longer exists",
			     {}, "Give the subscription an existing owner with cdc.alter_subscription(..., owner => ...).");
		if (run_as_owner_ || t.owner == owner_ || PgCall([&]() { return is_member_of_role(t.owner, owner_); })) {
			/* run_as_owner, or the table's owner could act as the subscription owner anyway */
			applier = owner_;
			as = RunAs::Role(owner_, always_restricted_);
		} else if (PgCall([&]() { return is_member_of_role(owner_, t.owner); })) {
			/* the table owner's code runs as the table owner, in a security-restricted operation */
			applier = t.owner;
			as = RunAs::Role(t.owner, true);
		} else {
			std::string sub_owner = PgCall([&]() { return GetUserNameFromId(owner_, false); });
			std::string table_owner = PgCall([&]() { return GetUserNameFromId(t.owner, false); });
			Fail("42501", "subscription owner \"" + sub_owner + "\" cannot apply changes to table " + t.qualified +
			                  " owned by \"" + table_owner + "\"",
			     "The worker applies a table's changes as the table's owner; the subscription owner must be a member of it.",
			     "GRANT \"" + table_owner + "\" TO \"" + sub_owner +
			         "\", or set run_as_owner => true and grant the subscription owner the table's privileges.");
		}
		/*
		 * Every partition's code runs as the applier: its owner must be able
		 * to act as the applier anyway.  (With run_as_owner every table
		 * owner's code runs as the subscription owner by choice.)
		 */
		Oid partition = InvalidOid, part_owner = InvalidOid;
		if (!run_as_owner_ && PgCall([&]() { return ForeignOwnedPartitionPg(t.relid, applier, &partition, &part_owner); })) {
			std::string part_name = PgCall([&]() -> const char * {
				const char *d = RelationDisplayPg(partition);
				return d ? d : psprintf("%u", partition);
			});
			std::string owner_name = PgCall([&]() { return GetUserNameFromId(part_owner, false); });
			std::string applier_name = PgCall([&]() { return GetUserNameFromId(applier, false); });
			Fail("42501", "partition " + part_name + " of table " + t.qualified + " is owned by \"" + owner_name +
			                  "\", whose code would run as \"" + applier_name + "\"",
			     "The worker applies the rows of every partition as the role that applies the partitioned table; the "
			     "triggers, defaults and constraints of a partition run as that role.",
			     "Give the partition to the partitioned table's owner (ALTER TABLE " + part_name + " OWNER TO ...), or "
			     "grant \"" + applier_name + "\" to \"" + owner_name + "\".");
		}
	}
	CheckPrivileges(t.relid, t.qualified, applier, worker_identity_);
	/*
	 * Row-level security: PostgreSQL 15 refuses it for its own apply too.
	 * Applying under a policy, a change whose row the policy hides would
	 * leave a version or tombstone behind although it changed nothing.
	 */
	const int rls = PgCall([&]() { return check_enable_rls(t.relid, applier, true); });
	if (rls == RLS_ENABLED) {
		std::string user = PgCall([&]() { return GetUserNameFromId(applier, false); });
		Fail("42501", "role \"" + user + "\" cannot apply changes to table " + t.qualified +
		                  ": row-level security applies to it there",
		     {}, "cdc_apply never applies under row-level security policies. Apply as the table's owner or a role "
		         "with BYPASSRLS, or disable row-level security on the table (or FORCE, for its owner).");
	}
	Access &slot = access_[t.relid];
	slot.role_changes = role_changes;
	slot.as = as;
	return slot.as;
}

void
ApplyEngine::CheckSource(const Target &t, const ChangeRequest &req) const
{
	if (!t.mapping.source_name)
		return;
	const std::string &source = worker_identity_ ? subscription_ : req.source.name;
	if (source != *t.mapping.source_name)
		Fail("42501", "table " + t.qualified + " accepts changes only from source " +
		                  cdc::QuotedField(cdc::ClippedForMessage(*t.mapping.source_name)) + ", not from " +
		                  cdc::QuotedField(cdc::ClippedForMessage(source)),
		     worker_identity_ ? "The mapping's source_name names another subscription."
		                      : "The mapping's source_name restricts which source.name may write the table.",
		     "Register the mapping with the right source_name, or without one to accept any source.");
}

} // namespace cdc::pg

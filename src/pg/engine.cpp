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
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"
}

#include <algorithm>

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
	ColumnType ctype;
	FmgrInfo *in_fn = nullptr; // palloc'd in the call's memory context
	Oid ioparam = InvalidOid;
	FmgrInfo *out_fn = nullptr;
	std::string eq_op; // "OPERATOR(schema.=)": the type's default equality, schema-qualified
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

	bool exists = PgCall([&]() { return SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)); });
	if (!exists)
		Fail("42P01", "target relation with OID " + std::to_string(relid) + " does not exist");

	auto t = std::make_unique<Target>();
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
		c.ctype = MakeColumnType(c.name, c.type, c.typmod);
		PgCall([&]() {
			Oid infunc, outfunc;
			bool varlena;
			c.in_fn = (FmgrInfo *) palloc(sizeof(FmgrInfo));
			c.out_fn = (FmgrInfo *) palloc(sizeof(FmgrInfo));
			getTypeInputInfo(c.type, &infunc, &c.ioparam);
			fmgr_info(infunc, c.in_fn);
			getTypeOutputInfo(c.type, &outfunc, &varlena);
			fmgr_info(outfunc, c.out_fn);
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
	if (!t->mapping.version_column.empty()) {
		auto f = t->by_name.find(t->mapping.version_column);
		if (f == t->by_name.end())
			Fail("42703", "version column \"" + t->mapping.version_column + "\" does not exist in table " +
			                  t->display);
		t->version_col = f->second;
	}
	ReadBarrier(*t);

	Target &ref = *t;
	targets_[relid] = std::move(t);
	return ref;
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
	auto cached = resolved_.find(cache_key);
	if (cached != resolved_.end())
		return cached->second;
	Oid target = ResolveUncached(source_name, schema, table, same_name_fallback);
	resolved_[cache_key] = target;
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

bool
WriteOutbox(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key,
            const std::optional<std::string> &payload)
{
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

} // namespace

ApplyEngine::ApplyEngine()
{
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
	ChangeRequest req;
	req.target = OidIsValid(target_arg) ? target_arg : ResolveTarget(ev.source.name, ev.source.schema, ev.source.table);
	if (ev.op == Op::Truncate)
		LockForTruncate(req.target);
	Target &t = LoadTarget(req.target);
	SetContext(&t, delivery_key_arg.value_or(""));
	req.op = ev.op;
	req.source = ev.source;
	req.total_order = ev.total_order;
	req.delivery_key = delivery_key_arg;
	if (ev.after)
		req.after = DecodeJsonImage(t, *ev.after, ev.after_schema ? &*ev.after_schema : nullptr, "after");
	if (ev.before)
		req.before = DecodeJsonImage(t, *ev.before, ev.before_schema ? &*ev.before_schema : nullptr, "before");
	if (t.version_col < 0 && !(ev.op == Op::Truncate && t.mapping.truncate_ignore))
		req.version = DeriveDebeziumVersion(ev, t.mapping.epoch);
	return ApplyChange(req);
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
		const bool claimed = Claim(dk, relid, TransactionSeconds());
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

	const bool is_delete = req.op == Op::Delete;
	if (is_delete && !req.before)
		Fail("22023", "field \"before\" is missing: a delete needs the before-image (at least the key columns)");
	if (!is_delete && !req.after)
		Fail("22023", std::string("field \"after\" is missing: op \"") + OpName(req.op) + "\" needs the after-image");
	std::optional<Image> after, before;
	if (req.after)
		after = ConvertImage(t, *req.after, "after");
	if (req.before)
		before = ConvertImage(t, *req.before, "before");
	const Image &main = is_delete ? *before : *after;
	std::string entity_key = EntityKey(t, main, is_delete ? "before" : "after");

	Version v;
	if (column_version) {
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
		v = Version{{t.mapping.epoch, x, is_delete ? 1 : 0}};
	} else {
		v = req.version;
	}

	std::string dk = req.delivery_key ? *req.delivery_key : DeriveDeliveryKey(req.source, req.op, req.total_order, entity_key);
	SetContext(&t, dk);
	/*
	 * The dedup claim.  When the ledger already has the delivery the change
	 * still goes through the version decision (under the entity lock), but
	 * only an "applied" decision counts: it proves the change new, so the
	 * ledger hit was a digest collision.  Anything else is a duplicate.
	 */
	const int32_t now_s = TransactionSeconds();
	const bool claimed_before = !Claim(dk, relid, now_s);
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

} // namespace cdc::pg

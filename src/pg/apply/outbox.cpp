// Outbox rows: see outbox.hpp and docs/semantics.md, "Outbox".
//
// Glue, C++ regime: statements through SPI (pg/spi.hpp) in the caller's
// transaction; the *Pg functions are PostgreSQL regime (plain C data,
// called only through PgCall).  Must not decide anything: whether a change
// is applied (and so owes a row), and which row image is its payload, is
// decided by single.cpp and segment.cpp.
#include "pg/apply/outbox.hpp"
#include "pg/apply/table_write.hpp"

#include "core/errors.hpp"
#include "core/layout.hpp"
#include "pg/apply/id_cache.hpp"
#include "pg/apply/image.hpp"
#include "pg/apply/internal.hpp"
#include "pg/apply/target.hpp"
#include "pg/guc.hpp"
#include "pg/spi.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/md5.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "parser/parse_relation.h"
#include "rewrite/rewriteHandler.h"
#include "utils/acl.h"
#include "utils/syscache.h"
#include "catalog/pg_proc.h"
#include "storage/proc.h"
#include "funcapi.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "utils/inval.h"
#include "replication/message.h"
#include "storage/lmgr.h"
#include "utils/datetime.h"
#include "utils/numeric.h"
#include "utils/fmgroids.h"
#include "utils/json.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/resowner.h"
}

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>

namespace cdc::pg {

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

DeferredOutbox *deferred_outbox = nullptr;

namespace {

/* to_jsonb(anyelement), called with a record argument: set up once per backend. */
FmgrInfo *to_jsonb_record = nullptr;

/* That FmgrInfo, made on first use (in TopMemoryContext). */
FmgrInfo *
ToJsonbRecordPg()
{
	if (to_jsonb_record == nullptr) {
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		FmgrInfo *f = (FmgrInfo *) palloc0(sizeof(FmgrInfo));
		fmgr_info_cxt(F_TO_JSONB, f, TopMemoryContext);
		/* to_jsonb reads its argument's type from the call expression: a record, typed by the datum itself */
		f->fn_expr = (Node *) makeFuncExpr(F_TO_JSONB, JSONBOID, list_make1(makeNullConst(RECORDOID, -1, InvalidOid)),
		                                   InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
		MemoryContextSwitchTo(old);
		to_jsonb_record = f;
	}
	return to_jsonb_record;
}

/*
 * to_jsonb() of the target's row type formed from `values`: the row a
 * statement writing these values produces (no defaults, no generated
 * columns, no triggers: the caller's conditions), converted by PostgreSQL's
 * own to_jsonb (composite_to_jsonb), exactly as to_jsonb(t) of that row.
 * The relation is locked by the caller (LoadTarget).  values[i] are of
 * types[i] (typmods[i]), converted with the target's cached metadata: user
 * code that ran during the call (a trigger of another target of the batch,
 * a handler, a domain CHECK) may have altered the table since, and a Datum
 * formed into the new row type as it is would be read as another type (an
 * int as a text pointer crashed the server; regress nested_ddl_direct):
 * refused then, 55006.
 */
Datum
ImageJsonbPg(Oid relid, int n, const AttrNumber *attnums, const Oid *types, const int32 *typmods, const Datum *values,
             const bool *nulls)
{
	FmgrInfo *to_jsonb = ToJsonbRecordPg();
	Relation rel = RelationIdGetRelation(relid);
	if (!RelationIsValid(rel))
		elog(ERROR, "could not open relation with OID %u", relid);
	TupleDesc desc = RelationGetDescr(rel);
	if (!ColumnsAsConvertedPg(rel, DirectColumns{attnums, types, typmods, n})) {
		char *name = pstrdup(RelationGetRelationName(rel));
		RelationClose(rel);
		ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
		                errmsg("target table \"%s\" was altered while this call applied changes to it", name),
		                errdetail("The outbox payload of a change is built from the values converted for the "
		                          "table's columns as the call found them."),
		                errhint("Alter a target outside the calls that apply changes to it (not from a trigger, "
		                        "handler or domain check they run), then apply the changes again.")));
	}
	Datum *v = (Datum *) palloc0(sizeof(Datum) * desc->natts);
	bool *isnull = (bool *) palloc(sizeof(bool) * desc->natts);
	memset(isnull, true, sizeof(bool) * desc->natts);
	for (int i = 0; i < n; i++) {
		v[attnums[i] - 1] = values[i];
		isnull[attnums[i] - 1] = nulls[i];
	}
	/* heap_form_tuple stamps the row type (tdtypeid) into the header: a composite Datum */
	HeapTuple tup = heap_form_tuple(desc, v, isnull);
	RelationClose(rel);
	Datum j = FunctionCall1(to_jsonb, HeapTupleGetDatum(tup));
	heap_freetuple(tup);
	pfree(v);
	pfree(isnull);
	return j;
}

/*
 * The payload of an image without a composite: what to_jsonb() of the row
 * gives (jsonb.c, composite_to_jsonb and datum_to_jsonb), built straight
 * from the Datums with each column's output function looked up once
 * (Column::out_fn) instead of categorising every column's type and looking
 * its output function up again for every row.  Only for the kinds below,
 * built-in scalar types whose rendering it reproduces exactly; the caller
 * uses ImageJsonbPg for any other.
 */
enum PayloadKind : int8_t {
	kPayloadFallback = 0, /* composite, array, json, domain, enum, range, a non-built-in type: to_jsonb() */
	kPayloadBool,         /* JSON boolean */
	kPayloadInt2,         /* int2, int4, int8: the number (numeric_in of its output text gives the same numeric) */
	kPayloadInt4,
	kPayloadInt8,
	kPayloadNumeric,      /* numeric: the value itself, NaN and infinities as strings */
	kPayloadFloat,        /* float4/float8: output text (extra_float_digits applies) as a number unless NaN/Infinity */
	kPayloadDate,         /* date, timestamp, timestamptz: JsonEncodeDateTime */
	kPayloadTimestamp,
	kPayloadTimestampTz,
	kPayloadText,         /* text, varchar: the string itself */
	kPayloadOther,        /* any other built-in scalar: its output text as a string */
};

int8_t
PayloadKindPg(Oid type)
{
	switch (type) {
	case BOOLOID: return kPayloadBool;
	case INT2OID: return kPayloadInt2;
	case INT4OID: return kPayloadInt4;
	case INT8OID: return kPayloadInt8;
	case NUMERICOID: return kPayloadNumeric;
	case FLOAT4OID:
	case FLOAT8OID: return kPayloadFloat;
	case DATEOID: return kPayloadDate;
	case TIMESTAMPOID: return kPayloadTimestamp;
	case TIMESTAMPTZOID: return kPayloadTimestampTz;
	case TEXTOID:
	case VARCHAROID: return kPayloadText;
	case JSONOID:
	case JSONBOID: return kPayloadFallback;
	default:
		/* what jsonb_categorize_type calls JSONBTYPE_OTHER, without a cast to json to look for */
		if (type >= FirstNormalObjectId || get_typtype(type) != TYPTYPE_BASE || OidIsValid(get_element_type(type)))
			return kPayloadFallback;
		return kPayloadOther;
	}
}

/* The string of a jsonb value, as checkStringLen allows it. */
void
PayloadString(JsonbValue &jb, const char *s, size_t len)
{
	if (len > JENTRY_OFFLENMASK)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
		                errmsg("string too long to represent as jsonb string"),
		                errdetail("Due to an implementation restriction, jsonb strings cannot exceed %d bytes.",
		                          JENTRY_OFFLENMASK)));
	jb.type = jbvString;
	jb.val.string.val = const_cast<char *>(s);
	jb.val.string.len = int(len);
}

/*
 * The jsonb value of one non-null cell of kind `kind` (PayloadKind), as
 * to_jsonb() makes it: what ImageJsonbFastPg puts in the object and
 * StoredPayloadPg prints.  A jbvString points into the value (kPayloadText:
 * not NUL-terminated) or into a palloc'd output text.  PostgreSQL regime.
 */
void
PayloadValuePg(JsonbValue &v, int8_t kind, FmgrInfo *out, Datum d)
{
	switch (kind) {
	case kPayloadBool:
		v.type = jbvBool;
		v.val.boolean = DatumGetBool(d);
		break;
	case kPayloadInt2:
	case kPayloadInt4:
	case kPayloadInt8:
		v.type = jbvNumeric;
		v.val.numeric = int64_to_numeric(kind == kPayloadInt2   ? int64(DatumGetInt16(d))
		                                 : kind == kPayloadInt4 ? int64(DatumGetInt32(d))
		                                                        : DatumGetInt64(d));
		break;
	case kPayloadNumeric:
		if (numeric_is_nan(DatumGetNumeric(d)) || numeric_is_inf(DatumGetNumeric(d))) {
			char *s = OutputFunctionCall(out, d);
			PayloadString(v, s, strlen(s));
		} else {
			v.type = jbvNumeric;
			v.val.numeric = DatumGetNumeric(d);
		}
		break;
	case kPayloadFloat: {
		char *s = OutputFunctionCall(out, d);
		if (strchr(s, 'N') != NULL || strchr(s, 'n') != NULL) {
			PayloadString(v, s, strlen(s));
		} else {
			v.type = jbvNumeric;
			v.val.numeric = DatumGetNumeric(
				DirectFunctionCall3(numeric_in, CStringGetDatum(s), ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
		}
		break;
	}
	case kPayloadDate:
	case kPayloadTimestamp:
	case kPayloadTimestampTz: {
		Oid t = kind == kPayloadDate ? DATEOID : kind == kPayloadTimestamp ? TIMESTAMPOID : TIMESTAMPTZOID;
		char *s = JsonEncodeDateTime(NULL, d, t, NULL);
		PayloadString(v, s, strlen(s));
		break;
	}
	case kPayloadText: {
		text *t = DatumGetTextPP(d);
		PayloadString(v, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
		break;
	}
	default: {
		char *s = OutputFunctionCall(out, d);
		PayloadString(v, s, strlen(s));
		break;
	}
	}
}

/*
 * The jsonb object of the columns, built as a jbvObject whose pairs are
 * already in jsonb key order (`order`, worked out once per target) and
 * converted by JsonbValueToJsonb: pushJsonbValue would grow the pair array
 * one pair at a time and sort the keys of every payload again
 * (uniqueifyJsonbObject), about a fifth of building a payload.  The
 * column names are unique, so there is nothing to deduplicate; the result
 * is the jsonb pushJsonbValue builds.  `cells` are indexed by column.
 */
Datum
ImageJsonbFastPg(int n, const int *order, const char *const *names, const int *name_lens, const int8_t *kinds,
                 FmgrInfo *const *outs, const Cell *cells)
{
	JsonbValue obj;
	obj.type = jbvObject;
	obj.val.object.nPairs = n;
	obj.val.object.pairs = (JsonbPair *) palloc(sizeof(JsonbPair) * size_t(Max(n, 1)));
	for (int j = 0; j < n; j++) {
		JsonbPair *pair = &obj.val.object.pairs[j];
		pair->key.type = jbvString;
		pair->key.val.string.val = const_cast<char *>(names[j]);
		pair->key.val.string.len = name_lens[j];
		pair->order = uint32(j);
		const Cell &cell = cells[order[j]];
		if (cell.isnull)
			pair->value.type = jbvNull;
		else
			PayloadValuePg(pair->value, kinds[j], outs[j], cell.value);
	}
	Jsonb *res = JsonbValueToJsonb(&obj);
	pfree(obj.val.object.pairs);
	return JsonbPGetDatum(res);
}

/* Builds {"k1": "text1", ...} (keys sorted and unique as jsonb keeps them). */
Datum
EntityKeyJsonbPg(int n, const char *const *names, const int *name_lens, const char *const *texts, const int *text_lens)
{
	JsonbParseState *state = NULL;
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < n; i++) {
		JsonbValue k, v;
		k.type = jbvString;
		k.val.string.val = const_cast<char *>(names[i]);
		k.val.string.len = name_lens[i];
		pushJsonbValue(&state, WJB_KEY, &k);
		v.type = jbvString;
		v.val.string.val = const_cast<char *>(texts[i]);
		v.val.string.len = text_lens[i];
		pushJsonbValue(&state, WJB_VALUE, &v);
	}
	JsonbValue *res = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbPGetDatum(JsonbValueToJsonb(res));
}

// The outbox idempotency key: md5 of the source identity of the change
// (source id, source table, op, version, entity key) — never of the
// delivery key, so a re-published change gets the same key.  The view
// renders these 16 bytes as the 32 hex digits of md5() (docs/semantics.md).
std::array<unsigned char, 16>
IdempotencyKey(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key)
{
	/*
	 * md5 of name "\n" table "\n" op "\n" version "\n" entity key, where
	 * table is schema.table (the target's name without a source table) and
	 * version the array literal ({0,123,4,0}, Version::ToArrayLiteral),
	 * streamed piece by piece (Md5BinaryOf): the same 16 bytes as the text
	 * built whole, without building it.
	 */
	char version[1 + 4 * 21 + 1];
	size_t vlen = 0;
	version[vlen++] = '{';
	for (size_t i = 0; i < v.parts.size() && i < 4; i++) {
		if (i)
			version[vlen++] = ',';
		vlen = size_t(std::to_chars(version + vlen, version + sizeof version, v.parts[i]).ptr - version);
	}
	std::string literal; /* a version of more than 4 components (refused by MakeOutboxRow): as before */
	std::string_view vtext(version, vlen);
	if (v.parts.size() > 4) {
		literal = v.ToArrayLiteral();
		vtext = literal;
	} else {
		version[vlen++] = '}';
		vtext = std::string_view(version, vlen);
	}
	const char opc[1] = {op};
	std::array<unsigned char, 16> out{};
	if (src.table.empty())
		Md5BinaryOf({src.name, "\n", t.display, "\n", std::string_view(opc, 1), "\n", vtext, "\n", entity_key},
		            out.data());
	else
		Md5BinaryOf({src.name, "\n", src.schema, ".", src.table, "\n", std::string_view(opc, 1), "\n", vtext, "\n",
		             entity_key},
		            out.data());
	return out;
}

/*
 * The cdc.outbox_source id of a topic and source identity, created on
 * first use with the id the identity's hash gives (the next one on a
 * collision with another identity), as cdc.source's ids (state_store.cpp,
 * SourceId): no sequence, so a rolled-back call leaves no trace and cannot
 * use ids up, and no lock of the dictionary.  The ids were max + 1 under a
 * SHARE ROW EXCLUSIVE lock taken as the extension owner and held until the
 * caller's transaction ended: a role that may write nothing but its own
 * outbox-mapped table sent an event with a made-up source identity, kept
 * its transaction open, and every session needing an id for any other new
 * identity (the workers' too) waited for it (review h3,
 * security_outbox_source_lock.spec).  Now a concurrent uncommitted insert
 * makes this one wait only for the same identity (its unique key: a
 * target of the same topic) or for the same id (an MD5 prefix collision).
 * A new statement after a conflict sees what it waited for.  Under
 * REPEATABLE READ a concurrent creation the snapshot cannot see makes ON
 * CONFLICT DO NOTHING raise 40001 (retry the transaction).
 */
int32_t
OutboxSourceId(const std::string &topic, const SourceInfo &src, const std::vector<std::string> &payload_keys)
{
	/* NUL-separated parts (no text holds a NUL), the number of names before them: one string per entry */
	std::string key = topic;
	for (const std::string *part : {&src.name, &src.db, &src.schema, &src.table}) {
		key.push_back('\0');
		key += *part;
	}
	key.push_back('\0');
	key += std::to_string(payload_keys.size());
	for (const std::string &name : payload_keys) {
		key.push_back('\0');
		key += name;
	}
	if (std::optional<int32_t> id = CachedId(Dictionary::OutboxSource, key))
		return *id;
	const Datum keys = PgCall([&]() {
		Datum *elems = (Datum *) palloc(sizeof(Datum) * (payload_keys.size() + 1));
		for (size_t i = 0; i < payload_keys.size(); i++)
			elems[i] = PointerGetDatum(cstring_to_text_with_len(payload_keys[i].data(), int(payload_keys[i].size())));
		return PointerGetDatum(construct_array(elems, int(payload_keys.size()), TEXTOID, -1, false, TYPALIGN_INT));
	});
	Params p;
	p.AddText(topic);
	p.AddText(src.name);
	p.AddText(src.db);
	p.AddText(src.schema);
	p.AddText(src.table);
	p.Add(TEXTARRAYOID, keys, false);
	const char *select = "SELECT id FROM cdc.outbox_source WHERE topic OPERATOR(pg_catalog.=) $1 "
	                     "AND source_name OPERATOR(pg_catalog.=) $2 AND source_db OPERATOR(pg_catalog.=) $3 "
	                     "AND source_schema OPERATOR(pg_catalog.=) $4 AND source_table OPERATOR(pg_catalog.=) $5 "
	                     "AND payload_keys OPERATOR(pg_catalog.=) $6";
	uint64_t n = Execute(select, p, true);
	const std::string hex = n == 0 ? Md5Hex(key) : std::string();
	for (uint32_t collisions = 0; n == 0 && collisions < 1000; collisions++) {
		Params q;
		q.Add(INT4OID, Int32GetDatum(SourceIdCandidate(hex, collisions)), false);
		q.AddText(topic);
		q.AddText(src.name);
		q.AddText(src.db);
		q.AddText(src.schema);
		q.AddText(src.table);
		q.Add(TEXTARRAYOID, keys, false);
		n = Execute("INSERT INTO cdc.outbox_source (id, topic, source_name, source_db, source_schema, source_table, "
		            "payload_keys) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING id",
		            q, true);
		if (n == 0)
			n = Execute(select, p, true); /* the same identity, created concurrently; else the id is another's */
	}
	if (n == 0)
		throw InputError("54000", "no free id for the outbox source identity of topic " +
		                              QuotedField(ClippedForMessage(topic)) + " in cdc.outbox_source",
		                 {}, "1,000 ids after its hash are taken by other identities.");
	int32_t id = int32_t(std::stol(ResultText(0, 1).value_or("0")));
	RememberId(Dictionary::OutboxSource, key, id);
	return id;
}

// Counts the rows a RETURNING target statement returned, per target.
void
CountReturnedTargets(uint64_t n, std::map<Oid, Counters> &counters)
{
	std::vector<Oid> targets(n);
	PgCall([&]() {
		for (uint64_t i = 0; i < n; i++) {
			bool isnull;
			targets[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		}
	});
	for (Oid relid : targets)
		counters[relid].outbox_rows++;
}

// The text of a jsonb Datum (jsonb_out's form, as the view shows it).
std::string
JsonbText(Datum j)
{
	const char *text = PgCall([&]() { return JsonbToCString(NULL, &DatumGetJsonbP(j)->root, VARSIZE(DatumGetPointer(j))); });
	return std::string(text);
}

/*
 * The logical decoding message of an outbox entry (outbox_via 'message'):
 * a JSON object with the columns of a cdc.outbox row except id and
 * published_at (a relay's cursor is the message's LSN): idempotency_key,
 * topic, target (schema.table), entity_key, op, payload, source (keys in
 * the order the view's jsonb shows them), version and created_at (the
 * transaction's start, ISO 8601 like to_json(timestamptz)).
 */
std::string
OutboxMessage(const Target &t, const SourceInfo &src, const std::string &topic, const OutboxRow &r, const Version &v)
{
	static const char hex[] = "0123456789abcdef";
	std::string key;
	for (unsigned char b : r.ikey) {
		key.push_back(hex[b >> 4]);
		key.push_back(hex[b & 15]);
	}
	std::string version = "[";
	for (size_t i = 0; i < v.parts.size(); i++)
		version += (i ? ", " : "") + std::to_string(v.parts[i]);
	version += "]";
	auto number = [](const std::optional<int64_t> &x) { return x ? std::to_string(*x) : std::string("null"); };
	char created[MAXDATELEN + 1];
	PgCall([&]() {
		JsonEncodeDateTime(created, TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()), TIMESTAMPTZOID, NULL);
	});
	std::string m = "{\"idempotency_key\": \"" + key + "\", \"topic\": ";
	AppendJsonString(m, topic);
	m += ", \"target\": ";
	AppendJsonString(m, t.display);
	m += ", \"entity_key\": " + (r.entity_key ? JsonbText(*r.entity_key) : std::string("null"));
	m += ", \"op\": \"" + std::string(1, r.op) + "\"";
	m += ", \"payload\": " + (r.payload ? JsonbText(*r.payload) : std::string("null"));
	m += ", \"source\": {\"db\": ";
	AppendJsonString(m, src.db);
	m += ", \"lsn\": " + number(src.lsn) + ", \"name\": ";
	AppendJsonString(m, src.name);
	m += ", \"txId\": " + number(src.tx_id) + ", \"table\": ";
	AppendJsonString(m, src.table);
	m += ", \"schema\": ";
	AppendJsonString(m, src.schema);
	m += ", \"version\": " + version + ", \"commit_lsn\": " + number(src.commit_lsn) + "}";
	m += ", \"version\": " + version + ", \"created_at\": \"" + created + "\"}";
	return m;
}

/*
 * May PUBLIC execute pg_logical_emit_message() (either signature)?  A NULL
 * proacl is the default, which grants EXECUTE to PUBLIC.  PostgreSQL
 * regime.
 */
bool
PublicMayEmitMessagesPg()
{
	for (Oid fn : {Oid(F_PG_LOGICAL_EMIT_MESSAGE_BOOL_TEXT_TEXT), Oid(F_PG_LOGICAL_EMIT_MESSAGE_BOOL_TEXT_BYTEA)}) {
		HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
		if (!HeapTupleIsValid(tup))
			continue;
		bool isnull;
		Datum acl = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proacl, &isnull);
		bool public_may = isnull;
		if (!isnull) {
			Acl *a = DatumGetAclP(acl);
			const AclItem *items = ACL_DAT(a);
			for (int i = 0; i < ACL_NUM(a) && !public_may; i++)
				public_may = items[i].ai_grantee == ACL_ID_PUBLIC && (ACLITEM_GET_PRIVS(items[i]) & ACL_EXECUTE) != 0;
		}
		ReleaseSysCache(tup);
		if (public_may)
			return true;
	}
	return false;
}

/*
 * Writes the message of an outbox entry: a transactional logical decoding
 * message with prefix cdc_outbox (LogLogicalMessage, what
 * pg_logical_emit_message(true, ...) writes), decoded only if the
 * transaction commits.  Error 55000 unless wal_level is logical, and 55000
 * while PUBLIC may execute pg_logical_emit_message(): a relay cannot tell
 * who wrote a message, so any role could then forge outbox entries
 * (docs/security.md, "The outbox as messages"; checked once per
 * transaction, cdc.register_mapping checks it too).
 */
void
EmitOutboxMessage(Oid relid, const std::string &message)
{
	auto name = [&]() {
		const char *n = PgCall([&]() -> const char * {
			char *r = get_rel_name(relid);
			return r ? r : "?";
		});
		return std::string(n);
	};
	bool logical = PgCall([]() { return XLogLogicalInfoActive(); });
	if (!logical) {
		Fail("55000", "the outbox of table " + name() + " is written as logical decoding messages (outbox_via 'message'), "
		              "which needs wal_level = logical",
		     {}, "Set wal_level = logical and restart, or register the mapping with outbox_via => 'table'.");
	}
	static LocalTransactionId checked = InvalidLocalTransactionId;
	const LocalTransactionId lxid = PgCall([]() { return MyProc->lxid; });
	if (lxid != checked) {
		if (PgCall([]() { return PublicMayEmitMessagesPg(); })) {
			Fail("55000",
			     "the outbox of table " + name() +
			         " is written as logical decoding messages (outbox_via 'message'), and every role may call "
			         "pg_logical_emit_message(): a relay could not tell a forged cdc_outbox message from the outbox's",
			     {},
			     "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_logical_emit_message(boolean, text, text), "
			     "pg_catalog.pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC; (as a superuser), or register "
			     "the mapping with outbox_via => 'table'.");
		}
		checked = lxid;
	}

	PgCall([&]() { LogLogicalMessage("cdc_outbox", message.data(), message.size(), true); });
}

} // namespace

Datum
RowJsonbPg(TupleTableSlot *slot)
{
	/* a composite Datum of the slot's row type, TOASTed values inlined (heap_copy_tuple_as_datum) */
	Datum row = ExecFetchSlotHeapTupleDatum(slot);
	return WithPayloadSettingsPg([&]() { return FunctionCall1(ToJsonbRecordPg(), row); });
}

std::string
RowDatumSql(const std::string &alias, const std::string &qualified)
{
	/* a whole-row reference (not "t", which a column named t would take), of the table's own row type */
	return "(" + alias + ".*)::" + qualified;
}

std::vector<std::optional<Datum>>
ResultRowsJsonb(uint64_t n, int col, const RunAs &as)
{
	std::vector<std::optional<Datum>> out(n);
	if (n == 0)
		return out;
	/* as whom the target's statements run: to_jsonb may call a cast to json the type's owner created */
	PgCallAs(as, [&]() {
		FmgrInfo *to_jsonb = ToJsonbRecordPg();
		WithPayloadSettingsPg([&]() {
			for (uint64_t i = 0; i < n; i++) {
				bool isnull;
				Datum d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, col, &isnull);
				if (!isnull)
					out[i] = FunctionCall1(to_jsonb, d);
			}
		});
	});
	return out;
}

std::vector<std::optional<std::string>>
ResultRowsJsonText(uint64_t n, int col, const RunAs &as)
{
	std::vector<std::optional<Datum>> j = ResultRowsJsonb(n, col, as);
	std::vector<std::optional<std::string>> out(n);
	PgCall([&]() {
		for (uint64_t i = 0; i < n; i++) {
			if (!j[i])
				continue;
			Jsonb *jb = DatumGetJsonbP(*j[i]);
			char *text = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
			out[i] = std::string(text);
			pfree(text);
			pfree(DatumGetPointer(*j[i]));
		}
	});
	return out;
}

bool
PayloadFromImageAllowed(const Target &t)
{
	for (const Column &c : t.columns)
		if (c.generated)
			return false;
	return true;
}

// kMaxPayloadKeysBytes: see PayloadKeys.
constexpr size_t kMaxPayloadKeysBytes = 320;
// The bytes of member names as a text[] in a cdc.outbox_source entry.
static size_t
PayloadKeysBytes(int n, const int *lens)
{
	size_t bytes = 24; /* the array's header and its one dimension */
	for (int i = 0; i < n; i++)
		bytes += (4 + size_t(lens[i]) + 3) & ~size_t(3);
	return bytes;
}

// Sorts column indexes of `t` in the order jsonb keeps an object's keys
// (lengthCompareJsonbStringValue: shorter names first, then bytewise); the
// names are unique, so the order is total.
static void
SortByJsonbKeyOrder(const Target &t, std::vector<int> &cols)
{
	std::sort(cols.begin(), cols.end(), [&](int a, int b) {
		const std::string &x = t.columns[size_t(a)].name, &y = t.columns[size_t(b)].name;
		if (x.size() != y.size())
			return x.size() < y.size();
		return std::memcmp(x.data(), y.data(), x.size()) < 0;
	});
}

// The payload plan of `t`, worked out on first use (target.hpp).
static const Target::PayloadPlan &
PlanOf(const Target &t)
{
	const size_t n = t.columns.size();
	Target::PayloadPlan &plan = t.payload_plan;
	if (plan.built_for == &t)
		return plan;
	/* the fast path's kinds and the jsonb key order, worked out once per cached target */
	plan.order.resize(n);
	for (size_t i = 0; i < n; i++)
		plan.order[i] = int(i);
	SortByJsonbKeyOrder(t, plan.order);
	plan.kinds.resize(n);
	plan.names.resize(n);
	plan.name_lens.resize(n);
	plan.outs.resize(n);
	plan.fast = true;
	for (size_t j = 0; j < n; j++) {
		const Column &c = t.columns[size_t(plan.order[j])];
		if (c.json_kind < 0)
			c.json_kind = PgCall([&]() { return PayloadKindPg(c.type); });
		plan.kinds[j] = c.json_kind;
		plan.names[j] = c.name.c_str();
		plan.name_lens[j] = int(c.name.size());
		plan.outs[j] = c.out_fn;
		plan.fast = plan.fast && c.json_kind != kPayloadFallback;
	}
	/* what PayloadKeys gives for the object: its names, unless empty or too long for the entry */
	plan.storable = plan.fast && n > 0 && PayloadKeysBytes(int(n), plan.name_lens.data()) <= kMaxPayloadKeysBytes;
	plan.stored_keys.clear();
	if (plan.storable)
		for (size_t j = 0; j < n; j++)
			plan.stored_keys.emplace_back(plan.names[j], size_t(plan.name_lens[j]));
	plan.key_order.assign(t.key.begin(), t.key.end());
	SortByJsonbKeyOrder(t, plan.key_order);
	plan.built_for = &t;
	return plan;
}

Datum
PayloadFromImage(const Target &t, const Image &img, const RunAs &as)
{
	img.RequireComplete();
	const size_t n = t.columns.size();
	const Target::PayloadPlan &plan = PlanOf(t);
	/* built-in types only, their own output functions: no code of the table's owner runs */
	if (plan.fast)
		return PgCall([&]() {
			return WithPayloadSettingsPg([&]() {
				return ImageJsonbFastPg(int(n), plan.order.data(), plan.names.data(), plan.name_lens.data(),
				                        plan.kinds.data(), plan.outs.data(), img.cells.data());
			});
		});
	std::vector<AttrNumber> attnums(n);
	std::vector<Oid> types(n);
	std::vector<int32> typmods(n);
	std::vector<Datum> values(n);
	std::unique_ptr<bool[]> nulls(new bool[n]);
	for (size_t i = 0; i < n; i++) {
		attnums[i] = t.columns[i].attnum;
		types[i] = t.columns[i].type;
		typmods[i] = t.columns[i].typmod;
		values[i] = img.cells[i].value;
		nulls[i] = img.cells[i].isnull;
	}
	/* as whom the target's statements run: to_jsonb may call a cast to json the type's owner created */
	return PgCallAs(as, [&]() {
		return WithPayloadSettingsPg([&]() {
			return ImageJsonbPg(t.relid, int(n), attnums.data(), types.data(), typmods.data(), values.data(),
			                    nulls.get());
		});
	});
}

Datum
JsonbFromText(const std::string &json)
{
	return PgCall([&]() { return DirectFunctionCall1(jsonb_in, CStringGetDatum(json.c_str())); });
}

Datum
EntityKeyJsonb(const Target &t, const Image &img)
{
	const size_t n = t.key.size();
	std::vector<const char *> names(n), texts(n);
	std::vector<int> name_lens(n), text_lens(n);
	for (size_t i = 0; i < n; i++) {
		const Column &col = t.columns[size_t(t.key[i])];
		const Cell &c = img.cells[size_t(t.key[i])];
		names[i] = col.name.c_str();
		name_lens[i] = int(col.name.size());
		texts[i] = c.text.c_str();
		text_lens[i] = int(c.text.size());
	}
	return PgCall([&]() { return EntityKeyJsonbPg(int(n), names.data(), name_lens.data(), texts.data(), text_lens.data()); });
}

// The member names of a jsonb object in jsonb's order (the order of its
// text); none for anything else, an empty object, or names that would take
// more than kMaxPayloadKeysBytes as a text[].
static std::vector<std::string>
PayloadKeys(Datum jsonb)
{
	struct Names {
		int n;
		const char **names;
		int *lens;
	};
	const Names got = PgCall([&]() {
		Jsonb *jb = DatumGetJsonbP(jsonb);
		Names r{0, nullptr, nullptr};
		if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_COUNT(jb) == 0)
			return r;
		r.names = (const char **) palloc(sizeof(char *) * JB_ROOT_COUNT(jb));
		r.lens = (int *) palloc(sizeof(int) * JB_ROOT_COUNT(jb));
		JsonbIterator *it = JsonbIteratorInit(&jb->root);
		JsonbValue v;
		JsonbIteratorToken tok;
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
			if (tok == WJB_KEY && r.n < int(JB_ROOT_COUNT(jb))) {
				r.names[r.n] = v.val.string.val;
				r.lens[r.n] = v.val.string.len;
				r.n++;
			}
		return r;
	});
	/*
	 * The names go into cdc.outbox_source's unique key, whose other parts
	 * take at most 2,336 bytes (docs/sql-reference.md, "Limits"): names
	 * whose text[] would pass kMaxPayloadKeysBytes stay in the payload, so
	 * that an entry never passes a btree entry's 2,704 bytes.
	 */
	std::vector<std::string> keys;
	if (PayloadKeysBytes(got.n, got.lens) > kMaxPayloadKeysBytes)
		return keys;
	keys.reserve(size_t(got.n));
	for (int i = 0; i < got.n; i++)
		keys.emplace_back(got.names[i], size_t(got.lens[i]));
	return keys;
}

// cdc._outbox_payload(keys text[], payload json): the jsonb of a stored
// payload, the object of keys[i] to the i-th value of the JSON array
// payload (keys empty: payload itself).  PostgreSQL regime.
static Datum
OutboxPayloadPg(Datum keys_datum, text *payload)
{
	ArrayType *keys = DatumGetArrayTypeP(keys_datum);
	Datum *names;
	bool *nulls;
	int nkeys;
	deconstruct_array(keys, TEXTOID, -1, false, TYPALIGN_INT, &names, &nulls, &nkeys);
	Datum j = DirectFunctionCall1(jsonb_in, CStringGetDatum(text_to_cstring(payload)));
	if (nkeys == 0)
		return j;
	Jsonb *jb = DatumGetJsonbP(j);
	if (!JB_ROOT_IS_ARRAY(jb) || JB_ROOT_IS_SCALAR(jb) || int(JB_ROOT_COUNT(jb)) != nkeys)
		ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
		                errmsg("stored outbox payload is not a JSON array of %d values", nkeys),
		                errhint("cdc.outbox_rows.payload holds the values of the member names of its cdc.outbox_source entry.")));
	JsonbParseState *state = NULL;
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	JsonbIterator *it = JsonbIteratorInit(&jb->root);
	JsonbValue v;
	JsonbIteratorToken tok;
	int i = 0;
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
		if (tok != WJB_ELEM)
			continue;
		if (nulls[i])
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("outbox payload member name %d is NULL", i + 1)));
		JsonbValue k;
		k.type = jbvString;
		k.val.string.val = VARDATA_ANY(DatumGetPointer(names[i]));
		k.val.string.len = int(VARSIZE_ANY_EXHDR(DatumGetPointer(names[i])));
		pushJsonbValue(&state, WJB_KEY, &k);
		pushJsonbValue(&state, WJB_VALUE, &v);
		i++;
	}
	JsonbValue *res = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbPGetDatum(JsonbValueToJsonb(res));
}

CDC_PG_FUNCTION(cdc_outbox_payload)
{
	return PgCall([&]() { return OutboxPayloadPg(PG_GETARG_DATUM(0), PG_GETARG_TEXT_PP(1)); });
}

OutboxRow
MakeOutboxRow(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key,
              std::optional<Datum> entity_key_jsonb, std::optional<Datum> payload, size_t position,
              StoredForms stored)
{
	const bool payload_stored = stored.payload;
	if (stored.entity_key && (!entity_key_jsonb || t.mapping.outbox_message))
		throw std::logic_error("MakeOutboxRow: a stored entity key without a table outbox");
	if (v.parts.size() != 3 && v.parts.size() != 4)
		throw InputError(sqlstate::kFeatureNotSupported,
		                 "a version must have 3 or 4 components, not " + std::to_string(v.parts.size()));
	if (v.parts[0] < std::numeric_limits<int32_t>::min() || v.parts[0] > std::numeric_limits<int32_t>::max())
		throw InputError(sqlstate::kNumericOutOfRange, "source epoch " + std::to_string(v.parts[0]) + " of version " +
		                                                   v.ToArrayLiteral() + " is out of range (at most 2147483647)");
	OutboxRow r;
	r.position = position;
	r.target = t.relid;
	r.ikey = IdempotencyKey(t, src, op, v, entity_key);
	const std::string &topic = t.mapping.topic ? *t.mapping.topic : t.display;
	if (payload_stored) {
		/* StoredPayloadFromImage: the values, their names those of the plan */
		if (!payload || t.mapping.outbox_message || t.payload_plan.built_for != &t || !t.payload_plan.storable)
			throw std::logic_error("MakeOutboxRow: a stored payload without its target's stored keys");
		r.payload_values = true;
		r.payload_stored = true;
		r.src = OutboxSourceId(topic, src, t.payload_plan.stored_keys);
	} else if (!t.mapping.outbox_message) {
		/* a payload object's member names go to the dictionary entry, its values to the row */
		std::vector<std::string> keys;
		if (payload)
			keys = PayloadKeys(*payload);
		r.payload_values = !keys.empty();
		r.src = OutboxSourceId(topic, src, keys);
	}
	r.op = op;
	r.new_by_order = t.mapping.stream_ordered;
	r.v0 = int32_t(v.parts[0]);
	r.v1 = v.parts[1];
	r.v2 = v.parts[2];
	if (v.parts.size() == 4)
		r.v3 = v.parts[3];
	r.lsn = src.lsn;
	r.commit_lsn = src.commit_lsn;
	r.tx_id = src.tx_id;
	r.entity_key_stored = stored.entity_key;
	if (entity_key_jsonb)
		r.entity_key = entity_key_jsonb;
	else if (!entity_key.empty())
		r.entity_key = JsonbFromText(entity_key);
	r.payload = payload;
	if (t.mapping.outbox_message)
		r.message = OutboxMessage(t, src, topic, r, v);
	return r;
}

// Writes the outbox row of an applied change (ON CONFLICT DO NOTHING: a
// replay never adds a second one; the key is unique per target, so no other
// target's writer can take it, docs/security.md).  Returns whether a row was inserted.
// Inside a batch the row is queued instead (and counted when the batch
// inserts it): false.
bool
WriteOutbox(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key,
            const std::optional<std::string> &payload)
{
	std::optional<Datum> jpayload;
	if (payload)
		jpayload = JsonbFromText(*payload);
	return WriteOutboxJsonb(t, src, op, v, entity_key, jpayload);
}

static int64 InsertOutboxRowsDirectPg(const OutboxRow *const *rows, size_t n, bool skip_taken,
                                      char *inserted_rows = nullptr);
bool InsertOutboxRow(const OutboxRow &r);

bool
WriteOutboxJsonb(const Target &t, const SourceInfo &src, char op, const Version &v, const std::string &entity_key,
                 std::optional<Datum> jpayload, bool payload_stored, const Image *key_img)
{
	size_t position = deferred_outbox != nullptr ? deferred_outbox->position : 0;
	/* without the stored form, the entity key's text parsed (MakeOutboxRow), as before */
	std::optional<Datum> ekey = key_img != nullptr ? StoredEntityKey(t, *key_img) : std::nullopt;
	OutboxRow r = MakeOutboxRow(t, src, op, v, entity_key, ekey, jpayload, position,
	                            StoredForms{ekey.has_value(), payload_stored});
	if (deferred_outbox != nullptr) {
		deferred_outbox->rows.push_back(std::move(r));
		return false;
	}
	if (!r.message.empty()) {
		EmitOutboxMessage(r.target, r.message);
		return true;
	}
	return InsertOutboxRow(r);
}

// The stored form of a row's positions (cdc.outbox_rows.elided): v3, lsn
// and commit_lsn left NULL where the view derives them, lsn from v2,
// commit_lsn from v1, a component 4 of 0.  A NULL takes no room in the row
// (the row has NULLs anyway: published_at), each elided value 8 bytes of
// the row and of its WAL record (docs/benchmarks.md, "The outbox row
// narrowed").
struct StoredPositions {
	std::optional<int64_t> v3, lsn, commit_lsn;
	int16 elided = 0;
};

static StoredPositions
StorePositions(const OutboxRow &r)
{
	StoredPositions s{r.v3, r.lsn, r.commit_lsn, 0};
	if (s.lsn && *s.lsn == r.v2) {
		s.lsn.reset();
		s.elided |= 1;
	}
	if (s.commit_lsn && *s.commit_lsn == r.v1) {
		s.commit_lsn.reset();
		s.elided |= 2;
	}
	if (s.v3 && *s.v3 == 0) {
		s.v3.reset();
		s.elided |= 4;
	}
	return s;
}

// The json Datum stored for a jsonb Datum (entity_key, payload): its text
// as jsonb_out prints it, less the blanks outside strings (jsonb_out puts
// one after each ':' and ',' and none elsewhere), so that casting it to
// jsonb gives the same jsonb.  About a quarter shorter than the jsonb (no
// per-member offsets, no alignment).  In the current memory context.
// PostgreSQL regime.
//
// With `values` (a non-empty object, OutboxRow::payload_values), its
// values alone: the top-level object's braces become brackets and each
// member's name and colon are left out ({"a":1,"b":[2]} gives [1,[2]]).
//
// The text is printed into a buffer kept by the backend (at most 1 MB
// between calls) and copied out at its final size: a fresh buffer of
// jsonb_out's initial 1 kB per row, in a chunk's per-tuple memory, was
// about 1 MB per 1,000 rows, whose new pages the kernel faulted in again
// for every chunk.
static StringInfo compact_json_buf = nullptr; /* in TopMemoryContext; plain data */


/* compact_json_buf, emptied but for room for a varlena header. */
static StringInfo
CompactBufPg()
{
	if (compact_json_buf == nullptr) {
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		compact_json_buf = makeStringInfo();
		MemoryContextSwitchTo(old);
	}
	resetStringInfo(compact_json_buf);
	appendStringInfoSpaces(compact_json_buf, VARHDRSZ);
	return compact_json_buf;
}

/* Frees compact_json_buf if an event-sized payload grew it: not kept. */
static void
ReleaseLargeCompactBufPg()
{
	if (compact_json_buf != nullptr && compact_json_buf->maxlen > 1024 * 1024) {
		pfree(compact_json_buf->data);
		pfree(compact_json_buf);
		compact_json_buf = nullptr;
	}
}

/* The first `len` bytes of compact_json_buf as a varlena in the current memory context. */
static Datum
TakeCompactBufPg(int len)
{
	char *result = (char *) palloc(size_t(len));
	memcpy(result, compact_json_buf->data, size_t(len));
	SET_VARSIZE(result, len);
	ReleaseLargeCompactBufPg();
	return PointerGetDatum(result);
}

static Datum
CompactJsonPg(Datum jsonb, bool values = false)
{
	Jsonb *jb = DatumGetJsonbP(jsonb);
	StringInfoData &buf = *CompactBufPg();
	(void) JsonbToCString(&buf, &jb->root, int(VARSIZE(jb)));
	int out = VARHDRSZ;
	bool in_string = false;
	int depth = 0;
	bool name_next = false; /* values: a member name of the top-level object comes next */
	bool in_name = false;   /* values: in that name (left out) */
	bool colon_next = false; /* values: its colon comes next (left out) */
	for (int i = VARHDRSZ; i < buf.len; i++) {
		char c = buf.data[i];
		if (in_string) {
			if (c == '\\' && i + 1 < buf.len) {
				if (!in_name) {
					buf.data[out++] = c;
					buf.data[out++] = buf.data[i + 1];
				}
				i++;
				continue;
			}
			if (c == '"') {
				in_string = false;
				if (in_name) {
					in_name = false;
					colon_next = true;
					continue;
				}
			}
			if (!in_name)
				buf.data[out++] = c;
			continue;
		}
		if (c == ' ')
			continue;
		if (colon_next && c == ':') {
			colon_next = false;
			continue;
		}
		if (c == '"') {
			in_string = true;
			if (values && depth == 1 && name_next) {
				name_next = false;
				in_name = true;
				continue;
			}
		} else if (c == '{' || c == '[') {
			depth++;
			if (values && depth == 1) {
				c = '[';
				name_next = true;
			}
		} else if (c == '}' || c == ']') {
			if (values && depth == 1)
				c = ']';
			depth--;
		} else if (c == ',' && values && depth == 1) {
			name_next = true;
		}
		buf.data[out++] = c;
	}
	return TakeCompactBufPg(out);
}

/*
 * Appends scalar `v` as JsonbToCString prints it (jsonb.c,
 * jsonb_put_escaped_value: escape_json of a string, numeric_out of a
 * number).  A string that PayloadValuePg did not NUL-terminate
 * (`terminated` false) is copied first, as JsonbToCString copies every
 * one.  PostgreSQL regime.
 */
static void
AppendJsonbScalarPg(StringInfo out, const JsonbValue &v, bool terminated)
{
	switch (v.type) {
	case jbvNull:
		appendBinaryStringInfo(out, "null", 4);
		break;
	case jbvBool:
		if (v.val.boolean)
			appendBinaryStringInfo(out, "true", 4);
		else
			appendBinaryStringInfo(out, "false", 5);
		break;
	case jbvNumeric:
		appendStringInfoString(out, DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric))));
		break;
	case jbvString:
		if (terminated) {
			escape_json(out, v.val.string.val);
		} else {
			char *copy = pnstrdup(v.val.string.val, size_t(v.val.string.len));
			escape_json(out, copy);
			pfree(copy);
		}
		break;
	default:
		elog(ERROR, "unexpected jsonb value type %d in an outbox payload", int(v.type));
	}
}

/*
 * A payload above this many bytes of text is left to the jsonb path, which
 * checks jsonb's own limits (JENTRY_OFFLENMASK, 256 MB, for the object's
 * contents) and raises their errors; below it the jsonb is well within
 * them (each value's binary form is at most its text plus a header and
 * alignment, over at most 1,600 columns).
 */
constexpr int kMaxStoredPayloadBytes = 128 * 1024 * 1024;

/*
 * Whether the stored text being printed in `buf` (compact_json_buf) has
 * passed kMaxStoredPayloadBytes: then the buffer is released and the
 * caller falls back to the jsonb path, whose own size errors apply.
 * PostgreSQL regime.
 */
static bool
StoredTextTooLargePg(StringInfo buf)
{
	if (buf->len <= kMaxStoredPayloadBytes)
		return false;
	ReleaseLargeCompactBufPg();
	return true;
}

/*
 * StoredPayloadFromImage's text: "[" the values in key order "]", each as
 * JsonbToCString prints the value ImageJsonbFastPg would put in the
 * object, which is what CompactJsonPg(that jsonb, true) leaves of
 * JsonbToCString's text of the object (its blanks are outside strings; a
 * scalar has none).  (Datum) 0 when it passes kMaxStoredPayloadBytes.
 * PostgreSQL regime.
 */
static Datum
StoredPayloadPg(int n, const int *order, const int8_t *kinds, FmgrInfo *const *outs, const Cell *cells)
{
	StringInfo buf = CompactBufPg();
	appendStringInfoChar(buf, '[');
	for (int j = 0; j < n; j++) {
		if (j > 0)
			appendStringInfoChar(buf, ',');
		const Cell &cell = cells[order[j]];
		const int8_t kind = kinds[j];
		if (!cell.isnull && (kind == kPayloadInt2 || kind == kPayloadInt4 || kind == kPayloadInt8)) {
			/* numeric_out of the integer's numeric (dscale 0) is its decimal digits: printed without the numeric */
			char digits[MAXINT8LEN + 1];
			const int64 x = kind == kPayloadInt2   ? int64(DatumGetInt16(cell.value))
			                : kind == kPayloadInt4 ? int64(DatumGetInt32(cell.value))
			                                       : DatumGetInt64(cell.value);
			appendBinaryStringInfo(buf, digits, pg_lltoa(x, digits));
			continue;
		}
		JsonbValue v;
		if (cell.isnull)
			v.type = jbvNull;
		else
			PayloadValuePg(v, kind, outs[j], cell.value);
		AppendJsonbScalarPg(buf, v, kind != kPayloadText);
		if (StoredTextTooLargePg(buf))
			return (Datum) 0;
	}
	appendStringInfoChar(buf, ']');
	return TakeCompactBufPg(buf->len);
}

std::optional<Datum>
StoredPayloadFromImage(const Target &t, const Image &img)
{
	/* cdc.direct_writes off: the reference path, the jsonb printed at the insert (regress outbox_stored_payload) */
	if (t.mapping.outbox_message || !cdc_direct_writes)
		return std::nullopt;
	img.RequireComplete();
	const Target::PayloadPlan &plan = PlanOf(t);
	if (!plan.storable)
		return std::nullopt;
	const Datum d = PgCall([&]() {
		return WithPayloadSettingsPg([&]() {
			return StoredPayloadPg(int(plan.order.size()), plan.order.data(), plan.kinds.data(), plan.outs.data(),
			                       img.cells.data());
		});
	});
	if (d == (Datum) 0)
		return std::nullopt;
	return d;
}

/*
 * The text CompactJsonPg(EntityKeyJsonbPg(...)) gives: {"name":"text",...},
 * the pairs given in jsonb key order, every name and text through
 * escape_json, as JsonbToCString prints them.  (Datum) 0 when it passes
 * kMaxStoredPayloadBytes.  PostgreSQL regime.
 */
static Datum
StoredEntityKeyPg(int n, const char *const *names, const char *const *texts)
{
	StringInfo buf = CompactBufPg();
	appendStringInfoChar(buf, '{');
	for (int j = 0; j < n; j++) {
		if (j > 0)
			appendStringInfoChar(buf, ',');
		escape_json(buf, names[j]);
		appendStringInfoChar(buf, ':');
		escape_json(buf, texts[j]);
		if (StoredTextTooLargePg(buf))
			return (Datum) 0;
	}
	appendStringInfoChar(buf, '}');
	return TakeCompactBufPg(buf->len);
}

std::optional<Datum>
StoredEntityKey(const Target &t, const Image &img)
{
	if (!t.mapping.outbox_message && cdc_direct_writes && !t.key.empty()) {
		/* the key columns in jsonb key order, worked out once per cached target (PlanOf) */
		const std::vector<int> &order = PlanOf(t).key_order;
		const size_t n = order.size();
		std::vector<const char *> names(n), texts(n);
		bool complete = true;
		for (size_t i = 0; i < n; i++) {
			const Cell &c = img.cells[size_t(order[i])];
			complete = complete && c.present && !c.unavailable && !c.isnull;
			names[i] = t.columns[size_t(order[i])].name.c_str();
			texts[i] = c.text.c_str();
		}
		if (complete) {
			const Datum d = PgCall([&]() { return StoredEntityKeyPg(int(n), names.data(), texts.data()); });
			if (d != (Datum) 0)
				return d;
		}
	}
	return std::nullopt;
}

OutboxValue
OutboxEntityKey(const Target &t, const Image &img)
{
	if (std::optional<Datum> d = StoredEntityKey(t, img))
		return {*d, true};
	return {EntityKeyJsonb(t, img), false};
}

// The payload of `r` as cdc.outbox_rows stores it.  PostgreSQL regime.
static Datum
StoredPayloadOfPg(const OutboxRow &r)
{
	return r.payload_stored ? *r.payload : CompactJsonPg(*r.payload, r.payload_values);
}

// The same from C++ (nullopt: no payload).
static std::optional<Datum>
StoredPayloadOf(const OutboxRow &r)
{
	if (!r.payload)
		return std::nullopt;
	return PgCall([&]() { return StoredPayloadOfPg(r); });
}

// The entity key of `r` as cdc.outbox_rows stores it.  PostgreSQL regime.
static Datum
StoredEntityKeyOfPg(const OutboxRow &r)
{
	return r.entity_key_stored ? *r.entity_key : CompactJsonPg(*r.entity_key);
}

// The same from C++ (nullopt: no entity key).
static std::optional<Datum>
StoredEntityKeyOf(const OutboxRow &r)
{
	if (!r.entity_key)
		return std::nullopt;
	return PgCall([&]() { return StoredEntityKeyOfPg(r); });
}

// One row into cdc.outbox_rows (ON CONFLICT DO NOTHING: an applied change
// whose row is there already adds none); true when it was inserted.
bool
InsertOutboxRow(const OutboxRow &r)
{
	/*
	 * As the statement below would write it, without SQL (the statement's
	 * planning and executor start-up were a quarter of a cdc_apply() call):
	 * ON CONFLICT DO NOTHING by speculative insertion.
	 */
	if (cdc_direct_writes) {
		const OutboxRow *one = &r;
		int64 n = PgCallAs(RunAs::ExtensionOwner(), [&]() { return InsertOutboxRowsDirectPg(&one, 1, true); });
		if (n >= 0)
			return n == 1;
	}
	auto int8_or_null = [](Params &p, const std::optional<int64_t> &x) {
		p.Add(INT8OID, x ? Int64GetDatum(*x) : (Datum) 0, !x);
	};
	const StoredPositions pos = StorePositions(r);
	const std::optional<Datum> entity_key = StoredEntityKeyOf(r), payload = StoredPayloadOf(r);
	Params p;
	p.Add(UUIDOID, PointerGetDatum(r.ikey.data()), false);
	p.AddOid(r.target);
	p.Add(INT4OID, Int32GetDatum(r.src), false);
	p.Add(CHAROID, CharGetDatum(r.op), false);
	p.Add(INT4OID, Int32GetDatum(r.v0), false);
	p.AddInt8(r.v1);
	p.AddInt8(r.v2);
	int8_or_null(p, pos.v3);
	int8_or_null(p, pos.lsn);
	int8_or_null(p, pos.commit_lsn);
	int8_or_null(p, r.tx_id);
	p.Add(JSONOID, entity_key.value_or((Datum) 0), !entity_key);
	p.AddVarlena(JSONOID, payload.value_or((Datum) 0), !payload);
	p.Add(BOOLOID, BoolGetDatum(r.new_by_order), false);
	p.Add(INT2OID, Int16GetDatum(pos.elided), false);
	uint64_t n = Execute("INSERT INTO cdc.outbox_rows (ikey, target, src, op, v0, v1, v2, v3, lsn, commit_lsn, tx_id, "
	                     "entity_key, payload, stream_ordered, elided) "
	                     "VALUES ($1, $2::pg_catalog.regclass, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) "
	                     "ON CONFLICT (target, v1, v2, ikey) WHERE NOT stream_ordered DO NOTHING",
	                     p, true);
	return n == 1;
}

/*
 * The columns of cdc.outbox_rows the engine fills, by name; the others (id,
 * created_at, published_at) take their column defaults.
 */
static const char *const kOutboxColumns[] = {"ikey", "target", "src",        "op",         "v0",      "v1",
                                             "v2",   "v3",     "lsn",        "tx_id",      "commit_lsn",
                                             "entity_key",     "payload",    "stream_ordered", "elided"};
constexpr int kOutboxColumnCount = int(sizeof(kOutboxColumns) / sizeof(kOutboxColumns[0]));

/*
 * What inserting into cdc.outbox_rows without a statement needs to know of
 * the table, kept per backend: the attribute numbers of the columns the
 * engine fills (kOutboxColumns) and the planned defaults of the others
 * (id's nextval, created_at's now(), and any column a relay added), which
 * build_column_default reads from the catalog and the planner simplifies,
 * about 2 % of a cdc_apply() call when done per call.  Any relcache
 * invalidation of the table (ALTER TABLE, a new default, a dropped column)
 * empties it.  Plain data in its own memory context under
 * CacheMemoryContext: no C++ object, nothing to destroy at exit.
 */
struct OutboxLayout {
	Oid relid;
	bool valid;
	int natts;
	int attno[kOutboxColumnCount];
	Oid ikey_index; /* outbox_rows_ikey: the arbiter of ON CONFLICT (target, v1, v2, ikey) WHERE NOT stream_ordered */
	Expr **defaults; /* [natts]: planned default, or NULL */
};
static OutboxLayout *outbox_layout = nullptr;
static MemoryContext outbox_layout_cxt = nullptr;

static void
OutboxLayoutInvalidate(Datum, Oid relid)
{
	if (outbox_layout != nullptr && (relid == InvalidOid || relid == outbox_layout->relid))
		outbox_layout->valid = false;
}

/*
 * The layout of `rel` (cdc.outbox_rows, opened by the caller), built when
 * missing or invalidated; NULL when one of the columns the engine fills is
 * missing (the statement then reports it).  PostgreSQL regime.
 */
static const OutboxLayout *
OutboxLayoutPg(Relation rel)
{
	if (outbox_layout != nullptr && outbox_layout->valid && outbox_layout->relid == RelationGetRelid(rel) &&
	    outbox_layout->natts == RelationGetDescr(rel)->natts)
		return outbox_layout;
	if (outbox_layout_cxt == nullptr) {
		outbox_layout_cxt = AllocSetContextCreate(CacheMemoryContext, "cdc outbox layout", ALLOCSET_SMALL_SIZES);
		CacheRegisterRelcacheCallback(OutboxLayoutInvalidate, (Datum) 0);
	}
	outbox_layout = nullptr;
	MemoryContextReset(outbox_layout_cxt);
	TupleDesc desc = RelationGetDescr(rel);
	int attno[kOutboxColumnCount];
	for (int c = 0; c < kOutboxColumnCount; c++) {
		attno[c] = attnameAttNum(rel, kOutboxColumns[c], false);
		if (attno[c] <= 0)
			return nullptr;
	}
	/* entity_key and payload are filled with json text, elided with an int2: not into columns of another type */
	if (TupleDescAttr(desc, attno[11] - 1)->atttypid != JSONOID || TupleDescAttr(desc, attno[12] - 1)->atttypid != JSONOID ||
	    TupleDescAttr(desc, attno[14] - 1)->atttypid != INT2OID)
		return nullptr;
	Oid ikey_index = get_relname_relid("outbox_rows_ikey", RelationGetNamespace(rel));
	if (!OidIsValid(ikey_index))
		return nullptr;
	bool *filled = (bool *) palloc0(sizeof(bool) * desc->natts);
	for (int c = 0; c < kOutboxColumnCount; c++)
		filled[attno[c] - 1] = true;
	Expr **planned = (Expr **) palloc0(sizeof(Expr *) * desc->natts);
	for (int i = 0; i < desc->natts; i++) {
		if (filled[i] || TupleDescAttr(desc, i)->attisdropped)
			continue;
		Node *e = build_column_default(rel, i + 1);
		if (e != NULL)
			planned[i] = expression_planner((Expr *) e);
	}
	/* the caller's lock keeps the definition from changing while it is read */
	MemoryContext old = MemoryContextSwitchTo(outbox_layout_cxt);
	OutboxLayout *l = (OutboxLayout *) palloc0(sizeof(OutboxLayout));
	l->relid = RelationGetRelid(rel);
	l->natts = desc->natts;
	memcpy(l->attno, attno, sizeof(attno));
	l->ikey_index = ikey_index;
	l->defaults = (Expr **) palloc0(sizeof(Expr *) * desc->natts);
	for (int i = 0; i < desc->natts; i++)
		if (planned[i] != NULL)
			l->defaults[i] = (Expr *) copyObjectImpl(planned[i]);
	MemoryContextSwitchTo(old);
	pfree(filled);
	pfree(planned);
	outbox_layout = l;
	l->valid = true;
	return l;
}

/* qsort order of OutboxRow pointers by the arbiter's key (target, v1, v2, ikey) */
static int
CompareOutboxKeys(const void *x, const void *y)
{
	const OutboxRow &a = **(const OutboxRow *const *) x;
	const OutboxRow &b = **(const OutboxRow *const *) y;
	if (a.target != b.target)
		return a.target < b.target ? -1 : 1;
	if (a.v1 != b.v1)
		return a.v1 < b.v1 ? -1 : 1;
	if (a.v2 != b.v2)
		return a.v2 < b.v2 ? -1 : 1;
	return memcmp(a.ikey.data(), b.ikey.data(), a.ikey.size());
}

/*
 * Could a row of rows[0..n) find its key taken in cdc.outbox_rows?  Looks,
 * per target, for any row of the arbiter index outbox_rows_ikey (target,
 * v1, v2, ikey) with v1 between the smallest and the largest v1 of that
 * target's new rows (or, where they share one v1, with that v1 and v2
 * between their smallest and largest v2), under a dirty snapshot (committed rows and rows being
 * inserted by transactions in progress, as the pre-check sees them): one
 * descent per target instead of one per row.  False: no new row's key can
 * be taken, so InsertSkippingTakenKeysPg may go without its per-row
 * pre-check.  A key taken by another transaction between this look and the
 * insert is still found, by the insert's own arbiter check, and that row
 * deleted again: the pre-check had the same window.  True (any row in a
 * range, even with another key, or two new rows with one key): the per-row
 * pre-check decides.  Outbox
 * rows of a new version are newer than every row of their target, so the
 * common answer is false.  `ikey` is the open arbiter index.  PostgreSQL
 * regime.
 */
static bool
OutboxKeysMayBeTakenPg(Relation rel, Relation ikey, const OutboxRow *const *rows, size_t n)
{
	/*
	 * Per target, the v1 range of its rows (few targets per flush: a linear
	 * list), and where they all have one v1 (the changes of one source
	 * transaction, or a single call's row) the v2 range within it: the rows
	 * an earlier call wrote for the same transaction are then outside it.
	 */
	struct Range {
		Oid target;
		int64 lo, hi;
		int64 lo2, hi2;
	};
	Range *ranges = (Range *) palloc(sizeof(Range) * n);
	size_t nranges = 0;
	for (size_t i = 0; i < n; i++) {
		const OutboxRow &r = *rows[i];
		size_t k = 0;
		while (k < nranges && ranges[k].target != r.target)
			k++;
		if (k == nranges)
			ranges[nranges++] = Range{r.target, r.v1, r.v1, r.v2, r.v2};
		ranges[k].lo = std::min<int64>(ranges[k].lo, r.v1);
		ranges[k].hi = std::max<int64>(ranges[k].hi, r.v1);
		ranges[k].lo2 = std::min<int64>(ranges[k].lo2, r.v2);
		ranges[k].hi2 = std::max<int64>(ranges[k].hi2, r.v2);
	}
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	bool found = false;
	for (size_t k = 0; k < nranges && !found; k++) {
		const Range &g = ranges[k];
		ScanKeyData keys[4];
		int nkeys = 3;
		ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(g.target));
		if (g.lo == g.hi) {
			ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(g.lo));
			ScanKeyInit(&keys[2], 3, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(g.lo2));
			ScanKeyInit(&keys[3], 3, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(g.hi2));
			nkeys = 4;
		} else {
			ScanKeyInit(&keys[1], 2, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(g.lo));
			ScanKeyInit(&keys[2], 2, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(g.hi));
		}
		IndexScanDesc scan = index_beginscan(rel, ikey, &dirty, nkeys, 0);
		index_rescan(scan, keys, nkeys, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, slot);
		index_endscan(scan);
	}
	ExecDropSingleTupleTableSlot(slot);
	pfree(ranges);
	if (found)
		return true;
	/* two new rows with one key: the second one's key is taken by the first (the pre-check keeps it out) */
	const OutboxRow **sorted = (const OutboxRow **) palloc(sizeof(OutboxRow *) * n);
	memcpy(sorted, rows, sizeof(OutboxRow *) * n);
	qsort(sorted, n, sizeof(OutboxRow *), CompareOutboxKeys);
	for (size_t i = 1; i < n && !found; i++)
		found = sorted[i - 1]->target == sorted[i]->target && sorted[i - 1]->v1 == sorted[i]->v1 &&
		        sorted[i - 1]->v2 == sorted[i]->v2 && sorted[i - 1]->ikey == sorted[i]->ikey;
	pfree(sorted);
	return found;
}

/*
 * Inserts *rows[0..n) into cdc.outbox_rows through the table access method
 * and the executor's index maintenance, as COPY FROM does (copyfrom.c):
 * table_multi_insert writes the rows of a page with one WAL record, then
 * ExecInsertIndexTuples adds each row's index entries (a duplicate key
 * raises 23505 as a plain INSERT does).  Column defaults (id's nextval,
 * created_at's now()) and CHECK / NOT NULL constraints are evaluated by the
 * executor, as for an INSERT.  Returns the number of rows inserted, or -1
 * without writing anything when a plain INSERT statement could behave
 * differently: the current user lacks USAGE on schema cdc or INSERT on the
 * table (the statement reports the error), or the table has triggers,
 * rules, row-level security or generated columns (someone added them; the
 * statement honours them), or the transaction is read-only (the statement
 * raises 25006).  With `skip_taken`, the rows end as INSERT ... ON
 * CONFLICT (target, v1, v2, ikey) DO NOTHING leaves them, one after the
 * other in array order (InsertSkippingTakenKeysPg, without speculative
 * insertion, with its pre-check: a row whose key is taken is not inserted
 * at all, so a relay that decodes cdc.outbox_rows from the WAL sees no
 * insert of it, as with speculative insertion): a row with its key,
 * committed, being inserted, or inserted by an earlier element, leaves it
 * out (inserted_rows[i] 0 for it, when given);
 * not under REPEATABLE READ or SERIALIZABLE, where the statement also
 * checks that such a row is visible to its snapshot (-1 there).
 * PostgreSQL regime: call through
 * PgCallAs, as the owner of the extension's tables
 * (RunAs::ExtensionOwner).
 */
static int64
InsertOutboxRowsDirectPg(const OutboxRow *const *rows, size_t n, bool skip_taken, char *inserted_rows)
{
	if (XactReadOnly || (skip_taken && IsolationUsesXactSnapshot()))
		return -1;
	Oid nsp = get_namespace_oid("cdc", true);
	Oid relid = OidIsValid(nsp) ? get_relname_relid("outbox_rows", nsp) : InvalidOid;
	if (!OidIsValid(relid) || pg_namespace_aclcheck(nsp, GetUserId(), ACL_USAGE) != ACLCHECK_OK ||
	    pg_class_aclcheck(relid, GetUserId(), ACL_INSERT) != ACLCHECK_OK)
		return -1;
	Relation rel = table_open(relid, RowExclusiveLock);
	TupleDesc desc = RelationGetDescr(rel);
	bool plain = rel->rd_rel->relkind == RELKIND_RELATION && rel->trigdesc == NULL && !rel->rd_rel->relhasrules &&
	             !rel->rd_rel->relrowsecurity && !(desc->constr != NULL && desc->constr->has_generated_stored);
	const OutboxLayout *layout = plain ? OutboxLayoutPg(rel) : nullptr;
	if (layout == nullptr) {
		table_close(rel, NoLock);
		return -1;
	}
	const int *attno = layout->attno;

	ExecWrite w;
	BeginExecWritePg(rel, ACL_INSERT, &w, skip_taken);
	EState *estate = w.estate;

	/* Defaults of the columns the engine does not fill, planned once per backend (OutboxLayoutPg). */
	ExprState **defaults = (ExprState **) palloc0(sizeof(ExprState *) * desc->natts);
	for (int i = 0; i < desc->natts; i++)
		if (layout->defaults[i] != NULL)
			defaults[i] = ExecInitExpr(layout->defaults[i], NULL);

	ExprContext *econtext = GetPerTupleExprContext(estate);
	auto set = [&](TupleTableSlot *s, int c, Datum d, bool isnull) {
		s->tts_values[attno[c] - 1] = d;
		s->tts_isnull[attno[c] - 1] = isnull;
	};
	/*
	 * Without skip_taken every row goes in (a duplicate raises 23505).  With
	 * it, the per-row pre-check runs only where a key may be taken (one look
	 * at the arbiter for the whole flush).
	 */
	bool precheck = false;
	if (skip_taken) {
		Relation ikey = OpenedIndexPg(&w, layout->ikey_index);
		precheck = ikey != NULL && OutboxKeysMayBeTakenPg(rel, ikey, rows, n);
	}
	int64 inserted = InsertRowsPg(&w, int64(n), skip_taken ? layout->ikey_index : InvalidOid, precheck,
	                              inserted_rows, [&](TupleTableSlot *s, int64 k) {
		const OutboxRow &r = *rows[k];
		for (int i = 0; i < desc->natts; i++) {
			s->tts_isnull[i] = true;
			s->tts_values[i] = (Datum) 0;
			if (defaults[i] != NULL)
				s->tts_values[i] = ExecEvalExpr(defaults[i], econtext, &s->tts_isnull[i]);
		}
		set(s, 0, PointerGetDatum(r.ikey.data()), false);
		set(s, 1, ObjectIdGetDatum(r.target), false);
		set(s, 2, Int32GetDatum(r.src), false);
		set(s, 3, CharGetDatum(r.op), false);
		set(s, 4, Int32GetDatum(r.v0), false);
		set(s, 5, Int64GetDatum(r.v1), false);
		set(s, 6, Int64GetDatum(r.v2), false);
		const StoredPositions pos = StorePositions(r);
		set(s, 7, pos.v3 ? Int64GetDatum(*pos.v3) : (Datum) 0, !pos.v3);
		set(s, 8, pos.lsn ? Int64GetDatum(*pos.lsn) : (Datum) 0, !pos.lsn);
		set(s, 9, r.tx_id ? Int64GetDatum(*r.tx_id) : (Datum) 0, !r.tx_id);
		set(s, 10, pos.commit_lsn ? Int64GetDatum(*pos.commit_lsn) : (Datum) 0, !pos.commit_lsn);
		/* the json text of the jsonb, in the chunk's per-tuple memory (InsertRowsPg) */
		set(s, 11, r.entity_key ? StoredEntityKeyOfPg(r) : (Datum) 0, !r.entity_key);
		set(s, 12, r.payload ? StoredPayloadOfPg(r) : (Datum) 0, !r.payload);
		set(s, 13, BoolGetDatum(r.new_by_order), false);
		set(s, 14, Int16GetDatum(pos.elided), false);
		ExecStoreVirtualTuple(s);
	});
	EndExecWritePg(&w);
	table_close(rel, NoLock);
	return inserted;
}

// Inserts the queued outbox rows in input order and counts the inserted
// ones per target: through the executor (InsertOutboxRowsDirectPg) where it
// gives what the statement gives, else one statement, every column a typed
// array (no text is parsed).  The statement's arrays are unnested in the select list (ProjectSet), which
// yields their elements side by side in array order without materializing
// them, so the ids (nextval, evaluated per row as it is inserted) follow the
// input.
void
FlushOutbox(DeferredOutbox &q, std::map<Oid, Counters> &counters)
{
	if (q.rows.empty())
		return;
	std::stable_sort(q.rows.begin(), q.rows.end(),
	                 [](const OutboxRow &a, const OutboxRow &b) { return a.position < b.position; });
	/* Entries of outbox_via 'message' mappings: one message each, in input order. */
	size_t table_rows = 0;
	for (const OutboxRow &r : q.rows)
		if (r.message.empty()) {
			table_rows++;
		} else {
			EmitOutboxMessage(r.target, r.message);
			counters[r.target].outbox_rows++;
		}
	if (table_rows == 0) {
		q.rows.clear();
		return;
	}
	Oid only = InvalidOid;
	bool one_target = true, new_by_order = true;
	for (const OutboxRow &r : q.rows)
		if (r.message.empty()) {
			one_target = one_target && (only == InvalidOid || only == r.target);
			only = r.target;
			new_by_order = new_by_order && r.new_by_order;
		}
	if (cdc_direct_writes) {
		/*
		 * Through the executor.  Rows of a stream-ordered target cannot meet
		 * their key (each change is newer than anything applied to the
		 * target before): they need no ON CONFLICT, so they go straight to
		 * the table as COPY writes them (a duplicate would raise 23505 and
		 * roll the group back, never drop a row).  Others are ON CONFLICT DO
		 * NOTHING row by row, counted per target from which rows went in.
		 */
		const bool plain = one_target && new_by_order;
		std::vector<const OutboxRow *> table;
		table.reserve(table_rows);
		for (const OutboxRow &r : q.rows)
			if (r.message.empty())
				table.push_back(&r);
		std::vector<char> went_in(plain ? 0 : table.size());
		/* as the INSERT statement runs: as the owner of the extension's tables */
		int64 n = PgCallAs(RunAs::ExtensionOwner(), [&]() {
			return InsertOutboxRowsDirectPg(table.data(), table.size(), !plain, plain ? nullptr : went_in.data());
		});
		if (n >= 0) {
			if (plain)
				counters[only].outbox_rows += int64_t(n);
			for (size_t i = 0; i < went_in.size(); i++)
				if (went_in[i])
					counters[table[i]->target].outbox_rows++;
			q.rows.clear();
			return;
		}
	}
	if (table_rows == 1 && !(one_target && new_by_order)) {
		/*
		 * One row (as one event's batch has): the single-row statement, which
		 * builds no arrays: a payload as large as the event is not copied
		 * into one (docs/benchmarks.md, "Memory per event").
		 */
		for (const OutboxRow &r : q.rows)
			if (r.message.empty() && InsertOutboxRow(r))
				counters[r.target].outbox_rows++;
		q.rows.clear();
		return;
	}
	ArrayParam ikeys(UUIDOID, 16, false, TYPALIGN_CHAR);
	ArrayParam targets(OIDOID, sizeof(Oid), true, TYPALIGN_INT);
	ArrayParam srcs(INT4OID, sizeof(int32), true, TYPALIGN_INT), v0(INT4OID, sizeof(int32), true, TYPALIGN_INT);
	ArrayParam ops(CHAROID, 1, true, TYPALIGN_CHAR);
	auto int8_array = []() { return ArrayParam(INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE); };
	ArrayParam v1 = int8_array(), v2 = int8_array(), v3 = int8_array(), lsn = int8_array(), commit_lsn = int8_array(),
	           tx_id = int8_array();
	ArrayParam ekeys(JSONOID, -1, false, TYPALIGN_INT), payloads(JSONOID, -1, false, TYPALIGN_INT);
	ArrayParam stream(BOOLOID, 1, true, TYPALIGN_CHAR), elided(INT2OID, sizeof(int16), true, TYPALIGN_SHORT);
	auto add_int8 = [](ArrayParam &a, const std::optional<int64_t> &x) {
		a.Add(x ? Int64GetDatum(*x) : (Datum) 0, !x);
	};
	for (const OutboxRow &r : q.rows) {
		if (!r.message.empty())
			continue;
		ikeys.Add(PointerGetDatum(r.ikey.data()), false);
		targets.Add(ObjectIdGetDatum(r.target), false);
		srcs.Add(Int32GetDatum(r.src), false);
		ops.Add(CharGetDatum(r.op), false);
		v0.Add(Int32GetDatum(r.v0), false);
		v1.Add(Int64GetDatum(r.v1), false);
		v2.Add(Int64GetDatum(r.v2), false);
		const StoredPositions pos = StorePositions(r);
		add_int8(v3, pos.v3);
		add_int8(lsn, pos.lsn);
		add_int8(commit_lsn, pos.commit_lsn);
		add_int8(tx_id, r.tx_id);
		const std::optional<Datum> ekey = StoredEntityKeyOf(r), payload = StoredPayloadOf(r);
		ekeys.Add(ekey.value_or((Datum) 0), !ekey);
		payloads.Add(payload.value_or((Datum) 0), !payload);
		stream.Add(BoolGetDatum(r.new_by_order), false);
		elided.Add(Int16GetDatum(pos.elided), false);
	}
	Params p;
	ikeys.AddTo(p, UUIDARRAYOID);
	targets.AddTo(p, OIDARRAYOID);
	srcs.AddTo(p, INT4ARRAYOID);
	ops.AddTo(p, CHARARRAYOID);
	v0.AddTo(p, INT4ARRAYOID);
	v1.AddTo(p, INT8ARRAYOID);
	v2.AddTo(p, INT8ARRAYOID);
	v3.AddTo(p, INT8ARRAYOID);
	lsn.AddTo(p, INT8ARRAYOID);
	commit_lsn.AddTo(p, INT8ARRAYOID);
	tx_id.AddTo(p, INT8ARRAYOID);
	ekeys.AddTo(p, JSONARRAYOID);
	payloads.AddTo(p, JSONARRAYOID, /* by_reference */ true);
	stream.AddTo(p, BOOLARRAYOID);
	elided.AddTo(p, INT2ARRAYOID);
	const std::string insert =
		"INSERT INTO cdc.outbox_rows (ikey, target, src, op, v0, v1, v2, v3, lsn, commit_lsn, tx_id, entity_key, payload, "
		"stream_ordered, elided) "
		"SELECT pg_catalog.unnest($1), pg_catalog.unnest($2)::pg_catalog.regclass, pg_catalog.unnest($3), "
		"pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), "
		"pg_catalog.unnest($8), pg_catalog.unnest($9), pg_catalog.unnest($10), pg_catalog.unnest($11), "
		"pg_catalog.unnest($12), pg_catalog.unnest($13), pg_catalog.unnest($14), pg_catalog.unnest($15) ";
	/*
	 * ON CONFLICT: an applied change whose row is there already (a change
	 * applied again under expired_policy 'apply' after its records were
	 * pruned) adds none.  Rows of one target are counted from the number
	 * inserted; only a flush over several targets needs them returned.
	 */
	if (one_target && new_by_order) {
		/* The same as a plain INSERT, where the direct path does not apply. */
		counters[only].outbox_rows += int64_t(Execute(insert, p, true));
	} else if (one_target) {
		counters[only].outbox_rows += int64_t(Execute(insert + "ON CONFLICT (target, v1, v2, ikey) WHERE NOT stream_ordered DO NOTHING", p, true));
	} else {
		uint64_t n = Execute(insert + "ON CONFLICT (target, v1, v2, ikey) WHERE NOT stream_ordered DO NOTHING RETURNING target", p, true);
		CountReturnedTargets(n, counters);
	}
	q.rows.clear();
}

} // namespace cdc::pg

// Images and what is derived from them: see image.hpp.
//
// Glue, C++ regime: the column types' input and output functions run under
// PgCall (VersionIntPg is PostgreSQL regime, called only through PgCall).
// Must not write to any table and must not cache anything across calls:
// the target's cached metadata belongs to target.cpp.
#include "pg/apply/image.hpp"

#include "core/envelope.hpp"
#include "core/layout.hpp"
#include "core/errors.hpp"
#include "pg/apply/internal.hpp"
#include "pg/apply/outbox.hpp"
#include "pg/apply/target.hpp"
#include "pg/spi.hpp"

#include <algorithm>
#include <cmath>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdexcept>

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/fmgrprotos.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/typcache.h"
#include "utils/bytea.h"
#include "utils/pg_locale.h"
#include "access/toast_compression.h"
#include "access/toast_internals.h"
#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/multirangetypes.h"
#include "utils/rangetypes.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "common/shortest_dec.h"
#include "miscadmin.h"
#include "pgtime.h"
#include "utils/datetime.h"
#include "utils/xml.h"
#include "port/pg_bswap.h"
#include "port/pg_crc32c.h"
}

namespace cdc::pg {

namespace {

/* What the output text of a type can depend on (ContainerSettingsPg). */
constexpr int kDependsOnStyles = 1; /* DateStyle, TimeZone, IntervalStyle, extra_float_digits, bytea_output */
constexpr int kDependsOnMonetary = 2; /* lc_monetary */
constexpr int kHoldsNumbers = 4; /* numeric or float elements, bounds or attributes: KeyTextPg normalises them */

/*
 * On which session settings does the output text of a value of `type`
 * depend through an element, bound or attribute (kDependsOn* bits; and
 * kHoldsNumbers for numeric or float ones, whose equal values print
 * differently: 1.0 and 1, -0 and 0): an
 * array, range or multirange of, a composite with, or a domain over a
 * date, time, float, bytea or money type, at any depth; money itself.
 * The scalar types' own texts are SettledTextPg's business, so a scalar
 * at depth 0 other than money gives 0.  Type cache lookups only (hash
 * probes; a composite's attributes as the type cache keeps them, current
 * after ALTER TYPE).
 */
int
ContainerSettingsPg(Oid type, int depth = 0)
{
	check_stack_depth();
	if (type == CASHOID)
		return kDependsOnMonetary;
	if (depth > 0) {
		switch (type) {
		case NUMERICOID: return kHoldsNumbers;
		case FLOAT4OID:
		case FLOAT8OID: return kDependsOnStyles | kHoldsNumbers;
		case DATEOID:
		case TIMEOID:
		case TIMETZOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case INTERVALOID:
		case BYTEAOID: return kDependsOnStyles;
		default: break;
		}
	}
	TypeCacheEntry *tc = lookup_type_cache(type, 0);
	switch (tc->typtype) {
	case TYPTYPE_DOMAIN: return ContainerSettingsPg(getBaseType(type), depth);
	case TYPTYPE_COMPOSITE: {
		tc = lookup_type_cache(type, TYPECACHE_TUPDESC);
		int bits = 0;
		for (int i = 0; tc->tupDesc != NULL && i < tc->tupDesc->natts; i++) {
			Form_pg_attribute att = TupleDescAttr(tc->tupDesc, i);
			if (!att->attisdropped)
				bits |= ContainerSettingsPg(att->atttypid, depth + 1);
		}
		return bits;
	}
	case TYPTYPE_RANGE:
		tc = lookup_type_cache(type, TYPECACHE_RANGE_INFO);
		return tc->rngelemtype != NULL ? ContainerSettingsPg(tc->rngelemtype->type_id, depth + 1) : 0;
	case TYPTYPE_MULTIRANGE:
		tc = lookup_type_cache(type, TYPECACHE_MULTIRANGE_INFO);
		return tc->rngtype != NULL ? ContainerSettingsPg(tc->rngtype->type_id, depth + 1) : 0;
	default: break;
	}
	/* a true array (typelem set, variable length), as get_element_type tells it */
	if (OidIsValid(tc->typelem) && tc->typlen == -1)
		return ContainerSettingsPg(tc->typelem, depth + 1);
	return 0;
}

/*
 * The UTC zone, looked up once per backend: pg_tzset keeps every zone it
 * loaded for the backend's life (pgtz.c's cache, never freed), so the
 * pointer stays valid; the look-up (an upper-cased copy and a hash probe)
 * was 0.2 % of cdc_apply_batch()'s CPU, once per timestamptz value hashed.
 */
pg_tz *
UtcTzPg()
{
	static pg_tz *utc = nullptr;
	if (utc == nullptr)
		utc = pg_tzset("UTC");
	return utc;
}

/*
 * Sets, for what runs until EndSettledOutputPg(<the level it returns>),
 * the settings SettledTextPg prints with that the session does not have:
 * with kDependsOnStyles DateStyle ISO, IntervalStyle postgres,
 * extra_float_digits 1 (any value above 0 prints the same shortest exact
 * decimal), bytea_output hex, and (`utc`) TimeZone UTC; with
 * kDependsOnMonetary lc_monetary C.  Only the settings that differ are
 * set, as a function's SET clause sets them (fmgr_security_definer: a GUC
 * nest level, undone by EndSettledOutputPg, or by the abort of the
 * (sub)transaction when what runs meanwhile raises an error); a session
 * with those settings already pays four comparisons and gets 0.
 */
int
BeginSettledPg(int depends, bool utc)
{
	const char *set[6][2];
	int n = 0;
	if (depends & kDependsOnStyles) {
		if (DateStyle != USE_ISO_DATES)
			set[n][0] = "datestyle", set[n++][1] = "ISO, MDY";
		if (utc && session_timezone != UtcTzPg())
			set[n][0] = "timezone", set[n++][1] = "UTC";
		if (IntervalStyle != INTSTYLE_POSTGRES)
			set[n][0] = "intervalstyle", set[n++][1] = "postgres";
		if (extra_float_digits < 1)
			set[n][0] = "extra_float_digits", set[n++][1] = "1";
		if (bytea_output != BYTEA_OUTPUT_HEX)
			set[n][0] = "bytea_output", set[n++][1] = "hex";
	}
	if ((depends & kDependsOnMonetary) && strcmp(locale_monetary, "C") != 0)
		set[n][0] = "lc_monetary", set[n++][1] = "C";
	if (n == 0)
		return 0;
	int nest = NewGUCNestLevel();
	for (int i = 0; i < n; i++)
		(void) set_config_option(set[i][0], set[i][1], PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nest;
}

/*
 * The output function's text of `v` under the settings SettledTextPg
 * prints with (BeginSettledPg, TimeZone UTC included), for the call only.
 */
char *
OutputInSettledSettingsPg(FmgrInfo *out_fn, Datum v, int depends)
{
	const int nest = BeginSettledPg(depends, /* utc */ true);
	char *out = OutputFunctionCall(out_fn, v);
	EndSettledOutputPg(nest);
	return out;
}

/*
 * `v` of `type` with every numeric element, bound or attribute (at any
 * depth: arrays, ranges, multiranges, composites, domains) without its
 * insignificant trailing zeros (trim_scale) and every float -0 as 0: an
 * equal value whose output text is the one KeyTextPg gives every equal
 * value, as it does for scalar keys (found in review: '{1.0}' and '{1}',
 * one row of a numeric[]-keyed target, got two entity records, and an
 * older change of the deleted row brought it back).  New values are
 * palloc'd; `v` itself is not changed.
 */
Datum
NormaliseNumbersPg(Oid type, Datum v)
{
	check_stack_depth();
	switch (type) {
	case NUMERICOID: return DirectFunctionCall1(numeric_trim_scale, v);
	case FLOAT8OID: return DatumGetFloat8(v) == 0.0 ? Float8GetDatum(0.0) : v;
	case FLOAT4OID: return DatumGetFloat4(v) == 0.0f ? Float4GetDatum(0.0f) : v;
	default: break;
	}
	TypeCacheEntry *tc = lookup_type_cache(type, 0);
	switch (tc->typtype) {
	case TYPTYPE_DOMAIN: return NormaliseNumbersPg(getBaseType(type), v);
	case TYPTYPE_COMPOSITE: {
		HeapTupleHeader rec = DatumGetHeapTupleHeader(v);
		TupleDesc desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(rec), HeapTupleHeaderGetTypMod(rec));
		HeapTupleData tuple;
		tuple.t_len = HeapTupleHeaderGetDatumLength(rec);
		ItemPointerSetInvalid(&tuple.t_self);
		tuple.t_tableOid = InvalidOid;
		tuple.t_data = rec;
		Datum *values = (Datum *) palloc(sizeof(Datum) * (desc->natts + 1));
		bool *nulls = (bool *) palloc(sizeof(bool) * (desc->natts + 1));
		heap_deform_tuple(&tuple, desc, values, nulls);
		for (int i = 0; i < desc->natts; i++) {
			Form_pg_attribute att = TupleDescAttr(desc, i);
			if (!att->attisdropped && !nulls[i] && (ContainerSettingsPg(att->atttypid, 1) & kHoldsNumbers))
				values[i] = NormaliseNumbersPg(att->atttypid, values[i]);
		}
		HeapTuple formed = heap_form_tuple(desc, values, nulls);
		ReleaseTupleDesc(desc);
		return HeapTupleGetDatum(formed);
	}
	case TYPTYPE_RANGE: {
		tc = lookup_type_cache(type, TYPECACHE_RANGE_INFO);
		RangeBound lower, upper;
		bool empty;
		range_deserialize(tc, DatumGetRangeTypeP(v), &lower, &upper, &empty);
		if (empty)
			return v;
		if (!lower.infinite)
			lower.val = NormaliseNumbersPg(tc->rngelemtype->type_id, lower.val);
		if (!upper.infinite)
			upper.val = NormaliseNumbersPg(tc->rngelemtype->type_id, upper.val);
		return RangeTypePGetDatum(make_range(tc, &lower, &upper, false));
	}
	case TYPTYPE_MULTIRANGE: {
		tc = lookup_type_cache(type, TYPECACHE_MULTIRANGE_INFO);
		int32 n;
		RangeType **ranges;
		multirange_deserialize(tc->rngtype, DatumGetMultirangeTypeP(v), &n, &ranges);
		for (int32 i = 0; i < n; i++)
			ranges[i] = DatumGetRangeTypeP(NormaliseNumbersPg(tc->rngtype->type_id, RangeTypePGetDatum(ranges[i])));
		return MultirangeTypePGetDatum(make_multirange(type, tc->rngtype, n, ranges));
	}
	default: break;
	}
	if (OidIsValid(tc->typelem) && tc->typlen == -1) {
		ArrayType *a = DatumGetArrayTypeP(v);
		const Oid elem = ARR_ELEMTYPE(a);
		int16 elmlen;
		bool elmbyval;
		char elmalign;
		get_typlenbyvalalign(elem, &elmlen, &elmbyval, &elmalign);
		Datum *elems;
		bool *nulls;
		int n;
		deconstruct_array(a, elem, elmlen, elmbyval, elmalign, &elems, &nulls, &n);
		for (int i = 0; i < n; i++)
			if (!nulls[i])
				elems[i] = NormaliseNumbersPg(elem, elems[i]);
		return PointerGetDatum(construct_md_array(elems, nulls, ARR_NDIM(a), ARR_DIMS(a), ARR_LBOUND(a), elem, elmlen,
		                                          elmbyval, elmalign));
	}
	return v;
}

} // namespace

int
BeginPayloadSettingsPg()
{
	return BeginSettledPg(kDependsOnStyles, /* utc */ false);
}

void
EndSettledOutputPg(int nest)
{
	if (nest != 0)
		AtEOXact_GUC(true, nest);
}

/*
 * The input function's value of `text` with the settings that change how
 * input functions read a value at their defaults, for the call only (as
 * OutputInSettledSettingsPg sets its own): array_nulls on (the array
 * literals of envelopes and the source's array text spell a NULL element
 * NULL, which array_nulls = off reads as the string "NULL" or refuses)
 * and xmloption content (an xml value the source holds as content is
 * refused as a document).  A session with the defaults pays a comparison.
 */
Datum
InputInSettledSettingsPg(FmgrInfo *in_fn, char *text, Oid ioparam, int32 typmod)
{
	if (Array_nulls && xmloption == XMLOPTION_CONTENT)
		return InputFunctionCall(in_fn, text, ioparam, typmod);
	int nest = NewGUCNestLevel();
	if (!Array_nulls)
		(void) set_config_option("array_nulls", "on", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (xmloption != XMLOPTION_CONTENT)
		(void) set_config_option("xmloption", "content", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	Datum v = InputFunctionCall(in_fn, text, ioparam, typmod);
	AtEOXact_GUC(true, nest);
	return v;
}

Datum
InputInSettledSettingsPg(Oid in_fn, char *text, Oid ioparam, int32 typmod)
{
	FmgrInfo flinfo;
	fmgr_info(in_fn, &flinfo);
	return InputInSettledSettingsPg(&flinfo, text, ioparam, typmod);
}

/*
 * The output text of a value as a session with PostgreSQL's default
 * settings and TimeZone UTC prints it, whatever the session's settings:
 * date and time types in ISO style, timestamptz in UTC, interval in the
 * postgres style, bytea in hex, floats as the shortest exact decimal
 * (extra_float_digits 1), whatever DateStyle, TimeZone, IntervalStyle,
 * bytea_output and extra_float_digits say (the output functions of date.c,
 * timestamp.c, varlena.c and float.c, with the style fixed).  Arrays,
 * ranges and multiranges of such types, composite values and money print
 * through their output function under those settings
 * (OutputInSettledSettingsPg: found in review, a tstzrange or
 * timestamptz[] key printed in the session's TimeZone got a second entity
 * record).  Other types print through their output function.  PostgreSQL
 * regime.
 */
char *
SettledTextPg(ColumnType::Family family, Oid type, FmgrInfo *out_fn, Datum v)
{
	char buf[MAXDATELEN + 1];
	struct pg_tm tm;
	fsec_t fsec;
	int tz;
	/* the family is the base type's (target.cpp, FamilyPg): no catalog lookup for other types */
	switch (family) {
	case ColumnType::Family::Float: {
		char *out = (char *) palloc(32);
		if (getBaseType(type) == FLOAT4OID)
			float_to_shortest_decimal_buf(DatumGetFloat4(v), out);
		else
			double_to_shortest_decimal_buf(DatumGetFloat8(v), out);
		return out;
	}
	case ColumnType::Family::Date: {
		DateADT d = DatumGetDateADT(v);
		if (DATE_NOT_FINITE(d)) {
			EncodeSpecialDate(d, buf);
		} else {
			j2date(d + POSTGRES_EPOCH_JDATE, &tm.tm_year, &tm.tm_mon, &tm.tm_mday);
			EncodeDateOnly(&tm, USE_ISO_DATES, buf);
		}
		return pstrdup(buf);
	}
	case ColumnType::Family::Timestamp:
	case ColumnType::Family::TimestampTz: {
		Timestamp ts = DatumGetTimestamp(v);
		const bool with_zone = family == ColumnType::Family::TimestampTz;
		if (TIMESTAMP_NOT_FINITE(ts))
			EncodeSpecialTimestamp(ts, buf);
		else if (with_zone ? timestamp2tm(ts, &tz, &tm, &fsec, NULL, UtcTzPg()) == 0
		                   : timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) == 0)
			EncodeDateTime(&tm, fsec, with_zone, with_zone ? tz : 0, NULL, USE_ISO_DATES, buf);
		else
			ereport(ERROR, (errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE), errmsg("timestamp out of range")));
		return pstrdup(buf);
	}
	case ColumnType::Family::Time:
		time2tm(DatumGetTimeADT(v), &tm, &fsec);
		EncodeTimeOnly(&tm, fsec, false, 0, USE_ISO_DATES, buf);
		return pstrdup(buf);
	case ColumnType::Family::TimeTz:
		timetz2tm(DatumGetTimeTzADTP(v), &tm, &fsec, &tz);
		EncodeTimeOnly(&tm, fsec, true, tz, USE_ISO_DATES, buf);
		return pstrdup(buf);
	case ColumnType::Family::Interval: {
		struct pg_itm itm;
		interval2itm(*DatumGetIntervalP(v), &itm);
		EncodeInterval(&itm, INTSTYLE_POSTGRES, buf);
		return pstrdup(buf);
	}
	case ColumnType::Family::Bytea: {
		bytea *b = DatumGetByteaPP(v);
		size_t len = VARSIZE_ANY_EXHDR(b);
		char *out = (char *) palloc(len * 2 + 3);
		out[0] = '\\';
		out[1] = 'x';
		uint64 n = hex_encode(VARDATA_ANY(b), len, out + 2);
		out[n + 2] = '\0';
		return out;
	}
	case ColumnType::Family::Array:
	case ColumnType::Family::Other:
		return OutputInSettledSettingsPg(out_fn, v, ContainerSettingsPg(type));
	default: return OutputFunctionCall(out_fn, v);
	}
}

/*
 * The text of a key value as entity records, entity keys and idempotency
 * keys name it: SettledTextPg's, so that it does not depend on the
 * session's settings (found by a fresh-user review: a session with another
 * TimeZone or DateStyle, as a JDBC driver sets them, got a second entity
 * record for a timestamptz or date key, so an older change was applied),
 * and where equal values can print differently, which would give one row
 * two entity records, one text: numeric drops insignificant trailing
 * zeros (trim_scale), float4/float8 print -0 as 0 (found by a fresh-user
 * run: numeric 1 and 1.0, float 0 and -0 each resurrected a deleted row);
 * the same for numbers inside arrays, ranges, multiranges and composites
 * (NormaliseNumbersPg).
 * KeyTextSql computes the same text in SQL (cdc._key_text).
 * PostgreSQL regime.
 */
char *
KeyTextPg(ColumnType::Family family, Oid type, FmgrInfo *out_fn, Datum v)
{
	switch (family) {
	case ColumnType::Family::Numeric: return OutputFunctionCall(out_fn, DirectFunctionCall1(numeric_trim_scale, v));
	case ColumnType::Family::Float: {
		/* -0 as 0 */
		const bool f4 = getBaseType(type) == FLOAT4OID;
		if (f4 ? DatumGetFloat4(v) == 0.0f : DatumGetFloat8(v) == 0.0)
			v = f4 ? Float4GetDatum(0.0f) : Float8GetDatum(0.0);
		return SettledTextPg(family, type, out_fn, v);
	}
	case ColumnType::Family::Array:
	case ColumnType::Family::Other:
		/* numbers inside a container: as above, element by element */
		if (ContainerSettingsPg(type) & kHoldsNumbers)
			v = NormaliseNumbersPg(type, v);
		return SettledTextPg(family, type, out_fn, v);
	default: return SettledTextPg(family, type, out_fn, v);
	}
}

const std::string &
RawImage::Json() const
{
	if (released_)
		throw std::logic_error("cdc_apply: an image's JSON was asked for after the image was released");
	if (json_)
		return *json_;
	if (view_) { /* read in place: the image's object as its tree (JsonView::Tree), serialised */
		cdc::Json storage;
		json_ = view_->Tree(node_, storage).Serialize();
		view_ = nullptr;
		return *json_;
	}
	if (source_) {
		for (size_t i : moved_)
			if (i < values.size())
				source_->PutMemberString(i, values[i].second.text);
		json_ = source_->Serialize();
		source_.reset();
		return *json_;
	}
	std::string j = "{";
	for (size_t i = 0; i < values.size(); i++) {
		if (i)
			j += ", ";
		AppendJsonString(j, values[i].first);
		j += ": ";
		const DecodedValue &v = values[i].second;
		if (v.kind == DecodedValue::Kind::Text)
			AppendJsonString(j, v.text);
		else if (v.kind == DecodedValue::Kind::Null)
			j += "null";
		else
			j += "\"__unchanged_toast__\"";
	}
	j += "}";
	json_ = std::move(j);
	return *json_;
}

size_t
RawImage::Release() const
{
	if (released_)
		return 0; /* released before (a batch releases the images it wrote, then every image) */
	size_t bytes = json_ ? json_->capacity() : 0;
	released_ = true;
	json_.reset();
	source_.reset();
	view_ = nullptr;
	for (auto &v : values) {
		/*
		 * A text in a small buffer is emptied, its buffer kept: the worker
		 * writes its next images into the spent ones (core/buffer_pool.hpp);
		 * what holds an event-sized value is freed.
		 */
		if (v.second.text.capacity() <= cdc::BufferPool::kKeptStringBytes) {
			v.second.text.clear();
			continue;
		}
		bytes += v.second.text.capacity();
		std::string().swap(v.second.text);
	}
	return bytes;
}

void
TrimFreedMemory(size_t bytes)
{
#ifdef __GLIBC__
	if (bytes >= kTrimBytes)
		malloc_trim(0);
#else
	(void) bytes;
#endif
}

// Decodes a Debezium JSON image (`after` or `before`) for target `t`: every
// field must name a column; values become text input form (decode.hpp).
namespace {

// The hint of a field that has no column in `t`, or "": for a history
// table's field named cdc_*, that cdc.create_history_table leaves such source
// columns out; its hint to add the column was misleading there, the name
// being reserved for metadata (fresh-user review h3, regress input_polish).
std::string
HistoryLeftOutHint(const Target &t, std::string_view field)
{
	if (t.modes.mode != Mode::History || !IsHistoryMetaColumn(field))
		return {};
	return "History tables leave out source columns named cdc_* (cdc.create_history_table): those names are "
	       "reserved for the metadata columns.";
}

// The column of field `field` (member i) of image `which`, with `path` set
// to "which.field"; 22P02, 42602 and 42703 naming the field.
const Column &
FieldColumn(const Target &t, std::string_view field, size_t i, const char *which, std::string &path, size_t prefix)
{
	if (field.find('\0') != std::string::npos)
		Fail("22P02", std::string("a field name of \"") + which + "\" contains a NUL character (\\u0000), which no column name can hold");
	path.resize(prefix);
	path += field;
	if (field.empty())
		Fail("42602", std::string("a field of \"") + which + "\" has an empty name, which no column can have");
	if (field.size() >= NAMEDATALEN)
		Fail("42602", "field " + cdc::QuotedField(path) + " is not a valid column name");
	const int ci = t.ColumnOf(field, i);
	if (ci < 0) {
		std::string hint = HistoryLeftOutHint(t, field);
		if (hint.empty())
			hint = "Add the column to the target table; events are applied column by column by name.";
		Fail("42703", "field " + cdc::QuotedField(path) + " has no column in table " + t.qualified, {}, hint);
	}
	return t.columns[size_t(ci)];
}

} // namespace

RawImage
DecodeViewImage(const Target &t, const cdc::JsonView &view, cdc::JsonView::Node obj, const FieldSchema *schema,
                const char *which)
{
	RawImage raw;
	const size_t n = view.SizeOf(obj);
	raw.values.reserve(n);
	std::string path = std::string(which) + ".";
	const size_t prefix = path.size();
	Json storage;
	for (size_t i = 0; i < n; i++) {
		const std::string_view field = view.KeyAt(obj, i);
		const Column &col = FieldColumn(t, field, i, which, path, prefix);
		const FieldSchema *fs = schema ? schema->Member(std::string(field)) : nullptr;
		const cdc::JsonView::Node v = view.ValueAt(obj, i);
		/* a scalar as a value of its own (no tree of the image); a container read whole */
		const Json &value = view.Tree(v, storage);
		raw.values.emplace_back(std::string(field), DecodeValue(value, fs, col.ctype, t.mapping.decode, path));
	}
	raw.SetSource(&view, obj); /* serialised only if something keeps the image's JSON */
	return raw;
}

RawImage
DecodeJsonImage(const Target &t, Json &&obj, const FieldSchema *schema, const char *which)
{
	RawImage raw;
	raw.values.reserve(obj.Members().size());
	/* "after.<field>", for the messages: one buffer for all fields */
	std::string path = std::string(which) + ".";
	const size_t prefix = path.size();
	for (size_t i = 0; i < obj.Members().size(); i++) {
		const auto &member = obj.Members()[i];
		const std::string &field = member.first;
		const Column &col = FieldColumn(t, field, i, which, path, prefix);
		const FieldSchema *fs = schema ? schema->Member(field) : nullptr;
		raw.values.emplace_back(field, DecodeValue(member.second, fs, col.ctype, t.mapping.decode, path));
		/* a string taken as it is (a text column's value): kept once, in the value (Json() puts it back) */
		const DecodedValue &dv = raw.values.back().second;
		if (member.second.IsString() && dv.kind == DecodedValue::Kind::Text && dv.text == member.second.Scalar()) {
			obj.TakeMemberString(i); /* dropped: the value holds the same text */
			raw.MovedFromSource(i);
		}
	}
	raw.SetSource(std::move(obj)); /* serialised only if something keeps the image's JSON */
	return raw;
}

namespace {

/*
 * A timestamptz or timestamp value (the built-in types themselves, not a
 * domain over them: a domain's input function is domain_in) written in the
 * strict ISO form of ParseStrictIsoTimestamp, converted without the input
 * function: its fields go to tm2timestamp, the offset as timestamptz_in
 * passes it (timestamp_in ignores it, and so does this), then the column's
 * typmod as both input functions apply it (AdjustTimestampForTypmod).  The
 * same Datum as the input function's: ParseDateTime and DecodeDateTime
 * (1.9 % of cdc_apply_batch()'s backend CPU on the benchmark's envelopes,
 * one timestamptz per image) are what this leaves out.  False, with `out`
 * untouched, for any other column or text, and for a value tm2timestamp
 * refuses: the input function converts those, with its own errors.
 * AdjustTimestampForTypmod's error (a value rounded past the end of the
 * range) is the one the input function raises too.
 */
bool
StrictTimestampPg(const Column &col, const std::string &text, Datum &out)
{
	if (col.in_fn == nullptr || (col.in_fn->fn_oid != F_TIMESTAMPTZ_IN && col.in_fn->fn_oid != F_TIMESTAMP_IN))
		return false;
	const std::optional<cdc::IsoTimestamp> f = cdc::ParseStrictIsoTimestamp(text);
	if (!f)
		return false;
	const bool with_tz = col.in_fn->fn_oid == F_TIMESTAMPTZ_IN;
	return PgCall([&]() {
		struct pg_tm tm = {};
		tm.tm_year = f->year;
		tm.tm_mon = f->month;
		tm.tm_mday = f->day;
		tm.tm_hour = f->hour;
		tm.tm_min = f->minute;
		tm.tm_sec = f->second;
		int tz = -f->offset_seconds; /* DecodeTimezone's sign: seconds west of UTC */
		Timestamp result;
		if (tm2timestamp(&tm, fsec_t(f->micros), with_tz ? &tz : nullptr, &result) != 0)
			return false;
		AdjustTimestampForTypmod(&result, col.typmod);
		out = with_tz ? TimestampTzGetDatum(result) : TimestampGetDatum(result);
		return true;
	});
}

// Converts one value of field `which`.`name` into cell `cell` of column
// `idx`; errors name the field and the column.
void
ConvertCell(const Target &t, int idx, const DecodedValue &dv, const char *which, const std::string &name,
            const RunAs &as, Cell &cell)
{
	const Column &col = t.columns[size_t(idx)];
	try {
		/* a user type's input (a domain's CHECK) may run code: as the role the target's statements run as */
		const bool null = dv.kind == DecodedValue::Kind::Null; /* a domain's: its input checks NULL (ConvertImage) */
		if (null || !StrictTimestampPg(col, dv.text, cell.value))
			cell.value = PgCallAs(col.user_type ? as : RunAs::Caller(), [&]() {
				return InputInSettledSettingsPg(col.in_fn, null ? nullptr : const_cast<char *>(dv.text.c_str()), col.ioparam,
				                                col.typmod);
			});
		if (null) {
			cell.value = (Datum) 0;
			cell.isnull = true;
			cell.pending = false;
			return;
		}
		/*
		 * A json value jsonb cannot hold (a \u0000 escape, a number beyond
		 * numeric's range) is one json takes, but the outbox payload is jsonb
		 * (to_jsonb of the row), and so is the row handler mode reads back
		 * for its handler: refuse it here, naming the field and the column,
		 * rather than with jsonb's bare 22P05 from the statement that builds
		 * the payload (json_nul_outbox).
		 */
		if ((t.mapping.outbox || t.mapping.outbox_message || t.modes.mode == cdc::Mode::Handler) &&
		    col.ctype.family == ColumnType::Family::Json && PgCall([&]() { return getBaseType(col.type); }) == JSONOID)
			PgCall([&]() { pfree(DatumGetPointer(DirectFunctionCall1(jsonb_in, CStringGetDatum(dv.text.c_str())))); });
		/* the canonical text of key columns (entity keys); the others' only for ContentHash, not kept */
		if (std::find(t.key.begin(), t.key.end(), idx) != t.key.end()) {
			char *out = PgCall([&]() { return KeyTextPg(col.ctype.family, col.type, col.out_fn, cell.value); });
			cell.text = out;
			PgCall([&]() { pfree(out); });
		}
	} catch (const PgError &e) {
		/* Name the field and column in the primary message; keep SQLSTATE, detail, hint. */
		ErrorData *ed = e.edata();
		std::string prefix = "field " + cdc::QuotedField(std::string(which) + "." + name) + " (column \"" + col.name + "\" of type " +
		                     col.ctype.type_name + "): ";
		std::string message = ed->message ? ed->message : "";
		/* the input function quotes the value: a long one (a 400-digit number) is cut for the message */
		if (dv.text.size() > cdc::kMessageValueBytes) {
			const std::string clipped = cdc::ClippedForMessage(dv.text);
			for (size_t at = message.find(dv.text); at != std::string::npos; at = message.find(dv.text, at + clipped.size()))
				message.replace(at, dv.text.size(), clipped);
			/*
			 * An array's, range's or composite's input function quotes the
			 * element it refuses, a part of the value the search above does
			 * not find: a 16 MB element was quoted whole (found by a
			 * fresh-user run).  Cut every longer quoted run too.
			 */
			for (size_t open = message.find('"'); open != std::string::npos;) {
				const size_t close = message.find('"', open + 1);
				if (close == std::string::npos)
					break;
				const size_t len = close - open - 1;
				size_t next = close + 1;
				if (len > cdc::kMessageValueBytes + 3) { /* not one cut above: at most the limit and "..." */
					const std::string cut = cdc::ClippedForMessage(std::string_view(message).substr(open + 1, len));
					message.replace(open + 1, len, cut);
					next = open + 1 + cut.size() + 1;
				}
				open = message.find('"', next);
			}
		}
		/*
		 * ... and quotes it as it came: a value holding a newline printed a
		 * line of the event's choosing after this one.  Its control
		 * characters as JSON escapes, as the decoder's own messages write
		 * them (fresh-user review h4, regress new_user_s31).
		 */
		message = prefix + cdc::EscapedControls(message);
		PgCall([&]() { ed->message = pstrdup(message.c_str()); });
		throw;
	}
	cell.isnull = false;
	cell.pending = false;
}

} // namespace

void
Image::RequireComplete() const
{
	if (!complete)
		throw std::logic_error("cdc_apply: an image's non-key values were read before they were converted");
}

// Converts a RawImage into Datums of the target's column types (the types'
// input functions, with typmod); errors name the field and the column.
// keys_only: the key and version columns only, the rest left pending.
Image
ConvertImage(const Target &t, const RawImage &raw, const char *which, const RunAs &as, bool keys_only)
{
	Image img;
	img.cells.resize(t.columns.size());
	img.raw = &raw; /* its JSON is built only when needed */
	img.which = which;
	for (size_t i = 0; i < raw.values.size(); i++) {
		const auto &[name, dv] = raw.values[i];
		const int ci = t.ColumnOf(name, i);
		if (ci < 0)
			Fail("42703", "field " + cdc::QuotedField(std::string(which) + "." + name) + " has no column in table " + t.qualified,
			     {}, HistoryLeftOutHint(t, name));
		const Column &col = t.columns[size_t(ci)];
		if (col.generated)
			continue; /* generated columns are computed by the destination */
		Cell &cell = img.cells[size_t(ci)];
		cell.present = true;
		if (dv.kind == DecodedValue::Kind::Unavailable) {
			cell.unavailable = true;
			img.has_unavailable = true;
			continue;
		}
		/* a domain's input function checks NULL too (NOT NULL, CHECK), as an INSERT of NULL would */
		if (dv.kind == DecodedValue::Kind::Null && !col.domain)
			continue;
		if (keys_only && ci != t.version_col && std::find(t.key.begin(), t.key.end(), ci) == t.key.end()) {
			cell.pending = true;
			img.complete = false;
			continue;
		}
		ConvertCell(t, ci, dv, which, name, as, cell);
	}
	return img;
}

void
CompleteImage(const Target &t, Image &img, const RunAs &as)
{
	if (img.complete)
		return;
	if (img.raw->Released()) /* its texts are gone: converting them would store empty values */
		throw std::logic_error("cdc_apply: an image's values were converted after the image was released");
	for (size_t i = 0; i < img.raw->values.size(); i++) {
		const auto &[name, dv] = img.raw->values[i];
		const int ci = t.ColumnOf(name, i);
		if (ci < 0)
			continue; /* ConvertImage refused it */
		Cell &cell = img.cells[size_t(ci)];
		if (cell.pending)
			ConvertCell(t, ci, dv, img.which, name, as, cell);
	}
	img.complete = true;
}

size_t
ReleaseValues(const Target &t, Image &img)
{
	size_t bytes = 0;
	for (size_t i = 0; i < t.columns.size(); i++) {
		Cell &c = img.cells[i];
		/* built-in varlena types only: their input functions return a fresh palloc'd value */
		if (!c.present || c.unavailable || c.isnull || c.pending || t.columns[i].typlen != -1 || t.columns[i].user_type ||
		    int(i) == t.version_col ||
		    std::find(t.key.begin(), t.key.end(), int(i)) != t.key.end())
			continue;
		bytes += VARSIZE_ANY(DatumGetPointer(c.value));
		PgCall([&]() { pfree(DatumGetPointer(c.value)); });
		c.value = (Datum) 0;
		c.pending = true;
		img.complete = false;
	}
	return bytes;
}

/*
 * Is the output text of `value` (not null) of column `col` its bytes as
 * stored?  True for text, varchar and bpchar (and domains over them, which
 * print with their base type's output function) when the value is a plain,
 * uncompressed varlena: their output functions copy exactly those bytes.
 * Lets the content hash read a large value in place instead of printing a
 * copy of it.
 */
static bool
OutputIsBytes(const Column &col, Datum value)
{
	if (col.out_fn == nullptr || col.typlen != -1)
		return false;
	const Oid fn = col.out_fn->fn_oid;
	if (fn != F_TEXTOUT && fn != F_VARCHAROUT && fn != F_BPCHAROUT)
		return false;
	return !VARATT_IS_EXTENDED(DatumGetPointer(value));
}

// The content hash (cdc.entity_state.chash): CRC-32C (PostgreSQL's
// pg_crc32c, the checksum of its WAL records, computed by the CPU's
// instruction where it has one) over the present columns in column order,
// each as its name's length (4 bytes, big-endian) and bytes, then 0 for
// null or 1, the value text's length and bytes.  The lengths make the
// concatenation unambiguous without escaping anything.  The value texts:
// a key column's as entity records name it (KeyTextPg), a text value's
// bytes in place, any other value as SettledTextPg prints it, so the hash
// is the same whatever the session's settings (a replay from a session
// with another TimeZone was a conflict).  CRC-32C is a checksum, not a
// digest: an equal-version change crafted to collide with a record is
// taken for a duplicate, which is what its sender could get by not
// sending it; the 32 bits of md5 it replaced gave no more (a collision of
// 32 bits is found by trying).  Unlike PostgreSQL's hash_bytes, its value
// does not depend on the byte order, so records stay valid after a dump
// and restore on another machine.  The decimal text of the signed value,
// as records are read back (state_store.cpp).
std::string
ContentHash(const Target &t, const Image &img)
{
	img.RequireComplete();
	pg_crc32c crc;
	INIT_CRC32C(crc);
	/* COMP_CRC32C never raises: no guard */
	auto put = [&crc](const void *p, size_t n) { COMP_CRC32C(crc, p, n); };
	auto put_length = [&put](size_t n) {
		const uint32 be = pg_hton32(uint32(n));
		put(&be, sizeof(be));
	};
	auto put_text = [&](std::string_view v) {
		put_length(v.size());
		put(v.data(), v.size());
	};
	const unsigned char null_marker = 0, value_marker = 1;
	for (size_t i = 0; i < t.columns.size(); i++) {
		const Cell &c = img.cells[i];
		if (!c.present || c.unavailable)
			continue;
		const Column &col = t.columns[i];
		put_text(col.name);
		if (c.isnull) {
			put(&null_marker, 1);
			continue;
		}
		put(&value_marker, 1);
		if (std::find(t.key.begin(), t.key.end(), int(i)) != t.key.end()) {
			put_text(c.text);
		} else if (OutputIsBytes(col, c.value)) {
			put_text(std::string_view(VARDATA_ANY(DatumGetPointer(c.value)), VARSIZE_ANY_EXHDR(DatumGetPointer(c.value))));
		} else {
			char *out = PgCall([&]() { return SettledTextPg(col.ctype.family, col.type, col.out_fn, c.value); });
			put_text(out);
			PgCall([&]() { pfree(out); });
		}
	}
	FIN_CRC32C(crc);
	return std::to_string(int32_t(crc));
}

// The content hash of release 0.1.0's records: column names and texts in
// column order, every value through its output function in the session's
// settings, as JSON strings, streamed into md5 (the text hashed is never
// built; a text value is read in place); its first 32 bits
// (Int32FromMd5Hex).  Only for AdoptReleaseHash.
static std::string
ReleaseContentHash(const Target &t, const Image &img)
{
	img.RequireComplete();
	Md5Stream md5;
	auto put = [&md5](std::string_view piece) { md5.Update(piece); };
	for (size_t i = 0; i < t.columns.size(); i++) {
		const Cell &c = img.cells[i];
		if (!c.present || c.unavailable)
			continue;
		const Column &col = t.columns[i];
		StreamJsonString(col.name, put);
		put(c.isnull ? "=null;" : "=");
		if (c.isnull)
			continue;
		if (OutputIsBytes(col, c.value)) {
			const char *p = VARDATA_ANY(DatumGetPointer(c.value));
			StreamJsonString(std::string_view(p, VARSIZE_ANY_EXHDR(DatumGetPointer(c.value))), put);
		} else {
			char *out = PgCall([&]() { return OutputFunctionCall(col.out_fn, c.value); });
			StreamJsonString(out, put);
			PgCall([&]() { pfree(out); });
		}
		put(";");
	}
	return std::to_string(Int32FromMd5Hex(md5.Hex()));
}

namespace {

// Whether every float value of `img` prints, in the session's settings, a
// text that reads back as the same value.  With extra_float_digits below 1
// the output function rounds (0.10000000000000002 prints "0.1"), so two
// different values can have one release text.  PostgreSQL regime.
bool
FloatTextsExactPg(const Target &t, const Image &img)
{
	for (size_t i = 0; i < t.columns.size(); i++) {
		const Column &col = t.columns[i];
		const Cell &c = img.cells[i];
		if (col.ctype.family != ColumnType::Family::Float || !c.present || c.unavailable || c.isnull)
			continue;
		char *out = OutputFunctionCall(col.out_fn, c.value);
		bool same;
		if (getBaseType(col.type) == FLOAT4OID) {
			float4 a = DatumGetFloat4(c.value), b = DatumGetFloat4(DirectFunctionCall1(float4in, CStringGetDatum(out)));
			same = float4_eq(a, b) && std::signbit(a) == std::signbit(b);
		} else {
			float8 a = DatumGetFloat8(c.value), b = DatumGetFloat8(DirectFunctionCall1(float8in, CStringGetDatum(out)));
			same = float8_eq(a, b) && std::signbit(a) == std::signbit(b);
		}
		pfree(out);
		if (!same)
			return false;
	}
	return true;
}

} // namespace

std::string
AdoptReleaseHash(const Target &t, const Image &img, const std::string &content_hash, const std::string &stored_hash)
{
	if (content_hash == stored_hash)
		return content_hash;
	/* a rounded float text would make another value's hash equal the record's: a conflict hidden as a duplicate */
	if (!PgCall([&]() { return FloatTextsExactPg(t, img); }))
		return content_hash;
	std::string release = ReleaseContentHash(t, img);
	return release == stored_hash ? release : content_hash;
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
		if (!c.present || c.unavailable || c.isnull) { /* the path only for the error: this runs per change */
			std::string path = std::string(which) + "." + col.name;
			if (!c.present)
				Fail("22023", "field " + cdc::QuotedField(path) + " is missing: it is a key column of table " + t.qualified);
			if (c.unavailable)
				Fail("22023", "field " + cdc::QuotedField(path) + " is the unavailable-value placeholder: it is a key column of table " + t.qualified);
			Fail("22004", "field " + cdc::QuotedField(path) + " is null: it is a key column of table " + t.qualified);
		}
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
	std::string key = CompactEntityKey(values);
	if (key.size() > kEntityKeyMaxBytes) {
		/*
		 * The key's entry in cdc.entity_state's primary key: an index entry
		 * holds at most BTMaxItemSize (2,704 bytes on 8 kB pages), with the
		 * value compressed first as index_form_tuple compresses it (the
		 * column's default method).  Refused here with the key columns
		 * named, instead of PostgreSQL's error naming the index (found by
		 * a fresh-user run).
		 */
		/* its size compressed (header included), 0 when it does not compress */
		size_t stored = PgCall([&]() -> size_t {
			text *raw = cstring_to_text_with_len(key.data(), int(key.size()));
			Datum packed = toast_compress_datum(PointerGetDatum(raw), char(default_toast_compression));
			size_t n = DatumGetPointer(packed) != NULL ? VARSIZE(DatumGetPointer(packed)) : 0;
			if (DatumGetPointer(packed) != NULL)
				pfree(DatumGetPointer(packed));
			pfree(raw);
			return n;
		});
		const bool compresses = stored != 0;
		if (!compresses)
			stored = key.size();
		if (stored > kEntityKeyMaxBytes) {
			std::string cols;
			for (int idx : t.key)
				cols += (cols.empty() ? "\"" : ", \"") + t.columns[size_t(idx)].name + "\"";
			Fail("54000",
			     "the entity key of table " + t.qualified + " (column " + cols + ") is " + std::to_string(key.size()) +
			         " bytes" +
			         (compresses ? ", " + std::to_string(stored) + " compressed" : std::string(", and does not compress")) +
			         ": more than the " + std::to_string(kEntityKeyMaxBytes) + " bytes an entity record's key can hold",
			     {}, "Key the mapping by shorter columns (cdc.register_mapping's key_columns); docs/sql-reference.md, \"Limits\".");
		}
	}
	return key;
}

std::string
KeyTextSql(const Target &t, int idx)
{
	return "cdc._key_text(t." + QuoteIdent(t.columns[size_t(idx)].name) + ")";
}

std::string
CompactKeySql(const std::vector<std::string> &columns)
{
	auto key_text = [](const std::string &c) { return "cdc._key_text(t." + QuoteIdent(c) + ")"; };
	if (columns.size() == 1)
		return key_text(columns[0]);
	std::string e = "ARRAY[";
	for (size_t i = 0; i < columns.size(); i++)
		e += (i ? ", " : "") + key_text(columns[i]);
	return e + "]::pg_catalog.text";
}

std::string
CompactKeySql(const Target &t)
{
	std::vector<std::string> columns;
	for (int idx : t.key)
		columns.push_back(t.columns[size_t(idx)].name);
	return CompactKeySql(columns);
}

bool
SameKey(const Target &t, const Image &a, const Image &b)
{
	/*
	 * A key column the before-image does not carry says nothing about it;
	 * one it carries with another value is a key change, whichever column
	 * comes first (the old key is then required in full: EntityKey).  A key
	 * column carried as null or the placeholder never gets here
	 * (RequireUsableBeforeKey).
	 */
	for (int idx : t.key) {
		const Cell &x = a.cells[size_t(idx)];
		const Cell &y = b.cells[size_t(idx)];
		if (!x.present || !y.present || x.unavailable || y.unavailable || x.isnull || y.isnull)
			continue;
		if (x.text != y.text)
			return false;
	}
	return true;
}

// An update's before-image that names a key column as null or as the
// unavailable-value placeholder cannot say whether the key changed: taken
// for "no key change", the row under the old key would stay behind
// silently (SPEC §4.4, §6).  Refused as the before-image of a delete is,
// naming the field, before anything is claimed.
void
RequireUsableBeforeKey(const Target &t, const Image &before)
{
	for (int idx : t.key) {
		const Cell &c = before.cells[size_t(idx)];
		if (!c.present || (!c.unavailable && !c.isnull))
			continue;
		const std::string path = "before." + t.columns[size_t(idx)].name;
		const char *hint = "An update's before-image must carry the old key (or leave the key column out, or be absent, when the key did not change).";
		if (c.unavailable)
			Fail("22023", "field " + cdc::QuotedField(path) + " is the unavailable-value placeholder: it is a key column of table " + t.qualified +
			                  ", so the update cannot tell whether its key changed",
			     {}, hint);
		Fail("22004", "field " + cdc::QuotedField(path) + " is null: it is a key column of table " + t.qualified +
		                  ", so the update cannot tell whether its key changed",
		     {}, hint);
	}
}


namespace {

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

} // namespace

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
SelectRowImage(const Target &t, const Image &key_img, const RunAs &as)
{
	Params p;
	std::string where = KeyPredicate(t, key_img, p);
	uint64_t n = Execute("SELECT " + RowDatumSql("t", t.qualified) + " FROM " + t.own_rows + " AS t WHERE " + where, p, as);
	if (n == 0)
		return std::nullopt;
	return ResultRowsJsonText(1, 1, as)[0]; /* under the payload settings (outbox.hpp) */
}

// Converts the images of `req` (not a truncate), derives the entity key,
// the version (the request's, or the mapping's version_column) and the
// delivery key.  Errors name the event field (22023, 22004, 42703, the
// column types' input errors).
PreparedChange
PrepareChange(const Target &t, const ChangeRequest &req, const RunAs &as, bool keys_only)
{
	PreparedChange p;
	const bool is_delete = p.is_delete = req.op == Op::Delete;
	if (is_delete && !req.before)
		Fail("22023", "field \"before\" is missing: a delete needs the before-image (at least the key columns)");
	if (!is_delete && !req.after)
		Fail("22023", std::string("field \"after\" is missing: op \"") + OpName(req.op) + "\" needs the after-image");
	if (req.after)
		p.after = ConvertImage(t, *req.after, "after", as, keys_only);
	if (req.before)
		p.before = ConvertImage(t, *req.before, "before", as, keys_only);
	const Image &main = p.Main();
	p.entity_key = EntityKey(t, main, is_delete ? "before" : "after");
	if (req.op == Op::Update && p.before)
		RequireUsableBeforeKey(t, *p.before);

	if (t.version_col >= 0) {
		const Column &vc = t.columns[size_t(t.version_col)];
		const Cell &cell = main.cells[size_t(t.version_col)];
		std::string path = std::string(is_delete ? "before." : "after.") + vc.name;
		if (!cell.present || cell.unavailable || cell.isnull)
			Fail("22023", "field " + cdc::QuotedField(path) + " is missing or null: the mapping orders changes by this column", {},
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
	/*
	 * A mapping ordered by a version column may be fed without source
	 * positions: then the source identity is only (op, key), and every later
	 * change of the same op and key would be taken for a duplicate delivery
	 * (found by a fresh-user run: a stale update and a conflicting one both
	 * came out "duplicate").  The column's value tells those changes apart.
	 */
	if (!req.delivery_key && t.version_col >= 0 && !req.source.lsn)
		p.delivery_key += ":" + std::to_string(p.version.parts[1]);
	return p;
}

} // namespace cdc::pg

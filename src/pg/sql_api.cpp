// The SQL-callable entry points of cdc_apply (docs/sql-reference.md):
// cdc_apply and cdc_apply_batch in their jsonb, jsonb[] and text forms
// (Debezium events given as jsonb read in place: pg/jsonb_view.hpp),
// the cdc._invalidate_target and cdc._invalidate_dictionary triggers of the
// caches, cdc._key_text (the key text of a value, as entity records name
// it), and cdc._drop_at_commit.  Every one is defined with CDC_PG_FUNCTION, so C++
// exceptions never reach PostgreSQL frames.
//
// Glue, C++ regime: arguments in, one ApplyEngine per call, results out;
// PostgreSQL calls through PgCall.  Must not hold anything across calls and
// must not apply anything itself: that is the engine's (src/pg/apply/).
#include "pg/apply/counters.hpp"
#include "pg/apply/engine.hpp"
#include "pg/apply/image.hpp"
#include "pg/apply/target.hpp"
#include "pg/guard.hpp"
#include "pg/guc.hpp"
#include "pg/jsonb_view.hpp"
#include "pg/shared_stats.hpp"
#include "pg/spi.hpp"
#include "pg/worker/worker.hpp"

#include "core/envelope.hpp"
#include "core/errors.hpp"
#include "core/json.hpp"

extern "C" {
#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "catalog/pg_index.h"
#include "commands/trigger.h"
#include "funcapi.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "mb/pg_wchar.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/tuplestore.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/guc.h"
#include "miscadmin.h"
}

namespace {

using cdc::Json;
using cdc::pg::JsonbEventNodes;
using cdc::pg::JsonbEventView;
using cdc::pg::PgCall;
using EventInput = cdc::pg::ApplyEngine::EventInput;

std::optional<std::string>
OptTextArg(FunctionCallInfo fcinfo, int n)
{
	if (PG_NARGS() <= n || PG_ARGISNULL(n))
		return std::nullopt;
	char *s = PgCall([&]() { return text_to_cstring(PG_GETARG_TEXT_PP(n)); });
	return std::string(s);
}

/*
 * The target argument: InvalidOid when it is NULL (route by the mapping).
 * A target given as OID 0 ('-'::regclass, 0::regclass) names no relation:
 * 42P01, not routing as if none were given (review h3).
 */
Oid
OptOidArg(FunctionCallInfo fcinfo, int n)
{
	if (PG_NARGS() <= n || PG_ARGISNULL(n))
		return InvalidOid;
	const Oid oid = PG_GETARG_OID(n);
	if (!OidIsValid(oid))
		throw cdc::InputError("42P01", "target relation with OID 0 does not exist", {},
		                      "Pass NULL (or leave the target out) to route the event by its mapping.");
	return oid;
}

/*
 * The event-size limit (cdc.max_event_size, docs/security.md): an event of
 * `bytes` bytes (its text, or its jsonb form) that is larger raises 54000,
 * before it is parsed or converted.  `which`: "the event" or "event N of the
 * batch".
 */
void
CheckEventSize(size_t bytes, const std::string &which)
{
	const size_t limit = size_t(cdc_max_event_size) * 1024;
	if (bytes > limit)
		throw cdc::InputError("54000",
		                      which + " is " + std::to_string(bytes) + " bytes, more than cdc.max_event_size (" +
		                          std::to_string(cdc_max_event_size) + " kB)",
		                      {}, "Send smaller events, or have a superuser raise cdc.max_event_size.");
}

// The size of a varlena argument without detoasting it.
size_t
RawSize(Datum d)
{
	return PgCall([&]() { return toast_raw_datum_size(d); }) - VARHDRSZ;
}

/*
 * The delivery-key limit (review: a 50 MB key was accepted and stored in
 * cdc.conflicts).  A delivery key is kept whole in cdc.conflicts,
 * cdc.dead_letter, a history table's cdc_delivery_key and every error's
 * context, never in an index (the ledger keeps a 64-bit digest of it): it is
 * bounded like the event it names, by cdc.max_event_size, in bytes, without
 * detoasting it.  `which`: "delivery_key" or "delivery_keys[N]".  54000;
 * an empty key: 22023.
 */
void
CheckDeliveryKeySize(Datum d, const std::string &which)
{
	const size_t bytes = RawSize(d);
	/*
	 * An empty key is refused like an empty source_partition (review: every
	 * delivery sent with '' shared one claim, so all but the first were
	 * duplicates).  NULL, not '', asks for a derived key.  22023.
	 */
	if (bytes == 0)
		throw cdc::InputError("22023", which + " must not be empty",
		                      "Every delivery sent with an empty key would share one claim; nothing was applied.",
		                      "Pass the record's coordinates (topic:generation:partition:offset) or a business "
		                      "event id, or NULL to derive the key from the source identity.");
	if (bytes > size_t(cdc_max_event_size) * 1024)
		throw cdc::InputError("54000",
		                      which + " is " + std::to_string(bytes) + " bytes, more than cdc.max_event_size (" +
		                          std::to_string(cdc_max_event_size) + " kB)",
		                      "A delivery key is bounded like the event it names; nothing was applied.",
		                      "Send a shorter delivery key (a topic, partition and offset, or a digest of a longer "
		                      "identity), or have a superuser raise cdc.max_event_size.");
}

// cdc_apply()'s delivery_key (argument 2), before the event is read.
void
CheckDeliveryKeyArg(FunctionCallInfo fcinfo)
{
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
		CheckDeliveryKeySize(PG_GETARG_DATUM(2), "delivery_key");
}

// Calls f(i, v) for each top-level element of jsonb container `root`, i
// counting from 0, in order.  skipNested: an array or object element comes
// as one binary container (jbvBinary, with its size in the container), a
// scalar as its value; nothing is converted.  A raw scalar (a container that
// is no array) is its one element; an object has none.  f is C++ regime and
// may throw; the iterator's memory then goes with the current context.
template <typename F>
void
ForEachTopLevelElement(JsonbContainer *root, F &&f)
{
	JsonbIterator *it = PgCall([&]() { return JsonbIteratorInit(root); });
	JsonbValue v;
	size_t i = 0;
	for (;;) {
		JsonbIteratorToken tok = PgCall([&]() { return JsonbIteratorNext(&it, &v, true); });
		if (tok == WJB_DONE)
			return;
		if (tok == WJB_ELEM)
			f(i++, v);
	}
}

// Checks each element of a jsonb batch against cdc.max_event_size by its
// size in the jsonb container (the elements are not converted).
void
CheckJsonbBatchSizes(Datum d)
{
	JsonbContainer *root = PgCall([&]() { return &DatumGetJsonbP(d)->root; });
	ForEachTopLevelElement(root, [](size_t i, const JsonbValue &v) {
		const size_t bytes = v.type == jbvBinary   ? size_t(v.val.binary.len)
		                     : v.type == jbvString ? size_t(v.val.string.len)
		                                           : 0;
		CheckEventSize(bytes, "event " + std::to_string(i + 1) + " of the batch");
	});
}

// A memory context for the jsonb intake's nodes (jsonb_view.hpp), a child
// of the current one (freed with it should an error come first).
MemoryContext
IntakeContext()
{
	return PgCall([&]() { return AllocSetContextCreate(CurrentMemoryContext, "cdc_apply jsonb intake", ALLOCSET_DEFAULT_SIZES); });
}

// A UTF-8 string in the database's encoding (22P05 for a character it
// cannot hold).  PostgreSQL regime inside; C++ outside.
std::string
ToServerEncoding(const std::string &utf8)
{
	const char *c = PgCall([&]() { return pg_any_to_server(utf8.data(), int(utf8.size()), PG_UTF8); });
	std::string out(c);
	if (c != utf8.data())
		PgCall([&]() { pfree(const_cast<char *>(c)); });
	return out;
}

// The text form's JSON, read as the jsonb form reads it: the argument is
// text of the database's encoding, while nlohmann parses UTF-8 (and its \u
// escapes come out as UTF-8).  In a database of another encoding the text
// is converted to UTF-8 first, and every string and key of the tree back to
// the database's encoding afterwards: a character the encoding cannot hold
// (a \u escape) is 22P05, as jsonb's input reports it, and the target gets
// text of its own encoding.  Before, a raw non-ASCII character was refused
// (22P02, "ill-formed UTF-8") and an escaped one stored as UTF-8 bytes in,
// say, an EUC_JP column (found by a review; text_form_encoding.sql).  The
// byte offset of a syntax error then counts the UTF-8 text's bytes.
// SQL_ASCII has no conversion, and jsonb's input there takes any byte above
// 0x7F in a string as it is and refuses a \u escape above U+007F (0A000):
// so do we (ParseSqlAsciiTextForm).
// outer_depth: as for Json::Parse (an element of a batch parsed on its own).
Json ParseSqlAsciiTextForm(std::string_view text, size_t outer_depth);

Json
ParseTextForm(std::string_view text, size_t outer_depth = 0)
{
	const int encoding = PgCall([]() { return GetDatabaseEncoding(); });
	if (encoding == PG_UTF8)
		return Json::Parse(text, outer_depth);
	if (encoding == PG_SQL_ASCII)
		return ParseSqlAsciiTextForm(text, outer_depth);
	const auto ascii = [](std::string_view t) {
		for (unsigned char c : t)
			if (c >= 0x80)
				return false;
		return true;
	};
	/* ASCII is the same bytes in every server encoding: only other text is converted (\u escapes come back below) */
	std::string converted;
	std::string_view input = text;
	if (!ascii(text)) {
		const char *utf8 = PgCall([&]() { return pg_server_to_any(text.data(), int(text.size()), PG_UTF8); });
		/* the input itself when nothing needed converting (it is not NUL-terminated) */
		if (utf8 == text.data()) {
			converted.assign(text);
		} else {
			converted = utf8;
			PgCall([&]() { pfree(const_cast<char *>(utf8)); });
		}
		input = converted;
	}
	Json j = Json::Parse(input, outer_depth);
	j.RewriteStrings([&](const std::string &t) { return ascii(t) ? t : ToServerEncoding(t); });
	return j;
}

// The text form in a SQL_ASCII database, read as jsonb's input reads it
// there (sql_ascii_forms): a \u escape above U+007F cannot be converted
// to the database's "encoding" (0A000, as jsonb says), and every other byte
// above 0x7F is a character of its own, kept as it is.  The escapes are
// refused first (a backslash only escapes inside strings, and "\\" is one
// escape, so the scan needs no tokenizer); then each byte above 0x7F is
// carried through the UTF-8 parser as the code point of the same value
// (U+0080..U+00FF) and turned back into that byte in every string and key.
Json
ParseSqlAsciiTextForm(std::string_view text, size_t outer_depth)
{
	bool high = false;
	for (size_t i = 0; i < text.size(); i++) {
		const unsigned char c = static_cast<unsigned char>(text[i]);
		if (c >= 0x80)
			high = true;
		if (c != '\\' || i + 1 >= text.size())
			continue;
		if (text[i + 1] == 'u' && i + 5 < text.size()) {
			unsigned v = 0;
			bool hex = true;
			for (size_t k = i + 2; k < i + 6 && hex; k++) {
				const char h = text[k];
				hex = (h >= '0' && h <= '9') || ((h | 0x20) >= 'a' && (h | 0x20) <= 'f');
				v = v * 16 + unsigned(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
			}
			if (hex && v >= 0x80)
				throw cdc::InputError(cdc::sqlstate::kFeatureNotSupported,
				                      "conversion between UTF8 and SQL_ASCII is not supported",
				                      "A \\u escape of a character above U+007F cannot be stored in a SQL_ASCII database, as for jsonb.");
		}
		i++; /* the escaped character: "\\\\" is one escape */
	}
	if (!high)
		return Json::Parse(text, outer_depth);
	std::string widened;
	widened.reserve(text.size() + text.size() / 4);
	for (unsigned char c : text) {
		if (c < 0x80) {
			widened.push_back(char(c));
		} else {
			widened.push_back(char(0xC0 | (c >> 6)));
			widened.push_back(char(0x80 | (c & 0x3F)));
		}
	}
	Json j = Json::Parse(widened, outer_depth);
	j.RewriteStrings([](const std::string &t) {
		std::string out;
		out.reserve(t.size());
		for (size_t i = 0; i < t.size(); i++) {
			const unsigned char c = static_cast<unsigned char>(t[i]);
			if ((c == 0xC2 || c == 0xC3) && i + 1 < t.size()) {
				out.push_back(char(((c & 0x03) << 6) | (static_cast<unsigned char>(t[i + 1]) & 0x3F)));
				i++;
			} else {
				out.push_back(char(c));
			}
		}
		return out;
	});
	return j;
}

Datum
OutcomeText(cdc::Outcome o)
{
	const char *name = cdc::OutcomeName(o);
	return PgCall([&]() { return PointerGetDatum(cstring_to_text(name)); });
}

// Frees the detoasted copy of argument `arg` once it is converted (an event
// can be large: the conversion holds what is needed).
void
FreeDetoasted(const void *detoasted, Datum arg)
{
	if (detoasted != DatumGetPointer(arg))
		PgCall([&]() { pfree(const_cast<void *>(detoasted)); });
}

// Applies one event with a fresh engine; the event is already parsed (and
// handed over: the engine moves its images out).
Datum
ApplyOne(FunctionCallInfo fcinfo, EventInput &&event)
{
	cdc::pg::ApplyEngine engine;
	cdc::Outcome o = engine.ApplyDebezium(std::move(event), OptOidArg(fcinfo, 1), OptTextArg(fcinfo, 2));
	engine.Finish();
	return OutcomeText(o);
}

} // namespace

/*
 * cdc_apply(event jsonb, target regclass DEFAULT NULL, delivery_key text DEFAULT NULL) RETURNS text
 *
 * Applies one Debezium change event replay-safely in the caller's
 * transaction and returns its outcome: applied, duplicate, stale, conflict
 * or ignored.  A NULL or JSON-null event is a Kafka tombstone (ignored).
 * Errors and SQLSTATEs: docs/sql-reference.md.
 */
CDC_PG_ENTRY_POINT(cdc_apply_jsonb, cdc::pg::kCallApply)
{
	CheckDeliveryKeyArg(fcinfo);
	if (PG_ARGISNULL(0))
		return ApplyOne(fcinfo, EventInput{});
	const size_t bytes = RawSize(PG_GETARG_DATUM(0));
	CheckEventSize(bytes, "the event");
	Jsonb *jb = PgCall([&]() { return DatumGetJsonbP(PG_GETARG_DATUM(0)); });
	if (bytes > cdc::pg::kReadInPlaceMaxBytes) { /* a large event: its tree, the jsonb freed before the apply */
		EventInput event;
		event.tree = cdc::pg::JsonbContainerToJson(&jb->root);
		FreeDetoasted(jb, PG_GETARG_DATUM(0));
		return ApplyOne(fcinfo, std::move(event));
	}
	/* read in place: the jsonb and its nodes are kept until the event is applied */
	MemoryContext cxt = IntakeContext();
	const JsonbEventView view(cdc::pg::ReadJsonbEvents({&jb->root}, 0, cxt)[0]);
	EventInput event;
	event.view = &view;
	Datum result = ApplyOne(fcinfo, std::move(event));
	PgCall([&]() { MemoryContextDelete(cxt); });
	FreeDetoasted(jb, PG_GETARG_DATUM(0));
	return result;
}

/*
 * cdc_apply(event text, ...): the same for raw JSON text (for example a
 * Kafka record value as received).  Malformed JSON: SQLSTATE 22P02.
 */
CDC_PG_ENTRY_POINT(cdc_apply_text, cdc::pg::kCallApply)
{
	CheckDeliveryKeyArg(fcinfo);
	EventInput event;
	if (!PG_ARGISNULL(0)) {
		CheckEventSize(RawSize(PG_GETARG_DATUM(0)), "the event");
		text *raw = PgCall([&]() { return PG_GETARG_TEXT_PP(0); });
		event.tree = ParseTextForm(std::string_view(VARDATA_ANY(raw), VARSIZE_ANY_EXHDR(raw)));
		FreeDetoasted(raw, PG_GETARG_DATUM(0));
	}
	return ApplyOne(fcinfo, std::move(event));
}

namespace {

// Elements of a one-dimensional array argument (NULL elements included);
// `name`: the argument's name, for the error (2202E) when it has more
// dimensions.
struct ArrayElements {
	Datum *values = nullptr;
	bool *nulls = nullptr;
	int count = 0;
};

ArrayElements
ArrayArg(FunctionCallInfo fcinfo, int n, Oid elemtype, const char *name)
{
	ArrayElements a;
	if (PG_NARGS() <= n || PG_ARGISNULL(n))
		return a;
	PgCall([&]() {
		ArrayType *arr = PG_GETARG_ARRAYTYPE_P(n);
		if (ARR_NDIM(arr) > 1)
			ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
			                errmsg("%s must be a one-dimensional array", name)));
		int16 typlen;
		bool typbyval;
		char typalign;
		get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
		deconstruct_array(arr, elemtype, typlen, typbyval, typalign, &a.values, &a.nulls, &a.count);
	});
	return a;
}

// The memory of one cdc_apply_batch() call, kept by the backend between
// calls (docs/internals.md, "Memory of a batch").  A call of 1,000 events
// with outbox allocates about 4 MB (its images, payloads and outbox tuples,
// held until the batch's writes).  In the caller's expression context that
// memory went back to malloc at the end of every call, and glibc returned
// it to the kernel: the next call took a page fault for every 4 kB page it
// touched again (3-4 % of the backend's CPU in the 3k benchmark).  Here the
// first kBatchKeepBytes stay with the backend (the context's keeper block,
// which a reset keeps); a larger batch's rest is freed at the end of the
// call as before.  Only the outermost call of a backend uses it: a call made
// by a trigger or handler during a batch allocates in its own caller's
// context, as before, so the outer call's memory is never reset under it.
// The context is reset when the call returns and when the next one starts
// (an error leaves the rest of a failed call there until then).
constexpr Size kBatchKeepBytes = 4 * 1024 * 1024;
MemoryContext batch_cxt = nullptr; // TopMemoryContext; a plain pointer, nothing to destroy at exit
int batch_depth = 0;

class BatchMemory {
  public:
	BatchMemory()
	{
		if (batch_depth > 0) {
			batch_depth++;
			return;
		}
		PgCall([&]() {
			if (batch_cxt == nullptr)
				batch_cxt = AllocSetContextCreate(TopMemoryContext, "cdc_apply batch", kBatchKeepBytes,
				                                  ALLOCSET_DEFAULT_INITSIZE, ALLOCSET_DEFAULT_MAXSIZE);
			else
				MemoryContextReset(batch_cxt);
			caller_ = MemoryContextSwitchTo(batch_cxt);
		});
		batch_depth++; /* only once nothing can throw: a constructor that throws has no destructor run */
	}
	BatchMemory(const BatchMemory &) = delete;
	BatchMemory &operator=(const BatchMemory &) = delete;
	// Back in the caller's context (for the result); the batch's memory is
	// reset.  Runs once; the destructor does it on an error's way out, without
	// the reset (no PostgreSQL call while an exception unwinds).
	void Leave()
	{
		if (caller_ == nullptr)
			return;
		MemoryContextSwitchTo(caller_);
		caller_ = nullptr;
		PgCall([&]() { MemoryContextReset(batch_cxt); });
	}
	~BatchMemory()
	{
		batch_depth--;
		if (caller_ != nullptr)
			MemoryContextSwitchTo(caller_); /* an inline assignment: no PostgreSQL error can come from it */
	}

  private:
	MemoryContext caller_ = nullptr;
};

// Applies a batch (events already parsed) and builds the cdc.batch_result row:
// events, applied, duplicate, stale, conflict, ignored, expired, outcomes
// (text[] in input order, only when with_outcomes).
Datum
ApplyBatch(FunctionCallInfo fcinfo, std::vector<EventInput> &&events, BatchMemory &memory)
{
	std::vector<std::optional<std::string>> delivery_keys;
	ArrayElements dks = ArrayArg(fcinfo, 2, TEXTOID, "delivery_keys");
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2)) {
		if (size_t(dks.count) != events.size())
			throw cdc::InputError("22023", "delivery_keys has " + std::to_string(dks.count) + " elements, events has " +
			                                   std::to_string(events.size()),
			                      "", "Pass one delivery key per event (NULL elements: derived), or NULL for all.");
		for (int i = 0; i < dks.count; i++) {
			if (dks.nulls[i]) {
				delivery_keys.emplace_back();
				continue;
			}
			CheckDeliveryKeySize(dks.values[i], "delivery_keys[" + std::to_string(i + 1) + "]");
			char *k = PgCall([&]() { return TextDatumGetCString(dks.values[i]); });
			delivery_keys.emplace_back(std::string(k));
		}
	}
	bool with_outcomes = PG_NARGS() > 3 && PG_GETARG_BOOL(3); /* not NULL: RequireBatchArgs */

	/* claims by offset range: source_partition and offsets (docs/semantics.md, "Claims by offset range") */
	const bool has_partition = PG_NARGS() > 4 && !PG_ARGISNULL(4);
	const bool has_offsets = PG_NARGS() > 5 && !PG_ARGISNULL(5);
	std::optional<cdc::pg::ApplyEngine::OffsetClaims> by_offset;
	if (has_partition != has_offsets)
		throw cdc::InputError("22023", has_partition ? "source_partition is given without offsets"
		                                             : "offsets are given without source_partition",
		                      "", "Pass both (claims by offset range) or neither (a ledger row per delivery).");
	if (has_partition) {
		if (!delivery_keys.empty())
			throw cdc::InputError("22023", "delivery_keys and source_partition are both given", "",
			                      "With source_partition, the delivery key of event i is source_partition:offsets[i].");
		by_offset.emplace();
		by_offset->partition = PgCall([&]() { return TextDatumGetCString(PG_GETARG_DATUM(4)); });
		if (by_offset->partition.empty())
			throw cdc::InputError("22023", "source_partition must not be empty", "",
			                      "Name the partition the events were read from, for Kafka topic:generation:partition.");
		/* it is stored in a btree index (cdc.ledger_partition), which bounds its size: refused before anything is written */
		if (by_offset->partition.size() > cdc::kMaxSourceNameBytes)
			throw cdc::InputError("22023",
			                      "source_partition is " + std::to_string(by_offset->partition.size()) +
			                          " bytes long, more than the " + std::to_string(cdc::kMaxSourceNameBytes) + " allowed",
			                      "", "Name the partition the events were read from, for Kafka topic:generation:partition.");
		ArrayElements offs = ArrayArg(fcinfo, 5, INT8OID, "offsets");
		if (size_t(offs.count) != events.size())
			throw cdc::InputError("22023", "offsets has " + std::to_string(offs.count) + " elements, events has " +
			                                   std::to_string(events.size()),
			                      "", "Pass the offset of every event, Kafka tombstones included.");
		for (int i = 0; i < offs.count; i++) {
			if (offs.nulls[i])
				throw cdc::InputError("22023", "offsets[" + std::to_string(i + 1) + "] is NULL", "",
				                      "Every event needs its offset in the partition.");
			int64_t o = DatumGetInt64(offs.values[i]);
			/*
			 * A Kafka offset is never negative; -1 is the clients' "no offset"
			 * (OFFSET_INVALID, found by a fresh-user run as accepted): claimed
			 * as a range, it would make the next event passed with it a
			 * duplicate, dropped.
			 */
			if (o < 0)
				throw cdc::InputError("22023", "offsets[" + std::to_string(i + 1) + "] is " + std::to_string(o) +
				                                   ": offsets must not be negative",
				                      "", "Pass the offset each event was read at (Kafka: ConsumerRecord.offset(), from 0).");
			if (i > 0 && o <= by_offset->offsets.back())
				throw cdc::InputError("22023",
				                      "offsets must be strictly increasing: offsets[" + std::to_string(i + 1) + "] = " +
				                          std::to_string(o) + " follows offsets[" + std::to_string(i) +
				                          "] = " + std::to_string(by_offset->offsets.back()),
				                      "", "Pass one partition's events in the order they were read.");
			by_offset->offsets.push_back(o);
			delivery_keys.emplace_back(by_offset->partition + ":" + std::to_string(o));
		}
	}

	cdc::pg::ApplyEngine engine;
	std::vector<cdc::Outcome> outcomes = engine.ApplyDebeziumBatch(std::move(events), OptOidArg(fcinfo, 1), delivery_keys,
	                                                               by_offset ? &*by_offset : nullptr);
	engine.Finish();

	int64 counts[int(cdc::Outcome::Expired) + 1] = {};
	for (cdc::Outcome o : outcomes)
		counts[int(o)]++;
	memory.Leave();
	return PgCall([&]() {
		TupleDesc desc;
		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "cdc_apply_batch must return a composite type");
		desc = BlessTupleDesc(desc);
		Datum values[8];
		bool nulls[8] = {false, false, false, false, false, false, false, !with_outcomes};
		values[0] = Int64GetDatum(int64(outcomes.size()));
		values[1] = Int64GetDatum(counts[int(cdc::Outcome::Applied)]);
		values[2] = Int64GetDatum(counts[int(cdc::Outcome::Duplicate)]);
		values[3] = Int64GetDatum(counts[int(cdc::Outcome::Stale)]);
		values[4] = Int64GetDatum(counts[int(cdc::Outcome::Conflict)]);
		values[5] = Int64GetDatum(counts[int(cdc::Outcome::Ignored)]);
		values[6] = Int64GetDatum(counts[int(cdc::Outcome::Expired)]);
		values[7] = (Datum) 0;
		if (with_outcomes) {
			Datum *texts = (Datum *) palloc(sizeof(Datum) * (outcomes.size() + 1));
			for (size_t i = 0; i < outcomes.size(); i++)
				texts[i] = CStringGetTextDatum(cdc::OutcomeName(outcomes[i]));
			values[7] = PointerGetDatum(construct_array(texts, int(outcomes.size()), TEXTOID, -1, false, TYPALIGN_INT));
		}
		return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
	});
}

// The batch's arguments whose NULL means nothing, before the events are
// read: events, and with_outcomes (taken as false before).
void
RequireBatchArgs(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0))
		throw cdc::InputError("22004", "events must not be NULL", "", "Pass a JSON array of change events (it may be empty).");
	if (PG_NARGS() > 3 && PG_ARGISNULL(3))
		throw cdc::InputError("22004", "with_outcomes must not be NULL");
}

} // namespace

/*
 * cdc_apply_batch(events jsonb, target regclass DEFAULT NULL,
 *                 delivery_keys text[] DEFAULT NULL, with_outcomes boolean DEFAULT false,
 *                 source_partition text DEFAULT NULL, offsets bigint[] DEFAULT NULL)
 *   RETURNS cdc.batch_result
 *
 * Applies a JSON array of Debezium change events in one call, in the
 * caller's transaction, with the result of applying them one by one in
 * order (SPEC §2, batch form; docs/semantics.md, "Batches").  Returns the
 * count of each outcome and, with with_outcomes, the outcome of every event
 * in input order.  source_partition and offsets (one per event, strictly
 * increasing): the events were read from one ordered partition; event i's
 * delivery key is source_partition:offsets[i] and the deliveries are claimed
 * as offset ranges (cdc.ledger_range) instead of one ledger row each
 * (docs/semantics.md, "Claims by offset range").  Errors: 22004 events
 * or with_outcomes NULL, 22023 not an array, delivery_keys or offsets of another length,
 * source_partition without offsets (or the reverse), with delivery_keys,
 * empty or longer than 1,024 bytes, a NULL or negative offset, offsets not strictly increasing; and every error of
 * cdc_apply() with "event N of the batch" in the context; nothing of the
 * batch is applied.
 */
CDC_PG_ENTRY_POINT(cdc_apply_batch_jsonb, cdc::pg::kCallApplyBatch)
{
	RequireBatchArgs(fcinfo);
	BatchMemory memory;
	/* detoasted once, for the size check and the conversion */
	Datum events = PgCall([&]() { return PointerGetDatum(PG_DETOAST_DATUM(PG_GETARG_DATUM(0))); });
	CheckJsonbBatchSizes(events);
	JsonbContainer *root = PgCall([&]() { return &DatumGetJsonbP(events)->root; });
	if (!JsonContainerIsArray(root) || JsonContainerIsScalar(root))
		throw cdc::InputError("22023", std::string("events must be a JSON array of change events, not ") +
		                                   cdc::pg::JsonbContainerToJson(root).KindName());
	if (RawSize(PG_GETARG_DATUM(0)) > cdc::pg::kReadInPlaceMaxBytes) {
		/* a large batch: each element's tree (the batch array counts as a level), the jsonb freed before the apply */
		std::vector<EventInput> items(JsonContainerSize(root));
		ForEachTopLevelElement(root, [&](size_t i, const JsonbValue &v) {
			if (i >= items.size())
				return;
			if (v.type == jbvBinary) {
				items[i].tree = cdc::pg::JsonbContainerToJson(v.val.binary.data, 1);
			} else { /* a scalar element: its node, as a tree */
				JsonbValue scalar = v;
				JsonbEventNodes *n = PgCall([&]() { return cdc::pg::ReadJsonbScalarPg(&scalar); });
				Json storage;
				const JsonbEventView view(n);
				items[i].tree = view.Tree(view.Root(), storage);
			}
		});
		FreeDetoasted(DatumGetPointer(events), PG_GETARG_DATUM(0));
		return ApplyBatch(fcinfo, std::move(items), memory);
	}
	/*
	 * Each element read in place: the jsonb (detoasted in the batch's memory,
	 * or the caller's) and the nodes stay until the batch is applied, and go
	 * with that memory.
	 */
	const std::vector<JsonbEventNodes *> nodes = cdc::pg::ReadJsonbArrayEvents(root, IntakeContext());
	std::vector<JsonbEventView> views;
	views.reserve(nodes.size());
	std::vector<EventInput> items(nodes.size());
	for (size_t i = 0; i < nodes.size(); i++) {
		views.emplace_back(nodes[i]);
		items[i].view = &views.back();
	}
	return ApplyBatch(fcinfo, std::move(items), memory);
}

/*
 * cdc_apply_batch(events jsonb[], ...): the same for an array of jsonb values
 * (NULL elements are Kafka tombstones).
 */
CDC_PG_ENTRY_POINT(cdc_apply_batch_array, cdc::pg::kCallApplyBatch)
{
	RequireBatchArgs(fcinfo);
	BatchMemory memory;
	ArrayElements a = ArrayArg(fcinfo, 0, JSONBOID, "events");
	for (int i = 0; i < a.count; i++)
		if (!a.nulls[i])
			CheckEventSize(RawSize(a.values[i]), "event " + std::to_string(i + 1) + " of the batch");
	/* each element read in place (NULL: a tombstone), kept until the batch is applied, as above */
	std::vector<JsonbContainer *> roots(size_t(a.count), nullptr);
	std::vector<EventInput> events(size_t(a.count));
	for (int i = 0; i < a.count; i++) {
		if (a.nulls[i])
			continue;
		Jsonb *jb = PgCall([&]() { return DatumGetJsonbP(a.values[i]); });
		if (RawSize(a.values[i]) > cdc::pg::kReadInPlaceMaxBytes) { /* a large event: its tree, its detoasted copy freed */
			events[size_t(i)].tree = cdc::pg::JsonbContainerToJson(&jb->root);
			FreeDetoasted(jb, a.values[i]);
		} else {
			roots[size_t(i)] = &jb->root;
		}
	}
	const std::vector<JsonbEventNodes *> nodes = cdc::pg::ReadJsonbEvents(roots, 0, IntakeContext());
	std::vector<JsonbEventView> views;
	views.reserve(nodes.size());
	for (size_t i = 0; i < nodes.size(); i++)
		if (nodes[i]) {
			views.emplace_back(nodes[i]);
			events[i].view = &views.back();
		}
	return ApplyBatch(fcinfo, std::move(events), memory);
}

// The CONTEXT line "cdc_apply event N of the batch" while it lives (the
// error path of the batch's text form, below); formatted into the call's
// own buffer when it goes (ReleaseErrorContextSource), so the ERROR raised
// after the stack has unwound still has it.
class BatchEventContext final : public cdc::pg::ContextSource {
  public:
	explicit BatchEventContext(size_t position) : position_(position) { cdc::pg::SetErrorContextSource(this); }
	BatchEventContext(const BatchEventContext &) = delete;
	BatchEventContext &operator=(const BatchEventContext &) = delete;
	~BatchEventContext() { cdc::pg::ReleaseErrorContextSource(this); }
	size_t FormatContext(char *buf, size_t size) const noexcept override
	{
		const int n = snprintf(buf, size, "cdc_apply event %zu of the batch", position_);
		return n < 0 ? 0 : std::min(size_t(n), size - 1);
	}

  private:
	size_t position_;
};

/*
 * The error path of ParseTextForm(events) for the batch's text form, which
 * parses the whole array at once (no per-element work when it succeeds):
 * finds the event the error is in and throws with its CONTEXT line, as
 * every other error of an event has it (docs/sql-reference.md).  Each
 * element is parsed on its own, in order, under "event N of the batch";
 * the first that fails is the one: a syntax error is thrown as the whole
 * text's parser reported it (its byte offset counts the whole text), any
 * other error (a number beyond numeric's range naming its field within the
 * event, nesting too deep, a character the database encoding cannot hold)
 * as the element's parse raised it.  When no element fails, the error is
 * in the array's own syntax (a missing comma or bracket between events,
 * text after the array) or the text is no array: `original` as it was.
 * Going on after `original` without a subtransaction is safe: the only
 * PostgreSQL errors ParseTextForm can raise come from the encoding
 * conversions (pg_server_to_any, ToServerEncoding), which hold no lock,
 * buffer or memory context when they raise; everything else it raises is
 * C++ (Json::Parse).
 */
[[noreturn]] void
RethrowNamingTheEvent(std::string_view events, const std::exception_ptr &original)
{
	const std::vector<cdc::JsonElementRange> ranges = cdc::TopLevelElementRanges(events);
	for (size_t i = 0; i < ranges.size(); i++) {
		BatchEventContext context(i + 1);
		try {
			(void) ParseTextForm(events.substr(ranges[i].begin, ranges[i].end - ranges[i].begin), 1);
		} catch (const cdc::JsonSyntaxError &) {
			std::rethrow_exception(original);
		}
	}
	cdc::pg::SetErrorContext(nullptr); /* a released element's line would stay */
	std::rethrow_exception(original);
}

/*
 * cdc_apply_batch(events text, ...): the same for a JSON array as text.
 * Malformed JSON: SQLSTATE 22P02 with the byte offset.  An error inside
 * an event's JSON names the event in its CONTEXT (RethrowNamingTheEvent).
 */
CDC_PG_ENTRY_POINT(cdc_apply_batch_text, cdc::pg::kCallApplyBatch)
{
	RequireBatchArgs(fcinfo);
	BatchMemory memory;
	text *raw = PgCall([&]() { return PG_GETARG_TEXT_PP(0); });
	std::string_view events(VARDATA_ANY(raw), VARSIZE_ANY_EXHDR(raw));
	if (auto big = cdc::OversizeTopLevelElement(events, size_t(cdc_max_event_size) * 1024))
		CheckEventSize(big->bytes, "event " + std::to_string(big->index + 1) + " of the batch");
	Json arr;
	std::exception_ptr failed;
	try {
		arr = ParseTextForm(events);
	} catch (...) {
		failed = std::current_exception();
	}
	if (failed)
		RethrowNamingTheEvent(events, failed);
	FreeDetoasted(raw, PG_GETARG_DATUM(0));
	if (!arr.IsArray())
		throw cdc::InputError("22023", std::string("events must be a JSON array of change events, not ") + arr.KindName());
	std::vector<Json> trees = arr.TakeItems();
	std::vector<EventInput> items(trees.size());
	for (size_t i = 0; i < trees.size(); i++)
		items[i].tree = std::move(trees[i]);
	return ApplyBatch(fcinfo, std::move(items), memory);
}

/*
 * cdc._invalidate_target() RETURNS trigger: AFTER INSERT, UPDATE, DELETE
 * (for each row) and TRUNCATE (for each statement) on cdc.mapping and
 * cdc.table_barrier.  Sends a relcache invalidation of the row's target (old
 * and new row), delivered to every backend when the change commits (and to
 * this one at once), so the engine's cached metadata of that target is
 * reloaded (apply/target.cpp, TargetCache).  A change of cdc.mapping, and a
 * truncate of either table, also invalidates cdc.mapping itself, which
 * empties the cache including the source-table resolutions.
 */
CDC_PG_FUNCTION(cdc_invalidate_target)
{
	return PgCall([&]() -> Datum {
		if (!CALLED_AS_TRIGGER(fcinfo))
			ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			                errmsg("cdc._invalidate_target() must be called as a trigger")));
		TriggerData *td = (TriggerData *) fcinfo->context;
		Relation rel = td->tg_relation;
		Oid mapping = get_relname_relid("mapping", RelationGetNamespace(rel));
		auto invalidate = [](Oid relid) {
			if (OidIsValid(relid) && SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
				CacheInvalidateRelcacheByRelid(relid);
		};
		if (TRIGGER_FIRED_BY_TRUNCATE(td->tg_event)) {
			invalidate(mapping);
			return PointerGetDatum(NULL);
		}
		AttrNumber attno = get_attnum(RelationGetRelid(rel), "target");
		HeapTuple tuples[2] = {td->tg_trigtuple, TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : NULL};
		for (HeapTuple tup : tuples) {
			bool isnull = true;
			Datum d = tup && attno != InvalidAttrNumber ? heap_getattr(tup, attno, RelationGetDescr(rel), &isnull) : (Datum) 0;
			if (!isnull)
				invalidate(DatumGetObjectId(d));
		}
		if (RelationGetRelid(rel) == mapping)
			invalidate(mapping);
		return PointerGetDatum(NULL);
	});
}

/*
 * cdc._invalidate_dictionary() RETURNS trigger: AFTER UPDATE, DELETE and
 * TRUNCATE (for each statement) on cdc.source and cdc.outbox_source.
 * Sends a relcache invalidation of the table, delivered to every backend
 * when the change commits (and to this one at its next command), which
 * empties the backends' caches of that dictionary's ids (apply/id_cache.hpp):
 * cdc.rename_source() gives an id another name or removes one.
 */
CDC_PG_FUNCTION(cdc_invalidate_dictionary)
{
	return PgCall([&]() -> Datum {
		if (!CALLED_AS_TRIGGER(fcinfo))
			ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			                errmsg("cdc._invalidate_dictionary() must be called as a trigger")));
		TriggerData *td = (TriggerData *) fcinfo->context;
		CacheInvalidateRelcache(td->tg_relation);
		return PointerGetDatum(NULL);
	});
}

/*
 * cdc._key_text(value anyelement) RETURNS text
 * The text entity records name a key value by (KeyTextPg, apply/image.hpp):
 * the same whatever the session's DateStyle, TimeZone, IntervalStyle,
 * bytea_output and extra_float_digits.  The engine's statements that match
 * rows by their key (a truncate's kept rows: KeyTextSql) and
 * cdc._rekey_entities use it, so they run with the session's own settings
 * and still find the records.  The type's output function and family are
 * kept in fn_extra across the calls of one statement.
 */
CDC_PG_FUNCTION(cdc_key_text)
{
	struct OutputCache {
		Oid type;
		cdc::ColumnType::Family family;
		FmgrInfo out;
	};
	return PgCall([&]() -> Datum {
		Oid type = get_fn_expr_argtype(fcinfo->flinfo, 0);
		if (!OidIsValid(type))
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("cdc._key_text: argument type unknown")));
		OutputCache *c = (OutputCache *) fcinfo->flinfo->fn_extra;
		if (c == NULL || c->type != type) {
			c = (OutputCache *) MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(OutputCache));
			Oid out;
			bool varlena;
			getTypeOutputInfo(type, &out, &varlena);
			fmgr_info_cxt(out, &c->out, fcinfo->flinfo->fn_mcxt);
			Oid elem;
			c->family = cdc::pg::FamilyPg(type, &elem);
			c->type = type;
			fcinfo->flinfo->fn_extra = c;
		}
		return PointerGetDatum(cstring_to_text(cdc::pg::KeyTextPg(c->family, type, &c->out, PG_GETARG_DATUM(0))));
	});
}

/*
 * cdc._key_ambiguity(target regclass, key_columns name[]) RETURNS text
 * The message for the first key column of `target` (key_columns, or NULL
 * for the primary key's columns) whose equal values can print different
 * key texts (AmbiguousKeyColumnPg, apply/target.hpp), or NULL when there is
 * none (also when the key cannot be found: cdc.register_mapping reports
 * that itself).  cdc.register_mapping raises it as a WARNING: the engine
 * refuses such a key on entity-ordered targets (0A000), while a
 * stream-ordered target, which keeps no entity records, may have it.
 */
CDC_PG_FUNCTION(cdc_key_ambiguity)
{
	return cdc::pg::PgCall([&]() -> Datum {
		if (PG_ARGISNULL(0))
			PG_RETURN_NULL();
		const Oid relid = PG_GETARG_OID(0);
		/* locked for the catalog reads below; no relation: nothing to say */
		Relation rel = try_relation_open(relid, AccessShareLock);
		if (rel == NULL)
			PG_RETURN_NULL();
		AttrNumber attrs[INDEX_MAX_KEYS];
		int n = 0;
		const int npk = cdc::pg::PrimaryKeyColumnsPg(rel, attrs);
		relation_close(rel, NoLock);
		if (PG_ARGISNULL(1)) {
			if (npk == 0)
				PG_RETURN_NULL();
			n = npk;
		} else {
			Datum *names;
			bool *nulls;
			int count;
			deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR, &names, &nulls, &count);
			for (int i = 0; i < count; i++) {
				if (nulls[i] || n >= INDEX_MAX_KEYS)
					PG_RETURN_NULL();
				const AttrNumber a = get_attnum(relid, NameStr(*DatumGetName(names[i])));
				if (a == InvalidAttrNumber)
					PG_RETURN_NULL();
				attrs[n++] = a;
			}
		}
		Oid by_index;
		const int k = cdc::pg::AmbiguousKeyColumnPg(relid, attrs, n, &by_index);
		if (k < 0)
			PG_RETURN_NULL();
		Oid type, collation;
		int32 typmod;
		get_atttypetypmodcoll(relid, attrs[k], &type, &typmod, &collation);
		const char *display = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid));
		return PointerGetDatum(cstring_to_text(cdc::pg::AmbiguousKeyMessagePg(
			get_attname(relid, attrs[k], false), display, format_type_with_typemod(type, typmod),
			OidIsValid(by_index) ? get_rel_name(by_index) : NULL)));
	});
}

namespace {

/*
 * The owner of relation `relid` and its schema-qualified, quoted name
 * (palloc'd), for the statements run as that owner below.  42P01 when no
 * relation has that OID.  PostgreSQL regime.
 */
char *
RelationOwnerAndNamePg(Oid relid, Oid *owner)
{
	HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
	Form_pg_class rel = (Form_pg_class) GETSTRUCT(tup);
	*owner = rel->relowner;
	char *qualified = quote_qualified_identifier(get_namespace_name(rel->relnamespace), NameStr(rel->relname));
	ReleaseSysCache(tup);
	return qualified;
}

/*
 * cdc._rekey_pairs: reads target as its owner, in a security-restricted
 * operation with a GUC nest level (as the worker applies and cdc.resync
 * reads, docs/security.md "The worker's identity").  Planning the read
 * folds the table's index predicates and expressions, which can call the
 * table owner's IMMUTABLE functions: run by the extension owner (a
 * superuser re-keying a delegate's records), they made the delegate a
 * superuser (sql/rekey_owner_code.sql).
 */
void
RekeyPairsPg(FunctionCallInfo fcinfo, const char *key_texts)
{
	const Oid relid = PG_GETARG_OID(0);
	Oid owner;
	char *qualified = RelationOwnerAndNamePg(relid, &owner);

	StringInfoData sql;
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s FROM %s t", key_texts, qualified);

	InitMaterializedSRF(fcinfo, 0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	/* as the worker applies and cdc.resync reads (spi.hpp, RunAs), every row of the table */
	cdc::pg::RunAs as = cdc::pg::RunAs::Role(owner, /* restricted */ true);
	as.all_rows = true;
	cdc::pg::UserSwitch sw;
	cdc::pg::BeginUserSwitch(as, &sw);
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "cdc_apply: SPI_connect failed");
		/*
		 * Through a cursor, a batch at a time: SPI_execute kept every row of
		 * the target in memory at once (SPI_tuptable) before the tuplestore,
		 * which spills to disk past work_mem, got them (review h2:
		 * 3,000,000 rows took 400 MB).
		 */
		SPIPlanPtr plan = SPI_prepare(sql.data, 0, NULL);
		if (plan == NULL)
			elog(ERROR, "cdc_apply: reading the keys of %s failed (%s)", qualified, SPI_result_code_string(SPI_result));
		Portal portal = SPI_cursor_open(NULL, plan, NULL, NULL, false);
		for (;;) {
			SPI_cursor_fetch(portal, true, 10000);
			if (SPI_processed == 0)
				break;
			for (uint64 i = 0; i < SPI_processed; i++) {
				Datum values[2];
				bool nulls[2];
				for (int c = 0; c < 2; c++)
					values[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1, &nulls[c]);
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			}
			SPI_freetuptable(SPI_tuptable);
		}
		SPI_cursor_close(portal);
		SPI_finish();
	}
	PG_FINALLY();
	{
		cdc::pg::RestoreUser(&sw);
	}
	PG_END_TRY();
	/* whatever the owner's code set (even without LOCAL) is undone */
	cdc::pg::EndGucNest(&sw);
}

} // namespace

/*
 * cdc._rekey_pairs(target regclass, old_key name[], new_key name[])
 * RETURNS TABLE (ok text, nk text)
 * For cdc._rekey_entities: the key text of every row of target under
 * old_key and under new_key (NULL when a new key column is NULL), read as
 * the table's owner in a security-restricted operation (RekeyPairsPg).
 * EXECUTE revoked from PUBLIC.
 */
CDC_PG_FUNCTION(cdc_rekey_pairs)
{
	/* the key columns as names; 22023 none, 22004 a NULL one */
	auto names = [&](int arg) {
		std::vector<std::string> out;
		cdc::pg::PgCall([&]() {
			Datum *items;
			bool *nulls;
			int n;
			deconstruct_array(PG_GETARG_ARRAYTYPE_P(arg), NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR, &items, &nulls, &n);
			if (n == 0)
				ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("key columns must not be empty")));
			for (int i = 0; i < n; i++) {
				if (nulls[i])
					ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("key columns must not be NULL")));
				out.emplace_back(NameStr(*DatumGetName(items[i])));
			}
		});
		return out;
	};
	const std::vector<std::string> new_key = names(2);
	/* ok: the key text under old_key; nk: under new_key, NULL where a column of it is NULL */
	std::string null_test;
	for (const std::string &c : new_key)
		null_test += (null_test.empty() ? "t." : " OR t.") + cdc::pg::QuoteIdent(c) + " IS NULL";
	const std::string key_texts = cdc::pg::CompactKeySql(names(1)) + ", CASE WHEN " + null_test + " THEN NULL ELSE " +
	                              cdc::pg::CompactKeySql(new_key) + " END";
	cdc::pg::PgCall([&]() { RekeyPairsPg(fcinfo, key_texts.c_str()); });
	return (Datum) 0;
}

namespace {

/*
 * cdc._upgrade_history_keys: the update from 0.1.0 re-prints the cdc_key of
 * history tables (sql/cdc_apply--0.1.0--0.2.0.sql.in, step 4).  That UPDATE
 * fires the table's triggers and evaluates its index expressions, CHECK and
 * domain constraints and generated columns: run by the superuser updating
 * the extension, a history table owner's trigger made its owner a superuser
 * (security review h4, TAP 160).  It runs as the table's owner in a
 * security-restricted operation with a GUC nest level, as the worker
 * applies and cdc._rekey_pairs reads, seeing every row of the table.
 */
int64
UpgradeHistoryKeysPg(Oid relid, const char *expr)
{
	if (!superuser())
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("only a superuser may re-key history tables (ALTER EXTENSION cdc_apply UPDATE)")));
	Oid owner;
	char *qualified = RelationOwnerAndNamePg(relid, &owner);

	StringInfoData sql;
	initStringInfo(&sql);
	appendStringInfo(&sql, "UPDATE %s SET cdc_key = %s WHERE cdc_key OPERATOR(pg_catalog.<>) %s", qualified, expr, expr);

	cdc::pg::RunAs as = cdc::pg::RunAs::Role(owner, /* restricted */ true);
	as.all_rows = true;
	cdc::pg::UserSwitch sw;
	cdc::pg::BeginUserSwitch(as, &sw);
	int64 updated = 0;
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "cdc_apply: SPI_connect failed");
		if (SPI_execute(sql.data, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "cdc_apply: re-keying history table %s failed", qualified);
		updated = int64(SPI_processed);
		SPI_finish();
	}
	PG_FINALLY();
	{
		cdc::pg::RestoreUser(&sw);
	}
	PG_END_TRY();
	/* whatever the owner's code set (even without LOCAL) is undone */
	cdc::pg::EndGucNest(&sw);
	return updated;
}

} // namespace

/*
 * cdc._upgrade_history_keys(target regclass, expr text) RETURNS bigint
 * Exists only inside ALTER EXTENSION cdc_apply UPDATE from 0.1.0 (created
 * and dropped by the update script, EXECUTE revoked from PUBLIC, superusers
 * only): UPDATE target SET cdc_key = expr WHERE cdc_key <> expr as the
 * table's owner in a security-restricted operation; returns the rows
 * updated.
 */
CDC_PG_FUNCTION(cdc_upgrade_history_keys)
{
	const Oid relid = PG_GETARG_OID(0);
	std::string expr;
	cdc::pg::PgCall([&]() { expr = text_to_cstring(PG_GETARG_TEXT_PP(1)); });
	int64 n = 0;
	cdc::pg::PgCall([&]() { n = UpgradeHistoryKeysPg(relid, expr.c_str()); });
	return Int64GetDatum(n);
}

/*
 * cdc._create_source_slot(subid integer) RETURNS void
 * Used by cdc.create_subscription(..., copy_data => false): the
 * subscription's slot is created on the source when the calling
 * transaction commits (src/pg/worker/slot_at_commit.cpp), so that it exists
 * from the subscription's creation on and never without it.  Errors: 42501
 * not a superuser; at COMMIT 08001 when the source cannot be reached, the
 * source's SQLSTATE otherwise (42710 a slot of that name exists); 0A000 at
 * PREPARE TRANSACTION.
 */
CDC_PG_FUNCTION(cdc_create_source_slot)
{
	cdc::pg::PgCall([&]() { create_source_slot_at_commit_pg(PG_GETARG_INT32(0)); });
	PG_RETURN_VOID();
}

/*
 * cdc._drop_source_slot(conninfo text, slot_name name) RETURNS void: the
 * entry point of the 0.1.0 script, whose cdc.drop_subscription drops the
 * slot inside the call.  The 0.2.0 script no longer has it, but a database
 * still on 0.1.0 runs its functions with this module until ALTER EXTENSION
 * cdc_apply UPDATE (and CREATE EXTENSION ... VERSION '0.1.0' resolves every
 * symbol its script names: TAP 054).  Drops the slot now, as 0.1.0 did.
 * Errors: 08001 when the source cannot be reached, 55006 when the slot
 * cannot be dropped; a slot that does not exist is a NOTICE.
 */
CDC_PG_FUNCTION(cdc_drop_source_slot)
{
	cdc::pg::PgCall([&]() {
		const char *slot = NameStr(*PG_GETARG_NAME(1));
		(void) drop_source_slot_pg(connect_for_slot_drop_pg(PG_GETARG_TEXT_PP(0), slot), slot);
	});
	PG_RETURN_VOID();
}

/*
 * cdc._drop_at_commit(name text, conninfo text, slot_name name, origin
 * text, origin_xmin xid) RETURNS void
 * Used by cdc.drop_subscription: the subscription's replication origin and,
 * when slot_name is not NULL (drop_slot => true), its slot on the source
 * are dropped when the calling transaction commits, the slot first
 * (src/pg/worker/slot_at_commit.cpp), so that nothing of it is dropped when
 * the transaction rolls back.  Errors: 42501 not a superuser; at COMMIT
 * 08001 when the source cannot be reached, 55006 when the slot cannot be
 * dropped, 57014 a cancel or statement_timeout while the slot is held;
 * 0A000 at PREPARE TRANSACTION with a slot to drop.
 */
CDC_PG_FUNCTION(cdc_drop_at_commit)
{
	cdc::pg::PgCall([&]() {
		if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(3))
			elog(ERROR, "cdc._drop_at_commit: name, conninfo and origin must not be NULL");
		drop_at_commit_pg(text_to_cstring(PG_GETARG_TEXT_PP(0)), text_to_cstring(PG_GETARG_TEXT_PP(1)),
		                  PG_ARGISNULL(2) ? NULL : NameStr(*PG_GETARG_NAME(2)), text_to_cstring(PG_GETARG_TEXT_PP(3)),
		                  PG_ARGISNULL(4) ? InvalidTransactionId : DatumGetTransactionId(PG_GETARG_DATUM(4)));
	});
	PG_RETURN_VOID();
}

/*
 * cdc._check_conninfo(conninfo text) RETURNS void
 * Used by cdc.create_subscription and cdc.alter_subscription before they
 * store a conninfo.  Errors: 22P02 when libpq cannot parse it.
 */
CDC_PG_FUNCTION(cdc_check_conninfo)
{
	cdc::pg::PgCall([&]() { check_conninfo_pg(PG_GETARG_TEXT_PP(0)); });
	PG_RETURN_VOID();
}

/*
 * cdc._publication_tables(conninfo text, publications text[])
 * RETURNS TABLE (schema_name text, table_name text)
 * The tables the publications publish on the source, as pgoutput names
 * them (for cdc.refresh_subscription and cdc.resync_table).  Errors: 08001
 * when the source cannot be reached, 42704 for a publication the source
 * does not have, 55000 when the source session does not take the worker's
 * settings, the source's error otherwise.
 */
CDC_PG_FUNCTION(cdc_publication_tables)
{
	cdc::pg::PgCall([&]() { publication_tables_pg(fcinfo); });
	return (Datum) 0;
}

/*
 * cdc._pending_counters() RETURNS TABLE (target regclass, applied bigint,
 * duplicate bigint, stale bigint, conflict bigint, ignored bigint,
 * blocked_resurrections bigint, outbox_rows bigint, snapshot_rows bigint,
 * expired bigint)
 *
 * The outcome counts this session has taken in its open transaction and
 * not yet written to cdc.counters (they are written when it commits,
 * apply/counters.hpp), one row per target.  cdc.stats adds them, so a
 * transaction sees its own counts as it sees its own rows.  No error.
 */
CDC_PG_FUNCTION(cdc_pending_counters)
{
	std::vector<std::pair<Oid, cdc::Counters>> counts = cdc::pg::PendingTransactionCounts();
	PgCall([&]() {
		InitMaterializedSRF(fcinfo, 0);
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		for (const auto &[target, c] : counts) {
			Datum values[10] = {ObjectIdGetDatum(target), Int64GetDatum(c.applied), Int64GetDatum(c.duplicate),
			                    Int64GetDatum(c.stale), Int64GetDatum(c.conflict), Int64GetDatum(c.ignored),
			                    Int64GetDatum(c.blocked_resurrections), Int64GetDatum(c.outbox_rows),
			                    Int64GetDatum(c.snapshot_rows), Int64GetDatum(c.expired)};
			bool nulls[10] = {};
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	});
	return (Datum) 0;
}

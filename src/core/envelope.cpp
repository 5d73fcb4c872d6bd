#include "core/cpp_only.hpp" // first: this file is pure C++
#include "core/envelope.hpp"

#include <limits>

#include "core/errors.hpp"

namespace cdc {

namespace {

[[noreturn]] void
Bad(const std::string &msg, const std::string &hint = {})
{
	throw InputError(sqlstate::kInvalidParameterValue, msg, {}, hint);
}

// PostgreSQL text cannot hold U+0000: a field that carries it is refused
// (22P02) naming the field, as column values are (decode.cpp).  Without it
// a NUL would cut the field short where PostgreSQL reads it as a C string
// (dictionary entries, messages, delivery keys).
void
RefuseNul(const std::string &s, const char *path)
{
	if (s.find('\0') != std::string::npos)
		throw InputError(sqlstate::kInvalidTextRepresentation,
		                 std::string("field \"") + path + "\" contains a NUL character (\\u0000), which PostgreSQL text cannot hold",
		                 {}, "Remove the NUL character from the field.");
}

using Node = JsonView::Node;

// What the parser reads of one value of the document: its view and node
// (nullptr: absent).  Scalars are read in place; a value read whole goes
// through JsonView::Tree.
struct Val {
	const JsonView *v;
	Node n;
	bool Absent() const { return n == nullptr; }
	Json::Kind Kind() const { return v->KindOf(n); }
	bool IsNull() const { return Kind() == Json::Kind::Null; }
	bool IsString() const { return Kind() == Json::Kind::String; }
	bool IsNumber() const { return Kind() == Json::Kind::Number; }
	bool IsBool() const { return Kind() == Json::Kind::Bool; }
	bool IsObject() const { return Kind() == Json::Kind::Object; }
	std::string_view Scalar() const { return v->ScalarOf(n); }
	bool AsBool() const { return v->BoolOf(n); }
	const char *KindName() const
	{
		switch (Kind()) {
		case Json::Kind::Null: return "null";
		case Json::Kind::Bool: return "boolean";
		case Json::Kind::Number: return "number";
		case Json::Kind::String: return "string";
		case Json::Kind::Array: return "array";
		case Json::Kind::Object: return "object";
		}
		return "?";
	}
	Val Find(std::string_view key) const { return Val{v, v->Member(n, key)}; }
	// Like Find, JSON null counting as absent.
	Val FindNonNull(std::string_view key) const
	{
		Val m = Find(key);
		return m.Absent() || m.IsNull() ? Val{v, nullptr} : m;
	}
	// The scalar as a Json value (for Json's number rules); a container as its tree.
	Json Scalar1() const
	{
		switch (Kind()) {
		case Json::Kind::Bool: return Json::MakeBool(AsBool());
		case Json::Kind::Number: return Json::MakeNumber(std::string(Scalar()));
		case Json::Kind::String: return Json::MakeString(std::string(Scalar()));
		case Json::Kind::Null: return Json();
		default: {
			Json storage;
			const Json &t = v->Tree(n, storage);
			return &t == &storage ? std::move(storage) : t;
		}
		}
	}
	std::string Serialize() const
	{
		if (Kind() == Json::Kind::Object || Kind() == Json::Kind::Array) {
			Json storage;
			return v->Tree(n, storage).Serialize();
		}
		return Scalar1().Serialize();
	}
	std::optional<int64_t> AsIntegral() const
	{
		if (!IsNumber() && !IsString())
			return std::nullopt;
		return Scalar1().AsIntegral();
	}
};

// A field's value for a message: its JSON text, cut to a readable length.
std::string
Shown(const Val &j)
{
	return ClippedForMessage(j.Serialize());
}

std::string
OptString(const Val &j, const char *path)
{
	if (j.Absent() || j.IsNull())
		return {};
	std::string s;
	if (j.IsString() || j.IsNumber())
		s = j.Scalar();
	else if (j.IsBool())
		s = j.AsBool() ? "true" : "false";
	else
		s = j.Serialize();
	RefuseNul(s, path);
	return s;
}

// A name of the source block (name, db, schema, table, connector): a JSON
// string of at most max_bytes bytes; JSON null or absent: "".  Anything
// else would be stored or matched as its JSON text (source.name {"a":1} as
// a source id).  A longer name would fail later at a btree index of the
// dictionaries with 54000 naming only the index (kMaxSourceNameBytes): it
// is refused here, before anything is written, with its start shown.
std::string
OptName(const Val &j, const char *path, std::size_t max_bytes = std::numeric_limits<std::size_t>::max())
{
	if (j.Absent() || j.IsNull())
		return {};
	if (!j.IsString())
		Bad("field " + QuotedField(path) + " must be a string, got " + j.KindName() + " " + Shown(j));
	std::string s(j.Scalar());
	if (s.size() > max_bytes)
		Bad("field " + QuotedField(path) + " is " + std::to_string(s.size()) + " bytes long, more than the " +
		        std::to_string(max_bytes) + " allowed: " + QuotedField(ClippedForMessage(s)),
		    "The source identity is stored in btree indexes, which bound its size (docs/sql-reference.md, \"Limits\").");
	RefuseNul(s, path);
	return s;
}

// source.snapshot: one of the values Debezium writes (its SnapshotRecord,
// lower case), or a boolean (older Debezium versions); JSON null or absent:
// "".  A boolean reads as "true" / "false".
std::string
OptSnapshot(const Val &j)
{
	if (j.Absent() || j.IsNull())
		return {};
	if (j.IsBool())
		return j.AsBool() ? "true" : "false";
	if (j.IsString())
		for (const char *v : {"true", "false", "last", "first", "first_in_data_collection", "last_in_data_collection",
		                      "incremental"})
			if (j.Scalar() == v)
				return std::string(j.Scalar());
	Bad("field \"source.snapshot\" must be a boolean or one of Debezium's values, got " + std::string(j.KindName()) +
	        " " + Shown(j),
	    "Debezium writes true, false, first, last, first_in_data_collection, last_in_data_collection or incremental.");
}

// An integer field: a JSON number whose value is an integer (1e2 and 100.0
// count as 100, as in jsonb, which cannot tell them from 100) or a string
// holding a plain integer.
std::optional<int64_t>
OptInt(const Val &j, const char *path)
{
	if (j.Absent() || j.IsNull())
		return std::nullopt;
	auto v = j.AsIntegral();
	if (!v) {
		/*
		 * An integer beyond 64 bits (9223372036854775808, 1e300, a string
		 * of 20 digits) is one: say it is out of range rather than "must be
		 * an integer" (fresh-user review h3, sql/integer_field_range.sql).
		 */
		bool out_of_range = false;
		if (j.IsNumber())
			(void) j.Scalar1().AsIntegral(&out_of_range);
		else if (j.IsString()) {
			const std::string_view t = j.Scalar();
			const std::size_t first = !t.empty() && t[0] == '-' ? 1 : 0;
			out_of_range = t.size() > first && t.find_first_not_of("0123456789", first) == std::string_view::npos;
		}
		if (out_of_range)
			Bad("field " + QuotedField(path) + " is out of range: " + Shown(j) +
			    ", an integer beyond 64 bits");
		Bad("field " + QuotedField(path) + " must be an integer, got " + j.KindName() + " " + Shown(j));
	}
	return v;
}

std::optional<int64_t>
OptLsn(const Val &j, const char *path)
{
	if (j.Absent() || j.IsNull())
		return std::nullopt;
	if (j.IsNumber()) {
		auto v = j.AsIntegral();
		if (v && *v >= 0)
			return v;
	} else if (j.IsString()) {
		auto v = ParseLsn(std::string(j.Scalar()));
		if (v)
			return v;
	}
	/*
	 * PostgreSQL text above 7FFFFFFF/FFFFFFFF, or an integer above 2^63 - 1,
	 * is an LSN PostgreSQL could write but not one a bigint holds (versions
	 * and positions are stored as bigint): say so, rather than "not an LSN"
	 * with a hint that shows the very form given (fresh-user run).
	 */
	const char *too_large_hint = "LSNs are stored as bigint; no PostgreSQL server reaches this WAL position in practice.";
	if (j.IsString()) {
		const std::string_view t = j.Scalar();
		const size_t slash = t.find('/');
		const auto hex = [](std::string_view h) {
			return !h.empty() && h.size() <= 8 && h.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
		};
		if (slash != std::string::npos && hex(t.substr(0, slash)) && hex(t.substr(slash + 1)))
			Bad("field " + QuotedField(path) + " is LSN " + Shown(j) + ", above 7FFFFFFF/FFFFFFFF, the largest LSN cdc_apply stores",
			    too_large_hint);
	}
	/* Debezium's form, a decimal integer (a number or a string of digits), above 2^63 - 1 */
	if ((j.IsNumber() || j.IsString()) && !j.Scalar().empty() &&
	    j.Scalar().find_first_not_of("0123456789") == std::string::npos)
		Bad("field " + QuotedField(path) + " is LSN " + Shown(j) +
		        ", above 9223372036854775807 (7FFFFFFF/FFFFFFFF), the largest LSN cdc_apply stores",
		    too_large_hint);
	Bad("field " + QuotedField(path) + " is not an LSN: " + Shown(j),
	    "An LSN is a non-negative integer (Debezium; 1e2 and 100.0 count as 100) or PostgreSQL text such as \"16/B374D848\".");
}

// An image: its node when it is an object, nullptr when absent or JSON null.
Node
Image(const Val &j, const char *name)
{
	if (j.Absent() || j.IsNull())
		return nullptr;
	if (!j.IsObject())
		Bad(std::string("field \"") + name + "\" must be an object, got " + j.KindName());
	return j.n;
}

bool
IsHeartbeat(const Val &p)
{
	// Debezium heartbeat values carry only a timestamp: {"ts_ms": 1588252618953}.
	if (!p.IsObject() || p.v->SizeOf(p.n) == 0)
		return false;
	for (size_t i = 0; i < p.v->SizeOf(p.n); i++)
		if (p.v->KeyAt(p.n, i) != "ts_ms")
			return false;
	return true;
}

} // namespace

const char *
OpName(Op op)
{
	switch (op) {
	case Op::Create: return "c";
	case Op::Update: return "u";
	case Op::Delete: return "d";
	case Op::Read: return "r";
	case Op::Truncate: return "t";
	}
	return "?";
}

namespace {

// The envelope read through `view`; the images are left in the document
// (ev.before_node, ev.after_node): the callers below take them.
ChangeEvent
ParseEnvelope(const JsonView &view)
{
	ChangeEvent ev;
	const Val root{&view, view.Root()};
	Val payload = root;
	Val schema{&view, nullptr};

	// JsonConverter with schemas.enable=true wraps the value.  A top-level
	// "op": null counts as no op, as a null op of a payload is "missing"
	// (fresh-user review h4, regress new_user_s31).
	if (root.IsObject() && !root.Find("payload").Absent() && !root.Find("schema").Absent() &&
	    root.FindNonNull("op").Absent()) {
		payload = root.Find("payload");
		schema = root.FindNonNull("schema");
		/*
		 * The wrapper's members have one shape each: a payload that was
		 * not an object was refused as if it were the whole event ("event
		 * must be a JSON object, got number"), and a schema that was not
		 * an object, or whose "fields" was not an array, was ignored and
		 * the payload decoded without it (fresh-user review h3;
		 * sql/envelope_wrapper_shape.sql).  A JSON null stays a tombstone's
		 * payload and no schema.
		 */
		if (!payload.IsNull() && !payload.IsObject())
			Bad(std::string("field \"payload\" must be an object, got ") + payload.KindName(),
			    "A JsonConverter record value with schemas is {\"schema\": {...}, \"payload\": {...}}.");
		if (!schema.Absent() && !schema.IsObject())
			Bad(std::string("field \"schema\" must be an object, got ") + schema.KindName(),
			    "A JsonConverter record value with schemas is {\"schema\": {...}, \"payload\": {...}}; "
			    "send null or leave \"schema\" out for none.");
	}
	if (payload.IsNull()) {
		ev.ignored = true;
		ev.ignored_reason = "kafka tombstone";
		return ev;
	}
	if (!payload.IsObject())
		Bad(std::string("event must be a JSON object, got ") + payload.KindName());

	const Val op = payload.Find("op");
	if (op.Absent() || op.IsNull()) {
		const Val status = payload.FindNonNull("status");
		if (!status.Absent() && status.IsString() && (status.Scalar() == "BEGIN" || status.Scalar() == "END") &&
		    !payload.Find("id").Absent()) {
			ev.ignored = true;
			ev.ignored_reason = "transaction " + std::string(status.Scalar());
			return ev;
		}
		if (IsHeartbeat(payload)) {
			ev.ignored = true;
			ev.ignored_reason = "heartbeat";
			return ev;
		}
		Bad("field \"op\" is missing", "A Debezium change event has \"op\" (c, u, d, r, t or m).");
	}
	if (!op.IsString())
		Bad(std::string("field \"op\" must be a string, got ") + op.KindName());
	const std::string o(op.Scalar());
	RefuseNul(o, "op");
	if (o == "m") {
		ev.ignored = true;
		ev.ignored_reason = "logical decoding message";
		return ev;
	}
	if (o == "c")
		ev.op = Op::Create;
	else if (o == "u")
		ev.op = Op::Update;
	else if (o == "d")
		ev.op = Op::Delete;
	else if (o == "r")
		ev.op = Op::Read;
	else if (o == "t")
		ev.op = Op::Truncate;
	else
		Bad("unknown op " + QuotedField(ClippedForMessage(o)),
		    "Known ops are c, u, d, r, t (changes) and m (messages, ignored).");

	if (const Val src = payload.FindNonNull("source"); !src.Absent()) {
		if (!src.IsObject())
			Bad(std::string("field \"source\" must be an object, got ") + src.KindName());
		ev.source.connector = OptName(src.Find("connector"), "source.connector");
		ev.source.name = OptName(src.Find("name"), "source.name", kMaxSourceNameBytes);
		ev.source.db = OptName(src.Find("db"), "source.db", kMaxSourceIdentifierBytes);
		ev.source.schema = OptName(src.Find("schema"), "source.schema", kMaxSourceIdentifierBytes);
		ev.source.table = OptName(src.Find("table"), "source.table", kMaxSourceIdentifierBytes);
		/* "" is told apart from absent for the message of an event without a target (regress input_polish) */
		if (ev.source.table.empty()) {
			const Val table = src.Find("table");
			ev.source.table_empty = !table.Absent() && table.IsString();
		}
		ev.source.snapshot = OptSnapshot(src.Find("snapshot"));
		ev.source.lsn = OptLsn(src.Find("lsn"), "source.lsn");
		ev.source.commit_lsn = OptLsn(src.Find("commit_lsn"), "source.commit_lsn");
		ev.source.tx_id = OptInt(src.Find("txId"), "source.txId");
		ev.source.ts_ms = OptInt(src.Find("ts_ms"), "source.ts_ms");
		/*
		 * A change's commit LSN is at least its own LSN (the commit record
		 * follows the change in the WAL): C >= lsn is what makes events
		 * with and without commit_lsn comparable (docs/semantics.md,
		 * "Source versions").  A smaller one was accepted and became the
		 * version, making the change look older than it is; a negative
		 * transaction id was stored as given (fresh-user review;
		 * sql/envelope_positions.sql).
		 */
		if (ev.source.lsn && ev.source.commit_lsn && *ev.source.commit_lsn < *ev.source.lsn)
			Bad("field \"source.commit_lsn\" (" + FormatLsn(*ev.source.commit_lsn) + ") is below field \"source.lsn\" (" +
			        FormatLsn(*ev.source.lsn) + "): a change's commit LSN is never below its own LSN",
			    "source.commit_lsn is the LSN of the commit of the change's transaction; omit it if the pipeline does "
			    "not know it.");
		if (ev.source.tx_id && *ev.source.tx_id < 0)
			Bad("field \"source.txId\" must not be negative, got " + std::to_string(*ev.source.tx_id),
			    "source.txId is the PostgreSQL transaction id of the change; omit it if the pipeline does not know it.");
	}
	if (const Val tx = payload.FindNonNull("transaction"); !tx.Absent()) {
		if (!tx.IsObject())
			Bad(std::string("field \"transaction\" must be an object, got ") + tx.KindName());
		ev.transaction_id = OptString(tx.Find("id"), "transaction.id");
		ev.total_order = OptInt(tx.Find("total_order"), "transaction.total_order");
		/*
		 * Debezium counts a transaction's events from 1; a negative position
		 * would rank the change below the transaction's start (fresh-user
		 * review; sql/envelope_positions.sql); checked first, so that a
		 * value below 32 bits is called negative (review h3).
		 */
		if (ev.total_order && *ev.total_order < 0)
			Bad("field \"transaction.total_order\" must not be negative, got " + std::to_string(*ev.total_order),
			    "It is the change's position in its source transaction, counted from 1; omit the transaction block if "
			    "the pipeline does not know it.");
		/* the fourth version component is stored in 32 bits (core/layout.hpp) */
		if (ev.total_order && *ev.total_order > std::numeric_limits<int32_t>::max())
			Bad("field \"transaction.total_order\" is out of range: " + std::to_string(*ev.total_order) +
			        " (at most 2147483647)",
			    "It is the change's position in its source transaction.");
	}

	if (!schema.Absent()) {
		/* read whole: a tree (the document's own when it is one) */
		Json storage;
		const Json &sch = view.Tree(schema.n, storage);
		const Json *fields = sch.FindNonNull("fields");
		if (fields && !fields->IsArray())
			Bad(std::string("field \"schema.fields\" must be an array, got ") + fields->KindName(),
			    "The envelope's schema lists the field schemas of before, after, source, op and the others.");
		if (fields) {
			for (size_t i = 0; i < fields->Items().size(); i++) {
				const Json &f = fields->Items()[i];
				if (!f.IsObject())
					Bad("field \"schema.fields[" + std::to_string(i) + "]\" must be an object, got " + f.KindName());
				const Json *name = f.FindNonNull("field");
				if (name && !name->IsString()) /* skipped before: "field": ["after"] lost the after schema (field_schema_members) */
					Bad("field \"schema.fields[" + std::to_string(i) + "].field\" must be a string, got " + name->KindName());
				if (!name)
					continue;
				if (name->Scalar() == "before")
					ev.before_schema = FieldSchema::FromJson(f, "before");
				else if (name->Scalar() == "after")
					ev.after_schema = FieldSchema::FromJson(f, "after");
			}
		}
	}

	ev.view = &view;
	ev.before_node = Image(payload.Find("before"), "before");
	ev.after_node = Image(payload.Find("after"), "after");
	switch (ev.op) {
	case Op::Create:
	case Op::Update:
	case Op::Read:
		if (!ev.after_node)
			Bad(std::string("field \"after\" is missing: op \"") + o + "\" needs the after-image");
		break;
	case Op::Delete:
		if (!ev.before_node)
			Bad("field \"before\" is missing: op \"d\" needs the before-image (at least the key columns)");
		break;
	case Op::Truncate:
		break;
	}
	return ev;
}

// The images of an event parsed from a tree, as trees of their own:
// copied, or moved out of the tree when `owned` (an image can hold most of
// a large event).  The event no longer refers to the view.
void
TakeImages(ChangeEvent &ev, bool owned)
{
	for (auto [node, image] : {std::pair{ev.before_node, &ev.before}, std::pair{ev.after_node, &ev.after}}) {
		if (!node)
			continue;
		const Json *j = static_cast<const Json *>(node);
		if (owned)
			image->emplace(std::move(*const_cast<Json *>(j))); /* the caller handed the tree over */
		else
			image->emplace(*j);
	}
	ev.view = nullptr;
	ev.before_node = ev.after_node = nullptr;
}

} // namespace

ChangeEvent
ParseDebeziumEnvelope(const Json &root)
{
	const JsonTreeView view(root);
	ChangeEvent ev = ParseEnvelope(view);
	TakeImages(ev, false);
	return ev;
}

ChangeEvent
ParseDebeziumEnvelope(Json &&root)
{
	const JsonTreeView view(root);
	ChangeEvent ev = ParseEnvelope(view);
	TakeImages(ev, true);
	return ev;
}

ChangeEvent
ParseDebeziumEnvelope(const JsonView &view)
{
	return ParseEnvelope(view);
}

EnvelopePart
EnvelopeMemberPart(EnvelopePart parent, std::string_view key) noexcept
{
	switch (parent) {
	case EnvelopePart::Skipped:
	case EnvelopePart::Whole: return EnvelopePart::Whole;
	case EnvelopePart::Root:
		/* the wrapper ({"schema", "payload"}) is recognised and read here only */
		if (key == "payload")
			return EnvelopePart::Payload;
		if (key == "schema")
			return EnvelopePart::Whole;
		[[fallthrough]];
	case EnvelopePart::Payload:
		/* ParseEnvelope: op, the images, the blocks; status and id tell transaction markers (by length first: called per member) */
		switch (key.size()) {
		case 2: return key == "op" || key == "id" ? EnvelopePart::Whole : EnvelopePart::Skipped;
		case 5: return key == "after" ? EnvelopePart::Whole : EnvelopePart::Skipped;
		case 6:
			if (key == "source")
				return EnvelopePart::Source;
			return key == "before" || key == "status" ? EnvelopePart::Whole : EnvelopePart::Skipped;
		case 11: return key == "transaction" ? EnvelopePart::Transaction : EnvelopePart::Skipped;
		default: return EnvelopePart::Skipped;
		}
	case EnvelopePart::Source: {
		/* SourceInfo's fields: connector, name, db, schema, table, snapshot, lsn, commit_lsn, txId, ts_ms */
		bool read = false;
		switch (key.size()) {
		case 2: read = key == "db"; break;
		case 3: read = key == "lsn"; break;
		case 4: read = key == "name" || key == "txId"; break;
		case 5: read = key == "table" || key == "ts_ms"; break;
		case 6: read = key == "schema"; break;
		case 8: read = key == "snapshot"; break;
		case 9: read = key == "connector"; break;
		case 10: read = key == "commit_lsn"; break;
		default: break;
		}
		return read ? EnvelopePart::Whole : EnvelopePart::Skipped;
	}
	case EnvelopePart::Transaction:
		return key == "id" || key == "total_order" ? EnvelopePart::Whole : EnvelopePart::Skipped;
	}
	return EnvelopePart::Whole;
}

namespace {

Json
Prune(const Json &j, EnvelopePart part)
{
	if (part == EnvelopePart::Whole || !j.IsObject())
		return j;
	std::vector<Json::Member> members;
	members.reserve(j.Members().size());
	for (const auto &m : j.Members()) {
		EnvelopePart p = EnvelopeMemberPart(part, m.first);
		const bool container = m.second.IsObject() || m.second.IsArray();
		members.emplace_back(m.first, p != EnvelopePart::Skipped ? Prune(m.second, p) : container ? m.second : Json());
	}
	return Json::MakeObject(std::move(members));
}

} // namespace

Json
PruneEnvelope(const Json &root)
{
	return Prune(root, EnvelopePart::Root);
}

Version
DeriveDebeziumVersion(const ChangeEvent &ev, int64_t epoch)
{
	if (!ev.source.lsn)
		Bad("field \"source.lsn\" is missing: the event's source position is unknown",
		    "Send the Debezium source block, or register the mapping with version_column to order changes by a column.");
	int64_t lsn = *ev.source.lsn;
	if (ev.IsSnapshot())
		return Version{{epoch, lsn, 0, 0}};
	int64_t commit = ev.source.commit_lsn ? *ev.source.commit_lsn : lsn;
	return Version{{epoch, commit, lsn, ev.total_order.value_or(0)}};
}

namespace {

// One source name of a derived delivery key, followed in the key by
// `separator`: as it is, or, when it holds the separator or a double quote,
// as a JSON string.  Unquoted, name "a:b" with db "c" and name "a" with db
// "b:c" (or schema "x.y" with table "z" and schema "x" with table "y.z")
// made one key, and the second source's change was taken for a redelivery
// of the first's (sql/new_user_s32.sql).  A name read unquoted never starts
// with a double quote, so every key reads back one way; names without
// those characters give the key they always gave, and a ledger written
// before keeps matching.
void
AppendKeyName(std::string &k, const std::string &name, char separator)
{
	if (name.find(separator) == std::string::npos && name.find('"') == std::string::npos)
		k += name;
	else
		AppendJsonString(k, name);
}

} // namespace

std::string
DeriveDeliveryKey(const SourceInfo &source, Op op, const std::optional<int64_t> &total_order,
                  const std::string &entity_key)
{
	std::string k = "dbz:";
	AppendKeyName(k, source.name, ':');
	k += ':';
	AppendKeyName(k, source.db, ':');
	k += ':';
	AppendKeyName(k, source.schema, '.');
	k += '.';
	AppendKeyName(k, source.table, ':');
	k += ':';
	k += OpName(op);
	k += ':';
	k += source.lsn ? std::to_string(*source.lsn) : "";
	k += ':';
	k += source.tx_id ? std::to_string(*source.tx_id) : "";
	k += ':';
	k += total_order ? std::to_string(*total_order) : "";
	k += ':';
	k += entity_key;
	return k;
}

std::string
DeriveDeliveryKey(const ChangeEvent &ev, const std::string &entity_key)
{
	return DeriveDeliveryKey(ev.source, ev.op, ev.total_order, entity_key);
}

} // namespace cdc

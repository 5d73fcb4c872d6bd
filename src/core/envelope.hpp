// Debezium change-event envelopes -> ChangeEvent (SPEC §5).
//
// Accepts the JsonConverter form ({"schema": ..., "payload": ...}) and the
// bare payload (schemas.enable=false).  Recognises the non-change records a
// Kafka consumer sees on the same topics (SPEC §4.9) and marks them ignored.
// Field-level rules (types of the source fields, integer fields read by
// value, repeated keys) are in docs/sql-reference.md under cdc_apply;
// the fixtures they are tested on are in test/fixtures/debezium/.
#pragma once
#include "core/decode.hpp"
#include "core/json.hpp"
#include "core/version.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace cdc {

enum class Op : char { Create = 'c', Update = 'u', Delete = 'd', Read = 'r', Truncate = 't' };

// The envelope's `source` block (PostgreSQL connector).  Absent fields stay empty.
struct SourceInfo {
	std::string connector;             // "postgresql"
	std::string name;                  // topic.prefix / logical server name: the source id
	std::string db;
	std::string schema;
	std::string table;
	bool table_empty = false;          // source.table was "" (table is "" when absent or null too)
	std::optional<int64_t> lsn;        // source.lsn: LSN of the change record
	std::optional<int64_t> commit_lsn; // source.commit_lsn (a cdc_apply extension, see docs): commit LSN of its transaction
	std::optional<int64_t> tx_id;      // source.txId
	std::string snapshot;              // Debezium's value ("true", "false", "first", "last", "first_in_data_collection",
	                                   // "last_in_data_collection", "incremental"; a boolean reads as "true"/"false") or ""
	std::optional<int64_t> ts_ms;
};

// A read-only view of one JSON document, as ParseDebeziumEnvelope reads it:
// the envelope's fields are read in place through it instead of from a
// tree of their own.  Two implementations: JsonTreeView below (over a
// Json tree: the text forms, GoogleTest) and the jsonb intake's
// (pg/jsonb_view.hpp: the jsonb containers read in place).  A Node is the
// implementation's handle of one value of the document, valid while the
// view lives; nullptr is "absent".  No method may throw except Tree()
// (which may build a tree: std::bad_alloc, InputError 54001).
class JsonView {
  public:
	using Node = const void *;
	virtual ~JsonView() = default;
	virtual Node Root() const = 0;
	virtual Json::Kind KindOf(Node n) const = 0;
	// A String's unescaped bytes, a Number's text as jsonb's numeric prints
	// it (a tree's lexeme as stored); empty for the other kinds.
	virtual std::string_view ScalarOf(Node n) const = 0;
	virtual bool BoolOf(Node n) const = 0;
	// The value of member `key` of an object (the last of a repeated key,
	// as the tree keeps it); nullptr when absent or `object` is no object.
	virtual Node Member(Node object, std::string_view key) const = 0;
	// Members of an object or items of an array (0 for a scalar).
	virtual std::size_t SizeOf(Node container) const = 0;
	// The key of member i of an object, in the document's order.
	virtual std::string_view KeyAt(Node object, std::size_t i) const = 0;
	// The value of member i of an object, or item i of an array.
	virtual Node ValueAt(Node container, std::size_t i) const = 0;
	// The value as a tree, for what reads a value whole (a schema, a
	// message showing a value): the document's own node when it is a tree
	// (JsonTreeView), else built into `storage` and returned.
	virtual const Json &Tree(Node n, Json &storage) const = 0;
};

// JsonView over a Json tree.  Nodes are `const Json *` into the tree.
class JsonTreeView final : public JsonView {
  public:
	explicit JsonTreeView(const Json &root) : root_(root) {}
	Node Root() const override { return &root_; }
	Json::Kind KindOf(Node n) const override { return J(n).kind(); }
	std::string_view ScalarOf(Node n) const override
	{
		return J(n).IsString() || J(n).IsNumber() ? std::string_view(J(n).Scalar()) : std::string_view();
	}
	bool BoolOf(Node n) const override { return J(n).IsBool() && J(n).AsBool(); }
	Node Member(Node object, std::string_view key) const override { return J(object).Find(key); }
	std::size_t SizeOf(Node c) const override
	{
		return J(c).IsObject() ? J(c).Members().size() : J(c).IsArray() ? J(c).Items().size() : 0;
	}
	std::string_view KeyAt(Node object, std::size_t i) const override { return J(object).Members()[i].first; }
	Node ValueAt(Node c, std::size_t i) const override
	{
		return J(c).IsObject() ? &J(c).Members()[i].second : &J(c).Items()[i];
	}
	const Json &Tree(Node n, Json &) const override { return J(n); }

  private:
	static const Json &J(Node n) { return *static_cast<const Json *>(n); }
	const Json &root_;
};

struct ChangeEvent {
	bool ignored = false;
	std::string ignored_reason;        // "kafka tombstone", "transaction BEGIN", ...
	Op op = Op::Create;
	std::optional<Json> before;        // JSON object or nullopt (parsed from a tree)
	std::optional<Json> after;         // JSON object or nullopt (parsed from a tree)
	// Parsed from a JsonView (ParseDebeziumEnvelope(const JsonView &)): the
	// images are left in the document, as the view's nodes of JSON objects
	// (nullptr: absent or JSON null), for the caller to read in place;
	// `before` and `after` stay empty.
	const JsonView *view = nullptr;
	JsonView::Node before_node = nullptr;
	JsonView::Node after_node = nullptr;
	bool HasBefore() const { return before || before_node; }
	bool HasAfter() const { return after || after_node; }
	std::optional<FieldSchema> before_schema; // struct schema of `before`, when the envelope has one
	std::optional<FieldSchema> after_schema;
	SourceInfo source;
	std::optional<int64_t> total_order; // transaction.total_order (1-based position in the source transaction)
	std::string transaction_id;         // transaction.id

	bool IsSnapshot() const { return op == Op::Read; }
	bool IsChange() const { return !ignored; }
};

// The longest source identity values an envelope may carry, in bytes of
// UTF-8 (ParseDebeziumEnvelope refuses longer ones, 22023 naming the field).
// They are stored in btree indexes: source.name alone in cdc.source's, and
// with db, schema, table and the outbox topic in cdc.outbox_source's unique
// key.  A btree entry holds at most 2,704 bytes on 8 kB pages (BTMaxItemSize;
// beyond, PostgreSQL fails with 54000 naming only the index), and a text
// value is not always compressible: 1024 + 3 x 255 bytes, the topic's 512
// (cdc.register_mapping's limit) and the entry's headers stay under 2,400.
// db, schema and table are PostgreSQL identifiers on the source, at most
// NAMEDATALEN - 1 = 63 bytes in a standard build; 255 leaves room for a
// source built with NAMEDATALEN 256.  source.name is the connector's
// topic.prefix, a part of Kafka topic names (at most 249 characters).
// source.connector and transaction.id are stored in no index: no limit
// beyond cdc.max_event_size.  docs/sql-reference.md, "Limits".
constexpr std::size_t kMaxSourceNameBytes = 1024;       // source.name
constexpr std::size_t kMaxSourceIdentifierBytes = 255;  // source.db, source.schema, source.table

// Parses a Debezium value.  `root` may be JSON null (a Kafka tombstone).
// Throws InputError 22023 naming the field for: missing or unknown `op`,
// missing `after` on c/u/r, missing `before` on d, a non-object image,
// malformed `source` fields: a name (name, db, schema, table, connector)
// that is not a JSON string, a name longer than its limit above
// (kMaxSourceNameBytes, kMaxSourceIdentifierBytes), a snapshot that is neither a boolean nor one
// of Debezium's values, an integer field (lsn, commit_lsn, txId, ts_ms,
// transaction.total_order) whose number is not an integer in int64's
// range (1e2 and 100.0 count as 100: Json::AsIntegral); JSON null is
// absent.  22P02 for a NUL in a text field.
ChangeEvent ParseDebeziumEnvelope(const Json &root);
// The same, taking the tree over: the images are moved out of it, not
// copied (the tree is left without them).
ChangeEvent ParseDebeziumEnvelope(Json &&root);
// The same, read through `view` (which must outlive the event): the
// images stay in the document (ChangeEvent::before_node, after_node).
// Same results and errors as from the tree of the same document.
ChangeEvent ParseDebeziumEnvelope(const JsonView &view);

const char *OpName(Op op); // "c", "u", ...

// What ParseDebeziumEnvelope reads of a Debezium value, for a reader that
// builds the value's tree itself and may leave the rest out (the jsonb
// intake, pg/sql_api.cpp: a Debezium value carries version, ts_us, ts_ns,
// sequence, xmin, data_collection_order ... that nothing reads).  A part
// tells how a value is read:
enum class EnvelopePart : char {
	Skipped,     // never read: a scalar value may be left out, JSON null in its
	             // place (the name stays: a heartbeat is told by its member
	             // names); a container value is kept whole, so that the
	             // nesting limit (Json::kMaxDepth, 54001) applies to it
	Whole,       // read as it is, all of it: op, the images, the schema, the source fields used
	Root,        // the value itself: its members are read one by one
	Payload,     // the JsonConverter wrapper's payload: read as Root, but not unwrapped again
	Source,      // the source block
	Transaction, // the transaction block
};
// The part of member `key` of an object read as `parent` (Whole's members
// and items are Whole; an array's items are read Whole whatever its part).
// Must list every member ParseEnvelope reads: PruneEnvelope and its
// GoogleTest keep the two in step.  No allocation, no exception: the jsonb
// intake calls it in the PostgreSQL regime.
EnvelopePart EnvelopeMemberPart(EnvelopePart parent, std::string_view key) noexcept;
// The tree ParseDebeziumEnvelope reads of `root`: the value with every
// Skipped member's scalar value replaced by JSON null (containers kept).  ParseDebeziumEnvelope
// gives the same ChangeEvent, or the same error, for both.
Json PruneEnvelope(const Json &root);


// The version of a Debezium event when the mapping uses the source position
// (SPEC §3, second question):
//   streamed (c/u/d/t): {epoch, C, lsn, ordinal}
//   snapshot (r):       {epoch, lsn, 0, 0}
// where C is source.commit_lsn when present, else source.lsn (safe per key
// because PostgreSQL row locks make writers of one key commit in LSN order),
// and ordinal is transaction.total_order when present, else 0.  A snapshot
// row taken at point S therefore loses against any change committed after S
// and wins against every change committed before it.
// Throws InputError 22023 when source.lsn is missing.
Version DeriveDebeziumVersion(const ChangeEvent &ev, int64_t epoch);

// The stable delivery key derived when the caller passes none (SPEC §3,
// first question): the source identity of the change.  `entity_key` is the
// canonical key text computed by the engine ("" for truncates).
//   dbz:<source.name>:<db>:<schema>.<table>:<op>:<lsn>:<txId>:<total_order>:<entity_key>
// A name holding the separator that follows it (':', for the schema '.')
// or a double quote is written as a JSON string, so two source identities
// never derive one key.
std::string DeriveDeliveryKey(const ChangeEvent &ev, const std::string &entity_key);
// The same from the parts (used by every input path).
std::string DeriveDeliveryKey(const SourceInfo &source, Op op, const std::optional<int64_t> &total_order,
                              const std::string &entity_key);

} // namespace cdc

// The jsonb intake (docs/internals.md, "Envelope intake"): a Debezium event
// given as jsonb, read in place through cdc::JsonView, so that
// ParseDebeziumEnvelope and the image decoder read the jsonb's containers
// without a cdc::Json tree of the event being built.
//
// One guarded region (PgCall) per call reads the events: for each, the
// containers the envelope reads member by member (the value, its payload,
// source and transaction blocks, and the members of its images: EnvelopePart)
// become a flat array of nodes (plain C, in a memory context of the
// caller's) whose strings and keys point into the jsonb and whose numbers
// are numeric_out's text; every other container stays in the jsonb, read
// whole (as a tree) only if something asks for it (a json column, a
// schema, a message), and is only walked for the nesting limit (54001), as
// the text form's parser counts it.  A scalar member the envelope never
// reads (version, ts_us, sequence ...) reads as JSON null, not printed.
//
// Glue, C++ regime outside the PgCall.  The jsonb datums and the memory
// context must outlive the views (the engine's requests refer to them until
// the call ends).  Must not apply anything: that is the engine's.
#pragma once

#include "core/envelope.hpp"
#include "core/json.hpp"
#include "pg/guard.hpp"

extern "C" {
#include "utils/jsonb.h"
}

#include <cstddef>
#include <vector>

namespace cdc::pg {

// One value of an event as the intake reads it (plain C: palloc'd).
struct JsonbNode {
	const char *key;           // as a member of its parent object (into the jsonb), else NULL
	const char *text;          // String: its bytes (into the jsonb); Number: numeric_out's text
	JsonbContainer *container; // Object, Array: the container in the jsonb
	int key_len;
	int text_len;
	int first; // an expanded container: the index of its first member or item (consecutive); -1: not expanded
	int size;  // Object, Array: its number of members or items
	char kind; // cdc::Json::Kind
	bool boolean;
};

// The nodes of one event (plain C: palloc'd).  nodes[0] is the event's value.
struct JsonbEventNodes {
	JsonbNode *nodes;
	int count;
	int capacity;
	bool too_deep; // nested deeper than Json::kMaxDepth (with the outer depth): the event is refused (54001)
};

// An event read in place.  Nodes are `const JsonbNode *`.  Member, KeyAt
// and ValueAt read expanded containers (those the envelope reads member by
// member); Tree converts any value (a container through PgCall).
class JsonbEventView final : public cdc::JsonView {
  public:
	explicit JsonbEventView(const JsonbEventNodes *ev) : ev_(ev) {}
	Node Root() const override { return &ev_->nodes[0]; }
	cdc::Json::Kind KindOf(Node n) const override { return cdc::Json::Kind(N(n).kind); }
	std::string_view ScalarOf(Node n) const override
	{
		return N(n).text ? std::string_view(N(n).text, size_t(N(n).text_len)) : std::string_view();
	}
	bool BoolOf(Node n) const override { return N(n).boolean; }
	Node Member(Node object, std::string_view key) const override;
	std::size_t SizeOf(Node c) const override { return N(c).first >= 0 ? size_t(N(c).size) : 0; }
	std::string_view KeyAt(Node object, std::size_t i) const override
	{
		const JsonbNode &m = ev_->nodes[size_t(N(object).first) + i];
		return std::string_view(m.key, size_t(m.key_len));
	}
	Node ValueAt(Node c, std::size_t i) const override { return &ev_->nodes[size_t(N(c).first) + i]; }
	const cdc::Json &Tree(Node n, cdc::Json &storage) const override;

  private:
	static const JsonbNode &N(Node n) { return *static_cast<const JsonbNode *>(n); }
	const JsonbEventNodes *ev_;
};

// Reading in place keeps an event's jsonb until the call's changes are
// applied (the images' JSON text is made from it on demand), one copy of
// the event more than the tree, whose jsonb is freed once converted
// (bench/memory.sh: 5.2 x instead of 4.2 x the size of a 50 MB event).  An
// event, or a jsonb batch, larger than this is converted into trees and
// its jsonb freed, as before: the conversion's cost does not matter there.
constexpr size_t kReadInPlaceMaxBytes = 4 * 1024 * 1024;

// Reads the events `values` (jsonb datums, already detoasted; NULL
// entries: tombstones) in one PgCall, into memory context `cxt`, each
// counted `outer_depth` levels deep for the nesting limit (1: an element of
// a batch array).  Throws InputError 54001 for the first one nested too
// deep, as converting it into a tree would.
std::vector<JsonbEventNodes *> ReadJsonbEvents(const std::vector<JsonbContainer *> &values, size_t outer_depth,
                                               MemoryContext cxt);

// The elements of jsonb array `root` (not a raw scalar) read as events, as
// ReadJsonbEvents does (outer depth 1), in one PgCall.  The scalar elements
// read as scalars (JSON null: a tombstone).
std::vector<JsonbEventNodes *> ReadJsonbArrayEvents(JsonbContainer *root, MemoryContext cxt);

// One scalar (a batch's element) read as an event (PostgreSQL regime:
// call it under PgCall).
JsonbEventNodes *ReadJsonbScalarPg(const JsonbValue *scalar);

// A jsonb container as our Json tree (no text in between): each
// container's storage reserved from the size jsonb stores, object members in
// jsonb's stored order, numbers as numeric_out prints them: the tree parsed
// from the jsonb's text form.  `outer_depth` as for JsonBuilder.
cdc::Json JsonbContainerToJson(JsonbContainer *c, size_t outer_depth = 0);

} // namespace cdc::pg

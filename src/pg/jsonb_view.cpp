// The jsonb intake: see jsonb_view.hpp.
#include "pg/jsonb_view.hpp"

#include "core/errors.hpp"

extern "C" {
#include "utils/builtins.h"
#include "utils/numeric.h"
}

#include <cstring>
#include <stdexcept>
#include <string>

namespace cdc::pg {

namespace {

/* ---- PostgreSQL regime: plain C, no object with a destructor ---- */

/* n consecutive new nodes of `ev`; the index of the first (the array may move) */
int
NewNodesPg(JsonbEventNodes *ev, int n)
{
	if (ev->count + n > ev->capacity) {
		int cap = ev->capacity * 2;
		while (cap < ev->count + n)
			cap *= 2;
		ev->nodes = (JsonbNode *) repalloc_huge(ev->nodes, Size(cap) * sizeof(JsonbNode));
		ev->capacity = cap;
	}
	const int first = ev->count;
	ev->count += n;
	return first;
}

/*
 * Node `node` as jsonb value `v`; `skipped`: a member the envelope never
 * reads, whose scalar value reads as JSON null (not printed).  A container
 * is not expanded here.
 */
void
FillNodePg(JsonbNode *node, const JsonbValue *v, bool skipped)
{
	node->text = NULL;
	node->text_len = 0;
	node->container = NULL;
	node->first = -1;
	node->size = 0;
	node->boolean = false;
	node->kind = char(cdc::Json::Kind::Null);
	switch (v->type) {
	case jbvBinary:
		node->container = v->val.binary.data;
		node->kind = char(JsonContainerIsObject(node->container) ? cdc::Json::Kind::Object : cdc::Json::Kind::Array);
		node->size = int(JsonContainerSize(node->container));
		return;
	default: break;
	}
	if (skipped)
		return;
	switch (v->type) {
	case jbvString:
		node->kind = char(cdc::Json::Kind::String);
		node->text = v->val.string.val;
		node->text_len = v->val.string.len;
		break;
	case jbvNumeric:
		node->kind = char(cdc::Json::Kind::Number);
		node->text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
		node->text_len = int(strlen(node->text));
		break;
	case jbvBool:
		node->kind = char(cdc::Json::Kind::Bool);
		node->boolean = v->val.boolean;
		break;
	default: break; /* jbvNull */
	}
}

/*
 * Is a container at nesting level `level` (the event's value: 1) nested
 * deeper, with what it holds, than the text form's parser allows
 * (JsonBuilder: Json::kMaxDepth levels, the outer ones included)?  A walk
 * of its tokens, nothing copied or printed.
 */
bool
TooDeepPg(JsonbContainer *c, int level, size_t outer_depth)
{
	JsonbIterator *it = JsonbIteratorInit(c);
	JsonbValue v;
	JsonbIteratorToken tok;
	size_t depth = size_t(level) - 1; /* containers open around the next one */
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE) {
		if (tok == WJB_BEGIN_OBJECT || tok == WJB_BEGIN_ARRAY) {
			if (outer_depth + depth >= cdc::Json::kMaxDepth)
				return true; /* the iterator's frames are in the caller's memory context */
			depth++;
		} else if (tok == WJB_END_OBJECT || tok == WJB_END_ARRAY) {
			depth--;
		}
	}
	return false;
}

/*
 * Expands node `at` (an object or array at nesting level `level`, read as
 * `part`): its members or items become consecutive nodes.  Which of them are
 * expanded in turn: the containers the envelope reads member by member (a
 * Root, Payload, Source or Transaction part) and the images (before, after
 * of a value or its payload: their members are the column values); every
 * other container is only checked for the nesting limit.  Returns false
 * when the event is nested too deep.
 */
bool
ExpandPg(JsonbEventNodes *ev, int at, cdc::EnvelopePart part, bool image, int level, size_t outer_depth)
{
	if (outer_depth + size_t(level) - 1 >= cdc::Json::kMaxDepth)
		return false;
	JsonbContainer *c = ev->nodes[at].container;
	const int n = ev->nodes[at].size;
	const int first = NewNodesPg(ev, n);
	ev->nodes[at].first = first;
	const bool object = JsonContainerIsObject(c);
	JsonbIterator *it = JsonbIteratorInit(c);
	JsonbValue v;
	JsonbIteratorToken tok;
	int i = 0;
	/* the parts of the members: Skipped ones read as JSON null when scalar */
	cdc::EnvelopePart member_part = cdc::EnvelopePart::Whole;
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
		JsonbNode *node = &ev->nodes[first + i];
		switch (tok) {
		case WJB_KEY:
			node->key = v.val.string.val;
			node->key_len = v.val.string.len;
			member_part = image ? cdc::EnvelopePart::Whole
			                    : cdc::EnvelopeMemberPart(part, std::string_view(node->key, size_t(node->key_len)));
			break;
		case WJB_VALUE:
			FillNodePg(node, &v, member_part == cdc::EnvelopePart::Skipped);
			i++;
			break;
		case WJB_ELEM:
			node->key = NULL;
			node->key_len = 0;
			FillNodePg(node, &v, false);
			i++;
			break;
		default: break;
		}
	}
	/* the containers inside, after this level's nodes are in place (the array may move) */
	for (int k = 0; k < n; k++) {
		const int idx = first + k;
		if (ev->nodes[idx].container == NULL)
			continue;
		cdc::EnvelopePart p = cdc::EnvelopePart::Whole;
		bool img = false;
		if (object && !image) {
			std::string_view key(ev->nodes[idx].key, size_t(ev->nodes[idx].key_len));
			p = cdc::EnvelopeMemberPart(part, key);
			img = (part == cdc::EnvelopePart::Root || part == cdc::EnvelopePart::Payload) && (key == "before" || key == "after");
		}
		const bool member_wise = p == cdc::EnvelopePart::Root || p == cdc::EnvelopePart::Payload ||
		                         p == cdc::EnvelopePart::Source || p == cdc::EnvelopePart::Transaction;
		if (ev->nodes[idx].kind == char(cdc::Json::Kind::Object) && (member_wise || img)) {
			if (!ExpandPg(ev, idx, member_wise ? p : cdc::EnvelopePart::Whole, img, level + 1, outer_depth))
				return false;
		} else if (TooDeepPg(ev->nodes[idx].container, level + 1, outer_depth)) {
			return false;
		}
	}
	return true;
}

/* One event: container `c` (NULL: the scalar `scalar`), read into a new JsonbEventNodes */
JsonbEventNodes *
ReadEventPg(JsonbContainer *c, const JsonbValue *scalar, size_t outer_depth)
{
	JsonbEventNodes *ev = (JsonbEventNodes *) palloc0(sizeof(JsonbEventNodes));
	ev->capacity = 32;
	ev->nodes = (JsonbNode *) MemoryContextAllocHuge(CurrentMemoryContext, Size(ev->capacity) * sizeof(JsonbNode));
	const int root = NewNodesPg(ev, 1);
	JsonbNode *node = &ev->nodes[root];
	node->key = NULL;
	node->key_len = 0;
	JsonbValue v;
	if (c != NULL && JsonContainerIsScalar(c)) { /* a top-level scalar: stored as a one-element "raw scalar" array */
		JsonbExtractScalar(c, &v);
		FillNodePg(node, &v, false);
		return ev;
	}
	if (c == NULL) {
		FillNodePg(node, scalar, false);
		return ev;
	}
	v.type = jbvBinary;
	v.val.binary.data = c;
	v.val.binary.len = 0;
	FillNodePg(node, &v, false);
	if (node->kind == char(cdc::Json::Kind::Object))
		ev->too_deep = !ExpandPg(ev, root, cdc::EnvelopePart::Root, false, 1, outer_depth);
	else
		ev->too_deep = TooDeepPg(c, 1, outer_depth);
	return ev;
}

/* ---- C++ regime ---- */

[[noreturn]] void
TooDeep()
{
	throw cdc::InputError("54001", "JSON nesting is deeper than " + std::to_string(cdc::Json::kMaxDepth) + " levels",
	                      {}, "Change events nest a few levels deep; flatten the value or send it as a string.");
}

void
RefuseTooDeep(const std::vector<JsonbEventNodes *> &events)
{
	for (const JsonbEventNodes *ev : events)
		if (ev && ev->too_deep)
			TooDeep();
}

/*
 * One token of a jsonb document as JsonbTokensPg collects it: the
 * iterator's token, and for a scalar (key, value, element) its type and
 * text: strings and keys point into the jsonb itself (not copied), numbers
 * to numeric_out's text.  For WJB_BEGIN_OBJECT / WJB_BEGIN_ARRAY, `len` is
 * the container's number of pairs or elements.  Plain C: it lives in a
 * PostgreSQL memory context.
 */
struct JsonbToken {
	JsonbIteratorToken tok;
	enum jbvType type;
	bool boolean;
	bool raw_scalar; /* WJB_BEGIN_ARRAY: the wrapper of a top-level scalar */
	int len;
	const char *text;
};

/*
 * Every token of jsonb container `c` in document order (the jsonb
 * iterator's walk), in one array allocated in CurrentMemoryContext; its
 * length in *count.  PostgreSQL regime: called once per container through
 * PgCall, instead of a guarded call per token.
 */
JsonbToken *
JsonbTokensPg(JsonbContainer *c, int *count)
{
	Size cap = 64;
	int n = 0;
	/* huge: a token per scalar of an event of up to cdc.max_event_size (1 GB at most) */
	JsonbToken *tokens = (JsonbToken *) MemoryContextAllocHuge(CurrentMemoryContext, cap * sizeof(JsonbToken));
	JsonbIterator *it = JsonbIteratorInit(c);
	JsonbValue v;
	JsonbIteratorToken tok;
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE) {
		if (Size(n) == cap) {
			cap *= 2;
			tokens = (JsonbToken *) repalloc_huge(tokens, cap * sizeof(JsonbToken));
		}
		JsonbToken *t = &tokens[n++];
		t->tok = tok;
		t->type = v.type;
		t->boolean = false;
		t->raw_scalar = false;
		t->len = 0;
		t->text = NULL;
		switch (tok) {
		case WJB_BEGIN_OBJECT: t->len = v.val.object.nPairs; break;
		case WJB_BEGIN_ARRAY:
			t->len = v.val.array.nElems;
			t->raw_scalar = v.val.array.rawScalar;
			break;
		case WJB_KEY:
		case WJB_VALUE:
		case WJB_ELEM:
			if (v.type == jbvString) {
				t->text = v.val.string.val;
				t->len = v.val.string.len;
			} else if (v.type == jbvNumeric) {
				t->text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
				t->len = int(strlen(t->text));
			} else if (v.type == jbvBool) {
				t->boolean = v.val.boolean;
			}
			break;
		default: break;
		}
	}
	*count = n;
	return tokens;
}

} // namespace

JsonbEventNodes *
ReadJsonbScalarPg(const JsonbValue *scalar)
{
	return ReadEventPg(NULL, scalar, 1);
}

cdc::JsonView::Node
JsonbEventView::Member(Node object, std::string_view key) const
{
	const JsonbNode &o = N(object);
	if (o.kind != char(cdc::Json::Kind::Object) || o.first < 0)
		return nullptr;
	for (int i = 0; i < o.size; i++) {
		const JsonbNode &m = ev_->nodes[o.first + i];
		if (size_t(m.key_len) == key.size() && std::memcmp(m.key, key.data(), key.size()) == 0)
			return &m; /* jsonb keeps one member per key */
	}
	return nullptr;
}

const cdc::Json &
JsonbEventView::Tree(Node n, cdc::Json &storage) const
{
	const JsonbNode &node = N(n);
	/* a scalar in place (storage's string reused: DecodeViewImage hands one storage to every member) */
	if (node.container == NULL)
		storage.SetScalar(cdc::Json::Kind(node.kind), ScalarOf(n), node.boolean);
	else
		storage = JsonbContainerToJson(node.container); /* its nesting was checked when it was read */
	return storage;
}

std::vector<JsonbEventNodes *>
ReadJsonbEvents(const std::vector<JsonbContainer *> &values, size_t outer_depth, MemoryContext cxt)
{
	std::vector<JsonbEventNodes *> out(values.size(), nullptr);
	JsonbEventNodes **events = out.data();
	const JsonbContainer *const *in = values.data();
	const size_t n = values.size();
	PgCall([&]() {
		MemoryContext old = MemoryContextSwitchTo(cxt);
		for (size_t i = 0; i < n; i++)
			if (in[i] != NULL)
				events[i] = ReadEventPg(const_cast<JsonbContainer *>(in[i]), NULL, outer_depth);
		MemoryContextSwitchTo(old);
	});
	RefuseTooDeep(out);
	return out;
}

std::vector<JsonbEventNodes *>
ReadJsonbArrayEvents(JsonbContainer *root, MemoryContext cxt)
{
	std::vector<JsonbEventNodes *> out(JsonContainerSize(root), nullptr);
	JsonbEventNodes **events = out.data();
	const size_t n = out.size();
	PgCall([&]() {
		MemoryContext old = MemoryContextSwitchTo(cxt);
		JsonbIterator *it = JsonbIteratorInit(root);
		JsonbValue v;
		JsonbIteratorToken tok;
		size_t i = 0;
		/* skipNested: each element comes as one binary container */
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
			if (tok != WJB_ELEM || i >= n)
				continue;
			/* nested in the batch array: the nesting limit counts it, as the text form's parser */
			events[i++] = v.type == jbvBinary ? ReadEventPg(v.val.binary.data, NULL, 1) : ReadEventPg(NULL, &v, 1);
		}
		MemoryContextSwitchTo(old);
	});
	RefuseTooDeep(out);
	return out;
}

cdc::Json
JsonbContainerToJson(JsonbContainer *c, size_t outer_depth)
{
	MemoryContext scratch = PgCall([&]() {
		return AllocSetContextCreate(CurrentMemoryContext, "cdc_apply jsonb intake", ALLOCSET_DEFAULT_SIZES);
	});
	int n = 0;
	const JsonbToken *tokens = PgCall([&]() {
		MemoryContext old = MemoryContextSwitchTo(scratch);
		JsonbToken *t = JsonbTokensPg(c, &n);
		MemoryContextSwitchTo(old);
		return t;
	});
	cdc::JsonBuilder b(outer_depth);
	bool raw_scalar = false; /* a top-level scalar is stored as a one-element "raw scalar" array */
	for (int i = 0; i < n; i++) {
		const JsonbToken &t = tokens[i];
		switch (t.tok) {
		case WJB_BEGIN_OBJECT: b.BeginObject(size_t(t.len)); break;
		case WJB_BEGIN_ARRAY:
			if (t.raw_scalar && b.Depth() == 0)
				raw_scalar = true;
			else
				b.BeginArray(size_t(t.len));
			break;
		case WJB_END_ARRAY:
			if (raw_scalar && b.Depth() == 0)
				break;
			[[fallthrough]];
		case WJB_END_OBJECT: b.End(); break;
		case WJB_KEY: b.Key(std::string(t.text, size_t(t.len))); break;
		case WJB_VALUE:
		case WJB_ELEM:
			switch (t.type) {
			case jbvNull: b.Null(); break;
			case jbvBool: b.Bool(t.boolean); break;
			case jbvString: b.String(std::string(t.text, size_t(t.len))); break;
			case jbvNumeric: b.Number(std::string(t.text, size_t(t.len))); break;
			default: throw std::runtime_error("unexpected jsonb value type " + std::to_string(int(t.type)));
			}
			break;
		case WJB_DONE: break;
		}
	}
	PgCall([&]() { MemoryContextDelete(scratch); });
	return b.Take();
}

} // namespace cdc::pg

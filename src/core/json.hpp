// A small immutable JSON tree that keeps number lexemes exactly.
//
// Parsing is done by nlohmann::json's SAX parser (a well-kept library: UTF-8,
// escapes, nesting); this file only builds a tree from its callbacks.  We keep
// our own tree instead of nlohmann::json because Debezium sends 19-digit
// integers (ts_ns) and decimals that must reach PostgreSQL's numeric input
// unchanged, and a double would round them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cdc {

// Thrown by Json::Parse for text that is not JSON.  Maps to SQLSTATE 22P02.
class JsonSyntaxError : public std::runtime_error {
  public:
	using std::runtime_error::runtime_error;
};

// The text PostgreSQL's numeric prints for a JSON number lexeme (numeric_in
// then numeric_out), which is how a jsonb value holds and prints it: the
// exponent applied, the display scale max(0, fraction digits - exponent)
// (1e2 -> 100, 1.25e-1 -> 0.125, 12.30e-1 -> 1.230, 5E+0 -> 5), no sign on
// zero (-0.0 -> 0.0); a number without exponent is returned as written.
// `lexeme` must be a JSON number (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?).
// Throws InputError 22003 (numeric_value_out_of_range) where numeric_in,
// and so jsonb_in, refuses it: more than 131,072 digits before the decimal
// point, a display scale above 16,383, an exponent of 1,073,741,823 or more
// in size.  Rule source: PostgreSQL's numeric.c (set_var_from_str,
// make_result, get_str_from_var), checked against jsonb in sql/envelope.sql.
std::string CanonicalNumber(std::string lexeme);

class Json {
  public:
	enum class Kind { Null, Bool, Number, String, Array, Object };
	using Member = std::pair<std::string, Json>;

	Json() = default;
	static Json MakeNull() { return Json(); }
	static Json MakeBool(bool b);
	// lexeme: the number exactly as written in the source text (e.g. "12.50", "-3e2").
	static Json MakeNumber(std::string lexeme);
	static Json MakeString(std::string s);
	static Json MakeArray(std::vector<Json> items);
	static Json MakeObject(std::vector<Member> members);

	// Deepest nesting of arrays and objects a document may have.  Change
	// events are a few levels deep; the limit keeps the tree (whose
	// destructor and serializer recurse) far from the stack limit.
	static constexpr std::size_t kMaxDepth = 1000;

	// Parses one JSON document.  Throws JsonSyntaxError with the byte offset,
	// or InputError 54001 when nesting exceeds kMaxDepth.  Every number is
	// kept as written, whatever its size (1e400 too: the parser's double
	// conversion is not used), as jsonb keeps it as numeric.  An object
	// with a repeated key keeps the last value of that key, at the place
	// of its last occurrence, as jsonb does (docs/sql-reference.md).
	// A number beyond numeric's range is InputError 22003 naming its field
	// (CanonicalNumber).  outer_depth: containers around the text (1 for an
	// element of a batch array parsed on its own), counted in kMaxDepth.
	static Json Parse(std::string_view text, std::size_t outer_depth = 0);

	Kind kind() const { return kind_; }
	bool IsNull() const { return kind_ == Kind::Null; }
	bool IsBool() const { return kind_ == Kind::Bool; }
	bool IsNumber() const { return kind_ == Kind::Number; }
	bool IsString() const { return kind_ == Kind::String; }
	bool IsArray() const { return kind_ == Kind::Array; }
	bool IsObject() const { return kind_ == Kind::Object; }

	bool AsBool() const { return bool_; }
	// The number lexeme or the (unescaped) string value.
	const std::string &Scalar() const { return scalar_; }
	const std::vector<Json> &Items() const { return items_; }
	const std::vector<Member> &Members() const { return members_; }

	// Object member lookup (first match); nullptr when absent or not an object.
	const Json *Find(std::string_view name) const;
	// Moves the value of member `name` (first match) out of the object,
	// leaving JSON null in its place; JSON null when absent or not an
	// object.  Lets a consumer keep a large image without copying it.
	Json TakeMember(std::string_view name);
	// Moves the string of member `i` of an object (by position, as
	// Members() lists them) out, leaving an empty string; PutMemberString
	// puts one back.  Empty for anything that is not an object with a
	// String member `i`.  Lets a consumer that keeps a large string
	// elsewhere (a decoded image value, pg/apply/image.cpp) not hold it
	// twice, and restore the tree when it must be serialised.
	std::string TakeMemberString(std::size_t i);
	void PutMemberString(std::size_t i, std::string s);
	// Rewrites every string value and every object key in place with
	// `f` (std::string(const std::string &)), in document order: the text
	// form's strings, parsed as UTF-8, converted to the database's encoding
	// (pg/sql_api.cpp).  If `f` throws, the tree is left partly rewritten.
	// Recursion depth is the tree's, at most kMaxDepth.
	template <typename F>
	void RewriteStrings(F &&f)
	{
		switch (kind_) {
		case Kind::String: scalar_ = f(scalar_); break;
		case Kind::Array:
			for (Json &item : items_)
				item.RewriteStrings(f);
			break;
		case Kind::Object:
			for (Member &m : members_) {
				m.first = f(m.first);
				m.second.RewriteStrings(f);
			}
			break;
		default: break;
		}
	}
	// Makes this value the scalar of `kind` (Null, Bool: `b`; Number,
	// String: `text`), reusing its string's storage: for a reader that hands
	// scalars over one at a time (the jsonb intake's JsonView::Tree).
	void SetScalar(Kind kind, std::string_view text = {}, bool b = false)
	{
		kind_ = kind;
		bool_ = b;
		scalar_.assign(text.data(), text.size());
		items_.clear();
		members_.clear();
	}
	// Moves the items out of an array (empty for anything else).
	std::vector<Json> TakeItems() { return kind_ == Kind::Array ? std::exchange(items_, {}) : std::vector<Json>(); }
	// Like Find, but a JSON null member counts as absent.
	const Json *FindNonNull(std::string_view name) const;

	// Integer value of a Number, or of a String holding a plain integer
	// (Debezium docs sometimes quote int64 fields).  nullopt otherwise.
	std::optional<int64_t> AsInt64() const;
	// Like AsInt64, but a Number counts by its value, however written:
	// 100, 1e2, 1.0E+2 and 100.0 all give 100 (jsonb stores 1e2 as the
	// numeric 100, so the text and jsonb forms accept the same numbers);
	// 1.5, 1e-1 and values beyond int64 give nullopt.  A String must still
	// be a plain integer.  *out_of_range (when given) is set when the value
	// is an integer beyond int64.
	std::optional<int64_t> AsIntegral(bool *out_of_range = nullptr) const;

	// Compact JSON text; object member order is kept as received.
	std::string Serialize() const;
	// Name of the kind for error messages ("string", "object", ...).
	const char *KindName() const;

  private:
	friend class JsonBuilder;
	Kind kind_ = Kind::Null;
	bool bool_ = false;
	std::string scalar_;
	std::vector<Json> items_;
	std::vector<Member> members_;
};

// Builds a Json tree from a stream of tokens, in document order: a
// parser's callbacks (Json::Parse) or a jsonb iterator's tokens
// (pg/sql_api.cpp).  Each value is made in its final place: a member's key
// is written once, where the member lives, and a container whose size is
// known up front (jsonb stores it) gets its storage reserved, so nothing
// is moved or copied as the tree grows.
//
// Use: Begin{Object,Array} ... End() around containers; Key() before each
// member's value; one value call (Null, Bool, Number, String, or a nested
// container) per member or item; Take() once the document is complete.
// The calls must form one well-nested document (the callers' parsers
// guarantee it); a misuse is a std::logic_error.  Begin{Object,Array}
// throw InputError 54001 beyond Json::kMaxDepth levels, as Json::Parse.
class JsonBuilder {
  public:
	// outer_depth: containers already open around the document being built
	// (1 for an element of a batch array converted on its own), counted in
	// the nesting limit as if they were part of it.
	// last_key_wins: an object with a repeated key keeps only the last
	// value of that key (at the place of its last occurrence), as jsonb
	// does; the text parser sets it (jsonb's own tokens never repeat a key).
	explicit JsonBuilder(std::size_t outer_depth = 0, bool last_key_wins = false)
	    : outer_depth_(outer_depth), last_key_wins_(last_key_wins) {}
	// size_hint: the container's number of members or items when known
	// (reserved), 0 when not.
	void BeginObject(std::size_t size_hint = 0);
	void BeginArray(std::size_t size_hint = 0);
	void End();
	void Key(std::string key);
	void Null() { Slot(); }
	void Bool(bool b);
	// lexeme: the number exactly as written (see Json::MakeNumber).
	void Number(std::string lexeme);
	void String(std::string s);
	// Containers open (0 outside the document).
	std::size_t Depth() const { return open_.size(); }
	// The path of the next value, as the envelope's messages name fields:
	// members joined by '.', array items as [i] ("after.x", "[1].after.a[1]");
	// "" at the top level.
	std::string CurrentPath() const;
	// The finished document (JSON null when nothing was built).
	Json Take();

  private:
	Json &Slot(); // where the next value goes
	void Begin(Json::Kind kind, std::size_t size_hint);
	void DropRepeatedKeys(Json &object);
	std::size_t outer_depth_;
	bool last_key_wins_;
	std::vector<std::uint32_t> key_slots_; // DropRepeatedKeys' hash table, kept between objects
	Json root_;
	bool rooted_ = false;   // the top-level value has been started
	bool key_ready_ = false; // Key() was called for the innermost open object
	std::vector<Json *> open_; // containers being built, outermost first (stable: see Slot)
};

// Appends s to out as a JSON string literal (with quotes and escapes).
void AppendJsonString(std::string &out, std::string_view s);

// A field path or name for a message: as a JSON string literal, so a name
// holding a double quote or a control character reads unambiguously
// (field "after.na\"me").
std::string QuotedField(std::string_view path);

// A value for a message: `s` when it has at most max_bytes bytes, else its
// first max_bytes bytes (not cutting a character) and an ellipsis, so that
// a 400-digit number does not fill the message.  The ellipsis is "...":
// ASCII, which every client encoding holds (a "…" in a UTF-8 database
// turned the error into 22P05 on its way to a LATIN1 client; found by a
// review, text_form_encoding.sql).  Texts are cut at a UTF-8 sequence unless
// SetMessageClip installed another rule: the PostgreSQL glue does, because
// the values of events are in the database's encoding, which may be another
// (EUC_JP, LATIN1: cut at that encoding's characters).
constexpr std::size_t kMessageValueBytes = 40;
std::string ClippedForMessage(std::string_view s, std::size_t max_bytes = kMessageValueBytes);

// The bytes of a delivery key a CONTEXT line shows: a derived key holds the
// entity key, which may be kilobytes long.
constexpr std::size_t kContextKeyBytes = 200;
// A caller-given text for a CONTEXT line (a delivery key): cut as
// ClippedForMessage cuts it at max_bytes, and its control characters (bytes
// below 0x20, and 0x7f) written as JSON escapes (\n, \u001b), so that the
// text stays on its line: a key holding a newline printed a second line of
// its own choosing ("ERROR:  ..."; regress new_user_s31).  Other bytes, the
// double quote and the backslash among them, are kept as they are.
std::string ForContextLine(std::string_view s, std::size_t max_bytes = kContextKeyBytes);
// `s` with those control characters written as JSON escapes, uncut: an
// input function's message quoting an event's value (pg/apply/image.cpp).
std::string EscapedControls(std::string_view s);
// Whether `s` holds a byte ForContextLine escapes.
bool HasControlChars(std::string_view s) noexcept;

// The rule ClippedForMessage cuts by: the byte length of the longest prefix
// of `s` of at most max_bytes bytes that ends between two characters.
// NULL: UTF-8.  A plain pointer (no destructor), set once per process.
struct MessageClip {
	std::size_t (*prefix_bytes)(std::string_view s, std::size_t max_bytes) = nullptr;
};
void SetMessageClip(const MessageClip &clip);

// The escape sequence AppendJsonString writes for byte `c`, into `buf`;
// empty when `c` is written as itself.
inline std::string_view
JsonEscapeChar(unsigned char c, char (&buf)[8])
{
	switch (c) {
	case '"': return "\\\"";
	case '\\': return "\\\\";
	case '\n': return "\\n";
	case '\r': return "\\r";
	case '\t': return "\\t";
	case '\b': return "\\b";
	case '\f': return "\\f";
	default:
		if (c >= 0x20)
			return {};
		static const char hex[] = "0123456789abcdef";
		buf[0] = '\\', buf[1] = 'u', buf[2] = '0', buf[3] = '0', buf[4] = hex[c >> 4], buf[5] = hex[c & 0xf];
		return std::string_view(buf, 6);
	}
}

// The literal AppendJsonString appends, handed to `sink` (called with
// std::string_view pieces, in order) instead of built: runs of plain bytes
// are views into `s`, so a large value is never copied (the content hash
// streams a column's text into md5 this way, pg/apply/image.cpp).
template <class Sink>
void
StreamJsonString(std::string_view s, Sink &&sink)
{
	sink(std::string_view("\"", 1));
	std::size_t run = 0;
	char buf[8];
	for (std::size_t i = 0; i < s.size(); i++) {
		std::string_view esc = JsonEscapeChar(static_cast<unsigned char>(s[i]), buf);
		if (esc.empty())
			continue;
		if (i > run)
			sink(s.substr(run, i - run));
		sink(esc);
		run = i + 1;
	}
	if (s.size() > run)
		sink(s.substr(run));
	sink(std::string_view("\"", 1));
}

// An element of the top-level array of a JSON text: its 0-based position
// and its length in bytes (from its first to its last character).
struct JsonElementSpan {
	std::size_t index = 0;
	std::size_t bytes = 0;
};

// The first element of the top-level JSON array in `text` that is longer
// than `max_bytes` (or the whole text, as element 0, when it is not an
// array and is longer); nullopt when there is none.  One pass over the
// bytes, no allocation, no validation (Json::Parse validates afterwards):
// it lets the event-size limit (cdc.max_event_size, docs/security.md) refuse
// an oversize event of a batch before its tree is built.
std::optional<JsonElementSpan> OversizeTopLevelElement(std::string_view text, std::size_t max_bytes);

// The byte range [begin, end) of an element of a top-level JSON array.
struct JsonElementRange {
	std::size_t begin = 0;
	std::size_t end = 0;
};

// The elements of the top-level JSON array in `text`, in order, as far as
// the array's own syntax goes: up to a value that follows another without
// a comma (that element ends with its value; the rest belongs to no
// element) or up to an empty element (a comma after "[" or after a comma,
// or before "]": none from there on), and an element cut short by the end
// of the text as far as it goes.  Empty when the text is no array.  No validation, like
// OversizeTopLevelElement.  For the error path of the batch's text form:
// which event an error of Json::Parse is in (pg/sql_api.cpp).
std::vector<JsonElementRange> TopLevelElementRanges(std::string_view text);

} // namespace cdc

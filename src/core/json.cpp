#include "core/cpp_only.hpp" // first: this file is pure C++
#include "core/json.hpp"
#include "core/errors.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_set>

namespace cdc {

Json Json::MakeBool(bool b) { Json j; j.kind_ = Kind::Bool; j.bool_ = b; return j; }
Json Json::MakeNumber(std::string lexeme) { Json j; j.kind_ = Kind::Number; j.scalar_ = std::move(lexeme); return j; }
Json Json::MakeString(std::string s) { Json j; j.kind_ = Kind::String; j.scalar_ = std::move(s); return j; }
Json Json::MakeArray(std::vector<Json> items) { Json j; j.kind_ = Kind::Array; j.items_ = std::move(items); return j; }
Json Json::MakeObject(std::vector<Member> members) { Json j; j.kind_ = Kind::Object; j.members_ = std::move(members); return j; }

Json &
JsonBuilder::Slot()
{
	if (open_.empty()) {
		if (rooted_)
			throw std::logic_error("JsonBuilder: a second top-level value");
		rooted_ = true;
		return root_;
	}
	Json &c = *open_.back();
	if (c.kind_ == Json::Kind::Array)
		return c.items_.emplace_back();
	if (!key_ready_)
		throw std::logic_error("JsonBuilder: an object member without a key");
	key_ready_ = false;
	return c.members_.back().second;
}

void
JsonBuilder::Begin(Json::Kind kind, std::size_t size_hint)
{
	if (outer_depth_ + open_.size() >= Json::kMaxDepth)
		throw InputError("54001", "JSON nesting is deeper than " + std::to_string(Json::kMaxDepth) + " levels",
		                 {}, "Change events nest a few levels deep; flatten the value or send it as a string.");
	Json &j = Slot();
	j.kind_ = kind;
	if (kind == Json::Kind::Object)
		j.members_.reserve(size_hint);
	else
		j.items_.reserve(size_hint);
	/* stable: nothing is added to a container while a child of it is open */
	open_.push_back(&j);
}

void JsonBuilder::BeginObject(std::size_t size_hint) { Begin(Json::Kind::Object, size_hint); }
void JsonBuilder::BeginArray(std::size_t size_hint) { Begin(Json::Kind::Array, size_hint); }

void
JsonBuilder::End()
{
	if (open_.empty() || key_ready_)
		throw std::logic_error("JsonBuilder: End() without an open container, or after a key");
	Json &c = *open_.back();
	if (last_key_wins_ && c.kind_ == Json::Kind::Object && c.members_.size() > 1)
		DropRepeatedKeys(c);
	open_.pop_back();
}

namespace {

// A cheap hash of a key for DropRepeatedKeys' table: its length and three
// of its bytes.  Keys that differ elsewhere collide, which costs a string
// comparison, not a wrong answer.
inline std::size_t
KeyHash(const std::string &k)
{
	const std::size_t n = k.size();
	if (n == 0)
		return 0;
	const auto byte = [&](std::size_t i) { return std::size_t(static_cast<unsigned char>(k[i])); };
	return (n * 0x9E3779B1u) ^ (byte(n - 1) * 0x85EBCA77u) ^ (byte(n / 2) * 0xC2B2AE3Du) ^ (byte(0) << 7);
}

} // namespace

/*
 * Keeps the last occurrence of each key of `object` (jsonb's rule for a
 * repeated key).  The check is the common case and must stay cheap: a
 * pairwise comparison for a few members, else one pass with an open
 * addressing table of member indexes (kept between objects, so no
 * allocation once it is large enough; keys made to collide fall back to
 * sorting them).  Only an object with a repeated key
 * pays for the rebuild.
 */
void
JsonBuilder::DropRepeatedKeys(Json &object)
{
	std::vector<Json::Member> &m = object.members_;
	const std::size_t n = m.size();
	bool repeated = false;
	if (n <= 8) {
		for (std::size_t i = 1; i < n && !repeated; i++)
			for (std::size_t j = 0; j < i; j++)
				if (m[i].first == m[j].first) {
					repeated = true;
					break;
				}
	} else {
		std::size_t cap = 16;
		while (cap < 2 * n)
			cap <<= 1;
		key_slots_.assign(cap, 0);
		/* keys made to collide (the hash is cheap, not keyed) must not make this quadratic */
		std::size_t probes_left = 4 * n + 64;
		for (std::size_t i = 0; i < n && !repeated && probes_left > 0; i++) {
			for (std::size_t h = KeyHash(m[i].first) & (cap - 1);; h = (h + 1) & (cap - 1)) {
				std::uint32_t slot = key_slots_[h];
				if (slot == 0) {
					key_slots_[h] = std::uint32_t(i + 1);
					break;
				}
				if (m[slot - 1].first == m[i].first) {
					repeated = true;
					break;
				}
				if (--probes_left == 0)
					break;
			}
		}
		if (probes_left == 0) { /* too many collisions: sort the keys instead, O(n log n) */
			std::vector<std::string_view> sorted;
			sorted.reserve(n);
			for (const auto &member : m)
				sorted.emplace_back(member.first);
			std::sort(sorted.begin(), sorted.end());
			repeated = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
		}
	}
	if (!repeated)
		return;
	std::vector<bool> keep(n);
	{
		std::unordered_set<std::string_view> seen;
		for (std::size_t i = n; i-- > 0;)
			keep[i] = seen.insert(m[i].first).second;
	}
	std::size_t out = 0;
	for (std::size_t i = 0; i < n; i++)
		if (keep[i]) {
			if (out != i)
				m[out] = std::move(m[i]);
			out++;
		}
	m.erase(m.begin() + std::ptrdiff_t(out), m.end());
}

void
JsonBuilder::Key(std::string key)
{
	if (open_.empty() || open_.back()->kind_ != Json::Kind::Object || key_ready_)
		throw std::logic_error("JsonBuilder: a key outside an object, or two keys in a row");
	open_.back()->members_.emplace_back(std::move(key), Json());
	key_ready_ = true;
}

void
JsonBuilder::Bool(bool b)
{
	Json &j = Slot();
	j.kind_ = Json::Kind::Bool;
	j.bool_ = b;
}

void
JsonBuilder::Number(std::string lexeme)
{
	Json &j = Slot();
	j.kind_ = Json::Kind::Number;
	j.scalar_ = std::move(lexeme);
}

void
JsonBuilder::String(std::string s)
{
	Json &j = Slot();
	j.kind_ = Json::Kind::String;
	j.scalar_ = std::move(s);
}

std::string
JsonBuilder::CurrentPath() const
{
	std::string path;
	for (std::size_t i = 0; i < open_.size(); i++) {
		const Json &c = *open_[i];
		const bool innermost = i + 1 == open_.size();
		if (c.kind_ == Json::Kind::Object) {
			/* the key of the member being built (set before its value) */
			std::string key = c.members_.empty() || (innermost && !key_ready_) ? std::string() : c.members_.back().first;
			path += (path.empty() ? "" : ".") + key;
		} else {
			/* an open child is already in place; the innermost's next item is not */
			std::size_t index = innermost ? c.items_.size() : c.items_.size() - 1;
			path += "[" + std::to_string(index) + "]";
		}
	}
	return path;
}

Json
JsonBuilder::Take()
{
	if (!open_.empty())
		throw std::logic_error("JsonBuilder: Take() before the document is complete");
	rooted_ = false;
	return std::exchange(root_, Json());
}

namespace {

// nlohmann's message quotes the bytes it read last ("last read: '...'") as
// they are: they can end inside a multibyte character (the parser stops at
// its first byte), and a message that is not valid text of the database
// encoding reaches a client in another encoding as 22021 instead of 22P02
// (found by a fresh-user run; sql/json_error_encoding.sql).  Bytes outside
// ASCII are shown as \xHH: valid in every server encoding, and exact.
std::string
EscapedNonAscii(const std::string &s)
{
	static const char hex[] = "0123456789ABCDEF";
	std::string out;
	out.reserve(s.size());
	for (unsigned char c : s) {
		if (c < 0x80) {
			out += char(c);
		} else {
			out += "\\x";
			out += hex[c >> 4];
			out += hex[c & 0xF];
		}
	}
	return out;
}

// Feeds nlohmann's SAX events to a JsonBuilder.
class TreeBuilder : public nlohmann::json_sax<nlohmann::json> {
  public:
	explicit TreeBuilder(std::size_t outer_depth = 0) : builder(outer_depth, true) {}
	JsonBuilder builder; /* a repeated key: the last value, as jsonb */
	bool overflow = false;        /* stopped at a number beyond double's range */
	/* the second pass (Json::Parse): lexemes of numbers blanked out of the text, by ordinal */
	const std::vector<std::pair<std::size_t, std::string>> *restore = nullptr;

	bool null() override { builder.Null(); return true; }
	bool boolean(bool v) override { builder.Bool(v); return true; }
	bool number_integer(number_integer_t v) override { return Number(std::to_string(v)); }
	bool number_unsigned(number_unsigned_t v) override { return Number(std::to_string(v)); }
	bool number_float(number_float_t, const string_t &lexeme) override { return Number(lexeme); }
	bool string(string_t &v) override { builder.String(std::move(v)); return true; }
	bool binary(binary_t &) override { return false; }
	bool key(string_t &k) override { builder.Key(std::move(k)); return true; }
	bool start_object(std::size_t) override { builder.BeginObject(); return true; }
	bool start_array(std::size_t) override { builder.BeginArray(); return true; }
	bool end_object() override { builder.End(); return true; }
	bool end_array() override { builder.End(); return true; }
	bool parse_error(std::size_t pos, const std::string &, const nlohmann::detail::exception &ex) override
	{
		/*
		 * 406: a number beyond double's range (nlohmann converts every
		 * number with a fraction or exponent, and stops at an infinite one).
		 * Not an error of ours: Json::Parse parses again without the
		 * conversion.
		 */
		if (ex.id == 406) {
			overflow = true;
			return false;
		}
		std::string what = ex.what();
		// nlohmann prefixes "[json.exception.parse_error.101] parse error at line 1, column 3: ".
		auto colon = what.find(": ");
		throw JsonSyntaxError("invalid JSON at byte " + std::to_string(pos) + ": " +
		                      EscapedNonAscii(colon == std::string::npos ? what : what.substr(colon + 2)));
	}

  private:
	std::size_t ordinal_ = 0, next_restore_ = 0;
	bool Number(std::string lexeme)
	{
		if (restore && next_restore_ < restore->size() && (*restore)[next_restore_].first == ordinal_)
			lexeme = (*restore)[next_restore_++].second;
		ordinal_++;
		/* as jsonb holds it (CanonicalNumber); an integer nlohmann read as such is printed by std::to_string already */
		std::string canonical;
		try {
			canonical = CanonicalNumber(std::move(lexeme));
		} catch (const InputError &e) {
			throw WithField(e); /* the error path only: no cost to a number that fits */
		}
		builder.Number(std::move(canonical));
		return true;
	}
	// CanonicalNumber's error naming the field the number is the value of
	// ("JSON number 1e400000 in field \"after.x\" overflows numeric
	// format"); as it is for a number that is the whole document.
	InputError WithField(const InputError &e) const
	{
		std::string message = e.what();
		const std::string path = builder.CurrentPath();
		const std::size_t at = message.rfind(" overflows ");
		if (!path.empty() && at != std::string::npos)
			message.insert(at, " in field " + QuotedField(path));
		return InputError(e.sqlstate(), std::move(message), e.detail(), e.hint());
	}
};

bool
IsDigit(char c)
{
	return c >= '0' && c <= '9';
}

// True for a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool
IsJsonNumber(std::string_view s)
{
	std::size_t i = 0, n = s.size();
	if (i < n && s[i] == '-')
		i++;
	if (i < n && s[i] == '0')
		i++;
	else if (i < n && IsDigit(s[i]))
		while (i < n && IsDigit(s[i]))
			i++;
	else
		return false;
	if (i < n && s[i] == '.') {
		std::size_t start = ++i;
		while (i < n && IsDigit(s[i]))
			i++;
		if (i == start)
			return false;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		std::size_t start = i;
		while (i < n && IsDigit(s[i]))
			i++;
		if (i == start)
			return false;
	}
	return i == n;
}

// One byte `c` of a scan inside a JSON string literal: after a backslash
// the byte is escaped; an unescaped quote ends the string (in_string false).
inline void
ScanStringByte(char c, bool &in_string, bool &escaped)
{
	if (escaped)
		escaped = false;
	else if (c == '\\')
		escaped = true;
	else if (c == '"')
		in_string = false;
}

/*
 * Replaces, in `text`, every JSON number with a fraction or an exponent,
 * or of more than 18 characters (an integer nlohmann would read as a
 * double), by "0" and spaces (same length: byte offsets in messages stay right), and
 * lists their lexemes by ordinal among all the numbers of the text (the
 * order the parser reports them in).  Strings are skipped.  A token that is
 * not a JSON number is left for the parser to refuse.
 */
std::vector<std::pair<std::size_t, std::string>>
BlankFractionalNumbers(std::string &text)
{
	std::vector<std::pair<std::size_t, std::string>> blanked;
	std::size_t ordinal = 0, i = 0, n = text.size();
	bool in_string = false, escaped = false;
	while (i < n) {
		char c = text[i];
		if (in_string) {
			ScanStringByte(c, in_string, escaped);
			i++;
			continue;
		}
		if (c == '"') {
			in_string = true;
			i++;
			continue;
		}
		if (c != '-' && !IsDigit(c)) {
			i++;
			continue;
		}
		std::size_t start = i;
		bool fractional = false;
		for (; i < n; i++) {
			char d = text[i];
			if (d == '.' || d == 'e' || d == 'E')
				fractional = true;
			else if (!IsDigit(d) && d != '-' && d != '+')
				break;
		}
		std::string_view token(text.data() + start, i - start);
		/* an integer too large for 64 bits is converted to double as well (19+ digits: its text is its lexeme anyway) */
		if ((fractional || token.size() > 18) && IsJsonNumber(token)) {
			blanked.emplace_back(ordinal, std::string(token));
			text[start] = '0';
			for (std::size_t k = start + 1; k < i; k++)
				text[k] = ' ';
		}
		ordinal++;
	}
	return blanked;
}

// nlohmann's parser over `text`: one instantiation for both passes of
// Json::Parse (a second one, over std::string iterators, made the lexer of
// the first pass measurably slower).
bool
SaxParse(std::string_view text, TreeBuilder &builder)
{
	return nlohmann::json::sax_parse(text.data(), text.data() + text.size(), &builder);
}

} // namespace

std::string
CanonicalNumber(std::string written)
{
	const std::string_view lexeme = written;
	/* numeric's limits (numeric.c): NUMERIC_WEIGHT_MAX base-10000 digits, NUMERIC_DSCALE_MAX, the exponent's bound */
	constexpr long long kMaxIntegerDigits = 131072, kMaxScale = 16383, kMaxExponent = 1073741823;
	auto overflow = [&lexeme]() {
		std::string shown(lexeme.substr(0, 40));
		if (lexeme.size() > 40)
			shown += "...";
		return InputError(sqlstate::kNumericOutOfRange, "JSON number " + shown + " overflows numeric format",
		                  "jsonb, and so cdc_apply in both forms, holds a number as numeric: up to 131,072 digits "
		                  "before the decimal point and 16,383 after.");
	};
	const std::size_t n = lexeme.size();
	std::size_t i = 0;
	const bool negative = i < n && lexeme[i] == '-';
	if (negative)
		i++;
	const std::size_t int_start = i;
	while (i < n && IsDigit(lexeme[i]))
		i++;
	const std::string_view int_part = lexeme.substr(int_start, i - int_start);
	std::string_view frac_part;
	if (i < n && lexeme[i] == '.') {
		const std::size_t start = ++i;
		while (i < n && IsDigit(lexeme[i]))
			i++;
		frac_part = lexeme.substr(start, i - start);
	}
	long long exponent = 0;
	const bool has_exponent = i < n && (lexeme[i] == 'e' || lexeme[i] == 'E');
	if (has_exponent) {
		i++;
		const bool exp_negative = i < n && lexeme[i] == '-';
		if (i < n && (lexeme[i] == '+' || lexeme[i] == '-'))
			i++;
		for (; i < n && IsDigit(lexeme[i]); i++) {
			exponent = exponent * 10 + (lexeme[i] - '0');
			if (exponent >= kMaxExponent)
				throw overflow();
		}
		if (exp_negative)
			exponent = -exponent;
	}
	const long long scale = std::max(0LL, (long long) frac_part.size() - exponent);
	if (scale > kMaxScale)
		throw overflow();
	const bool zero = std::all_of(int_part.begin(), int_part.end(), [](char c) { return c == '0'; }) &&
	                  std::all_of(frac_part.begin(), frac_part.end(), [](char c) { return c == '0'; });
	if (zero)
		return scale > 0 ? "0." + std::string(std::size_t(scale), '0') : std::string("0");
	if (!has_exponent) {
		/* JSON allows no leading zeros: a plain decimal prints as written */
		if (int_part != "0" && (long long) int_part.size() > kMaxIntegerDigits)
			throw overflow();
		return written;
	}
	/* the digits, and how many of them stand before the decimal point */
	std::string digits;
	digits.reserve(int_part.size() + frac_part.size());
	digits.append(int_part).append(frac_part);
	long long point = (long long) int_part.size() + exponent;
	std::size_t lead = 0;
	while (lead < digits.size() && digits[lead] == '0')
		lead++;
	digits.erase(0, lead);
	point -= (long long) lead;
	if (point > kMaxIntegerDigits)
		throw overflow();
	std::string out = negative ? "-" : "";
	if (point <= 0) {
		out += "0.";
		out.append(std::size_t(-point), '0');
		out += digits;
	} else if (point >= (long long) digits.size()) {
		out += digits;
		out.append(std::size_t(point - (long long) digits.size()), '0');
	} else {
		out.append(digits, 0, std::size_t(point));
		out += '.';
		out.append(digits, std::size_t(point), std::string::npos);
	}
	return out;
}

Json
Json::Parse(std::string_view text, std::size_t outer_depth)
{
	/*
	 * A byte order mark is no JSON whitespace: PostgreSQL's json and jsonb
	 * input refuse it (22P02), and the text form must give the jsonb form's
	 * outcome (docs/sql-reference.md).  nlohmann would skip a leading one.
	 */
	if (text.substr(0, 3) == "\xEF\xBB\xBF")
		throw JsonSyntaxError("invalid JSON at byte 1: a byte order mark (U+FEFF) is not JSON whitespace");
	{
		TreeBuilder builder(outer_depth);
		if (SaxParse(text, builder))
			return builder.builder.Take();
		if (!builder.overflow)
			throw JsonSyntaxError("invalid JSON");
	}
	/*
	 * A number beyond double's range stopped the parser (rare: a value
	 * such as 1e400).  Parse again with every number the parser would
	 * convert to double blanked out, and put their lexemes back as the parser
	 * reports them: the tree is what the first pass would have built, each
	 * number kept as written.
	 */
	std::string blanked(text);
	const auto restore = BlankFractionalNumbers(blanked);
	TreeBuilder builder(outer_depth);
	builder.restore = &restore;
	if (!SaxParse(blanked, builder)) {
		if (builder.overflow)
			throw std::logic_error("Json::Parse: a blanked number still overflows");
		throw JsonSyntaxError("invalid JSON");
	}
	return builder.builder.Take();
}

const Json *
Json::Find(std::string_view name) const
{
	if (kind_ != Kind::Object)
		return nullptr;
	for (const auto &m : members_)
		if (m.first == name)
			return &m.second;
	return nullptr;
}

Json
Json::TakeMember(std::string_view name)
{
	if (kind_ != Kind::Object)
		return Json();
	for (auto &m : members_)
		if (m.first == name)
			return std::exchange(m.second, Json());
	return Json();
}

std::string
Json::TakeMemberString(std::size_t i)
{
	if (kind_ != Kind::Object || i >= members_.size() || !members_[i].second.IsString())
		return std::string();
	return std::exchange(members_[i].second.scalar_, std::string());
}

void
Json::PutMemberString(std::size_t i, std::string s)
{
	if (kind_ == Kind::Object && i < members_.size() && members_[i].second.IsString())
		members_[i].second.scalar_ = std::move(s);
}

const Json *
Json::FindNonNull(std::string_view name) const
{
	const Json *j = Find(name);
	return (j && !j->IsNull()) ? j : nullptr;
}

std::optional<int64_t>
Json::AsInt64() const
{
	if (kind_ != Kind::Number && kind_ != Kind::String)
		return std::nullopt;
	const std::string &s = scalar_;
	if (s.empty() || s.size() > 20)
		return std::nullopt;
	size_t i = (s[0] == '-') ? 1 : 0;
	if (i == s.size())
		return std::nullopt;
	for (size_t k = i; k < s.size(); k++)
		if (s[k] < '0' || s[k] > '9')
			return std::nullopt;
	try {
		size_t used = 0;
		long long v = std::stoll(s, &used, 10);
		if (used != s.size())
			return std::nullopt;
		return static_cast<int64_t>(v);
	} catch (const std::exception &) {
		return std::nullopt;
	}
}

namespace {

/*
 * The value of JSON number lexeme `s` when it is an integer in int64's
 * range, however written (1e2, 4.0e3, 100.0, -0); nullopt for a fraction,
 * for anything that is not a JSON number, and (with *out_of_range set) for
 * an integer beyond int64.  Exact: works on the digits, never a double.
 */
std::optional<int64_t>
IntegralLexemeValue(std::string_view s, bool *out_of_range)
{
	if (!IsJsonNumber(s))
		return std::nullopt;
	std::size_t i = 0, n = s.size();
	const bool negative = s[0] == '-';
	if (negative)
		i++;
	std::string digits;
	long long scale = 0; /* value = digits * 10^scale */
	for (; i < n && IsDigit(s[i]); i++)
		digits.push_back(s[i]);
	if (i < n && s[i] == '.')
		for (i++; i < n && IsDigit(s[i]); i++, scale--)
			digits.push_back(s[i]);
	if (i < n) { /* the exponent; its size is capped: beyond, the value is out of range or not whole anyway */
		i++;
		bool exp_negative = false;
		if (s[i] == '+' || s[i] == '-')
			exp_negative = s[i++] == '-';
		long long exp = 0;
		for (; i < n; i++)
			if (exp < 1000000000)
				exp = exp * 10 + (s[i] - '0');
		scale += exp_negative ? -exp : exp;
	}
	std::size_t first = digits.find_first_not_of('0');
	if (first == std::string::npos)
		return int64_t(0);
	std::size_t last = digits.find_last_not_of('0');
	scale += (long long) (digits.size() - 1 - last);
	digits = digits.substr(first, last + 1 - first);
	if (scale < 0)
		return std::nullopt; /* a fraction */
	if ((long long) digits.size() + scale > 19) {
		if (out_of_range)
			*out_of_range = true;
		return std::nullopt;
	}
	digits.append(std::size_t(scale), '0');
	unsigned long long v = std::stoull(digits);
	const unsigned long long limit = negative ? 9223372036854775808ULL : 9223372036854775807ULL;
	if (v > limit) {
		if (out_of_range)
			*out_of_range = true;
		return std::nullopt;
	}
	if (!negative)
		return int64_t(v);
	return v == limit ? INT64_MIN : -int64_t(v);
}

} // namespace

std::optional<int64_t>
Json::AsIntegral(bool *out_of_range) const
{
	if (auto v = AsInt64())
		return v; /* the common case: a plain integer */
	if (kind_ != Kind::Number)
		return std::nullopt;
	return IntegralLexemeValue(scalar_, out_of_range);
}

void
AppendJsonString(std::string &out, std::string_view s)
{
	StreamJsonString(s, [&out](std::string_view piece) { out.append(piece); });
}

std::string
QuotedField(std::string_view path)
{
	std::string out;
	AppendJsonString(out, path);
	return out;
}

namespace {
MessageClip message_clip; /* SetMessageClip's; UTF-8 while NULL */
} // namespace

std::string
ClippedForMessage(std::string_view s, std::size_t max_bytes)
{
	if (s.size() <= max_bytes)
		return std::string(s);
	if (message_clip.prefix_bytes != nullptr)
		return std::string(s.substr(0, message_clip.prefix_bytes(s, max_bytes))) + "...";
	std::size_t cut = max_bytes;
	/* not inside a UTF-8 sequence: back to the start of the character at `cut` */
	while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
		cut--;
	return std::string(s.substr(0, cut)) + "...";
}

bool
HasControlChars(std::string_view s) noexcept
{
	for (const char ch : s) {
		const auto c = static_cast<unsigned char>(ch);
		if (c < 0x20 || c == 0x7f)
			return true;
	}
	return false;
}

std::string
ForContextLine(std::string_view s, std::size_t max_bytes)
{
	return EscapedControls(ClippedForMessage(s, max_bytes));
}

std::string
EscapedControls(std::string_view s)
{
	if (!HasControlChars(s))
		return std::string(s);
	std::string out;
	out.reserve(s.size() + 16);
	char buf[8];
	for (const char ch : s) {
		const auto c = static_cast<unsigned char>(ch);
		if (c == 0x7f)
			out += "\\u007f";
		else if (c < 0x20)
			out += JsonEscapeChar(c, buf);
		else
			out += ch;
	}
	return out;
}

void
SetMessageClip(const MessageClip &clip)
{
	message_clip = clip;
}

namespace {
void
SerializeInto(const Json &j, std::string &out)
{
	switch (j.kind()) {
	case Json::Kind::Null: out += "null"; break;
	case Json::Kind::Bool: out += j.AsBool() ? "true" : "false"; break;
	case Json::Kind::Number: out += j.Scalar(); break;
	case Json::Kind::String: AppendJsonString(out, j.Scalar()); break;
	case Json::Kind::Array:
		out.push_back('[');
		for (size_t i = 0; i < j.Items().size(); i++) {
			if (i) out.push_back(',');
			SerializeInto(j.Items()[i], out);
		}
		out.push_back(']');
		break;
	case Json::Kind::Object:
		out.push_back('{');
		for (size_t i = 0; i < j.Members().size(); i++) {
			if (i) out.push_back(',');
			AppendJsonString(out, j.Members()[i].first);
			out.push_back(':');
			SerializeInto(j.Members()[i].second, out);
		}
		out.push_back('}');
		break;
	}
}
} // namespace

std::string
Json::Serialize() const
{
	std::string out;
	SerializeInto(*this, out);
	return out;
}

const char *
Json::KindName() const
{
	switch (kind_) {
	case Kind::Null: return "null";
	case Kind::Bool: return "boolean";
	case Kind::Number: return "number";
	case Kind::String: return "string";
	case Kind::Array: return "array";
	case Kind::Object: return "object";
	}
	return "?";
}

std::vector<JsonElementRange>
TopLevelElementRanges(std::string_view text)
{
	auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
	std::vector<JsonElementRange> out;
	std::size_t i = 0, n = text.size();
	while (i < n && space(text[i]))
		i++;
	if (i == n || text[i] != '[')
		return out;
	std::size_t depth = 0;     /* containers open inside the current element */
	std::size_t start = n;     /* first byte of the current element; n: none yet */
	std::size_t last = 0;      /* last byte of the current element */
	bool complete = false;     /* the current element's value has ended (a separator must follow) */
	bool in_string = false, escaped = false;
	for (i++; i < n; i++) {
		const char c = text[i];
		if (in_string) {
			ScanStringByte(c, in_string, escaped);
			last = i;
			if (!in_string && depth == 0)
				complete = true;
			continue;
		}
		if (space(c)) {
			if (start != n && depth == 0)
				complete = true; /* the end of a scalar, or space after a value */
			continue;
		}
		if (depth == 0 && (c == ',' || c == ']')) {
			if (start == n) {
				if (c == ']' && out.empty())
					return out; /* [ ] */
				break; /* an empty element ("[,", ", ,", ",]"): the array's own syntax is broken here */
			}
			out.push_back({start, last + 1});
			start = n;
			complete = false;
			if (c == ']')
				return out;
			continue;
		}
		if (depth == 0 && (complete || (start != n && (c == '"' || c == '[' || c == '{'))))
			break; /* a value follows a value: the array's own syntax is broken here */
		if (start == n)
			start = i;
		last = i;
		if (c == '"') {
			in_string = true;
		} else if (c == '[' || c == '{') {
			depth++;
		} else if ((c == ']' || c == '}') && depth > 0) {
			if (--depth == 0)
				complete = true;
		}
	}
	/* cut short: an element still open, or one ended and not followed by a comma or ']' */
	if (start != n)
		out.push_back({start, last + 1});
	return out;
}

std::optional<JsonElementSpan>
OversizeTopLevelElement(std::string_view text, std::size_t max_bytes)
{
	auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
	std::size_t i = 0, n = text.size();
	while (i < n && space(text[i]))
		i++;
	if (i == n || text[i] != '[') {
		std::size_t end = n;
		while (end > i && space(text[end - 1]))
			end--;
		if (end - i > max_bytes)
			return JsonElementSpan{0, end - i};
		return std::nullopt;
	}
	std::size_t index = 0;
	std::size_t depth = 0;         /* containers open inside the current element */
	std::size_t start = n;         /* first byte of the current element; n: none yet */
	std::size_t last = 0;          /* last non-space byte of the current element */
	bool in_string = false, escaped = false;
	for (i++; i < n; i++) {
		char c = text[i];
		if (in_string) {
			ScanStringByte(c, in_string, escaped);
			last = i;
			continue;
		}
		if (space(c))
			continue;
		if (depth == 0 && (c == ',' || c == ']')) {
			if (start != n) {
				if (last + 1 - start > max_bytes)
					return JsonElementSpan{index, last + 1 - start};
				index++;
			}
			start = n;
			if (c == ']')
				break;
			continue;
		}
		if (start == n)
			start = i;
		last = i;
		if (c == '"')
			in_string = true;
		else if (c == '[' || c == '{')
			depth++;
		else if ((c == ']' || c == '}') && depth > 0)
			depth--;
	}
	/* an element still open at the end of the text (not JSON: the parser says so) */
	if (start != n && last + 1 - start > max_bytes)
		return JsonElementSpan{index, last + 1 - start};
	return std::nullopt;
}

} // namespace cdc

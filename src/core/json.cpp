#include "core/cpp_only.hpp" // first: this file is pure C++
#include "core/json.hpp"
#include "core/errors.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

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
	open_.pop_back();
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

// Feeds nlohmann's SAX events to a JsonBuilder.
class TreeBuilder : public nlohmann::json_sax<nlohmann::json> {
  public:
	JsonBuilder builder;

	bool null() override { builder.Null(); return true; }
	bool boolean(bool v) override { builder.Bool(v); return true; }
	bool number_integer(number_integer_t v) override { builder.Number(std::to_string(v)); return true; }
	bool number_unsigned(number_unsigned_t v) override { builder.Number(std::to_string(v)); return true; }
	bool number_float(number_float_t, const string_t &lexeme) override { builder.Number(lexeme); return true; }
	bool string(string_t &v) override { builder.String(std::move(v)); return true; }
	bool binary(binary_t &) override { return false; }
	bool key(string_t &k) override { builder.Key(std::move(k)); return true; }
	bool start_object(std::size_t) override { builder.BeginObject(); return true; }
	bool start_array(std::size_t) override { builder.BeginArray(); return true; }
	bool end_object() override { builder.End(); return true; }
	bool end_array() override { builder.End(); return true; }
	bool parse_error(std::size_t pos, const std::string &last_token, const nlohmann::detail::exception &ex) override
	{
		/*
		 * 406: a number beyond double's range (nlohmann converts every
		 * number with a fraction or exponent, and stops at an infinite one).
		 * Named by its field with 22003, as the jsonb form names a value out
		 * of its column's range, instead of nlohmann's "number overflow".
		 */
		if (ex.id == 406)
			throw InputError("22003",
			                 "field \"" + builder.CurrentPath() + "\": number " + last_token +
			                     " is out of range: the text form reads numbers with an exponent or a fraction as double precision",
			                 {},
			                 "Pass the event as jsonb (its numbers are numeric), or send the value as a JSON string.");
		std::string what = ex.what();
		// nlohmann prefixes "[json.exception.parse_error.101] parse error at line 1, column 3: ".
		auto colon = what.find(": ");
		throw JsonSyntaxError("invalid JSON at byte " + std::to_string(pos) + ": " +
		                      (colon == std::string::npos ? what : what.substr(colon + 2)));
	}
};

} // namespace

Json
Json::Parse(std::string_view text)
{
	TreeBuilder builder;
	bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &builder);
	if (!ok)
		throw JsonSyntaxError("invalid JSON");
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

void
AppendJsonString(std::string &out, std::string_view s)
{
	StreamJsonString(s, [&out](std::string_view piece) { out.append(piece); });
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
			if (escaped)
				escaped = false;
			else if (c == '\\')
				escaped = true;
			else if (c == '"')
				in_string = false;
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

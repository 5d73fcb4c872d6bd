// GoogleTest units for the pure core: JSON tree, envelope parsing, versions,
// delivery keys and the apply decision.  Fixtures are the Debezium
// documentation events shipped in test/fixtures/debezium/.
#include "core/decision.hpp"
#include "core/envelope.hpp"
#include "core/errors.hpp"
#include "core/json.hpp"
#include "core/version.hpp"

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

using namespace cdc;

namespace {

std::string
ReadFixture(const std::string &name)
{
	std::ifstream in(std::string(CDC_SOURCE_DIR) + "/test/fixtures/debezium/" + name);
	EXPECT_TRUE(in.good()) << name;
	std::stringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

ChangeEvent
ParseFixture(const std::string &name)
{
	return ParseDebeziumEnvelope(Json::Parse(ReadFixture(name)));
}

template <typename F>
std::string
SqlStateOf(F &&f)
{
	try {
		f();
	} catch (const InputError &e) {
		return e.sqlstate();
	}
	return "none";
}

// "SQLSTATE message" of the error ParseDebeziumEnvelope raises for `json`,
// or "no error".
std::string
EnvelopeError(const std::string &json)
{
	try {
		ParseDebeziumEnvelope(Json::Parse(json));
	} catch (const InputError &e) {
		return std::string(e.sqlstate()) + " " + e.what();
	}
	return "no error";
}

} // namespace

// ---------------------------------------------------------------- JSON

TEST(Json, KeepsNumberValuesExactly)
{
	Json j = Json::Parse(R"({"ts_ns": 1465584025523514964, "amount": 12345678901234567.890, "neg": -0.5e-3})");
	EXPECT_EQ(j.Find("ts_ns")->Scalar(), "1465584025523514964");
	EXPECT_EQ(j.Find("amount")->Scalar(), "12345678901234567.890");
	EXPECT_EQ(j.Find("neg")->Scalar(), "-0.0005") << "as jsonb prints it";
	EXPECT_EQ(*j.Find("ts_ns")->AsInt64(), 1465584025523514964LL);
}

// A column value with an exponent reached the column's input function as
// written in the text form and as numeric prints it in the jsonb form:
// "id": 1e2 filled an integer column from jsonb and was refused from text,
// and a text key column stored 1e2 or 100, two entities for one key
// (README "Status", found by a fresh-user run).  Every expected text below
// is what PostgreSQL 15 prints for '<lexeme>'::jsonb.
TEST(Json, NumbersAreSpelledAsJsonbPrintsThem)
{
	const std::pair<const char *, const char *> cases[] = {
		{"1e2", "100"},         {"1E+2", "100"},      {"1.0E+2", "100"},     {"100.0", "100.0"},
		{"-0.0", "0.0"},        {"-0", "0"},          {"0e5", "0"},          {"1.25e-1", "0.125"},
		{"12.30e-1", "1.230"},  {"-1.5E+3", "-1500"}, {"5e-1", "0.5"},       {"0.000e2", "0.0"},
		{"-0e-2", "0.00"},      {"1e-2", "0.01"},     {"123.456e1", "1234.56"}, {"0.0012e2", "0.12"},
		{"0.5", "0.5"},         {"-7", "-7"},         {"1.5e15", "1500000000000000"},
		{"0e200000", "0"},      {"12", "12"},
	};
	for (const auto &[lexeme, printed] : cases) {
		EXPECT_EQ(CanonicalNumber(lexeme), printed) << lexeme;
		EXPECT_EQ(Json::Parse(lexeme).Scalar(), printed) << lexeme;
	}
	EXPECT_EQ(CanonicalNumber("1e-16383"), "0." + std::string(16382, '0') + "1");
	EXPECT_EQ(CanonicalNumber("0.1e131072").size(), 131072u);
	EXPECT_EQ(CanonicalNumber("1e131071").size(), 131072u);
	// where numeric_in (and so jsonb_in) says "value overflows numeric format"
	for (const char *lexeme : {"1e131072", "0e-16384", "1e-16384", "0.0e1073741823", "1e1073741822", "1e99999999999999999999"})
		EXPECT_EQ(SqlStateOf([&] { CanonicalNumber(lexeme); }), "22003") << lexeme;
	EXPECT_EQ(SqlStateOf([] { CanonicalNumber("0." + std::string(16384, '1')); }), "22003");
	EXPECT_EQ(SqlStateOf([] { CanonicalNumber(std::string(131073, '9')); }), "22003");
	EXPECT_EQ(CanonicalNumber(std::string(131072, '9')).size(), 131072u);
	EXPECT_EQ(SqlStateOf([] { Json::Parse(R"({"after": {"x": 1e131072}})"); }), "22003");
}

// A number beyond numeric's range names the field it is the value of
// (review h4, sql/batch_text_json_errors.sql); a whole-document number has none.
TEST(Json, NumberOverflowNamesTheField)
{
	auto message = [](std::string_view text, std::size_t outer_depth = 0) {
		try {
			Json::Parse(text, outer_depth);
		} catch (const InputError &e) {
			EXPECT_STREQ(e.sqlstate(), "22003");
			return std::string(e.what());
		}
		return std::string("no error");
	};
	EXPECT_EQ(message(R"({"after": {"x": 1e131072}})"), "JSON number 1e131072 in field \"after.x\" overflows numeric format");
	EXPECT_EQ(message(R"({"a": [1, {"b\"c": [2, 0.1e-16383]}]})"),
	          "JSON number 0.1e-16383 in field \"a[1].b\\\"c[1]\" overflows numeric format");
	EXPECT_EQ(message("1e131072"), "JSON number 1e131072 overflows numeric format");
	/* a large integer (the second pass of the parse) too */
	EXPECT_EQ(message("{\"n\": 1" + std::string(131072, '0') + "}").substr(0, 60).find("in field \"n\""),
	          std::string::npos) << "the lexeme is cut at 40 bytes, the field follows";
	EXPECT_NE(message("{\"n\": 1" + std::string(131072, '0') + "}").find("... in field \"n\" overflows"), std::string::npos);
	/* outer_depth counts containers around the text, as the batch's elements need */
	EXPECT_NO_THROW(Json::Parse(std::string(999, '[') + std::string(999, ']'), 1));
	EXPECT_EQ(SqlStateOf([] { Json::Parse(std::string(1000, '[') + std::string(1000, ']'), 1); }), "54001");
}

// The elements of a batch array as the error path of the text form finds
// them (pg/sql_api.cpp, RethrowNamingTheEvent).
TEST(Json, TopLevelElementRanges)
{
	auto pieces = [](std::string_view text) {
		std::vector<std::string> out;
		for (const JsonElementRange &r : TopLevelElementRanges(text))
			out.emplace_back(text.substr(r.begin, r.end - r.begin));
		return out;
	};
	using V = std::vector<std::string>;
	EXPECT_EQ(pieces(R"( [ null , {"a": [1, "],"]}, "x\"]", 12 ,true] )"), (V{"null", R"({"a": [1, "],"]})", R"("x\"]")", "12", "true"}));
	EXPECT_EQ(pieces("[]"), V{});
	EXPECT_EQ(pieces(R"({"a": 1})"), V{});
	EXPECT_EQ(pieces("null"), V{});
	/* a value after a value: the first ends with its value, the rest is no element */
	EXPECT_EQ(pieces(R"([null {"op": "c"}, 2])"), V{"null"});
	EXPECT_EQ(pieces(R"([{"a": 1}{"b": 2}])"), V{R"({"a": 1})"});
	EXPECT_EQ(pieces(R"([1, nul"x"])"), (V{"1", "nul"}));
	/* cut short: the open element as far as it goes */
	EXPECT_EQ(pieces(R"([null, {"op": "c", "after": {"id")"), (V{"null", R"({"op": "c", "after": {"id")"}));
	EXPECT_EQ(pieces("[null, null"), (V{"null", "null"}));
	/* malformed inside an element: still that element */
	EXPECT_EQ(pieces(R"([null, {"op": "c",, "x": 1}])"), (V{"null", R"({"op": "c",, "x": 1})"}));
	/* an empty element (a comma after '[' or after a comma, one before ']'): the array's syntax, the rest no element */
	EXPECT_EQ(pieces("[, 1]"), V{});
	EXPECT_EQ(pieces("[1, , 2]"), V{"1"});
	EXPECT_EQ(pieces("[1,]"), V{"1"});
	EXPECT_EQ(pieces("[ ]"), V{});
}

TEST(Json, SyntaxErrorsNameTheOffset)
{
	try {
		Json::Parse("{\"op\": \"c\",}");
		FAIL() << "no error";
	} catch (const JsonSyntaxError &e) {
		EXPECT_NE(std::string(e.what()).find("invalid JSON at byte"), std::string::npos) << e.what();
	}
	EXPECT_THROW(Json::Parse(""), JsonSyntaxError);
	EXPECT_THROW(Json::Parse("{\"a\": 1} trailing"), JsonSyntaxError);
}

// The bytes nlohmann quotes as read last are shown as \xHH outside ASCII:
// a multibyte character cut at the error would make the message invalid
// text (a client in another encoding got 22021 instead of 22P02).
TEST(Json, SyntaxErrorsQuoteNonAsciiBytesEscaped)
{
	for (const char *doc : {"{\"op\": \xC3\xA9}", "{\"op\": \xF0\x9F\x98\x80}", "[\xEF\xBB\xBF{}]", "{\"op\": \"c\"}\xEF\xBB\xBF"}) {
		try {
			Json::Parse(doc);
			ADD_FAILURE() << "no error for " << doc;
		} catch (const JsonSyntaxError &e) {
			const std::string what = e.what();
			for (unsigned char c : what)
				EXPECT_LT(c, 0x80) << what;
			EXPECT_NE(what.find("\\x"), std::string::npos) << what;
		}
	}
	try {
		Json::Parse("{\"op\": \xC3\xA9}");
	} catch (const JsonSyntaxError &e) {
		EXPECT_NE(std::string(e.what()).find("\\xC3"), std::string::npos) << e.what();
	}
}

// RewriteStrings reaches every string value and every key, in document
// order, and nothing else (the text form's conversion to the database's
// encoding relies on it).
TEST(Json, RewriteStringsReachesEveryStringAndKey)
{
	Json j = Json::Parse(R"({"a": "x", "b": [1, "y", {"c": "z", "d": null, "e": true}], "f": 2.50})");
	std::vector<std::string> seen;
	j.RewriteStrings([&](const std::string &s) {
		seen.push_back(s);
		return "<" + s + ">";
	});
	EXPECT_EQ(seen, (std::vector<std::string>{"a", "x", "b", "y", "c", "z", "d", "e", "f"}));
	EXPECT_EQ(j.Serialize(), R"({"<a>":"<x>","<b>":[1,"<y>",{"<c>":"<z>","<d>":null,"<e>":true}],"<f>":2.50})");
}

// A leading byte order mark is refused, as PostgreSQL's json and jsonb
// input refuse it: the text and jsonb forms give the same outcome.
TEST(Json, LeadingByteOrderMarkIsRefused)
{
	try {
		Json::Parse("\xEF\xBB\xBF{\"op\": \"c\"}");
		FAIL() << "no error";
	} catch (const JsonSyntaxError &e) {
		EXPECT_NE(std::string(e.what()).find("invalid JSON at byte 1: a byte order mark"), std::string::npos) << e.what();
	}
	EXPECT_EQ(Json::Parse(" {\"op\": \"c\"}").Find("op")->Scalar(), "c");
}

// A deeply nested document is refused before the tree gets deep enough for
// its recursive destructor or serializer to exhaust the stack (a 400,000-level
// event crashed the server before the limit existed).
TEST(Json, OversizeTopLevelElementFindsTheFirstElementOverTheLimit)
{
	// Not an array: the whole document, without surrounding white space.
	EXPECT_FALSE(OversizeTopLevelElement("  {\"op\": \"c\"}  ", 11));
	auto whole = OversizeTopLevelElement("  {\"op\": \"c\"}  ", 10);
	ASSERT_TRUE(whole);
	EXPECT_EQ(whole->index, 0u);
	EXPECT_EQ(whole->bytes, 11u);
	// Elements are measured from their first to their last character; commas,
	// brackets and braces inside strings and nested containers do not split them.
	const std::string batch = R"([ {"a": "x,]}"} , null, {"b": [1, 2, {"c": "\"],"}]} ,"s"])";
	EXPECT_FALSE(OversizeTopLevelElement(batch, 28));
	auto big = OversizeTopLevelElement(batch, 27);
	ASSERT_TRUE(big);
	EXPECT_EQ(big->index, 2u);
	EXPECT_EQ(big->bytes, 28u);
	auto first = OversizeTopLevelElement(batch, 3);
	ASSERT_TRUE(first);
	EXPECT_EQ(first->index, 0u);
	EXPECT_EQ(first->bytes, 13u);
	EXPECT_FALSE(OversizeTopLevelElement("[]", 0));
	EXPECT_FALSE(OversizeTopLevelElement(" [ ] ", 0));
	// An unterminated element (not JSON; the parser reports it) is measured to the end.
	auto open = OversizeTopLevelElement("[1, \"abcdef", 5);
	ASSERT_TRUE(open);
	EXPECT_EQ(open->index, 1u);
	EXPECT_EQ(open->bytes, 7u);
	// Large: one element of 1 MB among small ones.
	std::string large = "[1," + std::string("\"") + std::string(1 << 20, 'x') + "\",2]";
	auto l = OversizeTopLevelElement(large, 1 << 20);
	ASSERT_TRUE(l);
	EXPECT_EQ(l->index, 1u);
	EXPECT_EQ(l->bytes, (1u << 20) + 2);
}

TEST(Json, TakeMemberMovesTheValueOut)
{
	Json j = Json::Parse(R"({"a": {"x": "big"}, "b": 1})");
	Json a = j.TakeMember("a");
	EXPECT_EQ(a.Serialize(), R"({"x":"big"})");
	EXPECT_EQ(j.Serialize(), R"({"a":null,"b":1})");
	EXPECT_TRUE(j.TakeMember("missing").IsNull());
	EXPECT_TRUE(Json::MakeString("s").TakeMember("a").IsNull());
}

TEST(Json, TakeMemberStringMovesAStringOutAndBack)
{
	Json j = Json::Parse(R"({"id": 1, "v": "a large \"value\"", "n": null})");
	std::string big(1 << 20, 'x');
	EXPECT_EQ(j.TakeMemberString(0), "") << "a number stays";
	EXPECT_EQ(j.TakeMemberString(2), "") << "null stays";
	EXPECT_EQ(j.TakeMemberString(7), "") << "out of range";
	std::string v = j.TakeMemberString(1);
	EXPECT_EQ(v, "a large \"value\"");
	EXPECT_EQ(j.Serialize(), R"({"id":1,"v":"","n":null})");
	j.PutMemberString(1, v);
	EXPECT_EQ(j.Serialize(), R"({"id":1,"v":"a large \"value\"","n":null})");
	j.PutMemberString(0, "ignored");
	EXPECT_EQ(j.Members()[0].second.Scalar(), "1") << "only a string member takes one";
	/* the buffer itself moves: nothing is copied */
	Json b = Json::MakeObject({{"v", Json::MakeString(big)}});
	const char *data = b.Members()[0].second.Scalar().data();
	std::string taken = b.TakeMemberString(0);
	EXPECT_EQ(taken.data(), data);
	EXPECT_TRUE(Json::MakeString("s").TakeMemberString(0).empty());
}

TEST(Envelope, TakingTheTreeOverGivesTheSameEvent)
{
	// wrapped (schema + payload) and bare payloads: images moved out, nothing else differs
	for (const char *name : {"pg-create-with-schema.json", "pg-create.payload-only.json",
	                         "pg-delete-replica-identity-default-with-schema.json"}) {
		const std::string text = ReadFixture(name);
		const Json kept = Json::Parse(text);
		ChangeEvent copied = ParseDebeziumEnvelope(kept);
		ChangeEvent moved = ParseDebeziumEnvelope(Json::Parse(text));
		EXPECT_EQ(copied.op, moved.op) << name;
		ASSERT_EQ(copied.after.has_value(), moved.after.has_value()) << name;
		if (copied.after)
			EXPECT_EQ(copied.after->Serialize(), moved.after->Serialize()) << name;
		ASSERT_EQ(copied.before.has_value(), moved.before.has_value()) << name;
		if (copied.before)
			EXPECT_EQ(copied.before->Serialize(), moved.before->Serialize()) << name;
		EXPECT_EQ(copied.after_schema.has_value(), moved.after_schema.has_value()) << name;
		EXPECT_EQ(copied.source.name, moved.source.name) << name;
	}
	Json bare = Json::Parse(R"({"op": "u", "before": {"id": 1}, "after": {"id": 1, "v": "x"}, "source": {"lsn": 5}})");
	ChangeEvent ev = ParseDebeziumEnvelope(std::move(bare));
	EXPECT_EQ(ev.after->Serialize(), R"({"id":1,"v":"x"})");
	EXPECT_EQ(ev.before->Serialize(), R"({"id":1})");
	EXPECT_EQ(SqlStateOf([] { ParseDebeziumEnvelope(Json::Parse(R"({"op": "c", "after": 3})")); }), "22023");
	EXPECT_EQ(SqlStateOf([] { ParseDebeziumEnvelope(Json::Parse(R"({"op": "d", "after": {"id": 1}})")); }), "22023");
}

// A number beyond double's range: nlohmann's parser stops at it (its own
// "number overflow"); the text form used to refuse it (22003) even where
// nothing reads it, while jsonb keeps it as numeric (found by a fresh-user
// run).  Now every number is kept as written, in both forms.
TEST(Json, NumbersBeyondDoubleRangeAreKeptAsWritten)
{
	Json j = Json::Parse(R"({"op": "c", "after": {"id": 1, "x": 1e999, "y": 2.5, "s": "1e999 \" 3.5e400"}, "ts_ms": -5E+400,
	                         "a": [1, 1e309, 0.5, 7, 4.0e3, 1e-999]})");
	const std::string e999 = "1" + std::string(999, '0'), e309 = "1" + std::string(309, '0'),
	                  e_999 = "0." + std::string(998, '0') + "1";
	EXPECT_EQ(j.Find("after")->Find("x")->Scalar(), e999);
	EXPECT_EQ(j.Find("after")->Find("y")->Scalar(), "2.5");
	EXPECT_EQ(j.Find("after")->Find("s")->Scalar(), "1e999 \" 3.5e400") << "strings are not numbers";
	EXPECT_EQ(j.Find("ts_ms")->Scalar(), "-5" + std::string(400, '0'));
	EXPECT_EQ(j.Find("a")->Serialize(), "[1," + e309 + ",0.5,7,4000," + e_999 + "]");
	EXPECT_EQ(Json::Parse("1e999").Scalar(), e999);
	EXPECT_EQ(Json::Parse("[2.5e309]").Serialize(), "[25" + std::string(308, '0') + "]");
	// the largest doubles and the smallest (underflow to 0) parse in the first pass, values kept
	EXPECT_EQ(Json::Parse(R"({"x": 1.7976931348623157e308})").Find("x")->Scalar(),
	          "17976931348623157" + std::string(292, '0'));
	EXPECT_EQ(Json::Parse(R"({"x": 1e-999})").Find("x")->Scalar(), e_999);
	// malformed JSON after such a number is still malformed, at the same byte
	for (const char *bad : {R"({"x": 1e999, "y": })", R"([1e999, 1.e5])", R"([1e999] x)"}) {
		try {
			Json::Parse(bad);
			FAIL() << bad << " was accepted";
		} catch (const JsonSyntaxError &e) {
			EXPECT_NE(std::string(e.what()).find("at byte"), std::string::npos) << e.what();
		}
	}
	EXPECT_EQ(SqlStateOf([] { Json::Parse(std::string("[1e999,") + std::string(Json::kMaxDepth, '[') + std::string(Json::kMaxDepth, ']') + "]"); }),
	          "54001");
}

// jsonb keeps the last value of a repeated key; the text form kept the
// first for some lookups and every occurrence for others (an after-image
// {"id":90,"name":"a","id":91,"name":"b"} applied row 91|a).  Now the text
// form keeps the last value too, at the place of its last occurrence.
TEST(Json, RepeatedKeyKeepsTheLastValueAsJsonb)
{
	EXPECT_EQ(Json::Parse(R"({"id":90,"name":"a","id":91,"name":"b"})").Serialize(), R"({"id":91,"name":"b"})");
	EXPECT_EQ(Json::Parse(R"({"a":1,"b":2,"a":3})").Serialize(), R"({"b":2,"a":3})");
	EXPECT_EQ(Json::Parse(R"({"a":{"x":1,"x":[1,{"y":1,"y":2}]},"a":{"x":2,"z":1,"x":3}})").Serialize(), R"({"a":{"z":1,"x":3}})");
	EXPECT_EQ(Json::Parse(R"([{"k":1,"k":2},{"k":3}])").Serialize(), R"([{"k":2},{"k":3}])");
	// larger objects take the hashed check: no repeat, nothing dropped; a repeat, the last kept
	std::string many = "{", expected = "{";
	for (int i = 0; i < 40; i++) {
		many += (i ? "," : "") + std::string("\"c") + std::to_string(i) + "\":" + std::to_string(i);
		if (i != 7)
			expected += (expected.size() > 1 ? "," : "") + std::string("\"c") + std::to_string(i) + "\":" + std::to_string(i);
	}
	EXPECT_EQ(Json::Parse(many + "}").Members().size(), 40u);
	EXPECT_EQ(Json::Parse(many + ",\"c7\":\"last\"}").Serialize(), expected + ",\"c7\":\"last\"}");
	EXPECT_EQ(Json::Parse(many + ",\"c7\":1,\"c7\":2,\"c39\":0}").Members().size(), 40u);
	// keys made to collide in the cheap hash (same length and bytes 0, n/2, n-1): the sorted check
	std::string colliding = "{";
	for (int i = 0; i < 20000; i++) {
		char key[16];
		std::snprintf(key, sizeof key, "k%03dx%02dz", i / 100, i % 100); /* 9 bytes: k, x (byte 4), z fixed */
		colliding += (i ? ",\"" : "\"") + std::string(key) + "\":" + std::to_string(i);
	}
	EXPECT_EQ(Json::Parse(colliding + "}").Members().size(), 20000u);
	Json last = Json::Parse(colliding + ",\"k000x00z\":\"last\"}");
	EXPECT_EQ(last.Members().size(), 20000u);
	EXPECT_EQ(last.Members().back().second.Scalar(), "last");
	EXPECT_EQ(last.Members().front().first, "k000x01z");
	// a builder not told to (the jsonb intake: jsonb has no repeated keys) keeps what it is given
	JsonBuilder b;
	b.BeginObject();
	b.Key("a"), b.Number("1"), b.Key("a"), b.Number("2");
	b.End();
	EXPECT_EQ(b.Take().Serialize(), R"({"a":1,"a":2})");
	// the envelope reads the last op, lsn, payload and image values
	auto outcome = [](const char *text) {
		ChangeEvent e = ParseDebeziumEnvelope(Json::Parse(text));
		return std::string(OpName(e.op)) + " " + (e.after ? e.after->Serialize() : "-") + " " +
		       (e.source.lsn ? std::to_string(*e.source.lsn) : "-");
	};
	EXPECT_EQ(outcome(R"({"op":"d","after":{"id":90,"name":"a","id":91,"name":"b"},"op":"c","source":{"lsn":1,"lsn":2}})"),
	          R"(c {"id":91,"name":"b"} 2)");
	EXPECT_EQ(outcome(R"({"schema":{},"payload":{"op":"c","after":{"id":1}},"payload":{"op":"u","after":{"id":2}}})"),
	          R"(u {"id":2} -)");
}

TEST(Json, AsIntegralReadsIntegralNumbersHoweverWritten)
{
	auto integral = [](const std::string &lexeme) {
		bool out_of_range = false;
		auto v = Json::MakeNumber(lexeme).AsIntegral(&out_of_range);
		return v ? std::to_string(*v) : out_of_range ? std::string("range") : std::string("no");
	};
	EXPECT_EQ(integral("100"), "100");
	EXPECT_EQ(integral("1e2"), "100");
	EXPECT_EQ(integral("1E+2"), "100");
	EXPECT_EQ(integral("4.0e3"), "4000");
	EXPECT_EQ(integral("1.5e1"), "15");
	EXPECT_EQ(integral("100.0"), "100");
	EXPECT_EQ(integral("10e-1"), "1");
	EXPECT_EQ(integral("-0"), "0");
	EXPECT_EQ(integral("0e999999999999999999999"), "0");
	EXPECT_EQ(integral("-2.5e1"), "-25");
	EXPECT_EQ(integral("9.223372036854775807e18"), "9223372036854775807");
	EXPECT_EQ(integral("-9223372036854775808.000"), "-9223372036854775808");
	EXPECT_EQ(integral("1.5"), "no");
	EXPECT_EQ(integral("1e-1"), "no");
	EXPECT_EQ(integral("15e-1"), "no");
	EXPECT_EQ(integral("1e-99999999999999"), "no");
	EXPECT_EQ(integral("9223372036854775808"), "range");
	EXPECT_EQ(integral("1e19"), "range");
	EXPECT_EQ(integral("1e400"), "range");
	EXPECT_EQ(integral("1e99999999999999999999"), "range");
	EXPECT_EQ(integral("1" + std::string(400, '0')), "range");
	// a string must still be a plain integer
	EXPECT_EQ(*Json::MakeString("42").AsIntegral(), 42);
	EXPECT_FALSE(Json::MakeString("1e2").AsIntegral());
	EXPECT_FALSE(Json::MakeBool(true).AsIntegral());
}

TEST(Json, MessageHelpersQuoteNamesAndClipValues)
{
	EXPECT_EQ(QuotedField("after.na\"me"), R"("after.na\"me")");
	EXPECT_EQ(QuotedField("after.x"), R"("after.x")");
	EXPECT_EQ(QuotedField("a\nb"), R"("a\nb")");
	EXPECT_EQ(ClippedForMessage("short"), "short");
	std::string digits = "1" + std::string(400, '0');
	EXPECT_EQ(ClippedForMessage(digits), digits.substr(0, 40) + "...");
	// never inside a UTF-8 sequence: "é" is two bytes at bytes 39 and 40
	std::string accented = std::string(39, 'a') + "\xC3\xA9" + std::string(10, 'b');
	EXPECT_EQ(ClippedForMessage(accented), std::string(39, 'a') + "...");
}

// A delivery key on a CONTEXT line stays on that line: control characters
// as JSON escapes, cut at kContextKeyBytes; other bytes kept (regress
// new_user_s31).
TEST(Json, ForContextLineEscapesControlCharacters)
{
	EXPECT_EQ(ForContextLine("orders:0:3:1187"), "orders:0:3:1187");
	EXPECT_EQ(ForContextLine("dbz:s::public.t:c:16:::{\"id\": \"1\"}"), "dbz:s::public.t:c:16:::{\"id\": \"1\"}");
	EXPECT_EQ(ForContextLine("k\"\nERROR:  forged \x1b[31m"), R"(k"\nERROR:  forged \u001b[31m)");
	EXPECT_EQ(ForContextLine(std::string("a\tb\r\x7f\0c", 7)), R"(a\tb\r\u007f\u0000c)");
	EXPECT_FALSE(HasControlChars("k\\n \xC3\xA9"));
	EXPECT_TRUE(HasControlChars(std::string("\0", 1)));
	const std::string long_key = std::string(300, 'k');
	EXPECT_EQ(ForContextLine(long_key), std::string(kContextKeyBytes, 'k') + "...");
	// cut first, then escaped: a newline beyond the cut is not shown
	EXPECT_EQ(ForContextLine(std::string(kContextKeyBytes, 'k') + "\n"), std::string(kContextKeyBytes, 'k') + "...");
	EXPECT_EQ(ForContextLine("\n" + long_key), "\\n" + std::string(kContextKeyBytes - 1, 'k') + "...");
	// EscapedControls: the same escapes, never cut
	EXPECT_EQ(EscapedControls("invalid input syntax for type integer: \"7\nERROR:  x\""),
	          R"(invalid input syntax for type integer: "7\nERROR:  x")");
	EXPECT_EQ(EscapedControls(long_key + "\t"), long_key + "\\t");
	EXPECT_EQ(EscapedControls("plain \"quoted\" \\ text"), "plain \"quoted\" \\ text");
}

// A clip rule installed by the PostgreSQL glue (the database's encoding)
// replaces the UTF-8 one, and removing it restores it.
TEST(Json, MessageClipRuleCanBeReplaced)
{
	MessageClip two_byte;
	two_byte.prefix_bytes = [](std::string_view, std::size_t max_bytes) { return max_bytes - max_bytes % 2; };
	SetMessageClip(two_byte);
	EXPECT_EQ(ClippedForMessage(std::string(50, 'x'), 41), std::string(40, 'x') + "...");
	EXPECT_EQ(ClippedForMessage("short"), "short");
	SetMessageClip(MessageClip{});
	EXPECT_EQ(ClippedForMessage(std::string(50, 'x'), 41), std::string(41, 'x') + "...");
}

TEST(Json, NestingDeeperThanTheLimitIsRefused)
{
	std::string ok = std::string(Json::kMaxDepth, '[') + std::string(Json::kMaxDepth, ']');
	EXPECT_NO_THROW(Json::Parse(ok));
	for (std::size_t depth : {Json::kMaxDepth + 1, std::size_t(400000)}) {
		std::string deep = "{\"op\": \"c\", \"extra\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
		try {
			Json::Parse(deep);
			FAIL() << "depth " << depth << " was accepted";
		} catch (const InputError &e) {
			EXPECT_STREQ(e.sqlstate(), "54001");
		}
	}
}

// JsonBuilder (the jsonb intake's tree builder, pg/sql_api.cpp) gives the
// tree Json::Parse gives for the same document, whatever the size hints.
TEST(JsonBuilder, BuildsTheTreeParseBuilds)
{
	for (std::size_t hint : {std::size_t(0), std::size_t(1), std::size_t(3), std::size_t(100)}) {
		JsonBuilder b;
		b.BeginObject(hint);
		b.Key("op");
		b.String("c");
		b.Key(std::string("after"));
		b.BeginObject(hint);
		b.Key("id");
		b.Number("12.50");
		b.Key("tags");
		b.BeginArray(hint);
		b.String(std::string("a"));
		b.Null();
		b.BeginArray(hint);
		b.End();
		b.BeginObject(hint);
		b.End();
		b.Bool(true);
		b.End();
		b.Key("n");
		b.Null();
		b.End();
		b.Key("ok");
		b.Bool(false);
		b.End();
		EXPECT_EQ(b.Depth(), 0u);
		Json j = b.Take();
		Json parsed = Json::Parse(R"({"op": "c", "after": {"id": 12.50, "tags": ["a", null, [], {}, true], "n": null}, "ok": false})");
		EXPECT_EQ(j.Serialize(), parsed.Serialize()) << "hint " << hint;
		EXPECT_EQ(j.Find("after")->Find("id")->Scalar(), "12.50");
		EXPECT_TRUE(j.Find("after")->Find("id")->IsNumber());
		EXPECT_TRUE(j.Find("after")->Find("tags")->Items()[2].IsArray());
		EXPECT_TRUE(j.Find("after")->Find("tags")->Items()[3].IsObject());
	}
	// a top-level scalar, and nothing at all (JSON null)
	JsonBuilder s;
	s.Number("7");
	EXPECT_EQ(s.Take().Serialize(), "7");
	EXPECT_TRUE(JsonBuilder().Take().IsNull());
}

TEST(JsonBuilder, CurrentPathNamesTheNextValue)
{
	JsonBuilder b;
	EXPECT_EQ(b.CurrentPath(), "");
	b.BeginArray();
	EXPECT_EQ(b.CurrentPath(), "[0]");
	b.BeginObject();
	b.Key("op");
	EXPECT_EQ(b.CurrentPath(), "[0].op");
	b.String("c");
	b.End();
	b.BeginObject();
	b.Key("after");
	b.BeginObject(2);
	b.Key("a");
	b.BeginArray();
	b.Number("1");
	EXPECT_EQ(b.CurrentPath(), "[1].after.a[1]");
}

TEST(JsonBuilder, RefusesNestingBeyondTheLimitAndMisuse)
{
	JsonBuilder b;
	for (std::size_t i = 0; i < Json::kMaxDepth; i++)
		b.BeginArray(1);
	EXPECT_EQ(SqlStateOf([&] { b.BeginObject(); }), "54001");
	EXPECT_EQ(SqlStateOf([&] { b.BeginArray(); }), "54001");

	// a document built on its own inside an outer container (a batch's element)
	JsonBuilder e(1);
	for (std::size_t i = 0; i + 1 < Json::kMaxDepth; i++)
		e.BeginArray();
	EXPECT_EQ(SqlStateOf([&] { e.BeginObject(); }), "54001");

	JsonBuilder k;
	k.BeginObject();
	EXPECT_THROW(k.String("no key"), std::logic_error);
	k.Key("a");
	EXPECT_THROW(k.Key("b"), std::logic_error);
	EXPECT_THROW(k.End(), std::logic_error);
	k.Null();
	EXPECT_THROW(k.Take(), std::logic_error);
	k.End();
	EXPECT_THROW(k.End(), std::logic_error);
	EXPECT_THROW(k.Null(), std::logic_error); /* a second top-level value */
	EXPECT_EQ(k.Take().Serialize(), R"({"a":null})");
}

TEST(Json, SerializeRoundTripsEscapes)
{
	Json j = Json::Parse(R"({"s": "a\"b\\c\n\u0001é", "a": [1, true, null, {"x": []}]})");
	EXPECT_EQ(j.Serialize(), R"({"s":"a\"b\\c\n\u0001é","a":[1,true,null,{"x":[]}]})");
	EXPECT_EQ(Json::Parse(j.Serialize()).Serialize(), j.Serialize());
}

TEST(Json, StreamJsonStringGivesAppendJsonStringsLiteralInPieces)
{
	std::string all;
	for (int c = 0; c < 256; c++)
		all.push_back(static_cast<char>(c));
	for (std::string s : {std::string(), std::string("plain"), std::string("\"lead"), std::string("trail\\"),
	                      std::string("a\"b\\c\n\r\t\b\f\x01\x1f z"), all}) {
		std::string appended;
		AppendJsonString(appended, s);
		std::string streamed;
		size_t pieces = 0;
		StreamJsonString(s, [&](std::string_view p) {
			streamed.append(p);
			pieces++;
		});
		EXPECT_EQ(streamed, appended);
		EXPECT_LE(pieces, s.size() * 2 + 2);
	}
	/* a plain value is handed over in place, as one piece between the quotes */
	std::string big(100000, 'x');
	std::vector<std::string_view> seen;
	StreamJsonString(big, [&](std::string_view p) { seen.push_back(p); });
	ASSERT_EQ(seen.size(), 3u);
	EXPECT_EQ(seen[1].data(), big.data());
	EXPECT_EQ(seen[1].size(), big.size());
	std::string esc;
	AppendJsonString(esc, std::string("\x01"));
	EXPECT_EQ(esc, "\"\\u0001\"");
}

TEST(Json, QuotedIntegersReadAsIntegers)
{
	Json j = Json::Parse(R"({"a": "42", "b": "4.2", "c": "x", "d": 1.0})");
	EXPECT_EQ(*j.Find("a")->AsInt64(), 42);
	EXPECT_FALSE(j.Find("b")->AsInt64());
	EXPECT_FALSE(j.Find("c")->AsInt64());
	EXPECT_FALSE(j.Find("d")->AsInt64());
}

// ------------------------------------------------------------ versions

TEST(Version, LexicographicOrder)
{
	Version a{{0, 100, 90, 0}}, b{{0, 100, 95, 0}}, c{{0, 101, 0, 0}}, e{{1, 0, 0, 0}};
	EXPECT_LT(Version::Compare(a, b), 0);
	EXPECT_LT(Version::Compare(b, c), 0);
	EXPECT_LT(Version::Compare(c, e), 0) << "a higher epoch is newer whatever the LSN";
	EXPECT_EQ(Version::Compare(a, a), 0);
	EXPECT_LT(Version::Compare(Version{{0, 1}}, Version{{0, 1, 0}}), 0) << "a prefix sorts first";
}

TEST(Version, LongerThanInlineParts)
{
	/* four components inline, more spill to the heap: order, equality, copies and pop_back across the edge */
	Version four{{1, 2, 3, 4}}, six{{1, 2, 3, 4, 5, 6}};
	EXPECT_EQ(six.parts.size(), 6u);
	EXPECT_EQ(six.parts.ToVector(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
	EXPECT_LT(Version::Compare(four, six), 0) << "a prefix sorts first";
	EXPECT_GT(Version::Compare(Version{{1, 2, 3, 5}}, six), 0);
	Version copy = six;
	EXPECT_EQ(copy, six);
	copy.parts.pop_back();
	copy.parts.pop_back();
	EXPECT_EQ(copy, four) << "back to inline storage";
	EXPECT_NE(copy, six);
	copy.parts.push_back(5);
	EXPECT_EQ(copy.parts.back(), 5);
	EXPECT_EQ(copy.ToArrayLiteral(), "{1,2,3,4,5}");
	EXPECT_EQ(*Version::FromArrayLiteral("{1,2,3,4,5,6}"), six);
}

TEST(Version, MovedFromLongerThanInlineIsValid)
{
	/*
	 * A moved-from std::vector (the type VersionParts replaced) is empty and
	 * usable; a moved-from VersionParts that had spilled kept its size with
	 * an empty spill vector: size() 6, data() an empty vector's, so reading
	 * or growing it reads out of bounds.
	 */
	Version six{{1, 2, 3, 4, 5, 6}};
	Version moved(std::move(six));
	EXPECT_EQ(moved.parts.size(), 6u);
	ASSERT_TRUE(six.parts.size() <= VersionParts::kInline || six.parts.data() != nullptr)
	    << "moved-from: size() " << six.parts.size() << " over a null data()";
	EXPECT_EQ(six.parts.ToVector().size(), six.parts.size()) << "moved-from parts are readable";
	six.parts.push_back(7);
	EXPECT_EQ(six.parts.back(), 7) << "a moved-from version can be reused";
	Version other{{9, 9, 9, 9, 9}};
	Version target;
	target = std::move(other);
	EXPECT_EQ(target, (Version{{9, 9, 9, 9, 9}}));
	ASSERT_TRUE(other.parts.size() <= VersionParts::kInline || other.parts.data() != nullptr);
	EXPECT_EQ(other.parts.ToVector().size(), other.parts.size());
}

TEST(Version, ArrayLiteralRoundTrip)
{
	Version v{{0, 24023128, -5, 9223372036854775807LL}};
	EXPECT_EQ(v.ToArrayLiteral(), "{0,24023128,-5,9223372036854775807}");
	EXPECT_EQ(*Version::FromArrayLiteral(v.ToArrayLiteral()), v);
	EXPECT_TRUE(Version::FromArrayLiteral("{}")->empty());
	EXPECT_FALSE(Version::FromArrayLiteral("{1,x}"));
	EXPECT_FALSE(Version::FromArrayLiteral("{99999999999999999999}"));
}

TEST(Version, LsnTextAndDecimal)
{
	EXPECT_EQ(*ParseLsn("0/1000"), 0x1000);
	EXPECT_EQ(*ParseLsn("16/B374D848"), (int64_t(0x16) << 32) | 0xB374D848);
	EXPECT_EQ(*ParseLsn("24023128"), 24023128);
	EXPECT_EQ(FormatLsn((int64_t(0x16) << 32) | 0xB374D848), "16/B374D848");
	EXPECT_FALSE(ParseLsn("0/"));
	EXPECT_FALSE(ParseLsn("G/1"));
	EXPECT_FALSE(ParseLsn("-1"));
	EXPECT_FALSE(ParseLsn("1/123456789"));
}

// ----------------------------------------------------------- envelopes

TEST(Envelope, CreateWithSchemaUnwrapsPayloadAndSchema)
{
	ChangeEvent ev = ParseFixture("pg-create-with-schema.json");
	EXPECT_FALSE(ev.ignored);
	EXPECT_EQ(ev.op, Op::Create);
	EXPECT_EQ(ev.source.name, "PostgreSQL_server");
	EXPECT_EQ(ev.source.schema, "public");
	EXPECT_EQ(ev.source.table, "customers");
	EXPECT_EQ(*ev.source.lsn, 24023128);
	EXPECT_EQ(*ev.source.tx_id, 555);
	ASSERT_TRUE(ev.after);
	EXPECT_EQ(ev.after->Find("first_name")->Scalar(), "Anne");
	ASSERT_TRUE(ev.after_schema);
	ASSERT_NE(ev.after_schema->Member("id"), nullptr);
	EXPECT_EQ(ev.after_schema->Member("id")->type, "int32");
	EXPECT_FALSE(ev.IsSnapshot()) << "op c with source.snapshot=true is still a change, not a snapshot read";
}

// source.table "" is told apart from absent and null, so that an event
// without a target is refused as having an empty field, not a missing one
// (fresh-user review h3; regress input_polish).
TEST(Envelope, EmptySourceTableToldFromAbsent)
{
	auto parse = [](const char *source) {
		return ParseDebeziumEnvelope(Json::Parse(std::string(R"({"op": "c", "after": {"id": 1}, "source": )") + source + "}"));
	};
	ChangeEvent empty = parse(R"({"schema": "", "table": "", "db": ""})");
	EXPECT_EQ(empty.source.table, "");
	EXPECT_TRUE(empty.source.table_empty);
	EXPECT_EQ(empty.source.schema, "") << "an empty schema or db reads as absent, as before";
	EXPECT_FALSE(parse(R"({"schema": "s"})").source.table_empty);
	EXPECT_FALSE(parse(R"({"table": null})").source.table_empty);
	ChangeEvent named = parse(R"({"table": "t"})");
	EXPECT_EQ(named.source.table, "t");
	EXPECT_FALSE(named.source.table_empty);
}

TEST(Envelope, PayloadOnlyEqualsWithSchema)
{
	ChangeEvent a = ParseFixture("pg-create-with-schema.json");
	ChangeEvent b = ParseFixture("pg-create.payload-only.json");
	EXPECT_EQ(a.after->Serialize(), b.after->Serialize());
	EXPECT_EQ(DeriveDeliveryKey(a, "k"), DeriveDeliveryKey(b, "k"));
	EXPECT_FALSE(b.after_schema);
}

TEST(Envelope, DeleteNeedsBeforeAndHasNoAfter)
{
	ChangeEvent ev = ParseFixture("pg-delete-replica-identity-default.payload-only.json");
	EXPECT_EQ(ev.op, Op::Delete);
	ASSERT_TRUE(ev.before);
	EXPECT_FALSE(ev.after);
	EXPECT_EQ(ev.before->Find("id")->Scalar(), "1");
	EXPECT_EQ(SqlStateOf([] { ParseDebeziumEnvelope(Json::Parse(R"({"op":"d","before":null,"source":{"lsn":1}})")); }),
	          "22023");
}

TEST(Envelope, NonChangeRecordsAreIgnored)
{
	EXPECT_EQ(ParseDebeziumEnvelope(Json::Parse("null")).ignored_reason, "kafka tombstone");
	EXPECT_EQ(ParseFixture("pg-transaction-begin.json").ignored_reason, "transaction BEGIN");
	EXPECT_EQ(ParseFixture("pg-transaction-end.json").ignored_reason, "transaction END");
	EXPECT_EQ(ParseFixture("pg-message-transactional.payload-only.json").ignored_reason, "logical decoding message");
	EXPECT_EQ(ParseFixture("pg-message-non-transactional.payload-only.json").ignored_reason, "logical decoding message");
	EXPECT_EQ(ParseDebeziumEnvelope(Json::Parse(R"({"ts_ms": 1588252618953})")).ignored_reason, "heartbeat");
	EXPECT_EQ(ParseDebeziumEnvelope(Json::Parse(R"({"schema": {"type": "struct"}, "payload": null})")).ignored_reason,
	          "kafka tombstone");
}

TEST(Envelope, TruncateHasNoImages)
{
	ChangeEvent ev = ParseFixture("pg-truncate.payload-only.json");
	EXPECT_EQ(ev.op, Op::Truncate);
	EXPECT_FALSE(ev.before);
	EXPECT_FALSE(ev.after);
}

TEST(Envelope, TransactionBlockAndQuotedNumbers)
{
	ChangeEvent ev = ParseFixture("pg-create-with-transaction-block.payload-only.json");
	EXPECT_EQ(ev.transaction_id, "571:53195832");
	EXPECT_EQ(*ev.total_order, 1);
	EXPECT_FALSE(ev.source.lsn) << "the example's source block is elided";
	EXPECT_EQ(SqlStateOf([&] { DeriveDebeziumVersion(ev, 0); }), "22023");
}

// An unknown op is printed as a JSON string, cut to kMessageValueBytes; a
// transaction.total_order beyond 32 bits is 22023 naming the field (found by
// a fresh-user run: the op printed raw with its newline and quote, the total
// order a 22003 about a "position in transaction").
TEST(Envelope, OpAndTotalOrderMessagesNameWhatIsWrong)
{
	auto message = EnvelopeError;
	EXPECT_EQ(message(R"({"op": "x\"\n", "after": {"id": 1}})"), "22023 unknown op \"x\\\"\\n\"");
	std::string long_op = message(R"({"op": ")" + std::string(500, 'q') + R"(", "after": {"id": 1}})");
	EXPECT_LT(long_op.size(), 80u) << long_op;
	EXPECT_EQ(message(R"({"op": "c", "after": {"id": 1}, "transaction": {"id": "t", "total_order": 2147483648}})"),
	          "22023 field \"transaction.total_order\" is out of range: 2147483648 (at most 2147483647)");
	EXPECT_EQ(message(R"({"op": "c", "after": {"id": 1}, "transaction": {"id": "t", "total_order": 2147483647}})"),
	          "no error");
}

// The JsonConverter wrapper's members: a payload that is not an object was
// refused as if it were the whole event, a schema that is not an object (or
// whose "fields" is not an array of objects) was ignored (fresh-user review
// h3; sql/envelope_wrapper_shape.sql).
TEST(Envelope, WrapperMembersOfTheWrongShapeAreNamed)
{
	auto message = EnvelopeError;
	const std::string ok = R"({"op": "c", "after": {"id": 1}, "source": {"lsn": 1}})";
	EXPECT_EQ(message(R"({"schema": {}, "payload": 5})"), "22023 field \"payload\" must be an object, got number");
	EXPECT_EQ(message(R"({"schema": {}, "payload": [1]})"), "22023 field \"payload\" must be an object, got array");
	EXPECT_EQ(message(R"({"schema": 5, "payload": )" + ok + "}"), "22023 field \"schema\" must be an object, got number");
	EXPECT_EQ(message(R"({"schema": [], "payload": )" + ok + "}"), "22023 field \"schema\" must be an object, got array");
	EXPECT_EQ(message(R"({"schema": "x", "payload": null})"), "22023 field \"schema\" must be an object, got string");
	EXPECT_EQ(message(R"({"schema": {"fields": {}}, "payload": )" + ok + "}"),
	          "22023 field \"schema.fields\" must be an array, got object");
	EXPECT_EQ(message(R"({"schema": {"fields": [{"field": "op", "type": "string"}, 7]}, "payload": )" + ok + "}"),
	          "22023 field \"schema.fields[1]\" must be an object, got number");
	/* a null schema, a schema without fields, and an empty list are no schema */
	EXPECT_EQ(message(R"({"schema": null, "payload": )" + ok + "}"), "no error");
	EXPECT_EQ(message(R"({"schema": {"type": "struct"}, "payload": )" + ok + "}"), "no error");
	EXPECT_EQ(message(R"({"schema": {"fields": null}, "payload": )" + ok + "}"), "no error");
	EXPECT_EQ(message(R"({"schema": {"fields": []}, "payload": )" + ok + "}"), "no error");
	EXPECT_EQ(message(R"({"schema": null, "payload": null})"), "no error");
	/* a top-level "op": null is no op: still the wrapper (regress new_user_s31); a non-null op makes it the payload */
	EXPECT_EQ(message(R"({"schema": null, "op": null, "payload": )" + ok + "}"), "no error");
	EXPECT_EQ(message(R"({"schema": null, "op": "c", "payload": )" + ok + "}"),
	          "22023 field \"after\" is missing: op \"c\" needs the after-image");
	/* a top level that is not an object */
	EXPECT_EQ(message("[1]"), "22023 event must be a JSON object, got array");
	EXPECT_EQ(message("\"x\""), "22023 event must be a JSON object, got string");
}

TEST(Envelope, BadEnvelopesAreInputErrors)
{
	auto state = [](const char *json) {
		return SqlStateOf([&] { ParseDebeziumEnvelope(Json::Parse(json)); });
	};
	EXPECT_EQ(state(R"({"after": {"id": 1}})"), "22023") << "missing op";
	EXPECT_EQ(state(R"({"op": "x", "after": {"id": 1}})"), "22023") << "unknown op";
	EXPECT_EQ(state(R"({"op": 1, "after": {"id": 1}})"), "22023") << "op not a string";
	EXPECT_EQ(state(R"({"op": "c"})"), "22023") << "missing after";
	EXPECT_EQ(state(R"({"op": "u", "after": [1]})"), "22023") << "after not an object";
	EXPECT_EQ(state(R"({"op": "c", "after": {"id": 1}, "source": {"lsn": "abc"}})"), "22023") << "bad lsn";
	EXPECT_EQ(state(R"([1, 2])"), "22023") << "not an object";
	EXPECT_EQ(state(ReadFixture("pg-key-customers-with-schema.json").c_str()), "22023") << "a Kafka key is not a value";
}

// Found by a fresh-user run: wrong JSON types in `source` were accepted
// and stored as their JSON text (source.name {"a":1} as a source id in
// cdc.entities).  A name must be a string, source.snapshot one of
// Debezium's values or a boolean; 22023 naming the field.  JSON null is
// absent, as before.
TEST(Envelope, SourceNamesMustBeStringsAndSnapshotDebeziumsValues)
{
	auto message = [](const std::string &source) -> std::string {
		try {
			ChangeEvent e = ParseDebeziumEnvelope(Json::Parse(R"({"op": "c", "after": {"id": 1}, "source": )" + source + "}"));
			return "ok " + e.source.name + "|" + e.source.db + "|" + e.source.schema + "|" + e.source.table + "|" +
			       e.source.connector + "|" + e.source.snapshot;
		} catch (const InputError &e) {
			return e.sqlstate() + std::string(" ") + e.what();
		}
	};
	for (const char *field : {"name", "db", "schema", "table", "connector"})
		for (const char *value : {"5", "{\"a\":1}", "[1]", "true", "1.5"}) {
			std::string m = message(std::string("{\"") + field + "\": " + value + "}");
			EXPECT_EQ(m.substr(0, 5), "22023") << field << " " << value << ": " << m;
			EXPECT_NE(m.find(std::string("field \"source.") + field + "\" must be a string"), std::string::npos) << m;
		}
	EXPECT_EQ(message(R"({"name": null, "db": null, "schema": null, "table": null, "connector": null, "snapshot": null})"),
	          "ok |||||");
	EXPECT_EQ(message(R"({"name": "s", "db": "d", "schema": "p", "table": "t", "connector": "postgresql", "snapshot": "last"})"),
	          "ok s|d|p|t|postgresql|last");
	for (const char *v : {"true", "false", "last", "first", "first_in_data_collection", "last_in_data_collection", "incremental"})
		EXPECT_EQ(message(std::string(R"({"snapshot": ")") + v + "\"}"), std::string("ok |||||") + v);
	EXPECT_EQ(message(R"({"snapshot": true})"), "ok |||||true");
	EXPECT_EQ(message(R"({"snapshot": false})"), "ok |||||false");
	for (const char *bad : {"7", "{}", "\"bogus\"", "\"\"", "\"TRUE\"", "[true]"}) {
		std::string m = message(std::string(R"({"snapshot": )") + bad + "}");
		EXPECT_EQ(m.substr(0, 5), "22023") << bad << ": " << m;
		EXPECT_NE(m.find("field \"source.snapshot\""), std::string::npos) << m;
	}
	// every fixture's source block still reads (names are strings; snapshot booleans or "incremental")
	for (const char *name : {"pg-create-with-schema.json", "pg-read-incremental-snapshot.payload-only.json",
	                         "pg-update-replica-identity-default.payload-only.json", "pg-truncate.payload-only.json"})
		EXPECT_NO_THROW(ParseFixture(name)) << name;
}

namespace {
std::string ParseOutcome(const Json &root);
} // namespace

// Found by a fresh-user run: source.lsn 1e2 was applied from jsonb (numeric
// 100) and refused from text.  An integer field takes a JSON number by its
// value in both forms: the text lexeme and numeric_out's text of the same
// number give the same event.
TEST(Envelope, IntegerFieldsTakeIntegralNumbersInBothForms)
{
	auto outcome = [](const std::string &source, const std::string &tx) {
		return ParseOutcome(Json::Parse(R"({"op": "u", "after": {"id": 1}, "source": )" + source + R"(, "transaction": )" + tx + "}"));
	};
	/* text lexeme -> what jsonb's numeric_out prints for it */
	const std::pair<const char *, const char *> same[] = {{"1e2", "100"}, {"4.0e3", "4000"}, {"100.0", "100.0"},
	                                                      {"1.50e1", "15.0"}, {"10e-1", "1.0"}, {"7", "7"}};
	for (const auto &[text, jsonb] : same) {
		auto src = [](const char *n) {
			return std::string(R"({"lsn": )") + n + R"(, "commit_lsn": )" + n + R"(, "txId": )" + n + R"(, "ts_ms": )" + n + "}";
		};
		auto tx = [](const char *n) { return std::string(R"({"id": "t", "total_order": )") + n + "}"; };
		std::string a = outcome(src(text), tx(text)), b = outcome(src(jsonb), tx(jsonb));
		EXPECT_EQ(a, b) << text;
		EXPECT_EQ(a.find("error"), std::string::npos) << a;
	}
	EXPECT_NE(outcome(R"({"lsn": 1e2})", "{}").find("|100|-|"), std::string::npos) << outcome(R"({"lsn": 1e2})", "{}");
	for (const char *bad : {"1.5", "1e-1", "-1e2", "\"G/0\"", "\"1/\"", "\"123456789/0\""}) {
		std::string m = outcome(std::string(R"({"lsn": )") + bad + "}", "{}");
		EXPECT_NE(m.find("error 22023 field \"source.lsn\" is not an LSN"), std::string::npos) << m;
	}
	// PostgreSQL text above what a bigint holds is named as such (fresh-user run)
	for (const char *big : {"\"FFFFFFFF/FFFFFFFF\"", "\"80000000/0\""}) {
		std::string m = outcome(std::string(R"({"lsn": )") + big + "}", "{}");
		EXPECT_NE(m.find("above 7FFFFFFF/FFFFFFFF, the largest LSN cdc_apply stores"), std::string::npos) << m;
	}
	EXPECT_EQ(outcome(R"({"lsn": "7FFFFFFF/FFFFFFFF"})", "{}").find("error"), std::string::npos);
	// and so is Debezium's decimal form above 2^63 - 1, as a number or a string
	for (const char *big : {"9223372036854775808", "18446744073709551615", "\"9223372036854775808\"", "1e400"}) {
		std::string m = outcome(std::string(R"({"lsn": )") + big + "}", "{}");
		EXPECT_NE(m.find("above 9223372036854775807 (7FFFFFFF/FFFFFFFF), the largest LSN cdc_apply stores"), std::string::npos) << m;
	}
	EXPECT_EQ(outcome(R"({"lsn": 9223372036854775807})", "{}").find("error"), std::string::npos);
	for (const char *bad : {"1.5", "\"1e2\"", "\"-\"", "\"\""}) {
		std::string m = outcome(std::string(R"({"txId": )") + bad + "}", "{}");
		EXPECT_NE(m.find("error 22023 field \"source.txId\" must be an integer"), std::string::npos) << m;
	}
	// an integer beyond 64 bits is named out of range (sql/integer_field_range.sql)
	for (const char *big : {"1e400", "9223372036854775808", "-9223372036854775809", "\"99999999999999999999\""}) {
		std::string m = outcome(std::string(R"({"txId": )") + big + "}", "{}");
		EXPECT_NE(m.find("error 22023 field \"source.txId\" is out of range: "), std::string::npos) << m;
		EXPECT_NE(m.find(", an integer beyond 64 bits"), std::string::npos) << m;
	}
	// a long value is cut in the message (jsonb prints 1e400 as 401 digits)
	std::string m = outcome("{\"ts_ms\": 1" + std::string(400, '0') + "}", "{}");
	EXPECT_NE(m.find("is out of range: 1" + std::string(39, '0') + "..."), std::string::npos) << m;
	EXPECT_LT(m.size(), 200u) << m;
	// unread members never fail, whatever their numbers
	EXPECT_EQ(outcome(R"({"lsn": 5, "sequence": 1e400})", R"({"data_collection_order": -2.5e999})").find("error"), std::string::npos);
}

// Found by a fresh-user run: a NUL in a source text field went into
// cdc.source as text PostgreSQL cannot hold, and a second such name made the
// dictionary insert spin.  Every text field of the envelope refuses it, as
// column values do (decode.cpp), naming the field.
TEST(Envelope, NulInEnvelopeTextFieldsIsRefusedNamingTheField)
{
	auto message = EnvelopeError;
	for (const char *field : {"name", "db", "schema", "table", "connector", "snapshot"}) {
		std::string json = std::string(R"({"op": "c", "after": {"id": 1}, "source": {")") + field + R"(": "a\u0000b"}})";
		std::string m = message(json);
		/* source.snapshot takes Debezium's values only: refused as not one of them */
		EXPECT_EQ(m.substr(0, 5), std::string(field) == "snapshot" ? "22023" : "22P02") << field << ": " << m;
		EXPECT_NE(m.find(std::string("\"source.") + field + "\""), std::string::npos) << m;
	}
	std::string op = message(R"({"op": "c\u0000", "after": {"id": 1}})");
	EXPECT_EQ(op.substr(0, 5), "22P02") << op;
	EXPECT_NE(op.find("\"op\""), std::string::npos) << op;
	std::string tx = message(R"({"op": "c", "after": {"id": 1}, "transaction": {"id": "7\u0000"}})");
	EXPECT_EQ(tx.substr(0, 5), "22P02") << tx;
	EXPECT_NE(tx.find("\"transaction.id\""), std::string::npos) << tx;
}

// Found by a fresh-user run: a source.name of 3,000 bytes failed at
// cdc.source's btree index (54000, "index row size ... exceeds maximum")
// naming no field, after the ledger claim.  The source identity fields
// stored in indexes have a byte limit (kMaxSourceNameBytes for name,
// kMaxSourceIdentifierBytes for db, schema and table); a longer value is
// refused with 22023 naming the field, its length, the limit and its first
// 40 bytes, in both forms (the whole value as the text form reads it, the
// pruned one as the jsonb intake builds it).  connector is in no index.
TEST(Envelope, LongSourceIdentityIsRefusedNamingTheField)
{
	auto outcome = [](const std::string &source, bool pruned) {
		const Json whole = Json::Parse(R"({"op": "c", "after": {"id": 1}, "source": )" + source + "}");
		return ParseOutcome(pruned ? PruneEnvelope(whole) : whole);
	};
	const std::pair<const char *, std::size_t> limits[] = {
		{"name", kMaxSourceNameBytes}, {"db", kMaxSourceIdentifierBytes},
		{"schema", kMaxSourceIdentifierBytes}, {"table", kMaxSourceIdentifierBytes}};
	EXPECT_EQ(kMaxSourceNameBytes, 1024u);
	EXPECT_EQ(kMaxSourceIdentifierBytes, 255u);
	for (const auto &[field, limit] : limits)
		for (bool pruned : {false, true}) {
			/* at the limit: read whole */
			const std::string at(limit, 'x');
			std::string ok = outcome(std::string("{\"") + field + "\": \"" + at + "\"}", pruned);
			EXPECT_EQ(ok.find("error"), std::string::npos) << field << ": " << ok.substr(0, 200);
			EXPECT_NE(ok.find(at), std::string::npos) << field;
			/* one byte more, and multi-megabyte: refused, the value cut to 40 bytes */
			for (std::size_t size : {limit + 1, std::size_t(3) << 20}) {
				std::string m = outcome(std::string("{\"") + field + "\": \"" + std::string(size, 'y') + "\"}", pruned);
				EXPECT_EQ(m, "error 22023 field \"source." + std::string(field) + "\" is " + std::to_string(size) +
				                 " bytes long, more than the " + std::to_string(limit) + " allowed: \"" +
				                 std::string(40, 'y') + "...\"")
					<< field << " " << size << (pruned ? " pruned" : " whole");
			}
		}
	/* bytes, not characters: 128 two-byte characters (256 bytes) are too many for a table; the cut keeps whole characters */
	std::string two_byte;
	for (int i = 0; i < 128; i++)
		two_byte += "\xC3\xA9"; /* é */
	std::string m = outcome("{\"table\": \"" + two_byte + "\"}", false);
	EXPECT_EQ(m, "error 22023 field \"source.table\" is 256 bytes long, more than the 255 allowed: \"" + two_byte.substr(0, 40) +
	                 "...\"");
	EXPECT_EQ(outcome("{\"table\": \"" + two_byte.substr(2) + "\"}", true).find("error"), std::string::npos);
	/* a control character in the shown start is escaped as in the field names */
	m = outcome("{\"name\": \"a\\nb" + std::string(2000, 'z') + "\"}", false);
	EXPECT_NE(m.find("allowed: \"a\\nb" + std::string(37, 'z') + "...\""), std::string::npos) << m.substr(0, 200);
	/* the length is checked before the NUL: one error, the first found */
	m = outcome("{\"schema\": \"a\\u0000" + std::string(300, 's') + "\"}", true);
	EXPECT_EQ(m.substr(0, 45), "error 22023 field \"source.schema\" is 302 byte") << m.substr(0, 200);
	/* connector is stored in no index: any length */
	EXPECT_EQ(outcome("{\"connector\": \"" + std::string(100000, 'c') + "\"}", false).find("error"), std::string::npos);
}

namespace {

// A ChangeEvent, or the error parsing gives, as text: what two parses are
// compared by.
std::string
ParseOutcome(const Json &root)
{
	auto opt = [](const std::optional<int64_t> &v) { return v ? std::to_string(*v) : std::string("-"); };
	try {
		ChangeEvent e = ParseDebeziumEnvelope(root);
		std::string s = e.ignored ? "ignored " + e.ignored_reason : std::string("op ") + OpName(e.op);
		s += " before " + (e.before ? e.before->Serialize() : "-") + " after " + (e.after ? e.after->Serialize() : "-");
		s += " schemas " + (e.before_schema ? e.before_schema->type + "/" + std::to_string(e.before_schema->fields.size()) : "-") +
		     " " + (e.after_schema ? e.after_schema->type + "/" + std::to_string(e.after_schema->fields.size()) : "-");
		const SourceInfo &src = e.source;
		s += " source " + src.connector + "|" + src.name + "|" + src.db + "|" + src.schema + "|" + src.table + "|" + src.snapshot +
		     "|" + opt(src.lsn) + "|" + opt(src.commit_lsn) + "|" + opt(src.tx_id) + "|" + opt(src.ts_ms);
		s += " tx " + e.transaction_id + "|" + opt(e.total_order);
		return s;
	} catch (const InputError &e) {
		return std::string("error ") + e.sqlstate() + " " + e.what();
	}
}

} // namespace

// The jsonb intake leaves out what the envelope never reads
// (EnvelopeMemberPart); PruneEnvelope is that tree, and parsing it gives
// Fresh-user review: source.commit_lsn below source.lsn and a negative
// source.txId were accepted.  A change's commit LSN is never below its own
// LSN (the version relies on C >= lsn); a transaction id is never negative.
TEST(Envelope, CommitLsnBelowLsnAndNegativeTxIdRefused)
{
	auto outcome = [](const std::string &source) {
		return ParseOutcome(Json::Parse(R"({"op": "u", "after": {"id": 1}, "source": )" + source + "}"));
	};
	std::string m = outcome(R"({"lsn": 32, "commit_lsn": 16})");
	EXPECT_NE(m.find("error 22023 field \"source.commit_lsn\" (0/10) is below field \"source.lsn\" (0/20)"), std::string::npos) << m;
	m = outcome(R"({"lsn": "16/B374D848", "commit_lsn": "16/B374D847"})");
	EXPECT_NE(m.find("error 22023 field \"source.commit_lsn\" (16/B374D847) is below"), std::string::npos) << m;
	m = outcome(R"({"lsn": 32, "txId": -1})");
	EXPECT_NE(m.find("error 22023 field \"source.txId\" must not be negative, got -1"), std::string::npos) << m;
	/* accepted: equal LSNs, commit_lsn above, no lsn (a version_column mapping), txId 0 and beyond 32 bits */
	for (const char *ok : {R"({"lsn": 32, "commit_lsn": 32})", R"({"lsn": 32, "commit_lsn": "0/21"})", R"({"commit_lsn": 1})",
	                       R"({"lsn": 32, "txId": 0})", R"({"lsn": 32, "txId": 4294967296})"})
		EXPECT_EQ(outcome(ok).find("error"), std::string::npos) << ok << ": " << outcome(ok);
}

// the same event, or the same error naming the same field, as parsing the
// whole value: for every fixture and for values whose unread members are
// junk or whose read members are wrong.
TEST(Envelope, PrunedValueParsesAsTheWholeValue)
{
	/* unread members of every kind, read ones right */
	const char *junk = R"({"op": "c", "after": {"id": 1}, "ts_us": [1, {"a": 2}], "source": {"version": {"v": 1}, "xmin": [], "lsn": 64,
	             "sequence": "[\"1\",\"2\"]", "name": "s", "txId": "9", "commit_lsn": "0/40", "ts_ms": 5},
	             "transaction": {"id": "t", "total_order": 3, "data_collection_order": {"x": 1}}})";
	std::vector<std::string> texts;
	for (const char *name :
	     {"pg-create-with-schema.json", "pg-create-with-transaction-block.payload-only.json", "pg-create.payload-only.json",
	      "pg-delete-replica-identity-default-with-schema.json", "pg-delete-replica-identity-default.payload-only.json",
	      "pg-key-customers-with-schema.json", "pg-message-non-transactional.payload-only.json",
	      "pg-message-transactional.payload-only.json", "pg-read-incremental-snapshot.payload-only.json",
	      "pg-transaction-begin.json", "pg-transaction-end.json", "pg-truncate.payload-only.json",
	      "pg-update-replica-identity-default-with-schema.json", "pg-update-replica-identity-default.payload-only.json"})
		texts.push_back(ReadFixture(name));
	for (const char *t : {
	         "null", "[1, 2]", "\"c\"",
	         R"({"ts_ms": 1})",                                      // heartbeat
	         R"({"ts_ms": 1, "ts_us": {"x": [1]}})",                 // not one: named by its other member
	         R"({"ts_ms": 1, "status": "BEGIN", "id": "7"})",
	         junk,
	         R"({"op": "c", "after": {"id": 1}, "source": {"lsn": "abc", "version": 1}})",
	         R"({"op": "c", "after": {"id": 1}, "source": {"name": {"a": [1, 2]}, "ts_ms": 1.5}})",
	         R"({"op": "c", "after": {"id": 1}, "source": [1, 2]})",
	         R"({"op": "c", "after": {"id": 1}, "transaction": {"total_order": "x", "data_collection_order": 1}})",
	         R"({"op": "c", "after": {"id": 1}, "transaction": 5})",
	         R"({"op": {"c": 1}, "after": {"id": 1}})",
	         R"({"op": "r", "after": [1], "ts_ns": 1})",
	         R"({"op": "d", "after": {"id": 1}, "extra": {"before": {"id": 1}}})",
	         R"({"op": "t", "source": {"schema": "s", "table": "t", "snapshot": true}})",
	         R"({"schema": {"fields": [{"field": "after", "type": "struct", "fields": [{"field": "id", "type": "int32"}]}]},
	             "payload": {"op": "c", "after": {"id": 1}, "schema": {"x": 1}, "payload": {"op": "d"}, "ts_ms": 2}})",
	         R"({"schema": null, "payload": {"ts_ms": 2}})",
	         R"({"schema": {}, "payload": null})",
	         R"({"schema": {}, "payload": {"ts_ms": 2, "version": 1}})",
	         R"({"op": "c", "after": {"id": 1}, "payload": {"op": "d"}, "schema": {}})"})
		texts.push_back(t);
	for (const std::string &text : texts) {
		const Json whole = Json::Parse(text);
		const Json pruned = PruneEnvelope(whole);
		EXPECT_EQ(ParseOutcome(pruned), ParseOutcome(whole)) << text;
	}
	EXPECT_EQ(ParseOutcome(Json::Parse(junk)), R"(op c before - after {"id":1} schemas - - source |s|||||64|64|9|5 tx t|3)");
	// what is left out: scalar values only, names kept; containers stay whole
	Json p = PruneEnvelope(Json::Parse(junk));
	EXPECT_EQ(p.Serialize(), R"({"op":"c","after":{"id":1},"ts_us":[1,{"a":2}],"source":{"version":{"v":1},"xmin":[],"lsn":64,)"
	                         R"("sequence":null,"name":"s","txId":"9","commit_lsn":"0/40","ts_ms":5},)"
	                         R"("transaction":{"id":"t","total_order":3,"data_collection_order":{"x":1}}})");
	EXPECT_EQ(PruneEnvelope(Json::Parse(R"({"ts_ms": 1, "ts_us": 2, "source": {"version": "2.5", "ts_ns": 3}})")).Serialize(),
	          R"({"ts_ms":null,"ts_us":null,"source":{"version":null,"ts_ns":null}})");
}

namespace {

// A JsonView as the jsonb intake's (pg/jsonb_view.cpp) reads a document:
// over the pruned tree (the unread scalars JSON null), and answering
// Member, KeyAt and ValueAt only for the containers that intake expands
// (the value, its payload, source and transaction blocks as their
// EnvelopePart says, and the images' members); anything else read member
// by member is counted in `misses` (the jsonb view would answer "absent").
class IntakeLikeView final : public JsonView {
  public:
	explicit IntakeLikeView(const Json &pruned) : root_(pruned)
	{
		if (pruned.IsObject())
			Expand(pruned, EnvelopePart::Root, false);
	}
	Node Root() const override { return &root_; }
	Json::Kind KindOf(Node n) const override { return J(n).kind(); }
	std::string_view ScalarOf(Node n) const override
	{
		return J(n).IsString() || J(n).IsNumber() ? std::string_view(J(n).Scalar()) : std::string_view();
	}
	bool BoolOf(Node n) const override { return J(n).IsBool() && J(n).AsBool(); }
	Node Member(Node o, std::string_view key) const override
	{
		if (!J(o).IsObject())
			return nullptr;
		if (!Expanded(o)) {
			misses++;
			return nullptr;
		}
		return J(o).Find(key);
	}
	std::size_t SizeOf(Node c) const override
	{
		if (!Expanded(c)) {
			misses += J(c).IsObject() || J(c).IsArray();
			return 0;
		}
		return J(c).Members().size();
	}
	std::string_view KeyAt(Node o, std::size_t i) const override { return J(o).Members()[i].first; }
	Node ValueAt(Node o, std::size_t i) const override { return &J(o).Members()[i].second; }
	const Json &Tree(Node n, Json &storage) const override
	{
		storage = J(n); /* built, as the jsonb view builds it */
		return storage;
	}
	mutable int misses = 0;

  private:
	static const Json &J(Node n) { return *static_cast<const Json *>(n); }
	bool Expanded(Node n) const { return std::find(expanded_.begin(), expanded_.end(), n) != expanded_.end(); }
	void Expand(const Json &o, EnvelopePart part, bool image)
	{
		expanded_.push_back(&o);
		if (image)
			return;
		for (const auto &[key, value] : o.Members()) {
			const EnvelopePart p = EnvelopeMemberPart(part, key);
			const bool member_wise = p == EnvelopePart::Root || p == EnvelopePart::Payload || p == EnvelopePart::Source ||
			                         p == EnvelopePart::Transaction;
			const bool img = (part == EnvelopePart::Root || part == EnvelopePart::Payload) && (key == "before" || key == "after");
			if (value.IsObject() && (member_wise || img))
				Expand(value, member_wise ? p : EnvelopePart::Whole, img);
		}
	}
	const Json &root_;
	std::vector<const Json *> expanded_;
};

// The event read through a view, as ParseOutcome shows it (the images
// taken from their nodes).
std::string
ViewOutcome(const JsonView &view)
{
	try {
		ChangeEvent e = ParseDebeziumEnvelope(view);
		Json storage;
		if (e.before_node)
			e.before = view.Tree(e.before_node, storage);
		if (e.after_node)
			e.after = view.Tree(e.after_node, storage);
		EXPECT_TRUE(e.ignored || e.view == &view);
		auto opt = [](const std::optional<int64_t> &v) { return v ? std::to_string(*v) : std::string("-"); };
		std::string s = e.ignored ? "ignored " + e.ignored_reason : std::string("op ") + OpName(e.op);
		s += " before " + (e.before ? e.before->Serialize() : "-") + " after " + (e.after ? e.after->Serialize() : "-");
		s += " schemas " + (e.before_schema ? e.before_schema->type + "/" + std::to_string(e.before_schema->fields.size()) : "-") +
		     " " + (e.after_schema ? e.after_schema->type + "/" + std::to_string(e.after_schema->fields.size()) : "-");
		const SourceInfo &src = e.source;
		s += " source " + src.connector + "|" + src.name + "|" + src.db + "|" + src.schema + "|" + src.table + "|" + src.snapshot +
		     "|" + opt(src.lsn) + "|" + opt(src.commit_lsn) + "|" + opt(src.tx_id) + "|" + opt(src.ts_ms);
		s += " tx " + e.transaction_id + "|" + opt(e.total_order);
		return s;
	} catch (const InputError &e) {
		return std::string("error ") + e.sqlstate() + " " + e.what();
	}
}

} // namespace

// The envelope read in place (ParseDebeziumEnvelope(const JsonView &)):
// through the tree's view and through a view that, like the jsonb intake,
// reads member by member only the containers it expands, every fixture and
// every tricky value gives the same event, or the same error naming the
// same field, as parsing the tree; and the parser asks nothing of the
// containers the intake leaves in the jsonb.
TEST(Envelope, ReadThroughAViewGivesTheSameEvent)
{
	std::vector<std::string> texts;
	for (const char *name :
	     {"pg-create-with-schema.json", "pg-create-with-transaction-block.payload-only.json", "pg-create.payload-only.json",
	      "pg-delete-replica-identity-default-with-schema.json", "pg-delete-replica-identity-default.payload-only.json",
	      "pg-key-customers-with-schema.json", "pg-message-non-transactional.payload-only.json",
	      "pg-message-transactional.payload-only.json", "pg-read-incremental-snapshot.payload-only.json",
	      "pg-transaction-begin.json", "pg-transaction-end.json", "pg-truncate.payload-only.json",
	      "pg-update-replica-identity-default-with-schema.json", "pg-update-replica-identity-default.payload-only.json"})
		texts.push_back(ReadFixture(name));
	for (const char *t : {
	         "null", "[1, 2]", "\"c\"", "5", "true", "{}",
	         R"({"ts_ms": 1})", R"({"ts_ms": 1, "ts_us": {"x": [1]}})", R"({"ts_ms": 1, "status": "BEGIN", "id": "7"})",
	         R"({"status": "END", "id": {"a": 1}})", R"({"status": "BEGIN"})",
	         R"({"op": "c", "after": {"id": 1, "j": {"a": [1, {"b": null}]}, "n": 1.50, "t": "x\ny"}, "source": {"lsn": 1e2}})",
	         R"({"op": "c", "after": {"id": 1}, "source": {"lsn": "abc", "version": 1}})",
	         R"({"op": "c", "after": {"id": 1}, "source": {"lsn": "FFFFFFFF/0"}})",
	         R"({"op": "c", "after": {"id": 1}, "source": {"lsn": 99999999999999999999}})",
	         R"({"op": "c", "after": {"id": 1}, "source": {"lsn": [1]}})",
	         R"({"op": "c", "after": {"id": 1}, "source": {"name": {"a": [1, 2]}, "ts_ms": 1.5}})",
	         R"({"op": "c", "after": {"id": 1}, "source": {"txId": "12", "ts_ms": 1.0E+2, "snapshot": "last"}})",
	         R"({"op": "c", "after": {"id": 1}, "source": {"snapshot": {"a": 1}}})",
	         R"({"op": "c", "after": {"id": 1}, "source": {"db": true}})",
	         R"({"op": "c", "after": {"id": 1}, "source": [1, 2]})",
	         R"({"op": "c", "after": {"id": 1}, "transaction": {"id": {"k": [1]}, "total_order": "3"}})",
	         R"({"op": "c", "after": {"id": 1}, "transaction": {"id": 7, "total_order": 2147483648}})",
	         R"({"op": "c", "after": {"id": 1}, "transaction": {"total_order": "x", "data_collection_order": 1}})",
	         R"({"op": "c", "after": {"id": 1}, "transaction": 5})",
	         R"({"op": {"c": 1}, "after": {"id": 1}})", R"({"op": "x"})", R"({"op": "m", "after": 1})",
	         R"({"op": "r", "after": [1], "ts_ns": 1})", R"({"op": "u", "after": null})",
	         R"({"op": "d", "after": {"id": 1}, "extra": {"before": {"id": 1}}})", R"({"op": "d", "before": "x"})",
	         R"({"op": "t", "source": {"schema": "s", "table": "t", "snapshot": true}})",
	         R"({"schema": {"fields": [{"field": "after", "type": "struct", "fields": [{"field": "id", "type": "int32"}]}]},
	             "payload": {"op": "c", "after": {"id": 1}, "schema": {"x": 1}, "payload": {"op": "d"}, "ts_ms": 2}})",
	         R"({"schema": null, "payload": {"ts_ms": 2}})", R"({"schema": {}, "payload": null})",
	         R"({"schema": {}, "payload": {"ts_ms": 2, "version": 1}})", R"({"schema": [], "payload": 3})",
	         R"({"op": "c", "after": {"id": 1}, "payload": {"op": "d"}, "schema": {}})"})
		texts.push_back(t);
	for (const std::string &text : texts) {
		const Json whole = Json::Parse(text);
		const std::string expected = ParseOutcome(whole);
		EXPECT_EQ(ViewOutcome(JsonTreeView(whole)), expected) << text;
		const Json pruned = PruneEnvelope(whole);
		IntakeLikeView intake(pruned);
		EXPECT_EQ(ViewOutcome(intake), expected) << text;
		EXPECT_EQ(intake.misses, 0) << text;
	}
}

// JsonTreeView answers from the tree itself: nodes are its values, a
// member is found by name, Tree() hands back the node (no copy).
TEST(Envelope, TreeViewReadsTheTreeInPlace)
{
	const Json j = Json::Parse(R"({"a": 1.50, "b": "x", "c": [true, null], "d": {"e": false}})");
	const JsonTreeView v(j);
	const JsonView::Node root = v.Root();
	EXPECT_EQ(root, &j);
	EXPECT_EQ(v.KindOf(root), Json::Kind::Object);
	EXPECT_EQ(v.SizeOf(root), 4u);
	EXPECT_EQ(v.KeyAt(root, 2), "c");
	EXPECT_EQ(v.ScalarOf(v.Member(root, "a")), "1.50");
	EXPECT_EQ(v.ScalarOf(v.Member(root, "b")), "x");
	EXPECT_EQ(v.Member(root, "z"), nullptr);
	EXPECT_EQ(v.Member(v.Member(root, "b"), "b"), nullptr); /* not an object */
	const JsonView::Node c = v.Member(root, "c");
	EXPECT_EQ(v.KindOf(c), Json::Kind::Array);
	EXPECT_EQ(v.SizeOf(c), 2u);
	EXPECT_TRUE(v.BoolOf(v.ValueAt(c, 0)));
	EXPECT_EQ(v.KindOf(v.ValueAt(c, 1)), Json::Kind::Null);
	EXPECT_EQ(v.ScalarOf(v.ValueAt(c, 0)), "");
	Json storage;
	EXPECT_EQ(&v.Tree(v.Member(root, "d"), storage), j.Find("d"));
	EXPECT_TRUE(storage.IsNull());
	/* the images are left in the document, as its nodes */
	const Json e = Json::Parse(R"({"op": "u", "before": {"id": 1}, "after": {"id": 2}})");
	const JsonTreeView ev(e);
	ChangeEvent parsed = ParseDebeziumEnvelope(ev);
	EXPECT_EQ(parsed.view, &ev);
	EXPECT_EQ(parsed.before_node, e.Find("before"));
	EXPECT_EQ(parsed.after_node, e.Find("after"));
	EXPECT_FALSE(parsed.before || parsed.after);
	EXPECT_TRUE(parsed.HasBefore() && parsed.HasAfter());
}

TEST(Envelope, MemberPartsFollowTheWrapper)
{
	EXPECT_EQ(EnvelopeMemberPart(EnvelopePart::Root, "payload"), EnvelopePart::Payload);
	EXPECT_EQ(EnvelopeMemberPart(EnvelopePart::Root, "schema"), EnvelopePart::Whole);
	EXPECT_EQ(EnvelopeMemberPart(EnvelopePart::Payload, "payload"), EnvelopePart::Skipped); /* unwrapped once */
	EXPECT_EQ(EnvelopeMemberPart(EnvelopePart::Payload, "schema"), EnvelopePart::Skipped);
	EXPECT_EQ(EnvelopeMemberPart(EnvelopePart::Payload, "source"), EnvelopePart::Source);
	EXPECT_EQ(EnvelopeMemberPart(EnvelopePart::Payload, "ts_ms"), EnvelopePart::Skipped);
	EXPECT_EQ(EnvelopeMemberPart(EnvelopePart::Source, "schema"), EnvelopePart::Whole);
	EXPECT_EQ(EnvelopeMemberPart(EnvelopePart::Source, "ts_us"), EnvelopePart::Skipped);
	EXPECT_EQ(EnvelopeMemberPart(EnvelopePart::Transaction, "total_order"), EnvelopePart::Whole);
	EXPECT_EQ(EnvelopeMemberPart(EnvelopePart::Transaction, "data_collection_order"), EnvelopePart::Skipped);
	EXPECT_EQ(EnvelopeMemberPart(EnvelopePart::Whole, "anything"), EnvelopePart::Whole);
}

TEST(Envelope, VersionRule)
{
	auto ev = ParseDebeziumEnvelope(Json::Parse(
	    R"({"op":"u","after":{"id":1},"source":{"lsn":"0/9FF0","commit_lsn":"0/A180"},"transaction":{"id":"1199","total_order":2}})"));
	EXPECT_EQ(DeriveDebeziumVersion(ev, 3).parts.ToVector(), (std::vector<int64_t>{3, 0xA180, 0x9FF0, 2}));
	auto snap = ParseDebeziumEnvelope(Json::Parse(R"({"op":"r","after":{"id":1},"source":{"lsn":"0/A000"}})"));
	EXPECT_EQ(DeriveDebeziumVersion(snap, 0).parts.ToVector(), (std::vector<int64_t>{0, 0xA000, 0, 0}));
	// B10: a change committed after the snapshot point wins although its change LSN is lower.
	EXPECT_GT(Version::Compare(DeriveDebeziumVersion(ev, 0), DeriveDebeziumVersion(snap, 0)), 0);
	auto before_snap = ParseDebeziumEnvelope(
	    Json::Parse(R"({"op":"c","after":{"id":2},"source":{"lsn":"0/9F80","commit_lsn":"0/9FC0"}})"));
	EXPECT_LT(Version::Compare(DeriveDebeziumVersion(before_snap, 0), DeriveDebeziumVersion(snap, 0)), 0);
}

TEST(Envelope, DeliveryKeyIsTheSourceIdentity)
{
	ChangeEvent ev = ParseFixture("pg-update-replica-identity-default.payload-only.json");
	EXPECT_EQ(DeriveDeliveryKey(ev, "{\"id\": \"1\"}"),
	          "dbz:PostgreSQL_server:postgres:public.customers:u:24023128:556::{\"id\": \"1\"}");
	ChangeEvent del = ParseFixture("pg-delete-replica-identity-default.payload-only.json");
	EXPECT_NE(DeriveDeliveryKey(ev, "k"), DeriveDeliveryKey(del, "k"));
}

// Names holding their separator (or a double quote) are quoted, so two
// source identities never derive one key (sql/new_user_s32.sql).
TEST(Envelope, DeliveryKeyQuotesNamesWithSeparators)
{
	SourceInfo a, b;
	a.name = "a:b"; a.db = "c"; a.schema = "public"; a.table = "t"; a.lsn = 100;
	b.name = "a"; b.db = "b:c"; b.schema = "public"; b.table = "t"; b.lsn = 100;
	EXPECT_NE(DeriveDeliveryKey(a, Op::Create, std::nullopt, "k"), DeriveDeliveryKey(b, Op::Create, std::nullopt, "k"));
	EXPECT_EQ(DeriveDeliveryKey(a, Op::Create, std::nullopt, "k"), "dbz:\"a:b\":c:public.t:c:100:::k");
	SourceInfo c = b, d = b;
	c.db = "d"; c.schema = "x.y"; c.table = "z";
	d.db = "d"; d.schema = "x"; d.table = "y.z";
	EXPECT_NE(DeriveDeliveryKey(c, Op::Create, std::nullopt, "k"), DeriveDeliveryKey(d, Op::Create, std::nullopt, "k"));
	EXPECT_EQ(DeriveDeliveryKey(d, Op::Create, std::nullopt, "k"), "dbz:a:d:x.y.z:c:100:::k");
	c.schema = "\"q\"";
	EXPECT_EQ(DeriveDeliveryKey(c, Op::Create, std::nullopt, "k"), "dbz:a:d:\"\\\"q\\\"\".z:c:100:::k");
}

// ------------------------------------------------------------ decision

namespace {
DecisionInput
Input(Version v, bool is_delete = false, std::string hash = "h")
{
	DecisionInput in;
	in.version = std::move(v);
	in.source = "srv";
	in.is_delete = is_delete;
	in.content_hash = std::move(hash);
	in.row_exists = true;
	return in;
}
EntityRecord
Stored(Version v, bool deleted = false, std::string hash = "h", std::string source = "srv")
{
	return EntityRecord{std::move(v), deleted, std::move(hash), std::move(source)};
}
} // namespace

TEST(Decision, NewEntityApplies)
{
	EXPECT_EQ(Decide(Input(Version{{0, 10}})).outcome, Outcome::Applied);
}

TEST(Decision, OlderIsStaleAndTombstonesBlockResurrection)
{
	auto in = Input(Version{{0, 10}});
	in.stored = Stored(Version{{0, 20}});
	auto d = Decide(in);
	EXPECT_EQ(d.outcome, Outcome::Stale);
	EXPECT_FALSE(d.blocked_resurrection);
	in.stored = Stored(Version{{0, 20}}, true, "delete");
	d = Decide(in);
	EXPECT_EQ(d.outcome, Outcome::Stale);
	EXPECT_TRUE(d.blocked_resurrection);
	auto del = Input(Version{{0, 10}}, true, "delete");
	del.stored = Stored(Version{{0, 20}}, true, "delete");
	EXPECT_FALSE(Decide(del).blocked_resurrection) << "an old delete resurrects nothing";
}

TEST(Decision, NewerReCreationReplacesTombstone)
{
	auto in = Input(Version{{0, 30}});
	in.stored = Stored(Version{{0, 20}}, true, "delete");
	in.row_exists = false;
	EXPECT_EQ(Decide(in).outcome, Outcome::Applied);
}

TEST(Decision, EqualVersionDuplicateOrConflict)
{
	auto in = Input(Version{{0, 10}}, false, "h1");
	in.stored = Stored(Version{{0, 10}}, false, "h1");
	EXPECT_EQ(Decide(in).outcome, Outcome::Duplicate);
	in.content_hash = "h2";
	EXPECT_EQ(Decide(in).outcome, Outcome::Conflict);
	auto del = Input(Version{{0, 10}}, true, "h1");
	del.stored = Stored(Version{{0, 10}}, false, "h1");
	EXPECT_EQ(Decide(del).outcome, Outcome::Conflict) << "a delete and an upsert at one version differ";
}

TEST(Decision, ContentHashDecidesOnlyAtTheStoredVersion)
{
	auto in = Input(Version{{0, 10}}, false, "h1");
	EXPECT_FALSE(ContentHashDecides(in)) << "no record";
	in.stored = Stored(Version{{0, 9}});
	EXPECT_FALSE(ContentHashDecides(in)) << "newer";
	in.stored = Stored(Version{{0, 11}});
	EXPECT_FALSE(ContentHashDecides(in)) << "older";
	in.stored = Stored(Version{{0, 10}}, false, "h1", "other");
	EXPECT_FALSE(ContentHashDecides(in)) << "another source";
	in.stored = Stored(Version{{0, 10}}, false, "h1");
	EXPECT_TRUE(ContentHashDecides(in));
	in.barrier = Version{{0, 10}};
	EXPECT_FALSE(ContentHashDecides(in)) << "stale by the barrier";
	/* wherever it says no, any hash gives the same decision */
	for (int stored : {-1, 9, 10, 11})
		for (int barrier : {-1, 5, 10}) {
			auto a = Input(Version{{0, 10}}, false, "h1");
			if (stored >= 0)
				a.stored = Stored(Version{{0, stored}}, false, "h1");
			if (barrier >= 0)
				a.barrier = Version{{0, barrier}};
			auto b = a;
			b.content_hash = "other";
			if (!ContentHashDecides(a))
				EXPECT_EQ(Decide(a).outcome, Decide(b).outcome) << stored << " " << barrier;
			else
				EXPECT_NE(Decide(a).outcome, Decide(b).outcome) << stored << " " << barrier;
		}
}

TEST(Decision, TruncateBarrier)
{
	auto in = Input(Version{{0, 10}});
	in.barrier = Version{{0, 10}};
	EXPECT_EQ(Decide(in).outcome, Outcome::Stale);
	in.version = Version{{0, 11}};
	EXPECT_EQ(Decide(in).outcome, Outcome::Applied);
}

TEST(Decision, OtherSourceIsNeverCompared)
{
	auto in = Input(Version{{0, 99}});
	in.stored = Stored(Version{{0, 10}}, false, "h", "other-server");
	auto d = Decide(in);
	EXPECT_EQ(d.outcome, Outcome::Conflict);
	EXPECT_NE(d.reason.find("different sources"), std::string::npos);
}

TEST(Decision, UnavailableValuesNeedAnExistingRow)
{
	auto in = Input(Version{{0, 10}});
	in.has_unavailable = true;
	in.row_exists = false;
	EXPECT_EQ(Decide(in).outcome, Outcome::Conflict);
	in.row_exists = true;
	EXPECT_EQ(Decide(in).outcome, Outcome::Applied);
}

TEST(Decision, PrunedRecordsMakeOldEventsExpired)
{
	// No record, not newer than the prune watermark: cannot be proven new or old.
	auto in = Input(Version{{0, 10}});
	in.watermark = Version{{0, 10}};
	auto d = Decide(in);
	EXPECT_EQ(d.outcome, Outcome::Expired);
	EXPECT_NE(d.reason.find("watermark"), std::string::npos);
	auto del = Input(Version{{0, 5}}, true, "0");
	del.watermark = Version{{0, 10}};
	EXPECT_EQ(Decide(del).outcome, Outcome::Expired) << "a delete is not provable either";
	// Newer than everything pruned: provably new.
	in.version = Version{{0, 11}};
	EXPECT_EQ(Decide(in).outcome, Outcome::Applied);
	// A new epoch is newer than any watermark of the old one.
	in.version = Version{{1, 1}};
	EXPECT_EQ(Decide(in).outcome, Outcome::Applied);
	// A stored record decides; the watermark is not consulted.
	in.version = Version{{0, 5}};
	in.stored = Stored(Version{{0, 3}});
	EXPECT_EQ(Decide(in).outcome, Outcome::Applied);
	// The truncate barrier proves it old first.
	auto b = Input(Version{{0, 5}});
	b.watermark = Version{{0, 10}};
	b.barrier = Version{{0, 7}};
	EXPECT_EQ(Decide(b).outcome, Outcome::Stale);
}

TEST(Decision, OutcomeNames)
{
	EXPECT_STREQ(OutcomeName(Outcome::Applied), "applied");
	EXPECT_STREQ(OutcomeName(Outcome::Duplicate), "duplicate");
	EXPECT_STREQ(OutcomeName(Outcome::Stale), "stale");
	EXPECT_STREQ(OutcomeName(Outcome::Conflict), "conflict");
	EXPECT_STREQ(OutcomeName(Outcome::Ignored), "ignored");
	EXPECT_STREQ(OutcomeName(Outcome::Expired), "expired");
}

// Stream ordering (docs/semantics.md, "Stream ordering").
TEST(StreamOrdering, AtOrBelowTheMarkWasProcessed)
{
	const Version mark{{0, 500, 3, 0}};
	EXPECT_TRUE(StreamProcessed(Version{{0, 400, 9, 0}}, false, mark));
	EXPECT_TRUE(StreamProcessed(Version{{0, 500, 3, 0}}, false, mark)) << "the mark itself was applied";
	EXPECT_FALSE(StreamProcessed(Version{{0, 500, 4, 0}}, false, mark));
	EXPECT_FALSE(StreamProcessed(Version{{1, 1, 1, 0}}, false, mark)) << "a bumped epoch is always newer";
}

TEST(StreamOrdering, SnapshotRowsShareTheirCopyPoint)
{
	// every row of one copy has version {epoch, copy point, 0, 0}: after the
	// first one moved the mark there, the others are still new
	const Version point{{0, 700, 0, 0}};
	EXPECT_FALSE(StreamProcessed(point, true, point));
	EXPECT_TRUE(StreamProcessed(Version{{0, 600, 0, 0}}, true, point)) << "an older copy is processed";
	EXPECT_TRUE(StreamProcessed(point, false, point)) << "a streamed change at the mark is not";
}

TEST(StreamOrdering, TheMarkIsTheImplicitRecordOfKeysWithoutOne)
{
	auto in = Input(Version{{0, 10}});
	in.stream_mark = Version{{0, 20}};
	EXPECT_EQ(Decide(in).outcome, Outcome::Duplicate);
	in.version = Version{{0, 20}};
	EXPECT_EQ(Decide(in).outcome, Outcome::Duplicate);
	in.version = Version{{0, 21}};
	EXPECT_EQ(Decide(in).outcome, Outcome::Applied);
	// a stored record wins over the mark, and the mark comes before the watermark
	in.version = Version{{0, 15}};
	in.stored = Stored(Version{{0, 12}});
	EXPECT_EQ(Decide(in).outcome, Outcome::Applied);
	in.stored.reset();
	in.watermark = Version{{0, 30}};
	EXPECT_EQ(Decide(in).outcome, Outcome::Duplicate);
}

// Unit tests for src/core/decode.cpp (Debezium value -> PostgreSQL text).
//
// Expected literals were derived by hand (see the comments) and cross-checked
// against a PostgreSQL 15 server: date vectors by
//   SELECT 'YYYY-MM-DD [BC]'::date - '1970-01-01'::date
// and timestamp vectors by
//   SELECT extract(epoch FROM '...'::timestamp) * 1000000
// and every literal form produced here is accepted by the type's input
// function (date, timestamp, timestamptz, time, timetz, interval, bytea,
// numeric, bit, arrays).
#include "core/decode.hpp"
#include "core/errors.hpp"
#include "core/json.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace cdc {
namespace {

using Family = ColumnType::Family;

ColumnType
Col(Family f, const std::string &type_name = "", const std::string &name = "c")
{
	ColumnType c;
	c.column = name;
	c.type_name = type_name;
	c.family = f;
	return c;
}

ColumnType
ArrayCol(Family element, const std::string &type_name = "")
{
	ColumnType c = Col(Family::Array, type_name);
	c.element = std::make_shared<ColumnType>(Col(element));
	c.element->column_type_name = type_name; /* as the glue's MakeColumnType sets it */
	return c;
}

FieldSchema
Schema(const std::string &json)
{
	return FieldSchema::FromJson(Json::Parse(json));
}

// Decodes JSON text `value` and returns the text; fails the test if the
// result is not Kind::Text.
std::string
Text(const std::string &value, const FieldSchema *schema, const ColumnType &col, const DecodeOptions &opts = {},
     const std::string &path = "after.c")
{
	DecodedValue d = DecodeValue(Json::Parse(value), schema, col, opts, path);
	EXPECT_EQ(d.kind, DecodedValue::Kind::Text) << "for " << value;
	return d.text;
}

std::string
Text(const std::string &value, const ColumnType &col, const DecodeOptions &opts = {})
{
	return Text(value, nullptr, col, opts);
}

DecodedValue::Kind
KindOf(const std::string &value, const FieldSchema *schema, const ColumnType &col, const DecodeOptions &opts = {})
{
	return DecodeValue(Json::Parse(value), schema, col, opts, "after.c").kind;
}

// Runs f, expecting an InputError with the given SQLSTATE whose message
// contains every string of `message_parts` and whose hint contains
// `hint_part`.
void
ExpectError(const std::function<void()> &f, const std::string &sqlstate, const std::vector<std::string> &message_parts,
            const std::string &hint_part = "")
{
	try {
		f();
		ADD_FAILURE() << "expected InputError " << sqlstate;
	} catch (const InputError &e) {
		EXPECT_EQ(std::string(e.sqlstate()), sqlstate) << e.what();
		for (const std::string &part : message_parts) {
			EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
			    << "message \"" << e.what() << "\" lacks \"" << part << "\"";
		}
		if (!hint_part.empty()) {
			EXPECT_NE(e.hint().find(hint_part), std::string::npos)
			    << "hint \"" << e.hint() << "\" lacks \"" << hint_part << "\"";
		}
	}
}

void
ExpectDecodeError(const std::string &value, const FieldSchema *schema, const ColumnType &col,
                  const std::string &sqlstate, const std::vector<std::string> &message_parts,
                  const std::string &hint_part = "", const DecodeOptions &opts = {},
                  const std::string &path = "after.amount")
{
	std::vector<std::string> parts = message_parts;
	parts.push_back("field \"" + path); // element paths continue with "[i]" or ".value"
	ExpectError([&] { DecodeValue(Json::Parse(value), schema, col, opts, path); }, sqlstate, parts, hint_part);
}

std::string
Bytes(std::initializer_list<int> octets)
{
	std::string s;
	for (int o : octets)
		s.push_back(static_cast<char>(o));
	return s;
}

// --------------------------------------------------------------------------
// Base64

TEST(Base64, DecodesWithAndWithoutPadding)
{
	EXPECT_EQ(Base64Decode(""), std::string());
	EXPECT_EQ(Base64Decode("QQ=="), std::string("A"));
	EXPECT_EQ(Base64Decode("QQ"), std::string("A"));
	EXPECT_EQ(Base64Decode("QUI="), std::string("AB"));
	EXPECT_EQ(Base64Decode("QUI"), std::string("AB"));
	EXPECT_EQ(Base64Decode("QUJD"), std::string("ABC"));
	EXPECT_EQ(Base64Decode("3q2+7w=="), Bytes({0xde, 0xad, 0xbe, 0xef}));
	EXPECT_EQ(Base64Decode("//4="), Bytes({0xff, 0xfe}));
}

TEST(Base64, RejectsBadInput)
{
	EXPECT_FALSE(Base64Decode("Q"));     // 6 bits cannot make a byte
	EXPECT_FALSE(Base64Decode("QUJDR")); // ditto after a full quantum
	EXPECT_FALSE(Base64Decode("QQ="));   // padded but not a multiple of 4
	EXPECT_FALSE(Base64Decode("Q==="));
	EXPECT_FALSE(Base64Decode("QU!D"));
	EXPECT_FALSE(Base64Decode(" QUJD"));
	EXPECT_FALSE(Base64Decode("QU-_")); // URL-safe alphabet is not standard base64
	EXPECT_FALSE(Base64Decode("QQ==QQ=="));
}

TEST(Base64, EncodesAndRoundTrips)
{
	EXPECT_EQ(Base64Encode(""), "");
	EXPECT_EQ(Base64Encode("A"), "QQ==");
	EXPECT_EQ(Base64Encode("AB"), "QUI=");
	EXPECT_EQ(Base64Encode("ABC"), "QUJD");
	EXPECT_EQ(Base64Encode("__debezium_unavailable_value"), "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==");
	std::string all;
	for (int i = 0; i < 256; i++)
		all.push_back(static_cast<char>(i));
	for (size_t n = 0; n <= all.size(); n += 37)
		EXPECT_EQ(Base64Decode(Base64Encode(all.substr(0, n))), all.substr(0, n));
}

// --------------------------------------------------------------------------
// DecimalFromBytes

TEST(DecimalFromBytes, PositiveValues)
{
	// "AN6m" = 000000 001101 111010 100110 = 0x00 0xDE 0xA6; 0xDEA6 = 222*256+166 = 56998.
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("AN6m"), 0), "56998");
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("AN6m"), 2), "569.98");
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("AN6m"), 5), "0.56998");
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("AN6m"), 7), "0.0056998");
	// 0x00 0x80: the leading zero byte keeps 128 positive.
	EXPECT_EQ(DecimalFromBytes(Bytes({0x00, 0x80}), 0), "128");
	EXPECT_EQ(DecimalFromBytes(Bytes({0x01}), 3), "0.001");
	EXPECT_EQ(DecimalFromBytes(Bytes({0x30, 0x39}), 2), "123.45"); // 0x3039 = 12345
}

TEST(DecimalFromBytes, NegativeValues)
{
	// 0xFF38: ~ -> 0x00C7, +1 -> 0x00C8 = 200, so -200.
	EXPECT_EQ(DecimalFromBytes(Bytes({0xff, 0x38}), 0), "-200");
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("/zg="), 2), "-2.00");
	EXPECT_EQ(DecimalFromBytes(Bytes({0xff, 0x38}), 1), "-20.0");
	EXPECT_EQ(DecimalFromBytes(Bytes({0x80}), 0), "-128"); // magnitude 0x80 after negation
	EXPECT_EQ(DecimalFromBytes(Bytes({0xff}), 0), "-1");
	EXPECT_EQ(DecimalFromBytes(Bytes({0xff}), 5), "-0.00001");
	EXPECT_EQ(DecimalFromBytes(Bytes({0xfb}), 1), "-0.5"); // -5
	EXPECT_EQ(DecimalFromBytes(Bytes({0xff, 0xff, 0xff, 0xff}), 0), "-1");
}

TEST(DecimalFromBytes, ZeroAndScales)
{
	EXPECT_EQ(DecimalFromBytes("", 0), "0");
	EXPECT_EQ(DecimalFromBytes("", 2), "0.00");
	EXPECT_EQ(DecimalFromBytes(Bytes({0x00}), 0), "0");
	EXPECT_EQ(DecimalFromBytes(Bytes({0x00, 0x00}), 3), "0.000");
	// Negative scale: the unscaled value times 10^-scale.
	EXPECT_EQ(DecimalFromBytes(Bytes({0x05}), -2), "500");
	EXPECT_EQ(DecimalFromBytes(Bytes({0xfb}), -3), "-5000");
	EXPECT_EQ(DecimalFromBytes(Bytes({0x00}), -2), "0");
}

TEST(DecimalFromBytes, BigValues)
{
	// 10^9 = 0x3B9ACA00 and 10^9 + 1: the nine-digit groups must be zero-padded.
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("O5rKAA=="), 0), "1000000000");
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("O5rKAQ=="), 0), "1000000001");
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("O5rKAQ=="), 9), "1.000000001");
	// 2^64 = 0x01 followed by eight zero bytes.
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("AQAAAAAAAAAA"), 0), "18446744073709551616");
	// -2^63 = 0x80 00 00 00 00 00 00 00.
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("gAAAAAAAAAA="), 0), "-9223372036854775808");
	// A 17-byte value (Python: (-123456789012345678901234567890123456789).to_bytes(17, 'big', signed=True)).
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("/6MfFlqf6gE6VSBc11HGfus="), 0), "-123456789012345678901234567890123456789");
	EXPECT_EQ(DecimalFromBytes(*Base64Decode("/6MfFlqf6gE6VSBc11HGfus="), 10),
	          "-12345678901234567890123456789.0123456789");
	// 10^40 - 1 (forty nines), built as bytes by hand-free arithmetic: 9...9 = 0x1D6329F1C35CA4BFABB9F560FFFFFFFFFF.
	EXPECT_EQ(DecimalFromBytes(Bytes({0x1d, 0x63, 0x29, 0xf1, 0xc3, 0x5c, 0xa4, 0xbf, 0xab, 0xb9, 0xf5, 0x60, 0xff,
	                                  0xff, 0xff, 0xff, 0xff}),
	                           0),
	          std::string(40, '9'));
}

// --------------------------------------------------------------------------
// Dates, times, timestamps

TEST(DateFromEpochDays, AroundTheEpoch)
{
	EXPECT_EQ(DateFromEpochDays(0), "1970-01-01");
	EXPECT_EQ(DateFromEpochDays(1), "1970-01-02");
	EXPECT_EQ(DateFromEpochDays(-1), "1969-12-31");
	EXPECT_EQ(DateFromEpochDays(-365), "1969-01-01");
	EXPECT_EQ(DateFromEpochDays(11016), "2000-02-29");  // leap day of a 400-year
	EXPECT_EQ(DateFromEpochDays(-25508), "1900-03-01"); // 1900 is not leap: Feb 28 is the day before
	EXPECT_EQ(DateFromEpochDays(-25509), "1900-02-28");
	EXPECT_EQ(DateFromEpochDays(19000), "2022-01-08");
}

TEST(DateFromEpochDays, BeforeTheCommonEra)
{
	// PostgreSQL: '0001-01-01'::date - '1970-01-01'::date = -719162.
	EXPECT_EQ(DateFromEpochDays(-719162), "0001-01-01");
	// The day before is astronomical year 0 = 1 BC.
	EXPECT_EQ(DateFromEpochDays(-719163), "0001-12-31 BC");
	EXPECT_EQ(DateFromEpochDays(-719528), "0001-01-01 BC");
	EXPECT_EQ(DateFromEpochDays(-719469), "0001-02-29 BC"); // year 0 is leap
	EXPECT_EQ(DateFromEpochDays(-720930), "0005-02-29 BC"); // year -4 is leap
	EXPECT_EQ(DateFromEpochDays(-735160), "0044-03-15 BC");
	// PostgreSQL's range: 4714-11-24 BC (Julian day 0) .. 5874897-12-31.
	EXPECT_EQ(DateFromEpochDays(-2440588), "4714-11-24 BC");
	EXPECT_EQ(DateFromEpochDays(2145042905), "5874897-12-31");
}

TEST(TimestampFromEpochMicros, FloorsNegativeValues)
{
	EXPECT_EQ(TimestampFromEpochMicros(0), "1970-01-01 00:00:00.000000");
	EXPECT_EQ(TimestampFromEpochMicros(-1), "1969-12-31 23:59:59.999999");
	EXPECT_EQ(TimestampFromEpochMicros(-1000000), "1969-12-31 23:59:59.000000");
	EXPECT_EQ(TimestampFromEpochMicros(-86400000000LL), "1969-12-31 00:00:00.000000");
	// Debezium docs: TIMESTAMP "2018-06-20 15:13:16.945104" is MicroTimestamp 1529507596945104.
	EXPECT_EQ(TimestampFromEpochMicros(1529507596945104LL), "2018-06-20 15:13:16.945104");
	EXPECT_EQ(TimestampFromEpochMicros(-14182939876544LL), "1969-07-20 20:17:40.123456");
	EXPECT_EQ(TimestampFromEpochMicros(-2208988800000000LL), "1900-01-01 00:00:00.000000");
	EXPECT_EQ(TimestampFromEpochMicros(-63517780800000000LL), "0044-03-15 12:00:00.000000 BC");
	EXPECT_EQ(TimestampFromEpochMicros(std::numeric_limits<int64_t>::max()), "294247-01-10 04:00:54.775807");
}

TEST(TimeFromMicros, Formats)
{
	EXPECT_EQ(TimeFromMicros(0), "00:00:00.000000");
	EXPECT_EQ(TimeFromMicros(45296789012LL), "12:34:56.789012");
	EXPECT_EQ(TimeFromMicros(86399999999LL), "23:59:59.999999");
	EXPECT_EQ(TimeFromMicros(86400000000LL), "24:00:00.000000");
	ExpectError([] { TimeFromMicros(-1); }, sqlstate::kDatetimeFieldOverflow, {"negative"});
}

// --------------------------------------------------------------------------
// ArrayLiteral

TEST(ArrayLiteral, QuotesEscapesAndNulls)
{
	EXPECT_EQ(ArrayLiteral({}), "{}");
	EXPECT_EQ(ArrayLiteral({DecodedValue::Text("a"), DecodedValue::Text("b c"), DecodedValue::Null()}),
	          "{\"a\",\"b c\",NULL}");
	EXPECT_EQ(ArrayLiteral({DecodedValue::Text("say \"hi\""), DecodedValue::Text("back\\slash")}),
	          "{\"say \\\"hi\\\"\",\"back\\\\slash\"}");
	EXPECT_EQ(ArrayLiteral({DecodedValue::Text(""), DecodedValue::Text("NULL"), DecodedValue::Text("x,y}")}),
	          "{\"\",\"NULL\",\"x,y}\"}");
	// Nested arrays (already literals) stay unquoted.
	EXPECT_EQ(ArrayLiteral({DecodedValue::Text("{\"1\",\"2\"}"), DecodedValue::Text("{\"3\",NULL}")}),
	          "{{\"1\",\"2\"},{\"3\",NULL}}");
	ExpectError([] { ArrayLiteral({DecodedValue::Unavailable()}); }, sqlstate::kInvalidParameterValue,
	            {"unavailable"});
}

// --------------------------------------------------------------------------
// FieldSchema

TEST(FieldSchema, FromJsonConverterShape)
{
	// The "after" struct of pg-create-with-schema.json (Debezium docs).
	FieldSchema s = Schema(R"({
	    "type": "struct",
	    "fields": [
	        {"type": "int32", "optional": false, "field": "id"},
	        {"type": "string", "optional": false, "field": "first_name"},
	        {"type": "string", "optional": false, "field": "last_name"},
	        {"type": "string", "optional": false, "field": "email"}
	    ],
	    "optional": true,
	    "name": "PostgreSQL_server.inventory.customers.Value",
	    "field": "after"
	})");
	EXPECT_EQ(s.type, "struct");
	EXPECT_EQ(s.field, "after");
	EXPECT_EQ(s.name, "PostgreSQL_server.inventory.customers.Value");
	EXPECT_TRUE(s.optional);
	ASSERT_EQ(s.fields.size(), 4u);
	const FieldSchema *id = s.Member("id");
	ASSERT_NE(id, nullptr);
	EXPECT_EQ(id->type, "int32");
	EXPECT_FALSE(id->optional);
	EXPECT_EQ(s.Member("email")->type, "string");
	EXPECT_EQ(s.Member("nope"), nullptr);

	// Decode the create event's after-image with it.
	EXPECT_EQ(Text("1", s.Member("id"), Col(Family::Integer, "integer")), "1");
	EXPECT_EQ(Text("\"Anne\"", s.Member("first_name"), Col(Family::Text, "text")), "Anne");
	EXPECT_EQ(Text("\"annek@noanswer.org\"", s.Member("email"), Col(Family::Text, "text")), "annek@noanswer.org");
}

TEST(FieldSchema, FromKeySchemaShape)
{
	// pg-key-customers-with-schema.json: "index" and "optional" are strings there.
	Json key = Json::Parse(R"({
	    "schema": {
	        "type": "struct",
	        "name": "PostgreSQL_server.public.customers.Key",
	        "optional": false,
	        "fields": [
	            {"name": "id", "index": "0", "schema": {"type": "INT32", "optional": "false"}}
	        ]
	    },
	    "payload": {"id": "1"}
	})");
	FieldSchema s = FieldSchema::FromJson(*key.Find("schema"));
	EXPECT_EQ(s.type, "struct");
	EXPECT_FALSE(s.optional);
	const FieldSchema *id = s.Member("id");
	ASSERT_NE(id, nullptr);
	EXPECT_EQ(id->type, "int32");
	EXPECT_FALSE(id->optional);
	EXPECT_TRUE(id->name.empty());
	// The payload's quoted "1" decodes to the integer literal.
	DecodedValue d =
	    DecodeValue(*key.Find("payload")->Find("id"), id, Col(Family::Integer, "integer", "id"), {}, "key.id");
	EXPECT_EQ(d.kind, DecodedValue::Kind::Text);
	EXPECT_EQ(d.text, "1");
}

TEST(FieldSchema, JdbcSinkFieldSchemas)
{
	// jdbc-field-schema-primitive-int64.json
	FieldSchema prim = Schema(R"({"schema": {"type": "INT64"}})");
	EXPECT_EQ(prim.type, "int64");
	EXPECT_EQ(Text("1559033904863", &prim, Col(Family::Integer, "bigint")), "1559033904863");

	// jdbc-field-schema-logical-date.json
	FieldSchema date = Schema(R"({"schema": {"type": "INT64", "name": "org.apache.kafka.connect.data.Date"}})");
	EXPECT_EQ(date.type, "int64");
	EXPECT_EQ(date.name, "org.apache.kafka.connect.data.Date");
	EXPECT_EQ(Text("19000", &date, Col(Family::Date, "date")), "2022-01-08");

	// jdbc-field-schema-propagated-source-column-type.json
	FieldSchema prop = Schema(R"({"schema": {"type": "INT8", "parameters": {
	    "__debezium.source.column.type": "TINYINT", "__debezium.source.column.length": "1"}}})");
	EXPECT_EQ(prop.type, "int8");
	EXPECT_EQ(prop.parameters.at("__debezium.source.column.type"), "TINYINT");
	EXPECT_EQ(prop.parameters.at("__debezium.source.column.length"), "1");
	EXPECT_EQ(Text("1", &prop, Col(Family::Integer, "smallint")), "1");
}

TEST(FieldSchema, ParametersItemsAndErrors)
{
	FieldSchema s = Schema(R"({"type": "array", "optional": true, "field": "prices",
	    "items": {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
	              "parameters": {"scale": 2, "connect.decimal.precision": "10"}}})");
	EXPECT_EQ(s.field, "prices");
	ASSERT_TRUE(s.items);
	EXPECT_EQ(s.items->parameters.at("scale"), "2");
	EXPECT_EQ(s.items->parameters.at("connect.decimal.precision"), "10");
	ExpectError([] { Schema("[1]"); }, sqlstate::kInvalidParameterValue, {"field schema"});
	ExpectError([] { Schema(R"({"type": 3})"); }, sqlstate::kInvalidParameterValue, {"type"});
}

// --------------------------------------------------------------------------
// Placeholder

TEST(Placeholder, DefaultAndBase64Forms)
{
	const char *b64 = "\"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==\"";
	for (Family f : {Family::Text, Family::Numeric, Family::Bytea, Family::Json, Family::Timestamp, Family::Integer}) {
		EXPECT_EQ(KindOf("\"__debezium_unavailable_value\"", nullptr, Col(f)), DecodedValue::Kind::Unavailable);
		EXPECT_EQ(KindOf(b64, nullptr, Col(f)), DecodedValue::Kind::Unavailable);
	}
	// Detected before any decoding, whatever the schema says.
	FieldSchema ts = Schema(R"({"type": "int64", "name": "io.debezium.time.MicroTimestamp"})");
	FieldSchema dec = Schema(R"({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}})");
	FieldSchema bytes = Schema(R"({"type": "bytes"})");
	EXPECT_EQ(KindOf("\"__debezium_unavailable_value\"", &ts, Col(Family::Timestamp)), DecodedValue::Kind::Unavailable);
	EXPECT_EQ(KindOf(b64, &dec, Col(Family::Numeric)), DecodedValue::Kind::Unavailable);
	EXPECT_EQ(KindOf(b64, &bytes, Col(Family::Bytea)), DecodedValue::Kind::Unavailable);
}

TEST(Placeholder, OneElementArray)
{
	FieldSchema arr = Schema(R"({"type": "array", "items": {"type": "string"}})");
	EXPECT_EQ(KindOf("[\"__debezium_unavailable_value\"]", &arr, ArrayCol(Family::Text)),
	          DecodedValue::Kind::Unavailable);
	EXPECT_EQ(KindOf("[\"__debezium_unavailable_value\"]", nullptr, ArrayCol(Family::Text)),
	          DecodedValue::Kind::Unavailable);
	EXPECT_EQ(KindOf("[\"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==\"]", nullptr, ArrayCol(Family::Bytea)),
	          DecodedValue::Kind::Unavailable);
	// Not a placeholder: two elements, or the placeholder inside a longer array.
	EXPECT_EQ(Text("[\"__debezium_unavailable_value\", \"x\"]", &arr, ArrayCol(Family::Text)),
	          "{\"__debezium_unavailable_value\",\"x\"}");
	EXPECT_EQ(Text("[\"other\"]", &arr, ArrayCol(Family::Text)), "{\"other\"}");
}

TEST(Placeholder, CustomAndHexPlaceholders)
{
	DecodeOptions opts;
	opts.placeholder = "__toast__";
	EXPECT_EQ(KindOf("\"__toast__\"", nullptr, Col(Family::Text), opts), DecodedValue::Kind::Unavailable);
	EXPECT_EQ(KindOf(("\"" + Base64Encode("__toast__") + "\"").c_str(), nullptr, Col(Family::Bytea), opts),
	          DecodedValue::Kind::Unavailable);
	// The default one is ordinary text once the mapping has its own.
	EXPECT_EQ(Text("\"__debezium_unavailable_value\"", Col(Family::Text), opts), "__debezium_unavailable_value");

	// "hex:" placeholder: the octets 'a' 'b' 'c' as text, and as base64 "YWJj".
	opts.placeholder = "hex:616263";
	EXPECT_EQ(KindOf("\"abc\"", nullptr, Col(Family::Text), opts), DecodedValue::Kind::Unavailable);
	EXPECT_EQ(KindOf("\"YWJj\"", nullptr, Col(Family::Bytea), opts), DecodedValue::Kind::Unavailable);
	EXPECT_EQ(KindOf("[\"YWJj\"]", nullptr, ArrayCol(Family::Bytea), opts), DecodedValue::Kind::Unavailable);
	EXPECT_EQ(Text("\"abcd\"", Col(Family::Text), opts), "abcd");

	// An empty placeholder disables detection (an empty string is a value).
	opts.placeholder = "";
	EXPECT_EQ(Text("\"\"", Col(Family::Text), opts), "");
}

TEST(NullValues, JsonNullIsSqlNull)
{
	FieldSchema ts = Schema(R"({"type": "int64", "optional": false, "name": "io.debezium.time.MicroTimestamp"})");
	EXPECT_EQ(KindOf("null", nullptr, Col(Family::Text)), DecodedValue::Kind::Null);
	EXPECT_EQ(KindOf("null", &ts, Col(Family::Timestamp)), DecodedValue::Kind::Null); // NOT NULL is PostgreSQL's job
	EXPECT_EQ(KindOf("null", nullptr, Col(Family::Timestamp)), DecodedValue::Kind::Null);
}

// --------------------------------------------------------------------------
// Decimals with schema

TEST(SchemaDecimal, FixedScale)
{
	FieldSchema s = Schema(R"({"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal",
	    "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "10"}, "field": "amount"})");
	ColumnType num = Col(Family::Numeric, "numeric(10,2)", "amount");
	EXPECT_EQ(Text("\"AN6m\"", &s, num), "569.98");
	EXPECT_EQ(Text("\"/zg=\"", &s, num), "-2.00");
	EXPECT_EQ(Text("\"AA==\"", &s, num), "0.00");
	// Numeric scale parameter.
	FieldSchema s3 = Schema(R"({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": 3}})");
	EXPECT_EQ(Text("\"AN6m\"", &s3, num), "56.998");
	// money.fraction.digits-like scale 0 into a text column.
	FieldSchema s0 = Schema(R"({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "0"}})");
	EXPECT_EQ(Text("\"/zg=\"", &s0, Col(Family::Text)), "-200");
}

TEST(SchemaDecimal, Errors)
{
	ColumnType num = Col(Family::Numeric, "numeric", "amount");
	FieldSchema noscale = Schema(R"({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal"})");
	ExpectDecodeError("\"AN6m\"", &noscale, num, sqlstate::kInvalidParameterValue,
	                  {"base64-encoded decimal has no scale"}, "decimal.handling.mode=string");
	FieldSchema badscale = Schema(R"({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "two"}})");
	ExpectDecodeError("\"AN6m\"", &badscale, num, sqlstate::kInvalidParameterValue, {"scale"});
	FieldSchema s = Schema(R"({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}})");
	ExpectDecodeError("\"AN6m!\"", &s, num, sqlstate::kInvalidTextRepresentation, {"base64"});
	ExpectDecodeError("true", &s, num, sqlstate::kInvalidTextRepresentation, {"base64"});
	FieldSchema huge = Schema(R"({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "99999999"}})");
	ExpectDecodeError("\"AN6m\"", &huge, num, sqlstate::kNumericOutOfRange, {"scale"});
	// No bytes is no Decimal (BigInteger writes at least one byte): refused, not 0 (sql/decimal_empty_bytes.sql).
	ExpectDecodeError("\"\"", &s, num, sqlstate::kInvalidTextRepresentation, {"decimal value is empty"});
}

TEST(SchemaDecimal, VariableScale)
{
	FieldSchema s = Schema(R"({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal", "fields": [
	    {"type": "int32", "optional": false, "field": "scale"},
	    {"type": "bytes", "optional": false, "field": "value"}]})");
	ColumnType num = Col(Family::Numeric, "numeric", "amount");
	EXPECT_EQ(Text(R"({"scale": 3, "value": "AN6m"})", &s, num), "56.998");
	EXPECT_EQ(Text(R"({"scale": 0, "value": "/zg="})", &s, num), "-200");
	EXPECT_EQ(Text(R"({"value": "AQ==", "scale": "4"})", &s, num), "0.0001");
	ExpectDecodeError(R"({"scale": 3})", &s, num, sqlstate::kInvalidTextRepresentation, {"VariableScaleDecimal"});
	ExpectDecodeError(R"("AN6m")", &s, num, sqlstate::kInvalidTextRepresentation, {"VariableScaleDecimal"});
	ExpectDecodeError(R"({"scale": 1.5, "value": "AN6m"})", &s, num, sqlstate::kInvalidTextRepresentation, {"scale"},
	                  "", {}, "after.amount");
	ExpectDecodeError(R"({"scale": 1, "value": "***"})", &s, num, sqlstate::kInvalidTextRepresentation,
	                  {"after.amount.value", "base64"});
	ExpectDecodeError(R"({"scale": 2, "value": ""})", &s, num, sqlstate::kInvalidTextRepresentation,
	                  {"decimal value is empty"});
	EXPECT_EQ(Text(R"({"scale": 2, "value": "AA=="})", &s, num), "0.00");
}

// --------------------------------------------------------------------------
// Temporal types with schema

TEST(SchemaTemporal, Dates)
{
	FieldSchema d = Schema(R"({"type": "int32", "name": "io.debezium.time.Date"})");
	FieldSchema kd = Schema(R"({"type": "int32", "name": "org.apache.kafka.connect.data.Date"})");
	ColumnType date = Col(Family::Date, "date");
	EXPECT_EQ(Text("0", &d, date), "1970-01-01");
	EXPECT_EQ(Text("-1", &d, date), "1969-12-31");
	EXPECT_EQ(Text("\"-1\"", &d, date), "1969-12-31"); // quoted int, as in some docs
	EXPECT_EQ(Text("-719163", &kd, date), "0001-12-31 BC");
	EXPECT_EQ(Text("-735160", &d, date), "0044-03-15 BC");
	// A date into timestamp columns: midnight; UTC for timestamptz.
	EXPECT_EQ(Text("19000", &d, Col(Family::Timestamp)), "2022-01-08");
	EXPECT_EQ(Text("19000", &d, Col(Family::TimestampTz)), "2022-01-08 00:00:00.000000+00");
	EXPECT_EQ(Text("-719163", &d, Col(Family::TimestampTz)), "0001-12-31 00:00:00.000000+00 BC");
	ExpectDecodeError("\"2020-01-01\"", &d, date, sqlstate::kInvalidTextRepresentation, {"days since 1970-01-01"});
	ExpectDecodeError("1.5", &d, date, sqlstate::kInvalidTextRepresentation, {"integer"});
	ExpectDecodeError("4294967296", &d, date, sqlstate::kDatetimeFieldOverflow, {"out of range"});
}

TEST(SchemaTemporal, Times)
{
	FieldSchema ms = Schema(R"({"type": "int32", "name": "io.debezium.time.Time"})");
	FieldSchema kms = Schema(R"({"type": "int32", "name": "org.apache.kafka.connect.data.Time"})");
	FieldSchema us = Schema(R"({"type": "int64", "name": "io.debezium.time.MicroTime"})");
	FieldSchema ns = Schema(R"({"type": "int64", "name": "io.debezium.time.NanoTime"})");
	ColumnType time = Col(Family::Time, "time without time zone");
	// 12:34:56.789012 = 45296 s + 0.789012 s.
	EXPECT_EQ(Text("45296789", &ms, time), "12:34:56.789000");
	EXPECT_EQ(Text("45296789", &kms, time), "12:34:56.789000");
	EXPECT_EQ(Text("45296789012", &us, time), "12:34:56.789012");
	EXPECT_EQ(Text("45296789012345", &ns, time), "12:34:56.789012345"); // PostgreSQL rounds to us
	EXPECT_EQ(Text("0", &us, time), "00:00:00.000000");
	EXPECT_EQ(Text("86400000000", &us, time), "24:00:00.000000");
	EXPECT_EQ(Text("45296789012", &us, Col(Family::TimeTz)), "12:34:56.789012+00");
	ExpectDecodeError("-1", &us, time, sqlstate::kDatetimeFieldOverflow, {"out of range"});
	ExpectDecodeError("86400001", &ms, time, sqlstate::kDatetimeFieldOverflow, {"out of range"});
	ExpectDecodeError("\"noon\"", &us, time, sqlstate::kInvalidTextRepresentation, {"microseconds since midnight"});
}

TEST(SchemaTemporal, Timestamps)
{
	FieldSchema ms = Schema(R"({"type": "int64", "name": "io.debezium.time.Timestamp"})");
	FieldSchema kms = Schema(R"({"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"})");
	FieldSchema us = Schema(R"({"type": "int64", "name": "io.debezium.time.MicroTimestamp"})");
	FieldSchema ns = Schema(R"({"type": "int64", "name": "io.debezium.time.NanoTimestamp"})");
	ColumnType ts = Col(Family::Timestamp, "timestamp without time zone");
	ColumnType tstz = Col(Family::TimestampTz, "timestamp with time zone");
	// Debezium docs: 2022-03-03 16:51:30 is io.debezium.time.Timestamp 1646326290000.
	EXPECT_EQ(Text("1646326290000", &ms, ts), "2022-03-03 16:51:30.000000");
	EXPECT_EQ(Text("1646326290000", &kms, ts), "2022-03-03 16:51:30.000000");
	EXPECT_EQ(Text("1529507596945104", &us, ts), "2018-06-20 15:13:16.945104");
	EXPECT_EQ(Text("1529507596945104123", &ns, ts), "2018-06-20 15:13:16.945104123");
	// Timestamp (no zone) into timestamptz: read as UTC.
	EXPECT_EQ(Text("1529507596945104", &us, tstz), "2018-06-20 15:13:16.945104+00");
	// Before 1970: floor division, not truncation.
	EXPECT_EQ(Text("-1", &ms, ts), "1969-12-31 23:59:59.999000");
	EXPECT_EQ(Text("-1", &us, ts), "1969-12-31 23:59:59.999999");
	EXPECT_EQ(Text("-1", &ns, ts), "1969-12-31 23:59:59.999999999");
	EXPECT_EQ(Text("-14182939876544", &us, ts), "1969-07-20 20:17:40.123456");
	EXPECT_EQ(Text("-63517780800000000", &us, ts), "0044-03-15 12:00:00.000000 BC");
	EXPECT_EQ(Text("-63517780800000000", &us, tstz), "0044-03-15 12:00:00.000000+00 BC");
	// +/-infinity as Debezium sends them (PGStatement constants) and int64 extremes.
	EXPECT_EQ(Text("9223372036825200000", &us, ts), "infinity");
	EXPECT_EQ(Text("-9223372036832400000", &us, ts), "-infinity");
	EXPECT_EQ(Text("9223372036825200000", &ms, tstz), "infinity");
	EXPECT_EQ(Text("9223372036854775807", &us, ts), "infinity");
	EXPECT_EQ(Text("-9223372036854775808", &ns, ts), "-infinity");
	ExpectDecodeError("\"yesterday\"", &us, ts, sqlstate::kInvalidTextRepresentation,
	                  {"microseconds since the epoch"});
	ExpectDecodeError("1.5", &us, ts, sqlstate::kInvalidTextRepresentation, {"integer"});
	ExpectDecodeError("1529507596945104.5", &us, ts, sqlstate::kInvalidTextRepresentation, {"integer"});
	// A number is read by its value, as the jsonb form reads numeric_out's text of it: 1.5e15 in
	// the text form is 1500000000000000 in the jsonb form (found by a fresh-user run).
	EXPECT_EQ(Text("1.529507596945104e15", &us, ts), Text("1529507596945104", &us, ts));
	EXPECT_EQ(Text("1529507596945104.0", &us, ts), Text("1529507596945104", &us, ts));
	ExpectDecodeError("1e30", &us, ts, sqlstate::kNumericOutOfRange, {"out of range"});
	ExpectDecodeError("1" + std::string(30, '0'), &us, ts, sqlstate::kNumericOutOfRange, {"out of range"});
	ExpectDecodeError("99999999999999999999", &us, ts, sqlstate::kNumericOutOfRange, {"out of range"});
}

TEST(SchemaTemporal, ZonedStringsAndDurations)
{
	FieldSchema zts = Schema(R"({"type": "string", "name": "io.debezium.time.ZonedTimestamp"})");
	FieldSchema zt = Schema(R"({"type": "string", "name": "io.debezium.time.ZonedTime"})");
	FieldSchema dur = Schema(R"({"type": "int64", "name": "io.debezium.time.MicroDuration"})");
	FieldSchema iso = Schema(R"({"type": "string", "name": "io.debezium.time.Interval"})");
	EXPECT_EQ(Text("\"2018-06-20T15:13:16.945104Z\"", &zts, Col(Family::TimestampTz)), "2018-06-20T15:13:16.945104Z");
	EXPECT_EQ(Text("\"15:13:16.945104Z\"", &zt, Col(Family::TimeTz)), "15:13:16.945104Z");
	// 1 day 1 h 1 min 1 s and 1 us = 90061000001 us.
	EXPECT_EQ(Text("90061000001", &dur, Col(Family::Interval)), "90061000001 microseconds");
	EXPECT_EQ(Text("-1", &dur, Col(Family::Interval)), "-1 microseconds");
	EXPECT_EQ(Text("\"P1Y2M3DT4H5M6.78S\"", &iso, Col(Family::Interval)), "P1Y2M3DT4H5M6.78S");
}

// --------------------------------------------------------------------------
// Other schema types

TEST(SchemaTypes, PrimitivesPassThrough)
{
	FieldSchema i32 = Schema(R"({"type": "int32"})");
	EXPECT_EQ(Text("42", &i32, Col(Family::Integer)), "42");
	FieldSchema i64 = Schema(R"({"type": "int64"})");
	FieldSchema f64 = Schema(R"({"type": "float64"})");
	FieldSchema f32 = Schema(R"({"type": "float32"})");
	FieldSchema b = Schema(R"({"type": "boolean"})");
	FieldSchema str = Schema(R"({"type": "string"})");
	EXPECT_EQ(Text("-9223372036854775808", &i64, Col(Family::Integer)), "-9223372036854775808");
	EXPECT_EQ(Text("1.25e-7", &f64, Col(Family::Float)), "0.000000125"); // as jsonb prints the number (CanonicalNumber)
	EXPECT_EQ(Text("3.5", &f32, Col(Family::Float)), "3.5");
	EXPECT_EQ(Text("\"NaN\"", &f64, Col(Family::Float)), "NaN");
	EXPECT_EQ(Text("123.4500", &f64, Col(Family::Numeric)), "123.4500"); // decimal.handling.mode=double
	EXPECT_EQ(Text("true", &b, Col(Family::Bool)), "true");
	EXPECT_EQ(Text("false", &b, Col(Family::Bool)), "false");
	EXPECT_EQ(Text("true", &b, Col(Family::Bit, "bit(1)")), "1"); // BIT(1) is BOOLEAN in Debezium
	EXPECT_EQ(Text("\"hello \\\"world\\\"\"", &str, Col(Family::Text)), "hello \"world\"");
	EXPECT_EQ(Text("\"12.50\"", &str, Col(Family::Numeric)), "12.50"); // decimal.handling.mode=string
	EXPECT_EQ(Text("\"NAN\"", &str, Col(Family::Numeric)), "NAN");
	ExpectDecodeError("{\"a\": 1}", &str, Col(Family::Text, "text"), sqlstate::kInvalidTextRepresentation,
	                  {"expected a string value"});
}

TEST(SchemaTypes, SemanticStringsAndUnknownNames)
{
	FieldSchema json = Schema(R"({"type": "string", "name": "io.debezium.data.Json"})");
	FieldSchema uuid = Schema(R"({"type": "string", "name": "io.debezium.data.Uuid"})");
	FieldSchema xml = Schema(R"({"type": "string", "name": "io.debezium.data.Xml"})");
	FieldSchema en = Schema(R"({"type": "string", "name": "io.debezium.data.Enum", "parameters": {"allowed": "a,b"}})");
	FieldSchema lt = Schema(R"({"type": "string", "name": "io.debezium.data.Ltree"})");
	FieldSchema custom = Schema(R"({"type": "int32", "name": "com.example.Custom"})");
	EXPECT_EQ(Text(R"("{\"a\": [1, 2]}")", &json, Col(Family::Json, "jsonb")), "{\"a\": [1, 2]}");
	EXPECT_EQ(Text(R"("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")", &uuid, Col(Family::Uuid)),
	          "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
	EXPECT_EQ(Text(R"("<a>1</a>")", &xml, Col(Family::Other, "xml")), "<a>1</a>");
	EXPECT_EQ(Text(R"("b")", &en, Col(Family::Text, "mood")), "b");
	EXPECT_EQ(Text(R"("Top.Science")", &lt, Col(Family::Other, "ltree")), "Top.Science");
	EXPECT_EQ(Text("42", &custom, Col(Family::Integer)), "42");
	// A JSON object given for a json column is serialized, whatever the schema.
	EXPECT_EQ(Text(R"({"a": 1})", &json, Col(Family::Json, "jsonb")), "{\"a\":1}");
}

TEST(SchemaTypes, PlainNumbersForTemporalColumnsFollowTheColumnRule)
{
	FieldSchema i64 = Schema(R"({"type": "int64"})");
	DecodeOptions micro;
	micro.integer_time_unit = TemporalUnit::Micro;
	EXPECT_EQ(Text("1529507596945104", &i64, Col(Family::Timestamp), micro), "2018-06-20 15:13:16.945104");
	ExpectDecodeError("1529507596945104", &i64, Col(Family::Timestamp, "timestamp"),
	                  sqlstate::kInvalidParameterValue, {"no unit"}, "temporal_unit");
	EXPECT_EQ(Text("-1", &i64, Col(Family::Date)), "1969-12-31");
}

TEST(SchemaTypes, Bytes)
{
	FieldSchema b = Schema(R"({"type": "bytes"})");
	EXPECT_EQ(Text("\"AQID/w==\"", &b, Col(Family::Bytea, "bytea")), "\\x010203ff");
	EXPECT_EQ(Text("\"3q2+7w==\"", &b, Col(Family::Bytea, "bytea")), "\\xdeadbeef");
	EXPECT_EQ(Text("\"\"", &b, Col(Family::Bytea, "bytea")), "\\x");
	// Into a text column: the bytes themselves if they are UTF-8.
	EXPECT_EQ(Text("\"aMOpbGxv\"", &b, Col(Family::Text, "text")), "h\xc3\xa9llo");
	ExpectDecodeError("\"//4=\"", &b, Col(Family::Text, "text"), sqlstate::kInvalidTextRepresentation, {"UTF-8"},
	                  "bytea");
	// A NUL byte is valid UTF-8, but no text column can hold it: said as such (review h3).
	ExpectDecodeError("\"AAE=\"", &b, Col(Family::Text, "text"), sqlstate::kInvalidTextRepresentation,
	                  {"contains a NUL byte", "text"}, "bytea");
	ExpectDecodeError("\"not base64!\"", &b, Col(Family::Bytea, "bytea"), sqlstate::kInvalidTextRepresentation,
	                  {"invalid base64"});
	ExpectDecodeError("12", &b, Col(Family::Bytea, "bytea"), sqlstate::kInvalidTextRepresentation, {"base64"});
	// binary.handling.mode=base64 sends a string schema.
	FieldSchema s = Schema(R"({"type": "string"})");
	EXPECT_EQ(Text("\"3q2+7w==\"", &s, Col(Family::Bytea, "bytea")), "\\xdeadbeef");
}

TEST(SchemaTypes, Bits)
{
	FieldSchema bit10 = Schema(R"({"type": "bytes", "name": "io.debezium.data.Bits", "parameters": {"length": "10"}})");
	FieldSchema bit3 = Schema(R"({"type": "bytes", "name": "io.debezium.data.Bits", "parameters": {"length": "3"}})");
	FieldSchema bit9 = Schema(R"({"type": "bytes", "name": "io.debezium.data.Bits", "parameters": {"length": 9}})");
	FieldSchema varbit = Schema(R"({"type": "bytes", "name": "io.debezium.data.Bits", "parameters": {"length": "2147483647"}})");
	FieldSchema nolen = Schema(R"({"type": "bytes", "name": "io.debezium.data.Bits"})");
	ColumnType bit = Col(Family::Bit, "bit(10)");
	// B'0000000100': rightmost character is bit 0, so bit 2 is set: little-endian 0x04 0x00 = "BAA=".
	EXPECT_EQ(Text("\"BAA=\"", &bit10, bit), "0000000100");
	// Trailing zero bytes may be omitted (Debezium sizes the array by content).
	EXPECT_EQ(Text("\"BA==\"", &bit10, bit), "0000000100");
	// B'101' = 5 = 0x05 ("BQ==").
	EXPECT_EQ(Text("\"BQ==\"", &bit3, Col(Family::Bit, "bit(3)")), "101");
	// B'100000001' = 257 = 0x01 0x01 little-endian ("AQE=").
	EXPECT_EQ(Text("\"AQE=\"", &bit9, Col(Family::Bit, "bit(9)")), "100000001");
	// All zeros: Debezium sends no bytes at all.
	EXPECT_EQ(Text("\"\"", &bit3, Col(Family::Bit, "bit(3)")), "000");
	// bit varying: the real length is not sent; the shortest string is used.
	EXPECT_EQ(Text("\"BQ==\"", &varbit, Col(Family::Bit, "bit varying")), "101");
	EXPECT_EQ(Text("\"BQ==\"", &bit10, Col(Family::Bit, "bit varying(10)")), "101");
	EXPECT_EQ(Text("\"AA==\"", &nolen, Col(Family::Bit, "bit varying")), "0");
	EXPECT_EQ(Text("\"AQE=\"", &nolen, Col(Family::Bit)), "100000001");
	ExpectDecodeError("\"CA==\"", &bit3, Col(Family::Bit, "bit(3)"), sqlstate::kInvalidTextRepresentation,
	                  {"bit 3", "length is 3"});
	ExpectDecodeError("\"B?\"", &bit3, Col(Family::Bit, "bit(3)"), sqlstate::kInvalidTextRepresentation,
	                  {"base64"});
}

TEST(SchemaTypes, Arrays)
{
	FieldSchema strs = Schema(R"({"type": "array", "items": {"type": "string", "optional": true}})");
	FieldSchema ints = Schema(R"({"type": "array", "items": {"type": "int32"}})");
	FieldSchema decs = Schema(R"({"type": "array", "items": {"type": "bytes",
	    "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}})");
	FieldSchema dates = Schema(R"({"type": "array", "items": {"type": "int32", "name": "io.debezium.time.Date"}})");
	EXPECT_EQ(Text(R"(["a", "b\"c", null, "d\\e", ""])", &strs, ArrayCol(Family::Text, "text[]")),
	          R"({"a","b\"c",NULL,"d\\e",""})");
	EXPECT_EQ(Text("[1, -2, null]", &ints, ArrayCol(Family::Integer, "integer[]")), R"({"1","-2",NULL})");
	EXPECT_EQ(Text("[]", &ints, ArrayCol(Family::Integer)), "{}");
	EXPECT_EQ(Text(R"(["AN6m", "/zg="])", &decs, ArrayCol(Family::Numeric)), R"({"569.98","-2.00"})");
	EXPECT_EQ(Text("[0, -719163]", &dates, ArrayCol(Family::Date)), R"({"1970-01-01","0001-12-31 BC"})");
	// Element errors name the element.
	ExpectDecodeError(R"(["AN6m", "%%%"])", &decs, ArrayCol(Family::Numeric), sqlstate::kInvalidTextRepresentation,
	                  {"after.amount[1]", "base64"});
	ExpectDecodeError("\"x\"", &strs, ArrayCol(Family::Text), sqlstate::kInvalidTextRepresentation,
	                  {"expected an array"});
	// A placeholder inside a longer array is data, not "unavailable".
	EXPECT_EQ(Text(R"(["__debezium_unavailable_value", null])", &strs, ArrayCol(Family::Text)),
	          R"({"__debezium_unavailable_value",NULL})");
}

TEST(SchemaTypes, StructsAndGeometry)
{
	FieldSchema point = Schema(R"({"type": "struct", "name": "io.debezium.data.geometry.Point", "fields": [
	    {"type": "float64", "field": "x"}, {"type": "float64", "field": "y"}]})");
	FieldSchema geom = Schema(R"({"type": "struct", "name": "io.debezium.data.geometry.Geometry"})");
	ExpectDecodeError(R"({"x": 1, "y": 2})", &point, Col(Family::Other, "point"), sqlstate::kFeatureNotSupported,
	                  {"geometry"});
	ExpectDecodeError(R"({"wkb": "AQ==", "srid": 4326})", &geom, Col(Family::Other, "geometry"),
	                  sqlstate::kFeatureNotSupported, {"geometry"});
	FieldSchema st = Schema(R"({"type": "struct", "name": "com.example.Thing"})");
	FieldSchema map = Schema(R"({"type": "map", "keys": {"type": "string"}, "values": {"type": "string"}})");
	EXPECT_EQ(Text(R"({"k": "v", "n": [1, 2]})", &st, Col(Family::Json, "jsonb")), R"({"k":"v","n":[1,2]})");
	EXPECT_EQ(Text(R"({"key": "val"})", &map, Col(Family::Json, "json")), R"({"key":"val"})"); // hstore as MAP
	ExpectDecodeError(R"({"k": "v"})", &st, Col(Family::Text, "text"), sqlstate::kFeatureNotSupported,
	                  {"com.example.Thing"}, "json");
}

// --------------------------------------------------------------------------
// Without schema: the column decides

TEST(NoSchema, TextLikeColumnsTakeScalars)
{
	for (Family f : {Family::Text, Family::Uuid, Family::Other, Family::Integer, Family::Float}) {
		EXPECT_EQ(Text("\"abc\"", Col(f)), "abc");
		EXPECT_EQ(Text("12.50", Col(f)), "12.50");
		EXPECT_EQ(Text("true", Col(f)), "true");
	}
	EXPECT_EQ(Text("9223372036854775807", Col(Family::Integer)), "9223372036854775807");
	EXPECT_EQ(Text("1.5e300", Col(Family::Float)), "15" + std::string(299, '0')); // as jsonb prints it
	EXPECT_EQ(Text("\"\"", Col(Family::Text)), "");
	EXPECT_EQ(Text("\"h\\u00e9\"", Col(Family::Text)), "h\xc3\xa9");
	ExpectDecodeError(R"({"a": 1})", nullptr, Col(Family::Text, "text"), sqlstate::kInvalidParameterValue,
	                  {"object", "text"});
	ExpectDecodeError("[1]", nullptr, Col(Family::Integer, "integer"), sqlstate::kInvalidParameterValue,
	                  {"array", "integer"});
	ExpectDecodeError("\"a\\u0000b\"", nullptr, Col(Family::Text, "text"), sqlstate::kInvalidTextRepresentation,
	                  {"NUL"});
}

TEST(NoSchema, Bool)
{
	EXPECT_EQ(Text("true", Col(Family::Bool)), "true");
	EXPECT_EQ(Text("false", Col(Family::Bool)), "false");
	EXPECT_EQ(Text("\"t\"", Col(Family::Bool)), "t");
}

TEST(NoSchema, Numeric)
{
	ColumnType num = Col(Family::Numeric, "numeric(12,2)", "amount");
	EXPECT_EQ(Text("12.50", num), "12.50"); // lexeme kept exactly
	EXPECT_EQ(Text("123456789012345678901234567890.12", num), "123456789012345678901234567890.12");
	EXPECT_EQ(Text("-3e2", num), "-300"); // as jsonb prints it: the same value in both forms
	// a string is handed over as written (the column type reads it)
	for (const char *s : {"12.50", "-1.5e-3", "+7", ".5", "5.", "1E10", "NaN", "Infinity", "-Infinity", "inf", "NAN"})
		EXPECT_EQ(Text("\"" + std::string(s) + "\"", num), s);
	// VariableScaleDecimal without schema.
	EXPECT_EQ(Text(R"({"scale": 0, "value": "/zg="})", num), "-200");
	EXPECT_EQ(Text(R"({"scale": 2, "value": "AN6m"})", num), "569.98");
	// Base64 (or any non-number) string: the scale is unknown.
	for (const char *s : {"AN6m", "/zg=", "", "1.2.3", "12e", "e5", "-NaN", "1 000"})
		ExpectDecodeError("\"" + std::string(s) + "\"", nullptr, num, sqlstate::kInvalidParameterValue,
		                  {"neither a decimal number nor a base64-encoded decimal with a known scale"},
		                  "include the Debezium schema (value.converter.schemas.enable=true) or set "
		                  "decimal.handling.mode=string");
	ExpectDecodeError(R"({"x": 1})", nullptr, num, sqlstate::kInvalidParameterValue, {"object"});
}

TEST(NoSchema, Dates)
{
	ColumnType date = Col(Family::Date, "date");
	EXPECT_EQ(Text("0", date), "1970-01-01");
	EXPECT_EQ(Text("-1", date), "1969-12-31");
	EXPECT_EQ(Text("-719163", date), "0001-12-31 BC");
	EXPECT_EQ(Text("\"2020-01-01\"", date), "2020-01-01");
	EXPECT_EQ(Text("\"12345\"", date), "12345"); // strings pass through, even digit strings
	ExpectDecodeError("1.5", nullptr, date, sqlstate::kInvalidTextRepresentation, {"integer"});
}

TEST(NoSchema, TimestampsNeedTemporalUnit)
{
	ColumnType ts = Col(Family::Timestamp, "timestamp without time zone", "created_at");
	for (Family f : {Family::Timestamp, Family::TimestampTz, Family::Time, Family::TimeTz})
		ExpectDecodeError("1529507596945", nullptr, Col(f), sqlstate::kInvalidParameterValue,
		                  {"without schema has no unit"},
		                  "set the mapping option temporal_unit to 'milli', 'micro' or 'nano'", {}, "after.created_at");
	DecodeOptions milli, micro, nano;
	milli.integer_time_unit = TemporalUnit::Milli;
	micro.integer_time_unit = TemporalUnit::Micro;
	nano.integer_time_unit = TemporalUnit::Nano;
	EXPECT_EQ(Text("1646326290000", ts, milli), "2022-03-03 16:51:30.000000");
	EXPECT_EQ(Text("1529507596945104", ts, micro), "2018-06-20 15:13:16.945104");
	EXPECT_EQ(Text("1529507596945104123", ts, nano), "2018-06-20 15:13:16.945104123");
	EXPECT_EQ(Text("-1", ts, micro), "1969-12-31 23:59:59.999999");
	EXPECT_EQ(Text("1529507596945104", Col(Family::TimestampTz), micro), "2018-06-20 15:13:16.945104+00");
	EXPECT_EQ(Text("9223372036825200000", ts, micro), "infinity");
	EXPECT_EQ(Text("45296789", Col(Family::Time), milli), "12:34:56.789000");
	EXPECT_EQ(Text("45296789012", Col(Family::TimeTz), micro), "12:34:56.789012+00");
	ExpectDecodeError("-5", nullptr, Col(Family::Time), sqlstate::kDatetimeFieldOverflow, {"out of range"}, "",
	                  micro);
	ExpectDecodeError("1.5", nullptr, ts, sqlstate::kInvalidTextRepresentation, {"integer"}, "", micro);
	// Strings pass through untouched, with or without a unit.
	EXPECT_EQ(Text("\"2018-06-20T15:13:16.945104Z\"", Col(Family::TimestampTz)), "2018-06-20T15:13:16.945104Z");
	EXPECT_EQ(Text("\"12:00\"", Col(Family::Time)), "12:00");
}

TEST(NoSchema, Interval)
{
	EXPECT_EQ(Text("90061000001", Col(Family::Interval)), "90061000001 microseconds");
	EXPECT_EQ(Text("\"P1Y2M3DT4H5M6.78S\"", Col(Family::Interval)), "P1Y2M3DT4H5M6.78S");
	ExpectDecodeError("1.5", nullptr, Col(Family::Interval), sqlstate::kInvalidTextRepresentation, {"integer"});
}

TEST(NoSchema, Bytea)
{
	ColumnType bytea = Col(Family::Bytea, "bytea", "payload");
	EXPECT_EQ(Text("\"3q2+7w==\"", bytea), "\\xdeadbeef");
	EXPECT_EQ(Text("\"3q2+7w\"", bytea), "\\xdeadbeef");
	// The logical message content of the docs' example: Y=24 m=38 f=31 y=50 ->
	// 011000 100110 011111 110010 -> 0x62 0x67 0xf2.
	EXPECT_EQ(Text("\"Ymfy\"", bytea), "\\x6267f2");
	ExpectDecodeError("\"\\\\x0102\"", nullptr, bytea, sqlstate::kInvalidTextRepresentation, {"invalid base64"},
	                  "binary.handling.mode", {}, "after.payload");
	ExpectDecodeError("12", nullptr, bytea, sqlstate::kInvalidParameterValue, {"base64 string"});
	ExpectDecodeError("[1]", nullptr, bytea, sqlstate::kInvalidParameterValue, {"array"});
}

TEST(NoSchema, Json)
{
	ColumnType json = Col(Family::Json, "jsonb");
	EXPECT_EQ(Text(R"("{\"a\": 1}")", json), "{\"a\": 1}"); // io.debezium.data.Json: the string is the document
	EXPECT_EQ(Text(R"({"b": [1, 2.50, "x", null, true], "c": {}})", json), R"({"b":[1,2.50,"x",null,true],"c":{}})");
	EXPECT_EQ(Text("[1, [2]]", json), "[1,[2]]");
	EXPECT_EQ(Text("3.0", json), "3.0");
	EXPECT_EQ(Text("false", json), "false");
	EXPECT_EQ(Text(R"({"s": "tab\tquote\"nul\u0000"})", json), "{\"s\":\"tab\\tquote\\\"nul\\u0000\"}");
}

TEST(NoSchema, Bit)
{
	ColumnType bit = Col(Family::Bit, "bit(4)");
	EXPECT_EQ(Text("true", bit), "1");
	EXPECT_EQ(Text("false", bit), "0");
	EXPECT_EQ(Text("\"0101\"", bit), "0101");
	EXPECT_EQ(Text("\"x1F\"", bit), "x1F");
	ExpectDecodeError("\"BQ==\"", nullptr, bit, sqlstate::kInvalidParameterValue, {"bit string"},
	                  "value.converter.schemas.enable=true");
}

TEST(NoSchema, Arrays)
{
	EXPECT_EQ(Text("[1, 2, null]", ArrayCol(Family::Integer, "integer[]")), R"({"1","2",NULL})");
	EXPECT_EQ(Text(R"(["a,b", "{c}", " d ", "NULL"])", ArrayCol(Family::Text)), R"({"a,b","{c}"," d ","NULL"})");
	EXPECT_EQ(Text("[]", ArrayCol(Family::Text)), "{}");
	// Multidimensional.
	EXPECT_EQ(Text(R"([["a", "b"], ["c", null]])", ArrayCol(Family::Text)), R"({{"a","b"},{"c",NULL}})");
	// jsonb[]: objects and arrays are elements, quoted even though they start with '{'.
	EXPECT_EQ(Text(R"([{"a": 1}, [1, 2], "x"])", ArrayCol(Family::Json, "jsonb[]")),
	          R"({"{\"a\":1}","[1,2]","x"})");
	// Elements are decoded by the element type.
	EXPECT_EQ(Text(R"(["3q2+7w==", null])", ArrayCol(Family::Bytea)), R"({"\\xdeadbeef",NULL})");
	EXPECT_EQ(Text(R"([0, -1])", ArrayCol(Family::Date)), R"({"1970-01-01","1969-12-31"})");
	EXPECT_EQ(Text(R"(["1.5", 2])", ArrayCol(Family::Numeric)), R"({"1.5","2"})");
	EXPECT_EQ(Text(R"([{"scale": 1, "value": "/zg="}])", ArrayCol(Family::Numeric)), R"({"-20.0"})");
	// An element type left out is treated as text-like.
	ColumnType bare = Col(Family::Array, "text[]");
	EXPECT_EQ(Text(R"(["a", 1])", bare), R"({"a","1"})");
	// A string is taken as an array literal already.
	EXPECT_EQ(Text(R"("{1,2}")", ArrayCol(Family::Integer)), "{1,2}");
	ExpectDecodeError("5", nullptr, ArrayCol(Family::Integer, "integer[]"), sqlstate::kInvalidParameterValue,
	                  {"expected a JSON array"});
	ExpectDecodeError(R"(["AN6m"])", nullptr, ArrayCol(Family::Numeric, "numeric[]"), sqlstate::kInvalidParameterValue,
	                  {"after.amount[0]", "with a known scale"}, "decimal.handling.mode");
	ExpectDecodeError(R"([{"a": 1}])", nullptr, ArrayCol(Family::Text, "text[]"), sqlstate::kInvalidParameterValue,
	                  {"after.amount[0]", "object"});
	DecodeOptions none;
	ExpectDecodeError("[1]", nullptr, ArrayCol(Family::Timestamp), sqlstate::kInvalidParameterValue,
	                  {"after.amount[0]"}, "temporal_unit", none);
}

TEST(Errors, CarryColumnDetail)
{
	try {
		DecodeValue(Json::Parse("\"AN6m\""), nullptr, Col(Family::Numeric, "numeric(10,2)", "amount"), {},
		            "after.amount");
		ADD_FAILURE() << "expected InputError";
	} catch (const InputError &e) {
		EXPECT_EQ(std::string(e.what()).rfind("field \"after.amount\": ", 0), 0u) << e.what();
		EXPECT_NE(e.detail().find("Destination column \"amount\" has type numeric(10,2)."), std::string::npos)
		    << e.detail();
		EXPECT_NE(e.detail().find("\"AN6m\""), std::string::npos) << e.detail();
	}
}

// An element's error names the element type in the message and the
// column's array type in the detail: the detail said 'Destination column
// "a" has type integer.' for an int[] column (fresh-user review h3;
// sql/array_element_detail.sql).
TEST(Errors, ElementErrorDetailNamesTheColumnsType)
{
	ColumnType col = Col(Family::Array, "integer[]", "a");
	col.element = std::make_shared<ColumnType>(Col(Family::Integer, "integer", "a"));
	col.element->column_type_name = "integer[]";
	try {
		DecodeValue(Json::Parse(R"([1, {"x": 1}])"), nullptr, col, {}, "after.a");
		ADD_FAILURE() << "expected InputError";
	} catch (const InputError &e) {
		EXPECT_STREQ(e.what(), "field \"after.a[1]\": JSON object cannot be converted to type integer");
		EXPECT_EQ(e.detail(), "Destination column \"a\" has type integer[].");
	}
}

// The strict ISO form converted without timestamptz_in (image.cpp,
// StrictTimestampPg): its fields, and nothing else accepted.  That the
// converted values equal the input function's is pg_regress
// timestamp_strict_form's business.
TEST(StrictIsoTimestamp, Fields)
{
	auto f = ParseStrictIsoTimestamp("2024-02-29T23:59:59.001Z");
	ASSERT_TRUE(f.has_value());
	EXPECT_EQ(f->year, 2024);
	EXPECT_EQ(f->month, 2);
	EXPECT_EQ(f->day, 29);
	EXPECT_EQ(f->hour, 23);
	EXPECT_EQ(f->minute, 59);
	EXPECT_EQ(f->second, 59);
	EXPECT_EQ(f->micros, 1000);
	EXPECT_EQ(f->offset_seconds, 0);
	f = ParseStrictIsoTimestamp("0001-01-01 00:00:00.123456+05:30");
	ASSERT_TRUE(f.has_value());
	EXPECT_EQ(f->micros, 123456);
	EXPECT_EQ(f->offset_seconds, 19800);
	f = ParseStrictIsoTimestamp("9999-12-31 23:59:59-15");
	ASSERT_TRUE(f.has_value());
	EXPECT_EQ(f->offset_seconds, -54000);
	EXPECT_EQ(f->micros, 0);
	f = ParseStrictIsoTimestamp("2000-02-29T12:00:00.5-00:59");
	ASSERT_TRUE(f.has_value());
	EXPECT_EQ(f->micros, 500000);
	EXPECT_EQ(f->offset_seconds, -3540);
}

TEST(StrictIsoTimestamp, OtherTextsLeftToTheInputFunction)
{
	for (const char *text :
	     {"", "2024-01-01", "2024-01-01T00:00:00", "2024-01-01 00:00:00 UTC", "2024-01-01T00:00:00z",
	      "2024-01-01T00:00:00.0000001Z", "2024-01-01T00:00:00.Z", "2024-01-01T24:00:00Z", "2024-01-01T00:60:00Z",
	      "2024-01-01T00:00:60Z", "2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2024-04-31T00:00:00Z",
	      "2024-00-01T00:00:00Z", "2024-13-01T00:00:00Z", "2024-01-00T00:00:00Z", "0000-01-01T00:00:00Z",
	      "12024-01-01T00:00:00Z", "24-01-01T00:00:00Z", "2024-1-01T00:00:00Z", "2024-01-01t00:00:00Z",
	      "2024-01-01T00:00:00+16", "2024-01-01T00:00:00+05:60", "2024-01-01T00:00:00+5", "2024-01-01T00:00:00+0530",
	      "2024-01-01T00:00:00+05:30:15", "2024-01-01T00:00:00Z ", " 2024-01-01T00:00:00Z", "2024-01-01T00:00:00ZZ",
	      "2024-01-01T00:00:00 +00", "01/02/2024 10:00:00+02", "2024-01-01T00:00:00.001000Z BC", "infinity"})
		EXPECT_FALSE(ParseStrictIsoTimestamp(text).has_value()) << text;
	const std::string with_nul("2024-01-01T00:00:00Z\0", 21);
	EXPECT_FALSE(ParseStrictIsoTimestamp(with_nul).has_value());
}

// A date/time semantic type on a column whose type takes no date/time text
// (an integer, say) is refused quoting the value the event sent, not the
// text decoded from it; text and date/time columns still take the text
// (fresh-user review h3; regress input_polish).
TEST(SchemaTemporal, NonTemporalColumnQuotesTheValueSent)
{
	FieldSchema ts = Schema(R"({"type": "int64", "name": "io.debezium.time.Timestamp"})");
	FieldSchema date = Schema(R"({"type": "int32", "name": "io.debezium.time.Date"})");
	const ColumnType integer = Col(Family::Integer, "integer", "n");
	ExpectDecodeError("1609459200000", &ts, integer, sqlstate::kInvalidTextRepresentation,
	                  {"io.debezium.time.Timestamp value 1609459200000 is a timestamp", "type integer"}, "date/time");
	ExpectDecodeError("18628", &date, Col(Family::Numeric, "numeric"), sqlstate::kInvalidTextRepresentation,
	                  {"io.debezium.time.Date value 18628 is a date", "type numeric"});
	EXPECT_EQ(Text("1609459200000", &ts, Col(Family::Text, "text")), "2021-01-01 00:00:00.000000");
	EXPECT_EQ(Text("18628", &date, Col(Family::Date, "date")), "2021-01-01");
}

} // namespace
} // namespace cdc

// Error excerpts of long values are cut at a UTF-8 character boundary, so the
// message stays valid UTF-8 (a split character broke non-UTF-8 clients).
TEST(DecodeErrors, ExcerptKeepsUtf8Valid)
{
	using namespace cdc;
	std::string value = "a";
	for (int i = 0; i < 40; i++)
		value += "\xC3\xA9"; // e acute
	ColumnType col;
	col.column = "amount";
	col.type_name = "numeric";
	col.family = ColumnType::Family::Numeric;
	try {
		DecodeValue(Json::MakeString(value), nullptr, col, DecodeOptions{}, "after.amount");
		FAIL() << "no error";
	} catch (const InputError &e) {
		std::string msg = e.what();
		for (size_t i = 0; i < msg.size();) {
			unsigned char c = static_cast<unsigned char>(msg[i]);
			size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
			ASSERT_NE(len, 0u) << "invalid lead byte at " << i;
			ASSERT_LE(i + len, msg.size()) << "truncated character at " << i;
			for (size_t k = 1; k < len; k++)
				ASSERT_EQ(static_cast<unsigned char>(msg[i + k]) & 0xC0, 0x80) << "bad continuation at " << i + k;
			i += len;
		}
	}
}

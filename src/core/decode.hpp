// Decoding one Debezium field value into PostgreSQL text input form.
//
// The apply engine converts every after-image value in two steps:
//   1. DecodeValue (here, pure C++): JSON value + optional Debezium field
//      schema + what the destination column is  ->  the text that the
//      column type's input function accepts (or NULL, or "unavailable").
//   2. The glue calls the type's input function (with typmod) on that text,
//      so PostgreSQL itself validates the value and raises its own SQLSTATE.
//
// Rules (the table is in docs/debezium-types.md):
//  * With a field schema, the Debezium semantic type (schema "name") decides:
//    io.debezium.time.Date / org.apache.kafka.connect.data.Date (int32 days),
//    Time (int32 ms), MicroTime (int64 us), NanoTime (int64 ns),
//    org.apache.kafka.connect.data.Time (int32 ms), Timestamp (int64 ms),
//    MicroTimestamp (int64 us), NanoTimestamp (int64 ns),
//    org.apache.kafka.connect.data.Timestamp (int64 ms), ZonedTimestamp and
//    ZonedTime (ISO-8601 strings, passed through), MicroDuration (int64 us),
//    org.apache.kafka.connect.data.Decimal (base64 big-endian two's-complement
//    unscaled value, scale in parameters.scale), VariableScaleDecimal
//    (struct {scale, value}), Json/Jsonb/Xml/Uuid/Enum/Ltree (strings),
//    Bits (bytes, little-endian, parameters.length bits), plain "bytes"
//    (base64), "array" (items decoded by the items schema), primitives.
//  * Without a schema, the destination column type decides (ColumnType::Family),
//    and ambiguous input is an InputError naming the field and the setting.
//  * The unavailable-value placeholder (Debezium's
//    "__debezium_unavailable_value" or the mapping's own), its base64 form
//    (bytea columns), its "hex:"-free octets as base64, or a one-element array
//    holding it, decode to Kind::Unavailable: the column keeps its value.
#pragma once
#include "core/json.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cdc {

// A Debezium (Kafka Connect) field schema, as found under schema.fields[].
struct FieldSchema {
	std::string field;                             // field name
	std::string type;                              // "int32", "string", "bytes", "struct", "array", ...
	std::string name;                              // semantic type, e.g. "io.debezium.time.MicroTimestamp"; may be empty
	std::map<std::string, std::string> parameters; // e.g. {"scale": "2"}
	bool optional = true;
	std::shared_ptr<FieldSchema> items;            // for type "array"
	std::vector<FieldSchema> fields;               // for type "struct"

	// Builds a FieldSchema from its JSON form.  Accepts the JsonConverter
	// shape ({"type","optional","name","field","parameters","items","fields"})
	// and the key-schema shape used in the Debezium docs
	// ({"name": <field>, "index", "schema": {...}}).
	// `path` names the field in errors ("after", then "after.p", "after.a[]"
	// for array items), so that a bad schema is refused naming its field.
	static FieldSchema FromJson(const Json &j, const std::string &path = {});
	// Finds a struct member by field name; nullptr if absent.
	const FieldSchema *Member(const std::string &name) const;
};

// What decoding needs to know about the destination column.
struct ColumnType {
	enum class Family {
		Text,        // text, varchar, char, name, citext, enums, ... (anything taking text as-is)
		Bool,
		Integer,     // int2, int4, int8
		Numeric,     // numeric / decimal
		Float,       // float4, float8
		Date,
		Time,        // time without time zone
		TimeTz,
		Timestamp,   // timestamp without time zone
		TimestampTz,
		Interval,
		Bytea,
		Json,        // json, jsonb
		Uuid,
		Bit,         // bit, varbit
		Array,       // element in `element`
		Other        // any other type: strings are passed to its input function
	};
	std::string column;        // destination column name, for messages
	std::string type_name;     // format_type() of the column, for messages
	// An array's element type: the array column's format_type(), which the
	// messages' detail names as the column's type (type_name is the
	// element's); empty for a column's own type.
	std::string column_type_name;
	Family family = Family::Other;
	std::shared_ptr<ColumnType> element; // for Array
};

// Unit of integer-encoded temporal values when no schema says it.
enum class TemporalUnit { Unset, Milli, Micro, Nano };

struct DecodeOptions {
	std::string placeholder = "__debezium_unavailable_value";
	TemporalUnit integer_time_unit = TemporalUnit::Unset; // mapping option temporal_unit
};

struct DecodedValue {
	enum class Kind { Null, Text, Unavailable };
	Kind kind = Kind::Null;
	std::string text; // PostgreSQL text input form when kind == Text

	static DecodedValue Null() { return {}; }
	static DecodedValue Unavailable() { return {Kind::Unavailable, {}}; }
	static DecodedValue Text(std::string s) { return {Kind::Text, std::move(s)}; }
};

// Decodes `value` (the JSON found at event path `field_path`, e.g.
// "after.amount") for destination column `col`.  `schema` may be nullptr.
// Throws InputError (SQLSTATE 22P02 / 22023 / 22003 / 0A000) naming
// field_path, with a hint naming the setting to use when input is ambiguous.
DecodedValue DecodeValue(const Json &value, const FieldSchema *schema, const ColumnType &col,
                         const DecodeOptions &opts, const std::string &field_path);

// Helpers exposed for unit tests and the glue.
// Decodes standard base64 (with or without padding); nullopt on bad input.
std::optional<std::string> Base64Decode(const std::string &in);
std::string Base64Encode(const std::string &bytes);
// Big-endian two's-complement unscaled integer bytes + scale -> decimal text.
std::string DecimalFromBytes(const std::string &bytes, int scale);
// Days since 1970-01-01 -> "YYYY-MM-DD" (proleptic Gregorian, BC as "YYYY-MM-DD BC").
std::string DateFromEpochDays(int64_t days);
// Microseconds since 1970-01-01T00:00:00 -> "YYYY-MM-DD HH:MM:SS.ffffff".
std::string TimestampFromEpochMicros(int64_t micros);
// Microseconds since midnight -> "HH:MM:SS.ffffff".
std::string TimeFromMicros(int64_t micros);
// The fields of a timestamp written in the one strict ISO-8601 form with an
// explicit UTC offset that the glue converts without the type's input
// function (ConvertCell: Debezium's ZonedTimestamp strings, pgoutput's
// timestamptz texts):
//   YYYY-MM-DD{T| }HH:MM:SS[.f, 1 to 6 digits]{Z|+HH|-HH|+HH:MM|-HH:MM}
// year 0001-9999, a day the month has, hour 00-23, minutes and seconds
// 00-59, offset hours 00-15 and minutes 00-59: exactly the texts that
// timestamptz_in and timestamp_in read without an error in every session
// (DateStyle and TimeZone do not enter).  nullopt for every other text,
// which then goes through the input function, with its errors.
struct IsoTimestamp {
	int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
	int micros = 0;          // the fraction, in microseconds (exact: at most 6 digits)
	int offset_seconds = 0;  // east of UTC (+05:30 gives 19800)
};
std::optional<IsoTimestamp> ParseStrictIsoTimestamp(std::string_view text);
// PostgreSQL array literal of already-decoded elements ({"a","b",NULL}).
std::string ArrayLiteral(const std::vector<DecodedValue> &elements);

} // namespace cdc

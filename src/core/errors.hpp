// The error type of the pure C++ core.
//
// Pure code cannot call ereport, so it throws InputError carrying everything
// the glue needs to raise a proper PostgreSQL ERROR: the SQLSTATE (five
// characters, e.g. "22023"), a primary message naming the event field or
// column, and optional detail and hint.  src/pg/guard.cpp converts it.
#pragma once

#include <stdexcept>
#include <string>

namespace cdc {

// SQLSTATEs used by the core (PostgreSQL's errcodes.txt names in comments).
namespace sqlstate {
inline constexpr const char *kInvalidTextRepresentation = "22P02"; // invalid_text_representation
inline constexpr const char *kInvalidParameterValue = "22023";     // invalid_parameter_value
inline constexpr const char *kNumericOutOfRange = "22003";         // numeric_value_out_of_range
inline constexpr const char *kNullValueNotAllowed = "22004";       // null_value_not_allowed
inline constexpr const char *kDatetimeFieldOverflow = "22008";     // datetime_field_overflow
inline constexpr const char *kInvalidName = "42602";               // invalid_name
inline constexpr const char *kUndefinedColumn = "42703";           // undefined_column
inline constexpr const char *kFeatureNotSupported = "0A000";       // feature_not_supported
} // namespace sqlstate

class InputError : public std::runtime_error {
  public:
	InputError(const char *sqlstate, std::string message, std::string detail = {}, std::string hint = {})
	    : std::runtime_error(std::move(message)), sqlstate_(sqlstate), detail_(std::move(detail)),
	      hint_(std::move(hint))
	{
	}
	const char *sqlstate() const { return sqlstate_; }
	const std::string &detail() const { return detail_; }
	const std::string &hint() const { return hint_; }

  private:
	const char *sqlstate_;
	std::string detail_;
	std::string hint_;
};

} // namespace cdc

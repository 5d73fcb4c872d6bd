#include "core/cpp_only.hpp" // first: this file is pure C++
#include "core/layout.hpp"

#include "core/errors.hpp"
#include "core/text_util.hpp"

#include <limits>
#include <stdexcept>

namespace cdc {

std::string
LedgerDigestInput(uint32_t target_oid, std::string_view delivery_key)
{
	std::string s = std::to_string(target_oid);
	s += '\n';
	s.append(delivery_key.data(), delivery_key.size());
	return s;
}

namespace {

uint64_t
HexPrefix(std::string_view hex, size_t digits)
{
	if (hex.size() < digits)
		throw std::invalid_argument("md5 hex digest too short");
	uint64_t v = 0;
	for (size_t i = 0; i < digits; i++) {
		int d = HexDigitValue(hex[i]);
		if (d < 0)
			throw std::invalid_argument("md5 digest is not hexadecimal");
		v = (v << 4) | uint64_t(d);
	}
	return v;
}

bool
ArrayElementNeedsQuotes(const std::string &s)
{
	if (s.empty())
		return true;
	if (s.size() == 4) {
		std::string u;
		for (char c : s)
			u += char(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
		if (u == "NULL")
			return true;
	}
	for (char c : s)
		if (c == '"' || c == '\\' || c == '{' || c == '}' || c == ',' || c == ' ' || c == '\t' || c == '\n' ||
		    c == '\r' || c == '\v' || c == '\f')
			return true;
	return false;
}

} // namespace

int64_t
Int64FromMd5Hex(std::string_view hex)
{
	return int64_t(HexPrefix(hex, 16));
}

int64_t
Int64FromMd5(const unsigned char digest[16])
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | uint64_t(digest[i]);
	return int64_t(v);
}

int32_t
Int32FromMd5Hex(std::string_view hex)
{
	return int32_t(uint32_t(HexPrefix(hex, 8)));
}

int32_t
SourceIdCandidate(std::string_view name_md5_hex, uint32_t collisions)
{
	uint32_t first = uint32_t(HexPrefix(name_md5_hex, 8)) & 0x7fffffffu;
	return int32_t((first + collisions) & 0x7fffffffu);
}

std::string
CompactEntityKey(const std::vector<std::string> &values)
{
	if (values.size() == 1)
		return values[0];
	std::string out = "{";
	for (size_t i = 0; i < values.size(); i++) {
		if (i)
			out += ',';
		out += ArrayElementText(values[i]);
	}
	out += '}';
	return out;
}

std::string
ArrayElementText(const std::string &v)
{
	if (!ArrayElementNeedsQuotes(v))
		return v;
	std::string out = "\"";
	for (char c : v) {
		if (c == '"' || c == '\\')
			out += '\\';
		out += c;
	}
	out += '"';
	return out;
}

StoredVersion
ToStoredVersion(const Version &v)
{
	if (v.parts.size() != 3 && v.parts.size() != 4)
		throw InputError(sqlstate::kFeatureNotSupported,
		                 "a version must have 3 or 4 components, not " + std::to_string(v.parts.size()));
	auto int32_part = [&](size_t i, const char *what) {
		int64_t x = v.parts[i];
		if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
			throw InputError(sqlstate::kNumericOutOfRange,
			                 std::string(what) + " " + std::to_string(x) + " of version " + v.ToArrayLiteral() +
			                     " is out of range (at most 2147483647)");
		return int32_t(x);
	};
	StoredVersion s;
	s.v0 = int32_part(0, "source epoch");
	s.v1 = v.parts[1];
	s.v2 = v.parts[2];
	s.v3 = v.parts.size() == 4 ? int32_part(3, "position in transaction") : 0;
	return s;
}

Version
FromStoredVersion(const StoredVersion &s, size_t arity)
{
	Version v{{s.v0, s.v1, s.v2, s.v3}};
	if (arity == 3)
		v.parts.pop_back();
	return v;
}

int32_t
CoarseSeconds(int64_t timestamptz_micros)
{
	int64_t s = timestamptz_micros / 1000000;
	if (timestamptz_micros < 0 && timestamptz_micros % 1000000 != 0)
		s -= 1;
	if (s > std::numeric_limits<int32_t>::max())
		return std::numeric_limits<int32_t>::max();
	if (s < std::numeric_limits<int32_t>::min())
		return std::numeric_limits<int32_t>::min();
	return int32_t(s);
}

} // namespace cdc

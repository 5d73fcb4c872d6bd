#include "core/cpp_only.hpp" // first: this file is pure C++
#include "core/version.hpp"

#include <cstdio>
#include <limits>

namespace cdc {

int
Version::Compare(const Version &a, const Version &b)
{
	size_t n = std::min(a.parts.size(), b.parts.size());
	for (size_t i = 0; i < n; i++) {
		if (a.parts[i] < b.parts[i])
			return -1;
		if (a.parts[i] > b.parts[i])
			return 1;
	}
	if (a.parts.size() == b.parts.size())
		return 0;
	return a.parts.size() < b.parts.size() ? -1 : 1;
}

std::string
Version::ToArrayLiteral() const
{
	std::string out = "{";
	for (size_t i = 0; i < parts.size(); i++) {
		if (i)
			out += ',';
		out += std::to_string(parts[i]);
	}
	out += '}';
	return out;
}

namespace {
bool
ParseInt64(std::string_view s, int64_t &out)
{
	if (s.empty())
		return false;
	bool neg = false;
	size_t i = 0;
	if (s[0] == '-') {
		neg = true;
		i = 1;
	}
	if (i == s.size())
		return false;
	uint64_t v = 0;
	const uint64_t limit = neg ? uint64_t(std::numeric_limits<int64_t>::max()) + 1
	                           : uint64_t(std::numeric_limits<int64_t>::max());
	for (; i < s.size(); i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		unsigned d = unsigned(s[i] - '0');
		if (v > (limit - d) / 10)
			return false;
		v = v * 10 + d;
	}
	out = neg ? (v == uint64_t(std::numeric_limits<int64_t>::max()) + 1 ? std::numeric_limits<int64_t>::min()
	                                                                       : -int64_t(v))
	          : int64_t(v);
	return true;
}

bool
ParseHex32(std::string_view s, uint64_t &out)
{
	if (s.empty() || s.size() > 8)
		return false;
	uint64_t v = 0;
	for (char c : s) {
		int d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return false;
		v = v * 16 + unsigned(d);
	}
	out = v;
	return true;
}
} // namespace

std::optional<Version>
Version::FromArrayLiteral(std::string_view s)
{
	if (s.size() < 2 || s.front() != '{' || s.back() != '}')
		return std::nullopt;
	Version v;
	std::string_view body = s.substr(1, s.size() - 2);
	if (body.empty())
		return v;
	size_t start = 0;
	while (true) {
		size_t comma = body.find(',', start);
		std::string_view item = body.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
		int64_t x;
		if (!ParseInt64(item, x))
			return std::nullopt;
		v.parts.push_back(x);
		if (comma == std::string_view::npos)
			break;
		start = comma + 1;
	}
	return v;
}

std::optional<int64_t>
ParseLsn(std::string_view s)
{
	size_t slash = s.find('/');
	if (slash == std::string_view::npos) {
		int64_t v;
		if (!ParseInt64(s, v) || v < 0)
			return std::nullopt;
		return v;
	}
	uint64_t hi, lo;
	if (!ParseHex32(s.substr(0, slash), hi) || !ParseHex32(s.substr(slash + 1), lo))
		return std::nullopt;
	if (hi > 0x7FFFFFFFu)
		return std::nullopt;
	return int64_t((hi << 32) | lo);
}

std::string
FormatLsn(int64_t lsn)
{
	char buf[32];
	std::snprintf(buf, sizeof buf, "%X/%X", unsigned(uint64_t(lsn) >> 32), unsigned(uint64_t(lsn) & 0xFFFFFFFFu));
	return buf;
}

} // namespace cdc

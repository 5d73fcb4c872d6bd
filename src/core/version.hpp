// Source versions: the order of changes to one entity (SPEC §3, second question).
//
// A Version is a tuple of signed 64-bit integers compared lexicographically
// (like PostgreSQL's array comparison, which is how the glue stores it:
// bigint[]).  Which components a version has is decided by how it was derived
// (see DeriveDebeziumVersion and docs/semantics.md); two versions are only
// compared when they come from the same source (same source name), which
// the engine checks before calling Compare.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cdc {

struct Version {
	std::vector<int64_t> parts;

	// <0, 0, >0 like strcmp; a proper prefix sorts first.
	static int Compare(const Version &a, const Version &b);
	bool operator<(const Version &o) const { return Compare(*this, o) < 0; }
	bool operator==(const Version &o) const { return parts == o.parts; }
	bool operator!=(const Version &o) const { return parts != o.parts; }
	bool empty() const { return parts.empty(); }
	// "{1,24023128,24023128,0}" — the bigint[] text form.
	std::string ToArrayLiteral() const;
	// Parses the bigint[] text form; nullopt on anything else.
	static std::optional<Version> FromArrayLiteral(std::string_view s);
};

// Parses an LSN given either as PostgreSQL text ("16/B374D848") or as a
// decimal integer (Debezium's source.lsn).  nullopt when it is neither or
// does not fit in a signed 64-bit integer.
std::optional<int64_t> ParseLsn(std::string_view s);
// Formats an LSN as PostgreSQL text ("16/B374D848").
std::string FormatLsn(int64_t lsn);

} // namespace cdc

// COPY ... TO STDOUT text format, one row -> column values.
//
// The worker's initial copy reads the published tables with COPY on the
// replication connection (as PostgreSQL's own table sync does) and must turn
// each data row back into per-column text.  Format: columns separated by a
// tab, NULL as \N, backslash escapes \b \f \n \r \t \v \\ \ooo \xHH
// (PostgreSQL docs, "COPY", "Text Format").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cdc {

// Parses one row (without its trailing newline, which is tolerated).
// nullopt entries are SQL NULLs.  Throws InputError 22P02 on a malformed
// escape.
std::vector<std::optional<std::string>> ParseCopyTextRow(std::string_view line);

} // namespace cdc

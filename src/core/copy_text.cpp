#include "core/cpp_only.hpp" // first: this file is pure C++
#include "core/copy_text.hpp"

#include "core/errors.hpp"
#include "core/text_util.hpp"

namespace cdc {

std::vector<std::optional<std::string>>
ParseCopyTextRow(std::string_view line)
{
	if (!line.empty() && line.back() == '\n')
		line.remove_suffix(1);
	std::vector<std::optional<std::string>> out;
	std::string cur;
	bool is_null = false;
	for (size_t i = 0; i <= line.size(); i++) {
		if (i == line.size() || line[i] == '\t') {
			if (is_null && cur.empty())
				out.emplace_back(std::nullopt);
			else
				out.emplace_back(std::move(cur));
			cur.clear();
			is_null = false;
			continue;
		}
		char c = line[i];
		if (c != '\\') {
			cur.push_back(c);
			continue;
		}
		if (++i >= line.size())
			throw InputError(sqlstate::kInvalidTextRepresentation, "COPY row ends with a lone backslash");
		char e = line[i];
		switch (e) {
		case 'N':
			/* \N alone is NULL; anywhere else it is malformed */
			if (!cur.empty() || (i + 1 < line.size() && line[i + 1] != '\t'))
				throw InputError(sqlstate::kInvalidTextRepresentation, "COPY row has \\N inside a value");
			is_null = true;
			break;
		case 'b': cur.push_back('\b'); break;
		case 'f': cur.push_back('\f'); break;
		case 'n': cur.push_back('\n'); break;
		case 'r': cur.push_back('\r'); break;
		case 't': cur.push_back('\t'); break;
		case 'v': cur.push_back('\v'); break;
		case 'x': {
			int v = 0, n = 0;
			while (n < 2 && i + 1 < line.size() && HexDigitValue(line[i + 1]) >= 0) {
				v = v * 16 + HexDigitValue(line[++i]);
				n++;
			}
			if (n == 0)
				cur.push_back('x');
			else
				cur.push_back(static_cast<char>(v));
			break;
		}
		default:
			if (e >= '0' && e <= '7') {
				int v = e - '0', n = 1;
				while (n < 3 && i + 1 < line.size() && line[i + 1] >= '0' && line[i + 1] <= '7') {
					v = v * 8 + (line[++i] - '0');
					n++;
				}
				cur.push_back(static_cast<char>(v & 0xFF));
			} else {
				cur.push_back(e); /* \\ and any other escaped character stand for themselves */
			}
		}
	}
	return out;
}

} // namespace cdc

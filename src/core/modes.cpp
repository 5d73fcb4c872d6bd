#include "core/cpp_only.hpp" // first: this file is pure C++
#include "core/modes.hpp"

#include "core/json.hpp"

namespace cdc {

std::optional<Mode>
ParseMode(std::string_view s)
{
	if (s == "state")
		return Mode::State;
	if (s == "history")
		return Mode::History;
	if (s == "handler")
		return Mode::Handler;
	return std::nullopt;
}

const char *
ModeName(Mode m)
{
	switch (m) {
	case Mode::State: return "state";
	case Mode::History: return "history";
	case Mode::Handler: return "handler";
	}
	return "?";
}

bool
IsHistoryMetaColumn(std::string_view column)
{
	return column.substr(0, 4) == "cdc_";
}

std::string
HandlerMetaJson(const HandlerMeta &m)
{
	std::string s = "{\"target\": ";
	AppendJsonString(s, m.target);
	s += ", \"op\": ";
	AppendJsonString(s, std::string(1, m.op));
	s += ", \"is_snapshot\": ";
	s += m.is_snapshot ? "true" : "false";
	s += ", \"entity_key\": ";
	s += m.entity_key.empty() ? "null" : m.entity_key;
	s += ", \"version\": [";
	for (size_t i = 0; i < m.version.parts.size(); i++)
		s += (i ? ", " : "") + std::to_string(m.version.parts[i]);
	s += "], \"delivery_key\": ";
	AppendJsonString(s, m.delivery_key);
	s += ", \"source\": ";
	s += m.source_json.empty() ? "null" : m.source_json;
	s += ", \"source_ts_ms\": ";
	s += m.source_ts_ms ? std::to_string(*m.source_ts_ms) : "null";
	s += "}";
	return s;
}

} // namespace cdc

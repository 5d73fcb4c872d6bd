// Shared internals of the apply engine (src/pg/apply/): the helpers that
// more than one of its files uses.  Fail() throws an InputError (an ERROR
// with its SQLSTATE once it reaches the entry point's bridge); ArrayParam
// builds one array parameter element by element for the set-based
// statements (segment.cpp) and the batch's outbox insert (outbox.cpp).
//
// Included only by src/pg/apply/*.cpp; nothing outside the folder may rely
// on it.  C++ regime: every PostgreSQL call goes through PgCall, and there
// are no C++ globals here.
#pragma once

#include "core/errors.hpp"
#include "pg/guard.hpp"
#include "pg/spi.hpp"

#include <optional>
#include <string>
#include <vector>

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
}

namespace cdc::pg {

[[noreturn]] inline void
Fail(const char *sqlstate, const std::string &msg, const std::string &detail = {}, const std::string &hint = {})
{
	throw InputError(sqlstate, msg, detail, hint);
}

// A one-dimensional array parameter built element by element.
class ArrayParam {
  public:
	ArrayParam(Oid elemtype, int16 typlen, bool typbyval, char typalign)
	    : elemtype_(elemtype), typlen_(typlen), typbyval_(typbyval), typalign_(typalign)
	{
	}
	static ArrayParam Text() { return ArrayParam(TEXTOID, -1, false, TYPALIGN_INT); }
	void Add(Datum d, bool isnull)
	{
		values_.push_back(d);
		nulls_.push_back(isnull ? 1 : 0);
	}
	void AddText(const std::string &s)
	{
		Add(PgCall([&]() { return PointerGetDatum(cstring_to_text_with_len(s.data(), int(s.size()))); }), false);
	}
	void AddTextOrNull(const std::optional<std::string> &s)
	{
		if (s)
			AddText(*s);
		else
			Add((Datum) 0, true);
	}
	size_t Size() const { return values_.size(); }
	// Adds the array to `p` as a parameter of the array type; `by_reference`:
	// a large one is not copied into a custom plan (Params::AddVarlena), for
	// arrays of event-sized values whose statement's plan does not depend
	// on the number of elements (the outbox rows' payloads).
	void AddTo(Params &p, Oid array_type, bool by_reference = false) const
	{
		Datum d = PgCall([&]() {
			int n = int(values_.size());
			bool *nulls = (bool *) palloc(sizeof(bool) * (n + 1));
			for (int i = 0; i < n; i++)
				nulls[i] = nulls_[size_t(i)] != 0;
			int dims[1] = {n};
			int lbs[1] = {1};
			return PointerGetDatum(construct_md_array(const_cast<Datum *>(values_.data()), nulls, 1, dims, lbs,
			                                          elemtype_, typlen_, typbyval_, typalign_));
		});
		if (by_reference)
			p.AddVarlena(array_type, d, false);
		else
			p.Add(array_type, d, false);
	}

  private:
	Oid elemtype_;
	int16 typlen_;
	bool typbyval_;
	char typalign_;
	std::vector<Datum> values_;
	std::vector<char> nulls_;
};

} // namespace cdc::pg

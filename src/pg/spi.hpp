// SQL execution for the apply engine: SPI with prepared plans cached per
// backend, typed parameters, and a switch to the extension owner for the
// engine's own bookkeeping tables (schema cdc).
//
// Every function here is called from the C++ regime and converts PostgreSQL
// errors into PgError (see guard.hpp).
#pragma once

#include "pg/guard.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cdc::pg {

// Positional parameters ($1, $2, ...) of one statement.
class Params {
  public:
	void Add(Oid type, Datum value, bool isnull);
	void AddText(const std::string &s);
	void AddTextOrNull(const std::optional<std::string> &s);
	void AddInt8(int64_t v);
	void AddOid(Oid v);
	void AddBool(bool v);
	void Clear();
	int Count() const { return int(types_.size()); }
	Oid *Types() { return types_.data(); }
	Datum *Values() { return values_.data(); }
	const char *Nulls() { return nulls_.data(); }

  private:
	std::vector<Oid> types_;
	std::vector<Datum> values_;
	std::vector<char> nulls_; // 'n' = NULL, ' ' = not null (SPI convention)
};

// Runs `sql` (prepared once per backend and parameter types, then reused)
// with `params`.  Returns SPI_processed; rows are in SPI_tuptable.
// as_owner: run as the owner of the extension's tables (bookkeeping), not
// as the calling user (target DML).
uint64_t Execute(const std::string &sql, Params &params, bool as_owner);

// Text of column `col` (1-based) of result row `row`, nullopt for NULL.
std::optional<std::string> ResultText(uint64_t row, int col);
// Boolean column of a result row (NULL reads as false).
bool ResultBool(uint64_t row, int col);

// Opens the SPI connection for one entry-point call; Finish closes it.
void Connect();
void Finish();

// Double-quotes an identifier when needed (quote_identifier).
std::string QuoteIdent(const std::string &ident);

// md5 hex digest of `data` (for idempotency keys and content hashes).
std::string Md5Hex(const std::string &data);

} // namespace cdc::pg

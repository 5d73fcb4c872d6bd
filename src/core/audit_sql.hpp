// The statements of the audit (docs/audit.md): the canonical text of a row,
// its digest, the hash of a key range, and the page, split, row and key
// lookups built from them.  One generator for both sides: the audit sends
// these statements to the source (libpq), runs them on the destination
// (SPI), and cdc.range_hash_sql() hands the same text to users who audit a
// PostgreSQL source of their own.  The text depends only on the version-
// stable functions md5, convert_to, substr and textcat, the bit and int8
// casts, sum, count and row comparison, so it means the same on PostgreSQL
// 9.x to 15 and later.
//
// Pure C++ (no postgres.h).  Identifiers arrive quoted (quote_identifier
// on the caller's side); every function, operator and type in the text is
// schema-qualified, so nothing depends on the session's search_path.
#pragma once

#include <string>
#include <vector>

namespace cdc::audit {

// One side's table as the statements read it.
struct HashedTable {
	std::string relation;             // schema-qualified and quoted: "public"."orders"
	bool only = true;                 // FROM ONLY (a plain table); false for a partitioned root
	std::vector<std::string> columns; // quoted column names, hashed in this order
	std::vector<std::string> key;     // quoted key column names, in key order
	std::string filter;               // the row filter (source side), empty: every row
};

// A key range as SQL expressions, one per key column ("$3", "'17'",
// "$1::pg_catalog.int4"), rendered by the caller.  The range is
// (lower, upper] (lower >= ... with lower_inclusive); an empty vector is
// unbounded on that side.
struct RangeExprs {
	std::vector<std::string> lower;
	bool lower_inclusive = false;
	std::vector<std::string> upper;
};

// ROW(t.a, t.b, ...)::pg_catalog.text over the alias t: the row's canonical
// text (record_out: every column by its type's output function, quoted where
// needed, NULL as nothing).
std::string RowTextSql(const HashedTable &t);
// The row digest: md5 (32 hex digits) of the canonical text in UTF-8, so
// that the server encodings of the two sides do not matter.
std::string RowMd5Sql(const HashedTable &t);
// The first 64 bits of an md5 hex expression as a signed bigint (the ledger
// digest's conversion, cdc.delivery_digest).
std::string Md5Int64Sql(const std::string &md5_expr);

// "ROW(t.k1, t.k2) OPERATOR(pg_catalog.>) ROW(...) AND ..." plus the row
// filter, or "true" when nothing restricts.
std::string RangeWhereSql(const HashedTable &t, const RangeExprs &r);

// SELECT count(*), sum(digest) [, ordered] FROM the range: the range hash.
// with_order_check adds a third column, true unless both bounds are given
// and lower is above upper in this side's key order: a collation that
// orders keys differently from the other side's.  (An empty range, lower =
// upper, is in order.)
std::string RangeHashSql(const HashedTable &t, const RangeExprs &r, bool with_order_check);
// The page of range `r`: its first `limit_expr` rows in key order.
// Columns: count, sum of digests, then the page's last key (one column per
// key column; NULL when the page is empty).
std::string PageSql(const HashedTable &t, const RangeExprs &r, const std::string &limit_expr);
// The key at 0-based position `offset_expr` of the range in key order.
std::string KeyAtSql(const HashedTable &t, const RangeExprs &r, const std::string &offset_expr);
// Every row of the range: the key columns, then the row digest (md5 hex).
std::string RangeRowsSql(const HashedTable &t, const RangeExprs &r);
// The rows with the given keys: one array expression per key column
// (arrays of equal length, unnested side by side).  Columns: the 1-based
// position of the key in the arrays, the key columns, the row digest, then
// (with_scope) whether the row filter admits the row, then (with_values)
// every hashed column; in the order of the arrays.  Rows outside the filter
// are returned too: with_scope tells them apart.
std::string RowsByKeysSql(const HashedTable &t, const std::vector<std::string> &key_arrays, bool with_scope,
                          bool with_values);

// A text[] literal of `values` quoted like array_out ({1,"a b"}), for the
// key arrays of RowsByKeysSql.
std::string ArrayLiteral(const std::vector<std::string> &values);
// A SQL string literal ('it''s'); E'' form when the text holds a backslash.
std::string QuoteLiteral(const std::string &s);

} // namespace cdc::audit

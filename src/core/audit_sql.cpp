#include "core/cpp_only.hpp" // first: this file is pure C++
#include "core/audit_sql.hpp"

#include "core/layout.hpp"

namespace cdc::audit {

namespace {

std::string
Join(const std::vector<std::string> &items, const std::string &prefix, const std::string &sep)
{
	std::string out;
	for (size_t i = 0; i < items.size(); i++) {
		if (i)
			out += sep;
		out += prefix + items[i];
	}
	return out;
}

std::string
KeyRow(const HashedTable &t)
{
	return "ROW(" + Join(t.key, "t.", ", ") + ")";
}

std::string
FromSql(const HashedTable &t)
{
	return std::string(" FROM ") + (t.only ? "ONLY " : "") + t.relation + " AS t";
}

std::string
OrderBySql(const HashedTable &t)
{
	return " ORDER BY " + Join(t.key, "t.", ", ");
}

} // namespace

std::string
RowTextSql(const HashedTable &t)
{
	return "ROW(" + Join(t.columns, "t.", ", ") + ")::pg_catalog.text";
}

std::string
RowMd5Sql(const HashedTable &t)
{
	return "pg_catalog.md5(pg_catalog.convert_to(" + RowTextSql(t) + ", 'UTF8'))";
}

std::string
Md5Int64Sql(const std::string &md5_expr)
{
	return "pg_catalog.textcat('x', pg_catalog.substr(" + md5_expr + ", 1, 16))::pg_catalog.bit(64)::pg_catalog.int8";
}

std::string
RangeWhereSql(const HashedTable &t, const RangeExprs &r)
{
	std::vector<std::string> conds;
	if (!r.lower.empty())
		conds.push_back(KeyRow(t) + (r.lower_inclusive ? " OPERATOR(pg_catalog.>=) " : " OPERATOR(pg_catalog.>) ") +
		                "ROW(" + Join(r.lower, "", ", ") + ")");
	if (!r.upper.empty())
		conds.push_back(KeyRow(t) + " OPERATOR(pg_catalog.<=) ROW(" + Join(r.upper, "", ", ") + ")");
	if (!t.filter.empty())
		conds.push_back("(" + t.filter + ")");
	if (conds.empty())
		return "true";
	return Join(conds, "", " AND ");
}

std::string
RangeHashSql(const HashedTable &t, const RangeExprs &r, bool with_order_check)
{
	std::string sql = "SELECT pg_catalog.count(*), pg_catalog.sum(" + Md5Int64Sql(RowMd5Sql(t)) + "::pg_catalog.numeric)";
	if (with_order_check) {
		if (!r.lower.empty() && !r.upper.empty())
			sql += ", ROW(" + Join(r.lower, "", ", ") + ") OPERATOR(pg_catalog.<=) ROW(" + Join(r.upper, "", ", ") + ")";
		else
			sql += ", true";
	}
	return sql + FromSql(t) + " WHERE " + RangeWhereSql(t, r);
}

std::string
PageSql(const HashedTable &t, const RangeExprs &r, const std::string &limit_expr)
{
	std::vector<std::string> aliases, picked, desc;
	std::string select;
	for (size_t i = 0; i < t.key.size(); i++) {
		std::string a = "cdc_k" + std::to_string(i + 1);
		select += "t." + t.key[i] + " AS " + a + ", ";
		picked.push_back("p." + a);
		desc.push_back("p." + a + " DESC");
		aliases.push_back("l." + a);
	}
	return "WITH cdc_page AS (SELECT " + select + Md5Int64Sql(RowMd5Sql(t)) + " AS cdc_d" + FromSql(t) + " WHERE " +
	       RangeWhereSql(t, r) + OrderBySql(t) + " LIMIT " + limit_expr + ") " +
	       "SELECT (SELECT pg_catalog.count(*) FROM cdc_page), " +
	       "(SELECT pg_catalog.sum(p.cdc_d::pg_catalog.numeric) FROM cdc_page AS p), " + Join(aliases, "", ", ") +
	       " FROM (VALUES (1)) AS cdc_one LEFT JOIN LATERAL (SELECT " + Join(picked, "", ", ") +
	       " FROM cdc_page AS p ORDER BY " + Join(desc, "", ", ") + " LIMIT 1) AS l ON true";
}

std::string
KeyAtSql(const HashedTable &t, const RangeExprs &r, const std::string &offset_expr)
{
	return "SELECT " + Join(t.key, "t.", ", ") + FromSql(t) + " WHERE " + RangeWhereSql(t, r) + OrderBySql(t) +
	       " OFFSET " + offset_expr + " LIMIT 1";
}

std::string
RangeRowsSql(const HashedTable &t, const RangeExprs &r)
{
	return "SELECT " + Join(t.key, "t.", ", ") + ", " + RowMd5Sql(t) + FromSql(t) + " WHERE " + RangeWhereSql(t, r) +
	       OrderBySql(t);
}

std::string
RowsByKeysSql(const HashedTable &t, const std::vector<std::string> &key_arrays, bool with_scope, bool with_values)
{
	std::string sql = "SELECT cdc_keys.cdc_ord, " + Join(t.key, "t.", ", ") + ", " + RowMd5Sql(t);
	if (with_scope)
		sql += ", " + (t.filter.empty() ? std::string("true") : "COALESCE((" + t.filter + "), false)");
	if (with_values)
		sql += ", " + Join(t.columns, "t.", ", ");
	std::vector<std::string> aliases, join;
	for (size_t i = 0; i < t.key.size(); i++) {
		std::string a = "cdc_k" + std::to_string(i + 1);
		aliases.push_back(a);
		join.push_back("t." + t.key[i] + " OPERATOR(pg_catalog.=) cdc_keys." + a);
	}
	/* ROWS FROM: the multi-argument unnest shorthand exists only for an unqualified unnest */
	return sql + FromSql(t) + " JOIN ROWS FROM (" + Join(key_arrays, "pg_catalog.unnest(", "), ") + ")) WITH ORDINALITY AS cdc_keys(" +
	       Join(aliases, "", ", ") + ", cdc_ord) ON " + Join(join, "", " AND ") + " ORDER BY cdc_keys.cdc_ord";
}

std::string
ArrayLiteral(const std::vector<std::string> &values)
{
	std::string out = "{";
	for (size_t i = 0; i < values.size(); i++) {
		if (i)
			out += ',';
		out += ArrayElementText(values[i]);
	}
	return out + "}";
}

std::string
QuoteLiteral(const std::string &s)
{
	/* quote_literal: double the quotes; with a backslash, the E'' form with doubled backslashes */
	bool backslash = s.find('\\') != std::string::npos;
	std::string out = backslash ? "E'" : "'";
	for (char c : s) {
		if (c == '\'' || (backslash && c == '\\'))
			out += c;
		out += c;
	}
	return out + "'";
}

} // namespace cdc::audit

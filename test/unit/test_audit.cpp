// GoogleTest units for the audit's pure parts: the statements
// (core/audit_sql), the range hash arithmetic, the walk and bisection over
// two in-memory tables, the verdict of a re-check, progress and rate cap
// (core/audit_diff).
#include "core/audit_diff.hpp"
#include "core/audit_sql.hpp"
#include "core/errors.hpp"
#include "core/json.hpp"
#include "core/layout.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

using namespace cdc::audit;

namespace {

HashedTable
Orders()
{
	HashedTable t;
	t.relation = "public.orders";
	t.columns = {"id", "\"Note\"", "amount"};
	t.key = {"id"};
	return t;
}

} // namespace

TEST(AuditSql, RowDigestIsQualifiedAndEncodingIndependent)
{
	HashedTable t = Orders();
	EXPECT_EQ(RowTextSql(t), "ROW(t.id, t.\"Note\", t.amount)::pg_catalog.text");
	EXPECT_EQ(RowMd5Sql(t), "pg_catalog.md5(pg_catalog.convert_to(ROW(t.id, t.\"Note\", t.amount)::pg_catalog.text, 'UTF8'))");
	EXPECT_EQ(Md5Int64Sql("h"), "pg_catalog.textcat('x', pg_catalog.substr(h, 1, 16))::pg_catalog.bit(64)::pg_catalog.int8");
}

TEST(AuditSql, RangeHash)
{
	HashedTable t = Orders();
	RangeExprs all;
	EXPECT_EQ(RangeHashSql(t, all, false),
	          "SELECT pg_catalog.count(*), pg_catalog.sum(" + Md5Int64Sql(RowMd5Sql(t)) +
	              "::pg_catalog.numeric) FROM ONLY public.orders AS t WHERE true");
	RangeExprs r{{"'10'"}, false, {"'20'"}};
	t.filter = "(amount > 0)";
	t.only = false;
	EXPECT_EQ(RangeHashSql(t, r, true),
	          "SELECT pg_catalog.count(*), pg_catalog.sum(" + Md5Int64Sql(RowMd5Sql(t)) +
	              "::pg_catalog.numeric), ROW('10') OPERATOR(pg_catalog.<=) ROW('20') FROM public.orders AS t WHERE "
	              "ROW(t.id) OPERATOR(pg_catalog.>) ROW('10') AND ROW(t.id) OPERATOR(pg_catalog.<=) ROW('20') AND "
	              "((amount > 0))");
	RangeExprs from{{"$1", "$2"}, true, {}};
	t.key = {"a", "b"};
	t.filter.clear();
	EXPECT_NE(RangeHashSql(t, from, true).find(", true FROM public.orders AS t WHERE ROW(t.a, t.b) OPERATOR(pg_catalog.>=) ROW($1, $2)"),
	          std::string::npos);
	RangeExprs closed{{"$1", "$2"}, true, {"$3", "$4"}};
	EXPECT_NE(RangeHashSql(t, closed, true).find(", ROW($1, $2) OPERATOR(pg_catalog.<=) ROW($3, $4) FROM"), std::string::npos);
}

TEST(AuditSql, PageKeyAtRowsAndKeys)
{
	HashedTable t = Orders();
	t.key = {"id", "\"Note\""};
	RangeExprs r{{"$1", "$2"}, false, {"$3", "$4"}};
	std::string page = PageSql(t, r, "$5");
	EXPECT_NE(page.find("WITH cdc_page AS (SELECT t.id AS cdc_k1, t.\"Note\" AS cdc_k2, "), std::string::npos);
	EXPECT_NE(page.find("WHERE ROW(t.id, t.\"Note\") OPERATOR(pg_catalog.>) ROW($1, $2) AND "), std::string::npos);
	EXPECT_NE(page.find(" ORDER BY t.id, t.\"Note\" LIMIT $5)"), std::string::npos);
	EXPECT_NE(page.find("AND ROW(t.id, t.\"Note\") OPERATOR(pg_catalog.<=) ROW($3, $4) ORDER BY"), std::string::npos);
	EXPECT_NE(page.find("ORDER BY p.cdc_k1 DESC, p.cdc_k2 DESC LIMIT 1) AS l ON true"), std::string::npos);
	EXPECT_EQ(KeyAtSql(t, r, "$5"),
	          "SELECT t.id, t.\"Note\" FROM ONLY public.orders AS t WHERE ROW(t.id, t.\"Note\") OPERATOR(pg_catalog.>) "
	          "ROW($1, $2) AND ROW(t.id, t.\"Note\") OPERATOR(pg_catalog.<=) ROW($3, $4) ORDER BY t.id, t.\"Note\" OFFSET $5 "
	          "LIMIT 1");
	EXPECT_EQ(RangeRowsSql(t, RangeExprs{}),
	          "SELECT t.id, t.\"Note\", " + RowMd5Sql(t) + " FROM ONLY public.orders AS t WHERE true ORDER BY t.id, t.\"Note\"");
	t.filter = "(amount > 0)";
	EXPECT_EQ(RowsByKeysSql(t, {"$1::pg_catalog.int4[]", "$2::pg_catalog.text[]"}, true, true),
	          "SELECT cdc_keys.cdc_ord, t.id, t.\"Note\", " + RowMd5Sql(t) +
	              ", COALESCE(((amount > 0)), false), t.id, t.\"Note\", t.amount FROM ONLY public.orders AS t JOIN "
	              "ROWS FROM (pg_catalog.unnest($1::pg_catalog.int4[]), pg_catalog.unnest($2::pg_catalog.text[])) WITH ORDINALITY AS cdc_keys(cdc_k1, cdc_k2, "
	              "cdc_ord) ON t.id OPERATOR(pg_catalog.=) cdc_keys.cdc_k1 AND t.\"Note\" OPERATOR(pg_catalog.=) "
	              "cdc_keys.cdc_k2 ORDER BY cdc_keys.cdc_ord");
}

TEST(AuditSql, Literals)
{
	EXPECT_EQ(ArrayLiteral({"1", "a b", "", "NULL", "q\"\\"}), "{1,\"a b\",\"\",\"NULL\",\"q\\\"\\\\\"}");
	EXPECT_EQ(ArrayLiteral({"x"}), "{x}");
	EXPECT_EQ(ArrayLiteral({}), "{}");
	EXPECT_EQ(QuoteLiteral("it's"), "'it''s'");
	EXPECT_EQ(QuoteLiteral("a\\b'"), "E'a\\\\b'''");
}

TEST(AuditDiff, SumsAreExact)
{
	EXPECT_EQ(ParseSum(""), 0);
	EXPECT_EQ(ParseSum("-9223372036854775808"), -(__int128) 9223372036854775807 - 1);
	__int128 big = (__int128) 9223372036854775807 * 1000000007;
	EXPECT_EQ(ParseSum(SumText(big)), big);
	EXPECT_EQ(SumText(-big).substr(0, 1), "-");
	EXPECT_EQ(ParseSum(SumText(-big)), -big);
	EXPECT_EQ(SumText(0), "0");
	EXPECT_THROW(ParseSum("1.5"), std::invalid_argument);
	EXPECT_THROW(ParseSum("-"), std::invalid_argument);
}

TEST(AuditDiff, DiffRows)
{
	std::vector<RowDigest> src = {{{"1"}, "a"}, {{"2"}, "b"}, {{"3"}, "c"}};
	std::vector<RowDigest> dst = {{{"3"}, "x"}, {{"4"}, "d"}, {{"1"}, "a"}};
	auto c = DiffRows(src, dst);
	ASSERT_EQ(c.size(), 3u);
	EXPECT_EQ(c[0].key, Key{"2"});
	EXPECT_EQ(c[0].kind, Kind::Missing);
	EXPECT_EQ(c[1].key, Key{"3"});
	EXPECT_EQ(c[1].kind, Kind::Different);
	EXPECT_EQ(c[2].key, Key{"4"});
	EXPECT_EQ(c[2].kind, Kind::Extra);
}

namespace {

// An in-memory side: keys ordered as strings (the tests pad numbers), the
// digest of a row is its md5 text, hashed like the SQL side.
class MemSide : public Side {
  public:
	std::map<Key, std::string> rows;
	int64_t queries = 0;
	bool ordered_check = true;

	RangeHash Hash(const Range &r) override
	{
		queries++;
		Check(r);
		RangeHash h;
		for (auto &[k, md5] : rows)
			if (In(r, k)) {
				h.rows++;
				h.sum += cdc::Int64FromMd5Hex(md5);
			}
		return h;
	}
	Key KeyAt(const Range &r, int64_t offset) override
	{
		queries++;
		for (auto &[k, md5] : rows)
			if (In(r, k) && offset-- == 0)
				return k;
		throw std::logic_error("KeyAt beyond the range");
	}
	std::vector<RowDigest> Rows(const Range &r) override
	{
		queries++;
		std::vector<RowDigest> out;
		for (auto &[k, md5] : rows)
			if (In(r, k))
				out.push_back({k, md5});
		return out;
	}
	Page PageOf(const Range &r, int64_t limit) override
	{
		queries++;
		Page p;
		for (auto &[k, md5] : rows) {
			if (!In(r, k))
				continue;
			if (p.hash.rows == limit)
				break;
			p.hash.rows++;
			p.hash.sum += cdc::Int64FromMd5Hex(md5);
			p.last = k;
		}
		return p;
	}

  private:
	static bool In(const Range &r, const Key &k)
	{
		return (!r.after || k > *r.after || (r.after_inclusive && k == *r.after)) && (!r.up_to || k <= *r.up_to);
	}
	void Check(const Range &r)
	{
		if (ordered_check && r.after && r.up_to && *r.up_to < *r.after)
			throw std::runtime_error("bounds out of order: " + (*r.after)[0] + " " + (*r.up_to)[0] + (r.after_inclusive ? " incl" : ""));
	}
};

std::string
Md5Of(int n, int version)
{
	char buf[40];
	std::mt19937_64 g(uint64_t(n) * 1000003 + uint64_t(version));
	snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long) g(), (unsigned long long) g());
	return buf;
}

Key
K(int n)
{
	char buf[16];
	snprintf(buf, sizeof buf, "%08d", n);
	return {buf};
}

std::set<std::pair<Key, Kind>>
RunWalk(MemSide &src, MemSide &dst, int64_t page, int64_t leaf, WalkStats *out = nullptr, Range bounds = {})
{
	std::set<std::pair<Key, Kind>> found;
	WalkStats stats;
	int64_t pages_seen = 0;
	Walk(src, dst, bounds, page, leaf, [&](Candidate c) { EXPECT_TRUE(found.insert({c.key, c.kind}).second) << "emitted twice"; },
	     [&](const WalkStats &s, const std::optional<Key> &) {
		     pages_seen++;
		     EXPECT_EQ(s.pages, pages_seen);
		     return true;
	     },
	     stats);
	if (out)
		*out = stats;
	return found;
}

} // namespace

TEST(AuditDiff, WalkFindsExactlyTheDifferences)
{
	std::mt19937 rng(7);
	for (int round = 0; round < 40; round++) {
		MemSide src, dst;
		int n = int(rng() % 3000);
		for (int i = 1; i <= n; i++) {
			src.rows[K(i * 2)] = Md5Of(i * 2, 0);
			dst.rows[K(i * 2)] = Md5Of(i * 2, 0);
		}
		std::set<std::pair<Key, Kind>> expected;
		int changes = int(rng() % 20);
		for (int c = 0; c < changes; c++) {
			int what = int(rng() % 4);
			int k = int(rng() % (2 * n + 10));
			Key key = K(k);
			bool in_src = src.rows.count(key) > 0;
			bool in_dst = dst.rows.count(key) > 0;
			if (what == 0 && in_dst) { /* deleted on the destination */
				dst.rows.erase(key);
			} else if (what == 1 && !in_dst) { /* inserted on the destination */
				dst.rows[key] = Md5Of(k, 9);
			} else if (what == 2 && in_dst) { /* changed on the destination */
				dst.rows[key] = Md5Of(k, 5 + c);
			} else if (what == 3 && !in_src) { /* a source row the destination never got */
				src.rows[key] = Md5Of(k, 3);
			}
		}
		for (auto &[k, md5] : src.rows) {
			auto d = dst.rows.find(k);
			if (d == dst.rows.end())
				expected.insert({k, Kind::Missing});
			else if (d->second != md5)
				expected.insert({k, Kind::Different});
		}
		for (auto &[k, md5] : dst.rows)
			if (!src.rows.count(k))
				expected.insert({k, Kind::Extra});
		int64_t page = 1 + int64_t(rng() % 700);
		int64_t leaf = 1 + int64_t(rng() % 64);
		EXPECT_EQ(RunWalk(src, dst, page, leaf), expected) << "round " << round << " n " << n << " page " << page << " leaf " << leaf;
	}
}

TEST(AuditDiff, EndsAndEmptySides)
{
	MemSide src, dst;
	for (int i = 10; i < 20; i++)
		src.rows[K(i)] = dst.rows[K(i)] = Md5Of(i, 0);
	dst.rows[K(1)] = Md5Of(1, 0);  /* before the source's first key */
	dst.rows[K(99)] = Md5Of(99, 0); /* after its last */
	auto found = RunWalk(src, dst, 5, 1);
	EXPECT_EQ(found, (std::set<std::pair<Key, Kind>>{{K(1), Kind::Extra}, {K(99), Kind::Extra}}));

	MemSide empty;
	EXPECT_EQ(RunWalk(empty, dst, 3, 2).size(), dst.rows.size());
	EXPECT_EQ(RunWalk(src, empty, 3, 2).size(), src.rows.size());
	EXPECT_TRUE(RunWalk(empty, empty, 3, 2).empty());
}

TEST(AuditDiff, EqualTablesCostOnePairOfQueriesPerPage)
{
	MemSide src, dst;
	for (int i = 0; i < 1000; i++)
		src.rows[K(i)] = dst.rows[K(i)] = Md5Of(i, 0);
	WalkStats stats;
	EXPECT_TRUE(RunWalk(src, dst, 100, 16, &stats).empty());
	/* 10 full pages and the empty last one */
	EXPECT_EQ(stats.pages, 11);
	EXPECT_EQ(stats.source_rows, 1000);
	EXPECT_EQ(src.queries, 11);
	EXPECT_EQ(dst.queries, 11);
}

TEST(AuditDiff, OneDifferenceCostsLogarithmicallyManyQueries)
{
	MemSide src, dst;
	for (int i = 0; i < 100000; i++)
		src.rows[K(i)] = dst.rows[K(i)] = Md5Of(i, 0);
	dst.rows[K(77777)] = Md5Of(77777, 1);
	WalkStats stats;
	auto found = RunWalk(src, dst, 100000, 32, &stats);
	EXPECT_EQ(found, (std::set<std::pair<Key, Kind>>{{K(77777), Kind::Different}}));
	/* two pages; about 2 * log2(100000 / 16) halves hashed on each side, one split key per level */
	EXPECT_LT(src.queries, 60);
	EXPECT_LT(dst.queries, 60);
}

TEST(AuditDiff, OrderMismatchSurfaces)
{
	MemSide src, dst;
	for (int i = 0; i < 10; i++)
		src.rows[K(i)] = dst.rows[K(i)] = Md5Of(i, 0);
	dst.rows[K(5)] = Md5Of(5, 1);
	/*
	 * A source whose key order differs from the destination's (another
	 * collation): its page bounds come down in the destination's order, and
	 * the destination side refuses the range instead of comparing wrong sets.
	 */
	class OtherOrder : public MemSide {
	  public:
		int calls = 0;
		Page PageOf(const Range &, int64_t limit) override
		{
			Page p;
			p.hash.rows = limit;
			p.last = K(calls++ == 0 ? 7 : 3);
			return p;
		}
	} rsrc;
	EXPECT_THROW(RunWalk(rsrc, dst, 3, 1), std::runtime_error);
}

TEST(AuditDiff, Classify)
{
	SourceRow in{true, true, "a"}, out_of_scope{true, false, "a"}, absent{};
	DestRow same{true, "a", false}, other{true, "b", false}, none{}, newer{true, "b", true};
	EXPECT_EQ(Classify(in, same), Verdict::Equal);
	EXPECT_EQ(Classify(in, other), Verdict::Different);
	EXPECT_EQ(Classify(in, none), Verdict::Missing);
	EXPECT_EQ(Classify(out_of_scope, same), Verdict::Extra);
	EXPECT_EQ(Classify(absent, other), Verdict::Extra);
	EXPECT_EQ(Classify(absent, none), Verdict::Equal);
	EXPECT_EQ(Classify(out_of_scope, none), Verdict::Equal);
	EXPECT_EQ(Classify(in, newer), Verdict::InFlight);
	EXPECT_EQ(Classify(absent, DestRow{false, "", true}), Verdict::InFlight);
	EXPECT_STREQ(VerdictName(Verdict::InFlight), "in flight");
	EXPECT_STREQ(KindName(Kind::Extra), "extra");
}

TEST(AuditDiff, ProgressAndThrottle)
{
	Rate r = ProgressRate(5000, 10000, 2.0);
	EXPECT_DOUBLE_EQ(r.rows_per_second, 2500);
	ASSERT_TRUE(r.seconds_left.has_value());
	EXPECT_DOUBLE_EQ(*r.seconds_left, 2.0);
	EXPECT_FALSE(ProgressRate(0, 10000, 1.0).seconds_left);
	EXPECT_FALSE(ProgressRate(20000, 10000, 1.0).seconds_left);
	EXPECT_EQ(ProgressText(5000, 10000, 2.0), "5000 of ~10000 rows (50%), 2500 rows/s, about 2 s left");
	EXPECT_EQ(ProgressText(300, 0, 1.0), "300 rows, 300 rows/s");
	EXPECT_EQ(ProgressText(1000, 1000000, 1.0), "1000 of ~1000000 rows (0%), 1000 rows/s, about 16 min 39 s left");
	EXPECT_DOUBLE_EQ(ThrottleSeconds(1000, 0.5, 1000), 0.5);
	EXPECT_DOUBLE_EQ(ThrottleSeconds(1000, 2.0, 1000), 0);
	EXPECT_DOUBLE_EQ(ThrottleSeconds(1000, 0.1, 0), 0);
}

TEST(AuditDiff, KeysAsJson)
{
	EXPECT_EQ(KeyToJson({"id"}, {"7"}), "{\"id\": \"7\"}");
	EXPECT_EQ(KeyToJson({"a", "b\""}, {"1", "x y"}), "{\"a\": \"1\", \"b\\\"\": \"x y\"}");
	std::vector<std::string> two = {"a", "b"};
	EXPECT_EQ(KeyFromJson(cdc::Json::Parse(R"({"b": "x", "a": 5})"), two, "keys[1]"), (Key{"5", "x"}));
	EXPECT_EQ(KeyFromJson(cdc::Json::Parse("17"), {"id"}, "k"), Key{"17"});
	EXPECT_EQ(KeyFromJson(cdc::Json::Parse("\"x\""), {"id"}, "k"), Key{"x"});
	auto fails = [&](const char *json, const std::vector<std::string> &names, const char *text) {
		try {
			KeyFromJson(cdc::Json::Parse(json), names, "from_key");
			ADD_FAILURE() << json;
		} catch (const cdc::InputError &e) {
			EXPECT_STREQ(e.sqlstate(), "22023");
			EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
		}
	};
	fails("5", two, "must be a JSON object naming the key columns (a, b), not number");
	fails(R"({"a": 1})", two, "key column \"b\" is missing");
	fails(R"({"a": 1, "b": 2, "c": 3})", two, "\"c\" is not a key column");
	fails(R"({"a": [1], "b": 2})", two, "must be a string or a number, not array");
	fails("null", {"id"}, "not null");
}

TEST(AuditDiff, BoundedWalk)
{
	MemSide src, dst;
	for (int i = 0; i < 100; i++)
		src.rows[K(i)] = dst.rows[K(i)] = Md5Of(i, 0);
	for (int k : {5, 10, 20, 30, 31, 50})
		dst.rows[K(k)] = Md5Of(k, 1);
	dst.rows[K(200)] = Md5Of(200, 0);
	/* [10, 30]: both ends inside, the first page inclusive */
	auto found = RunWalk(src, dst, 4, 2, nullptr, Range{K(10), K(30), true});
	EXPECT_EQ(found, (std::set<std::pair<Key, Kind>>{{K(10), Kind::Different}, {K(20), Kind::Different}, {K(30), Kind::Different}}));
	/* (10, 30] leaves 10 out */
	found = RunWalk(src, dst, 4, 2, nullptr, Range{K(10), K(30), false});
	EXPECT_EQ(found.size(), 2u);
	/* from 31 to the end: the destination's extra row after the source's last key */
	found = RunWalk(src, dst, 7, 3, nullptr, Range{K(31), std::nullopt, true});
	EXPECT_EQ(found, (std::set<std::pair<Key, Kind>>{{K(31), Kind::Different}, {K(50), Kind::Different}, {K(200), Kind::Extra}}));
}

#include "core/cpp_only.hpp" // first: this file is pure C++
#include "core/audit_diff.hpp"

#include "core/errors.hpp"
#include "core/json.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace cdc::audit {

std::string
KeyToJson(const std::vector<std::string> &names, const Key &key)
{
	std::string out = "{";
	for (size_t i = 0; i < names.size() && i < key.size(); i++) {
		if (i)
			out += ", ";
		AppendJsonString(out, names[i]);
		out += ": ";
		AppendJsonString(out, key[i]);
	}
	return out + "}";
}

Key
KeyFromJson(const Json &j, const std::vector<std::string> &names, const std::string &what)
{
	auto scalar = [&](const Json &v, const std::string &column) {
		if (v.IsString() || v.IsNumber())
			return v.Scalar();
		if (v.IsBool())
			return std::string(v.AsBool() ? "true" : "false");
		throw InputError(sqlstate::kInvalidParameterValue,
		                 what + ": key column \"" + column + "\" must be a string or a number, not " + v.KindName());
	};
	if (!j.IsObject()) {
		if (names.size() == 1 && !j.IsArray() && !j.IsNull())
			return Key{scalar(j, names[0])};
		std::string list;
		for (size_t i = 0; i < names.size(); i++)
			list += (i ? ", " : "") + names[i];
		throw InputError(sqlstate::kInvalidParameterValue,
		                 what + " must be a JSON object naming the key columns (" + list + "), not " + j.KindName());
	}
	Key key(names.size());
	std::vector<bool> seen(names.size(), false);
	for (const auto &[field, value] : j.Members()) {
		size_t i = 0;
		while (i < names.size() && names[i] != field)
			i++;
		if (i == names.size())
			throw InputError(sqlstate::kInvalidParameterValue, what + ": \"" + field + "\" is not a key column");
		if (seen[i])
			throw InputError(sqlstate::kInvalidParameterValue, what + ": key column \"" + field + "\" appears twice");
		seen[i] = true;
		key[i] = scalar(value, field);
	}
	for (size_t i = 0; i < names.size(); i++)
		if (!seen[i])
			throw InputError(sqlstate::kInvalidParameterValue, what + ": key column \"" + names[i] + "\" is missing");
	return key;
}

__int128
ParseSum(std::string_view text)
{
	if (text.empty())
		return 0; /* sum() of no rows is NULL */
	bool negative = text[0] == '-';
	size_t i = negative || text[0] == '+' ? 1 : 0;
	if (i == text.size())
		throw std::invalid_argument("not an integer: " + std::string(text));
	unsigned __int128 v = 0;
	const unsigned __int128 limit = (unsigned __int128) 1 << 126;
	for (; i < text.size(); i++) {
		char c = text[i];
		if (c < '0' || c > '9')
			throw std::invalid_argument("not an integer: " + std::string(text));
		v = v * 10 + unsigned(c - '0');
		if (v > limit)
			throw std::invalid_argument("sum out of range: " + std::string(text));
	}
	return negative ? -(__int128) v : (__int128) v;
}

std::string
SumText(__int128 sum)
{
	if (sum == 0)
		return "0";
	bool negative = sum < 0;
	unsigned __int128 v = negative ? (unsigned __int128) (-sum) : (unsigned __int128) sum;
	std::string digits;
	while (v > 0) {
		digits.push_back(char('0' + int(v % 10)));
		v /= 10;
	}
	if (negative)
		digits.push_back('-');
	std::reverse(digits.begin(), digits.end());
	return digits;
}

const char *
KindName(Kind k)
{
	switch (k) {
	case Kind::Missing: return "missing";
	case Kind::Extra: return "extra";
	case Kind::Different: return "different";
	}
	return "?";
}

std::vector<Candidate>
DiffRows(const std::vector<RowDigest> &src, const std::vector<RowDigest> &dst)
{
	std::map<Key, const std::string *> at_dst;
	for (const RowDigest &r : dst)
		at_dst.emplace(r.key, &r.md5);
	std::map<Key, bool> at_src;
	std::vector<Candidate> out;
	for (const RowDigest &r : src) {
		at_src.emplace(r.key, true);
		auto d = at_dst.find(r.key);
		if (d == at_dst.end())
			out.push_back(Candidate{r.key, Kind::Missing});
		else if (*d->second != r.md5)
			out.push_back(Candidate{r.key, Kind::Different});
	}
	for (const RowDigest &r : dst)
		if (at_src.find(r.key) == at_src.end())
			out.push_back(Candidate{r.key, Kind::Extra});
	return out;
}

namespace {

/* Deeper than any balanced bisection of 2^63 rows: only a side that keeps changing under us gets here. */
constexpr int kMaxDepth = 80;

void
BisectAt(Side &src, Side &dst, const Range &r, RangeHash src_hash, RangeHash dst_hash, int64_t leaf_rows,
         const std::function<void(Candidate)> &emit, WalkStats &stats, int depth)
{
	const bool src_larger = src_hash.rows >= dst_hash.rows;
	const int64_t larger = src_larger ? src_hash.rows : dst_hash.rows;
	if (src_hash.rows + dst_hash.rows <= leaf_rows || larger < 2 || depth >= kMaxDepth) {
		for (Candidate &c : DiffRows(src.Rows(r), dst.Rows(r)))
			emit(std::move(c));
		return;
	}
	/*
	 * The median key of the side with more rows: both halves hold fewer of
	 * its rows, so the rows of the two sides together shrink at every level.
	 */
	Key mid = (src_larger ? src : dst).KeyAt(r, (larger - 1) / 2);
	Range left{r.after, mid, r.after_inclusive};
	Range right{mid, r.up_to, false};
	for (const Range *half : {&left, &right}) {
		RangeHash s = src.Hash(*half);
		RangeHash d = dst.Hash(*half);
		stats.ranges++;
		if (s != d)
			BisectAt(src, dst, *half, s, d, leaf_rows, emit, stats, depth + 1);
	}
}

} // namespace

void
Bisect(Side &src, Side &dst, const Range &r, RangeHash src_hash, RangeHash dst_hash, int64_t leaf_rows,
       const std::function<void(Candidate)> &emit, WalkStats &stats)
{
	if (leaf_rows < 1)
		throw std::invalid_argument("leaf_rows must be at least 1");
	BisectAt(src, dst, r, src_hash, dst_hash, leaf_rows, emit, stats, 0);
}

void
Walk(Side &src, Side &dst, const Range &bounds, int64_t page_rows, int64_t leaf_rows,
     const std::function<void(Candidate)> &emit,
     const std::function<bool(const WalkStats &, const std::optional<Key> &)> &page_done, WalkStats &stats)
{
	if (page_rows < 1)
		throw std::invalid_argument("page_rows must be at least 1");
	std::optional<Key> after = bounds.after;
	bool inclusive = bounds.after_inclusive;
	for (;;) {
		Page page = src.PageOf(Range{after, bounds.up_to, inclusive}, page_rows);
		/* a short page is the last: it reaches to the end, where the destination may hold more */
		const bool last = page.hash.rows < page_rows || !page.last;
		Range r{after, last ? bounds.up_to : page.last, inclusive};
		RangeHash d = dst.Hash(r);
		stats.pages++;
		stats.ranges++;
		stats.source_rows += page.hash.rows;
		if (page.hash != d)
			Bisect(src, dst, r, page.hash, d, leaf_rows, emit, stats);
		if (!page_done(stats, r.up_to) || last)
			return;
		after = page.last;
		inclusive = false;
	}
}

const char *
VerdictName(Verdict v)
{
	switch (v) {
	case Verdict::Equal: return "equal";
	case Verdict::Missing: return "missing";
	case Verdict::Extra: return "extra";
	case Verdict::Different: return "different";
	case Verdict::InFlight: return "in flight";
	}
	return "?";
}

Verdict
Classify(const SourceRow &s, const DestRow &d)
{
	if (d.newer)
		return Verdict::InFlight;
	const bool published = s.found && s.in_scope;
	if (published && d.found)
		return s.md5 == d.md5 ? Verdict::Equal : Verdict::Different;
	if (published)
		return Verdict::Missing;
	if (d.found)
		return Verdict::Extra;
	return Verdict::Equal;
}

Rate
ProgressRate(int64_t rows_done, int64_t estimate, double elapsed_seconds)
{
	Rate r;
	if (elapsed_seconds > 0)
		r.rows_per_second = double(rows_done) / elapsed_seconds;
	if (rows_done > 0 && r.rows_per_second > 0 && estimate > rows_done)
		r.seconds_left = double(estimate - rows_done) / r.rows_per_second;
	return r;
}

namespace {

std::string
Duration(double seconds)
{
	long s = std::lround(seconds);
	if (s < 60)
		return std::to_string(s) + " s";
	if (s < 3600)
		return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
	return std::to_string(s / 3600) + " h " + std::to_string((s % 3600) / 60) + " min";
}

} // namespace

std::string
ProgressText(int64_t rows_done, int64_t estimate, double elapsed_seconds)
{
	Rate r = ProgressRate(rows_done, estimate, elapsed_seconds);
	std::string s = std::to_string(rows_done);
	if (estimate > 0) {
		s += " of ~" + std::to_string(estimate) + " rows (" +
		     std::to_string(int(std::min<int64_t>(100, rows_done * 100 / estimate))) + "%)";
	} else {
		s += " rows";
	}
	s += ", " + std::to_string(std::llround(r.rows_per_second)) + " rows/s";
	if (r.seconds_left)
		s += ", about " + Duration(*r.seconds_left) + " left";
	return s;
}

double
ThrottleSeconds(int64_t rows_done, double elapsed_seconds, int64_t max_rows_per_second)
{
	if (max_rows_per_second <= 0 || rows_done <= 0)
		return 0;
	double due = double(rows_done) / double(max_rows_per_second);
	return due > elapsed_seconds ? due - elapsed_seconds : 0;
}

} // namespace cdc::audit

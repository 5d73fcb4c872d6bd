// The comparison of the audit (docs/audit.md, "How it compares"): range
// hashes, the walk over a table in pages of source rows in key order, the
// bisection of a page whose hashes differ down to rows (the approach of
// pg_comparator and data-diff), the verdict on a key once it is re-checked,
// and the arithmetic of progress and of the rate cap.
//
// Pure C++ (no postgres.h): the two sides are reached through the abstract
// Side, implemented over libpq for the source and SPI for the destination
// (src/pg/audit/), and by in-memory tables in the unit tests.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cdc {
class Json;
}

namespace cdc::audit {

// A key: the output text of each key column, in key order.
using Key = std::vector<std::string>;

// A key as JSON, {"id": "7"} (the form of entity keys, cdc.entities).
std::string KeyToJson(const std::vector<std::string> &names, const Key &key);
// A key from JSON: an object naming every key column exactly once (string
// or number values), or, for a one-column key, a bare string or number.
// Throws InputError 22023 naming `what` and what is wrong.
Key KeyFromJson(const Json &j, const std::vector<std::string> &names, const std::string &what);

// The hash of a set of rows: how many, and the sum of their digests (the
// first 64 bits of each row's md5 as a signed integer).  A sum is
// order-independent, so the two sides need not read rows in the same order,
// and additive: the hash of a range is the sum of its parts.  128 bits hold
// the sum of 2^64 rows' digests exactly.
struct RangeHash {
	int64_t rows = 0;
	__int128 sum = 0;
	bool operator==(const RangeHash &o) const { return rows == o.rows && sum == o.sum; }
	bool operator!=(const RangeHash &o) const { return !(*this == o); }
};

// A numeric sum's text ("-12", "", for NULL: 0) as a 128-bit integer.
// Throws std::invalid_argument for anything else.
__int128 ParseSum(std::string_view text);
std::string SumText(__int128 sum);

// A key range (after, up_to], or [after, up_to] with after_inclusive;
// nullopt is unbounded on that side.
struct Range {
	std::optional<Key> after;
	std::optional<Key> up_to;
	bool after_inclusive = false;
};

// One row: its key and its digest (md5 hex of the canonical text).
struct RowDigest {
	Key key;
	std::string md5;
};

// A page of the walk: its hash and its last key (nullopt when empty).
struct Page {
	RangeHash hash;
	std::optional<Key> last;
};

// One side of the comparison.  Each method reads the side's rows of the
// range in its own key order; implementations raise an error when the
// bounds of a range are not in ascending order on their side (a collation
// that orders keys differently from the other side's).
class Side {
  public:
	virtual ~Side() = default;
	virtual RangeHash Hash(const Range &r) = 0;
	// The key at 0-based `offset` of the range in key order (offset < rows).
	virtual Key KeyAt(const Range &r, int64_t offset) = 0;
	virtual std::vector<RowDigest> Rows(const Range &r) = 0;
	// The first `limit` rows of the range in key order (the walk; only the
	// source's is used).
	virtual Page PageOf(const Range &r, int64_t limit) = 0;
};

enum class Kind { Missing, Extra, Different };
const char *KindName(Kind k);

// A key whose rows differ in one comparison, before it is re-checked.
struct Candidate {
	Key key;
	Kind kind;
};

// What the walk did: pages read, ranges compared (pages and the halves of
// bisected ranges), source rows covered.
struct WalkStats {
	int64_t pages = 0;
	int64_t ranges = 0;
	int64_t source_rows = 0;
};

// The candidates of two row lists (each key at most once per list, any
// order): keys only in src are Missing, only in dst Extra, in both with
// other digests Different.  In the order of src, then dst.
std::vector<Candidate> DiffRows(const std::vector<RowDigest> &src, const std::vector<RowDigest> &dst);

// Compares range `r` whose hashes differ (src_hash, dst_hash): while the
// two sides together hold more than `leaf_rows` rows it is split at the
// median key of the side with more rows, and the halves whose hashes
// differ are compared again; then the rows are read and diffed.  Every
// differing key of the range is passed to `emit` once.  leaf_rows >= 1.
void Bisect(Side &src, Side &dst, const Range &r, RangeHash src_hash, RangeHash dst_hash, int64_t leaf_rows,
            const std::function<void(Candidate)> &emit, WalkStats &stats);

// Walks range `bounds` (all keys: Range{}) in pages of `page_rows` source
// rows in key order: each page (after, last] is hashed on both sides, the
// first one starting where `bounds` starts, the last one reaching to where
// it ends (where the destination may hold more rows); pages whose hashes
// differ are bisected.  After each page `page_done(stats, last key)` is
// called (the place to commit and report progress); it returns false to
// stop the walk there.
void Walk(Side &src, Side &dst, const Range &bounds, int64_t page_rows, int64_t leaf_rows,
          const std::function<void(Candidate)> &emit,
          const std::function<bool(const WalkStats &, const std::optional<Key> &)> &page_done, WalkStats &stats);

// A key as the re-check sees it on each side.
struct SourceRow {
	bool found = false;
	bool in_scope = false; // the publication's row filter admits it
	std::string md5;
};
struct DestRow {
	bool found = false;
	std::string md5;
	bool newer = false; // its entity record is newer than the source snapshot: the stream changed it since
};

enum class Verdict { Equal, Missing, Extra, Different, InFlight };
const char *VerdictName(Verdict v);
// The verdict on a key at one source snapshot, the destination having
// applied the stream at least up to it: a destination record newer than
// the snapshot cannot be compared with it (in flight); otherwise the row
// must be there exactly when the source's row is in the publication's
// scope, with the same digest.
Verdict Classify(const SourceRow &s, const DestRow &d);

// Progress of a long run: rows per second so far, and the seconds left for
// `estimate` rows at that rate (nullopt when unknown: nothing done yet, or
// no estimate, or the estimate already passed).
struct Rate {
	double rows_per_second = 0;
	std::optional<double> seconds_left;
};
Rate ProgressRate(int64_t rows_done, int64_t estimate, double elapsed_seconds);
// "1234 of ~10000 rows (12%), 5000 rows/s, about 2 s left".
std::string ProgressText(int64_t rows_done, int64_t estimate, double elapsed_seconds);

// How long to sleep now so that `rows_done` rows take at least
// rows_done / max_rows_per_second seconds (0 when no cap or not ahead).
double ThrottleSeconds(int64_t rows_done, double elapsed_seconds, int64_t max_rows_per_second);

} // namespace cdc::audit

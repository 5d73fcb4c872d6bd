// See stats_math.hpp.
#include "core/stats_math.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cdc {

int
LatencyBucket(int64_t micros)
{
	if (micros <= 1000)
		return 0;
	// smallest k with micros <= 2^k * 1000
	int64_t bound = 1000;
	for (int k = 0; k < kLatencyBuckets - 1; k++, bound *= 2)
		if (micros <= bound)
			return k;
	return kLatencyBuckets - 1;
}

double
LatencyBucketUpperMs(int k)
{
	if (k >= kLatencyBuckets - 1)
		return std::numeric_limits<double>::infinity();
	return std::ldexp(1.0, k);
}

std::optional<double>
LatencyQuantileUpperMs(const int64_t (&buckets)[kLatencyBuckets], double q)
{
	int64_t total = 0;
	for (int64_t b : buckets)
		total += b;
	if (total <= 0)
		return std::nullopt;
	// the smallest bucket whose cumulative count reaches q of the total
	double want = q * double(total);
	int64_t cumulative = 0;
	for (int k = 0; k < kLatencyBuckets; k++) {
		cumulative += buckets[k];
		if (double(cumulative) >= want)
			return LatencyBucketUpperMs(k);
	}
	return LatencyBucketUpperMs(kLatencyBuckets - 1);
}

CopyProgress
EstimateCopyProgress(int64_t rows, int64_t estimate, double elapsed_s, bool done)
{
	CopyProgress p;
	if (done)
		p.percent = 100.0;
	else if (estimate > 0)
		p.percent = std::min(99.9, 100.0 * double(rows) / double(estimate));
	else if (estimate == 0)
		p.percent = 99.9; /* an empty table by the estimate: whatever arrives is the rest */
	if (elapsed_s > 0 && rows > 0)
		p.rows_per_second = double(rows) / elapsed_s;
	if (done)
		p.seconds_left = 0.0;
	else if (estimate >= 0 && p.rows_per_second)
		p.seconds_left = double(std::max<int64_t>(estimate - rows, 0)) / *p.rows_per_second;
	return p;
}

} // namespace cdc

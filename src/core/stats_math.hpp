// The arithmetic of the shared counters (docs/operations.md, "Counters"):
// the apply-latency histogram's fixed buckets and the percentile read from
// it, the progress of a long copy.  Pure C++, unit-tested in
// test/unit/test_stats_math.cpp; the glue is pg/shared_stats.cpp and
// pg/worker/table_copy.cpp.
#pragma once

#include "core/cpp_only.hpp"

#include <cstdint>
#include <optional>

namespace cdc {

// Buckets of the apply-latency histogram: bucket k (0 <= k < 19) counts
// latencies of at most 2^k milliseconds and more than 2^(k-1) (bucket 0:
// at most 1 ms), bucket 19 everything above 2^18 ms (262 s).  Prometheus
// histograms are cumulative; the view cdc.apply_latency sums them up.
constexpr int kLatencyBuckets = 20;

// The bucket of a latency of `micros` microseconds.  A negative latency
// (the source's clock ahead of ours) counts as 0.
int LatencyBucket(int64_t micros);

// The upper bound of bucket k in milliseconds (2^k); infinity for the last.
double LatencyBucketUpperMs(int k);

// The upper bound (ms) of the bucket holding quantile q (0 < q <= 1) of
// the latencies counted in `buckets` (not cumulative); nullopt when
// nothing was counted.  An estimate as good as the bucket: the true
// quantile is at most this and more than half of it.
std::optional<double> LatencyQuantileUpperMs(const int64_t (&buckets)[kLatencyBuckets], double q);

// Copy progress: `rows` copied of an estimated `estimate` (the source
// planner's; < 0 unknown) in `elapsed_s` seconds.  Percent is capped at
// 99.9 while the copy runs (the estimate can be low) and is 100 once it is
// done; the rate is rows per second; the time left is the estimate's rest
// at that rate.  Fields are unset when they cannot be known.
struct CopyProgress {
	std::optional<double> percent;
	std::optional<double> rows_per_second;
	std::optional<double> seconds_left;
};
CopyProgress EstimateCopyProgress(int64_t rows, int64_t estimate, double elapsed_s, bool done);

} // namespace cdc

// GoogleTest units for the arithmetic of the shared counters
// (core/stats_math.hpp): the apply-latency buckets (powers of two
// milliseconds), the quantile read from a histogram, and the copy
// progress (percent capped below 100 until done, rate, time left).
#include "core/stats_math.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace cdc;

TEST(LatencyBucket, PowersOfTwoMilliseconds)
{
	EXPECT_EQ(LatencyBucket(-5000), 0); // the source's clock ahead of ours
	EXPECT_EQ(LatencyBucket(0), 0);
	EXPECT_EQ(LatencyBucket(1000), 0);   // 1 ms: <= 1 ms
	EXPECT_EQ(LatencyBucket(1001), 1);   // just above: <= 2 ms
	EXPECT_EQ(LatencyBucket(2000), 1);
	EXPECT_EQ(LatencyBucket(2001), 2);
	EXPECT_EQ(LatencyBucket(150000), 8); // 150 ms: <= 256 ms
	EXPECT_EQ(LatencyBucket(int64_t(262144) * 1000), 18);
	EXPECT_EQ(LatencyBucket(int64_t(262144) * 1000 + 1), 19);
	EXPECT_EQ(LatencyBucket(INT64_MAX), kLatencyBuckets - 1);
}

TEST(LatencyBucket, UpperBounds)
{
	EXPECT_EQ(LatencyBucketUpperMs(0), 1.0);
	EXPECT_EQ(LatencyBucketUpperMs(8), 256.0);
	EXPECT_EQ(LatencyBucketUpperMs(18), 262144.0);
	EXPECT_TRUE(std::isinf(LatencyBucketUpperMs(19)));
	// every latency lies within its bucket's bounds
	for (int64_t us : {0L, 999L, 1000L, 1500L, 3999L, 4000L, 4001L, 777777L, 99999999L}) {
		int k = LatencyBucket(us);
		EXPECT_LE(double(us) / 1000.0, LatencyBucketUpperMs(k)) << us;
		if (k > 0)
			EXPECT_GT(double(us) / 1000.0, LatencyBucketUpperMs(k - 1)) << us;
	}
}

TEST(LatencyQuantile, ReadsTheBucketThatReachesTheQuantile)
{
	int64_t none[kLatencyBuckets] = {};
	EXPECT_FALSE(LatencyQuantileUpperMs(none, 0.5));
	int64_t b[kLatencyBuckets] = {};
	b[2] = 90; // 90 transactions within (2, 4] ms
	b[7] = 9;  // 9 within (64, 128] ms
	b[19] = 1; // 1 above 262 s
	EXPECT_EQ(*LatencyQuantileUpperMs(b, 0.5), 4.0);
	EXPECT_EQ(*LatencyQuantileUpperMs(b, 0.9), 4.0);
	EXPECT_EQ(*LatencyQuantileUpperMs(b, 0.95), 128.0);
	EXPECT_EQ(*LatencyQuantileUpperMs(b, 0.99), 128.0);
	EXPECT_TRUE(std::isinf(*LatencyQuantileUpperMs(b, 1.0)));
}

TEST(CopyProgress, PercentRateAndTimeLeft)
{
	CopyProgress p = EstimateCopyProgress(250, 1000, 5.0, false);
	EXPECT_DOUBLE_EQ(*p.percent, 25.0);
	EXPECT_DOUBLE_EQ(*p.rows_per_second, 50.0);
	EXPECT_DOUBLE_EQ(*p.seconds_left, 15.0);
	// the estimate was low: never 100 % before the end, no negative time left
	p = EstimateCopyProgress(1500, 1000, 5.0, false);
	EXPECT_DOUBLE_EQ(*p.percent, 99.9);
	EXPECT_DOUBLE_EQ(*p.seconds_left, 0.0);
	// done: 100 % whatever the estimate said
	p = EstimateCopyProgress(1500, 1000, 5.0, true);
	EXPECT_DOUBLE_EQ(*p.percent, 100.0);
	EXPECT_DOUBLE_EQ(*p.seconds_left, 0.0);
	// unknown estimate: a rate, but no percent and no time left
	p = EstimateCopyProgress(100, -1, 2.0, false);
	EXPECT_FALSE(p.percent);
	EXPECT_DOUBLE_EQ(*p.rows_per_second, 50.0);
	EXPECT_FALSE(p.seconds_left);
	// nothing copied yet: no rate
	p = EstimateCopyProgress(0, 1000, 0.0, false);
	EXPECT_DOUBLE_EQ(*p.percent, 0.0);
	EXPECT_FALSE(p.rows_per_second);
	EXPECT_FALSE(p.seconds_left);
}

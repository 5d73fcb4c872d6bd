// GoogleTest units for core/layout: ledger digests from md5 hex, the compact
// entity key (array_out quoting), fixed-width versions and coarse seconds.
#include "core/errors.hpp"
#include "core/layout.hpp"

#include <gtest/gtest.h>

#include <limits>

using namespace cdc;

TEST(Layout, LedgerDigestInput)
{
	EXPECT_EQ(LedgerDigestInput(16384, "orders:0:42"), "16384\norders:0:42");
	EXPECT_EQ(LedgerDigestInput(1, ""), "1\n");
}

TEST(Layout, DigestsAreTwosComplementPrefixes)
{
	// SQL: ('x' || substr(h, 1, 16))::bit(64)::bigint
	EXPECT_EQ(Int64FromMd5Hex("0000000000000001ffff"), 1);
	EXPECT_EQ(Int64FromMd5Hex("ffffffffffffffff0000"), -1);
	EXPECT_EQ(Int64FromMd5Hex("8000000000000000"), std::numeric_limits<int64_t>::min());
	EXPECT_EQ(Int64FromMd5Hex("7FFFFFFFFFFFFFFF"), std::numeric_limits<int64_t>::max());
	EXPECT_EQ(Int32FromMd5Hex("ffffffff00"), -1);
	EXPECT_EQ(Int32FromMd5Hex("0000002a"), 42);
	EXPECT_THROW(Int64FromMd5Hex("abc"), std::invalid_argument);
	EXPECT_THROW(Int32FromMd5Hex("zzzzzzzz"), std::invalid_argument);
}

TEST(Layout, DigestFromBytesEqualsDigestFromHex)
{
	const unsigned char one[16] = {0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff};
	const unsigned char minus_one[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	const unsigned char min[16] = {0x80};
	const unsigned char mixed[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x11};
	EXPECT_EQ(Int64FromMd5(one), 1);
	EXPECT_EQ(Int64FromMd5(minus_one), -1);
	EXPECT_EQ(Int64FromMd5(min), std::numeric_limits<int64_t>::min());
	EXPECT_EQ(Int64FromMd5(mixed), Int64FromMd5Hex("123456789abcdef011"));
}

TEST(Layout, SourceIdsComeFromTheNameHashAndProbeOnCollisions)
{
	// The first 31 bits of the name's md5, then the ids after it.
	EXPECT_EQ(SourceIdCandidate("c0fd7a8ad0a1c2ef0b2a3d26f5e3e4b7", 0), 0x40fd7a8a);
	EXPECT_EQ(SourceIdCandidate("c0fd7a8ad0a1c2ef0b2a3d26f5e3e4b7", 1), 0x40fd7a8b);
	// Never negative; wraps at 2^31.
	EXPECT_EQ(SourceIdCandidate("7fffffff000000000000000000000000", 0), 0x7fffffff);
	EXPECT_EQ(SourceIdCandidate("7fffffff000000000000000000000000", 1), 0);
	EXPECT_EQ(SourceIdCandidate("ffffffff000000000000000000000000", 2), 1);
	EXPECT_EQ(SourceIdCandidate("00000000000000000000000000000000", 0), 0);
}

TEST(Layout, CompactKeyOfOneColumnIsItsText)
{
	EXPECT_EQ(CompactEntityKey({"7"}), "7");
	EXPECT_EQ(CompactEntityKey({"a b,{c}"}), "a b,{c}");
	EXPECT_EQ(CompactEntityKey({""}), "");
}

TEST(Layout, CompactKeyOfSeveralColumnsQuotesLikeArrayOut)
{
	EXPECT_EQ(CompactEntityKey({"1", "x"}), "{1,x}");
	EXPECT_EQ(CompactEntityKey({"1", "a b"}), "{1,\"a b\"}");
	EXPECT_EQ(CompactEntityKey({"", "null", "NULL"}), "{\"\",\"null\",\"NULL\"}");
	EXPECT_EQ(CompactEntityKey({"a,b", "{x}", "q\"s", "b\\s"}), "{\"a,b\",\"{x}\",\"q\\\"s\",\"b\\\\s\"}");
	EXPECT_EQ(CompactEntityKey({"tab\there", "nul"}), "{\"tab\there\",nul}");
}

TEST(Layout, StoredVersionsRoundTrip)
{
	Version lsn{{2, 24023128, 24023000, 3}};
	StoredVersion s = ToStoredVersion(lsn);
	EXPECT_EQ(s.v0, 2);
	EXPECT_EQ(s.v1, 24023128);
	EXPECT_EQ(s.v2, 24023000);
	EXPECT_EQ(s.v3, 3);
	EXPECT_EQ(FromStoredVersion(s, 4), lsn);

	Version column{{0, -5, 1}}; // a delete ordered by a version column holding -5
	StoredVersion c = ToStoredVersion(column);
	EXPECT_EQ(c.v3, 0);
	EXPECT_EQ(FromStoredVersion(c, 3), column);
}

TEST(Layout, StoredVersionsKeepTheOrder)
{
	// Tuple comparison of the stored columns equals Version::Compare.
	std::vector<Version> vs = {Version{{0, 1, 1, 0}}, Version{{0, 1, 2, 0}}, Version{{0, 2, 0, 0}},
	                           Version{{1, 0, 0, 0}}, Version{{0, 1, 1, 5}}};
	for (const Version &a : vs)
		for (const Version &b : vs) {
			StoredVersion x = ToStoredVersion(a), y = ToStoredVersion(b);
			auto tx = std::make_tuple(x.v0, x.v1, x.v2, x.v3), ty = std::make_tuple(y.v0, y.v1, y.v2, y.v3);
			EXPECT_EQ(tx < ty, Version::Compare(a, b) < 0);
			EXPECT_EQ(tx == ty, Version::Compare(a, b) == 0);
		}
}

TEST(Layout, StoredVersionsRejectWhatDoesNotFit)
{
	auto sqlstate = [](const Version &v) {
		try {
			ToStoredVersion(v);
		} catch (const InputError &e) {
			return std::string(e.sqlstate());
		}
		return std::string("none");
	};
	EXPECT_EQ(sqlstate(Version{{int64_t(1) << 31, 1, 1, 0}}), "22003");
	EXPECT_EQ(sqlstate(Version{{0, 1, 1, int64_t(1) << 33}}), "22003");
	EXPECT_EQ(sqlstate(Version{{0, 1}}), "0A000");
	EXPECT_EQ(sqlstate(Version{{0, 1, 2, 3, 4}}), "0A000");
	EXPECT_EQ(sqlstate(Version{{2147483647, std::numeric_limits<int64_t>::max(), -1, 2147483647}}), "none");
}

TEST(Layout, CoarseSecondsRoundDown)
{
	EXPECT_EQ(CoarseSeconds(0), 0);
	EXPECT_EQ(CoarseSeconds(1999999), 1);
	EXPECT_EQ(CoarseSeconds(-1), -1);
	EXPECT_EQ(CoarseSeconds(-1000000), -1);
	EXPECT_EQ(CoarseSeconds(int64_t(1) << 62), std::numeric_limits<int32_t>::max());
}

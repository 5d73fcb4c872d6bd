// GoogleTest units for the worker's spent-buffer pool (core/buffer_pool.hpp):
// an image written into a spent vector equals one built afresh, the pool
// reuses buffers without allocating, never keeps a large one, and holds no
// more than its byte limit.  The glue is TupleImage and StampNextChange in
// pg/worker/pgoutput.cpp and ApplyEngine::ApplyQueued (pg/apply/engine.cpp).
#include "core/buffer_pool.hpp"

#include <gtest/gtest.h>

using namespace cdc;

namespace {

using Kind = DecodedValue::Kind;

ImageValues
Fresh(std::initializer_list<std::tuple<const char *, Kind, const char *>> in)
{
	ImageValues v;
	for (const auto &[name, kind, text] : in) {
		DecodedValue d;
		d.kind = kind;
		if (kind == Kind::Text)
			d.text = text;
		v.emplace_back(name, d);
	}
	return v;
}

void
ExpectEqual(const ImageValues &a, const ImageValues &b)
{
	ASSERT_EQ(a.size(), b.size());
	for (size_t i = 0; i < a.size(); i++) {
		EXPECT_EQ(a[i].first, b[i].first) << i;
		EXPECT_EQ(a[i].second.kind, b[i].second.kind) << i;
		EXPECT_EQ(a[i].second.text, b[i].second.text) << i;
	}
}

const std::string kLong = "2026-12-04 05:27:31.123456+00 and some more text"; // over the SSO buffer

} // namespace

TEST(BufferPool, WriterIntoEmptyEqualsFresh)
{
	ImageWriter w(ImageValues{});
	w.Add("id", Kind::Text, "1");
	w.Add("note", Kind::Null, "ignored");
	w.Add("big", Kind::Unavailable);
	w.Add("at", Kind::Text, kLong);
	ExpectEqual(w.Finish(), Fresh({{"id", Kind::Text, "1"}, {"note", Kind::Null, ""}, {"big", Kind::Unavailable, ""},
	                               {"at", Kind::Text, kLong.c_str()}}));
}

TEST(BufferPool, WriterOverSpentVectorKeepsNothingOld)
{
	// a spent image with more columns and texts where the new one has NULLs
	ImageValues spent = Fresh({{"a", Kind::Text, kLong.c_str()}, {"b", Kind::Text, "x"}, {"c", Kind::Text, "y"},
	                           {"d", Kind::Text, "z"}});
	ImageWriter w(std::move(spent));
	w.Add("id", Kind::Null);
	w.Add("b", Kind::Unavailable, "not read");
	w.Add("at", Kind::Text, "");
	ExpectEqual(w.Finish(), Fresh({{"id", Kind::Null, ""}, {"b", Kind::Unavailable, ""}, {"at", Kind::Text, ""}}));
}

TEST(BufferPool, WriterOverShorterSpentVectorAppends)
{
	ImageWriter w(Fresh({{"a", Kind::Text, "1"}}));
	w.Add("a", Kind::Text, "2");
	w.Add("b", Kind::Text, kLong);
	ExpectEqual(w.Finish(), Fresh({{"a", Kind::Text, "2"}, {"b", Kind::Text, kLong.c_str()}}));
}

TEST(BufferPool, ReusesTheSameBuffers)
{
	BufferPool pool(1 << 20);
	ImageValues v = Fresh({{"at", Kind::Text, kLong.c_str()}});
	const char *text_buffer = v[0].second.text.data();
	const auto *elements = v.data();
	pool.GiveValues(std::move(v));
	EXPECT_EQ(pool.Items(), 1u);
	EXPECT_GT(pool.Bytes(), 0u);
	ImageWriter w(pool.TakeValues());
	EXPECT_EQ(pool.Bytes(), 0u);
	w.Add("at", Kind::Text, "2026-01-01 00:00:00.000001+00");
	ImageValues again = w.Finish();
	EXPECT_EQ(again.data(), elements);
	EXPECT_EQ(again[0].second.text.data(), text_buffer);
	EXPECT_EQ(again[0].second.text, "2026-01-01 00:00:00.000001+00");

	std::string key(40, 'k');
	const char *key_buffer = key.data();
	pool.GiveString(std::move(key));
	std::string taken = pool.TakeString();
	EXPECT_TRUE(taken.empty());
	EXPECT_EQ(taken.data(), key_buffer);
	EXPECT_EQ(pool.Items(), 0u);
}

TEST(BufferPool, NeverKeepsALargeBuffer)
{
	BufferPool pool(1 << 30);
	std::string big(4 << 20, 'v'); // a 4 MB value
	ImageValues v;
	v.emplace_back("note", DecodedValue::Text(big));
	pool.GiveValues(std::move(v));
	EXPECT_LE(pool.Bytes(), sizeof(ImageValues::value_type) + BufferPool::kKeptStringBytes + 1);
	ImageValues back = pool.TakeValues();
	ASSERT_EQ(back.size(), 1u);
	EXPECT_LE(back[0].second.text.capacity(), BufferPool::kKeptStringBytes);

	pool.GiveString(std::string(1000, 'k'));
	EXPECT_EQ(pool.Items(), 0u); // its buffer dropped: nothing left worth keeping
	EXPECT_EQ(pool.Bytes(), 0u);
	pool.GiveString(std::string("short")); // in the string's own buffer: nothing to keep
	EXPECT_EQ(pool.Items(), 0u);
}

TEST(BufferPool, HoldsNoMoreThanItsLimit)
{
	BufferPool pool(4096);
	for (int i = 0; i < 1000; i++) {
		pool.GiveValues(Fresh({{"a", Kind::Text, kLong.c_str()}, {"b", Kind::Null, ""}}));
		pool.GiveString(std::string(40, 'k'));
		EXPECT_LE(pool.Bytes(), 4096u);
	}
	EXPECT_GT(pool.Items(), 0u);
	size_t taken = 0;
	while (pool.Items() > 0 && taken < 2000) {
		if (!pool.TakeValues().empty())
			taken++;
		pool.TakeString();
	}
	EXPECT_EQ(pool.Bytes(), 0u);
	EXPECT_TRUE(pool.TakeValues().empty()); // an empty pool gives fresh ones
	EXPECT_TRUE(pool.TakeString().empty());
	pool.GiveValues(Fresh({{"a", Kind::Text, "1"}}));
	pool.Clear();
	EXPECT_EQ(pool.Items(), 0u);
	EXPECT_EQ(pool.Bytes(), 0u);
}

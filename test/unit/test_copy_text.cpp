// GoogleTest units for the COPY text-format row parser (initial copy).
#include "core/copy_text.hpp"
#include "core/errors.hpp"

#include <gtest/gtest.h>

using cdc::ParseCopyTextRow;

TEST(CopyText, PlainColumnsAndNull)
{
	auto r = ParseCopyTextRow("1\tAnne\t\\N\t\n");
	ASSERT_EQ(r.size(), 4u);
	EXPECT_EQ(*r[0], "1");
	EXPECT_EQ(*r[1], "Anne");
	EXPECT_FALSE(r[2].has_value());
	EXPECT_EQ(*r[3], "") << "an empty string is not NULL";
}

TEST(CopyText, Escapes)
{
	auto r = ParseCopyTextRow("a\\tb\\nc\\\\d\t\\101\\x42\t\\\\N");
	ASSERT_EQ(r.size(), 3u);
	EXPECT_EQ(*r[0], "a\tb\nc\\d");
	EXPECT_EQ(*r[1], "AB");
	EXPECT_EQ(*r[2], "\\N") << "an escaped backslash before N is text";
}

TEST(CopyText, ByteaHexSurvives)
{
	// bytea's text output \x0102 is written by COPY as \\x0102
	auto r = ParseCopyTextRow("\\\\x0102ff");
	ASSERT_EQ(r.size(), 1u);
	EXPECT_EQ(*r[0], "\\x0102ff");
}

TEST(CopyText, MalformedRowsAreErrors)
{
	EXPECT_THROW(ParseCopyTextRow("abc\\"), cdc::InputError);
	EXPECT_THROW(ParseCopyTextRow("a\\Nb"), cdc::InputError);
}

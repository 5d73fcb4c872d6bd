// GoogleTest units for core/modes: mode names, the history metadata column
// rule, and the handler metadata document (valid JSON with every field).
#include "core/json.hpp"
#include "core/modes.hpp"

#include <gtest/gtest.h>

using namespace cdc;

TEST(Modes, ParseAndName)
{
	EXPECT_EQ(ParseMode("state"), Mode::State);
	EXPECT_EQ(ParseMode("history"), Mode::History);
	EXPECT_EQ(ParseMode("handler"), Mode::Handler);
	EXPECT_FALSE(ParseMode("State").has_value());
	EXPECT_FALSE(ParseMode("").has_value());
	for (Mode m : {Mode::State, Mode::History, Mode::Handler})
		EXPECT_EQ(ParseMode(ModeName(m)), m);
}

TEST(Modes, HistoryMetaColumns)
{
	EXPECT_TRUE(IsHistoryMetaColumn(history_column::kKey));
	EXPECT_TRUE(IsHistoryMetaColumn(history_column::kVersion));
	EXPECT_TRUE(IsHistoryMetaColumn("cdc_anything"));
	EXPECT_FALSE(IsHistoryMetaColumn("cdc"));
	EXPECT_FALSE(IsHistoryMetaColumn("id"));
	EXPECT_FALSE(IsHistoryMetaColumn("my_cdc_key"));
}

TEST(Modes, HandlerMetaIsJsonWithEveryField)
{
	HandlerMeta m;
	m.target = "public.orders";
	m.op = 'u';
	m.is_snapshot = false;
	m.entity_key = "{\"id\": \"7\"}";
	m.version = Version{{0, 4096, 4096, 2}};
	m.delivery_key = "orders:1:0:\"42\"";
	m.source_json = "{\"name\": \"srv\", \"lsn\": 4096}";
	m.source_ts_ms = 1700000000000;
	Json j = Json::Parse(HandlerMetaJson(m));
	ASSERT_TRUE(j.IsObject());
	EXPECT_EQ(j.Find("target")->Scalar(), "public.orders");
	EXPECT_EQ(j.Find("op")->Scalar(), "u");
	EXPECT_FALSE(j.Find("is_snapshot")->AsBool());
	EXPECT_EQ(j.Find("entity_key")->Find("id")->Scalar(), "7");
	ASSERT_EQ(j.Find("version")->Items().size(), 4u);
	EXPECT_EQ(j.Find("version")->Items()[3].Scalar(), "2");
	EXPECT_EQ(j.Find("delivery_key")->Scalar(), "orders:1:0:\"42\"");
	EXPECT_EQ(j.Find("source")->Find("name")->Scalar(), "srv");
	EXPECT_EQ(*j.Find("source_ts_ms")->AsInt64(), 1700000000000);
}

TEST(Modes, HandlerMetaOfATruncateRowAndASnapshot)
{
	HandlerMeta m;
	m.op = 'r';
	m.is_snapshot = true;
	Json j = Json::Parse(HandlerMetaJson(m));
	EXPECT_TRUE(j.Find("is_snapshot")->AsBool());
	EXPECT_TRUE(j.Find("entity_key")->IsNull());
	EXPECT_TRUE(j.Find("source")->IsNull());
	EXPECT_TRUE(j.Find("source_ts_ms")->IsNull());
	EXPECT_TRUE(j.Find("version")->Items().empty());
}

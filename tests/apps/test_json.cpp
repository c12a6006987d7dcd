// The JSON parser the app tests rely on accepts what RFC 8259 allows and nothing else.
#include "apps/json.h"

#include <gtest/gtest.h>

namespace vkgrad::test {
namespace {

TEST(JsonParser, AcceptsValidAndRejectsInvalidDocuments) {
  const Json doc = JsonParser::parse(
      R"( {"a": [1, -2.5e3, 0, true, false, null], "b": {"c": "x\"\\\/\n\u0041"}, "d": []} )");
  EXPECT_EQ(doc["a"].items.size(), 6u);
  EXPECT_EQ(doc["a"].items[1].number, -2500.0);
  EXPECT_EQ(doc["b"]["c"].text, "x\"\\/\nA");
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "01", "1.", "-", "[1] [2]",
                          "\"tab\there\"", "\"\\x\"", "{\"a\":1,\"a\":2}", "nan", "[inf]", "tru"})
    EXPECT_THROW(JsonParser::parse(bad), std::runtime_error) << bad;
}

}  // namespace
}  // namespace vkgrad::test

#include "graph/json.h"

#include <string>

#include <gtest/gtest.h>

#include "vk/error.h"

namespace vkgrad::test {
namespace {

using graph::Json;

TEST(GraphJson, ParsesAndDumpsRoundTrip) {
  const std::string text =
      R"({"a":[1,-2.5,0,true,false,null],"b":{"c":"x\"\\\n\u00e9\ud83d\ude00"},"d":[],"e":{}})";
  const Json doc = Json::parse(" \n" + text + "\t ");
  EXPECT_EQ(doc.find("a")->items().size(), 6u);
  EXPECT_EQ(doc.find("a")->items()[1].asNumber(), -2.5);
  EXPECT_EQ(doc.find("b")->find("c")->asString(), "x\"\\\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(doc.find("missing"), nullptr);
  // Dumping writes UTF-8 as is and escapes what JSON requires.
  const Json again = Json::parse(doc.dump());
  EXPECT_EQ(again.dump(), doc.dump());
  EXPECT_EQ(Json::number(12345678901.0).dump(), "12345678901");
  EXPECT_EQ(Json::number(0.1).dump(), "0.10000000000000001");
}

TEST(GraphJson, RejectsInvalidDocumentsWithTheirPosition) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "01", "1.", "-", "[1] [2]",
                          "\"tab\there\"", "\"\\x\"", "{\"a\":1,\"a\":2}", "nan", "[inf]", "tru",
                          "\"\\ud800\"", "{\"a\" 1}"}) {
    try {
      Json::parse(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("JSON: "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(" at byte "), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(Json::parse(std::string(100, '[') + std::string(100, ']')), Error);  // too deep
}

TEST(GraphJson, TypedAccessorsCheckTheKind) {
  const Json doc = Json::parse(R"({"n": 3, "f": 2.5, "s": "x", "neg": -1})");
  EXPECT_EQ(doc.find("n")->asUint(), 3u);
  EXPECT_THROW(doc.find("f")->asUint(), Error);
  EXPECT_THROW(doc.find("neg")->asUint(), Error);
  EXPECT_THROW(doc.find("s")->asNumber(), Error);
  EXPECT_THROW(doc.find("n")->items(), Error);
}

}  // namespace
}  // namespace vkgrad::test

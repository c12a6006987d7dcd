// The rules vkgrad adds to nlohmann::json: parse errors are vkgrad::Error naming their source,
// keys given twice and absurd nesting are refused, written text is valid UTF-8 and floats
// read back to the same value.
#include "vkgrad/io/json_io.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/error_text.h"
#include "common/process.h"
#include "common/random.h"
#include "vkgrad/core/error.h"

namespace vkgrad::test {
namespace {

using graph::Json;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(JsonIo, ParsesADocumentKeepingMemberOrder) {
  const Json doc = graph::parseJson(
      " \n{\"z\":[1,-2.5,0,true,false,null],\"a\":{\"c\":\"x\\\"\\n\\u00e9\\ud83d\\ude00\"}}\t ",
      "doc");
  EXPECT_EQ(doc.begin().key(), "z");
  EXPECT_EQ(doc["z"].size(), 6u);
  EXPECT_EQ(doc["z"][1].get<double>(), -2.5);
  EXPECT_EQ(doc["a"]["c"].get<std::string>(), "x\"\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(graph::parseJson(graph::dumpJson(doc), "again"), doc);
}

TEST(JsonIo, InvalidDocumentsAreErrorsNamingTheSource) {
  for (const char* bad :
       {"", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "01", "1.", "-", "[1] [2]", "\"tab\there\"",
        "\"\\x\"", "nan", "[inf]", "tru", "{\"a\" 1}", "\"\\ud800\"", "\"\xff\""}) {
    const std::string message = errorText([&] { graph::parseJson(bad, "dir/config.json"); });
    EXPECT_TRUE(contains(message, "dir/config.json: invalid JSON: ")) << bad << ": " << message;
    // nlohmann's own text says where.
    EXPECT_TRUE(contains(message, "parse error")) << bad << ": " << message;
  }
}

// nlohmann keeps the last of two equal keys; a header or config that names a tensor or a
// field twice is corrupt, so vkgrad refuses it, at any depth.
TEST(JsonIo, RefusesAKeyTwiceInOneObject) {
  EXPECT_TRUE(contains(errorText([] { graph::parseJson(R"({"a": 1, "a": 2})", "h"); }),
                       "h: invalid JSON: key \"a\" twice"));
  EXPECT_TRUE(contains(errorText([] { graph::parseJson(R"([{"x": {"b": 1, "b": 1}}])", "h"); }),
                       "key \"b\" twice"));
  // The same key in different objects is fine.
  EXPECT_NO_THROW(graph::parseJson(R"({"a": {"a": {"a": 1}}, "b": [{"a": 1}, {"a": 2}]})", "h"));
}

TEST(JsonIo, RefusesNestingDeeperThan64) {
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_NO_THROW(graph::parseJson(nested(64), "h"));
  EXPECT_TRUE(contains(errorText([&] { graph::parseJson(nested(65), "h"); }), "nesting deeper"));
  EXPECT_TRUE(
      contains(errorText([&] { graph::parseJson(nested(100000), "h"); }), "nesting deeper"));
}

// Shortest round-trip text: every float (and double) reads back bit-exactly.
TEST(JsonIo, NumbersReadBackExactly) {
  EXPECT_EQ(graph::dumpJson(Json(0.1)), "0.1");
  EXPECT_EQ(graph::dumpJson(Json(12345678901LL)), "12345678901");
  EXPECT_EQ(graph::dumpJson(Json(std::numeric_limits<double>::quiet_NaN())), "null");
  EXPECT_EQ(graph::dumpJson(Json(-std::numeric_limits<double>::infinity())), "null");
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (int i = 0; i < 1000; ++i) {
    const uint32_t bits = (rng.below(1u << 16) << 16) | rng.below(1u << 16);
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isfinite(f)) continue;
    const Json back = graph::parseJson(graph::dumpJson(Json{{"f", f}}), "f");
    EXPECT_EQ(float(back["f"].get<double>()), f) << graph::dumpJson(Json(f));
  }
}

// Driver strings and file names are bytes; what vkgrad writes must still parse.
TEST(JsonIo, DumpReplacesBytesThatAreNotUtf8) {
  const Json doc = {{"name", "ok \xc3\xa9, bad \xff\xc3 end"}, {"tab", "a\tb\x01"}};
  const std::string text = graph::dumpJson(doc);
  const Json back = graph::parseJson(text, "dump");
  EXPECT_EQ(back["name"].get<std::string>(), "ok \xc3\xa9, bad \xef\xbf\xbd\xef\xbf\xbd end");
  EXPECT_EQ(back["tab"].get<std::string>(), "a\tb\x01");
  EXPECT_TRUE(contains(graph::dumpJson(doc, 2), "\n  \"tab\": "));
}

TEST(JsonIo, UintAcceptsOnlyIntegersInRange) {
  const Json doc = graph::parseJson(
      R"({"n": 3, "f": 3.0, "half": 2.5, "neg": -1, "s": "3", "big": 9007199254740993})", "d");
  EXPECT_EQ(graph::jsonUint(doc["n"], "n"), 3u);
  EXPECT_EQ(graph::jsonUint(doc["f"], "f"), 3u);
  EXPECT_EQ(graph::jsonUint(Json(int64_t(5)), "built"), 5u);
  EXPECT_TRUE(contains(errorText([&] { graph::jsonUint(doc["n"], "\"n\"", 2); }),
                       "\"n\" must be an integer in [0, 2], got 3"));
  for (const char* key : {"half", "neg", "s", "big"})
    EXPECT_TRUE(contains(errorText([&] { graph::jsonUint(doc[key], key); }), "must be an integer"))
        << key;
}

TEST(JsonIo, StringsAreExactlyCountStrings) {
  const Json doc = graph::parseJson(R"({"names": ["a", "b"], "mixed": ["a", 2]})", "d");
  EXPECT_EQ(graph::jsonStrings(doc, "names", 2), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(contains(errorText([&] { graph::jsonStrings(doc, "names", 3); }),
                       "\"names\" must be an array of 3 strings"));
  EXPECT_TRUE(contains(errorText([&] { graph::jsonStrings(doc, "mixed", 2); }),
                       "\"mixed\" must be an array of 2 strings"));
  EXPECT_TRUE(contains(errorText([&] { graph::jsonStrings(doc, "none", 2); }), "missing \"none\""));
}

TEST(JsonIo, CheckpointFileNamesWhatIsMissing) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("vkgrad-json-io-checkpoint-" + std::to_string(processId()));
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(contains(errorText([&] { graph::readCheckpointFile(dir, "config.json", "x"); }),
                       "no such checkpoint directory"));
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(
      contains(errorText([&] { graph::readCheckpointFile(dir, "config.json", "vkgrad-x"); }),
               "config.json: missing (is this a vkgrad-x checkpoint directory?)"));
  std::ofstream(dir / "config.json") << R"({"format": "vkgrad-x"})";
  EXPECT_EQ(graph::readCheckpointFile(dir, "config.json", "vkgrad-x")["format"], "vkgrad-x");
  std::filesystem::remove_all(dir);
}

// Every model's config.json envelope: format, version, model, the model's own sections in
// order, training; one line and a newline, read back by readCheckpointFile.
TEST(JsonIo, CheckpointFileEnvelopeReadsBack) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("vkgrad-json-io-envelope-" + std::to_string(processId()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  graph::writeCheckpointFile(dir, "config.json", "vkgrad-x", 3, {{"width", 8}, {"norm", "pre"}},
                             {{"steps", 5}}, {{"names", {"b", "a"}}, {"bytes", {10, 65}}});
  std::ifstream in(dir / "config.json", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();  // Windows replaces no file that is open (the second write below)
  EXPECT_EQ(text, R"({"format":"vkgrad-x","version":3,"model":{"width":8,"norm":"pre"},)"
                  R"("names":["b","a"],"bytes":[10,65],"training":{"steps":5}})"
                  "\n");
  const Json back = graph::readCheckpointFile(dir, "config.json", "vkgrad-x");
  EXPECT_NO_THROW(graph::jsonCheckFormat(back, "vkgrad-x", 3));
  graph::writeCheckpointFile(dir, "config.json", "vkgrad-y", 1, Json::object(), Json::object());
  EXPECT_EQ(graph::readJsonFile(dir / "config.json").dump(),
            R"({"format":"vkgrad-y","version":1,"model":{},"training":{}})");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vkgrad::test

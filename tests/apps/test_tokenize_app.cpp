// vkgrad-tokenize as a user runs it: a vocabulary trained and written as a model folder's
// files, text encoded and decoded back through them, the benchmark's JSON, and clear errors.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "apps/run_app.h"
#include "common/temp_dir.h"
#include "vkgrad/io/json_io.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class TokenizeAppTest : public TempDirTest {};

TEST_F(TokenizeAppTest, TrainEncodeDecode) {
  const std::string dir = (dir_ / "tok").string();
  const AppRun train = runApp("tokenize", {"train", "--out", dir, "--merges", "300"});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  for (const char* file : {"tokenizer.json", "vocab.json", "merges.txt"})
    EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / file)) << file;

  const std::string text = "the licence's terms, version 3<|endoftext|>";
  const AppRun encode = runApp("tokenize", {"encode", dir, "--text", text, "--json"});
  ASSERT_EQ(encode.exit_code, 0) << encode.err;
  const graph::Json result = lastJsonLine(encode.out);
  EXPECT_EQ(result.at("bytes"), text.size());
  std::vector<std::string> args{"decode", dir};
  for (const auto& id : result.at("ids")) args.push_back(std::to_string(id.get<uint32_t>()));
  EXPECT_LT(args.size() - 2, text.size());  // merges made some tokens of several bytes
  const AppRun decode = runApp("tokenize", args);
  ASSERT_EQ(decode.exit_code, 0) << decode.err;
  EXPECT_EQ(decode.out, text);
}

TEST_F(TokenizeAppTest, BenchPrintsJson) {
  const AppRun run = runApp(
      "tokenize", {"bench", "--merges", "50", "--bytes", "20000", "--rounds", "1", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const graph::Json result = lastJsonLine(run.out);
  EXPECT_EQ(result.at("bytes"), 20000);
  EXPECT_GT(result.at("encode_cold_mb_s").get<double>(), 0);
}

TEST_F(TokenizeAppTest, ErrorsAreClear) {
  const AppRun missing = runApp("tokenize", {"encode", dir_.string(), "--text", "x"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(contains(missing.err, "no tokenizer (neither tokenizer.json")) << missing.err;
  const AppRun usage = runApp("tokenize", {"decode", dir_.string(), "12x"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_TRUE(contains(usage.err, "a token id must be a number, got '12x'")) << usage.err;
}

}  // namespace
}  // namespace vkgrad::test

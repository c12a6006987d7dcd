// vkgrad-tokenize as a user runs it: a vocabulary trained and written as a model folder's
// files, text encoded and decoded back through them, the benchmark's JSON, and clear errors;
// a full disk leaves the last vocabulary's files whole.
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

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

#if !defined(_WIN32)
// On a full disk (runAppOnAFullDisk: no file may pass half of tokenizer.json's size) a new
// vocabulary fails naming the file and the reason, and the folder keeps the last one's files
// byte for byte, with no temporary file beside them. (POSIX: the limit.)
TEST_F(TokenizeAppTest, AFullDiskLeavesTheLastVocabulary) {
  const fs::path dir = dir_ / "tok";
  ASSERT_EQ(runApp("tokenize", {"train", "--out", dir.string(), "--merges", "200"}).exit_code, 0);
  const char* const files[] = {"tokenizer.json", "vocab.json", "merges.txt"};
  std::vector<std::string> before;
  for (const char* file : files) before.push_back(fileBytes((dir / file).string()));
  const AppRun run = runAppOnAFullDisk("tokenize", before[0].size() / 2,
                                       {"train", "--out", dir.string(), "--merges", "300"});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(
      contains(run.err, (dir / "tokenizer.json").string() + ": write failed: File too large"))
      << run.err;
  for (size_t i = 0; i < std::size(files); ++i)
    EXPECT_TRUE(fileBytes((dir / files[i]).string()) == before[i]) << files[i];
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 3);
}
#endif

}  // namespace
}  // namespace vkgrad::test

// vkgrad-gpt train --data DIR (apps/gpt/corpus.h): a directory's text files are one corpus, read
// in name order (renaming a file changes the data a resumed run was trained on), without its
// symlinks, hidden files, *.dat indexes and subdirectories; a directory with nothing to read or
// with a binary file fails naming what is wrong.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "apps/run_app.h"
#include "common/random.h"
#include "common/temp_dir.h"
#include "vkgrad/io/json_io.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class GptCorpus : public TempDirTest {
 protected:
  // Random words over `letters`; ends in a newline or not.
  std::string words(const std::string& letters, int count) {
    std::string text;
    for (int w = 0; w < count; ++w) {
      for (uint32_t n = 1 + rng_.below(6); n > 0; --n)
        text += letters[rng_.below(uint32_t(letters.size()))];
      text += rng_.below(8) == 0 ? '\n' : ' ';
    }
    return text;
  }
  void write(const fs::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  AppRun train(const fs::path& data, const std::vector<std::string>& extra) {
    std::vector<std::string> args{"train",   "--data",  data.string(), "--layers",    "1",
                                  "--heads", "2",       "--width",     "16",          "--context",
                                  "8",       "--batch", "4",           "--validation"};
    args.insert(args.end(), extra.begin(), extra.end());
    return runApp("gpt", args);
  }

  Rng rng_;
};

TEST_F(GptCorpus, ADirectoryIsItsTextFilesInNameOrder) {
  SCOPED_TRACE(rng_.describe());
  const fs::path corpus = dir_ / "corpus";
  fs::create_directories(corpus / "sub");
  std::string b = words("abcdef", 300), a = words("ghijkl", 300);
  if (a.back() == '\n') a.pop_back();  // a newline is added after it
  write(corpus / "b", b);
  write(corpus / "a.txt", a);
  // None of these is read: their bytes (X, Y, Z, W) must stay out of the vocabulary.
  write(corpus / ".hidden", "XXXX\n");
  write(corpus / "a.txt.dat", std::string("\0\0\0\2YYYY", 8));
  write(corpus / "sub" / "c", "ZZZZ\n");
  write(dir_ / "outside", "WWWW\n");
  fs::create_symlink(dir_ / "outside", corpus / "w.u8");
  fs::create_symlink(corpus / "a.txt", corpus / "a.txt.u8");

  const AppRun dry = train(corpus, {"--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  const size_t bytes = a.size() + 1 + b.size() + (b.back() == '\n' ? 0 : 1);
  EXPECT_TRUE(contains(
      dry.err, "data: " + corpus.string() + " (2 files), " + std::to_string(bytes) + " bytes"))
      << dry.err;

  const fs::path out = dir_ / "out";
  const AppRun run = train(corpus, {"--steps", "4", "--stop-at", "2", "--out", out.string()});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const graph::Json config = graph::readJsonFile(out / "config.json");
  for (const graph::Json& byte : config.at("vocab_bytes")) {
    const char c = char(byte.get<int>());
    EXPECT_TRUE(c == ' ' || c == '\n' || (c >= 'a' && c <= 'l')) << "byte " << int(c);
  }
  // The same files in another order are other data: the run does not resume on them.
  fs::rename(corpus / "a.txt", corpus / "c.txt");
  const AppRun resumed = runApp("gpt", {"train", "--resume", out.string()});
  EXPECT_EQ(resumed.exit_code, 1) << resumed.out;
  EXPECT_TRUE(contains(resumed.err, "the data changed since the run was saved")) << resumed.err;
  fs::rename(corpus / "c.txt", corpus / "a.txt");
  const AppRun again = runApp("gpt", {"train", "--resume", out.string(), "--validation"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

TEST_F(GptCorpus, ADirectoryWithoutTextFailsNamingWhy) {
  const fs::path empty = dir_ / "empty";
  fs::create_directories(empty / "sub");
  write(empty / "index.dat", std::string("\0\1", 2));
  write(empty / "sub" / "text", "hello\n");
  const AppRun none = train(empty, {"--dry-run"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_TRUE(contains(none.err, "the directory holds no text files")) << none.err;

  write(empty / "blank", "");
  const AppRun blank = train(empty, {"--dry-run"});
  EXPECT_EQ(blank.exit_code, 1);
  EXPECT_TRUE(contains(blank.err, "every file in the directory is empty")) << blank.err;

  write(empty / "text", words("abc", 400));
  write(empty / "picture.png", std::string("\x89PNG\r\n\x1a\n\0\0\0\r", 12));
  const AppRun binary = train(empty, {"--dry-run"});
  EXPECT_EQ(binary.exit_code, 1);
  EXPECT_TRUE(contains(binary.err, "picture.png: holds a NUL byte, not text")) << binary.err;
  fs::remove(empty / "picture.png");
  EXPECT_EQ(train(empty, {"--dry-run"}).exit_code, 0);
}

}  // namespace
}  // namespace vkgrad::test

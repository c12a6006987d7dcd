#include "graph/safetensors.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "apps/json.h"
#include "common/random.h"
#include "vk/error.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;
using graph::Checkpoint;
using graph::SavedTensor;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("vkgrad-safetensors-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string bytesOf(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  static void writeBytes(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  }

  fs::path dir_;
};

Checkpoint randomCheckpoint(Rng& rng) {
  Checkpoint c;
  auto words = [&](size_t n) {
    std::vector<uint32_t> w(n);
    for (auto& x : w) x = (rng.below(1u << 16) << 16) | rng.below(1u << 16);  // any bits, NaNs too
    return w;
  };
  c.tensors.push_back({"blocks.0.attn.w_qkv", ops::DType::F32, {3, 7}, words(21)});
  c.tensors.push_back({"ids", ops::DType::U32, {5}, words(5)});
  c.tensors.push_back({"scalar", ops::DType::F32, {}, words(1)});
  c.tensors.push_back({"empty", ops::DType::F32, {0, 4}, {}});
  c.metadata = {{"step", "42"}, {"model", "gpt \"tiny\"\n"}};
  return c;
}

void expectSame(const Checkpoint& got, const Checkpoint& want) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    EXPECT_EQ(got.tensors[i].name, want.tensors[i].name);
    EXPECT_EQ(got.tensors[i].dtype, want.tensors[i].dtype);
    EXPECT_EQ(got.tensors[i].shape, want.tensors[i].shape);
    EXPECT_EQ(got.tensors[i].data, want.tensors[i].data) << want.tensors[i].name;
  }
  EXPECT_EQ(got.metadata, want.metadata);
}

TEST_F(SafetensorsTest, RoundTripsBitExactly) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Checkpoint c = randomCheckpoint(rng);
  const fs::path p = dir_ / "model.safetensors";
  graph::saveSafetensors(p, c);
  expectSame(graph::loadSafetensors(p), c);
  // Overwriting leaves no temporary file behind.
  graph::saveSafetensors(p, c);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

// A reader written here from the format description alone (8-byte little-endian header
// length, JSON header, packed data; the JSON parsed by the test's own parser, no vkgrad code)
// finds every tensor where vkgrad says it put it.
TEST_F(SafetensorsTest, AnIndependentReaderFindsEveryTensor) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Checkpoint c = randomCheckpoint(rng);
  const fs::path p = dir_ / "model.safetensors";
  graph::saveSafetensors(p, c);
  const std::string bytes = bytesOf(p);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[i]);
  EXPECT_EQ(n % 8, 0u) << "header padded to 8 bytes";
  ASSERT_LE(8 + n, bytes.size());
  const Json header = JsonParser::parse(bytes.substr(8, n));
  const std::string data = bytes.substr(8 + n);
  size_t total = 0;
  for (const SavedTensor& t : c.tensors) {
    const Json& entry = header[t.name];
    EXPECT_EQ(entry["dtype"].text, t.dtype == ops::DType::F32 ? "F32" : "U32");
    ASSERT_EQ(entry["shape"].items.size(), t.shape.size());
    for (size_t i = 0; i < t.shape.size(); ++i)
      EXPECT_EQ(entry["shape"].items[i].number, double(t.shape[i]));
    const size_t begin = size_t(entry["data_offsets"].items[0].number),
                 end = size_t(entry["data_offsets"].items[1].number);
    ASSERT_EQ(end - begin, t.data.size() * 4);
    ASSERT_LE(end, data.size());
    EXPECT_EQ(std::memcmp(data.data() + begin, t.data.data(), end - begin), 0) << t.name;
    total += end - begin;
  }
  EXPECT_EQ(total, data.size());
  EXPECT_EQ(header["__metadata__"]["step"].text, "42");
}

TEST_F(SafetensorsTest, RejectsCorruptAndTruncatedFiles) {
  Rng rng;
  const fs::path good = dir_ / "good.safetensors";
  graph::saveSafetensors(good, randomCheckpoint(rng));
  const std::string bytes = bytesOf(good);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const std::string header = bytes.substr(8, n), data = bytes.substr(8 + n);
  auto withHeader = [&](const std::string& h, const std::string& d) {
    std::string out(8, '\0');
    const uint64_t len = h.size();
    std::memcpy(out.data(), &len, 8);
    return out + h + d;
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string h = header;
    const size_t at = h.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return withHeader(h.replace(at, from.size(), to), data);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {bytes.substr(0, 5), "truncated: 5 bytes"},
      {bytes.substr(0, 8 + n / 2), "truncated: header"},
      {bytes.substr(0, bytes.size() - 3), "outside the"},
      {bytes + "xyz", "bytes after the last tensor"},
      {std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}", "above 100 MB"},
      {withHeader("[1, 2]", ""), "not a JSON object"},
      {withHeader("{\"a\": ", ""), "bad header: JSON: "},
      {replaced("\"U32\"", "\"I64\""), "dtype I64"},
      {replaced("[3,7]", "[3,8]"), "bytes for a shape of 24 elements"},
      {replaced("\"dtype\"", "\"dtipe\""), "needs exactly dtype, shape and data_offsets"},
      {replaced("[0,84]", "[4,88]"), "have a hole at 0"},
  };
  for (const auto& [file, message] : cases) {
    const fs::path p = dir_ / "bad.safetensors";
    writeBytes(p, file);
    try {
      graph::loadSafetensors(p);
      ADD_FAILURE() << "accepted a file that should fail with: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(graph::loadSafetensors(dir_ / "missing.safetensors"), Error);
}

TEST_F(SafetensorsTest, AFailedSaveLeavesTheOldFile) {
  Rng rng;
  const fs::path p = dir_ / "model.safetensors";
  const Checkpoint c = randomCheckpoint(rng);
  graph::saveSafetensors(p, c);
  const std::string before = bytesOf(p);
  Checkpoint bad = c;
  bad.tensors[1].data.pop_back();  // 4 elements for a shape of 5
  EXPECT_THROW(graph::saveSafetensors(p, bad), Error);
  bad = c;
  bad.tensors.push_back(c.tensors[0]);  // a duplicate name
  EXPECT_THROW(graph::saveSafetensors(p, bad), Error);
  EXPECT_THROW(graph::saveSafetensors(dir_ / "no-such-dir" / "x.safetensors", c), Error);
  EXPECT_EQ(bytesOf(p), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace vkgrad::test

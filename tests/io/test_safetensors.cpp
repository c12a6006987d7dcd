#include "vkgrad/io/safetensors.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/process.h"
#include "common/random.h"
#include "vkgrad/core/error.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/ops/reference/half.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;
using graph::Checkpoint;
using graph::SavedTensor;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("vkgrad-safetensors-" + std::to_string(processId()) + "-" +
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

// 16-bit tensors are stored as the format has them: 2 bytes each, packed, odd counts too; the
// conversion between float formats rounds as the device does and widens exactly.
TEST_F(SafetensorsTest, SixteenBitTensorsRoundTripAndConvert) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const std::vector<float> values = rng.uniform(21, -3.0f, 3.0f);
  SavedTensor f32{"w", ops::DType::F32, {3, 7}, std::vector<uint32_t>(21)};
  std::memcpy(f32.data.data(), values.data(), 84);
  for (ops::DType dtype : {ops::DType::F16, ops::DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(dtype));
    const SavedTensor half = graph::convertSaved(f32, dtype);
    EXPECT_EQ(half.bytes(), 42u);
    ASSERT_EQ(half.data.size(), 11u);
    const SavedTensor back = graph::convertSaved(half, ops::DType::F32);
    const std::vector<float> rounded = ops::ref::roundTo(dtype, values);
    for (size_t i = 0; i < values.size(); ++i) {
      float got;
      std::memcpy(&got, &back.data[i], 4);
      EXPECT_EQ(got, rounded[i]) << i;
    }
    const fs::path p = dir_ / "half.safetensors";
    graph::saveSafetensors(p, Checkpoint{{half}, {}});
    EXPECT_EQ(fs::file_size(p), 8 + bytesOf(p).substr(8).size());
    const Checkpoint loaded = graph::loadSafetensors(p);
    ASSERT_EQ(loaded.tensors.size(), 1u);
    EXPECT_EQ(loaded.tensors[0].dtype, dtype);
    EXPECT_EQ(loaded.tensors[0].data, half.data);
    // The header says F16 or BF16 and the data region is 42 bytes.
    const std::string text = bytesOf(p);
    EXPECT_NE(text.find(dtype == ops::DType::F16 ? "\"F16\"" : "\"BF16\""), std::string::npos);
    EXPECT_NE(text.find("[0,42]"), std::string::npos);
    SavedTensor inf = half;
    inf.data[3] = dtype == ops::DType::F16 ? 0x7c00u : 0x7f80u;  // element 6: +inf
    EXPECT_EQ(graph::nonFiniteText(inf), "holds inf at element 6");
  }
  SavedTensor ids{"ids", ops::DType::U32, {2}, {1, 2}};
  EXPECT_THROW(graph::convertSaved(ids, ops::DType::BF16), Error);
}

// A reader written here from the format description alone (8-byte little-endian header
// length, JSON header, packed data; no vkgrad code but the JSON parser) finds every tensor
// where vkgrad says it put it.
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
  const graph::Json header = graph::parseJson(bytes.substr(8, n), "header");
  const std::string data = bytes.substr(8 + n);
  size_t total = 0;
  for (const SavedTensor& t : c.tensors) {
    const graph::Json& entry = header.at(t.name);
    EXPECT_EQ(entry.at("dtype"), t.dtype == ops::DType::F32 ? "F32" : "U32");
    EXPECT_EQ(entry.at("shape").get<std::vector<int64_t>>(), t.shape);
    const auto offsets = entry.at("data_offsets").get<std::vector<size_t>>();
    ASSERT_EQ(offsets.size(), 2u);
    const size_t begin = offsets[0], end = offsets[1];
    ASSERT_EQ(end - begin, t.data.size() * 4);
    ASSERT_LE(end, data.size());
    // Empty tensors have no data pointer to compare (memcmp wants one even for 0 bytes).
    if (end > begin) {
      EXPECT_EQ(std::memcmp(data.data() + begin, t.data.data(), end - begin), 0) << t.name;
    }
    total += end - begin;
  }
  EXPECT_EQ(total, data.size());
  EXPECT_EQ(header.at("__metadata__").at("step"), "42");
}

// A file as vkgrad wrote it before its JSON went through nlohmann: saving the same tensors
// now gives the same bytes, and the old file loads.
TEST_F(SafetensorsTest, MatchesFilesFromEarlierVersionsByteForByte) {
  const std::string header = R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                             R"("ids":{"dtype":"U32","shape":[2],"data_offsets":[24,32]},)"
                             R"("__metadata__":{"vkgrad.step":"12"}}  )";
  const std::vector<uint32_t> w = {0x3f800000, 0xbf800000, 0x3dcccccd, 0, 0x7fc00000, 0x40490fdb};
  const std::vector<uint32_t> ids = {7, 4000000000u};
  std::string old(8, '\0');
  old[0] = char(header.size());
  old += header;
  old.append(reinterpret_cast<const char*>(w.data()), w.size() * 4);
  old.append(reinterpret_cast<const char*>(ids.data()), ids.size() * 4);

  Checkpoint c;
  c.tensors.push_back({"w", ops::DType::F32, {2, 3}, w});
  c.tensors.push_back({"ids", ops::DType::U32, {2}, ids});
  c.metadata = {{"vkgrad.step", "12"}};
  const fs::path written = dir_ / "new.safetensors", earlier = dir_ / "old.safetensors";
  graph::saveSafetensors(written, c);
  EXPECT_EQ(bytesOf(written), old);
  writeBytes(earlier, old);
  expectSame(graph::loadSafetensors(earlier), c);
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
      {withHeader("{\"a\": ", ""), "bad header: invalid JSON: "},
      {withHeader("{\"a\": {}, \"a\": {}}", ""), "key \"a\" twice"},
      {withHeader(std::string(100, '[') + std::string(100, ']'), ""), "nesting deeper"},
      {replaced("[3,7]", "[3,-7]"), "must be an integer"},
      {replaced("[3,7]", "[3,7.5]"), "must be an integer"},
      {replaced("[3,7]", "[4294967296,4294967296,4294967296]"), "too large"},
      {replaced("[0,84]", "[0,\"84\"]"), "must be an integer"},
      {replaced("\"42\"", "42"), "is not a string"},
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

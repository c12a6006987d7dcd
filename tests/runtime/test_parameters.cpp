#include "vkgrad/runtime/parameters.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/device_tensor.h"
#include "common/process.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;
using graph::Init;
using graph::ParameterStore;

struct Moments {
  double mean, stddev, lo, hi;
};
Moments moments(const std::vector<float>& x) {
  double sum = 0, sq = 0, lo = INFINITY, hi = -INFINITY;
  for (float v : x) sum += v, lo = std::min(lo, double(v)), hi = std::max(hi, double(v));
  const double mean = sum / double(x.size());
  for (float v : x) sq += (v - mean) * (v - mean);
  return {mean, std::sqrt(sq / double(x.size())), lo, hi};
}

class ParameterStoreTest : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    dir_ = fs::temp_directory_path() / ("vkgrad-params-" + std::to_string(processId()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    VkTest::TearDown();
  }
  static std::vector<float> read(const graph::Parameter& p) { return download(ctx(), p.view()); }
  fs::path dir_;
};

// Sample moments of 60,000+ draws: the standard error of a mean is about stddev / 245, so
// 5 standard errors is far from a flaky bound and far below any wrong scale.
TEST_F(ParameterStoreTest, InitialisersHaveTheirDistributions) {
  ParameterStore store(ctx());
  const auto& zeros = store.add("zeros", {3, 5}, Init::zeros());
  const auto& ones = store.add("ones", {7}, Init::ones());
  const auto& constant = store.add("constant", {2, 2}, Init::constant(-2.5f));
  const auto& uniform = store.add("uniform", {300, 201}, Init::uniform(-2.0f, 3.0f));
  const auto& normal = store.add("normal", {60001}, Init::normal(1.0f, 2.0f));
  const auto& xu = store.add("xavier_uniform", {300, 200}, Init::xavierUniform());
  const auto& xn = store.add("xavier_normal", {300, 200}, Init::xavierNormal());
  store.initialize(7);
  EXPECT_EQ(read(zeros), std::vector<float>(15, 0.0f));
  EXPECT_EQ(read(ones), std::vector<float>(7, 1.0f));
  EXPECT_EQ(read(constant), std::vector<float>(4, -2.5f));
  const Moments u = moments(read(uniform));
  EXPECT_NEAR(u.mean, 0.5, 5 * 5 / std::sqrt(12.0) / 245);
  EXPECT_NEAR(u.stddev, 5 / std::sqrt(12.0), 0.02);
  EXPECT_GE(u.lo, -2.0);
  EXPECT_LT(u.hi, 3.0);
  const Moments n = moments(read(normal));
  EXPECT_NEAR(n.mean, 1.0, 5 * 2.0 / 245);
  EXPECT_NEAR(n.stddev, 2.0, 0.03);
  const double limit = std::sqrt(6.0 / 500);
  const Moments a = moments(read(xu));
  EXPECT_NEAR(a.stddev, limit / std::sqrt(3.0), 0.01 * limit);
  EXPECT_GE(a.lo, -limit);
  EXPECT_LT(a.hi, limit);
  EXPECT_NEAR(moments(read(xn)).stddev, std::sqrt(2.0 / 500), 0.01 * std::sqrt(2.0 / 500));
}

TEST_F(ParameterStoreTest, TheSeedDecidesTheBits) {
  auto draw = [&](uint64_t seed, bool extra) {
    ParameterStore store(ctx());
    const auto& w = store.add("w", {33, 17}, Init::xavierNormal());
    if (extra) store.add("later", {5}, Init::uniform(0, 1));
    store.initialize(seed);
    return read(w);
  };
  EXPECT_EQ(draw(3, false), draw(3, false));
  EXPECT_EQ(draw(3, false), draw(3, true)) << "a parameter added later changed an earlier one";
  EXPECT_NE(draw(3, false), draw(4, false));
}

TEST_F(ParameterStoreTest, CheckpointsRoundTripBitExactly) {
  ParameterStore store(ctx());
  const auto& w = store.add("w", {9, 4}, Init::normal(0, 1));
  const auto& b = store.add("b", {4}, Init::uniform(-1, 1));
  store.initialize(1);
  const auto w1 = read(w), b1 = read(b);
  store.save(dir_ / "ckpt.safetensors", {{"step", "10"}});
  store.initialize(2);
  ASSERT_NE(read(w), w1);
  const auto metadata = store.load(dir_ / "ckpt.safetensors");
  EXPECT_EQ(read(w), w1);
  EXPECT_EQ(read(b), b1);
  EXPECT_EQ(metadata.at("step"), "10");
}

// A bf16 or fp16 inference checkpoint is half the size and loads widened: each parameter
// holds its value rounded to the format.
TEST_F(ParameterStoreTest, HalfSizeCheckpointsLoadRounded) {
  ParameterStore store(ctx());
  const auto& w = store.add("w", {33, 7}, Init::normal(0, 1));
  store.initialize(3);
  const auto w1 = read(w);
  store.save(dir_ / "f32.safetensors");
  for (ops::DType dtype : {ops::DType::F16, ops::DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(dtype));
    const fs::path p = dir_ / "half.safetensors";
    store.save(p, {}, dtype);
    EXPECT_LT(fs::file_size(p), fs::file_size(dir_ / "f32.safetensors") * 6 / 10);
    ParameterStore other(ctx());
    const auto& w2 = other.add("w", {33, 7}, Init::zeros());
    other.load(p);
    EXPECT_EQ(read(w2), ops::ref::roundTo(dtype, w1));
  }
}

// A file that does not match the model loads nothing: every parameter keeps its values.
TEST_F(ParameterStoreTest, AMismatchedOrCorruptFileChangesNothing) {
  ParameterStore store(ctx());
  const auto& w = store.add("w", {9, 4}, Init::normal(0, 1));
  const auto& b = store.add("b", {4}, Init::zeros());
  store.initialize(1);
  const auto w1 = read(w), b1 = read(b);

  auto write = [&](const std::string& file, std::vector<graph::SavedTensor> tensors) {
    graph::saveSafetensors(dir_ / file, {std::move(tensors), {}});
    return dir_ / file;
  };
  const std::vector<uint32_t> w_words(36, 0x3f800000u), b_words(4, 0x3f800000u);
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {write("shape.safetensors",
             {{"w", ops::DType::F32, {4, 9}, w_words}, {"b", ops::DType::F32, {4}, b_words}}),
       "\"w\": the file has f32 (4,9), the model f32 (9,4)"},
      {write("missing.safetensors", {{"w", ops::DType::F32, {9, 4}, w_words}}),
       "\"b\" is missing from the file"},
      {write("extra.safetensors", {{"w", ops::DType::F32, {9, 4}, w_words},
                                   {"b", ops::DType::F32, {4}, b_words},
                                   {"c", ops::DType::F32, {1}, {0}}}),
       "\"c\" is not a parameter of this model"},
      {write("dtype.safetensors",
             {{"w", ops::DType::F32, {9, 4}, w_words}, {"b", ops::DType::U32, {4}, b_words}}),
       "\"b\": the file has u32 (4)"},
  };
  for (const auto& [path, message] : cases) {
    try {
      store.load(path);
      ADD_FAILURE() << "loaded " << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("nothing loaded"), std::string::npos) << e.what();
    }
    EXPECT_EQ(read(w), w1);
    EXPECT_EQ(read(b), b1);
  }
  // A truncated copy of a good checkpoint.
  store.save(dir_ / "good.safetensors");
  fs::resize_file(dir_ / "good.safetensors", fs::file_size(dir_ / "good.safetensors") - 4);
  EXPECT_THROW(store.load(dir_ / "good.safetensors"), Error);
  EXPECT_EQ(read(w), w1);
  EXPECT_EQ(read(b), b1);
}

TEST_F(ParameterStoreTest, RejectsBadDeclarations) {
  ParameterStore store(ctx());
  store.add("w", {2, 2}, Init::zeros());
  EXPECT_THROW(store.add("w", {3}, Init::zeros()), Error);
  EXPECT_THROW(store.add("", {3}, Init::zeros()), Error);
  EXPECT_THROW(store.add("empty", {0, 3}, Init::zeros()), Error);
  EXPECT_THROW(store.at("nope"), Error);
  // One element more than a storage binding holds: named, before any allocation.
  const int64_t too_many = int64_t(ctx().info().max_storage_buffer_range / 4) + 1;
  try {
    store.add("huge", {too_many}, Init::zeros());
    ADD_FAILURE() << "no ShapeError for a parameter larger than a storage binding";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter \"huge\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("maxStorageBufferRange"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store.elements(), 4);
}

// The binding limit applies at the size a parameter is stored in: under a forced 64 KiB limit
// a (129,201) table (103,716 bytes in f32, 51,858 in bf16) is accepted when added frozen in
// bf16, and refused by name in f32, when added or when switched back to f32.
TEST_F(ParameterStoreTest, ChecksTheBindingLimitAtTheStoredSize) {
  vk::ContextOptions limited;
  limited.validation = true;
  limited.limits.max_storage_buffer_range = 64 << 10;
  vk::Context context(limited);
  ParameterStore store(context);
  const auto refused = [&](const std::function<void()>& fn, const std::string& name) {
    try {
      fn();
      ADD_FAILURE() << "no ShapeError for \"" << name << "\"";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("parameter \"" + name + "\""), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("maxStorageBufferRange 65536"), std::string::npos)
          << e.what();
    }
  };
  store.setAddFrozen(ops::DType::BF16);
  const graph::Parameter& table = store.add("table", {129, 201}, Init::normal(0.0f, 1.0f));
  EXPECT_TRUE(table.frozen);
  EXPECT_EQ(table.dtype, ops::DType::BF16);
  EXPECT_EQ(table.bytes(), 129u * 201u * 2u);
  // Its values as a bf16 file holds them (a Hugging Face folder's): uploaded and read back
  // exactly. (initialize() would draw it in f32 scratch, which this limit refuses.)
  graph::SavedTensor file{"table", ops::DType::BF16, {129, 201}, {}};
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < (129 * 201 + 1) / 2; ++i) {
    uint32_t lo, hi;
    const float a = normal(gen), b = i == 129 * 201 / 2 ? 0.0f : normal(gen);
    std::memcpy(&lo, &a, 4);
    std::memcpy(&hi, &b, 4);
    file.data.push_back((lo >> 16) | (hi & 0xffff0000u));  // bf16: an f32's high half
  }
  const graph::SavedTensor* files[] = {&file};
  store.upload(files, "the test's table");
  const std::vector<graph::SavedTensor> saved = store.download();
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].dtype, ops::DType::BF16);
  EXPECT_EQ(saved[0].bytes(), 129u * 201u * 2u);
  EXPECT_EQ(saved[0].data, file.data);
  // Too large even in 16 bits: refused at that size.
  refused([&] { store.add("wide", {200, 201}, Init::zeros()); }, "wide");
  // Widening the table to f32 would not fit: refused, the table left as it was.
  refused([&] { store.setStorage("table", ops::DType::F32); }, "table");
  EXPECT_EQ(store.at("table").dtype, ops::DType::BF16);
  store.setAddFrozen(std::nullopt);
  try {
    store.add("table32", {129, 201}, Init::zeros());
    ADD_FAILURE() << "no ShapeError for an f32 table past the binding limit";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("\"table32\" (129,201) is 103716 bytes in f32"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(store.add("bias", {201}, Init::zeros()).frozen);  // trained f32 again
  EXPECT_THROW(store.setAddFrozen(ops::DType::U32), Error);
  EXPECT_TRUE(context.validationMessages().empty());
}

}  // namespace
}  // namespace vkgrad::test

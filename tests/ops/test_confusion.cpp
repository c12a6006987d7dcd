#include "vkgrad/ops/confusion.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/confusion.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Shape;

constexpr uint32_t kSentinel = 0xdeadbeefu;

class ConfusionTest : public VkTest {
 protected:
  // data at word `at` of a buffer of `total` words whose other words hold the sentinel.
  static vk::Buffer words(const void* data, int64_t n, int64_t at, int64_t total) {
    std::vector<uint32_t> all(size_t(total), kSentinel);
    std::memcpy(all.data() + at, data, size_t(n) * 4);
    vk::Buffer b = ctx().allocator().allocate(all.size() * 4);
    ctx().staging().upload(b, 0, all.data(), all.size() * 4);
    return b;
  }
  static std::vector<uint32_t> readAll(const vk::Buffer& b, int64_t total) {
    std::vector<uint32_t> out(static_cast<size_t>(total));
    ctx().staging().download(b, 0, out.data(), out.size() * 4);
    return out;
  }
};

// Logits drawn from {0, 1, 2}, so most rows tie for their maximum (the first must win); a
// few rows with a NaN (anywhere, or all NaN) and with infinities; labels up to C + 1 and
// 0xFFFFFFFF, which must be counted nowhere.
std::vector<float> randomLogits(Rng& rng, int64_t rows, int64_t classes) {
  std::vector<float> logits(size_t(rows * classes));
  for (float& v : logits) v = float(rng.below(3));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = logits.data() + r * classes;
    switch (rng.below(16)) {
      case 0:
        row[rng.below(uint32_t(classes))] = nan;
        break;
      case 1:
        for (int64_t j = 0; j < classes; ++j) row[j] = nan;
        break;
      case 2:
        row[rng.below(uint32_t(classes))] = inf;
        row[rng.below(uint32_t(classes))] = -inf;
        break;
      default:
        break;
    }
  }
  return logits;
}

std::vector<uint32_t> randomLabels(Rng& rng, int64_t rows, int64_t classes) {
  auto labels = rng.below(size_t(rows), uint32_t(classes + 2));
  labels[rng.below(uint32_t(rows))] = 0xFFFFFFFFu;
  return labels;
}

// Integer counts: exact equality with the reference. Views at odd word offsets; the words
// around counts keep their sentinel (nothing written outside the matrix, whatever a label).
TEST_F(ConfusionTest, MatchesCpuWithTiesNanRowsAndIgnoredLabels) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  struct Case {
    Shape logits;
    int64_t at;
  };
  const Case cases[] = {{{1, 1}, 0},    {{37, 3}, 3},    {{5, 13, 10}, 1},
                        {{1001, 7}, 5}, {{4099, 10}, 2}, {{3, 257}, 7}};
  for (const auto& [shape, at] : cases)
    for (ops::Write w : {ops::Write::Overwrite, ops::Write::Accumulate}) {
      const bool accumulate = w == ops::Write::Accumulate;
      SCOPED_TRACE(testing::Message() << "logits " << shape.str() << ", at " << at
                                      << (accumulate ? ", accumulate" : ", overwrite"));
      const int64_t classes = shape.back(), rows = shape.rows(), cells = classes * classes;
      const auto logits = randomLogits(rng, rows, classes);
      const auto labels = randomLabels(rng, rows, classes);
      // Overwrite must clear whatever counts held; Accumulate adds to it.
      std::vector<uint32_t> want = rng.below(size_t(cells), 1000);
      const auto init = want;
      ops::ref::confusion(logits.data(), labels.data(), want.data(), rows, classes, accumulate);
      const vk::Buffer d_logits = words(logits.data(), rows * classes, at, rows * classes + at + 1);
      const vk::Buffer d_labels = words(labels.data(), rows, at + 1, rows + at + 2);
      const vk::Buffer d_counts = words(init.data(), cells, at, cells + at + 3);
      int64_t label_dims[Shape::kMaxRank];
      for (int i = 0; i + 1 < shape.rank(); ++i) label_dims[i] = shape[i];
      vk::Recorder rec(ctx());
      ops::confusion(rec, ops::view(d_logits, shape, uint64_t(at) * 4),
                     ops::view(d_labels, Shape::of(label_dims, shape.rank() - 1),
                               uint64_t(at + 1) * 4, DType::U32),
                     ops::view(d_counts, {classes, classes}, uint64_t(at) * 4, DType::U32), w);
      rec.submit();
      const auto all = readAll(d_counts, cells + at + 3);
      const std::vector<uint32_t> got(all.begin() + at, all.begin() + at + cells);
      EXPECT_EQ(got, want);
      for (int64_t i = 0; i < int64_t(all.size()); ++i) {
        if (i < at || i >= at + cells) {
          EXPECT_EQ(all[size_t(i)], kSentinel) << "word " << i;
        }
      }
    }
}

// Logits in f16 and bf16, at odd element offsets (2-byte ones among them): the ties, NaN and
// infinity rows of randomLogits (exact in 16 bits), and normal logits whose rounding makes
// ties of their own; counts exact against the reference on the rounded logits.
TEST_F(ConfusionTest, SixteenBitLogitsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const DType dtype : {DType::F16, DType::BF16})
    for (const bool normal : {false, true})
      for (const auto& [rows, classes, at] :
           {std::tuple<int64_t, int64_t, int64_t>{37, 3, 3}, {4099, 10, 1}, {3, 257, 2}}) {
        SCOPED_TRACE(testing::Message() << ops::dtypeName(dtype) << (normal ? " normal" : " ties")
                                        << " (" << rows << "," << classes << ") at " << at);
        const int64_t n = rows * classes, cells = classes * classes;
        const auto logits = ops::ref::roundTo(
            dtype, normal ? rng.normal(size_t(n), 0.0f, 2.0f) : randomLogits(rng, rows, classes));
        const auto labels = randomLabels(rng, rows, classes);
        std::vector<uint32_t> want(size_t(cells), 0);
        ops::ref::confusion(logits.data(), labels.data(), want.data(), rows, classes, false);
        std::vector<float> shifted(size_t(at), 1.0f);
        shifted.insert(shifted.end(), logits.begin(), logits.end());
        const DeviceTensor d_logits = upload(ctx(), {n + at}, shifted, dtype);
        const vk::Buffer d_labels = words(labels.data(), rows, 0, rows);
        const vk::Buffer d_counts = words(want.data(), cells, 0, cells);
        vk::Recorder rec(ctx());
        ops::confusion(rec, ops::view(d_logits.buffer, {rows, classes}, uint64_t(at) * 2, dtype),
                       ops::view(d_labels, {rows}, 0, DType::U32),
                       ops::view(d_counts, {classes, classes}, 0, DType::U32));
        rec.submit();
        EXPECT_EQ(readAll(d_counts, cells), want);
      }
}

// The rules themselves, on rows small enough to read: first maximum, NaN first, ignored labels.
TEST_F(ConfusionTest, ArgmaxTakesTheFirstMaximumAndTheFirstNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {
      1,   3,   3,    // ties: class 1
      nan, 5,   6,    // NaN first: class 0
      2,   nan, 9,    // a NaN beats the larger 9: class 1
      nan, nan, nan,  // diverged: class 0
      -1,  -1,  -1,   // all equal: class 0
      0,   0,   1,    // label 3 >= C: nowhere
  };
  const std::vector<uint32_t> labels = {2, 2, 0, 1, 1, 3};
  const std::vector<uint32_t> want = {0, 1, 0,   // label 0: predicted 1
                                      2, 0, 0,   // label 1: predicted 0 twice
                                      1, 1, 0};  // label 2: predicted 1 and 0
  std::vector<uint32_t> ref(9);
  ops::ref::confusion(logits.data(), labels.data(), ref.data(), 6, 3, false);
  EXPECT_EQ(ref, want);
  const vk::Buffer d_logits = words(logits.data(), 18, 0, 18);
  const vk::Buffer d_labels = words(labels.data(), 6, 0, 6);
  const vk::Buffer d_counts = words(want.data(), 9, 0, 9);  // not zero: overwrite clears it
  vk::Recorder rec(ctx());
  ops::confusion(rec, ops::view(d_logits, {6, 3}), ops::view(d_labels, {6}, 0, DType::U32),
                 ops::view(d_counts, {3, 3}, 0, DType::U32));
  rec.submit();
  EXPECT_EQ(readAll(d_counts, 9), want);
}

TEST_F(ConfusionTest, BadShapesThrowBeforeRecording) {
  const std::vector<uint32_t> zeros(64, 0);
  const vk::Buffer a = words(zeros.data(), 64, 0, 64), b = words(zeros.data(), 64, 0, 64),
                   c = words(zeros.data(), 64, 0, 64);
  auto record = [&](Shape logits, Shape labels, Shape counts, DType labels_dtype = DType::U32) {
    return [=, &a, &b, &c](vk::Recorder& rec) {
      ops::confusion(rec, ops::view(a, logits), ops::view(b, labels, 0, labels_dtype),
                     ops::view(c, counts, 0, DType::U32));
    };
  };
  expectShapeError(ctx(), record({5, 3}, {4}, {3, 3}),
                   "confusion: logits (5,3), labels (4): labels must have the shape of logits "
                   "without C");
  expectShapeError(ctx(), record({5, 3}, {5}, {3, 3}, DType::F32), "labels must be u32, got f32");
  expectShapeError(ctx(), record({15}, {1}, {15, 15}), "at least 2 dims");
  expectShapeError(ctx(), record({5, 3}, {5}, {9}), "counts (9) must be (3,3)");
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::confusion(rec, ops::view(a, {5, 3}), ops::view(b, {5}, 0, DType::U32),
                       ops::view(a, {3, 3}, 4, DType::U32));
      },
      "counts (3,3) overlaps logits (5,3)");
}

}  // namespace
}  // namespace vkgrad::test

// ops::topKWeights against its CPU reference (odd row lengths, ties, any view offset, f16 and
// bf16 tensors), and together with ops::categorical: top_k = 1 is greedy, and draws never
// leave the top k.
#include "vkgrad/ops/sample.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/random.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/sample.h"

namespace vkgrad::test {
namespace {

using SampleTest = VkTest;

// Logits in [-4, 4) with some exact repeats, so ties at the k-th largest occur.
std::vector<float> logitsWithTies(Rng& rng, int64_t rows, int64_t cols) {
  auto l = rng.uniform(size_t(rows * cols), -4.0f, 4.0f);
  for (int64_t i = 0; i < rows * cols; i += 7)
    l[size_t(i)] = l[size_t(i / cols * cols + rng.below(uint32_t(cols)))];
  return l;
}

TEST_F(SampleTest, TopKWeightsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {3, 17}, {5, 256}, {2, 1000}, {3, 4099}};
  for (const auto& [rows, cols] : shapes) {
    for (int64_t k : {int64_t(0), int64_t(1), int64_t(5), cols, cols + 3}) {
      for (float temperature : {0.7f, 1.3f}) {
        SCOPED_TRACE(testing::Message()
                     << "rows=" << rows << " cols=" << cols << " k=" << k << " T=" << temperature);
        const auto l = logitsWithTies(rng, rows, cols);
        std::vector<float> want(l.size());
        ops::ref::topKWeights(l.data(), want.data(), rows, cols, temperature, k);
        const Placed in = placed(ctx(), {rows, cols}, l, 3);
        const Placed out = placed(ctx(), {rows, cols}, std::vector<float>(l.size(), NAN), 5);
        vk::Recorder rec(ctx());
        ops::topKWeights(rec, in.view, out.view, {temperature, k});
        rec.submit();
        const auto got = readPlaced(ctx(), out);
        // exp is approximate on the device (Vulkan allows 3 + 2|x| ulp); weights are <= 1.
        EXPECT_TRUE(allClose(got, want, 1e-5));
        int64_t kept = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i] == 0.0f, want[i] == 0.0f) << "element " << i << " logit " << l[i];
          kept += got[i] > 0.0f;
        }
        const int64_t k_eff = k == 0 ? cols : std::min(k, cols);
        EXPECT_GE(kept, rows * k_eff);  // more only through ties
      }
    }
  }
}

// Logits and weights in f16 or bf16, and in different formats, logits at a 2-byte offset: the
// reference runs on the rounded logits (bf16's 8 significant bits make more ties at the k-th
// largest), and the weights are held to the f32 test's 1e-5 plus their store's rounding.
TEST_F(SampleTest, SixteenBitTensorsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  using ops::DType;
  struct Formats {
    DType in, out;
  };
  for (const Formats f : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                          Formats{DType::F32, DType::BF16}, Formats{DType::BF16, DType::F32}})
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{3, 17}, {2, 1000}, {3, 4099}})
      for (int64_t k : {int64_t(0), int64_t(1), int64_t(5)}) {
        SCOPED_TRACE(testing::Message() << ops::dtypeName(f.in) << " -> " << ops::dtypeName(f.out)
                                        << " rows=" << rows << " cols=" << cols << " k=" << k);
        const int64_t n = rows * cols;
        const auto l = ops::ref::roundTo(f.in, logitsWithTies(rng, rows, cols));
        std::vector<float> want(l.size());
        ops::ref::topKWeights(l.data(), want.data(), rows, cols, 0.7f, k);
        std::vector<float> shifted = {1.0f};
        shifted.insert(shifted.end(), l.begin(), l.end());
        const DeviceTensor in = upload(ctx(), {n + 1}, shifted, f.in);
        const DeviceTensor out = poisoned(ctx(), {rows, cols}, f.out);
        vk::Recorder rec(ctx());
        ops::topKWeights(rec, ops::view(in.buffer, {rows, cols}, ops::dtypeBytes(f.in), f.in),
                         out.view(), {0.7f, k});
        rec.submit();
        const auto got = download(ctx(), out);
        EXPECT_TRUE(closeInFormat(got, want, f.out, 1e-5));
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i] == 0.0f, want[i] == 0.0f) << "element " << i << " logit " << l[i];
      }
}

// top_k = 1 picks the largest logit of every row whatever the draw; with top_k = 3 every draw
// is one of the row's 3 largest and each of them is drawn.
TEST_F(SampleTest, DrawsStayInTopK) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t rows = 513, cols = 67;
  const auto l = rng.uniform(size_t(rows * cols), -2.0f, 2.0f);
  auto logits = upload(ctx(), {rows, cols}, l);
  auto weights = poisoned(ctx(), {rows, cols});
  const uint32_t state[4] = {rng.below(UINT32_MAX), 7, rng.below(1000), 0};
  vk::Buffer rng_state = uploadWords(ctx(), state);
  vk::Buffer ids = uploadWords(ctx(), std::vector<uint32_t>(rows, 0xFFFFFFFFu));
  const ops::TensorView rng_view = ops::view(rng_state, {4}, 0, ops::DType::U32);
  const ops::TensorView ids_view = ops::view(ids, {rows}, 0, ops::DType::U32);
  for (int64_t k : {1, 3}) {
    vk::Recorder rec(ctx());
    ops::topKWeights(rec, logits.view(), weights.view(), {0.5f, k});
    ops::categorical(rec, weights.view(), ids_view, rng_view);
    rec.submit();
    const auto got = downloadWords(ctx(), ids, size_t(rows));
    std::vector<int64_t> rank_count(3, 0);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = l.data() + r * cols;
      ASSERT_LT(got[size_t(r)], uint32_t(cols));
      const float picked = row[got[size_t(r)]];
      const int64_t above = std::count_if(row, row + cols, [&](float x) { return x > picked; });
      ASSERT_LT(above, k) << "row " << r << " drew id " << got[size_t(r)] << " ranked " << above;
      ++rank_count[size_t(above)];
    }
    // Each of the top 3 has probability > 2% for logits in [-2, 2) at T = 0.5, so 513 rows
    // draw each rank many times; a draw ignoring the weights would rarely stay in the top 3.
    if (k == 3) {
      for (int64_t rank = 0; rank < 3; ++rank) EXPECT_GT(rank_count[size_t(rank)], 0) << rank;
    }
  }
}

TEST_F(SampleTest, BadArgumentsThrowBeforeRecording) {
  auto logits = poisoned(ctx(), {3, 9});
  auto weights = poisoned(ctx(), {3, 9});
  auto narrow = poisoned(ctx(), {3, 8});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::topKWeights(rec, logits.view(), narrow.view(), {}); }, "shape of logits");
  auto expectError = [&](const ops::SampleOptions& o, const std::string& message) {
    try {
      ops::topKWeights(rec, logits.view(), weights.view(), o);
      ADD_FAILURE() << "no error for " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
    EXPECT_EQ(rec.dispatchCount(), 0u);
  };
  expectError({0.0f, 0}, "temperature");
  expectError({NAN, 0}, "temperature");
  expectError({1.0f, -1}, "top_k");
}

}  // namespace
}  // namespace vkgrad::test

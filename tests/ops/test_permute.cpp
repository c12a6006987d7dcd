#include "vkgrad/ops/permute.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/permute.h"

namespace vkgrad::test {
namespace {

using ops::Shape;

class PermuteTest : public VkTest {};

Shape shapeOf(const std::vector<int64_t>& dims) {
  return Shape::of(dims.data(), int(dims.size()));
}

// Every permutation of ranks 1 to 4 on odd sizes, and six random ones of ranks 5 and 6; a
// copy is exact, so tolerance 0.
TEST_F(PermuteTest, EveryPermutationMatchesTheReference) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t sizes[] = {3, 1, 5, 7, 2, 3};
  for (int rank = 1; rank <= 6; ++rank) {
    std::vector<int64_t> dims(sizes, sizes + rank);
    std::vector<int> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    int tries = 0;
    do {
      if (rank > 4)  // Fisher-Yates from the test's generator
        for (int i = rank - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(uint32_t(i + 1))]);
      SCOPED_TRACE(testing::Message() << "rank " << rank << " perm " << perm[0] << "..");
      const int64_t n = std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<>());
      const auto x = rng.normal(size_t(n));
      std::vector<float> want(static_cast<size_t>(n));
      ops::ref::permute(x.data(), want.data(), dims, perm);
      std::vector<int64_t> out_dims(rank);
      for (int i = 0; i < rank; ++i) out_dims[i] = dims[perm[i]];
      auto src = upload(ctx(), shapeOf(dims), x), dst = poisoned(ctx(), shapeOf(out_dims));
      vk::Recorder rec(ctx());
      ops::permute(rec, src.view(), dst.view(), perm);
      rec.submit();
      EXPECT_TRUE(allClose(download(ctx(), dst), want, 0.0));
    } while (rank > 4 ? ++tries < 6 : std::next_permutation(perm.begin(), perm.end()));
  }
}

// (B,T,H,D) -> (B,H,T,D) and back is the identity, at view offsets that are not aligned.
TEST_F(PermuteTest, HeadsRoundTripAtOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t b = 2, t = 9, h = 3, d = 5, n = b * t * h * d;
  const auto x = rng.normal(size_t(n));
  std::vector<float> padded(n + 3, 0.0f);
  std::copy(x.begin(), x.end(), padded.begin() + 1);
  auto src = upload(ctx(), {n + 3}, padded), mid = poisoned(ctx(), {n + 2}),
       back = poisoned(ctx(), {n});
  const int perm[] = {0, 2, 1, 3};
  vk::Recorder rec(ctx());
  ops::permute(rec, ops::view(src.buffer, {b, t, h, d}, 4), ops::view(mid.buffer, {b, h, t, d}, 8),
               perm);
  ops::permute(rec, ops::view(mid.buffer, {b, h, t, d}, 8), ops::view(back.buffer, {b, t, h, d}),
               perm);
  rec.submit();
  EXPECT_TRUE(allClose(download(ctx(), back), x, 0.0));
}

// f16 and bf16 tensors move as their bits (exact, so tolerance 0), on odd sizes and with
// views 2 bytes into their buffers (an odd element skip).
TEST_F(PermuteTest, SixteenBitTensorsMoveExactlyAtOddOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const std::vector<int64_t> dims = {3, 5, 7};
  const std::vector<int64_t> out_dims = {7, 3, 5};
  const int perm[] = {2, 0, 1};
  for (const ops::DType dtype : {ops::DType::F16, ops::DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(dtype));
    const auto x = ops::ref::roundTo(dtype, rng.normal(105));
    std::vector<float> want(105);
    ops::ref::permute(x.data(), want.data(), dims, perm);
    auto src = shiftedUpload(ctx(), shapeOf(dims), x, dtype);
    auto dst = shiftedPoisoned(ctx(), shapeOf(out_dims), dtype);
    auto aligned = poisoned(ctx(), shapeOf(out_dims), dtype);
    vk::Recorder rec(ctx());
    ops::permute(rec, src.view, dst.view, perm);
    ops::permute(rec, src.view, aligned.view(), perm);
    rec.submit();
    EXPECT_TRUE(allClose(downloadShifted(ctx(), dst), want, 0.0));
    EXPECT_TRUE(allClose(download(ctx(), aligned), want, 0.0));
  }
}

TEST_F(PermuteTest, RejectsBadArgumentsBeforeRecording) {
  auto a = poisoned(ctx(), {2, 3, 4}), b = poisoned(ctx(), {2, 3, 4});
  vk::Recorder rec(ctx());
  auto expectError = [&](const std::function<void()>& record, const std::string& message) {
    try {
      record();
      ADD_FAILURE() << "no ShapeError, expected: " << message;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  const int swap[] = {0, 2, 1}, twice[] = {0, 0, 1}, short_perm[] = {1, 0};
  expectError(
      [&] {
        ops::permute(rec, a.view(), ops::view(b.buffer, {2, 3, 4}), swap);
      },
      "permute: src (2,3,4), dst (2,3,4), perm (0,2,1): dst axis 1 must have size 4");
  expectError(
      [&] {
        ops::permute(rec, a.view(), ops::view(b.buffer, {2, 3, 4}), twice);
      },
      "not a permutation");
  expectError(
      [&] {
        ops::permute(rec, a.view(), ops::view(b.buffer, {2, 3, 4}), short_perm);
      },
      "perm and dst need src's rank");
  expectError(
      [&] {
        ops::permute(rec, a.view(), ops::view(a.buffer, {2, 4, 3}), swap);
      },
      "overlaps");
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test

#include "vkgrad/ops/patchify.h"

#include <cmath>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/patchify.h"

namespace vkgrad::test {
namespace {

using ops::Shape;
using ops::Write;

class PatchifyTest : public VkTest {
 protected:
  Rng rng_;
};

struct Case {
  int64_t batch, height, width, patch;
};
// Odd sizes, non-square images and grids, patch 1 (a reshape) and one patch per image.
constexpr Case kCases[] = {{3, 15, 10, 5}, {2, 28, 28, 7}, {1, 7, 7, 1},
                           {2, 6, 9, 3},   {1, 4, 4, 4},   {5, 21, 14, 7}};

std::vector<float> nans(int64_t n) {
  return std::vector<float>(size_t(n), std::nanf(""));
}

// Forward, and the backward overwriting and accumulating, against the reference at views
// that start at odd element offsets. A copy is exact, and so is one float add (the reference
// adds in double and rounds once): tolerance 0. Outputs start as NaN (overwrite) or random
// (accumulate), with a sentinel around every view.
TEST_F(PatchifyTest, MatchesTheReferenceBothWays) {
  SCOPED_TRACE(rng_.describe());
  int at = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "images (" << c.batch << "," << c.height << "," << c.width
                                    << ") patch " << c.patch);
    const Shape images{c.batch, c.height, c.width};
    const Shape patches = ops::patchifyShape(images, c.patch);
    const int64_t n = images.numel();
    const auto x = rng_.normal(size_t(n)), dy = rng_.normal(size_t(n)),
               init = rng_.normal(size_t(n));
    std::vector<float> want(static_cast<size_t>(n)), want_dx(static_cast<size_t>(n)),
        want_acc = init;
    ops::ref::patchify(x.data(), want.data(), c.batch, c.height, c.width, c.patch);
    ops::ref::patchifyBackward(dy.data(), want_dx.data(), c.batch, c.height, c.width, c.patch,
                               false);
    ops::ref::patchifyBackward(dy.data(), want_acc.data(), c.batch, c.height, c.width, c.patch,
                               true);

    const Placed tx = placed(ctx(), images, x, at), ty = placed(ctx(), patches, nans(n), at + 2),
                 tdy = placed(ctx(), patches, dy, at + 1),
                 tdx = placed(ctx(), images, nans(n), at + 3),
                 tacc = placed(ctx(), images, init, at + 4);
    vk::Recorder rec(ctx());
    ops::patchify(rec, tx.view, ty.view, c.patch);
    ops::patchifyBackward(rec, tdy.view, tdx.view, c.patch);
    ops::patchifyBackward(rec, tdy.view, tacc.view, c.patch, Write::Accumulate);
    EXPECT_EQ(rec.dispatchCount(), 3u);  // one dispatch each, no host im2col
    rec.submit();
    EXPECT_TRUE(allClose(readPlaced(ctx(), ty), want, 0.0)) << "patches";
    EXPECT_TRUE(allClose(readPlaced(ctx(), tdx), want_dx, 0.0)) << "dimages";
    EXPECT_TRUE(allClose(readPlaced(ctx(), tacc), want_acc, 0.0)) << "dimages accumulated";
    at = (at + 3) % 7;
  }
}

// Unpatchify undoes patchify: the two are inverse permutations, bit for bit.
TEST_F(PatchifyTest, BackwardInvertsForward) {
  SCOPED_TRACE(rng_.describe());
  const Shape images{3, 12, 20};
  const auto x = rng_.normal(size_t(images.numel()));
  auto tx = upload(ctx(), images, x), ty = poisoned(ctx(), ops::patchifyShape(images, 4)),
       back = poisoned(ctx(), images);
  vk::Recorder rec(ctx());
  ops::patchify(rec, tx.view(), ty.view(), 4);
  ops::patchifyBackward(rec, ty.view(), back.view(), 4);
  rec.submit();
  EXPECT_TRUE(allClose(download(ctx(), back), x, 0.0));
}

// Images and patches in f16 or bf16, or one of them f32: a move rounds at most once, into the
// output's format, and an accumulation adds in f32 and rounds once, so closeInFormat with no
// f32 tolerance. Every view starts one element into its buffer (2 bytes for 16-bit ones).
TEST_F(PatchifyTest, SixteenBitTensorsMatchTheReference) {
  SCOPED_TRACE(rng_.describe());
  using ops::DType;
  struct Formats {
    DType images, patches;
  };
  for (const Formats fm : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                           Formats{DType::F32, DType::BF16}, Formats{DType::BF16, DType::F32}})
    for (const Case& c : {kCases[0], kCases[3]}) {
      SCOPED_TRACE(testing::Message() << "images (" << c.batch << "," << c.height << "," << c.width
                                      << ") patch " << c.patch << ", " << ops::dtypeName(fm.images)
                                      << " images, " << ops::dtypeName(fm.patches) << " patches");
      const Shape images{c.batch, c.height, c.width};
      const Shape patches = ops::patchifyShape(images, c.patch);
      const int64_t n = images.numel();
      const auto x = ops::ref::roundTo(fm.images, rng_.normal(size_t(n)));
      const auto dy = ops::ref::roundTo(fm.patches, rng_.normal(size_t(n)));
      const auto init = ops::ref::roundTo(fm.images, rng_.normal(size_t(n)));
      std::vector<float> want(static_cast<size_t>(n)), want_dx(static_cast<size_t>(n)),
          want_acc = init;
      ops::ref::patchify(x.data(), want.data(), c.batch, c.height, c.width, c.patch);
      ops::ref::patchifyBackward(dy.data(), want_dx.data(), c.batch, c.height, c.width, c.patch,
                                 false);
      ops::ref::patchifyBackward(dy.data(), want_acc.data(), c.batch, c.height, c.width, c.patch,
                                 true);
      auto tx = shiftedUpload(ctx(), images, x, fm.images);
      auto ty = shiftedPoisoned(ctx(), patches, fm.patches);
      auto tdy = shiftedUpload(ctx(), patches, dy, fm.patches);
      auto tdx = shiftedPoisoned(ctx(), images, fm.images);
      auto tacc = shiftedUpload(ctx(), images, init, fm.images);
      vk::Recorder rec(ctx());
      ops::patchify(rec, tx.view, ty.view, c.patch);
      ops::patchifyBackward(rec, tdy.view, tdx.view, c.patch);
      ops::patchifyBackward(rec, tdy.view, tacc.view, c.patch, Write::Accumulate);
      rec.submit();
      EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), ty), want, fm.patches, 0.0)) << "patches";
      EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), tdx), want_dx, fm.images, 0.0)) << "dimages";
      EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), tacc), want_acc, fm.images, 0.0))
          << "dimages accumulated";
    }
}

TEST_F(PatchifyTest, RejectsBadShapesBeforeRecording) {
  auto images = poisoned(ctx(), {2, 28, 28}), patches = poisoned(ctx(), {2, 16, 49}),
       flat = poisoned(ctx(), {28, 28});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::patchify(rec, images.view(), patches.view(), 5); },
      "patchify: images (2,28,28) with patch 5: H and W must be multiples of the "
      "patch");
  expectShapeError(
      rec, [&] { ops::patchify(rec, images.view(), patches.view(), 0); },
      "patchify: images (2,28,28) with patch 0: the patch must be at least 1");
  expectShapeError(
      rec, [&] { ops::patchify(rec, flat.view(), patches.view(), 7); },
      "patchify: images (28,28) with patch 7: images must be a non-empty (B,H,W)");
  expectShapeError(
      rec, [&] { ops::patchify(rec, images.view(), patches.view(), 4); },
      "patchify: images (2,28,28) with patch 4: patches (2,16,49) must be (2,49,16)");
  expectShapeError(
      rec,
      [&] {
        ops::patchifyBackward(rec, patches.view(), ops::view(images.buffer, {2, 14, 28}), 7);
      },
      "patchifyBackward: dimages (2,14,28) with patch 7: dpatches (2,16,49) must be (2,8,49)");
  // One buffer holding both, the patches 10 elements after the images start.
  auto both = poisoned(ctx(), {2 * 2 * 28 * 28 + 10});
  expectShapeError(
      rec,
      [&] {
        ops::patchify(rec, ops::view(both.buffer, {2, 28, 28}),
                      ops::view(both.buffer, {2, 16, 49}, 4 * 10), 7);
      },
      "patchify: patches (2,16,49) overlaps images (2,28,28)");
  expectShapeError(
      rec,
      [&] {
        ops::patchify(rec, images.view(), ops::view(patches.buffer, {2, 16, 50}), 7);
      },
      "patches (2,16,50) must be (2,16,49)");
}

}  // namespace
}  // namespace vkgrad::test

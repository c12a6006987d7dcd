#include "vkgrad/ops/augment.h"

#include <array>
#include <cmath>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/ops/random.h"
#include "vkgrad/ops/reference/augment.h"
#include "vkgrad/ops/reference/half.h"

namespace vkgrad::test {
namespace {

using ops::Shape;

class AugmentTest : public VkTest {
 protected:
  // A random generator position: any seed, offset and stream.
  ops::ref::Stream randomStream() {
    auto word64 = [&] { return (uint64_t(rng_.below(UINT32_MAX)) << 32) | rng_.below(UINT32_MAX); };
    return {word64(), word64(), rng_.below(1000)};
  }
  static vk::Buffer stateBuffer(const ops::ref::Stream& s) {
    const ops::RngState state = ops::RngState::make(s.seed, s.offset);
    const uint32_t w[4] = {state.seed_lo, state.seed_hi, state.offset_lo, state.offset_hi};
    return uploadWords(ctx(), w);
  }
  static ops::TensorView stateView(const vk::Buffer& b) {
    return ops::view(b, {4}, 0, ops::DType::U32);
  }
  Rng rng_;
};

struct Case {
  int64_t batch, height, width, pad;
  bool flip;
};
// Odd and non-square sizes, a pad of one less than the shorter side (a shift may leave a
// single row), one image, and more images than one workgroup covers.
constexpr Case kCases[] = {{5, 13, 9, 2, true},  {3, 7, 11, 6, false}, {1, 28, 28, 4, true},
                           {37, 5, 6, 1, true},  {2, 3, 17, 2, true},  {9, 15, 15, 3, false},
                           {4, 10, 12, 0, true}, {3, 6, 7, 0, false}};

// Every case against the reference at views that start at odd element offsets, with the
// generator at a random position. It is a copy: exact (tolerance 0). The output starts as
// NaN and sits between sentinels, so an unwritten or stray element fails.
TEST_F(AugmentTest, MatchesTheReferenceExactly) {
  SCOPED_TRACE(rng_.describe());
  int at = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "images (" << c.batch << "," << c.height << "," << c.width
                                    << ") pad " << c.pad << " flip " << c.flip);
    const Shape shape{c.batch, c.height, c.width};
    const int64_t n = shape.numel();
    const ops::ref::Stream s = randomStream();
    const float fill = rng_.uniform(1, -3.0f, 3.0f)[0];
    const auto x = rng_.normal(size_t(n));
    std::vector<float> want(static_cast<size_t>(n));
    ops::ref::augment(s, x.data(), want.data(), c.batch, c.height, c.width, c.pad, c.flip, fill);
    if (c.pad == 0 && !c.flip) {
      EXPECT_EQ(want, x) << "the reference is not the identity";
    }

    const Placed tx = placed(ctx(), shape, x, at),
                 ty = placed(ctx(), shape, std::vector<float>(size_t(n), std::nanf("")), at + 2);
    const vk::Buffer state = stateBuffer(s);
    vk::Recorder rec(ctx());
    ops::augment(rec, tx.view, ty.view, c.pad, c.flip, stateView(state), s.stream, fill);
    EXPECT_EQ(rec.dispatchCount(), 1u);
    rec.submit();
    EXPECT_TRUE(allClose(readPlaced(ctx(), ty), want, 0.0));
    EXPECT_TRUE(allClose(readPlaced(ctx(), tx), x, 0.0)) << "images changed";
    at = (at + 3) % 7;
  }
}

// Images and out in f16 or bf16, or one of them f32: the same draws as in f32 (the reference
// runs on the rounded images), each value, and the fill, rounded at most once into out's
// format: closeInFormat with no f32 tolerance. Views 2 bytes into their buffers.
TEST_F(AugmentTest, SixteenBitImagesMatchTheReference) {
  SCOPED_TRACE(rng_.describe());
  using ops::DType;
  struct Formats {
    DType images, out;
  };
  for (const Formats fm : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                           Formats{DType::F32, DType::BF16}, Formats{DType::F16, DType::F32}})
    for (const Case& c : {kCases[0], kCases[3]}) {
      SCOPED_TRACE(testing::Message() << "images (" << c.batch << "," << c.height << "," << c.width
                                      << ") pad " << c.pad << ", " << ops::dtypeName(fm.images)
                                      << " -> " << ops::dtypeName(fm.out));
      const Shape shape{c.batch, c.height, c.width};
      const int64_t n = shape.numel();
      const ops::ref::Stream s = randomStream();
      const float fill = rng_.uniform(1, -3.0f, 3.0f)[0];
      const auto x = ops::ref::roundTo(fm.images, rng_.normal(size_t(n)));
      std::vector<float> want(static_cast<size_t>(n));
      ops::ref::augment(s, x.data(), want.data(), c.batch, c.height, c.width, c.pad, c.flip, fill);
      auto tx = shiftedUpload(ctx(), shape, x, fm.images);
      auto ty = shiftedPoisoned(ctx(), shape, fm.out);
      const vk::Buffer state = stateBuffer(s);
      vk::Recorder rec(ctx());
      ops::augment(rec, tx.view, ty.view, c.pad, c.flip, stateView(state), s.stream, fill);
      rec.submit();
      EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), ty), want, fm.out, 0.0));
    }
}

// Pearson's chi-square of counts against equal expected counts.
double chiSquare(const std::vector<int64_t>& counts, int64_t total) {
  const double expected = double(total) / double(counts.size());
  double chi2 = 0.0;
  for (int64_t c : counts) chi2 += (double(c) - expected) * (double(c) - expected) / expected;
  return chi2;
}

// The draws read back from the device's output alone: every pixel of a (9,11) image holds
// its own index + 1, and a shift of at most 3 keeps the centre (4,5) and its right neighbour
// inside, so the centre's value gives (y + dy, source column) and its neighbour's (one more
// or one less) gives the mirror. Over 7000 images the shifts must be uniform on [-3, 3] each
// and jointly, and the mirror must come up half the time. Bounds at a false-failure rate of
// about 1e-6 each: chi-square critical values 38.26 (6 degrees of freedom, dx and dy) and
// 109.66 (48, the 49 (dx, dy) pairs); mirrors: binomial(7000, 1/2), sigma = 41.8, +-5 sigma.
// A bias of 5% on one shift value already gives an expected chi-square of ~60.
TEST_F(AugmentTest, ShiftsAreUniformAndHalfTheImagesAreMirrored) {
  SCOPED_TRACE(rng_.describe());
  constexpr int64_t kImages = 7000, kH = 9, kW = 11, kPad = 3, kCy = 4, kCx = 5;
  const Shape shape{kImages, kH, kW};
  std::vector<float> x(size_t(shape.numel()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int64_t(i) % (kH * kW) + 1);
  const ops::ref::Stream s = randomStream();
  auto images = upload(ctx(), shape, x);
  auto out = poisoned(ctx(), shape);
  const vk::Buffer state = stateBuffer(s);
  vk::Recorder rec(ctx());
  ops::augment(rec, images.view(), out.view(), kPad, true, stateView(state), s.stream, 0.0f);
  rec.submit();
  const auto y = download(ctx(), out);

  std::vector<int64_t> dx_counts(7), dy_counts(7), pair_counts(49);
  int64_t mirrored = 0;
  for (int64_t b = 0; b < kImages; ++b) {
    const float* img = y.data() + b * kH * kW;
    const int64_t centre = int64_t(img[kCy * kW + kCx]) - 1;
    const int64_t right = int64_t(img[kCy * kW + kCx + 1]) - 1;
    ASSERT_TRUE(right == centre + 1 || right == centre - 1) << "image " << b;
    const bool mirror = right < centre;
    const int64_t sy = centre / kW, column = centre % kW;
    const int64_t sx = mirror ? kW - 1 - column : column;
    const int64_t dx = sx - kCx, dy = sy - kCy;
    ASSERT_TRUE(std::abs(dx) <= kPad && std::abs(dy) <= kPad) << "image " << b;
    const ops::ref::AugmentDraw want = ops::ref::augmentDraw(s, b, kPad, true);
    ASSERT_TRUE(want.dx == dx && want.dy == dy && want.mirror == mirror) << "image " << b;
    dx_counts[size_t(dx + kPad)] += 1;
    dy_counts[size_t(dy + kPad)] += 1;
    pair_counts[size_t((dy + kPad) * 7 + dx + kPad)] += 1;
    mirrored += mirror;
  }
  EXPECT_LT(chiSquare(dx_counts, kImages), 38.26);
  EXPECT_LT(chiSquare(dy_counts, kImages), 38.26);
  EXPECT_LT(chiSquare(pair_counts, kImages), 109.66);
  EXPECT_NEAR(double(mirrored), kImages / 2.0, 5 * 41.8);
}

// Without flip nothing is mirrored, whatever the stream says; pad 0 with flip mirrors some
// images and leaves the others exactly as they were.
TEST_F(AugmentTest, FlipAloneMirrorsWholeImages) {
  SCOPED_TRACE(rng_.describe());
  const Shape shape{64, 5, 7};
  const auto x = rng_.normal(size_t(shape.numel()));
  const ops::ref::Stream s = randomStream();
  auto images = upload(ctx(), shape, x);
  auto out = poisoned(ctx(), shape);
  const vk::Buffer state = stateBuffer(s);
  vk::Recorder rec(ctx());
  ops::augment(rec, images.view(), out.view(), 0, true, stateView(state), s.stream);
  rec.submit();
  const auto y = download(ctx(), out);
  int mirrored = 0;
  for (int64_t b = 0; b < 64; ++b) {
    bool same = true, mirror = true;
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t c = 0; c < 7; ++c) {
        const float got = y[size_t((b * 5 + r) * 7 + c)];
        same = same && got == x[size_t((b * 5 + r) * 7 + c)];
        mirror = mirror && got == x[size_t((b * 5 + r) * 7 + 6 - c)];
      }
    EXPECT_TRUE(same != mirror) << "image " << b << " is neither itself nor its mirror";
    EXPECT_EQ(mirror, ops::ref::augmentDraw(s, b, 0, true).mirror) << "image " << b;
    mirrored += mirror;
  }
  // 64 fair coins: all heads or all tails has probability 2^-63.
  EXPECT_GT(mirrored, 0);
  EXPECT_LT(mirrored, 64);
}

TEST_F(AugmentTest, RejectsBadShapesBeforeRecording) {
  auto images = poisoned(ctx(), {2, 28, 20}), out = poisoned(ctx(), {2, 28, 20}),
       flat = poisoned(ctx(), {28, 28});
  const vk::Buffer state = uploadWords(ctx(), std::vector<uint32_t>{1, 2, 3, 4});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::augment(rec, images.view(), out.view(), 20, true, stateView(state)); },
      "augment: images (2,28,20) with pad 20: the pad must be in [0, 20)");
  expectShapeError(
      rec, [&] { ops::augment(rec, images.view(), out.view(), -1, true, stateView(state)); },
      "augment: images (2,28,20) with pad -1: the pad must be in [0, 20)");
  expectShapeError(
      rec, [&] { ops::augment(rec, flat.view(), out.view(), 2, true, stateView(state)); },
      "augment: images (28,28) with pad 2: images must be a non-empty (B,H,W)");
  expectShapeError(
      rec,
      [&] {
        ops::augment(rec, images.view(), ops::view(out.buffer, {2, 20, 28}), 2, true,
                     stateView(state));
      },
      "augment: images (2,28,20): out (2,20,28) must be (2,28,20)");
  expectShapeError(
      rec, [&] { ops::augment(rec, images.view(), images.view(), 2, true, stateView(state)); },
      "augment: out (2,28,20) overlaps images (2,28,20)");
  expectShapeError(
      rec,
      [&] {
        ops::augment(rec, images.view(), out.view(), 2, true,
                     ops::view(state, {3}, 0, ops::DType::U32));
      },
      "augment: rng state (3) must hold 4 u32 words");
}

}  // namespace
}  // namespace vkgrad::test

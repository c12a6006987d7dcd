#include "ops/matmul.h"

#include <cstring>
#include <ostream>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "ops/reference/matmul.h"
#include "vk/error.h"
#include "vk/staging.h"

namespace vkgrad::ops {
// gtest prints the parameter as "texel" rather than as raw bytes.
void PrintTo(MatmulVariant variant, std::ostream* os) {
  *os << matmulVariantName(variant);
}
}  // namespace vkgrad::ops

namespace vkgrad::test {
namespace {

// Normalised error (compare.h) allowed for every shape, including K = 1537. Inputs are
// uniform in [-1, 1], so an output is a sum of K terms of variance 1/9: its typical size is
// sqrt(K)/3 and the largest output (the normaliser) about three times that. fp32 rounding
// in a K-term sum adds up like a random walk, ~sqrt(K)·2^-24 of the partial sums, which puts
// the expected normalised error near 1e-6 at K ~ 1500 whatever the summation order (each
// variant sums in a different order); 1e-5 leaves a 10x margin, while a kernel that drops
// or repeats a single term is off by ~1/(3 sqrt(K)) > 1e-2.
constexpr double kTolerance = 1e-5;

struct Shape3 {
  int64_t m, n, k;
};

class MatmulTest : public VkTest, public ::testing::WithParamInterface<ops::MatmulVariant> {
 protected:
  // Checks one product on fresh random data against the fp64 CPU reference.
  void expectMatches(Rng& rng, Shape3 s) {
    SCOPED_TRACE(testing::Message() << "m=" << s.m << " n=" << s.n << " k=" << s.k);
    const auto a = rng.uniform(s.m * s.k), b = rng.uniform(s.k * s.n);
    std::vector<float> want(s.m * s.n);
    ops::ref::matmul(a.data(), b.data(), want.data(), s.m, s.n, s.k);
    auto da = upload(ctx(), {s.m, s.k}, a), db = upload(ctx(), {s.k, s.n}, b);
    auto dc = poisoned(ctx(), {s.m, s.n});
    vk::Recorder rec(ctx());
    ops::matmul(rec, da.view(), db.view(), dc.view(), GetParam());
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), dc), want, kTolerance));
  }
};

// Shapes that are not multiples of any tile (texel: 16 x 64 per workgroup; tiled: 64 x 64,
// BK 16), with K % 4 != 0 and N % 4 != 0 (the texel kernel's R32F paths), M, N or K = 1,
// and a few whole-vec4 shapes that still overhang the tiles.
TEST_P(MatmulTest, MatchesCpuOnOddShapes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Shape3 shapes[] = {{1, 1, 1},     {7, 5, 3},      {33, 17, 65}, {1, 257, 31}, {129, 1, 7},
                           {5, 6, 9},     {17, 19, 13},   {3, 8, 1},    {1, 4, 4},    {16, 64, 4},
                           {70, 130, 36}, {257, 100, 96}, {23, 66, 18}, {40, 12, 5}};
  for (const Shape3& s : shapes) expectMatches(rng, s);
}

// A long reduction: accumulated rounding (see kTolerance), and many trips of the k loop
// with the K % 4 tail after them.
TEST_P(MatmulTest, MatchesCpuWithLongK) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  expectMatches(rng, {9, 33, 1537});
  expectMatches(rng, {20, 16, 2000});
}

// Place a, b and c one after another in one buffer at the given residues mod 16 bytes (the
// device's offset alignment on lavapipe), after a gap; every other word holds random guard
// values that must survive.
void expectMatchesInsideOneBuffer(vk::Context& context, ops::MatmulVariant variant, Rng& rng,
                                  Shape3 s, const uint64_t residues[3]) {
  SCOPED_TRACE(testing::Message() << "m=" << s.m << " n=" << s.n << " k=" << s.k << " residues "
                                  << residues[0] << "," << residues[1] << "," << residues[2]);
  const int64_t numel[3] = {s.m * s.k, s.k * s.n, s.m * s.n};
  uint64_t offset[3], at = 0;
  for (int i = 0; i < 3; ++i) {
    at += 16;  // a gap of guard words between tensors
    at += (residues[i] + 16 - at % 16) % 16;
    offset[i] = at;
    at += uint64_t(numel[i]) * 4;
  }
  const int64_t words = int64_t(at / 4) + 7;
  std::vector<float> contents = rng.uniform(words);
  for (int64_t i = 0; i < numel[2]; ++i) contents[offset[2] / 4 + i] = std::nanf("");
  DeviceTensor all = upload(context, {words}, contents);
  const float* a = contents.data() + offset[0] / 4;
  const float* b = contents.data() + offset[1] / 4;
  std::vector<float> want(numel[2]);
  ops::ref::matmul(a, b, want.data(), s.m, s.n, s.k);

  vk::Recorder rec(context);
  ops::matmul(rec, ops::view(all.buffer, {s.m, s.k}, offset[0]),
              ops::view(all.buffer, {s.k, s.n}, offset[1]),
              ops::view(all.buffer, {s.m, s.n}, offset[2]), variant);
  rec.submit();
  const std::vector<float> got = download(context, all);
  const std::vector<float> got_c(got.begin() + offset[2] / 4,
                                 got.begin() + offset[2] / 4 + numel[2]);
  EXPECT_TRUE(allClose(got_c, want, kTolerance));
  // Everything outside c, a and b included, is untouched (compared bitwise).
  int64_t changed = 0;
  for (int64_t i = 0; i < words; ++i) {
    const bool in_c = i >= int64_t(offset[2] / 4) && i < int64_t(offset[2] / 4) + numel[2];
    if (!in_c && std::memcmp(&got[i], &contents[i], 4) != 0) ++changed;
  }
  EXPECT_EQ(changed, 0) << "words outside c were written";
}

TEST_P(MatmulTest, MatchesCpuAtSixteenByteAlignedOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const uint64_t aligned[3] = {0, 0, 0};
  // K and N multiples of 4: the texel kernel takes its RGBA32F paths here.
  expectMatchesInsideOneBuffer(ctx(), GetParam(), rng, {19, 24, 20}, aligned);
  expectMatchesInsideOneBuffer(ctx(), GetParam(), rng, {13, 7, 9}, aligned);
}

TEST_P(MatmulTest, MatchesCpuAtFourByteAlignedOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // No tensor starts on a 16-byte boundary, so no binding can start at the tensor itself.
  const uint64_t unaligned[3] = {4, 8, 12}, mixed[3] = {12, 0, 4};
  expectMatchesInsideOneBuffer(ctx(), GetParam(), rng, {19, 24, 20}, unaligned);
  expectMatchesInsideOneBuffer(ctx(), GetParam(), rng, {19, 24, 20}, mixed);
  expectMatchesInsideOneBuffer(ctx(), GetParam(), rng, {13, 7, 9}, unaligned);
}

INSTANTIATE_TEST_SUITE_P(Variants, MatmulTest,
                         ::testing::Values(ops::MatmulVariant::Auto, ops::MatmulVariant::Naive,
                                           ops::MatmulVariant::Tiled, ops::MatmulVariant::Texel),
                         [](const auto& info) { return ops::matmulVariantName(info.param); });

TEST_F(VkTest, MatmulAutoPicksTexelOnCpusAndTiledOnGpus) {
  const vk::DeviceInfo& info = ctx().info();
  const bool texel = info.isCpu() && info.subgroup_compute && info.subgroup_shuffle;
  EXPECT_EQ(ops::matmulVariantFor(ctx()),
            texel ? ops::MatmulVariant::Texel : ops::MatmulVariant::Tiled)
      << info.name;
}

TEST_F(VkTest, MatmulRejectsMismatchedShapesBeforeRecording) {
  Rng rng;
  auto a = upload(ctx(), {4, 8}, rng.uniform(32)), b = upload(ctx(), {9, 2}, rng.uniform(18));
  auto c = poisoned(ctx(), {4, 2});
  vk::Recorder rec(ctx());
  try {
    ops::matmul(rec, a.view(), b.view(), c.view());
    FAIL() << "no ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("matmul: (4,8) x (9,2)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test

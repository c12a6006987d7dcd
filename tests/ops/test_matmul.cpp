#include "vkgrad/ops/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/gradcheck.h"
#include "common/not_run.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/elementwise.h"
#include "vkgrad/ops/reference/activation.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/matmul.h"
#include "vkgrad/vk/staging.h"

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
  void expectMatches(Rng& rng, Shape3 s, double tolerance = kTolerance) {
    SCOPED_TRACE(testing::Message() << "m=" << s.m << " n=" << s.n << " k=" << s.k);
    const auto a = rng.uniform(s.m * s.k), b = rng.uniform(s.k * s.n);
    std::vector<float> want(s.m * s.n);
    ops::ref::matmul(a.data(), b.data(), want.data(), s.m, s.n, s.k);
    auto da = upload(ctx(), {s.m, s.k}, a), db = upload(ctx(), {s.k, s.n}, b);
    auto dc = poisoned(ctx(), {s.m, s.n});
    vk::Recorder rec(ctx());
    ops::matmul(rec, da.view(), db.view(), dc.view(), GetParam());
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), dc), want, tolerance));
  }
};

// Shapes that are not multiples of any tile (texel: 16 x 64 per workgroup, fewer rows below
// 16: 1, 2, 4 or 8; tiled: 64 x 64, BK 16), with K % 4 != 0 and N % 4 != 0 (the texel
// kernel's R32F paths), M, N or K = 1, and a few whole-vec4 shapes that still overhang the
// tiles.
TEST_P(MatmulTest, MatchesCpuOnOddShapes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Shape3 shapes[] = {{1, 1, 1},    {7, 5, 3},   {33, 17, 65},  {1, 257, 31},
                           {129, 1, 7},  {5, 6, 9},   {17, 19, 13},  {3, 8, 1},
                           {1, 4, 4},    {16, 64, 4}, {70, 130, 36}, {257, 100, 96},
                           {23, 66, 18}, {40, 12, 5}, {2, 9, 7},     {6, 40, 12}};
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

// Deeper than one invocation of a CPU device may loop over (ops/matmul.cpp, cpuDepthLimit:
// 32,768 for Naive, Tiled and Vector, 131,072 for Texel): the product runs over slices of K,
// each adding to C. On lavapipe Naive and Vector came out wrong at K = 70,001 and Texel at
// 280,001, without a word. Sums of that many terms: 1e-4 (one dropped term is ~6e-4 off,
// a dropped slice far more).
TEST_P(MatmulTest, MatchesCpuDeeperThanACpuInvocationLoops) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  expectMatches(rng, {3, 5, 70001}, 1e-4);
  if (GetParam() == ops::MatmulVariant::Texel || GetParam() == ops::MatmulVariant::Auto)
    expectMatches(rng, {2, 3, 280001}, 1e-4);
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
                                           ops::MatmulVariant::Tiled, ops::MatmulVariant::Texel,
                                           ops::MatmulVariant::Vector),
                         [](const auto& info) { return ops::matmulVariantName(info.param); });

// (Coopmat instead of Vector where the device has cooperative matrices and the suite runs
// with VKGRAD_MATMUL=fp16.)
TEST_F(VkTest, MatmulAutoPicksTexelOnCpusAndVectorOnGpus) {
  const vk::DeviceInfo& info = ctx().info();
  const bool texel = info.isCpu() && info.subgroup_compute && info.subgroup_shuffle;
  const ops::MatmulVariant gpu =
      info.coopmat && ctx().fp16Matmul() ? ops::MatmulVariant::Coopmat : ops::MatmulVariant::Vector;
  EXPECT_EQ(ops::matmulVariantFor(ctx()), texel ? ops::MatmulVariant::Texel : gpu) << info.name;
}

// Every Vector tiling the GPU sweep tries (bench/gpu/matmul_sweep.sh), on shapes that overhang
// its tiles, with the vec4 load paths (K, N % 4 == 0) and without, plain and transposed.
TEST_F(VkTest, MatmulVectorTilingsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const ops::MatmulTiling tilings[] = {{16, 16, 16, 8, 8}, {16, 16, 8, 8, 8},  {16, 8, 16, 8, 8},
                                       {8, 16, 16, 8, 8},  {16, 16, 32, 4, 4}, {8, 8, 16, 4, 4},
                                       {32, 8, 16, 4, 8},  {16, 16, 16, 4, 8}, {8, 8, 4, 16, 16}};
  const Shape3 shapes[] = {{130, 129, 37}, {67, 260, 64}, {1, 5, 3}};
  const vk::DeviceInfo& info = ctx().info();
  for (const ops::MatmulTiling& tiling : tilings) {
    // A tiling past this device's workgroup or shared memory (vulkan12-minimum: 128
    // invocations, 16 KiB) is refused by name (MatmulRejectsATilingTheDeviceCannotRun).
    const uint64_t shared = 4ull * tiling.bk * (tiling.wy * tiling.tm + tiling.wx * tiling.tn);
    if (tiling.wx * tiling.wy > info.max_workgroup_invocations ||
        tiling.wx > info.max_workgroup_size[0] || tiling.wy > info.max_workgroup_size[1] ||
        shared > info.max_shared_memory) {
      noteNotRun("tiling " + ops::matmulTilingText(tiling),
                 "maxComputeWorkGroupInvocations|maxComputeSharedMemorySize");
      continue;
    }
    for (const Shape3& s : shapes)
      for (const bool trans : {false, true}) {
        SCOPED_TRACE(testing::Message() << ops::matmulTilingText(tiling) << " m=" << s.m
                                        << " n=" << s.n << " k=" << s.k << " trans " << trans);
        const auto a = rng.uniform(s.m * s.k), b = rng.uniform(s.k * s.n);
        std::vector<float> want(s.m * s.n), at(a.size()), bt(b.size());
        ops::ref::matmul(a.data(), b.data(), want.data(), s.m, s.n, s.k);
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.k; ++j) at[j * s.m + i] = a[i * s.k + j];
        for (int64_t i = 0; i < s.k; ++i)
          for (int64_t j = 0; j < s.n; ++j) bt[j * s.k + i] = b[i * s.n + j];
        auto da = trans ? upload(ctx(), {s.k, s.m}, at) : upload(ctx(), {s.m, s.k}, a);
        auto db = trans ? upload(ctx(), {s.n, s.k}, bt) : upload(ctx(), {s.k, s.n}, b);
        auto dc = poisoned(ctx(), {s.m, s.n});
        ops::MatmulOptions options;
        options.variant = ops::MatmulVariant::Vector;
        options.tiling = tiling;
        options.trans_a = options.trans_b = trans;
        vk::Recorder rec(ctx());
        ops::matmul(rec, da.view(), db.view(), dc.view(), options);
        rec.submit();
        EXPECT_TRUE(allClose(download(ctx(), dc), want, kTolerance));
      }
  }
}

TEST_F(VkTest, MatmulRejectsATilingTheDeviceCannotRun) {
  auto a = poisoned(ctx(), {4, 8}), b = poisoned(ctx(), {8, 2}), c = poisoned(ctx(), {4, 2});
  ops::MatmulOptions options;
  options.variant = ops::MatmulVariant::Vector;
  for (const ops::MatmulTiling tiling :
       {ops::MatmulTiling{16, 16, 6, 4, 4}, ops::MatmulTiling{64, 64, 16, 4, 4},
        ops::MatmulTiling{16, 16, 16, 32, 32}}) {
    options.tiling = tiling;
    expectError(
        ctx(), [&](vk::Recorder& rec) { ops::matmul(rec, a.view(), b.view(), c.view(), options); },
        "tiling " + ops::matmulTilingText(tiling));
  }
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

// ---- Transposes, batches, broadcasts and the epilogue (alpha, beta, bias) ----

// One product of the general form. batch_a/batch_b: 0 for a 2-D operand, else its leading dim
// (1 broadcasts over the batch).
struct Case {
  int64_t m, n, k;
  int64_t batch_a = 0, batch_b = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  bool residual = false;  // MatmulOptions::residual, shaped like C

  int64_t batch() const { return std::max<int64_t>({batch_a, batch_b, 1}); }
  bool batched() const { return batch_a > 0 || batch_b > 0; }
  ops::Shape shapeA() const {
    const int64_t r = trans_a ? k : m, c = trans_a ? m : k;
    return batch_a ? ops::Shape{batch_a, r, c} : ops::Shape{r, c};
  }
  ops::Shape shapeB() const {
    const int64_t r = trans_b ? n : k, c = trans_b ? k : n;
    return batch_b ? ops::Shape{batch_b, r, c} : ops::Shape{r, c};
  }
  ops::Shape shapeC() const { return batched() ? ops::Shape{batch(), m, n} : ops::Shape{m, n}; }
  ops::MatmulOptions options(ops::MatmulVariant variant) const {
    ops::MatmulOptions o;
    o.trans_a = trans_a, o.trans_b = trans_b, o.alpha = alpha, o.beta = beta;
    o.variant = variant;
    return o;
  }
  ops::ref::MatmulArgs ref() const {
    ops::ref::MatmulArgs r;
    r.m = m, r.n = n, r.k = k, r.batch = batch();
    r.batch_a = std::max<int64_t>(batch_a, 1), r.batch_b = std::max<int64_t>(batch_b, 1);
    r.trans_a = trans_a, r.trans_b = trans_b, r.alpha = alpha, r.beta = beta;
    return r;
  }
  std::string str() const {
    return shapeA().str() + (trans_a ? "^T" : "") + " x " + shapeB().str() + (trans_b ? "^T" : "") +
           " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta) +
           (bias ? " +bias" : "") + (residual ? " +residual" : "");
  }
};

class MatmulFlagsTest : public VkTest, public ::testing::WithParamInterface<ops::MatmulVariant> {
 protected:
  // a, b, bias, the residual and c one after another in one buffer, starting at the given
  // residues mod 16 bytes after a gap of guard words (the residual at c's); c starts random
  // (beta != 0) or NaN. Checks c against the reference and every other word for being
  // untouched.
  void expectForward(Rng& rng, const Case& cs, const uint64_t residues[4] = kAligned,
                     double tolerance = kTolerance) {
    SCOPED_TRACE(cs.str());
    const int64_t numel[5] = {cs.shapeA().numel(), cs.shapeB().numel(), cs.bias ? cs.n : 0,
                              cs.residual ? cs.shapeC().numel() : 0, cs.shapeC().numel()};
    const uint64_t residue[5] = {residues[0], residues[1], residues[2], residues[3], residues[3]};
    uint64_t offset[5], at = 0;
    for (int i = 0; i < 5; ++i) {
      at += 16;
      at += (residue[i] + 16 - at % 16) % 16;
      offset[i] = at;
      at += uint64_t(numel[i]) * 4;
    }
    const int64_t words = int64_t(at / 4) + 7;
    std::vector<float> contents = rng.uniform(words);
    const int64_t c0 = int64_t(offset[4] / 4), r0 = int64_t(offset[3] / 4);
    if (cs.beta == 0.0f)
      for (int64_t i = 0; i < numel[4]; ++i) contents[c0 + i] = std::nanf("");
    std::vector<float> want(contents.begin() + c0, contents.begin() + c0 + numel[4]);
    ops::ref::matmul(contents.data() + offset[0] / 4, contents.data() + offset[1] / 4,
                     cs.bias ? contents.data() + offset[2] / 4 : nullptr, want.data(), cs.ref());
    for (int64_t i = 0; i < numel[3]; ++i) want[i] += contents[r0 + i];

    DeviceTensor all = upload(ctx(), {words}, contents);
    const ops::TensorView bias = ops::view(all.buffer, {cs.n}, offset[2]);
    const ops::TensorView residual = ops::view(all.buffer, cs.shapeC(), offset[3]);
    ops::MatmulOptions options = cs.options(GetParam());
    if (cs.bias) options.bias = &bias;
    if (cs.residual) options.residual = &residual;
    vk::Recorder rec(ctx());
    ops::matmul(rec, ops::view(all.buffer, cs.shapeA(), offset[0]),
                ops::view(all.buffer, cs.shapeB(), offset[1]),
                ops::view(all.buffer, cs.shapeC(), offset[4]), options);
    rec.submit();
    const std::vector<float> got = download(ctx(), all);
    EXPECT_TRUE(allClose(std::vector<float>(got.begin() + c0, got.begin() + c0 + numel[4]), want,
                         tolerance));
    int64_t changed = 0;
    for (int64_t i = 0; i < words; ++i)
      if ((i < c0 || i >= c0 + numel[4]) && std::memcmp(&got[i], &contents[i], 4) != 0) ++changed;
    EXPECT_EQ(changed, 0) << "words outside c were written";
  }

  // Shapes that are odd, vec4-friendly (M, N or K % 4 == 0: the texel kernel's RGBA32F paths
  // along k, m or n, with and without a K % 4 tail), 1 wide, or overhanging the row tiles.
  void expectTransposes(bool trans_a, bool trans_b) {
    Rng rng;
    SCOPED_TRACE(rng.describe());
    const Shape3 shapes[] = {{17, 33, 9},  {8, 12, 16}, {1, 7, 5},  {33, 1, 4}, {70, 20, 6},
                             {36, 20, 12}, {20, 12, 7}, {4, 12, 8}, {2, 5, 8}};
    for (const Shape3& s : shapes) {
      Case cs{s.m, s.n, s.k};
      cs.trans_a = trans_a, cs.trans_b = trans_b;
      expectForward(rng, cs);
    }
  }

  static constexpr uint64_t kAligned[4] = {0, 0, 0, 0};
};

TEST_P(MatmulFlagsTest, TransposedAMatchesCpu) {
  expectTransposes(true, false);
}
TEST_P(MatmulFlagsTest, TransposedBMatchesCpu) {
  expectTransposes(false, true);
}
TEST_P(MatmulFlagsTest, BothTransposedMatchCpu) {
  expectTransposes(true, true);
}

// Batches of 3 and 1, with each operand batched, 2-D, or a batch of 1 (broadcast).
TEST_P(MatmulFlagsTest, BatchesAndBroadcastsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case cases[] = {
      {17, 33, 9, 3, 3},
      {17, 33, 9, 3, 0},
      {17, 33, 9, 0, 3},
      {17, 33, 9, 1, 3},
      {8, 12, 16, 3, 1},
      {5, 9, 7, 1, 1},
      {17, 33, 9, 3, 0, true},
      {17, 33, 9, 3, 3, true, true},
      {8, 12, 16, 0, 3, false, true},
      {9, 20, 13, 3, 1, true, false},
  };
  for (const Case& cs : cases) expectForward(rng, cs);
}

// alpha, beta (accumulate, and a scaled C) and the bias, alone and with transposes and batches.
TEST_P(MatmulFlagsTest, EpilogueMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Case cases[] = {{17, 33, 9}, {8, 12, 16}, {17, 33, 9, 3, 0}, {9, 20, 13, 0, 3, true, true}};
  for (Case cs : cases) {
    cs.bias = true;
    expectForward(rng, cs);
    cs.beta = 1.0f;
    expectForward(rng, cs);
    cs.alpha = 0.5f, cs.beta = -0.75f, cs.bias = false;
    expectForward(rng, cs);
  }
}

// A residual added after the bias (and before beta·C): the Texel kernel's epilogue operand
// fetched 16 bytes at a time (N % 4 == 0) and one float at a time (odd N), with a bias, a
// batch, transposes, alpha and beta; the other variants add it in a pass after.
TEST_P(MatmulFlagsTest, ResidualMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Case cases[] = {{17, 33, 9}, {8, 12, 16}, {37, 24, 20, 3, 0}, {9, 20, 13, 0, 3, true, true}};
  for (Case cs : cases) {
    cs.residual = true;
    expectForward(rng, cs);
    cs.bias = true;
    expectForward(rng, cs);
    cs.alpha = 0.5f, cs.beta = 1.0f;
    expectForward(rng, cs);
  }
}

// A product sliced along K on a CPU device (MatchesCpuDeeperThanACpuInvocationLoops) keeps its
// bias, residual, alpha and beta: the first slice adds them, the later ones add to C.
TEST_P(MatmulFlagsTest, DeepProductsKeepTheirFlags) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Case cs{3, 5, 140001};
  cs.residual = cs.bias = true;
  cs.alpha = 0.5f, cs.beta = 1.0f;
  expectForward(rng, cs, kAligned, 1e-4);
  cs.trans_a = true;
  expectForward(rng, cs, kAligned, 1e-4);
}

// Every operand at a 4-byte offset (no binding starts at a tensor), with all the flags on.
TEST_P(MatmulFlagsTest, FlagsAtFourByteAlignedOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const uint64_t unaligned[4] = {4, 8, 12, 4}, mixed[4] = {0, 12, 8, 0};
  Case cs{17, 24, 20, 3, 1};
  cs.bias = true, cs.beta = 1.0f, cs.alpha = 2.0f, cs.residual = true;
  expectForward(rng, cs, unaligned);
  expectForward(rng, cs, mixed);
  cs.trans_a = cs.trans_b = true;
  expectForward(rng, cs, unaligned);
}

// c = f(alpha·op(A)·op(B) + bias) with the value before f in act_pre (or not stored), odd
// shapes, a batch and transposes, against the CPU reference; act_pre at a 4-byte offset too
// (no 16-byte stores of C or pre then).
TEST_P(MatmulFlagsTest, AppliedActivationMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Case cases[] = {{17, 33, 9}, {8, 12, 16}, {37, 24, 20, 3, 0}, {9, 20, 13, 0, 3, true, true}};
  const ops::Activation kinds[] = {ops::Activation::GeluTanh, ops::Activation::LeakyRelu};
  int round = 0;
  for (Case cs : cases)
    for (ops::Activation kind : kinds) {
      cs.alpha = round % 3 ? 0.5f : 1.0f;
      const bool with_bias = round % 3 != 2, with_pre = round % 4 != 3;
      const uint64_t pre_offset = round % 2 ? 4 : 0;
      ++round;
      SCOPED_TRACE(cs.str() + " " + ops::activationName(kind) + (with_bias ? " +bias" : "") +
                   (with_pre ? " pre at " + std::to_string(pre_offset) : " no pre"));
      const auto a = rng.uniform(cs.shapeA().numel()), b = rng.uniform(cs.shapeB().numel());
      const auto bias = rng.uniform(cs.n);
      const int64_t nc = cs.shapeC().numel();
      std::vector<float> want_pre(size_t(nc), 0.0f), want(size_t(nc), 0.0f);
      ops::ref::matmul(a.data(), b.data(), with_bias ? bias.data() : nullptr, want_pre.data(),
                       cs.ref());
      ops::ref::activation(kind, want_pre.data(), want.data(), nc, 0.1f);
      auto ta = upload(ctx(), cs.shapeA(), a), tb = upload(ctx(), cs.shapeB(), b);
      auto tbias = upload(ctx(), {cs.n}, bias);
      auto tc = poisoned(ctx(), cs.shapeC()), tpre = poisoned(ctx(), {nc + 1});
      const ops::TensorView vbias = tbias.view(),
                            vpre = ops::view(tpre.buffer, cs.shapeC(), pre_offset);
      ops::MatmulOptions o = cs.options(GetParam());
      if (with_bias) o.bias = &vbias;
      o.act = kind, o.act_param = 0.1f;
      if (with_pre) o.act_pre = &vpre;
      vk::Recorder rec(ctx());
      ops::matmul(rec, ta.view(), tb.view(), tc.view(), o);
      rec.submit();
      EXPECT_TRUE(allClose(download(ctx(), tc), want, kTolerance)) << "c";
      if (with_pre) {
        EXPECT_TRUE(allClose(download(ctx(), vpre), want_pre, kTolerance)) << "pre";
      }
    }
}

// ---- Backward ----

// Poisoned gradients written in Overwrite mode, and random ones in Accumulate mode, against
// the CPU reference; optionally against finite differences of the forward run on the GPU.
void expectBackward(vk::Context& context, ops::MatmulVariant variant, Rng& rng, const Case& cs,
                    bool gradcheck) {
  SCOPED_TRACE(cs.str());
  auto a = rng.uniform(cs.shapeA().numel()), b = rng.uniform(cs.shapeB().numel());
  auto bias = rng.uniform(cs.n);
  const auto w = rng.uniform(cs.shapeC().numel());  // dc: the loss's weights
  std::vector<float> want_a(a.size()), want_b(b.size()), want_bias(cs.n);
  ops::ref::matmulBackward(a.data(), b.data(), w.data(), want_a.data(), want_b.data(),
                           want_bias.data(), cs.ref());

  auto ta = upload(context, cs.shapeA(), a), tb = upload(context, cs.shapeB(), b);
  auto tdc = upload(context, cs.shapeC(), w);
  auto ga = poisoned(context, cs.shapeA()), gb = poisoned(context, cs.shapeB());
  auto gbias = poisoned(context, {cs.n});
  const auto init_a = rng.uniform(a.size()), init_b = rng.uniform(b.size()),
             init_bias = rng.uniform(cs.n);
  auto acc_a = upload(context, cs.shapeA(), init_a), acc_b = upload(context, cs.shapeB(), init_b);
  auto acc_bias = upload(context, {cs.n}, init_bias);
  const ops::MatmulOptions options = cs.options(variant);
  {
    vk::Recorder rec(context);
    const ops::TensorView va = ga.view(), vb = gb.view(), vbias = gbias.view();
    ops::matmulBackward(rec, ta.view(), tb.view(), tdc.view(), {&va, &vb, &vbias}, options);
    const ops::TensorView aa = acc_a.view(), ab = acc_b.view(), abias = acc_bias.view();
    ops::matmulBackward(rec, ta.view(), tb.view(), tdc.view(), {&aa, &ab, &abias}, options,
                        ops::Write::Accumulate);
    rec.submit();
  }
  const auto grad_a = download(context, ga), grad_b = download(context, gb);
  const auto grad_bias = download(context, gbias);
  EXPECT_TRUE(allClose(grad_a, want_a, kTolerance));
  EXPECT_TRUE(allClose(grad_b, want_b, kTolerance));
  EXPECT_TRUE(allClose(grad_bias, want_bias, kTolerance));
  auto plus = [](std::vector<float> x, const std::vector<float>& y) {
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    return x;
  };
  EXPECT_TRUE(allClose(download(context, acc_a), plus(init_a, want_a), kTolerance));
  EXPECT_TRUE(allClose(download(context, acc_b), plus(init_b, want_b), kTolerance));
  EXPECT_TRUE(allClose(download(context, acc_bias), plus(init_bias, want_bias), kTolerance));
  if (!gradcheck) return;

  auto loss = [&] {
    auto xa = upload(context, cs.shapeA(), a), xb = upload(context, cs.shapeB(), b);
    auto xbias = upload(context, {cs.n}, bias);
    auto out = poisoned(context, cs.shapeC());
    const ops::TensorView vbias = xbias.view();
    ops::MatmulOptions o = options;
    o.bias = &vbias;
    vk::Recorder rec(context);
    ops::matmul(rec, xa.view(), xb.view(), out.view(), o);
    rec.submit();
    return weightedSum(download(context, out), w);
  };
  EXPECT_TRUE(checkGradients(
      loss, {{"a", &a, grad_a}, {"b", &b, grad_b}, {"bias", &bias, grad_bias}}, rng));
}

// 2-D with every transpose pair.
TEST_P(MatmulFlagsTest, BackwardMatchesCpuAndFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Case cs{17, 9, 13};
      cs.trans_a = ta, cs.trans_b = tb, cs.alpha = ta ? 0.5f : 1.0f;
      expectBackward(ctx(), GetParam(), rng, cs, ta && tb);
    }
}

// Batches where a gradient sums over a broadcast operand: folded into one product
// (a (3,M,K) x b (K,N): db) or one accumulating product per batch entry.
TEST_P(MatmulFlagsTest, BatchedBackwardMatchesCpuAndFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case batched[] = {{7, 9, 5, 3, 0},
                          {7, 9, 5, 0, 3},
                          {7, 9, 5, 3, 0, true},
                          {7, 9, 5, 1, 3, false, true},
                          {7, 9, 5, 3, 3, true, true},
                          {5, 4, 3, 1, 1}};
  for (const Case& cs : batched) expectBackward(ctx(), GetParam(), rng, cs, &cs == &batched[2]);
}

INSTANTIATE_TEST_SUITE_P(Variants, MatmulFlagsTest,
                         ::testing::Values(ops::MatmulVariant::Naive, ops::MatmulVariant::Tiled,
                                           ops::MatmulVariant::Texel, ops::MatmulVariant::Vector),
                         [](const auto& info) { return ops::matmulVariantName(info.param); });

// A batch over a shared weight is one taller product; its weight gradient one product too.
TEST_F(VkTest, MatmulFoldsABatchOverASharedWeightIntoOneDispatch) {
  Rng rng;
  auto a = upload(ctx(), {3, 5, 4}, rng.uniform(60)), b = upload(ctx(), {4, 6}, rng.uniform(24));
  auto c = poisoned(ctx(), {3, 5, 6}), gb = poisoned(ctx(), {4, 6});
  vk::Recorder rec(ctx());
  ops::matmul(rec, a.view(), b.view(), c.view());
  EXPECT_EQ(rec.dispatchCount(), 1u);
  const ops::TensorView vgb = gb.view();
  ops::matmulBackward(rec, a.view(), b.view(), c.view(), {nullptr, &vgb, nullptr});
  EXPECT_EQ(rec.dispatchCount(), 2u);
}

// Random a, b and dC for cs, uploaded, with the reference db and dbias (dC's column sums).
struct WeightGradients {
  std::vector<float> b, want_b, want_bias;
  DeviceTensor ta, tb, tdc;
};
WeightGradients weightGradients(vk::Context& context, Rng& rng, const Case& cs) {
  const auto a = rng.uniform(cs.shapeA().numel()), b = rng.uniform(cs.shapeB().numel());
  const auto w = rng.uniform(cs.shapeC().numel());
  std::vector<float> want_b(b.size()), want_bias(size_t(cs.n));
  ops::ref::matmulBackward(a.data(), b.data(), w.data(), nullptr, want_b.data(), want_bias.data(),
                           cs.ref());
  return {b,
          want_b,
          want_bias,
          upload(context, cs.shapeA(), a),
          upload(context, cs.shapeB(), b),
          upload(context, cs.shapeC(), w)};
}

// The Texel variant sums the bias gradient in the weight gradient's dispatch: one dispatch for
// db and dbias, against the CPU reference, with every pair of write modes (dbias_write apart
// from w: a shared bias, an unshared weight). The GPT's shape (a (12,64,128) batch over a
// shared weight: K = 768 once folded, dbias over 768 rows) and odd ones (N off the vec4 grid,
// K % 4 != 0 for the tail loop, M past one row of workgroups); transposed b keeps its own pass.
TEST_F(VkTest, MatmulTexelSumsTheBiasGradientInTheWeightGradientsDispatch) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case cases[] = {
      {64, 384, 128, 12, 0}, {37, 13, 21}, {5, 9, 130, 3, 0}, {7, 9, 5, 0, 0, false, true}};
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.str());
    const WeightGradients g = weightGradients(ctx(), rng, cs);
    const auto &b = g.b, &want_b = g.want_b, &want_bias = g.want_bias;
    const DeviceTensor &ta = g.ta, &tb = g.tb, &tdc = g.tdc;
    const ops::MatmulOptions options = cs.options(ops::MatmulVariant::Texel);
    for (ops::Write wb : {ops::Write::Overwrite, ops::Write::Accumulate})
      for (ops::Write wbias : {ops::Write::Overwrite, ops::Write::Accumulate}) {
        const bool add_b = wb == ops::Write::Accumulate, add_bias = wbias == ops::Write::Accumulate;
        SCOPED_TRACE(testing::Message()
                     << "db " << (add_b ? "+=" : "=") << ", dbias " << (add_bias ? "+=" : "="));
        const auto init_b = rng.uniform(b.size()), init_bias = rng.uniform(size_t(cs.n));
        auto gb = add_b ? upload(ctx(), cs.shapeB(), init_b) : poisoned(ctx(), cs.shapeB());
        auto gbias = add_bias ? upload(ctx(), {cs.n}, init_bias) : poisoned(ctx(), {cs.n});
        const ops::TensorView vgb = gb.view(), vgbias = gbias.view();
        ops::MatmulGrads grads{nullptr, &vgb, &vgbias};
        grads.dbias_write = wbias;
        vk::Recorder rec(ctx());
        ops::matmulBackward(rec, ta.view(), tb.view(), tdc.view(), grads, options, wb);
        EXPECT_EQ(rec.dispatchCount(), cs.trans_b ? 2u : 1u);
        rec.submit();
        std::vector<float> expect_b = want_b, expect_bias = want_bias;
        for (size_t i = 0; add_b && i < expect_b.size(); ++i) expect_b[i] += init_b[i];
        for (size_t i = 0; add_bias && i < expect_bias.size(); ++i) expect_bias[i] += init_bias[i];
        EXPECT_TRUE(allClose(download(ctx(), gb), expect_b, kTolerance)) << "db";
        EXPECT_TRUE(allClose(download(ctx(), gbias), expect_bias, kTolerance)) << "dbias";
      }
  }
}

// A weight gradient deeper than a Texel invocation may loop over on a CPU device (280,001 rows
// of dC) runs in slices of K, and the bias gradient it would have summed in the same dispatch
// comes from a pass of its own; the same values either way.
TEST_F(VkTest, MatmulDeepWeightGradientsSumTheBiasGradientApart) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case cs{280001, 5, 3};
  const WeightGradients g = weightGradients(ctx(), rng, cs);
  const auto &want_b = g.want_b, &want_bias = g.want_bias;
  const DeviceTensor &ta = g.ta, &tb = g.tb, &tdc = g.tdc;
  auto gb = poisoned(ctx(), cs.shapeB()), gbias = poisoned(ctx(), {cs.n});
  const ops::TensorView vgb = gb.view(), vgbias = gbias.view();
  vk::Recorder rec(ctx());
  ops::matmulBackward(rec, ta.view(), tb.view(), tdc.view(), {nullptr, &vgb, &vgbias},
                      cs.options(ops::matmulVariantFor(ctx())));
  rec.submit();
  EXPECT_TRUE(allClose(download(ctx(), gb), want_b, 1e-4)) << "db";
  EXPECT_TRUE(allClose(download(ctx(), gbias), want_bias, 1e-4)) << "dbias";
}

// da = f'(x) ⊙ dC·B̂ᵀ: an activation's backward folded into da's product (Texel: in the
// epilogue; Vector: a pass after), against the CPU references of both, for kinds whose
// derivative reads x, with their parameters; the GPT's MLP shape (a (12,64,512) after GELU
// times W (512,128), on Texel with GELU), odd ones (N off the vec4 grid: x fetched one float
// at a time; M past a tile; 2-D) and a small one on the grid (x fetched 16 bytes at a time).
// One dispatch on Texel.
TEST_F(VkTest, MatmulBackwardFoldsAnActivationGradientIntoDa) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  struct Kind {
    ops::Activation kind;
    float param;
  };
  const Kind kinds[] = {{ops::Activation::GeluTanh, 0.0f},
                        {ops::Activation::GeluErf, 0.0f},
                        {ops::Activation::LeakyRelu, 0.1f},
                        {ops::Activation::Elu, 0.7f}};
  const Case cases[] = {{64, 128, 512, 12, 0}, {37, 13, 21}, {5, 9, 7, 3, 0}, {6, 5, 8, 2, 0}};
  const vk::DeviceInfo& info = ctx().info();
  const bool shuffle = info.subgroup_compute && info.subgroup_shuffle && info.subgroup_size > 0;
  for (ops::MatmulVariant variant : {ops::MatmulVariant::Texel, ops::MatmulVariant::Vector}) {
    if (variant == ops::MatmulVariant::Texel && !shuffle) {
      noteNotRun("the Texel variant", "subgroupShuffle");  // a profile without it: Vector only
      continue;
    }
    for (const Case& cs : cases)
      for (const Kind& k : kinds) {
        // The GPT's shape once, as the GPT runs it (Texel, GELU): the rest are slow on a CPU.
        const bool gpt = &cs == &cases[0];
        if (gpt && (variant != ops::MatmulVariant::Texel || k.kind != ops::Activation::GeluTanh))
          continue;
        SCOPED_TRACE(testing::Message() << ops::matmulVariantName(variant) << " " << cs.str() << " "
                                        << ops::activationName(k.kind));
        const auto a = rng.uniform(cs.shapeA().numel()), b = rng.uniform(cs.shapeB().numel());
        const auto w = rng.uniform(cs.shapeC().numel()), x = rng.normal(a.size());
        std::vector<float> dy(a.size()), want(a.size());
        ops::ref::matmulBackward(a.data(), b.data(), w.data(), dy.data(), nullptr, nullptr,
                                 cs.ref());
        ops::ref::activationBackward(k.kind, x.data(), dy.data(), want.data(), int64_t(want.size()),
                                     k.param);
        auto ta = upload(ctx(), cs.shapeA(), a), tb = upload(ctx(), cs.shapeB(), b);
        auto tdc = upload(ctx(), cs.shapeC(), w), tx = upload(ctx(), cs.shapeA(), x);
        auto ga = poisoned(ctx(), cs.shapeA());
        const ops::TensorView vga = ga.view(), vx = tx.view();
        ops::MatmulGrads grads{&vga};
        grads.da_act_x = &vx, grads.da_act = k.kind, grads.da_act_param = k.param;
        vk::Recorder rec(ctx());
        ops::matmulBackward(rec, ta.view(), tb.view(), tdc.view(), grads, cs.options(variant));
        if (variant == ops::MatmulVariant::Texel) {
          EXPECT_EQ(rec.dispatchCount(), 1u);
        }
        rec.submit();
        EXPECT_TRUE(allClose(download(ctx(), ga), want, kTolerance));
      }
  }
}

// The folded activation gradient's rules: x shaped like a, a not transposed, da overwritten,
// a kind whose derivative reads x; each refused before anything is recorded.
TEST_F(VkTest, MatmulBackwardRejectsAnActivationGradientItCannotFold) {
  Rng rng;
  auto a = upload(ctx(), {6, 4}, rng.uniform(24)), b = upload(ctx(), {4, 3}, rng.uniform(12));
  auto dc = upload(ctx(), {6, 3}, rng.uniform(18)), x = upload(ctx(), {6, 4}, rng.uniform(24));
  auto small = upload(ctx(), {6, 3}, rng.uniform(18)), ga = poisoned(ctx(), {6, 4});
  const ops::TensorView vga = ga.view(), vx = x.view(), vsmall = small.view();
  auto attempt = [&](const ops::TensorView* act_x, ops::Activation kind, ops::Write w,
                     const char* message) {
    ops::MatmulGrads grads{&vga};
    grads.da_act_x = act_x, grads.da_act = kind;
    expectShapeError(
        ctx(),
        [&](vk::Recorder& rec) {
          ops::matmulBackward(rec, a.view(), b.view(), dc.view(), grads, {}, w);
        },
        message);
  };
  attempt(&vsmall, ops::Activation::GeluTanh, ops::Write::Overwrite, "must be shaped like a");
  attempt(&vx, ops::Activation::Tanh, ops::Write::Overwrite, "a kind that reads x (tanh)");
  attempt(&vx, ops::Activation::GeluTanh, ops::Write::Accumulate, "da overwritten");
}

// ---- Split-K (the Vector variant with scratch: a small C over a long K) ----

// Products that split, plain and with each transpose, overwritten (c poisoned) and
// accumulated with alpha (c random), against the fp64 CPU reference: K odd (the scalar load
// paths), K = 4096 with vec4 rows, M and N not multiples of any tile. Each records the partial
// products and their sum (two dispatches); the same inputs give the same bits twice.
TEST_F(VkTest, MatmulSplitKMatchesCpuAndRepeatsBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Shape3 shapes[] = {{37, 23, 5003}, {64, 64, 4096}, {5, 130, 2049}};
  for (const Shape3& s : shapes) {
    ASSERT_GT(ops::matmulSplitK(s.m, s.n, s.k, 1), 1) << s.m << "x" << s.n << "x" << s.k;
    auto scratch = poisoned(ctx(), {ops::matmulScratch(s.m, s.n, s.k, 1)});
    const ops::TensorView vscratch = scratch.view();
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const bool accumulate : {false, true}) {
          Case cs{s.m, s.n, s.k};
          cs.trans_a = ta, cs.trans_b = tb;
          if (accumulate) cs.alpha = 0.5f, cs.beta = 1.0f;
          SCOPED_TRACE(cs.str());
          const auto a = rng.uniform(cs.shapeA().numel()), b = rng.uniform(cs.shapeB().numel());
          const auto init = rng.uniform(s.m * s.n);
          std::vector<float> want = init;
          ops::ref::matmul(a.data(), b.data(), nullptr, want.data(), cs.ref());
          auto da = upload(ctx(), cs.shapeA(), a), db = upload(ctx(), cs.shapeB(), b);
          auto dc = accumulate ? upload(ctx(), cs.shapeC(), init) : poisoned(ctx(), cs.shapeC());
          ops::MatmulOptions options = cs.options(ops::MatmulVariant::Vector);
          options.scratch = &vscratch;
          vk::Recorder rec(ctx());
          ops::matmul(rec, da.view(), db.view(), dc.view(), options);
          EXPECT_EQ(rec.dispatchCount(), 2u);
          rec.submit();
          const std::vector<float> got = download(ctx(), dc);
          EXPECT_TRUE(allClose(got, want, kTolerance));
          if (accumulate || ta || tb) continue;
          auto again = poisoned(ctx(), cs.shapeC());
          vk::Recorder rec2(ctx());
          ops::matmul(rec2, da.view(), db.view(), again.view(), options);
          rec2.submit();
          const std::vector<float> bits = download(ctx(), again);
          EXPECT_EQ(std::memcmp(bits.data(), got.data(), got.size() * 4), 0);
        }
  }
}

// No split where it cannot help or cannot run: C already fills the GPU, K too short, a
// batch, a bias, a beta other than 0 or 1, or scratch too small. Those record one dispatch
// (the bias-less ones) and still match the CPU.
TEST_F(VkTest, MatmulSplitKOnlyWhereItPays) {
  EXPECT_EQ(ops::matmulSplitK(4096, 4096, 4096, 1), 1);
  EXPECT_EQ(ops::matmulSplitK(64, 64, 200, 1), 1);
  EXPECT_EQ(ops::matmulSplitK(64, 64, 4096, 3), 1);
  EXPECT_EQ(ops::matmulScratch(4096, 4096, 4096, 1), 0);
  EXPECT_GT(ops::matmulSplitK(32, 64, 100000, 1), 100);  // a GNN's weight gradient
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Shape3 s{37, 23, 5003};
  auto small = poisoned(ctx(), {ops::matmulScratch(s.m, s.n, s.k, 1) - 1});
  const ops::TensorView vsmall = small.view();
  for (const float beta : {0.0f, -0.5f}) {
    Case cs{s.m, s.n, s.k};
    cs.beta = beta;
    const auto a = rng.uniform(s.m * s.k), b = rng.uniform(s.k * s.n),
               init = rng.uniform(s.m * s.n);
    std::vector<float> want = init;
    ops::ref::matmul(a.data(), b.data(), nullptr, want.data(), cs.ref());
    auto da = upload(ctx(), cs.shapeA(), a), db = upload(ctx(), cs.shapeB(), b);
    auto dc = upload(ctx(), cs.shapeC(), init);
    ops::MatmulOptions options = cs.options(ops::MatmulVariant::Vector);
    options.scratch = &vsmall;
    vk::Recorder rec(ctx());
    ops::matmul(rec, da.view(), db.view(), dc.view(), options);
    EXPECT_EQ(rec.dispatchCount(), 1u);
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), dc), want, kTolerance));
  }
}

// Split-K's scratch may overlap no operand or gradient: the partials would overwrite it.
TEST_F(VkTest, MatmulRejectsAScratchThatOverlapsAnOperandOrGradient) {
  Rng rng;
  auto a = upload(ctx(), {300, 8}, rng.uniform(2400)), b = upload(ctx(), {8, 4}, rng.uniform(32));
  auto dc = upload(ctx(), {300, 4}, rng.uniform(1200));
  auto grads = poisoned(ctx(), {8 * 4 + 4});
  const ops::TensorView db = ops::view(grads.buffer, {8, 4}),
                        dbias = ops::view(grads.buffer, {4}, 8 * 4 * 4),
                        over_dbias = ops::view(grads.buffer, {2}, 8 * 4 * 4 + 4),
                        over_a = ops::view(a.buffer, {16}, 64);
  for (const ops::TensorView* scratch : {&over_dbias, &over_a}) {
    ops::MatmulOptions options;
    options.variant = ops::MatmulVariant::Vector;
    options.scratch = scratch;
    vk::Recorder rec(ctx());
    try {
      ops::matmulBackward(rec, a.view(), b.view(), dc.view(), {nullptr, &db, &dbias}, options,
                          ops::Write::Accumulate);
      ADD_FAILURE() << "no error for a scratch overlapping an operand or gradient";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("scratch"), std::string::npos) << e.what();
    }
    EXPECT_EQ(rec.dispatchCount(), 0u);
  }
}

// Weight gradients over a long K split with matmulBackwardScratch's scratch: a 2-D product,
// a transposed weight (its gradient written transposed), and a batch over a shared weight
// (the batch folded into K), overwritten and accumulated, against the CPU reference.
TEST_F(VkTest, MatmulBackwardSplitsWeightGradients) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case cases[] = {{4099, 40, 24}, {4099, 40, 24, 0, 0, false, true}, {1500, 40, 24, 3, 0}};
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.str());
    const int64_t floats =
        ops::matmulBackwardScratch(cs.shapeA(), cs.shapeB(), cs.trans_a, cs.trans_b, false);
    ASSERT_GT(floats, 0);
    auto scratch = poisoned(ctx(), {floats});
    const ops::TensorView vscratch = scratch.view();
    const auto a = rng.uniform(cs.shapeA().numel()), b = rng.uniform(cs.shapeB().numel());
    const auto w = rng.uniform(cs.shapeC().numel()), init = rng.uniform(b.size());
    std::vector<float> want(b.size());
    ops::ref::matmulBackward(a.data(), b.data(), w.data(), nullptr, want.data(), nullptr, cs.ref());
    auto ta = upload(ctx(), cs.shapeA(), a), tb = upload(ctx(), cs.shapeB(), b);
    auto tdc = upload(ctx(), cs.shapeC(), w);
    auto gb = poisoned(ctx(), cs.shapeB()), acc = upload(ctx(), cs.shapeB(), init);
    ops::MatmulOptions options = cs.options(ops::MatmulVariant::Vector);
    options.scratch = &vscratch;
    vk::Recorder rec(ctx());
    const ops::TensorView vgb = gb.view(), vacc = acc.view();
    ops::matmulBackward(rec, ta.view(), tb.view(), tdc.view(), {nullptr, &vgb, nullptr}, options);
    EXPECT_EQ(rec.dispatchCount(), 2u);
    ops::matmulBackward(rec, ta.view(), tb.view(), tdc.view(), {nullptr, &vacc, nullptr}, options,
                        ops::Write::Accumulate);
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), gb), want, kTolerance));
    for (size_t i = 0; i < want.size(); ++i) want[i] += init[i];
    EXPECT_TRUE(allClose(download(ctx(), acc), want, kTolerance));
  }
}

// Each message names the op and the shapes (transposed ones marked ^T) and nothing is recorded.
TEST_F(VkTest, MatmulRejectsBadFlagsShapesAndGradientsBeforeRecording) {
  Rng rng;
  auto a = upload(ctx(), {4, 8}, rng.uniform(32)), b = upload(ctx(), {8, 2}, rng.uniform(16));
  auto a3 = upload(ctx(), {3, 4, 8}, rng.uniform(96)),
       b2 = upload(ctx(), {2, 8, 2}, rng.uniform(32));
  auto c = poisoned(ctx(), {4, 2}), c3 = poisoned(ctx(), {3, 4, 2}), bias = poisoned(ctx(), {3});
  const ops::TensorView vbias = bias.view(), va = a.view(), vc = c.view();
  vk::Recorder rec(ctx());
  auto expectThrows = [&](auto call, const std::string& text) {
    try {
      call();
      ADD_FAILURE() << "no ShapeError for " << text;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  ops::MatmulOptions trans;
  trans.trans_a = true;
  expectThrows([&] { ops::matmul(rec, a.view(), b.view(), c.view(), trans); },
               "matmul: (4,8)^T x (8,2): inner dims differ (4 vs 8)");
  expectThrows([&] { ops::matmul(rec, a3.view(), b2.view(), c3.view()); },
               "matmul: (3,4,8) x (2,8,2): batch dims differ");
  expectThrows([&] { ops::matmul(rec, a3.view(), b.view(), c.view()); },
               "matmul: (3,4,8) x (8,2) -> (4,2): c must be (3,4,2)");
  ops::MatmulOptions with_bias;
  with_bias.bias = &vbias;
  expectThrows([&] { ops::matmul(rec, a.view(), b.view(), c.view(), with_bias); },
               "matmul: (4,8) x (8,2): bias (3) must be (2)");
  expectThrows([&] { ops::matmul(rec, a.view(), b.view(), va); }, "matmul: (4,8) x (8,2) -> (4,8)");
  expectThrows(
      [&] {
        ops::matmulBackward(rec, a.view(), b.view(), c.view(), {&vc, nullptr, nullptr});
      },
      "matmul backward: da (4,2) must be (4,8)");
  expectThrows(
      [&] {
        ops::matmulBackward(rec, a.view(), b.view(), c.view(), {&va, nullptr, nullptr});
      },
      "matmul backward: da (4,8) overlaps a (4,8)");
  ops::MatmulOptions with_residual;
  with_residual.residual = &vbias;
  expectThrows([&] { ops::matmul(rec, a.view(), b.view(), c.view(), with_residual); },
               "matmul: the residual (3) must be shaped like c (4,2)");
  with_residual.residual = &vc;
  expectThrows([&] { ops::matmul(rec, a.view(), b.view(), c.view(), with_residual); },
               "matmul: c (4,2) overlaps residual (4,2)");
  ops::MatmulOptions activated;
  activated.act_pre = &vbias;
  expectThrows([&] { ops::matmul(rec, a.view(), b.view(), c.view(), activated); },
               "matmul: act_pre without an activation");
  activated.act = ops::Activation::GeluTanh;
  expectThrows([&] { ops::matmul(rec, a.view(), b.view(), c.view(), activated); },
               "matmul: act_pre (3) must be shaped like c (4,2)");
  activated.act_pre = &vc;
  expectThrows([&] { ops::matmul(rec, a.view(), b.view(), c.view(), activated); },
               "matmul: c (4,2) overlaps act_pre (4,2)");
  activated.act_pre = nullptr;
  activated.beta = 1.0f;
  expectThrows([&] { ops::matmul(rec, a.view(), b.view(), c.view(), activated); },
               "matmul: an applied activation (gelu_tanh) needs beta 0 and no residual");
  auto r = poisoned(ctx(), {4, 2});
  const ops::TensorView vr = r.view();
  activated.beta = 0.0f, activated.residual = &vr;
  expectThrows([&] { ops::matmul(rec, a.view(), b.view(), c.view(), activated); },
               "matmul: an applied activation (gelu_tanh) needs beta 0 and no residual");
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

// The residual in the Texel kernel's epilogue gives the bits of the same product followed by
// an add (alpha·acc + bias, then + r, in both), in one dispatch instead of two: at a GPT
// block's projection ((12,64,128) x (128,128) + bias, 16-byte fetches of r) and an odd shape
// (one-float fetches).
TEST_F(VkTest, MatmulResidualInTheTexelEpilogueHasTheBitsOfAnAddAfter) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case cases[] = {{64, 128, 128, 12, 0}, {37, 13, 21}};
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.str());
    auto a = upload(ctx(), cs.shapeA(), rng.uniform(cs.shapeA().numel()));
    auto b = upload(ctx(), cs.shapeB(), rng.uniform(cs.shapeB().numel()));
    auto bias = upload(ctx(), {cs.n}, rng.uniform(cs.n));
    auto r = upload(ctx(), cs.shapeC(), rng.normal(cs.shapeC().numel()));
    auto fused = poisoned(ctx(), cs.shapeC()), separate = poisoned(ctx(), cs.shapeC());
    const ops::TensorView vbias = bias.view(), vr = r.view();
    ops::MatmulOptions o = cs.options(ops::MatmulVariant::Texel);
    o.bias = &vbias;
    vk::Recorder rec(ctx());
    o.residual = &vr;
    ops::matmul(rec, a.view(), b.view(), fused.view(), o);
    EXPECT_EQ(rec.dispatchCount(), 1u);
    o.residual = nullptr;
    ops::matmul(rec, a.view(), b.view(), separate.view(), o);
    ops::add(rec, separate.view(), r.view(), separate.view());
    rec.submit();
    const std::vector<float> got = download(ctx(), fused), want = download(ctx(), separate);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return std::isfinite(v); }));
  }
}
// The activation in the Texel kernel's epilogue gives the bits of the same product followed
// by the activation pass (activate() is shared), in one dispatch instead of two, with the
// value before it stored beside: at a GPT MLP's shape and an odd one.
TEST_F(VkTest, MatmulActivationInTheTexelEpilogueHasTheBitsOfThePassAfter) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case cases[] = {{96, 512, 128}, {37, 13, 21}};
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.str());
    auto a = upload(ctx(), cs.shapeA(), rng.normal(cs.shapeA().numel()));
    auto b = upload(ctx(), cs.shapeB(), rng.uniform(cs.shapeB().numel()));
    auto bias = upload(ctx(), {cs.n}, rng.uniform(cs.n));
    auto fused = poisoned(ctx(), cs.shapeC()), fused_pre = poisoned(ctx(), cs.shapeC());
    auto separate = poisoned(ctx(), cs.shapeC()), separate_pre = poisoned(ctx(), cs.shapeC());
    const ops::TensorView vbias = bias.view(), vpre = fused_pre.view();
    ops::MatmulOptions o = cs.options(ops::MatmulVariant::Texel);
    o.bias = &vbias;
    vk::Recorder rec(ctx());
    o.act = ops::Activation::GeluTanh, o.act_pre = &vpre;
    ops::matmul(rec, a.view(), b.view(), fused.view(), o);
    EXPECT_EQ(rec.dispatchCount(), 1u);
    o.act = std::nullopt, o.act_pre = nullptr;
    ops::matmul(rec, a.view(), b.view(), separate_pre.view(), o);
    ops::activation(rec, ops::Activation::GeluTanh, separate_pre.view(), separate.view());
    rec.submit();
    for (const auto& [got_t, want_t] :
         {std::pair{&fused, &separate}, std::pair{&fused_pre, &separate_pre}}) {
      const std::vector<float> got = download(ctx(), *got_t), want = download(ctx(), *want_t);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
      EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return std::isfinite(v); }));
    }
  }
}

// ---- 16-bit tensors (f16, bf16) on the storage-buffer variants ----

// Each tensor's format: a, b and c; the bias and db take b's (a weight's), the residual, da
// and the activation's x take a's (an activation's), dc takes c's.
struct Formats {
  ops::DType a, b, c;
};
const Formats kFormats[] = {
    {ops::DType::F16, ops::DType::F16, ops::DType::F16},
    {ops::DType::BF16, ops::DType::BF16, ops::DType::BF16},
    {ops::DType::BF16, ops::DType::F32, ops::DType::BF16},  // f32 weights, bf16 activations
    {ops::DType::F16, ops::DType::F16, ops::DType::F32},    // Coopmat's case under Auto
    {ops::DType::F32, ops::DType::F32, ops::DType::BF16},   // only the output 16-bit
};

std::string str(const Formats& f) {
  return std::string(ops::dtypeName(f.a)) + " x " + ops::dtypeName(f.b) + " -> " +
         ops::dtypeName(f.c);
}

// A tensor `shift` elements into a buffer of its own (1: a 16-bit view starting 2 bytes into
// a word), the elements before it NaN, which must stay so.
struct Placed {
  DeviceTensor whole;
  ops::Shape shape;
  int64_t shift = 0;
  ops::TensorView view() const {
    return ops::view(whole.buffer, shape, uint64_t(shift) * ops::dtypeBytes(whole.dtype),
                     whole.dtype);
  }
};
Placed place(vk::Context& context, const ops::Shape& shape, const std::vector<float>* values,
             ops::DType dtype, int64_t shift) {
  const ops::Shape whole_shape{shape.numel() + shift};
  if (!values) return {poisoned(context, whole_shape, dtype), shape, shift};
  std::vector<float> all(size_t(shape.numel() + shift), std::nanf(""));
  std::copy(values->begin(), values->end(), all.begin() + shift);
  return {upload(context, whole_shape, all, dtype), shape, shift};
}

// The elements before the view are untouched (NaN).
::testing::AssertionResult guardKept(vk::Context& context, const Placed& p) {
  const std::vector<float> all = download(context, p.whole);
  for (int64_t i = 0; i < p.shift; ++i)
    if (!std::isnan(all[i])) return ::testing::AssertionFailure() << "element " << i << " written";
  return ::testing::AssertionSuccess();
}

// The tolerances: every input is rounded to its format on the host before the reference sees
// it, so the kernels' f32 products and sums have the f32 variants' error (kTolerance: a
// product of two 16-bit values is even exact in f32) and each output adds one rounding on its
// store, which closeInFormat allows for (u·|want|). Where a value is stored and read back by
// a later pass, that pass's reference reads the stored value (as a training step would).
class MatmulSixteenBitTest : public VkTest,
                             public ::testing::WithParamInterface<ops::MatmulVariant> {
 protected:
  // Whether Auto runs a product of these operands on Coopmat (an f16 one, no bf16 one, a
  // device with cooperative matrices), which reads an f32 operand rounded to fp16.
  bool onCoopmat(std::initializer_list<ops::DType> operands) const {
    if (GetParam() != ops::MatmulVariant::Auto || !ctx().info().coopmat) return false;
    bool half = false;
    for (const ops::DType d : operands) {
      if (d == ops::DType::BF16) return false;
      half = half || d == ops::DType::F16;
    }
    return half;
  }
  // x as the kernel reads it.
  static std::vector<float> asRead(const std::vector<float>& x, bool coopmat) {
    return coopmat ? ops::ref::roundToHalf(x) : x;
  }

  // One forward product in formats f, each tensor `shift` elements into its buffer; c starts
  // random (beta != 0) or poisoned. With `act`: c = act(product + bias), the product stored
  // in act_pre (c's format) where c is 16-bit.
  void expectForward(Rng& rng, const Case& cs, const Formats& f, int64_t shift = 0,
                     std::optional<ops::Activation> act = std::nullopt) {
    SCOPED_TRACE(cs.str() + " " + str(f) + " shift " + std::to_string(shift) +
                 (act ? std::string(" ") + ops::activationName(*act) : ""));
    const auto a = ops::ref::roundTo(f.a, rng.uniform(cs.shapeA().numel()));
    const auto b = ops::ref::roundTo(f.b, rng.uniform(cs.shapeB().numel()));
    const auto bias = ops::ref::roundTo(f.b, rng.uniform(cs.n));
    const auto r = ops::ref::roundTo(f.a, rng.uniform(cs.shapeC().numel()));
    const auto init = ops::ref::roundTo(f.c, rng.uniform(cs.shapeC().numel()));
    std::vector<float> want = init;
    const bool coopmat = onCoopmat({f.a, f.b});
    ops::ref::matmul(asRead(a, coopmat).data(), asRead(b, coopmat).data(),
                     cs.bias ? bias.data() : nullptr, want.data(), cs.ref());
    // Coopmat stores the product (rounded), then adds the residual (ops/matmul.h).
    if (cs.residual && coopmat) want = ops::ref::roundTo(f.c, want);
    if (cs.residual)
      for (size_t i = 0; i < want.size(); ++i) want[i] += r[i];
    const Placed ta = place(ctx(), cs.shapeA(), &a, f.a, shift);
    const Placed tb = place(ctx(), cs.shapeB(), &b, f.b, shift);
    const Placed tbias = place(ctx(), {cs.n}, &bias, f.b, shift);
    const Placed tr = place(ctx(), cs.shapeC(), &r, f.a, shift);
    const Placed tc = place(ctx(), cs.shapeC(), cs.beta != 0.0f ? &init : nullptr, f.c, shift);
    const bool with_pre = act && f.c != ops::DType::F32;
    const Placed tpre = place(ctx(), cs.shapeC(), nullptr, f.c, shift);
    const ops::TensorView vbias = tbias.view(), vr = tr.view(), vpre = tpre.view();
    ops::MatmulOptions o = cs.options(GetParam());
    if (cs.bias) o.bias = &vbias;
    if (cs.residual) o.residual = &vr;
    if (act) o.act = *act, o.act_param = 0.1f;
    if (with_pre) o.act_pre = &vpre;
    vk::Recorder rec(ctx());
    ops::matmul(rec, ta.view(), tb.view(), tc.view(), o);
    rec.submit();
    const std::vector<float> got = download(ctx(), tc.view());
    EXPECT_TRUE(guardKept(ctx(), tc)) << "c";
    if (!act) {
      EXPECT_TRUE(closeInFormat(got, want, f.c, kTolerance));
      return;
    }
    // c = f(the product) in f32 (the product unrounded), or f(the stored pre).
    std::vector<float> pre = want, want_c(want.size());
    if (with_pre) {
      pre = download(ctx(), vpre);
      EXPECT_TRUE(closeInFormat(pre, want, f.c, kTolerance)) << "pre";
      EXPECT_TRUE(guardKept(ctx(), tpre)) << "pre";
    }
    ops::ref::activation(*act, pre.data(), want_c.data(), int64_t(pre.size()), 0.1f);
    EXPECT_TRUE(closeInFormat(got, want_c, f.c, kTolerance)) << "c";
  }

  // The gradients in their formats (Formats), overwritten (poisoned first) and accumulated
  // (onto random ones in their formats). A broadcast operand's gradient whose batch does not
  // fold into one product rounds once per batch entry (ops/matmul.h): up to `batch` roundings,
  // each of a partial sum no larger than about the whole, so 2·batch·u more for those.
  void expectBackward(Rng& rng, const Case& cs, const Formats& f) {
    SCOPED_TRACE(cs.str() + " " + str(f));
    const auto a = ops::ref::roundTo(f.a, rng.uniform(cs.shapeA().numel()));
    const auto b = ops::ref::roundTo(f.b, rng.uniform(cs.shapeB().numel()));
    const auto dc = ops::ref::roundTo(f.c, rng.uniform(cs.shapeC().numel()));
    std::vector<float> want_a(a.size()), want_b(b.size()), want_bias(cs.n);
    ops::ref::matmulBackward(a.data(), b.data(), dc.data(), want_a.data(), want_b.data(),
                             want_bias.data(), cs.ref());
    if (onCoopmat({f.a, f.b, f.c})) {  // the bias's gradient still sums dc as stored
      std::vector<float> unused(cs.n);
      ops::ref::matmulBackward(asRead(a, true).data(), asRead(b, true).data(),
                               asRead(dc, true).data(), want_a.data(), want_b.data(), unused.data(),
                               cs.ref());
    }
    const auto init_a = ops::ref::roundTo(f.a, rng.uniform(a.size()));
    const auto init_b = ops::ref::roundTo(f.b, rng.uniform(b.size()));
    const auto init_bias = ops::ref::roundTo(f.b, rng.uniform(cs.n));
    auto ta = upload(ctx(), cs.shapeA(), a, f.a), tb = upload(ctx(), cs.shapeB(), b, f.b);
    auto tdc = upload(ctx(), cs.shapeC(), dc, f.c);
    auto ga = poisoned(ctx(), cs.shapeA(), f.a), gb = poisoned(ctx(), cs.shapeB(), f.b);
    auto gbias = poisoned(ctx(), {cs.n}, f.b);
    auto acc_a = upload(ctx(), cs.shapeA(), init_a, f.a);
    auto acc_b = upload(ctx(), cs.shapeB(), init_b, f.b);
    auto acc_bias = upload(ctx(), {cs.n}, init_bias, f.b);
    const ops::MatmulOptions options = cs.options(GetParam());
    vk::Recorder rec(ctx());
    const ops::TensorView va = ga.view(), vb = gb.view(), vbias = gbias.view();
    ops::matmulBackward(rec, ta.view(), tb.view(), tdc.view(), {&va, &vb, &vbias}, options);
    const ops::TensorView aa = acc_a.view(), ab = acc_b.view(), abias = acc_bias.view();
    ops::matmulBackward(rec, ta.view(), tb.view(), tdc.view(), {&aa, &ab, &abias}, options,
                        ops::Write::Accumulate);
    rec.submit();
    const auto perEntry = [&](int64_t own_batch, ops::DType dtype) {
      const bool summed = own_batch <= 1 && cs.batch() > 1;
      return summed ? 2.0 * double(cs.batch()) * ops::ref::unitRoundoff(dtype) : 0.0;
    };
    const double tol_a = kTolerance + perEntry(cs.batch_a, f.a);
    const double tol_b = kTolerance + perEntry(cs.batch_b, f.b);
    const auto plus = [](std::vector<float> x, const std::vector<float>& y) {
      for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
      return x;
    };
    EXPECT_TRUE(closeInFormat(download(ctx(), ga), want_a, f.a, tol_a)) << "da";
    EXPECT_TRUE(closeInFormat(download(ctx(), gb), want_b, f.b, tol_b)) << "db";
    EXPECT_TRUE(closeInFormat(download(ctx(), gbias), want_bias, f.b, kTolerance)) << "dbias";
    EXPECT_TRUE(closeInFormat(download(ctx(), acc_a), plus(want_a, init_a), f.a, tol_a));
    EXPECT_TRUE(closeInFormat(download(ctx(), acc_b), plus(want_b, init_b), f.b, tol_b));
    EXPECT_TRUE(
        closeInFormat(download(ctx(), acc_bias), plus(want_bias, init_bias), f.b, kTolerance));
  }
};

// Odd shapes (37x53x29 overhangs every tile, K % 4 != 0), a vec4-friendly one (the f32
// operand of a mixed product takes Vector's vec4 loads beside a 16-bit one), transposes,
// batches and broadcasts, every epilogue (alpha, beta: C read in its format, the bias, the
// residual), and every view 2 bytes into a word once.
TEST_P(MatmulSixteenBitTest, ForwardMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const Formats& f : kFormats) {
    Case plain{37, 53, 29};
    expectForward(rng, plain, f);
    Case vec{8, 12, 16};
    vec.bias = true;
    expectForward(rng, vec, f);
    Case vec_tiles{70, 68, 52};  // four-element loads over several k steps and row tiles
    vec_tiles.bias = true, vec_tiles.beta = 0.5f;
    expectForward(rng, vec_tiles, f);
    Case both{37, 53, 29, 0, 0, true, true};
    both.bias = both.residual = true, both.alpha = 0.5f, both.beta = 1.0f;
    expectForward(rng, both, f);
    Case batched{17, 33, 9, 3, 0, false, true};
    batched.residual = true, batched.beta = -0.75f;
    expectForward(rng, batched, f);
    Case broadcast{9, 20, 13, 0, 3, true, false};
    broadcast.bias = true;
    expectForward(rng, broadcast, f);
    Case shifted{37, 53, 29, 3, 0};
    shifted.bias = shifted.residual = true, shifted.beta = 1.0f;
    expectForward(rng, shifted, f, 1);
  }
}

// c = f(alpha·op(A)·op(B) + bias), with the value before f stored beside in c's format where
// c is 16-bit (the activation then reads that stored value, so c's reference does too).
TEST_P(MatmulSixteenBitTest, AppliedActivationMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const Formats& f : kFormats) {
    Case cs{37, 53, 29};
    cs.bias = true;
    expectForward(rng, cs, f, 0, ops::Activation::GeluTanh);
    Case batched{17, 33, 9, 3, 0, true, false};
    batched.alpha = 0.5f;
    expectForward(rng, batched, f, 1, ops::Activation::LeakyRelu);
  }
}

// da, db and dbias in their formats (db and dbias f32 beside bf16 activations in the mixed
// case), 2-D with transposes, a batch over a shared weight (db one product over the folded
// batch), and a broadcast a whose gradient sums one product per batch entry.
TEST_P(MatmulSixteenBitTest, BackwardMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const Formats& f : kFormats) {
    Case plain{37, 53, 29};
    plain.alpha = 0.5f;
    expectBackward(rng, plain, f);
    expectBackward(rng, {37, 53, 29, 0, 0, true, true}, f);
    expectBackward(rng, {17, 33, 9, 3, 0}, f);
    expectBackward(rng, {7, 9, 5, 1, 3, false, true}, f);
  }
}

// The activation gradient on da (f'(x) ⊙ dC·B̂ᵀ): the product is stored in da's format, then
// scaled by f'(x) and stored again, two roundings of the same element (2u·|want|, so u of the
// largest on top of closeInFormat's u·|want|).
TEST_P(MatmulSixteenBitTest, BackwardActivationGradientMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const Formats& f : kFormats)
    for (const Case& cs : {Case{37, 13, 21}, Case{5, 9, 7, 3, 0}}) {
      SCOPED_TRACE(cs.str() + " " + str(f));
      const auto a = ops::ref::roundTo(f.a, rng.uniform(cs.shapeA().numel()));
      const auto b = ops::ref::roundTo(f.b, rng.uniform(cs.shapeB().numel()));
      const auto dc = ops::ref::roundTo(f.c, rng.uniform(cs.shapeC().numel()));
      const auto x = ops::ref::roundTo(f.a, rng.normal(a.size()));
      std::vector<float> dy(a.size()), want(a.size());
      const bool coopmat = onCoopmat({f.a, f.b, f.c});
      ops::ref::matmulBackward(asRead(a, coopmat).data(), asRead(b, coopmat).data(),
                               asRead(dc, coopmat).data(), dy.data(), nullptr, nullptr, cs.ref());
      ops::ref::activationBackward(ops::Activation::GeluTanh, x.data(), dy.data(), want.data(),
                                   int64_t(want.size()), 0.0f);
      auto ta = upload(ctx(), cs.shapeA(), a, f.a), tb = upload(ctx(), cs.shapeB(), b, f.b);
      auto tdc = upload(ctx(), cs.shapeC(), dc, f.c), tx = upload(ctx(), cs.shapeA(), x, f.a);
      auto ga = poisoned(ctx(), cs.shapeA(), f.a);
      const ops::TensorView vga = ga.view(), vx = tx.view();
      ops::MatmulGrads grads{&vga};
      grads.da_act_x = &vx, grads.da_act = ops::Activation::GeluTanh;
      vk::Recorder rec(ctx());
      ops::matmulBackward(rec, ta.view(), tb.view(), tdc.view(), grads, cs.options(GetParam()));
      rec.submit();
      EXPECT_TRUE(
          closeInFormat(download(ctx(), ga), want, f.a, kTolerance + ops::ref::unitRoundoff(f.a)));
    }
}

INSTANTIATE_TEST_SUITE_P(Variants, MatmulSixteenBitTest,
                         ::testing::Values(ops::MatmulVariant::Auto, ops::MatmulVariant::Naive,
                                           ops::MatmulVariant::Tiled, ops::MatmulVariant::Vector,
                                           ops::MatmulVariant::Texel),
                         [](const auto& info) { return ops::matmulVariantName(info.param); });

// Split-K with 16-bit tensors: the partial products in f32 scratch and their sum stored once
// into a 16-bit C (overwritten, and accumulated with alpha); a residual with a 16-bit C or
// itself 16-bit keeps the product whole, added in the kernel's epilogue with one rounding.
TEST_F(VkTest, MatmulSplitKWithSixteenBitTensorsMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Shape3 s{37, 23, 5003};
  auto scratch = poisoned(ctx(), {ops::matmulScratch(s.m, s.n, s.k, 1)});
  const ops::TensorView vscratch = scratch.view();
  for (const Formats& f : {kFormats[1], kFormats[2]})
    for (const bool accumulate : {false, true})
      for (const bool residual : {false, true}) {
        Case cs{s.m, s.n, s.k};
        if (accumulate) cs.alpha = 0.5f, cs.beta = 1.0f;
        cs.residual = residual;
        SCOPED_TRACE(cs.str() + " " + str(f));
        const auto a = ops::ref::roundTo(f.a, rng.uniform(s.m * s.k));
        const auto b = ops::ref::roundTo(f.b, rng.uniform(s.k * s.n));
        const auto init = ops::ref::roundTo(f.c, rng.uniform(s.m * s.n));
        const auto r = ops::ref::roundTo(f.a, rng.uniform(s.m * s.n));
        std::vector<float> want = init;
        ops::ref::matmul(a.data(), b.data(), nullptr, want.data(), cs.ref());
        if (residual)
          for (size_t i = 0; i < want.size(); ++i) want[i] += r[i];
        auto ta = upload(ctx(), cs.shapeA(), a, f.a), tb = upload(ctx(), cs.shapeB(), b, f.b);
        auto tr = upload(ctx(), cs.shapeC(), r, f.a);
        auto tc =
            accumulate ? upload(ctx(), cs.shapeC(), init, f.c) : poisoned(ctx(), cs.shapeC(), f.c);
        const ops::TensorView vr = tr.view();
        ops::MatmulOptions options = cs.options(ops::MatmulVariant::Vector);
        options.scratch = &vscratch;
        if (residual) options.residual = &vr;
        vk::Recorder rec(ctx());
        ops::matmul(rec, ta.view(), tb.view(), tc.view(), options);
        EXPECT_EQ(rec.dispatchCount(), residual ? 1u : 2u);
        rec.submit();
        EXPECT_TRUE(closeInFormat(download(ctx(), tc), want, f.c, kTolerance));
      }
}

}  // namespace
}  // namespace vkgrad::test

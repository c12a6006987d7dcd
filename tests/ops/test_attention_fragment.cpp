// The fragment (tensor-core) attention kernels against the fp64 CPU reference: O, LSE, dQ, dK
// and dV at odd lengths (edge tiles), both masks and head dims 32, 64 and 128, for the native
// kernels (Fragment) and the same kernels on the emulated fragment layer (FragmentEmulated:
// plain GLSL, scrambled fragments, virtual warps of 32), which lavapipe runs in CI. On a
// device without what a build needs, each test checks the refusal instead.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "ops/attention_check.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/attention.h"
#include "vkgrad/ops/reference/attention.h"
#include "vkgrad/ops/reference/half.h"

namespace vkgrad::test {
namespace {

using ops::AttentionOptions;
using ops::AttentionVariant;
using ops::DType;
using ops::Shape;
using ops::Write;

// Inputs are rounded to fp16 before the reference sees them, so the kernels' narrowing of Q,
// K, V and dO is exact and their products are exact in fp32. What is left: P (in [0, 1]) and
// dS rounded to fp16 before the products that take them, a relative 2^-11 per term, and fp32
// sums. Measured on lavapipe (normalised by each output's largest element; dQ and dK by dV's):
// O, dV, dQ and dK up to 4.2e-4, LSE up to 4e-5 (its sum adds the rounded P). 2e-3 leaves
// room and still fails a dropped 16x16 fragment, a wrong mask or a guessed fragment layout by
// orders of magnitude (a kernel that scaled O's rows by a guessed layout was off by 0.67).
constexpr double kTolerance = 2e-3;

struct Case {
  int64_t b, h, tq, tk, d;
  bool causal;
};

std::string describe(const Case& c) {
  return "B " + std::to_string(c.b) + " H " + std::to_string(c.h) + " Tq " + std::to_string(c.tq) +
         " Tk " + std::to_string(c.tk) + " D " + std::to_string(c.d) + (c.causal ? " causal" : "");
}

constexpr const char* kMissing = "cooperative matrices (VK_NV_cooperative_matrix";
constexpr const char* kMissingEmulated = "shaderFloat16 (fp16 arithmetic)";

class AttentionFragmentTest : public VkTest, public testing::WithParamInterface<AttentionVariant> {
 protected:
  AttentionVariant variant() const { return GetParam(); }
  bool supported() const {
    const vk::DeviceInfo& info = ctx().info();
    return variant() == AttentionVariant::FragmentEmulated ? info.fp16 && info.storage_16bit
                                                           : info.coopmat;
  }
  const char* missing() const {
    return variant() == AttentionVariant::FragmentEmulated ? kMissingEmulated : kMissing;
  }

  // A check (ops/attention_check.h) on fp16-exact random data where the device runs the
  // variant, else the refusal naming what the device lacks.
  template <typename Check>
  void runOrRefused(const Check& check) {
    if (!supported()) {
      expectError(
          ctx(), [&](vk::Recorder& rec) { check.record(rec); }, missing());
      return;
    }
    check.run();
  }

  // Forward and backward, the tensors stored in `dtype`, against the reference. Gradients
  // start as random values when accumulating, else poisoned.
  void check(const Case& c, Rng& rng, DType dtype = DType::F32, Write w = Write::Overwrite) {
    SCOPED_TRACE(describe(c) + " " + ops::dtypeName(dtype));
    runOrRefused(AttentionCheck(ctx(), rng, {c.b, c.h, c.h, c.tq, c.tk, c.d, c.causal},
                                {variant(), kTolerance, dtype, /*half_exact=*/true, w}));
  }
};

// T = 37: full tiles and an edge tile at 16 or 32 rows a tile; both masks. One test per head
// dim: each compiles its three kernels (on llvmpipe about 2 s each, then cached).
TEST_P(AttentionFragmentTest, MatchesReferenceAtHeadDim32) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (bool causal : {false, true}) check({1, 2, 37, 37, 32, causal}, rng);
}

TEST_P(AttentionFragmentTest, MatchesReferenceAtHeadDim64) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (bool causal : {false, true}) check({1, 2, 37, 37, 64, causal}, rng);
}

TEST_P(AttentionFragmentTest, MatchesReferenceAtHeadDim128) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (bool causal : {false, true}) check({1, 2, 37, 37, 128, causal}, rng);
}

// T = 70 and cross-attention both ways: causal with Tq > Tk leaves the first queries with no
// key at all (zero output, -inf LSE, zero gradients); Tq < Tk skips whole key tiles (causal).
TEST_P(AttentionFragmentTest, MatchesReferenceAtOtherLengths) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (bool causal : {false, true}) {
    check({2, 1, 70, 70, 32, causal}, rng);
    check({1, 1, 70, 21, 64, causal}, rng);
    check({1, 1, 19, 70, 32, causal}, rng);
    check({1, 1, 1, 5, 32, causal}, rng);  // one query: a tile of 15 padded rows
  }
}

// fp16 tensors (the precision the fragments take without rounding), and accumulated gradients.
TEST_P(AttentionFragmentTest, TakesHalfTensorsAndAccumulates) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  check({1, 2, 37, 37, 64, true}, rng, DType::F16);
  check({1, 1, 33, 45, 32, false}, rng, DType::F32, Write::Accumulate);
}

// Q, K and V read straight out of one fused projection (B, T, 3·H·D) and the gradients
// written into one such buffer: token rows 3·H·D apart, heads side by side.
TEST_P(AttentionFragmentTest, ReadsAndWritesStridedFusedQkv) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  runOrRefused(FusedQkvCheck(ctx(), rng, {1, 2, 2, 37, 37, 32, true},
                             {variant(), kTolerance, DType::F32, /*half_exact=*/true}));
}

// What the fragments cannot take is refused before recording, naming it.
TEST_P(AttentionFragmentTest, RefusesHeadDimsAndBf16) {
  Rng rng;
  auto refused = [&](int64_t d, DType dtype, const char* message) {
    const Shape s{1, 5, 1, d};
    auto q = upload(ctx(), s, rng.normal(5 * d), dtype);
    auto o = poisoned(ctx(), s), lse = poisoned(ctx(), {1, 1, 5});
    auto record = [&](vk::Recorder& rec) {
      ops::attention(rec, {q.view()}, {q.view()}, {q.view()}, {o.view()}, lse.view(),
                     {false, 0.0f, variant()});
    };
    // Shapes and formats are checked first, on any device.
    expectShapeError(ctx(), record, message);
  };
  refused(40, DType::F32, "head dim from 16 to 128");
  refused(256, DType::F32, "head dim from 16 to 128");
  refused(32, DType::BF16, "f32 or f16");
}

INSTANTIATE_TEST_SUITE_P(Variants, AttentionFragmentTest,
                         testing::Values(AttentionVariant::Fragment,
                                         AttentionVariant::FragmentEmulated),
                         [](const testing::TestParamInfo<AttentionVariant>& info) {
                           return info.param == AttentionVariant::Fragment
                                      ? std::string("Native")
                                      : std::string("Emulated");
                         });

}  // namespace
}  // namespace vkgrad::test

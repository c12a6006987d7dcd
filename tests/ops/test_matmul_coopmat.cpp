// The Coopmat matmul (cooperative matrices, fp16 inputs, fp32 sums) against the fp64 CPU
// reference, and its refusals; f16 operands on the other variants. Each test runs for the
// native kernel (Coopmat) and for the same kernel on the emulated fragment layer
// (CoopmatEmulated: plain GLSL, scrambled fragments, virtual warps of 32), which lavapipe runs
// in CI. On a device without what a build needs (cooperative matrices; fp16 arithmetic and
// 16-bit storage) every test checks the refusal instead: the variant must fail before
// recording, naming what is missing, never run a wrong kernel.
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/matmul.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/matmul.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

// Inputs are rounded to fp16 on the host before the reference sees them, so the kernel's
// narrowing is exact and every product of two halves is exact in fp32: what is left is fp32
// summation in the kernel's order against the reference's fp64, ~sqrt(K)·2^-24 of the
// partial sums (as for the fp32 variants, test_matmul.cpp), far below 1e-5 at K <= 1000. A
// dropped or doubled 16x16 fragment is off by more than 1e-2.
constexpr double kTolerance = 1e-5;

using ops::MatmulVariant;

// One operand in a buffer of its own, stored f32 or f16, `lead` bytes into the buffer (a
// multiple of 4: an f16 view at lead 4 starts two halves into its binding, so no quad of it
// is aligned; at lead 16 every row can be read four at a time).
struct Stored {
  vk::Buffer buffer;
  ops::TensorView view;
};
Stored store(vk::Context& context, ops::Shape shape, const std::vector<float>& values, bool half,
             uint64_t lead = 0) {
  const uint64_t bytes = values.size() * (half ? 2 : 4);
  Stored s{context.allocator().allocate(lead + bytes + 16), {}};
  std::vector<uint8_t> raw(lead + bytes + 16, 0xff);
  if (half) {
    const std::vector<uint16_t> h = ops::ref::toHalf(values);
    std::memcpy(raw.data() + lead, h.data(), bytes);
  } else {
    std::memcpy(raw.data() + lead, values.data(), bytes);
  }
  context.staging().upload(s.buffer, 0, raw.data(), raw.size());
  s.view = ops::view(s.buffer, shape, lead, half ? ops::DType::F16 : ops::DType::F32);
  return s;
}

// A product checked against the reference: shapes as stored (transposed where asked).
struct Case {
  int64_t m, n, k;
  bool trans_a = false, trans_b = false;
  bool half = false;  // a and b stored as f16
  uint64_t lead = 0;  // bytes before a and b in their buffers
  int64_t batch = 1, batch_a = 1, batch_b = 1;
  bool bias = false;
  float alpha = 1.0f, beta = 0.0f;
  ops::MatmulTiling tiling;
};

ops::Shape stored(int64_t batch, int64_t rows, int64_t cols, bool trans) {
  if (batch == 1) return trans ? ops::Shape{cols, rows} : ops::Shape{rows, cols};
  return trans ? ops::Shape{batch, cols, rows} : ops::Shape{batch, rows, cols};
}

constexpr const char* kMissing = "cooperative matrices (VK_NV_cooperative_matrix";
constexpr const char* kMissingEmulated = "variant needs shaderFloat16 (fp16 arithmetic)";

class MatmulCoopmatTest : public VkTest, public testing::WithParamInterface<MatmulVariant> {
 protected:
  MatmulVariant variant() const { return GetParam(); }
  bool emulated() const { return variant() == MatmulVariant::CoopmatEmulated; }
  bool supported() const {
    const vk::DeviceInfo& info = ctx().info();
    return emulated() ? info.fp16 && info.storage_16bit : info.coopmat;
  }
  const char* missing() const { return emulated() ? kMissingEmulated : kMissing; }
  // Whether the device can run a tiling (coopmat.comp's needs: two buffers of each fp16 tile
  // with rows padded by 8 halves, a 16x16 fp32 fragment per warp, and emulated 512 halves per
  // warp for the fragment layer; warps of 32 lanes emulated, of a subgroup natively).
  bool fits(const ops::MatmulTiling& t) const {
    const vk::DeviceInfo& info = ctx().info();
    const uint64_t bm = t.wy * t.tm * 16, bn = t.wx * t.tn * 16, warps = t.wx * t.wy;
    const uint64_t shared =
        4 * (bm * (t.bk + 8) + t.bk * (bn + 8)) + warps * (1024 + (emulated() ? 1024 : 0));
    const uint64_t threads = warps * (emulated() ? 32 : info.subgroup_size);
    return shared <= info.max_shared_memory && threads <= info.max_workgroup_invocations;
  }

  void expectMatches(Rng& rng, const Case& cs) {
    SCOPED_TRACE(testing::Message()
                 << "m=" << cs.m << " n=" << cs.n << " k=" << cs.k << " transA " << cs.trans_a
                 << " transB " << cs.trans_b << (cs.half ? " f16" : " f32") << " lead " << cs.lead
                 << " batch " << cs.batch_a << "/" << cs.batch_b << " tiling "
                 << ops::matmulTilingText(cs.tiling));
    const int64_t out_batch = cs.batch_a > 1 || cs.batch_b > 1 ? cs.batch : 1;
    const ops::Shape a_shape = stored(cs.batch_a, cs.m, cs.k, cs.trans_a);
    const ops::Shape b_shape = stored(cs.batch_b, cs.k, cs.n, cs.trans_b);
    const ops::Shape c_shape =
        out_batch > 1 ? ops::Shape{out_batch, cs.m, cs.n} : ops::Shape{cs.m, cs.n};
    const std::vector<float> a = ops::ref::roundToHalf(rng.uniform(a_shape.numel()));
    const std::vector<float> b = ops::ref::roundToHalf(rng.uniform(b_shape.numel()));
    const std::vector<float> bias = rng.uniform(cs.n);
    std::vector<float> c0 = rng.uniform(c_shape.numel());
    std::vector<float> want = c0;
    ops::ref::MatmulArgs args;
    args.m = cs.m, args.n = cs.n, args.k = cs.k;
    args.batch = out_batch, args.batch_a = cs.batch_a, args.batch_b = cs.batch_b;
    args.trans_a = cs.trans_a, args.trans_b = cs.trans_b;
    args.alpha = cs.alpha, args.beta = cs.beta;
    ops::ref::matmul(a.data(), b.data(), cs.bias ? bias.data() : nullptr, want.data(), args);

    const Stored da = store(ctx(), a_shape, a, cs.half, cs.lead);
    const Stored db = store(ctx(), b_shape, b, cs.half, cs.lead);
    DeviceTensor dbias = upload(ctx(), {cs.n}, bias);
    DeviceTensor dc = cs.beta != 0.0f ? upload(ctx(), c_shape, c0) : poisoned(ctx(), c_shape);
    ops::MatmulOptions options;
    options.variant = variant();
    options.trans_a = cs.trans_a, options.trans_b = cs.trans_b;
    options.alpha = cs.alpha, options.beta = cs.beta;
    options.tiling = cs.tiling;
    const ops::TensorView bias_view = dbias.view();
    if (cs.bias) options.bias = &bias_view;
    vk::Recorder rec(ctx());
    ops::matmul(rec, da.view, db.view, dc.view(), options);
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), dc), want, kTolerance));
  }

  // On a device without what the build needs: the variant is refused before recording.
  void expectRefused() {
    auto a = poisoned(ctx(), {4, 8}), b = poisoned(ctx(), {8, 2}), c = poisoned(ctx(), {4, 2});
    expectError(
        ctx(),
        [&](vk::Recorder& rec) { ops::matmul(rec, a.view(), b.view(), c.view(), variant()); },
        missing());
  }
};

// Shapes that overhang every tile, K not a multiple of 16 or 4, 1-wide ones, with both
// layouts of each operand, fp32 and fp16 storage, and views that start mid-word.
TEST_P(MatmulCoopmatTest, MatchesCpuOnOddShapesLayoutsAndStorage) {
  if (!supported()) return expectRefused();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // The emulated build is slow on lavapipe (two workgroup barriers per fragment product, and
  // a pipeline compile per layout): it leaves out the two large shapes for ones that still take
  // several steps along K, and takes one storage per layout and shape, each layout meeting
  // both storages over the shapes.
  const int64_t shapes[][3] = {{130, 129, 37}, {67, 260, 64},   {1, 5, 3},
                               {33, 1, 4},     {256, 256, 256}, {200, 72, 1000}};
  const int64_t emulated_shapes[][3] = {{130, 129, 37}, {67, 260, 64}, {1, 5, 3},
                                        {33, 1, 4},     {70, 40, 200}, {45, 90, 130}};
  for (int i = 0; i < 6; ++i) {
    const int64_t* s = emulated() ? emulated_shapes[i] : shapes[i];
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const bool half : {false, true}) {
          if (emulated() && half != ((trans_a != trans_b) != (i % 2 == 1))) continue;
          Case cs{s[0], s[1], s[2], trans_a, trans_b, half};
          expectMatches(rng, cs);
        }
  }
  // 4 bytes into a binding no quad of an f16 view is aligned (scalar reads); 16 bytes in,
  // every row of either kind is (four at a time).
  for (const uint64_t lead : {uint64_t(4), uint64_t(16)})
    for (const bool trans : {false, true})
      for (const bool half : {false, true}) {
        Case cs{96, 80, 48, trans, !trans, half, lead};
        expectMatches(rng, cs);
      }
}

TEST_P(MatmulCoopmatTest, AppliesAlphaBetaBiasAndBatches) {
  if (!supported()) return expectRefused();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const bool half : {false, true}) {
    Case epilogue{70, 90, 40, false, false, half};
    epilogue.bias = true, epilogue.alpha = 0.5f, epilogue.beta = 1.5f;
    expectMatches(rng, epilogue);
  }
  // A batch over a shared weight (folded into one taller product) and a full batch.
  for (const bool half : {false, true}) {
    Case shared{37, 48, 33, false, false, half};
    shared.batch = shared.batch_a = 3;
    expectMatches(rng, shared);
  }
  Case full{37, 48, 33, true, false, true};
  full.batch = full.batch_a = full.batch_b = 4;
  expectMatches(rng, full);
}

// Every tiling the GPU sweep tries (bench/gpu/coopmat.sh), plain and transposed, where the
// device holds it, else refused naming the tiling. lavapipe's 32 KiB of shared memory holds
// only the small ones, so smaller tilings follow that take every other shape the sweep's do
// (4x4 and 4x2 fragments per warp, 4x2 warps, bk 16, 32 and 64) within it.
TEST_P(MatmulCoopmatTest, TilingsMatchCpu) {
  if (!supported()) return expectRefused();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const ops::MatmulTiling tilings[] = {{4, 2, 32, 4, 2}, {2, 2, 32, 4, 4}, {4, 2, 16, 4, 4},
                                       {2, 4, 16, 4, 4}, {2, 2, 64, 2, 2}, {2, 2, 32, 2, 2},
                                       {4, 2, 32, 2, 2}, {2, 2, 16, 4, 2}, {2, 2, 16, 4, 4},
                                       {4, 2, 16, 2, 2}, {2, 2, 64, 1, 1}};
  for (const ops::MatmulTiling& tiling : tilings)
    for (const bool trans : {false, true}) {
      Case cs{150, 270, 100, trans, trans, !trans};
      cs.tiling = tiling;
      if (fits(tiling)) {
        expectMatches(rng, cs);
        continue;
      }
      auto a = poisoned(ctx(), {4, 8}), b = poisoned(ctx(), {8, 2}), c = poisoned(ctx(), {4, 2});
      ops::MatmulOptions options;
      options.variant = variant(), options.tiling = tiling;
      expectError(
          ctx(),
          [&](vk::Recorder& rec) { ops::matmul(rec, a.view(), b.view(), c.view(), options); },
          "coopmat tiling " + ops::matmulTilingText(tiling));
    }
}

// The gradients through matmulBackward: dA = dC·op(B)ᵀ and dB = op(A)ᵀ·dC run as Coopmat
// products too (dC is narrowed to fp16 in the kernel, so the test rounds it first), with a
// and b stored f32 or f16 (the gradients are f32 either way).
TEST_P(MatmulCoopmatTest, BackwardMatchesCpu) {
  if (!supported()) return expectRefused();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t m = 75, n = 66, k = 130;
  for (const bool trans_a : {false, true})
    for (const bool trans_b : {false, true})
      for (const bool half : {false, true}) {
        // Emulated, one storage per layout (the odd-shape test's reason), both over the four.
        if (emulated() && half != (trans_a != trans_b)) continue;
        SCOPED_TRACE(testing::Message()
                     << "transA " << trans_a << " transB " << trans_b << (half ? " f16" : " f32"));
        const ops::Shape a_shape = stored(1, m, k, trans_a), b_shape = stored(1, k, n, trans_b);
        const std::vector<float> a = ops::ref::roundToHalf(rng.uniform(m * k)),
                                 b = ops::ref::roundToHalf(rng.uniform(k * n)),
                                 dc = ops::ref::roundToHalf(rng.uniform(m * n));
        std::vector<float> want_da(m * k), want_db(k * n), want_dbias(n);
        ops::ref::MatmulArgs args;
        args.m = m, args.n = n, args.k = k, args.trans_a = trans_a, args.trans_b = trans_b;
        ops::ref::matmulBackward(a.data(), b.data(), dc.data(), want_da.data(), want_db.data(),
                                 want_dbias.data(), args);
        const Stored a_in = store(ctx(), a_shape, a, half), b_in = store(ctx(), b_shape, b, half);
        DeviceTensor ddc = upload(ctx(), {m, n}, dc);
        DeviceTensor da = poisoned(ctx(), a_shape), db = poisoned(ctx(), b_shape),
                     dbias = poisoned(ctx(), {n});
        const ops::TensorView vda = da.view(), vdb = db.view(), vdbias = dbias.view();
        ops::MatmulOptions forward;
        forward.variant = variant();
        forward.trans_a = trans_a, forward.trans_b = trans_b;
        vk::Recorder rec(ctx());
        ops::matmulBackward(rec, a_in.view, b_in.view, ddc.view(),
                            {.da = &vda, .db = &vdb, .dbias = &vdbias}, forward);
        rec.submit();
        EXPECT_TRUE(allClose(download(ctx(), da), want_da, kTolerance));
        EXPECT_TRUE(allClose(download(ctx(), db), want_db, kTolerance));
        EXPECT_TRUE(allClose(download(ctx(), dbias), want_dbias, kTolerance));
      }
}

// f16 operands go to Coopmat under Auto where the device has it (b, f32 here, then rounded
// to fp16 too), and run on every other variant as they are (Auto's choice without
// cooperative matrices; never the emulated build). Coopmat's C may be f32, f16 or bf16; its
// operands f32 or f16.
TEST_P(MatmulCoopmatTest, F16OperandsRunOnCoopmatOrAStorageVariant) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t m = 37, n = 53, k = 29;
  const std::vector<float> a = ops::ref::roundToHalf(rng.uniform(m * k)), b = rng.uniform(k * n);
  const Stored ta = store(ctx(), {m, k}, a, true);
  DeviceTensor tb = upload(ctx(), {k, n}, b);
  EXPECT_NE(ops::matmulVariantFor(ctx()), MatmulVariant::CoopmatEmulated);
  // Auto and the other variants once, with the native build's parameter.
  const std::initializer_list<MatmulVariant> others = {MatmulVariant::Auto, MatmulVariant::Naive,
                                                       MatmulVariant::Tiled, MatmulVariant::Vector,
                                                       MatmulVariant::Texel};
  for (const MatmulVariant v : emulated() ? std::initializer_list<MatmulVariant>{} : others) {
    SCOPED_TRACE(ops::matmulVariantName(v));
    const bool coopmat = v == MatmulVariant::Auto && ctx().info().coopmat;
    const std::vector<float> b_seen = coopmat ? ops::ref::roundToHalf(b) : b;
    std::vector<float> want(m * n);
    ops::ref::matmul(a.data(), b_seen.data(), want.data(), m, n, k);
    DeviceTensor tc = poisoned(ctx(), {m, n});
    vk::Recorder rec(ctx());
    ops::matmul(rec, ta.view, tb.view(), tc.view(), v);
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), tc), want, kTolerance));
  }
  // C in f16 or bf16 too (one rounding on the store), or refused on a device without what
  // the build needs; a bf16 operand is refused on any device, before recording.
  for (const ops::DType c_dtype : {ops::DType::F16, ops::DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(c_dtype));
    DeviceTensor tc = poisoned(ctx(), {m, n}, c_dtype);
    if (!supported()) {
      expectError(
          ctx(),
          [&](vk::Recorder& rec) { ops::matmul(rec, ta.view, tb.view(), tc.view(), variant()); },
          missing());
      continue;
    }
    std::vector<float> want(m * n);
    ops::ref::matmul(a.data(), ops::ref::roundToHalf(b).data(), want.data(), m, n, k);
    vk::Recorder rec(ctx());
    ops::matmul(rec, ta.view, tb.view(), tc.view(), variant());
    rec.submit();
    EXPECT_TRUE(closeInFormat(download(ctx(), tc), want, c_dtype, kTolerance));
  }
  DeviceTensor b16 =
      upload(ctx(), {k, n}, ops::ref::roundTo(ops::DType::BF16, b), ops::DType::BF16);
  DeviceTensor tc = poisoned(ctx(), {m, n});
  vk::Recorder rec(ctx());
  EXPECT_THROW(ops::matmul(rec, ta.view, b16.view(), tc.view(), variant()), ShapeError);
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

TEST_P(MatmulCoopmatTest, RejectsATilingTheDeviceCannotRun) {
  if (!supported()) return expectRefused();
  auto a = poisoned(ctx(), {4, 8}), b = poisoned(ctx(), {8, 2}), c = poisoned(ctx(), {4, 2});
  ops::MatmulOptions options;
  options.variant = variant();
  // bk not a multiple of 16; too many fragments (and only that: 22 KB, 32 invocations); too
  // much shared memory; too many subgroups (and too much shared memory).
  for (const ops::MatmulTiling tiling :
       {ops::MatmulTiling{2, 2, 24, 2, 2}, ops::MatmulTiling{1, 1, 16, 8, 8},
        ops::MatmulTiling{4, 4, 64, 4, 2}, ops::MatmulTiling{64, 2, 32, 1, 1}}) {
    options.tiling = tiling;
    expectError(
        ctx(), [&](vk::Recorder& rec) { ops::matmul(rec, a.view(), b.view(), c.view(), options); },
        "coopmat tiling " + ops::matmulTilingText(tiling));
  }
}

INSTANTIATE_TEST_SUITE_P(Builds, MatmulCoopmatTest,
                         testing::Values(MatmulVariant::Coopmat, MatmulVariant::CoopmatEmulated),
                         [](const testing::TestParamInfo<MatmulVariant>& info) {
                           return std::string(info.param == MatmulVariant::Coopmat ? "native"
                                                                                   : "emulated");
                         });

// Auto with fp16 products allowed (a Context of its own, validation on): Coopmat where the
// device has it, so a product matches the reference of its fp16-rounded inputs (and misses
// the fp32 one by ~3e-4); a product that split-K would split (a 64x64 C over K = 8192) goes
// to Vector's split and keeps fp32 accuracy; f16 operands go to Coopmat. Without cooperative
// matrices nothing changes: fp32 results.
TEST(MatmulCoopmatAuto, Fp16ProductsTakeCoopmatAndHandSmallOnesToSplitK) {
  vk::ContextOptions options;
  options.validation = true;
  options.fp16_matmul = true;
  vk::Context context(options);
  const bool coopmat = context.info().coopmat;
  EXPECT_EQ(ops::matmulVariantFor(context) == MatmulVariant::Coopmat, coopmat);
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const auto product = [&](int64_t m, int64_t n, int64_t k, bool half) {
    const std::vector<float> a = rng.uniform(m * k), b = rng.uniform(k * n);
    const std::vector<float> a16 = ops::ref::roundToHalf(a), b16 = ops::ref::roundToHalf(b);
    const bool rounded = half || (coopmat && ops::matmulSplitK(m, n, k, 1) == 1);
    std::vector<float> want(m * n);
    ops::ref::matmul(rounded ? a16.data() : a.data(), rounded ? b16.data() : b.data(), want.data(),
                     m, n, k);
    const Stored da = store(context, {m, k}, half ? a16 : a, half);
    const Stored db = store(context, {k, n}, half ? b16 : b, half);
    DeviceTensor dc = poisoned(context, {m, n});
    const int64_t scratch_numel = std::max<int64_t>(1, ops::matmulScratch(m, n, k, 1));
    DeviceTensor scratch = poisoned(context, {scratch_numel});
    const ops::TensorView scratch_view = scratch.view();
    ops::MatmulOptions o;
    o.scratch = &scratch_view;
    vk::Recorder rec(context);
    ops::matmul(rec, da.view, db.view, dc.view(), o);
    rec.submit();
    EXPECT_TRUE(allClose(download(context, dc), want, kTolerance))
        << m << "x" << n << "x" << k << (half ? " f16" : " f32");
  };
  product(70, 90, 40, false);
  ASSERT_GT(ops::matmulSplitK(64, 64, 8192, 1), 1);
  product(64, 64, 8192, false);
  if (coopmat) product(70, 90, 40, true);
  EXPECT_TRUE(context.validationMessages().empty());
}

}  // namespace
}  // namespace vkgrad::test

// The ".sb4" builds (cmake/Shaders.cmake): on a device that binds at most 4 storage buffers per
// stage (Vulkan's minimum, maxPerStageDescriptorStorageBuffers), kernels whose usual build
// binds more take a build within 4 and the launcher records what it left out as a pass of its
// own. Each test runs the same work on the shared context and on one that believes the device
// binds 4 (vk::DeviceLimits::max_storage_buffers, as `VKGRAD_LIMITS=storage-buffers=4` and the
// vulkan12-minimum profile set it), and wants the same bits from both: every split here is in
// f32, in the order the one-pass kernel computes.
#include <cstring>
#include <vector>

#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "ops/four_storage_buffers.h"
#include "vkgrad/ops/elementwise.h"
#include "vkgrad/ops/layer_norm.h"
#include "vkgrad/ops/matmul.h"
#include "vkgrad/ops/optimizer.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

// What one context computes: C = A·B + bias + residual, and the backward's da, db and dbias.
struct MatmulRun {
  std::vector<float> c, da, db, dbias;
  uint32_t forward_dispatches = 0;
};

MatmulRun runMatmul(vk::Context& context, ops::MatmulVariant variant, int64_t batch, int64_t m,
                    int64_t n, int64_t k, const std::vector<std::vector<float>>& host) {
  const ops::Shape sa{batch, m, k}, sb{k, n}, sc{batch, m, n};
  DeviceTensor a = upload(context, sa, host[0]), b = upload(context, sb, host[1]);
  DeviceTensor bias = upload(context, {n}, host[2]), r = upload(context, sc, host[3]);
  DeviceTensor dc = upload(context, sc, host[4]);
  DeviceTensor c = poisoned(context, sc), da = poisoned(context, sa), db = poisoned(context, sb);
  DeviceTensor dbias = poisoned(context, {n});
  const ops::TensorView vbias = bias.view(), vr = r.view(), vda = da.view(), vdb = db.view(),
                        vdbias = dbias.view();
  ops::MatmulOptions options;
  options.variant = variant;
  options.bias = &vbias;
  options.residual = &vr;
  MatmulRun run;
  vk::Recorder rec(context);
  ops::matmul(rec, a.view(), b.view(), c.view(), options);
  run.forward_dispatches = rec.dispatchCount();
  ops::matmulBackward(rec, a.view(), b.view(), dc.view(), {&vda, &vdb, &vdbias}, options);
  rec.submit();
  run.c = download(context, c);
  run.da = download(context, da);
  run.db = download(context, db);
  run.dbias = download(context, dbias);
  return run;
}

// Naive, Tiled and Vector bind a, b, c, the bias and the residual: under 4 their .sb4 builds
// leave the residual out and an add follows, with the bits of the epilogue's add (last, f32).
// On odd shapes (no tile fits) and a batch over a shared weight.
TEST_F(VkTest, MatmulWithinFourStorageBuffersAddsTheResidualAfterWithTheSameBits) {
  vk::Context four = fourBuffers();
  ASSERT_EQ(four.info().max_storage_buffers, 4u);
  Rng rng;
  SCOPED_TRACE(rng.describe());
  struct Shape {
    int64_t batch, m, n, k;
  };
  for (const Shape s : {Shape{1, 37, 13, 21}, Shape{3, 19, 36, 44}}) {
    const int64_t a = s.batch * s.m * s.k, c = s.batch * s.m * s.n;
    const std::vector<std::vector<float>> host = {rng.uniform(a), rng.uniform(s.k * s.n),
                                                  rng.uniform(s.n), rng.normal(c), rng.uniform(c)};
    for (const ops::MatmulVariant variant :
         {ops::MatmulVariant::Naive, ops::MatmulVariant::Tiled, ops::MatmulVariant::Vector}) {
      SCOPED_TRACE(std::string(ops::matmulVariantName(variant)) + " batch " +
                   std::to_string(s.batch) + " m " + std::to_string(s.m));
      const MatmulRun want = runMatmul(ctx(), variant, s.batch, s.m, s.n, s.k, host);
      const MatmulRun got = runMatmul(four, variant, s.batch, s.m, s.n, s.k, host);
      EXPECT_EQ(got.forward_dispatches, 2u);  // the product, then the residual's add
      EXPECT_TRUE(sameBits(got.c, want.c));
      EXPECT_TRUE(sameBits(got.da, want.da));
      EXPECT_TRUE(sameBits(got.db, want.db));
      EXPECT_TRUE(sameBits(got.dbias, want.dbias));
    }
  }
}

// The storage AdamW binds param, grad, m, v and the state: under 4 its .sb4 build updates m
// and v in one pass and param from them in a second. Three replayed steps, odd sizes.
TEST_F(VkTest, AdamWWithinFourStorageBuffersTakesTwoPassesWithTheSameBits) {
  vk::Context four = fourBuffers();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const int64_t n : {1, 37, 1000}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const std::vector<float> p0 = rng.uniform(n);
    std::vector<std::vector<float>> grads;
    for (int step = 0; step < 3; ++step) grads.push_back(rng.uniform(n));
    auto run = [&](vk::Context& context) {
      DeviceTensor param = upload(context, {n}, p0), grad = upload(context, {n}, grads[0]);
      DeviceTensor m = upload(context, {n}, std::vector<float>(n, 0.0f));
      DeviceTensor v = upload(context, {n}, std::vector<float>(n, 0.0f));
      const ops::OptimizerState s0 = ops::OptimizerState::make(0.05f);
      vk::Buffer state = context.allocator().allocate(sizeof(s0));
      context.staging().upload(state, 0, &s0, sizeof(s0));
      const ops::TensorView vstate = ops::view(state, {8}, 0, ops::DType::U32);
      vk::Recorder rec(context);
      ops::advanceStep(rec, vstate);
      ops::adamw(rec, param.view(), grad.view(), m.view(), v.view(), vstate,
                 {1e-8f, 0.1f, ops::AdamWVariant::Storage});
      for (const std::vector<float>& g : grads) {
        context.staging().upload(grad.buffer, 0, g.data(), g.size() * 4);
        rec.submit();
      }
      return std::vector<std::vector<float>>{download(context, param), download(context, m),
                                             download(context, v)};
    };
    const auto want = run(ctx()), got = run(four);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(sameBits(got[i], want[i])) << i;
  }
}

// Layer norm forward and backward read gamma, beta, mean and rstd through texel views in their
// .sb4 builds (the same values, so the same bits); the residual's gradient added in the dx pass.
// Parameter sums by Columns in both (WithDx, which Auto may take here, is not in the .sb4 build).
TEST_F(VkTest, LayerNormWithinFourStorageBuffersReadsStatisticsAsTexelsWithTheSameBits) {
  vk::Context four = fourBuffers();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t rows = 19, n = 37;
  const std::vector<std::vector<float>> host = {rng.normal(rows * n), rng.uniform(n),
                                                rng.uniform(n), rng.uniform(rows * n),
                                                rng.uniform(rows * n)};
  auto run = [&](vk::Context& context) {
    DeviceTensor x = upload(context, {rows, n}, host[0]), gamma = upload(context, {n}, host[1]);
    DeviceTensor beta = upload(context, {n}, host[2]), dy = upload(context, {rows, n}, host[3]);
    DeviceTensor addend = upload(context, {rows, n}, host[4]);
    DeviceTensor y = poisoned(context, {rows, n}), mean = poisoned(context, {rows});
    DeviceTensor rstd = poisoned(context, {rows}), dx = poisoned(context, {rows, n});
    DeviceTensor dgamma = poisoned(context, {n}), dbeta = poisoned(context, {n});
    DeviceTensor scratch = poisoned(context, {ops::layerNormBackwardScratch(rows, n)});
    const ops::TensorView vaddend = addend.view();
    vk::Recorder rec(context);
    ops::layerNorm(rec, x.view(), gamma.view(), beta.view(), y.view(), mean.view(), rstd.view());
    ops::layerNormBackward(
        rec, x.view(), gamma.view(), mean.view(), rstd.view(), dy.view(), dx.view(), dgamma.view(),
        dbeta.view(), scratch.view(), ops::Write::Overwrite, ops::Write::Overwrite,
        ops::LayerNormVariant::Auto, ops::LayerNormParamsVariant::Columns, &vaddend);
    rec.submit();
    return std::vector<std::vector<float>>{download(context, y),      download(context, mean),
                                           download(context, rstd),   download(context, dx),
                                           download(context, dgamma), download(context, dbeta)};
  };
  const auto want = run(ctx()), got = run(four);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(sameBits(got[i], want[i])) << i;
}

// The product's backward takes one dispatch per gradient in the .sb4 build; with da written
// over b (which db's dispatch does not read) and over a (which it does: db goes first). dout
// starts 4 bytes into its buffer, so the storage kernel runs rather than the texel one.
TEST_F(VkTest, MulBackwardWithinFourStorageBuffersTakesOneDispatchPerGradient) {
  vk::Context four = fourBuffers();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t n = 1001;
  const std::vector<std::vector<float>> host = {rng.uniform(n), rng.uniform(n), rng.uniform(n + 1)};
  for (const bool over_a : {false, true}) {
    SCOPED_TRACE(over_a ? "da over a" : "da over b");
    auto run = [&](vk::Context& context) {
      DeviceTensor a = upload(context, {n}, host[0]), b = upload(context, {n}, host[1]);
      DeviceTensor dout = upload(context, {n + 1}, host[2]), db = poisoned(context, {n});
      const ops::TensorView vdout = ops::view(dout.buffer, {n}, 4);
      const ops::TensorView da = over_a ? a.view() : b.view();
      vk::Recorder rec(context);
      ops::mulBackward(rec, a.view(), b.view(), vdout, da, db.view());
      rec.submit();
      return std::vector<std::vector<float>>{download(context, da), download(context, db)};
    };
    const auto want = run(ctx()), got = run(four);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(sameBits(got[i], want[i])) << i;
  }
}

}  // namespace
}  // namespace vkgrad::test

// The ".sb4" builds of batch norm and of the sparse aggregation (ops/batch_norm.cpp,
// ops/spmm.cpp), as test_storage_buffer_limit.cpp tests the others: each test runs the same
// work on the shared context and on one that believes the device binds 4 storage buffers per
// stage (vk::DeviceLimits::max_storage_buffers, as `VKGRAD_LIMITS=storage-buffers=4` and the
// vulkan12-minimum profile set it), and wants the same bits from both (texel views read the
// same values; a split pass takes the same f32 operations in the same order), the CPU
// reference at its own tests' tolerances, and finite-difference gradients on the 4-buffer one.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/gradcheck.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "ops/four_storage_buffers.h"
#include "vkgrad/ops/batch_norm.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/reference/batch_norm.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/spmm.h"
#include "vkgrad/ops/spmm.h"
#include "vkgrad/runtime/sparse.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Shape;
using ops::Write;

constexpr float kEps = 1e-5f;
constexpr float kMomentum = 0.1f;

// One batch norm's inputs; x, y, dy and dx in `dtype`, gamma and beta in `param_dtype`.
struct NormCase {
  Shape shape;
  DType dtype = DType::F32, param_dtype = DType::F32;
  std::vector<float> x, gamma, beta, running_mean, running_var, dy, dx0, dgamma0, dbeta0;
  int64_t c() const { return shape[1]; }
  int64_t s() const { return shape.numel() / (shape[0] * shape[1]); }
};

NormCase normCase(Rng& rng, const Shape& shape, DType dtype = DType::F32,
                  DType param_dtype = DType::F32) {
  const size_t n = size_t(shape.numel()), c = size_t(shape[1]);
  return {shape,
          dtype,
          param_dtype,
          ops::ref::roundTo(dtype, rng.normal(n, 0.3f, 1.5f)),
          ops::ref::roundTo(param_dtype, rng.uniform(c, 0.5f, 1.5f)),
          ops::ref::roundTo(param_dtype, rng.uniform(c, -0.5f, 0.5f)),
          rng.normal(c),
          rng.uniform(c, 0.5f, 1.5f),
          ops::ref::roundTo(dtype, rng.normal(n)),
          ops::ref::roundTo(dtype, rng.normal(n)),
          rng.normal(c),
          rng.normal(c)};
}

// Everything one context computes for a case, each view one element into its buffer:
//   0..4  the training forward's y, mean, rstd, running_mean, running_var;
//   5     the inference forward's y (from the updated running statistics);
//   6..8  the training backward's dx, dgamma, dbeta, added to dx0, dgamma0, dbeta0;
//   9..11 the inference backward's, overwritten; 12 dbeta alone;
//   13..15 the training backward's, overwritten (the .sb4 dx dispatch reads the sums back).
struct NormRun {
  std::vector<std::vector<float>> out;
  uint32_t forward_dispatches = 0, backward_dispatches = 0;
};

NormRun runNorm(vk::Context& context, const NormCase& k) {
  const Shape stats{k.c()};
  auto up = [&](const Shape& s, const std::vector<float>& v, DType d) {
    return shiftedUpload(context, s, v, d);
  };
  auto x = up(k.shape, k.x, k.dtype), gamma = up(stats, k.gamma, k.param_dtype),
       beta = up(stats, k.beta, k.param_dtype), dy = up(k.shape, k.dy, k.dtype);
  auto rm = up(stats, k.running_mean, DType::F32), rv = up(stats, k.running_var, DType::F32);
  auto y = shiftedPoisoned(context, k.shape, k.dtype),
       y_inf = shiftedPoisoned(context, k.shape, k.dtype);
  auto mean = shiftedPoisoned(context, stats, DType::F32),
       rstd = shiftedPoisoned(context, stats, DType::F32);
  auto dx = up(k.shape, k.dx0, k.dtype), dgamma = up(stats, k.dgamma0, k.param_dtype),
       dbeta = up(stats, k.dbeta0, k.param_dtype);
  auto dx_inf = shiftedPoisoned(context, k.shape, k.dtype),
       dgamma_inf = shiftedPoisoned(context, stats, k.param_dtype),
       dbeta_inf = shiftedPoisoned(context, stats, k.param_dtype),
       dbeta_only = shiftedPoisoned(context, stats, DType::F32);
  auto dx2 = shiftedPoisoned(context, k.shape, k.dtype),
       dgamma2 = shiftedPoisoned(context, stats, k.param_dtype),
       dbeta2 = shiftedPoisoned(context, stats, k.param_dtype);
  NormRun run;
  vk::Recorder rec(context);
  const ops::BatchNormRunning running{rm.view, rv.view, kMomentum};
  ops::batchNorm(rec, x.view, gamma.view, beta.view, y.view, mean.view, rstd.view, kEps, &running);
  ops::batchNormInference(rec, x.view, gamma.view, beta.view, rm.view, rv.view, y_inf.view, kEps);
  run.forward_dispatches = rec.dispatchCount();
  const Write acc = Write::Accumulate;
  ops::batchNormBackward(rec, x.view, gamma.view, mean.view, rstd.view, dy.view,
                         {dx.view, dgamma.view, dbeta.view, acc, acc, acc}, true, kEps);
  run.backward_dispatches = rec.dispatchCount() - run.forward_dispatches;
  ops::batchNormBackward(rec, x.view, gamma.view, rm.view, rv.view, dy.view,
                         {dx_inf.view, dgamma_inf.view, dbeta_inf.view}, false, kEps);
  ops::batchNormBackward(rec, x.view, gamma.view, mean.view, rstd.view, dy.view,
                         {{}, {}, dbeta_only.view}, true, kEps);
  ops::batchNormBackward(rec, x.view, gamma.view, mean.view, rstd.view, dy.view,
                         {dx2.view, dgamma2.view, dbeta2.view}, true, kEps);
  rec.submit();
  for (const ShiftedTensor* t : {&y, &mean, &rstd, &rm, &rv, &y_inf, &dx, &dgamma, &dbeta, &dx_inf,
                                 &dgamma_inf, &dbeta_inf, &dbeta_only, &dx2, &dgamma2, &dbeta2})
    run.out.push_back(downloadShifted(context, *t));
  return run;
}

// Within 4 storage buffers the forward reads gamma and beta as texels and updates the running
// statistics in a second dispatch (batch_norm/running.comp); the backward reads gamma and the
// statistics as texels and writes dgamma and dbeta in one dispatch, dx in another (from the
// sums stored in f32 dgamma and dbeta where it overwrites them, else summing again). Odd shapes
// (strided channel loops, an MLP's (N,C), rank 3), f32 and 16-bit tensors (the .sb4.s16
// build's unsigned texel views), accumulating and overwriting, one gradient alone.
TEST_F(VkTest, BatchNormWithinFourStorageBuffersSplitsItsPassesWithTheSameBits) {
  vk::Context four = fourBuffers();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  struct Config {
    Shape shape;
    DType dtype, param_dtype;
  };
  for (const Config& cfg :
       {Config{{5, 3, 11, 13}, DType::F32, DType::F32}, Config{{13, 6}, DType::F32, DType::F32},
        Config{{2, 5, 9}, DType::F16, DType::BF16}, Config{{3, 4, 7}, DType::BF16, DType::F32}}) {
    // The 16-bit builds where the device stores 16 bits (not under the mobile and
    // vulkan12-minimum profiles, which refuse them by name in the tests that ask).
    if (cfg.dtype != DType::F32 && !ctx().info().storage_16bit) continue;
    SCOPED_TRACE(cfg.shape.str() + " " + ops::dtypeName(cfg.dtype) + ", params " +
                 ops::dtypeName(cfg.param_dtype));
    const NormCase k = normCase(rng, cfg.shape, cfg.dtype, cfg.param_dtype);
    const NormRun want = runNorm(ctx(), k), got = runNorm(four, k);
    EXPECT_EQ(got.forward_dispatches, 3u);   // the statistics and y, the running update, inference
    EXPECT_EQ(got.backward_dispatches, 2u);  // dgamma and dbeta, then dx
    for (size_t i = 0; i < want.out.size(); ++i)
      EXPECT_TRUE(sameBits(got.out[i], want.out[i])) << i;

    // The CPU reference on the 4-buffer context's statistics (test_batch_norm.cpp's
    // tolerances: a few ulp of the outputs, 4x for the channel sums).
    std::vector<float> y(k.x.size()), mean(size_t(k.c())), rstd(size_t(k.c()));
    std::vector<float> rm = k.running_mean, rv = k.running_var;
    ops::ref::batchNorm(k.x.data(), k.gamma.data(), k.beta.data(), y.data(), mean.data(),
                        rstd.data(), rm.data(), rv.data(), k.shape[0], k.c(), k.s(), kEps,
                        kMomentum);
    EXPECT_TRUE(closeInFormat(got.out[0], y, k.dtype, 5e-6)) << "y";
    EXPECT_TRUE(allClose(got.out[2], rstd, 5e-6)) << "rstd";
    EXPECT_TRUE(allClose(got.out[4], rv, 5e-6)) << "running_var";
    std::vector<float> dx(k.x.size()), dgamma(size_t(k.c())), dbeta(size_t(k.c()));
    ops::ref::batchNormBackward(k.x.data(), k.gamma.data(), got.out[1].data(), got.out[2].data(),
                                k.dy.data(), dx.data(), dgamma.data(), dbeta.data(), k.shape[0],
                                k.c(), k.s(), true, kEps);
    EXPECT_TRUE(allClose(got.out[12], dbeta, 2e-5)) << "dbeta";
    if (k.dtype == DType::F32) {
      EXPECT_TRUE(allClose(got.out[13], dx, 5e-6)) << "dx";
    }
    if (k.dtype == DType::F32 && k.param_dtype == DType::F32) {
      for (size_t i = 0; i < dx.size(); ++i) dx[i] += k.dx0[i];
      for (size_t i = 0; i < dgamma.size(); ++i) dgamma[i] += k.dgamma0[i];
      EXPECT_TRUE(allClose(got.out[6], dx, 5e-6)) << "dx +=";
      EXPECT_TRUE(allClose(got.out[7], dgamma, 2e-5)) << "dgamma +=";
    }
  }
}

// loss = sum w * y through the 4-buffer context's training forward; the analytic gradients
// are its two backward dispatches' with dy = w.
TEST_F(VkTest, BatchNormWithinFourStorageBuffersPassesGradCheck) {
  vk::Context four = fourBuffers();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  NormCase k = normCase(rng, {3, 4, 3, 2});
  const Shape stats{k.c()};
  const std::vector<float> w = rng.uniform(k.x.size());
  std::vector<float> mean, rstd;
  auto forward = [&] {
    auto x = upload(four, k.shape, k.x), gamma = upload(four, stats, k.gamma),
         beta = upload(four, stats, k.beta), y = poisoned(four, k.shape), m = poisoned(four, stats),
         r = poisoned(four, stats);
    vk::Recorder rec(four);
    ops::batchNorm(rec, x.view(), gamma.view(), beta.view(), y.view(), m.view(), r.view(), kEps);
    rec.submit();
    mean = download(four, m), rstd = download(four, r);
    return download(four, y);
  };
  auto loss = [&] { return weightedSum(forward(), w); };
  forward();
  auto x = upload(four, k.shape, k.x), gamma = upload(four, stats, k.gamma),
       m = upload(four, stats, mean), r = upload(four, stats, rstd), dy = upload(four, k.shape, w);
  auto dx = poisoned(four, k.shape), dgamma = poisoned(four, stats), dbeta = poisoned(four, stats);
  vk::Recorder rec(four);
  ops::batchNormBackward(rec, x.view(), gamma.view(), m.view(), r.view(), dy.view(),
                         {dx.view(), dgamma.view(), dbeta.view()});
  rec.submit();
  EXPECT_TRUE(checkGradients(loss,
                             {{"x", &k.x, download(four, dx)},
                              {"gamma", &k.gamma, download(four, dgamma)},
                              {"beta", &k.beta, download(four, dbeta)}},
                             rng));
}

// A graph on the device: its CSR, the transpose's arrays and the destinations, as u32 views
// one word into their buffers.
struct Graph {
  graph::Csr csr;
  std::vector<uint32_t> destinations, t_offsets, t_edges, t_destinations;
  std::vector<vk::Buffer> buffers;
  std::vector<ops::TensorView>
      views;  // offsets, sources, destinations, t_offsets, t_edges, t_destinations

  Graph(vk::Context& context, graph::Csr c) : csr(std::move(c)) {
    destinations = csr.destinations();
    csr.transpose(t_offsets, t_edges);
    for (const uint32_t e : t_edges) t_destinations.push_back(destinations[e]);
    buffers.reserve(6);
    for (const std::vector<uint32_t>* v :
         {&csr.offsets, &csr.sources, &destinations, &t_offsets, &t_edges, &t_destinations}) {
      std::vector<uint32_t> words = {0xDEADBEEFu};
      words.insert(words.end(), v->begin(), v->end());
      buffers.push_back(uploadWords(context, words));
      views.push_back(ops::view(buffers.back(), {int64_t(v->size())}, 4, DType::U32));
    }
  }
};

// y = A x, dx = Aᵀ dy and dw on one context, each accumulating onto `init` where it says so.
std::vector<std::vector<float>> runSpmm(vk::Context& context, const Graph& g, int64_t cols,
                                        int64_t heads, const std::vector<std::vector<float>>& host,
                                        Write write) {
  const int64_t n = g.csr.nodes, e = g.csr.edges();
  const Shape xs{n, cols}, ws{e, heads};
  // At offset 0: F = 12 with H = 3 takes the vec4 kernel.
  auto up = [&](const Shape& s, const std::vector<float>& v) { return upload(context, s, v); };
  auto x = up(xs, host[0]), dy = up(xs, host[1]), w = up(ws, host[2]);
  auto y = up(xs, host[3]), y1 = up(xs, host[3]), dx = up(xs, host[3]), dw = up(ws, host[4]);
  vk::Recorder rec(context);
  ops::spmm(rec, g.views[0], g.views[1], w.view(), x.view(), y.view(), write);
  ops::spmm(rec, g.views[0], g.views[1], {}, x.view(), y1.view(), write);  // unweighted
  ops::spmmTransposed(rec, g.views[3], g.views[4], g.views[5], w.view(), dy.view(), dx.view(),
                      write);
  ops::spmmWeightsBackward(rec, g.views[1], g.views[2], x.view(), dy.view(), dw.view(), write);
  rec.submit();
  return {download(context, y), download(context, y1), download(context, dx),
          download(context, dw)};
}

// Within 4 storage buffers the aggregation (offsets, nodes, edge ids, weights, x, y) and the
// weights' gradient (sources, destinations, x, dy, dw) read their index arrays through texel
// views. Isolated nodes, self-loops and duplicate edges; F / H = 7 and 3 (one feature per
// invocation) and 4 (the vec4 kernel); overwriting and accumulating.
TEST_F(VkTest, SpmmWithinFourStorageBuffersReadsIndicesAsTexelsWithTheSameBits) {
  vk::Context four = fourBuffers();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  for (int k = 0; k < 150; ++k) edges.push_back({rng.below(31), rng.below(31)});  // 31..36 isolated
  for (uint32_t v : {0u, 4u, 30u}) edges.push_back({v, v});
  edges.push_back(edges[3]);
  const Graph want_graph(ctx(), graph::csrFromEdges("random", 37, edges));
  const Graph got_graph(four, graph::csrFromEdges("random", 37, edges));
  const int64_t n = 37, e = want_graph.csr.edges();
  for (const auto& [cols, heads] : {std::pair<int64_t, int64_t>{7, 1}, {9, 3}, {12, 3}})
    for (const Write write : {Write::Overwrite, Write::Accumulate}) {
      SCOPED_TRACE("F " + std::to_string(cols) + ", H " + std::to_string(heads) +
                   (write == Write::Accumulate ? " +=" : ""));
      const std::vector<std::vector<float>> host = {
          rng.normal(size_t(n * cols)), rng.normal(size_t(n * cols)),
          rng.uniform(size_t(e * heads), -1.0f, 1.0f), rng.normal(size_t(n * cols)),
          rng.normal(size_t(e * heads))};
      const auto want = runSpmm(ctx(), want_graph, cols, heads, host, write);
      const auto got = runSpmm(four, got_graph, cols, heads, host, write);
      for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(sameBits(got[i], want[i])) << i;
      // The references (test_spmm.cpp's 1e-6: f32 sums of up to ~13 products).
      const auto& o = want_graph.csr.offsets;
      const auto& s = want_graph.csr.sources;
      std::vector<std::vector<float>> ref = {
          ops::ref::spmm(o, s, host[2].data(), heads, host[0], cols),
          ops::ref::spmm(o, s, nullptr, 1, host[0], cols),
          ops::ref::spmmTransposed(o, s, host[2].data(), heads, host[1], cols),
          ops::ref::spmmWeightsBackward(o, s, heads, host[0], host[1], cols)};
      if (write == Write::Accumulate)
        for (size_t i = 0; i < ref.size(); ++i)
          for (size_t j = 0; j < ref[i].size(); ++j) ref[i][j] += host[i == 3 ? 4 : 3][j];
      for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(allClose(got[i], ref[i], 1e-6)) << i;
    }
}

// loss = sum v * (A_w x) on the 4-buffer context: the gradients of x (the transposed pass) and
// of the weights, each through its .sb4 build, against central differences.
TEST_F(VkTest, SpmmWithinFourStorageBuffersPassesGradCheck) {
  vk::Context four = fourBuffers();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  for (int k = 0; k < 40; ++k) edges.push_back({rng.below(11), rng.below(11)});
  const Graph g(four, graph::csrFromEdges("random", 11, edges));
  const int64_t n = 11, cols = 6, heads = 2, e = g.csr.edges();
  std::vector<float> x = rng.normal(size_t(n * cols)), w = rng.uniform(size_t(e * heads));
  const std::vector<float> v = rng.uniform(size_t(n * cols));
  auto loss = [&] {
    auto dx = upload(four, {n, cols}, x), dw = upload(four, {e, heads}, w),
         y = poisoned(four, {n, cols});
    vk::Recorder rec(four);
    ops::spmm(rec, g.views[0], g.views[1], dw.view(), dx.view(), y.view());
    rec.submit();
    return weightedSum(download(four, y), v);
  };
  const std::vector<float> zeros_x(x.size(), 0.0f), zeros_w(w.size(), 0.0f);
  const auto grads = runSpmm(four, g, cols, heads, {x, v, w, zeros_x, zeros_w}, Write::Overwrite);
  EXPECT_TRUE(checkGradients(loss, {{"x", &x, grads[2]}, {"weights", &w, grads[3]}}, rng));
}

}  // namespace
}  // namespace vkgrad::test

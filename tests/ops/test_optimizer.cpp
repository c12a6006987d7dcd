#include "vkgrad/ops/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/optimizer.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

class OptimizerTest : public VkTest {
 protected:
  static vk::Buffer stateBuffer(const ops::OptimizerState& s) {
    vk::Buffer b = ctx().allocator().allocate(sizeof(s));
    ctx().staging().upload(b, 0, &s, sizeof(s));
    return b;
  }
  static ops::OptimizerState readState(const vk::Buffer& b) {
    ops::OptimizerState s;
    ctx().staging().download(b, 0, &s, sizeof(s));
    return s;
  }
  // What a learning-rate schedule does between replays: rewrite the first word only.
  static void writeLr(const vk::Buffer& b, float lr) { ctx().staging().upload(b, 0, &lr, 4); }
  static ops::TensorView stateView(const vk::Buffer& b) {
    return ops::view(b, {8}, 0, ops::DType::U32);
  }
};
using ClipTest = OptimizerTest;

const int64_t kSizes[] = {1, 3, 17, 129, 1000};
const float kLr[] = {0.1f, 0.05f, 0.08f, 0.02f, 0.03f};  // a schedule the host writes per step

std::vector<double> toDouble(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}
std::vector<float> toFloat(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

// p - p0 for the device and the reference: the updates are what a test of an optimizer
// should resolve, and they are 10-100x smaller than the parameters.
std::vector<float> delta(const std::vector<float>& p, const std::vector<float>& p0) {
  std::vector<float> d(p.size());
  for (size_t i = 0; i < p.size(); ++i) d[i] = float(double(p[i]) - double(p0[i]));
  return d;
}
std::vector<float> delta(const std::vector<double>& p, const std::vector<float>& p0) {
  std::vector<float> d(p.size());
  for (size_t i = 0; i < p.size(); ++i) d[i] = float(p[i] - double(p0[i]));
  return d;
}

// max|got - want| / max(max|want|, floor): allClose's normalisation, with a floor for
// short tensors whose values happen to cancel to near 0 (n = 1, 3).
::testing::AssertionResult closeTo(std::span<const float> got, std::span<const float> want,
                                   double tolerance, double floor) {
  double scale = floor, worst = 0;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i])) / scale;
    if (!(err <= worst)) worst = err;  // also keeps a NaN
  }
  if (worst <= tolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "error " << worst << " of scale " << scale << " > " << tolerance;
}

// Five steps in fp32 against a double reference: each step rounds p (|p| ~ 1) and the
// update a few times, so the accumulated updates agree to ~1e-6 of their natural scale,
// the sum of the learning rates (what Adam moves at most, and SGD's unit); 1e-5.
constexpr double kTolerance = 1e-5;
constexpr double kLrSum = 0.1 + 0.05 + 0.08 + 0.02 + 0.03;

TEST_F(OptimizerTest, SgdMatchesCpuOverFiveSteps) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (bool nesterov : {false, true}) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " nesterov=" << nesterov);
      const ops::SgdOptions options{0.9f, 0.01f, nesterov};
      const auto p0 = rng.uniform(n);
      auto param = upload(ctx(), {n}, p0), grad = upload(ctx(), {n}, rng.uniform(n));
      auto velocity = upload(ctx(), {n}, std::vector<float>(n, 0.0f));
      auto state = stateBuffer(ops::OptimizerState::make(kLr[0]));
      std::vector<double> p = toDouble(p0), v(n, 0.0);
      vk::Recorder rec(ctx());
      ops::advanceStep(rec, stateView(state));
      ops::sgd(rec, param.view(), grad.view(), velocity.view(), stateView(state), options);
      for (int step = 0; step < 5; ++step) {
        const auto g = rng.uniform(n);
        ctx().staging().upload(grad.buffer, 0, g.data(), n * 4);
        writeLr(state, kLr[step]);
        rec.submit();
        ops::ref::sgd(p, g, v, kLr[step], options.momentum, options.weight_decay, nesterov);
      }
      EXPECT_TRUE(closeTo(delta(download(ctx(), param), p0), delta(p, p0), kTolerance, kLrSum));
      // Velocities are sums of gradients in [-1, 1].
      EXPECT_TRUE(closeTo(download(ctx(), velocity), toFloat(v), kTolerance, 1.0));
      EXPECT_EQ(readState(state).step, 5u);
    }
  }
}

TEST_F(OptimizerTest, AdamWMatchesCpuOverFiveSteps) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const float beta1 = 0.9f, beta2 = 0.999f;
  for (auto variant : {ops::AdamWVariant::Storage, ops::AdamWVariant::Texel})
    for (float weight_decay : {0.0f, 0.1f}) {
      for (int64_t n : kSizes) {
        SCOPED_TRACE(testing::Message()
                     << "n=" << n << " wd=" << weight_decay << " variant " << int(variant));
        const ops::AdamWOptions options{1e-8f, weight_decay, variant};
        const auto p0 = rng.uniform(n);
        auto param = upload(ctx(), {n}, p0), grad = upload(ctx(), {n}, rng.uniform(n));
        auto m = upload(ctx(), {n}, std::vector<float>(n, 0.0f));
        auto v = upload(ctx(), {n}, std::vector<float>(n, 0.0f));
        auto state = stateBuffer(ops::OptimizerState::make(kLr[0], beta1, beta2));
        std::vector<double> p = toDouble(p0), m_ref(n, 0.0), v_ref(n, 0.0);
        vk::Recorder rec(ctx());
        ops::advanceStep(rec, stateView(state));
        ops::adamw(rec, param.view(), grad.view(), m.view(), v.view(), stateView(state), options);
        for (int step = 0; step < 5; ++step) {
          // Gradients of mixed scale, so the adaptive denominators differ per element.
          auto g = rng.uniform(n);
          for (int64_t i = 0; i < n; i += 3) g[i] *= 1e-3f;
          ctx().staging().upload(grad.buffer, 0, g.data(), n * 4);
          writeLr(state, kLr[step]);
          rec.submit();
          // The reference uses the betas as the device holds them (fp32 values).
          ops::ref::adamw(p, g, m_ref, v_ref, kLr[step], beta1, beta2, options.eps, weight_decay,
                          step + 1);
        }
        EXPECT_TRUE(closeTo(delta(download(ctx(), param), p0), delta(p, p0), kTolerance, kLrSum));
        // m adds terms of (1 - beta1) |g| <= 0.1 that may cancel; v adds positive terms.
        EXPECT_TRUE(closeTo(download(ctx(), m), toFloat(m_ref), kTolerance, 0.1));
        EXPECT_TRUE(closeTo(download(ctx(), v), toFloat(v_ref), kTolerance, 1e-30));
        const ops::OptimizerState s = readState(state);
        EXPECT_EQ(s.step, 5u);
        EXPECT_NEAR(s.bias1, 1.0 - std::pow(double(beta1), 5.0), 1e-6 * s.bias1);
        EXPECT_NEAR(s.bias2, 1.0 - std::pow(double(beta2), 5.0), 1e-6 * s.bias2);
      }
    }
}

// The graph records its step once and replays it: that must be the very same computation
// as recording every step afresh, with the step counter moved on the device.
TEST_F(OptimizerTest, ReplayingOneRecordingEqualsFreshRecordingsBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t na = 129, nb = 17;
  const auto pa0 = rng.uniform(na), pb0 = rng.uniform(nb);
  std::vector<std::vector<float>> grads_a, grads_b;
  for (int step = 0; step < 5; ++step)
    grads_a.push_back(rng.uniform(na)), grads_b.push_back(rng.uniform(nb));
  struct Run {
    DeviceTensor pa, ga, ma, va, pb, gb, vel;
    vk::Buffer state;
  };
  auto makeRun = [&] {
    return Run{upload(ctx(), {na}, pa0),
               poisoned(ctx(), {na}),
               upload(ctx(), {na}, std::vector<float>(na, 0.0f)),
               upload(ctx(), {na}, std::vector<float>(na, 0.0f)),
               upload(ctx(), {nb}, pb0),
               poisoned(ctx(), {nb}),
               upload(ctx(), {nb}, std::vector<float>(nb, 0.0f)),
               stateBuffer(ops::OptimizerState::make(0.01f))};
  };
  auto record = [&](vk::Recorder& rec, Run& r) {
    ops::advanceStep(rec, stateView(r.state));
    ops::adamw(rec, r.pa.view(), r.ga.view(), r.ma.view(), r.va.view(), stateView(r.state));
    ops::sgd(rec, r.pb.view(), r.gb.view(), r.vel.view(), stateView(r.state));
  };
  auto feed = [&](Run& r, int step) {
    ctx().staging().upload(r.ga.buffer, 0, grads_a[step].data(), na * 4);
    ctx().staging().upload(r.gb.buffer, 0, grads_b[step].data(), nb * 4);
  };
  Run replayed = makeRun(), fresh = makeRun();
  vk::Recorder once(ctx());
  record(once, replayed);
  for (int step = 0; step < 5; ++step) {
    feed(replayed, step);
    once.submit();
    feed(fresh, step);
    vk::Recorder rec(ctx());
    record(rec, fresh);
    rec.submit();
  }
  for (auto member : {&Run::pa, &Run::ma, &Run::va, &Run::pb, &Run::vel}) {
    const auto a = download(ctx(), replayed.*member), b = download(ctx(), fresh.*member);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  }
  const ops::OptimizerState a = readState(replayed.state), b = readState(fresh.state);
  EXPECT_EQ(0, std::memcmp(&a, &b, sizeof(a)));
  EXPECT_EQ(a.step, 5u);
  EXPECT_FLOAT_EQ(a.lr, 0.01f);
}

TEST_F(OptimizerTest, RejectsBadArgumentsBeforeRecording) {
  Rng rng;
  auto p = upload(ctx(), {4, 8}, rng.uniform(32)), g = upload(ctx(), {8, 4}, rng.uniform(32));
  auto m = upload(ctx(), {4, 8}, rng.uniform(32)), v = upload(ctx(), {4, 8}, rng.uniform(32));
  auto state = stateBuffer(ops::OptimizerState::make(0.1f));
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::adamw(rec, p.view(), g.view(), m.view(), v.view(), stateView(state)); },
      "adamw: param (4,8), grad (8,4), m (4,8), v (4,8): shapes must be equal");
  expectShapeError(
      rec, [&] { ops::sgd(rec, p.view(), m.view(), v.view(), ops::view(state, {8})); },
      "sgd: state must be u32");
  expectShapeError(
      rec, [&] { ops::advanceStep(rec, ops::view(state, {4}, 0, ops::DType::U32)); },
      "advanceStep: optimizer state (4) must hold 8 u32 words");
  // The texel variant asked for on a param that starts 4 bytes into its buffer.
  auto big = upload(ctx(), {33}, rng.uniform(33));
  try {
    ops::adamw(rec, ops::view(big.buffer, {32}, 4), ops::view(m.buffer, {32}),
               ops::view(m.buffer, {32}), ops::view(v.buffer, {32}), stateView(state),
               {1e-8f, 0.0f, ops::AdamWVariant::Texel});
    ADD_FAILURE() << "no Error for a texel AdamW on a misaligned param";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot all be read as RGBA32F texels"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

// Gradients of odd sizes, one large enough to need many partial sums.
const int64_t kGradSizes[] = {1, 3, 17, 129, 4099, 100003};

struct Grads {
  std::vector<std::vector<float>> host;
  std::vector<DeviceTensor> device;
  std::vector<ops::TensorView> views;
};

// Random gradients of kGradSizes, on the host only (the packed tests place them themselves).
std::vector<std::vector<float>> hostGrads(Rng& rng) {
  std::vector<std::vector<float>> host;
  for (int64_t n : kGradSizes) host.push_back(rng.uniform(n));
  return host;
}

Grads makeGrads(vk::Context& context, Rng& rng) {
  Grads g;
  for (int64_t n : kGradSizes) {
    g.host.push_back(rng.uniform(n));
    g.device.push_back(upload(context, {n}, g.host.back()));
  }
  for (const auto& d : g.device) g.views.push_back(d.view());
  return g;
}

TEST_F(ClipTest, NormMatchesCpuAndIsDeterministic) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Grads g = makeGrads(ctx(), rng);
  const int64_t slots = ops::gradNormScratch(g.views);
  auto scratch = poisoned(ctx(), {slots});
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    auto norm = poisoned(ctx(), {2});
    vk::Recorder rec(ctx());
    ops::gradNorm(rec, g.views, scratch.view(), norm.view());
    rec.submit();
    runs.push_back(download(ctx(), norm));
  }
  // fp32 partial sums of ~100k squares: ~1e-6 relative.
  EXPECT_NEAR(runs[0][0], ops::ref::gradNorm(g.host), 1e-5 * ops::ref::gradNorm(g.host));
  EXPECT_EQ(runs[0][1], 1.0f);  // no max_norm: nothing to clip
  EXPECT_EQ(0, std::memcmp(runs[0].data(), runs[1].data(), 8));
}

TEST_F(ClipTest, ScalesGradientsAboveTheThreshold) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Grads g = makeGrads(ctx(), rng);
  const double norm_ref = ops::ref::gradNorm(g.host);
  const float max_norm = float(0.3 * norm_ref);
  auto scratch = poisoned(ctx(), {ops::gradNormScratch(g.views)});
  auto norm = poisoned(ctx(), {2});
  vk::Recorder rec(ctx());
  ops::clipGradNorm(rec, g.views, max_norm, scratch.view(), norm.view());
  rec.submit();
  const auto got_norm = download(ctx(), norm);
  const double scale = max_norm / (norm_ref + 1e-6);
  EXPECT_NEAR(got_norm[0], norm_ref, 1e-5 * norm_ref);
  EXPECT_NEAR(got_norm[1], scale, 1e-5 * scale);
  std::vector<std::vector<float>> clipped;
  for (size_t t = 0; t < g.host.size(); ++t) {
    auto want = g.host[t];
    for (float& x : want) x = float(x * scale);
    clipped.push_back(download(ctx(), g.device[t]));
    EXPECT_TRUE(allClose(clipped.back(), want, 1e-5)) << "gradient " << t;
  }
  EXPECT_NEAR(ops::ref::gradNorm(clipped), max_norm, 1e-5 * max_norm);
}

TEST_F(ClipTest, LeavesGradientsBelowTheThresholdUntouched) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Grads g = makeGrads(ctx(), rng);
  const float max_norm = float(2.0 * ops::ref::gradNorm(g.host));
  auto scratch = poisoned(ctx(), {ops::gradNormScratch(g.views)});
  auto norm = poisoned(ctx(), {2});
  vk::Recorder rec(ctx());
  ops::clipGradNorm(rec, g.views, max_norm, scratch.view(), norm.view());
  rec.submit();
  EXPECT_EQ(download(ctx(), norm)[1], 1.0f);
  for (size_t t = 0; t < g.host.size(); ++t) {
    const auto got = download(ctx(), g.device[t]);
    EXPECT_EQ(0, std::memcmp(got.data(), g.host[t].data(), got.size() * 4)) << "gradient " << t;
  }
}

// clipGradScale puts the clip factor in the optimizer state and the updates apply it as they
// read each gradient: the updates equal those of the reference on clipped gradients, for SGD
// and both AdamW variants, while the gradient buffers keep their values bit for bit.
TEST_F(ClipTest, ScaleInTheStateClipsTheUpdatesNotTheGradients) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Grads g = makeGrads(ctx(), rng);
  const double norm_ref = ops::ref::gradNorm(g.host);
  const float max_norm = float(0.3 * norm_ref);
  const double scale = max_norm / (norm_ref + 1e-6);
  const float lr = 0.1f;
  for (int kind = 0; kind < 3; ++kind) {  // SGD, AdamW storage, AdamW texel
    SCOPED_TRACE(testing::Message() << "optimizer " << kind);
    auto scratch = poisoned(ctx(), {ops::gradNormScratch(g.views)});
    auto norm = poisoned(ctx(), {2});
    auto state = stateBuffer(ops::OptimizerState::make(lr));
    std::vector<std::vector<float>> p0;
    std::vector<DeviceTensor> params, m, v;
    for (const auto& host : g.host) {
      const auto n = int64_t(host.size());
      p0.push_back(rng.uniform(n));
      params.push_back(upload(ctx(), {n}, p0.back()));
      m.push_back(upload(ctx(), {n}, std::vector<float>(host.size(), 0.0f)));
      v.push_back(upload(ctx(), {n}, std::vector<float>(host.size(), 0.0f)));
    }
    vk::Recorder rec(ctx());
    ops::advanceStep(rec, stateView(state));
    ops::clipGradScale(rec, g.views, max_norm, scratch.view(), norm.view(), stateView(state));
    const ops::SgdOptions sgd{0.9f, 0.01f, false};
    const ops::AdamWOptions adamw{
        1e-8f, 0.1f, kind == 1 ? ops::AdamWVariant::Storage : ops::AdamWVariant::Texel};
    for (size_t t = 0; t < g.host.size(); ++t) {
      if (kind == 0)
        ops::sgd(rec, params[t].view(), g.views[t], m[t].view(), stateView(state), sgd);
      else
        ops::adamw(rec, params[t].view(), g.views[t], m[t].view(), v[t].view(), stateView(state),
                   adamw);
    }
    rec.submit();
    EXPECT_NEAR(readState(state).grad_scale, scale, 1e-5 * scale);
    for (size_t t = 0; t < g.host.size(); ++t) {
      const size_t n = g.host[t].size();
      std::vector<float> clipped(n);
      for (size_t i = 0; i < n; ++i) clipped[i] = float(g.host[t][i] * scale);
      std::vector<double> p = toDouble(p0[t]), m_ref(n, 0.0), v_ref(n, 0.0);
      if (kind == 0)
        ops::ref::sgd(p, clipped, m_ref, lr, sgd.momentum, sgd.weight_decay, sgd.nesterov);
      else
        ops::ref::adamw(p, clipped, m_ref, v_ref, lr, 0.9f, 0.999f, adamw.eps, adamw.weight_decay,
                        1);
      EXPECT_TRUE(
          closeTo(delta(download(ctx(), params[t]), p0[t]), delta(p, p0[t]), kTolerance, lr))
          << "tensor " << t;
      const auto grad = download(ctx(), g.device[t]);
      EXPECT_EQ(0, std::memcmp(grad.data(), g.host[t].data(), n * 4)) << "gradient " << t;
    }
  }
}

// Tensors packed into one buffer per role, as a graph places parameters, gradients and
// moments: element `at[i]` of the buffer starts tensor i.
struct Packed {
  vk::Buffer buffer;
  std::vector<ops::TensorView> views;
};
Packed pack(vk::Context& context, const std::vector<std::vector<float>>& host,
            const std::vector<int64_t>& at) {
  std::vector<float> all(size_t(at.back() + int64_t(host.back().size()) + 5), 0.5f);
  for (size_t i = 0; i < host.size(); ++i)
    std::copy(host[i].begin(), host[i].end(), all.begin() + at[i]);
  Packed p{context.allocator().allocate(all.size() * 4), {}};
  context.staging().upload(p.buffer, 0, all.data(), all.size() * 4);
  for (size_t i = 0; i < host.size(); ++i)
    p.views.push_back(ops::view(p.buffer, {int64_t(host[i].size())}, uint64_t(at[i]) * 4));
  return p;
}
// Offsets of packed tensors of these sizes: each on 16 bytes after a small gap.
std::vector<int64_t> packedOffsets(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> at;
  int64_t next = 4;
  for (size_t i = 0; i < sizes.size(); ++i) {
    at.push_back(next);
    next = (at.back() + sizes[i] + 4 + 3) / 4 * 4;
  }
  return at;
}

// adamwMany is adamw per tensor with fewer dispatches: over three replayed steps, params and
// moments packed into one buffer each end with the same bits as separate tensors updated one
// at a time, with their own weight decays. One gradient kept elsewhere splits the run in three.
TEST_F(OptimizerTest, AdamWManyEqualsOneUpdatePerTensorBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const std::vector<int64_t> sizes = {3, 17, 1, 86, 129, 1000, 4099};
  std::vector<std::vector<float>> p0, g0, zeros;
  for (int64_t n : sizes) {
    p0.push_back(rng.uniform(n));
    g0.push_back(rng.uniform(n));
    zeros.emplace_back(size_t(n), 0.0f);
  }
  const std::vector<int64_t> even = packedOffsets(sizes);
  Packed p = pack(ctx(), p0, even), g = pack(ctx(), g0, even), m = pack(ctx(), zeros, even),
         v = pack(ctx(), zeros, even);
  DeviceTensor apart = upload(ctx(), {sizes[3]}, g0[3]);
  g.views[3] = apart.view();
  auto state_many = stateBuffer(ops::OptimizerState::make(0.05f));
  auto table = poisoned(ctx(), {ops::segmentTableWords(sizes.size()) + 3});
  std::vector<ops::AdamWTensor> many;
  for (size_t i = 0; i < sizes.size(); ++i)
    many.push_back({p.views[i], g.views[i], m.views[i], v.views[i], i % 2 ? 0.0f : 0.1f});
  vk::Recorder rec_many(ctx());
  ops::advanceStep(rec_many, stateView(state_many));
  const auto table_view = ops::view(table.buffer, {ops::segmentTableWords(sizes.size())}, 12,
                                    ops::DType::U32);  // not on the binding alignment
  ops::adamwMany(rec_many, many, stateView(state_many), table_view);
  // The advance, then runs [0, 3), [3], [4, 7); one update per tensor where the device binds
  // fewer than the many-tensor kernel's 5 storage buffers.
  if (ctx().info().max_storage_buffers >= 5)
    EXPECT_EQ(rec_many.dispatchCount(), 1u + 3u);
  else
    EXPECT_GE(rec_many.dispatchCount(), 1u + sizes.size());

  std::vector<DeviceTensor> ps, gs, ms, vs;
  auto state_one = stateBuffer(ops::OptimizerState::make(0.05f));
  vk::Recorder rec_one(ctx());
  ops::advanceStep(rec_one, stateView(state_one));
  for (size_t i = 0; i < sizes.size(); ++i) {
    ps.push_back(upload(ctx(), {sizes[i]}, p0[i]));
    gs.push_back(upload(ctx(), {sizes[i]}, g0[i]));
    ms.push_back(upload(ctx(), {sizes[i]}, zeros[i]));
    vs.push_back(upload(ctx(), {sizes[i]}, zeros[i]));
    ops::adamw(rec_one, ps[i].view(), gs[i].view(), ms[i].view(), vs[i].view(),
               stateView(state_one), {1e-8f, i % 2 ? 0.0f : 0.1f});
  }
  for (int step = 0; step < 3; ++step) {
    rec_many.submit();
    rec_one.submit();
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "tensor " << i << " (" << sizes[i] << ")");
    for (auto [packed, one] : {std::pair{&p, &ps}, {&m, &ms}, {&v, &vs}}) {
      const auto a = download(ctx(), packed->views[i]), b = download(ctx(), (*one)[i]);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
    }
    const auto moved = delta(download(ctx(), p.views[i]), p0[i]);  // every element was updated
    EXPECT_TRUE(std::all_of(moved.begin(), moved.end(), [](float d) { return d != 0.0f; }));
  }
  // The padding between packed tensors is untouched.
  const auto all = download(ctx(), ops::view(p.buffer, {even.back() + sizes.back() + 5}));
  for (size_t i = 0; i + 1 < sizes.size(); ++i)
    for (int64_t e = even[i] + sizes[i]; e < even[i + 1]; ++e) EXPECT_EQ(all[size_t(e)], 0.5f);
}

TEST_F(OptimizerTest, AdamWManyRejectsASmallTableBeforeRecording) {
  auto a = poisoned(ctx(), {5}), table = poisoned(ctx(), {15});
  auto state = stateBuffer(ops::OptimizerState::make(0.05f));
  const std::vector<ops::AdamWTensor> two(2, {a.view(), a.view(), a.view(), a.view(), 0.0f});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec,
      [&] {
        ops::adamwMany(rec, two, stateView(state),
                       ops::view(table.buffer, {15}, 0, ops::DType::U32));
      },
      "holds fewer than the 16 u32 words 2 tensors need");
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

// With a table, the partial sums of every run of gradients in one buffer take one dispatch:
// the same partials in the same order, so the same norm bits as one dispatch per gradient.
TEST_F(ClipTest, NormOverPackedGradientsTakesOneDispatchPerRunWithTheSameBits) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const std::vector<int64_t> sizes(std::begin(kGradSizes), std::end(kGradSizes));
  const std::vector<std::vector<float>> host = hostGrads(rng);
  Packed packed = pack(ctx(), host, packedOffsets(sizes));
  // One gradient lives elsewhere: the runs are [0, 3), [3], [4, 6).
  std::vector<ops::TensorView> views = packed.views;
  DeviceTensor apart = upload(ctx(), {sizes[3]}, host[3]);
  views[3] = apart.view();
  const int64_t slots = ops::gradNormScratch(views);
  std::vector<std::vector<float>> norms, partials;
  for (bool table : {false, true}) {
    auto scratch = poisoned(ctx(), {slots}), norm = poisoned(ctx(), {2});
    auto words = poisoned(ctx(), {ops::segmentTableWords(views.size())});
    vk::Recorder rec(ctx());
    ops::gradNorm(
        rec, views, scratch.view(), norm.view(), 1.0f,
        table ? ops::view(words.buffer, words.shape, 0, ops::DType::U32) : ops::TensorView{});
    EXPECT_EQ(rec.dispatchCount(), table ? 4u : 7u);
    rec.submit();
    norms.push_back(download(ctx(), norm));
    partials.push_back(download(ctx(), scratch));
  }
  EXPECT_NEAR(norms[1][0], ops::ref::gradNorm(host), 1e-5 * ops::ref::gradNorm(host));
  EXPECT_EQ(0, std::memcmp(norms[0].data(), norms[1].data(), 8));
  EXPECT_EQ(0, std::memcmp(partials[0].data(), partials[1].data(), size_t(slots) * 4));
}

// A gradient view on any 4 bytes (not 16: no RGBA32F texel view can start there) is summed
// one float at a time, to the same norm within fp32 rounding.
TEST_F(ClipTest, NormOfViewsOffTheTexelGridMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const std::vector<int64_t> sizes(std::begin(kGradSizes), std::end(kGradSizes));
  const std::vector<std::vector<float>> host = hostGrads(rng);
  std::vector<int64_t> at = packedOffsets(sizes);
  for (int64_t& a : at) a += 1;  // 4 bytes past 16
  Packed packed = pack(ctx(), host, at);
  auto scratch = poisoned(ctx(), {ops::gradNormScratch(packed.views)}), norm = poisoned(ctx(), {2});
  vk::Recorder rec(ctx());
  ops::gradNorm(rec, packed.views, scratch.view(), norm.view());
  rec.submit();
  const double want = ops::ref::gradNorm(host);
  EXPECT_NEAR(download(ctx(), norm)[0], want, 1e-5 * want);
}

TEST_F(ClipTest, RejectsBadArgumentsBeforeRecording) {
  Rng rng;
  Grads g = makeGrads(ctx(), rng);
  const int64_t slots = ops::gradNormScratch(g.views);
  auto scratch = poisoned(ctx(), {slots}), small = poisoned(ctx(), {slots - 1});
  auto norm = poisoned(ctx(), {2});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::clipGradNorm(rec, g.views, 1.0f, small.view(), norm.view()); },
      "holds fewer than the " + std::to_string(slots) + " partial sums");
  expectShapeError(
      rec, [&] { ops::clipGradNorm(rec, g.views, 0.0f, scratch.view(), norm.view()); },
      "must be positive");
  expectShapeError(
      rec,
      [&] { ops::clipGradNorm(rec, g.views, 1.0f, scratch.view(), ops::view(norm.buffer, {1})); },
      "norm (1) must hold 2 floats");
  expectShapeError(
      rec, [&] { ops::clipGradNorm(rec, {}, 1.0f, scratch.view(), norm.view()); }, "no gradients");
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

// Dynamic loss scaling, step by step, with the norm written by hand: finite norms unscale
// (and clip) through grad_scale and grow the scale every `interval` clean steps; inf and NaN
// skip the step and halve the scale, down to min_scale; growth stops at max_scale.
TEST_F(OptimizerTest, LossScaleGrowsShrinksAndSkipsOnTheDevice) {
  ops::LossScaleOptions options;
  options.init = 1024.0f;
  options.interval = 3;
  options.min_scale = 256.0f;
  options.max_scale = 4096.0f;
  auto state = stateBuffer(ops::OptimizerState::make(0.1f));
  vk::Buffer norm = ctx().allocator().allocate(8), scale = ctx().allocator().allocate(4);
  ctx().staging().upload(scale, 0, &options.init, 4);
  const std::vector<uint32_t> zeros(3, 0);
  vk::Buffer counters = uploadWords(ctx(), zeros);
  const float inf = std::numeric_limits<float>::infinity();
  struct Step {
    float norm;        // of the scaled gradients
    float max_norm;    // clip (0: none)
    float scale_used;  // the scale the step's gradients carry
    bool skipped;
    float scale_after;
  };
  const Step steps[] = {
      {512.0f, 0.0f, 1024, false, 1024},  // clean 1
      {512.0f, 0.0f, 1024, false, 1024},  // clean 2
      {512.0f, 0.0f, 1024, false, 2048},  // clean 3: grows
      {inf, 0.0f, 2048, true, 1024},      // overflow: skipped, halves
      {std::nanf(""), 0.0f, 1024, true, 512},
      {inf, 0.0f, 512, true, 256},
      {inf, 0.0f, 256, true, 256},       // stays at min_scale
      {2560.0f, 4.0f, 256, false, 256},  // unscaled norm 10, clipped to 4
      {100.0f, 0.0f, 256, false, 256},   //
      {100.0f, 0.0f, 256, false, 512},   // grows after 3 clean
  };
  uint32_t skipped = 0;
  for (const Step& step : steps) {
    SCOPED_TRACE(testing::Message() << "norm " << step.norm << " at scale " << step.scale_used);
    const float values[2] = {step.norm, 0.0f};
    ctx().staging().upload(norm, 0, values, 8);
    vk::Recorder rec(ctx());
    ops::updateLossScale(rec, ops::view(norm, {2}), ops::view(scale, {1}),
                         ops::view(counters, {3}, 0, ops::DType::U32), stateView(state),
                         step.max_norm, options);
    rec.submit();
    const ops::OptimizerState s = readState(state);
    float now;
    ctx().staging().download(scale, 0, &now, 4);
    const auto words = downloadWords(ctx(), counters, 3);
    skipped += step.skipped ? 1 : 0;
    EXPECT_EQ(s.skip, step.skipped ? 1u : 0u);
    EXPECT_EQ(now, step.scale_after);
    EXPECT_EQ(words[1], skipped);
    EXPECT_EQ(words[2], step.skipped ? 1u : 0u);
    if (!step.skipped) {
      const float clip = step.max_norm > 0
                             ? std::min(1.0f, step.max_norm / (step.norm / step.scale_used + 1e-6f))
                             : 1.0f;
      EXPECT_FLOAT_EQ(s.grad_scale, clip / step.scale_used);
    }
  }
}

// A skipped step changes nothing: advanceStep keeps the step count and corrections, adamw and
// sgd keep parameters and moments.
TEST_F(OptimizerTest, ASkippedStepLeavesEverythingAsItWas) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  ops::OptimizerState init = ops::OptimizerState::make(0.1f);
  init.skip = 1;
  auto state = stateBuffer(init);
  const int64_t n = 37;
  const auto p0 = rng.uniform(n), g0 = rng.uniform(n), m0 = rng.uniform(n),
             v0 = rng.uniform(n, 0.1f, 1.0f);
  auto p = upload(ctx(), {n}, p0), g = upload(ctx(), {n}, g0), m = upload(ctx(), {n}, m0);
  auto v = upload(ctx(), {n}, v0), q = upload(ctx(), {n}, p0), vel = upload(ctx(), {n}, m0);
  for (ops::AdamWVariant variant : {ops::AdamWVariant::Storage, ops::AdamWVariant::Texel}) {
    vk::Recorder rec(ctx());
    ops::advanceStep(rec, stateView(state));
    ops::AdamWOptions options;
    options.variant = variant;
    ops::adamw(rec, p.view(), g.view(), m.view(), v.view(), stateView(state), options);
    ops::sgd(rec, q.view(), g.view(), vel.view(), stateView(state));
    rec.submit();
  }
  EXPECT_EQ(readState(state).step, 0u);
  EXPECT_EQ(download(ctx(), p), p0);
  EXPECT_EQ(download(ctx(), m), m0);
  EXPECT_EQ(download(ctx(), v), v0);
  EXPECT_EQ(download(ctx(), q), p0);
  EXPECT_EQ(download(ctx(), vel), m0);
}

}  // namespace
}  // namespace vkgrad::test

#include "vkgrad/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/gradcheck.h"
#include "common/not_run.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "ops/attention_check.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/attention.h"
#include "vkgrad/ops/reference/half.h"

namespace vkgrad::test {
namespace {

using ops::AttentionOptions;
using ops::AttentionTensor;
using ops::Shape;
using ops::Write;

// fp32 sums of up to 257 * 128 products against the fp64 reference: measured errors are
// around 1e-6; 2e-5 leaves room and still fails any wrong index or mask by orders of magnitude.
constexpr double kTolerance = 2e-5;

using ops::AttentionVariant;

struct Case {
  int64_t b, h, tq, tk, d;
  bool causal;
  AttentionVariant variant = AttentionVariant::Shared;
};

// Whether this device runs Texel: a CPU device (lavapipe, where CI runs) with subgroup shuffle
// (ops/attention.cpp). A CPU device without it (the vulkan12-minimum profile) runs Shared only,
// and the test says so; TexelIsRefusedOnGpus checks the refusal.
bool texelRuns(bool note = true) {
  const vk::DeviceInfo& info = sharedContext().info();
  if (!info.isCpu()) return false;
  if (info.subgroup_compute && info.subgroup_shuffle && info.subgroup_size > 0) return true;
  if (note) noteNotRun("the Texel variant", "subgroupShuffle");
  return false;
}

// The kernels this device runs: Shared everywhere, Texel where texelRuns().
std::vector<AttentionVariant> deviceVariants() {
  if (texelRuns()) return {AttentionVariant::Shared, AttentionVariant::Texel};
  return {AttentionVariant::Shared};
}

// Both kernels on every case where the device runs both; the texel one needs D % 4 == 0.
std::vector<Case> bothVariants(Case c) {
  std::vector<Case> cases{c};
  if (c.d % 4 == 0 && texelRuns()) {
    c.variant = AttentionVariant::Texel;
    cases.push_back(c);
  }
  return cases;
}

std::string describe(const Case& c) {
  return "B " + std::to_string(c.b) + " H " + std::to_string(c.h) + " Tq " + std::to_string(c.tq) +
         " Tk " + std::to_string(c.tk) + " D " + std::to_string(c.d) +
         (c.causal ? " causal " : " ") + ops::attentionVariantName(c.variant);
}

ops::ref::AttentionShape refShape(const Case& c) {
  return {c.b, c.h, c.tq, c.tk, c.d, c.causal};
}

class AttentionTest : public VkTest {
 protected:
  // Forward and backward on random data against the fp64 reference (ops/attention_check.h),
  // with every kernel the device runs for the case.
  static void check(const Case& both, Rng& rng, Write w = Write::Overwrite) {
    for (const Case& c : bothVariants(both)) {
      SCOPED_TRACE(describe(c));
      AttentionRun run{c.variant, kTolerance};
      run.write = w;
      AttentionCheck(ctx(), rng, {c.b, c.h, c.h, c.tq, c.tk, c.d, c.causal}, run).run();
    }
  }
};

TEST_F(AttentionTest, MatchesReferenceOverLengthsAndMasks) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (bool causal : {false, true})
    for (int64_t t : {1, 7, 64, 257}) check({1, 2, t, t, 16, causal}, rng);
}

TEST_F(AttentionTest, MatchesReferenceForHeadDims) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (int64_t d : {64, 128, 1, 33})
    for (bool causal : {false, true}) check({2, 3, 37, 37, d, causal}, rng);
}

// Cross-attention: Tq != Tk both ways. Causal with Tq > Tk leaves the first Tq - Tk queries
// with no key at all: zero output, -inf LSE, zero gradients.
TEST_F(AttentionTest, MatchesReferenceWhenQueryAndKeyLengthsDiffer) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (bool causal : {false, true}) {
    check({2, 2, 7, 65, 16, causal}, rng);
    check({1, 3, 70, 9, 64, causal}, rng);
  }
}

TEST_F(AttentionTest, AccumulatesGradients) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  check({1, 2, 33, 17, 16, true}, rng, Write::Accumulate);
}

// O, dQ, dK and dV one float into their buffers: the texel kernels store their rows a float
// at a time there (16 bytes at a time where rows start on 16 bytes, as everywhere above), both
// overwriting and accumulating.
TEST_F(AttentionTest, WritesOutputsAtAFourByteOffset) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case c{2, 3, 37, 37, 16, true};
  const int64_t nq = c.b * c.tq * c.h * c.d, nk = c.b * c.tk * c.h * c.d;
  const Shape sq{c.b, c.tq, c.h, c.d}, sk{c.b, c.tk, c.h, c.d};
  const auto q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk), dout = rng.normal(nq);
  std::vector<float> o(nq), lse(c.b * c.h * c.tq), dq(nq), dk(nk), dv(nk);
  ops::ref::attention(refShape(c), q.data(), k.data(), v.data(), o.data(), lse.data());
  ops::ref::attentionBackward(refShape(c), q.data(), k.data(), v.data(), dout.data(), dq.data(),
                              dk.data(), dv.data());
  auto tq = upload(ctx(), sq, q), tk = upload(ctx(), sk, k), tv = upload(ctx(), sk, v),
       tdout = upload(ctx(), sq, dout);
  for (AttentionVariant variant : deviceVariants()) {
    SCOPED_TRACE(ops::attentionVariantName(variant));
    const AttentionOptions options{c.causal, 0.0f, variant};
    auto to = poisoned(ctx(), sq), to_off = poisoned(ctx(), {nq + 1});
    auto tlse = poisoned(ctx(), {c.b, c.h, c.tq}), scratch = poisoned(ctx(), {c.b * c.h * c.tq});
    auto tdq = poisoned(ctx(), {nq + 1}), tdk = poisoned(ctx(), {nk + 1}),
         tdv = poisoned(ctx(), {nk + 1});
    const AttentionTensor go{ops::view(to_off.buffer, sq, 4)}, gq{ops::view(tdq.buffer, sq, 4)},
        gk{ops::view(tdk.buffer, sk, 4)}, gv{ops::view(tdv.buffer, sk, 4)};
    auto got = [&](const AttentionTensor& t) { return download(ctx(), t.view); };
    vk::Recorder rec(ctx());
    ops::attention(rec, {tq.view()}, {tk.view()}, {tv.view()}, go, tlse.view(), options);
    ops::attention(rec, {tq.view()}, {tk.view()}, {tv.view()}, {to.view()}, tlse.view(), options);
    ops::attentionBackward(rec, {tq.view()}, {tk.view()}, {tv.view()}, {to.view()}, tlse.view(),
                           {tdout.view()}, gq, gk, gv, scratch.view(), options);
    rec.submit();
    EXPECT_TRUE(allClose(got(go), o, kTolerance)) << "o";
    EXPECT_TRUE(allClose(got(gv), dv, kTolerance)) << "dv";
    EXPECT_TRUE(allCloseOnScale(got(gq), dq, maxAbs(dv), kTolerance)) << "dq";
    EXPECT_TRUE(allCloseOnScale(got(gk), dk, maxAbs(dv), kTolerance)) << "dk";
    // Once more, accumulating: twice the gradients.
    vk::Recorder again(ctx());
    ops::attentionBackward(again, {tq.view()}, {tk.view()}, {tv.view()}, {to.view()}, tlse.view(),
                           {tdout.view()}, gq, gk, gv, scratch.view(), options, Write::Accumulate);
    again.submit();
    auto twice = [](std::vector<float> x) {
      for (float& e : x) e *= 2.0f;
      return x;
    };
    EXPECT_TRUE(allClose(got(gv), twice(dv), kTolerance)) << "dv accumulated";
    EXPECT_TRUE(allCloseOnScale(got(gq), twice(dq), 2 * maxAbs(dv), kTolerance))
        << "dq accumulated";
    EXPECT_TRUE(allCloseOnScale(got(gk), twice(dk), 2 * maxAbs(dv), kTolerance))
        << "dk accumulated";
  }
}

// Logits around ±1e4: the online max keeps every exp in range. In fp32 a logit of 1e4 is only
// known to ~1e-3, and softmax turns that into a relative error of the same size, so q and k
// hold multiples of 8 up to 160: every product, sum and the 1/4 scale (D = 16) is exact in
// fp32, and what the comparison measures is the softmax, not the rounding of the logits.
TEST_F(AttentionTest, StaysFiniteForHugeLogits) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case c{1, 1, 19, 23, 16, false};
  const int64_t nq = 19 * 16, nk = 23 * 16;
  auto exactLarge = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& e : x) e = 8.0f * (float(rng.below(41)) - 20.0f);
    return x;
  };
  auto q = exactLarge(nq), k = exactLarge(nk), v = rng.normal(nk);
  std::vector<float> o(nq), lse(19);
  ops::ref::attention(refShape(c), q.data(), k.data(), v.data(), o.data(), lse.data());
  auto tq = upload(ctx(), {1, 19, 1, 16}, q), tk = upload(ctx(), {1, 23, 1, 16}, k),
       tv = upload(ctx(), {1, 23, 1, 16}, v);
  double biggest = 0;
  for (float x : lse) biggest = std::max(biggest, double(std::fabs(x)));
  EXPECT_GT(biggest, 1e3) << "the inputs did not reach large logits";
  for (AttentionVariant variant : deviceVariants()) {
    SCOPED_TRACE(ops::attentionVariantName(variant));
    auto to = poisoned(ctx(), {1, 19, 1, 16}), tlse = poisoned(ctx(), {1, 1, 19});
    vk::Recorder rec(ctx());
    ops::attention(rec, {tq.view()}, {tk.view()}, {tv.view()}, {to.view()}, tlse.view(),
                   {false, 0.0f, variant});
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), to), o, kTolerance));
    // LSE is ~1e4: its error is relative to that, fp32 rounding of the logits included.
    EXPECT_TRUE(allClose(download(ctx(), tlse), lse, 1e-6));
  }
}

// Q, K and V read straight out of one fused projection output (B, T, 3*H*D), and the
// gradients written into one (B, T, 3*H*D) buffer the same way: no transposes anywhere.
TEST_F(AttentionTest, ReadsAndWritesStridedFusedQkv) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (AttentionVariant variant : deviceVariants()) {
    SCOPED_TRACE(ops::attentionVariantName(variant));
    FusedQkvCheck(ctx(), rng, {2, 3, 3, 21, 21, 16, true}, {variant, kTolerance}).run();
  }
}

// The analytic gradients agree with finite differences of the GPU forward itself.
TEST_F(AttentionTest, GradientsMatchFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t b = 1, h = 2, tq = 5, tk = 6, d = 4;  // Auto: texel on lavapipe
  const Shape sq{b, tq, h, d}, sk{b, tk, h, d};
  std::vector<float> q = rng.normal(b * tq * h * d), k = rng.normal(b * tk * h * d),
                     v = rng.normal(b * tk * h * d);
  const auto w = rng.uniform(b * tq * h * d);
  const AttentionOptions options{true};
  auto forward = [&](DeviceTensor& to, DeviceTensor& tlse) {
    auto tq_ = upload(ctx(), sq, q), tk_ = upload(ctx(), sk, k), tv_ = upload(ctx(), sk, v);
    vk::Recorder rec(ctx());
    ops::attention(rec, {tq_.view()}, {tk_.view()}, {tv_.view()}, {to.view()}, tlse.view(),
                   options);
    rec.submit();
  };
  auto loss = [&] {
    auto to = poisoned(ctx(), sq), tlse = poisoned(ctx(), {b, h, tq});
    forward(to, tlse);
    return weightedSum(download(ctx(), to), w);
  };
  auto tq_ = upload(ctx(), sq, q), tk_ = upload(ctx(), sk, k), tv_ = upload(ctx(), sk, v),
       tw = upload(ctx(), sq, w);
  auto to = poisoned(ctx(), sq), tlse = poisoned(ctx(), {b, h, tq});
  auto dq = poisoned(ctx(), sq), dk = poisoned(ctx(), sk), dv = poisoned(ctx(), sk),
       scratch = poisoned(ctx(), {b * h * tq});
  vk::Recorder rec(ctx());
  ops::attention(rec, {tq_.view()}, {tk_.view()}, {tv_.view()}, {to.view()}, tlse.view(), options);
  ops::attentionBackward(rec, {tq_.view()}, {tk_.view()}, {tv_.view()}, {to.view()}, tlse.view(),
                         {tw.view()}, {dq.view()}, {dk.view()}, {dv.view()}, scratch.view(),
                         options);
  rec.submit();
  const auto gq = download(ctx(), dq), gk = download(ctx(), dk), gv = download(ctx(), dv);
  EXPECT_TRUE(checkGradients(loss, {{"q", &q, gq}, {"k", &k, gk}, {"v", &v, gv}}, rng));
}

// The backward's formulas in double from the statistics as the forward stored them (LSE, and
// the row dots as the rowdot pass stored them, each maybe rounded to 16 bits), the way the
// kernels read them: P = exp(scale q·k - lse), dS = P (dO·v - rowdot). Packed (B,T,H,D)
// tensors; dq, dk, dv overwritten.
void backwardFromStats(const ops::ref::AttentionShape& s, const std::vector<float>& q,
                       const std::vector<float>& k, const std::vector<float>& v,
                       const std::vector<float>& dout, const std::vector<float>& lse,
                       const std::vector<float>& rowdot, std::vector<float>& dq,
                       std::vector<float>& dk, std::vector<float>& dv) {
  const double scale = 1.0 / std::sqrt(double(s.d));
  std::vector<double> gq(q.size()), gk(k.size()), gv(v.size());
  auto at = [&](int64_t b, int64_t t, int64_t tt, int64_t h) {
    return ((b * tt + t) * s.h + h) * s.d;
  };
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t i = 0; i < s.tq; ++i) {
        const int64_t row = (b * s.h + h) * s.tq + i;
        if (std::isinf(lse[row])) continue;  // a query that sees no key
        const int64_t end = s.causal ? std::clamp<int64_t>(i + s.tk - s.tq + 1, 0, s.tk) : s.tk;
        const int64_t qi = at(b, i, s.tq, h);
        for (int64_t j = 0; j < end; ++j) {
          const int64_t kj = at(b, j, s.tk, h);
          double dot = 0, dp = 0;
          for (int64_t d = 0; d < s.d; ++d) {
            dot += double(q[qi + d]) * k[kj + d];
            dp += double(dout[qi + d]) * v[kj + d];
          }
          const double p = std::exp(scale * dot - lse[row]), ds = p * (dp - rowdot[row]);
          for (int64_t d = 0; d < s.d; ++d) {
            gq[qi + d] += scale * ds * k[kj + d];
            gk[kj + d] += scale * ds * q[qi + d];
            gv[kj + d] += p * dout[qi + d];
          }
        }
      }
  dq.assign(gq.begin(), gq.end());
  dk.assign(gk.begin(), gk.end());
  dv.assign(gv.begin(), gv.end());
}

// closeInFormat with the f32 tolerance taken on `scale` rather than on want's own largest
// element, for sums that cancel: dQ and dK (on dV's scale, see check()), the row dots and the
// logits inside LSE (on their terms' scale).
::testing::AssertionResult closeOnScale(const std::vector<float>& got,
                                        const std::vector<float>& want, ops::DType dtype,
                                        double scale, double tolerance) {
  double largest = 1e-30;  // closeInFormat's own scale: the largest finite |want|
  for (float w : want)
    if (std::isfinite(w)) largest = std::max(largest, double(std::fabs(w)));
  return closeInFormat(got, want, dtype, tolerance * scale / largest);
}

// The largest scale sum_d |q_d k_d| over every query and key of a head: the scale of the f32
// error of a logit, and so of LSE's (a row of one key has LSE = its logit, which may cancel);
// plus log(Tk) it bounds |LSE|.
double logitTerms(const Case& c, const std::vector<float>& q, const std::vector<float>& k) {
  double worst = 0;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.tq; ++i)
        for (int64_t j = 0; j < c.tk; ++j) {
          double sum = 0;
          for (int64_t d = 0; d < c.d; ++d)
            sum += std::fabs(double(q[((b * c.tq + i) * c.h + h) * c.d + d]) *
                             k[((b * c.tk + j) * c.h + h) * c.d + d]);
          worst = std::max(worst, sum / std::sqrt(double(c.d)));
        }
  return worst;
}

// (B, T, H, D) interleaved as one (B, T, 3, H, D) fused projection, and back.
std::vector<float> fuse(const std::vector<float>& q, const std::vector<float>& k,
                        const std::vector<float>& v, int64_t rows, int64_t hd) {
  std::vector<float> qkv(size_t(3 * rows * hd));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t which = 0; which < 3; ++which) {
      const std::vector<float>& x = which == 0 ? q : which == 1 ? k : v;
      std::copy_n(x.begin() + r * hd, hd, qkv.begin() + (3 * r + which) * hd);
    }
  return qkv;
}
std::vector<float> unfuse(const std::vector<float>& qkv, int64_t which, int64_t rows, int64_t hd) {
  std::vector<float> x(size_t(rows * hd));
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(qkv.begin() + (3 * r + which) * hd, hd, x.begin() + r * hd);
  return x;
}

// Every tensor in 16 bits, or some: q, k, v (and dO) in one format, o in one, dq, dk, dv in
// one, LSE and the row dots in one. The references run on the rounded inputs: the forward's
// (fp64) against o and LSE, the backward's (fp64, backwardFromStats) on the o and LSE the
// forward stored, as a training step feeds them. Tolerances are the f32 tests' (kTolerance:
// the f32 sums' own error) plus, through closeInFormat, the one rounding of each store. Both
// variants: Shared on every shape, Texel on those it takes (D % 4 == 0, rows on 4 elements).
TEST_F(AttentionTest, SixteenBitTensorsMatchCpu) {
  using ops::DType;
  Rng rng;
  SCOPED_TRACE(rng.describe());
  struct Formats {
    DType inputs, o, grads, stats;
  };
  struct Shaped {
    Case c;
    bool fused = false;  // q, k, v and their gradients in one (B, T, 3*H*D) buffer each
    bool accumulate = false;
  };
  // H*D = 99 in the fused case puts k and v an odd number of elements into their buffer, and
  // there o and LSE sit one element in too: 2-byte offsets for 16-bit views. Unfused, o and
  // LSE sit 4 elements in: 8 bytes, half a 16-byte texel, for 16-bit views.
  const Shaped shapes[] = {
      {{1, 1, 1, 1, 16, true}},         {{2, 3, 17, 17, 33, false}, true},
      {{2, 2, 67, 67, 64, true}},       {{1, 3, 17, 67, 16, true}, false, true},
      {{2, 2, 67, 17, 8, true}},  // the first 50 queries see no key: LSE -inf, zero gradients
      {{1, 2, 17, 17, 128, false}},     {{2, 2, 67, 67, 64, true}, false, true},
      {{2, 2, 67, 17, 8, true}, false},
  };
  for (const Formats f : {Formats{DType::F16, DType::F16, DType::F16, DType::F16},
                          Formats{DType::BF16, DType::BF16, DType::BF16, DType::BF16},
                          Formats{DType::BF16, DType::BF16, DType::BF16, DType::F32},
                          Formats{DType::F32, DType::F16, DType::F32, DType::F32}})
    for (const auto& [c, fused, accumulate] : shapes)
      for (const AttentionVariant variant : deviceVariants()) {
        if (variant == AttentionVariant::Texel && (fused || c.d % 4 != 0)) continue;
        SCOPED_TRACE(testing::Message()
                     << ops::attentionVariantName(variant) << " " << describe(c)
                     << (fused ? " fused" : "") << (accumulate ? " accumulate" : "") << ": q,k,v "
                     << ops::dtypeName(f.inputs) << ", o " << ops::dtypeName(f.o) << ", grads "
                     << ops::dtypeName(f.grads) << ", lse " << ops::dtypeName(f.stats));
        const int64_t nq = c.b * c.tq * c.h * c.d, nk = c.b * c.tk * c.h * c.d;
        const int64_t nrows = c.b * c.h * c.tq, hd = c.h * c.d;
        const Shape sq{c.b, c.tq, c.h, c.d}, sk{c.b, c.tk, c.h, c.d};
        const auto q = ops::ref::roundTo(f.inputs, rng.normal(nq)),
                   k = ops::ref::roundTo(f.inputs, rng.normal(nk)),
                   v = ops::ref::roundTo(f.inputs, rng.normal(nk)),
                   dout = ops::ref::roundTo(f.o, rng.normal(nq));
        const auto iq = ops::ref::roundTo(f.grads, rng.normal(nq)),
                   ik = ops::ref::roundTo(f.grads, rng.normal(nk)),
                   iv = ops::ref::roundTo(f.grads, rng.normal(nk));
        std::vector<float> o(nq), lse(nrows);
        ops::ref::attention(refShape(c), q.data(), k.data(), v.data(), o.data(), lse.data());

        const uint64_t in_bytes = ops::dtypeBytes(f.inputs), grad_bytes = ops::dtypeBytes(f.grads);
        DeviceTensor tqkv, tq, tk, tv, tgrad, tdq, tdk, tdv;
        AttentionTensor aq, ak, av, adq, adk, adv;
        if (fused) {
          const int64_t row = 3 * hd;
          tqkv = upload(ctx(), {3 * nq}, fuse(q, k, v, c.b * c.tq, hd), f.inputs);
          tgrad = accumulate ? upload(ctx(), {3 * nq}, fuse(iq, ik, iv, c.b * c.tq, hd), f.grads)
                             : poisoned(ctx(), {3 * nq}, f.grads);
          auto part = [&](const DeviceTensor& t, int64_t which, uint64_t bytes) {
            return AttentionTensor{ops::view(t.buffer, sq, which * hd * bytes, t.dtype), row};
          };
          aq = part(tqkv, 0, in_bytes), ak = part(tqkv, 1, in_bytes), av = part(tqkv, 2, in_bytes);
          adq = part(tgrad, 0, grad_bytes), adk = part(tgrad, 1, grad_bytes),
          adv = part(tgrad, 2, grad_bytes);
        } else {
          tq = upload(ctx(), sq, q, f.inputs), tk = upload(ctx(), sk, k, f.inputs),
          tv = upload(ctx(), sk, v, f.inputs);
          tdq = accumulate ? upload(ctx(), sq, iq, f.grads) : poisoned(ctx(), sq, f.grads);
          tdk = accumulate ? upload(ctx(), sk, ik, f.grads) : poisoned(ctx(), sk, f.grads);
          tdv = accumulate ? upload(ctx(), sk, iv, f.grads) : poisoned(ctx(), sk, f.grads);
          aq = {tq.view()}, ak = {tk.view()}, av = {tv.view()};
          adq = {tdq.view()}, adk = {tdk.view()}, adv = {tdv.view()};
        }
        const int64_t lead = fused ? 1 : 4;  // elements before o and LSE in their buffers
        auto to = poisoned(ctx(), {nq + lead}, f.o),
             tlse = poisoned(ctx(), {nrows + lead}, f.stats);
        const AttentionTensor ao{ops::view(to.buffer, sq, lead * ops::dtypeBytes(f.o), f.o)};
        const ops::TensorView lse_view =
            ops::view(tlse.buffer, {c.b, c.h, c.tq}, lead * ops::dtypeBytes(f.stats), f.stats);
        auto tdout = upload(ctx(), sq, dout, f.o), scratch = poisoned(ctx(), {nrows}, f.stats);
        const AttentionOptions options{c.causal, 0.0f, variant};
        vk::Recorder rec(ctx());
        ops::attention(rec, aq, ak, av, ao, lse_view, options);
        ops::attentionBackward(rec, aq, ak, av, ao, lse_view, {tdout.view()}, adq, adk, adv,
                               scratch.view(), options,
                               accumulate ? Write::Accumulate : Write::Overwrite);
        rec.submit();

        const auto o_got = download(ctx(), ao.view), lse_got = download(ctx(), lse_view);
        EXPECT_TRUE(closeInFormat(o_got, o, f.o, kTolerance)) << "o";
        EXPECT_TRUE(
            closeOnScale(lse_got, lse, f.stats, logitTerms(c, q, k) + std::log(c.tk), kTolerance))
            << "lse";
        // The row dots dO·O of the stored O: D f32 products and sums, then one store. The sums
        // cancel (one row of 16 terms of ~1 can sum to 0.01), so their f32 error is on the scale
        // of the terms, sum |dO o|.
        std::vector<float> rowdot(nrows);
        double terms = 0;
        for (int64_t b = 0; b < c.b; ++b)
          for (int64_t h = 0; h < c.h; ++h)
            for (int64_t i = 0; i < c.tq; ++i) {
              double sum = 0, magnitude = 0;
              for (int64_t d = 0; d < c.d; ++d) {
                const int64_t at = ((b * c.tq + i) * c.h + h) * c.d + d;
                sum += double(o_got[at]) * dout[at];
                magnitude += std::fabs(double(o_got[at]) * dout[at]);
              }
              rowdot[(b * c.h + h) * c.tq + i] = float(sum);
              terms = std::max(terms, magnitude);
            }
        const auto rowdot_got = download(ctx(), scratch);
        EXPECT_TRUE(closeOnScale(rowdot_got, rowdot, f.stats, terms, kTolerance)) << "row dots";

        std::vector<float> dq, dk, dv;
        backwardFromStats(refShape(c), q, k, v, dout, lse_got, rowdot_got, dq, dk, dv);
        const double dv_scale = maxAbs(dv);
        if (accumulate)
          for (auto [x, init] : {std::pair{&dq, &iq}, std::pair{&dk, &ik}, std::pair{&dv, &iv}})
            for (size_t i = 0; i < x->size(); ++i) (*x)[i] += (*init)[i];
        std::vector<float> dq_got, dk_got, dv_got;
        if (fused) {
          const auto grad = download(ctx(), tgrad);
          dq_got = unfuse(grad, 0, c.b * c.tq, hd), dk_got = unfuse(grad, 1, c.b * c.tq, hd),
          dv_got = unfuse(grad, 2, c.b * c.tq, hd);
        } else {
          dq_got = download(ctx(), tdq), dk_got = download(ctx(), tdk),
          dv_got = download(ctx(), tdv);
        }
        EXPECT_TRUE(closeInFormat(dv_got, dv, f.grads, kTolerance)) << "dv";
        EXPECT_TRUE(closeOnScale(dq_got, dq, f.grads, dv_scale, kTolerance)) << "dq";
        EXPECT_TRUE(closeOnScale(dk_got, dk, f.grads, dv_scale, kTolerance)) << "dk";
      }
}

TEST_F(AttentionTest, RejectsBadShapesBeforeRecording) {
  auto q = poisoned(ctx(), {1, 8, 2, 16}), k = poisoned(ctx(), {1, 9, 2, 16}),
       lse = poisoned(ctx(), {1, 2, 8}), big = poisoned(ctx(), {1, 8, 2, 512});
  vk::Recorder rec(ctx());
  const AttentionTensor tq{q.view()}, tk{k.view()};
  expectShapeError(
      rec, [&] { ops::attention(rec, tq, tk, tq, tq, lse.view()); },
      "attention: v (1,8,2,16) must be (1,9,2,16) (B,T,H,D)");
  expectShapeError(
      rec,
      [&] {
        ops::attention(rec, tq, tk, tk, tq, ops::view(lse.buffer, {1, 8, 2}));
      },
      "attention: lse (1,8,2) must be (1,2,8) (B,H,Tq)");
  expectShapeError(
      rec,
      [&] {
        ops::attention(rec, {q.view(), 16}, tk, tk, tq, lse.view());
      },
      "attention: q row stride 16 is less than H*D = 32");
  expectShapeError(
      rec,
      [&] {
        ops::attention(rec, {q.view(), 40}, tk, tk, tq, lse.view());
      },
      "attention: q (1,8,2,16) with row stride 40 needs");
  const AttentionTensor tb{big.view()};
  expectShapeError(
      rec, [&] { ops::attention(rec, tb, tb, tb, tb, lse.view()); },
      "attention: head dim 512 is above the supported 256");
  expectShapeError(
      rec,
      [&] {
        ops::attentionBackward(rec, tq, tk, tk, tq, lse.view(), tq, tq, tk, tk,
                               ops::view(lse.buffer, {7}));
      },
      "attentionBackward: scratch (7) needs at least 16 elements");
}

// Texel runs on CPU devices with subgroup shuffle only (ops/attention.cpp says why); elsewhere
// (a GPU, or a profile without shuffle) asking for it is a clear error before anything is
// recorded, and Auto takes Shared.
// A CPU device ends an invocation after 65,535 loop iterations and keeps what it has; the
// shared-memory kernels loop over every key a query row meets (and every query a key row
// meets), twice over D: on lavapipe 500 keys at D = 64 gave wrong rows without a word. There
// they are refused by name past the budget (ops/attention.cpp); a GPU runs them.
TEST_F(AttentionTest, SharedRefusesRowsPastACpuDevicesLoopBudget) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const AttentionRun run{AttentionVariant::Shared, kTolerance};
  for (const AttentionProblem& p : {AttentionProblem{1, 1, 1, 1, 600, 64, false},
                                    AttentionProblem{1, 2, 1, 300, 8, 64, false}}) {
    const AttentionCheck check(ctx(), rng, p, run);
    if (ctx().info().isCpu())
      expectError(
          ctx(), [&](vk::Recorder& rec) { check.record(rec); },
          "the shared-memory kernel would loop over 600 rows of D = 64");
    else
      check.run();
  }
}

TEST_F(AttentionTest, TexelIsRefusedOnGpus) {
  Rng rng;
  auto q = upload(ctx(), {1, 8, 2, 16}, rng.uniform(256)), o = poisoned(ctx(), {1, 8, 2, 16}),
       lse = poisoned(ctx(), {1, 2, 8});
  vk::Recorder rec(ctx());
  const AttentionTensor tq{q.view()};
  const ops::AttentionOptions texel{false, 0.0f, AttentionVariant::Texel};
  if (texelRuns(/*note=*/false)) {
    ops::attention(rec, tq, tq, tq, {o.view()}, lse.view(), texel);
    EXPECT_EQ(rec.dispatchCount(), 1u);
  } else {
    try {
      ops::attention(rec, tq, tq, tq, {o.view()}, lse.view(), texel);
      ADD_FAILURE() << "texel ran on " << ctx().info().name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the texel variant needs a CPU device"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(rec.dispatchCount(), 0u);
  }
}

}  // namespace
}  // namespace vkgrad::test

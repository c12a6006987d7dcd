#include "vkgrad/ops/attention.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/expect.h"
#include "common/device_tensor.h"
#include "common/gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/attention.h"
#include "vkgrad/core/error.h"

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

// The kernels this device runs: Shared everywhere, Texel on CPU devices (lavapipe, where CI
// runs); TexelIsRefusedOnGpus checks the refusal elsewhere.
std::vector<AttentionVariant> deviceVariants() {
  if (sharedContext().info().isCpu()) return {AttentionVariant::Shared, AttentionVariant::Texel};
  return {AttentionVariant::Shared};
}

// Both kernels on every case where the device runs both; the texel one needs D % 4 == 0.
std::vector<Case> bothVariants(Case c) {
  std::vector<Case> cases{c};
  if (c.d % 4 == 0 && sharedContext().info().isCpu()) {
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

double maxAbs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, double(std::fabs(v)));
  return m;
}

ops::ref::AttentionShape refShape(const Case& c) {
  return {c.b, c.h, c.tq, c.tk, c.d, c.causal};
}

class AttentionTest : public VkTest {
 protected:
  // Runs forward and backward on random data and compares o, lse, dq, dk, dv with the fp64
  // reference. Gradients start as `init` when accumulating, else poisoned.
  static void check(const Case& both, Rng& rng, Write w = Write::Overwrite) {
    for (const Case& c : bothVariants(both)) checkOne(c, rng, w);
  }
  static void checkOne(const Case& c, Rng& rng, Write w) {
    SCOPED_TRACE(describe(c));
    const int64_t nq = c.b * c.tq * c.h * c.d, nk = c.b * c.tk * c.h * c.d;
    const auto q = rng.normal(nq), k = rng.normal(nk), v = rng.normal(nk), dout = rng.normal(nq);
    std::vector<float> o(nq), lse(c.b * c.h * c.tq), dq(nq), dk(nk), dv(nk);
    ops::ref::attention(refShape(c), q.data(), k.data(), v.data(), o.data(), lse.data());
    ops::ref::attentionBackward(refShape(c), q.data(), k.data(), v.data(), dout.data(), dq.data(),
                                dk.data(), dv.data());

    const Shape sq{c.b, c.tq, c.h, c.d}, sk{c.b, c.tk, c.h, c.d};
    auto tq = upload(ctx(), sq, q), tk = upload(ctx(), sk, k), tv = upload(ctx(), sk, v),
         tdout = upload(ctx(), sq, dout);
    auto to = poisoned(ctx(), sq), tlse = poisoned(ctx(), {c.b, c.h, c.tq});
    const bool acc = w == Write::Accumulate;
    const auto iq = rng.normal(nq), ik = rng.normal(nk), iv = rng.normal(nk);
    auto tdq = acc ? upload(ctx(), sq, iq) : poisoned(ctx(), sq);
    auto tdk = acc ? upload(ctx(), sk, ik) : poisoned(ctx(), sk);
    auto tdv = acc ? upload(ctx(), sk, iv) : poisoned(ctx(), sk);
    auto scratch = poisoned(ctx(), {c.b * c.h * c.tq});
    const AttentionOptions options{c.causal, 0.0f, c.variant};
    vk::Recorder rec(ctx());
    ops::attention(rec, {tq.view()}, {tk.view()}, {tv.view()}, {to.view()}, tlse.view(), options);
    ops::attentionBackward(rec, {tq.view()}, {tk.view()}, {tv.view()}, {to.view()}, tlse.view(),
                           {tdout.view()}, {tdq.view()}, {tdk.view()}, {tdv.view()},
                           scratch.view(), options, w);
    rec.submit();
    auto plus = [&](std::vector<float> x, const std::vector<float>& y) {
      if (acc)
        for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
      return x;
    };
    EXPECT_TRUE(allClose(download(ctx(), to), o, kTolerance)) << "o";
    EXPECT_TRUE(allClose(download(ctx(), tlse), lse, kTolerance)) << "lse";
    // dQ and dK are sums of terms p (dO·v - dO·o) k that cancel exactly in some cases (one
    // visible key: softmax is constant); their rounding is on the scale of dV's terms p dO.
    const auto [dq_got, dk_got] = std::pair{download(ctx(), tdq), download(ctx(), tdk)};
    EXPECT_TRUE(allClose(download(ctx(), tdv), plus(dv, iv), kTolerance)) << "dv";
    EXPECT_TRUE(allCloseOnScale(dq_got, plus(dq, iq), maxAbs(dv), kTolerance)) << "dq";
    EXPECT_TRUE(allCloseOnScale(dk_got, plus(dk, ik), maxAbs(dv), kTolerance)) << "dk";
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
  const int64_t b = 2, t = 21, h = 3, d = 16, row = 3 * h * d, n = b * t * row;
  const auto qkv = rng.normal(n), dout = rng.normal(b * t * h * d);
  ops::ref::AttentionShape s{b, h, t, t, d, true};
  s.q_stride = s.k_stride = s.v_stride = row;
  std::vector<float> o(b * t * h * d), lse(b * h * t), grad(n, 0.0f);
  ops::ref::attention(s, qkv.data(), qkv.data() + h * d, qkv.data() + 2 * h * d, o.data(),
                      lse.data());
  ops::ref::attentionBackward(s, qkv.data(), qkv.data() + h * d, qkv.data() + 2 * h * d,
                              dout.data(), grad.data(), grad.data() + h * d,
                              grad.data() + 2 * h * d);
  auto tqkv = upload(ctx(), {n}, qkv), tdout = upload(ctx(), {b, t, h, d}, dout);
  auto to = poisoned(ctx(), {b, t, h, d}), tlse = poisoned(ctx(), {b, h, t});
  auto tgrad = poisoned(ctx(), {n}), scratch = poisoned(ctx(), {b * h * t});
  auto part = [&](const DeviceTensor& x, int64_t which) {
    return AttentionTensor{ops::view(x.buffer, {b, t, h, d}, uint64_t(which * h * d * 4)), row};
  };
  for (AttentionVariant variant : deviceVariants()) {
    SCOPED_TRACE(ops::attentionVariantName(variant));
    vk::Recorder rec(ctx());
    const AttentionOptions options{true, 0.0f, variant};
    ops::attention(rec, part(tqkv, 0), part(tqkv, 1), part(tqkv, 2), {to.view()}, tlse.view(),
                   options);
    ops::attentionBackward(rec, part(tqkv, 0), part(tqkv, 1), part(tqkv, 2), {to.view()},
                           tlse.view(), {tdout.view()}, part(tgrad, 0), part(tgrad, 1),
                           part(tgrad, 2), scratch.view(), options);
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), to), o, kTolerance));
    EXPECT_TRUE(allClose(download(ctx(), tgrad), grad, kTolerance));
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
    ops::attention(rec, {tq_.view()}, {tk_.view()}, {tv_.view()}, {to.view()}, tlse.view(), options);
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

TEST_F(AttentionTest, RejectsBadShapesBeforeRecording) {
  auto q = poisoned(ctx(), {1, 8, 2, 16}), k = poisoned(ctx(), {1, 9, 2, 16}),
       lse = poisoned(ctx(), {1, 2, 8}), big = poisoned(ctx(), {1, 8, 2, 512});
  vk::Recorder rec(ctx());
  const AttentionTensor tq{q.view()}, tk{k.view()};
  expectShapeError(rec, [&] { ops::attention(rec, tq, tk, tq, tq, lse.view()); },
                   "attention: v (1,8,2,16) must be (1,9,2,16) (B,T,H,D)");
  expectShapeError(rec, [&] { ops::attention(rec, tq, tk, tk, tq, ops::view(lse.buffer, {1, 8, 2})); },
                   "attention: lse (1,8,2) must be (1,2,8) (B,H,Tq)");
  expectShapeError(rec, [&] { ops::attention(rec, {q.view(), 16}, tk, tk, tq, lse.view()); },
                   "attention: q row stride 16 is less than H*D = 32");
  expectShapeError(rec, [&] { ops::attention(rec, {q.view(), 40}, tk, tk, tq, lse.view()); },
                   "attention: q (1,8,2,16) with row stride 40 needs");
  const AttentionTensor tb{big.view()};
  expectShapeError(rec, [&] { ops::attention(rec, tb, tb, tb, tb, lse.view()); },
                   "attention: head dim 512 is above the supported 256");
  expectShapeError(rec, [&] {
    ops::attentionBackward(rec, tq, tk, tk, tq, lse.view(), tq, tq, tk, tk,
                           ops::view(lse.buffer, {7}));
  }, "attentionBackward: scratch (7) needs at least 16 elements");
}

// Texel runs on CPU devices only (ops/attention.cpp says why); elsewhere asking for it is a
// clear error before anything is recorded, and Auto takes Shared.
TEST_F(AttentionTest, TexelIsRefusedOnGpus) {
  Rng rng;
  auto q = upload(ctx(), {1, 8, 2, 16}, rng.uniform(256)), o = poisoned(ctx(), {1, 8, 2, 16}),
       lse = poisoned(ctx(), {1, 2, 8});
  vk::Recorder rec(ctx());
  const AttentionTensor tq{q.view()};
  const ops::AttentionOptions texel{false, 0.0f, AttentionVariant::Texel};
  if (ctx().info().isCpu()) {
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

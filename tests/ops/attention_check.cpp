#include "ops/attention_check.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "common/compare.h"
#include "common/expect.h"
#include "vkgrad/ops/reference/attention.h"
#include "vkgrad/ops/reference/half.h"

namespace vkgrad::test {
namespace {

std::vector<float> inputValues(Rng& rng, int64_t n, const AttentionRun& run) {
  return run.half_exact ? ops::ref::roundToHalf(rng.normal(n))
                        : ops::ref::roundTo(run.inputs, rng.normal(n));
}

ops::ref::AttentionShape refShape(const AttentionProblem& p) {
  ops::ref::AttentionShape s{p.b, p.h, p.tq, p.tk, p.d, p.causal};
  s.hkv = p.hkv;
  return s;
}

}  // namespace

double maxAbs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, double(std::fabs(v)));
  return m;
}

AttentionCheck::AttentionCheck(vk::Context& context, Rng& rng, const AttentionProblem& p,
                               const AttentionRun& run)
    : context_(context), p_(p), run_(run) {
  const int64_t nq = p.b * p.tq * p.h * p.d, nk = p.b * p.tk * p.hkv * p.d;
  const auto q = inputValues(rng, nq, run), k = inputValues(rng, nk, run),
             v = inputValues(rng, nk, run), dout = inputValues(rng, nq, run);
  o_.resize(size_t(nq));
  lse_.resize(size_t(p.b * p.h * p.tq));
  dq_.resize(size_t(nq));
  dk_.resize(size_t(nk));
  dv_.resize(size_t(nk));
  ops::ref::attention(refShape(p), q.data(), k.data(), v.data(), o_.data(), lse_.data());
  ops::ref::attentionBackward(refShape(p), q.data(), k.data(), v.data(), dout.data(), dq_.data(),
                              dk_.data(), dv_.data());

  const ops::Shape sq{p.b, p.tq, p.h, p.d}, sk{p.b, p.tk, p.hkv, p.d};
  q_ = upload(context, sq, q, run.inputs);
  k_ = upload(context, sk, k, run.inputs);
  v_ = upload(context, sk, v, run.inputs);
  dout_ = upload(context, sq, dout, run.inputs);
  o_dev_ = poisoned(context, sq);
  lse_dev_ = poisoned(context, {p.b, p.h, p.tq});
  scratch_ = poisoned(context, {p.b * p.h * p.tq});
  // Accumulating: the gradients start random and the reference adds that start.
  auto start = [&](const ops::Shape& s, std::vector<float>& want) {
    if (run.write != ops::Write::Accumulate) return poisoned(context, s);
    const std::vector<float> init = rng.normal(s.numel());
    for (size_t i = 0; i < want.size(); ++i) want[i] += init[i];
    return upload(context, s, init);
  };
  // dQ and dK are compared on dV's scale (expectMatches): taken before dV gets its start.
  dv_scale_ = maxAbs(dv_);
  dq_dev_ = start(sq, dq_);
  dk_dev_ = start(sk, dk_);
  dv_dev_ = start(sk, dv_);
}

void AttentionCheck::record(vk::Recorder& rec) const {
  const ops::AttentionOptions options{p_.causal, 0.0f, run_.variant};
  ops::attention(rec, {q_.view()}, {k_.view()}, {v_.view()}, {o_dev_.view()}, lse_dev_.view(),
                 options);
  ops::attentionBackward(rec, {q_.view()}, {k_.view()}, {v_.view()}, {o_dev_.view()},
                         lse_dev_.view(), {dout_.view()}, {dq_dev_.view()}, {dk_dev_.view()},
                         {dv_dev_.view()}, scratch_.view(), options, run_.write);
}

void AttentionCheck::expectMatches() const {
  const double tol = run_.tolerance;
  EXPECT_TRUE(allClose(download(context_, o_dev_), o_, tol)) << "o";
  EXPECT_TRUE(allClose(download(context_, lse_dev_), lse_, tol)) << "lse";
  // dQ and dK are sums of terms p (dO·v - dO·o) k that cancel exactly in some cases (one
  // visible key: softmax is constant); their rounding is on the scale of dV's terms p dO.
  EXPECT_TRUE(allClose(download(context_, dv_dev_), dv_, tol)) << "dv";
  EXPECT_TRUE(allCloseOnScale(download(context_, dq_dev_), dq_, dv_scale_, tol)) << "dq";
  EXPECT_TRUE(allCloseOnScale(download(context_, dk_dev_), dk_, dv_scale_, tol)) << "dk";
}

void AttentionCheck::run() const {
  vk::Recorder rec(context_);
  record(rec);
  rec.submit();
  expectMatches();
}

FusedQkvCheck::FusedQkvCheck(vk::Context& context, Rng& rng, const AttentionProblem& p,
                             const AttentionRun& run)
    : context_(context), p_(p), run_(run), row_((p.h + 2 * p.hkv) * p.d) {
  const int64_t n = p.b * p.tq * row_, no = p.b * p.tq * p.h * p.d;
  const auto qkv = inputValues(rng, n, run), dout = inputValues(rng, no, run);
  ops::ref::AttentionShape s = refShape(p);
  s.q_stride = s.k_stride = s.v_stride = row_;
  o_.resize(size_t(no));
  lse_.resize(size_t(p.b * p.h * p.tq));
  grad_.assign(size_t(n), 0.0f);
  const int64_t k_at = p.h * p.d, v_at = (p.h + p.hkv) * p.d;
  ops::ref::attention(s, qkv.data(), qkv.data() + k_at, qkv.data() + v_at, o_.data(), lse_.data());
  ops::ref::attentionBackward(s, qkv.data(), qkv.data() + k_at, qkv.data() + v_at, dout.data(),
                              grad_.data(), grad_.data() + k_at, grad_.data() + v_at);
  qkv_ = upload(context, {n}, qkv);
  dout_ = upload(context, {p.b, p.tq, p.h, p.d}, dout);
  o_dev_ = poisoned(context, {p.b, p.tq, p.h, p.d});
  lse_dev_ = poisoned(context, {p.b, p.h, p.tq});
  grad_dev_ = poisoned(context, {n});
  scratch_ = poisoned(context, {p.b * p.h * p.tq});
}

ops::AttentionTensor FusedQkvCheck::part(const DeviceTensor& x, int64_t first_head,
                                         int64_t heads) const {
  return {ops::view(x.buffer, {p_.b, p_.tq, heads, p_.d}, uint64_t(first_head * p_.d * 4)), row_};
}

void FusedQkvCheck::record(vk::Recorder& rec) const {
  const ops::AttentionOptions options{p_.causal, 0.0f, run_.variant};
  const int64_t h = p_.h, hkv = p_.hkv;
  ops::attention(rec, part(qkv_, 0, h), part(qkv_, h, hkv), part(qkv_, h + hkv, hkv),
                 {o_dev_.view()}, lse_dev_.view(), options);
  ops::attentionBackward(rec, part(qkv_, 0, h), part(qkv_, h, hkv), part(qkv_, h + hkv, hkv),
                         {o_dev_.view()}, lse_dev_.view(), {dout_.view()}, part(grad_dev_, 0, h),
                         part(grad_dev_, h, hkv), part(grad_dev_, h + hkv, hkv), scratch_.view(),
                         options);
}

void FusedQkvCheck::expectMatches() const {
  EXPECT_TRUE(allClose(download(context_, o_dev_), o_, run_.tolerance)) << "o";
  EXPECT_TRUE(allClose(download(context_, grad_dev_), grad_, run_.tolerance)) << "dq, dk, dv";
}

void FusedQkvCheck::run() const {
  vk::Recorder rec(context_);
  record(rec);
  rec.submit();
  expectMatches();
}

}  // namespace vkgrad::test

#include "vkgrad/ops/attention_unfused.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/elementwise.h"
#include "vkgrad/ops/matmul.h"
#include "vkgrad/ops/permute.h"
#include "vkgrad/ops/softmax.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::ops {
namespace {

// (B,T,H,D) <-> (B,H,T,D): the same permutation both ways.
constexpr int kHeads[] = {0, 2, 1, 3};

vk::Buffer floats(vk::Context& context, int64_t n) {
  return context.allocator().allocate(uint64_t(n) * 4);
}

}  // namespace

UnfusedAttention::UnfusedAttention(vk::Context& context, const Shape& q, const Shape& k,
                                   const AttentionOptions& options)
    : options_(options) {
  // The oracle and baseline of multi-head attention only; grouped-query attention is the
  // flash kernels' (a wrong answer is never given: k's heads must be q's).
  if (q.rank() == 4 && k.rank() == 4 && q[2] != k[2] && k[2] > 0 && q[2] % k[2] == 0)
    throw ShapeError("UnfusedAttention: the unfused variant does not do grouped-query " +
                     std::string("attention: q ") + q.str() + " has " + std::to_string(q[2]) +
                     " heads, k " + k.str() + " " + std::to_string(k[2]) +
                     " (use the flash kernels, ops/attention.h)");
  if (q.rank() != 4 || k.rank() != 4 || q[0] != k[0] || q[2] != k[2] || q[3] != k[3])
    throw ShapeError("UnfusedAttention: q " + q.str() + ", k " + k.str() +
                     " must be (B,Tq,H,D) and (B,Tk,H,D)");
  b_ = q[0], tq_ = q[1], h_ = q[2], d_ = q[3], tk_ = k[1];
  const int64_t bh = b_ * h_;
  qh_ = floats(context, bh * tq_ * d_), dqh_ = floats(context, bh * tq_ * d_);
  oh_ = floats(context, bh * tq_ * d_);
  kh_ = floats(context, bh * tk_ * d_), dkh_ = floats(context, bh * tk_ * d_);
  vh_ = floats(context, bh * tk_ * d_), dvh_ = floats(context, bh * tk_ * d_);
  p_ = floats(context, bh * tq_ * tk_), dp_ = floats(context, bh * tq_ * tk_);
  // P of a chunk of heads is one binding: it must fit maxStorageBufferRange.
  const uint64_t per_head = uint64_t(tq_ * tk_) * 4;
  chunk_ = std::max<int64_t>(1, int64_t(context.info().max_storage_buffer_range / per_head));
  if (per_head > context.info().max_storage_buffer_range)
    throw ShapeError("UnfusedAttention: one head's scores (" + std::to_string(tq_) + "x" +
                     std::to_string(tk_) + " floats) exceed the device's largest storage binding");
  if (options_.causal) {
    // 0 where query i sees key j (j <= i + Tk - Tq), -inf elsewhere; added to every head.
    std::vector<float> mask(size_t(tq_ * tk_));
    for (int64_t i = 0; i < tq_; ++i)
      for (int64_t j = 0; j < tk_; ++j)
        mask[i * tk_ + j] = j <= i + tk_ - tq_ ? 0.0f : -std::numeric_limits<float>::infinity();
    mask_ = floats(context, tq_ * tk_);
    context.staging().upload(mask_, 0, mask.data(), mask.size() * 4);
  }
}

template <typename F>
void UnfusedAttention::forChunks(F f) const {
  for (int64_t first = 0; first < b_ * h_; first += chunk_)
    f(first, std::min(chunk_, b_ * h_ - first));
}

void UnfusedAttention::forward(vk::Recorder& rec, const TensorView& q, const TensorView& k,
                               const TensorView& v, const TensorView& o) {
  permute(rec, q, view(qh_, {b_, h_, tq_, d_}), kHeads);
  permute(rec, k, view(kh_, {b_, h_, tk_, d_}), kHeads);
  permute(rec, v, view(vh_, {b_, h_, tk_, d_}), kHeads);
  MatmulOptions scores;
  scores.trans_b = true;
  scores.alpha = options_.scale != 0.0f ? options_.scale : float(1.0 / std::sqrt(double(d_)));
  forChunks([&](int64_t first, int64_t n) {
    const TensorView s = view(p_, {n, tq_, tk_}, uint64_t(first * tq_ * tk_) * 4);
    matmul(rec, view(qh_, {n, tq_, d_}, uint64_t(first * tq_ * d_) * 4),
           view(kh_, {n, tk_, d_}, uint64_t(first * tk_ * d_) * 4), s, scores);
    if (options_.causal) add(rec, s, view(mask_, {tq_, tk_}), s);
    softmax(rec, s, s);
    matmul(rec, s, view(vh_, {n, tk_, d_}, uint64_t(first * tk_ * d_) * 4),
           view(oh_, {n, tq_, d_}, uint64_t(first * tq_ * d_) * 4));
  });
  permute(rec, view(oh_, {b_, h_, tq_, d_}), o, kHeads);
}

void UnfusedAttention::backward(vk::Recorder& rec, const TensorView& dout, const TensorView& dq,
                                const TensorView& dk, const TensorView& dv) {
  // The head-major dO reuses oh_: forward's O is not needed again.
  permute(rec, dout, view(oh_, {b_, h_, tq_, d_}), kHeads);
  MatmulOptions scores;
  scores.trans_b = true;
  scores.alpha = options_.scale != 0.0f ? options_.scale : float(1.0 / std::sqrt(double(d_)));
  forChunks([&](int64_t first, int64_t n) {
    const uint64_t at_q = uint64_t(first * tq_ * d_) * 4, at_k = uint64_t(first * tk_ * d_) * 4,
                   at_p = uint64_t(first * tq_ * tk_) * 4;
    const TensorView p = view(p_, {n, tq_, tk_}, at_p), dp = view(dp_, {n, tq_, tk_}, at_p);
    const TensorView dvh = view(dvh_, {n, tk_, d_}, at_k), dqh = view(dqh_, {n, tq_, d_}, at_q),
                     dkh = view(dkh_, {n, tk_, d_}, at_k);
    // O = P·V: dP = dO·Vᵀ, dV = Pᵀ·dO.
    matmulBackward(rec, p, view(vh_, {n, tk_, d_}, at_k), view(oh_, {n, tq_, d_}, at_q),
                   {&dp, &dvh});
    // P = softmax(S): dS, in place over dP. The mask add passes dS through unchanged.
    softmaxBackward(rec, p, dp, dp);
    // S = scale·Q·Kᵀ: dQ = scale·dS·K, dK = scale·dSᵀ·Q.
    matmulBackward(rec, view(qh_, {n, tq_, d_}, at_q), view(kh_, {n, tk_, d_}, at_k), dp,
                   {&dqh, &dkh}, scores);
  });
  permute(rec, view(dqh_, {b_, h_, tq_, d_}), dq, kHeads);
  permute(rec, view(dkh_, {b_, h_, tk_, d_}), dk, kHeads);
  permute(rec, view(dvh_, {b_, h_, tk_, d_}), dv, kHeads);
}

}  // namespace vkgrad::ops

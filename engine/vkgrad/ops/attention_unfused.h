// Attention the plain way, out of the op library: per head S = scale·Q·Kᵀ (+ causal mask),
// P = softmax(S), O = P·V, and its backward through the same ops' backward passes. It stores
// P, so it needs B·H·Tq·Tk floats where flash attention needs none: the oracle the flash
// kernels are tested against and the baseline vkgrad-bench compares them with. Same layouts,
// mask and results as ops/attention.h (packed (B,T,H,D) tensors only; k and v with fewer
// heads than q, grouped-query attention, are refused with a ShapeError). Heads go through the
// per-head ops in chunks small enough for the device's largest storage binding.
#pragma once

#include "vkgrad/ops/attention.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::ops {

class UnfusedAttention {
 public:
  // Allocates the work buffers for q (B,Tq,H,D) and k, v (B,Tk,H,D); Throws OutOfMemoryError
  // when B·H·Tq·Tk floats do not fit.
  UnfusedAttention(vk::Context& context, const Shape& q, const Shape& k,
                   const AttentionOptions& options = {});

  // o (B,Tq,H,D) = attention(q, k, v); keeps P for backward().
  void forward(vk::Recorder& rec, const TensorView& q, const TensorView& k, const TensorView& v,
               const TensorView& o);
  // dq, dk, dv (=) the gradients of sum(dout ∘ o) for the last forward()'s q, k, v.
  void backward(vk::Recorder& rec, const TensorView& dout, const TensorView& dq,
                const TensorView& dk, const TensorView& dv);

 private:
  // Records f(first head, heads) for each chunk of the B·H heads.
  template <typename F>
  void forChunks(F f) const;

  int64_t b_, h_, tq_, tk_, d_, chunk_;
  AttentionOptions options_;
  // Per-head copies (B·H, T, D), scores/probabilities (B·H, Tq, Tk), the causal mask (Tq, Tk).
  vk::Buffer qh_, kh_, vh_, oh_, p_, dp_, mask_;
  vk::Buffer dqh_, dkh_, dvh_;
};

}  // namespace vkgrad::ops

// CPU reference for attention, in double: the oracle for the flash kernels' tests.
// Layouts as in ops/attention.h: q (B,Tq,H,D), k and v (B,Tk,H,D), o like q, each with a
// row stride (elements between consecutive tokens); lse (B,H,Tq), contiguous.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

struct AttentionShape {
  int64_t b, h, tq, tk, d;
  bool causal = false;  // query i sees keys j <= i + (tk - tq)
  double scale = 0;     // 0: 1/sqrt(d)
  int64_t q_stride = 0, k_stride = 0, v_stride = 0, o_stride = 0;  // 0: packed (h*d, hkv*d)
  // Key/value heads (0: h), dividing h: k and v are (B,Tk,hkv,D) and query head h reads
  // key/value head h / (h / hkv), as if each were repeated h / hkv times (repeat_kv).
  int64_t hkv = 0;
};

// o = softmax(scale q kᵀ + mask) v per (batch, head); lse = log-sum-exp of each row of
// scale q kᵀ over the visible keys (-inf, and o = 0, for a row that sees none).
void attention(const AttentionShape& s, const float* q, const float* k, const float* v, float* o,
               float* lse);

// Gradients of sum(dout ∘ o) with respect to q, k and v, overwritten (rows strided like q, k,
// v; dk and dv summed over the query heads that share a key/value head). Recomputes everything
// from q, k, v in double.
void attentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v,
                       const float* dout, float* dq, float* dk, float* dv);

}  // namespace vkgrad::ops::ref

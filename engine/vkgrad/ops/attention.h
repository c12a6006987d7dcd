// Flash-style multi-head attention, forward and backward, in O(T) memory: the Tq x Tk
// scores are never stored.
//
//   O = softmax(scale Q Kᵀ + mask) V   per batch and head
//
// Grouped-query attention: K and V may have Hkv heads, fewer than Q's H as long as Hkv divides
// H; query head h then reads key/value head h / (H / Hkv) (Hugging Face's repeat_kv order),
// and dK, dV sum over the query heads that share them (in one workgroup, in a fixed order:
// deterministic). Hkv = H is plain multi-head attention, bit for bit as before.
//
// Layout: Q and O are (B, Tq, H, D), K and V (B, Tk, Hkv, D), the layout a linear projection
// writes (tokens as rows, heads side by side), so a model needs no transposes. D is
// contiguous and heads are D apart; tokens are `row_stride` elements apart, H*D when the
// tensor is packed alone, or e.g. 3*H*D for Q, K and V read straight out of one fused QKV
// projection (three views at offsets 0, H*D, 2*H*D of the same buffer). LSE, the per-row
// log-sum-exp the backward pass needs, is (B, H, Tq).
//
// Causal: query i sees key j when j <= i + (Tk - Tq) (the last query sees every key; with
// Tq = Tk the usual lower triangle). A query that sees no key gets O = 0, LSE = -inf and zero
// gradients, never NaN. Key tiles no query of a workgroup sees are skipped, not computed.
//
// Precision: every tensor (Q, K, V, O, dO, the gradients, LSE and the backward's row dots)
// may be stored in f32, f16 or bf16, each in its own (ops/storage.h), on the Shared and Texel
// variants (Texel fetches a 16-bit tensor as 16-bit words); the Fragment variants read Q, K, V
// and dO in f32 or f16 only. The arithmetic is f32 whatever the storage: softmax statistics,
// the row dots and the gradient sums are f32, and only a store rounds (the Fragment variants
// also round the products' operands to fp16: see AttentionVariant). LSE in bf16 is lossy (a
// log-sum-exp of 5 is then known to ~0.02, which scales every P of its row in the backward by
// up to 2%): keep it in f32 where the gradients matter.
#pragma once

#include <cstdint>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// One of Q, K, V, O or their gradients: a view of shape (B, T, H, D) whose tokens are
// row_stride elements apart (0: packed, H*D). view.offset is where element (0,0,0,0) is.
struct AttentionTensor {
  TensorView view;
  int64_t row_stride = 0;
};

enum class AttentionVariant {
  Auto,    // Fragment where it applies (below), else Texel on CPU devices where it applies
           // (D and strides multiples of 4), else Shared
  Shared,  // key/query tiles through shared memory: the GPU kernel, any D and strides
  Texel,   // texel fetches shared by subgroup shuffles, no shared memory: CPU devices only
  // Tensor cores (VK_NV_cooperative_matrix): Q·Kᵀ, P·V, dO·Vᵀ, dS·K, dSᵀ·Q and Pᵀ·dO as
  // 16x16x16 fp16 products with fp32 sums; Q, K, V, dO, P and dS rounded to fp16, the softmax
  // statistics and row dots fp32. D from 16 to 128 in steps of 16; q, k, v and dout f32 or
  // f16 (bf16: Shared or Texel). Auto takes it on a device with cooperative matrices where
  // the operands are f16, or f32 with ContextOptions::fp16_matmul; never on lavapipe.
  Fragment,
  FragmentEmulated,  // the same kernels on the emulated fragment layer (plain GLSL, tests)
};
const char* attentionVariantName(AttentionVariant variant);

struct AttentionOptions {
  bool causal = false;
  float scale = 0.0f;  // 0: 1/sqrt(D)
  AttentionVariant variant = AttentionVariant::Auto;
};

// The largest head dimension D: each invocation keeps rows of D floats in registers (q and
// the output's sum; q, dO and dQ in the backward).
constexpr int64_t kMaxHeadDim = 256;

// The shape rule of attention, Vulkan-free (the graph builder uses it too): q (B,Tq,H,D),
// k and v (B,Tk,Hkv,D) with Hkv dividing H, D at most 256; returns the shape of lse, (B,H,Tq)
// (o is shaped like q). Throws ShapeError "attention: v (1,8,2,16) must be (1,9,2,16)
// (B,T,Hkv,D)", or "attention: q (1,8,6,16) has 6 heads and k (1,8,4,16) 4: ...".
Shape attentionLseShape(const Shape& q, const Shape& k, const Shape& v,
                        const char* op = "attention");

// o: like q; lse: (B, H, Tq), contiguous. D from 1 to 256. Throws ShapeError (naming the
// shapes) before recording anything on mismatched shapes, strides, or buffers too small.
void attention(vk::Recorder& rec, const AttentionTensor& q, const AttentionTensor& k,
               const AttentionTensor& v, const AttentionTensor& o, const TensorView& lse,
               const AttentionOptions& options = {});

// Elements of scratch attentionBackward needs: B * H * Tq (the row dots dO·O, stored in the
// scratch view's float format).
int64_t attentionBackwardScratch(const AttentionTensor& q);

// Given dout (like o) and the forward's o and lse, dq, dk, dv (like q, k, v; strided the
// same way or not) (= or +=, by w) the gradients of sum(dout ∘ o); with grouped-query
// attention dk and dv hold the sums over each key/value head's query heads. scratch: >=
// attentionBackwardScratch(q) floats, overwritten. Deterministic: no float atomics.
void attentionBackward(vk::Recorder& rec, const AttentionTensor& q, const AttentionTensor& k,
                       const AttentionTensor& v, const AttentionTensor& o, const TensorView& lse,
                       const AttentionTensor& dout, const AttentionTensor& dq,
                       const AttentionTensor& dk, const AttentionTensor& dv,
                       const TensorView& scratch, const AttentionOptions& options = {},
                       Write w = Write::Overwrite);

}  // namespace vkgrad::ops

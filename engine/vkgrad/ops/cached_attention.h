// Attention for decoding with a key/value cache: a model that generates one token at a time
// keeps every layer's keys and values on the device and computes only the new rows.
//
//   writeKvCache:    cache rows [position, position + R) = the R new rows of k and v
//   cachedAttention: o row r = softmax(scale q_r Kᵀ) V over cache rows [0, position + r]
//
// Together they give, for the R new rows, what causal attention (ops/attention.h) gives for
// the last R rows of the whole window: the same keys and values, the same mask.
//
// Layouts as ops/attention.h's: q and o are (B, R, H, D), k and v (B, R, Hkv, D), with a row
// stride (q, k, v read straight out of a fused QKV projection); the caches are packed
// (B, rows, Hkv, D), Hkv dividing H (grouped-query attention keeps the smaller cache).
// `position` is a u32 on the device (a one-element view), read by the kernels, so one
// recorded step serves every position of a decode: the host writes the position, not new
// commands. The host keeps position + R <= rows; a row past the cache is not written, and a
// query there sees the whole cache.
//
// Precision: every float tensor in f32, f16 or bf16, each in its own; the arithmetic is f32.
// Inference only: no backward. Where the device binds 4 storage buffers per stage (Vulkan's
// minimum) both kernels take their ".sb4" builds, which read the position word through a
// texel view: the same bits.
#pragma once

#include "vkgrad/ops/attention.h"

namespace vkgrad::ops {

// k, v: (B, R, Hkv, D) strided; k_cache, v_cache: (B, rows, Hkv, D) packed, R <= rows; position:
// (1) u32. Throws ShapeError naming the tensors before recording anything.
void writeKvCache(vk::Recorder& rec, const AttentionTensor& k, const AttentionTensor& v,
                  const TensorView& k_cache, const TensorView& v_cache, const TensorView& position);

// q, o: (B, R, H, D) strided; the caches (B, rows, Hkv, D) and position as above, Hkv
// dividing H (grouped-query attention: query head h reads cache head h / (H / Hkv)); D at most
// kMaxHeadDim.
// scale 0: 1/sqrt(D). Deterministic (fixed reduction order). Throws ShapeError.
void cachedAttention(vk::Recorder& rec, const AttentionTensor& q, const TensorView& k_cache,
                     const TensorView& v_cache, const TensorView& position,
                     const AttentionTensor& o, float scale = 0.0f);

}  // namespace vkgrad::ops

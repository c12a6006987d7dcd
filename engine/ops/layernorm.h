// Layer norm over the last axis, forward; saves each row's mean and 1/std for backward.
#pragma once

#include "ops/tensor.h"
#include "vk/recorder.h"

namespace vkgrad::ops {

// Kernel layouts for rows longer than a few dozen elements (shorter rows always get one
// invocation each); as SoftmaxVariant in ops/softmax.h. Auto picks one per device.
enum class LayernormVariant {
  Auto,              // layernormVariantFor()
  WorkgroupStorage,  // 128 invocations per row, combined in shared memory; storage loads
  WorkgroupTexel,    // the same, x, gamma and beta read through R32F texel buffers
  // One subgroup per row: no shared memory, no barriers. Only for devices that run a
  // workgroup of subgroupSize invocations as one subgroup (CPU drivers); elsewhere the
  // output is NaN, never silently wrong.
  SubgroupStorage,
  SubgroupTexel,  // lavapipe, 4096 columns: 7-9x faster than WorkgroupStorage
};

const char* layernormVariantName(LayernormVariant variant);
// What Auto runs on this device: Subgroup* on CPU devices, Workgroup* elsewhere; *Texel
// when x, gamma and beta fit in maxTexelBufferElements.
LayernormVariant layernormVariantFor(const vk::Context& context, const TensorView& x,
                                     const TensorView& gamma, const TensorView& beta);

// x: (..., N); gamma, beta: (N); y: like x; mean, rstd: (rows), rows = numel / N (x's
// leading dims, e.g. (B,T) for x (B,T,C), are accepted too).
// y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps), var the biased (1/N)
// variance, computed in two passes so a large common offset does not cost precision.
// y may be x itself (in place); other overlaps are undefined. Throws ShapeError naming the
// shapes before recording anything on mismatched shapes, N or rows 0 or beyond 32 bits,
// eps < 0, or a buffer too small.
void layernorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps = 1e-5f);
void layernorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps, LayernormVariant variant);

}  // namespace vkgrad::ops

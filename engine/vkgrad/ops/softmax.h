// Softmax over the last axis, forward and backward. Numerically stable: the row maximum is
// subtracted, gathered online together with the sum, so each row is read twice (f32 rows of a
// multiple of 4 columns on the texel layouts: 4 columns per fetch, the maximum first, and rows
// of up to 128 texels a lane on CPU devices read once; shaders/softmax/forward.comp). Rows of any
// length. The kernel layouts behind it, shared with log_softmax and cross_entropy, are in
// ops/row_kernels.h.
#pragma once

#include <cstdint>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// Kernel layouts for rows longer than a few dozen elements (shorter rows always get one
// invocation each). The fastest differs by device, so Auto picks one.
enum class SoftmaxVariant {
  Auto,              // softmaxVariantFor()
  WorkgroupStorage,  // 128 invocations per row, combined in shared memory; storage loads
  WorkgroupTexel,    // the same, inputs read through R32F texel buffers (f32 inputs only)
  // One subgroup per row: no shared memory, no barriers. Only for devices that run a
  // workgroup of subgroupSize invocations as one subgroup (CPU drivers); elsewhere the
  // output is NaN, never silently wrong.
  SubgroupStorage,
  SubgroupTexel,  // lavapipe, 4096 columns: 5-7x faster than WorkgroupStorage
};

const char* softmaxVariantName(SoftmaxVariant variant);
// The longest rows Auto runs a subgroup per row on a GPU with a fixed subgroup size (softmax,
// its kin and layer norm; measured on an H100 at 64 columns).
constexpr int64_t kSubgroupRowsMaxN = 64;
// What Auto runs on this device for rows of n columns when the inputs `texels_fit` R32F texel
// views (ops/binding.h texelFits): Subgroup* on CPU devices and, for n <= kSubgroupRowsMaxN,
// on GPUs with a fixed subgroup size; Workgroup* elsewhere; *Texel when they fit.
SoftmaxVariant softmaxVariantFor(const vk::Context& context, bool texels_fit, int64_t n);
SoftmaxVariant softmaxVariantFor(const vk::Context& context, const TensorView& x);

// x: (..., N), y: same shape. y = exp(x - max) / sum(exp(x - max)) along each row.
// -inf entries give 0 (masked); a row that is entirely -inf gives all zeros, never NaN.
// +inf or NaN inputs give NaN. y may be x itself (in place, of x's dtype); other overlaps
// throw. x and y in any float format (f32, f16, bf16; 16-bit needs the device's 16-bit
// storage): the arithmetic is f32 and a 16-bit y is rounded once. Views may start at any
// multiple of their element size. Throws ShapeError naming the shapes before
// recording anything if y's shape differs, N or the row count is 0 or does not fit 32 bits,
// or a buffer is too small.
void softmax(vk::Recorder& rec, const TensorView& x, const TensorView& y,
             SoftmaxVariant variant = SoftmaxVariant::Auto);

// y: (..., N) softmax's output, dy: (..., N) upstream gradient, dx: (..., N).
// dx (= or +=) y * (dy - sum(dy * y)) along each row; masked entries (y = 0) get 0.
// dx may be exactly y or dy (of its dtype); other overlaps throw. Any float formats, f32
// arithmetic, as for softmax.
void softmaxBackward(vk::Recorder& rec, const TensorView& y, const TensorView& dy,
                     const TensorView& dx, Write w = Write::Overwrite,
                     SoftmaxVariant variant = SoftmaxVariant::Auto);

}  // namespace vkgrad::ops

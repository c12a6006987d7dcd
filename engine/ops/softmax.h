// Softmax over the last axis, forward. Numerically stable: the row maximum is subtracted,
// gathered online together with the sum, so each row is read twice. Rows of any length.
#pragma once

#include "ops/tensor.h"
#include "vk/recorder.h"

namespace vkgrad::ops {

// Kernel layouts for rows longer than a few dozen elements (shorter rows always get one
// invocation each). The fastest differs by device, so Auto picks one.
enum class SoftmaxVariant {
  Auto,              // softmaxVariantFor()
  WorkgroupStorage,  // 128 invocations per row, combined in shared memory; storage loads
  WorkgroupTexel,    // the same, x read through an R32F texel buffer
  // One subgroup per row: no shared memory, no barriers. Only for devices that run a
  // workgroup of subgroupSize invocations as one subgroup (CPU drivers); elsewhere the
  // output is NaN, never silently wrong.
  SubgroupStorage,
  SubgroupTexel,  // lavapipe, 4096 columns: 5-7x faster than WorkgroupStorage
};

const char* softmaxVariantName(SoftmaxVariant variant);
// What Auto runs for x on this device: Subgroup* on CPU devices, Workgroup* elsewhere;
// *Texel when x fits in maxTexelBufferElements.
SoftmaxVariant softmaxVariantFor(const vk::Context& context, const TensorView& x);

// x: (..., N), y: same shape. y = exp(x - max) / sum(exp(x - max)) along each row.
// -inf entries give 0 (masked); a row that is entirely -inf gives all zeros, never NaN.
// +inf or NaN inputs give NaN. y may be x itself (in place); other overlaps are undefined.
// Throws ShapeError naming the shapes before recording anything if y's shape differs, N or
// the row count is 0 or does not fit 32 bits, or a buffer is too small.
void softmax(vk::Recorder& rec, const TensorView& x, const TensorView& y);
void softmax(vk::Recorder& rec, const TensorView& x, const TensorView& y, SoftmaxVariant variant);

}  // namespace vkgrad::ops

// Softmax over the last axis, forward and backward. Numerically stable: the row maximum is
// subtracted, gathered online together with the sum, so each row is read twice. Rows of
// any length. The row layouts declared here are shared with log_softmax and cross_entropy.
#pragma once

#include <cstdint>
#include <string>

#include "ops/tensor.h"
#include "vk/recorder.h"

namespace vkgrad::ops {

// Kernel layouts for rows longer than a few dozen elements (shorter rows always get one
// invocation each). The fastest differs by device, so Auto picks one.
enum class SoftmaxVariant {
  Auto,              // softmaxVariantFor()
  WorkgroupStorage,  // 128 invocations per row, combined in shared memory; storage loads
  WorkgroupTexel,    // the same, inputs read through R32F texel buffers
  // One subgroup per row: no shared memory, no barriers. Only for devices that run a
  // workgroup of subgroupSize invocations as one subgroup (CPU drivers); elsewhere the
  // output is NaN, never silently wrong.
  SubgroupStorage,
  SubgroupTexel,  // lavapipe, 4096 columns: 5-7x faster than WorkgroupStorage
};

const char* softmaxVariantName(SoftmaxVariant variant);
// What Auto runs on this device when the inputs `texels_fit` R32F texel views (ops/binding.h
// texelFits): Subgroup* on CPU devices, Workgroup* elsewhere; *Texel when they fit.
SoftmaxVariant softmaxVariantFor(const vk::Context& context, bool texels_fit);
SoftmaxVariant softmaxVariantFor(const vk::Context& context, const TensorView& x);

// How a row-wise kernel of this family (shaders/softmax/rows.glsl) runs `rows` rows of n:
// the specialization constants 0-3 and the workgroup count. Throws ShapeError (naming op)
// if a *Texel variant is asked for but !texels_fit, Error if the device has no subgroup
// arithmetic.
struct SoftmaxLayout {
  uint32_t group = 1;              // workgroup size (constant 0)
  bool row_per_invocation = true;  // constant 1
  bool one_subgroup = false;       // constant 2
  bool texel = false;              // constant 3: inputs through R32F texel views
  uint32_t groups = 1;             // workgroups to dispatch
};
SoftmaxLayout softmaxLayout(const char* op, const vk::Context& context, SoftmaxVariant variant,
                            uint64_t rows, uint64_t n, bool texels_fit);
// An input of such a kernel bound both ways (ops/binding.h); the texel view is a one-element
// dummy unless `texel`. skip is the view's first element inside either binding.
struct RowInput {
  vk::Arg storage;
  vk::Arg texel;
  uint32_t skip = 0;
};
RowInput bindRowInput(const vk::Context& context, const TensorView& t, bool texel);
// The shape checks of a row-wise op: x is a non-empty (..., N) with rows and N within 32
// bits, and t is shaped like x. Throws "<op>: <shapes>: <what>".
void checkRowShapes(const char* op, const std::string& shapes, const char* x_name,
                    const TensorView& x, const char* name, const TensorView& t);
// checkOperand (ops/binding.h), and the storage binding within maxStorageBufferRange, which
// also keeps every element index of the kernels below 2^32.
void checkRowOperand(const char* op, const char* name, const vk::Context& context,
                     const TensorView& t, DType dtype = DType::F32);
// The whole launch of an elementwise-per-row map of this family, y = f(x row) (kernel with
// bindings x storage, x texel, y) and of its backward dx (=|+=) g(y row, dy row) (bindings y,
// y texel, dy, dy texel, dx; constant 4: accumulate): checks, layout, bindings, dispatch.
// softmax and log-softmax differ only in the kernel.
void rowMap(vk::Recorder& rec, const char* op, const char* kernel, const TensorView& x,
            const TensorView& y, SoftmaxVariant variant);
void rowMapBackward(vk::Recorder& rec, const char* op, const char* kernel, const TensorView& y,
                    const TensorView& dy, const TensorView& dx, Write w, SoftmaxVariant variant);

// x: (..., N), y: same shape. y = exp(x - max) / sum(exp(x - max)) along each row.
// -inf entries give 0 (masked); a row that is entirely -inf gives all zeros, never NaN.
// +inf or NaN inputs give NaN. y may be x itself (in place); other overlaps throw.
// Views may start at any multiple of 4 bytes. Throws ShapeError naming the shapes before
// recording anything if y's shape differs, N or the row count is 0 or does not fit 32 bits,
// or a buffer is too small.
void softmax(vk::Recorder& rec, const TensorView& x, const TensorView& y,
             SoftmaxVariant variant = SoftmaxVariant::Auto);

// y: (..., N) softmax's output, dy: (..., N) upstream gradient, dx: (..., N).
// dx (= or +=) y * (dy - sum(dy * y)) along each row; masked entries (y = 0) get 0.
// dx may be exactly y or dy; other overlaps throw.
void softmaxBackward(vk::Recorder& rec, const TensorView& y, const TensorView& dy,
                     const TensorView& dx, Write w = Write::Overwrite,
                     SoftmaxVariant variant = SoftmaxVariant::Auto);

}  // namespace vkgrad::ops

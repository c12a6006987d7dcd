// The launch machinery of the softmax family's row-wise kernels (shaders/softmax/rows.glsl):
// layouts, bindings and shape checks shared by softmax, log_softmax and cross_entropy.
// Internal to engine/ops: it names Vulkan bindings, so no public header includes it.
#pragma once

#include <cstdint>
#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/softmax.h"
#include "vkgrad/ops/tensor.h"
#include "vkgrad/vk/spec_constants.h"

namespace vkgrad::ops {

// How a row-wise kernel of this family (shaders/softmax/rows.glsl) runs `rows` rows of n:
// its specialization constants and the workgroup count. Throws ShapeError (naming op)
// if a *Texel variant is asked for but !texels_fit, Error if the device has no subgroup
// arithmetic.
struct SoftmaxLayout {
  uint32_t group = 1;              // workgroup size (local_size_x)
  bool row_per_invocation = true;  // kRowPerInvocation
  bool one_subgroup = false;       // kOneSubgroup
  bool texel = false;              // kTexelInput: inputs through R32F texel views
  uint32_t groups = 1;             // workgroups to dispatch
};
// The constants of rows.glsl for `l`; a backward kernel adds its kAccumulate.
vk::SpecConstants rowsSpec(const SoftmaxLayout& l);
SoftmaxLayout softmaxLayout(const char* op, const vk::Context& context, SoftmaxVariant variant,
                            uint64_t rows, uint64_t n, bool texels_fit);
// An input of such a kernel bound both ways (ops/binding.h); the texel view is a one-element
// dummy unless `texel`. skip is the view's first element inside either binding.
struct RowInput {
  vk::Arg storage;
  vk::Arg texel;
  uint32_t skip = 0;
};
RowInput bindRowInput(const vk::Context& context, const TensorView& t, bool texel,
                      vk::TexelFormat format = vk::TexelFormat::R32f);
// The shape checks of a row-wise op: x is a non-empty (..., N) with rows and N within 32
// bits, and t is shaped like x. Throws "<op>: <shapes>: <what>".
void checkRowShapes(const char* op, const std::string& shapes, const char* x_name,
                    const TensorView& x, const char* name, const TensorView& t);
// checkOperand (ops/binding.h), and the storage binding within maxStorageBufferRange, which
// also keeps every element index of the kernels below 2^32.
void checkRowOperand(const char* op, const char* name, const vk::Context& context,
                     const TensorView& t, DType dtype = DType::F32);
// The same for a float tensor the kernels take in any format (f32, f16 or bf16).
void checkRowFloatOperand(const char* op, const char* name, const vk::Context& context,
                          const TensorView& t);
// The whole launch of an elementwise-per-row map of this family, y = f(x row) (kernel with
// bindings x storage, x texel, y) and of its backward dx (=|+=) g(y row, dy row) (bindings y,
// y texel, dy, dy texel, dx; kAccumulate): checks, layout, bindings, dispatch. Every tensor in
// any float format (the 16-bit ones take the kernel's ".s16" build, storage loads only).
// softmax and log-softmax differ only in the kernel. A kernel with `vec4` has the constants
// kVec4 and kStore4 (shaders/softmax/forward.comp): set where a texel layout runs a workgroup
// or subgroup per row, N % 4 == 0 and the inputs fit RGBA32F views, kStore4 where the output
// is vec4Storable too.
void rowMap(vk::Recorder& rec, const char* op, const char* kernel, const TensorView& x,
            const TensorView& y, SoftmaxVariant variant, bool vec4 = false);
void rowMapBackward(vk::Recorder& rec, const char* op, const char* kernel, const TensorView& y,
                    const TensorView& dy, const TensorView& dx, Write w, SoftmaxVariant variant,
                    bool vec4 = false);

}  // namespace vkgrad::ops

// How a launcher picks a kernel for float tensors stored in f32, f16 or bf16
// (shaders/common/storage.glsl): each float binding's format is a specialization constant
// `<name>_dtype`, and a kernel with any 16-bit tensor runs its ".s16" build, which needs the
// device's 16-bit storage.
#pragma once

#include <initializer_list>
#include <string_view>

#include "vkgrad/ops/tensor.h"
#include "vkgrad/vk/spec_constants.h"

namespace vkgrad::vk {
class Kernel;
}

namespace vkgrad::ops {

// A float binding of a kernel: the GLSL constant that holds its format ("x_dtype", a string
// literal: the constant list keeps the view) and the tensor's dtype.
struct FloatFormat {
  std::string_view constant;
  DType dtype;
};

// The value a FLOATS binding's `<name>_dtype` constant takes: 0 f32, 1 f16, 2 bf16.
uint32_t storageCode(DType dtype);

// The pipeline of `name` (or of "<name>.s16" when any format is 16-bit; with ".nsa" after
// either, where the kernel has that build, on a device without subgroup arithmetic) with
// `constants` plus one `<name>_dtype` constant per float binding. Throws Error naming the
// kernel and the missing feature on a device without storageBuffer16BitAccess, before
// anything is recorded.
const vk::Kernel& floatKernel(vk::Context& context, std::string_view name,
                              vk::SpecConstants constants,
                              std::initializer_list<FloatFormat> formats);

}  // namespace vkgrad::ops

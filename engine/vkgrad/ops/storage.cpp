#include "vkgrad/ops/storage.h"

#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/shader_registry.h"

namespace vkgrad::ops {

uint32_t storageCode(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::BF16:
      return 2;
    case DType::U32:
      break;
  }
  throw Error(std::string("storageCode: ") + dtypeName(dtype) + " is not a float format");
}

const vk::Kernel& floatKernel(vk::Context& context, std::string_view name,
                              vk::SpecConstants constants,
                              std::initializer_list<FloatFormat> formats) {
  bool half = false;
  for (const FloatFormat& f : formats) {
    constants.push_back({f.constant, storageCode(f.dtype)});
    half = half || f.dtype != DType::F32;
  }
  std::string built(name);
  if (half) {
    if (!context.info().storage_16bit)
      throw Error(std::string(name) + ": 16-bit tensors need storageBuffer16BitAccess, which " +
                  context.info().label() + " does not offer; run in f32");
    built += ".s16";
  }
  // The row kernels' reductions through shared memory alone (shaders/common/reduce.glsl).
  if (!context.info().subgroup_arithmetic && vk::findShader(built + ".nsa")) built += ".nsa";
  return context.kernels().get(built, constants);
}

}  // namespace vkgrad::ops

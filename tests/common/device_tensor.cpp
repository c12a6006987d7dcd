#include "common/device_tensor.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {

DeviceTensor upload(vk::Context& context, ops::Shape shape, std::span<const float> data) {
  if (size_t(shape.numel()) != data.size())
    throw std::invalid_argument("upload: " + shape.str() + " does not hold " +
                                std::to_string(data.size()) + " values");
  DeviceTensor t{context.allocator().allocate(std::max<uint64_t>(4, data.size_bytes())), shape};
  if (!data.empty()) context.staging().upload(t.buffer, 0, data.data(), data.size_bytes());
  return t;
}

DeviceTensor poisoned(vk::Context& context, ops::Shape shape) {
  std::vector<float> nan(shape.numel(), std::nanf(""));
  return upload(context, shape, nan);
}

std::vector<float> download(vk::Context& context, const DeviceTensor& tensor) {
  std::vector<float> out(tensor.shape.numel());
  if (!out.empty()) context.staging().download(tensor.buffer, 0, out.data(), out.size() * 4);
  return out;
}

std::vector<float> download(vk::Context& context, const ops::TensorView& view) {
  std::vector<float> out(size_t(view.shape.numel()));
  if (!out.empty()) context.staging().download(*view.buffer, view.offset, out.data(), view.bytes());
  return out;
}

vk::Buffer uploadWords(vk::Context& context, std::span<const uint32_t> data) {
  vk::Buffer b = context.allocator().allocate(std::max<size_t>(4, data.size_bytes()));
  if (!data.empty()) context.staging().upload(b, 0, data.data(), data.size_bytes());
  return b;
}

std::vector<uint32_t> downloadWords(vk::Context& context, const vk::Buffer& buffer, size_t n) {
  std::vector<uint32_t> out(n);
  if (n) context.staging().download(buffer, 0, out.data(), n * 4);
  return out;
}

}  // namespace vkgrad::test

#include "common/device_tensor.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "vkgrad/ops/reference/half.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {

DeviceTensor upload(vk::Context& context, ops::Shape shape, std::span<const float> data,
                    ops::DType dtype) {
  if (size_t(shape.numel()) != data.size())
    throw std::invalid_argument("upload: " + shape.str() + " does not hold " +
                                std::to_string(data.size()) + " values");
  if (!ops::isFloat(dtype)) throw std::invalid_argument("upload: floats need a float dtype");
  const std::vector<uint8_t> bytes = ops::ref::encode(dtype, data);
  // Whole words: a 16-bit tensor of odd length gets 2 bytes of padding.
  DeviceTensor t{context.allocator().allocate(std::max<uint64_t>(4, (bytes.size() + 3) / 4 * 4)),
                 shape, dtype};
  if (!bytes.empty()) context.staging().upload(t.buffer, 0, bytes.data(), bytes.size());
  return t;
}

DeviceTensor poisoned(vk::Context& context, ops::Shape shape, ops::DType dtype) {
  std::vector<float> nan(shape.numel(), std::nanf(""));
  return upload(context, shape, nan, dtype);
}

std::vector<float> download(vk::Context& context, const DeviceTensor& tensor) {
  return download(context, tensor.view());
}

std::vector<float> download(vk::Context& context, const ops::TensorView& view) {
  std::vector<uint8_t> bytes(view.bytes());
  if (!bytes.empty())
    context.staging().download(*view.buffer, view.offset, bytes.data(), bytes.size());
  return ops::ref::decode(view.dtype, bytes);
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

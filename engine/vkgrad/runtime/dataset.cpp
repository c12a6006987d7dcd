// Datasets (executor.h): arrays uploaded to the device once and read by graphs in place, or
// declared with shapes only for estimates and dry runs.
#include <memory>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::graph {
namespace {

void checkCount(const Shape& shape, const std::string& name, size_t count) {
  if (shape.numel() <= 0 || int64_t(count) != shape.numel())
    throw ShapeError("dataset " + name + " " + shape.str() + ": got " + std::to_string(count) +
                     " values");
}

// Gives a declared dataset its device copy of values: one allocation.
Dataset uploadWords(vk::Context& context, Dataset d, const void* values, size_t count) {
  const uint64_t most = context.info().max_allocation_bytes;
  if (most && count * 4 > most)
    throw ShapeError("dataset " + d.name + " " + d.shape.str() + " is " +
                     std::to_string(count * 4) + " bytes, more than one allocation on " +
                     context.info().name + " may be (maxMemoryAllocationSize " +
                     std::to_string(most) + " bytes)");
  d.buffer =
      std::make_shared<vk::Buffer>(context.allocator().allocate(count * 4, vk::Use::Datasets));
  context.staging().upload(*d.buffer, 0, values, count * 4);
  return d;
}

}  // namespace

Dataset declareDataset(const std::string& name, const Shape& shape, DType dtype) {
  if (shape.numel() <= 0) throw ShapeError("dataset " + name + " " + shape.str() + ": no values");
  return {name, shape, dtype, std::make_shared<vk::Buffer>()};
}

Dataset declareWindows(const std::string& name, int64_t stream_size, int64_t length) {
  if (length <= 0 || stream_size < length)
    throw ShapeError("dataset " + name + ": windows of " + std::to_string(length) +
                     " need a stream of at least that many values, got " +
                     std::to_string(stream_size));
  Dataset d = declareDataset(name, {stream_size - length + 1, length}, DType::U32);
  d.row_stride = 1;
  return d;
}

Dataset uploadDataset(vk::Context& context, const std::string& name, const Shape& shape,
                      std::span<const float> values) {
  checkCount(shape, name, values.size());
  return uploadWords(context, declareDataset(name, shape, DType::F32), values.data(),
                     values.size());
}

Dataset uploadDataset(vk::Context& context, const std::string& name, const Shape& shape,
                      std::span<const uint32_t> values) {
  checkCount(shape, name, values.size());
  return uploadWords(context, declareDataset(name, shape, DType::U32), values.data(),
                     values.size());
}

Dataset uploadWindows(vk::Context& context, const std::string& name,
                      std::span<const uint32_t> stream, int64_t length) {
  return uploadWords(context, declareWindows(name, int64_t(stream.size()), length), stream.data(),
                     stream.size());
}

}  // namespace vkgrad::graph

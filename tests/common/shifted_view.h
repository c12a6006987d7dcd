// A float tensor one element into its buffer, for the 16-bit offset checks of the ops tests:
// in f16 or bf16 that is a 2-byte offset, which no 32-bit view can have, so the kernel's
// element skip is odd.
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "common/device_tensor.h"

namespace vkgrad::test {

struct ShiftedTensor {
  // (1 + n): a NaN, then the view's elements. On the heap, so that the view's buffer pointer
  // survives moving the struct.
  std::unique_ptr<DeviceTensor> storage;
  ops::TensorView view;
};

// data stored in `dtype` (rounded as upload() rounds) from element 1 of a fresh buffer.
inline ShiftedTensor shiftedUpload(vk::Context& context, const ops::Shape& shape,
                                   const std::vector<float>& data, ops::DType dtype) {
  std::vector<float> all(1, std::nanf(""));
  all.insert(all.end(), data.begin(), data.end());
  auto storage = std::make_unique<DeviceTensor>(upload(context, {int64_t(all.size())}, all, dtype));
  const ops::TensorView view = ops::view(storage->buffer, shape, ops::dtypeBytes(dtype), dtype);
  return {std::move(storage), view};
}

// The same, every element NaN: an output whose unwritten elements show up.
inline ShiftedTensor shiftedPoisoned(vk::Context& context, const ops::Shape& shape,
                                     ops::DType dtype) {
  return shiftedUpload(context, shape, std::vector<float>(shape.numel(), std::nanf("")), dtype);
}

// The view's elements, after checking (ADD_FAILURE) that the element before it is still NaN.
inline std::vector<float> downloadShifted(vk::Context& context, const ShiftedTensor& t) {
  if (!std::isnan(download(context, *t.storage)[0]))
    ADD_FAILURE() << "the element before the view was written";
  return download(context, t.view);
}

}  // namespace vkgrad::test

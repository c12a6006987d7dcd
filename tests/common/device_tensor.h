// A buffer that owns its data for tests and apps: upload from host, poison, download.
#pragma once

#include <span>
#include <vector>

#include "vkgrad/ops/tensor.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::test {

struct DeviceTensor {
  vk::Buffer buffer;
  ops::Shape shape;
  ops::DType dtype = ops::DType::F32;
  ops::TensorView view() const { return ops::view(buffer, shape, 0, dtype); }
};

// data stored in `dtype` (a float format: 16-bit ones round to nearest even, as kernels do;
// ops::ref::roundTo gives the values the tensor then holds).
DeviceTensor upload(vk::Context& context, ops::Shape shape, std::span<const float> data,
                    ops::DType dtype = ops::DType::F32);
// Filled with a quiet-NaN pattern, so any element a kernel fails to write shows up.
DeviceTensor poisoned(vk::Context& context, ops::Shape shape, ops::DType dtype = ops::DType::F32);
// The elements as floats, whatever float format they are stored in.
std::vector<float> download(vk::Context& context, const DeviceTensor& tensor);
// The elements a float view covers, wherever it sits in its buffer (a graph parameter's view()).
std::vector<float> download(vk::Context& context, const ops::TensorView& view);

// u32 words (ids, targets, rng states, status flags) in a buffer of their own, and back.
vk::Buffer uploadWords(vk::Context& context, std::span<const uint32_t> data);
std::vector<uint32_t> downloadWords(vk::Context& context, const vk::Buffer& buffer, size_t n);

}  // namespace vkgrad::test

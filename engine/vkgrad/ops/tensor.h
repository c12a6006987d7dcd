// What an op launcher takes: a shape and the device bytes behind it. Ops check shapes
// and sizes here, before any GPU work, and throw ShapeError naming the op and shapes.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "vkgrad/core/error.h"

// Launchers take the device objects by reference only, so the ops headers (and the graph and
// model layers above them) need no Vulkan headers.
namespace vkgrad::vk {
class Buffer;
class Context;
class Recorder;
}  // namespace vkgrad::vk

namespace vkgrad::ops {

// Up to 6 dims, row-major, the last one contiguous. (Elementwise, broadcast, reduction and
// shape ops take any rank; the model kernels say what they take.)
class Shape {
 public:
  static constexpr int kMaxRank = 6;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  static Shape of(const int64_t* dims, int rank);  // throws ShapeError unless 0 < rank <= 6
  int rank() const { return rank_; }
  int64_t operator[](int axis) const { return dims_[axis]; }
  int64_t back() const { return rank_ ? dims_[rank_ - 1] : 1; }
  int64_t numel() const;
  // Product of all dims but the last: the number of rows a row-wise op sees.
  int64_t rows() const { return back() ? numel() / back() : 0; }
  std::string str() const;  // "(4,8)"
  bool operator==(const Shape& other) const;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// Floats for data, unsigned ints for ids and targets. Float data may also be stored in 16
// bits: F16 (IEEE half) or BF16 (bfloat16: the top half of an f32, so widening is a shift).
// Kernels that take 16-bit tensors read them into f32, compute and accumulate in f32 and
// round to nearest even as they store (ops/storage.h); the rest refuse them.
enum class DType { F32, U32, F16, BF16 };
const char* dtypeName(DType dtype);
inline uint64_t dtypeBytes(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 ? 2 : 4;
}
inline bool isFloat(DType dtype) {
  return dtype != DType::U32;
}

// How a kernel writes an output: replace it, or add to it (gradients of a tensor used twice).
enum class Write { Overwrite, Accumulate };

// Elements of buffer at byte offset, in shape order.
struct TensorView {
  const vk::Buffer* buffer = nullptr;
  uint64_t offset = 0;  // bytes
  Shape shape;
  DType dtype = DType::F32;
  uint64_t bytes() const { return uint64_t(shape.numel()) * dtypeBytes(dtype); }
};

inline TensorView view(const vk::Buffer& buffer, Shape shape, uint64_t offset = 0,
                       DType dtype = DType::F32) {
  return {&buffer, offset, shape, dtype};
}

// Throws ShapeError "<op>: <name> <shape> needs N bytes, its buffer has M" (or no buffer),
// or "<op>: <name> must be u32, got f32". Offsets are multiples of the element size.
void checkFits(const char* op, const char* name, const TensorView& t, DType dtype = DType::F32);
// checkFits for a float tensor in any of the three formats (f32, f16, bf16).
void checkFloat(const char* op, const char* name, const TensorView& t);

}  // namespace vkgrad::ops

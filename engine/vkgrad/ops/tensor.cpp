#include "vkgrad/ops/tensor.h"

#include "vkgrad/vk/context.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {

Shape::Shape(std::initializer_list<int64_t> dims) {
  if (dims.size() > kMaxRank) throw ShapeError("shapes have at most 6 dims");
  for (int64_t d : dims) {
    if (d < 0) throw ShapeError("negative dimension in a shape");
    dims_[rank_++] = d;
  }
}

Shape Shape::of(const int64_t* dims, int rank) {
  if (rank < 1 || rank > kMaxRank) throw ShapeError("shapes have 1 to 6 dims");
  Shape s;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] < 0) throw ShapeError("negative dimension in a shape");
    s.dims_[s.rank_++] = dims[i];
  }
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

std::string Shape::str() const {
  std::string out = "(";
  for (int i = 0; i < rank_; ++i) {
    if (i) out += ',';
    out += std::to_string(dims_[i]);
  }
  return out + ")";
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != other.dims_[i]) return false;
  return true;
}

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "f32";
    case DType::U32:
      return "u32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
  }
  return "?";
}

namespace {

// The buffer exists, the offset is a multiple of the element size and the elements fit.
void checkPlaced(const char* op, const char* name, const TensorView& t) {
  if (!t.buffer || !*t.buffer)
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() + " has no buffer");
  if (t.offset % dtypeBytes(t.dtype) != 0)
    throw ShapeError(std::string(op) + ": " + name + " offset " + std::to_string(t.offset) +
                     " is not a multiple of " + std::to_string(dtypeBytes(t.dtype)) + " bytes");
  if (t.offset + t.bytes() > t.buffer->size())
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() + " at offset " +
                     std::to_string(t.offset) + " needs " + std::to_string(t.offset + t.bytes()) +
                     " bytes, its buffer has " + std::to_string(t.buffer->size()));
}

}  // namespace

void checkFits(const char* op, const char* name, const TensorView& t, DType dtype) {
  if (t.dtype != dtype)
    throw ShapeError(std::string(op) + ": " + name + " must be " + dtypeName(dtype) + ", got " +
                     dtypeName(t.dtype));
  checkPlaced(op, name, t);
}

void checkFloat(const char* op, const char* name, const TensorView& t) {
  if (!isFloat(t.dtype))
    throw ShapeError(std::string(op) + ": " + name + " must be f32, f16 or bf16, got " +
                     dtypeName(t.dtype));
  checkPlaced(op, name, t);
}

}  // namespace vkgrad::ops

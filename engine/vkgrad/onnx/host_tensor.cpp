#include "vkgrad/onnx/host_tensor.h"

#include <cstdint>

namespace vkgrad::onnx {

const char* elemTypeName(int type) {
  switch (type) {
    case kFloat:
      return "float";
    case kUint8:
      return "uint8";
    case kInt8:
      return "int8";
    case kUint16:
      return "uint16";
    case kInt16:
      return "int16";
    case kInt32:
      return "int32";
    case kInt64:
      return "int64";
    case kString:
      return "string";
    case kBool:
      return "bool";
    case kFloat16:
      return "float16";
    case kDouble:
      return "double";
    case kUint32:
      return "uint32";
    case kUint64:
      return "uint64";
    case kBfloat16:
      return "bfloat16";
    default:
      return "an unknown type";
  }
}

bool isFloatType(int type) {
  return type == kFloat || type == kFloat16 || type == kBfloat16 || type == kDouble;
}

bool isIntegerType(int type) {
  return type == kUint8 || type == kInt8 || type == kUint16 || type == kInt16 || type == kInt32 ||
         type == kInt64 || type == kBool || type == kUint32 || type == kUint64;
}

int64_t dimsNumel(const std::vector<int64_t>& dims) {
  // Saturating: absurd dims from a file or a caller (2^40 x 2^40) read as "too many".
  int64_t n = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  return n;
}

std::string dimsText(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + ")";
}

int64_t HostTensor::numel() const {
  return dimsNumel(dims);
}

std::vector<float> HostTensor::toFloats() const {
  if (isFloat()) return floats;
  return std::vector<float>(ints.begin(), ints.end());
}

HostTensor HostTensor::ofInts(std::vector<int64_t> dims, std::vector<int64_t> values, int type) {
  HostTensor t;
  t.type = type;
  t.dims = std::move(dims);
  t.ints = std::move(values);
  return t;
}

HostTensor HostTensor::ofFloats(std::vector<int64_t> dims, std::vector<float> values) {
  HostTensor t;
  t.type = kFloat;
  t.dims = std::move(dims);
  t.floats = std::move(values);
  return t;
}

}  // namespace vkgrad::onnx

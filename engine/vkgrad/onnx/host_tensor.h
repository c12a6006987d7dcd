// A tensor known on the host while a model is imported: initializers, Constant nodes, and
// whatever the importer folds from them (shape arithmetic: Shape, Gather, Concat, Range, ...).
// Floats are kept as f32, integers and booleans as int64, whatever the file stored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vkgrad::onnx {

// ONNX's TensorProto.DataType numbers for the element types the importer names.
enum ElemType : int {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kBfloat16 = 16,
};
const char* elemTypeName(int type);  // "float", "int64", ... ("type 14" otherwise)
bool isFloatType(int type);          // float, float16, bfloat16, double
bool isIntegerType(int type);        // int8..int64, uint8..uint64, bool

struct HostTensor {
  int type = kFloat;          // the ONNX element type it stands for
  std::vector<int64_t> dims;  // empty: a scalar
  std::vector<float> floats;  // isFloatType(type)
  std::vector<int64_t> ints;  // otherwise (bool: 0 or 1)

  bool isFloat() const { return isFloatType(type); }
  int64_t numel() const;
  // Element i as a double / an integer, whatever the storage.
  double at(int64_t i) const { return isFloat() ? floats[size_t(i)] : double(ints[size_t(i)]); }
  int64_t intAt(int64_t i) const {
    return isFloat() ? int64_t(floats[size_t(i)]) : ints[size_t(i)];
  }
  std::vector<float> toFloats() const;
  static HostTensor ofInts(std::vector<int64_t> dims, std::vector<int64_t> values,
                           int type = kInt64);
  static HostTensor ofFloats(std::vector<int64_t> dims, std::vector<float> values);
};

// "(2,3)"; "()" for a scalar.
std::string dimsText(const std::vector<int64_t>& dims);
int64_t dimsNumel(const std::vector<int64_t>& dims);  // INT64_MAX past it

}  // namespace vkgrad::onnx

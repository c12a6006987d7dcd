// Small ONNX models built in C++ with the onnx protobuf classes, for the importer's tests:
// no Python, no files unless a test writes them.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vkgrad/onnx/model.h"

namespace vkgrad::test {

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17);
  ModelBuilder& input(const std::string& name, std::vector<int64_t> dims, int type = 1);
  ModelBuilder& output(const std::string& name, int type = 1);
  ModelBuilder& floats(const std::string& name, std::vector<int64_t> dims, std::vector<float> v);
  ModelBuilder& ints(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v);
  // A Constant node holding one float, as exporters write scales and epsilons (a float
  // initializer instead would be a parameter wherever a gradient reaches it).
  ModelBuilder& constant(const std::string& name, float value);
  // A node; attributes added to the returned proto (attrInt, attrInts, attrFloat).
  ::onnx::NodeProto& node(const std::string& op, std::vector<std::string> inputs,
                          std::vector<std::string> outputs);
  static void attrInt(::onnx::NodeProto& n, const std::string& name, int64_t v);
  static void attrInts(::onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v);
  static void attrFloat(::onnx::NodeProto& n, const std::string& name, float v);

  std::string bytes() const;
  onnx::Model build(const std::string& source = "test.onnx") const;
  ::onnx::ModelProto& proto() { return model_; }

 private:
  ::onnx::ModelProto model_;
};

}  // namespace vkgrad::test

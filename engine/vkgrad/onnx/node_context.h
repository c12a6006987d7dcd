// What an op's import function sees of the model while the importer walks its nodes: the
// node's inputs (on the host, on the device, or both), its attributes, and where its outputs
// go. Internal to vkgrad_onnx (onnx/ops/*.cpp).
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/onnx/host_tensor.h"
#include "vkgrad/onnx/importer.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::onnx {

// A value of the model: known on the host, on the device, or both (a host constant that a
// device op read is uploaded once and kept). An initializer's host value is the Model's own
// (not copied: an import holds no second copy of the weights); a computed one is owned.
struct Value {
  std::vector<int64_t> dims;  // ONNX's shape (empty: a scalar)
  int type = kFloat;          // ONNX's element type
  std::shared_ptr<const HostTensor> host;
  graph::Tensor device{-1};
  // A float initializer: a trainable parameter, so never folded on the host (its host value
  // still serves inputs that must be known, a Pow's exponent, say).
  bool parameter = false;
  bool onDevice() const { return device.id >= 0; }
};

class NodeContext {
 public:
  using ParameterFn = std::function<graph::Tensor(const std::string& name, const HostTensor&)>;
  NodeContext(graph::Graph& g, const ::onnx::NodeProto& node, std::map<std::string, Value>& values,
              const ParameterFn& param)
      : g(g), node(node), values_(values), param_(param) {}

  graph::Graph& g;
  const ::onnx::NodeProto& node;

  // --- inputs
  int inputCount() const { return node.input_size(); }
  bool has(int i) const { return i < node.input_size() && !node.input(i).empty(); }
  const Value& value(int i) const;
  const std::vector<int64_t>& dims(int i) const { return value(i).dims; }
  int rank(int i) const { return int(dims(i).size()); }
  bool isHost(int i) const { return value(i).host != nullptr; }
  // Known on the host and not a parameter: what the importer computes on the host.
  bool foldable(int i) const { return isHost(i) && !value(i).parameter; }
  bool allHost() const;  // every given input foldable
  // The host value; Error "input i must be known on the host" when it is not.
  const HostTensor& host(int i) const;
  std::vector<int64_t> hostInts(int i) const;  // host(i)'s values as integers
  // The value on the device: a float initializer becomes its parameter, another host value
  // a constant (floats f32, integers u32 ids after a range check against `index_range`, or
  // 0..2^32-1 when none is given).
  graph::Tensor tensor(int i, int64_t index_range = 0);

  // --- attributes
  bool hasAttr(const char* name) const;
  int64_t attrInt(const char* name, int64_t fallback) const;
  float attrFloat(const char* name, float fallback) const;
  std::string attrString(const char* name, const std::string& fallback) const;
  std::vector<int64_t> attrInts(const char* name, std::vector<int64_t> fallback = {}) const;
  const ::onnx::TensorProto* attrTensor(const char* name) const;

  // --- outputs
  int outputCount() const { return node.output_size(); }
  void setHost(int i, HostTensor t);
  // dims: ONNX's shape of the result (a scalar's tensor has shape (1)); defaults to t's.
  void setDevice(int i, graph::Tensor t, std::optional<std::vector<int64_t>> dims = {},
                 int type = kFloat);

  // numpy's broadcast of two shapes (right-aligned, size-1 axes stretched); Error naming both
  // when they do not broadcast.
  std::vector<int64_t> broadcast(const std::vector<int64_t>& a,
                                 const std::vector<int64_t>& b) const;
  // An axis attribute or value normalised to [0, rank); Error when out of range.
  int axis(int64_t a, int rank) const;
  [[noreturn]] void fail(const std::string& why) const;
  std::string name() const;  // "MatMul node \"/h.0/MatMul\""

 private:
  std::map<std::string, Value>& values_;
  const ParameterFn& param_;
};

// Reshape's target shape for an input of `in`: 0 copies the input's axis (unless allowzero),
// one -1 is inferred; fails through c naming both shapes (onnx/ops/shape.cpp).
std::vector<int64_t> reshapeDims(const NodeContext& c, const std::vector<int64_t>& in,
                                 std::vector<int64_t> shape, bool allowzero);

using ImportFn = void (*)(NodeContext&);
// Each op file registers its ops here (onnx/ops/*.cpp: registerXxx(table)).
using OpTable = std::map<std::string, ImportFn>;
void registerElementwise(OpTable& table);
void registerShapeOps(OpTable& table);
void registerConstantOps(OpTable& table);
void registerNnOps(OpTable& table);
const OpTable& opTable();

}  // namespace vkgrad::onnx

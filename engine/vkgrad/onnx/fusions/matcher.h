// The node graph as the fusion patterns read it: who writes a value, who reads it, how
// often, and one-element constants. Internal to onnx/fusions/.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vkgrad/onnx/fusions.h"
#include "vkgrad/onnx/model.h"

namespace vkgrad::onnx {

// Where a pattern reads a value from outside: member node `node`'s input `input`.
struct Operand {
  int node = -1;
  int input = 0;
};

class Matcher {
 public:
  explicit Matcher(const Model& model);

  const ::onnx::NodeProto* node(int i) const { return &graph_.node(i); }
  int nodeCount() const { return graph_.node_size(); }
  // The node that writes `value`, when it is `op`.
  std::optional<int> producer(const std::string& value, const char* op) const;
  // The node that writes `value` when it is `op`, read by nothing else.
  std::optional<int> inner(const std::string& value, const char* op) const;
  // The one node that reads `value` when it is `op` (and nothing else reads it).
  std::optional<int> consumer(const std::string& value, const char* op) const;
  // Every node reading `value` (a node reading it twice listed once); a graph output also
  // counts as a reader outside any pattern (uses() > readers' inputs).
  const std::vector<int>& readers(const std::string& value) const;
  bool isGraphOutput(const std::string& value) const { return outputs_.count(value) > 0; }
  // A one-element constant's value (a Constant node or an initializer).
  std::optional<double> scalar(const std::string& value) const;
  // The values members read that no member writes, but for `except`.
  std::vector<std::string> externals(const std::vector<int>& members,
                                     const std::vector<std::string>& except) const;
  // For a binary node: the input that is not `value`, or nothing.
  static std::optional<std::string> other(const ::onnx::NodeProto& n, const std::string& value);
  static bool near(std::optional<double> v, double want) {
    return v && (v == want || (want != 0 && std::abs(*v - want) <= 1e-5 * std::abs(want)));
  }
  // Mul/Add node i with one operand `value` and the other the constant `c`.
  bool withConstant(int i, const std::string& value, double c) const {
    const auto o = other(graph_.node(i), value);
    return o && near(scalar(*o), c);
  }
  // An integer list attribute of node i (a Transpose's perm), or nothing.
  std::vector<int64_t> ints(int i, const char* name) const;
  // Where the first of `members` (in file order) reads `value`.
  Operand find(const std::vector<int>& members, const std::string& value) const;
  // node i's "name" or, unnamed, its first output: for a fusion's description.
  std::string label(int i) const;

 private:
  const Model& model_;
  const ::onnx::GraphProto& graph_;
  std::map<std::string, int> producer_;
  std::map<std::string, int> uses_;
  std::map<std::string, std::vector<int>> readers_;
  std::map<std::string, int> outputs_;
};

// The pattern finders, each adding what it finds to the plan (fusions.cpp runs them).
void findGelu(const Matcher& m, FusionPlan& plan);
void findLayerNorm(const Matcher& m, FusionPlan& plan);
void findAttention(const Matcher& m, FusionPlan& plan);
void findMatmulEpilogues(const Matcher& m, FusionPlan& plan);

}  // namespace vkgrad::onnx

// Patterns of ONNX nodes that the importer replaces by one graph op, where the op is faster
// than the nodes one by one and computes the same function:
//   - GELU written out (erf form 5 nodes, tanh form 9) -> one activation (fusions/gelu.cpp);
//   - MatMul + Add(bias) [+ an activation | + a residual Add], Gemm + an activation, and a
//     weight's Transpose before either -> the matmul with its epilogue
//     (fusions/matmul_epilogue.cpp);
//   - attention written out (MatMul, scale, causal mask, Softmax, MatMul, the head transposes,
//     a fused QKV's Split) -> flash attention (fusions/attention.cpp);
//   - layer norm written out (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add, as
//     exports before opset 17 write it) -> the layer-norm kernel (fusions/layer_norm.cpp).
// findFusions matches the structure before the import walk; a pattern's inner values must
// feed nothing outside it. What needs the input shapes or host values (a mask being causal,
// a bias's shape) is checked when the pattern is emitted, at its last node: where a check
// fails, the members are imported one by one there instead (still correct: every member's
// outside inputs come before the last member in the file's topological order).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "vkgrad/onnx/model.h"
#include "vkgrad/ops/activation.h"

namespace vkgrad::graph {
class Graph;
}

namespace vkgrad::onnx {

class NodeContext;

// What an emitter sees: the graph, any member node's context (its inputs' values, its
// outputs), and the plain import of a member node (a fallback for part of a pattern).
struct FusionSite {
  graph::Graph& g;
  std::function<NodeContext&(int index)> node;
  std::function<void(int index)> import;
};

struct Fusion {
  std::string description;   // "attention (causal) ending at node \"/h.0/Transpose_3\""
  std::vector<int> members;  // node indices in file order; emitted at the last
  // Emits the pattern's op and sets the last member's outputs; false (having added nothing)
  // when a check on shapes or host values fails, and the members are imported one by one.
  std::function<bool(FusionSite&)> emit;
  // The one-element initializers the pattern takes as constants (a scale, an epsilon): where
  // one is a trainable parameter (a float initializer a gradient reaches), the members import
  // one by one, so that it trains as it would unfused.
  std::vector<std::string> constants;
  // Set where the pattern is one activation of the value `reads` (a GELU written out): a
  // matmul epilogue may take it in.
  struct Applied {
    ops::Activation kind;
    std::string reads;
  };
  std::optional<Applied> activation;
};

struct FusionPlan {
  std::map<int, Fusion> at;  // by the index of the pattern's last node
  std::set<int> skipped;     // the patterns' other nodes, imported only by their fusion
  // Adds f; false (and nothing added) where one of its members is already in a pattern.
  bool add(Fusion f);
  // The fusion whose members include node i, or nullptr.
  const Fusion* containing(int i) const;
  void remove(int last);
};

FusionPlan findFusions(const Model& model);

}  // namespace vkgrad::onnx

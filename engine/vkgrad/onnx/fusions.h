// Patterns of ONNX nodes that the importer replaces by one graph op: an exporter writes
// GELU out as five (erf form) or nine (tanh form) elementwise nodes; vkgrad has it as one
// activation kind, forward and backward (ops/activation.h). Found before the import walk;
// a pattern fuses only when its inner values feed nothing else.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "vkgrad/onnx/model.h"
#include "vkgrad/ops/activation.h"

namespace vkgrad::onnx {

struct Fusion {
  std::string description;  // "GELU (erf form) at node \"/mlp/Mul_1\" (5 nodes)"
  ops::Activation kind;
  std::string input;  // the value the activation reads
};

struct FusionPlan {
  std::map<int, Fusion> at;  // by the index of the pattern's last node: the op to emit there
  std::set<int> skipped;     // the pattern's other nodes, not imported
};

FusionPlan findFusions(const Model& model);

}  // namespace vkgrad::onnx

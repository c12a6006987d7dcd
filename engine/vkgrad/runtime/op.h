// What the graph engine knows about a kind of node, defined once per op in
// engine/vkgrad/runtime/ops/<op>.cpp: its name, its slots (named by enums next to the definition), its
// typed attributes, how it infers output shapes (the builder, in the same file), its backward
// rule and how it records its kernels. Autograd, the planner and the executor read only this
// table; none of them switches on the kind.
#pragma once

#include <any>
#include <vector>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::graph {

class Backward;
struct Launch;
struct Node;

enum class OpKind {
#define VKGRAD_OP(kind) kind,
#include "vkgrad/runtime/ops/list.h"
#undef VKGRAD_OP
};

struct OpDef {
  const char* name;  // "matmul": errors and profiles
  int inputs = 0;    // slots; for a variadic op, the fixed slots after the variable ones
  int outputs = 0;
  bool variadic = false;      // any number of leading inputs (the gradients a clip reads)
  bool view = false;          // the output is its input's bytes: no kernel, no memory
  bool side_effects = false;  // updates persistent tensors in place: never pruned
  int in_place = -1;       // an input slot whose bytes output 0 may take when this is its last use
  int strided_input = -1;  // an input slot that may be a windows dataset (overlapping rows)
  // Output slots (bit i: slot i) stored in f32 whatever the graph's precision
  // (runtime/precision.h): losses, statistics a backward reads, partial sums.
  unsigned f32_outputs = 0;
  // Appends the gradient nodes of a forward node whose outputs have gradients; null: the op
  // is not differentiable (autograd refuses a graph that needs it to be).
  void (*backward)(Backward& b, const Node& forward) = nullptr;
  // The rule runs when any output has a gradient, not only output 0 (a matmul with an applied
  // activation, whose pre-activation output gets one from its reader's fused backward, runtime/ops/fused_activation.h).
  bool backward_from_any_output = false;
  // Records the node's kernels; null records nothing (views).
  void (*launch)(const Launch& l) = nullptr;
};

const OpDef& opDef(OpKind kind);
const char* opName(OpKind kind);

struct Node {
  OpKind op;
  std::vector<int> inputs;         // tensor ids by slot; -1 for an absent optional input
  std::vector<int> outputs;        // tensor ids by slot; -1 for an absent optional output
  std::vector<ops::Write> writes;  // per output: Accumulate adds a later gradient contribution
  std::any attrs;                  // the op's own attribute struct, or empty

  const OpDef& def() const { return opDef(op); }
  bool sideEffects() const { return def().side_effects; }
  bool isView() const { return def().view; }
  template <class Attrs>
  const Attrs& attr() const {
    return std::any_cast<const Attrs&>(attrs);
  }
};

}  // namespace vkgrad::graph

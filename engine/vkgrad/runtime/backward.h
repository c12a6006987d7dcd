// What an op's backward rule (OpDef::backward) sees of autograd: which inputs need
// gradients, the gradient tensors (created on first use), how the next contribution to one
// writes, and a way to add nodes. autograd.cpp walks the forward nodes in reverse and calls
// each rule; the rules themselves live with their ops in engine/vkgrad/runtime/ops/.
#pragma once

#include <any>
#include <map>
#include <vector>

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

class Backward {
 public:
  Graph& graph() { return g_; }
  const Graph& graph() const { return g_; }
  // The gradient of forward output slot `slot` (output 0 always has one when a rule runs,
  // unless its op runs from any output: OpDef::backward_from_any_output).
  int dout(const Node& forward, int slot = 0) const { return grad_.at(forward.outputs.at(slot)); }
  // Input slot `slot` of forward leads from a parameter to the loss and is differentiable.
  bool needs(const Node& forward, int slot) const;
  // The gradient tensor of forward tensor t, created on first use (a view's is the same view
  // of its source's gradient).
  int gradOf(int t);
  // How the next contribution to gradient gid writes: the first overwrites, unless it covers
  // only part of its root (a slice's gradient): then the root is zeroed first and every
  // contribution adds, so rows no slice reaches hold 0.
  ops::Write contribute(int gid);
  // An activation-kind scratch or temporary tensor.
  int temp(const Shape& shape, const char* name, DType dtype = DType::F32);
  // The common case: one node of kind `op` with these inputs writes the gradient of
  // forward's input `slot` as its output 0; `more` are further outputs (a scratch tensor, a
  // second gradient, or -1 for none), written as `more_writes` says (default: overwritten).
  void emit(OpKind op, const Node& forward, int slot, std::vector<int> inputs, std::any attrs,
            const std::vector<int>& more = {}, const std::vector<ops::Write>& more_writes = {});
  // The same for the gradient of forward tensor t, whichever node made it (a fold's target).
  void emitTo(OpKind op, int t, std::vector<int> inputs, std::any attrs,
              const std::vector<int>& more = {}, const std::vector<ops::Write>& more_writes = {});
  // Adds tensor `from` (shaped like gradient gid) into gid under mode: for a rule whose kernel
  // can only overwrite (ops/add.cpp).
  void addInto(int from, int gid, ops::Write mode);
  // Adds `from`, a gradient no rule adds to any more (a node's dout), into gradient gid: as
  // addInto at once, unless gid is a whole tensor with no contribution yet. Then the copy
  // waits for the next rule that contributes to gid, which may take `from` as an addend of
  // its own kernel (takeAddend) so no pass copies it; otherwise the copy is recorded before
  // that contribution, before a rule reads gid as its dout, or at the end. (A residual
  // connection's rules: the residual's gradient is the sum's.)
  void addLater(int from, int gid);
  // The tensor addLater left for gid (-1 if none), which the caller now adds in its own
  // kernel, writing gid with the contribution it asks for next (an overwrite).
  int takeAddend(int gid);
  // Makes `from`, a gradient no rule adds to any more (a node's dout), the gradient of forward
  // tensor t itself instead of a copy of it, where that is safe, and says whether it did: t is
  // an activation of its own bytes (no view, no parameter) with t's shape, this node is its
  // only forward use (so no other contribution follows) and it has no gradient yet. The
  // gradient is then read-only: every rule only reads its dout. (add's backward.)
  bool adopt(int t, int from);
  // Forward nodes' input slots that read t.
  int uses(int t) const { return size_t(t) < uses_.size() ? uses_[size_t(t)] : 0; }
  bool hasGradient(int t) const { return grad_.count(t) > 0; }
  // t's gradient is not written yet and its first contribution would overwrite it all (t
  // owns its bytes: no view of a larger tensor).
  bool wouldOverwrite(int t) const;

 private:
  friend class Autograd;
  explicit Backward(Graph& g) : g_(g) {}
  void zeroFill(int root);  // ops/zero_fill.cpp
  // Records the copy addLater left for gradient root gid, if any.
  void flushAddend(int gid);
  void flushAddends();

  Graph& g_;
  std::vector<bool> needs_;
  std::vector<int> uses_;             // forward nodes' input slots that read each tensor
  std::map<int, int> grad_;           // forward tensor -> gradient tensor
  std::map<int, int> contributions_;  // gradient root -> contributions recorded so far
  std::map<int, int> addends_;        // gradient root -> the tensor addLater left for it
};

}  // namespace vkgrad::graph

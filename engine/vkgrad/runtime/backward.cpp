// The helpers op files' backward rules call (runtime/backward.h). Apart from the autograd pass
// (training/autograd.cpp) that runs the rules, so that a program that never differentiates
// (the inference library, vkgrad::runtime) links the rules' code without the pass.
#include "vkgrad/runtime/backward.h"

#include <string>
#include <utility>
#include <vector>

namespace vkgrad::graph {

bool Backward::needs(const Node& forward, int slot) const {
  return slot < int(forward.inputs.size()) && forward.inputs[size_t(slot)] >= 0 &&
         needs_[size_t(forward.inputs[size_t(slot)])];
}

int Backward::gradOf(int t) {
  auto it = grad_.find(t);
  if (it != grad_.end()) return it->second;
  const int producer = g_.producer(t);
  int gid;
  if (producer >= 0 && g_.nodes()[size_t(producer)].isView()) {
    // A view's gradient is the same view of its source's gradient: contributions to either
    // land in the same bytes, counted once per root (contribute()).
    const Node view = g_.nodes()[size_t(producer)];  // a copy: addNode appends
    const int source = view.inputs.at(0);
    const int source_grad = gradOf(source);
    const uint64_t offset = g_.tensor(t).offset - g_.tensor(source).offset;
    gid = g_.viewOf(Tensor{source_grad}, g_.tensor(t).shape, offset);
    g_.addNode({view.op, {source_grad}, {gid}, {}, view.attrs});
  } else {
    const TensorInfo& info = g_.tensor(t);
    TensorInfo gi{"grad." + info.name, info.shape, DType::F32, TensorKind::Gradient};
    gi.persistent = info.kind == TensorKind::Parameter;
    gid = g_.newTensor(std::move(gi));
  }
  grad_[t] = gid;
  return gid;
}

bool Backward::adopt(int t, int from) {
  const TensorInfo& info = g_.tensor(t);
  const int producer = g_.producer(t);
  if (grad_.count(t) || size_t(t) >= uses_.size() || uses_[size_t(t)] != 1 ||
      info.kind != TensorKind::Activation || info.root != t ||
      (producer >= 0 && g_.nodes()[size_t(producer)].isView()) ||
      !(g_.tensor(from).shape == info.shape) || g_.tensor(from).dtype != DType::F32)
    return false;
  grad_[t] = from;
  return true;
}

bool Backward::wouldOverwrite(int t) const {
  if (grad_.count(t)) return false;
  const TensorInfo& info = g_.tensor(t);
  const auto done = contributions_.find(info.root);
  return info.root == t && (done == contributions_.end() || done->second == 0);
}

void Backward::addLater(int from, int gid) {
  const int root = g_.tensor(gid).root;
  const auto done = contributions_.find(root);
  if (root != gid || (done != contributions_.end() && done->second > 0) || addends_.count(root)) {
    addInto(from, gid, contribute(gid));
    return;
  }
  addends_[root] = from;
}

int Backward::takeAddend(int gid) {
  const auto it = addends_.find(gid);
  if (it == addends_.end()) return -1;
  const int from = it->second;
  addends_.erase(it);
  return from;
}

void Backward::flushAddend(int gid) {
  const int from = takeAddend(gid);
  if (from >= 0) addInto(from, gid, contribute(gid));
}

void Backward::flushAddends() {
  while (!addends_.empty()) flushAddend(addends_.begin()->first);
}

ops::Write Backward::contribute(int gid) {
  const int root = g_.tensor(gid).root;
  flushAddend(root);  // a copy addLater left goes first; this contribution then adds
  int& count = contributions_[root];
  if (count++ > 0) return ops::Write::Accumulate;
  if (g_.tensor(gid).bytes() == g_.tensor(root).bytes()) return ops::Write::Overwrite;
  zeroFill(root);
  return ops::Write::Accumulate;
}

int Backward::temp(const Shape& shape, const char* name, DType dtype) {
  TensorInfo info{name, shape, dtype, TensorKind::Activation};
  info.differentiable = dtype == DType::F32;
  return g_.newTensor(std::move(info));
}

void Backward::emit(OpKind op, const Node& forward, int slot, std::vector<int> inputs,
                    std::any attrs, const std::vector<int>& more,
                    const std::vector<ops::Write>& more_writes) {
  emitTo(op, forward.inputs.at(size_t(slot)), std::move(inputs), std::move(attrs), more,
         more_writes);
}

void Backward::emitTo(OpKind op, int t, std::vector<int> inputs, std::any attrs,
                      const std::vector<int>& more, const std::vector<ops::Write>& more_writes) {
  const int gid = gradOf(t);
  std::vector<int> outputs{gid};
  std::vector<ops::Write> writes{contribute(gid)};
  outputs.insert(outputs.end(), more.begin(), more.end());
  writes.insert(writes.end(), more_writes.begin(), more_writes.end());
  writes.resize(outputs.size(), ops::Write::Overwrite);
  g_.addNode({op, std::move(inputs), std::move(outputs), std::move(writes), std::move(attrs)});
}

}  // namespace vkgrad::graph

// What an op's launch (OpDef::launch) sees of the executor: the recorder, the node, and where
// each of its slots lives. Only op files and the executor include this.
#pragma once

#include <functional>

#include "vkgrad/ops/tensor.h"
#include "vkgrad/runtime/op.h"

namespace vkgrad::graph {

struct Launch {
  vk::Recorder& rec;
  const Node& node;
  std::function<ops::TensorView(int tensor_id)> view;  // an empty view for -1

  ops::TensorView in(int slot) const { return view(node.inputs.at(size_t(slot))); }
  ops::TensorView out(int slot) const { return view(node.outputs.at(size_t(slot))); }
  ops::Write write(int slot) const { return node.writes.at(size_t(slot)); }
  template <class Attrs>
  const Attrs& attr() const {
    return node.attr<Attrs>();
  }
};

}  // namespace vkgrad::graph

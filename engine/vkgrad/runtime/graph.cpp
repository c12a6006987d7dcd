#include "vkgrad/runtime/graph.h"

#include <cstring>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/random.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::graph {

const char* tensorKindName(TensorKind kind) {
  switch (kind) {
    case TensorKind::Activation:
      return "activation";
    case TensorKind::Input:
      return "input";
    case TensorKind::Parameter:
      return "parameter";
    case TensorKind::Constant:
      return "constant";
    case TensorKind::State:
      return "state";
    case TensorKind::Gradient:
      return "gradient";
    case TensorKind::Dataset:
      return "dataset";
  }
  return "?";
}

int Graph::newTensor(TensorInfo info) {
  const int id = int(tensors_.size());
  if (info.root < 0) info.root = id;
  if (info.name.empty()) info.name = "t" + std::to_string(id);
  tensors_.push_back(std::move(info));
  producers_.push_back(-1);
  return id;
}

int Graph::addNode(Node node) {
  // A strided dataset's shape claims more elements than its buffer holds: only the input
  // slot an OpDef names as strided_input (a gather's table, which knows the stride) may read it.
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const int in = node.inputs[i];
    if (in < 0) continue;
    const TensorInfo& t = tensor(Tensor{in});
    if (t.kind == TensorKind::Dataset && t.dataset->row_stride > 0 &&
        node.def().strided_input != int(i))
      throw Error(std::string(opName(node.op)) + ": dataset " + t.name +
                  " has overlapping rows (row stride " + std::to_string(t.dataset->row_stride) +
                  "); read it only through gather()");
  }
  const OpDef& def = node.def();
  const bool arity = node.outputs.size() == size_t(def.outputs) &&
                     (def.variadic ? node.inputs.size() >= size_t(def.inputs)
                                   : node.inputs.size() == size_t(def.inputs));
  if (!arity)
    throw Error(std::string("graph: a ") + def.name + " node takes " + std::to_string(def.inputs) +
                (def.variadic ? "+" : "") + " inputs and " + std::to_string(def.outputs) +
                " outputs, got " + std::to_string(node.inputs.size()) + " and " +
                std::to_string(node.outputs.size()));
  const int id = int(nodes_.size());
  node.writes.resize(node.outputs.size(), ops::Write::Overwrite);
  for (int out : node.outputs)
    if (out >= 0 && producers_.at(size_t(out)) < 0) producers_[size_t(out)] = id;
  nodes_.push_back(std::move(node));
  return id;
}

const TensorInfo& Graph::tensor(Tensor t) const {
  if (t.id < 0 || size_t(t.id) >= tensors_.size())
    throw Error("graph: tensor handle " + std::to_string(t.id) + " is not in this graph");
  return tensors_[size_t(t.id)];
}

void Graph::check(Tensor t, const char* op) const {
  if (t.id < 0 || size_t(t.id) >= tensors_.size())
    throw Error(std::string(op) + ": tensor handle " + std::to_string(t.id) +
                " is not in this graph");
}

std::string Graph::describe(const char* op, std::initializer_list<Tensor> ts) const {
  std::string text = std::string(op) + ":";
  const char* sep = " ";
  for (Tensor t : ts) {
    if (!t) continue;
    text += sep + tensor(t).shape.str();
    sep = ", ";
  }
  return text;
}

Tensor Graph::input(const std::string& name, const Shape& shape, DType dtype) {
  if (shape.numel() <= 0) throw ShapeError("input " + name + ": empty shape " + shape.str());
  TensorInfo info{name, shape, dtype, TensorKind::Input};
  info.differentiable = false;
  return {newTensor(std::move(info))};
}

Tensor Graph::parameter(const Parameter& p) {
  // One tensor per parameter: a model built twice into one graph (the Trainer's micro-batches)
  // shares its weights and their gradient.
  for (size_t t = 0; t < tensors_.size(); ++t)
    if (tensors_[t].parameter == &p) return {int(t)};
  TensorInfo info{p.name, p.shape, DType::F32, TensorKind::Parameter};
  info.parameter = &p;
  // A frozen parameter is a constant to autograd: no gradient flows into it.
  info.differentiable = !p.frozen;
  return {newTensor(std::move(info))};
}

Tensor Graph::constant(const std::string& name, const Shape& shape, std::vector<float> values) {
  if (int64_t(values.size()) != shape.numel() || shape.numel() == 0)
    throw ShapeError("constant " + name + ": " + std::to_string(values.size()) +
                     " values for shape " + shape.str());
  TensorInfo info{name, shape, DType::F32, TensorKind::Constant};
  info.differentiable = false;
  info.data.resize(values.size());
  std::memcpy(info.data.data(), values.data(), values.size() * 4);
  return {newTensor(std::move(info))};
}

Tensor Graph::constantIds(const std::string& name, const Shape& shape,
                          std::vector<uint32_t> values) {
  if (int64_t(values.size()) != shape.numel() || shape.numel() == 0)
    throw ShapeError("constant " + name + ": " + std::to_string(values.size()) +
                     " values for shape " + shape.str());
  TensorInfo info{name, shape, DType::U32, TensorKind::Constant};
  info.differentiable = false;
  info.data = std::move(values);
  return {newTensor(std::move(info))};
}

Tensor Graph::dataset(const Dataset& d) {
  for (size_t i = 0; i < tensors_.size(); ++i)  // read in place: one tensor per dataset
    if (tensors_[i].dataset == &d) return {int(i)};
  // A declared dataset (an empty buffer, for estimates) has no bytes to check yet.
  const bool declared = d.buffer && !*d.buffer;
  if (d.shape.numel() <= 0 || d.row_stride < 0 || d.offset % 4 != 0 || !d.buffer ||
      (!declared && d.buffer->size() < d.offset + uint64_t(d.extent()) * 4))
    throw ShapeError("dataset " + d.name + " " + d.shape.str() + " (row stride " +
                     std::to_string(d.row_stride) + ", offset " + std::to_string(d.offset) +
                     "): empty, or its buffer holds " +
                     std::to_string(d.buffer ? d.buffer->size() : 0) + " bytes");
  TensorInfo info{d.name, d.shape, d.dtype, TensorKind::Dataset};
  info.differentiable = false;
  info.dataset = &d;
  return {newTensor(std::move(info))};
}

int Graph::generator() {
  if (rng_ < 0) {
    const ops::RngState state = ops::RngState::make(seed_);
    TensorInfo info{"rng", Shape{4}, DType::U32, TensorKind::State};
    info.differentiable = false;
    info.data = {state.seed_lo, state.seed_hi, state.offset_lo, state.offset_hi};
    rng_ = newTensor(std::move(info));
  }
  return rng_;
}

Graph::RandomStream Graph::randomStream() {
  const int rng = generator();
  return {rng, streams_++};
}

int Graph::output(const Shape& shape, DType dtype, bool differentiable, const char* name) {
  TensorInfo info{name, shape, dtype};
  info.differentiable = differentiable;
  return newTensor(std::move(info));
}

int Graph::statusTensor(const char* name) {
  TensorInfo status{name, {2}, DType::U32, TensorKind::State};
  status.differentiable = false;
  status.data = {0, 0};
  return newTensor(std::move(status));
}

int Graph::viewOf(Tensor x, const Shape& shape, uint64_t offset) {
  const TensorInfo& from = tensor(x);
  TensorInfo info{
      "", shape, from.dtype,
      from.kind == TensorKind::Gradient ? TensorKind::Gradient : TensorKind::Activation};
  info.root = from.root;
  info.offset = from.offset + offset;
  info.differentiable = from.differentiable;
  return newTensor(std::move(info));
}

void Graph::setDtype(int tensor_id, DType dtype) {
  TensorInfo& info = tensors_.at(size_t(tensor_id));
  if (!ops::isFloat(info.dtype) || !ops::isFloat(dtype))
    throw Error("setDtype: " + info.name + " is " + ops::dtypeName(info.dtype) + ", not " +
                ops::dtypeName(dtype));
  info.offset = info.offset / ops::dtypeBytes(info.dtype) * ops::dtypeBytes(dtype);
  info.dtype = dtype;
}

Tensor Graph::recomputed(const std::function<Tensor()>& block) {
  if (!recompute_ || !training_) return block();
  if (in_segment_) throw Error("recomputed: segments do not nest");
  in_segment_ = true;
  const int first = int(nodes_.size());
  Tensor out;
  try {
    out = block();
  } catch (...) {
    in_segment_ = false;
    throw;
  }
  in_segment_ = false;
  if (int(nodes_.size()) > first) segments_.push_back({first, int(nodes_.size())});
  return out;
}

void Graph::markOutput(Tensor t) {
  check(t, "markOutput");
  for (int o : outputs_)
    if (o == t.id) return;
  outputs_.push_back(t.id);
}

}  // namespace vkgrad::graph

#include "graph/graph.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "graph/parameters.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "vk/error.h"

namespace vkgrad::graph {
namespace {

Shape makeShape(const int64_t* dims, int rank) {
  switch (rank) {
    case 1:
      return {dims[0]};
    case 2:
      return {dims[0], dims[1]};
    case 3:
      return {dims[0], dims[1], dims[2]};
    case 4:
      return {dims[0], dims[1], dims[2], dims[3]};
    default:
      throw ShapeError("shapes have 1 to 4 dims");
  }
}

// shape without its last axis ((1) for a vector).
Shape leading(const Shape& s) {
  int64_t dims[Shape::kMaxRank];
  for (int i = 0; i + 1 < s.rank(); ++i) dims[i] = s[i];
  if (s.rank() == 1) return {1};
  return makeShape(dims, s.rank() - 1);
}

}  // namespace

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

const char* opName(OpKind op) {
  switch (op) {
    case OpKind::Reshape:
      return "reshape";
    case OpKind::Slice:
      return "slice";
    case OpKind::Gather:
      return "gather";
    case OpKind::Matmul:
      return "matmul";
    case OpKind::Add:
      return "add";
    case OpKind::Activation:
      return "activation";
    case OpKind::LayerNorm:
      return "layernorm";
    case OpKind::CrossEntropy:
      return "crossEntropy";
    case OpKind::Attention:
      return "attention";
    case OpKind::MatmulBackward:
      return "matmulBackward";
    case OpKind::AddBackward:
      return "addBackward";
    case OpKind::ActivationBackward:
      return "activationBackward";
    case OpKind::LayerNormBackward:
      return "layernormBackward";
    case OpKind::CrossEntropyBackward:
      return "crossEntropyBackward";
    case OpKind::AttentionBackward:
      return "attentionBackward";
    case OpKind::GatherBackward:
      return "gatherBackward";
    case OpKind::Dropout:
      return "dropout";
    case OpKind::DropoutBackward:
      return "dropoutBackward";
    case OpKind::TopKWeights:
      return "topKWeights";
    case OpKind::Categorical:
      return "categorical";
    case OpKind::ZeroFill:
      return "zeroFill";
    case OpKind::AdvanceStep:
      return "advanceStep";
    case OpKind::ClipGradNorm:
      return "clipGradNorm";
    case OpKind::SgdUpdate:
      return "sgd";
    case OpKind::AdamWUpdate:
      return "adamw";
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
  // A strided dataset's shape claims more elements than its buffer holds: only a gather,
  // which knows the stride, may read it.
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const int in = node.inputs[i];
    if (in < 0) continue;
    const TensorInfo& t = tensor(Tensor{in});
    if (t.kind == TensorKind::Dataset && t.dataset->row_stride > 0 &&
        !(node.op == OpKind::Gather && i == 0))
      throw Error(std::string(opName(node.op)) + ": dataset " + t.name +
                  " has overlapping rows (row stride " + std::to_string(t.dataset->row_stride) +
                  "); read it only through gather()");
  }
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
  for (const TensorInfo& t : tensors_)
    if (t.parameter == &p) throw Error("graph: parameter " + p.name + " added twice");
  TensorInfo info{p.name, p.shape, DType::F32, TensorKind::Parameter};
  info.parameter = &p;
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

Tensor Graph::dataset(const Dataset& d) {
  for (const TensorInfo& t : tensors_)
    if (t.dataset == &d) throw Error("graph: dataset " + d.name + " added twice");
  if (d.shape.numel() <= 0 || d.row_stride < 0 || d.buffer.size() < uint64_t(d.extent()) * 4)
    throw ShapeError("dataset " + d.name + " " + d.shape.str() + " (row stride " +
                     std::to_string(d.row_stride) + "): empty, or its buffer holds " +
                     std::to_string(d.buffer.size()) + " bytes");
  TensorInfo info{d.name, d.shape, d.dtype, TensorKind::Dataset};
  info.differentiable = false;
  info.dataset = &d;
  return {newTensor(std::move(info))};
}

Tensor Graph::matmul(Tensor a, Tensor b, Tensor bias, bool trans_a, bool trans_b) {
  check(a, "matmul");
  check(b, "matmul");
  if (bias) check(bias, "matmul");
  const Shape sa = shape(a), sb = shape(b);  // copies: newTensor may move tensors_
  auto fail = [&](const std::string& why) {
    std::string text = describe("matmul", {a, b});
    if (bias) text += " + bias " + shape(bias).str();
    throw ShapeError(text + ": " + why);
  };
  if (tensor(a).dtype != DType::F32 || tensor(b).dtype != DType::F32) fail("operands must be f32");
  if (sa.rank() < 2 || sa.rank() > 3 || sb.rank() < 2 || sb.rank() > 3)
    fail("operands must be 2-D or 3-D");
  const int ra = sa.rank(), rb = sb.rank();
  const int64_t m = trans_a ? sa[ra - 1] : sa[ra - 2], ka = trans_a ? sa[ra - 2] : sa[ra - 1];
  const int64_t kb = trans_b ? sb[rb - 1] : sb[rb - 2], n = trans_b ? sb[rb - 2] : sb[rb - 1];
  if (ka != kb)
    fail("inner dims differ (" + std::to_string(ka) + " vs " + std::to_string(kb) + ")");
  const int64_t ba = ra == 3 ? sa[0] : 1, bb = rb == 3 ? sb[0] : 1;
  if (ba != bb && ba != 1 && bb != 1) fail("batch sizes differ");
  if (bias && !(shape(bias) == Shape{n})) fail("bias must be (" + std::to_string(n) + ")");
  const Shape out = ra == 2 && rb == 2 ? Shape{m, n} : Shape{std::max(ba, bb), m, n};
  const int c = newTensor({"", out});
  Node node{OpKind::Matmul, {a.id, b.id, bias ? bias.id : -1}, {c}};
  node.attrs.trans_a = trans_a;
  node.attrs.trans_b = trans_b;
  addNode(std::move(node));
  return {c};
}

Tensor Graph::add(Tensor a, Tensor b) {
  check(a, "add");
  check(b, "add");
  if (tensor(a).dtype != DType::F32 || tensor(b).dtype != DType::F32)
    throw ShapeError(describe("add", {a, b}) + ": operands must be f32");
  // The kernel broadcasts its second operand; addition commutes, so the larger goes first.
  if (shape(a).numel() < shape(b).numel()) std::swap(a, b);
  ops::broadcastFold("add", shape(a), shape(b));  // throws ShapeError with both shapes
  const int c = newTensor({"", shape(a)});
  addNode({OpKind::Add, {a.id, b.id}, {c}});
  return {c};
}

Tensor Graph::activation(Tensor x, ops::Activation kind, float param) {
  check(x, "activation");
  if (tensor(x).dtype != DType::F32)
    throw ShapeError(describe(ops::activationName(kind), {x}) + ": x must be f32");
  const int y = newTensor({"", shape(x)});
  Node node{OpKind::Activation, {x.id}, {y}};
  node.attrs.activation = kind;
  node.attrs.param = param;
  addNode(std::move(node));
  return {y};
}

Tensor Graph::dropout(Tensor x, float p) {
  check(x, "dropout");
  if (tensor(x).dtype != DType::F32) throw ShapeError(describe("dropout", {x}) + ": x must be f32");
  if (!(p >= 0.0f && p < 1.0f))
    throw ShapeError(describe("dropout", {x}) + ": p must be in [0, 1), got " + std::to_string(p));
  if (p == 0.0f || !training_) return x;
  const int y = newTensor({"", shape(x)});
  Node node{OpKind::Dropout, {x.id, generator()}, {y}};
  node.attrs.param = p;
  node.attrs.stream = streams_++;
  addNode(std::move(node));
  return {y};
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

Tensor Graph::sample(Tensor logits, const ops::SampleOptions& options) {
  check(logits, "sample");
  const Shape s = shape(logits);  // a copy: newTensor may move tensors_
  if (tensor(logits).dtype != DType::F32 || s.numel() == 0)
    throw ShapeError(describe("sample", {logits}) + ": logits must be non-empty f32 (...,V)");
  if (!(options.temperature > 0.0f) || !std::isfinite(options.temperature))
    throw Error("sample: temperature " + std::to_string(options.temperature) +
                " must be positive and finite");
  if (options.top_k < 0) throw Error("sample: top_k " + std::to_string(options.top_k) + " must be >= 0");
  TensorInfo weights_info{"", s};
  weights_info.differentiable = false;
  const int weights = newTensor(std::move(weights_info));
  Node topk{OpKind::TopKWeights, {logits.id}, {weights}};
  topk.attrs.sample = options;
  addNode(std::move(topk));
  TensorInfo ids_info{"", leading(s), DType::U32};
  ids_info.differentiable = false;
  const int ids = newTensor(std::move(ids_info));
  Node draw{OpKind::Categorical, {weights, generator()}, {ids}};
  draw.attrs.stream = streams_++;
  addNode(std::move(draw));
  return {ids};
}

Tensor Graph::layernorm(Tensor x, Tensor gamma, Tensor beta, float eps) {
  check(x, "layernorm");
  check(gamma, "layernorm");
  check(beta, "layernorm");
  const Shape sx = shape(x);  // a copy: newTensor may move tensors_
  const Shape vec{sx.back()};
  if (!(shape(gamma) == vec) || !(shape(beta) == vec))
    throw ShapeError(describe("layernorm", {x, gamma, beta}) + ": gamma and beta must be " +
                     vec.str());
  if (!(eps >= 0)) throw ShapeError(describe("layernorm", {x}) + ": eps must be >= 0");
  const int y = newTensor({"", sx});
  const int mean = newTensor({"", {sx.rows()}});
  const int rstd = newTensor({"", {sx.rows()}});
  Node node{OpKind::LayerNorm, {x.id, gamma.id, beta.id}, {y, mean, rstd}};
  node.attrs.param = eps;
  addNode(std::move(node));
  return {y};
}

Tensor Graph::crossEntropy(Tensor logits, Tensor targets) {
  check(logits, "crossEntropy");
  check(targets, "crossEntropy");
  const Shape sl = shape(logits);  // a copy: newTensor may move tensors_
  if (tensor(targets).dtype != DType::U32 || tensor(logits).dtype != DType::F32)
    throw ShapeError(describe("crossEntropy", {logits, targets}) +
                     ": logits must be f32 and targets u32");
  if (sl.rank() < 2 || !(shape(targets) == leading(sl)))
    throw ShapeError(describe("crossEntropy", {logits, targets}) + ": targets must be " +
                     leading(sl).str() + ", logits' shape without the class axis");
  TensorInfo status{"crossEntropy.status", {2}, DType::U32, TensorKind::State};
  status.differentiable = false;
  status.data = {0, 0};
  const int st = newTensor(std::move(status));
  const int loss = newTensor({"", {1}});
  const int rows = newTensor({"", shape(targets)});
  const int saved = newTensor({"", {ops::crossEntropySavedSize(sl.rows())}});
  addNode({OpKind::CrossEntropy, {logits.id, targets.id, st}, {loss, rows, saved}});
  return {loss};
}

Tensor Graph::reshape(Tensor x, const Shape& s) {
  check(x, "reshape");
  if (s.numel() != shape(x).numel())
    throw ShapeError(describe("reshape", {x}) + " -> " + s.str() + ": element counts differ");
  const TensorInfo& from = tensor(x);
  TensorInfo info{
      "", s, from.dtype,
      from.kind == TensorKind::Gradient ? TensorKind::Gradient : TensorKind::Activation};
  info.root = from.root;
  info.offset = from.offset;
  info.differentiable = from.differentiable;
  const int y = newTensor(std::move(info));
  addNode({OpKind::Reshape, {x.id}, {y}});
  return {y};
}

Tensor Graph::slice(Tensor x, int64_t begin, int64_t end) {
  check(x, "slice");
  const TensorInfo& from = tensor(x);
  const Shape sx = from.shape;
  if (!(0 <= begin && begin < end && end <= sx[0]))
    throw ShapeError(describe("slice", {x}) + " [" + std::to_string(begin) + ", " +
                     std::to_string(end) +
                     "): rows must satisfy 0 <= begin < end <= " + std::to_string(sx[0]));
  int64_t dims[Shape::kMaxRank];
  for (int i = 0; i < sx.rank(); ++i) dims[i] = sx[i];
  dims[0] = end - begin;
  TensorInfo info{
      "", makeShape(dims, sx.rank()), from.dtype,
      from.kind == TensorKind::Gradient ? TensorKind::Gradient : TensorKind::Activation};
  info.root = from.root;
  // Rows are contiguous, so the view is the root's bytes from the first row on.
  info.offset = from.offset + uint64_t(begin) * uint64_t(sx.numel() / sx[0]) * 4;
  info.differentiable = from.differentiable;
  const int y = newTensor(std::move(info));
  Node node{OpKind::Slice, {x.id}, {y}};
  node.attrs.begin = begin;
  node.attrs.end = end;
  addNode(std::move(node));
  return {y};
}

Tensor Graph::gather(Tensor table, Tensor ids) {
  check(table, "gather");
  check(ids, "gather");
  const Shape st = shape(table), si = shape(ids);  // copies: newTensor may move tensors_
  const DType dtype = tensor(table).dtype;
  const bool differentiable = tensor(table).differentiable && dtype == DType::F32;
  if (tensor(ids).dtype != DType::U32)
    throw ShapeError(describe("gather", {table, ids}) + ": ids must be u32");
  if (si.rank() + st.rank() - 1 > Shape::kMaxRank)
    throw ShapeError(describe("gather", {table, ids}) + ": the result would have more than " +
                     std::to_string(Shape::kMaxRank) + " dims");
  const TensorInfo& table_info = tensor(table);
  const bool is_strided =
      table_info.kind == TensorKind::Dataset && table_info.dataset->row_stride > 0;
  const Dataset* strided = is_strided ? table_info.dataset : nullptr;
  if (st[0] > int64_t(UINT32_MAX) ||
      (strided ? strided->extent() : st.numel()) > int64_t(UINT32_MAX))
    throw ShapeError(describe("gather", {table, ids}) + ": the table exceeds 32-bit indexing");
  int64_t dims[Shape::kMaxRank];
  int rank = 0;
  for (int i = 0; i < si.rank(); ++i) dims[rank++] = si[i];
  for (int i = 1; i < st.rank(); ++i) dims[rank++] = st[i];
  TensorInfo status{"gather.status", {2}, DType::U32, TensorKind::State};
  status.differentiable = false;
  status.data = {0, 0};
  const int st_id = newTensor(std::move(status));
  TensorInfo out{"", makeShape(dims, rank), dtype};
  out.differentiable = differentiable;
  const int y = newTensor(std::move(out));
  Node node{OpKind::Gather, {table.id, ids.id, st_id}, {y}};
  if (strided) node.attrs.row_stride = strided->row_stride;
  addNode(std::move(node));
  return {y};
}

Tensor Graph::attention(Tensor q, Tensor k, Tensor v, bool causal, float scale) {
  check(q, "attention");
  check(k, "attention");
  check(v, "attention");
  const Shape sq = shape(q), sk = shape(k), sv = shape(v);  // copies: newTensor may move tensors_
  auto fail = [&](const std::string& why) {
    throw ShapeError(describe("attention", {q, k, v}) + ": " + why);
  };
  for (Tensor t : {q, k, v})
    if (tensor(t).dtype != DType::F32) fail("q, k and v must be f32");
  if (sq.rank() != 4 || sk.rank() != 4 || !(sk == sv))
    fail("q must be (B,Tq,H,D), k and v the same (B,Tk,H,D)");
  if (sk[0] != sq[0] || sk[2] != sq[2] || sk[3] != sq[3]) fail("q and k differ in B, H or D");
  if (sq[3] > 256) fail("head dim " + std::to_string(sq[3]) + " exceeds 256");
  if (!(scale >= 0)) fail("scale must be >= 0 (0: 1/sqrt(D))");
  const int o = newTensor({"", sq});
  const int lse = newTensor({"attention.lse", {sq[0], sq[2], sq[1]}});
  Node node{OpKind::Attention, {q.id, k.id, v.id}, {o, lse}};
  node.attrs.heads = sq[2];
  node.attrs.head_dim = sq[3];
  node.attrs.causal = causal;
  node.attrs.scale = scale;
  addNode(std::move(node));
  return {o};
}

Tensor Graph::attention(Tensor qkv, int64_t heads, bool causal, float scale) {
  check(qkv, "attention");
  const Shape s = shape(qkv);  // a copy: newTensor may move tensors_
  auto fail = [&](const std::string& why) {
    throw ShapeError(describe("attention", {qkv}) + " with " + std::to_string(heads) +
                     " heads: " + why);
  };
  if (tensor(qkv).dtype != DType::F32) fail("qkv must be f32");
  if (s.rank() != 3) fail("qkv must be (B,T,3*H*D)");
  if (heads <= 0 || s[2] % (3 * heads) != 0) fail("the last dim must be a multiple of 3*heads");
  const int64_t d = s[2] / (3 * heads);
  if (d > 256) fail("head dim " + std::to_string(d) + " exceeds 256");
  if (!(scale >= 0)) fail("scale must be >= 0 (0: 1/sqrt(D))");
  const int o = newTensor({"", {s[0], s[1], heads * d}});
  const int lse = newTensor({"attention.lse", {s[0], heads, s[1]}});
  Node node{OpKind::Attention, {qkv.id, qkv.id, qkv.id}, {o, lse}};
  node.attrs.heads = heads;
  node.attrs.head_dim = d;
  node.attrs.fused = true;
  node.attrs.causal = causal;
  node.attrs.scale = scale;
  addNode(std::move(node));
  return {o};
}

void Graph::markOutput(Tensor t) {
  check(t, "markOutput");
  for (int o : outputs_)
    if (o == t.id) return;
  outputs_.push_back(t.id);
}

}  // namespace vkgrad::graph

#include "graph/autograd.h"

#include <string>

#include "ops/layernorm.h"
#include "vk/error.h"

namespace vkgrad::graph {
namespace {

using ops::Write;

class Builder {
 public:
  Builder(Graph& g, Tensor loss) : g_(g), loss_(loss.id) {}

  Gradients run() {
    const TensorInfo& l = g_.tensor(Tensor{loss_});
    if (!(l.shape == Shape{1}) || l.dtype != DType::F32)
      throw Error("backward: the loss must be an f32 tensor of shape (1), got " + l.shape.str());
    const int forward_nodes = int(g_.nodes().size());
    markNeeded(forward_nodes);
    if (!needs_[size_t(loss_)]) throw Error("backward: no parameter reaches the loss");

    // d loss / d loss = 1, read on the device by the first backward kernel.
    grad_[loss_] = g_.newTensor({"grad.seed",
                                 {1},
                                 DType::F32,
                                 TensorKind::Constant,
                                 -1,
                                 false,
                                 false,
                                 nullptr,
                                 {0x3f800000u}});
    contributions_[grad_[loss_]] = 1;

    for (int n = forward_nodes - 1; n >= 0; --n) {
      const Node node = g_.nodes()[size_t(n)];  // a copy: rules append to the node list
      if (node.isView()) continue;              // its gradient is a view (gradOf)
      bool any = false;
      for (int in : node.inputs) any = any || (in >= 0 && needs_[size_t(in)]);
      if (!any || node.outputs.empty() || !grad_.count(node.outputs[0])) continue;
      rule(node);
    }

    Gradients out;
    out.loss = Tensor{loss_};
    out.of = grad_;
    out.of.erase(loss_);
    for (size_t t = 0; t < g_.tensors().size(); ++t)
      if (g_.tensor(int(t)).kind == TensorKind::Parameter && grad_.count(int(t)))
        out.parameters.push_back({Tensor{int(t)}, Tensor{grad_[int(t)]}});
    return out;
  }

 private:
  // needs_[t]: t depends on a parameter and leads to the loss, and is differentiable.
  void markNeeded(int forward_nodes) {
    const size_t n = g_.tensors().size();
    std::vector<bool> from_param(n), to_loss(n);
    for (size_t t = 0; t < n; ++t) from_param[t] = g_.tensor(int(t)).kind == TensorKind::Parameter;
    for (int i = 0; i < forward_nodes; ++i) {
      const Node& node = g_.nodes()[size_t(i)];
      bool any = false;
      for (int in : node.inputs)
        any = any || (in >= 0 && from_param[size_t(in)] && g_.tensor(in).differentiable);
      for (int out : node.outputs)
        if (out >= 0) from_param[size_t(out)] = from_param[size_t(out)] || any;
    }
    to_loss[size_t(loss_)] = true;
    for (int i = forward_nodes - 1; i >= 0; --i) {
      const Node& node = g_.nodes()[size_t(i)];
      bool any = false;
      for (int out : node.outputs) any = any || (out >= 0 && to_loss[size_t(out)]);
      if (any)
        for (int in : node.inputs)
          if (in >= 0) to_loss[size_t(in)] = true;
    }
    needs_.assign(n, false);
    for (size_t t = 0; t < n; ++t)
      needs_[t] = from_param[t] && to_loss[t] && g_.tensor(int(t)).differentiable &&
                  g_.tensor(int(t)).dtype == DType::F32;
  }

  // The gradient tensor of forward tensor t, created on first use.
  int gradOf(int t) {
    auto it = grad_.find(t);
    if (it != grad_.end()) return it->second;
    const int producer = g_.producer(t);
    int gid;
    if (producer >= 0 && g_.nodes()[size_t(producer)].isView()) {
      // A view's gradient is the same view of its source's gradient: contributions to either
      // land in the same bytes, counted once per root (contribute()).
      const Node& view = g_.nodes()[size_t(producer)];
      const int source = gradOf(view.inputs[0]);
      gid = view.op == OpKind::Reshape
                ? g_.reshape(Tensor{source}, g_.tensor(t).shape).id
                : g_.slice(Tensor{source}, view.attrs.begin, view.attrs.end).id;
    } else {
      const TensorInfo& info = g_.tensor(t);
      TensorInfo gi{"grad." + info.name, info.shape, DType::F32, TensorKind::Gradient};
      gi.persistent = info.kind == TensorKind::Parameter;
      gid = g_.newTensor(std::move(gi));
    }
    grad_[t] = gid;
    return gid;
  }

  // How the next contribution to gradient tensor gid writes: the first one overwrites, unless
  // it covers only part of the root (a slice's gradient): then the root is zeroed first and
  // every contribution adds, so rows no slice reaches hold 0.
  Write contribute(int gid) {
    const int root = g_.tensor(gid).root;
    int& count = contributions_[root];
    if (count++ > 0) return Write::Accumulate;
    if (g_.tensor(gid).bytes() == g_.tensor(root).bytes()) return Write::Overwrite;
    g_.addNode({OpKind::ZeroFill, {}, {root}});
    return Write::Accumulate;
  }

  bool needs(const Node& node, int which) const {
    return which < int(node.inputs.size()) && node.inputs[size_t(which)] >= 0 &&
           needs_[size_t(node.inputs[size_t(which)])];
  }

  // One gradient output: grad of forward input `which`.
  void emit(OpKind op, const Node& forward, int which, std::vector<int> inputs) {
    const int gid = gradOf(forward.inputs[size_t(which)]);
    Node node{op, std::move(inputs), {gid}};
    node.attrs = forward.attrs;
    node.attrs.which = which;
    node.writes = {contribute(gid)};
    g_.addNode(std::move(node));
  }

  int temp(const Shape& shape, const char* name) {
    return g_.newTensor({name, shape, DType::F32, TensorKind::Activation});
  }

  // The backward rules, one per forward op.
  void rule(const Node& f) {
    const int out = f.outputs[0];
    const int dout = grad_.at(out);
    switch (f.op) {
      case OpKind::Matmul:
        // dA = dC·op(B)ᵀ, dB = op(A)ᵀ·dC, dbias = Σ rows dC (ops/matmul.h).
        for (int which = 0; which < 3; ++which)
          if (needs(f, which))
            emit(OpKind::MatmulBackward, f, which, {f.inputs[0], f.inputs[1], dout});
        break;
      case OpKind::Add:
        for (int which = 0; which < 2; ++which)
          if (needs(f, which)) emit(OpKind::AddBackward, f, which, {dout});
        break;
      case OpKind::Activation:
        if (needs(f, 0)) {
          const bool reads_x = ops::activationBackwardReadsX(f.attrs.activation);
          emit(OpKind::ActivationBackward, f, 0, {reads_x ? f.inputs[0] : out, dout});
        }
        break;
      case OpKind::LayerNorm:
        layernormRule(f, dout);
        break;
      case OpKind::CrossEntropy:
        if (needs(f, 0))
          emit(OpKind::CrossEntropyBackward, f, 0, {f.inputs[0], f.inputs[1], f.outputs[2], dout});
        break;
      case OpKind::Gather:
        throw Error("backward: gather has no gradient for its table " +
                    g_.tensor(f.inputs[0]).name +
                    " (gather reads data; a trainable lookup needs an embedding op)");
      default:
        throw Error(std::string("backward: no rule for ") + opName(f.op));
    }
  }

  // One kernel computes dx with dgamma and dbeta under one Write mode, and always writes dx.
  // So gradients are grouped by mode (usually one group); a group without x's gradient
  // writes dx into a temporary.
  void layernormRule(const Node& f, int dy) {
    const int x = f.inputs[0];
    const Shape sx = g_.tensor(x).shape;  // a copy: temp() adds tensors
    int grads[3] = {-1, -1, -1};
    Write modes[3] = {};
    for (int which = 0; which < 3; ++which) {
      if (!needs(f, which)) continue;
      grads[which] = gradOf(f.inputs[size_t(which)]);
      modes[which] = contribute(grads[which]);
    }
    for (Write mode : {Write::Overwrite, Write::Accumulate}) {
      int outs[3] = {-1, -1, -1};
      bool any = false;
      for (int which = 0; which < 3; ++which)
        if (grads[which] >= 0 && modes[which] == mode) outs[which] = grads[which], any = true;
      if (!any) continue;
      if (outs[0] < 0) outs[0] = temp(sx, "layernorm.dx_unused");
      const int scratch =
          outs[1] >= 0 || outs[2] >= 0
              ? temp({ops::layernormBackwardScratch(sx.rows(), sx.back())}, "layernorm.scratch")
              : -1;
      Node node{OpKind::LayerNormBackward,
                {x, f.inputs[1], f.outputs[1], f.outputs[2], dy},
                {outs[0], outs[1], outs[2], scratch}};
      node.attrs = f.attrs;
      node.writes = {mode, mode, mode, Write::Overwrite};
      g_.addNode(std::move(node));
    }
  }

  Graph& g_;
  int loss_;
  std::vector<bool> needs_;
  std::map<int, int> grad_;           // forward tensor -> gradient tensor
  std::map<int, int> contributions_;  // gradient root -> contributions recorded so far
};

}  // namespace

Tensor Gradients::operator[](Tensor t) const {
  auto it = of.find(t.id);
  if (it == of.end())
    throw Error("gradients: tensor " + std::to_string(t.id) +
                " has no gradient (not differentiable, or it does not reach the loss)");
  return Tensor{it->second};
}

Gradients backward(Graph& g, Tensor loss) {
  return Builder(g, loss).run();
}

}  // namespace vkgrad::graph

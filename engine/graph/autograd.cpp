#include "graph/autograd.h"

#include <string>

#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "vk/error.h"

namespace vkgrad::graph {
namespace {

using ops::Write;

class Builder {
 public:
  Builder(Graph& g, Tensor loss) : g_(g), loss_(loss.id) {}

  // seed: the gradient of loss_ (-1: a constant 1 for a scalar loss).
  Gradients run(int seed) {
    const int requested = loss_;
    const int forward_nodes = int(g_.nodes().size());
    const TensorInfo& l = g_.tensor(Tensor{loss_});
    if (seed < 0 && (!(l.shape == Shape{1}) || l.dtype != DType::F32))
      throw Error("backward: the loss must be an f32 tensor of shape (1), got " + l.shape.str());
    if (seed < 0) {
      // d loss / d loss = 1, read on the device by the first backward kernel.
      seed = g_.newTensor({"grad.seed",
                           {1},
                           DType::F32,
                           TensorKind::Constant,
                           -1,
                           false,
                           false,
                           nullptr,
                           {0x3f800000u}});
    }
    // Rules start from the first non-view node: a reshaped output hands its source the seed
    // reshaped back (no copy). A slice's source has rows the seed does not cover.
    for (int p = g_.producer(loss_); p >= 0 && g_.nodes()[size_t(p)].isView();
         p = g_.producer(loss_)) {
      const Node view = g_.nodes()[size_t(p)];
      if (view.op != OpKind::Reshape)
        throw Error("backward: the output " + g_.tensor(requested).name +
                    " is a slice view; differentiate a tensor that owns its rows");
      loss_ = view.inputs[0];
      seed = g_.reshape(Tensor{seed}, g_.tensor(loss_).shape).id;
    }
    markNeeded(forward_nodes);
    if (!needs_[size_t(loss_)]) throw Error("backward: no parameter reaches the loss");
    grad_[loss_] = seed;
    contributions_[g_.tensor(seed).root] = 1;

    for (int n = forward_nodes - 1; n >= 0; --n) {
      const Node node = g_.nodes()[size_t(n)];  // a copy: rules append to the node list
      if (node.isView()) continue;              // its gradient is a view (gradOf)
      bool any = false;
      for (int in : node.inputs) any = any || (in >= 0 && needs_[size_t(in)]);
      if (!any || node.outputs.empty() || !grad_.count(node.outputs[0])) continue;
      rule(node);
    }

    Gradients out;
    out.loss = Tensor{requested};
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
      case OpKind::Dropout:
        if (needs(f, 0)) emit(OpKind::DropoutBackward, f, 0, {dout, f.inputs[1]});
        break;
      case OpKind::CrossEntropy:
        if (needs(f, 0))
          emit(OpKind::CrossEntropyBackward, f, 0, {f.inputs[0], f.inputs[1], f.outputs[2], dout});
        break;
      case OpKind::Gather:
        // A trainable embedding: dtable[v] = sum of dout rows whose id is v (deterministic).
        if (needs(f, 0)) {
          const int ids = f.inputs[1];
          const int64_t vocab = g_.tensor(f.inputs[0]).shape[0];
          const int gid = gradOf(f.inputs[0]);
          const Write mode = contribute(gid);
          TensorInfo scratch{"gather.scratch",
                             {ops::embeddingBackwardScratch(vocab, g_.tensor(ids).shape.numel())},
                             DType::U32};
          scratch.differentiable = false;
          const int sid = g_.newTensor(std::move(scratch));
          Node node{OpKind::GatherBackward, {ids, dout, f.inputs[2]}, {gid, sid}};
          node.writes = {mode, Write::Overwrite};
          g_.addNode(std::move(node));
        }
        break;
      case OpKind::Attention:
        attentionRule(f, dout);
        break;
      default:
        throw Error(std::string("backward: no rule for ") + opName(f.op));
    }
  }

  // One kernel computes dx under its own Write mode and dgamma, dbeta under one shared mode,
  // and always writes dx. So one node, unless dgamma and dbeta need different modes: then a
  // second node for one of them, which writes its dx into a temporary (as does a node
  // whose x needs no gradient).
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
    bool dx_done = grads[0] < 0;
    auto emitNode = [&](int gamma, int beta, Write params_mode) {
      Write dx_mode = Write::Overwrite;
      int dx = -1;
      if (!dx_done) {
        dx = grads[0];
        dx_mode = modes[0];
        dx_done = true;
      } else {
        dx = temp(sx, "layernorm.dx_unused");
      }
      const int scratch =
          gamma >= 0 || beta >= 0
              ? temp({ops::layernormBackwardScratch(sx.rows(), sx.back())}, "layernorm.scratch")
              : -1;
      Node node{OpKind::LayerNormBackward,
                {x, f.inputs[1], f.outputs[1], f.outputs[2], dy},
                {dx, gamma, beta, scratch}};
      node.attrs = f.attrs;
      node.writes = {dx_mode, params_mode, params_mode, Write::Overwrite};
      g_.addNode(std::move(node));
    };
    for (Write mode : {Write::Overwrite, Write::Accumulate}) {
      const int gamma = grads[1] >= 0 && modes[1] == mode ? grads[1] : -1;
      const int beta = grads[2] >= 0 && modes[2] == mode ? grads[2] : -1;
      if (gamma >= 0 || beta >= 0) emitNode(gamma, beta, mode);
    }
    if (!dx_done) emitNode(-1, -1, Write::Overwrite);  // dx alone
  }

  // One kernel writes dq, dk and dv (or, fused, the three column blocks of one gradient),
  // overwriting. A gradient this is not the first contribution to (q, k, v sharing a
  // tensor, or one used elsewhere too) goes through a temporary that is then added in.
  void attentionRule(const Node& f, int dout) {
    int outs[3] = {-1, -1, -1};
    std::vector<std::pair<int, int>> addins;  // (temporary, gradient)
    std::vector<Write> addin_modes;
    auto target = [&](int which) {
      const int input = f.inputs[size_t(which)];
      const Shape shape = g_.tensor(input).shape;  // a copy: temp() adds tensors
      if (!needs(f, which)) return temp(shape, "attention.d_unused");
      const int gid = gradOf(input);
      const Write mode = contribute(gid);
      if (mode == Write::Overwrite) return gid;
      const int t = temp(shape, "attention.dpart");
      addins.push_back({t, gid});
      addin_modes.push_back(mode);
      return t;
    };
    if (f.attrs.fused) {
      outs[0] = outs[1] = outs[2] = target(0);
    } else {
      for (int which = 0; which < 3; ++which) outs[which] = target(which);
    }
    const Shape so = g_.tensor(f.outputs[0]).shape;  // (B, Tq, ...)
    const int scratch = temp({so[0] * f.attrs.heads * so[1]}, "attention.scratch");
    Node node{OpKind::AttentionBackward,
              {f.inputs[0], f.inputs[1], f.inputs[2], f.outputs[0], f.outputs[1], dout},
              {outs[0], outs[1], outs[2], scratch}};
    node.attrs = f.attrs;
    node.writes.assign(4, Write::Overwrite);
    g_.addNode(std::move(node));
    for (size_t i = 0; i < addins.size(); ++i) {
      Node add{OpKind::AddBackward, {addins[i].first}, {addins[i].second}};
      add.writes = {addin_modes[i]};
      g_.addNode(std::move(add));
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
  return Builder(g, loss).run(-1);
}

Gradients backward(Graph& g, Tensor output, Tensor output_grad) {
  const TensorInfo& o = g.tensor(output);
  const TensorInfo& d = g.tensor(output_grad);
  if (o.dtype != DType::F32 || d.dtype != DType::F32 || !(o.shape == d.shape))
    throw ShapeError("backward: the output " + o.shape.str() + " " + ops::dtypeName(o.dtype) +
                     " and its gradient " + d.shape.str() + " " + ops::dtypeName(d.dtype) +
                     " must be f32 of the same shape");
  if (output_grad == output) throw Error("backward: an output cannot be its own gradient");
  return Builder(g, output).run(output_grad.id);
}

}  // namespace vkgrad::graph

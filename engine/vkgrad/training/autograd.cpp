#include "vkgrad/training/autograd.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/runtime/backward.h"

namespace vkgrad::graph {

// Walks the forward nodes in reverse and calls each op's rule (OpDef::backward).
class Autograd {
 public:
  Autograd(Graph& g, Tensor loss) : b_(g), loss_(loss.id) {}

  // The parameters' gradients of `into` take this backward's contributions, all added.
  void accumulateInto(const Gradients& into) {
    for (const auto& [parameter, grad] : into.parameters) {
      b_.grad_[parameter.id] = grad.id;
      b_.contributions_[b_.g_.tensor(grad).root] = 1;
    }
  }

  // seed: the gradient of loss_ (-1: a constant 1 for a scalar loss).
  Gradients run(int seed) {
    Graph& g = b_.g_;
    const int requested = loss_;
    const int forward_nodes = int(g.nodes().size());
    const TensorInfo& l = g.tensor(Tensor{loss_});
    if (seed < 0 && (!(l.shape == Shape{1}) || l.dtype != DType::F32))
      throw Error("backward: the loss must be an f32 tensor of shape (1), got " + l.shape.str());
    if (seed < 0) {
      // d loss / d loss = 1, read on the device by the first backward kernel.
      TensorInfo one{"grad.seed", {1}, DType::F32, TensorKind::Constant};
      one.differentiable = false;
      one.data = {0x3f800000u};
      seed = g.newTensor(std::move(one));
    }
    // Rules start from the first non-view node: an output that is a whole view of what a node
    // wrote (a reshape) hands its source the seed reshaped back (no copy). A view of part of
    // its source (a slice) leaves rows the seed does not cover.
    for (int p = g.producer(loss_); p >= 0 && g.nodes()[size_t(p)].isView();
         p = g.producer(loss_)) {
      const int source = g.nodes()[size_t(p)].inputs.at(0);
      if (g.tensor(loss_).bytes() != g.tensor(source).bytes())
        throw Error("backward: the output " + g.tensor(requested).name + " is a " +
                    opName(g.nodes()[size_t(p)].op) +
                    " of part of its source; differentiate a tensor that owns its rows");
      loss_ = source;
      seed = g.reshape(Tensor{seed}, g.tensor(loss_).shape).id;
    }
    markNeeded(forward_nodes);
    if (!b_.needs_[size_t(loss_)]) throw Error(noParameterMessage());
    b_.grad_[loss_] = seed;
    b_.contributions_[g.tensor(seed).root] = 1;

    // Recomputed segments (Graph::recomputed), by the index of their last node.
    std::map<int, Graph::Segment> segments;
    for (const Graph::Segment& seg : g.segments())
      if (seg.end <= forward_nodes) segments[seg.end - 1] = seg;
    for (int n = forward_nodes - 1; n >= 0; --n) {
      const auto seg = segments.find(n);
      if (seg != segments.end()) {
        recompute(seg->second);
        n = seg->second.first;  // the loop steps past it
        continue;
      }
      apply(Node(g.nodes()[size_t(n)]));  // a copy: rules append to the node list
    }
    b_.flushAddends();

    Gradients out;
    out.loss = Tensor{requested};
    out.of = b_.grad_;
    out.of.erase(loss_);
    for (size_t t = 0; t < g.tensors().size(); ++t)
      if (g.tensor(int(t)).kind == TensorKind::Parameter && b_.grad_.count(int(t)))
        out.parameters.push_back({Tensor{int(t)}, Tensor{b_.grad_[int(t)]}});
    return out;
  }

 private:
  // Appends the gradient nodes of one forward node, where it has work.
  void apply(const Node& node) {
    if (node.isView()) return;  // its gradient is a view (gradOf)
    bool any = false;
    for (int in : node.inputs) any = any || (in >= 0 && b_.needs_[size_t(in)]);
    const OpDef& def = node.def();
    bool has_grad = !node.outputs.empty() && b_.grad_.count(node.outputs[0]);
    if (def.backward_from_any_output)
      for (int out : node.outputs) has_grad = has_grad || (out >= 0 && b_.grad_.count(out));
    if (!any || !has_grad) return;
    if (!def.backward) throw Error(std::string("backward: no rule for ") + def.name);
    // The rule reads its outputs' gradients: whole, with any copy addLater left for them.
    for (int out : node.outputs)
      if (out >= 0 && b_.grad_.count(out)) b_.flushAddend(b_.g_.tensor(b_.grad_[out]).root);
    def.backward(b_, node);
  }

  // A recomputed segment: its forward nodes again, each output a new tensor (a view of the
  // new input where the node is a view), then the gradient rules of the copies in reverse.
  // The copies read what the segment read from outside it, so the originals' activations
  // are dead after the forward pass. A gradient an output already has (from a reader after
  // the segment) moves to its copy; afterwards every copy's gradient is also its original's.
  void recompute(const Graph::Segment& seg) {
    Graph& g = b_.g_;
    bool any = false;
    for (int i = seg.first; i < seg.end; ++i)
      for (int out : g.nodes()[size_t(i)].outputs) any = any || (out >= 0 && b_.grad_.count(out));
    if (!any) return;
    std::map<int, int> copy;  // original tensor -> its recomputed copy
    std::vector<Node> nodes;
    for (int i = seg.first; i < seg.end; ++i) {
      Node node = g.nodes()[size_t(i)];
      const int source = node.inputs.empty() ? -1 : node.inputs[0];
      for (int& in : node.inputs)
        if (in >= 0 && copy.count(in)) in = copy[in];
      for (int& out : node.outputs) {
        if (out < 0) continue;
        const TensorInfo info = g.tensor(out);
        int c;
        if (node.isView()) {
          c = g.viewOf(Tensor{node.inputs.at(0)}, info.shape,
                       info.offset - g.tensor(source).offset);
        } else {
          TensorInfo fresh = info;
          fresh.name += ".recomputed";
          fresh.root = -1;
          fresh.offset = 0;
          c = g.newTensor(std::move(fresh));
        }
        copy[out] = c;
        out = c;
      }
      g.addNode(node);
      nodes.push_back(node);
    }
    b_.needs_.resize(g.tensors().size(), false);
    b_.uses_.resize(g.tensors().size(), 0);
    for (const auto& [original, c] : copy) {
      b_.needs_[size_t(c)] = b_.needs_[size_t(original)];
      b_.uses_[size_t(c)] = b_.uses_[size_t(original)];
      const auto grad = b_.grad_.find(original);
      if (grad != b_.grad_.end()) {
        b_.grad_[c] = grad->second;
        b_.grad_.erase(grad);
      }
    }
    for (auto node = nodes.rbegin(); node != nodes.rend(); ++node) apply(*node);
    for (const auto& [original, c] : copy)
      if (b_.grad_.count(c)) b_.grad_[original] = b_.grad_[c];
  }

  // Why nothing needs a gradient: no parameter, or only frozen ones (ParameterStore::setFrozen).
  std::string noParameterMessage() const {
    const Graph& g = b_.g_;
    int frozen = 0;
    for (const TensorInfo& t : g.tensors())
      frozen += t.kind == TensorKind::Parameter && !t.differentiable;
    if (frozen == 0) return "backward: no parameter reaches the loss";
    return "backward: no trainable parameter reaches the loss (the graph's " +
           std::to_string(frozen) + " frozen parameter(s) get no gradient)";
  }

  // needs_[t]: t depends on a parameter and leads to the loss, and is differentiable.
  void markNeeded(int forward_nodes) {
    const Graph& g = b_.g_;
    const size_t n = g.tensors().size();
    std::vector<bool> from_param(n), to_loss(n);
    for (size_t t = 0; t < n; ++t) from_param[t] = g.tensor(int(t)).kind == TensorKind::Parameter;
    for (int i = 0; i < forward_nodes; ++i) {
      const Node& node = g.nodes()[size_t(i)];
      bool any = false;
      for (int in : node.inputs)
        any = any || (in >= 0 && from_param[size_t(in)] && g.tensor(in).differentiable);
      for (int out : node.outputs)
        if (out >= 0) from_param[size_t(out)] = from_param[size_t(out)] || any;
    }
    to_loss[size_t(loss_)] = true;
    for (int i = forward_nodes - 1; i >= 0; --i) {
      const Node& node = g.nodes()[size_t(i)];
      bool any = false;
      for (int out : node.outputs) any = any || (out >= 0 && to_loss[size_t(out)]);
      if (any)
        for (int in : node.inputs)
          if (in >= 0) to_loss[size_t(in)] = true;
    }
    b_.uses_.assign(n, 0);
    for (int i = 0; i < forward_nodes; ++i)
      for (int in : g.nodes()[size_t(i)].inputs)
        if (in >= 0) ++b_.uses_[size_t(in)];
    b_.needs_.assign(n, false);
    for (size_t t = 0; t < n; ++t)
      b_.needs_[t] = from_param[t] && to_loss[t] && g.tensor(int(t)).differentiable &&
                     g.tensor(int(t)).dtype == DType::F32;
  }

  Backward b_;
  int loss_;
};

Tensor Gradients::operator[](Tensor t) const {
  auto it = of.find(t.id);
  if (it == of.end())
    throw Error("gradients: tensor " + std::to_string(t.id) +
                " has no gradient (not differentiable, or it does not reach the loss)");
  return Tensor{it->second};
}

Gradients backward(Graph& g, Tensor loss) {
  return Autograd(g, loss).run(-1);
}

namespace {

// output_grad must be an f32 gradient of output's shape, and not output itself.
void checkOutputGrad(const Graph& g, Tensor output, Tensor output_grad) {
  const TensorInfo& o = g.tensor(output);
  const TensorInfo& d = g.tensor(output_grad);
  if (o.dtype != DType::F32 || d.dtype != DType::F32 || !(o.shape == d.shape))
    throw ShapeError("backward: the output " + o.shape.str() + " " + ops::dtypeName(o.dtype) +
                     " and its gradient " + d.shape.str() + " " + ops::dtypeName(d.dtype) +
                     " must be f32 of the same shape");
  if (output_grad == output) throw Error("backward: an output cannot be its own gradient");
}

}  // namespace

Gradients backward(Graph& g, Tensor output, Tensor output_grad) {
  checkOutputGrad(g, output, output_grad);
  return Autograd(g, output).run(output_grad.id);
}

Gradients backward(Graph& g, Tensor output, Tensor output_grad, const Gradients& into) {
  checkOutputGrad(g, output, output_grad);
  Autograd autograd(g, output);
  autograd.accumulateInto(into);
  return autograd.run(output_grad.id);
}

}  // namespace vkgrad::graph

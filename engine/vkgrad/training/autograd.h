// Reverse-mode autograd on a Graph: backward nodes are appended to the same graph by walking
// the forward nodes in reverse, one backward rule per op (autograd.cpp). Only tensors that
// depend on a parameter and lead to the loss get gradients; inputs, constants and u32 tensors
// never do. A tensor used more than once gets one gradient tensor: its first contribution
// (in execution order) overwrites it, later ones accumulate into it. A view's gradient (reshape,
// first-axis slice) is the same view of its source's gradient, so it costs no kernel either;
// a gradient that slices may cover only in part is zeroed first and only accumulated into.
// A gather passes a gradient to an f32 table that depends on a parameter (a trainable
// embedding), never to data (datasets, inputs, u32 tables). Attention's q, k and v get theirs
// from one kernel; from a fused QKV tensor, as one gradient written in place. An activation
// read by one matmul only (an MLP's hidden layer) is fused into that matmul's backward, which
// writes the activation input's gradient directly (runtime/ops/fused_activation.h): the activation's output
// then has no gradient tensor of its own. A residual connection's sum hands its gradient to
// the residual (an add's, or Graph::matmulAdd's) without a copy where it can: adopted when
// nothing else reads the residual, else added by the next kernel that writes the residual's
// gradient where that kernel can add it (layer norm's backward: Backward::addLater), and
// copied only where none can.
#pragma once

#include <map>
#include <vector>

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

struct Gradients {
  Tensor loss;            // or the output differentiated
  std::map<int, int> of;  // forward tensor id -> its gradient tensor id
  // (parameter, gradient) for every parameter that reaches the loss, in graph order.
  // Parameter gradients are persistent: readable after a step, updated by the optimizer.
  std::vector<std::pair<Tensor, Tensor>> parameters;
  // The gradient of t; throws Error when t got none (pruned, not differentiable, or a fused
  // activation's output).
  Tensor operator[](Tensor t) const;
};

// loss: an f32 tensor of shape (1) in g. Appends the backward nodes. Throws Error for a loss
// of another shape, or when no parameter reaches the loss.
Gradients backward(Graph& g, Tensor loss);
// The same from any f32 output and a given gradient of it, output_grad (same shape: an input
// fed per step, a constant, or a tensor the graph computes): the parameters' gradients of
// sum(output ∘ output_grad). output may be a reshape of what a node wrote, not a slice.
// Throws ShapeError on mismatched shapes, Error when no parameter reaches output.
Gradients backward(Graph& g, Tensor output, Tensor output_grad);
// Gradient accumulation over micro-batches built into one graph: as backward(g, output,
// output_grad), but the parameter gradients of `into` (an earlier backward on this graph) are
// this one's too, and every contribution adds to them, so after both run their bytes hold the
// sum. Nodes run in the order they were added, so each micro-batch's activations die before
// the next one's forward begins and the arena holds one micro-batch's (training/trainer.h).
Gradients backward(Graph& g, Tensor output, Tensor output_grad, const Gradients& into);

}  // namespace vkgrad::graph

// Fusions between backward rules: what one op's rule may take over from the rule of the op
// that produced its input, so an intermediate gradient is never stored.
#pragma once

#include <optional>

#include "vkgrad/ops/activation.h"
#include "vkgrad/runtime/backward.h"

namespace vkgrad::graph {

// The activation y = f(x) behind tensor y, when the rule of y's only reader may write dx =
// f'(x) ⊙ dy itself (ops::MatmulGrads::da_act_x): y is the output of an Activation node, or
// of a matmul that applies the activation (Graph::matmulActivation, x its pre output), f's
// derivative reads x, y is read by one forward node and has no gradient yet, x needs one (for
// a matmul: one of its inputs needs a gradient), and x's first contribution would overwrite
// it. The reader then emits dx (Backward::emitTo(x)) and never creates dy, so the rule of y's
// producer finds no gradient of y (the activation's records nothing; the matmul's starts from
// dx).
struct FusedActivation {
  int x;  // the tensor whose gradient the reader writes: f's input
  ops::Activation kind;
  float param;
};
std::optional<FusedActivation> fusedActivation(const Backward& b, int y);
// The matmul half of fusedActivation (runtime/ops/matmul.cpp): y is `node`'s output.
std::optional<FusedActivation> appliedActivationBackward(const Backward& b, const Node& node, int y);

// Adds f's backward, dx += f'(x) ⊙ dy (the first contribution overwrites), to the gradient of
// x, reading x or y as the kind's derivative needs (runtime/ops/activation.cpp).
void emitActivationBackward(Backward& b, int x, int y, int dy, ops::Activation kind, float param);

}  // namespace vkgrad::graph

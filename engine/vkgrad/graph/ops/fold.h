// Folds between backward rules: what one op's rule may take over from the rule of the op
// that produced its input, so an intermediate gradient is never stored.
#pragma once

#include <optional>

#include "vkgrad/graph/backward.h"
#include "vkgrad/ops/activation.h"

namespace vkgrad::graph {

// The activation y = f(x) behind tensor y, when the rule of y's only reader may write dx =
// f'(x) ⊙ dy itself (ops::MatmulGrads::da_act_x): y is an Activation node's output whose
// derivative reads x (ops::activationBackwardReadsX), read by one forward node, with no
// gradient yet; x needs a gradient, and its first contribution would overwrite it. The reader
// then emits dx against `node` (its input slot 0, x) and never creates dy, so the
// activation's own rule finds no gradient of y and records nothing (ops/activation.cpp).
struct ActivationFold {
  Node node;  // the activation's node (a copy)
  ops::Activation kind;
  float param;
};
std::optional<ActivationFold> activationFold(const Backward& b, int y);

}  // namespace vkgrad::graph

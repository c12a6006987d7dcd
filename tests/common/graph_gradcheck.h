// The whole-graph gradient check: every parameter's gradient, as a compiled graph's backward
// nodes write it, against finite differences of a scalar the same executor computes. Composite
// graphs are checked end to end this way; checkGradients (gradcheck.h) samples and compares.
#pragma once

#include <functional>

#include <gtest/gtest.h>

#include "common/gradcheck.h"
#include "common/random.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::test {

// Runs one step of exec (compiled from g, with grads = graph::backward(g, ...)) for the analytic
// gradients, then one step per evaluation of value(), which must read the scalar being
// differentiated after a step (the loss, or a weighted sum of an output). Each evaluation
// uploads the parameters' current (perturbed) values first, so the store's buffers end with
// the last evaluation's. Every parameter of store needs a gradient in grads.
// Options for a float32 mean loss: a relative step of 1e-2 keeps the loss's rounding noise
// (~1e-7) far below the gradients, and the ops on the paths checked are smooth, so the O(h^2)
// truncation stays small too; 1e-2 tolerance. max_coords coordinates per tensor.
GradCheckOptions lossGradCheckOptions(int max_coords = 12);

::testing::AssertionResult checkParameterGradients(
    vk::Context& context, const graph::ParameterStore& store, const graph::Graph& g,
    const graph::Gradients& grads, graph::Executor& exec, const std::function<double()>& value,
    Rng& rng, const GradCheckOptions& options);

}  // namespace vkgrad::test

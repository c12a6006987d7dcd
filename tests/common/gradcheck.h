// The one finite-difference gradient checker every differentiable op's test uses.
//
// A test picks a fixed random weight w per output and defines the scalar
//   loss(inputs) = sum_i w_i * out_i(inputs)          (computed in double)
// so the upstream gradient of every output is w. It runs the op's backward with
// dout = w to get analytic gradients, and checkGradients compares them with central
// differences of loss() at sampled coordinates of each input:
//   fd = (loss(x + h e_j) - loss(x - h e_j)) / (x_j+h - (x_j-h)),   h = rel_step * max(1, |x_j|)
// (the denominator uses the perturbations as actually rounded to float). The error is
// normalised by the largest analytic gradient of that input. A loss read back as one f32
// scalar carries rounding noise of a few units in its last place, which no step size
// removes: loss_ulps grants that much (ulps of |loss| over the step) before the error counts.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/random.h"

namespace vkgrad::test {

struct GradInput {
  std::string name;
  std::vector<float>* values;       // perturbed in place, restored afterwards
  std::span<const float> analytic;  // d loss / d values, from the op's backward
};

struct GradCheckOptions {
  double tolerance = 2e-3;  // on the normalised error
  double rel_step = 1e-3;   // h relative to max(1, |x|)
  size_t max_coords = 40;   // per input; all of them when the input is smaller
  double loss_ulps = 0.0;   // f32 rounding noise of loss() forgiven, in ulps of |loss|
};

// loss() must read the current contents of every GradInput::values.
::testing::AssertionResult checkGradients(const std::function<double()>& loss,
                                          const std::vector<GradInput>& inputs, Rng& rng,
                                          const GradCheckOptions& options = {});

// sum_i w_i * out_i in double: the loss a gradient test differentiates.
double weightedSum(std::span<const float> out, std::span<const float> w);

}  // namespace vkgrad::test

// CPU references for the activations, in double (std::erf, std::tanh, std::exp), so they
// are the trusted side of a test.
#pragma once

#include <cstdint>

#include "vkgrad/ops/activation.h"

namespace vkgrad::ops::ref {

double activate(Activation kind, double x, double param);
// d activate / dx at x.
double activationDerivative(Activation kind, double x, double param);

void activation(Activation kind, const float* x, float* y, int64_t n, float param);
// dx = f'(x) * dy, overwritten.
void activationBackward(Activation kind, const float* x, const float* dy, float* dx, int64_t n,
                        float param);

}  // namespace vkgrad::ops::ref

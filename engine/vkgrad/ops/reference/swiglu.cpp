#include "vkgrad/ops/reference/swiglu.h"

#include <cmath>

namespace vkgrad::ops::ref {
namespace {

double sigmoid(double g) {
  return 1.0 / (1.0 + std::exp(-g));
}

}  // namespace

void swiglu(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    y[i] = float(g * sigmoid(g) * double(up[i]));
  }
}

void swigluBackward(const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                    int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i], s = sigmoid(g);
    dgate[i] = float(double(dy[i]) * double(up[i]) * s * (1.0 + g * (1.0 - s)));
    dup[i] = float(double(dy[i]) * g * s);
  }
}

}  // namespace vkgrad::ops::ref

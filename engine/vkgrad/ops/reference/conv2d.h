// CPU reference of ops/conv2d.h, as the defining sum over output pixels and taps (no im2col),
// in double. Shapes as ops::conv2dShape gives them; the caller checks them first.
#pragma once

#include <cstdint>
#include <vector>

#include "vkgrad/ops/conv2d.h"

namespace vkgrad::ops::ref {

// x: (N,C,H,W), w: (O,C/G,KH,KW), bias: (O) or empty -> y (N,O,OH,OW).
std::vector<float> conv2d(const std::vector<float>& x, const Shape& xs, const std::vector<float>& w,
                          const Shape& ws, const std::vector<float>& bias, const Conv2dParams& p);

struct Conv2dGradsRef {
  std::vector<float> dx, dw, dbias;  // shaped like x, w and (O)
};
// The three gradients for dy (N,O,OH,OW): each tap's product sent back to both factors.
Conv2dGradsRef conv2dBackward(const std::vector<float>& x, const Shape& xs,
                              const std::vector<float>& w, const Shape& ws,
                              const std::vector<float>& dy, const Conv2dParams& p);

}  // namespace vkgrad::ops::ref

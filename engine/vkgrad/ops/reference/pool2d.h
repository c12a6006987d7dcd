// CPU reference of ops/pool2d.h: each window scanned as the definition reads, in double; the
// backward sends each output's gradient to its window's pixels (the forward's direction, not
// the kernels' per-pixel gather).
#pragma once

#include <cstdint>
#include <vector>

#include "vkgrad/ops/pool2d.h"

namespace vkgrad::ops::ref {

// x: (N,C,H,W) -> y (N,C,OH,OW); *argmax gets iy·W + ix of each window's first maximum.
std::vector<float> maxPool2d(const std::vector<float>& x, const Shape& xs, const Pool2dParams& p,
                             std::vector<uint32_t>* argmax);
std::vector<float> maxPool2dBackward(const std::vector<float>& dy,
                                     const std::vector<uint32_t>& argmax, const Shape& xs,
                                     const Pool2dParams& p);
std::vector<float> avgPool2d(const std::vector<float>& x, const Shape& xs, const Pool2dParams& p);
std::vector<float> avgPool2dBackward(const std::vector<float>& dy, const Shape& xs,
                                     const Pool2dParams& p);

}  // namespace vkgrad::ops::ref

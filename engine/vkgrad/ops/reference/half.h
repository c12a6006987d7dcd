// IEEE 754 half precision (binary16) on the host: what an F16 tensor holds, for uploads and
// for CPU references that must see the same rounded inputs as a kernel.
#pragma once

#include <cstdint>
#include <vector>

namespace vkgrad::ops::ref {

// x rounded to the nearest half, ties to even: overflow gives ±inf, NaN stays NaN (quiet),
// values up to half the smallest subnormal (2^-25) round to ±0.
uint16_t toHalf(float x);
// Exact: every half is a float.
float fromHalf(uint16_t h);
// x rounded to fp16 and back: the value a kernel sees after narrowing it.
inline float roundToHalf(float x) {
  return fromHalf(toHalf(x));
}

std::vector<uint16_t> toHalf(const std::vector<float>& x);
std::vector<float> roundToHalf(const std::vector<float>& x);

}  // namespace vkgrad::ops::ref

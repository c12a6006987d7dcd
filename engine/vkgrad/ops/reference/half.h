// The 16-bit float formats on the host: IEEE 754 half precision (binary16, an F16 tensor)
// and bfloat16 (a BF16 tensor), for uploads, downloads and for CPU references that must see
// the same rounded values as a kernel (shaders/common/storage.glsl rounds the same way).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vkgrad/ops/tensor.h"

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

// x rounded to the nearest bfloat16 (its top 16 bits), ties to even: overflow gives ±inf, NaN
// stays NaN (quiet). bf16 keeps f32's exponent range, with 8 significant bits.
uint16_t toBf16(float x);
float fromBf16(uint16_t b);  // exact: the bits shifted up

// x as a tensor of `dtype` stores it: itself for F32, else rounded to the 16-bit format.
float roundTo(DType dtype, float x);
std::vector<float> roundTo(DType dtype, std::vector<float> x);
// The bytes of x in a float format (f32 words, or 16-bit values packed two to a word,
// little-endian), and back.
std::vector<uint8_t> encode(DType dtype, std::span<const float> x);
std::vector<float> decode(DType dtype, std::span<const uint8_t> bytes);
// 2^-p: half a unit in the last place of 1 in that format (the largest relative rounding
// error of one store): 2^-24 f32, 2^-11 f16, 2^-8 bf16.
double unitRoundoff(DType dtype);

}  // namespace vkgrad::ops::ref

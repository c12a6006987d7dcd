#include "vkgrad/ops/reference/half.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace vkgrad::ops::ref {

uint16_t toHalf(float x) {
  uint32_t f;
  std::memcpy(&f, &x, 4);
  const uint16_t sign = uint16_t((f >> 16) & 0x8000u);
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf, or NaN kept quiet with its top mantissa bits
    return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x0200u | ((abs >> 13) & 0x3ffu) : 0));
  const int32_t exp = int32_t(abs >> 23) - 127;       // unbiased
  if (exp >= 16) return uint16_t(sign | 0x7c00u);     // too large even before rounding
  uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;  // 24 bits with the hidden one
  // Bits of the 24-bit mantissa that do not fit: 13 for a normal half, more for a subnormal
  // (its exponent is fixed at -14).
  const int32_t shift = exp >= -14 ? 13 : 13 + (-14 - exp);
  if (shift > 24) return sign;  // below half the smallest subnormal: rounds to zero
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1), half_way = 1u << (shift - 1);
  uint32_t rounded = kept + ((rest > half_way || (rest == half_way && (kept & 1u))) ? 1u : 0u);
  if (exp >= -14) {
    // rounded holds the 11-bit significand (a carry to 12 bits moves up the exponent, which
    // the addition below does by itself, up to infinity).
    return uint16_t(sign | ((uint32_t(exp + 15) << 10) + (rounded - 0x400u)));
  }
  return uint16_t(sign | rounded);  // subnormal (a carry makes it the smallest normal)
}

float fromHalf(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  uint32_t f;
  if (exp == 0x1f) {
    f = sign | 0x7f800000u | (mantissa << 13);
  } else if (exp != 0) {
    f = sign | ((exp + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    f = sign;
  } else {
    // Subnormal: normalise the mantissa.
    int32_t e = -14;
    uint32_t m = mantissa;
    while (!(m & 0x400u)) {
      m <<= 1;
      --e;
    }
    f = sign | (uint32_t(e + 127) << 23) | ((m & 0x3ffu) << 13);
  }
  float x;
  std::memcpy(&x, &f, 4);
  return x;
}

std::vector<uint16_t> toHalf(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = toHalf(x[i]);
  return out;
}

std::vector<float> roundToHalf(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = roundToHalf(x[i]);
  return out;
}

uint16_t toBf16(float x) {
  uint32_t f;
  std::memcpy(&f, &x, 4);
  if ((f & 0x7fffffffu) > 0x7f800000u) return uint16_t((f >> 16) | 0x40u);
  // Adding 0x7fff plus the kept part's lowest bit carries into the kept bits exactly when
  // the rest is above half, or half with an odd kept part: ties to even.
  return uint16_t((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

float fromBf16(uint16_t b) {
  const uint32_t f = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &f, 4);
  return x;
}

float roundTo(DType dtype, float x) {
  switch (dtype) {
    case DType::F16:
      return roundToHalf(x);
    case DType::BF16:
      return fromBf16(toBf16(x));
    default:
      return x;
  }
}

std::vector<float> roundTo(DType dtype, std::vector<float> x) {
  for (float& v : x) v = roundTo(dtype, v);
  return x;
}

std::vector<uint8_t> encode(DType dtype, std::span<const float> x) {
  const size_t width = dtypeBytes(dtype);
  std::vector<uint8_t> out(x.size() * width);
  for (size_t i = 0; i < x.size(); ++i) {
    if (width == 4) {
      std::memcpy(&out[4 * i], &x[i], 4);
    } else {
      const uint16_t h = dtype == DType::F16 ? toHalf(x[i]) : toBf16(x[i]);
      out[2 * i] = uint8_t(h & 0xff);
      out[2 * i + 1] = uint8_t(h >> 8);
    }
  }
  return out;
}

std::vector<float> decode(DType dtype, std::span<const uint8_t> bytes) {
  const size_t width = dtypeBytes(dtype);
  std::vector<float> out(bytes.size() / width);
  for (size_t i = 0; i < out.size(); ++i) {
    if (width == 4) {
      std::memcpy(&out[i], &bytes[4 * i], 4);
    } else {
      const uint16_t h = uint16_t(bytes[2 * i] | (bytes[2 * i + 1] << 8));
      out[i] = dtype == DType::F16 ? fromHalf(h) : fromBf16(h);
    }
  }
  return out;
}

double unitRoundoff(DType dtype) {
  switch (dtype) {
    case DType::F16:
      return std::ldexp(1.0, -11);
    case DType::BF16:
      return std::ldexp(1.0, -8);
    default:
      return std::ldexp(1.0, -24);
  }
}

}  // namespace vkgrad::ops::ref

// The host's fp16 conversion (ops/reference/half.h), which F16 uploads and the references of
// 16-bit kernels rely on: exact round trips, ties to even, overflow, subnormals, NaN.
#include "vkgrad/ops/reference/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/random.h"

namespace vkgrad::test {
namespace {

using ops::ref::fromHalf;
using ops::ref::toHalf;

TEST(Half, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float x = fromHalf(uint16_t(h));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(fromHalf(toHalf(x)))) << h;
      continue;
    }
    EXPECT_EQ(toHalf(x), uint16_t(h)) << h;
  }
}

TEST(Half, KnownValues) {
  EXPECT_EQ(toHalf(1.0f), 0x3c00);
  EXPECT_EQ(toHalf(-2.0f), 0xc000);
  EXPECT_EQ(toHalf(65504.0f), 0x7bff);  // the largest half
  EXPECT_EQ(toHalf(65520.0f), 0x7c00);  // halfway to 65536: to even, inf
  EXPECT_EQ(toHalf(1e6f), 0x7c00);      // overflow
  EXPECT_EQ(toHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(toHalf(std::ldexp(1.0f, -24)), 0x0001);         // the smallest subnormal
  EXPECT_EQ(toHalf(std::ldexp(1.0f, -25)), 0x0000);         // half of it: ties to even, 0
  EXPECT_EQ(toHalf(std::ldexp(3.0f, -26)), 0x0001);         // above half of it
  EXPECT_EQ(toHalf(std::ldexp(1.0f, -14)), 0x0400);         // the smallest normal
  EXPECT_EQ(toHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: stays on the even 1.0
  EXPECT_EQ(toHalf(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie: up to the even 1+2^-9
  EXPECT_EQ(toHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_TRUE(std::isnan(fromHalf(toHalf(std::nanf("")))));
}

// Every float between two neighbouring halves rounds to the nearer (the even on a tie): the
// rounding error is at most half a unit in the last place of the result.
TEST(Half, RoundsRandomFloatsToTheNearest) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const std::vector<float> xs = rng.uniform(100000, -70000.0f, 70000.0f);
  const std::vector<float> small = rng.uniform(100000, -1e-3f, 1e-3f);
  for (const std::vector<float>* set : {&xs, &small})
    for (float x : *set) {
      const uint16_t h = toHalf(x);
      const float r = fromHalf(h);
      if (std::isinf(r)) {
        EXPECT_GE(std::fabs(x), 65520.0f) << x;
        continue;
      }
      // The neighbours of r in the half grid, towards zero and away from it.
      const float up = fromHalf(uint16_t(h + 1)),
                  down = (h & 0x7fff) ? fromHalf(uint16_t(h - 1)) : -r;
      const float ulp_up = std::fabs(up - r), ulp_down = std::fabs(r - down);
      EXPECT_LE(std::fabs(x - r), 0.5f * std::max(ulp_up, ulp_down)) << x;
      EXPECT_LE(std::fabs(x - r), std::fabs(x - up)) << x;
    }
}

TEST(Bf16, KnownValuesAndRoundTrips) {
  using ops::ref::fromBf16;
  using ops::ref::toBf16;
  EXPECT_EQ(toBf16(1.0f), 0x3f80);
  EXPECT_EQ(toBf16(-2.0f), 0xc000);
  EXPECT_EQ(toBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie: stays on the even 1.0
  EXPECT_EQ(toBf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie: up to the even
  EXPECT_EQ(toBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(toBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(toBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(std::isnan(fromBf16(toBf16(std::nanf("")))));
  // A NaN whose payload sits only in the low bits must not round to inf.
  float low_nan;
  const uint32_t bits = 0x7f800001u;
  std::memcpy(&low_nan, &bits, 4);
  EXPECT_TRUE(std::isnan(fromBf16(toBf16(low_nan))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float x = fromBf16(uint16_t(b));
    if (!std::isnan(x)) {
      EXPECT_EQ(toBf16(x), uint16_t(b)) << b;
    }
  }
}

TEST(Bf16, EncodeDecodeRoundTripsEveryFormat) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const std::vector<float> x = rng.uniform(101, -3.0f, 3.0f);
  for (ops::DType dtype : {ops::DType::F32, ops::DType::F16, ops::DType::BF16}) {
    const auto bytes = ops::ref::encode(dtype, x);
    EXPECT_EQ(bytes.size(), x.size() * ops::dtypeBytes(dtype));
    EXPECT_EQ(ops::ref::decode(dtype, bytes), ops::ref::roundTo(dtype, x));
  }
}

}  // namespace
}  // namespace vkgrad::test

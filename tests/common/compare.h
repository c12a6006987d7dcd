// Comparison against a CPU reference by normalised error:
//   max_i |got_i - want_i| / max(max_i |want_i|, 1e-30)
// Non-finite reference values must be matched exactly (same inf sign, or NaN);
// a non-finite result where the reference is finite always fails (poisoned,
// unwritten outputs are NaN, so they are caught here).
#pragma once

#include <span>

#include <gtest/gtest.h>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::test {

::testing::AssertionResult allClose(std::span<const float> got, std::span<const float> want,
                                    double tolerance);

// An output stored in `dtype` (16-bit: the kernel rounds its f32 result once, to nearest),
// against the exact value `want` computed from the same (rounded) inputs:
//   |got_i - want_i| <= u |want_i| + tolerance * max_j |want_j|  (+ 2^-25 for f16's subnormals)
// per element, with u = ops::ref::unitRoundoff(dtype) (2^-11 f16, 2^-8 bf16; the rounding of
// the store) and `tolerance` the f32 arithmetic's own error, as allClose states it.
::testing::AssertionResult closeInFormat(std::span<const float> got, std::span<const float> want,
                                         ops::DType dtype, double tolerance);

}  // namespace vkgrad::test

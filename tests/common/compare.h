// Comparison against a CPU reference by normalised error:
//   max_i |got_i - want_i| / max(max_i |want_i|, 1e-30)
// Non-finite reference values must be matched exactly (same inf sign, or NaN);
// a non-finite result where the reference is finite always fails (poisoned,
// unwritten outputs are NaN, so they are caught here).
#pragma once

#include <span>

#include <gtest/gtest.h>

namespace vkgrad::test {

::testing::AssertionResult allClose(std::span<const float> got, std::span<const float> want,
                                    double tolerance);

}  // namespace vkgrad::test

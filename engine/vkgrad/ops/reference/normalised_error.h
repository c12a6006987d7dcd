// The one measure every check of a kernel against its CPU reference reports (the demo, the
// benchmarks and the tests): the worst element's error relative to the reference's scale, so
// one tolerance fits outputs of any magnitude.
#pragma once

#include <span>

namespace vkgrad::ops::ref {

// max_i |got_i - want_i| / max(max_i |want_i|, 1e-30), in double. Infinity when got holds a
// non-finite value (poisoned outputs a kernel never wrote are NaN); want must be finite.
// Throws std::invalid_argument when the sizes differ.
double normalisedError(std::span<const float> got, std::span<const float> want);

}  // namespace vkgrad::ops::ref

#include "common/compare.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "vkgrad/ops/reference/half.h"

namespace vkgrad::test {
namespace {

double largestFinite(std::span<const float> want) {
  double scale = 0.0;
  for (float w : want)
    if (std::isfinite(w)) scale = std::max(scale, double(std::fabs(w)));
  return scale;
}

// The loop both comparisons share: non-finite values must match exactly (else `failure`
// names the element); measure(got, want) gives each finite pair's error in the caller's units.
struct Worst {
  double error = 0.0;
  size_t at = 0;
  std::optional<::testing::AssertionResult> failure;
};
template <class Measure>
Worst worstOf(std::span<const float> got, std::span<const float> want, Measure measure) {
  Worst worst;
  if (got.size() != want.size()) {
    worst.failure = ::testing::AssertionFailure()
                    << "sizes differ: " << got.size() << " vs " << want.size();
    return worst;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = got[i], w = want[i];
    if (!std::isfinite(w) || !std::isfinite(g)) {
      if (!((std::isnan(w) && std::isnan(g)) || g == w)) {
        worst.failure = ::testing::AssertionFailure() << "element " << i << ": got " << g
                                                      << ", want " << w << " (non-finite mismatch)";
        return worst;
      }
      continue;
    }
    const double err = measure(double(g), double(w));
    if (err > worst.error) worst.error = err, worst.at = i;
  }
  return worst;
}

}  // namespace

::testing::AssertionResult allClose(std::span<const float> got, std::span<const float> want,
                                    double tolerance) {
  const double scale = std::max(largestFinite(want), 1e-30);
  const Worst worst =
      worstOf(got, want, [&](double g, double w) { return std::fabs(g - w) / scale; });
  if (worst.failure) return *worst.failure;
  if (worst.error > tolerance)
    return ::testing::AssertionFailure()
           << "normalised error " << worst.error << " > " << tolerance << " at element "
           << worst.at << " (got " << got[worst.at] << ", want " << want[worst.at] << ", scale "
           << scale << ")";
  return ::testing::AssertionSuccess() << "normalised error " << worst.error;
}

::testing::AssertionResult closeInFormat(std::span<const float> got, std::span<const float> want,
                                         ops::DType dtype, double tolerance) {
  const double scale = largestFinite(want);
  const double u = ops::ref::unitRoundoff(dtype);
  const double floor = tolerance * scale + (dtype == ops::DType::F16 ? std::ldexp(1.0, -25) : 0.0);
  // The error over its bound.
  const Worst worst = worstOf(got, want, [&](double g, double w) {
    return std::fabs(g - w) / std::max(u * std::fabs(w) + floor, 1e-300);
  });
  if (worst.failure) return *worst.failure;
  if (worst.error > 1.0)
    return ::testing::AssertionFailure()
           << ops::dtypeName(dtype) << " error " << worst.error << "x its bound at element "
           << worst.at << " (got " << got[worst.at] << ", want " << want[worst.at] << ", u " << u
           << ", f32 tolerance " << tolerance << " of " << scale << ")";
  return ::testing::AssertionSuccess() << "worst " << worst.error << "x the bound";
}

}  // namespace vkgrad::test

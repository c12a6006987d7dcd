#include "common/compare.h"

#include <cmath>

#include "vkgrad/ops/reference/half.h"

namespace vkgrad::test {

::testing::AssertionResult allClose(std::span<const float> got, std::span<const float> want,
                                    double tolerance) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  double scale = 0.0;
  for (float w : want)
    if (std::isfinite(w)) scale = std::max(scale, double(std::fabs(w)));
  scale = std::max(scale, 1e-30);
  double worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = got[i], w = want[i];
    if (!std::isfinite(w) || !std::isfinite(g)) {
      const bool same = (std::isnan(w) && std::isnan(g)) || g == w;
      if (!same)
        return ::testing::AssertionFailure()
               << "element " << i << ": got " << g << ", want " << w << " (non-finite mismatch)";
      continue;
    }
    const double err = std::fabs(double(g) - double(w)) / scale;
    if (err > worst) worst = err, worst_at = i;
  }
  if (worst > tolerance)
    return ::testing::AssertionFailure()
           << "normalised error " << worst << " > " << tolerance << " at element " << worst_at
           << " (got " << got[worst_at] << ", want " << want[worst_at] << ", scale " << scale
           << ")";
  return ::testing::AssertionSuccess() << "normalised error " << worst;
}

::testing::AssertionResult closeInFormat(std::span<const float> got, std::span<const float> want,
                                         ops::DType dtype, double tolerance) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  double scale = 0.0;
  for (float w : want)
    if (std::isfinite(w)) scale = std::max(scale, double(std::fabs(w)));
  const double u = ops::ref::unitRoundoff(dtype);
  const double floor = tolerance * scale + (dtype == ops::DType::F16 ? std::ldexp(1.0, -25) : 0.0);
  double worst = 0.0;  // error over its bound
  size_t worst_at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = got[i], w = want[i];
    if (!std::isfinite(w) || !std::isfinite(g)) {
      const bool same = (std::isnan(w) && std::isnan(g)) || g == w;
      if (!same)
        return ::testing::AssertionFailure()
               << "element " << i << ": got " << g << ", want " << w << " (non-finite mismatch)";
      continue;
    }
    const double bound = u * std::fabs(double(w)) + floor;
    const double ratio = std::fabs(double(g) - double(w)) / std::max(bound, 1e-300);
    if (ratio > worst) worst = ratio, worst_at = i;
  }
  if (worst > 1.0)
    return ::testing::AssertionFailure()
           << ops::dtypeName(dtype) << " error " << worst << "x its bound at element " << worst_at
           << " (got " << got[worst_at] << ", want " << want[worst_at] << ", u " << u
           << ", f32 tolerance " << tolerance << " of " << scale << ")";
  return ::testing::AssertionSuccess() << "worst " << worst << "x the bound";
}

}  // namespace vkgrad::test

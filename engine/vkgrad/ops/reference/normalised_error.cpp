#include "vkgrad/ops/reference/normalised_error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace vkgrad::ops::ref {

double normalisedError(std::span<const float> got, std::span<const float> want) {
  if (got.size() != want.size())
    throw std::invalid_argument("normalisedError: " + std::to_string(got.size()) +
                                " values against a reference of " + std::to_string(want.size()));
  double scale = 1e-30, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return worst / scale;
}

}  // namespace vkgrad::ops::ref

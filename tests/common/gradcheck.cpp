#include "common/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace vkgrad::test {

double weightedSum(std::span<const float> out, std::span<const float> w) {
  double sum = 0.0;
  for (size_t i = 0; i < out.size(); ++i) sum += double(out[i]) * double(w[i]);
  return sum;
}

::testing::AssertionResult checkGradients(const std::function<double()>& loss,
                                          const std::vector<GradInput>& inputs, Rng& rng,
                                          const GradCheckOptions& options) {
  for (const GradInput& in : inputs) {
    std::vector<float>& x = *in.values;
    if (in.analytic.size() != x.size())
      return ::testing::AssertionFailure() << in.name << ": analytic gradient has "
                                           << in.analytic.size() << " values, input " << x.size();
    std::vector<size_t> coords(x.size());
    std::iota(coords.begin(), coords.end(), size_t(0));
    if (coords.size() > options.max_coords) {
      // A random sample, so every run probes different coordinates.
      for (size_t i = 0; i < options.max_coords; ++i)
        std::swap(coords[i], coords[i + rng.below(uint32_t(coords.size() - i))]);
      coords.resize(options.max_coords);
    }
    double scale = 1e-30;
    for (float g : in.analytic) scale = std::max(scale, double(std::fabs(g)));
    double worst = 0.0;
    size_t worst_at = 0;
    double worst_fd = 0.0;
    for (size_t j : coords) {
      const float saved = x[j];
      const double h = options.rel_step * std::max(1.0, double(std::fabs(saved)));
      const float plus = float(saved + h), minus = float(saved - h);
      x[j] = plus;
      const double up = loss();
      x[j] = minus;
      const double down = loss();
      x[j] = saved;
      const double step = double(plus) - double(minus);
      const double fd = (up - down) / step;
      // One f32 ulp of the loss is 2^-23 of its magnitude (within a factor of two).
      const double noise =
          options.loss_ulps * std::ldexp(std::max(std::fabs(up), std::fabs(down)), -23) / step;
      // (NaN stays NaN: max() would turn it into 0, so the noise comes off a finite error only.)
      const double raw = std::fabs(fd - double(in.analytic[j]));
      const double err = (std::isfinite(raw) ? std::max(0.0, raw - noise) : raw) / scale;
      if (!std::isfinite(err))
        return ::testing::AssertionFailure()
               << in.name << ": non-finite gradient check at element " << j << " (analytic "
               << in.analytic[j] << ", finite difference " << fd << ")";
      if (err > worst) worst = err, worst_at = j, worst_fd = fd;
    }
    if (worst > options.tolerance)
      return ::testing::AssertionFailure()
             << in.name << ": normalised gradient error " << worst << " > " << options.tolerance
             << " at element " << worst_at << " (analytic " << in.analytic[worst_at]
             << ", finite difference " << worst_fd << ", scale " << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace vkgrad::test

// The gradient checker must accept a right gradient and reject a wrong one;
// otherwise every gradient test built on it proves nothing.
#include "common/gradcheck.h"

#include <algorithm>
#include <cmath>

namespace vkgrad::test {
namespace {

// out_i = x_i^2 * y_(i mod 3): both inputs nonlinear, y reused.
struct Toy {
  std::vector<float> x, y, w;
  std::vector<float> forward() const {
    std::vector<float> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * x[i] * y[i % 3];
    return out;
  }
  void backward(std::vector<float>& dx, std::vector<float>& dy) const {
    dx.assign(x.size(), 0.0f);
    dy.assign(y.size(), 0.0f);
    for (size_t i = 0; i < x.size(); ++i) {
      dx[i] = 2 * x[i] * y[i % 3] * w[i];
      dy[i % 3] += x[i] * x[i] * w[i];
    }
  }
};

TEST(GradCheck, AcceptsTheRightGradient) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Toy toy{rng.uniform(57), rng.uniform(3), rng.uniform(57)};
  std::vector<float> dx, dy;
  toy.backward(dx, dy);
  auto loss = [&] { return weightedSum(toy.forward(), toy.w); };
  EXPECT_TRUE(checkGradients(loss, {{"x", &toy.x, dx}, {"y", &toy.y, dy}}, rng));
}

TEST(GradCheck, RejectsAWrongGradient) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Toy toy{rng.uniform(57), rng.uniform(3), rng.uniform(57)};
  std::vector<float> dx, dy;
  toy.backward(dx, dy);
  auto loss = [&] { return weightedSum(toy.forward(), toy.w); };
  std::vector<float> dy_wrong = dy;
  // An error of 5% of the largest gradient, in one element, must be caught.
  dy_wrong[1] += 0.05f * std::max({std::fabs(dy[0]), std::fabs(dy[1]), std::fabs(dy[2])});
  EXPECT_FALSE(checkGradients(loss, {{"y", &toy.y, dy_wrong}}, rng));
  std::vector<float> dx_nan = dx;
  dx_nan[0] = std::nanf("");
  GradCheckOptions all;
  all.max_coords = dx.size();
  EXPECT_FALSE(checkGradients(loss, {{"x", &toy.x, dx_nan}}, rng, all));
}

}  // namespace
}  // namespace vkgrad::test

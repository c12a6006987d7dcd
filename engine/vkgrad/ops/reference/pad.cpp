#include "vkgrad/ops/reference/pad.h"

#include <vector>

namespace vkgrad::ops::ref {
namespace {

// The element of an axis of n that output index o (before added in front) reads, or -1 for
// Constant's fill.
int64_t source(int64_t o, int64_t before, int64_t n, PadMode mode) {
  int64_t i = o - before;
  if (i >= 0 && i < n) return i;
  if (mode == PadMode::Constant) return -1;
  return i < 0 ? -i : 2 * (n - 1) - i;
}

}  // namespace

void pad(const float* x, float* y, int64_t b, int64_t h, int64_t w, const Padding& p) {
  const int64_t ho = h + p.top + p.bottom, wo = w + p.left + p.right;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox) {
        const int64_t sy = source(oy, p.top, h, p.mode), sx = source(ox, p.left, w, p.mode);
        y[(i * ho + oy) * wo + ox] = sy < 0 || sx < 0 ? p.value : x[(i * h + sy) * w + sx];
      }
}

// The forward's map run the other way: every output adds into its source. A scatter here
// where the kernel gathers, so the two agree only if both maps do.
void padBackward(const float* dy, float* dx, int64_t b, int64_t h, int64_t w, const Padding& p,
                 bool accumulate) {
  const int64_t ho = h + p.top + p.bottom, wo = w + p.left + p.right;
  std::vector<double> sum(size_t(b * h * w), 0.0);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox) {
        const int64_t sy = source(oy, p.top, h, p.mode), sx = source(ox, p.left, w, p.mode);
        if (sy >= 0 && sx >= 0) sum[size_t((i * h + sy) * w + sx)] += dy[(i * ho + oy) * wo + ox];
      }
  for (size_t e = 0; e < sum.size(); ++e)
    dx[e] = float(accumulate ? double(dx[e]) + sum[e] : sum[e]);
}

}  // namespace vkgrad::ops::ref

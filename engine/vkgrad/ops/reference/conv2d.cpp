#include "vkgrad/ops/reference/conv2d.h"

namespace vkgrad::ops::ref {
namespace {

// Calls f(y index, x index, w index) for every tap of every output that lands inside x,
// outputs in order.
template <class F>
void forEachTap(const Shape& xs, const Shape& ws, const Conv2dParams& p, F f) {
  const Shape ys = conv2dShape(xs, ws, nullptr, p);
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t O = ws[0], Cg = ws[1], KH = ws[2], KW = ws[3], OH = ys[2], OW = ys[3];
  const int64_t Og = O / p.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          const int64_t yi = ((n * O + o) * OH + oy) * OW + ox;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
                const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                const int64_t ci = (o / Og) * Cg + c;
                f(yi, ((n * C + ci) * H + iy) * W + ix, ((o * Cg + c) * KH + ky) * KW + kx);
              }
        }
}

}  // namespace

std::vector<float> conv2d(const std::vector<float>& x, const Shape& xs, const std::vector<float>& w,
                          const Shape& ws, const std::vector<float>& bias, const Conv2dParams& p) {
  const Shape ys = conv2dShape(xs, ws, nullptr, p);
  const int64_t pixels = ys[2] * ys[3];
  std::vector<double> sum(size_t(ys.numel()));
  for (size_t i = 0; i < sum.size(); ++i)
    sum[i] = bias.empty() ? 0.0 : double(bias[size_t((int64_t(i) / pixels) % ys[1])]);
  forEachTap(xs, ws, p, [&](int64_t yi, int64_t xi, int64_t wi) {
    sum[size_t(yi)] += double(x[size_t(xi)]) * double(w[size_t(wi)]);
  });
  return {sum.begin(), sum.end()};
}

Conv2dGradsRef conv2dBackward(const std::vector<float>& x, const Shape& xs,
                              const std::vector<float>& w, const Shape& ws,
                              const std::vector<float>& dy, const Conv2dParams& p) {
  const Shape ys = conv2dShape(xs, ws, nullptr, p);
  const int64_t pixels = ys[2] * ys[3];
  std::vector<double> dx(x.size()), dw(w.size()), db(static_cast<size_t>(ws[0]));
  for (size_t i = 0; i < dy.size(); ++i) db[size_t((int64_t(i) / pixels) % ys[1])] += dy[i];
  forEachTap(xs, ws, p, [&](int64_t yi, int64_t xi, int64_t wi) {
    dx[size_t(xi)] += double(dy[size_t(yi)]) * double(w[size_t(wi)]);
    dw[size_t(wi)] += double(dy[size_t(yi)]) * double(x[size_t(xi)]);
  });
  return {{dx.begin(), dx.end()}, {dw.begin(), dw.end()}, {db.begin(), db.end()}};
}

}  // namespace vkgrad::ops::ref

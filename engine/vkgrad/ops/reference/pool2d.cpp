#include "vkgrad/ops/reference/pool2d.h"

#include <limits>

namespace vkgrad::ops::ref {
namespace {

// Calls f(output index, plane offset of x, the window's in-image pixel indices) per output.
template <class F>
void forEachWindow(const Shape& xs, const Pool2dParams& p, F f) {
  const Shape ys = pool2dShape("ref", xs, p);
  const int64_t H = xs[2], W = xs[3];
  std::vector<int64_t> pixels;
  int64_t o = 0;
  for (int64_t plane = 0; plane < xs[0] * xs[1]; ++plane)
    for (int64_t oy = 0; oy < ys[2]; ++oy)
      for (int64_t ox = 0; ox < ys[3]; ++ox) {
        pixels.clear();
        for (int64_t ky = 0; ky < p.kernel_h; ++ky)
          for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
            const int64_t iy = oy * p.stride_h - p.pad_h + ky, ix = ox * p.stride_w - p.pad_w + kx;
            if (iy >= 0 && iy < H && ix >= 0 && ix < W) pixels.push_back(iy * W + ix);
          }
        f(o++, plane * H * W, pixels);
      }
}

double divisor(const Pool2dParams& p, size_t inside) {
  return p.count_include_pad ? double(p.kernel_h * p.kernel_w) : double(inside);
}

}  // namespace

std::vector<float> maxPool2d(const std::vector<float>& x, const Shape& xs, const Pool2dParams& p,
                             std::vector<uint32_t>* argmax) {
  const Shape ys = pool2dShape("ref", xs, p);
  std::vector<float> y(size_t(ys.numel()));
  if (argmax) argmax->assign(y.size(), 0);
  forEachWindow(xs, p, [&](int64_t o, int64_t base, const std::vector<int64_t>& pixels) {
    float best = -std::numeric_limits<float>::infinity();
    int64_t at = pixels.front();
    for (int64_t i : pixels)
      if (x[size_t(base + i)] > best) best = x[size_t(base + i)], at = i;
    y[size_t(o)] = best;
    if (argmax) (*argmax)[size_t(o)] = uint32_t(at);
  });
  return y;
}

std::vector<float> maxPool2dBackward(const std::vector<float>& dy,
                                     const std::vector<uint32_t>& argmax, const Shape& xs,
                                     const Pool2dParams& p) {
  std::vector<double> dx(size_t(xs.numel()));
  forEachWindow(xs, p, [&](int64_t o, int64_t base, const std::vector<int64_t>&) {
    dx[size_t(base + argmax[size_t(o)])] += dy[size_t(o)];
  });
  return {dx.begin(), dx.end()};
}

std::vector<float> avgPool2d(const std::vector<float>& x, const Shape& xs, const Pool2dParams& p) {
  std::vector<float> y(size_t(pool2dShape("ref", xs, p).numel()));
  forEachWindow(xs, p, [&](int64_t o, int64_t base, const std::vector<int64_t>& pixels) {
    double sum = 0.0;
    for (int64_t i : pixels) sum += x[size_t(base + i)];
    y[size_t(o)] = float(sum / divisor(p, pixels.size()));
  });
  return y;
}

std::vector<float> avgPool2dBackward(const std::vector<float>& dy, const Shape& xs,
                                     const Pool2dParams& p) {
  std::vector<double> dx(size_t(xs.numel()));
  forEachWindow(xs, p, [&](int64_t o, int64_t base, const std::vector<int64_t>& pixels) {
    for (int64_t i : pixels) dx[size_t(base + i)] += dy[size_t(o)] / divisor(p, pixels.size());
  });
  return {dx.begin(), dx.end()};
}

}  // namespace vkgrad::ops::ref

#include "vkgrad/ops/reference/map_reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vkgrad::ops::ref {
namespace {

double apply(MapFn fn, double x, double y, double z) {
  switch (fn) {
    case MapFn::X:
      return x;
    case MapFn::Add:
      return x + y;
    case MapFn::Sub:
      return x - y;
    case MapFn::Mul:
      return x * y;
    case MapFn::Div:
      return x / y;
    case MapFn::Max:
      return std::max(x, y);
    case MapFn::Min:
      return std::min(x, y);
    case MapFn::Where:
      return x != 0 ? y : z;
    case MapFn::MaskTrue:
      return x != 0 ? y : 0;
    case MapFn::MaskFalse:
      return x != 0 ? 0 : y;
    case MapFn::DivGradB:
      return -x * y / (z * z);
    case MapFn::SelectEqual:
      return x == y ? z : 0;
  }
  return 0;
}

}  // namespace

std::vector<float> mapReduce(MapFn fn, Fold fold, const std::vector<const float*>& inputs,
                             const std::vector<Shape>& shapes, const Shape& space, uint32_t axes,
                             float alpha) {
  const int rank = space.rank();
  const int64_t n_out = reducedShape(space, axes, false).numel();
  std::vector<double> acc(size_t(n_out),
                          fold == Fold::Sum ? 0.0 : -std::numeric_limits<double>::infinity());
  std::vector<int64_t> idx(size_t(rank), 0);
  for (int64_t e = 0; e < space.numel(); ++e) {
    int64_t rest = e;
    for (int a = rank - 1; a >= 0; --a) idx[size_t(a)] = rest % space[a], rest /= space[a];
    double v[3] = {0, 0, 0};
    for (size_t t = 0; t < inputs.size(); ++t) {
      const Shape& s = shapes[t];
      int64_t at = 0;
      for (int a = 0; a < s.rank(); ++a)
        at = at * s[a] + (s[a] == 1 ? 0 : idx[size_t(rank - s.rank() + a)]);
      v[t] = inputs[t][at];
    }
    int64_t o = 0;
    for (int a = 0; a < rank; ++a)
      if (!(axes >> a & 1u)) o = o * space[a] + idx[size_t(a)];
    const double r = apply(fn, v[0], v[1], v[2]);
    acc[size_t(o)] = fold == Fold::Sum ? acc[size_t(o)] + r : std::max(acc[size_t(o)], r);
  }
  std::vector<float> out(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) out[i] = float(alpha * acc[i]);
  return out;
}

}  // namespace vkgrad::ops::ref

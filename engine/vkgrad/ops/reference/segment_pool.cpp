#include "vkgrad/ops/reference/segment_pool.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace vkgrad::ops::ref {
namespace {

std::pair<uint32_t, uint32_t> range(const std::vector<uint32_t>& segments, size_t g,
                                    uint32_t nodes) {
  const uint32_t begin = std::min(segments[g], nodes);
  return {begin, std::max(begin, std::min(segments[g + 1], nodes))};
}

}  // namespace

std::vector<float> segmentPool(Pool kind, const std::vector<float>& x, int64_t features,
                               const std::vector<uint32_t>& segments,
                               std::vector<uint32_t>* argmax) {
  const size_t f_n = size_t(features), graphs = segments.size() - 1;
  const uint32_t nodes = uint32_t(x.size() / f_n);
  std::vector<float> out(graphs * f_n, 0.0f);
  if (argmax) argmax->assign(graphs * f_n, kNoNode);
  for (size_t g = 0; g < graphs; ++g) {
    const auto [begin, end] = range(segments, g, nodes);
    for (size_t f = 0; f < f_n; ++f) {
      const size_t o = g * f_n + f;
      if (kind == Pool::Max) {
        uint32_t at = kNoNode;
        for (uint32_t n = begin; n < end; ++n) {
          const float v = x[n * f_n + f];
          if (at == kNoNode ||
              (!std::isnan(x[at * f_n + f]) && (v > x[at * f_n + f] || std::isnan(v))))
            at = n;
        }
        out[o] = at == kNoNode ? 0.0f : x[at * f_n + f];
        if (argmax) (*argmax)[o] = at;
      } else {
        double sum = 0;
        for (uint32_t n = begin; n < end; ++n) sum += x[n * f_n + f];
        if (kind == Pool::Mean && end > begin) sum /= double(end - begin);
        out[o] = float(sum);
      }
    }
  }
  return out;
}

std::vector<float> segmentPoolBackward(Pool kind, int64_t nodes, int64_t features,
                                       const std::vector<uint32_t>& segments,
                                       const std::vector<uint32_t>& argmax,
                                       const std::vector<float>& dout) {
  const size_t f_n = size_t(features);
  std::vector<float> dx(size_t(nodes) * f_n, 0.0f);
  for (size_t g = 0; g + 1 < segments.size(); ++g) {
    const auto [begin, end] = range(segments, g, uint32_t(nodes));
    for (uint32_t n = begin; n < end; ++n)
      for (size_t f = 0; f < f_n; ++f) {
        const size_t o = g * f_n + f;
        if (kind == Pool::Max && argmax[o] != n) continue;
        dx[n * f_n + f] =
            kind == Pool::Mean ? float(double(dout[o]) / double(end - begin)) : dout[o];
      }
  }
  return dx;
}

}  // namespace vkgrad::ops::ref

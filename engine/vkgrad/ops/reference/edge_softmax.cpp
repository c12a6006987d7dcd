#include "vkgrad/ops/reference/edge_softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace vkgrad::ops::ref {
namespace {

// Node j's edge range as the kernels clamp it.
std::pair<uint32_t, uint32_t> range(const std::vector<uint32_t>& offsets, size_t j,
                                    uint32_t edges) {
  const uint32_t begin = std::min(offsets[j], edges);
  return {begin, std::max(begin, std::min(offsets[j + 1], edges))};
}

}  // namespace

std::vector<float> edgeSoftmax(const std::vector<uint32_t>& offsets,
                               const std::vector<float>& scores, int64_t heads,
                               const std::vector<float>& init) {
  const size_t h_n = size_t(heads);
  const uint32_t edges = uint32_t(scores.size() / h_n);
  std::vector<float> alpha = init;
  for (size_t j = 0; j + 1 < offsets.size(); ++j) {
    const auto [begin, end] = range(offsets, j, edges);
    for (size_t h = 0; h < h_n; ++h) {
      double m = -std::numeric_limits<double>::infinity(), sum = 0;
      for (uint32_t e = begin; e < end; ++e) m = std::max(m, double(scores[e * h_n + h]));
      for (uint32_t e = begin; e < end; ++e) sum += std::exp(double(scores[e * h_n + h]) - m);
      for (uint32_t e = begin; e < end; ++e)
        alpha[e * h_n + h] = float(std::exp(double(scores[e * h_n + h]) - m) / sum);
    }
  }
  return alpha;
}

std::vector<float> edgeSoftmaxBackward(const std::vector<uint32_t>& offsets,
                                       const std::vector<float>& alpha,
                                       const std::vector<float>& dalpha, int64_t heads,
                                       const std::vector<float>& init) {
  const size_t h_n = size_t(heads);
  const uint32_t edges = uint32_t(alpha.size() / h_n);
  std::vector<float> dscores = init;
  for (size_t j = 0; j + 1 < offsets.size(); ++j) {
    const auto [begin, end] = range(offsets, j, edges);
    for (size_t h = 0; h < h_n; ++h) {
      double dot = 0;
      for (uint32_t e = begin; e < end; ++e)
        dot += double(alpha[e * h_n + h]) * double(dalpha[e * h_n + h]);
      for (uint32_t e = begin; e < end; ++e) {
        const size_t i = e * h_n + h;
        dscores[i] = float(double(dscores[i]) + double(alpha[i]) * (double(dalpha[i]) - dot));
      }
    }
  }
  return dscores;
}

}  // namespace vkgrad::ops::ref

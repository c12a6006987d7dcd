#include "vkgrad/ops/reference/spmm.h"

#include <cstddef>

namespace vkgrad::ops::ref {
namespace {

// Calls visit(e, source, destination) for every edge.
template <class Visit>
void forEachEdge(const std::vector<uint32_t>& offsets, const std::vector<uint32_t>& sources,
                 Visit visit) {
  for (size_t j = 0; j + 1 < offsets.size(); ++j)
    for (uint32_t e = offsets[j]; e < offsets[j + 1]; ++e) visit(size_t(e), size_t(sources[e]), j);
}

std::vector<float> aggregate(const std::vector<uint32_t>& offsets,
                             const std::vector<uint32_t>& sources, const float* w, int64_t heads,
                             const std::vector<float>& in, int64_t cols, bool transposed) {
  const size_t n = offsets.size() - 1, c = size_t(cols), head_cols = size_t(cols / heads);
  std::vector<double> out(n * c, 0.0);
  forEachEdge(offsets, sources, [&](size_t e, size_t s, size_t d) {
    const size_t from = transposed ? d : s, to = transposed ? s : d;
    for (size_t f = 0; f < c; ++f) {
      const double weight = w ? double(w[e * size_t(heads) + f / head_cols]) : 1.0;
      out[to * c + f] += weight * double(in[from * c + f]);
    }
  });
  return std::vector<float>(out.begin(), out.end());
}

}  // namespace

std::vector<float> spmm(const std::vector<uint32_t>& offsets, const std::vector<uint32_t>& sources,
                        const float* w, int64_t heads, const std::vector<float>& x, int64_t cols) {
  return aggregate(offsets, sources, w, heads, x, cols, false);
}

std::vector<float> spmmTransposed(const std::vector<uint32_t>& offsets,
                                  const std::vector<uint32_t>& sources, const float* w,
                                  int64_t heads, const std::vector<float>& dy, int64_t cols) {
  return aggregate(offsets, sources, w, heads, dy, cols, true);
}

std::vector<float> spmmWeightsBackward(const std::vector<uint32_t>& offsets,
                                       const std::vector<uint32_t>& sources, int64_t heads,
                                       const std::vector<float>& x, const std::vector<float>& dy,
                                       int64_t cols) {
  const size_t c = size_t(cols), h_count = size_t(heads), head_cols = c / h_count;
  std::vector<float> dw(sources.size() * h_count);
  forEachEdge(offsets, sources, [&](size_t e, size_t s, size_t d) {
    for (size_t h = 0; h < h_count; ++h) {
      double sum = 0;
      for (size_t f = h * head_cols; f < (h + 1) * head_cols; ++f)
        sum += double(dy[d * c + f]) * double(x[s * c + f]);
      dw[e * h_count + h] = float(sum);
    }
  });
  return dw;
}

}  // namespace vkgrad::ops::ref

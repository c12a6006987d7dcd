#include "vkgrad/ops/reference/matmul.h"

#include <algorithm>
#include <vector>

namespace vkgrad::ops::ref {

void matmul(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  std::vector<double> row(n);
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double aip = a[i * k + p];
      const float* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += aip * brow[j];
    }
    for (int64_t j = 0; j < n; ++j) c[i * n + j] = static_cast<float>(row[j]);
  }
}

namespace {

// Element (z, i, p) of op(a) and (z, p, j) of op(b), with broadcasting.
double opA(const float* a, const MatmulArgs& s, int64_t z, int64_t i, int64_t p) {
  const float* az = a + (s.batch_a == 1 ? 0 : z) * s.m * s.k;
  return s.trans_a ? az[p * s.m + i] : az[i * s.k + p];
}
double opB(const float* b, const MatmulArgs& s, int64_t z, int64_t p, int64_t j) {
  const float* bz = b + (s.batch_b == 1 ? 0 : z) * s.k * s.n;
  return s.trans_b ? bz[j * s.k + p] : bz[p * s.n + j];
}

}  // namespace

void matmul(const float* a, const float* b, const float* bias, float* c, const MatmulArgs& s) {
  for (int64_t z = 0; z < s.batch; ++z)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < s.k; ++p) sum += opA(a, s, z, i, p) * opB(b, s, z, p, j);
        float& out = c[(z * s.m + i) * s.n + j];
        double v = double(s.alpha) * sum;
        if (s.beta != 0.0f) v += double(s.beta) * out;
        if (bias) v += bias[j];
        out = static_cast<float>(v);
      }
}

void matmulBackward(const float* a, const float* b, const float* dc, float* da, float* db,
                    float* dbias, const MatmulArgs& s) {
  auto dC = [&](int64_t z, int64_t i, int64_t j) { return double(dc[(z * s.m + i) * s.n + j]); };
  if (da) {
    // dÂ[z][i][p] = alpha Σ_j dC[z][i][j] B̂[z][p][j], summed over z into a broadcast a.
    std::vector<double> acc(s.batch_a * s.m * s.k, 0.0);
    for (int64_t z = 0; z < s.batch; ++z)
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t p = 0; p < s.k; ++p) {
          double sum = 0;
          for (int64_t j = 0; j < s.n; ++j) sum += dC(z, i, j) * opB(b, s, z, p, j);
          const int64_t za = s.batch_a == 1 ? 0 : z;
          acc[za * s.m * s.k + (s.trans_a ? p * s.m + i : i * s.k + p)] += sum;
        }
    for (size_t e = 0; e < acc.size(); ++e) da[e] = static_cast<float>(s.alpha * acc[e]);
  }
  if (db) {
    // dB̂[z][p][j] = alpha Σ_i Â[z][i][p] dC[z][i][j].
    std::vector<double> acc(s.batch_b * s.k * s.n, 0.0);
    for (int64_t z = 0; z < s.batch; ++z)
      for (int64_t p = 0; p < s.k; ++p)
        for (int64_t j = 0; j < s.n; ++j) {
          double sum = 0;
          for (int64_t i = 0; i < s.m; ++i) sum += opA(a, s, z, i, p) * dC(z, i, j);
          const int64_t zb = s.batch_b == 1 ? 0 : z;
          acc[zb * s.k * s.n + (s.trans_b ? j * s.k + p : p * s.n + j)] += sum;
        }
    for (size_t e = 0; e < acc.size(); ++e) db[e] = static_cast<float>(s.alpha * acc[e]);
  }
  if (dbias) {
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = 0;
      for (int64_t z = 0; z < s.batch; ++z)
        for (int64_t i = 0; i < s.m; ++i) sum += dC(z, i, j);
      dbias[j] = static_cast<float>(sum);
    }
  }
}

}  // namespace vkgrad::ops::ref

#include "vkgrad/ops/reference/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace vkgrad::ops::ref {
namespace {

struct Resolved {
  AttentionShape s;
  double scale;
  int64_t qs, ks, vs, os;
  int64_t hkv, group;  // key/value heads; query heads per key/value head

  int64_t kvHead(int64_t h) const { return h / group; }
};

Resolved resolve(const AttentionShape& s) {
  const int64_t packed = s.h * s.d, hkv = s.hkv ? s.hkv : s.h, kv_packed = hkv * s.d;
  return {s,
          s.scale != 0 ? s.scale : 1.0 / std::sqrt(double(s.d)),
          s.q_stride ? s.q_stride : packed,
          s.k_stride ? s.k_stride : kv_packed,
          s.v_stride ? s.v_stride : kv_packed,
          s.o_stride ? s.o_stride : packed,
          hkv,
          s.h / hkv};
}

bool visible(const AttentionShape& s, int64_t i, int64_t j) {
  return !s.causal || j <= i + (s.tk - s.tq);
}

// Softmax probabilities of query row i against every key (0 where masked), and the row's
// log-sum-exp; returns false when the row sees no key.
bool probabilities(const Resolved& r, const float* q, const float* k, int64_t b, int64_t h,
                   int64_t i, std::vector<double>& p, double& lse) {
  const AttentionShape& s = r.s;
  const float* qi = q + (b * s.tq + i) * r.qs + h * s.d;
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < s.tk; ++j) {
    if (!visible(s, i, j)) {
      p[j] = -std::numeric_limits<double>::infinity();
      continue;
    }
    const float* kj = k + (b * s.tk + j) * r.ks + r.kvHead(h) * s.d;
    double dot = 0;
    for (int64_t d = 0; d < s.d; ++d) dot += double(qi[d]) * double(kj[d]);
    p[j] = r.scale * dot;
    m = std::max(m, p[j]);
  }
  if (m == -std::numeric_limits<double>::infinity()) {
    std::fill(p.begin(), p.end(), 0.0);
    lse = m;
    return false;
  }
  double sum = 0;
  for (int64_t j = 0; j < s.tk; ++j) sum += std::exp(p[j] - m);
  lse = m + std::log(sum);
  for (int64_t j = 0; j < s.tk; ++j) p[j] = std::exp(p[j] - lse);
  return true;
}

}  // namespace

void attention(const AttentionShape& shape, const float* q, const float* k, const float* v,
               float* o, float* lse) {
  const Resolved r = resolve(shape);
  const AttentionShape& s = r.s;
  std::vector<double> p(s.tk), acc(s.d);
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t i = 0; i < s.tq; ++i) {
        double row_lse;
        probabilities(r, q, k, b, h, i, p, row_lse);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < s.tk; ++j) {
          const float* vj = v + (b * s.tk + j) * r.vs + r.kvHead(h) * s.d;
          for (int64_t d = 0; d < s.d; ++d) acc[d] += p[j] * double(vj[d]);
        }
        float* oi = o + (b * s.tq + i) * r.os + h * s.d;
        for (int64_t d = 0; d < s.d; ++d) oi[d] = float(acc[d]);
        lse[(b * s.h + h) * s.tq + i] = float(row_lse);
      }
}

void attentionBackward(const AttentionShape& shape, const float* q, const float* k, const float* v,
                       const float* dout, float* dq, float* dk, float* dv) {
  const Resolved r = resolve(shape);
  const AttentionShape& s = r.s;
  // Gradients accumulate in double, then are written once.
  std::vector<double> gq(s.b * s.tq * s.h * s.d, 0.0), gk(s.b * s.tk * r.hkv * s.d, 0.0),
      gv(s.b * s.tk * r.hkv * s.d, 0.0);
  auto at = [&](int64_t b, int64_t t, int64_t h, int64_t T) {
    return ((b * T + t) * s.h + h) * s.d;
  };
  // (b, t) of key/value head kh in gk and gv.
  auto kv_at = [&](int64_t b, int64_t t, int64_t kh) {
    return ((b * s.tk + t) * r.hkv + kh) * s.d;
  };
  std::vector<double> p(s.tk), dp(s.tk);
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t i = 0; i < s.tq; ++i) {
        double lse;
        if (!probabilities(r, q, k, b, h, i, p, lse)) continue;
        // o_i = sum_j p_j v_j; dp_j = do_i · v_j; ds_j = p_j (dp_j - sum_l p_l dp_l).
        const float* doi = dout + (b * s.tq + i) * r.os + h * s.d;
        const float* qi = q + (b * s.tq + i) * r.qs + h * s.d;
        const int64_t kh = r.kvHead(h);
        double dot_p_dp = 0;
        for (int64_t j = 0; j < s.tk; ++j) {
          const float* vj = v + (b * s.tk + j) * r.vs + kh * s.d;
          double x = 0;
          for (int64_t d = 0; d < s.d; ++d) {
            x += double(doi[d]) * double(vj[d]);
            gv[kv_at(b, j, kh) + d] += p[j] * double(doi[d]);
          }
          dp[j] = x;
          dot_p_dp += p[j] * x;
        }
        for (int64_t j = 0; j < s.tk; ++j) {
          const double ds = p[j] * (dp[j] - dot_p_dp) * r.scale;
          if (ds == 0) continue;
          const float* kj = k + (b * s.tk + j) * r.ks + kh * s.d;
          for (int64_t d = 0; d < s.d; ++d) {
            gq[at(b, i, h, s.tq) + d] += ds * double(kj[d]);
            gk[kv_at(b, j, kh) + d] += ds * double(qi[d]);
          }
        }
      }
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t d = 0; d < s.d; ++d) {
      for (int64_t h = 0; h < s.h; ++h)
        for (int64_t i = 0; i < s.tq; ++i)
          dq[(b * s.tq + i) * r.qs + h * s.d + d] = float(gq[at(b, i, h, s.tq) + d]);
      for (int64_t kh = 0; kh < r.hkv; ++kh)
        for (int64_t j = 0; j < s.tk; ++j) {
          dk[(b * s.tk + j) * r.ks + kh * s.d + d] = float(gk[kv_at(b, j, kh) + d]);
          dv[(b * s.tk + j) * r.vs + kh * s.d + d] = float(gv[kv_at(b, j, kh) + d]);
        }
    }
}

}  // namespace vkgrad::ops::ref

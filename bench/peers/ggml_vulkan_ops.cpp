// ggml's Vulkan backend as a peer for vkgrad's op benchmarks (bench/gpu/ggml.sh runs it on a
// lent GPU machine). Benchmark tool only: nothing in vkgrad's build or tests uses it, and it
// uses only ggml's public API (ggml.h, ggml-backend.h, ggml-alloc.h, ggml-vulkan.h).
//
// Build (bench/peers/ggml_vulkan_ops.sh deps, then build, does all of this): a static ggml with
//   cmake -S ggml -B /tmp/ggml-build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF
//         -DGGML_VULKAN=ON -DGGML_CPU=OFF -DGGML_NATIVE=OFF ... (the script names a newer glslc)
// then
//   g++ -std=c++17 -O2 bench/peers/ggml_vulkan_ops.cpp -I ggml/include
//       /tmp/ggml-build/src/ggml-vulkan/libggml-vulkan.a /tmp/ggml-build/src/libggml.a
//       /tmp/ggml-build/src/libggml-base.a -lvulkan -lpthread -static-libstdc++ -static-libgcc
//       -o ggml_vulkan_ops
//
// Usage: ggml_vulkan_ops [--device I] [--quick] [--warmup W] [--iters N] [--reps R]
//                        [--warm-ms MS] [--only SUBSTR[|SUBSTR...]] [--tag TAG]
// One JSON object per line on stdout: first the device, then one per case. ggml's own log
// (its device line included) goes to stderr.
//
// Timing. Per case: W warm-up computes (and more until --warm-ms of wall time has passed, so
// that a GPU that idled clocks up), then N timed rounds. A round is R back-to-back
// ggml_backend_graph_compute calls of the same graph, closed by ggml_backend_synchronize;
// its time over R is one sample, and `ms` is the median sample (min_ms, max_ms beside it).
// What one sample includes: ggml's host work for one graph compute (recording the command
// buffer, its descriptor/push-constant set-up, one queue submit for these one- or few-node
// graphs) and the GPU execution; with R > 1 the host work of a compute may overlap the GPU
// work of the one before, as it does in ggml's own use. Not included: uploads, downloads,
// allocation, pipeline creation (done in the warm-up). R defaults to enough computes for
// about 2 ms of work per round, at least 3.
//
// Shapes follow vkgrad-bench's conventions:
//  - mul_mat M x N x K means C (M x N) = X (M x K) times W (K x N), 2*M*N*K FLOP. ggml's
//    ggml_mul_mat(a, b) takes both operands K-contiguous: a has ne = (K, N) (N rows of K: the
//    weight, stored transposed as vkgrad's --transB would), b has ne = (K, M) (the
//    activations), and the result has ne = (N, M), i.e. row-major M x N, C[m][n] =
//    sum_k b[m][k] * a[n][k]. The weight a is F32 or F16; the activations b are F32 or F16.
//    prec "default" lets ggml pick its accumulator (F16 accumulation for F16 weights on most
//    GPUs); prec "f32" sets GGML_PREC_F32 (F32 accumulation, as vkgrad does). Note: where the
//    device has fp16, ggml's F32 x F32 product also rounds its operands to F16 on the way
//    (on lavapipe: normalised error 2e-4, against 4e-7 without F16); GGML_VK_DISABLE_F16=1 in the
//    environment gives its all-F32 shaders (bench/gpu/ggml.sh runs those too, tag "no_f16").
//  - soft_max and norm R x C: R rows of C contiguous floats, reduced along the row; GB/s
//    counts each input read once and each output written once (norm_affine adds gamma and
//    beta, ggml_norm then ggml_mul then ggml_add, which ggml may fuse).
//  - flash_attn_ext B, H, T, D: Q (F32), K and V (F16, the KV type ggml's models use) of
//    B x H x T x D, a causal F16 mask (0 / -inf), scale 1/sqrt(D). FLOP counted as vkgrad
//    does: 4 * D * B * H * T(T+1)/2 (causal pairs only). ggml's FA output is F32.
//  - conv2d N, C, S, O, K (forward only: ggml's conv2d backward needs GGML_OP_IM2COL_BACK,
//    which its Vulkan backend lacks): stride 1, padding K/2, F32 x, w and y, no bias, NCHW
//    as vkgrad-bench conv2d lays them out; three routes, see conv2d_case.
//
// Checks: every case compares sampled output elements with a CPU computation in double
// precision on the very inputs uploaded (F16 inputs rounded as ggml sees them); a case whose
// check fails prints "ok": false and null timings, never a number.
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-vulkan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <sys/random.h>

// Linked with a static libstdc++ (the GPU machine's may be older than GCC 12's), whose
// std::random_device calls glibc 2.36's arc4random. Defining it here keeps the binary's
// glibc requirement at 2.35, what vkgrad's own Debian 12 binaries need there.
extern "C" uint32_t arc4random(void) {
  uint32_t v = 0;
  while (getrandom(&v, sizeof v, 0) != ssize_t(sizeof v)) {
  }
  return v;
}

namespace {

struct Options {
  int device = 0;
  bool quick = false;
  int warmup = 20;
  int iters = 50;
  int reps = 0;  // 0: automatic
  double warm_ms = 200.0;
  std::string only;
  std::string tag = "default";  // copied into every line, e.g. to mark a run under GGML_VK_* settings
};

std::string g_device_prefix = "ggml_vulkan: 0 = ";  // ggml's line for our device starts so
std::string g_device_info;                             // and is caught from ggml's log

void log_callback(ggml_log_level, const char* text, void*) {
  fputs(text, stderr);
  fflush(stderr);
  std::string s(text);
  if (g_device_info.empty() && s.rfind(g_device_prefix, 0) == 0) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    g_device_info = s.substr(13);
  }
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') { out += '\\'; out += c; }
    else if (static_cast<unsigned char>(c) < 0x20) { out += ' '; }
    else out += c;
  }
  return out;
}

std::string fmt_num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {  // splitmix64
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 40) * (1.0f / 16777216.0f); }
};

// Host copy of a tensor's values as ggml will see them (F16 ones already rounded).
struct HostTensor {
  ggml_tensor* t = nullptr;
  std::vector<float> v;
};

void fill_random(HostTensor& h, Rng& rng, float lo, float hi) {
  const int64_t n = ggml_nelements(h.t);
  h.v.resize(n);
  for (auto& x : h.v) x = rng.uniform(lo, hi);
  if (h.t->type == GGML_TYPE_F16) {
    std::vector<ggml_fp16_t> half(n);
    ggml_fp32_to_fp16_row(h.v.data(), half.data(), n);
    for (int64_t i = 0; i < n; ++i) h.v[i] = ggml_fp16_to_fp32(half[i]);
  }
}

void upload(const HostTensor& h) {
  const int64_t n = ggml_nelements(h.t);
  if (h.t->type == GGML_TYPE_F16) {
    std::vector<ggml_fp16_t> half(n);
    ggml_fp32_to_fp16_row(h.v.data(), half.data(), n);
    ggml_backend_tensor_set(h.t, half.data(), 0, n * sizeof(ggml_fp16_t));
  } else {
    ggml_backend_tensor_set(h.t, h.v.data(), 0, n * sizeof(float));
  }
}

std::vector<float> download(ggml_tensor* t) {
  std::vector<float> out(ggml_nelements(t));
  if (t->type != GGML_TYPE_F32) { fprintf(stderr, "unexpected output type\n"); exit(2); }
  ggml_backend_tensor_get(t, out.data(), 0, out.size() * sizeof(float));
  return out;
}

// Result of a case's check: vkgrad's normalised error (max|got - want| / max|want| over the
// sampled elements) and whether every sample was within its tolerance.
struct Check {
  double max_diff = 0, max_want = 0;
  bool ok = true;
  int samples = 0;
  void add(double got, double want, double tol) {
    const double d = std::fabs(got - want);
    max_diff = std::max(max_diff, std::isfinite(got) ? d : INFINITY);
    max_want = std::max(max_want, std::fabs(want));
    if (!(d <= tol)) ok = false;
    ++samples;
  }
  double error() const { return max_want > 0 ? max_diff / max_want : max_diff; }
};

struct Case {
  std::string name;    // for --only and the table
  std::string fields;  // JSON fields describing the case (without braces)
  double flop = 0;     // per compute; 0 for bandwidth-bound ops
  double bytes = 0;    // per compute; 0 for FLOP-bound ops
  // Builds the graph's tensors in ctx (no_alloc), returns the output. Inputs go to `inputs`.
  std::function<ggml_tensor*(ggml_context*, std::vector<HostTensor>&)> build;
  // Fills the inputs (after allocation) with random values.
  std::function<void(std::vector<HostTensor>&, Rng&)> fill;
  // Checks the downloaded output against the CPU on sampled elements.
  std::function<Check(const std::vector<HostTensor>&, const std::vector<float>&)> check;
};

const char* type_str(ggml_type t) { return t == GGML_TYPE_F16 ? "f16" : "f32"; }

Case mul_mat_case(int64_t M, int64_t N, int64_t K, ggml_type wt, ggml_type xt, bool prec_f32) {
  Case c;
  char buf[256];
  snprintf(buf, sizeof buf, "mul_mat %lldx%lldx%lld w=%s x=%s prec=%s", (long long)M, (long long)N,
           (long long)K, type_str(wt), type_str(xt), prec_f32 ? "f32" : "default");
  c.name = buf;
  snprintf(buf, sizeof buf,
           "\"op\":\"mul_mat\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"wtype\":\"%s\",\"xtype\":\"%s\",\"prec\":\"%s\"",
           (long long)M, (long long)N, (long long)K, type_str(wt), type_str(xt), prec_f32 ? "f32" : "default");
  c.fields = buf;
  c.flop = 2.0 * M * N * K;
  c.build = [=](ggml_context* ctx, std::vector<HostTensor>& in) {
    in.resize(2);
    in[0].t = ggml_new_tensor_2d(ctx, wt, K, N);  // weight W^T: N rows of K
    in[1].t = ggml_new_tensor_2d(ctx, xt, K, M);  // activations X: M rows of K
    ggml_tensor* out = ggml_mul_mat(ctx, in[0].t, in[1].t);  // ne = (N, M)
    if (prec_f32) ggml_mul_mat_set_prec(out, GGML_PREC_F32);
    return out;
  };
  c.fill = [](std::vector<HostTensor>& in, Rng& rng) {
    for (auto& h : in) fill_random(h, rng, -1.0f, 1.0f);
  };
  c.check = [=](const std::vector<HostTensor>& in, const std::vector<float>& out) {
    Check ch;
    Rng pick(7);
    // Corners plus random elements.
    std::vector<std::pair<int64_t, int64_t>> idx = {{0, 0}, {M - 1, N - 1}, {0, N - 1}, {M - 1, 0}};
    for (int i = 0; i < 60; ++i) idx.push_back({int64_t(pick.next() % M), int64_t(pick.next() % N)});
    for (auto [m, n] : idx) {
      double want = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(in[1].v[m * K + k]) * in[0].v[n * K + k];
        want += p;
        mag += std::fabs(p);
      }
      // Loose enough for F16 accumulation over K terms, far below a wrong result's error.
      ch.add(out[m * N + n], want, 1e-2 * mag + 1e-5);
    }
    return ch;
  };
  return c;
}

std::vector<int64_t> sample_rows(int64_t R) {
  std::vector<int64_t> rows = {0, R - 1, R / 2};
  Rng pick(11);
  for (int i = 0; i < 5; ++i) rows.push_back(int64_t(pick.next() % R));
  return rows;
}

Case softmax_case(int64_t R, int64_t C) {
  Case c;
  c.name = "soft_max " + std::to_string(R) + "x" + std::to_string(C);
  c.fields = "\"op\":\"soft_max\",\"rows\":" + std::to_string(R) + ",\"cols\":" + std::to_string(C);
  c.bytes = 2.0 * R * C * sizeof(float);
  c.build = [=](ggml_context* ctx, std::vector<HostTensor>& in) {
    in.resize(1);
    in[0].t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, C, R);
    return ggml_soft_max(ctx, in[0].t);
  };
  c.fill = [](std::vector<HostTensor>& in, Rng& rng) { fill_random(in[0], rng, -4.0f, 4.0f); };
  c.check = [=](const std::vector<HostTensor>& in, const std::vector<float>& out) {
    Check ch;
    for (int64_t r : sample_rows(R)) {
      const float* x = in[0].v.data() + r * C;
      double mx = -INFINITY, sum = 0;
      for (int64_t i = 0; i < C; ++i) mx = std::max(mx, double(x[i]));
      for (int64_t i = 0; i < C; ++i) sum += std::exp(double(x[i]) - mx);
      for (int64_t i = 0; i < C; ++i) {
        const double want = std::exp(double(x[i]) - mx) / sum;
        ch.add(out[r * C + i], want, 1e-4 * want + 1e-7);
      }
    }
    return ch;
  };
  return c;
}

Case norm_case(int64_t R, int64_t C, bool affine) {
  Case c;
  const std::string op = affine ? "norm_affine" : "norm";
  c.name = op + " " + std::to_string(R) + "x" + std::to_string(C);
  c.fields = "\"op\":\"" + op + "\",\"rows\":" + std::to_string(R) + ",\"cols\":" + std::to_string(C);
  c.bytes = (2.0 * R * C + (affine ? 2.0 * C : 0.0)) * sizeof(float);
  const float eps = 1e-5f;
  c.build = [=](ggml_context* ctx, std::vector<HostTensor>& in) {
    in.resize(affine ? 3 : 1);
    in[0].t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, C, R);
    ggml_tensor* y = ggml_norm(ctx, in[0].t, eps);
    if (affine) {
      in[1].t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, C);  // gamma
      in[2].t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, C);  // beta
      y = ggml_add(ctx, ggml_mul(ctx, y, in[1].t), in[2].t);
    }
    return y;
  };
  c.fill = [=](std::vector<HostTensor>& in, Rng& rng) {
    fill_random(in[0], rng, -2.0f, 3.0f);
    if (affine) {
      fill_random(in[1], rng, 0.5f, 1.5f);
      fill_random(in[2], rng, -0.5f, 0.5f);
    }
  };
  c.check = [=](const std::vector<HostTensor>& in, const std::vector<float>& out) {
    Check ch;
    for (int64_t r : sample_rows(R)) {
      const float* x = in[0].v.data() + r * C;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < C; ++i) mean += x[i];
      mean /= C;
      for (int64_t i = 0; i < C; ++i) var += (x[i] - mean) * (x[i] - mean);
      var /= C;
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t i = 0; i < C; ++i) {
        double want = (x[i] - mean) * inv;
        if (affine) want = want * in[1].v[i] + in[2].v[i];
        ch.add(out[r * C + i], want, 1e-4 * (1.0 + std::fabs(want)));
      }
    }
    return ch;
  };
  return c;
}

Case flash_attn_case(int64_t B, int64_t H, int64_t T, int64_t D, bool prec_f32) {
  Case c;
  char buf[256];
  snprintf(buf, sizeof buf, "flash_attn_ext B%lld H%lld T%lld D%lld causal prec=%s", (long long)B,
           (long long)H, (long long)T, (long long)D, prec_f32 ? "f32" : "default");
  c.name = buf;
  snprintf(buf, sizeof buf,
           "\"op\":\"flash_attn_ext\",\"b\":%lld,\"h\":%lld,\"t\":%lld,\"d\":%lld,\"causal\":true,"
           "\"kvtype\":\"f16\",\"prec\":\"%s\"",
           (long long)B, (long long)H, (long long)T, (long long)D, prec_f32 ? "f32" : "default");
  c.fields = buf;
  c.flop = 4.0 * D * double(B) * H * (double(T) * (T + 1) / 2.0);
  const float scale = 1.0f / std::sqrt(float(D));
  c.build = [=](ggml_context* ctx, std::vector<HostTensor>& in) {
    in.resize(4);
    in[0].t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, D, T, H, B);  // q
    in[1].t = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, D, T, H, B);  // k
    in[2].t = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, D, T, H, B);  // v
    in[3].t = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, T, T);        // mask: T queries x T keys
    ggml_tensor* out = ggml_flash_attn_ext(ctx, in[0].t, in[1].t, in[2].t, in[3].t, scale, 0.0f, 0.0f);
    if (prec_f32) ggml_flash_attn_ext_set_prec(out, GGML_PREC_F32);
    return out;  // ne = (D, H, T, B)
  };
  c.fill = [=](std::vector<HostTensor>& in, Rng& rng) {
    for (int i = 0; i < 3; ++i) fill_random(in[i], rng, -1.0f, 1.0f);
    in[3].v.assign(size_t(T) * T, 0.0f);
    for (int64_t q = 0; q < T; ++q)
      for (int64_t k = q + 1; k < T; ++k) in[3].v[q * T + k] = -INFINITY;
  };
  c.check = [=](const std::vector<HostTensor>& in, const std::vector<float>& out) {
    Check ch;
    Rng pick(13);
    std::vector<int64_t> qs = {0, 1, 2, T / 2, T - 1};
    for (int i = 0; i < 3; ++i) qs.push_back(int64_t(pick.next() % T));
    std::vector<double> s(T), o(D);
    for (int64_t b : {int64_t(0), B - 1}) {
      for (int64_t h : {int64_t(0), H - 1}) {
        const size_t head = (size_t(b) * H + h) * T * D;
        for (int64_t q : qs) {
          const float* qv = in[0].v.data() + head + q * D;
          double mx = -INFINITY;
          for (int64_t k = 0; k <= q; ++k) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += double(qv[d]) * in[1].v[head + k * D + d];
            s[k] = dot * scale;
            mx = std::max(mx, s[k]);
          }
          double sum = 0;
          std::fill(o.begin(), o.end(), 0.0);
          for (int64_t k = 0; k <= q; ++k) {
            const double p = std::exp(s[k] - mx);
            sum += p;
            for (int64_t d = 0; d < D; ++d) o[d] += p * in[2].v[head + k * D + d];
          }
          for (int64_t d = 0; d < D; ++d) {
            const double want = o[d] / sum;
            const double got = out[((size_t(b) * T + q) * H + h) * D + d];
            ch.add(got, want, 5e-3 + 1e-2 * std::fabs(want));
          }
        }
      }
    }
    return ch;
  };
  return c;
}

// conv2d routes: ggml's direct kernel (GGML_OP_CONV_2D), and im2col + mul_mat with the im2col
// in F16 (what ggml_conv_2d builds) or F32 (the all-F32 route, as vkgrad's graph runs it).
enum class ConvRoute { Direct, Im2colF16, Im2colF32 };

const char* conv_route_str(ConvRoute r) {
  return r == ConvRoute::Direct ? "direct" : r == ConvRoute::Im2colF16 ? "im2col_f16" : "im2col_f32";
}

//  - conv2d N, C, S, O, K: vkgrad-bench conv2d's shapes (stride 1, padding K/2, no dilation,
//    no bias), x N x C x S x S and w O x C x K x K row-major (NCHW, OIHW), y N x O x S x S.
//    ggml orders ne innermost first, so the same memory is x ne = (S, S, C, N), w ne = (K, K,
//    C, O) and y ne = (S, S, O, N). FLOP: 2 N O S^2 C K^2, as vkgrad-bench counts.
Case conv2d_case(int64_t N, int64_t C, int64_t S, int64_t O, int64_t K, ConvRoute route) {
  Case c;
  char buf[256];
  snprintf(buf, sizeof buf, "conv2d %s N%lld C%lld S%lld O%lld K%lld", conv_route_str(route), (long long)N,
           (long long)C, (long long)S, (long long)O, (long long)K);
  c.name = buf;
  snprintf(buf, sizeof buf, "\"op\":\"conv2d\",\"route\":\"%s\",\"n\":%lld,\"c\":%lld,\"size\":%lld,\"o\":%lld,\"k\":%lld",
           conv_route_str(route), (long long)N, (long long)C, (long long)S, (long long)O, (long long)K);
  c.fields = buf;
  const int pad = int(K / 2);
  const int64_t OS = S + 2 * pad - K + 1;  // output height and width
  c.flop = 2.0 * N * O * OS * OS * C * K * K;
  c.build = [=](ggml_context* ctx, std::vector<HostTensor>& in) {
    in.resize(2);
    in[0].t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, K, K, C, O);  // w
    in[1].t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, S, S, C, N);  // x
    if (route == ConvRoute::Direct) return ggml_conv_2d_direct(ctx, in[0].t, in[1].t, 1, 1, pad, pad, 1, 1);
    if (route == ConvRoute::Im2colF16) return ggml_conv_2d(ctx, in[0].t, in[1].t, 1, 1, pad, pad, 1, 1);
    // ggml_conv_2d's graph with an F32 im2col: cols ne = (C K K, OS, OS, N), one row per output
    // pixel; the product's result ne = (N OS OS, O) is permuted back to (OS, OS, O, N).
    ggml_tensor* cols = ggml_im2col(ctx, in[0].t, in[1].t, 1, 1, pad, pad, 1, 1, true, GGML_TYPE_F32);
    ggml_tensor* y = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, cols, C * K * K, N * OS * OS),
                                  ggml_reshape_2d(ctx, in[0].t, C * K * K, O));
    y = ggml_reshape_4d(ctx, y, OS, OS, N, O);
    return ggml_cont(ctx, ggml_permute(ctx, y, 0, 1, 3, 2));
  };
  c.fill = [](std::vector<HostTensor>& in, Rng& rng) {
    fill_random(in[0], rng, -0.2f, 0.2f);  // vkgrad-bench's ranges
    fill_random(in[1], rng, -1.0f, 1.0f);
  };
  c.check = [=](const std::vector<HostTensor>& in, const std::vector<float>& out) {
    Check ch;
    Rng pick(17);
    struct At { int64_t n, o, y, x; };
    std::vector<At> idx = {{0, 0, 0, 0}, {N - 1, O - 1, OS - 1, OS - 1}, {0, O - 1, 0, OS - 1}, {N - 1, 0, OS - 1, 0}};
    for (int i = 0; i < 60; ++i)
      idx.push_back({int64_t(pick.next() % N), int64_t(pick.next() % O), int64_t(pick.next() % OS),
                     int64_t(pick.next() % OS)});
    const float* w = in[0].v.data();
    const float* x = in[1].v.data();
    for (auto [n, o, oy, ox] : idx) {
      double want = 0, mag = 0;
      for (int64_t ci = 0; ci < C; ++ci)
        for (int64_t ky = 0; ky < K; ++ky)
          for (int64_t kx = 0; kx < K; ++kx) {
            const int64_t iy = oy + ky - pad, ix = ox + kx - pad;
            if (iy < 0 || iy >= S || ix < 0 || ix >= S) continue;
            const double p = double(x[((n * C + ci) * S + iy) * S + ix]) * w[((o * C + ci) * K + ky) * K + kx];
            want += p;
            mag += std::fabs(p);
          }
      // F16 routes round x (and on a device with fp16, w too) to 11 bits: 1e-2 of the terms'
      // magnitudes is loose enough for that and far below a wrong result's error.
      const double rel = route == ConvRoute::Direct ? 1e-4 : 1e-2;
      ch.add(out[((n * O + o) * OS + oy) * OS + ox], want, rel * mag + 1e-6);
    }
    return ch;
  };
  return c;
}

std::vector<Case> make_cases(bool quick) {
  std::vector<Case> cs;
  struct Mnk { int64_t m, n, k; };
  const std::vector<Mnk> mm = quick ? std::vector<Mnk>{{256, 256, 256}, {96, 48, 16}}
                                    : std::vector<Mnk>{{4096, 4096, 4096}, {768, 384, 128}, {768, 512, 128}, {768, 128, 512}};
  for (auto s : mm) {
    cs.push_back(mul_mat_case(s.m, s.n, s.k, GGML_TYPE_F32, GGML_TYPE_F32, false));
    for (bool p32 : {false, true}) {
      cs.push_back(mul_mat_case(s.m, s.n, s.k, GGML_TYPE_F16, GGML_TYPE_F32, p32));
      cs.push_back(mul_mat_case(s.m, s.n, s.k, GGML_TYPE_F16, GGML_TYPE_F16, p32));
    }
  }
  using Rc = std::vector<std::pair<int64_t, int64_t>>;
  const Rc rc = quick ? Rc{{256, 256}, {96, 128}} : Rc{{4096, 4096}, {768, 128}};
  for (auto [r, c] : rc) cs.push_back(softmax_case(r, c));
  for (auto [r, c] : rc) cs.push_back(norm_case(r, c, false));
  for (auto [r, c] : rc) cs.push_back(norm_case(r, c, true));
  std::vector<int64_t> ts = quick ? std::vector<int64_t>{64, 128} : std::vector<int64_t>{64, 1024, 4096};
  const int64_t b = quick ? 2 : 12, h = quick ? 2 : 4;
  for (int64_t t : ts)
    for (bool p32 : {false, true}) cs.push_back(flash_attn_case(b, h, t, 32, p32));
  // N, C, S, O, K: conv2d_torch.py's and BENCHMARKS.md's conv2d shapes (two ResNet stages'
  // 3x3 convolutions at batch 8, the Fashion-MNIST CNN's two convolutions).
  struct Conv { int64_t n, c, s, o, k; };
  const std::vector<Conv> conv = quick ? std::vector<Conv>{{2, 8, 14, 8, 3}, {3, 5, 9, 7, 5}}
                                       : std::vector<Conv>{{8, 64, 56, 64, 3}, {8, 128, 28, 128, 3},
                                                           {128, 32, 14, 64, 5}, {32, 1, 28, 4, 5}};
  for (auto s : conv)
    for (ConvRoute r : {ConvRoute::Direct, ConvRoute::Im2colF16, ConvRoute::Im2colF32})
      cs.push_back(conv2d_case(s.n, s.c, s.s, s.o, s.k, r));
  return cs;
}

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool compute(ggml_backend_t be, ggml_cgraph* g) {
  return ggml_backend_graph_compute(be, g) == GGML_STATUS_SUCCESS;
}

// Returns false when the case was supported but failed (compute error or wrong result).
bool run_case(const Case& c, ggml_backend_t be, const Options& opt, int device) {
  const std::string head = "{\"peer\":\"ggml-vulkan\",\"device\":" + std::to_string(device) + ",\"tag\":\"" +
                           json_escape(opt.tag) + "\"," + c.fields;
  ggml_init_params ip = {ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true};
  ggml_context* ctx = ggml_init(ip);
  std::vector<HostTensor> in;
  ggml_tensor* out = c.build(ctx, in);
  ggml_cgraph* g = ggml_new_graph(ctx);
  ggml_build_forward_expand(g, out);
  for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
    if (!ggml_backend_supports_op(be, ggml_graph_node(g, i))) {
      printf("%s,\"supported\":false,\"ok\":false,\"ms\":null}\n", head.c_str());
      fflush(stdout);
      ggml_free(ctx);
      return true;
    }
  }
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, be);
  if (!buf) {
    printf("%s,\"supported\":true,\"ok\":false,\"ms\":null,\"failure\":\"allocation\"}\n", head.c_str());
    fflush(stdout);
    ggml_free(ctx);
    return false;
  }
  Rng rng(1234);
  c.fill(in, rng);
  for (auto& h : in) upload(h);

  // Warm-up (pipeline creation, clocks), then the check on the warm-up's output.
  bool fine = true;
  int warm = 0;
  const auto w0 = Clock::now();
  while (fine && (warm < std::max(opt.warmup, 1) || ms_since(w0) < opt.warm_ms)) {
    fine = compute(be, g);
    ++warm;
    if (warm % 16 == 0) ggml_backend_synchronize(be);
  }
  ggml_backend_synchronize(be);
  const double per_warm = ms_since(w0) / warm;
  Check ch;
  if (fine) ch = c.check(in, download(out));
  const bool ok = fine && ch.ok;

  int reps = opt.reps > 0 ? opt.reps : int(std::clamp(std::ceil(2.0 / std::max(per_warm, 1e-3)), 3.0, 200.0));
  std::vector<double> samples;
  if (ok) {
    for (int it = 0; it < opt.iters && fine; ++it) {
      ggml_backend_synchronize(be);
      const auto t0 = Clock::now();
      for (int r = 0; r < reps && fine; ++r) fine = compute(be, g);
      ggml_backend_synchronize(be);
      samples.push_back(ms_since(t0) / reps);
    }
  }
  std::string line = head + ",\"supported\":true";
  if (ok && fine && !samples.empty()) {
    std::sort(samples.begin(), samples.end());
    const size_t n = samples.size();
    const double med = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    line += ",\"ok\":true,\"ms\":" + fmt_num(med) + ",\"min_ms\":" + fmt_num(samples.front()) +
            ",\"max_ms\":" + fmt_num(samples.back());
    if (c.flop > 0) line += ",\"tflops\":" + fmt_num(c.flop / (med * 1e-3) / 1e12);
    if (c.bytes > 0) line += ",\"gbs\":" + fmt_num(c.bytes / (med * 1e-3) / 1e9);
  } else {
    line += ",\"ok\":false,\"ms\":null";
    if (!fine) line += ",\"failure\":\"compute\"";
  }
  line += ",\"warmup\":" + std::to_string(warm) + ",\"rounds\":" + std::to_string(samples.size()) +
          ",\"reps\":" + std::to_string(reps) + ",\"checked\":" + std::to_string(ch.samples) +
          ",\"error\":" + fmt_num(ch.error()) + "}";
  printf("%s\n", line.c_str());
  fflush(stdout);
  ggml_backend_buffer_free(buf);
  ggml_free(ctx);
  return ok && fine && !samples.empty();
}

// --only's alternatives are separated by '|': a case runs if its name contains any of them.
bool matches_only(const std::string& name, const std::string& only) {
  if (only.empty()) return true;
  size_t from = 0;
  while (true) {
    const size_t bar = only.find('|', from);
    if (name.find(only.substr(from, bar - from)) != std::string::npos) return true;
    if (bar == std::string::npos) return false;
    from = bar + 1;
  }
}

int usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [--device I] [--quick] [--warmup W] [--iters N] [--reps R] [--warm-ms MS] "
          "[--only SUBSTR[|SUBSTR...]] [--tag TAG]\n",
          argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  bool warm_ms_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) { usage(argv[0]); exit(2); }
      return argv[++i];
    };
    if (a == "--device") opt.device = atoi(val());
    else if (a == "--quick") opt.quick = true;
    else if (a == "--warmup") opt.warmup = atoi(val());
    else if (a == "--iters") opt.iters = atoi(val());
    else if (a == "--reps") opt.reps = atoi(val());
    else if (a == "--warm-ms") { opt.warm_ms = atof(val()); warm_ms_set = true; }
    else if (a == "--only") opt.only = val();
    else if (a == "--tag") opt.tag = val();
    else return usage(argv[0]);
  }
  if (opt.quick) {
    if (opt.warmup == 20) opt.warmup = 2;
    if (opt.iters == 50) opt.iters = 5;
    if (opt.reps == 0) opt.reps = 2;
    if (!warm_ms_set) opt.warm_ms = 0;
  }
  g_device_prefix = "ggml_vulkan: " + std::to_string(opt.device) + " = ";
  ggml_log_set(log_callback, nullptr);

  const int n_dev = ggml_backend_vk_get_device_count();
  if (opt.device < 0 || opt.device >= n_dev) {
    fprintf(stderr, "Vulkan device %d not available (%d found by ggml; a CPU device such as lavapipe "
                    "needs GGML_VK_VISIBLE_DEVICES)\n", opt.device, n_dev);
    return 1;
  }
  char desc[256] = {0};
  ggml_backend_vk_get_device_description(opt.device, desc, sizeof desc);
  ggml_backend_t be = ggml_backend_vk_init(opt.device);
  if (!be) {
    fprintf(stderr, "ggml_backend_vk_init(%d) failed\n", opt.device);
    return 1;
  }
  size_t free_mem = 0, total_mem = 0;
  ggml_backend_vk_get_device_memory(opt.device, &free_mem, &total_mem);
  printf("{\"peer\":\"ggml-vulkan\",\"device\":%d,\"tag\":\"%s\",\"description\":\"%s\",\"info\":\"%s\",\"ggml_version\":\"%s\","
         "\"ggml_commit\":\"%s\",\"memory_mib\":%zu,\"quick\":%s,\"warmup\":%d,\"iters\":%d,\"warm_ms\":%s}\n",
         opt.device, json_escape(opt.tag).c_str(), json_escape(desc).c_str(), json_escape(g_device_info).c_str(), ggml_version(), ggml_commit(),
         total_mem >> 20, opt.quick ? "true" : "false", opt.warmup, opt.iters, fmt_num(opt.warm_ms).c_str());
  fflush(stdout);

  int failed = 0;
  for (const Case& c : make_cases(opt.quick)) {
    if (!matches_only(c.name, opt.only)) continue;
    fprintf(stderr, "case: %s\n", c.name.c_str());
    if (!run_case(c, be, opt, opt.device)) ++failed;
  }
  ggml_backend_free(be);
  if (failed) fprintf(stderr, "%d case(s) failed\n", failed);
  return failed ? 1 : 0;
}

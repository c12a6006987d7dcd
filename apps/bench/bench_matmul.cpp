// vkgrad-bench matmul: C = A·B on random inputs, per kernel variant; the median of the
// timed dispatches gives GFLOP/s = 2·M·N·K / time. The result is checked once against the
// fp64 CPU reference.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench.h"
#include "ops/matmul.h"
#include "ops/reference/matmul.h"
#include "vk/device_info.h"
#include "vk/memory.h"
#include "vk/staging.h"

namespace vkgrad::apps {
namespace {

// Checking costs 2·M·N·K double flops on one CPU core (~10 s at 2048³), so larger products
// are only checked with --check.
constexpr double kCheckLimit = 2048.0 * 2048.0 * 2048.0;
// Inputs are uniform in [-1, 1]; fp32 sums of K such products stay far below this
// normalised error, and a broken kernel lands far above it.
constexpr double kCheckTolerance = 1e-3;

void declare(Cli& cli) {
  cli.option("m", "matmul: rows of A and C", "1024");
  cli.option("n", "matmul: columns of B and C", "1024");
  cli.option("k", "matmul: columns of A, rows of B", "1024");
  cli.option("variant", "matmul: auto, naive, tiled, texel or all", "auto");
}

std::vector<ops::MatmulVariant> parseVariants(const Cli& cli) {
  using V = ops::MatmulVariant;
  const std::string text = cli.get("variant");
  if (text == "all") return {V::Naive, V::Tiled, V::Texel};
  for (V v : {V::Auto, V::Naive, V::Tiled, V::Texel})
    if (text == ops::matmulVariantName(v)) return {v};
  cli.fail("--variant must be auto, naive, tiled, texel or all, got '" + text + "'");
}

// max |got - want| / max |want|; infinity when got has a non-finite value.
double normalisedError(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return worst / scale;
}

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const int64_t m = cli.getInt("m", 1, 1 << 20), n = cli.getInt("n", 1, 1 << 20),
                k = cli.getInt("k", 1, 1 << 20);
  const std::vector<ops::MatmulVariant> variants = parseVariants(cli);
  const double flop = 2.0 * double(m) * double(n) * double(k);
  const bool check = options.check || double(m) * double(n) * double(k) <= kCheckLimit;
  const std::string device = deviceDescription(context);
  const ops::MatmulVariant automatic = ops::matmulVariantFor(context);

  std::fprintf(stderr, "vkgrad-bench: matmul (%lld,%lld) x (%lld,%lld) on %s\n", (long long)m,
               (long long)k, (long long)k, (long long)n, context.info().name.c_str());
  if (!options.json) {
    std::printf("device   %s\n", device.c_str());
    std::printf("auto     %s on this device\n", ops::matmulVariantName(automatic));
    std::printf("work     2*M*N*K = %.3f GFLOP; A, B and C hold %.1f MB\n", flop * 1e-9,
                4e-6 * double(m * k + k * n + m * n));
    std::printf("timing   median of %d dispatches after %d warm-up, GPU timestamps\n",
                options.iters, options.warmup);
  }

  // Device buffers first: an impossible size fails here with OutOfMemoryError, before the
  // host arrays of the same size are filled.
  const vk::Buffer da = context.allocator().allocate(m * k * sizeof(float)),
                   db = context.allocator().allocate(k * n * sizeof(float)),
                   dc = context.allocator().allocate(m * n * sizeof(float));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a(m * k), b(k * n);
  for (float& x : a) x = uniform(rng);
  for (float& x : b) x = uniform(rng);
  context.staging().upload(da, 0, a.data(), a.size() * sizeof(float));
  context.staging().upload(db, 0, b.data(), b.size() * sizeof(float));
  std::vector<float> want;

  int exit_code = 0;
  for (ops::MatmulVariant requested : variants) {
    const ops::MatmulVariant variant =
        requested == ops::MatmulVariant::Auto ? automatic : requested;
    const char* name = ops::matmulVariantName(variant);
    if (variant == ops::MatmulVariant::Texel && !context.info().subgroup_shuffle) {
      std::fprintf(stderr, "vkgrad-bench: skipping texel: %s has no subgroup shuffle\n",
                   context.info().name.c_str());
      continue;
    }
    // Poisoned, so a kernel that skips outputs fails the check.
    context.staging().upload(dc, 0, std::vector<float>(m * n, NAN).data(), m * n * sizeof(float));
    std::fprintf(stderr, "vkgrad-bench: %s: %d warm-up + %d timed dispatches\n", name,
                 options.warmup, options.iters);
    const ops::TensorView va = ops::view(da, {m, k}), vb = ops::view(db, {k, n}),
                          vc = ops::view(dc, {m, n});
    const Timing timing = timeRuns(context, options.warmup, options.iters, [&](vk::Recorder& rec) {
      ops::matmul(rec, va, vb, vc, variant);
    });
    const Stats t = stats(timing.ms);
    const double gflops = flop / (t.median * 1e6);

    double error = NAN;
    if (check) {
      if (want.empty()) {
        std::fprintf(stderr, "vkgrad-bench: computing the fp64 CPU reference...\n");
        want.resize(m * n);
        ops::ref::matmul(a.data(), b.data(), want.data(), m, n, k);
      }
      std::vector<float> got(m * n);
      context.staging().download(dc, 0, got.data(), got.size() * sizeof(float));
      error = normalisedError(got, want);
      if (!(error <= kCheckTolerance)) {
        std::fprintf(stderr, "vkgrad-bench: matmul %s is WRONG: normalised error %g > %g\n", name,
                     error, kCheckTolerance);
        exit_code = 1;
      }
    }

    if (options.json) {
      JsonLine line;
      line.add("op", "matmul").add("m", m).add("n", n).add("k", k);
      line.add("variant", name).add("requested", ops::matmulVariantName(requested));
      line.add("ms", t.median).add("min_ms", t.min).add("max_ms", t.max);
      line.add("gflops", gflops).add("iters", int64_t(options.iters));
      line.add("warmup", int64_t(options.warmup)).add("cpu_ms", timing.cpu_ms);
      line.add("checked", check);
      line.add("error", error).add("device", context.info().name);
      line.add("driver", context.info().driver_name + " (" + context.info().driver_info + ")");
      std::printf("%s\n", line.str().c_str());
    } else {
      std::string verdict = "not checked (above 2048^3; --check forces it)";
      if (check) {
        char text[64];
        std::snprintf(text, sizeof(text), "error %.2g%s", error,
                      error <= kCheckTolerance ? "" : "  WRONG");
        verdict = text;
      }
      std::printf(
          "matmul %lldx%lldx%lld  %-5s%s  %9.3f ms  %8.2f GFLOP/s  (min %.3f, max %.3f; "
          "cpu %.3f ms)  %s\n",
          (long long)m, (long long)n, (long long)k, name,
          requested == ops::MatmulVariant::Auto ? " (auto)" : "", t.median, gflops, t.min, t.max,
          timing.cpu_ms, verdict.c_str());
    }
    std::fflush(stdout);
  }
  return exit_code;
}

}  // namespace

const BenchOp& matmulBench() {
  static const BenchOp op{"matmul", "C = A·B, (M,K) x (K,N), fp32", declare, run};
  return op;
}

}  // namespace vkgrad::apps

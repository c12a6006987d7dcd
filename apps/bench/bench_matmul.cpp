// vkgrad-bench matmul: C = op(A)·op(B) on random inputs, per kernel variant, optionally with
// transposed operands (--transA/--transB) and a batch (--batch); the median of the timed
// dispatches gives GFLOP/s = 2·B·M·N·K / time. The result is checked once against the fp64
// CPU reference: every element up to 2048³ (or with --check), else every element for
// NaN (the output starts poisoned) and 4096 sampled ones against fp64 dot products.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench.h"
#include "vkgrad/ops/matmul.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/matmul.h"
#include "vkgrad/vk/device_info.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

// Checking costs 2·M·N·K double flops on one CPU core (~10 s at 2048³), so larger products
// are only checked with --check.
constexpr double kCheckLimit = 2048.0 * 2048.0 * 2048.0;
// Inputs are uniform in [-1, 1]; fp32 sums of K such products stay far below this
// normalised error (~1e-6), as do the coopmat variant's fp16-rounded f32 inputs (~3e-4: each
// input off by up to 2^-11 of itself), and a broken kernel lands far above it.
constexpr double kCheckTolerance = 1e-3;

void declare(Cli& cli) {
  cli.option("m", "matmul: rows of A and C", "1024");
  cli.option("n", "matmul: columns of B and C", "1024");
  cli.option("k", "matmul: columns of A, rows of B", "1024");
  cli.option("variant", "matmul: auto, naive, tiled, texel, vector, coopmat or all", "auto");
  cli.option("tiling",
             "matmul: the vector or coopmat variant's tile, WXxWYxBKxTMxTN (e.g. 16x16x16x8x8; "
             "for coopmat subgroups and 16x16 fragments, e.g. 2x2x32x4x4)",
             "auto");
  cli.option("inputs",
             "matmul: how A and B are stored: f32, or f16 (rounded on the host; the coopmat "
             "variant only, and the check uses the rounded values)",
             "f32");
  cli.option("batch", "matmul: batch B: A (B,M,K) and B (B,K,N), no broadcast", "1");
  cli.flag("transA", "matmul: A stored (K,M), C = Aᵀ·B");
  cli.flag("transB", "matmul: B stored (N,K), C = A·Bᵀ");
  cli.flag("sample", "matmul: check 4096 sampled elements (the default above 2048³), not all");
  cli.option("split",
             "matmul: split-K scratch for the vector variant: auto (split where "
             "ops::matmulSplitK says) or off",
             "auto");
  cli.option("shapes",
             "matmul: a preset instead of --m/--n/--k: 'gpt' times every product of "
             "the 4-layer GPT's training step (vkgrad-gpt's BENCHMARKS configuration), forward "
             "and backward, with --variant (auto: one per device) and its split-K scratch",
             "");
}

// x: (rows,cols) -> (cols,rows), so the plain CPU reference can check a transposed product.
std::vector<float> transposedCopy(const float* x, int64_t rows, int64_t cols) {
  std::vector<float> t(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
}

std::vector<ops::MatmulVariant> parseVariants(const Cli& cli) {
  using V = ops::MatmulVariant;
  const std::string text = cli.get("variant");
  if (text == "all") return {V::Naive, V::Tiled, V::Texel, V::Vector, V::Coopmat};
  for (V v : {V::Auto, V::Naive, V::Tiled, V::Texel, V::Vector, V::Coopmat})
    if (text == ops::matmulVariantName(v)) return {v};
  cli.fail("--variant must be auto, naive, tiled, texel, vector, coopmat or all, got '" + text +
           "'");
}

ops::MatmulTiling parseTiling(const Cli& cli) {
  const std::string text = cli.get("tiling");
  if (text == "auto") return {};
  uint32_t v[5] = {};
  char tail = 0;
  if (std::sscanf(text.c_str(), "%ux%ux%ux%ux%u%c", &v[0], &v[1], &v[2], &v[3], &v[4], &tail) != 5)
    cli.fail("--tiling must be auto or WXxWYxBKxTMxTN (five numbers), got '" + text + "'");
  return {v[0], v[1], v[2], v[3], v[4]};
}

// Normalised error of 4096 sampled elements of c (and every element's finiteness) against
// fp64 dot products: the check for products too large for the full CPU reference.
double sampledError(const std::vector<float>& a, const std::vector<float>& b,
                    const std::vector<float>& c, int64_t batch, int64_t m, int64_t n, int64_t k,
                    bool trans_a, bool trans_b) {
  for (float x : c)
    if (!std::isfinite(x)) return INFINITY;
  std::mt19937_64 rng(7);
  double worst = 0, scale = 1e-30;
  std::vector<std::pair<double, double>> pairs;  // (got, want)
  for (int s = 0; s < 4096; ++s) {
    const int64_t z = int64_t(rng() % uint64_t(batch)), i = int64_t(rng() % uint64_t(m)),
                  j = int64_t(rng() % uint64_t(n));
    const float* az = a.data() + z * m * k;
    const float* bz = b.data() + z * k * n;
    double sum = 0;
    for (int64_t q = 0; q < k; ++q)
      sum += double(trans_a ? az[q * m + i] : az[i * k + q]) *
             double(trans_b ? bz[j * k + q] : bz[q * n + j]);
    pairs.push_back({c[(z * m + i) * n + j], sum});
    scale = std::max(scale, std::fabs(sum));
  }
  for (auto [got, want] : pairs) worst = std::max(worst, std::fabs(got - want) / scale);
  return worst;
}

// One product of a training step and how many times a step runs it.
struct StepProduct {
  const char* what;
  int64_t m, n, k;
  bool trans_a, trans_b;
  int count;
};

// The 4-layer GPT of BENCHMARKS.md (width 128, MLP 512, 86 symbols, batch 12 x context 64 =
// 768 rows): per layer the qkv, attention-output, MLP-in and MLP-out products, and the head
// once; each forward product x·W (M rows, K in, N out) has two backward ones, dX = dY·Wᵀ
// (M x K over N) and dW = Xᵀ·dY (K x N over M). The first layer's dX is needed too (its
// input is a layer norm's output).
std::vector<StepProduct> gptStepProducts() {
  const int64_t rows = 12 * 64, width = 128, mlp = 4 * width, vocab = 86, layers = 4;
  struct Linear {
    const char* name;
    int64_t in, out;
    int count;
  };
  const Linear linears[] = {{"qkv", width, 3 * width, int(layers)},
                            {"proj", width, width, int(layers)},
                            {"fc", width, mlp, int(layers)},
                            {"out", mlp, width, int(layers)},
                            {"head", width, vocab, 1}};
  std::vector<StepProduct> products;
  for (const Linear& l : linears) {
    products.push_back({l.name, rows, l.out, l.in, false, false, l.count});
    products.push_back({l.name, rows, l.in, l.out, false, true, l.count});  // dX
    products.push_back({l.name, l.in, l.out, rows, true, false, l.count});  // dW
  }
  return products;
}

// --shapes gpt: each product of the step once (sampled check against fp64), then the step's
// matmul time as the sum of count x median.
int runStepProducts(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const std::vector<ops::MatmulVariant> variants = parseVariants(cli);
  if (variants.size() != 1) cli.fail("--shapes gpt takes one --variant, not all");
  const ops::MatmulVariant variant =
      variants[0] == ops::MatmulVariant::Auto ? ops::matmulVariantFor(context) : variants[0];
  const bool split = cli.get("split") == "auto";
  if (!split && cli.get("split") != "off")
    cli.fail("--split must be auto or off, got '" + cli.get("split") + "'");
  std::fprintf(stderr, "vkgrad-bench: the 4-layer GPT step's matmuls on %s\n",
               context.info().name.c_str());
  if (!options.json)
    std::printf("device   %s\nvariant  %s; median of %d dispatches after %d warm-up\n",
                deviceDescription(context).c_str(), ops::matmulVariantName(variant), options.iters,
                options.warmup);
  int exit_code = 0;
  double step_ms = 0, step_flop = 0;
  const char* kinds[] = {"forward", "dX", "dW"};
  const std::vector<StepProduct> products = gptStepProducts();
  for (size_t i = 0; i < products.size(); ++i) {
    const StepProduct& s = products[i];
    const ops::Shape a_shape = s.trans_a ? ops::Shape{s.k, s.m} : ops::Shape{s.m, s.k};
    const ops::Shape b_shape = s.trans_b ? ops::Shape{s.n, s.k} : ops::Shape{s.k, s.n};
    const int64_t scratch_numel = split ? ops::matmulScratch(s.m, s.n, s.k, 1) : 0;
    const vk::Buffer da = context.allocator().allocate(a_shape.numel() * sizeof(float)),
                     db = context.allocator().allocate(b_shape.numel() * sizeof(float)),
                     dc = context.allocator().allocate(s.m * s.n * sizeof(float)),
                     dscratch = context.allocator().allocate(std::max<int64_t>(scratch_numel, 1) *
                                                             sizeof(float));
    const std::vector<float> a = benchData(size_t(a_shape.numel()), -1.0f, 1.0f, 1 + uint32_t(i)),
                             b = benchData(size_t(b_shape.numel()), -1.0f, 1.0f, 101 + uint32_t(i));
    context.staging().upload(da, 0, a.data(), a.size() * sizeof(float));
    context.staging().upload(db, 0, b.data(), b.size() * sizeof(float));
    const ops::TensorView va = ops::view(da, a_shape), vb = ops::view(db, b_shape),
                          vc = ops::view(dc, {s.m, s.n}),
                          vscratch = ops::view(dscratch, {std::max<int64_t>(scratch_numel, 1)});
    ops::MatmulOptions o;
    o.trans_a = s.trans_a, o.trans_b = s.trans_b, o.variant = variant;
    if (scratch_numel > 0) o.scratch = &vscratch;
    const Stats t = stats(timeRuns(context, options.warmup, options.iters, [&](vk::Recorder& rec) {
                            ops::matmul(rec, va, vb, vc, o);
                          }).ms);
    std::vector<float> got(size_t(s.m * s.n));
    context.staging().download(dc, 0, got.data(), got.size() * sizeof(float));
    const double error = sampledError(a, b, got, 1, s.m, s.n, s.k, s.trans_a, s.trans_b);
    if (!(error <= kCheckTolerance)) exit_code = 1;
    const double flop = 2.0 * double(s.m) * double(s.n) * double(s.k);
    const double gflops = flop / (t.median * 1e6);
    const int64_t parts = variant == ops::MatmulVariant::Vector && scratch_numel > 0
                              ? ops::matmulSplitK(s.m, s.n, s.k, 1)
                              : 1;
    step_ms += s.count * t.median;
    step_flop += s.count * flop;
    const char* kind = kinds[i % 3];
    if (options.json) {
      printJsonLine({{"op", "matmul"},
                     {"preset", "gpt"},
                     {"product", s.what},
                     {"kind", kind},
                     {"m", s.m},
                     {"n", s.n},
                     {"k", s.k},
                     {"transA", s.trans_a},
                     {"transB", s.trans_b},
                     {"count", s.count},
                     {"split", parts},
                     {"variant", ops::matmulVariantName(variant)},
                     {"ms", t.median},
                     {"gflops", gflops},
                     {"error", error},
                     {"device", context.info().name}});
    } else {
      std::printf(
          "%-5s %-7s %4lldx%-4lldx%-4lld%s%s  x%d  %8.3f ms  %8.1f GFLOP/s%s  error %.2g%s\n",
          s.what, kind, (long long)s.m, (long long)s.n, (long long)s.k, s.trans_a ? " Aᵀ" : "   ",
          s.trans_b ? " Bᵀ" : "   ", s.count, t.median, gflops,
          parts > 1 ? (" split " + std::to_string(parts)).c_str() : "", error,
          error <= kCheckTolerance ? "" : "  WRONG");
    }
    std::fflush(stdout);
  }
  if (!options.json)
    std::printf(
        "step     %.3f ms of matmul per training step (sum of count x median), %.1f GFLOP/s\n",
        step_ms, step_flop / (step_ms * 1e6));
  return exit_code;
}

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  if (!cli.get("shapes").empty()) {
    if (cli.get("shapes") != "gpt")
      cli.fail("--shapes must be gpt, got '" + cli.get("shapes") + "'");
    return runStepProducts(cli, context, options);
  }
  const int64_t m = cli.getInt("m", 1, 1 << 20), n = cli.getInt("n", 1, 1 << 20),
                k = cli.getInt("k", 1, 1 << 20), batch = cli.getInt("batch", 1, 65535);
  const bool trans_a = cli.has("transA"), trans_b = cli.has("transB");
  const std::vector<ops::MatmulVariant> variants = parseVariants(cli);
  const ops::MatmulTiling tiling = parseTiling(cli);
  const std::string inputs = cli.get("inputs");
  if (inputs != "f32" && inputs != "f16")
    cli.fail("--inputs must be f32 or f16, got '" + inputs + "'");
  const bool half = inputs == "f16";
  const ops::DType in_dtype = half ? ops::DType::F16 : ops::DType::F32;
  const std::string split_text = cli.get("split");
  if (split_text != "auto" && split_text != "off")
    cli.fail("--split must be auto or off, got '" + split_text + "'");
  const int64_t scratch_numel = split_text == "auto" ? ops::matmulScratch(m, n, k, batch) : 0;
  const int64_t parts = scratch_numel > 0 ? ops::matmulSplitK(m, n, k, batch) : 1;
  const double flop = 2.0 * double(batch) * double(m) * double(n) * double(k);
  const bool check =
      options.check ||
      (!cli.has("sample") && double(batch) * double(m) * double(n) * double(k) <= kCheckLimit);
  const std::string device = deviceDescription(context);
  // Auto takes Coopmat for f16 operands (ops::matmul's rule), else the device's f32 choice.
  const ops::MatmulVariant automatic =
      half ? ops::MatmulVariant::Coopmat : ops::matmulVariantFor(context);

  // Stored shapes; a batch of 1 stays 2-D.
  const ops::Shape a_shape = batch > 1 ? ops::Shape{batch, trans_a ? k : m, trans_a ? m : k}
                                       : ops::Shape{trans_a ? k : m, trans_a ? m : k};
  const ops::Shape b_shape = batch > 1 ? ops::Shape{batch, trans_b ? n : k, trans_b ? k : n}
                                       : ops::Shape{trans_b ? n : k, trans_b ? k : n};
  const ops::Shape c_shape = batch > 1 ? ops::Shape{batch, m, n} : ops::Shape{m, n};
  std::fprintf(stderr, "vkgrad-bench: matmul %s%s x %s%s on %s\n", a_shape.str().c_str(),
               trans_a ? "^T" : "", b_shape.str().c_str(), trans_b ? "^T" : "",
               context.info().name.c_str());
  if (!options.json) {
    std::printf("device   %s\n", device.c_str());
    std::printf("auto     %s on this device\n", ops::matmulVariantName(automatic));
    std::printf(
        "work     2*B*M*N*K = %.3f GFLOP; A, B and C hold %.1f MB\n", flop * 1e-9,
        1e-6 * double(batch * ((m * k + k * n) * int64_t(ops::dtypeBytes(in_dtype)) + 4 * m * n)));
    std::printf("timing   median of %d dispatches after %d warm-up, GPU timestamps\n",
                options.iters, options.warmup);
  }

  // Device buffers first: an impossible size fails here with OutOfMemoryError, before the
  // host arrays of the same size are filled.
  const int64_t a_numel = batch * m * k, b_numel = batch * k * n, c_numel = batch * m * n;
  const vk::Buffer da = context.allocator().allocate(a_numel * ops::dtypeBytes(in_dtype)),
                   db = context.allocator().allocate(b_numel * ops::dtypeBytes(in_dtype)),
                   dc = context.allocator().allocate(c_numel * sizeof(float));
  const vk::Buffer dscratch =
      context.allocator().allocate(std::max<int64_t>(scratch_numel, 1) * sizeof(float));
  const ops::TensorView vscratch = ops::view(dscratch, {std::max<int64_t>(scratch_numel, 1)});
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a(a_numel), b(b_numel);
  for (float& x : a) x = uniform(rng);
  for (float& x : b) x = uniform(rng);
  if (half) {
    // Stored as halves, and checked against the values the kernel reads.
    a = ops::ref::roundToHalf(a), b = ops::ref::roundToHalf(b);
    const std::vector<uint16_t> ah = ops::ref::toHalf(a), bh = ops::ref::toHalf(b);
    context.staging().upload(da, 0, ah.data(), ah.size() * 2);
    context.staging().upload(db, 0, bh.data(), bh.size() * 2);
  } else {
    context.staging().upload(da, 0, a.data(), a.size() * sizeof(float));
    context.staging().upload(db, 0, b.data(), b.size() * sizeof(float));
  }
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
    // --variant all leaves out what the device cannot run; asked for by name, it fails.
    if (variant == ops::MatmulVariant::Coopmat && !context.info().coopmat &&
        cli.get("variant") == "all") {
      std::fprintf(stderr, "vkgrad-bench: skipping coopmat: %s has no cooperative matrices\n",
                   context.info().name.c_str());
      continue;
    }
    if (half && variant != ops::MatmulVariant::Coopmat) {
      std::fprintf(stderr, "vkgrad-bench: skipping %s: it reads f32 only\n",
                   ops::matmulVariantName(variant));
      continue;
    }
    // Poisoned, so a kernel that skips outputs fails the check.
    context.staging().upload(dc, 0, std::vector<float>(c_numel, NAN).data(),
                             c_numel * sizeof(float));
    std::fprintf(stderr, "vkgrad-bench: %s: %d warm-up + %d timed dispatches\n", name,
                 options.warmup, options.iters);
    const ops::TensorView va = ops::view(da, a_shape, 0, in_dtype),
                          vb = ops::view(db, b_shape, 0, in_dtype), vc = ops::view(dc, c_shape);
    ops::MatmulOptions matmul_options;
    matmul_options.trans_a = trans_a, matmul_options.trans_b = trans_b;
    matmul_options.variant = variant;
    matmul_options.tiling = tiling;
    if (scratch_numel > 0) matmul_options.scratch = &vscratch;
    const bool split = variant == ops::MatmulVariant::Vector && parts > 1;
    const std::string tile_text =
        variant == ops::MatmulVariant::Vector
            ? ops::matmulTilingText(tiling.empty()
                                        ? ops::matmulTilingFor(context, m, n, split ? parts : batch)
                                        : tiling) +
                  (split ? " split " + std::to_string(parts) : "")
        : variant == ops::MatmulVariant::Coopmat
            ? ops::matmulTilingText(
                  tiling.empty() ? ops::matmulCoopmatTilingFor(context, m, n, batch) : tiling) +
                  (half ? " f16 inputs" : " f32 inputs")
            : std::string();
    const Timing timing = timeRuns(context, options.warmup, options.iters, [&](vk::Recorder& rec) {
      ops::matmul(rec, va, vb, vc, matmul_options);
    });
    const Stats t = stats(timing.ms);
    const double gflops = flop / (t.median * 1e6);

    double error = NAN;
    if (!check) {
      std::vector<float> got(c_numel);
      context.staging().download(dc, 0, got.data(), got.size() * sizeof(float));
      error = sampledError(a, b, got, batch, m, n, k, trans_a, trans_b);
      if (!(error <= kCheckTolerance)) {
        std::fprintf(stderr, "vkgrad-bench: matmul %s is WRONG: sampled error %g > %g\n", name,
                     error, kCheckTolerance);
        exit_code = 1;
      }
    } else {
      if (want.empty()) {
        std::fprintf(stderr, "vkgrad-bench: computing the fp64 CPU reference...\n");
        want.resize(c_numel);
        for (int64_t z = 0; z < batch; ++z) {
          const float* az = a.data() + z * m * k;
          const float* bz = b.data() + z * k * n;
          const std::vector<float> at = trans_a ? transposedCopy(az, k, m) : std::vector<float>();
          const std::vector<float> bt = trans_b ? transposedCopy(bz, n, k) : std::vector<float>();
          ops::ref::matmul(trans_a ? at.data() : az, trans_b ? bt.data() : bz,
                           want.data() + z * m * n, m, n, k);
        }
      }
      std::vector<float> got(c_numel);
      context.staging().download(dc, 0, got.data(), got.size() * sizeof(float));
      error = normalisedError(got, want);
      if (!(error <= kCheckTolerance)) {
        std::fprintf(stderr, "vkgrad-bench: matmul %s is WRONG: normalised error %g > %g\n", name,
                     error, kCheckTolerance);
        exit_code = 1;
      }
    }

    if (options.json) {
      printJsonLine(
          {{"op", "matmul"},
           {"m", m},
           {"n", n},
           {"k", k},
           {"batch", batch},
           {"transA", trans_a},
           {"transB", trans_b},
           {"variant", name},
           {"tiling", tile_text},
           {"inputs", inputs},
           {"split", split ? parts : 1},
           {"requested", ops::matmulVariantName(requested)},
           {"ms", t.median},
           {"min_ms", t.min},
           {"max_ms", t.max},
           {"gflops", gflops},
           {"iters", options.iters},
           {"warmup", options.warmup},
           {"cpu_ms", timing.cpu_ms},
           {"checked", true},
           {"check", check ? "all" : "sampled"},
           {"error", error},
           {"device", context.info().name},
           {"driver", context.info().driver_name + " (" + context.info().driver_info + ")"}});
    } else {
      char verdict[80];
      std::snprintf(verdict, sizeof(verdict), "%s %.2g%s", check ? "error" : "sampled error", error,
                    error <= kCheckTolerance ? "" : "  WRONG");
      std::printf(
          "matmul %lldx%lldx%lld%s%s%s  %-6s%s%s  %9.3f ms  %8.2f GFLOP/s  (min %.3f, max %.3f; "
          "cpu %.3f ms)  %s\n",
          (long long)m, (long long)n, (long long)k, trans_a ? " transA" : "",
          trans_b ? " transB" : "", batch > 1 ? (" batch " + std::to_string(batch)).c_str() : "",
          name, tile_text.empty() ? "" : (" " + tile_text).c_str(),
          requested == ops::MatmulVariant::Auto ? " (auto)" : "", t.median, gflops, t.min, t.max,
          timing.cpu_ms, verdict);
    }
    std::fflush(stdout);
  }
  return exit_code;
}

}  // namespace

const BenchOp& matmulBench() {
  static const BenchOp op{"matmul", "C = op(A)·op(B), (B,M,K) x (B,K,N), fp32", declare, run};
  return op;
}

}  // namespace vkgrad::apps

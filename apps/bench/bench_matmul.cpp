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
  cli.option("variant",
             "matmul: auto, naive, tiled, texel, vector, coopmat, coopmat-emulated (the coopmat "
             "kernel on plain-GLSL fragments) or all",
             "auto");
  cli.option("tiling",
             "matmul: the vector or coopmat variant's tile, WXxWYxBKxTMxTN (e.g. 16x16x16x8x8; "
             "for coopmat subgroups and 16x16 fragments, e.g. 2x2x32x4x4)",
             "auto");
  cli.option("inputs",
             "matmul: how A and B are stored: f32, f16 or bf16 (rounded on the host, and the "
             "check uses the rounded values; the coopmat variant reads f32 and f16)",
             "f32");
  cli.option("output", "matmul: how C is stored: f32, f16 or bf16 (the check allows its rounding)",
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
  for (V v : {V::Auto, V::Naive, V::Tiled, V::Texel, V::Vector, V::Coopmat, V::CoopmatEmulated})
    if (text == ops::matmulVariantName(v)) return {v};
  cli.fail(
      "--variant must be auto, naive, tiled, texel, vector, coopmat, coopmat-emulated or "
      "all, got '" +
      text + "'");
}

ops::MatmulTiling parseTiling(const Cli& cli) {
  const std::string text = cli.get("tiling");
  if (text == "auto") return {};
  uint32_t v[5] = {};
  char tail = 0;
  if (std::sscanf(text.c_str(), "%ux%ux%ux%ux%u%c", &v[0], &v[1], &v[2], &v[3], &v[4], &tail) != 5)
    cli.fail("--tiling must be auto or WXxWYxBKxTMxTN (five numbers), got '" + text + "'");
  // A zero would read as "no tiling" and run the default one without a word.
  for (const uint32_t x : v)
    if (x == 0 || x > 1024) cli.fail("--tiling's numbers must be in [1, 1024], got '" + text + "'");
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

// --split: whether products take the split-K scratch where ops::matmulSplitK says.
bool parseSplit(const Cli& cli) {
  return parseChoice(cli, "split", {"auto", "off"}) == "auto";
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

// One step product timed: the median, its sampled error and the parts split-K cut K into.
struct StepResult {
  Stats t;
  double error = 0;
  int64_t parts = 1;
};

// Times product `index` of the step on fresh random operands (seeded by the index).
StepResult timeStepProduct(vk::Context& context, const BenchOptions& options, const StepProduct& s,
                           size_t index, ops::MatmulVariant variant, bool split) {
  const ops::Shape a_shape = s.trans_a ? ops::Shape{s.k, s.m} : ops::Shape{s.m, s.k};
  const ops::Shape b_shape = s.trans_b ? ops::Shape{s.n, s.k} : ops::Shape{s.k, s.n};
  const int64_t scratch_numel = split ? ops::matmulScratch(s.m, s.n, s.k, 1) : 0;
  const vk::Buffer da = context.allocator().allocate(a_shape.numel() * sizeof(float)),
                   db = context.allocator().allocate(b_shape.numel() * sizeof(float)),
                   dc = context.allocator().allocate(s.m * s.n * sizeof(float)),
                   dscratch = context.allocator().allocate(std::max<int64_t>(scratch_numel, 1) *
                                                           sizeof(float));
  const uint32_t seed = uint32_t(index);
  const std::vector<float> a = benchData(size_t(a_shape.numel()), -1.0f, 1.0f, 1 + seed),
                           b = benchData(size_t(b_shape.numel()), -1.0f, 1.0f, 101 + seed);
  context.staging().upload(da, 0, a.data(), a.size() * sizeof(float));
  context.staging().upload(db, 0, b.data(), b.size() * sizeof(float));
  const ops::TensorView va = ops::view(da, a_shape), vb = ops::view(db, b_shape),
                        vc = ops::view(dc, {s.m, s.n}),
                        vscratch = ops::view(dscratch, {std::max<int64_t>(scratch_numel, 1)});
  ops::MatmulOptions o;
  o.trans_a = s.trans_a, o.trans_b = s.trans_b, o.variant = variant;
  if (scratch_numel > 0) o.scratch = &vscratch;
  StepResult r;
  r.t = stats(timeRuns(context, options.warmup, options.iters, [&](vk::Recorder& rec) {
                ops::matmul(rec, va, vb, vc, o);
              }).ms);
  std::vector<float> got(size_t(s.m * s.n));
  context.staging().download(dc, 0, got.data(), got.size() * sizeof(float));
  r.error = sampledError(a, b, got, 1, s.m, s.n, s.k, s.trans_a, s.trans_b);
  if (variant == ops::MatmulVariant::Vector && scratch_numel > 0)
    r.parts = ops::matmulSplitK(s.m, s.n, s.k, 1);
  return r;
}

void printStepProduct(const vk::Context& context, const BenchOptions& options, const StepProduct& s,
                      const char* kind, ops::MatmulVariant variant, const StepResult& r) {
  const double gflops = 2.0 * double(s.m) * double(s.n) * double(s.k) / (r.t.median * 1e6);
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
                   {"split", r.parts},
                   {"variant", ops::matmulVariantName(variant)},
                   {"ms", r.t.median},
                   {"gflops", gflops},
                   {"error", r.error},
                   {"device", context.info().name}});
  } else {
    std::printf("%-5s %-7s %4lldx%-4lldx%-4lld%s%s  x%d  %8.3f ms  %8.1f GFLOP/s%s  error %.2g%s\n",
                s.what, kind, (long long)s.m, (long long)s.n, (long long)s.k,
                s.trans_a ? " Aᵀ" : "   ", s.trans_b ? " Bᵀ" : "   ", s.count, r.t.median, gflops,
                r.parts > 1 ? (" split " + std::to_string(r.parts)).c_str() : "", r.error,
                r.error <= kCheckTolerance ? "" : "  WRONG");
  }
  std::fflush(stdout);
}

// --shapes gpt: each product of the step once (sampled check against fp64), then the step's
// matmul time as the sum of count x median.
int runStepProducts(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const std::vector<ops::MatmulVariant> variants = parseVariants(cli);
  if (variants.size() != 1) cli.fail("--shapes gpt takes one --variant, not all");
  const ops::MatmulVariant variant =
      variants[0] == ops::MatmulVariant::Auto ? ops::matmulVariantFor(context) : variants[0];
  const bool split = parseSplit(cli);
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
    const StepResult r = timeStepProduct(context, options, s, i, variant, split);
    if (!(r.error <= kCheckTolerance)) exit_code = 1;
    step_ms += s.count * r.t.median;
    step_flop += s.count * 2.0 * double(s.m) * double(s.n) * double(s.k);
    printStepProduct(context, options, s, kinds[i % 3], variant, r);
  }
  if (!options.json)
    std::printf(
        "step     %.3f ms of matmul per training step (sum of count x median), %.1f GFLOP/s\n",
        step_ms, step_flop / (step_ms * 1e6));
  return exit_code;
}

// One product as the options ask for it: C (B,M,N) = op(A)·op(B), timed per variant.
struct Problem {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  std::vector<ops::MatmulVariant> variants;
  ops::MatmulTiling tiling;   // empty: the library's choice per variant
  std::string inputs;         // "f32", "f16" or "bf16": how A and B are stored
  std::string output;         // how C is stored, likewise
  bool half = false;          // inputs == "f16"
  int64_t scratch_numel = 0;  // split-K scratch floats; 0: --split off, or no split
  int64_t parts = 1;          // the parts that scratch splits K into
  bool full_check = false;    // every element against the CPU reference, else sampled
  bool all_variants = false;  // --variant all: leave out what the device cannot run

  ops::DType inDtype() const { return dtypeNamed(inputs); }
  ops::DType outDtype() const { return dtypeNamed(output); }
  static ops::DType dtypeNamed(const std::string& name) {
    return name == "f16" ? ops::DType::F16 : name == "bf16" ? ops::DType::BF16 : ops::DType::F32;
  }
  // The check's bound: fp32 sums' and the inputs' rounding, and C's own rounding.
  double tolerance() const {
    return std::max(kCheckTolerance, 2.0 * ops::ref::unitRoundoff(outDtype()));
  }
  double flop() const { return 2.0 * double(batch) * double(m) * double(n) * double(k); }
  // Stored shapes; a batch of 1 stays 2-D.
  ops::Shape aShape() const { return shape(trans_a ? k : m, trans_a ? m : k); }
  ops::Shape bShape() const { return shape(trans_b ? n : k, trans_b ? k : n); }
  ops::Shape cShape() const { return shape(m, n); }
  ops::Shape shape(int64_t rows, int64_t cols) const {
    return batch > 1 ? ops::Shape{batch, rows, cols} : ops::Shape{rows, cols};
  }
};

Problem parseProblem(const Cli& cli, const BenchOptions& options) {
  Problem p;
  p.m = cli.getInt("m", 1, 1 << 20), p.n = cli.getInt("n", 1, 1 << 20);
  p.k = cli.getInt("k", 1, 1 << 20), p.batch = cli.getInt("batch", 1, 65535);
  p.trans_a = cli.has("transA"), p.trans_b = cli.has("transB");
  p.variants = parseVariants(cli);
  p.all_variants = cli.get("variant") == "all";
  p.tiling = parseTiling(cli);
  p.inputs = parseChoice(cli, "inputs", {"f32", "f16", "bf16"});
  p.output = parseChoice(cli, "output", {"f32", "f16", "bf16"});
  p.half = p.inputs == "f16";
  p.scratch_numel = parseSplit(cli) ? ops::matmulScratch(p.m, p.n, p.k, p.batch) : 0;
  p.parts = p.scratch_numel > 0 ? ops::matmulSplitK(p.m, p.n, p.k, p.batch) : 1;
  const double volume = double(p.batch) * double(p.m) * double(p.n) * double(p.k);
  p.full_check = options.check || (!cli.has("sample") && volume <= kCheckLimit);
  return p;
}

void printHeader(const vk::Context& context, const BenchOptions& options, const Problem& p,
                 ops::MatmulVariant automatic) {
  std::fprintf(stderr, "vkgrad-bench: matmul %s%s x %s%s on %s\n", p.aShape().str().c_str(),
               p.trans_a ? "^T" : "", p.bShape().str().c_str(), p.trans_b ? "^T" : "",
               context.info().name.c_str());
  if (options.json) return;
  std::printf("device   %s\n", deviceDescription(context).c_str());
  std::printf("auto     %s on this device\n", ops::matmulVariantName(automatic));
  std::printf(
      "work     2*B*M*N*K = %.3f GFLOP; A, B and C hold %.1f MB\n", p.flop() * 1e-9,
      1e-6 * double(p.batch * ((p.m * p.k + p.k * p.n) * int64_t(ops::dtypeBytes(p.inDtype())) +
                               p.m * p.n * int64_t(ops::dtypeBytes(p.outDtype())))));
  std::printf("timing   median of %d dispatches after %d warm-up, GPU timestamps\n", options.iters,
              options.warmup);
}

// The device buffers and the host values A and B hold (rounded to --inputs' format).
struct Operands {
  vk::Buffer da, db, dc, dscratch;
  std::vector<float> a, b;
  std::vector<float> want;  // the fp64 CPU reference of C, computed when first needed
};

Operands makeOperands(vk::Context& context, const Problem& p) {
  // Device buffers first: an impossible size fails here with OutOfMemoryError, before the
  // host arrays of the same size are filled.
  const int64_t a_numel = p.batch * p.m * p.k, b_numel = p.batch * p.k * p.n,
                c_numel = p.batch * p.m * p.n;
  Operands o;
  o.da = context.allocator().allocate(a_numel * ops::dtypeBytes(p.inDtype()));
  o.db = context.allocator().allocate(b_numel * ops::dtypeBytes(p.inDtype()));
  o.dc = context.allocator().allocate(c_numel * ops::dtypeBytes(p.outDtype()));
  o.dscratch = context.allocator().allocate(std::max<int64_t>(p.scratch_numel, 1) * sizeof(float));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  o.a.resize(a_numel), o.b.resize(b_numel);
  for (float& x : o.a) x = uniform(rng);
  for (float& x : o.b) x = uniform(rng);
  // Stored in their format, and checked against the values the kernel reads.
  o.a = ops::ref::roundTo(p.inDtype(), std::move(o.a));
  o.b = ops::ref::roundTo(p.inDtype(), std::move(o.b));
  const std::vector<uint8_t> ab = ops::ref::encode(p.inDtype(), o.a),
                             bb = ops::ref::encode(p.inDtype(), o.b);
  context.staging().upload(o.da, 0, ab.data(), ab.size());
  context.staging().upload(o.db, 0, bb.data(), bb.size());
  return o;
}

// Whether the device runs `variant` on these inputs; prints why not to stderr when it does not.
bool runnable(const vk::Context& context, const Problem& p, ops::MatmulVariant variant) {
  if (variant == ops::MatmulVariant::Texel && !context.info().subgroup_shuffle) {
    std::fprintf(stderr, "vkgrad-bench: skipping texel: %s has no subgroup shuffle\n",
                 context.info().name.c_str());
    return false;
  }
  // --variant all leaves out what the device cannot run; asked for by name, it fails.
  if (variant == ops::MatmulVariant::Coopmat && !context.info().coopmat && p.all_variants) {
    std::fprintf(stderr, "vkgrad-bench: skipping coopmat: %s has no cooperative matrices\n",
                 context.info().name.c_str());
    return false;
  }
  if (variant == ops::MatmulVariant::Coopmat && p.inDtype() == ops::DType::BF16) {
    std::fprintf(stderr, "vkgrad-bench: skipping coopmat: it reads f32 and f16 inputs only\n");
    return false;
  }
  return true;
}

// The tile the variant runs with, as the results name it ("" for the untiled variants).
std::string tileText(const vk::Context& context, const Problem& p, ops::MatmulVariant variant) {
  const bool split = p.parts > 1;
  if (variant == ops::MatmulVariant::Vector)
    return ops::matmulTilingText(
               p.tiling.empty() ? ops::matmulTilingFor(context, p.m, p.n, split ? p.parts : p.batch,
                                                       p.inputs != "f32" || p.output != "f32")
                                : p.tiling) +
           (split ? " split " + std::to_string(p.parts) : "");
  if (variant == ops::MatmulVariant::Coopmat || variant == ops::MatmulVariant::CoopmatEmulated)
    return ops::matmulTilingText(p.tiling.empty()
                                     ? ops::matmulCoopmatTilingFor(context, p.m, p.n, p.batch)
                                     : p.tiling) +
           " " + p.inputs + " inputs";
  return "";
}

// The normalised error of C as the kernel left it: every element against the fp64 CPU
// reference (computed on first use), or the sampled check.
double resultError(vk::Context& context, const Problem& p, Operands& o) {
  const int64_t m = p.m, n = p.n, k = p.k;
  if (p.full_check && o.want.empty()) {
    std::fprintf(stderr, "vkgrad-bench: computing the fp64 CPU reference...\n");
    o.want.resize(p.batch * m * n);
    for (int64_t z = 0; z < p.batch; ++z) {
      const float* az = o.a.data() + z * m * k;
      const float* bz = o.b.data() + z * k * n;
      const std::vector<float> at = p.trans_a ? transposedCopy(az, k, m) : std::vector<float>();
      const std::vector<float> bt = p.trans_b ? transposedCopy(bz, n, k) : std::vector<float>();
      ops::ref::matmul(p.trans_a ? at.data() : az, p.trans_b ? bt.data() : bz,
                       o.want.data() + z * m * n, m, n, k);
    }
  }
  std::vector<uint8_t> bytes(size_t(p.batch * m * n) * ops::dtypeBytes(p.outDtype()));
  context.staging().download(o.dc, 0, bytes.data(), bytes.size());
  const std::vector<float> got = ops::ref::decode(p.outDtype(), bytes);
  return p.full_check ? normalisedError(got, o.want)
                      : sampledError(o.a, o.b, got, p.batch, m, n, k, p.trans_a, p.trans_b);
}

// One variant's result line.
struct Result {
  ops::MatmulVariant variant, requested;
  std::string tile_text;
  Timing timing;
  double error;
};

void printResult(const vk::Context& context, const BenchOptions& options, const Problem& p,
                 const Result& r) {
  const Stats t = stats(r.timing.ms);
  const double gflops = p.flop() / (t.median * 1e6);
  const char* name = ops::matmulVariantName(r.variant);
  const bool split = r.variant == ops::MatmulVariant::Vector && p.parts > 1;
  if (options.json) {
    printJsonLine({{"op", "matmul"},
                   {"m", p.m},
                   {"n", p.n},
                   {"k", p.k},
                   {"batch", p.batch},
                   {"transA", p.trans_a},
                   {"transB", p.trans_b},
                   {"variant", name},
                   {"tiling", r.tile_text},
                   {"inputs", p.inputs},
                   {"output", p.output},
                   {"split", split ? p.parts : 1},
                   {"requested", ops::matmulVariantName(r.requested)},
                   {"ms", t.median},
                   {"min_ms", t.min},
                   {"max_ms", t.max},
                   {"gflops", gflops},
                   {"iters", options.iters},
                   {"warmup", options.warmup},
                   {"cpu_ms", r.timing.cpu_ms},
                   {"checked", true},
                   {"check", p.full_check ? "all" : "sampled"},
                   {"error", r.error},
                   {"device", context.info().name},
                   {"driver", driverDescription(context)}});
  } else {
    char verdict[80];
    std::snprintf(verdict, sizeof(verdict), "%s %.2g%s", p.full_check ? "error" : "sampled error",
                  r.error, r.error <= p.tolerance() ? "" : "  WRONG");
    std::printf(
        "matmul %lldx%lldx%lld%s%s%s  %-6s%s%s  %9.3f ms  %8.2f GFLOP/s  (min %.3f, max %.3f; "
        "cpu %.3f ms)  %s\n",
        (long long)p.m, (long long)p.n, (long long)p.k, p.trans_a ? " transA" : "",
        p.trans_b ? " transB" : "",
        p.batch > 1 ? (" batch " + std::to_string(p.batch)).c_str() : "", name,
        r.tile_text.empty() ? "" : (" " + r.tile_text).c_str(),
        r.requested == ops::MatmulVariant::Auto ? " (auto)" : "", t.median, gflops, t.min, t.max,
        r.timing.cpu_ms, verdict);
  }
  std::fflush(stdout);
}

// Times and checks one variant and prints its result; returns 1 when the result is wrong.
int runVariant(vk::Context& context, const BenchOptions& options, const Problem& p, Operands& o,
               ops::MatmulVariant variant, ops::MatmulVariant requested) {
  const char* name = ops::matmulVariantName(variant);
  const int64_t c_numel = p.batch * p.m * p.n;
  // Poisoned, so a kernel that skips outputs fails the check.
  const std::vector<uint8_t> poison =
      ops::ref::encode(p.outDtype(), std::vector<float>(size_t(c_numel), NAN));
  context.staging().upload(o.dc, 0, poison.data(), poison.size());
  const ops::TensorView va = ops::view(o.da, p.aShape(), 0, p.inDtype()),
                        vb = ops::view(o.db, p.bShape(), 0, p.inDtype()),
                        vc = ops::view(o.dc, p.cShape(), 0, p.outDtype()),
                        vscratch = ops::view(o.dscratch, {std::max<int64_t>(p.scratch_numel, 1)});
  ops::MatmulOptions matmul_options;
  matmul_options.trans_a = p.trans_a, matmul_options.trans_b = p.trans_b;
  matmul_options.variant = variant;
  matmul_options.tiling = p.tiling;
  if (p.scratch_numel > 0) matmul_options.scratch = &vscratch;
  const Timing timing = timeDispatches(context, options, name, [&](vk::Recorder& rec) {
    ops::matmul(rec, va, vb, vc, matmul_options);
  });
  const double error = resultError(context, p, o);
  const int wrong = failIfWrong("matmul " + std::string(name), error, p.tolerance(),
                                p.full_check ? "normalised error" : "sampled error");
  printResult(context, options, p,
              {variant, requested, tileText(context, p, variant), timing, error});
  return wrong;
}

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  if (!cli.get("shapes").empty()) {
    parseChoice(cli, "shapes", {"gpt"});
    return runStepProducts(cli, context, options);
  }
  const Problem p = parseProblem(cli, options);
  // Auto takes Coopmat for f16 operands where the device has it (ops::matmul's rule), else
  // the device's choice.
  const ops::MatmulVariant automatic = p.half && context.info().coopmat
                                           ? ops::MatmulVariant::Coopmat
                                           : ops::matmulVariantFor(context);
  printHeader(context, options, p, automatic);
  Operands operands = makeOperands(context, p);
  int exit_code = 0;
  for (ops::MatmulVariant requested : p.variants) {
    const ops::MatmulVariant variant =
        requested == ops::MatmulVariant::Auto ? automatic : requested;
    if (!runnable(context, p, variant)) continue;
    exit_code |= runVariant(context, options, p, operands, variant, requested);
  }
  return exit_code;
}

}  // namespace

const BenchOp& matmulBench() {
  static const BenchOp op{"matmul", "C = op(A)·op(B), (B,M,K) x (B,K,N), fp32", declare, run};
  return op;
}

}  // namespace vkgrad::apps

// vkgrad-bench softmax and layernorm: row-wise kernels over (rows, cols) floats, in GB/s and
// as a fraction of the copy kernel's bandwidth over the same number of floats. Bytes moved:
// x read once and y written once (the kernels read x twice; the second read is expected to
// hit the cache), plus gamma, beta, mean and rstd for layernorm. layernorm --backward times
// the backward instead (dx, dgamma and dbeta from the saved mean and rstd, --params choosing
// how the parameter sums run): x and dy read once, dx written once, plus the vectors.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench.h"
#include "vkgrad/ops/layer_norm.h"
#include "vkgrad/ops/reference/layer_norm.h"
#include "vkgrad/ops/reference/softmax.h"
#include "vkgrad/ops/softmax.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

void declare(Cli& cli) {
  cli.option("rows", "rows", "4096");
  cli.option("cols", "elements per row (the normalised axis)", "4096");
  cli.option("variant",
             "auto, workgroup_storage, workgroup_texel, subgroup_storage, subgroup_texel or all",
             "auto");
}

void declareLayerNorm(Cli& cli) {
  declare(cli);
  cli.flag("backward", "time the backward (dx, dgamma, dbeta) instead of the forward");
  cli.option("params", "with --backward: auto, columns, blocked, with_dx or all", "auto");
}

// The variants --variant names: one of them, or every one but Auto for "all".
template <typename Variant, size_t N>
std::vector<Variant> parseVariants(const Cli& cli, const Variant (&all)[N],
                                   const char* (*name)(Variant), const char* option = "variant") {
  const std::string text = cli.get(option);
  if (text == "all") return std::vector<Variant>(std::begin(all) + 1, std::end(all));
  std::string names;
  for (Variant v : all) {
    if (text == name(v)) return {v};
    names += std::string(names.empty() ? "" : ", ") + name(v);
  }
  cli.fail("--" + std::string(option) + " must be " + names + " or all, got '" + text + "'");
}

struct Problem {
  int64_t rows, cols;
  std::vector<float> x;
  vk::Buffer dx, dy;
};

Problem makeProblem(const Cli& cli, vk::Context& context, const char* op) {
  Problem p{cli.getInt("rows", 1, int64_t(1) << 30), cli.getInt("cols", 1, int64_t(1) << 30)};
  if (p.rows * p.cols > (int64_t(1) << 30)) cli.fail("rows * cols must be at most 2^30");
  std::fprintf(stderr, "vkgrad-bench: %s (%lld,%lld) on %s\n", op, (long long)p.rows,
               (long long)p.cols, context.info().name.c_str());
  p.dx = context.allocator().allocate(uint64_t(p.rows * p.cols) * 4);
  p.dy = context.allocator().allocate(uint64_t(p.rows * p.cols) * 4);
  p.x = benchData(size_t(p.rows * p.cols), -4.0f, 4.0f, 1);
  context.staging().upload(p.dx, 0, p.x.data(), p.x.size() * 4);
  return p;
}

std::vector<float> download(vk::Context& context, const vk::Buffer& buffer, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  context.staging().download(buffer, 0, out.data(), out.size() * 4);
  return out;
}

int runSoftmax(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  using V = ops::SoftmaxVariant;
  const V all[] = {V::Auto, V::WorkgroupStorage, V::WorkgroupTexel, V::SubgroupStorage,
                   V::SubgroupTexel};
  const std::vector<V> variants = parseVariants(cli, all, ops::softmaxVariantName);
  Problem p = makeProblem(cli, context, "softmax");
  const int64_t n = p.rows * p.cols;
  const ops::TensorView x = ops::view(p.dx, {p.rows, p.cols}),
                        y = ops::view(p.dy, {p.rows, p.cols});
  std::vector<float> want(static_cast<size_t>(n));
  ops::ref::softmax(p.x.data(), want.data(), p.rows, p.cols);
  const double copy_gbps = copyGbps(context, options, n);
  int exit_code = 0;
  for (V requested : variants) {
    const V variant = requested == V::Auto ? ops::softmaxVariantFor(context, x) : requested;
    std::fprintf(stderr, "vkgrad-bench: softmax %s: %d warm-up + %d timed dispatches\n",
                 ops::softmaxVariantName(variant), options.warmup, options.iters);
    const Timing timing = timeRuns(context, options.warmup, options.iters,
                                   [&](vk::Recorder& rec) { ops::softmax(rec, x, y, variant); });
    BandwidthResult result{"softmax",
                           ops::softmaxVariantName(variant),
                           ops::softmaxVariantName(requested),
                           {{"rows", p.rows}, {"cols", p.cols}},
                           8.0 * double(n),
                           timing};
    result.error = normalisedError(download(context, p.dy, n), want);
    result.tolerance = 1e-5;
    exit_code |= reportBandwidth(context, options, result, copy_gbps);
  }
  return exit_code;
}

int runLayerNorm(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  using V = ops::LayerNormVariant;
  const V all[] = {V::Auto, V::WorkgroupStorage, V::WorkgroupTexel, V::SubgroupStorage,
                   V::SubgroupTexel};
  const std::vector<V> variants = parseVariants(cli, all, ops::layerNormVariantName);
  Problem p = makeProblem(cli, context, "layernorm");
  const int64_t rows = p.rows, cols = p.cols, n = rows * cols;
  const auto gamma = benchData(size_t(cols), 0.5f, 1.5f, 2),
             beta = benchData(size_t(cols), -1, 1, 3);
  const vk::Buffer dgamma = context.allocator().allocate(uint64_t(cols) * 4),
                   dbeta = context.allocator().allocate(uint64_t(cols) * 4),
                   dmean = context.allocator().allocate(uint64_t(rows) * 4),
                   drstd = context.allocator().allocate(uint64_t(rows) * 4);
  context.staging().upload(dgamma, 0, gamma.data(), gamma.size() * 4);
  context.staging().upload(dbeta, 0, beta.data(), beta.size() * 4);
  const ops::TensorView x = ops::view(p.dx, {rows, cols}), y = ops::view(p.dy, {rows, cols}),
                        g = ops::view(dgamma, {cols}), b = ops::view(dbeta, {cols}),
                        mean = ops::view(dmean, {rows}), rstd = ops::view(drstd, {rows});
  std::vector<float> want(static_cast<size_t>(n)), want_mean(static_cast<size_t>(rows)),
      want_rstd(static_cast<size_t>(rows));
  ops::ref::layerNorm(p.x.data(), gamma.data(), beta.data(), want.data(), want_mean.data(),
                      want_rstd.data(), rows, cols, 1e-5f);
  const double copy_gbps = copyGbps(context, options, n);
  int exit_code = 0;
  // Times one variant and reports it: the bytes it moves and its largest normalised error
  // over the outputs `errors` reads back after the runs.
  auto measure = [&](const char* op, const std::string& variant, V requested, double bytes,
                     const std::function<void(vk::Recorder&)>& record,
                     const std::function<double()>& errors) {
    std::fprintf(stderr, "vkgrad-bench: %s %s: %d warm-up + %d timed dispatches\n", op,
                 variant.c_str(), options.warmup, options.iters);
    BandwidthResult result{op,
                           variant,
                           ops::layerNormVariantName(requested),
                           {{"rows", rows}, {"cols", cols}},
                           bytes,
                           timeRuns(context, options.warmup, options.iters, record)};
    result.error = errors();
    result.tolerance = 1e-5;
    exit_code |= reportBandwidth(context, options, result, copy_gbps);
  };
  if (cli.has("backward")) {
    using P = ops::LayerNormParamsVariant;
    const P all_params[] = {P::Auto, P::Columns, P::Blocked, P::WithDx};
    const std::vector<P> params =
        parseVariants(cli, all_params, ops::layerNormParamsVariantName, "params");
    // dy, and the saved statistics the reference forward gives.
    const std::vector<float> dy_host = benchData(size_t(n), -1.0f, 1.0f, 4);
    const vk::Buffer ddy = context.allocator().allocate(uint64_t(n) * 4),
                     ddgamma = context.allocator().allocate(uint64_t(cols) * 4),
                     ddbeta = context.allocator().allocate(uint64_t(cols) * 4),
                     dscratch = context.allocator().allocate(
                         uint64_t(ops::layerNormBackwardScratch(rows, cols)) * 4);
    context.staging().upload(ddy, 0, dy_host.data(), dy_host.size() * 4);
    context.staging().upload(dmean, 0, want_mean.data(), want_mean.size() * 4);
    context.staging().upload(drstd, 0, want_rstd.data(), want_rstd.size() * 4);
    std::vector<float> want_dx(static_cast<size_t>(n)), want_dgamma(static_cast<size_t>(cols)),
        want_dbeta(static_cast<size_t>(cols));
    ops::ref::layerNormBackward(p.x.data(), gamma.data(), want_mean.data(), want_rstd.data(),
                                dy_host.data(), want_dx.data(), want_dgamma.data(),
                                want_dbeta.data(), rows, cols);
    const ops::TensorView dy = ops::view(ddy, {rows, cols}), dgv = ops::view(ddgamma, {cols}),
                          dbv = ops::view(ddbeta, {cols}),
                          scratch =
                              ops::view(dscratch, {ops::layerNormBackwardScratch(rows, cols)});
    for (V requested : variants)
      for (P param : params) {
        const V variant =
            requested == V::Auto ? ops::layerNormVariantFor(context, x, g, dy) : requested;
        measure(
            "layernorm_backward",
            std::string(ops::layerNormVariantName(variant)) + "/" +
                ops::layerNormParamsVariantName(param),
            requested, 4.0 * double(3 * n + 3 * cols + 2 * rows),
            [&](vk::Recorder& rec) {
              ops::layerNormBackward(rec, x, g, mean, rstd, dy, y, dgv, dbv, scratch,
                                     ops::Write::Overwrite, ops::Write::Overwrite, variant, param);
            },
            [&] {
              return std::max({normalisedError(download(context, p.dy, n), want_dx),
                               normalisedError(download(context, ddgamma, cols), want_dgamma),
                               normalisedError(download(context, ddbeta, cols), want_dbeta)});
            });
      }
    return exit_code;
  }
  for (V requested : variants) {
    const V variant = requested == V::Auto ? ops::layerNormVariantFor(context, x, g, b) : requested;
    measure(
        "layernorm", ops::layerNormVariantName(variant), requested,
        4.0 * double(2 * n + 2 * cols + 2 * rows),
        [&](vk::Recorder& rec) { ops::layerNorm(rec, x, g, b, y, mean, rstd, 1e-5f, variant); },
        [&] {
          return std::max({normalisedError(download(context, p.dy, n), want),
                           normalisedError(download(context, dmean, rows), want_mean),
                           normalisedError(download(context, drstd, rows), want_rstd)});
        });
  }
  return exit_code;
}

}  // namespace

const BenchOp& softmaxBench() {
  static const BenchOp op{"softmax", "y = softmax(x) over rows of (ROWS, COLS)", declare,
                          runSoftmax};
  return op;
}

const BenchOp& layerNormBench() {
  static const BenchOp op{"layernorm",
                          "layer norm over rows of (ROWS, COLS), with mean and rstd (--backward: "
                          "dx, dgamma and dbeta)",
                          declareLayerNorm, runLayerNorm};
  return op;
}

}  // namespace vkgrad::apps

// vkgrad-bench softmax and layernorm: row-wise kernels over (rows, cols) floats, in GB/s and
// as a fraction of the copy kernel's bandwidth over the same number of floats. Bytes moved:
// x read once and y written once (the kernels read x twice; the second read is expected to
// hit the cache), plus gamma, beta, mean and rstd for layernorm. layernorm --backward times
// the backward instead (dx, dgamma and dbeta from the saved mean and rstd, --params choosing
// how the parameter sums run): x and dy read once, dx written once, plus the vectors; softmax
// --backward: y and dy read once, dx written once.
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

void declareSoftmax(Cli& cli) {
  declare(cli);
  cli.flag("backward", "time the backward (dx from y and dy) instead of the forward");
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

// One kernel run to time: its names in the results and the bytes it moves.
struct Case {
  const char* op;
  std::string variant;
  const char* requested;
  double bytes;
};

// Times one case and reports it: its largest normalised error over the outputs `errors`
// reads back after the runs. Returns 1 when that is above 1e-5.
int measure(vk::Context& context, const BenchOptions& options, const Problem& p, double copy_gbps,
            const Case& c, const std::function<void(vk::Recorder&)>& record,
            const std::function<double()>& errors) {
  BandwidthResult result{
      c.op,        c.variant,
      c.requested, {{"rows", p.rows}, {"cols", p.cols}},
      c.bytes,     timeDispatches(context, options, c.op + (" " + c.variant), record)};
  result.error = errors();
  result.tolerance = 1e-5;
  return reportBandwidth(context, options, result, copy_gbps);
}

// --backward: dx into x's buffer from y (the reference forward's output) and a random dy.
int runSoftmaxBackward(vk::Context& context, const BenchOptions& options, Problem& p,
                       const std::vector<ops::SoftmaxVariant>& variants, double copy_gbps) {
  using V = ops::SoftmaxVariant;
  const int64_t n = p.rows * p.cols;
  std::vector<float> y_host(static_cast<size_t>(n)), want(static_cast<size_t>(n));
  ops::ref::softmax(p.x.data(), y_host.data(), p.rows, p.cols);
  const std::vector<float> dy_host = benchData(size_t(n), -1.0f, 1.0f, 4);
  ops::ref::softmaxBackward(y_host.data(), dy_host.data(), want.data(), p.rows, p.cols);
  vk::Buffer ddy = context.allocator().allocate(uint64_t(n) * 4);
  context.staging().upload(p.dy, 0, y_host.data(), y_host.size() * 4);
  context.staging().upload(ddy, 0, dy_host.data(), dy_host.size() * 4);
  const ops::TensorView y = ops::view(p.dy, {p.rows, p.cols}),
                        dy = ops::view(ddy, {p.rows, p.cols}),
                        dx = ops::view(p.dx, {p.rows, p.cols});
  int exit_code = 0;
  for (V requested : variants) {
    const V variant = requested == V::Auto ? ops::softmaxVariantFor(context, y) : requested;
    exit_code |= measure(
        context, options, p, copy_gbps,
        {"softmax_backward", ops::softmaxVariantName(variant), ops::softmaxVariantName(requested),
         12.0 * double(n)},
        [&](vk::Recorder& rec) {
          ops::softmaxBackward(rec, y, dy, dx, ops::Write::Overwrite, variant);
        },
        [&] { return normalisedError(download(context, p.dx, n), want); });
  }
  return exit_code;
}

int runSoftmax(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  using V = ops::SoftmaxVariant;
  const V all[] = {V::Auto, V::WorkgroupStorage, V::WorkgroupTexel, V::SubgroupStorage,
                   V::SubgroupTexel};
  const std::vector<V> variants = parseVariants(cli, all, ops::softmaxVariantName);
  Problem p = makeProblem(cli, context, "softmax");
  const int64_t n = p.rows * p.cols;
  const double copy_gbps = copyGbps(context, options, n);
  if (cli.has("backward")) return runSoftmaxBackward(context, options, p, variants, copy_gbps);
  const ops::TensorView x = ops::view(p.dx, {p.rows, p.cols}),
                        y = ops::view(p.dy, {p.rows, p.cols});
  std::vector<float> want(static_cast<size_t>(n));
  ops::ref::softmax(p.x.data(), want.data(), p.rows, p.cols);
  int exit_code = 0;
  for (V requested : variants) {
    const V variant = requested == V::Auto ? ops::softmaxVariantFor(context, x) : requested;
    exit_code |= measure(
        context, options, p, copy_gbps,
        {"softmax", ops::softmaxVariantName(variant), ops::softmaxVariantName(requested),
         8.0 * double(n)},
        [&](vk::Recorder& rec) { ops::softmax(rec, x, y, variant); },
        [&] { return normalisedError(download(context, p.dy, n), want); });
  }
  return exit_code;
}

// Layer norm's parameters and statistics on the device, and the CPU reference forward.
struct LayerNormData {
  std::vector<float> gamma, beta;
  vk::Buffer dgamma, dbeta, dmean, drstd;
  std::vector<float> want, want_mean, want_rstd;
};

LayerNormData makeLayerNormData(vk::Context& context, const Problem& p) {
  const int64_t rows = p.rows, cols = p.cols;
  LayerNormData d;
  d.gamma = benchData(size_t(cols), 0.5f, 1.5f, 2), d.beta = benchData(size_t(cols), -1, 1, 3);
  d.dgamma = context.allocator().allocate(uint64_t(cols) * 4);
  d.dbeta = context.allocator().allocate(uint64_t(cols) * 4);
  d.dmean = context.allocator().allocate(uint64_t(rows) * 4);
  d.drstd = context.allocator().allocate(uint64_t(rows) * 4);
  context.staging().upload(d.dgamma, 0, d.gamma.data(), d.gamma.size() * 4);
  context.staging().upload(d.dbeta, 0, d.beta.data(), d.beta.size() * 4);
  d.want.resize(size_t(rows * cols)), d.want_mean.resize(size_t(rows));
  d.want_rstd.resize(size_t(rows));
  ops::ref::layerNorm(p.x.data(), d.gamma.data(), d.beta.data(), d.want.data(), d.want_mean.data(),
                      d.want_rstd.data(), rows, cols, 1e-5f);
  return d;
}

int runLayerNormForward(vk::Context& context, const BenchOptions& options, const Problem& p,
                        const LayerNormData& d, const std::vector<ops::LayerNormVariant>& variants,
                        double copy_gbps) {
  using V = ops::LayerNormVariant;
  const int64_t rows = p.rows, cols = p.cols, n = rows * cols;
  const ops::TensorView x = ops::view(p.dx, {rows, cols}), y = ops::view(p.dy, {rows, cols}),
                        g = ops::view(d.dgamma, {cols}), b = ops::view(d.dbeta, {cols}),
                        mean = ops::view(d.dmean, {rows}), rstd = ops::view(d.drstd, {rows});
  int exit_code = 0;
  for (V requested : variants) {
    const V variant = requested == V::Auto ? ops::layerNormVariantFor(context, x, g, b) : requested;
    exit_code |= measure(
        context, options, p, copy_gbps,
        {"layernorm", ops::layerNormVariantName(variant), ops::layerNormVariantName(requested),
         4.0 * double(2 * n + 2 * cols + 2 * rows)},
        [&](vk::Recorder& rec) { ops::layerNorm(rec, x, g, b, y, mean, rstd, 1e-5f, variant); },
        [&] {
          return std::max({normalisedError(download(context, p.dy, n), d.want),
                           normalisedError(download(context, d.dmean, rows), d.want_mean),
                           normalisedError(download(context, d.drstd, rows), d.want_rstd)});
        });
  }
  return exit_code;
}

// The backward's own inputs and outputs on the device, and its CPU reference.
struct LayerNormGrads {
  vk::Buffer ddy, ddgamma, ddbeta, dscratch;
  std::vector<float> want_dx, want_dgamma, want_dbeta;
};

LayerNormGrads makeLayerNormGrads(vk::Context& context, const Problem& p, const LayerNormData& d) {
  const int64_t rows = p.rows, cols = p.cols, n = rows * cols;
  // dy, and the saved statistics the reference forward gives.
  const std::vector<float> dy_host = benchData(size_t(n), -1.0f, 1.0f, 4);
  LayerNormGrads gr;
  gr.ddy = context.allocator().allocate(uint64_t(n) * 4);
  gr.ddgamma = context.allocator().allocate(uint64_t(cols) * 4);
  gr.ddbeta = context.allocator().allocate(uint64_t(cols) * 4);
  gr.dscratch =
      context.allocator().allocate(uint64_t(ops::layerNormBackwardScratch(rows, cols)) * 4);
  context.staging().upload(gr.ddy, 0, dy_host.data(), dy_host.size() * 4);
  context.staging().upload(d.dmean, 0, d.want_mean.data(), d.want_mean.size() * 4);
  context.staging().upload(d.drstd, 0, d.want_rstd.data(), d.want_rstd.size() * 4);
  gr.want_dx.resize(size_t(n)), gr.want_dgamma.resize(size_t(cols));
  gr.want_dbeta.resize(size_t(cols));
  ops::ref::layerNormBackward(p.x.data(), d.gamma.data(), d.want_mean.data(), d.want_rstd.data(),
                              dy_host.data(), gr.want_dx.data(), gr.want_dgamma.data(),
                              gr.want_dbeta.data(), rows, cols);
  return gr;
}

// --backward: every variant with every --params way of summing dgamma and dbeta.
int runLayerNormBackward(const Cli& cli, vk::Context& context, const BenchOptions& options,
                         const Problem& p, const LayerNormData& d,
                         const std::vector<ops::LayerNormVariant>& variants, double copy_gbps) {
  using V = ops::LayerNormVariant;
  using P = ops::LayerNormParamsVariant;
  const P all_params[] = {P::Auto, P::Columns, P::Blocked, P::WithDx};
  const std::vector<P> params =
      parseVariants(cli, all_params, ops::layerNormParamsVariantName, "params");
  const int64_t rows = p.rows, cols = p.cols, n = rows * cols;
  const LayerNormGrads gr = makeLayerNormGrads(context, p, d);
  // dx is written into y's buffer.
  const ops::TensorView x = ops::view(p.dx, {rows, cols}), dx = ops::view(p.dy, {rows, cols}),
                        g = ops::view(d.dgamma, {cols}), mean = ops::view(d.dmean, {rows}),
                        rstd = ops::view(d.drstd, {rows}), dy = ops::view(gr.ddy, {rows, cols}),
                        dg = ops::view(gr.ddgamma, {cols}), db = ops::view(gr.ddbeta, {cols}),
                        scratch =
                            ops::view(gr.dscratch, {ops::layerNormBackwardScratch(rows, cols)});
  int exit_code = 0;
  for (V requested : variants)
    for (P param : params) {
      const V variant =
          requested == V::Auto ? ops::layerNormVariantFor(context, x, g, dy) : requested;
      exit_code |= measure(
          context, options, p, copy_gbps,
          {"layernorm_backward",
           std::string(ops::layerNormVariantName(variant)) + "/" +
               ops::layerNormParamsVariantName(param),
           ops::layerNormVariantName(requested), 4.0 * double(3 * n + 3 * cols + 2 * rows)},
          [&](vk::Recorder& rec) {
            ops::layerNormBackward(rec, x, g, mean, rstd, dy, dx, dg, db, scratch,
                                   ops::Write::Overwrite, ops::Write::Overwrite, variant, param);
          },
          [&] {
            return std::max({normalisedError(download(context, p.dy, n), gr.want_dx),
                             normalisedError(download(context, gr.ddgamma, cols), gr.want_dgamma),
                             normalisedError(download(context, gr.ddbeta, cols), gr.want_dbeta)});
          });
    }
  return exit_code;
}

int runLayerNorm(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  using V = ops::LayerNormVariant;
  const V all[] = {V::Auto, V::WorkgroupStorage, V::WorkgroupTexel, V::SubgroupStorage,
                   V::SubgroupTexel};
  const std::vector<V> variants = parseVariants(cli, all, ops::layerNormVariantName);
  const Problem p = makeProblem(cli, context, "layernorm");
  const LayerNormData d = makeLayerNormData(context, p);
  const double copy_gbps = copyGbps(context, options, p.rows * p.cols);
  if (cli.has("backward"))
    return runLayerNormBackward(cli, context, options, p, d, variants, copy_gbps);
  return runLayerNormForward(context, options, p, d, variants, copy_gbps);
}

}  // namespace

const BenchOp& softmaxBench() {
  static const BenchOp op{"softmax",
                          "y = softmax(x) over rows of (ROWS, COLS) (--backward: dx from y, dy)",
                          declareSoftmax, runSoftmax};
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

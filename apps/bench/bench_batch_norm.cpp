// vkgrad-bench batchnorm: batch norm's training forward (statistics, running update, y) and
// backward (dx, dgamma, dbeta) over an image batch (N,C,H,W), in GB/s of the ideal traffic
// (x read once and y written once; x and dy read once and dx written once) and as a fraction
// of the copy kernel's bandwidth. The kernels read x three times (forward) and x and dy twice
// (backward), a workgroup per channel: on a CPU device the later passes mostly hit cache.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bench.h"
#include "vkgrad/ops/batch_norm.h"
#include "vkgrad/ops/reference/batch_norm.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

void declare(Cli& cli) {
  cli.option("batch", "N", "32");
  cli.option("channels", "C", "64");
  cli.option("size", "H = W", "28");
}

std::vector<float> download(vk::Context& context, const vk::Buffer& b, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  context.staging().download(b, 0, out.data(), out.size() * 4);
  return out;
}

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const int64_t n = cli.getInt("batch", 2, 4096), c = cli.getInt("channels", 1, 65535),
                side = cli.getInt("size", 1, 4096), s = side * side, count = n * c * s;
  if (count > (int64_t(1) << 28)) cli.fail("at most 2^28 elements");
  std::fprintf(stderr, "vkgrad-bench: batch norm over (%lld,%lld,%lld,%lld) on %s\n", (long long)n,
               (long long)c, (long long)side, (long long)side, context.info().name.c_str());
  auto buffer = [&](const std::vector<float>& data) {
    vk::Buffer b = context.allocator().allocate(uint64_t(data.size()) * 4);
    context.staging().upload(b, 0, data.data(), data.size() * 4);
    return b;
  };
  const auto x = benchData(size_t(count), -2.0f, 3.0f, 1), dy = benchData(size_t(count), -1, 1, 2);
  const auto gamma = benchData(size_t(c), 0.5f, 1.5f, 3), beta = benchData(size_t(c), -1, 1, 4);
  const std::vector<float> zeros(size_t(c), 0.0f), ones(size_t(c), 1.0f);
  const vk::Buffer dx_in = buffer(x), ddy = buffer(dy), dgamma = buffer(gamma),
                   dbeta = buffer(beta), dmean = buffer(zeros), drstd = buffer(zeros),
                   drm = buffer(zeros), drv = buffer(ones), dout = buffer(x), dgg = buffer(zeros),
                   dgb = buffer(zeros);
  const ops::Shape shape{n, c, side, side}, stats{c};
  const ops::TensorView vx = ops::view(dx_in, shape), vy = ops::view(dout, shape),
                        vg = ops::view(dgamma, stats), vb = ops::view(dbeta, stats),
                        vmean = ops::view(dmean, stats), vrstd = ops::view(drstd, stats);
  const ops::BatchNormRunning running{ops::view(drm, stats), ops::view(drv, stats), 0.1f};
  const double copy_gbps = copyGbps(context, options, count);

  std::vector<float> want(static_cast<size_t>(count)), mean(static_cast<size_t>(c)),
      rstd(static_cast<size_t>(c));
  ops::ref::batchNorm(x.data(), gamma.data(), beta.data(), want.data(), mean.data(), rstd.data(),
                      nullptr, nullptr, n, c, s, 1e-5f, 0.1f);
  const std::vector<std::pair<std::string, int64_t>> dims = {
      {"n", n}, {"c", c}, {"h", side}, {"w", side}};
  int exit_code = 0;
  {
    const Timing timing =
        timeDispatches(context, options, "batchnorm forward", [&](vk::Recorder& rec) {
          ops::batchNorm(rec, vx, vg, vb, vy, vmean, vrstd, 1e-5f, &running);
        });
    BandwidthResult result{"batchnorm", "forward", "forward", dims, 8.0 * double(count), timing};
    result.error = std::max(normalisedError(download(context, dout, count), want),
                            normalisedError(download(context, drstd, c), rstd));
    result.tolerance = 1e-5;
    exit_code |= reportBandwidth(context, options, result, copy_gbps);
  }
  {
    // The backward from the reference statistics (the forward's are within its tolerance).
    context.staging().upload(dmean, 0, mean.data(), mean.size() * 4);
    context.staging().upload(drstd, 0, rstd.data(), rstd.size() * 4);
    std::vector<float> want_dx(static_cast<size_t>(count)), want_dg(static_cast<size_t>(c)),
        want_db(static_cast<size_t>(c));
    ops::ref::batchNormBackward(x.data(), gamma.data(), mean.data(), rstd.data(), dy.data(),
                                want_dx.data(), want_dg.data(), want_db.data(), n, c, s, true,
                                1e-5f);
    const ops::BatchNormGrads grads{vy, ops::view(dgg, stats), ops::view(dgb, stats)};
    const Timing timing =
        timeDispatches(context, options, "batchnorm backward", [&](vk::Recorder& rec) {
          ops::batchNormBackward(rec, vx, vg, vmean, vrstd, ops::view(ddy, shape), grads);
        });
    BandwidthResult result{"batchnorm", "backward", "backward", dims, 12.0 * double(count), timing};
    result.error = std::max({normalisedError(download(context, dout, count), want_dx),
                             normalisedError(download(context, dgg, c), want_dg),
                             normalisedError(download(context, dgb, c), want_db)});
    result.tolerance = 1e-5;
    exit_code |= reportBandwidth(context, options, result, copy_gbps);
  }
  return exit_code;
}

}  // namespace

const BenchOp& batchNormBench() {
  static const BenchOp op{"batchnorm", "batch norm forward and backward over (N,C,H,W)", declare,
                          run};
  return op;
}

}  // namespace vkgrad::apps

// vkgrad-demo: runs matmul, softmax and layer norm on the chosen device with random
// inputs of odd sizes, checks each against the CPU reference, and prints the GPU time.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/app_main.h"
#include "common/cli.h"
#include "common/device_options.h"
#include "vkgrad/ops/layer_norm.h"
#include "vkgrad/ops/matmul.h"
#include "vkgrad/ops/reference/layer_norm.h"
#include "vkgrad/ops/reference/matmul.h"
#include "vkgrad/ops/reference/normalised_error.h"
#include "vkgrad/ops/reference/softmax.h"
#include "vkgrad/ops/softmax.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/instance.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"
#include "vkgrad/vk/staging.h"

namespace {

using namespace vkgrad;

// Every check passes if max |got - want| / max |want| stays below its tolerance; fp32
// sums over a few hundred terms land near 1e-7, so 1e-5 leaves a wide margin.
constexpr double kTolerance = 1e-5;

class Demo {
 public:
  Demo(vk::Context& context, uint64_t seed) : ctx_(context), rng_(seed) {}

  std::vector<float> random(size_t n, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> out(n);
    for (float& x : out) x = dist(rng_);
    return out;
  }
  vk::Buffer upload(const std::vector<float>& data) {
    vk::Buffer buffer = ctx_.allocator().allocate(data.size() * 4);
    ctx_.staging().upload(buffer, 0, data.data(), data.size() * 4);
    return buffer;
  }
  // Filled with NaN, so an element the kernel never writes fails the check.
  vk::Buffer output(size_t n) {
    return upload(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
  }
  std::vector<float> download(const vk::Buffer& buffer) {
    std::vector<float> out(buffer.size() / 4);
    ctx_.staging().download(buffer, 0, out.data(), buffer.size());
    return out;
  }

  // Records what record() adds twice, the second time between two timestamps, submits,
  // and returns the GPU milliseconds of the second (NaN where the queue has no timestamps).
  // The first run absorbs one-time costs: lavapipe compiles a pipeline on its first dispatch.
  template <class Record>
  double timed(Record&& record) {
    vk::Recorder rec(ctx_);
    const bool timestamps = ctx_.info().timestamp_valid_bits != 0;
    record(rec);
    const uint32_t t0 = timestamps ? rec.timestamp() : 0;
    record(rec);
    const uint32_t t1 = timestamps ? rec.timestamp() : 0;
    rec.submit();
    return timestamps ? rec.milliseconds(t0, t1) : std::nan("");
  }

 private:
  vk::Context& ctx_;
  std::mt19937_64 rng_;
};

struct Result {
  std::string op, shape;
  double error, ms;
  bool pass() const { return error <= kTolerance; }
};

Result runMatmul(Demo& demo, int64_t m, int64_t n, int64_t k) {
  const auto a = demo.random(m * k), b = demo.random(k * n);
  std::vector<float> want(m * n);
  ops::ref::matmul(a.data(), b.data(), want.data(), m, n, k);
  const vk::Buffer da = demo.upload(a), db = demo.upload(b), dc = demo.output(m * n);
  const double ms = demo.timed([&](vk::Recorder& rec) {
    ops::matmul(rec, ops::view(da, {m, k}), ops::view(db, {k, n}), ops::view(dc, {m, n}));
  });
  return {"matmul", ops::Shape{m, k}.str() + " x " + ops::Shape{k, n}.str(),
          ops::ref::normalisedError(demo.download(dc), want), ms};
}

Result runSoftmax(Demo& demo, int64_t rows, int64_t n) {
  const auto x = demo.random(rows * n, -4, 4);
  std::vector<float> want(rows * n);
  ops::ref::softmax(x.data(), want.data(), rows, n);
  const vk::Buffer dx = demo.upload(x), dy = demo.output(rows * n);
  const double ms = demo.timed([&](vk::Recorder& rec) {
    ops::softmax(rec, ops::view(dx, {rows, n}), ops::view(dy, {rows, n}));
  });
  return {"softmax", ops::Shape{rows, n}.str(), ops::ref::normalisedError(demo.download(dy), want),
          ms};
}

Result runLayerNorm(Demo& demo, int64_t rows, int64_t n) {
  const float eps = 1e-5f;
  // An offset and spread per row, as activations have, rather than unit-scale noise.
  auto x = demo.random(rows * n);
  const auto shift = demo.random(rows, -3, 3), spread = demo.random(rows, 0.5f, 4);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) x[r * n + i] = shift[r] + spread[r] * x[r * n + i];
  const auto gamma = demo.random(n, 0.5f, 1.5f), beta = demo.random(n, -0.5f, 0.5f);
  std::vector<float> want_y(rows * n), want_mean(rows), want_rstd(rows);
  ops::ref::layerNorm(x.data(), gamma.data(), beta.data(), want_y.data(), want_mean.data(),
                      want_rstd.data(), rows, n, eps);
  const vk::Buffer dx = demo.upload(x), dg = demo.upload(gamma), db = demo.upload(beta);
  const vk::Buffer dy = demo.output(rows * n), dmean = demo.output(rows), drstd = demo.output(rows);
  const double ms = demo.timed([&](vk::Recorder& rec) {
    ops::layerNorm(rec, ops::view(dx, {rows, n}), ops::view(dg, {n}), ops::view(db, {n}),
                   ops::view(dy, {rows, n}), ops::view(dmean, {rows}), ops::view(drstd, {rows}),
                   eps);
  });
  // The worst of the three outputs, each against its own scale.
  const double error = std::max({ops::ref::normalisedError(demo.download(dy), want_y),
                                 ops::ref::normalisedError(demo.download(dmean), want_mean),
                                 ops::ref::normalisedError(demo.download(drstd), want_rstd)});
  return {"layernorm", ops::Shape{rows, n}.str() + " +mean,rstd", error, ms};
}

int run(int argc, char** argv) {
  apps::Cli cli("vkgrad-demo",
                "Runs matmul, softmax and layer norm on random inputs, checks each against the "
                "CPU reference,\nand prints the error and the GPU time. Exits 1 if any check "
                "fails.");
  apps::declareDeviceOptions(cli);
  cli.option("seed", "random seed (default: a fresh one, printed)");
  cli.parse(argc, argv);
  const uint64_t seed =
      cli.has("seed") ? uint64_t(cli.getInt("seed", 0, INT64_MAX)) : std::random_device{}();
  vk::Context context(apps::contextOptions(cli));
  const vk::DeviceInfo& info = context.info();
  const bool validation = context.instance().validation();
  std::printf("device %u: %s [%s], Vulkan %s, driver %s\n", info.index, info.name.c_str(),
              vk::deviceTypeName(info.type), vk::versionString(info.api_version).c_str(),
              info.driver_info.empty() ? info.driver_name.c_str() : info.driver_info.c_str());
  std::printf("matmul variant: %s; seed %llu%s\n\n",
              ops::matmulVariantName(ops::matmulVariantFor(context)),
              static_cast<unsigned long long>(seed), validation ? "; validation on" : "");

  Demo demo(context, seed);
  const Result results[] = {runMatmul(demo, 257, 191, 129), runSoftmax(demo, 123, 517),
                            runLayerNorm(demo, 95, 771)};
  std::printf("%-10s %-24s %10s %10s %-6s %9s\n", "op", "shape", "error", "tolerance", "result",
              "GPU ms");
  int failed = 0;
  for (const Result& r : results) {
    char ms[32] = "-";
    if (std::isfinite(r.ms)) std::snprintf(ms, sizeof(ms), "%.3f", r.ms);
    std::printf("%-10s %-24s %10.2e %10.0e %-6s %9s\n", r.op.c_str(), r.shape.c_str(), r.error,
                kTolerance, r.pass() ? "PASS" : "FAIL", ms);
    failed += !r.pass();
  }
  const size_t messages = context.validationMessages().size();
  std::printf("\n");
  if (validation) std::printf("validation messages: %zu\n", messages);
  if (failed || messages) {
    std::printf("%d of %zu checks failed%s\n", failed, std::size(results),
                messages ? "; validation reported problems" : "");
    return 1;
  }
  std::printf("all %zu checks passed\n", std::size(results));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return apps::guardedMain("vkgrad-demo", run, argc, argv);
}

// vkgrad-bench copy and elementwise: bandwidth-bound kernels over N floats, in GB/s and as a
// fraction of the copy kernel's bandwidth on the same device (the practical ceiling for a
// kernel that reads and writes each element once).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench.h"
#include "vkgrad/ops/activation.h"
#include "vkgrad/ops/copy.h"
#include "vkgrad/ops/elementwise.h"
#include "vkgrad/ops/reference/activation.h"
#include "vkgrad/ops/reference/elementwise.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

// Each kind: out = f(a[, b]); a, b, out: (rows, cols) with rows * cols = N, except bias_add's
// b, one row of cols that every row adds (the broadcast of a linear layer's bias).
const char* const kKinds[] = {"add", "bias_add", "mul", "scale", "relu", "gelu_tanh"};
constexpr int64_t kBiasCols = 1024;

void declare(Cli& cli) {
  cli.option("n", "elements", "16777216");
  cli.option("kind", "add, bias_add, mul, scale, relu, gelu_tanh or all", "all");
}

std::vector<std::string> parseKinds(const Cli& cli) {
  const std::string text = cli.get("kind");
  if (text == "all") return {std::begin(kKinds), std::end(kKinds)};
  for (const char* kind : kKinds)
    if (text == kind) return {text};
  cli.fail("--kind must be add, bias_add, mul, scale, relu, gelu_tanh or all, got '" + text + "'");
}

// The CPU result of one kind, in double inside the references.
std::vector<float> reference(const std::string& kind, const std::vector<float>& a,
                             const std::vector<float>& b, int64_t n) {
  std::vector<float> want(size_t(n), 0.0f);
  using ops::ref::BinaryKind;
  if (kind == "add") ops::ref::binary(BinaryKind::Add, a.data(), b.data(), want.data(), 1, n, 1);
  if (kind == "mul") ops::ref::binary(BinaryKind::Mul, a.data(), b.data(), want.data(), 1, n, 1);
  if (kind == "bias_add")
    ops::ref::binary(BinaryKind::Add, a.data(), b.data(), want.data(), n / kBiasCols, kBiasCols, 1);
  if (kind == "scale")
    for (int64_t i = 0; i < n; ++i) want[i] = 0.5f * a[i];
  if (kind == "relu") ops::ref::activation(ops::Activation::Relu, a.data(), want.data(), n, 0.0f);
  if (kind == "gelu_tanh")
    ops::ref::activation(ops::Activation::GeluTanh, a.data(), want.data(), n, 0.0f);
  return want;
}

int runElementwise(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const int64_t n = cli.getInt("n", 1, int64_t(1) << 30);
  const std::vector<std::string> kinds = parseKinds(cli);
  const bool needs_bias_rows = std::find(kinds.begin(), kinds.end(), "bias_add") != kinds.end();
  if (needs_bias_rows && n % kBiasCols != 0)
    cli.fail("bias_add needs --n to be a multiple of " + std::to_string(kBiasCols));
  std::fprintf(stderr, "vkgrad-bench: elementwise over %lld floats on %s\n", (long long)n,
               context.info().name.c_str());

  const vk::Buffer da = context.allocator().allocate(uint64_t(n) * 4),
                   db = context.allocator().allocate(uint64_t(n) * 4),
                   dout = context.allocator().allocate(uint64_t(n) * 4);
  const auto a = benchData(size_t(n), -3.0f, 3.0f, 1), b = benchData(size_t(n), -3.0f, 3.0f, 2);
  context.staging().upload(da, 0, a.data(), a.size() * 4);
  context.staging().upload(db, 0, b.data(), b.size() * 4);
  const double copy_gbps = copyGbps(context, options, n);

  int exit_code = 0;
  for (const std::string& kind : kinds) {
    const ops::TensorView va = ops::view(da, {n}), vb = ops::view(db, {n}),
                          vout = ops::view(dout, {n});
    const ops::TensorView va2 = ops::view(da, {n / kBiasCols, kBiasCols}),
                          vbias = ops::view(db, {kBiasCols}),
                          vout2 = ops::view(dout, {n / kBiasCols, kBiasCols});
    int64_t words = 2 * n;  // read a, write out
    if (kind == "add" || kind == "mul") words = 3 * n;
    if (kind == "bias_add") words = 2 * n + kBiasCols;
    const Timing timing = timeDispatches(context, options, kind, [&](vk::Recorder& rec) {
      if (kind == "add") ops::add(rec, va, vb, vout);
      if (kind == "mul") ops::mul(rec, va, vb, vout);
      if (kind == "bias_add") ops::add(rec, va2, vbias, vout2);
      if (kind == "scale") ops::scale(rec, va, vout, 0.5f);
      if (kind == "relu") ops::activation(rec, ops::Activation::Relu, va, vout);
      if (kind == "gelu_tanh") ops::activation(rec, ops::Activation::GeluTanh, va, vout);
    });
    std::vector<float> got(static_cast<size_t>(n));
    context.staging().download(dout, 0, got.data(), got.size() * 4);
    BandwidthResult result{"elementwise", kind, kind, {{"n", n}}, 4.0 * double(words), timing};
    result.error = normalisedError(got, reference(kind, a, b, n));
    result.tolerance = 1e-5;
    exit_code |= reportBandwidth(context, options, result, copy_gbps);
  }
  return exit_code;
}

int runCopy(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const int64_t n = cli.getInt("n", 1, int64_t(1) << 30);
  std::fprintf(stderr, "vkgrad-bench: copy of %lld floats on %s\n", (long long)n,
               context.info().name.c_str());
  const vk::Buffer src = context.allocator().allocate(uint64_t(n) * 4),
                   dst = context.allocator().allocate(uint64_t(n) * 4);
  const auto data = benchData(size_t(n), -1.0f, 1.0f, 3);
  context.staging().upload(src, 0, data.data(), data.size() * 4);
  const double copy_gbps = copyGbps(context, options, n);
  int exit_code = 0;
  for (ops::CopyVariant variant : {ops::CopyVariant::Storage, ops::CopyVariant::Texel}) {
    const char* name = ops::copyVariantName(variant);
    const Timing timing =
        timeDispatches(context, options, "copy " + std::string(name), [&](vk::Recorder& rec) {
          ops::copy(rec, ops::view(src, {n}), ops::view(dst, {n}), variant);
        });
    std::vector<float> got(static_cast<size_t>(n));
    context.staging().download(dst, 0, got.data(), got.size() * 4);
    BandwidthResult result{"copy", name, name, {{"n", n}}, 8.0 * double(n), timing};
    result.error = normalisedError(got, data);
    result.tolerance = 0;
    exit_code |= reportBandwidth(context, options, result, copy_gbps);
  }
  return exit_code;
}

}  // namespace

const BenchOp& copyBench() {
  static const BenchOp op{"copy", "dst = src over N floats: the bandwidth yardstick", declare,
                          runCopy};
  return op;
}

const BenchOp& elementwiseBench() {
  static const BenchOp op{"elementwise", "add, bias_add, mul, scale, relu, gelu_tanh over N floats",
                          declare, runElementwise};
  return op;
}

}  // namespace vkgrad::apps

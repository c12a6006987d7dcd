// vkgrad-bench spmm: y = A x over a random graph (ops/spmm.h), in GB/s and as a fraction of
// the copy kernel's bandwidth over as many bytes. Sources and destinations are uniform random
// (seeded), so x rows are gathered in no useful order. Bytes the forward must move:
//   4 (N + 1) offsets + 4 E sources + 4 E H weights, each read once,
//   + 4 E F: one x row gathered per edge, + 4 N F: y written once.
#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "bench.h"
#include "vkgrad/ops/reference/spmm.h"
#include "vkgrad/ops/spmm.h"
#include "vkgrad/runtime/sparse.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

void declare(Cli& cli) {
  cli.option("nodes", "nodes N", "100000");
  cli.option("edges", "edges E, uniform random (source, destination) pairs", "1000000");
  cli.option("features", "features F per node", "64");
  cli.option("heads", "edge weights per edge H, dividing F; 0: no weights (every weight 1)", "1");
}

vk::Buffer upload(vk::Context& context, const void* data, size_t bytes) {
  vk::Buffer b = context.allocator().allocate(std::max<size_t>(bytes, 4));
  if (bytes) context.staging().upload(b, 0, data, bytes);
  return b;
}

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const int64_t n = cli.getInt("nodes", 1, int64_t(1) << 24),
                e = cli.getInt("edges", 1, int64_t(1) << 28), f = cli.getInt("features", 1, 4096),
                h = cli.getInt("heads", 0, 4096);
  if (n * f > (int64_t(1) << 30)) cli.fail("nodes * features must be at most 2^30");
  if (e * std::max<int64_t>(h, 1) > (int64_t(1) << 30))
    cli.fail("edges * heads must be at most 2^30");
  if (h > 0 && f % h != 0) cli.fail("--heads must divide --features");
  std::fprintf(stderr, "vkgrad-bench: spmm N %lld, E %lld, F %lld, H %lld on %s\n", (long long)n,
               (long long)e, (long long)f, (long long)h, context.info().name.c_str());

  std::vector<std::pair<uint32_t, uint32_t>> pairs(static_cast<size_t>(e));
  const std::vector<float> s = benchData(size_t(e), 0.0f, float(n), 1),
                           d = benchData(size_t(e), 0.0f, float(n), 2);
  for (size_t k = 0; k < pairs.size(); ++k)
    pairs[k] = {std::min(uint32_t(s[k]), uint32_t(n - 1)),
                std::min(uint32_t(d[k]), uint32_t(n - 1))};
  const graph::Csr csr = graph::csrFromEdges("bench", n, pairs);
  const std::vector<float> x = benchData(size_t(n * f), -1.0f, 1.0f, 3),
                           w = benchData(size_t(e * std::max<int64_t>(h, 1)), -1.0f, 1.0f, 4);

  const vk::Buffer b_offsets = upload(context, csr.offsets.data(), csr.offsets.size() * 4),
                   b_sources = upload(context, csr.sources.data(), csr.sources.size() * 4),
                   b_w = upload(context, w.data(), w.size() * 4),
                   b_x = upload(context, x.data(), x.size() * 4),
                   b_y = context.allocator().allocate(uint64_t(n * f) * 4);
  const ops::TensorView offsets = ops::view(b_offsets, {n + 1}, 0, ops::DType::U32),
                        sources = ops::view(b_sources, {e}, 0, ops::DType::U32),
                        weights = h > 0 ? ops::view(b_w, {e, h}) : ops::TensorView{},
                        xv = ops::view(b_x, {n, f}), yv = ops::view(b_y, {n, f});

  const Timing timing = timeDispatches(context, options, "spmm", [&](vk::Recorder& rec) {
    ops::spmm(rec, offsets, sources, weights, xv, yv);
  });
  const double bytes = 4.0 * double(n + 1 + e + e * h + e * f + n * f);
  BandwidthResult result{"spmm",
                         h > 0 ? "weighted" : "unweighted",
                         h > 0 ? "weighted" : "unweighted",
                         {{"nodes", n}, {"edges", e}, {"features", f}, {"heads", h}},
                         bytes,
                         timing};
  std::vector<float> got(size_t(n * f));
  context.staging().download(b_y, 0, got.data(), got.size() * 4);
  result.error =
      normalisedError(got, ops::ref::spmm(csr.offsets, csr.sources, h > 0 ? w.data() : nullptr,
                                          std::max<int64_t>(h, 1), x, f));
  // Float sums of ~E/N products of numbers in [-1, 1] in edge order, against double.
  result.tolerance = 1e-5;
  // The copy moves as many bytes, up to 64 MiB each way (a storage binding's guaranteed range
  // is 128 MiB), which is far past every cache already.
  const int64_t copy_words = std::min(int64_t(bytes / 8), int64_t(1) << 24);
  return reportBandwidth(context, options, result, copyGbps(context, options, copy_words));
}

}  // namespace

const BenchOp& spmmBench() {
  static const BenchOp op{
      "spmm",
      "y = A x over a random graph of N nodes and E edges, x (N, F), weights (E, H); "
      "bytes = 4 (N + 1 + E + E H + E F + N F)",
      declare, run};
  return op;
}

}  // namespace vkgrad::apps

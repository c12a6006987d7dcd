// vkgrad-bench general: the general ops' two kernels (ops/map_reduce.h, ops/strided_copy.h) on
// (ROWS, COLS) floats, in GB/s and as a fraction of the copy kernel's bandwidth: where they
// stand against the floor, and against the model kernels where both do the same work (add of
// equal shapes: ops::add's texel kernel).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench.h"
#include "vkgrad/ops/elementwise.h"
#include "vkgrad/ops/map_reduce.h"
#include "vkgrad/ops/reference/map_reduce.h"
#include "vkgrad/ops/strided_copy.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

// add_fast: ops::add, equal shapes (the model kernel); add_same: ops::binary, equal shapes;
// add_outer: (R,1) + (1,C) -> (R,C); sum_rows / sum_cols: (R,C) summed over axis 0 / 1;
// transpose: (R,C) -> (C,R).
const char* const kKinds[] = {"add_fast", "add_same", "add_outer",
                              "sum_rows", "sum_cols", "transpose"};

void declare(Cli& cli) {
  cli.option("rows", "rows", "4096");
  cli.option("cols", "columns", "4096");
  cli.option("kind", "add_fast, add_same, add_outer, sum_rows, sum_cols, transpose or all", "all");
}

int runGeneral(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const int64_t r = cli.getInt("rows", 1, 1 << 16), c = cli.getInt("cols", 1, 1 << 16);
  const std::string which = cli.get("kind");
  std::vector<std::string> kinds;
  for (const char* kind : kKinds)
    if (which == "all" || which == kind) kinds.push_back(kind);
  if (kinds.empty()) cli.fail("--kind: one of the listed kinds or all, got '" + which + "'");
  const int64_t n = r * c;
  std::fprintf(stderr, "vkgrad-bench: general ops over (%lld,%lld) floats on %s\n", (long long)r,
               (long long)c, context.info().name.c_str());
  const vk::Buffer da = context.allocator().allocate(uint64_t(n) * 4),
                   db = context.allocator().allocate(uint64_t(n) * 4),
                   dout = context.allocator().allocate(uint64_t(n) * 4);
  const auto a = benchData(size_t(n), -3.0f, 3.0f, 1), b = benchData(size_t(n), -3.0f, 3.0f, 2);
  context.staging().upload(da, 0, a.data(), a.size() * 4);
  context.staging().upload(db, 0, b.data(), b.size() * 4);
  const double copy_gbps = copyGbps(context, options, n);
  using ops::Shape;
  const Shape rc{r, c}, col{r, 1}, row{1, c};
  // A sum folding more than 1024 elements per output runs in parts (ops::mapReduceScratch).
  const int64_t n_scratch = std::max<int64_t>(
      {ops::mapReduceScratch(rc, 1), ops::mapReduceScratch(rc, 2), int64_t(1)});
  const vk::Buffer scratch_buffer = context.allocator().allocate(uint64_t(n_scratch) * 4);
  const ops::TensorView scratch = ops::view(scratch_buffer, {n_scratch});

  int exit_code = 0;
  for (const std::string& kind : kinds) {
    double words = 0;
    Shape out_shape = rc;
    std::vector<float> want;
    auto ref = [&](ops::MapFn fn, std::vector<Shape> shapes, uint32_t axes) {
      std::vector<const float*> in{a.data(), b.data()};
      in.resize(shapes.size());
      return ops::ref::mapReduce(fn, ops::Fold::Sum, in, shapes, rc, axes);
    };
    if (kind == "add_fast" || kind == "add_same")
      words = 3.0 * n, want = ref(ops::MapFn::Add, {rc, rc}, 0);
    if (kind == "add_outer") words = double(n + r + c), want = ref(ops::MapFn::Add, {col, row}, 0);
    if (kind == "sum_rows")
      words = double(n + c), out_shape = {c}, want = ref(ops::MapFn::X, {rc}, 1);
    if (kind == "sum_cols")
      words = double(n + r), out_shape = {r}, want = ref(ops::MapFn::X, {rc}, 2);
    if (kind == "transpose") {
      words = 2.0 * n, out_shape = {c, r};
      want.resize(size_t(n));
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) want[size_t(j * r + i)] = a[size_t(i * c + j)];
    }
    const ops::TensorView out = ops::view(dout, out_shape);
    const Timing timing = timeDispatches(context, options, kind, [&](vk::Recorder& rec) {
      if (kind == "add_fast") ops::add(rec, ops::view(da, rc), ops::view(db, rc), out);
      if (kind == "add_same")
        ops::binary(rec, ops::MapFn::Add, ops::view(da, rc), ops::view(db, rc), out);
      if (kind == "add_outer")
        ops::binary(rec, ops::MapFn::Add, ops::view(da, col), ops::view(db, row), out);
      if (kind == "sum_rows")
        ops::reduce(rec, ops::Fold::Sum, ops::view(da, rc), 1, out, 1.0f, ops::Write::Overwrite,
                    scratch);
      if (kind == "sum_cols")
        ops::reduce(rec, ops::Fold::Sum, ops::view(da, rc), 2, out, 1.0f, ops::Write::Overwrite,
                    scratch);
      if (kind == "transpose") {
        const int64_t src[] = {1, c}, dst[] = {r, 1};  // dst (C,R) walked as (C,R)
        ops::stridedCopy(rec, "transpose", {c, r}, {ops::view(da, rc), src, 0}, {out, dst, 0});
      }
    });
    std::vector<float> got(size_t(out_shape.numel()));
    context.staging().download(dout, 0, got.data(), got.size() * 4);
    BandwidthResult result{"general", kind, kind, {{"rows", r}, {"cols", c}}, 4.0 * words, timing};
    result.error = normalisedError(got, want);
    result.tolerance = 1e-5;
    exit_code |= reportBandwidth(context, options, result, copy_gbps);
  }
  return exit_code;
}

}  // namespace

const BenchOp& generalBench() {
  static const BenchOp op{"general",
                          "the general ops' kernels (map_reduce, strided_copy) over (ROWS, COLS)",
                          declare, runGeneral};
  return op;
}

}  // namespace vkgrad::apps

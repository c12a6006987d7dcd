// Sparse aggregation (ops/spmm.h) against the CPU reference: the forward, the transposed pass
// (the gradient of x) and the weights' gradient, overwriting and accumulating, on graphs with
// isolated nodes, self-loops, duplicate edges, a node with 3000 incoming and one with 3000
// outgoing edges, and no edges at all; F = 1, 6, 7, 9 (not multiples of 4) with no weights
// and H = 1, 2, 3, and F = 8, 12 with aligned views (the 4-features-per-invocation kernel);
// views at odd element offsets; every tensor in f16 or bf16, or mixed with f32. The results are
// the same bits on a second run; bad shapes are refused before recording.
#include "vkgrad/ops/spmm.h"

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/spmm.h"
#include "vkgrad/runtime/sparse.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Shape;
using ops::TensorView;
using ops::Write;

// u32 words `pad` words into their own buffer, so that kernels must honour the view offset.
struct Words {
  vk::Buffer buffer;
  int64_t n = 0, pad = 0;
  TensorView view() const { return ops::view(buffer, {n}, uint64_t(pad) * 4, DType::U32); }
};

Words words(vk::Context& ctx, std::vector<uint32_t> values, int64_t pad) {
  if (values.empty()) values.push_back(0);  // an edgeless graph's arrays: one unused word
  std::vector<uint32_t> all(size_t(pad), 0xDEADBEEFu);
  all.insert(all.end(), values.begin(), values.end());
  return {uploadWords(ctx, all), int64_t(values.size()), pad};
}

// A Placed's view naming its own buffer, wherever the Placed now lives.
TensorView viewOf(const Placed& p) {
  TensorView v = p.view;
  v.buffer = &p.buffer;
  return v;
}

std::vector<float> nans(int64_t n) {
  return std::vector<float>(size_t(n), std::nanf(""));
}

// A Csr and its transpose on the device.
struct DeviceGraph {
  graph::Csr csr;
  std::vector<uint32_t> destinations, t_offsets, t_edges, t_destinations;
  Words d_offsets, d_sources, d_destinations, d_t_offsets, d_t_edges, d_t_destinations;

  DeviceGraph(vk::Context& ctx, graph::Csr c) : csr(std::move(c)) {
    destinations = csr.destinations();
    csr.transpose(t_offsets, t_edges);
    d_offsets = words(ctx, csr.offsets, 1);
    d_sources = words(ctx, csr.sources, 2);
    d_destinations = words(ctx, destinations, 3);
    d_t_offsets = words(ctx, t_offsets, 5);
    d_t_edges = words(ctx, t_edges, 1);
    for (const uint32_t e : t_edges) t_destinations.push_back(destinations[e]);
    d_t_destinations = words(ctx, t_destinations, 2);
  }
};

struct GraphCase {
  const char* name;
  int64_t nodes;
  std::vector<std::pair<uint32_t, uint32_t>> edges;  // (source, destination)
};

// 41 nodes with 160 random edges among the first 33 (so 34..40 are isolated, and some of the
// first ones may be), 5 self-loops and 4 duplicated edges.
GraphCase smallGraph(Rng& rng) {
  GraphCase c{"small", 41, {}};
  for (int k = 0; k < 160; ++k) c.edges.push_back({rng.below(33), rng.below(33)});
  for (uint32_t v : {0u, 3u, 3u, 17u, 32u}) c.edges.push_back({v, v});
  for (int k = 0; k < 4; ++k) c.edges.push_back(c.edges[size_t(rng.below(160))]);
  return c;
}

// Node 5 has 3000 incoming edges, node 7 3000 outgoing ones (long rows of the transpose).
GraphCase hubGraph(Rng& rng) {
  GraphCase c{"hub", 3011, {}};
  for (int k = 0; k < 3000; ++k) c.edges.push_back({rng.below(3011), 5});
  for (int k = 0; k < 3000; ++k) c.edges.push_back({7, rng.below(3011)});
  for (int k = 0; k < 500; ++k) c.edges.push_back({rng.below(3011), rng.below(3011)});
  return c;
}

struct Features {
  int64_t cols, heads;  // heads 0: no weights
  int64_t at;           // 0: x, dy, y, dx 16-byte aligned (the vec4 kernel where F / H allows)
};
// F / H = 7, 1, 3, 2: one feature per invocation. F / H = 8, 4, 4: 4 per invocation, and the
// same shape at odd offsets back on one.
const Features kFeatures[] = {{7, 0, 1}, {1, 1, 3}, {7, 1, 2}, {6, 2, 1},  {9, 3, 1},
                              {6, 3, 2}, {8, 0, 0}, {8, 2, 0}, {12, 3, 0}, {8, 2, 1}};

class SpmmTest : public VkTest {
 protected:
  // Every pass, overwriting and accumulating, against the reference.
  void checkAll(const GraphCase& gc, double tolerance);
  Rng rng_;
};

void SpmmTest::checkAll(const GraphCase& gc, double tolerance) {
  const DeviceGraph dg(ctx(), graph::csrFromEdges(gc.name, gc.nodes, gc.edges));
  const int64_t n = gc.nodes, e = dg.csr.edges();
  for (const auto [cols, heads, at] : kFeatures) {
    SCOPED_TRACE(std::string(gc.name) + ", F " + std::to_string(cols) + ", H " +
                 std::to_string(heads) + ", at " + std::to_string(at));
    const Shape xs{n, cols};
    const auto x = rng_.normal(size_t(n * cols)), dy = rng_.normal(size_t(n * cols));
    const auto init = rng_.normal(size_t(n * cols));
    const bool weighted = heads > 0 && e > 0;
    if (heads > 0 && !weighted) continue;  // no edge to weigh
    const int64_t h = weighted ? heads : 1;
    const Shape ws = cols == 1 ? Shape{e} : Shape{e, h};  // (E) and (E, 1) both mean H = 1
    const auto w = weighted ? rng_.uniform(size_t(e * h), -1.0f, 1.0f) : std::vector<float>{};
    const float* wp = weighted ? w.data() : nullptr;
    const auto want_y = ops::ref::spmm(dg.csr.offsets, dg.csr.sources, wp, h, x, cols);
    const auto want_dx = ops::ref::spmmTransposed(dg.csr.offsets, dg.csr.sources, wp, h, dy, cols);

    const Placed px = placed(ctx(), xs, x, at * 3), pdy = placed(ctx(), xs, dy, at * 5);
    const Placed pw = placed(ctx(), weighted ? ws : Shape{1}, weighted ? w : std::vector{0.0f}, 5);
    const TensorView wv = weighted ? viewOf(pw) : TensorView{};
    const Placed y = placed(ctx(), xs, nans(n * cols), at), y_acc = placed(ctx(), xs, init, at * 2);
    const Placed dx = placed(ctx(), xs, nans(n * cols), at * 7),
                 dx_acc = placed(ctx(), xs, init, at * 6);
    vk::Recorder rec(ctx());
    ops::spmm(rec, dg.d_offsets.view(), dg.d_sources.view(), wv, viewOf(px), viewOf(y));
    ops::spmm(rec, dg.d_offsets.view(), dg.d_sources.view(), wv, viewOf(px), viewOf(y_acc),
              Write::Accumulate);
    ops::spmmTransposed(rec, dg.d_t_offsets.view(), dg.d_t_edges.view(), dg.d_t_destinations.view(),
                        wv, viewOf(pdy), viewOf(dx));
    ops::spmmTransposed(rec, dg.d_t_offsets.view(), dg.d_t_edges.view(), dg.d_t_destinations.view(),
                        wv, viewOf(pdy), viewOf(dx_acc), Write::Accumulate);
    std::vector<float> dw_init;
    const Placed dw = placed(ctx(), weighted ? ws : Shape{1}, nans(weighted ? e * h : 1), 3);
    if (weighted) dw_init = rng_.normal(size_t(e * h));
    const Placed dw_acc =
        placed(ctx(), weighted ? ws : Shape{1}, weighted ? dw_init : std::vector{0.0f}, 2);
    if (weighted) {
      ops::spmmWeightsBackward(rec, dg.d_sources.view(), dg.d_destinations.view(), viewOf(px),
                               viewOf(pdy), viewOf(dw));
      ops::spmmWeightsBackward(rec, dg.d_sources.view(), dg.d_destinations.view(), viewOf(px),
                               viewOf(pdy), viewOf(dw_acc), Write::Accumulate);
    }
    rec.submit();
    if (e == 0) {  // every row is empty: exactly 0, or exactly what was there
      EXPECT_EQ(readPlaced(ctx(), y), std::vector<float>(size_t(n * cols), 0.0f));
      EXPECT_EQ(readPlaced(ctx(), dx_acc), init);
      continue;
    }
    EXPECT_TRUE(allClose(readPlaced(ctx(), y), want_y, tolerance)) << "y";
    EXPECT_TRUE(accumulatedClose(readPlaced(ctx(), y_acc), want_y, init, tolerance)) << "y +=";
    EXPECT_TRUE(allClose(readPlaced(ctx(), dx), want_dx, tolerance)) << "dx";
    EXPECT_TRUE(accumulatedClose(readPlaced(ctx(), dx_acc), want_dx, init, tolerance)) << "dx +=";
    if (weighted) {
      const auto want_dw =
          ops::ref::spmmWeightsBackward(dg.csr.offsets, dg.csr.sources, h, x, dy, cols);
      EXPECT_TRUE(allClose(readPlaced(ctx(), dw), want_dw, tolerance)) << "dw";
      EXPECT_TRUE(accumulatedClose(readPlaced(ctx(), dw_acc), want_dw, dw_init, tolerance))
          << "dw +=";
    }
  }
}

// Sums of up to 13 products of normal and uniform floats, accumulated in float on the device
// in edge order and in double on the host: each float add rounds at 6e-8 of the partial sum,
// so 1e-6 of the largest output is ~10x above that and far below a missed or doubled edge.
TEST_F(SpmmTest, SmallGraphMatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  checkAll(smallGraph(rng_), 1e-6);
}

// A 3000-term sum rounds up to ~3000 times; its random-walk error is ~sqrt(3000) 6e-8 of the
// partial sums, ~5e-6 of the row: 2e-5 allows that, while one missing edge of 3000 would be
// ~1e-2 of the row.
TEST_F(SpmmTest, ANodeWithThousandsOfEdgesMatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  checkAll(hubGraph(rng_), 2e-5);
}

// 64 nodes of 4500 incoming edges each over 512 features: on lavapipe's 8 workgroups of 64
// lanes each lane summed 16 rows, ~72,000 loops, past the 65535 at which llvmpipe silently ends
// an invocation, and kept the poison in its later rows. 4500-term sums: tolerance as above.
TEST_F(SpmmTest, ManyEdgesPerNodeStayWithinACpuLanesLoopBudget) {
  SCOPED_TRACE(rng_.describe());
  const int64_t n = 64, cols = 512, degree = 4500;
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  for (uint32_t j = 0; j < uint32_t(n); ++j)
    for (int64_t k = 0; k < degree; ++k) edges.push_back({rng_.below(uint32_t(n)), j});
  const DeviceGraph dg(ctx(), graph::csrFromEdges("dense", n, edges));
  const auto x = rng_.normal(size_t(n * cols));
  const Placed px = placed(ctx(), {n, cols}, x, 0), y = placed(ctx(), {n, cols}, nans(n * cols), 0);
  vk::Recorder rec(ctx());
  ops::spmm(rec, dg.d_offsets.view(), dg.d_sources.view(), {}, viewOf(px), viewOf(y));
  rec.submit();
  EXPECT_TRUE(allClose(readPlaced(ctx(), y),
                       ops::ref::spmm(dg.csr.offsets, dg.csr.sources, nullptr, 1, x, cols), 2e-5));
}

TEST_F(SpmmTest, AnEdgelessGraphGivesZeros) {
  checkAll({"edgeless", 9, {}}, 0.0);
}

// The same inputs give the same bits: each output is one sequential sum in a fixed order.
TEST_F(SpmmTest, TwoRunsGiveTheSameBits) {
  SCOPED_TRACE(rng_.describe());
  const GraphCase gc = hubGraph(rng_);
  const DeviceGraph dg(ctx(), graph::csrFromEdges(gc.name, gc.nodes, gc.edges));
  const int64_t n = gc.nodes, e = dg.csr.edges(), h = 2;
  for (const int64_t cols : {6, 8}) {  // one feature per invocation, and 4
    SCOPED_TRACE(cols);
    const Shape xs{n, cols};
    const Placed x = placed(ctx(), xs, rng_.normal(size_t(n * cols)), 0);
    const Placed w = placed(ctx(), {e, h}, rng_.uniform(size_t(e * h)), 1);
    auto run = [&] {
      const Placed y = placed(ctx(), xs, nans(n * cols), 4),
                   dx = placed(ctx(), xs, nans(n * cols), 8);
      const Placed dw = placed(ctx(), {e, h}, nans(e * h), 3);
      vk::Recorder rec(ctx());
      ops::spmm(rec, dg.d_offsets.view(), dg.d_sources.view(), viewOf(w), viewOf(x), viewOf(y));
      ops::spmmTransposed(rec, dg.d_t_offsets.view(), dg.d_t_edges.view(),
                          dg.d_t_destinations.view(), viewOf(w), viewOf(x), viewOf(dx));
      ops::spmmWeightsBackward(rec, dg.d_sources.view(), dg.d_destinations.view(), viewOf(x),
                               viewOf(x), viewOf(dw));
      rec.submit();
      std::vector<float> all = readPlaced(ctx(), y);
      for (const Placed* p : {&dx, &dw}) {
        const auto v = readPlaced(ctx(), *p);
        all.insert(all.end(), v.begin(), v.end());
      }
      return all;
    };
    const std::vector<float> first = run(), second = run();
    ASSERT_EQ(first.size(), second.size());
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 4), 0);
  }
}

// x, y, dy, dx, the weights and dw in f16 or bf16, and mixed with f32 (f32 weights with bf16
// features; f32 features with bf16 weights, which also keeps an aligned F = 8 off the vec4
// kernel), on the small graph (isolated nodes: empty rows) with no weights and H = 1, 2, 3:
// every pass, overwriting and accumulating, against the references on the rounded inputs. x
// sits one element into its buffer (a 2-byte offset in 16 bits). The tolerance is the f32
// test's 1e-6 (the sums stay f32); closeInFormat adds the store's one rounding.
TEST_F(SpmmTest, SixteenBitTensorsMatchCpu) {
  SCOPED_TRACE(rng_.describe());
  const GraphCase gc = smallGraph(rng_);
  const DeviceGraph dg(ctx(), graph::csrFromEdges(gc.name, gc.nodes, gc.edges));
  const int64_t n = gc.nodes, e = dg.csr.edges();
  struct Formats {
    DType x, w, out;  // x and dy; the weights and dw; y and dx
  };
  const Formats formats[] = {{DType::F16, DType::F16, DType::F16},
                             {DType::BF16, DType::BF16, DType::BF16},
                             {DType::BF16, DType::F32, DType::BF16},
                             {DType::F32, DType::BF16, DType::F32}};
  const std::pair<int64_t, int64_t> features[] = {{7, 0}, {6, 2}, {9, 3}, {8, 2}};  // F, H
  for (const Formats f : formats)
    for (const auto& [cols, heads] : features) {
      SCOPED_TRACE(testing::Message()
                   << "x " << ops::dtypeName(f.x) << ", w " << ops::dtypeName(f.w) << ", out "
                   << ops::dtypeName(f.out) << ", F " << cols << ", H " << heads);
      const Shape xs{n, cols};
      const size_t nx = size_t(n * cols);
      const bool weighted = heads > 0;
      const int64_t h = weighted ? heads : 1;
      const auto x = ops::ref::roundTo(f.x, rng_.normal(nx));
      const auto dy = ops::ref::roundTo(f.x, rng_.normal(nx));
      const auto init = ops::ref::roundTo(f.out, rng_.normal(nx));
      const auto w = ops::ref::roundTo(f.w, rng_.uniform(size_t(e * h), -1.0f, 1.0f));
      const auto dw_init = ops::ref::roundTo(f.w, rng_.normal(size_t(e * h)));
      const float* wp = weighted ? w.data() : nullptr;
      std::vector<float> shifted = {1.0f};
      shifted.insert(shifted.end(), x.begin(), x.end());
      const DeviceTensor tx = upload(ctx(), {int64_t(nx) + 1}, shifted, f.x);
      const TensorView xv = ops::view(tx.buffer, xs, ops::dtypeBytes(f.x), f.x);
      const DeviceTensor tdy = upload(ctx(), xs, dy, f.x), tw = upload(ctx(), {e, h}, w, f.w);
      const DeviceTensor y = poisoned(ctx(), xs, f.out), y_acc = upload(ctx(), xs, init, f.out);
      const DeviceTensor dx = poisoned(ctx(), xs, f.out), dx_acc = upload(ctx(), xs, init, f.out);
      const DeviceTensor dw = poisoned(ctx(), {e, h}, f.w),
                         dw_acc = upload(ctx(), {e, h}, dw_init, f.w);
      const TensorView wv = weighted ? tw.view() : TensorView{};
      vk::Recorder rec(ctx());
      for (Write wr : {Write::Overwrite, Write::Accumulate}) {
        const bool over = wr == Write::Overwrite;
        ops::spmm(rec, dg.d_offsets.view(), dg.d_sources.view(), wv, xv,
                  over ? y.view() : y_acc.view(), wr);
        ops::spmmTransposed(rec, dg.d_t_offsets.view(), dg.d_t_edges.view(),
                            dg.d_t_destinations.view(), wv, tdy.view(),
                            over ? dx.view() : dx_acc.view(), wr);
        if (weighted)
          ops::spmmWeightsBackward(rec, dg.d_sources.view(), dg.d_destinations.view(), xv,
                                   tdy.view(), over ? dw.view() : dw_acc.view(), wr);
      }
      rec.submit();
      const auto plus = [](std::vector<float> a, const std::vector<float>& b) {
        for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
        return a;
      };
      const auto want_y = ops::ref::spmm(dg.csr.offsets, dg.csr.sources, wp, h, x, cols);
      const auto want_dx =
          ops::ref::spmmTransposed(dg.csr.offsets, dg.csr.sources, wp, h, dy, cols);
      EXPECT_TRUE(closeInFormat(download(ctx(), y), want_y, f.out, 1e-6)) << "y";
      EXPECT_TRUE(closeInFormat(download(ctx(), y_acc), plus(want_y, init), f.out, 1e-6)) << "y +=";
      EXPECT_TRUE(closeInFormat(download(ctx(), dx), want_dx, f.out, 1e-6)) << "dx";
      EXPECT_TRUE(closeInFormat(download(ctx(), dx_acc), plus(want_dx, init), f.out, 1e-6))
          << "dx +=";
      if (weighted) {
        const auto want_dw =
            ops::ref::spmmWeightsBackward(dg.csr.offsets, dg.csr.sources, h, x, dy, cols);
        EXPECT_TRUE(closeInFormat(download(ctx(), dw), want_dw, f.w, 1e-6)) << "dw";
        EXPECT_TRUE(closeInFormat(download(ctx(), dw_acc), plus(want_dw, dw_init), f.w, 1e-6))
            << "dw +=";
      }
    }
}

TEST_F(SpmmTest, RejectsBadShapesBeforeRecording) {
  const Words offsets = words(ctx(), {0, 2, 3, 3, 4}, 0), sources = words(ctx(), {1, 2, 0, 3}, 0);
  auto x = poisoned(ctx(), {4, 6}), y = poisoned(ctx(), {4, 6}), x5 = poisoned(ctx(), {5, 6}),
       w4 = poisoned(ctx(), {4, 4}), w3 = poisoned(ctx(), {3}), y7 = poisoned(ctx(), {4, 7});
  const TensorView none;
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::spmm(rec, offsets.view(), sources.view(), none, x5.view(), y.view());
      },
      "spmm: x (5,6) over 4 nodes and 4 edges: x must be (4, F), one row per node");
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::spmm(rec, offsets.view(), sources.view(), w4.view(), x.view(), y.view());
      },
      "spmm: x (4,6), weights (4,4) over 4 nodes and 4 edges: F = 6 is not a multiple of H = 4");
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::spmm(rec, offsets.view(), sources.view(), w3.view(), x.view(), y.view());
      },
      "weights must be (4) or (4, H), one row per edge");
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::spmm(rec, offsets.view(), sources.view(), none, x.view(), y7.view());
      },
      "spmm: offsets (5), sources (4), x (4,6), y (4,7): y must have the shape of x");
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::spmm(rec, offsets.view(), sources.view(), none, x.view(), x.view());
      },
      "spmm");  // y may not alias x: rows are read after others were written
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::spmm(rec, sources.view(), offsets.view(), none, x.view(), y.view());
      },
      "x must be (3, F)");
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::spmm(rec, offsets.view(), x.view(), none, x.view(), y.view());
      },
      "spmm: sources must be u32, got f32");
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::spmmWeightsBackward(rec, sources.view(), sources.view(), x.view(), y.view(),
                                 w4.view());
      },
      "spmmWeightsBackward: x (4,6), weights (4,4) over 4 nodes and 4 edges: F = 6 is not a "
      "multiple of H = 4");
}

}  // namespace
}  // namespace vkgrad::test

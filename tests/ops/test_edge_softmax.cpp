// Edge softmax (ops/edge_softmax.h) against the CPU reference on a graph with everything a
// real one has: isolated nodes, self-loops, duplicate edges, a node of 3000 incoming edges,
// for 1, 2 and 3 heads, at odd view offsets; the backward overwriting and accumulating; the
// same bits on every run; scores of +-80 finite; offsets the host never checked kept in
// bounds; f16 and bf16 tensors, mixed with f32; bad shapes refused before anything is recorded.
#include "vkgrad/ops/edge_softmax.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/edge_softmax.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/runtime/sparse.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Shape;
using ops::Write;

constexpr uint32_t kHub = 5;  // the node with kHubDegree incoming edges
constexpr uint32_t kHubDegree = 3000;

// 301 nodes: ~900 random edges, a self-loop on every 7th node, every 11th edge twice, the
// hub's 3000 edges (some duplicated by chance), and nodes 290..300 with no incoming edges.
std::vector<uint32_t> testOffsets(Rng& rng) {
  const uint32_t nodes = 301, receivers = 290;
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  for (uint32_t k = 0; k < 900; ++k) {
    edges.emplace_back(rng.below(nodes), rng.below(receivers));
    if (k % 11 == 0) edges.push_back(edges.back());
  }
  for (uint32_t j = 0; j < receivers; j += 7) edges.emplace_back(j, j);
  for (uint32_t k = 0; k < kHubDegree; ++k) edges.emplace_back(rng.below(nodes), kHub);
  return graph::csrFromEdges("test", nodes, edges).offsets;
}

std::vector<float> nans(size_t n) {
  return std::vector<float>(n, std::nanf(""));
}

// got against want one (node, head) at a time, each normalised by its own largest value (or
// by floor[i] over the node where given): an error in a hub's small alphas is not hidden by
// another node's alpha of 1.
::testing::AssertionResult perNodeClose(const std::vector<float>& got,
                                        const std::vector<float>& want,
                                        const std::vector<uint32_t>& offsets, int64_t heads,
                                        double tolerance, const std::vector<float>& floor = {}) {
  const size_t h_n = size_t(heads);
  for (size_t j = 0; j + 1 < offsets.size(); ++j)
    for (size_t h = 0; h < h_n; ++h) {
      std::vector<float> g, w;
      double f = 1e-30;
      for (uint32_t e = offsets[j]; e < offsets[j + 1]; ++e) {
        g.push_back(got[e * h_n + h]);
        w.push_back(want[e * h_n + h]);
        if (!floor.empty()) f = std::max(f, double(floor[e * h_n + h]));
      }
      const ::testing::AssertionResult r = allCloseOnScale(g, w, f, tolerance);
      if (!r)
        return ::testing::AssertionFailure()
               << "node " << j << ", head " << h << ": " << r.message();
    }
  return ::testing::AssertionSuccess();
}

class EdgeSoftmaxTest : public VkTest {
 protected:
  Rng rng_;

  ops::TensorView offsetsView(const vk::Buffer& b, size_t n) {
    return ops::view(b, {int64_t(n)}, 0, DType::U32);
  }

  std::vector<float> forward(const std::vector<uint32_t>& offsets, const std::vector<float>& scores,
                             int64_t heads, int at) {
    const vk::Buffer off = uploadWords(ctx(), offsets);
    const Shape shape{int64_t(scores.size()) / heads, heads};
    const Placed s = placed(ctx(), shape, scores, at),
                 a = placed(ctx(), shape, nans(scores.size()), at + 1);
    vk::Recorder rec(ctx());
    ops::edgeSoftmax(rec, offsetsView(off, offsets.size()), s.view, a.view);
    rec.submit();
    return readPlaced(ctx(), a);
  }
};

// alpha against the double reference: 2e-6 of each node's largest alpha allows the float
// exp (a few ulp) and the 1/sum rounding; a wrong max or a missed edge is off by far more.
TEST_F(EdgeSoftmaxTest, ForwardMatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  const std::vector<uint32_t> offsets = testOffsets(rng_);
  const size_t edges = offsets.back();
  int at = 0;
  for (int64_t heads : {1, 2, 3}) {
    SCOPED_TRACE(heads);
    const std::vector<float> scores = rng_.normal(edges * size_t(heads), 0.0f, 3.0f);
    const std::vector<float> got = forward(offsets, scores, heads, at++);
    const std::vector<float> want =
        ops::ref::edgeSoftmax(offsets, scores, heads, nans(scores.size()));
    EXPECT_TRUE(perNodeClose(got, want, offsets, heads, 2e-6));
    // Each node's alphas sum to 1 (those with edges).
    for (size_t j = 0; j + 1 < offsets.size(); ++j)
      for (int64_t h = 0; h < heads; ++h) {
        if (offsets[j] == offsets[j + 1]) continue;
        double sum = 0;
        for (uint32_t e = offsets[j]; e < offsets[j + 1]; ++e)
          sum += got[e * size_t(heads) + size_t(h)];
        EXPECT_NEAR(sum, 1.0, 1e-5) << "node " << j;
      }
  }
}

// Scores of +-80 (exp(80) overflows nothing after the max is subtracted, exp(-160) underflows
// to 0): every alpha finite and the reference's.
TEST_F(EdgeSoftmaxTest, LargeScoresStayFinite) {
  SCOPED_TRACE(rng_.describe());
  const std::vector<uint32_t> offsets = testOffsets(rng_);
  const int64_t heads = 2;
  std::vector<float> scores(offsets.back() * size_t(heads));
  for (float& s : scores) s = rng_.below(2) ? 80.0f : -80.0f;
  for (size_t i = 0; i < scores.size(); i += 3) scores[i] += rng_.uniform(1, -1.0f, 1.0f)[0];
  const std::vector<float> got = forward(offsets, scores, heads, 3);
  for (float a : got) ASSERT_TRUE(std::isfinite(a)) << a;
  EXPECT_TRUE(perNodeClose(got, ops::ref::edgeSoftmax(offsets, scores, heads, nans(scores.size())),
                           offsets, heads, 2e-6));
}

// The same inputs give the same bits, forward and backward (fixed-order sums, no atomics).
TEST_F(EdgeSoftmaxTest, RunsAreBitIdentical) {
  SCOPED_TRACE(rng_.describe());
  const std::vector<uint32_t> offsets = testOffsets(rng_);
  const int64_t heads = 3;
  const size_t n = offsets.back() * size_t(heads);
  const Shape shape{int64_t(offsets.back()), heads};
  const vk::Buffer off = uploadWords(ctx(), offsets);
  const DeviceTensor s = upload(ctx(), shape, rng_.normal(n, 0.0f, 4.0f)),
                     d = upload(ctx(), shape, rng_.normal(n));
  auto run = [&] {
    const DeviceTensor a = poisoned(ctx(), shape), ds = poisoned(ctx(), shape);
    vk::Recorder rec(ctx());
    ops::edgeSoftmax(rec, offsetsView(off, offsets.size()), s.view(), a.view());
    ops::edgeSoftmaxBackward(rec, offsetsView(off, offsets.size()), a.view(), d.view(), ds.view());
    rec.submit();
    std::vector<float> out = download(ctx(), a), grad = download(ctx(), ds);
    out.insert(out.end(), grad.begin(), grad.end());
    std::vector<uint32_t> bits(out.size());
    std::memcpy(bits.data(), out.data(), out.size() * 4);
    return bits;
  };
  const std::vector<uint32_t> first = run();
  EXPECT_EQ(first, run());
  EXPECT_EQ(first, run());
}

// dscores against the reference, overwriting (poisoned) and accumulating onto random values.
// Per node, normalised by the largest |alpha dalpha| term: the gradient can cancel to far
// less than its terms. 2e-6 allows the float products and the Kahan-summed dot product.
TEST_F(EdgeSoftmaxTest, BackwardMatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  const std::vector<uint32_t> offsets = testOffsets(rng_);
  const vk::Buffer off = uploadWords(ctx(), offsets);
  int at = 1;
  for (int64_t heads : {1, 2, 3}) {
    SCOPED_TRACE(heads);
    const size_t n = offsets.back() * size_t(heads);
    const Shape shape{int64_t(offsets.back()), heads};
    const std::vector<float> alpha =
        ops::ref::edgeSoftmax(offsets, rng_.normal(n, 0.0f, 2.0f), heads, nans(n));
    const std::vector<float> dalpha = rng_.normal(n), init = rng_.normal(n);
    std::vector<float> scale(n);
    for (size_t i = 0; i < n; ++i) scale[i] = alpha[i] * std::fabs(dalpha[i]);
    const Placed a = placed(ctx(), shape, alpha, at), d = placed(ctx(), shape, dalpha, at + 1),
                 over = placed(ctx(), shape, nans(n), at + 2),
                 acc = placed(ctx(), shape, init, at + 3);
    vk::Recorder rec(ctx());
    ops::edgeSoftmaxBackward(rec, offsetsView(off, offsets.size()), a.view, d.view, over.view);
    ops::edgeSoftmaxBackward(rec, offsetsView(off, offsets.size()), a.view, d.view, acc.view,
                             Write::Accumulate);
    rec.submit();
    const std::vector<float> zeros(n, 0.0f);
    const std::vector<float> want =
        ops::ref::edgeSoftmaxBackward(offsets, alpha, dalpha, heads, zeros);
    EXPECT_TRUE(perNodeClose(readPlaced(ctx(), over), want, offsets, heads, 2e-6, scale));
    EXPECT_TRUE(accumulatedClose(readPlaced(ctx(), acc), want, init, 1e-6));
    ++at;
  }
}

// 64 nodes of 4096 incoming edges each and 9 heads, forward and backward: on lavapipe's 8
// workgroups of 8 lanes a lane looped ~74,000 times, past the 65535 at which llvmpipe
// silently ends an invocation, and the later nodes kept the poison. Tolerances as above.
TEST_F(EdgeSoftmaxTest, ManyEdgesOnManyHeadsStayWithinACpuLanesLoopBudget) {
  SCOPED_TRACE(rng_.describe());
  const uint32_t nodes = 64, degree = 4096;
  const int64_t heads = 9;
  std::vector<uint32_t> offsets(nodes + 1);
  for (uint32_t j = 0; j <= nodes; ++j) offsets[j] = j * degree;
  const size_t n = offsets.back() * size_t(heads);
  const std::vector<float> scores = rng_.normal(n, 0.0f, 3.0f);
  const std::vector<float> alpha = ops::ref::edgeSoftmax(offsets, scores, heads, nans(n));
  EXPECT_TRUE(perNodeClose(forward(offsets, scores, heads, 1), alpha, offsets, heads, 2e-6));

  const std::vector<float> dalpha = rng_.normal(n);
  std::vector<float> scale(n);
  for (size_t i = 0; i < n; ++i) scale[i] = alpha[i] * std::fabs(dalpha[i]);
  const Shape shape{int64_t(offsets.back()), heads};
  const vk::Buffer off = uploadWords(ctx(), offsets);
  const Placed a = placed(ctx(), shape, alpha, 2), d = placed(ctx(), shape, dalpha, 3),
               ds = placed(ctx(), shape, nans(n), 1);
  vk::Recorder rec(ctx());
  ops::edgeSoftmaxBackward(rec, offsetsView(off, offsets.size()), a.view, d.view, ds.view);
  rec.submit();
  const std::vector<float> want =
      ops::ref::edgeSoftmaxBackward(offsets, alpha, dalpha, heads, std::vector<float>(n, 0.0f));
  EXPECT_TRUE(perNodeClose(readPlaced(ctx(), ds), want, offsets, heads, 2e-6, scale));
}

// Every tensor in f16 or bf16, and inputs and outputs in different formats, on the test graph
// (isolated nodes, the hub) with 3 heads. The references run on the rounded inputs, and the
// backward reads alpha as the forward stored it, as a training step does. The tolerances are
// the f32 tests' (the sums stay f32; closeInFormat adds the one rounding of the store), over
// the largest output rather than per node: the store's rounding is relative to each element.
TEST_F(EdgeSoftmaxTest, SixteenBitTensorsMatchCpu) {
  SCOPED_TRACE(rng_.describe());
  const std::vector<uint32_t> offsets = testOffsets(rng_);
  const vk::Buffer off = uploadWords(ctx(), offsets);
  const ops::TensorView o = offsetsView(off, offsets.size());
  const int64_t heads = 3;
  const size_t n = offsets.back() * size_t(heads);
  const Shape shape{int64_t(offsets.back()), heads};
  struct Formats {
    DType in, out;
  };
  for (const Formats f : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                          Formats{DType::F32, DType::BF16}, Formats{DType::BF16, DType::F32}}) {
    SCOPED_TRACE(testing::Message() << ops::dtypeName(f.in) << " -> " << ops::dtypeName(f.out));
    const std::vector<float> scores = ops::ref::roundTo(f.in, rng_.normal(n, 0.0f, 2.0f));
    const std::vector<float> dalpha = ops::ref::roundTo(f.in, rng_.normal(n));
    const std::vector<float> init = ops::ref::roundTo(f.out, rng_.normal(n));
    // scores one element into its buffer: a 2-byte offset for a 16-bit view.
    std::vector<float> shifted = {1.0f};
    shifted.insert(shifted.end(), scores.begin(), scores.end());
    const DeviceTensor s = upload(ctx(), {int64_t(n) + 1}, shifted, f.in);
    const ops::TensorView sv = ops::view(s.buffer, shape, ops::dtypeBytes(f.in), f.in);
    const DeviceTensor d = upload(ctx(), shape, dalpha, f.in), a = poisoned(ctx(), shape, f.out),
                       ds = poisoned(ctx(), shape, f.out), acc = upload(ctx(), shape, init, f.out);
    vk::Recorder rec(ctx());
    ops::edgeSoftmax(rec, o, sv, a.view());
    ops::edgeSoftmaxBackward(rec, o, a.view(), d.view(), ds.view());
    ops::edgeSoftmaxBackward(rec, o, a.view(), d.view(), acc.view(), Write::Accumulate);
    rec.submit();
    const std::vector<float> alpha = download(ctx(), a);
    EXPECT_TRUE(
        closeInFormat(alpha, ops::ref::edgeSoftmax(offsets, scores, heads, nans(n)), f.out, 2e-6));
    const std::vector<float> zeros(n, 0.0f);
    EXPECT_TRUE(closeInFormat(download(ctx(), ds),
                              ops::ref::edgeSoftmaxBackward(offsets, alpha, dalpha, heads, zeros),
                              f.out, 2e-6));
    EXPECT_TRUE(closeInFormat(download(ctx(), acc),
                              ops::ref::edgeSoftmaxBackward(offsets, alpha, dalpha, heads, init),
                              f.out, 2e-6));
  }
}

// Offsets the host never saw: a first one above 0, one past E, decreasing ones. The kernels
// clamp them (the header's contract, which the reference follows). Scores sit between NaN
// pads, so a read outside them would bring NaN in; outputs sit between sentinels, so a write
// outside them shows. Edges in one range match the reference, edges in two (written by two
// workgroups) are finite, and edge 0, in none, keeps its poison.
TEST_F(EdgeSoftmaxTest, BadOffsetsStayInBounds) {
  SCOPED_TRACE(rng_.describe());
  const int64_t heads = 2, edges = 10, pad = 16;
  // Clamped ranges: [1,3), [3,3), [2,6), [6,10), [10,10), [9,10), [10,10).
  const std::vector<uint32_t> offsets = {1, 3, 2, 6, 1000, 9, 0xffffffffu, 4};
  const std::vector<int> cover = {0, 1, 2, 1, 1, 1, 1, 1, 1, 2};
  const size_t n = size_t(edges * heads);
  const Shape shape{edges, heads};
  const std::vector<float> scores = rng_.normal(n), dalpha = rng_.normal(n);
  const vk::Buffer off = uploadWords(ctx(), offsets);
  const DeviceTensor s = paddedUpload(ctx(), scores, pad), d = paddedUpload(ctx(), dalpha, pad);
  const ops::TensorView sv = ops::view(s.buffer, shape, pad * 4),
                        dv = ops::view(d.buffer, shape, pad * 4);
  const Placed a = placed(ctx(), shape, nans(n), 3), ds = placed(ctx(), shape, nans(n), 5);
  vk::Recorder rec(ctx());
  ops::edgeSoftmax(rec, offsetsView(off, offsets.size()), sv, a.view);
  ops::edgeSoftmaxBackward(rec, offsetsView(off, offsets.size()), sv, dv, ds.view);
  rec.submit();
  const std::vector<float> want_a = ops::ref::edgeSoftmax(offsets, scores, heads, nans(n));
  const std::vector<float> got_a = readPlaced(ctx(), a), got_d = readPlaced(ctx(), ds);
  for (size_t i = 0; i < n; ++i) {
    const int c = cover[i / size_t(heads)];
    if (c == 0) {
      EXPECT_TRUE(std::isnan(got_a[i]) && std::isnan(got_d[i])) << "edge " << i / 2 << " written";
    } else {
      EXPECT_TRUE(std::isfinite(got_a[i]) && std::isfinite(got_d[i])) << i;
      if (c == 1) {
        EXPECT_NEAR(got_a[i], want_a[i], 1e-6) << i;
      }
    }
  }
  EXPECT_TRUE(padsUntouched(download(ctx(), s), pad));
}

TEST_F(EdgeSoftmaxTest, BadShapesAreShapeErrors) {
  const vk::Buffer off = uploadWords(ctx(), std::vector<uint32_t>{0, 2, 5});
  const ops::TensorView o = offsetsView(off, 3);
  const DeviceTensor s = upload(ctx(), {5, 2}, rng_.normal(10)), a = poisoned(ctx(), {5, 2}),
                     wrong = poisoned(ctx(), {5, 3}), flat = poisoned(ctx(), {10});
  expectShapeError(
      ctx(), [&](vk::Recorder& rec) { ops::edgeSoftmax(rec, o, s.view(), wrong.view()); },
      "edgeSoftmax: alpha (5,3) f32 must be f32, f16 or bf16 shaped like (5,2)");
  expectShapeError(
      ctx(), [&](vk::Recorder& rec) { ops::edgeSoftmax(rec, o, flat.view(), flat.view()); },
      "edgeSoftmax: offsets (3), scores (10): scores must be (edges, heads)");
  expectShapeError(
      ctx(), [&](vk::Recorder& rec) { ops::edgeSoftmax(rec, s.view(), s.view(), a.view()); },
      "edgeSoftmax: offsets (5,2), scores (5,2): offsets must be u32");
  expectShapeError(
      ctx(), [&](vk::Recorder& rec) { ops::edgeSoftmax(rec, o, s.view(), s.view()); },
      "edgeSoftmax: alpha");  // alpha overlaps scores
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::edgeSoftmaxBackward(rec, o, a.view(), s.view(), wrong.view());
      },
      "edgeSoftmaxBackward: dscores (5,3) f32 must be f32, f16 or bf16 shaped like (5,2)");
}

}  // namespace
}  // namespace vkgrad::test

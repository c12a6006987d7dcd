// Segment pooling (ops/segment_pool.h) against the CPU reference: sum, mean and max over a
// batch of graphs with empty ones and one of 3000 nodes, F not a multiple of 4, at odd view
// offsets; max's ties (the first node wins) and NaNs; the backward overwriting and
// accumulating; f16 and bf16 tensors, mixed with f32; the same bits every run; segments the
// host never checked kept in bounds; bad shapes refused before anything is recorded.
#include "vkgrad/ops/segment_pool.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/segment_pool.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Pool;
using ops::Shape;
using ops::Write;

constexpr uint32_t kPoison = 0xdeadbeefu;
constexpr Pool kKinds[] = {Pool::Sum, Pool::Mean, Pool::Max};

// 12 graphs: sizes 1..40 at random, graphs 0, 4 and 11 empty, graph 7 of 3000 nodes.
std::vector<uint32_t> testSegments(Rng& rng) {
  std::vector<uint32_t> s = {0};
  for (uint32_t g = 0; g < 12; ++g) {
    const uint32_t size = g == 0 || g == 4 || g == 11 ? 0 : g == 7 ? 3000 : 1 + rng.below(40);
    s.push_back(s.back() + size);
  }
  return s;
}

std::vector<float> nans(size_t n) {
  return std::vector<float>(n, std::nanf(""));
}

class SegmentPoolTest : public VkTest {
 protected:
  Rng rng_;

  static ops::TensorView words(const vk::Buffer& b, Shape shape) {
    return ops::view(b, shape, 0, DType::U32);
  }

  // Runs the forward; *argmax gets the device's argmax for Max.
  std::vector<float> forward(Pool kind, const std::vector<float>& x, int64_t features,
                             const std::vector<uint32_t>& segments, int at,
                             std::vector<uint32_t>* argmax = nullptr) {
    const int64_t graphs = int64_t(segments.size()) - 1;
    const Shape out_shape{graphs, features};
    const Placed px = placed(ctx(), {int64_t(x.size()) / features, features}, x, at),
                 po = placed(ctx(), out_shape, nans(size_t(graphs * features)), at + 1);
    const vk::Buffer seg = uploadWords(ctx(), segments);
    const vk::Buffer arg =
        uploadWords(ctx(), std::vector<uint32_t>(size_t(graphs * features), kPoison));
    vk::Recorder rec(ctx());
    ops::segmentPool(rec, kind, px.view, words(seg, {graphs + 1}), po.view,
                     kind == Pool::Max ? words(arg, out_shape) : ops::TensorView{});
    rec.submit();
    if (argmax) *argmax = downloadWords(ctx(), arg, size_t(graphs * features));
    return readPlaced(ctx(), po);
  }
};

// Sums of up to 3000 normal values, Kahan-compensated on the device and in double on the
// host: 1e-6 of the largest result. Max is exact, argmax too.
TEST_F(SegmentPoolTest, ForwardMatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  const std::vector<uint32_t> segments = testSegments(rng_);
  int at = 0;
  for (int64_t features : {1, 3, 7}) {
    SCOPED_TRACE(features);
    const std::vector<float> x = rng_.normal(segments.back() * size_t(features), 0.5f, 1.0f);
    for (Pool kind : kKinds) {
      SCOPED_TRACE(ops::poolName(kind));
      std::vector<uint32_t> got_arg, want_arg;
      const std::vector<float> got = forward(kind, x, features, segments, at, &got_arg);
      EXPECT_TRUE(allClose(got, ops::ref::segmentPool(kind, x, features, segments, &want_arg),
                           kind == Pool::Max ? 0.0 : 1e-6));
      if (kind == Pool::Max) {
        EXPECT_EQ(got_arg, want_arg);
      }
      // Empty graphs pool to 0.
      for (int64_t f = 0; f < features; ++f) EXPECT_EQ(got[size_t(4 * features + f)], 0.0f);
      at = (at + 3) % 7;
    }
  }
}

// Values from {-1, 0, 1}: ties everywhere, the first node wins; a NaN wins, the first one.
TEST_F(SegmentPoolTest, MaxTakesTheFirstOfTiesAndNaN) {
  SCOPED_TRACE(rng_.describe());
  const std::vector<uint32_t> segments = {0, 6, 6, 15, 40};
  const int64_t features = 3;
  std::vector<float> x(40 * features);
  for (float& v : x) v = float(int(rng_.below(3)) - 1);
  x[8 * features + 1] = std::nanf("");  // graph 2, feature 1: nodes 8 and 11 NaN
  x[11 * features + 1] = std::nanf("");
  x[6 * features + 1] = 5.0f;  // a larger number before them does not win either
  std::vector<uint32_t> got_arg, want_arg;
  const std::vector<float> got = forward(Pool::Max, x, features, segments, 2, &got_arg);
  EXPECT_TRUE(
      allClose(got, ops::ref::segmentPool(Pool::Max, x, features, segments, &want_arg), 0.0));
  EXPECT_EQ(got_arg, want_arg);
  EXPECT_TRUE(std::isnan(got[2 * features + 1]));
  EXPECT_EQ(got_arg[size_t(2 * features + 1)], 8u);
  EXPECT_EQ(got_arg[size_t(1 * features)], ops::kNoNode);  // graph 1 is empty
}

// dx against the reference, overwriting (poisoned) and accumulating onto random values; the
// argmax is the reference's. Mean divides in float: 1e-6.
TEST_F(SegmentPoolTest, BackwardMatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  const std::vector<uint32_t> segments = testSegments(rng_);
  const int64_t graphs = int64_t(segments.size()) - 1, nodes = segments.back();
  const vk::Buffer seg = uploadWords(ctx(), segments);
  int at = 1;
  for (int64_t features : {1, 3, 7}) {
    SCOPED_TRACE(features);
    const size_t n = size_t(nodes * features);
    const Shape x_shape{nodes, features}, out_shape{graphs, features};
    const std::vector<float> x = rng_.normal(n), dout = rng_.normal(size_t(graphs * features));
    const std::vector<float> init = rng_.normal(n);
    for (Pool kind : kKinds) {
      SCOPED_TRACE(ops::poolName(kind));
      std::vector<uint32_t> argmax;
      ops::ref::segmentPool(kind, x, features, segments, &argmax);
      const vk::Buffer arg = uploadWords(ctx(), argmax);
      const Placed d = placed(ctx(), out_shape, dout, at),
                   over = placed(ctx(), x_shape, nans(n), at + 1),
                   acc = placed(ctx(), x_shape, init, at + 2);
      vk::Recorder rec(ctx());
      const ops::TensorView a = kind == Pool::Max ? words(arg, out_shape) : ops::TensorView{};
      ops::segmentPoolBackward(rec, kind, words(seg, {graphs + 1}), a, d.view, over.view);
      ops::segmentPoolBackward(rec, kind, words(seg, {graphs + 1}), a, d.view, acc.view,
                               Write::Accumulate);
      rec.submit();
      const std::vector<float> want =
          ops::ref::segmentPoolBackward(kind, nodes, features, segments, argmax, dout);
      EXPECT_TRUE(allClose(readPlaced(ctx(), over), want, 1e-6));
      EXPECT_TRUE(accumulatedClose(readPlaced(ctx(), acc), want, init, 1e-6));
      at = (at + 2) % 5;
    }
  }
}

// x, out, dout and dx in f16 or bf16, and inputs and outputs in different formats, on the
// test batch (empty graphs, one of 3000 nodes) with F = 7: every kind forward and backward,
// overwriting and accumulating, against the references on the rounded inputs. The backward
// reads the device's argmax, as a training step does. 16-bit x ties often (bf16 has 8
// significant bits), so max's first-node rule is tested hard. The tolerances are the f32
// tests' (sums stay f32; closeInFormat adds the store's one rounding).
TEST_F(SegmentPoolTest, SixteenBitTensorsMatchCpu) {
  SCOPED_TRACE(rng_.describe());
  const std::vector<uint32_t> segments = testSegments(rng_);
  const int64_t graphs = int64_t(segments.size()) - 1, nodes = segments.back(), features = 7;
  const size_t n = size_t(nodes * features), n_out = size_t(graphs * features);
  const Shape x_shape{nodes, features}, out_shape{graphs, features};
  const vk::Buffer seg = uploadWords(ctx(), segments);
  struct Formats {
    DType in, out;
  };
  for (const Formats f : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                          Formats{DType::F32, DType::BF16}, Formats{DType::BF16, DType::F32}})
    for (Pool kind : kKinds) {
      SCOPED_TRACE(testing::Message() << ops::poolName(kind) << " " << ops::dtypeName(f.in)
                                      << " -> " << ops::dtypeName(f.out));
      const std::vector<float> x = ops::ref::roundTo(f.in, rng_.normal(n, 0.5f, 1.0f));
      const std::vector<float> dout = ops::ref::roundTo(f.in, rng_.normal(n_out));
      const std::vector<float> init = ops::ref::roundTo(f.out, rng_.normal(n));
      // x one element into its buffer: a 2-byte offset for a 16-bit view.
      std::vector<float> shifted = {1.0f};
      shifted.insert(shifted.end(), x.begin(), x.end());
      const DeviceTensor px = upload(ctx(), {int64_t(n) + 1}, shifted, f.in);
      const ops::TensorView xv = ops::view(px.buffer, x_shape, ops::dtypeBytes(f.in), f.in);
      const DeviceTensor out = poisoned(ctx(), out_shape, f.out),
                         d = upload(ctx(), out_shape, dout, f.in),
                         dx = poisoned(ctx(), x_shape, f.out),
                         acc = upload(ctx(), x_shape, init, f.out);
      const vk::Buffer arg = uploadWords(ctx(), std::vector<uint32_t>(n_out, kPoison));
      const ops::TensorView a = kind == Pool::Max ? words(arg, out_shape) : ops::TensorView{};
      vk::Recorder rec(ctx());
      ops::segmentPool(rec, kind, xv, words(seg, {graphs + 1}), out.view(), a);
      ops::segmentPoolBackward(rec, kind, words(seg, {graphs + 1}), a, d.view(), dx.view());
      ops::segmentPoolBackward(rec, kind, words(seg, {graphs + 1}), a, d.view(), acc.view(),
                               Write::Accumulate);
      rec.submit();
      std::vector<uint32_t> want_arg;
      const std::vector<float> want = ops::ref::segmentPool(kind, x, features, segments, &want_arg);
      EXPECT_TRUE(closeInFormat(download(ctx(), out), want, f.out, kind == Pool::Max ? 0.0 : 1e-6));
      if (kind == Pool::Max) {
        EXPECT_EQ(downloadWords(ctx(), arg, n_out), want_arg);
      }
      const std::vector<float> want_dx =
          ops::ref::segmentPoolBackward(kind, nodes, features, segments, want_arg, dout);
      std::vector<float> want_acc(n);
      for (size_t i = 0; i < n; ++i) want_acc[i] = want_dx[i] + init[i];
      EXPECT_TRUE(closeInFormat(download(ctx(), dx), want_dx, f.out, 1e-6));
      EXPECT_TRUE(closeInFormat(download(ctx(), acc), want_acc, f.out, 1e-6));
    }
}

// The same inputs give the same bits (fixed-order sums, no atomics).
TEST_F(SegmentPoolTest, RunsAreBitIdentical) {
  SCOPED_TRACE(rng_.describe());
  const std::vector<uint32_t> segments = testSegments(rng_);
  const std::vector<float> x = rng_.normal(segments.back() * 5u, 0.0f, 10.0f);
  for (Pool kind : kKinds) {
    auto bits = [&] {
      const std::vector<float> out = forward(kind, x, 5, segments, 1);
      std::vector<uint32_t> b(out.size());
      std::memcpy(b.data(), out.data(), out.size() * 4);
      return b;
    };
    const std::vector<uint32_t> first = bits();
    EXPECT_EQ(first, bits()) << ops::poolName(kind);
  }
}

// Segments the host never checked. Non-decreasing but past N ({2, 4, 4, 100, 100}): the
// clamped forward, and its exact gradient (nodes 0 and 1 in no graph get 0). Decreasing
// ({0, 5, 3, 7, 1000, 0xffffffff, 2}: graphs [0,5), [5,5), [3,7), [7,9), [9,9), [9,9)
// after clamping to N = 9): the clamped forward, and every dx element written, finite.
// x sits between NaN pads, so a stray read brings NaN in; outputs between sentinels.
TEST_F(SegmentPoolTest, BadSegmentsStayInBounds) {
  SCOPED_TRACE(rng_.describe());
  const int64_t nodes = 9, features = 3, pad = 16;
  const size_t n = size_t(nodes * features);
  const std::vector<float> x = rng_.normal(n);
  const DeviceTensor px = paddedUpload(ctx(), x, pad);
  const ops::TensorView xv = ops::view(px.buffer, {nodes, features}, pad * 4);
  for (const std::vector<uint32_t>& segments :
       {std::vector<uint32_t>{2, 4, 4, 100, 100},
        std::vector<uint32_t>{0, 5, 3, 7, 1000, 0xffffffffu, 2}}) {
    const bool monotone = segments[1] == 4;
    SCOPED_TRACE(monotone ? "overrunning" : "decreasing");
    const int64_t graphs = int64_t(segments.size()) - 1;
    const Shape out_shape{graphs, features};
    const vk::Buffer seg = uploadWords(ctx(), segments);
    const std::vector<float> dout = rng_.normal(size_t(graphs * features));
    for (Pool kind : kKinds) {
      SCOPED_TRACE(ops::poolName(kind));
      const Placed out = placed(ctx(), out_shape, nans(size_t(graphs * features)), 1),
                   d = placed(ctx(), out_shape, dout, 2),
                   dx = placed(ctx(), {nodes, features}, nans(n), 3);
      const vk::Buffer arg =
          uploadWords(ctx(), std::vector<uint32_t>(size_t(graphs * features), kPoison));
      const ops::TensorView a = kind == Pool::Max ? words(arg, out_shape) : ops::TensorView{};
      vk::Recorder rec(ctx());
      ops::segmentPool(rec, kind, xv, words(seg, {graphs + 1}), out.view, a);
      ops::segmentPoolBackward(rec, kind, words(seg, {graphs + 1}), a, d.view, dx.view);
      rec.submit();
      std::vector<uint32_t> want_arg;
      EXPECT_TRUE(allClose(readPlaced(ctx(), out),
                           ops::ref::segmentPool(kind, x, features, segments, &want_arg), 1e-6));
      const std::vector<float> got_dx = readPlaced(ctx(), dx);
      if (kind == Pool::Max) {
        EXPECT_EQ(downloadWords(ctx(), arg, want_arg.size()), want_arg);
      }
      if (monotone) {
        EXPECT_TRUE(allClose(
            got_dx, ops::ref::segmentPoolBackward(kind, nodes, features, segments, want_arg, dout),
            1e-6));
      } else {
        for (float v : got_dx) EXPECT_TRUE(std::isfinite(v)) << v;
      }
    }
  }
  EXPECT_TRUE(padsUntouched(download(ctx(), px), pad));
}

TEST_F(SegmentPoolTest, BadShapesAreShapeErrors) {
  const DeviceTensor x = upload(ctx(), {6, 3}, rng_.normal(18)), out = poisoned(ctx(), {2, 3}),
                     wrong = poisoned(ctx(), {2, 4});
  const vk::Buffer seg = uploadWords(ctx(), std::vector<uint32_t>{0, 2, 6});
  const ops::TensorView s = words(seg, {3});
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) { ops::segmentPool(rec, Pool::Sum, x.view(), s, wrong.view()); },
      "segmentPool: out (2,4) f32 must be f32, f16 or bf16 (2,3)");
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::segmentPool(rec, Pool::Sum, x.view(), words(seg, {1}), out.view());
      },
      "segmentPool: x (6,3), segments (1): segments must be (graphs + 1) with at least one graph");
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) { ops::segmentPool(rec, Pool::Sum, x.view(), x.view(), out.view()); },
      "segmentPool: x (6,3), segments (6,3): segments must be u32");
  expectShapeError(
      ctx(), [&](vk::Recorder& rec) { ops::segmentPool(rec, Pool::Max, x.view(), s, out.view()); },
      "segmentPool: argmax () f32 must be u32 (2,3)");
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::segmentPoolBackward(rec, Pool::Mean, s, {}, wrong.view(), x.view());
      },
      "segmentPoolBackward: dout (2,4) f32 must be f32, f16 or bf16 (2,3)");
}

}  // namespace
}  // namespace vkgrad::test

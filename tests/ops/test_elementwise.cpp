#include "vkgrad/ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/gradcheck.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/elementwise.h"
#include "vkgrad/ops/reference/half.h"

namespace vkgrad::test {
namespace {

using ops::Shape;
using ops::Write;
using ops::ref::BinaryKind;

// Each output is the exact result rounded once (twice with Accumulate, three times for the
// fused a + b): 1e-6 of the largest output is a few ulps.
constexpr double kElementwiseTolerance = 1e-6;
// A broadcast operand's gradient sums up to 1000 terms in fp32. The data has a positive mean,
// so the sums do not cancel, and the rounding error of a sequential run of k terms stays
// near sqrt(k) ulps of the result: 1e-5 leaves a wide margin.
constexpr double kReductionTolerance = 1e-5;

struct Case {
  Shape a, b;
};
// Every broadcast kind, on sizes that end in a partial RGBA texel and on whole texels.
const Case kCases[] = {
    {{1}, {1}},
    {{3}, {3}},
    {{17}, {1}},
    {{129}, {129}},
    {{1000, 7}, {7}},
    {{7, 1000}, {1000}},
    {{1000, 7}, {1000, 1}},
    {{7, 1000}, {7, 1}},
    {{3, 5, 17}, {5, 17}},
    {{3, 5, 17}, {3, 5, 1}},
    {{3, 5, 17}, {5, 1}},
    {{3, 5, 17}, {1, 1, 1}},
    {{2, 3, 4, 5}, {3, 4, 5}},
    {{2, 3, 4, 5}, {1, 3, 1, 1}},
    {{3, 1, 5}, {1, 5}},
    {{8, 12}, {8, 12}},
    {{8, 12}, {12}},
    {{8, 12}, {8, 1}},
    {{6, 8, 12}, {8, 12}},
    {{6, 8, 12}, {8, 1}},
    {{6, 8, 12}, {1}},
};
const BinaryKind kKinds[] = {BinaryKind::Add, BinaryKind::Sub, BinaryKind::Mul};

const char* name(BinaryKind kind) {
  return kind == BinaryKind::Add ? "add" : kind == BinaryKind::Sub ? "sub" : "mul";
}

void forward(vk::Recorder& rec, BinaryKind kind, const ops::TensorView& a, const ops::TensorView& b,
             const ops::TensorView& out, Write w = Write::Overwrite) {
  if (kind == BinaryKind::Add) ops::add(rec, a, b, out, w);
  if (kind == BinaryKind::Sub) ops::sub(rec, a, b, out, w);
  if (kind == BinaryKind::Mul) ops::mul(rec, a, b, out, w);
}

void backward(vk::Recorder& rec, BinaryKind kind, const ops::TensorView& a,
              const ops::TensorView& b, const ops::TensorView& dout, const ops::TensorView& da,
              const ops::TensorView& db, Write wa, Write wb) {
  if (kind == BinaryKind::Add) ops::addBackward(rec, dout, da, db, wa, wb);
  if (kind == BinaryKind::Sub) ops::subBackward(rec, dout, da, db, wa, wb);
  if (kind == BinaryKind::Mul) ops::mulBackward(rec, a, b, dout, da, db, wa, wb);
}

// Index into b of each element of a, by numpy's rules (right-aligned, size-1 axes repeat):
// an independent check of broadcastAxes.
std::vector<int64_t> numpyIndex(const Shape& a, const Shape& b) {
  std::vector<int64_t> index(a.numel());
  for (int64_t i = 0; i < a.numel(); ++i) {
    int64_t rest = i, j = 0, stride = 1;
    for (int axis = a.rank() - 1; axis >= 0; --axis) {
      const int64_t coord = rest % a[axis];
      rest /= a[axis];
      const int baxis = axis - (a.rank() - b.rank());
      if (baxis < 0) continue;
      if (b[baxis] != 1) j += coord * stride;
      stride *= b[baxis];
    }
    index[i] = j;
  }
  return index;
}

// got = want + init (Write::Accumulate), normalised by the largest |want_i| or |init_i|:
// the sum itself may cancel to almost nothing, leaving only the rounding of its terms.
using ElementwiseTest = VkTest;

TEST_F(ElementwiseTest, BroadcastAxesMatchNumpyIndexing) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.a.str() + " with " + c.b.str());
    const ops::KeptAxis f = ops::broadcastAxes("test", c.a, c.b);
    EXPECT_EQ(f.numel(), c.a.numel());
    EXPECT_EQ(f.kept, c.b.numel());
    const auto index = numpyIndex(c.a, c.b);
    for (int64_t i = 0; i < c.a.numel(); ++i)
      ASSERT_EQ((i / f.inner) % f.kept, index[i]) << "element " << i;
  }
}

TEST_F(ElementwiseTest, ForwardMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (BinaryKind kind : kKinds)
    for (const Case& c : kCases)
      for (Write w : {Write::Overwrite, Write::Accumulate}) {
        SCOPED_TRACE(testing::Message() << name(kind) << " " << c.a.str() << " with " << c.b.str()
                                        << (w == Write::Accumulate ? " accumulate" : ""));
        const auto a = rng.uniform(c.a.numel()), b = rng.uniform(c.b.numel());
        const auto init = rng.uniform(c.a.numel());
        const ops::KeptAxis f = ops::broadcastAxes("test", c.a, c.b);
        std::vector<float> want(c.a.numel());
        ops::ref::binary(kind, a.data(), b.data(), want.data(), f.outer, f.kept, f.inner);
        auto da = upload(ctx(), c.a, a), db = upload(ctx(), c.b, b);
        auto dout = w == Write::Accumulate ? upload(ctx(), c.a, init) : poisoned(ctx(), c.a);
        vk::Recorder rec(ctx());
        forward(rec, kind, da.view(), db.view(), dout.view(), w);
        rec.submit();
        if (w == Write::Accumulate) {
          EXPECT_TRUE(accumulatedClose(download(ctx(), dout), want, init, kElementwiseTolerance));
        } else {
          EXPECT_TRUE(allClose(download(ctx(), dout), want, kElementwiseTolerance));
        }
      }
}

TEST_F(ElementwiseTest, ForwardLoopsOverMoreElementsThanTheGrid) {
  // 2049 x 1025 floats exceed the capped grid (8192 workgroups of 256), so invocations loop.
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Shape shape{2049, 1025};
  const auto a = rng.uniform(shape.numel()), b = rng.uniform(1025);
  std::vector<float> want(a.size());
  ops::ref::binary(BinaryKind::Add, a.data(), b.data(), want.data(), 2049, 1025, 1);
  auto da = upload(ctx(), shape, a), db = upload(ctx(), {1025}, b);
  auto out = poisoned(ctx(), shape);
  vk::Recorder rec(ctx());
  ops::add(rec, da.view(), db.view(), out.view());
  rec.submit();
  EXPECT_TRUE(allClose(download(ctx(), out), want, kElementwiseTolerance));
}

TEST_F(ElementwiseTest, ForwardInPlace) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const Case& c : {Case{{7, 9}, {9}}, Case{{8, 12}, {8, 12}}, Case{{5, 3}, {5, 3}}}) {
    SCOPED_TRACE(c.a.str() + " with " + c.b.str());
    const auto a = rng.uniform(c.a.numel()), b = rng.uniform(c.b.numel());
    const ops::KeptAxis f = ops::broadcastAxes("test", c.a, c.b);
    std::vector<float> want(a.size());
    // out is a.
    ops::ref::binary(BinaryKind::Sub, a.data(), b.data(), want.data(), f.outer, f.kept, f.inner);
    auto da = upload(ctx(), c.a, a), db = upload(ctx(), c.b, b);
    {
      vk::Recorder rec(ctx());
      ops::sub(rec, da.view(), db.view(), da.view());
      rec.submit();
    }
    EXPECT_TRUE(allClose(download(ctx(), da), want, kElementwiseTolerance));
    if (!(c.a == c.b)) continue;
    // out is b.
    ops::ref::binary(BinaryKind::Mul, a.data(), b.data(), want.data(), f.outer, f.kept, f.inner);
    da = upload(ctx(), c.a, a);
    vk::Recorder rec(ctx());
    ops::mul(rec, da.view(), db.view(), db.view());
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), db), want, kElementwiseTolerance));
  }
}

TEST_F(ElementwiseTest, BackwardMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (BinaryKind kind : kKinds)
    for (const Case& c : kCases) {
      SCOPED_TRACE(testing::Message() << name(kind) << " " << c.a.str() << " with " << c.b.str());
      const auto a = rng.uniform(c.a.numel(), -0.5f, 1.5f), b = rng.uniform(c.b.numel());
      const auto dout = rng.uniform(c.a.numel(), -0.5f, 1.5f);
      const ops::KeptAxis f = ops::broadcastAxes("test", c.a, c.b);
      std::vector<float> want_a(a.size()), want_b(b.size());
      ops::ref::binaryBackward(kind, a.data(), b.data(), dout.data(), want_a.data(), want_b.data(),
                               f.outer, f.kept, f.inner);
      auto ta = upload(ctx(), c.a, a), tb = upload(ctx(), c.b, b);
      auto tdout = upload(ctx(), c.a, dout);
      auto ga = poisoned(ctx(), c.a), gb = poisoned(ctx(), c.b);
      vk::Recorder rec(ctx());
      backward(rec, kind, ta.view(), tb.view(), tdout.view(), ga.view(), gb.view(),
               Write::Overwrite, Write::Overwrite);
      rec.submit();
      // Same shape: one fused pass; broadcast: an elementwise pass and a reduction.
      EXPECT_EQ(rec.dispatchCount(), c.a == c.b ? 1u : 2u);
      EXPECT_TRUE(allClose(download(ctx(), ga), want_a, kElementwiseTolerance));
      EXPECT_TRUE(allClose(download(ctx(), gb), want_b, kReductionTolerance));
    }
}

// loss = sum_i w_i out_i(a, b), run on the GPU; the analytic gradients come from the GPU
// backward with dout = w, checked against finite differences, then Accumulate is checked to
// add exactly those gradients onto random existing ones.
TEST_F(ElementwiseTest, BackwardPassesGradCheckInBothWriteModes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case cases[] = {{{3, 5, 4}, {5, 4}}, {{6, 5}, {6, 1}},    {{7}, {7}},
                        {{2, 3, 4}, {1}},    {{4, 3, 5}, {3, 1}}, {{8, 4}, {8, 4}}};
  for (BinaryKind kind : kKinds)
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message() << name(kind) << " " << c.a.str() << " with " << c.b.str());
      auto a = rng.uniform(c.a.numel()), b = rng.uniform(c.b.numel());
      const auto w = rng.uniform(c.a.numel());
      auto loss = [&] {
        auto ta = upload(ctx(), c.a, a), tb = upload(ctx(), c.b, b);
        auto out = poisoned(ctx(), c.a);
        vk::Recorder rec(ctx());
        forward(rec, kind, ta.view(), tb.view(), out.view());
        rec.submit();
        return weightedSum(download(ctx(), out), w);
      };
      auto ta = upload(ctx(), c.a, a), tb = upload(ctx(), c.b, b), tw = upload(ctx(), c.a, w);
      auto ga = poisoned(ctx(), c.a), gb = poisoned(ctx(), c.b);
      const auto init_a = rng.uniform(c.a.numel()), init_b = rng.uniform(c.b.numel());
      auto acc_a = upload(ctx(), c.a, init_a), acc_b = upload(ctx(), c.b, init_b);
      vk::Recorder rec(ctx());
      backward(rec, kind, ta.view(), tb.view(), tw.view(), ga.view(), gb.view(), Write::Overwrite,
               Write::Overwrite);
      backward(rec, kind, ta.view(), tb.view(), tw.view(), acc_a.view(), acc_b.view(),
               Write::Accumulate, Write::Accumulate);
      rec.submit();
      const auto grad_a = download(ctx(), ga), grad_b = download(ctx(), gb);
      // Every op here is linear in each input, so central differences have no truncation
      // error and a larger step only shrinks the float rounding noise of the loss. (That noise
      // is what a scalar b's gradient, a sum of 24 terms that partly cancel, is sensitive to.)
      GradCheckOptions options;
      options.rel_step = 1e-2;
      EXPECT_TRUE(checkGradients(loss, {{"a", &a, grad_a}, {"b", &b, grad_b}}, rng, options));
      EXPECT_TRUE(accumulatedClose(download(ctx(), acc_a), init_a, grad_a, kElementwiseTolerance));
      EXPECT_TRUE(accumulatedClose(download(ctx(), acc_b), init_b, grad_b, kElementwiseTolerance));
    }
}

TEST_F(ElementwiseTest, BackwardSkipsAnEmptyGradient) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Shape sa{9, 6}, sb{6};
  const auto a = rng.uniform(54), b = rng.uniform(6), dout = rng.uniform(54);
  std::vector<float> want_a(54), want_b(6);
  ops::ref::binaryBackward(BinaryKind::Mul, a.data(), b.data(), dout.data(), want_a.data(),
                           want_b.data(), 9, 6, 1);
  auto ta = upload(ctx(), sa, a), tb = upload(ctx(), sb, b), td = upload(ctx(), sa, dout);
  auto ga = poisoned(ctx(), sa), gb = poisoned(ctx(), sb);
  vk::Recorder rec(ctx());
  ops::mulBackward(rec, ta.view(), tb.view(), td.view(), ga.view(), {});
  ops::mulBackward(rec, ta.view(), tb.view(), td.view(), {}, gb.view());
  rec.submit();
  EXPECT_EQ(rec.dispatchCount(), 2u);
  EXPECT_TRUE(allClose(download(ctx(), ga), want_a, kElementwiseTolerance));
  EXPECT_TRUE(allClose(download(ctx(), gb), want_b, kReductionTolerance));
}

TEST_F(ElementwiseTest, ScaleAndBroadcastMatchCpuAndScaleBackwardPassesGradCheck) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const Shape& shape : {Shape{1}, Shape{17}, Shape{1000, 7}, Shape{8, 12}}) {
    SCOPED_TRACE(shape.str());
    auto x = rng.uniform(shape.numel());
    const auto init = rng.uniform(shape.numel());
    const float alpha = -1.75f;
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = float(double(alpha) * x[i]);
    auto tx = upload(ctx(), shape, x), y = poisoned(ctx(), shape), acc = upload(ctx(), shape, init);
    {
      vk::Recorder rec(ctx());
      ops::scale(rec, tx.view(), y.view(), alpha);
      ops::scale(rec, tx.view(), acc.view(), alpha, Write::Accumulate);
      rec.submit();
    }
    EXPECT_TRUE(allClose(download(ctx(), y), want, kElementwiseTolerance));
    EXPECT_TRUE(accumulatedClose(download(ctx(), acc), want, init, kElementwiseTolerance));

    const auto w = rng.uniform(shape.numel());
    auto loss = [&] {
      auto t = upload(ctx(), shape, x), out = poisoned(ctx(), shape);
      vk::Recorder rec(ctx());
      ops::scale(rec, t.view(), out.view(), alpha);
      rec.submit();
      return weightedSum(download(ctx(), out), w);
    };
    auto tw = upload(ctx(), shape, w), dx = poisoned(ctx(), shape);
    vk::Recorder rec(ctx());
    ops::scaleBackward(rec, tw.view(), dx.view(), alpha);
    rec.submit();
    const auto grad = download(ctx(), dx);
    EXPECT_TRUE(checkGradients(loss, {{"x", &x, grad}}, rng));
  }
  // broadcast: b (5) over a (3,5,4) seen as (3,5,4), times 2.
  const auto b = rng.uniform(5);
  std::vector<float> want(60);
  for (int i = 0; i < 60; ++i) want[i] = 2.0f * b[(i / 4) % 5];
  auto tb = upload(ctx(), {5}, b), out = poisoned(ctx(), {3, 5, 4});
  vk::Recorder rec(ctx());
  ops::broadcast(rec, tb.view(), out.view(), {3, 5, 4}, 2.0f);
  rec.submit();
  EXPECT_TRUE(allClose(download(ctx(), out), want, kElementwiseTolerance));
}

// `data` at element `at` of a buffer with a sentinel-filled margin on both sides: any offset
// that is a multiple of 4 bytes must work, and nothing outside the view may be written.
// Offsets of 1 to 3 floats take the storage kernels (an RGBA32F texel must start on 16
// bytes), 0 and 4 the texel kernels; a broadcast b is fetched as R32F at any offset.
TEST_F(ElementwiseTest, AnyOffsetOfWholeFloatsWorks) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const Case& c : {Case{{7, 9}, {9}}, Case{{6, 5}, {6, 5}}, Case{{4, 3, 8}, {3, 1}}})
    for (int64_t at : {0, 1, 2, 3, 4, 5}) {
      SCOPED_TRACE(testing::Message() << c.a.str() << " with " << c.b.str() << ", offset " << at);
      const int64_t n = c.a.numel(), nb = c.b.numel();
      const auto a = rng.uniform(n), b = rng.uniform(nb), dout = rng.uniform(n, -0.5f, 1.5f);
      const auto init_out = rng.uniform(n), init_a = rng.uniform(n), init_b = rng.uniform(nb);
      const ops::KeptAxis f = ops::broadcastAxes("test", c.a, c.b);
      std::vector<float> want(n), want_a(n), want_b(nb);
      ops::ref::binary(BinaryKind::Mul, a.data(), b.data(), want.data(), f.outer, f.kept, f.inner);
      ops::ref::binaryBackward(BinaryKind::Mul, a.data(), b.data(), dout.data(), want_a.data(),
                               want_b.data(), f.outer, f.kept, f.inner);
      auto ta = placed(ctx(), c.a, a, at), tb = placed(ctx(), c.b, b, (at + 1) % 6);
      auto tout = placed(ctx(), c.a, init_out, (at + 2) % 6);
      auto tdout = placed(ctx(), c.a, dout, (at + 3) % 6);
      auto ga = placed(ctx(), c.a, init_a, (at + 4) % 6),
           gb = placed(ctx(), c.b, init_b, (at + 5) % 6);
      vk::Recorder rec(ctx());
      ops::mul(rec, ta.view, tb.view, tout.view, Write::Accumulate);
      ops::mulBackward(rec, ta.view, tb.view, tdout.view, ga.view, gb.view, Write::Accumulate,
                       Write::Accumulate);
      rec.submit();
      EXPECT_TRUE(accumulatedClose(readPlaced(ctx(), tout), want, init_out, kElementwiseTolerance));
      EXPECT_TRUE(accumulatedClose(readPlaced(ctx(), ga), want_a, init_a, kElementwiseTolerance));
      EXPECT_TRUE(accumulatedClose(readPlaced(ctx(), gb), want_b, init_b, kReductionTolerance));
    }
}

std::vector<float> plus(const std::vector<float>& x, const std::vector<float>& y) {
  std::vector<float> sum(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + y[i];
  return sum;
}

struct Formats {
  ops::DType a, b, out;  // out: the forward's output and both gradients
};
// All 16-bit, and mixed: f32 b (a bias, a weight) with bf16 activations, and the reverse.
const Formats kFormats[] = {{ops::DType::F16, ops::DType::F16, ops::DType::F16},
                            {ops::DType::BF16, ops::DType::BF16, ops::DType::BF16},
                            {ops::DType::BF16, ops::DType::F32, ops::DType::BF16},
                            {ops::DType::F32, ops::DType::BF16, ops::DType::F32}};

std::string describe(const Formats& f) {
  return std::string(ops::dtypeName(f.a)) + " a, " + ops::dtypeName(f.b) + " b -> " +
         ops::dtypeName(f.out);
}

// Every tensor in f16 or bf16, or mixed with f32: the reference runs on the rounded inputs
// and each output is held to one rounding in its format (closeInFormat) on top of the f32
// tolerance; an accumulated output to one rounding of the f32 sum of the two. dout is in the
// forward's output format, as a training step would store it. A broadcast b's gradient is a
// reduction (reduce/sum): SixteenBitBroadcastGradientsSumInF32 checks it.
TEST_F(ElementwiseTest, SixteenBitTensorsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case cases[] = {{{17}, {1}},
                        {{7, 13}, {13}},
                        {{13, 7}, {13, 1}},
                        {{3, 5, 17}, {5, 1}},
                        {{2, 3, 4, 5}, {1, 3, 1, 1}},
                        {{9, 11}, {9, 11}},
                        {{3, 1, 5}, {1, 5}}};
  for (const Formats& fm : kFormats)
    for (BinaryKind kind : kKinds)
      for (const Case& c : cases) {
        SCOPED_TRACE(testing::Message() << name(kind) << " " << c.a.str() << " with " << c.b.str()
                                        << ", " << describe(fm));
        const int64_t n = c.a.numel(), nb = c.b.numel();
        const bool same = n == nb;  // db is then elementwise too (the fused kernel)
        const auto a = ops::ref::roundTo(fm.a, rng.uniform(n, -0.5f, 1.5f));
        const auto b = ops::ref::roundTo(fm.b, rng.uniform(nb));
        const auto dout = ops::ref::roundTo(fm.out, rng.uniform(n, -0.5f, 1.5f));
        const auto init = ops::ref::roundTo(fm.out, rng.uniform(n));
        const auto init_b = ops::ref::roundTo(fm.out, rng.uniform(nb));
        const ops::KeptAxis f = ops::broadcastAxes("test", c.a, c.b);
        std::vector<float> want(n), want_a(n), want_b(nb);
        ops::ref::binary(kind, a.data(), b.data(), want.data(), f.outer, f.kept, f.inner);
        ops::ref::binaryBackward(kind, a.data(), b.data(), dout.data(), want_a.data(),
                                 want_b.data(), f.outer, f.kept, f.inner);
        auto ta = upload(ctx(), c.a, a, fm.a), tb = upload(ctx(), c.b, b, fm.b);
        auto tdout = upload(ctx(), c.a, dout, fm.out);
        auto out = poisoned(ctx(), c.a, fm.out), acc = upload(ctx(), c.a, init, fm.out);
        auto ga = poisoned(ctx(), c.a, fm.out), gb = poisoned(ctx(), c.b, fm.out);
        auto acc_a = upload(ctx(), c.a, init, fm.out), acc_b = upload(ctx(), c.b, init_b, fm.out);
        vk::Recorder rec(ctx());
        forward(rec, kind, ta.view(), tb.view(), out.view());
        forward(rec, kind, ta.view(), tb.view(), acc.view(), Write::Accumulate);
        backward(rec, kind, ta.view(), tb.view(), tdout.view(), ga.view(),
                 same ? gb.view() : ops::TensorView{}, Write::Overwrite, Write::Overwrite);
        backward(rec, kind, ta.view(), tb.view(), tdout.view(), acc_a.view(),
                 same ? acc_b.view() : ops::TensorView{}, Write::Accumulate, Write::Accumulate);
        rec.submit();
        EXPECT_TRUE(closeInFormat(download(ctx(), out), want, fm.out, kElementwiseTolerance));
        EXPECT_TRUE(
            closeInFormat(download(ctx(), acc), plus(want, init), fm.out, kElementwiseTolerance));
        EXPECT_TRUE(closeInFormat(download(ctx(), ga), want_a, fm.out, kElementwiseTolerance));
        EXPECT_TRUE(closeInFormat(download(ctx(), acc_a), plus(want_a, init), fm.out,
                                  kElementwiseTolerance));
        if (!same) continue;
        EXPECT_TRUE(closeInFormat(download(ctx(), gb), want_b, fm.out, kElementwiseTolerance));
        EXPECT_TRUE(closeInFormat(download(ctx(), acc_b), plus(want_b, init_b), fm.out,
                                  kElementwiseTolerance));
      }
}

// A broadcast b's gradient is a sum over the broadcast axes (reduce/sum), in f32 whatever the
// tensors are stored in: kReductionTolerance, then one rounding as db is stored.
TEST_F(ElementwiseTest, SixteenBitBroadcastGradientsSumInF32) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Case cases[] = {{{17}, {1}},
                        {{7, 13}, {13}},
                        {{13, 7}, {13, 1}},
                        {{3, 5, 17}, {5, 1}},
                        {{2, 3, 4, 5}, {1, 3, 1, 1}},
                        {{1000, 7}, {7}}};
  for (const Formats& fm : kFormats)
    for (BinaryKind kind : kKinds)
      for (const Case& c : cases) {
        SCOPED_TRACE(testing::Message() << name(kind) << " " << c.a.str() << " with " << c.b.str()
                                        << ", " << describe(fm));
        const int64_t n = c.a.numel(), nb = c.b.numel();
        const auto a = ops::ref::roundTo(fm.a, rng.uniform(n, -0.5f, 1.5f));
        const auto b = ops::ref::roundTo(fm.b, rng.uniform(nb));
        const auto dout = ops::ref::roundTo(fm.out, rng.uniform(n, -0.5f, 1.5f));
        const auto init_b = ops::ref::roundTo(fm.out, rng.uniform(nb));
        const ops::KeptAxis f = ops::broadcastAxes("test", c.a, c.b);
        std::vector<float> want_a(n), want_b(nb);
        ops::ref::binaryBackward(kind, a.data(), b.data(), dout.data(), want_a.data(),
                                 want_b.data(), f.outer, f.kept, f.inner);
        auto ta = upload(ctx(), c.a, a, fm.a), tb = upload(ctx(), c.b, b, fm.b);
        auto tdout = upload(ctx(), c.a, dout, fm.out);
        auto gb = poisoned(ctx(), c.b, fm.out), acc_b = upload(ctx(), c.b, init_b, fm.out);
        vk::Recorder rec(ctx());
        backward(rec, kind, ta.view(), tb.view(), tdout.view(), {}, gb.view(), Write::Overwrite,
                 Write::Overwrite);
        backward(rec, kind, ta.view(), tb.view(), tdout.view(), {}, acc_b.view(), Write::Overwrite,
                 Write::Accumulate);
        rec.submit();
        EXPECT_TRUE(closeInFormat(download(ctx(), gb), want_b, fm.out, kReductionTolerance));
        EXPECT_TRUE(closeInFormat(download(ctx(), acc_b), plus(want_b, init_b), fm.out,
                                  kReductionTolerance));
      }
}

// In place on a 16-bit tensor, and 16-bit views 2 bytes into their buffers (an odd element
// skip in the kernels): a broadcast forward and da, and the fused same-shape backward.
TEST_F(ElementwiseTest, SixteenBitInPlaceAndOddOffsetsWork) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::DType dtype : {ops::DType::F16, ops::DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(dtype));
    const Shape sa{5, 9}, sb{9};
    const auto a = ops::ref::roundTo(dtype, rng.uniform(45, -0.5f, 1.5f));
    const auto b = ops::ref::roundTo(dtype, rng.uniform(9));
    const auto b2 = ops::ref::roundTo(dtype, rng.uniform(45));
    const auto dout = ops::ref::roundTo(dtype, rng.uniform(45, -0.5f, 1.5f));
    std::vector<float> want(45), want_a(45), want_b(9), want_a2(45), want_b2(45);
    ops::ref::binary(BinaryKind::Mul, a.data(), b.data(), want.data(), 5, 9, 1);
    ops::ref::binaryBackward(BinaryKind::Mul, a.data(), b.data(), dout.data(), want_a.data(),
                             want_b.data(), 5, 9, 1);
    ops::ref::binaryBackward(BinaryKind::Mul, a.data(), b2.data(), dout.data(), want_a2.data(),
                             want_b2.data(), 1, 45, 1);
    auto ta = shiftedUpload(ctx(), sa, a, dtype), tb = shiftedUpload(ctx(), sb, b, dtype);
    auto tb2 = shiftedUpload(ctx(), sa, b2, dtype), tdout = shiftedUpload(ctx(), sa, dout, dtype);
    auto out = shiftedPoisoned(ctx(), sa, dtype), ga = shiftedPoisoned(ctx(), sa, dtype);
    auto ga2 = shiftedPoisoned(ctx(), sa, dtype), gb2 = shiftedPoisoned(ctx(), sa, dtype);
    auto inplace = upload(ctx(), sa, a, dtype), tb0 = upload(ctx(), sb, b, dtype);
    vk::Recorder rec(ctx());
    ops::mul(rec, ta.view, tb.view, out.view);
    ops::mulBackward(rec, ta.view, tb.view, tdout.view, ga.view, {});
    ops::mulBackward(rec, ta.view, tb2.view, tdout.view, ga2.view, gb2.view);
    ops::mul(rec, inplace.view(), tb0.view(), inplace.view());
    rec.submit();
    EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), out), want, dtype, kElementwiseTolerance));
    EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), ga), want_a, dtype, kElementwiseTolerance));
    EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), ga2), want_a2, dtype, kElementwiseTolerance));
    EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), gb2), want_b2, dtype, kElementwiseTolerance));
    EXPECT_TRUE(closeInFormat(download(ctx(), inplace), want, dtype, kElementwiseTolerance));
  }
  // In place across formats: f16 and bf16 views of the same bytes pass the range test.
  auto t = upload(ctx(), {8}, rng.uniform(8), ops::DType::F16);
  auto b = upload(ctx(), {8}, rng.uniform(8), ops::DType::F16);
  vk::Recorder rec(ctx());
  expectShapeError(
      rec,
      [&] { ops::add(rec, t.view(), b.view(), ops::view(t.buffer, {8}, 0, ops::DType::BF16)); },
      "add: out (bf16) in place of a (f16) needs its dtype");
  expectShapeError(
      rec,
      [&] { ops::addBackward(rec, t.view(), ops::view(t.buffer, {8}, 0, ops::DType::BF16), {}); },
      "addBackward: da (bf16) in place of dout (f16) needs its dtype");
}

TEST_F(ElementwiseTest, RejectsBadShapesDtypesAndOverlapsBeforeRecording) {
  Rng rng;
  auto a = upload(ctx(), {4, 8}, rng.uniform(32)), b = upload(ctx(), {9, 2}, rng.uniform(18));
  auto c = upload(ctx(), {2, 3, 4}, rng.uniform(24)), d = upload(ctx(), {2, 1, 4}, rng.uniform(8));
  auto bias = upload(ctx(), {8}, rng.uniform(8)), out = poisoned(ctx(), {4, 8});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::add(rec, a.view(), b.view(), out.view()); },
      "add: a (4,8), b (9,2): b does not broadcast to a");
  expectShapeError(
      rec, [&] { ops::mul(rec, c.view(), d.view(), c.view()); },
      "mul: a (2,3,4), b (2,1,4): b's axes of a's size must be adjacent");
  expectShapeError(
      rec,
      [&] {
        ops::sub(rec, a.view(), bias.view(), ops::view(out.buffer, {4, 7}));
      },
      "sub: (4,8) - (8) -> (4,7): out must have a's shape");
  expectShapeError(
      rec,
      [&] { ops::add(rec, a.view(), ops::view(bias.buffer, {8}, 0, ops::DType::U32), out.view()); },
      "add: b must be f32, f16 or bf16, got u32");
  // out shifted by one row over a: a partial overlap.
  auto big = upload(ctx(), {5, 8}, rng.uniform(40));
  expectShapeError(
      rec,
      [&] {
        ops::add(rec, ops::view(big.buffer, {4, 8}), bias.view(),
                 ops::view(big.buffer, {4, 8}, 32));
      },
      "add: out (4,8) overlaps a (4,8)");
  // A broadcast gradient may not be its own operand.
  expectShapeError(
      rec, [&] { ops::mulBackward(rec, a.view(), bias.view(), out.view(), {}, bias.view()); },
      "mulBackward: db (8) overlaps b (8)");
  expectShapeError(
      rec, [&] { ops::addBackward(rec, out.view(), a.view(), ops::view(b.buffer, {9})); },
      "addBackward: a (4,8), b (9): b does not broadcast to a");
  expectShapeError(
      rec, [&] { ops::addBackward(rec, out.view(), a.view(), a.view()); },
      "addBackward: da (4,8) overlaps db (4,8)");
}

}  // namespace
}  // namespace vkgrad::test

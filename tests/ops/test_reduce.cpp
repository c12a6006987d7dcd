#include "vkgrad/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/gradcheck.h"
#include "common/not_run.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/reduce.h"

namespace vkgrad::test {
namespace {

using ops::Shape;
using ops::Write;

// An fp32 sum of n terms, each lane adding at most ~1600 of them in sequence before a tree of
// at most 8 levels. The data has a positive mean (uniform in [-0.5, 1.5]), so the sums do not
// cancel and the error is measured against sums of the same size as the terms' magnitudes;
// rounding errors of a sequential run of k terms then grow like sqrt(k) ulps (k ulps at
// worst, 1e-4 for k = 1600). Observed: at most 2e-7 on every shape below; 2e-6 keeps a
// margin without hiding a wrong index.
constexpr double kTolerance = 2e-6;
// Broadcasting a gradient back is exact (times 1/N for the mean: one rounding); Accumulate
// adds one more.
constexpr double kBroadcastTolerance = 1e-6;

enum class Reduction { SumLastAxis, MeanLastAxis, SumRows, MeanRows };
const Reduction kReductions[] = {Reduction::SumLastAxis, Reduction::MeanLastAxis, Reduction::SumRows,
                                 Reduction::MeanRows};

const char* name(Reduction r) {
  switch (r) {
    case Reduction::SumLastAxis: return "sumLastAxis";
    case Reduction::MeanLastAxis: return "meanLastAxis";
    case Reduction::SumRows: return "sumRows";
    case Reduction::MeanRows: return "meanRows";
  }
  return "?";
}

bool overRows(Reduction r) { return r == Reduction::SumRows || r == Reduction::MeanRows; }
bool isMean(Reduction r) { return r == Reduction::MeanLastAxis || r == Reduction::MeanRows; }

int64_t rowsOf(const Shape& s) { return s.back() ? s.numel() / s.back() : 0; }

// The output shape: x without its last axis, or (N).
Shape outShape(Reduction r, const Shape& x) {
  if (overRows(r)) return Shape{x.back()};
  switch (x.rank()) {
    case 1: return Shape{};
    case 2: return Shape{x[0]};
    case 3: return Shape{x[0], x[1]};
    default: return Shape{x[0], x[1], x[2]};
  }
}

ops::KeptAxis axesOf(Reduction r, const Shape& x) {
  return overRows(r) ? ops::KeptAxis{rowsOf(x), x.back(), 1} : ops::KeptAxis{1, rowsOf(x), x.back()};
}

void forward(vk::Recorder& rec, Reduction r, const ops::TensorView& x, const ops::TensorView& out,
             Write w = Write::Overwrite) {
  switch (r) {
    case Reduction::SumLastAxis: ops::sumLastAxis(rec, x, out, w); break;
    case Reduction::MeanLastAxis: ops::meanLastAxis(rec, x, out, w); break;
    case Reduction::SumRows: ops::sumRows(rec, x, out, w); break;
    case Reduction::MeanRows: ops::meanRows(rec, x, out, w); break;
  }
}

void backward(vk::Recorder& rec, Reduction r, const ops::TensorView& dout,
              const ops::TensorView& dx, Write w = Write::Overwrite) {
  switch (r) {
    case Reduction::SumLastAxis: ops::sumLastAxisBackward(rec, dout, dx, w); break;
    case Reduction::MeanLastAxis: ops::meanLastAxisBackward(rec, dout, dx, w); break;
    case Reduction::SumRows: ops::sumRowsBackward(rec, dout, dx, w); break;
    case Reduction::MeanRows: ops::meanRowsBackward(rec, dout, dx, w); break;
  }
}

std::vector<float> reference(Reduction r, const Shape& shape, const std::vector<float>& x) {
  const ops::KeptAxis f = axesOf(r, shape);
  const double count = double(f.outer) * double(f.inner);
  std::vector<float> out(f.kept);
  ops::ref::sumOverKeptAxis(x.data(), nullptr, out.data(), f.outer, f.kept, f.inner,
                      isMean(r) ? 1.0 / count : 1.0);
  return out;
}

// Odd shapes (R32F texel fetches), multiples of 4 (RGBA32F fetches), and the extremes: a
// single row or column of 100,000, and 100,000 rows.
const Shape kShapes[] = {{1},       {3},          {17},          {129},        {1000, 7},
                         {7, 1000}, {3, 5, 17},   {2, 3, 4, 5},  {8, 12},      {6, 8, 12},
                         {1, 100000}, {100000, 1}, {100000, 3},  {3, 100000},  {100000, 8},
                         {100003}};

// got = want + init (Write::Accumulate), normalised by the largest |want_i| or |init_i|:
// the sum itself may cancel to almost nothing, leaving only the rounding of its terms.
using ReduceTest = VkTest;

TEST_F(ReduceTest, ForwardMatchesCpuInBothWriteModes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (Reduction r : kReductions)
    for (const Shape& shape : kShapes) {
      SCOPED_TRACE(testing::Message() << name(r) << " " << shape.str());
      const auto x = rng.uniform(shape.numel(), -0.5f, 1.5f);
      const Shape out_shape = outShape(r, shape);
      const auto want = reference(r, shape, x);
      const auto init = rng.uniform(want.size());
      auto tx = upload(ctx(), shape, x);
      auto out = poisoned(ctx(), out_shape), acc = upload(ctx(), out_shape, init);
      vk::Recorder rec(ctx());
      forward(rec, r, tx.view(), out.view());
      forward(rec, r, tx.view(), acc.view(), Write::Accumulate);
      rec.submit();
      EXPECT_TRUE(allClose(download(ctx(), out), want, kTolerance));
      EXPECT_TRUE(accumulatedClose(download(ctx(), acc), want, init, kTolerance));
    }
}

TEST_F(ReduceTest, KeepDimAndRowVectorOutputShapes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const auto x = rng.uniform(35, -0.5f, 1.5f);
  auto tx = upload(ctx(), {5, 7}, x);
  auto rows_out = poisoned(ctx(), {5, 1}), cols_out = poisoned(ctx(), {1, 7});
  vk::Recorder rec(ctx());
  ops::sumLastAxis(rec, tx.view(), rows_out.view());
  ops::meanRows(rec, tx.view(), cols_out.view());
  rec.submit();
  EXPECT_TRUE(allClose(download(ctx(), rows_out), reference(Reduction::SumLastAxis, {5, 7}, x),
                       kTolerance));
  EXPECT_TRUE(allClose(download(ctx(), cols_out), reference(Reduction::MeanRows, {5, 7}, x),
                       kTolerance));
}

// The general view with a product, as the gradient of a broadcast factor uses it, through
// both kernels (lavapipe never picks the storage one by itself: every view here fits its
// texel limits).
TEST_F(ReduceTest, SumOverKeptAxisWithProductMatchesCpuInBothVariants) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const ops::KeptAxis views[] = {{5, 7, 9},  {300, 3, 1}, {1, 11, 400}, {4, 6, 8},
                               {9, 1, 13}, {1, 5, 1},   {2000, 8, 1}, {1, 3, 100000}};
  for (ops::ReduceVariant variant : {ops::ReduceVariant::Texel, ops::ReduceVariant::Storage})
  for (ops::KeptAxis f : views) {
    const std::string where = "(" + std::to_string(f.outer) + "," + std::to_string(f.kept) + "," +
                              std::to_string(f.inner) + ")";
    SCOPED_TRACE(where + (variant == ops::ReduceVariant::Texel ? " texel" : " storage"));
    // Texel reads x and y through R32F views; on a device with fewer texels per view than they
    // hold (vulkan12-minimum: 65,536) those views run through Storage only.
    if (variant == ops::ReduceVariant::Texel &&
        uint64_t(f.numel()) > ctx().info().max_texel_buffer_elements) {
      noteNotRun("the Texel variant on " + where, "maxTexelBufferElements");
      continue;
    }
    const auto x = rng.uniform(f.numel(), -0.5f, 1.5f), y = rng.uniform(f.numel(), 0.0f, 1.0f);
    std::vector<float> want(f.kept);
    ops::ref::sumOverKeptAxis(x.data(), y.data(), want.data(), f.outer, f.kept, f.inner, -0.5);
    auto tx = upload(ctx(), {f.numel()}, x), ty = upload(ctx(), {f.numel()}, y);
    auto out = poisoned(ctx(), {f.kept});
    vk::Recorder rec(ctx());
    const ops::TensorView y_view = ty.view();
    ops::sumOverKeptAxis(rec, "test", tx.view(), &y_view, out.view(), f, -0.5f, Write::Overwrite,
                   variant);
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), out), want, kTolerance));
  }
}

TEST_F(ReduceTest, SameInputGivesTheSameBits) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (Reduction r : {Reduction::SumLastAxis, Reduction::SumRows}) {
    const Shape shape{300, 1001};
    auto tx = upload(ctx(), shape, rng.uniform(shape.numel()));
    auto a = poisoned(ctx(), outShape(r, shape)), b = poisoned(ctx(), outShape(r, shape));
    vk::Recorder rec(ctx());
    forward(rec, r, tx.view(), a.view());
    forward(rec, r, tx.view(), b.view());
    rec.submit();
    const auto got_a = download(ctx(), a), got_b = download(ctx(), b);
    EXPECT_EQ(std::memcmp(got_a.data(), got_b.data(), got_a.size() * 4), 0) << name(r);
  }
}

TEST_F(ReduceTest, BackwardMatchesCpuInBothWriteModes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (Reduction r : kReductions)
    for (const Shape& shape : {Shape{1}, Shape{17}, Shape{1000, 7}, Shape{7, 1000}, Shape{3, 5, 17},
                               Shape{6, 8, 12}}) {
      SCOPED_TRACE(testing::Message() << name(r) << " " << shape.str());
      const ops::KeptAxis f = axesOf(r, shape);
      const double scale = isMean(r) ? 1.0 / double(f.outer * f.inner) : 1.0;
      const auto dout = rng.uniform(f.kept);
      const auto init = rng.uniform(shape.numel());
      std::vector<float> want(shape.numel());
      for (int64_t i = 0; i < shape.numel(); ++i)
        want[i] = float(scale * dout[(i / f.inner) % f.kept]);
      auto tdout = upload(ctx(), outShape(r, shape), dout);
      auto dx = poisoned(ctx(), shape), acc = upload(ctx(), shape, init);
      vk::Recorder rec(ctx());
      backward(rec, r, tdout.view(), dx.view());
      backward(rec, r, tdout.view(), acc.view(), Write::Accumulate);
      rec.submit();
      EXPECT_TRUE(allClose(download(ctx(), dx), want, kBroadcastTolerance));
      EXPECT_TRUE(accumulatedClose(download(ctx(), acc), want, init, kBroadcastTolerance));
    }
}

// loss = sum_m w_m out_m(x) with the GPU forward; the analytic gradient is the GPU backward
// with dout = w.
TEST_F(ReduceTest, BackwardPassesGradCheck) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (Reduction r : kReductions)
    for (const Shape& shape : {Shape{6, 7}, Shape{2, 3, 4}, Shape{9}}) {
      SCOPED_TRACE(testing::Message() << name(r) << " " << shape.str());
      const Shape out_shape = outShape(r, shape);
      auto x = rng.uniform(shape.numel());
      const auto w = rng.uniform(out_shape.numel());
      auto loss = [&] {
        auto tx = upload(ctx(), shape, x), out = poisoned(ctx(), out_shape);
        vk::Recorder rec(ctx());
        forward(rec, r, tx.view(), out.view());
        rec.submit();
        return weightedSum(download(ctx(), out), w);
      };
      auto tw = upload(ctx(), out_shape, w), dx = poisoned(ctx(), shape);
      vk::Recorder rec(ctx());
      backward(rec, r, tw.view(), dx.view());
      rec.submit();
      const auto grad = download(ctx(), dx);
      EXPECT_TRUE(checkGradients(loss, {{"x", &x, grad}}, rng));
    }
}

// Offsets of 1 to 3 floats fetch R32F texels (an RGBA32F texel must start on 16 bytes), 0
// and 4 RGBA32F; nothing outside the views may be written.
TEST_F(ReduceTest, AnyOffsetOfWholeFloatsWorks) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  constexpr float kSentinel = 12345.0f;
  const Shape shape{6, 8};
  for (Reduction r : {Reduction::SumLastAxis, Reduction::MeanRows})
    for (int64_t at : {0, 1, 2, 3, 4, 5}) {
      SCOPED_TRACE(testing::Message() << name(r) << ", offset " << at << " floats");
      const auto x = rng.uniform(48, -0.5f, 1.5f);
      const auto want = reference(r, shape, x);
      const int64_t m = int64_t(want.size()), out_at = 5 - at;
      std::vector<float> all(at + 48 + out_at + m + 3, kSentinel);
      std::copy(x.begin(), x.end(), all.begin() + at);
      auto whole = upload(ctx(), {int64_t(all.size())}, all);
      const uint64_t out_offset = uint64_t(at + 48 + out_at) * 4;
      vk::Recorder rec(ctx());
      forward(rec, r, ops::view(whole.buffer, shape, uint64_t(at) * 4),
              ops::view(whole.buffer, outShape(r, shape), out_offset));
      rec.submit();
      const auto got = download(ctx(), whole);
      for (int64_t i = 0; i < int64_t(all.size()); ++i) {
        const int64_t j = i - (at + 48 + out_at);
        if (j >= 0 && j < m) continue;
        EXPECT_EQ(got[i], all[i]) << "element " << i << " outside the output";
      }
      EXPECT_TRUE(allClose(std::vector<float>(got.begin() + (at + 48 + out_at),
                                              got.begin() + (at + 48 + out_at + m)),
                           want, kTolerance));
    }
}

// x (and y) in f16 or bf16 and out in any format, and mixed: a bf16 dy summed into an f32 or
// bf16 bias gradient (sumRows), the last-axis sums and the general view with a product, over
// odd shapes and a long column (a lane's Kahan run), in both write modes; x at an odd
// element offset (2 bytes into a word) once. The reference runs on the rounded inputs, so
// the f32 sums keep kTolerance and the store adds one rounding in out's format
// (closeInFormat); Accumulate adds the stored init in f32 before that one rounding.
TEST_F(ReduceTest, SixteenBitTensorsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  using ops::DType;
  struct Formats {
    DType x, out;
  };
  const Formats formats[] = {{DType::BF16, DType::F32},
                             {DType::BF16, DType::BF16},
                             {DType::F16, DType::F16},
                             {DType::F32, DType::BF16},
                             {DType::F16, DType::F32}};
  const Shape shapes[] = {{37, 53}, {3, 5, 17}, {1000, 7}, {129}};
  for (const Formats& f : formats)
    for (Reduction r : {Reduction::SumRows, Reduction::SumLastAxis, Reduction::MeanRows})
      for (const Shape& shape : shapes) {
        if (shape.rank() == 1 && overRows(r)) continue;
        SCOPED_TRACE(testing::Message() << name(r) << " " << shape.str() << " "
                                        << ops::dtypeName(f.x) << " -> " << ops::dtypeName(f.out));
        const auto x = ops::ref::roundTo(f.x, rng.uniform(shape.numel(), -0.5f, 1.5f));
        const Shape out_shape = outShape(r, shape);
        const auto want = reference(r, shape, x);
        const auto init = ops::ref::roundTo(f.out, rng.uniform(want.size()));
        auto tx = upload(ctx(), shape, x, f.x);
        auto out = poisoned(ctx(), out_shape, f.out), acc = upload(ctx(), out_shape, init, f.out);
        vk::Recorder rec(ctx());
        forward(rec, r, tx.view(), out.view());
        forward(rec, r, tx.view(), acc.view(), Write::Accumulate);
        rec.submit();
        EXPECT_TRUE(closeInFormat(download(ctx(), out), want, f.out, kTolerance));
        std::vector<float> want_acc = want;
        for (size_t i = 0; i < want.size(); ++i) want_acc[i] += init[i];
        EXPECT_TRUE(closeInFormat(download(ctx(), acc), want_acc, f.out, kTolerance));
      }
  // The general view with a product (the gradient of a broadcast factor), x and y in
  // different formats.
  for (const ops::KeptAxis f : {ops::KeptAxis{5, 7, 9}, ops::KeptAxis{300, 3, 1}}) {
    const auto x = ops::ref::roundTo(DType::BF16, rng.uniform(f.numel(), -0.5f, 1.5f));
    const auto y = ops::ref::roundTo(DType::F16, rng.uniform(f.numel(), 0.0f, 1.0f));
    std::vector<float> want(f.kept);
    ops::ref::sumOverKeptAxis(x.data(), y.data(), want.data(), f.outer, f.kept, f.inner, -0.5);
    auto tx = upload(ctx(), {f.numel()}, x, DType::BF16);
    auto ty = upload(ctx(), {f.numel()}, y, DType::F16);
    auto out = poisoned(ctx(), {f.kept}, DType::BF16);
    vk::Recorder rec(ctx());
    const ops::TensorView y_view = ty.view();
    ops::sumOverKeptAxis(rec, "test", tx.view(), &y_view, out.view(), f, -0.5f, Write::Overwrite);
    rec.submit();
    EXPECT_TRUE(closeInFormat(download(ctx(), out), want, DType::BF16, kTolerance));
  }
  // x one element (2 bytes) into its buffer, the bf16 element before it a sentinel.
  {
    const Shape shape{9, 13};
    const auto x = ops::ref::roundTo(DType::BF16, rng.uniform(shape.numel(), -0.5f, 1.5f));
    std::vector<float> all(x.size() + 1, 3.0f);
    std::copy(x.begin(), x.end(), all.begin() + 1);
    auto whole = upload(ctx(), {int64_t(all.size())}, all, DType::BF16);
    auto out = poisoned(ctx(), {13}, DType::BF16);
    vk::Recorder rec(ctx());
    ops::sumRows(rec, ops::view(whole.buffer, shape, 2, DType::BF16), out.view());
    rec.submit();
    EXPECT_TRUE(closeInFormat(download(ctx(), out), reference(Reduction::SumRows, shape, x),
                              DType::BF16, kTolerance));
  }
}

// The texel kernel reads and writes f32 only: asked for with a 16-bit tensor it refuses
// before recording.
TEST_F(ReduceTest, TexelVariantRefusesSixteenBitTensors) {
  Rng rng;
  auto x = upload(ctx(), {4, 8}, rng.uniform(32), ops::DType::BF16);
  auto x32 = upload(ctx(), {4, 8}, rng.uniform(32)), out = poisoned(ctx(), {8});
  auto out16 = poisoned(ctx(), {8}, ops::DType::F16);
  for (const auto& pair : {std::pair{&x, &out}, std::pair{&x32, &out16}}) {
    const DeviceTensor *in = pair.first, *to = pair.second;  // captured below
    expectError(
        ctx(),
        [&](vk::Recorder& rec) {
          ops::sumOverKeptAxis(rec, "test", in->view(), nullptr, to->view(), {4, 8, 1}, 1.0f,
                               Write::Overwrite, ops::ReduceVariant::Texel);
        },
        "the texel variant reads and writes f32 only");
  }
}

TEST_F(ReduceTest, RejectsBadShapesDtypesAndOverlapsBeforeRecording) {
  Rng rng;
  auto x = upload(ctx(), {4, 8}, rng.uniform(32)), out4 = poisoned(ctx(), {4});
  auto out8 = poisoned(ctx(), {8}), empty = poisoned(ctx(), {4, 1});
  vk::Recorder rec(ctx());
  expectShapeError(rec, [&] { ops::sumLastAxis(rec, x.view(), out8.view()); },
                   "sumLastAxis: x (4,8) -> out (8): out must be x's shape without its last axis");
  expectShapeError(rec, [&] { ops::meanRows(rec, x.view(), out4.view()); },
                   "meanRows: x (4,8) -> out (4): out must be (N) with N = x's last axis");
  expectShapeError(rec,
                   [&] { ops::sumLastAxis(rec, ops::view(empty.buffer, {4, 0}), out4.view()); },
                   "sumLastAxis: x (4,0): empty reduction");
  expectShapeError(
      rec,
      [&] {
        ops::sumRows(rec, ops::view(x.buffer, {4, 8}, 0, ops::DType::U32), out8.view());
      },
      "sumRows: x must be f32, f16 or bf16, got u32");
  expectShapeError(rec,
                   [&] { ops::sumLastAxis(rec, x.view(), ops::view(x.buffer, {4}, 64)); },
                   "sumLastAxis: out (4) overlaps x (4,8)");
  expectShapeError(rec, [&] { ops::sumRowsBackward(rec, out4.view(), x.view()); },
                   "sumRowsBackward: dout (4) -> dx (4,8): dout must be (N)");
  expectShapeError(rec,
                   [&] { ops::meanLastAxisBackward(rec, out8.view(), x.view()); },
                   "meanLastAxisBackward: dout (8) -> dx (4,8): dout must be dx's shape without");
}

}  // namespace
}  // namespace vkgrad::test

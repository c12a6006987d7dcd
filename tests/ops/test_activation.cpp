#include "vkgrad/ops/activation.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "common/compare.h"
#include "common/expect.h"
#include "common/device_tensor.h"
#include "common/gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/activation.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/core/error.h"

namespace vkgrad::test {
namespace {

using ops::Activation;
using ops::Shape;
using ops::Write;

// ew_math.glsl's exp, tanh, sigmoid and normal CDF are within 4.4e-7 relative of the exact
// value (measured in float on the CPU), log within 3 ulps or 2^-21 absolute, the derivatives
// are a few such terms: 2e-6 of the largest output leaves room for a few roundings more.
constexpr double kTolerance = 2e-6;

const Activation kKinds[] = {
    Activation::Relu,  Activation::LeakyRelu, Activation::GeluTanh,   Activation::GeluErf,
    Activation::Sigmoid, Activation::Tanh,    Activation::Elu,        Activation::Exp,
    Activation::Log,   Activation::Neg,       Activation::Reciprocal, Activation::Sqrt,
    Activation::Rsqrt, Activation::Pow,       Activation::Erf,        Activation::Silu,
    Activation::Abs};

float paramOf(Activation kind) {
  switch (kind) {
    case Activation::LeakyRelu: return 0.1f;
    case Activation::Elu: return 1.3f;
    case Activation::Pow: return 3.0f;  // odd: the sign of negative x must survive
    default: return 0.0f;
  }
}

// Kinds defined for positive x only.
bool positiveOnly(Activation kind) {
  return kind == Activation::Log || kind == Activation::Sqrt || kind == Activation::Rsqrt;
}

// Inputs each kind is checked on: log on positive values only; the rest over a range that
// reaches both saturated tails. Kinks (0 for the ReLUs and ELU) are kept at least `margin`
// away, so that a finite difference never straddles one.
std::vector<float> inputsFor(Rng& rng, Activation kind, size_t n, float margin = 0.0f) {
  if (positiveOnly(kind)) return rng.uniform(n, 0.05f, 8.0f);
  // 1/x: away from the pole, where a float's rounding is amplified without bound.
  if (kind == Activation::Reciprocal) margin = std::max(margin, 0.25f);
  auto x = rng.uniform(n, -6.0f, 6.0f);
  for (float& v : x)
    if (std::fabs(v) < margin) v = v < 0 ? v - margin : v + margin;
  return x;
}

std::vector<float> plus(std::vector<float> x, const std::vector<float>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  return x;
}

// max_i |got_i - want_i| / scale_i <= tolerance; non-finite values fail.
::testing::AssertionResult closeRelativeTo(const std::vector<float>& got,
                                           const std::vector<float>& want,
                                           const std::vector<double>& scale, double tolerance) {
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]) / std::max(scale[i], 1e-30);
    if (!std::isfinite(err))
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want "
                                           << want[i];
    if (err > worst) worst = err, worst_at = i;
  }
  if (worst > tolerance)
    return ::testing::AssertionFailure()
           << "error " << worst << " > " << tolerance << " at element " << worst_at << " (got "
           << got[worst_at] << ", want " << want[worst_at] << ", scale " << scale[worst_at] << ")";
  return ::testing::AssertionSuccess();
}

// Odd sizes end in a partial texel; 8x12, 7x1000 and 6x4x4 are whole texels.
const Shape kShapes[] = {{1}, {3}, {17}, {129}, {1000, 7}, {7, 1000}, {3, 5, 17}, {8, 12}, {6, 4, 4}};

// got = want + init (Write::Accumulate), normalised by the largest |want_i| or |init_i|:
// the sum itself may cancel to almost nothing, leaving only the rounding of its terms.
using ActivationTest = VkTest;

TEST_F(ActivationTest, ForwardMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (Activation kind : kKinds)
    for (const Shape& shape : kShapes) {
      SCOPED_TRACE(testing::Message() << ops::activationName(kind) << " " << shape.str());
      const auto x = inputsFor(rng, kind, shape.numel());
      std::vector<float> want(x.size());
      ops::ref::activation(kind, x.data(), want.data(), shape.numel(), paramOf(kind));
      auto tx = upload(ctx(), shape, x), ty = poisoned(ctx(), shape);
      vk::Recorder rec(ctx());
      ops::activation(rec, kind, tx.view(), ty.view(), paramOf(kind));
      rec.submit();
      EXPECT_TRUE(allClose(download(ctx(), ty), want, kTolerance));
    }
}

// Relative accuracy element by element, where allClose (normalised by the largest value)
// would not see it: the far tails, e.g. GELU(-11) = -1.7e-27, sigmoid(-68) = 3e-30. Only
// down to 1e-30, so that intermediates (the sigmoid inside GELU-tanh is x times smaller than
// the result) stay normal floats: lavapipe flushes denormals to zero.
TEST_F(ActivationTest, ForwardIsRelativelyAccurateInTheTails) {
  const Activation kinds[] = {Activation::GeluTanh, Activation::GeluErf, Activation::Sigmoid,
                              Activation::Tanh,     Activation::Elu,     Activation::Exp};
  std::vector<float> x;
  for (float v = -13.0f; v <= 13.0f; v += 0.01f) x.push_back(v);
  for (float v : {1e-6f, -1e-6f, 3e-4f, -3e-4f, 0.3f, -0.3f, -80.0f, 80.0f, -87.0f, 88.0f}) x.push_back(v);
  const Shape shape{int64_t(x.size())};
  auto tx = upload(ctx(), shape, x);
  for (Activation kind : kinds) {
    SCOPED_TRACE(ops::activationName(kind));
    auto ty = poisoned(ctx(), shape);
    vk::Recorder rec(ctx());
    ops::activation(rec, kind, tx.view(), ty.view(), paramOf(kind));
    rec.submit();
    const auto y = download(ctx(), ty);
    double worst = 0;
    size_t worst_at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = ops::ref::activate(kind, x[i], paramOf(kind));
      if (std::fabs(want) < 1e-30 || !std::isfinite(want)) continue;
      double err = std::fabs(y[i] - want) / std::fabs(want);
      // GeluTanh's tail is ill-conditioned in its own formula: sigmoid(2u) with u = sqrt(2/pi)
      // (x + 0.044715 x^3) has relative condition |2u| in u, so rounding u (and the float
      // constants) alone costs |2u| ulps, 65 at x = -9. Measure it in units of that.
      if (kind == Activation::GeluTanh) {
        const double u2 = 2 * 0.7978845608 * (x[i] + 0.044715 * double(x[i]) * x[i] * x[i]);
        err /= std::max(1.0, std::fabs(u2));
      }
      if (err > worst) worst = err, worst_at = i;
    }
    EXPECT_LT(worst, 1e-6) << "at x = " << x[worst_at] << ": got " << y[worst_at] << ", want "
                           << ops::ref::activate(kind, x[worst_at], paramOf(kind));
  }
}

TEST_F(ActivationTest, ForwardSaturatesWithoutNaN) {
  const std::vector<float> x = {-1e30f, -1e6f, -200.0f, -90.0f, 90.0f, 200.0f, 1e6f, 1e30f};
  const Shape shape{8};
  auto tx = upload(ctx(), shape, x);
  for (Activation kind : kKinds) {
    if (positiveOnly(kind)) continue;
    SCOPED_TRACE(ops::activationName(kind));
    std::vector<float> want(x.size());
    ops::ref::activation(kind, x.data(), want.data(), 8, paramOf(kind));
    auto ty = poisoned(ctx(), shape), dx = poisoned(ctx(), shape);
    auto dy = upload(ctx(), shape, std::vector<float>(8, 1.0f));
    vk::Recorder rec(ctx());
    ops::activation(rec, kind, tx.view(), ty.view(), paramOf(kind));
    ops::activationBackward(rec, kind, tx.view(), ty.view(), dy.view(), dx.view(), paramOf(kind));
    rec.submit();
    const auto y = download(ctx(), ty), g = download(ctx(), dx);
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_FALSE(std::isnan(y[i])) << "y at x = " << x[i];
      EXPECT_FALSE(std::isnan(g[i])) << "dx at x = " << x[i];
      if (std::isinf(want[i])) {
        EXPECT_EQ(y[i], want[i]) << "at x = " << x[i];
      } else {
        EXPECT_NEAR(y[i], want[i], 1e-6 * std::max(1.0, std::fabs(double(want[i])))) << "at x = " << x[i];
      }
    }
  }
}

TEST_F(ActivationTest, ForwardInPlace) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const Shape& shape : {Shape{17}, Shape{8, 12}}) {
    const auto x = rng.uniform(shape.numel(), -3.0f, 3.0f);
    std::vector<float> want(x.size());
    ops::ref::activation(Activation::GeluErf, x.data(), want.data(), shape.numel(), 0.0f);
    auto t = upload(ctx(), shape, x);
    vk::Recorder rec(ctx());
    ops::activation(rec, Activation::GeluErf, t.view(), t.view());
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), t), want, kTolerance));
  }
}

TEST_F(ActivationTest, BackwardMatchesCpuInBothWriteModes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (Activation kind : kKinds)
    for (const Shape& shape : kShapes) {
      SCOPED_TRACE(testing::Message() << ops::activationName(kind) << " " << shape.str());
      const int64_t n = shape.numel();
      const auto x = inputsFor(rng, kind, n), dy = rng.uniform(n), init = rng.uniform(n);
      std::vector<float> y(n), want(n);
      ops::ref::activation(kind, x.data(), y.data(), n, paramOf(kind));
      ops::ref::activationBackward(kind, x.data(), dy.data(), want.data(), n, paramOf(kind));
      auto tx = upload(ctx(), shape, x), ty = upload(ctx(), shape, y), tdy = upload(ctx(), shape, dy);
      auto dx = poisoned(ctx(), shape), acc = upload(ctx(), shape, init);
      // Only the input the kind reads is passed; the other is an empty view.
      const bool reads_x = ops::activationBackwardReadsX(kind);
      const ops::TensorView xv = reads_x ? tx.view() : ops::TensorView{};
      const ops::TensorView yv = reads_x ? ops::TensorView{} : ty.view();
      vk::Recorder rec(ctx());
      ops::activationBackward(rec, kind, xv, yv, tdy.view(), dx.view(), paramOf(kind));
      ops::activationBackward(rec, kind, xv, yv, tdy.view(), acc.view(), paramOf(kind),
                              Write::Accumulate);
      rec.submit();
      // Normalised per element by the size of the terms it is made of: the GELU derivatives
      // cross zero as a difference of terms ~0.3 (a one-element tensor there has a tiny
      // largest value), and Accumulate adds init. 2e-6 of that is a few ulps.
      std::vector<double> terms(n), terms_acc(n);
      for (int64_t i = 0; i < n; ++i) {
        const double d = ops::ref::activationDerivative(kind, x[i], paramOf(kind));
        terms[i] = std::fabs(dy[i]) * std::max(1.0, std::fabs(d));
        terms_acc[i] = terms[i] + std::fabs(init[i]);
      }
      EXPECT_TRUE(closeRelativeTo(download(ctx(), dx), want, terms, kTolerance));
      EXPECT_TRUE(closeRelativeTo(download(ctx(), acc), plus(want, init), terms_acc, kTolerance));
    }
}

// loss = sum_i w_i f(x_i) with the GPU forward; the analytic gradient is the GPU backward
// with dy = w, fed the GPU forward's y.
TEST_F(ActivationTest, BackwardPassesGradCheck) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Shape shape{5, 7};
  for (Activation kind : kKinds) {
    SCOPED_TRACE(ops::activationName(kind));
    // h = 1e-3 max(1, |x|) never reaches a kink 0.02 away; x stays within [-6, 6], where
    // the saturating kinds still have gradients well above the finite-difference noise.
    auto x = inputsFor(rng, kind, shape.numel(), 0.02f);
    const auto w = rng.uniform(shape.numel());
    auto forward = [&](const DeviceTensor& tx, const DeviceTensor& ty) {
      vk::Recorder rec(ctx());
      ops::activation(rec, kind, tx.view(), ty.view(), paramOf(kind));
      rec.submit();
    };
    auto loss = [&] {
      auto tx = upload(ctx(), shape, x), ty = poisoned(ctx(), shape);
      forward(tx, ty);
      return weightedSum(download(ctx(), ty), w);
    };
    auto tx = upload(ctx(), shape, x), ty = poisoned(ctx(), shape);
    forward(tx, ty);
    auto tw = upload(ctx(), shape, w), dx = poisoned(ctx(), shape);
    vk::Recorder rec(ctx());
    ops::activationBackward(rec, kind, tx.view(), ty.view(), tw.view(), dx.view(), paramOf(kind));
    rec.submit();
    const auto grad = download(ctx(), dx);
    EXPECT_TRUE(checkGradients(loss, {{"x", &x, grad}}, rng));
  }
}

// `data` at element `at` of a buffer with a sentinel-filled margin on both sides: any offset
// that is a multiple of 4 bytes must work, and nothing outside the view may be written.
// Offsets of 1 to 3 floats take the storage kernels (an RGBA32F texel must start on 16
// bytes); 0 and 4 the texel kernels.
TEST_F(ActivationTest, AnyOffsetOfWholeFloatsWorks) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Shape shape{5, 7};
  const Activation kind = Activation::Elu;
  const float param = paramOf(kind);
  for (int64_t at : {0, 1, 2, 3, 4, 5}) {
    SCOPED_TRACE(testing::Message() << "offset " << at << " floats");
    const auto x = inputsFor(rng, kind, 35), dy = rng.uniform(35), init = rng.uniform(35);
    std::vector<float> y(35), dx(35);
    ops::ref::activation(kind, x.data(), y.data(), 35, param);
    ops::ref::activationBackward(kind, x.data(), dy.data(), dx.data(), 35, param);
    auto tx = placed(ctx(), shape, x, at), tdy = placed(ctx(), shape, dy, (at + 1) % 6);
    auto ty = placed(ctx(), shape, std::vector<float>(35, std::nanf("")), (at + 2) % 6);
    auto tdx = placed(ctx(), shape, init, (at + 3) % 6);
    vk::Recorder rec(ctx());
    ops::activation(rec, kind, tx.view, ty.view, param);
    ops::activationBackward(rec, kind, tx.view, {}, tdy.view, tdx.view, param, Write::Accumulate);
    rec.submit();
    EXPECT_TRUE(allClose(readPlaced(ctx(), ty), y, kTolerance));
    EXPECT_TRUE(accumulatedClose(readPlaced(ctx(), tdx), dx, init, kTolerance));
  }
}

// f'(x) in terms of y = f(x), for the kinds whose backward reads y (activation.glsl).
double derivativeFromY(Activation kind, double y) {
  switch (kind) {
    case Activation::Relu:
      return y > 0 ? 1.0 : 0.0;
    case Activation::Sigmoid:
      return y * (1 - y);
    case Activation::Tanh:
      return 1 - y * y;
    case Activation::Exp:
      return y;
    case Activation::Neg:
      return -1;
    case Activation::Reciprocal:
      return -y * y;
    case Activation::Sqrt:
      return 0.5 / y;
    case Activation::Rsqrt:
      return -0.5 * y * y * y;
    default:
      throw std::logic_error("derivativeFromY: the kind reads x");
  }
}

// Every tensor in f16 or bf16, and mixed with f32: the reference runs on the rounded inputs
// in f32 and the result is held to one rounding in the output's format (closeInFormat).
TEST_F(ActivationTest, SixteenBitTensorsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  using ops::DType;
  const Shape shape{7, 13};
  const int64_t n = shape.numel();
  struct Formats {
    DType in, out;
  };
  for (const Formats f : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                          Formats{DType::F32, DType::BF16}, Formats{DType::BF16, DType::F32}})
    for (Activation kind : kKinds) {
      SCOPED_TRACE(testing::Message() << ops::activationName(kind) << " " << ops::dtypeName(f.in)
                                      << " -> " << ops::dtypeName(f.out));
      const auto x = ops::ref::roundTo(f.in, inputsFor(rng, kind, n));
      const auto dy = ops::ref::roundTo(f.in, rng.uniform(n));
      const auto init = ops::ref::roundTo(f.out, rng.uniform(n));
      std::vector<float> y(n), dx(n);
      ops::ref::activation(kind, x.data(), y.data(), n, paramOf(kind));
      // The backward's y input is the stored forward output, as in a training step.
      const auto y_in = ops::ref::roundTo(f.in, y);
      std::vector<float> want_dx(n), xs = x;
      ops::ref::activationBackward(kind, xs.data(), dy.data(), want_dx.data(), n, paramOf(kind));
      auto tx = upload(ctx(), shape, x, f.in), ty_in = upload(ctx(), shape, y_in, f.in);
      auto tdy = upload(ctx(), shape, dy, f.in), ty = poisoned(ctx(), shape, f.out);
      auto tdx = poisoned(ctx(), shape, f.out), acc = upload(ctx(), shape, init, f.out);
      const bool reads_x = ops::activationBackwardReadsX(kind);
      const ops::TensorView xv = reads_x ? tx.view() : ops::TensorView{};
      const ops::TensorView yv = reads_x ? ops::TensorView{} : ty_in.view();
      vk::Recorder rec(ctx());
      ops::activation(rec, kind, tx.view(), ty.view(), paramOf(kind));
      ops::activationBackward(rec, kind, xv, yv, tdy.view(), tdx.view(), paramOf(kind));
      ops::activationBackward(rec, kind, xv, yv, tdy.view(), acc.view(), paramOf(kind),
                              Write::Accumulate);
      rec.submit();
      EXPECT_TRUE(closeInFormat(download(ctx(), ty), y, f.out, kTolerance));
      // Kinds that read y see it rounded: their reference is f'(x) written in the rounded y.
      if (!reads_x)
        for (int64_t i = 0; i < n; ++i) want_dx[i] = dy[i] * derivativeFromY(kind, y_in[i]);
      EXPECT_TRUE(closeInFormat(download(ctx(), tdx), want_dx, f.out, 4 * kTolerance));
      EXPECT_TRUE(closeInFormat(download(ctx(), acc), plus(want_dx, init), f.out, 4 * kTolerance));
    }
}

TEST_F(ActivationTest, RejectsBadShapesDtypesAndInputsBeforeRecording) {
  Rng rng;
  auto x = upload(ctx(), {4, 8}, rng.uniform(32)), y = poisoned(ctx(), {4, 8});
  auto other = poisoned(ctx(), {8, 4});
  vk::Recorder rec(ctx());
  expectShapeError(rec, [&] { ops::activation(rec, Activation::Tanh, x.view(), other.view()); },
                   "activation(tanh): y (8,4) must have the shape (4,8)");
  expectShapeError(rec,
                   [&] {
                     ops::activation(rec, Activation::Relu,
                                     ops::view(x.buffer, {4, 8}, 0, ops::DType::U32), y.view());
                   },
                   "activation: x must be f32, f16 or bf16, got u32");
  expectShapeError(rec,
                   [&] {
                     ops::activationBackward(rec, Activation::GeluErf, {}, y.view(), x.view(),
                                             other.view());
                   },
                   "activationBackward(gelu_erf) needs x, got an empty view");
  expectShapeError(rec,
                   [&] {
                     ops::activationBackward(rec, Activation::Sigmoid, {}, y.view(), x.view(),
                                             other.view());
                   },
                   "activationBackward(sigmoid): dx (8,4) must have the shape (4,8)");
  auto big = upload(ctx(), {5, 8}, rng.uniform(40));
  expectShapeError(rec,
                   [&] {
                     ops::activation(rec, Activation::Exp, ops::view(big.buffer, {4, 8}),
                                     ops::view(big.buffer, {4, 8}, 32));
                   },
                   "activation: y (4,8) overlaps x (4,8)");
}

}  // namespace
}  // namespace vkgrad::test

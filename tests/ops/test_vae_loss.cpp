// The VAE's loss terms (ops/vae_loss.h) against the CPU reference: row sums and their mean
// for both reconstruction kinds and the Gaussian KL, at odd shapes and odd view offsets, stable
// for logits of +-100; their gradients overwriting and accumulating; f16 and bf16 inputs and
// gradients; bad shapes refused.
#include "vkgrad/ops/vae_loss.h"

#include <cmath>
#include <list>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/vae_loss.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Shape;
using ops::Write;

class VaeLossTest : public VkTest {
 protected:
  Rng rng_;
};

// Images of 785 pixels (one more than Fashion-MNIST), rows of 7 and 33, one row, 257 rows,
// and a rank-3 (B, H, W) input summed over H and W.
const Shape kShapes[] = {{3, 7}, {1, 785}, {257, 33}, {4, 785}, {2, 3, 5}};

std::vector<float> nans(int64_t n) {
  return std::vector<float>(size_t(n), std::nanf(""));
}

enum class Term { Bce, Mse, Kl };

// Runs the forward op on a, b and returns {rows..., mean}.
std::vector<float> runForward(vk::Context& ctx, Term term, const Shape& shape,
                              const std::vector<float>& a, const std::vector<float>& b, int at) {
  const int64_t rows = shape[0];
  const Placed ta = placed(ctx, shape, a, at), tb = placed(ctx, shape, b, at + 1),
               tr = placed(ctx, {rows}, nans(rows), at + 2), tm = placed(ctx, {1}, nans(1), at + 3);
  vk::Recorder rec(ctx);
  if (term == Term::Kl)
    ops::gaussianKl(rec, ta.view, tb.view, tr.view, tm.view);
  else
    ops::reconstructionLoss(rec,
                            term == Term::Bce ? ops::Reconstruction::Bce : ops::Reconstruction::Mse,
                            ta.view, tb.view, tr.view, tm.view);
  rec.submit();
  std::vector<float> out = readPlaced(ctx, tr);
  out.push_back(readPlaced(ctx, tm)[0]);
  return out;
}

std::vector<float> reference(Term term, const Shape& shape, const std::vector<float>& a,
                             const std::vector<float>& b) {
  const int64_t rows = shape[0], cols = shape.numel() / rows;
  float mean = 0;
  std::vector<float> out =
      term == Term::Kl ? ops::ref::gaussianKl(a.data(), b.data(), rows, cols, &mean)
                       : ops::ref::reconstructionLoss(term == Term::Bce ? ops::Reconstruction::Bce
                                                                        : ops::Reconstruction::Mse,
                                                      a.data(), b.data(), rows, cols, &mean);
  out.push_back(mean);
  return out;
}

// Sums of up to 785 positive terms, Kahan-compensated on the device and in double on the
// host; exp and sigmoid are the float-accurate helpers (~1e-7): 1e-5 relative.
TEST_F(VaeLossTest, ForwardMatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  int at = 1;
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape.str());
    const size_t n = size_t(shape.numel());
    const auto logits = rng_.normal(n, 0.0f, 3.0f), targets = rng_.uniform(n, 0.0f, 1.0f);
    const auto mu = rng_.normal(n), log_sigma = rng_.uniform(n, -2.0f, 1.0f);
    for (Term term : {Term::Bce, Term::Mse, Term::Kl}) {
      const auto& a = term == Term::Kl ? mu : logits;
      const auto& b = term == Term::Kl ? log_sigma : targets;
      EXPECT_TRUE(
          allClose(runForward(ctx(), term, shape, a, b, at), reference(term, shape, a, b), 1e-5))
          << "term " << int(term);
      at = (at + 2) % 5;
    }
  }
}

// Logits of +-100 and +-30 (sigmoid saturated in float) against 0/1 and fractional targets:
// the cross-entropy stays finite and exact (it is |l| or 0 plus log1p(exp(-|l|))).
TEST_F(VaeLossTest, BceIsStableForHugeLogits) {
  const Shape shape{2, 6};
  const std::vector<float> logits = {100, -100, 30, -30, 0.5f, -0.5f, 100, -100, 30, -30, 88, -88};
  const std::vector<float> targets = {1, 0, 0, 1, 0.25f, 0.75f, 0, 1, 0.5f, 0.5f, 1, 1};
  const std::vector<float> got = runForward(ctx(), Term::Bce, shape, logits, targets, 3);
  for (float v : got) EXPECT_TRUE(std::isfinite(v)) << v;
  EXPECT_TRUE(allClose(got, reference(Term::Bce, shape, logits, targets), 1e-6));
}

// The gradients of the mean, each overwriting and accumulating onto random values, against
// the reference at a random upstream gradient.
TEST_F(VaeLossTest, BackwardMatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  int at = 2;
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape.str());
    const int64_t rows = shape[0], n = shape.numel(), cols = n / rows;
    const auto logits = rng_.normal(size_t(n), 0.0f, 3.0f),
               targets = rng_.uniform(size_t(n), 0.0f, 1.0f);
    const auto mu = rng_.normal(size_t(n)), log_sigma = rng_.uniform(size_t(n), -2.0f, 1.0f);
    const auto init = rng_.normal(size_t(n));
    const float dmean = rng_.uniform(1, 0.5f, 2.0f)[0];
    const Placed tl = placed(ctx(), shape, logits, at), tt = placed(ctx(), shape, targets, at + 1),
                 tmu = placed(ctx(), shape, mu, at + 2),
                 tls = placed(ctx(), shape, log_sigma, at + 3),
                 td = placed(ctx(), {1}, {dmean}, at);
    struct Out {
      const char* name;
      std::vector<float> want;
      Placed over, acc;
    };
    std::list<Out> outs;  // never relocated once built
    auto add = [&](const char* name, std::vector<float> want) {
      Out& o = outs.emplace_back(Out{name, std::move(want), placed(ctx(), shape, nans(n), at + 4),
                                     placed(ctx(), shape, init, at + 1)});
      o.over.view.buffer = &o.over.buffer;  // a Placed's view names its own buffer: moved here
      o.acc.view.buffer = &o.acc.buffer;
    };
    add("bce", ops::ref::reconstructionLossBackward(ops::Reconstruction::Bce, logits.data(),
                                                    targets.data(), rows, cols, dmean));
    add("mse", ops::ref::reconstructionLossBackward(ops::Reconstruction::Mse, logits.data(),
                                                    targets.data(), rows, cols, dmean));
    add("dmu", ops::ref::gaussianKlBackward(ops::KlInput::Mu, mu.data(), log_sigma.data(), rows,
                                            cols, dmean));
    add("dlog_sigma", ops::ref::gaussianKlBackward(ops::KlInput::LogSigma, mu.data(),
                                                   log_sigma.data(), rows, cols, dmean));
    vk::Recorder rec(ctx());
    std::vector<const Out*> by_index;
    for (const Out& out : outs) by_index.push_back(&out);
    for (Write w : {Write::Overwrite, Write::Accumulate}) {
      auto target = [&](size_t i) {
        return w == Write::Overwrite ? by_index[i]->over.view : by_index[i]->acc.view;
      };
      ops::reconstructionLossBackward(rec, ops::Reconstruction::Bce, tl.view, tt.view, td.view,
                                      target(0), w);
      ops::reconstructionLossBackward(rec, ops::Reconstruction::Mse, tl.view, tt.view, td.view,
                                      target(1), w);
      ops::gaussianKlBackward(rec, ops::KlInput::Mu, tmu.view, tls.view, td.view, target(2), w);
      ops::gaussianKlBackward(rec, ops::KlInput::LogSigma, tmu.view, tls.view, td.view, target(3),
                              w);
    }
    rec.submit();
    for (const Out& o : outs) {
      EXPECT_TRUE(allClose(readPlaced(ctx(), o.over), o.want, 1e-5)) << o.name;
      EXPECT_TRUE(accumulatedClose(readPlaced(ctx(), o.acc), o.want, init, 1e-5)) << o.name;
    }
    at = (at + 3) % 5;
  }
}

// The inputs (logits, targets, mu, log_sigma, dmean) and the gradients in f16 or bf16, and in
// different formats, at odd shapes; the losses (rows, mean) stay f32. The references run on
// the rounded inputs. The tolerances are the f32 tests' (the terms and sums stay f32;
// closeInFormat adds the gradients' one rounding when stored).
TEST_F(VaeLossTest, SixteenBitTensorsMatchCpu) {
  SCOPED_TRACE(rng_.describe());
  struct Formats {
    DType in, out;
  };
  for (const Shape& shape : {Shape{3, 7}, Shape{5, 785}})
    for (const Formats f : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                            Formats{DType::F32, DType::BF16}, Formats{DType::BF16, DType::F32}})
      for (Term term : {Term::Bce, Term::Mse, Term::Kl}) {
        SCOPED_TRACE(testing::Message() << shape.str() << " term " << int(term) << " "
                                        << ops::dtypeName(f.in) << " -> " << ops::dtypeName(f.out));
        const int64_t rows = shape[0], n = shape.numel(), cols = n / rows;
        const bool kl = term == Term::Kl;
        const std::vector<float> a = ops::ref::roundTo(
            f.in, kl ? rng_.normal(size_t(n)) : rng_.normal(size_t(n), 0.0f, 3.0f));
        const std::vector<float> b = ops::ref::roundTo(
            f.in, kl ? rng_.uniform(size_t(n), -2.0f, 1.0f) : rng_.uniform(size_t(n), 0.0f, 1.0f));
        const std::vector<float> init = ops::ref::roundTo(f.out, rng_.normal(size_t(n)));
        const float dmean = ops::ref::roundTo(f.in, rng_.uniform(1, 0.5f, 2.0f)[0]);
        // a one element into its buffer: a 2-byte offset for a 16-bit view.
        std::vector<float> shifted = {1.0f};
        shifted.insert(shifted.end(), a.begin(), a.end());
        const DeviceTensor ta = upload(ctx(), {n + 1}, shifted, f.in);
        const ops::TensorView av = ops::view(ta.buffer, shape, ops::dtypeBytes(f.in), f.in);
        const DeviceTensor tb = upload(ctx(), shape, b, f.in),
                           td = upload(ctx(), {1}, std::vector<float>{dmean}, f.in),
                           tr = poisoned(ctx(), {rows}), tm = poisoned(ctx(), {1}),
                           over = poisoned(ctx(), shape, f.out),
                           acc = upload(ctx(), shape, init, f.out);
        const auto kind = term == Term::Bce ? ops::Reconstruction::Bce : ops::Reconstruction::Mse;
        vk::Recorder rec(ctx());
        for (Write w : {Write::Overwrite, Write::Accumulate}) {
          const ops::TensorView out = w == Write::Overwrite ? over.view() : acc.view();
          if (kl)
            ops::gaussianKlBackward(rec, ops::KlInput::LogSigma, av, tb.view(), td.view(), out, w);
          else
            ops::reconstructionLossBackward(rec, kind, av, tb.view(), td.view(), out, w);
        }
        if (kl)
          ops::gaussianKl(rec, av, tb.view(), tr.view(), tm.view());
        else
          ops::reconstructionLoss(rec, kind, av, tb.view(), tr.view(), tm.view());
        rec.submit();
        std::vector<float> losses = download(ctx(), tr);
        losses.push_back(download(ctx(), tm)[0]);
        EXPECT_TRUE(closeInFormat(losses, reference(term, shape, a, b), DType::F32, 1e-5));
        const std::vector<float> want =
            kl ? ops::ref::gaussianKlBackward(ops::KlInput::LogSigma, a.data(), b.data(), rows,
                                              cols, dmean)
               : ops::ref::reconstructionLossBackward(kind, a.data(), b.data(), rows, cols, dmean);
        std::vector<float> want_acc = want;
        for (size_t i = 0; i < want_acc.size(); ++i) want_acc[i] += init[i];
        EXPECT_TRUE(closeInFormat(download(ctx(), over), want, f.out, 1e-5));
        EXPECT_TRUE(closeInFormat(download(ctx(), acc), want_acc, f.out, 1e-5));
      }
}

TEST_F(VaeLossTest, RejectsBadShapesBeforeRecording) {
  auto a = poisoned(ctx(), {4, 3}), b = poisoned(ctx(), {4, 2}), rows = poisoned(ctx(), {4}),
       mean = poisoned(ctx(), {1}), two = poisoned(ctx(), {2});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::gaussianKl(rec, a.view(), b.view(), rows.view(), mean.view()); },
      "gaussianKl: mu (4,3), log_sigma (4,2): mu and log_sigma must have the same shape");
  expectShapeError(
      rec,
      [&] {
        ops::reconstructionLoss(rec, ops::Reconstruction::Bce, a.view(), a.view(), b.view(),
                                mean.view());
      },
      "reconstructionLoss: rows (4,2) must hold 4 floats, one per row of logits (4,3)");
  expectShapeError(
      rec,
      [&] {
        ops::reconstructionLoss(rec, ops::Reconstruction::Mse, a.view(), a.view(), rows.view(),
                                two.view());
      },
      "reconstructionLoss: mean (2) must hold one float");
  expectShapeError(
      rec,
      [&] {
        ops::gaussianKlBackward(rec, ops::KlInput::Mu, a.view(), a.view(), mean.view(), b.view());
      },
      "gaussianKlBackward: dmu (4,2) must have the shape of mu (4,3)");
  // A gradient in place of its input needs the input's dtype: the bf16 view of mu's first
  // 24 bytes.
  const ops::TensorView mu16 = ops::view(a.buffer, {4, 3}, 0, DType::BF16);
  expectShapeError(
      rec,
      [&] {
        ops::gaussianKlBackward(rec, ops::KlInput::Mu, a.view(), a.view(), mean.view(), mu16);
      },
      "gaussianKlBackward: dmu in place of an input needs its dtype");
  auto counts = poisoned(ctx(), {4});
  expectShapeError(
      rec,
      [&] {
        ops::gaussianKl(rec, a.view(), a.view(), ops::view(counts.buffer, {4}, 0, DType::BF16),
                        mean.view());
      },
      "gaussianKl: rows must be f32, got bf16");
  EXPECT_EQ(shapeErrorText([] {
              ops::rowLossShape("gaussianKl", "mu", {0, 3}, "log_sigma", {0, 3});
            }),
            "gaussianKl: mu (0,3), log_sigma (0,3): must be non-empty (B, ...)");
}

}  // namespace
}  // namespace vkgrad::test

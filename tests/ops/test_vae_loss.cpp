// The VAE's loss terms (ops/vae_loss.h) against the CPU reference: row sums and their mean
// for both reconstruction kinds and the Gaussian KL, at odd shapes and odd view offsets, stable
// for logits of +-100; their gradients overwriting and accumulating; bad shapes refused.
#include "vkgrad/ops/vae_loss.h"

#include <cmath>
#include <list>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/vae_loss.h"

namespace vkgrad::test {
namespace {

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
      Out& o = outs.emplace_back(name, std::move(want), placed(ctx(), shape, nans(n), at + 4),
                                 placed(ctx(), shape, init, at + 1));
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
  EXPECT_EQ(shapeErrorText([] {
              ops::rowLossShape("gaussianKl", "mu", {0, 3}, "log_sigma", {0, 3});
            }),
            "gaussianKl: mu (0,3), log_sigma (0,3): must be non-empty (B, ...)");
}

}  // namespace
}  // namespace vkgrad::test

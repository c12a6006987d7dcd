#include "vkgrad/ops/prepend_token.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/prepend_token.h"

namespace vkgrad::test {
namespace {

using ops::Shape;
using ops::Write;

class PrependTokenTest : public VkTest {
 protected:
  Rng rng_;
};

struct Case {
  int64_t batch, rows, dim;
};
// Odd sizes: one row, one channel, a batch of 37 (dtoken sums over it), a ViT-like 49 patches.
constexpr Case kCases[] = {{3, 7, 5}, {1, 1, 1}, {37, 4, 33}, {2, 49, 13}, {6, 16, 64}};

std::vector<float> nans(int64_t n) {
  return std::vector<float>(size_t(n), std::nanf(""));
}

// A copy is exact: tolerance 0, outputs poisoned with NaN, a sentinel around each view.
TEST_F(PrependTokenTest, ForwardMatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  int at = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "x (" << c.batch << "," << c.rows << "," << c.dim << ")");
    const Shape xs{c.batch, c.rows, c.dim}, out = ops::prependTokenShape(xs, {c.dim});
    const auto x = rng_.normal(size_t(xs.numel())), token = rng_.normal(size_t(c.dim));
    std::vector<float> want(size_t(out.numel()));
    ops::ref::prependToken(x.data(), token.data(), want.data(), c.batch, c.rows, c.dim);
    const Placed tx = placed(ctx(), xs, x, at), tt = placed(ctx(), {c.dim}, token, at + 1),
                 ty = placed(ctx(), out, nans(out.numel()), at + 2);
    vk::Recorder rec(ctx());
    ops::prependToken(rec, tx.view, tt.view, ty.view);
    rec.submit();
    EXPECT_TRUE(allClose(readPlaced(ctx(), ty), want, 0.0));
    at = (at + 2) % 5;
  }
}

// dx is a copy (exact, or one float add when accumulating: still exact against the reference,
// which rounds its double sum once). dtoken is a float sum over the batch in increasing b; the
// reference sums in double. Its rounding is at most ~B * 2^-24 of the terms' scale (~sqrt(B)
// for unit normals), 2e-6 at B = 37; a dropped or doubled term is ~1/sqrt(B) >= 0.16 of it.
// Every combination of wanted outputs and write modes, each run twice to check the bits repeat.
TEST_F(PrependTokenTest, BackwardMatchesTheReferenceAndRepeats) {
  SCOPED_TRACE(rng_.describe());
  constexpr double kTokenTolerance = 1e-5;
  int at = 2;
  for (const Case& c : kCases)
    for (int wanted : {3, 1, 2})  // bit 0: dx, bit 1: dtoken
      for (Write w : {Write::Overwrite, Write::Accumulate}) {
        const bool want_dx = wanted & 1, want_token = wanted & 2, acc = w == Write::Accumulate;
        SCOPED_TRACE(testing::Message()
                     << "x (" << c.batch << "," << c.rows << "," << c.dim << ") dx " << want_dx
                     << " dtoken " << want_token << " accumulate " << acc);
        const Shape xs{c.batch, c.rows, c.dim}, ys{c.batch, c.rows + 1, c.dim};
        const auto dy = rng_.normal(size_t(ys.numel()));
        // dx's mode is the opposite of dtoken's when both are wanted: the kernel keeps them
        // apart. An output that starts as NaN must be written wholly.
        const bool acc_dx = want_token ? !acc : acc;
        const auto dx_init = acc_dx ? rng_.normal(size_t(xs.numel())) : nans(xs.numel());
        const auto dt0 = acc ? rng_.normal(size_t(c.dim)) : nans(c.dim);
        std::vector<float> want_dx_v = dx_init, want_dt_v = dt0;
        ops::ref::prependTokenBackward(dy.data(), want_dx ? want_dx_v.data() : nullptr,
                                       want_token ? want_dt_v.data() : nullptr, c.batch, c.rows,
                                       c.dim, acc_dx, acc);
        const Placed tdy = placed(ctx(), ys, dy, at);
        Placed tdx[2] = {placed(ctx(), xs, dx_init, at + 1), placed(ctx(), xs, dx_init, at + 2)};
        Placed tdt[2] = {placed(ctx(), {c.dim}, dt0, at + 3), placed(ctx(), {c.dim}, dt0, at)};
        vk::Recorder rec(ctx());
        for (int run = 0; run < 2; ++run)
          ops::prependTokenBackward(rec, tdy.view, want_dx ? tdx[run].view : ops::TensorView{},
                                    want_token ? tdt[run].view : ops::TensorView{},
                                    acc_dx ? Write::Accumulate : Write::Overwrite, w);
        EXPECT_EQ(rec.dispatchCount(), 2u);  // one dispatch for both gradients
        rec.submit();
        std::vector<float> got_dx[2], got_dt[2];
        for (int run = 0; run < 2; ++run) {
          got_dx[run] = readPlaced(ctx(), tdx[run]);
          got_dt[run] = readPlaced(ctx(), tdt[run]);
        }
        if (want_dx) {
          EXPECT_TRUE(allClose(got_dx[0], want_dx_v, 0.0)) << "dx";
        } else {  // untouched, NaN poison included
          EXPECT_EQ(std::memcmp(got_dx[0].data(), dx_init.data(), dx_init.size() * 4), 0);
        }
        if (want_token) {
          EXPECT_TRUE(
              allCloseOnScale(got_dt[0], want_dt_v, std::sqrt(double(c.batch)), kTokenTolerance))
              << "dtoken";
        } else {
          EXPECT_EQ(std::memcmp(got_dt[0].data(), dt0.data(), dt0.size() * 4), 0);
        }
        EXPECT_EQ(std::memcmp(got_dx[0].data(), got_dx[1].data(), dx_init.size() * 4), 0);
        EXPECT_EQ(std::memcmp(got_dt[0].data(), got_dt[1].data(), dt0.size() * 4), 0);
        at = (at + 1) % 5;
      }
}

// x, token and out in f16 or bf16, or an f32 token (a learned parameter) with 16-bit
// activations: the forward moves values, rounding at most once into out's format; dx moves
// (and adds in f32) likewise; dtoken is an f32 sum over the batch (kTokenTolerance of the
// test above) rounded once. The gradients take the forward's formats, dout out's, as in a
// training step. Every view starts one element into its buffer (2 bytes for 16-bit ones).
TEST_F(PrependTokenTest, SixteenBitTensorsMatchTheReference) {
  SCOPED_TRACE(rng_.describe());
  constexpr double kTokenTolerance = 1e-5;
  using ops::DType;
  struct Formats {
    DType x, token, out;
  };
  for (const Formats fm :
       {Formats{DType::F16, DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16, DType::BF16},
        Formats{DType::BF16, DType::F32, DType::BF16}, Formats{DType::F16, DType::F32, DType::F32}})
    for (const Case& c : {kCases[0], kCases[2], kCases[3]})
      for (int wanted : {3, 1, 2})  // bit 0: dx, bit 1: dtoken
        for (Write w : {Write::Overwrite, Write::Accumulate}) {
          const bool has_dx = wanted & 1, has_token = wanted & 2, acc = w == Write::Accumulate;
          SCOPED_TRACE(testing::Message()
                       << "x (" << c.batch << "," << c.rows << "," << c.dim << ") "
                       << ops::dtypeName(fm.x) << ", token " << ops::dtypeName(fm.token) << ", out "
                       << ops::dtypeName(fm.out) << ", dx " << has_dx << " dtoken " << has_token
                       << " accumulate " << acc);
          const Shape xs{c.batch, c.rows, c.dim}, ys{c.batch, c.rows + 1, c.dim};
          const auto x = ops::ref::roundTo(fm.x, rng_.normal(size_t(xs.numel())));
          const auto token = ops::ref::roundTo(fm.token, rng_.normal(size_t(c.dim)));
          const auto dy = ops::ref::roundTo(fm.out, rng_.normal(size_t(ys.numel())));
          const auto dx_init =
              acc ? ops::ref::roundTo(fm.x, rng_.normal(size_t(xs.numel()))) : nans(xs.numel());
          const auto dt_init =
              acc ? ops::ref::roundTo(fm.token, rng_.normal(size_t(c.dim))) : nans(c.dim);
          std::vector<float> want(size_t(ys.numel())), want_dx = dx_init, want_dt = dt_init;
          ops::ref::prependToken(x.data(), token.data(), want.data(), c.batch, c.rows, c.dim);
          ops::ref::prependTokenBackward(dy.data(), want_dx.data(), want_dt.data(), c.batch, c.rows,
                                         c.dim, acc, acc);
          auto tx = shiftedUpload(ctx(), xs, x, fm.x);
          auto tt = shiftedUpload(ctx(), {c.dim}, token, fm.token);
          auto ty = shiftedPoisoned(ctx(), ys, fm.out);
          auto tdy = shiftedUpload(ctx(), ys, dy, fm.out);
          auto tdx = shiftedUpload(ctx(), xs, dx_init, fm.x);
          auto tdt = shiftedUpload(ctx(), {c.dim}, dt_init, fm.token);
          vk::Recorder rec(ctx());
          ops::prependToken(rec, tx.view, tt.view, ty.view);
          ops::prependTokenBackward(rec, tdy.view, has_dx ? tdx.view : ops::TensorView{},
                                    has_token ? tdt.view : ops::TensorView{}, w, w);
          rec.submit();
          EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), ty), want, fm.out, 0.0)) << "out";
          if (has_dx) {
            EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), tdx), want_dx, fm.x, 0.0)) << "dx";
          }
          if (has_token) {
            EXPECT_TRUE(
                closeInFormat(downloadShifted(ctx(), tdt), want_dt, fm.token, kTokenTolerance))
                << "dtoken";
          }
        }
}

TEST_F(PrependTokenTest, RejectsBadShapesBeforeRecording) {
  auto x = poisoned(ctx(), {2, 4, 8}), token = poisoned(ctx(), {8}),
       out = poisoned(ctx(), {2, 5, 8});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::prependToken(rec, x.view(), ops::view(token.buffer, {7}), out.view()); },
      "prependToken: x (2,4,8), token (7): token must be (C) = (8)");
  expectShapeError(
      rec,
      [&] {
        ops::prependToken(rec, ops::view(x.buffer, {8, 8}), token.view(), out.view());
      },
      "prependToken: x (8,8), token (8): x must be a non-empty (B,T,C)");
  expectShapeError(
      rec,
      [&] {
        ops::prependToken(rec, x.view(), token.view(), ops::view(out.buffer, {2, 4, 8}));
      },
      "prependToken: x (2,4,8), token (8), out (2,4,8): out must be (2,5,8)");
  expectShapeError(
      rec,
      [&] {
        ops::prependToken(rec, ops::view(out.buffer, {2, 4, 8}), token.view(), out.view());
      },
      "prependToken: out (2,5,8) overlaps x (2,4,8)");
  expectShapeError(
      rec,
      [&] { ops::prependTokenBackward(rec, out.view(), x.view(), ops::view(token.buffer, {7})); },
      "dtoken must be (8)");
  expectShapeError(
      rec,
      [&] {
        ops::prependTokenBackward(rec, out.view(), ops::view(x.buffer, {2, 5, 6}), token.view());
      },
      "prependTokenBackward: dx (2,5,6), dtoken (8), dout (2,5,8): dx must be (2,4,8)");
  expectShapeError(
      rec, [&] { ops::prependTokenBackward(rec, out.view(), {}, {}); },
      "neither dx nor dtoken is given");
  expectShapeError(
      rec, [&] { ops::prependTokenBackward(rec, out.view(), out.view(), token.view()); },
      "dx must be (2,4,8)");
}

}  // namespace
}  // namespace vkgrad::test

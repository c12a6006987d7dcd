#include "vkgrad/ops/take_row.h"

#include <cmath>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/take_row.h"

namespace vkgrad::test {
namespace {

using ops::Shape;
using ops::Write;

class TakeRowTest : public VkTest {
 protected:
  Rng rng_;
};

struct Case {
  int64_t batch, rows, dim, index;
};
// The first, last and a middle row; one row, one channel; odd sizes throughout.
constexpr Case kCases[] = {{3, 7, 5, 0},   {3, 7, 5, 6},   {1, 1, 1, 0},
                           {4, 17, 33, 9}, {2, 50, 13, 0}, {5, 3, 64, 1}};

std::vector<float> nans(int64_t n) {
  return std::vector<float>(size_t(n), std::nanf(""));
}

// Forward, backward overwriting (dx starts as NaN: every element must be written, the zeros
// too) and accumulating (dx starts random: only row index may change), at odd offsets with a
// sentinel around each view. Copies and single float adds are exact: tolerance 0.
TEST_F(TakeRowTest, MatchesTheReferenceBothWays) {
  SCOPED_TRACE(rng_.describe());
  int at = 3;
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message()
                 << "x (" << c.batch << "," << c.rows << "," << c.dim << ") index " << c.index);
    const Shape xs{c.batch, c.rows, c.dim}, rows = ops::takeRowShape(xs, c.index);
    const auto x = rng_.normal(size_t(xs.numel())), dy = rng_.normal(size_t(rows.numel())),
               init = rng_.normal(size_t(xs.numel()));
    std::vector<float> want(size_t(rows.numel())), want_dx(size_t(xs.numel())), want_acc = init;
    ops::ref::takeRow(x.data(), want.data(), c.batch, c.rows, c.dim, c.index);
    ops::ref::takeRowBackward(dy.data(), want_dx.data(), c.batch, c.rows, c.dim, c.index, false);
    ops::ref::takeRowBackward(dy.data(), want_acc.data(), c.batch, c.rows, c.dim, c.index, true);
    const Placed tx = placed(ctx(), xs, x, at),
                 ty = placed(ctx(), rows, nans(rows.numel()), at + 1),
                 tdy = placed(ctx(), rows, dy, at + 2),
                 tdx = placed(ctx(), xs, nans(xs.numel()), at + 3),
                 tacc = placed(ctx(), xs, init, at + 4);
    vk::Recorder rec(ctx());
    ops::takeRow(rec, tx.view, ty.view, c.index);
    ops::takeRowBackward(rec, tdy.view, tdx.view, c.index);
    ops::takeRowBackward(rec, tdy.view, tacc.view, c.index, Write::Accumulate);
    rec.submit();
    EXPECT_TRUE(allClose(readPlaced(ctx(), ty), want, 0.0)) << "rows";
    EXPECT_TRUE(allClose(readPlaced(ctx(), tdx), want_dx, 0.0)) << "dx";
    EXPECT_TRUE(allClose(readPlaced(ctx(), tacc), want_acc, 0.0)) << "dx accumulated";
    at = (at + 3) % 7;
  }
}

// x and out (dout and dx) in f16 or bf16, or one side f32: a move rounds at most once into
// the output's format and an accumulation adds in f32 and rounds once, so closeInFormat with
// no f32 tolerance. Every view starts one element into its buffer (2 bytes for 16-bit ones).
TEST_F(TakeRowTest, SixteenBitTensorsMatchTheReference) {
  SCOPED_TRACE(rng_.describe());
  using ops::DType;
  struct Formats {
    DType x, rows;
  };
  for (const Formats fm : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                           Formats{DType::BF16, DType::F32}, Formats{DType::F32, DType::F16}})
    for (const Case& c : {kCases[1], kCases[3]}) {
      SCOPED_TRACE(testing::Message()
                   << "x (" << c.batch << "," << c.rows << "," << c.dim << ") index " << c.index
                   << ", " << ops::dtypeName(fm.x) << " x, " << ops::dtypeName(fm.rows) << " rows");
      const Shape xs{c.batch, c.rows, c.dim}, rows = ops::takeRowShape(xs, c.index);
      const auto x = ops::ref::roundTo(fm.x, rng_.normal(size_t(xs.numel())));
      const auto dy = ops::ref::roundTo(fm.rows, rng_.normal(size_t(rows.numel())));
      const auto init = ops::ref::roundTo(fm.x, rng_.normal(size_t(xs.numel())));
      std::vector<float> want(size_t(rows.numel())), want_dx(size_t(xs.numel())), want_acc = init;
      ops::ref::takeRow(x.data(), want.data(), c.batch, c.rows, c.dim, c.index);
      ops::ref::takeRowBackward(dy.data(), want_dx.data(), c.batch, c.rows, c.dim, c.index, false);
      ops::ref::takeRowBackward(dy.data(), want_acc.data(), c.batch, c.rows, c.dim, c.index, true);
      auto tx = shiftedUpload(ctx(), xs, x, fm.x), ty = shiftedPoisoned(ctx(), rows, fm.rows);
      auto tdy = shiftedUpload(ctx(), rows, dy, fm.rows), tdx = shiftedPoisoned(ctx(), xs, fm.x);
      auto tacc = shiftedUpload(ctx(), xs, init, fm.x);
      vk::Recorder rec(ctx());
      ops::takeRow(rec, tx.view, ty.view, c.index);
      ops::takeRowBackward(rec, tdy.view, tdx.view, c.index);
      ops::takeRowBackward(rec, tdy.view, tacc.view, c.index, Write::Accumulate);
      rec.submit();
      EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), ty), want, fm.rows, 0.0)) << "rows";
      EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), tdx), want_dx, fm.x, 0.0)) << "dx";
      EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), tacc), want_acc, fm.x, 0.0))
          << "dx accumulated";
    }
}

TEST_F(TakeRowTest, RejectsBadShapesBeforeRecording) {
  auto x = poisoned(ctx(), {2, 4, 8}), rows = poisoned(ctx(), {2, 8});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::takeRow(rec, x.view(), rows.view(), 4); },
      "takeRow: x (2,4,8) with index 4: index must be in [0, 4)");
  expectShapeError(
      rec, [&] { ops::takeRow(rec, x.view(), rows.view(), -1); },
      "takeRow: x (2,4,8) with index -1: index must be in [0, 4)");
  expectShapeError(
      rec,
      [&] {
        ops::takeRow(rec, ops::view(x.buffer, {8, 8}), rows.view(), 0);
      },
      "takeRow: x (8,8) with index 0: x must be a non-empty (B,T,C)");
  expectShapeError(
      rec,
      [&] {
        ops::takeRow(rec, x.view(), ops::view(rows.buffer, {2, 7}), 1);
      },
      "takeRow: x (2,4,8) with index 1: out (2,7) must be (2,8)");
  expectShapeError(
      rec,
      [&] {
        ops::takeRow(rec, x.view(), ops::view(x.buffer, {2, 8}, 4 * 8), 1);
      },
      "takeRow: out (2,8) overlaps x (2,4,8)");
  expectShapeError(
      rec,
      [&] {
        ops::takeRowBackward(rec, rows.view(), ops::view(x.buffer, {2, 4, 7}), 3);
      },
      "takeRowBackward: dx (2,4,7) with index 3: dout (2,8) must be (2,7)");
  expectShapeError(
      rec, [&] { ops::takeRowBackward(rec, rows.view(), x.view(), 5); },
      "takeRow: x (2,4,8) with index 5: index must be in [0, 4)");
}

}  // namespace
}  // namespace vkgrad::test

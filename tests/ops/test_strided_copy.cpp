// ops::stridedCopy (engine/vkgrad/ops/strided_copy.h) against its CPU reference: the layouts
// the graph's shape ops use (a transpose, an expand, a slice with steps, a piece of a concat
// at an offset), scaling and accumulation, exact u32 words, 16-bit views, and refusals.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/strided_copy.h"
#include "vkgrad/ops/strided_copy.h"

namespace vkgrad::test {
namespace {

using ops::Shape;
using Strides = std::vector<int64_t>;

class StridedCopyTest : public VkTest {
 protected:
  Rng rng_;
  // src (src_shape) copied over space into dst filled with fresh values, so that the elements
  // the copy must not touch are checked to keep theirs.
  void check(const Shape& space, const Shape& src_shape, const Strides& ss, int64_t s0,
             const Shape& dst_shape, const Strides& ds, int64_t d0, float alpha, ops::Write w) {
    SCOPED_TRACE(testing::Message() << "space " << space.str() << ", src " << src_shape.str()
                                    << ", dst " << dst_shape.str());
    const auto src = rng_.normal(size_t(src_shape.numel()));
    auto want = rng_.normal(size_t(dst_shape.numel()));
    auto tsrc = upload(ctx(), src_shape, src), tdst = upload(ctx(), dst_shape, want);
    ops::ref::stridedCopy(space, src.data(), ss, s0, want.data(), ds, d0, alpha, w);
    vk::Recorder rec(ctx());
    ops::stridedCopy(rec, "test", space, {tsrc.view(), ss, s0}, {tdst.view(), ds, d0}, alpha, w);
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), tdst), want, w == ops::Write::Accumulate ? 1e-6 : 0.0));
  }
};

TEST_F(StridedCopyTest, ShapeOpLayoutsMatchTheReference) {
  SCOPED_TRACE(rng_.describe());
  const auto over = ops::Write::Overwrite;
  // Transpose (3,5,7) -> (7,3,5): dst contiguous, src read with permuted strides.
  check({7, 3, 5}, {3, 5, 7}, {1, 35, 7}, 0, {7, 3, 5}, {15, 5, 1}, 0, 1.0f, over);
  // Expand (3,1,5) -> (3,4,5).
  check({3, 4, 5}, {3, 1, 5}, {5, 0, 1}, 0, {3, 4, 5}, {20, 5, 1}, 0, 1.0f, over);
  // Slice [1:9:3] of axis 1 of (4,11,3): (4,3,3).
  check({4, 3, 3}, {4, 11, 3}, {33, 9, 1}, 3, {4, 3, 3}, {9, 3, 1}, 0, 1.0f, over);
  // The second piece of a concat along axis 1: (2,3,5) into (2,7,5) at row 4.
  check({2, 3, 5}, {2, 3, 5}, {15, 5, 1}, 0, {2, 7, 5}, {35, 5, 1}, 20, 1.0f, over);
  // Rank 6, and a slice's gradient added into the rows it came from, scaled.
  check({2, 1, 3, 2, 2, 3}, {2, 1, 3, 2, 2, 3}, {36, 36, 12, 6, 3, 1}, 0, {2, 1, 3, 2, 2, 3},
        {36, 36, 12, 6, 3, 1}, 0, 1.0f, over);
  check({4, 3, 3}, {4, 3, 3}, {9, 3, 1}, 0, {4, 11, 3}, {33, 9, 1}, 3, -0.5f,
        ops::Write::Accumulate);
}

// u32 ids move as words, exactly (no float arithmetic on them).
TEST_F(StridedCopyTest, WordsMoveExactly) {
  std::vector<uint32_t> words(24);
  for (size_t i = 0; i < words.size(); ++i)
    words[i] = 0x7f800001u + uint32_t(i) * 977u;  // NaN bits
  const DeviceTensor src{uploadWords(ctx(), words), {4, 6}, ops::DType::U32};
  const DeviceTensor dst{uploadWords(ctx(), std::vector<uint32_t>(24, 0)), {6, 4}, ops::DType::U32};
  vk::Recorder rec(ctx());
  const Strides ss{1, 6}, ds{4, 1};
  ops::stridedCopy(rec, "test", {6, 4}, {src.view(), ss, 0}, {dst.view(), ds, 0});
  rec.submit();
  const auto got = downloadWords(ctx(), dst.buffer, 24);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(got[size_t(i * 4 + j)], words[size_t(j * 6 + i)]);
}

TEST_F(StridedCopyTest, SixteenBitViewsConvert) {
  SCOPED_TRACE(rng_.describe());
  const auto x = rng_.normal(15);
  auto src = upload(ctx(), {3, 5}, x, ops::DType::BF16), dst = poisoned(ctx(), {5, 3});
  vk::Recorder rec(ctx());
  const Strides ss{1, 5}, ds{3, 1};
  ops::stridedCopy(rec, "test", {5, 3}, {src.view(), ss, 0}, {dst.view(), ds, 0});
  rec.submit();
  const auto got = download(ctx(), dst), stored = download(ctx(), src);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(got[size_t(i * 3 + j)], stored[size_t(j * 5 + i)]);
}

TEST_F(StridedCopyTest, StridesPastAViewAreRefused) {
  auto src = poisoned(ctx(), {3, 5}), dst = poisoned(ctx(), {3, 5});
  vk::Recorder rec(ctx());
  const Strides ok{5, 1}, far{6, 1}, negative{5, -1};
  EXPECT_THROW(ops::stridedCopy(rec, "t", {3, 5}, {src.view(), far, 0}, {dst.view(), ok, 0}),
               ShapeError);
  EXPECT_THROW(ops::stridedCopy(rec, "t", {3, 5}, {src.view(), ok, 1}, {dst.view(), ok, 0}),
               ShapeError);
  EXPECT_THROW(ops::stridedCopy(rec, "t", {3, 5}, {src.view(), negative, 4}, {dst.view(), ok, 0}),
               ShapeError);
  EXPECT_THROW(ops::stridedCopy(rec, "t", {3, 5}, {src.view(), ok, 0}, {src.view(), ok, 0}),
               ShapeError);
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test

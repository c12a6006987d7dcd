#include "ops/matmul.h"

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "ops/reference/matmul.h"
#include "vk/error.h"

namespace vkgrad::test {
namespace {

// Each product is a sum of K terms in fp32; 1e-5 of the largest output leaves room
// for K up to a few thousand at unit-scale inputs.
constexpr double kTolerance = 1e-5;

class MatmulTest : public VkTest, public ::testing::WithParamInterface<ops::MatmulVariant> {};

TEST_P(MatmulTest, MatchesCpuOnOddShapes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {1, 257, 31}, {129, 1, 7}, {257, 100, 96}};
  for (auto [m, n, k] : shapes) {
    SCOPED_TRACE(testing::Message() << "m=" << m << " n=" << n << " k=" << k);
    const auto a = rng.uniform(m * k), b = rng.uniform(k * n);
    std::vector<float> want(m * n);
    ops::ref::matmul(a.data(), b.data(), want.data(), m, n, k);
    auto da = upload(ctx(), {m, k}, a), db = upload(ctx(), {k, n}, b);
    auto dc = poisoned(ctx(), {m, n});
    vk::Recorder rec(ctx());
    ops::matmul(rec, da.view(), db.view(), dc.view(), GetParam());
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), dc), want, kTolerance));
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, MatmulTest,
                         ::testing::Values(ops::MatmulVariant::Auto, ops::MatmulVariant::Naive),
                         [](const auto& info) { return ops::matmulVariantName(info.param); });

TEST_F(VkTest, MatmulRejectsMismatchedShapesBeforeRecording) {
  Rng rng;
  auto a = upload(ctx(), {4, 8}, rng.uniform(32)), b = upload(ctx(), {9, 2}, rng.uniform(18));
  auto c = poisoned(ctx(), {4, 2});
  vk::Recorder rec(ctx());
  try {
    ops::matmul(rec, a.view(), b.view(), c.view());
    FAIL() << "no ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("matmul: (4,8) x (9,2)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test

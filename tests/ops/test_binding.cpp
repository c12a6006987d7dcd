// How launchers size grid-stride dispatches (ops/binding.h): on a CPU device each invocation
// takes up to 16 items, with enough workgroups left for every host thread; on a GPU one item
// per invocation up to the cap. The kernels loop, so any grid is correct; these are the
// sizes the measurements in BENCHMARKS.md chose.
#include <algorithm>
#include <thread>

#include "common/vk_test.h"
#include "vkgrad/ops/binding.h"

namespace vkgrad::test {
namespace {

class BindingTest : public VkTest {};

TEST_F(BindingTest, GridGroupsGiveEachInvocationAFewItemsOnCpusAndOneOnGpus) {
  const uint64_t hosts = std::max(1u, std::thread::hardware_concurrency());
  for (uint32_t workgroup : {1u, 64u, 256u})
    for (uint64_t threads : {uint64_t(1), uint64_t(7), uint64_t(768), uint64_t(98304),
                             uint64_t(393217), uint64_t(1) << 31}) {
      SCOPED_TRACE(testing::Message() << threads << " invocations, workgroup " << workgroup);
      const uint64_t groups = ops::gridGroups(ctx(), threads, workgroup);
      const uint64_t full = (threads + workgroup - 1) / workgroup;
      EXPECT_GE(groups, 1u);
      EXPECT_LE(groups, 8192u);
      EXPECT_LE(groups, full);
      if (groups == 8192) continue;  // capped: invocations loop as far as they must
      if (ctx().info().isCpu()) {
        EXPECT_GE(groups * workgroup * 16, threads);          // at most 16 items each
        EXPECT_GE(groups, std::min<uint64_t>(full, 4 * hosts));  // every host thread busy
        if (full >= 32 * 4 * hosts) {
          EXPECT_LE(groups * 2, full);  // amortised where it can be
        }
      } else {
        EXPECT_EQ(groups, full);
      }
    }
}

}  // namespace
}  // namespace vkgrad::test

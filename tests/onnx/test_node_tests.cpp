// Conformance: every ONNX node test (Debian's libonnx-testdata) whose ops the importer
// claims runs on the device and matches ONNX's expected outputs at its backend tolerance.
#include <map>

#include <gtest/gtest.h>

#include "common/vk_test.h"
#include "onnx/node_tests.h"
#include "vkgrad/onnx/importer.h"

namespace vkgrad::test {
namespace {

class OnnxNodeTest : public VkTest {};

TEST_F(OnnxNodeTest, EveryClaimedOpPassesItsNodeTests) {
  ASSERT_TRUE(std::filesystem::is_directory(kNodeTestDir))
      << kNodeTestDir << " is missing: install libonnx-testdata (scripts/setup.sh does)";
  std::vector<std::filesystem::path> dirs;
  for (const auto& e : std::filesystem::directory_iterator(kNodeTestDir)) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  std::map<NodeTestResult::Outcome, int> counts;
  std::string failed, refused;
  for (const auto& dir : dirs) {
    const NodeTestResult r = runNodeTest(ctx(), dir);
    ++counts[r.outcome];
    if (r.outcome == NodeTestResult::Outcome::Failed) failed += "\n  " + r.name + ": " + r.detail;
    if (r.outcome == NodeTestResult::Outcome::Refused) refused += "\n  " + r.name + ": " + r.detail;
  }
  using O = NodeTestResult::Outcome;
  std::printf("ONNX node tests: %d passed, %d failed, %d refused, %d not supported\n",
              counts[O::Passed], counts[O::Failed], counts[O::Refused], counts[O::NotSupported]);
  std::printf("refused:%s\n", refused.c_str());
  EXPECT_EQ(counts[O::Failed], 0) << failed;
  EXPECT_GT(counts[O::Passed], 0);
}

}  // namespace
}  // namespace vkgrad::test

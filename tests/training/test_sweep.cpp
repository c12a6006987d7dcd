// graph::Sweep: every row visited once and in order, full batches on one graph and the rest on
// a tail graph of its size, and bad sizes refused.
#include "vkgrad/training/sweep.h"

#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"

namespace vkgrad::test {
namespace {

using graph::Tensor;

class SweepTest : public VkTest {};

// The rows a sweep of `batch` reads back from a (rows, 3) dataset, and the passes' batches
// and runs.
struct Swept {
  std::vector<float> rows;
  std::vector<std::pair<int64_t, int64_t>> passes;  // (batch, runs)
};
Swept sweep(vk::Context& context, const graph::Dataset& data, int64_t batch) {
  graph::Sweep s(context, data.shape[0], batch, [&](graph::Graph& g, Tensor indices) {
    return std::vector<Tensor>{g.gather(g.dataset(data), indices)};
  });
  Swept out;
  s.run({}, [&](graph::Sweep::Pass& pass) {
    const std::vector<float> rows = pass.exec->read(pass.outputs[0]);
    out.rows.insert(out.rows.end(), rows.begin(), rows.end());
  });
  for (const graph::Sweep::Pass* pass : s.passes())
    out.passes.emplace_back(pass->batch, pass->runs);
  return out;
}

TEST_F(SweepTest, VisitsEveryRowOnceInOrder) {
  Rng rng;
  const std::vector<float> values = rng.uniform(23 * 3);
  const graph::Dataset data = graph::uploadDataset(ctx(), "x", {23, 3}, values);
  const Swept odd = sweep(ctx(), data, 5);  // 4 full batches and a tail of 3
  EXPECT_EQ(odd.rows, values);
  EXPECT_EQ(odd.passes, (std::vector<std::pair<int64_t, int64_t>>{{5, 4}, {3, 1}}));
  const Swept whole = sweep(ctx(), data, 100);  // one batch of every row, no tail
  EXPECT_EQ(whole.rows, values);
  EXPECT_EQ(whole.passes, (std::vector<std::pair<int64_t, int64_t>>{{23, 1}}));
  const Swept exact =
      sweep(ctx(), graph::uploadDataset(ctx(), "y", {20, 3}, std::span(values).first(60)), 4);
  EXPECT_EQ(exact.rows, std::vector<float>(values.begin(), values.begin() + 60));
  EXPECT_EQ(exact.passes, (std::vector<std::pair<int64_t, int64_t>>{{4, 5}}));
}

TEST_F(SweepTest, RefusesNoRowsAndNoBatch) {
  const auto build = [](graph::Graph& g, Tensor indices) {
    return std::vector<Tensor>{g.reshape(indices, g.tensor(indices).shape)};
  };
  for (const auto& [rows, batch, message] :
       {std::tuple<int64_t, int64_t, std::string>{0, 4, "no rows to sweep"},
        {10, 0, "the batch must be positive"}}) {
    try {
      graph::Sweep(ctx(), rows, batch, build);
      ADD_FAILURE() << "no error for " << rows << " rows in batches of " << batch;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace vkgrad::test

#include "vkgrad/runtime/planner.h"

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/random.h"
#include "common/vk_test.h"
#include "runtime/transformer_block.h"
#include "vkgrad/core/error.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/training/optimizer.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Lifetime;
using graph::Tensor;

TEST(PlannerTest, ReusesTheRangesOfDeadTensors) {
  // a dies at step 1, so c (from step 2) takes its range; b is live throughout.
  const std::vector<Lifetime> items = {{1000, 0, 1}, {500, 0, 3}, {1000, 2, 3}};
  const graph::MemoryPlan plan = graph::planMemory(items, 256);
  EXPECT_EQ(plan.offsets[2], plan.offsets[0]);
  EXPECT_EQ(plan.arena_bytes, 1024u + 512u);
  EXPECT_EQ(plan.naive_bytes, 1024u + 512u + 1024u);
  graph::checkPlan(items, plan, 256);
}

TEST(PlannerTest, PicksTheSmallestHoleThatFits) {
  // Two holes (not adjacent: z lies between) open at step 2: 4096 bytes (a) and 1024 bytes
  // (b); c needs 1000 and must take b's hole, leaving a's whole for d.
  const std::vector<Lifetime> items = {
      {4096, 0, 1}, {256, 0, 9}, {1024, 1, 1}, {1000, 2, 9}, {4000, 3, 9}};
  const graph::MemoryPlan plan = graph::planMemory(items, 256);
  EXPECT_EQ(plan.offsets[3], plan.offsets[2]);
  EXPECT_EQ(plan.offsets[4], plan.offsets[0]);
  EXPECT_EQ(plan.arena_bytes, 4096u + 1024u + 256u);
  graph::checkPlan(items, plan, 256);
}

TEST(PlannerTest, GrowsAFreeRangeAtTheEndOfTheArena) {
  // b is freed at the end of the arena; c is larger than b and extends that range instead
  // of starting after it.
  const std::vector<Lifetime> items = {{256, 0, 5}, {256, 0, 0}, {1024, 1, 5}};
  const graph::MemoryPlan plan = graph::planMemory(items, 256);
  EXPECT_EQ(plan.offsets[2], 256u);
  EXPECT_EQ(plan.arena_bytes, 1280u);
}

TEST(PlannerTest, TensorsLiveAtTheSameStepNeverShare) {
  // The last reader of a and the first writer of b are the same step: they must not share.
  const std::vector<Lifetime> items = {{64, 0, 1}, {64, 1, 2}};
  const graph::MemoryPlan plan = graph::planMemory(items, 64);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  graph::checkPlan(items, plan, 64);
}

TEST(PlannerTest, RandomLifetimesGiveValidPlansSmallerThanTheNaiveSum) {
  Rng rng;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<Lifetime> items(1 + rng.below(60));
    for (auto& item : items) {
      item.first = int(rng.below(40));
      item.last = item.first + int(rng.below(8));
      item.bytes = 1 + rng.below(5000);
    }
    const uint64_t alignment = uint64_t(4) << rng.below(7);
    const graph::MemoryPlan plan = graph::planMemory(items, alignment);
    ASSERT_NO_THROW(graph::checkPlan(items, plan, alignment)) << rng.describe();
    EXPECT_LE(plan.arena_bytes, plan.naive_bytes) << rng.describe();
    const graph::MemoryPlan naive = graph::planMemory(items, alignment, false);
    EXPECT_EQ(naive.arena_bytes, naive.naive_bytes);
    ASSERT_NO_THROW(graph::checkPlan(items, naive, alignment));
  }
}

// An arena in chunks (one allocation each): random lifetimes up to a chunk in size are placed
// with none crossing a chunk boundary (checkPlan's rule), reused or not; the plan is no larger
// than the naive sum plus what the boundaries skip; an item larger than a chunk is refused.
TEST(PlannerTest, ChunkedArenasKeepEveryItemInsideOneChunk) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (int trial = 0; trial < 50; ++trial) {
    const uint64_t alignment = uint64_t(16) << rng.below(4);
    const uint64_t chunk = alignment * (1 + rng.below(64));
    std::vector<Lifetime> items(1 + rng.below(60));
    for (auto& item : items) {
      item.first = int(rng.below(40));
      item.last = item.first + int(rng.below(8));
      item.bytes = 1 + rng.below(chunk);
    }
    for (const bool reuse : {true, false}) {
      const graph::MemoryPlan plan = graph::planMemory(items, alignment, reuse, chunk);
      EXPECT_EQ(plan.chunk_bytes, chunk);
      ASSERT_NO_THROW(graph::checkPlan(items, plan, alignment));
      // At most one item's worth skipped per chunk.
      const uint64_t chunks = (plan.arena_bytes + chunk - 1) / chunk;
      EXPECT_LE(plan.arena_bytes, plan.naive_bytes + chunks * chunk);
    }
  }
  const std::vector<Lifetime> items = {{100, 0, 2}, {300, 1, 3}};
  try {
    graph::planMemory(items, 64, true, 256);
    ADD_FAILURE() << "a 300-byte item placed in 256-byte chunks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("item 1 of 300 bytes is larger than a chunk (256 bytes)"),
              std::string::npos)
        << e.what();
  }
  // Two 160-byte items live together in 256-byte chunks: the second starts the next chunk.
  const std::vector<Lifetime> pair = {{160, 0, 1}, {160, 0, 1}};
  const graph::MemoryPlan plan = graph::planMemory(pair, 32, true, 256);
  EXPECT_EQ(plan.offsets[0], 0u);
  EXPECT_EQ(plan.offsets[1], 256u);
  EXPECT_EQ(plan.arena_bytes, 416u);
  graph::MemoryPlan crossing = plan;
  crossing.offsets[1] = 160;
  EXPECT_THROW(graph::checkPlan(pair, crossing, 32), Error);
}

TEST(PlannerTest, CheckPlanCatchesOverlapsAndMisalignment) {
  const std::vector<Lifetime> items = {{100, 0, 2}, {100, 1, 3}};
  graph::MemoryPlan bad{{0, 64}, 256, 256};
  try {
    graph::checkPlan(items, bad, 64);
    FAIL() << "overlap not caught";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("live together"), std::string::npos) << e.what();
  }
  EXPECT_THROW(graph::checkPlan(items, graph::MemoryPlan{{0, 100}, 256, 256}, 64), Error);
  EXPECT_THROW(graph::planMemory(items, 48), Error);
}

class GraphPlanTest : public VkTest {};

// A 4-layer MLP with its backward and an AdamW update.
struct Mlp {
  Graph g;
  Tensor loss;
  graph::Gradients grads;
};
void buildMlp(Mlp& m, graph::ParameterStore& store, int batch, int width) {
  Tensor h = m.g.input("x", {batch, 16});
  const Tensor y = m.g.input("y", {batch}, ops::DType::U32);
  int in = 16;
  for (int layer = 0; layer < 4; ++layer) {
    const int out = layer == 3 ? 10 : width;
    const std::string name = "l" + std::to_string(layer);
    const Tensor w = m.g.parameter(store.add(name + ".w", {in, out}, graph::Init::xavierUniform()));
    const Tensor b = m.g.parameter(store.add(name + ".b", {out}, graph::Init::zeros()));
    h = m.g.matmul(h, w, b);
    if (layer < 3) h = m.g.relu(h);
    in = out;
  }
  m.loss = m.g.crossEntropy(h, y);
  m.g.markOutput(m.loss);
  m.grads = graph::backward(m.g, m.loss);
  graph::addOptimizer(m.g, m.grads, {});
}

// Replays the plan on a simulated arena that records, word by word, which tensor owns it:
// every node's outputs take ownership when first written, and every tensor a node reads or
// accumulates into must still own all its words. The tag test, without the GPU.
::testing::AssertionResult tagsIntact(const Graph& g, const graph::GraphPlan& plan) {
  std::vector<int> owner(plan.memory.arena_bytes / 4, -1);
  std::vector<bool> written(g.tensors().size(), false);
  auto range = [&](int t) {
    const int r = g.tensor(t).root;
    const size_t begin = size_t(plan.offset[size_t(r)]) / 4;
    return std::pair<size_t, size_t>{begin, begin + size_t(g.tensor(r).shape.numel())};
  };
  auto intact = [&](int t, const std::string& where) -> ::testing::AssertionResult {
    if (t < 0 || plan.offset[size_t(t)] < 0) return ::testing::AssertionSuccess();
    const auto [begin, end] = range(t);
    for (size_t i = begin; i < end; ++i)
      if (owner[i] != g.tensor(t).root)
        return ::testing::AssertionFailure()
               << where << " " << g.tensor(t).name << ": word " << i << " now belongs to "
               << (owner[i] < 0 ? std::string("nobody") : g.tensor(owner[i]).name);
    return ::testing::AssertionSuccess();
  };
  for (size_t step = 0; step < plan.order.size(); ++step) {
    const graph::Node& node = g.nodes()[size_t(plan.order[step])];
    if (node.isView()) continue;
    const std::string where =
        std::string(graph::opName(node.op)) + " at step " + std::to_string(step);
    for (int in : node.inputs)
      if (auto ok = intact(in, where + " reads"); !ok) return ok;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int t = node.outputs[o];
      if (t < 0 || plan.offset[size_t(t)] < 0) continue;
      const int r = g.tensor(t).root;
      if (written[size_t(r)] && node.writes[o] == ops::Write::Accumulate) {
        if (auto ok = intact(t, where + " accumulates into"); !ok) return ok;
        continue;
      }
      const auto [begin, end] = range(t);
      for (size_t i = begin; i < end; ++i) owner[i] = r;
      written[size_t(r)] = true;
    }
  }
  for (int o : g.outputs())
    if (auto ok = intact(o, "at the end, output"); !ok) return ok;
  return ::testing::AssertionSuccess();
}

TEST_F(GraphPlanTest, MlpArenaIsSmallerThanTheNaiveSumAndLiveTensorsNeverOverlap) {
  graph::ParameterStore store(ctx());
  Mlp m;
  buildMlp(m, store, 33, 64);
  const uint64_t alignment = ctx().info().min_storage_offset_alignment;
  const graph::GraphPlan plan = graph::planGraph(m.g, alignment);
  graph::checkPlan(plan.lifetimes, plan.memory, alignment);
  EXPECT_TRUE(tagsIntact(m.g, plan));
  EXPECT_LT(plan.memory.arena_bytes, plan.memory.naive_bytes);
  // Each layer's activations die a few steps after they are made: reuse saves a good part.
  EXPECT_LT(plan.memory.arena_bytes * 5, plan.memory.naive_bytes * 3);
  RecordProperty("arena_bytes", std::to_string(plan.memory.arena_bytes));
  RecordProperty("naive_bytes", std::to_string(plan.memory.naive_bytes));
  std::printf("MLP 33x16 -> 3x64 -> 10: arena %llu bytes, naive sum %llu bytes\n",
              (unsigned long long)plan.memory.arena_bytes,
              (unsigned long long)plan.memory.naive_bytes);
  // Parameter gradients and optimizer state live outside the arena.
  for (const auto& [param, grad] : m.grads.parameters) {
    EXPECT_LT(plan.offset[size_t(param.id)], 0);
    EXPECT_LT(plan.offset[size_t(grad.id)], 0);
  }
}

// Two pre-norm residual blocks (x + W2 gelu(W1 layerNorm(x))) with a head, backward and
// AdamW: the residual stream's tensors live long, the MLP's die young.
// An activation whose input dies at it writes over that input: x -> matmul -> relu -> relu
// (forward only) keeps one range for all three activations.
TEST_F(GraphPlanTest, ActivationsOverwriteAnInputThatDiesThere) {
  graph::ParameterStore store(ctx());
  Graph g;
  const Tensor x = g.input("x", {5, 8});
  const Tensor h1 = g.matmul(x, g.parameter(store.add("w", {8, 8}, graph::Init::xavierUniform())));
  const Tensor h2 = g.relu(h1), h3 = g.relu(h2);
  g.markOutput(h3);
  const uint64_t alignment = ctx().info().min_storage_offset_alignment;
  const graph::GraphPlan plan = graph::planGraph(g, alignment);
  graph::checkPlan(plan.lifetimes, plan.memory, alignment);
  EXPECT_TRUE(tagsIntact(g, plan));
  EXPECT_EQ(plan.offset[size_t(h2.id)], plan.offset[size_t(h1.id)]);
  EXPECT_EQ(plan.offset[size_t(h3.id)], plan.offset[size_t(h1.id)]);
  EXPECT_EQ(plan.lifetimes.size(), 1u);
  EXPECT_EQ(plan.memory.naive_bytes, 3 * plan.memory.arena_bytes);
  // Without reuse each keeps its own range.
  const graph::GraphPlan separate = graph::planGraph(g, alignment, false);
  EXPECT_NE(separate.offset[size_t(h2.id)], separate.offset[size_t(h1.id)]);
}

TEST_F(GraphPlanTest, ResidualBlocksArenaIsSmallerThanTheNaiveSumAndTagsSurvive) {
  graph::ParameterStore store(ctx());
  Graph g;
  Tensor x = g.input("x", {2, 9, 16});
  const Tensor y = g.input("y", {18}, ops::DType::U32);
  for (int block = 0; block < 2; ++block) {
    const std::string b = "b" + std::to_string(block) + ".";
    auto param = [&](const std::string& name, ops::Shape shape, graph::Init init) {
      return g.parameter(store.add(b + name, shape, init));
    };
    const Tensor h = g.layerNorm(x, param("ln.g", {16}, graph::Init::ones()),
                                 param("ln.b", {16}, graph::Init::zeros()));
    const Tensor up = g.gelu(g.matmul(h, param("w1", {16, 64}, graph::Init::xavierUniform()),
                                      param("b1", {64}, graph::Init::zeros())));
    x = g.add(x, g.matmul(up, param("w2", {64, 16}, graph::Init::xavierUniform()),
                          param("b2", {16}, graph::Init::zeros())));
  }
  const Tensor head = g.parameter(store.add("head", {16, 7}, graph::Init::xavierUniform()));
  const Tensor loss = g.crossEntropy(g.matmul(g.reshape(x, {18, 16}), head), y);
  g.markOutput(loss);
  graph::addOptimizer(g, graph::backward(g, loss), {});
  const uint64_t alignment = ctx().info().min_storage_offset_alignment;
  const graph::GraphPlan plan = graph::planGraph(g, alignment);
  graph::checkPlan(plan.lifetimes, plan.memory, alignment);
  EXPECT_TRUE(tagsIntact(g, plan));
  EXPECT_LT(plan.memory.arena_bytes, plan.memory.naive_bytes);
  std::printf("2 residual blocks (2,9,16), MLP 64: arena %llu bytes, naive sum %llu bytes\n",
              (unsigned long long)plan.memory.arena_bytes,
              (unsigned long long)plan.memory.naive_bytes);
}

// A transformer block (trainable embedding, layerNorm, fused QKV projection, causal attention
// read in place from it, output projection, residual, MLP, head, cross-entropy) with its
// backward and AdamW: attention's saved lse and scratch, the embedding's u32 scratch and the
// fused QKV gradient are planned like any other tensor.
TEST_F(GraphPlanTest, TransformerBlockArenaIsSmallerThanTheNaiveSumAndTagsSurvive) {
  graph::ParameterStore store(ctx());
  const TinyTransformer config;
  addTransformerParameters(store, config);
  Graph g;
  const Tensor ids = g.input("ids", {3, config.seq}, ops::DType::U32);
  const Tensor targets = g.input("targets", {3, config.seq}, ops::DType::U32);
  const Tensor loss = transformerLoss(g, store, config, ids, targets);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  EXPECT_EQ(grads.parameters.size(), store.all().size());
  graph::addOptimizer(g, grads, {});
  const uint64_t alignment = ctx().info().min_storage_offset_alignment;
  const graph::GraphPlan plan = graph::planGraph(g, alignment);
  graph::checkPlan(plan.lifetimes, plan.memory, alignment);
  EXPECT_TRUE(tagsIntact(g, plan));
  EXPECT_LT(plan.memory.arena_bytes, plan.memory.naive_bytes);
  bool attention_backward = false, gather_backward = false;
  for (int n : plan.order) {
    attention_backward |= g.nodes()[size_t(n)].op == graph::OpKind::AttentionBackward;
    gather_backward |= g.nodes()[size_t(n)].op == graph::OpKind::GatherBackward;
  }
  EXPECT_TRUE(attention_backward && gather_backward);
  std::printf("transformer block (3,8,16), 2 heads, MLP 32: arena %llu bytes, naive sum %llu\n",
              (unsigned long long)plan.memory.arena_bytes,
              (unsigned long long)plan.memory.naive_bytes);
}

// The tag simulation does catch a plan that puts every tensor at offset 0.
TEST_F(GraphPlanTest, TagSimulationCatchesABrokenPlan) {
  graph::ParameterStore store(ctx());
  Mlp m;
  buildMlp(m, store, 5, 8);
  graph::GraphPlan plan = graph::planGraph(m.g, 64);
  ASSERT_TRUE(tagsIntact(m.g, plan));
  for (int64_t& offset : plan.offset)
    if (offset > 0) offset = 0;
  EXPECT_FALSE(tagsIntact(m.g, plan));
}

TEST_F(GraphPlanTest, DropsNodesThatLeadNowhere) {
  graph::ParameterStore store(ctx());
  Graph g;
  const Tensor x = g.input("x", {4, 3});
  const Tensor w = g.parameter(store.add("w", {3, 3}, graph::Init::ones()));
  const Tensor kept = g.relu(g.matmul(x, w));
  g.relu(kept);  // nobody reads it
  g.markOutput(kept);
  const graph::GraphPlan plan = graph::planGraph(g, 64);
  EXPECT_EQ(plan.order, (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace vkgrad::test

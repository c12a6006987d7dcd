// Memory estimates against the allocator: a transformer and an MLP of random sizes, estimated
// from a planning store and declared datasets with nothing allocated, then built for real
// through graph::Trainer (a training step and an evaluation), must have grown the allocator's
// counters by exactly the estimate, use by use, in every precision. A planning store refuses
// device work; checkMemoryFits refuses a peak above the limit or the heap, with the table.
#include "vkgrad/training/memory_estimate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/random.h"
#include "common/vk_test.h"
#include "runtime/transformer_block.h"
#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::test {
namespace {

using graph::Init;
using graph::Tensor;

// The allocator's counters from construction on: growth by use, and the highest point.
class Usage {
 public:
  explicit Usage(vk::Allocator& a) : a_(a) {
    a.resetPeak();
    total_ = a.bytesInUse();
    for (size_t u = 0; u < before_.size(); ++u) before_[u] = a.bytesInUse(vk::Use(u));
  }
  uint64_t grown(vk::Use use) const { return a_.bytesInUse(use) - before_[size_t(use)]; }
  uint64_t grown() const { return a_.bytesInUse() - total_; }
  uint64_t peak() const { return a_.peakBytesInUse() - total_; }

 private:
  vk::Allocator& a_;
  uint64_t total_ = 0;
  std::array<uint64_t, size_t(vk::Use::kCount)> before_{};
};

std::string name(graph::Precision p) {
  return graph::precisionName(p);
}

// An MLP over widths (inputs, hidden layers with GELU, classes): its parameters and its loss.
void declareMlp(graph::ParameterStore& s, const std::vector<int64_t>& widths) {
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const std::string n = "l" + std::to_string(l);
    s.add(n + ".w", {widths[l], widths[l + 1]}, Init::xavierUniform());
    s.add(n + ".b", {widths[l + 1]}, Init::zeros());
  }
}
graph::LossFn mlpLoss(const graph::ParameterStore& s, size_t layers) {
  return [&s, layers](graph::Graph& g, std::span<const Tensor> b) {
    Tensor h = b[0];
    for (size_t l = 0; l < layers; ++l) {
      const std::string n = "l" + std::to_string(l);
      h = g.matmul(h, g.parameter(s.at(n + ".w")), g.parameter(s.at(n + ".b")));
      if (l + 1 < layers) h = g.gelu(h);
    }
    return g.crossEntropy(h, b[1]);
  };
}

class MemoryEstimateTest : public VkTest, public ::testing::WithParamInterface<graph::Precision> {
 protected:
  graph::TrainerOptions options(int64_t batch) {
    graph::TrainerOptions o;
    o.batch = batch;
    o.optimizer.adamw.weight_decay = 0.1f;
    o.optimizer.max_grad_norm = 1.0f;  // the clipping's scratch and norm: more state
    o.schedule = graph::Schedule::constant(1e-3f);
    o.precision = GetParam();
    return o;
  }

  // Builds the real trainer, takes a step and an evaluation (which compiles the evaluation
  // graph), and compares what the allocator gained with the estimate made before.
  void expectMatches(const graph::MemoryEstimate& e, const Usage& usage, graph::Trainer& trainer,
                     const graph::ParameterStore& store, uint32_t rows, int64_t batch) {
    const std::vector<uint32_t> picked = rng_.below(size_t(batch), rows);
    const std::optional<float> loss = trainer.step(picked, true);
    ASSERT_TRUE(loss && std::isfinite(*loss));
    EXPECT_TRUE(std::isfinite(trainer.evaluate(picked)));
    std::printf("%s estimate:\n%s", name(GetParam()).c_str(), graph::memoryTable(e).c_str());
    EXPECT_EQ(e.parameter_count, store.elements());
    EXPECT_EQ(usage.grown(vk::Use::Parameters), e.parameters);
    EXPECT_EQ(usage.grown(vk::Use::Datasets), e.datasets);
    EXPECT_EQ(usage.grown(vk::Use::Activations), e.activations);
    EXPECT_EQ(usage.grown(vk::Use::GraphState), e.graphState());
    EXPECT_EQ(usage.grown(), e.peak());
    EXPECT_EQ(usage.peak(), e.peak());
    ASSERT_EQ(e.arenas.size(), 2u);  // training, evaluation
    EXPECT_EQ(e.arenas[0], trainer.executor().arenaBytes());
    // AdamW keeps two f32 moments per gradient element, beside its step and the generators.
    EXPECT_GT(e.gradients, 0u);
    EXPECT_GE(e.optimizer, 2 * e.gradients);
  }

  Rng rng_;
};

// A pre-norm transformer block over a token stream uploaded once: ids are its windows, targets
// the same windows one token on (one buffer, at an offset).
TEST_P(MemoryEstimateTest, PredictsWhatATransformerTrainerAllocates) {
  SCOPED_TRACE(rng_.describe());
  TinyTransformer c;
  c.vocab = 5 + rng_.below(20);
  c.heads = 1 + rng_.below(3);
  c.dim = c.heads * (4 + 4 * rng_.below(3));
  c.seq = 3 + rng_.below(10);
  c.hidden = 8 + rng_.below(40);
  const int64_t stream = c.seq + 20 + rng_.below(200), batch = 1 + rng_.below(6);
  const auto windows = [&](const graph::Dataset& all) {
    std::array<graph::Dataset, 2> pair{all, all};
    pair[0].shape = pair[1].shape = {all.shape[0] - 1, c.seq};
    pair[1].offset = 4;
    return pair;
  };
  const auto loss = [&c](const graph::ParameterStore& store) -> graph::LossFn {
    return [&c, &store](graph::Graph& g, std::span<const Tensor> b) {
      return transformerLoss(g, store, c, b[0], b[1]);
    };
  };
  vk::Allocator& a = ctx().allocator();
  const Usage usage(a);

  graph::ParameterStore planned(ctx(), graph::StoreMemory::Planning);
  addTransformerParameters(planned, c);
  const auto declared = windows(graph::declareWindows("tokens", stream, c.seq));
  const graph::Dataset* declared_sets[] = {&declared[0], &declared[1]};
  const graph::MemoryEstimate e =
      graph::estimateTrainer(ctx(), planned, declared_sets, loss(planned), options(batch), true);
  EXPECT_EQ(usage.peak(), 0u) << "the estimate allocated device memory";

  graph::ParameterStore store(ctx());
  addTransformerParameters(store, c);
  store.initialize(rng_.seed());
  const auto real = windows(
      graph::uploadWindows(ctx(), "tokens", rng_.below(size_t(stream), uint32_t(c.vocab)), c.seq));
  const graph::Dataset* real_sets[] = {&real[0], &real[1]};
  // The real store and datasets give the same estimate (one page of parameters here).
  const graph::MemoryEstimate again =
      graph::estimateTrainer(ctx(), store, real_sets, loss(store), options(batch), true);
  EXPECT_EQ(again.peak(), e.peak());
  EXPECT_EQ(again.datasets, e.datasets);
  graph::Trainer trainer(ctx(), store, {&real[0], &real[1]}, loss(store), options(batch));
  expectMatches(e, usage, trainer, store, uint32_t(real[0].shape[0]), batch);
}

// An MLP on two plain datasets (f32 features, u32 labels).
TEST_P(MemoryEstimateTest, PredictsWhatAnMlpTrainerAllocates) {
  SCOPED_TRACE(rng_.describe());
  const int64_t in = 1 + rng_.below(9), hidden = 3 + rng_.below(60), classes = 2 + rng_.below(7);
  const int64_t rows = 20 + rng_.below(300), batch = 1 + rng_.below(40);
  const auto declare = [&](graph::ParameterStore& s) { declareMlp(s, {in, hidden, classes}); };
  const auto loss = [](const graph::ParameterStore& s) { return mlpLoss(s, 2); };
  const Usage usage(ctx().allocator());

  graph::ParameterStore planned(ctx(), graph::StoreMemory::Planning);
  declare(planned);
  const graph::Dataset dx = graph::declareDataset("x", {rows, in}, ops::DType::F32);
  const graph::Dataset dy = graph::declareDataset("y", {rows}, ops::DType::U32);
  const graph::Dataset* declared[] = {&dx, &dy};
  const graph::MemoryEstimate e =
      graph::estimateTrainer(ctx(), planned, declared, loss(planned), options(batch), true);
  EXPECT_EQ(usage.peak(), 0u) << "the estimate allocated device memory";

  graph::ParameterStore store(ctx());
  declare(store);
  store.initialize(rng_.seed());
  const graph::Dataset x =
      graph::uploadDataset(ctx(), "x", {rows, in}, rng_.uniform(size_t(rows * in)));
  const graph::Dataset y =
      graph::uploadDataset(ctx(), "y", {rows}, rng_.below(size_t(rows), uint32_t(classes)));
  graph::Trainer trainer(ctx(), store, {&x, &y}, loss(store), options(batch));
  expectMatches(e, usage, trainer, store, uint32_t(rows), batch);
}

// Past a lowered allocation limit (64 KiB, the least ContextOptions::limits takes), with two
// micro-batches a
// step: the arena in several chunks and the state in several buffers, each its own
// allocation, and still the estimate is what the allocator gains, to the byte.
TEST_P(MemoryEstimateTest, PredictsChunkedArenasAndSplitStatePastTheAllocationLimit) {
  SCOPED_TRACE(rng_.describe());
  // A 96x96 weight's gradient is 36 KiB, its moments twice that: the state spans 2 or more
  // buffers; an activation of 100x96 f32 is 37.5 KiB, and the arena spans 2 or more chunks.
  const int64_t in = 5 + rng_.below(5), hidden = 96, classes = 7;
  const int64_t rows = 300 + rng_.below(100), batch = 90 + rng_.below(10);
  vk::ContextOptions limited;
  limited.validation = true;
  limited.limits.max_allocation_bytes = 64 << 10;
  vk::Context context(limited);
  const auto declare = [&](graph::ParameterStore& s) {
    declareMlp(s, {in, hidden, hidden, classes});
  };
  const auto loss = [](const graph::ParameterStore& s) { return mlpLoss(s, 3); };
  graph::TrainerOptions o = options(batch);
  o.accumulate = 2;
  const Usage usage(context.allocator());
  graph::ParameterStore planned(context, graph::StoreMemory::Planning);
  declare(planned);
  const graph::Dataset dx = graph::declareDataset("x", {rows, in}, ops::DType::F32);
  const graph::Dataset dy = graph::declareDataset("y", {rows}, ops::DType::U32);
  const graph::Dataset* declared[] = {&dx, &dy};
  const graph::MemoryEstimate e =
      graph::estimateTrainer(context, planned, declared, loss(planned), o, /*evaluation=*/false);
  EXPECT_EQ(usage.peak(), 0u) << "the estimate allocated device memory";

  graph::ParameterStore store(context);
  declare(store);
  store.initialize(rng_.seed());
  const graph::Dataset x =
      graph::uploadDataset(context, "x", {rows, in}, rng_.uniform(size_t(rows * in)));
  const graph::Dataset y =
      graph::uploadDataset(context, "y", {rows}, rng_.below(size_t(rows), uint32_t(classes)));
  graph::Trainer trainer(context, store, {&x, &y}, loss(store), o);
  const graph::GraphPlan& plan = trainer.executor().plan();
  EXPECT_GT(plan.memory.arena_bytes, plan.memory.chunk_bytes) << "2 or more chunks";
  EXPECT_GE(plan.state_bytes.size(), 2u) << "2 or more state buffers";
  const std::optional<float> first =
      trainer.step(rng_.below(size_t(2 * batch), uint32_t(rows)), true);
  ASSERT_TRUE(first && std::isfinite(*first));
  std::printf("%s estimate:\n%s", name(GetParam()).c_str(), graph::memoryTable(e).c_str());
  EXPECT_EQ(usage.grown(vk::Use::Activations), e.activations);
  EXPECT_EQ(usage.grown(vk::Use::GraphState), e.graphState());
  EXPECT_EQ(usage.grown(vk::Use::Datasets), e.datasets);
  EXPECT_TRUE(context.validationMessages().empty());
}

INSTANTIATE_TEST_SUITE_P(Precisions, MemoryEstimateTest,
                         ::testing::Values(graph::Precision::F32, graph::Precision::BF16,
                                           graph::Precision::F16),
                         [](const auto& info) { return name(info.param); });

class MemoryLimits : public VkTest {};

// More parameters than the device could hold at once are declared without a byte allocated,
// checked as a device store checks them; everything that needs their values is refused.
TEST_F(MemoryLimits, APlanningStoreAllocatesNothingAndRefusesDeviceWork) {
  vk::Allocator& a = ctx().allocator();
  const Usage usage(a);
  graph::ParameterStore store(ctx(), graph::StoreMemory::Planning);
  EXPECT_TRUE(store.planning());
  // 64 tensors of up to half a binding each: at least 4 GiB on any device.
  const int64_t rows = int64_t(
      std::min<uint64_t>(ctx().info().max_storage_buffer_range / 2, uint64_t(1) << 30) / 4096);
  for (int i = 0; i < 64; ++i) store.add("w" + std::to_string(i), {rows, 1024}, Init::normal(0, 1));
  EXPECT_EQ(usage.peak(), 0u);
  EXPECT_EQ(store.elements(), 64 * rows * 1024);
  EXPECT_GE(store.deviceBytes(), uint64_t(store.elements()) * 4);
  EXPECT_LT(store.deviceBytes(), uint64_t(store.elements()) * 4 + 64 * 256 + a.alignment());
  EXPECT_THROW(store.add("w0", {2}, Init::zeros()), Error);
  const uint64_t too_big = ctx().info().max_storage_buffer_range / 4 + 1;
  EXPECT_THROW(store.add("huge", {int64_t(too_big)}, Init::zeros()), ShapeError);

  auto refused = [](const std::function<void()>& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << " ran on a planning store";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("planning"), std::string::npos) << e.what();
    }
  };
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / "vkgrad-planning-store.safetensors";
  refused([&] { store.initialize(1); }, "initialize");
  refused([&] { store.save(file); }, "save");
  refused([&] { store.load(file); }, "load");
  refused([&] { store.download(); }, "download");
  refused([&] { store.at("w1").view(); }, "view");
  EXPECT_FALSE(std::filesystem::exists(file));

  // An Executor refuses a planning parameter and a declared dataset before allocating.
  graph::Graph g;
  const Tensor x = g.input("x", {3, rows});
  g.markOutput(g.matmul(x, g.parameter(store.at("w0"))));
  try {
    graph::Executor exec(ctx(), g);
    ADD_FAILURE() << "compiled a graph over a planning store";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w0 "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("has no device memory"), std::string::npos) << e.what();
  }
  const graph::Dataset declared = graph::declareDataset("data", {4, 3}, ops::DType::F32);
  graph::Graph h;
  h.markOutput(h.gather(h.dataset(declared), h.input("ids", {2}, ops::DType::U32)));
  EXPECT_THROW({ graph::Executor exec(ctx(), h); }, Error);
  EXPECT_EQ(usage.peak(), 0u);
}

// A peak above the allocator's limit, or above the largest device-local heap, is refused with
// the reason and the whole table; one that fits passes.
TEST_F(MemoryLimits, CheckMemoryFitsRefusesWhatCannotFitWithTheTable) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  graph::MemoryEstimate e;
  e.parameter_count = 1234567;
  e.parameters = 4938496;
  e.gradients = 4938496;
  e.optimizer = 2 * 4938496 + 256;
  e.datasets = (1 + rng.below(8)) << 20;
  e.arenas = {(20u + rng.below(8)) << 20};
  e.activations = e.arenas[0];
  const std::string table = graph::memoryTable(e);
  EXPECT_NE(table.find("(1,234,567 parameters)"), std::string::npos) << table;
  for (const uint64_t bytes : {e.parameters, e.optimizer, e.activations, e.peak()})
    EXPECT_NE(table.find(std::to_string(bytes) + " bytes"), std::string::npos) << bytes << table;

  vk::ContextOptions options;
  options.validation = true;
  options.memory_limit = uint64_t(64) << 20;
  vk::Context limited(options);
  EXPECT_NO_THROW(graph::checkMemoryFits(limited, e));  // at most 54 MiB: fits
  e.activations += uint64_t(64) << 20;
  try {
    graph::checkMemoryFits(limited, e);
    ADD_FAILURE() << "a peak above the 64 MiB limit passed";
  } catch (const Error& err) {
    const std::string what = err.what();
    EXPECT_NE(what.find("more than the 64.0 MiB memory limit"), std::string::npos) << what;
    EXPECT_NE(what.find("nothing was allocated"), std::string::npos) << what;
    EXPECT_NE(what.find(table.substr(0, table.find('\n'))), std::string::npos) << what;
  }

  uint64_t heap = 0;
  for (const vk::MemoryHeap& h : ctx().info().heaps)
    if (h.device_local) heap = std::max(heap, h.bytes);
  ASSERT_GT(heap, 0u);
  e.activations = heap;
  try {
    graph::checkMemoryFits(ctx(), e);
    ADD_FAILURE() << "a peak above the device's heap passed";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("largest device-local heap"), std::string::npos)
        << err.what();
  }
  EXPECT_TRUE(limited.validationMessages().empty());
}

}  // namespace
}  // namespace vkgrad::test

// Frozen parameters (ParameterStore::setFrozen, setFrozenPrefix): read but not trained. A model
// with a frozen embedding table and first layer fine-tunes the rest with the same bits as a
// graph that reads those tensors as constants, the frozen values never change, no gradient or
// optimizer moments exist for them, and bad names are refused.
#include <cstdint>
#include <string>
#include <vector>

#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/training/memory_estimate.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::Tensor;

constexpr int64_t kRows = 64, kBatch = 16, kVocab = 11, kWidth = 8, kHidden = 12, kClasses = 3;

// ids -> table (frozen) -> layer norm -> gelu(x W0 + b0) (W0, b0 frozen) -> x W1 + b1 -> loss.
// The frozen ones come first, so a store that lacks them would initialise the others
// differently: every store here holds all of them.
void addModel(graph::ParameterStore& store) {
  store.add("emb.table", {kVocab, kWidth}, Init::normal(0.0f, 1.0f));
  store.add("l0.w", {kWidth, kHidden}, Init::xavierUniform());
  store.add("l0.b", {kHidden}, Init::uniform(-0.1f, 0.1f));
  store.add("norm.gamma", {kWidth}, Init::uniform(0.8f, 1.2f));
  store.add("norm.beta", {kWidth}, Init::uniform(-0.1f, 0.1f));
  store.add("l1.w", {kHidden, kClasses}, Init::xavierUniform());
  store.add("l1.b", {kClasses}, Init::zeros());
}

const char* const kFrozen[] = {"emb.table", "l0.w", "l0.b"};
const char* const kTrained[] = {"norm.gamma", "norm.beta", "l1.w", "l1.b"};

// constants: the frozen tensors as Graph::constant with these values (by kFrozen's order)
// instead of the store's parameters.
graph::LossFn modelLoss(const graph::ParameterStore& store,
                        const std::vector<std::vector<float>>* constants = nullptr) {
  return [&store, constants](Graph& g, std::span<const Tensor> batch) {
    auto frozen = [&](int i) {
      const graph::Parameter& p = store.at(kFrozen[i]);
      return constants ? g.constant(p.name, p.shape, (*constants)[size_t(i)]) : g.parameter(p);
    };
    Tensor h = g.gather(frozen(0), batch[0]);
    h = g.layerNorm(h, g.parameter(store.at("norm.gamma")), g.parameter(store.at("norm.beta")));
    h = g.gelu(g.matmul(h, frozen(1), frozen(2)));
    h = g.matmul(h, g.parameter(store.at("l1.w")), g.parameter(store.at("l1.b")));
    return g.crossEntropy(h, batch[1]);
  };
}

// AdamW with weight decay on matrices and gradient clipping: a frozen matrix must neither
// decay nor count in the gradient norm.
graph::TrainerOptions trainerOptions() {
  graph::TrainerOptions options;
  options.batch = kBatch;
  options.optimizer.adamw.weight_decay = 0.1f;
  options.optimizer.max_grad_norm = 0.5f;
  options.schedule = graph::Schedule::constant(1e-2f);
  return options;
}

class FrozenParametersTest : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    std::vector<uint32_t> ids, labels;
    for (int64_t i = 0; i < kRows; ++i)
      ids.push_back(rng_.below(kVocab)), labels.push_back(rng_.below(kClasses));
    ids_ = graph::uploadDataset(ctx(), "ids", {kRows}, ids);
    labels_ = graph::uploadDataset(ctx(), "labels", {kRows}, labels);
    for (int s = 0; s < kSteps; ++s) {
      batches_.emplace_back();
      for (int64_t i = 0; i < kBatch; ++i) batches_.back().push_back(rng_.below(kRows));
    }
  }
  static std::vector<float> read(const graph::ParameterStore& store, const char* name) {
    return download(ctx(), store.at(name).view());
  }
  // Trains `store` for kSteps on the same batches every time.
  void train(graph::ParameterStore& store, const graph::LossFn& loss) {
    graph::Trainer trainer(ctx(), store, {&ids_, &labels_}, loss, trainerOptions());
    for (const auto& batch : batches_) trainer.step(batch);
  }
  static constexpr int kSteps = 6;
  Rng rng_;
  graph::Dataset ids_, labels_;
  std::vector<std::vector<uint32_t>> batches_;
};

TEST_F(FrozenParametersTest, TrainTheRestWithTheBitsOfConstantsAndStayUnchanged) {
  SCOPED_TRACE(rng_.describe());
  graph::ParameterStore frozen(ctx()), constants(ctx());
  addModel(frozen), addModel(constants);
  frozen.initialize(rng_.seed()), constants.initialize(rng_.seed());
  EXPECT_EQ(frozen.setFrozenPrefix("emb.", true), 1u);
  EXPECT_EQ(frozen.setFrozenPrefix("l0.", true), 2u);
  EXPECT_EQ(frozen.trainableElements(),
            frozen.elements() - (kVocab * kWidth + kWidth * kHidden + kHidden));
  std::vector<std::vector<float>> values;
  for (const char* name : kFrozen) values.push_back(read(frozen, name));
  std::vector<std::vector<float>> initial;
  for (const char* name : kTrained) initial.push_back(read(frozen, name));

  train(frozen, modelLoss(frozen));
  train(constants, modelLoss(constants, &values));
  for (size_t i = 0; i < std::size(kFrozen); ++i)
    EXPECT_EQ(read(frozen, kFrozen[i]), values[i]) << kFrozen[i] << " changed";
  for (size_t i = 0; i < std::size(kTrained); ++i) {
    const std::vector<float> got = read(frozen, kTrained[i]);
    EXPECT_NE(got, initial[i]) << kTrained[i] << " did not train";
    EXPECT_EQ(got, read(constants, kTrained[i])) << kTrained[i] << ": other bits than constants";
  }

  // Thawed, a new trainer trains them.
  frozen.setFrozen("l0.w", false);
  train(frozen, modelLoss(frozen));
  EXPECT_NE(read(frozen, "l0.w"), values[1]);
  EXPECT_EQ(read(frozen, "l0.b"), values[2]);
}

TEST_F(FrozenParametersTest, GetNoGradientOrOptimizerState) {
  graph::ParameterStore store(ctx(), graph::StoreMemory::Planning),
      all(ctx(), graph::StoreMemory::Planning);
  addModel(store), addModel(all);
  store.setFrozenPrefix("emb.", true);
  store.setFrozenPrefix("l0.", true);
  const graph::Dataset* datasets[] = {&ids_, &labels_};
  const graph::TrainerGraph built =
      graph::buildTrainerGraph(datasets, modelLoss(store), trainerOptions(), true);
  std::vector<std::string> with_gradients;
  for (const graph::TensorInfo& t : built.g.tensors())
    if (t.kind == graph::TensorKind::Gradient && t.persistent) with_gradients.push_back(t.name);
  EXPECT_EQ(with_gradients.size(), std::size(kTrained));
  for (const std::string& name : with_gradients)
    for (const char* frozen : kFrozen) EXPECT_EQ(name.find(frozen), std::string::npos) << name;

  // Against the same model fully trained, and against the constants' graph: the gradients and
  // moments of the frozen tensors are gone, and nothing else differs.
  const graph::MemoryEstimate partly =
      graph::estimateTrainer(ctx(), store, datasets, modelLoss(store), trainerOptions(), false);
  const graph::MemoryEstimate whole =
      graph::estimateTrainer(ctx(), all, datasets, modelLoss(all), trainerOptions(), false);
  std::vector<std::vector<float>> halves;
  for (const char* name : kFrozen) halves.emplace_back(size_t(store.at(name).shape.numel()), 0.5f);
  const graph::MemoryEstimate constants = graph::estimateTrainer(
      ctx(), store, datasets, modelLoss(store, &halves), trainerOptions(), false);
  const uint64_t frozen_bytes = 4 * uint64_t(store.elements() - store.trainableElements());
  EXPECT_GE(whole.gradients, partly.gradients + frozen_bytes);
  EXPECT_GE(whole.optimizer, partly.optimizer + 2 * frozen_bytes);  // AdamW's m and v
  EXPECT_LT(partly.peak(), whole.peak());
  EXPECT_EQ(partly.gradients, constants.gradients);
  EXPECT_EQ(partly.optimizer, constants.optimizer);
}

TEST_F(FrozenParametersTest, RefuseUnknownNamesAndALossWithNothingToTrain) {
  graph::ParameterStore store(ctx());
  addModel(store);
  store.initialize(1);
  try {
    store.setFrozen("emb", true);
    ADD_FAILURE() << "no Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("setFrozen: no parameter \"emb\""), std::string::npos)
        << e.what();
  }
  try {
    store.setFrozenPrefix("encoder.", true);
    ADD_FAILURE() << "no Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no parameter name starts with \"encoder.\""),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(store.setFrozenPrefix("", true), Error);
  EXPECT_EQ(store.trainableElements(), store.elements()) << "a failed call froze something";

  for (const auto& p : store.all()) store.setFrozen(p->name, true);
  EXPECT_EQ(store.trainableElements(), 0);
  try {
    graph::Trainer trainer(ctx(), store, {&ids_, &labels_}, modelLoss(store), trainerOptions());
    ADD_FAILURE() << "no Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no trainable parameter reaches the loss (the graph's 7 "
                                         "frozen parameter(s) get no gradient)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vkgrad::test

// The precision policy (runtime/precision.h): which tensors a 16-bit graph stores in 16 bits
// and which stay f32, and a transformer block trained in bf16 and fp16 against the same
// block in f32 from the same initial parameters and batches.
#include "vkgrad/runtime/precision.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "common/random.h"
#include "common/vk_test.h"
#include "runtime/transformer_block.h"
#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/training/optimizer.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::test {
namespace {

using graph::DType;
using graph::Graph;
using graph::Precision;
using graph::Tensor;
using graph::TensorKind;

class PrecisionTest : public VkTest {
 protected:
  Rng rng_;
};

TEST(PrecisionNames, ParseAndPrint) {
  for (Precision p : {Precision::F32, Precision::BF16, Precision::F16})
    EXPECT_EQ(graph::parsePrecision(graph::precisionName(p)), p);
  EXPECT_EQ(graph::parsePrecision("f16"), Precision::F16);
  try {
    graph::parsePrecision("fp8");
    FAIL() << "fp8 parsed";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "precision \"fp8\": use fp32, bf16 or fp16");
  }
}

// Every tensor of a training graph (a transformer block, its backward and AdamW) by kind:
// activations and their gradients 16-bit, except the outputs ops keep in f32; parameters,
// their gradients, optimizer state, inputs, datasets and constants f32; views as their root.
TEST_F(PrecisionTest, StoresActivationsIn16BitsAndKeepsTheRestF32) {
  const TinyTransformer config;
  graph::ParameterStore store(ctx());
  addTransformerParameters(store, config);
  for (Precision precision : {Precision::BF16, Precision::F16}) {
    SCOPED_TRACE(graph::precisionName(precision));
    Graph g;
    const Tensor ids = g.input("ids", {3, config.seq}, DType::U32);
    const Tensor targets = g.input("targets", {3, config.seq}, DType::U32);
    const Tensor loss = transformerLoss(g, store, config, ids, targets);
    const graph::Gradients grads = graph::backward(g, loss);
    graph::addOptimizer(g, grads, {});
    const std::vector<graph::TensorInfo> before(g.tensors().begin(), g.tensors().end());
    const graph::PrecisionSummary summary = graph::applyPrecision(g, precision);
    const DType half = graph::activationDtype(precision);
    int sixteen = 0, kept = 0;
    for (size_t t = 0; t < before.size(); ++t) {
      const graph::TensorInfo& was = before[t];
      const graph::TensorInfo& now = g.tensor(int(t));
      SCOPED_TRACE(testing::Message()
                   << "tensor " << t << " " << now.name << " " << graph::tensorKindName(now.kind));
      if (now.root != int(t)) {
        EXPECT_EQ(now.dtype, g.tensor(now.root).dtype);
        EXPECT_EQ(now.offset, was.offset / 4 * ops::dtypeBytes(now.dtype));
        continue;
      }
      const bool planned = was.kind == TensorKind::Activation ||
                           (was.kind == TensorKind::Gradient && !was.persistent);
      if (!planned || was.dtype != DType::F32) {
        EXPECT_EQ(now.dtype, was.dtype);
        continue;
      }
      if (now.dtype == half)
        ++sixteen;
      else if (now.dtype == DType::F32)
        ++kept;
      else
        ADD_FAILURE() << "stored as " << ops::dtypeName(now.dtype);
    }
    EXPECT_EQ(summary.sixteen_bit, sixteen);
    EXPECT_EQ(summary.kept_f32, kept);
    EXPECT_GT(sixteen, 20);
    // The loss, both layer norms' statistics (mean and 1/std), attention's log-sum-exp and
    // its backward's row dots at least; every one an output an op keeps in f32.
    EXPECT_GE(kept, 1 + 4 + 1 + 1);
    EXPECT_EQ(g.tensor(loss).dtype, DType::F32);
    for (const auto& [param, grad] : grads.parameters) {
      EXPECT_EQ(g.tensor(param).dtype, DType::F32);
      EXPECT_EQ(g.tensor(grad).dtype, DType::F32);
    }
  }
}

// A slice of a 16-bit activation of odd length (5x3 bf16: 30 bytes): its gradient is zeroed
// before the slice's contribution lands (a whole-word fill over the tensor's own padding),
// and the weight gradient matches the f32 graph's to bf16's precision.
TEST_F(PrecisionTest, ASliceOfAnOddLengthActivationHasItsGradientZeroed) {
  graph::ParameterStore store(ctx());
  const graph::Parameter& w = store.add("w", {3, 3}, graph::Init::normal(0.0f, 1.0f));
  store.initialize(rng_.seed());
  const std::vector<float> x = rng_.uniform(15, -1.0f, 1.0f);
  const std::vector<uint32_t> targets = {1, 2};
  std::vector<std::vector<float>> dw;
  for (Precision precision : {Precision::F32, Precision::BF16}) {
    Graph g;
    const Tensor xt = g.input("x", {5, 3});
    const Tensor yt = g.input("y", {2}, DType::U32);
    const Tensor h = g.matmul(xt, g.parameter(w));
    const Tensor loss = g.crossEntropy(g.slice(h, 0, 2), yt);
    const graph::Gradients grads = graph::backward(g, loss);
    graph::applyPrecision(g, precision);
    ASSERT_EQ(g.tensor(h).dtype, graph::activationDtype(precision));
    graph::Executor exec(ctx(), g);
    exec.setInput(xt, x);
    exec.setInput(yt, targets);
    exec.step();
    dw.push_back(exec.read(grads.parameters.at(0).second));
  }
  double scale = 0;
  for (float v : dw[0]) scale = std::max(scale, double(std::fabs(v)));
  for (size_t i = 0; i < dw[0].size(); ++i)
    EXPECT_NEAR(dw[1][i], dw[0][i], 0.02 * scale) << i << " " << rng_.describe();
}

// Llama's ops (rmsNorm, rope with the position read on the device, the fused swiglu) store
// their activations and gradients in 16 bits under the policy, rmsNorm's rstd stays f32, and
// the output and the parameters' gradients match the f32 graph's to the format's precision.
TEST_F(PrecisionTest, LlamaOpsRunIn16Bits) {
  graph::ParameterStore store(ctx());
  const graph::Parameter& xp = store.add("x", {2, 3, 2, 8}, graph::Init::normal(0.0f, 1.0f));
  const graph::Parameter& gp = store.add("gamma", {8}, graph::Init::uniform(0.5f, 1.5f));
  store.initialize(rng_.seed());
  const std::vector<float> w = rng_.uniform(48, -1.0f, 1.0f);
  std::vector<std::vector<float>> results[3];  // per precision: y, dx, dgamma
  const Precision precisions[] = {Precision::F32, Precision::BF16, Precision::F16};
  for (int p = 0; p < 3; ++p) {
    Graph g;
    const Tensor pos = g.input("pos", {1}, DType::U32);
    const Tensor h = g.rmsNorm(g.parameter(xp), g.parameter(gp));
    const Tensor y = g.swiglu(g.reshape(g.rope(h, 10000.0f, pos), {2, 3, 16}));
    const Tensor loss = g.sum(g.mul(y, g.constant("w", {2, 3, 8}, w)));
    g.markOutput(y);
    const graph::Gradients grads = graph::backward(g, loss);
    graph::applyPrecision(g, precisions[p]);
    ASSERT_EQ(g.tensor(h).dtype, graph::activationDtype(precisions[p]));
    ASSERT_EQ(g.tensor(g.nodes()[size_t(g.producer(h.id))].outputs[1]).dtype, DType::F32);
    graph::Executor exec(ctx(), g);
    exec.setInput(pos, std::vector<uint32_t>{7});
    exec.step();
    results[p].push_back(exec.read(y));
    for (const auto& [param, grad] : grads.parameters) results[p].push_back(exec.read(grad));
  }
  for (int p = 1; p < 3; ++p)
    for (size_t k = 0; k < results[0].size(); ++k) {
      double scale = 0;
      for (float v : results[0][k]) scale = std::max(scale, double(std::fabs(v)));
      for (size_t i = 0; i < results[0][k].size(); ++i)
        ASSERT_NEAR(results[p][k][i], results[0][k][i], 0.03 * scale)
            << graph::precisionName(precisions[p]) << " result " << k << " element " << i << " "
            << rng_.describe();
    }
}

// The same block, the same initial parameters and the same batches, trained 60 steps in
// each precision. The 16-bit runs must learn (the loss falls from ~ln 11 to under 0.5 as the
// f32 run does) and end within 0.1 + 10 % of the f32 run's evaluation loss: rounding each
// activation to 8 (bf16) or 11 (fp16) bits perturbs every step, so the trajectories part,
// but not by more than the f32 run's own noise across seeds. fp16 needs no loss scaling
// here: this block's gradients stay far above fp16's smallest normal.
// A device without 16-bit storage buffers (imposed: VKGRAD_LIMITS=storage16=off) refuses a
// 16-bit run when it is built, naming the feature, and trains the same model in f32.
TEST(PrecisionWithout16BitStorage, RefusesA16BitRunNamingTheFeature) {
  vk::ContextOptions options;
  options.validation = true;
  options.limits = vk::parseDeviceLimits("storage16=off", "test");
  vk::Context context(options);
  EXPECT_FALSE(context.info().storage_16bit);
  const TinyTransformer config;
  Rng rng;
  std::vector<uint32_t> ids(size_t(8 * config.seq));
  for (uint32_t& id : ids) id = rng.below(11);
  const graph::Dataset data = graph::uploadDataset(context, "ids", {8, config.seq}, ids);
  graph::ParameterStore store(context);
  addTransformerParameters(store, config);
  store.initialize(rng.seed());
  graph::TrainerOptions trainer_options;
  trainer_options.batch = 4;
  const graph::LossFn loss = [&](Graph& g, std::span<const Tensor> batch) {
    return transformerLoss(g, store, config, batch[0], batch[1]);
  };
  for (const Precision precision : {Precision::BF16, Precision::F16}) {
    trainer_options.precision = precision;
    try {
      graph::Trainer trainer(context, store, {&data, &data}, loss, trainer_options);
      ADD_FAILURE() << graph::precisionName(precision) << " built without 16-bit storage";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("16-bit tensors need storageBuffer16BitAccess, "
                                           "which"),
                std::string::npos)
          << e.what();
    }
  }
  trainer_options.precision = Precision::F32;
  graph::Trainer trainer(context, store, {&data, &data}, loss, trainer_options);
  EXPECT_TRUE(std::isfinite(*trainer.step(std::vector<uint32_t>{0, 3, 5, 7}, true)));
  EXPECT_TRUE(context.validationMessages().empty());
}

TEST_F(PrecisionTest, ATransformerBlockTrainsInBf16AndFp16AsInF32) {
  const TinyTransformer config;
  const int64_t rows = 64, seq = config.seq;
  // Rows count up from a random start by a stride of 1 or 2 (mod 11): the next token needs
  // the earlier ones, through attention (as TrainerTest.TransformerBlockLossDecreases).
  std::vector<uint32_t> ids, targets;
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t start = rng_.below(11), stride = 1 + rng_.below(2);
    for (uint32_t t = 0; t < uint32_t(seq); ++t) {
      ids.push_back((start + t * stride) % 11);
      targets.push_back((start + (t + 1) * stride) % 11);
    }
  }
  const graph::Dataset ids_data = graph::uploadDataset(ctx(), "ids", {rows, seq}, ids);
  const graph::Dataset target_data = graph::uploadDataset(ctx(), "targets", {rows, seq}, targets);
  std::vector<std::vector<uint32_t>> batches;
  for (int s = 0; s < 60; ++s) {
    std::vector<uint32_t> b;
    for (int i = 0; i < 16; ++i) b.push_back(rng_.below(uint32_t(rows)));
    batches.push_back(b);
  }
  std::vector<uint32_t> all(static_cast<size_t>(rows));
  for (uint32_t i = 0; i < uint32_t(rows); ++i) all[i] = i;
  const uint64_t seed = rng_.seed();
  auto train = [&](Precision precision, float init_scale = 65536.0f) {
    graph::ParameterStore store(ctx());
    addTransformerParameters(store, config);
    store.initialize(seed);
    graph::TrainerOptions options;
    options.batch = 16;
    options.optimizer.adamw.weight_decay = 0.0f;
    options.schedule = graph::Schedule::constant(2e-2f);
    options.precision = precision;
    options.loss_scaling.init = init_scale;
    graph::Trainer trainer(
        ctx(), store, {&ids_data, &target_data},
        [&](Graph& g, std::span<const Tensor> batch) {
          return transformerLoss(g, store, config, batch[0], batch[1]);
        },
        options);
    const float before = trainer.evaluate(all);
    for (const auto& b : batches) trainer.step(b);
    const float after = trainer.evaluate(all);
    const int64_t skipped = trainer.skippedSteps();
    std::printf("%s: loss %.6f -> %.6f, loss scale %g, %lld steps skipped\n",
                graph::precisionName(precision), double(before), double(after),
                double(trainer.lossScale()), static_cast<long long>(skipped));
    return std::tuple(before, after, skipped, trainer.lossScale());
  };
  const auto [f32_before, f32_after, f32_skipped, f32_scale] = train(Precision::F32);
  EXPECT_LT(f32_after, 0.5f) << rng_.describe();
  EXPECT_EQ(f32_skipped, 0);
  for (Precision precision : {Precision::BF16, Precision::F16}) {
    SCOPED_TRACE(graph::precisionName(precision));
    const auto [before, after, skipped, scale] = train(precision);
    EXPECT_NEAR(before, f32_before, 0.02 * f32_before) << rng_.describe();
    EXPECT_LT(after, 0.5f) << rng_.describe();
    EXPECT_NEAR(after, f32_after, 0.1 + 0.1 * f32_after) << rng_.describe();
    // 60 steps: no growth (every 2,000), and these gradients never overflow at 2^16.
    EXPECT_EQ(skipped, 0);
    EXPECT_EQ(scale, precision == Precision::F16 ? 65536.0f : 1.0f);
  }
  // Started at 2^24, the fp16 gradients overflow: 1/128 of the scale is already above
  // fp16's largest number (65,504) in the logits' gradient. The scaler skips those steps,
  // halves the scale each time, and the run then learns as before.
  const auto [before, after, skipped, scale] = train(Precision::F16, 16777216.0f);
  EXPECT_GE(skipped, 2) << rng_.describe();
  EXPECT_LE(skipped, 12) << rng_.describe();
  EXPECT_EQ(scale, std::ldexp(16777216.0f, -int(skipped)));
  EXPECT_LT(after, 0.5f) << rng_.describe();
}

}  // namespace
}  // namespace vkgrad::test

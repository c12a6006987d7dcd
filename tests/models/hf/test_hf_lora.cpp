// LoRA adapters (nn/lora.h) and their PEFT folders (hf/lora.h): the adapted product against
// a CPU reference, a new adapter leaving the model as it was, training that touches only the
// adapters, merging, the files' round trip, and bad settings and files refused by name.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/random.h"
#include "common/vk_test.h"
#include "models/hf/gpt2_folder.h"
#include "models/hf/hf_test.h"
#include "models/hf/lora_check.h"
#include "vkgrad/core/error.h"
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/gpt/stream_loss.h"
#include "vkgrad/hf/lora.h"
#include "vkgrad/hf/model.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/nn/layers.h"
#include "vkgrad/nn/lora.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;
using graph::SavedTensor;

// Odd sizes: width 15 (3 heads of 5), context 9, a vocabulary above the tokenizer's.
gpt::GptConfig smallConfig(int64_t width = 15) {
  gpt::GptConfig c;
  c.vocab = smallTokenizerSize() + 5;
  c.layers = 2;
  c.heads = 3;
  c.width = width;
  c.context = 9;
  c.tie_weights = true;
  return c;
}

class HfLora : public HfFolderTest {
 protected:
  // A random GPT-2 folder of c at dir_/name, read.
  hf::HfModel writeBase(const gpt::GptConfig& c, const std::string& name = "base") {
    writeGpt2Folder(dir_ / name, c, randomGptParameters(c, rng_));
    return hf::readHfModel(dir_ / name);
  }
  // Adapters of rank r on targets with random A and B (B non-zero, unlike a new adapter's).
  hf::HfLora randomLora(const hf::HfModel& model, int64_t r, std::vector<std::string> targets) {
    hf::HfLora lora;
    lora.config = {r, 6.0f};
    lora.targets = std::move(targets);
    for (const hf::HfLinear& l : hf::selectLinears(hf::hfLinears(model), lora.targets)) {
      lora.tensors.push_back(f32(nn::loraA(l.prefix), {l.in, r}, rng_.uniform(size_t(l.in * r))));
      lora.tensors.push_back(
          f32(nn::loraB(l.prefix), {r, l.out}, rng_.normal(size_t(r * l.out), 0.0f, 0.3f)));
    }
    return lora;
  }
  std::vector<float> logits(const graph::ParameterStore& store, const gpt::GptConfig& c) {
    return gpt::windowLogits(ctx(), store, c, window_);
  }

  std::vector<uint32_t> window_{3, 17, 5, 250, 9, 1, 44};
};

// x·W + b + s·(x·A)·B, then the activation or the residual, in f64 against the graph's, for
// both of nn::linear's forms on a (2,5,13) input, W (13,7), rank 3.
TEST_F(HfLora, AdaptedProductMatchesTheCpu) {
  SCOPED_TRACE(rng_.describe());
  const int64_t rows = 10, in = 13, out = 7, r = 3;
  graph::ParameterStore store(ctx());
  nn::declareLinear(store, "lin", in, out);
  nn::declareLora(store, "lin", {r, 5.0f});
  const std::vector<float> w = rng_.uniform(in * out), b = rng_.uniform(out),
                           a = rng_.uniform(in * r), bb = rng_.uniform(r * out),
                           x = rng_.uniform(rows * in), res = rng_.uniform(rows * out);
  const std::vector<SavedTensor> saved{
      f32("lin.w", {in, out}, w), f32("lin.b", {out}, b), f32("lin.lora_a", {in, r}, a),
      f32("lin.lora_b", {r, out}, bb), f32("lin.lora_scale", {1}, {5.0f / 3.0f})};
  std::vector<const SavedTensor*> ptrs;
  for (const SavedTensor& t : saved) ptrs.push_back(&t);
  store.upload(ptrs, "test");
  graph::Graph g;
  const graph::Tensor xt = g.input("x", {2, 5, in}), rt = g.input("r", {2, 5, out});
  const graph::Tensor y1 = nn::linear(g, store, "lin", xt, rt);
  const graph::Tensor y2 = nn::linear(g, store, "lin", xt, ops::Activation::Tanh);
  g.markOutput(y1);
  g.markOutput(y2);
  graph::Executor ex(ctx(), g);
  ex.setInput(xt, x);
  ex.setInput(rt, res);
  ex.step();
  const std::vector<float> got1 = ex.read(y1), got2 = ex.read(y2);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < out; ++j) {
      double y = b[j], delta = 0;
      for (int64_t k = 0; k < in; ++k) y += double(x[i * in + k]) * w[k * out + j];
      for (int64_t q = 0; q < r; ++q) {
        double xa = 0;
        for (int64_t k = 0; k < in; ++k) xa += double(x[i * in + k]) * a[k * r + q];
        delta += xa * bb[q * out + j];
      }
      y += 5.0 / 3.0 * delta;
      EXPECT_NEAR(got1[i * out + j], y + res[i * out + j], 1e-5 * (1 + std::abs(y)));
      EXPECT_NEAR(got2[i * out + j], std::tanh(y), 1e-5);
    }
}

TEST_F(HfLora, NewAdaptersLeaveTheBaseLogits) {
  const hf::HfModel model = writeBase(smallConfig());
  graph::ParameterStore base(ctx()), adapted(ctx());
  hf::loadHfModel(base, model, /*frozen=*/true);
  hf::HfLora lora;
  lora.config.rank = 2;
  lora.targets = hf::defaultLoraTargets(model);
  hf::loadHfLora(adapted, model, lora, /*train=*/true, /*seed=*/3);
  EXPECT_EQ(nn::loraPrefixes(adapted).size(), size_t(4 * model.gpt.layers));
  // B = 0 adds exact zeros; only the MLP's activation leaves the matmul's epilogue for a
  // node of its own, with the same bits (Graph::matmulActivation).
  EXPECT_EQ(logits(adapted, model.gpt), logits(base, model.gpt));
  // A starts as PEFT's, within U(-1/sqrt(in), 1/sqrt(in)), and not all equal.
  for (const SavedTensor& t : nn::loraInitialValues(adapted, 3)) {
    if (t.name.find("lora_a") == std::string::npos) continue;
    const std::vector<float> v = values(t);
    const float bound = 1.0f / std::sqrt(float(t.shape[0]));
    for (const float x : v) ASSERT_LE(std::abs(x), bound) << t.name;
    EXPECT_GT(*std::max_element(v.begin(), v.end()), 0.5f * bound) << t.name;
  }
}

TEST_F(HfLora, TrainingChangesOnlyTheAdapters) {
  gpt::GptConfig c = smallConfig();
  c.layers = 1;
  const hf::HfModel model = writeBase(c);
  hf::HfLora lora = randomLora(model, 2, {"c_attn", "mlp.c_proj"});
  graph::ParameterStore store(ctx());
  hf::loadHfLora(store, model, lora, /*train=*/true, 0);
  EXPECT_EQ(store.trainableElements(),
            c.layers * 2 * ((c.width + 3 * c.width) + (4 * c.width + c.width)));
  expectOnlyAdaptersTrain(ctx(), rng_, store, model, lora);
}

TEST_F(HfLora, MergedModelGivesTheAdaptedLogits) {
  const gpt::GptConfig c = smallConfig();
  const hf::HfModel model = writeBase(c);
  graph::ParameterStore adapted(ctx()), merged(ctx());
  hf::loadHfLora(adapted, model, randomLora(model, 3, hf::defaultLoraTargets(model)), false, 0);
  fs::create_directories(dir_ / "merged");
  hf::saveHfModel(dir_ / "merged", dir_ / "base", c, nn::mergeLora(adapted.download()));
  hf::loadHfModel(merged, hf::readHfModel(dir_ / "merged"), /*frozen=*/true);
  // W + s·A·B rounded once to f32 against the two products summed in f32: a few ulps of the
  // logits (1e-5 of the largest leaves a wide margin).
  EXPECT_LT(relativeError(logits(merged, c), logits(adapted, c)), 1e-5);
  EXPECT_GT(relativeError(logits(merged, c),
                          [&] {
                            graph::ParameterStore base(ctx());
                            hf::loadHfModel(base, model, true);
                            return logits(base, c);
                          }()),
            1e-3);  // the adapters do change the model
}

TEST_F(HfLora, PeftFilesRoundTrip) {
  const gpt::GptConfig c = smallConfig();
  const hf::HfModel model = writeBase(c);
  hf::HfLora lora = randomLora(model, 2, {"c_attn", "c_fc"});
  lora.base = (dir_ / "base").string();
  graph::ParameterStore store(ctx());
  hf::loadHfLora(store, model, lora, /*train=*/true, 0);
  fs::create_directories(dir_ / "adapter");
  hf::saveHfLora(dir_ / "adapter", model, lora, store);
  // PEFT's names and nn.Linear layouts: lora_A (r, in), lora_B (out, r).
  const graph::Checkpoint file = graph::loadSafetensors(dir_ / "adapter" / hf::kAdapterWeightsFile);
  ASSERT_EQ(file.tensors.size(), size_t(2 * 2 * c.layers));
  EXPECT_EQ(file.tensors[0].name, "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
  EXPECT_EQ(file.tensors[0].shape, (std::vector<int64_t>{2, c.width}));
  EXPECT_EQ(file.tensors[1].name, "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight");
  EXPECT_EQ(file.tensors[1].shape, (std::vector<int64_t>{3 * c.width, 2}));
  const graph::Json config = graph::readJsonFile(dir_ / "adapter" / hf::kAdapterConfigFile);
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["lora_alpha"], 6.0);
  EXPECT_EQ(config["fan_in_fan_out"], true);
  EXPECT_EQ(config["base_model_name_or_path"], lora.base);
  const hf::HfLora back = hf::readHfLora(dir_ / "adapter", model);
  EXPECT_EQ(back.targets, lora.targets);
  ASSERT_EQ(back.tensors.size(), lora.tensors.size());
  for (size_t i = 0; i < back.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].name, lora.tensors[i].name);
    EXPECT_EQ(back.tensors[i].data, lora.tensors[i].data) << back.tensors[i].name;
  }
}

TEST_F(HfLora, BadSettingsAndFilesAreNamed) {
  const hf::HfModel model = writeBase(smallConfig());
  graph::ParameterStore store(ctx());
  nn::declareLinear(store, "lin", 13, 7);
  EXPECT_NE(errorText([&] {
              nn::declareLora(store, "lin", {0, 8.0f});
            }).find("rank 0"),
            std::string::npos);
  EXPECT_NE(errorText([&] {
              nn::declareLora(store, "lin", {8, 8.0f});
            }).find("min(in, out) = 7"),
            std::string::npos);
  EXPECT_NE(errorText([&] {
              nn::declareLora(store, "nope", {2, 8.0f});
            }).find("nope.w"),
            std::string::npos);
  hf::HfLora lora;
  lora.targets = {"c_attn", "q_proj"};
  EXPECT_NE(errorText([&] { hf::checkHfLora(model, lora); }).find("\"q_proj\""), std::string::npos);
  lora.targets = {"c_attn"};
  lora.config.rank = 16;  // width 15
  EXPECT_NE(errorText([&] { hf::checkHfLora(model, lora); }).find("h.0.attn.c_attn"),
            std::string::npos);
  // An adapter written for a base of width 15, read against one of width 18.
  graph::ParameterStore adapted(ctx());
  hf::HfLora good = randomLora(model, 2, {"c_proj"});
  hf::loadHfLora(adapted, model, good, true, 0);
  fs::create_directories(dir_ / "adapter");
  hf::saveHfLora(dir_ / "adapter", model, good, adapted);
  const hf::HfModel wider = writeBase(smallConfig(18), "wider");
  const std::string shape = errorText([&] { hf::readHfLora(dir_ / "adapter", wider); });
  EXPECT_NE(shape.find("attn.c_proj.lora_A.weight\" is (2,15) but (2,18)"), std::string::npos)
      << shape;
  // Settings vkgrad does not run, each named.
  const graph::Json written = graph::readJsonFile(dir_ / "adapter" / hf::kAdapterConfigFile);
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, graph::Json>>{{"peft_type", "PREFIX_TUNING"},
                                                        {"bias", "all"},
                                                        {"use_dora", true},
                                                        {"target_modules", ".*c_attn"}}) {
    graph::Json config = written;
    config[key] = value;
    std::ofstream(dir_ / "adapter" / hf::kAdapterConfigFile) << graph::dumpJson(config);
    EXPECT_NE(errorText([&] { hf::readHfLora(dir_ / "adapter", model); }).find(key),
              std::string::npos)
        << key;
  }
}

}  // namespace
}  // namespace vkgrad::test

// Hugging Face Llama and Qwen2 folders (hf/llama.h, llama/llama.h): small random models with
// grouped-query attention written in the hub's layout, run on the device against a CPU forward
// pass over the folder's own tensors (llama_folder.h); cached decoding against the full
// window; saving and reading back; fine-tuning; and the settings and tensors refused by name.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/random.h"
#include "common/temp_dir.h"
#include "common/vk_test.h"
#include "models/hf/gpt2_folder.h"
#include "models/hf/hf_test.h"
#include "models/hf/llama_folder.h"
#include "vkgrad/core/error.h"
#include "vkgrad/gpt/stream_loss.h"
#include "vkgrad/hf/llama.h"
#include "vkgrad/hf/model.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

// The largest difference between the device's fp32 logits and the double reference, over the
// largest reference logit. Measured 2.5e-7 to 1e-6 (two layers, width 24); 1e-5 leaves a margin
// and still catches a wrong rotation, head grouping or transposition (errors of order 1).
constexpr double kLogitTolerance = 1e-5;

// Odd sizes: 4 query heads sharing 2 key/value heads of dimension 6, an MLP of 19, a
// vocabulary above the tokenizer's, a context of 9, and a rope_theta that turns quickly.
gpt::GptConfig smallLlama(bool qwen2, bool tied, bool proj_bias = false) {
  gpt::GptConfig c;
  c.vocab = smallTokenizerSize() + 3;
  c.layers = 2;
  c.heads = 4;
  c.width = 24;
  c.context = 9;
  c.tie_weights = tied;
  c.norm_eps = 1e-5f;
  gpt::LlamaSpec& l = c.llama.emplace();
  l.kv_heads = 2;
  l.intermediate = 19;
  l.rope_theta = 500.0f;
  l.qkv_bias = qwen2 || proj_bias;
  l.proj_bias = proj_bias;
  return c;
}

class HfLlama : public HfFolderTest {
 protected:
};

TEST_F(HfLlama, MatchesTheReference) {
  struct Variant {
    const char* name;
    gpt::GptConfig config;
    LlamaFolderOptions options;
  };
  std::vector<Variant> variants{
      {"llama untied", smallLlama(false, false), {}},
      {"qwen2 tied, q/k/v biases", smallLlama(true, true), {}},
      {"llama attention_bias, inv_freq buffers", smallLlama(false, true, /*proj_bias=*/true), {}}};
  variants[1].options.qwen2 = true;
  variants[2].options.inv_freq = true;
  for (const Variant& v : variants) {
    SCOPED_TRACE(std::string(v.name) + ", " + rng_.describe());
    const fs::path folder = dir_ / v.name;
    const HfArrays weights = randomLlamaWeights(v.config, rng_);
    writeLlamaFolder(folder, v.config, weights, v.options);
    const hf::HfModel model = hf::readHfModel(folder);
    ASSERT_TRUE(model.gpt.llama);
    EXPECT_EQ(model.gpt.llama->kv_heads, 2);
    EXPECT_EQ(model.gpt.llama->qkv_bias, v.config.llama->qkv_bias);
    EXPECT_EQ(model.gpt.llama->proj_bias, v.config.llama->proj_bias);
    EXPECT_EQ(model.gpt.tie_weights, v.config.tie_weights);
    graph::ParameterStore store(ctx());
    hf::loadHfModel(store, model, /*frozen=*/true);
    const std::vector<uint32_t> ids = rng_.below(7, uint32_t(v.config.vocab));
    const std::vector<float> device = gpt::windowLogits(ctx(), store, model.gpt, ids);
    EXPECT_LT(relativeError(device, llamaReferenceLogits(v.config, weights, ids)), kLogitTolerance);
  }
}

TEST_F(HfLlama, CachedDecodingEqualsTheFullForward) {
  const gpt::GptConfig c = smallLlama(/*qwen2=*/true, /*tied=*/false);
  LlamaFolderOptions qwen;
  qwen.qwen2 = true;
  writeLlamaFolder(dir_, c, randomLlamaWeights(c, rng_), qwen);
  const hf::HfModel model = hf::readHfModel(dir_);
  graph::ParameterStore store(ctx());
  hf::loadHfModel(store, model, /*frozen=*/true);
  const std::vector<uint32_t> ids = rng_.below(size_t(c.context), uint32_t(c.vocab));
  const std::vector<float> full = gpt::windowLogits(ctx(), store, model.gpt, ids);
  graph::Graph g;
  g.setTraining(false);
  const graph::Tensor in = g.input("ids", {1, 1}, ops::DType::U32);
  const gpt::GptCache cache = gpt::gptCache(g, model.gpt, 1);
  // Grouped-query attention caches the 2 key/value heads only.
  EXPECT_EQ(g.shape(cache.layers[0].keys), (ops::Shape{1, c.context, 2 * 6}));
  const graph::Tensor logits = gpt::gptLogits(g, store, model.gpt, in, &cache);  // (1, vocab)
  g.markOutput(logits);
  graph::Executor ex(ctx(), g);
  const size_t V = size_t(c.vocab);
  for (uint32_t t = 0; t < ids.size(); ++t) {
    ex.setInput(in, std::span<const uint32_t>(&ids[t], 1));
    ex.setInput(cache.position, std::span<const uint32_t>(&t, 1));
    ex.step();
    const std::vector<float> row(full.begin() + ptrdiff_t(t * V),
                                 full.begin() + ptrdiff_t((t + 1) * V));
    // The same products over fewer rows: measured 0 to 4e-7.
    EXPECT_LT(relativeError(ex.read(logits), row), 1e-5) << "position " << t;
  }
}

TEST_F(HfLlama, SavedFolderReadsBackTheSameTensors) {
  for (bool qwen2 : {false, true}) {
    SCOPED_TRACE(qwen2 ? "qwen2 tied" : "llama untied");
    const gpt::GptConfig c = smallLlama(qwen2, /*tied=*/qwen2);
    LlamaFolderOptions options;
    options.qwen2 = qwen2;
    const fs::path source = dir_ / (qwen2 ? "qwen2" : "llama"), out = source.string() + "-saved";
    writeLlamaFolder(source, c, randomLlamaWeights(c, rng_), options);
    const hf::HfModel model = hf::readHfModel(source);
    graph::ParameterStore store(ctx());
    hf::loadHfModel(store, model, /*frozen=*/false);
    fs::create_directories(out);
    hf::saveHfModel(out, source, model.gpt, store);
    std::map<std::string, graph::SavedTensor> before, after;
    for (auto& t : graph::loadSafetensors(source / "model.safetensors").tensors) before[t.name] = t;
    for (auto& t : graph::loadSafetensors(out / "model.safetensors").tensors) after[t.name] = t;
    ASSERT_EQ(before.size(), after.size());
    for (const auto& [name, t] : before) {
      ASSERT_TRUE(after.count(name)) << name;
      EXPECT_EQ(after[name].shape, t.shape) << name;
      EXPECT_EQ(after[name].data, t.data) << name;
    }
    const hf::HfModel back = hf::readHfModel(out);
    EXPECT_EQ(back.type, model.type);
    EXPECT_TRUE(fs::exists(out / "tokenizer.json"));
  }
}

TEST_F(HfLlama, SixteenBitWeightsStaySixteenBit) {
  const gpt::GptConfig c = smallLlama(/*qwen2=*/false, /*tied=*/false);
  LlamaFolderOptions half;
  half.dtype = ops::DType::BF16;
  writeLlamaFolder(dir_, c, randomLlamaWeights(c, rng_), half);
  const hf::HfModel model = hf::readHfModel(dir_);
  // The fused and transposed products hold the file's bf16 values exactly.
  EXPECT_EQ(model.stored, ops::DType::BF16);
  graph::ParameterStore store(ctx());
  hf::loadHfModel(store, model, /*frozen=*/true);
  const std::vector<graph::SavedTensor> back = store.download();
  ASSERT_EQ(back.size(), model.parameters.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].dtype, ops::DType::BF16) << back[i].name;
    EXPECT_EQ(back[i].data, model.parameters[i].data) << back[i].name;
  }
}

TEST_F(HfLlama, FineTuningLowersTheLoss) {
  gpt::GptConfig c = smallLlama(/*qwen2=*/true, /*tied=*/true);
  LlamaFolderOptions qwen;
  qwen.qwen2 = true;
  writeLlamaFolder(dir_, c, randomLlamaWeights(c, rng_), qwen);
  hf::HfModel model = hf::readHfModel(dir_);
  model.gpt.dropout = 0.1f;  // the training graph's dropout path too
  graph::ParameterStore store(ctx());
  hf::loadHfModel(store, model, /*frozen=*/false);
  // A stream that repeats a period of 5 ids: learnable in a few steps.
  std::vector<uint32_t> tokens;
  const std::vector<uint32_t> period = rng_.below(5, uint32_t(c.vocab));
  for (int i = 0; i < 60; ++i) tokens.push_back(period[size_t(i) % 5]);
  const gpt::TokenWindows windows = gpt::uploadTokenWindows(ctx(), tokens, c.context);
  graph::TrainerOptions o;
  o.batch = 4;
  o.schedule = graph::Schedule::constant(1e-2f);
  graph::Trainer trainer(ctx(), store, {&windows.ids, &windows.targets},
                         gpt::gptLossFn(store, model.gpt), o);
  const std::vector<uint32_t> eval{0, 13, 26, 39};
  const float before = trainer.evaluate(eval);
  for (uint32_t s = 0; s < 25; ++s) trainer.step(std::vector<uint32_t>{s, s + 9, s + 18, s + 26});
  const float after = trainer.evaluate(eval);
  EXPECT_LT(after, 0.5f * before) << "before " << before << ", after " << after;
}

// ---- bad folders: each refused by name, before anything is allocated.

class HfLlamaFiles : public HfFilesTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    c_ = smallLlama(/*qwen2=*/false, /*tied=*/false);
    writeLlamaFolder(dir_, c_, randomLlamaWeights(c_, rng_));
  }
};

TEST_F(HfLlamaFiles, UnsupportedConfigIsNamed) {
  const std::vector<std::pair<std::string, graph::Json>> cases{
      {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}},
      {"use_sliding_window", true},
      {"mlp_bias", true},
      {"rope_interleaved", true},
      {"pretraining_tp", 2},
      {"hidden_act", "gelu"},
      {"head_dim", 8},
      {"num_key_value_heads", 3}};
  const std::vector<std::string> expected{"rope_scaling {",
                                          "use_sliding_window true is not supported",
                                          "mlp_bias true is not supported",
                                          "rope_interleaved true is not supported",
                                          "pretraining_tp 2 is not supported",
                                          "hidden_act \"gelu\" is not supported",
                                          "head_dim 8 is not supported",
                                          "kv_heads 3 must divide heads 4"};
  const graph::Json original = graph::readJsonFile(dir_ / "config.json");
  for (size_t i = 0; i < cases.size(); ++i) {
    editConfig(cases[i].first, cases[i].second);
    EXPECT_ERROR_HAS(readError(), expected[i]);
    EXPECT_ERROR_HAS(readError(), "config.json");
    std::ofstream(dir_ / "config.json") << graph::dumpJson(original);
  }
  ASSERT_NO_THROW(hf::readHfModel(dir_));
  editConfig("model_type", "mistral");
  EXPECT_ERROR_HAS(readError(), "model_type \"mistral\" is not supported (vkgrad runs gpt2, llama");
}

TEST_F(HfLlamaFiles, MissingUnknownOrMisShapedTensorIsNamed) {
  auto rewrite = [&] { writeLlamaFolder(dir_, c_, randomLlamaWeights(c_, rng_)); };
  editWeights([](std::vector<graph::SavedTensor>& t) {
    std::erase_if(t,
                  [](const auto& x) { return x.name == "model.layers.1.self_attn.k_proj.weight"; });
  });
  EXPECT_ERROR_HAS(readError(),
                   "tensor \"model.layers.1.self_attn.k_proj.weight\" (12,24) is missing");
  rewrite();
  editWeights([](std::vector<graph::SavedTensor>& t) {
    for (auto& x : t)
      if (x.name == "model.layers.0.mlp.down_proj.weight") x.shape = {19, 24};  // transposed
  });
  EXPECT_ERROR_HAS(readError(),
                   "tensor \"model.layers.0.mlp.down_proj.weight\" is (19,24) in the file but "
                   "(24,19) by config.json");
  rewrite();
  editWeights([](std::vector<graph::SavedTensor>& t) {
    t.push_back(
        {"model.layers.0.self_attn.q_proj.bias", ops::DType::F32, {24}, std::vector<uint32_t>(24)});
  });
  EXPECT_ERROR_HAS(readError(),
                   "tensor \"model.layers.0.self_attn.q_proj.bias\" (24) is not part of a Llama");
  rewrite();
  editWeights([](std::vector<graph::SavedTensor>& t) {
    std::erase_if(t, [](const auto& x) { return x.name == "lm_head.weight"; });
  });
  // No lm_head.weight: tied to the token table, as for GPT-2.
  EXPECT_TRUE(hf::readHfModel(dir_).gpt.tie_weights);
}

}  // namespace
}  // namespace vkgrad::test

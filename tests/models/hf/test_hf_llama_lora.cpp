// LoRA on Llama and Qwen2 folders (hf/lora.h, nn/lora.h's column blocks): PEFT adapts q, k, v,
// gate and up apart, vkgrad's products fuse them, so each is a block of its fused product's
// columns. The adapted fused product against a CPU reference; new adapters leaving the logits
// as they were; training that touches only the adapters; merging; the PEFT files' names and
// shapes; and the adapted model against a CPU forward pass over the folder's tensors with
// PEFT's own merge (W + s·B·A on the (out, in) weights), independent of the block mapping.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "models/hf/gpt2_folder.h"
#include "models/hf/hf_test.h"
#include "models/hf/llama_folder.h"
#include "models/hf/lora_check.h"
#include "vkgrad/core/error.h"
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/gpt/stream_loss.h"
#include "vkgrad/hf/lora.h"
#include "vkgrad/hf/model.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/nn/layers.h"
#include "vkgrad/nn/lora.h"
#include "vkgrad/nn/transformer.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;
using graph::SavedTensor;

// 4 query heads sharing 2 key/value heads of 6 (q 24 columns, k and v 12 each), an MLP of 19,
// a context of 9.
gpt::GptConfig smallLlama(bool qwen2) {
  gpt::GptConfig c;
  c.vocab = smallTokenizerSize() + 3;
  c.layers = 2;
  c.heads = 4;
  c.width = 24;
  c.context = 9;
  c.tie_weights = qwen2;
  c.norm_eps = 1e-5f;
  gpt::LlamaSpec& l = c.llama.emplace();
  l.kv_heads = 2;
  l.intermediate = 19;
  l.rope_theta = 500.0f;
  l.qkv_bias = qwen2;
  return c;
}

class HfLlamaLora : public HfFolderTest {
 protected:
  // A random Llama (or Qwen2) folder at dir_/base, read; its tensors kept in weights_.
  hf::HfModel writeBase(bool qwen2) {
    const gpt::GptConfig c = smallLlama(qwen2);
    weights_ = randomLlamaWeights(c, rng_);
    LlamaFolderOptions options;
    options.qwen2 = qwen2;
    writeLlamaFolder(dir_ / "base", c, weights_, options);
    return hf::readHfModel(dir_ / "base");
  }
  // Adapters of rank r on targets with random A and B (B non-zero, unlike a new adapter's).
  hf::HfLora randomLora(const hf::HfModel& model, int64_t r, std::vector<std::string> targets) {
    hf::HfLora lora;
    lora.config = {r, 6.0f};
    lora.targets = std::move(targets);
    for (const hf::HfLinear& l : hf::selectLinears(hf::hfLinears(model), lora.targets)) {
      lora.tensors.push_back(
          f32(nn::loraA(l.prefix, l.block), {l.in, r}, rng_.uniform(size_t(l.in * r))));
      lora.tensors.push_back(f32(nn::loraB(l.prefix, l.block), {r, l.out},
                                 rng_.normal(size_t(r * l.out), 0.0f, 0.3f)));
    }
    return lora;
  }
  std::vector<float> logits(const graph::ParameterStore& store, const gpt::GptConfig& c) {
    return gpt::windowLogits(ctx(), store, c, window_);
  }

  HfArrays weights_;
  std::vector<uint32_t> window_{3, 17, 5, 40, 9, 1, 44};
};

// A (2,5,11) input through a product W (11,17) + b with blocks on columns [0,6) and [9,14)
// (an uncovered gap and tail), and one with three blocks covering every column: x·W + b +
// s·(x·A_c)·B_c on each block's columns, in f64, for both of nn::linear's forms.
TEST_F(HfLlamaLora, BlockAdaptedProductMatchesTheCpu) {
  SCOPED_TRACE(rng_.describe());
  const int64_t rows = 10, in = 11, out = 17, r = 3;
  const float scale = 5.0f / 3.0f;
  for (const std::vector<std::pair<int64_t, int64_t>>& blocks :
       {std::vector<std::pair<int64_t, int64_t>>{{0, 6}, {9, 14}}, {{0, 5}, {5, 11}, {11, 17}}}) {
    SCOPED_TRACE(blocks.size());
    graph::ParameterStore store(ctx());
    nn::declareLinear(store, "lin", in, out);
    const std::vector<float> w = rng_.uniform(in * out), b = rng_.uniform(out),
                             x = rng_.uniform(rows * in), res = rng_.uniform(rows * out);
    std::vector<SavedTensor> saved{f32("lin.w", {in, out}, w), f32("lin.b", {out}, b),
                                   f32("lin.lora_scale", {1}, {scale})};
    std::vector<double> delta(size_t(rows * out), 0.0);
    for (const auto& [begin, end] : blocks) {
      nn::declareLora(store, "lin", {r, 5.0f}, begin, end);
      const int64_t cols = end - begin;
      const std::vector<float> a = rng_.uniform(in * r), bb = rng_.uniform(r * cols);
      saved.push_back(f32(nn::loraA("lin", begin), {in, r}, a));
      saved.push_back(f32(nn::loraB("lin", begin), {r, cols}, bb));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t q = 0; q < r; ++q) {
          double xa = 0;
          for (int64_t k = 0; k < in; ++k) xa += double(x[i * in + k]) * a[k * r + q];
          for (int64_t j = 0; j < cols; ++j)
            delta[size_t(i * out + begin + j)] += scale * xa * bb[q * cols + j];
        }
    }
    EXPECT_EQ(nn::loraBlocks(store, "lin").size(), blocks.size());
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
        double y = b[j] + delta[size_t(i * out + j)];
        for (int64_t k = 0; k < in; ++k) y += double(x[i * in + k]) * w[k * out + j];
        EXPECT_NEAR(got1[i * out + j], y + res[i * out + j], 1e-5 * (1 + std::abs(y)));
        EXPECT_NEAR(got2[i * out + j], std::tanh(y), 1e-5);
      }
  }
}

// The gradients through the pieces and the join: every block's A and B (and W, b and the scale,
// unfrozen here so that every parameter has one) against central differences of a
// cross-entropy over the residual form's output, blocks [1,5) and [8,13) of 15 columns.
TEST_F(HfLlamaLora, BlockGradientsMatchFiniteDifferences) {
  SCOPED_TRACE(rng_.describe());
  const int64_t rows = 6, in = 7, out = 15, r = 2;
  graph::ParameterStore store(ctx());
  nn::declareLinear(store, "lin", in, out);
  std::vector<SavedTensor> saved{f32("lin.w", {in, out}, rng_.uniform(in * out)),
                                 f32("lin.b", {out}, rng_.uniform(out)),
                                 f32("lin.lora_scale", {1}, {1.5f})};
  for (const auto& [begin, end] : {std::pair<int64_t, int64_t>{1, 5}, {8, 13}}) {
    nn::declareLora(store, "lin", {r, 3.0f}, begin, end);
    saved.push_back(f32(nn::loraA("lin", begin), {in, r}, rng_.uniform(in * r)));
    saved.push_back(
        f32(nn::loraB("lin", begin), {r, end - begin}, rng_.uniform(r * (end - begin))));
  }
  store.setFrozen("lin.lora_scale", false);
  std::vector<const SavedTensor*> ptrs;
  for (const SavedTensor& t : saved) ptrs.push_back(&t);
  store.upload(ptrs, "test");
  graph::Graph g;
  const graph::Tensor x = g.input("x", {2, 3, in}), res = g.input("r", {2, 3, out});
  const graph::Tensor labels = g.input("labels", {rows}, ops::DType::U32);
  const graph::Tensor y = nn::linear(g, store, "lin", x, res);
  const graph::Tensor loss = g.crossEntropy(g.reshape(y, {rows, out}), labels);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(rows * in));
  exec.setInput(res, rng_.normal(rows * out));
  exec.setInput(labels, rng_.below(rows, uint32_t(out)));
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_,
      lossGradCheckOptions(12)));
}

TEST_F(HfLlamaLora, NewAdaptersLeaveTheBaseLogits) {
  for (bool qwen2 : {false, true}) {
    SCOPED_TRACE(qwen2 ? "qwen2" : "llama");
    const hf::HfModel model = writeBase(qwen2);
    graph::ParameterStore base(ctx()), adapted(ctx());
    hf::loadHfModel(base, model, /*frozen=*/true);
    hf::HfLora lora;
    lora.config.rank = 2;
    lora.targets = hf::defaultLoraTargets(model);
    hf::loadHfLora(adapted, model, lora, /*train=*/true, /*seed=*/3);
    // Four adapted products a layer: qkv and gate_up in blocks (3 and 2), proj and mlp.proj.
    EXPECT_EQ(nn::loraPrefixes(adapted).size(), size_t(4 * model.gpt.layers));
    EXPECT_EQ(nn::loraBlocks(adapted, nn::blockName(1) + ".attn.qkv").size(), 3u);
    EXPECT_EQ(nn::loraBlocks(adapted, nn::blockName(0) + ".mlp.gate_up").size(), 2u);
    // B = 0 adds exact zeros, and the pieces are copied back exactly: the same bits.
    EXPECT_EQ(logits(adapted, model.gpt), logits(base, model.gpt));
    fs::remove_all(dir_);
  }
}

TEST_F(HfLlamaLora, TrainingChangesOnlyTheAdapters) {
  const hf::HfModel model = writeBase(/*qwen2=*/true);
  const gpt::GptConfig& c = model.gpt;
  // q and v without k between them, the MLP's up without gate, and down whole.
  hf::HfLora lora = randomLora(model, 2, {"q_proj", "v_proj", "up_proj", "down_proj"});
  graph::ParameterStore store(ctx());
  hf::loadHfLora(store, model, lora, /*train=*/true, 0);
  const int64_t C = c.width, KV = 12, I = c.llama->intermediate;
  EXPECT_EQ(store.trainableElements(), c.layers * 2 * ((C + C) + (C + KV) + (C + I) + (I + C)));
  expectOnlyAdaptersTrain(ctx(), rng_, store, model, lora);
}

// vkgrad's adapted logits against the CPU reference over the folder's tensors with PEFT's
// merge applied to them from the written adapter file: W (out, in) += s·B·A, B (out, r),
// A (r, in). A block on the wrong columns of the fused product shows here.
TEST_F(HfLlamaLora, AdaptedModelMatchesPeftsMergeOnTheCpu) {
  const hf::HfModel model = writeBase(/*qwen2=*/false);
  const gpt::GptConfig& c = model.gpt;
  hf::HfLora lora = randomLora(model, 3, {"k_proj", "v_proj", "o_proj", "gate_proj", "down_proj"});
  graph::ParameterStore adapted(ctx());
  hf::loadHfLora(adapted, model, lora, /*train=*/false, 0);
  fs::create_directories(dir_ / "adapter");
  hf::saveHfLora(dir_ / "adapter", model, lora, adapted);
  std::map<std::string, SavedTensor> file;
  for (SavedTensor& t : graph::loadSafetensors(dir_ / "adapter" / hf::kAdapterWeightsFile).tensors)
    file.emplace(t.name, std::move(t));
  ASSERT_EQ(file.size(), size_t(2 * 5 * c.layers));
  HfArrays merged = weights_;
  const double scale = 6.0 / 3.0;
  for (const hf::HfLinear& l : hf::selectLinears(hf::hfLinears(model), lora.targets)) {
    const std::string m = "base_model.model." + l.module;
    const std::vector<float> a = values(file.at(m + ".lora_A.weight")),
                             b = values(file.at(m + ".lora_B.weight"));
    HfArray& w = merged.at(l.module + ".weight");
    ASSERT_EQ(w.shape, (std::vector<int64_t>{l.out, l.in})) << l.module;
    for (int64_t o = 0; o < l.out; ++o)
      for (int64_t i = 0; i < l.in; ++i) {
        double d = 0;
        for (int64_t k = 0; k < 3; ++k) d += double(b[o * 3 + k]) * a[k * l.in + i];
        w.values[size_t(o * l.in + i)] = float(w.values[size_t(o * l.in + i)] + scale * d);
      }
  }
  const std::vector<float> want = llamaReferenceLogits(c, merged, window_);
  // 1e-4, the logit parity: the merge rounds each weight to f32 and the adapted model
  // adds its delta unrounded, and a device whose reductions take another order (no subgroup
  // arithmetic) measured up to 2.3e-5 of that; the unadapted model is 1e-3 and more away.
  EXPECT_LT(relativeError(logits(adapted, c), want), 1e-4);
  EXPECT_GT(relativeError(llamaReferenceLogits(c, weights_, window_), want), 1e-3);
}

TEST_F(HfLlamaLora, MergedModelGivesTheAdaptedLogits) {
  for (bool qwen2 : {false, true}) {
    SCOPED_TRACE(qwen2 ? "qwen2" : "llama");
    const hf::HfModel model = writeBase(qwen2);
    const gpt::GptConfig& c = model.gpt;
    graph::ParameterStore adapted(ctx()), merged(ctx());
    hf::loadHfLora(adapted, model, randomLora(model, 2, {"q_proj", "v_proj", "up_proj"}), false, 0);
    fs::create_directories(dir_ / "merged");
    hf::saveHfModel(dir_ / "merged", dir_ / "base", c, nn::mergeLora(adapted.download()));
    hf::loadHfModel(merged, hf::readHfModel(dir_ / "merged"), /*frozen=*/true);
    const std::vector<float> want = logits(adapted, c);
    // W + s·A·B rounded once to f32 against the two products summed in f32.
    EXPECT_LT(relativeError(logits(merged, c), want), 1e-5);
    EXPECT_GT(relativeError(llamaReferenceLogits(c, weights_, window_), want), 1e-3);
    fs::remove_all(dir_);
  }
}

TEST_F(HfLlamaLora, PeftFilesRoundTrip) {
  const hf::HfModel model = writeBase(/*qwen2=*/true);
  const gpt::GptConfig& c = model.gpt;
  hf::HfLora lora = randomLora(model, 2, hf::defaultLoraTargets(model));
  lora.base = (dir_ / "base").string();
  graph::ParameterStore store(ctx());
  hf::loadHfLora(store, model, lora, /*train=*/true, 0);
  fs::create_directories(dir_ / "adapter");
  hf::saveHfLora(dir_ / "adapter", model, lora, store);
  // PEFT's names and nn.Linear layouts, module by module: lora_A (r, in), lora_B (out, r).
  const graph::Checkpoint file = graph::loadSafetensors(dir_ / "adapter" / hf::kAdapterWeightsFile);
  ASSERT_EQ(file.tensors.size(), size_t(2 * 7 * c.layers));
  const std::string l0 = "base_model.model.model.layers.0.";
  const std::vector<std::pair<std::string, std::vector<int64_t>>> first{
      {l0 + "self_attn.q_proj.lora_A.weight", {2, 24}},
      {l0 + "self_attn.q_proj.lora_B.weight", {24, 2}},
      {l0 + "self_attn.k_proj.lora_A.weight", {2, 24}},
      {l0 + "self_attn.k_proj.lora_B.weight", {12, 2}},
      {l0 + "self_attn.v_proj.lora_A.weight", {2, 24}},
      {l0 + "self_attn.v_proj.lora_B.weight", {12, 2}},
      {l0 + "self_attn.o_proj.lora_A.weight", {2, 24}},
      {l0 + "self_attn.o_proj.lora_B.weight", {24, 2}},
      {l0 + "mlp.gate_proj.lora_A.weight", {2, 24}},
      {l0 + "mlp.gate_proj.lora_B.weight", {19, 2}},
      {l0 + "mlp.up_proj.lora_A.weight", {2, 24}},
      {l0 + "mlp.up_proj.lora_B.weight", {19, 2}},
      {l0 + "mlp.down_proj.lora_A.weight", {2, 19}},
      {l0 + "mlp.down_proj.lora_B.weight", {24, 2}}};
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(file.tensors[i].name, first[i].first);
    EXPECT_EQ(file.tensors[i].shape, first[i].second) << first[i].first;
  }
  const graph::Json config = graph::readJsonFile(dir_ / "adapter" / hf::kAdapterConfigFile);
  EXPECT_EQ(config["fan_in_fan_out"], false);
  EXPECT_EQ(config["target_modules"].size(), 7u);
  const hf::HfLora back = hf::readHfLora(dir_ / "adapter", model);
  EXPECT_EQ(back.targets, lora.targets);
  ASSERT_EQ(back.tensors.size(), lora.tensors.size());
  for (size_t i = 0; i < back.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].name, lora.tensors[i].name);
    EXPECT_EQ(back.tensors[i].data, lora.tensors[i].data) << back.tensors[i].name;
  }
}

TEST_F(HfLlamaLora, BadBlocksAreNamed) {
  graph::ParameterStore store(ctx());
  nn::declareLinear(store, "lin", 11, 17);
  auto error = [&](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  nn::declareLora(store, "lin", {2, 4.0f}, 4, 9);
  EXPECT_NE(error([&] {
              nn::declareLora(store, "lin", {2, 4.0f}, 8, 12);
            }).find("overlaps"),
            std::string::npos);
  EXPECT_NE(error([&] {
              nn::declareLora(store, "lin", {2, 4.0f});
            }).find("overlaps"),
            std::string::npos);
  EXPECT_NE(error([&] {
              nn::declareLora(store, "lin", {2, 4.0f}, 12, 18);
            }).find("17 columns"),
            std::string::npos);
  EXPECT_NE(error([&] {
              nn::declareLora(store, "lin", {3, 4.0f}, 0, 4);
            }).find("scale"),
            std::string::npos);
  EXPECT_NE(error([&] {
              nn::declareLora(store, "lin", {3, 6.0f}, 0, 2);
            }).find("min(in, out) = 2"),
            std::string::npos);
  nn::declareLora(store, "lin", {2, 4.0f}, 9, 17);
  EXPECT_EQ(nn::loraBlocks(store, "lin").size(), 2u);
}

}  // namespace
}  // namespace vkgrad::test

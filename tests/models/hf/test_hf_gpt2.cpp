// Hugging Face GPT-2 folders (hf/): small random models written by the test in the hub's
// layout, read and run on the device against the CPU reference GPT (models/gpt_reference.h)
// with the same weights; the name variants, shards and 16-bit files; and every bad folder.
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
#include "vkgrad/core/error.h"
#include "vkgrad/gpt/stream_loss.h"
#include "vkgrad/hf/gpt2.h"
#include "vkgrad/hf/model.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/tokenizers/tokenizer.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

// Both sides take the mean of fp32 per-row losses from logits that agree to a few ulps
// (test_gpt_reference.cpp's measured bound): 1e-5 relative leaves a wide margin.
constexpr double kLossTolerance = 1e-5;

// Odd sizes: a vocabulary above the tokenizer's, a head dimension of 5, a context of 9.
gpt::GptConfig smallConfig(bool tied = true) {
  gpt::GptConfig c;
  c.vocab = smallTokenizerSize() + 5;
  c.layers = 2;
  c.heads = 3;
  c.width = 15;
  c.context = 9;
  c.tie_weights = tied;
  return c;
}

class HfGpt2 : public HfFolderTest {
 protected:
  // The device's mean loss of the folder's model on (batch, t) ids against the reference's
  // with `params`.
  void expectReferenceLoss(const fs::path& folder, const gpt::GptConfig& c,
                           const NamedArrays& params) {
    SCOPED_TRACE(rng_.describe());
    const hf::HfModel model = hf::readHfModel(folder);
    EXPECT_EQ(model.gpt.width, c.width);
    EXPECT_EQ(model.gpt.context, c.context);
    EXPECT_EQ(model.gpt.tie_weights, c.tie_weights);
    graph::ParameterStore store(ctx());
    hf::loadHfModel(store, model, /*frozen=*/false);
    const int64_t batch = 2, t = 7;
    const std::vector<uint32_t> ids = rng_.below(size_t(batch * t), uint32_t(c.vocab));
    const std::vector<uint32_t> targets = rng_.below(size_t(batch * t), uint32_t(c.vocab));
    graph::Graph g;
    g.setTraining(false);
    const graph::Tensor in = g.input("ids", {batch, t}, ops::DType::U32);
    const graph::Tensor tg = g.input("targets", {batch, t}, ops::DType::U32);
    const graph::Tensor loss = gpt::gptLoss(g, store, model.gpt, in, tg);
    g.markOutput(loss);
    graph::Executor ex(ctx(), g);
    ex.setInput(in, ids);
    ex.setInput(tg, targets);
    ex.step();
    const double device = ex.readScalar(loss);
    const double reference = gptReference(c, params, ids, targets, batch, t).loss;
    EXPECT_NEAR(device, reference, kLossTolerance * std::abs(reference))
        << "device " << device << ", reference " << reference;
  }
};

TEST_F(HfGpt2, MatchesTheReferenceWithEveryNameVariant) {
  const gpt::GptConfig c = smallConfig();
  const NamedArrays params = randomGptParameters(c, rng_);
  // The hub's names with the mask buffers, save_pretrained's without the prefix, a tied
  // lm_head written anyway, the GPT-2 tokenizer files instead of tokenizer.json.
  std::vector<Gpt2FolderOptions> variants(4);
  variants[1].prefix = false;
  variants[1].mask_buffers = false;
  variants[2].tied_lm_head = true;
  variants[3].tokenizer_json = false;
  for (size_t i = 0; i < variants.size(); ++i) {
    SCOPED_TRACE("variant " + std::to_string(i));
    const fs::path folder = dir_ / std::to_string(i);
    writeGpt2Folder(folder, c, params, variants[i]);
    expectReferenceLoss(folder, c, params);
    // Both tokenizer formats give the same ids.
    const std::string text = "Permission is hereby granted, free of charge<|endoftext|>";
    if (i > 0) {
      EXPECT_EQ(tokenizers::loadTokenizer(folder).encode(text),
                tokenizers::loadTokenizer(dir_ / "0").encode(text));
    }
  }
}

TEST_F(HfGpt2, UntiedHeadIsTransposed) {
  const gpt::GptConfig c = smallConfig(/*tied=*/false);
  const NamedArrays params = randomGptParameters(c, rng_);
  writeGpt2Folder(dir_, c, params);
  expectReferenceLoss(dir_, c, params);
}

TEST_F(HfGpt2, AbsentHeadMeansTied) {
  // tie_word_embeddings false but no lm_head.weight: the head is the token table.
  gpt::GptConfig c = smallConfig(/*tied=*/true);
  const NamedArrays params = randomGptParameters(c, rng_);
  writeGpt2Folder(dir_, c, params);
  graph::Json config = graph::readJsonFile(dir_ / "config.json");
  config["tie_word_embeddings"] = false;
  std::ofstream(dir_ / "config.json") << graph::dumpJson(config);
  expectReferenceLoss(dir_, c, params);
}

TEST_F(HfGpt2, ShardsAndSixteenBitFilesLoadTheSameTensors) {
  const gpt::GptConfig c = smallConfig();
  const NamedArrays params = randomGptParameters(c, rng_);
  writeGpt2Folder(dir_ / "one", c, params);
  Gpt2FolderOptions sharded;
  sharded.shards = 3;
  writeGpt2Folder(dir_ / "three", c, params, sharded);
  const hf::HfModel one = hf::readHfModel(dir_ / "one"), three = hf::readHfModel(dir_ / "three");
  ASSERT_EQ(one.parameters.size(), three.parameters.size());
  for (size_t i = 0; i < one.parameters.size(); ++i) {
    EXPECT_EQ(one.parameters[i].name, three.parameters[i].name);
    EXPECT_EQ(one.parameters[i].data, three.parameters[i].data) << one.parameters[i].name;
  }
  EXPECT_EQ(one.stored, ops::DType::F32);
  for (ops::DType dtype : {ops::DType::BF16, ops::DType::F16}) {
    Gpt2FolderOptions half;
    half.dtype = dtype;
    const fs::path folder = dir_ / ops::dtypeName(dtype);
    writeGpt2Folder(folder, c, params, half);
    const hf::HfModel model = hf::readHfModel(folder);
    EXPECT_EQ(model.stored, dtype);
    // Kept in 16 bits on the device when frozen: the file's values exactly.
    graph::ParameterStore store(ctx());
    hf::loadHfModel(store, model, /*frozen=*/true);
    const std::vector<graph::SavedTensor> back = store.download();
    ASSERT_EQ(back.size(), model.parameters.size());
    for (size_t i = 0; i < back.size(); ++i) {
      EXPECT_EQ(back[i].dtype, dtype);
      EXPECT_EQ(back[i].data, model.parameters[i].data) << back[i].name;
    }
    // And run as stored: the same loss as the same values held in f32 (one format: each
    // compiles its kernels' 16-bit variants, seconds on lavapipe).
    if (dtype != ops::DType::BF16) continue;
    graph::ParameterStore wide(ctx());
    hf::loadHfModel(wide, model, /*frozen=*/false);
    const std::vector<uint32_t> tokens = rng_.below(6, uint32_t(c.vocab));  // one window
    const double narrow_loss = gpt::streamLoss(ctx(), store, c, tokens, 5).loss;
    EXPECT_NEAR(narrow_loss, gpt::streamLoss(ctx(), wide, c, tokens, 5).loss, 1e-6 * narrow_loss);
  }
}

TEST_F(HfGpt2, StreamLossPredictsEveryTokenOnce) {
  const gpt::GptConfig c = smallConfig();
  const NamedArrays params = randomGptParameters(c, rng_);
  writeGpt2Folder(dir_, c, params);
  graph::ParameterStore store(ctx());
  hf::loadHfModel(store, hf::readHfModel(dir_), /*frozen=*/true);
  // 19 tokens in windows of 4: 4 + 4 + 4 + 4 + 2 predicted, 18 in all.
  const std::vector<uint32_t> tokens = rng_.below(19, uint32_t(c.vocab));
  const gpt::StreamLoss got = gpt::streamLoss(ctx(), store, c, tokens, 4);
  EXPECT_EQ(got.tokens, 18);
  double sum = 0;
  for (size_t start = 0; start + 1 < tokens.size(); start += 4) {
    const size_t n = std::min<size_t>(4, tokens.size() - 1 - start);
    const std::span<const uint32_t> all(tokens);
    sum += double(n) *
           gptReference(c, params, all.subspan(start, n), all.subspan(start + 1, n), 1, int64_t(n))
               .loss;
  }
  EXPECT_NEAR(got.loss, sum / 18.0, kLossTolerance * std::abs(sum / 18.0));
  EXPECT_NE(errorText([&] {
              gpt::streamLoss(ctx(), store, c, tokens, 10);
            }).find("outside the model's context of 9"),
            std::string::npos);
}

// ---- bad folders: each refused by name, before anything is allocated.

class HfGpt2Files : public HfFilesTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    c_ = smallConfig();
    writeGpt2Folder(dir_, c_, randomGptParameters(c_, rng_));
  }
};

TEST_F(HfGpt2Files, MissingFiles) {
  EXPECT_ERROR_HAS(errorText([&] { hf::readHfModel(dir_ / "nope"); }), "no such folder");
  fs::remove(dir_ / "model.safetensors");
  EXPECT_ERROR_HAS(readError(), "no model.safetensors or model.safetensors.index.json");
  fs::remove(dir_ / "config.json");
  EXPECT_ERROR_HAS(readError(), "config.json: missing");
  EXPECT_FALSE(hf::isHfFolder(dir_));
}

TEST_F(HfGpt2Files, MissingOrMisShapedTensorIsNamed) {
  editWeights([](std::vector<graph::SavedTensor>& t) {
    std::erase_if(t, [](const auto& x) { return x.name == "transformer.h.1.mlp.c_fc.bias"; });
  });
  EXPECT_ERROR_HAS(readError(), "tensor \"h.1.mlp.c_fc.bias\" (60) is missing");
  writeGpt2Folder(dir_, c_, randomGptParameters(c_, rng_));
  editWeights([](std::vector<graph::SavedTensor>& t) {
    for (auto& x : t)
      if (x.name == "transformer.h.0.attn.c_attn.weight") {
        x.shape = {45, 15};  // transposed, as an nn.Linear would store it
      }
  });
  EXPECT_ERROR_HAS(readError(),
                   "tensor \"h.0.attn.c_attn.weight\" is (45,15) in the file but (15,45) by "
                   "config.json");
  writeGpt2Folder(dir_, c_, randomGptParameters(c_, rng_));
  editWeights([](std::vector<graph::SavedTensor>& t) {
    t.push_back({"transformer.h.2.ln_1.weight", ops::DType::F32, {15}, std::vector<uint32_t>(15)});
  });
  EXPECT_ERROR_HAS(readError(), "tensor \"h.2.ln_1.weight\" (15) is not part of a GPT-2");
  writeGpt2Folder(dir_, c_, randomGptParameters(c_, rng_));
  editWeights([](std::vector<graph::SavedTensor>& t) {
    const auto bias = std::find_if(t.begin(), t.end(),
                                   [](const auto& x) { return x.name == "transformer.ln_f.bias"; });
    ASSERT_NE(bias, t.end());
    graph::SavedTensor copy = *bias;  // a copy: push_back may move t's elements
    copy.name = "ln_f.bias";
    t.push_back(std::move(copy));
  });
  EXPECT_ERROR_HAS(readError(), "\"ln_f.bias\" is given both with and without");
}

TEST_F(HfGpt2Files, AbsentShardIsNamed) {
  fs::remove_all(dir_);
  Gpt2FolderOptions sharded;
  sharded.shards = 2;
  writeGpt2Folder(dir_, c_, randomGptParameters(c_, rng_), sharded);
  ASSERT_NO_THROW(hf::readHfModel(dir_));
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  EXPECT_ERROR_HAS(readError(), "shard \"model-00002-of-00002.safetensors\"");
  EXPECT_ERROR_HAS(readError(), "is missing from the folder");
  // An index that points outside the folder.
  graph::Json index = graph::readJsonFile(dir_ / "model.safetensors.index.json");
  index["weight_map"]["transformer.wte.weight"] = "../model-00001-of-00002.safetensors";
  std::ofstream(dir_ / "model.safetensors.index.json") << graph::dumpJson(index);
  EXPECT_ERROR_HAS(readError(), "is not a file name in the folder");
}

TEST_F(HfGpt2Files, UnsupportedConfigIsNamed) {
  editConfig("model_type", "bert");
  EXPECT_ERROR_HAS(readError(), "model_type \"bert\" is not supported");
  EXPECT_ERROR_HAS(readError(), "(vkgrad runs gpt2, llama, qwen2)");
  editConfig("model_type", "gpt2");
  editConfig("activation_function", "swish");
  EXPECT_ERROR_HAS(readError(), "activation_function \"swish\" is not supported");
  editConfig("activation_function", "gelu_new");
  editConfig("n_inner", 17);
  EXPECT_ERROR_HAS(readError(), "n_inner 17 is not supported");
  editConfig("n_inner", nullptr);
  editConfig("n_head", 4);  // 15 is not a multiple of 4
  EXPECT_ERROR_HAS(readError(), "must be a multiple of heads 4");
  editConfig("n_head", 3);
  editConfig("n_layer", "two");
  EXPECT_ERROR_HAS(readError(), "\"n_layer\"");
  editConfig("n_layer", 2);
  editConfig("layer_norm_epsilon", 1e-6);
  EXPECT_FLOAT_EQ(hf::readHfModel(dir_).gpt.norm_eps, 1e-6f);
}

TEST_F(HfGpt2Files, SavedNamesRoundTrip) {
  // gpt2Weights undoes gpt2Parameters: save_pretrained's names, the untied head transposed back.
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    gpt::GptConfig c = smallConfig(tied);
    const fs::path folder = dir_ / (tied ? "tied" : "untied");
    Gpt2FolderOptions options;
    options.mask_buffers = false;
    writeGpt2Folder(folder, c, randomGptParameters(c, rng_), options);
    const hf::HfModel model = hf::readHfModel(folder);
    const std::vector<graph::SavedTensor> saved = hf::gpt2Weights(model.gpt, model.parameters);
    std::map<std::string, graph::SavedTensor> file;
    for (auto& t : graph::loadSafetensors(folder / "model.safetensors").tensors) file[t.name] = t;
    ASSERT_EQ(saved.size(), file.size());
    for (const graph::SavedTensor& t : saved) {
      ASSERT_TRUE(file.count(t.name)) << t.name;
      EXPECT_EQ(t.shape, file[t.name].shape) << t.name;
      EXPECT_EQ(t.data, file[t.name].data) << t.name;
    }
  }
}

}  // namespace
}  // namespace vkgrad::test

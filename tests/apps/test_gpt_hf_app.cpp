// vkgrad-gpt sample and eval on a Hugging Face GPT-2 folder as downloaded (a small random one
// written by the test, models/hf/gpt2_folder.h): the folder's tokenizer, --json's ids and
// text, cached and window decoding agreeing, eval's windows against the CPU reference,
// train --init saving the folder's layout (every weight, or LoRA adapters in PEFT's), and bad
// folders and prompts refused clearly; the same commands on a Qwen2 folder with grouped-query
// attention (models/hf/llama_folder.h), with a SentencePiece-style tokenizer (<s> first), and
// with a long max_position_embeddings capped to a default window.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "apps/run_app.h"
#include "common/random.h"
#include "common/temp_dir.h"
#include "models/hf/gpt2_folder.h"
#include "models/hf/llama_folder.h"
#include "models/tokenizers/small_bpe.h"
#include "models/tokenizers/small_sentencepiece.h"
#include "vkgrad/tokenizers/tokenizer.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class GptHfApp : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    c_.vocab = smallTokenizerSize() + 3;
    c_.layers = 2;
    c_.heads = 2;
    c_.width = 14;
    c_.context = 9;
    c_.tie_weights = true;
    params_ = randomGptParameters(c_, rng_);
    folder_ = dir_ / "gpt2";
    writeGpt2Folder(folder_, c_, params_);
  }
  // Greedy, `tokens` of them, as JSON.
  AppRun sample(const std::string& prompt, const std::vector<std::string>& extra = {},
                const std::string& tokens = "6") {
    std::vector<std::string> args{"sample", "--checkpoint", folder_.string(), "--prompt",
                                  prompt,   "--tokens",     tokens,           "--top-k",
                                  "1",      "--json",       "--validation"};
    args.insert(args.end(), extra.begin(), extra.end());
    return runApp("gpt", args);
  }
  gpt::GptConfig c_;
  NamedArrays params_;
  fs::path folder_;
  Rng rng_;
};

TEST_F(GptHfApp, SamplesAndEvaluatesAFolder) {
  // Within the context (a prompt of 1 or 2 tokens and 6 more), cached and window decoding
  // see the same tokens and draw the same greedy ids.
  const tokenizers::Tokenizer tokenizer = tokenizers::loadTokenizer(folder_);
  ASSERT_LE(tokenizer.encode("Per").size(), 3u);
  const AppRun cached = sample("Per"), window = sample("Per", {"--kv-cache", "off"});
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  ASSERT_EQ(window.exit_code, 0) << window.err;
  const graph::Json a = lastJsonLine(cached.out), b = lastJsonLine(window.out);
  const std::vector<uint32_t> ids = a.at("ids").get<std::vector<uint32_t>>();
  EXPECT_EQ(ids.size(), 6u);
  EXPECT_EQ(ids, b.at("ids").get<std::vector<uint32_t>>());
  // The text as JSON carries it: bytes that are not UTF-8 (a token may end inside a
  // character) become U+FFFD.
  EXPECT_EQ(a.at("text"), graph::parseJson(graph::dumpJson(tokenizer.decode(ids)), "text"));
  EXPECT_EQ(cached.err.find("pass the model's context"), std::string::npos) << cached.err;
  // Past the context the program says how it goes on.
  const AppRun longer = sample("Per", {}, "12");
  ASSERT_EQ(longer.exit_code, 0) << longer.err;
  EXPECT_EQ(lastJsonLine(longer.out).at("ids").size(), 12u);
  EXPECT_NE(longer.err.find("pass the model's context of 9"), std::string::npos) << longer.err;

  const std::string text = "Permission is hereby granted, free of charge, to any person.";
  std::ofstream(dir_ / "data.txt") << text;
  const AppRun eval =
      runApp("gpt", {"eval", "--checkpoint", folder_.string(), "--data",
                     (dir_ / "data.txt").string(), "--context", "4", "--json", "--validation"});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const graph::Json e = lastJsonLine(eval.out);
  const std::vector<uint32_t> tokens = tokenizer.encode(text);
  ASSERT_GT(tokens.size(), 9u);
  EXPECT_EQ(e.at("tokens").get<int64_t>(), int64_t(tokens.size()) - 1);
  double sum = 0;
  const std::span<const uint32_t> all(tokens);
  for (size_t start = 0; start + 1 < tokens.size(); start += 4) {
    const size_t n = std::min<size_t>(4, tokens.size() - 1 - start);
    sum += double(n) * gptReference(c_, params_, all.subspan(start, n), all.subspan(start + 1, n),
                                    1, int64_t(n))
                           .loss;
  }
  const double reference = sum / double(tokens.size() - 1);
  EXPECT_NEAR(e.at("loss").get<double>(), reference, 1e-5 * reference);
}

TEST_F(GptHfApp, FineTunesAndSavesTheLayout) {
  std::ofstream(dir_ / "data.txt") << licenceText(3000);
  const fs::path out = dir_ / "tuned";
  auto train = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args{"train",
                                  "--init",
                                  folder_.string(),
                                  "--data",
                                  (dir_ / "data.txt").string(),
                                  "--out",
                                  out.string(),
                                  "--steps",
                                  "6",
                                  "--batch",
                                  "4",
                                  "--lr",
                                  "1e-2",
                                  "--eval-every",
                                  "3",
                                  "--validation",
                                  "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return runApp("gpt", args);
  };
  const AppRun run = train({});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // The folder's layout: GPT-2's names (a tied head: no lm_head.weight), its config and
  // tokenizer; read back as a Hugging Face folder, and better on the text it trained on.
  const std::map<std::string, std::vector<uint32_t>> weights =
      savedWeights((out / "model.safetensors").string());
  EXPECT_TRUE(weights.count("transformer.wte.weight"));
  EXPECT_TRUE(weights.count("transformer.h.1.mlp.c_proj.bias"));
  EXPECT_FALSE(weights.count("lm_head.weight"));
  EXPECT_EQ(graph::readJsonFile(out / "config.json").at("model_type"), "gpt2");
  EXPECT_TRUE(fs::exists(out / "tokenizer.json"));
  auto eval = [&](const fs::path& model) {
    const AppRun e = runApp("gpt", {"eval", "--checkpoint", model.string(), "--data",
                                    (dir_ / "data.txt").string(), "--json"});
    EXPECT_EQ(e.exit_code, 0) << e.err;
    return lastJsonLine(e.out).at("loss").get<double>();
  };
  EXPECT_LT(eval(out), eval(folder_));
  // The model's shape is its folder's.
  const AppRun shaped = train({"--layers", "3"});
  EXPECT_EQ(shaped.exit_code, 2);
  EXPECT_NE(shaped.err.find("--layers is the model's own with --init"), std::string::npos)
      << shaped.err;
}

TEST_F(GptHfApp, LoraSavesPeftAdaptersThatSampleAndEvalRun) {
  std::ofstream(dir_ / "data.txt") << licenceText(3000);
  const fs::path out = dir_ / "adapter";
  auto train = [&](const std::string& rank, const fs::path& to,
                   const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"train",
                                  "--init",
                                  folder_.string(),
                                  "--data",
                                  (dir_ / "data.txt").string(),
                                  "--out",
                                  to.string(),
                                  "--steps",
                                  "4",
                                  "--batch",
                                  "4",
                                  "--lr",
                                  "1e-2",
                                  "--lora",
                                  rank,
                                  "--lora-targets",
                                  "c_attn,mlp.c_proj",
                                  "--eval-every",
                                  "0",
                                  "--validation",
                                  "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return runApp("gpt", args);
  };
  const AppRun run = train("2", out);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(lastJsonLine(run.out).at("trained_parameters"),
            c_.layers * 2 * (4 * c_.width + 5 * c_.width));
  // PEFT's layout only: the base is the --init folder, named in adapter_config.json.
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  const std::map<std::string, std::vector<uint32_t>> weights =
      savedWeights((out / "adapter_model.safetensors").string());
  EXPECT_EQ(weights.size(), size_t(2 * 2 * c_.layers));
  EXPECT_TRUE(weights.count("base_model.model.transformer.h.1.mlp.c_proj.lora_B.weight"));
  EXPECT_EQ(graph::readJsonFile(out / "adapter_config.json").at("target_modules"),
            (std::vector<std::string>{"c_attn", "mlp.c_proj"}));
  // The adapter folder alone, or the base with --adapter: the same model.
  auto eval = [&](const std::vector<std::string>& model) {
    std::vector<std::string> args{"eval", "--data", (dir_ / "data.txt").string(), "--json"};
    args.insert(args.end(), model.begin(), model.end());
    const AppRun e = runApp("gpt", args);
    EXPECT_EQ(e.exit_code, 0) << e.err;
    return lastJsonLine(e.out).at("loss").get<double>();
  };
  EXPECT_EQ(eval({"--checkpoint", out.string()}),
            eval({"--checkpoint", folder_.string(), "--adapter", out.string()}));
  // A run stopped and resumed (its saved options set again) ends with the same adapters.
  const fs::path half = dir_ / "half";
  ASSERT_EQ(train("2", half, {"--stop-at", "2"}).exit_code, 0);
  const AppRun resumed = runApp("gpt", {"train", "--resume", half.string(), "--validation"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(fileBytes((half / "adapter_model.safetensors").string()),
            fileBytes((out / "adapter_model.safetensors").string()));
  const AppRun wide = train("15", out);  // width 14
  EXPECT_EQ(wide.exit_code, 2);
  EXPECT_NE(wide.err.find("rank 15 must be in [1, min(in, out) = 14]"), std::string::npos)
      << wide.err;
}

TEST_F(GptHfApp, BadInputFailsClearly) {
  const AppRun utf8 = sample("ab\xff\xfe");
  EXPECT_EQ(utf8.exit_code, 1);
  EXPECT_NE(utf8.err.find("the prompt is not valid UTF-8 (byte 2)"), std::string::npos) << utf8.err;
  const AppRun longer = sample(std::string(40, 'q') + " z y x w v u t s r");
  EXPECT_EQ(longer.exit_code, 1);
  EXPECT_NE(longer.err.find("longer than the model's context of 9"), std::string::npos)
      << longer.err;
  std::ofstream(dir_ / "data.txt") << "some text to evaluate on, long enough";
  const AppRun context = runApp("gpt", {"eval", "--checkpoint", folder_.string(), "--data",
                                        (dir_ / "data.txt").string(), "--context", "10"});
  EXPECT_EQ(context.exit_code, 2);
  EXPECT_NE(context.err.find("--context 10 is longer than the model's context of 9"),
            std::string::npos)
      << context.err;

  std::ofstream(folder_ / "tokenizer.json") << "{\"model\": {\"type\": \"BPE\"";
  const AppRun broken = sample("a");
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.err.find("tokenizer.json"), std::string::npos) << broken.err;
  fs::remove(folder_ / "tokenizer.json");
  const AppRun none = sample("a");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_FALSE(none.err.empty());

  std::ofstream(folder_ / "config.json") << "{\"model_type\": \"mistral\"}";
  const AppRun mistral = sample("a");
  EXPECT_EQ(mistral.exit_code, 1);
  EXPECT_NE(mistral.err.find("model_type \"mistral\" is not supported"), std::string::npos)
      << mistral.err;
}

// A Qwen2 (q/k/v biases, 4 query heads over 2 key/value heads, tied) through the same commands.
class GptHfLlamaApp : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    c_.vocab = smallTokenizerSize() + 3;
    c_.layers = 2;
    c_.heads = 4;
    c_.width = 16;
    c_.context = 9;
    c_.tie_weights = true;
    c_.norm_eps = 1e-6f;
    gpt::LlamaSpec& l = c_.llama.emplace();
    l.kv_heads = 2;
    l.intermediate = 11;
    l.qkv_bias = true;
    weights_ = randomLlamaWeights(c_, rng_);
    folder_ = dir_ / "qwen2";
    LlamaFolderOptions qwen;
    qwen.qwen2 = true;
    writeLlamaFolder(folder_, c_, weights_, qwen);
    std::ofstream(dir_ / "data.txt") << licenceText(400);
  }
  AppRun eval(const fs::path& model, const std::string& context) {
    return runApp("gpt", {"eval", "--checkpoint", model.string(), "--data",
                          (dir_ / "data.txt").string(), "--context", context, "--json"});
  }
  // The CPU reference's mean cross-entropy over tokens in eval's windows of `window`.
  double referenceLoss(const std::vector<uint32_t>& tokens, size_t window) const {
    const size_t V = size_t(c_.vocab);
    double sum = 0;
    for (size_t start = 0; start + 1 < tokens.size(); start += window) {
      const size_t n = std::min<size_t>(window, tokens.size() - 1 - start);
      const std::vector<float> logits =
          llamaReferenceLogits(c_, weights_, std::span<const uint32_t>(tokens).subspan(start, n));
      for (size_t r = 0; r < n; ++r) {
        const float* row = &logits[r * V];
        double top = -INFINITY, total = 0;
        for (size_t v = 0; v < V; ++v) top = std::max(top, double(row[v]));
        for (size_t v = 0; v < V; ++v) total += std::exp(double(row[v]) - top);
        sum += top + std::log(total) - double(row[tokens[start + r + 1]]);
      }
    }
    return sum / double(tokens.size() - 1);
  }
  gpt::GptConfig c_;
  HfArrays weights_;
  fs::path folder_;
  Rng rng_;
};

TEST_F(GptHfLlamaApp, SamplesAndEvaluatesAFolder) {
  auto sample = [&](const std::string& cache) {
    return runApp("gpt", {"sample", "--checkpoint", folder_.string(), "--prompt", "Per", "--tokens",
                          "6", "--top-k", "1", "--json", "--kv-cache", cache, "--validation"});
  };
  const AppRun cached = sample("on"), window = sample("off");
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  ASSERT_EQ(window.exit_code, 0) << window.err;
  EXPECT_EQ(lastJsonLine(cached.out).at("ids"), lastJsonLine(window.out).at("ids"));
  EXPECT_NE(cached.err.find("Hugging Face qwen2 model"), std::string::npos) << cached.err;
  // eval's windows of 4 against the CPU reference's cross-entropy.
  const AppRun e = eval(folder_, "4");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const std::vector<uint32_t> tokens = tokenizers::loadTokenizer(folder_).encode(licenceText(400));
  const double reference = referenceLoss(tokens, 4);
  EXPECT_NEAR(lastJsonLine(e.out).at("loss").get<double>(), reference, 1e-5 * reference);
}

// A Llama 2-style SentencePiece tokenizer in the folder (models/tokenizers/small_sentencepiece.h):
// the prompt and eval's text start with the post-processor's <s>, and the sampled text keeps the
// leading space that decoding a text strips.
TEST_F(GptHfLlamaApp, SentencePieceTokenizer) {
  std::ofstream(folder_ / "tokenizer.json")
      << graph::dumpJson(sentencePieceJson(SentencePieceForm::Normalizer));
  const tokenizers::Tokenizer t = tokenizers::loadTokenizer(folder_);
  const AppRun s = runApp("gpt", {"sample", "--checkpoint", folder_.string(), "--prompt", "hello",
                                  "--tokens", "3", "--top-k", "1", "--json", "--validation"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const graph::Json out = lastJsonLine(s.out);
  const auto ids = out.at("ids").get<std::vector<uint32_t>>();
  ASSERT_EQ(ids.size(), 3u);
  // As JSON writes it (invalid UTF-8, such as a lone byte token's, as U+FFFD).
  EXPECT_EQ(out.at("text"),
            graph::parseJson(graph::dumpJson(t.decode(ids, false, /*continuation=*/true)), "text"));
  // Greedy: the first id drawn is the reference's argmax after <s> ▁hello.
  const std::vector<uint32_t> prompt{kSpmBos, spmId("▁hello")};
  const std::vector<float> logits = llamaReferenceLogits(c_, weights_, prompt);
  const float* last = &logits[size_t(c_.vocab)];
  EXPECT_EQ(ids[0], uint32_t(std::max_element(last, last + c_.vocab) - last));
  // eval predicts the text's first token from <s>.
  const AppRun e = eval(folder_, "4");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const std::vector<uint32_t> tokens = t.encodeWithTemplate(licenceText(400));
  ASSERT_EQ(tokens[0], kSpmBos);
  const double reference = referenceLoss(tokens, 4);
  EXPECT_NEAR(lastJsonLine(e.out).at("loss").get<double>(), reference, 1e-5 * reference);
  // train --init reads it too, and the saved folder carries the tokenizer.
  const fs::path tuned = dir_ / "tuned";
  const AppRun run =
      runApp("gpt", {"train", "--init", folder_.string(), "--data", (dir_ / "data.txt").string(),
                     "--out", tuned.string(), "--steps", "2", "--batch", "2", "--validation"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(tokenizers::loadTokenizer(tuned).encodeWithTemplate("hello"),
            (std::vector<uint32_t>{kSpmBos, spmId("▁hello")}));
}

TEST_F(GptHfLlamaApp, FineTunesAndSavesTheLayout) {
  const fs::path out = dir_ / "tuned";
  const AppRun run =
      runApp("gpt", {"train", "--init", folder_.string(), "--data", (dir_ / "data.txt").string(),
                     "--out", out.string(), "--steps", "4", "--batch", "4", "--lr", "1e-2",
                     "--eval-every", "4", "--validation"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::map<std::string, std::vector<uint32_t>> saved =
      savedWeights((out / "model.safetensors").string());
  EXPECT_TRUE(saved.count("model.layers.1.self_attn.k_proj.bias"));
  EXPECT_TRUE(saved.count("model.layers.0.mlp.up_proj.weight"));
  EXPECT_FALSE(saved.count("lm_head.weight"));
  EXPECT_EQ(graph::readJsonFile(out / "config.json").at("model_type"), "qwen2");
  const AppRun before = eval(folder_, "9"), after = eval(out, "9");
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_LT(lastJsonLine(after.out).at("loss").get<double>(),
            lastJsonLine(before.out).at("loss").get<double>());
}

// Qwen2's max_position_embeddings of 32768 (a RoPE model: no table to match): eval and sample
// run windows of kDefaultWindow (2048) tokens unless --context asks for more, and say so.
TEST_F(GptHfLlamaApp, LongContextsGetACappedDefaultWindow) {
  graph::Json config = graph::readJsonFile(folder_ / "config.json");
  config["max_position_embeddings"] = 32768;
  std::ofstream(folder_ / "config.json") << graph::dumpJson(config);
  const std::string note = "note: windows of 2048 tokens, not the model's context of 32768";
  const AppRun capped = runApp(
      "gpt", {"eval", "--checkpoint", folder_.string(), "--data", (dir_ / "data.txt").string()});
  ASSERT_EQ(capped.exit_code, 0) << capped.err;
  EXPECT_NE(capped.err.find(note), std::string::npos) << capped.err;
  EXPECT_NE(capped.out.find("windows of 2048)"), std::string::npos) << capped.out;
  auto sample = [&](const std::string& context) {
    return runApp("gpt", {"sample", "--checkpoint", folder_.string(), "--prompt", "Per", "--tokens",
                          "2", "--top-k", "1", "--json", "--context", context, "--validation"});
  };
  const AppRun drawn = sample("0");
  ASSERT_EQ(drawn.exit_code, 0) << drawn.err;
  EXPECT_NE(drawn.err.find(note), std::string::npos) << drawn.err;
  const AppRun longer = sample("40000");
  EXPECT_EQ(longer.exit_code, 2);
  EXPECT_NE(longer.err.find("--context 40000 is longer than the model's context of 32768"),
            std::string::npos)
      << longer.err;
}

// LoRA on a Qwen2 folder: the default targets (all seven modules, q/k/v and gate/up as blocks
// of vkgrad's fused products) saved under PEFT's names, and --merge's folder giving the
// adapted model's loss (the same seed draws the same adapters and rows).
TEST_F(GptHfLlamaApp, LoraAdaptersAndTheirMerge) {
  auto train = [&](const fs::path& to, const std::string& extra) {
    std::vector<std::string> args{"train",
                                  "--init",
                                  folder_.string(),
                                  "--data",
                                  (dir_ / "data.txt").string(),
                                  "--out",
                                  to.string(),
                                  "--steps",
                                  "2",
                                  "--batch",
                                  "2",
                                  "--lr",
                                  "1e-2",
                                  "--lora",
                                  "2",
                                  "--eval-every",
                                  "0",
                                  "--validation"};
    if (!extra.empty()) args.push_back(extra);
    return runApp("gpt", args);
  };
  const fs::path adapter = dir_ / "adapter", merged = dir_ / "merged";
  const AppRun run = train(adapter, "");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::map<std::string, std::vector<uint32_t>> saved =
      savedWeights((adapter / "adapter_model.safetensors").string());
  EXPECT_EQ(saved.size(), size_t(2 * 7 * c_.layers));
  EXPECT_TRUE(saved.count("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"));
  ASSERT_EQ(train(merged, "--merge").exit_code, 0);
  const AppRun a = eval(adapter, "9"), m = eval(merged, "9");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const double loss = lastJsonLine(a.out).at("loss").get<double>();
  EXPECT_NEAR(lastJsonLine(m.out).at("loss").get<double>(), loss, 1e-5 * loss);
}

}  // namespace
}  // namespace vkgrad::test

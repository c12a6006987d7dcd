// The pieces of models/gpt around the model: the byte vocabulary, config.json checkpoints
// and on-device sampling. Greedy sampling (top_k = 1) must pick the argmax of the logits a
// separate, unpadded forward graph computes, for prompts shorter than, equal to and longer
// than the context (the sampler pads, and slides its window).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/random.h"
#include "common/vk_test.h"
#include "gpt/checkpoint.h"
#include "gpt/gpt.h"
#include "gpt/sampler.h"
#include "gpt/vocab.h"
#include "graph/executor.h"
#include "graph/parameters.h"
#include "vk/error.h"

namespace vkgrad::test {
namespace {

using gpt::ByteVocab;
using gpt::GptConfig;
namespace fs = std::filesystem;

template <typename F>
void expectErrorContaining(F&& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning \"" << text << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(ByteVocabTest, EncodesDecodesAndNamesUnknownBytes) {
  const std::string text = "hello, world\n\xc3\xa9t\xc3\xa9";  // ends in "été" (UTF-8)
  const ByteVocab v = ByteVocab::fromText(text);
  EXPECT_EQ(v.size(), 13);  // h e l o , space w r d \n t and the bytes c3 a9
  const auto ids = v.encode(text);
  ASSERT_EQ(ids.size(), text.size());
  EXPECT_EQ(v.decode(ids), text);
  EXPECT_EQ(v.encode("\n")[0], 0u);  // ids follow byte order
  EXPECT_EQ(v.encode("\xc3")[0], 12u);  // the largest byte, after 0xa9
  expectErrorContaining([&] { v.encode("held!"); }, "'!' at position 4");
  expectErrorContaining([&] { v.encode("\x01"); }, "\\x01");
  expectErrorContaining([&] { v.decode(uint32_t(13)); }, "13");
  expectErrorContaining([&] { ByteVocab::fromText(""); }, "empty");

  const ByteVocab back = ByteVocab::fromJson(graph::Json::parse(v.toJson().dump()));
  EXPECT_EQ(back.encode(text), ids);
  expectErrorContaining([] { ByteVocab::fromJson(graph::Json::parse("[3, 2]")); }, "increasing");
  expectErrorContaining([] { ByteVocab::fromJson(graph::Json::parse("[300]")); }, "255");
  expectErrorContaining([] { ByteVocab::fromJson(graph::Json::parse("[]")); }, "non-empty");
}

class GptCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("vkgrad_gpt_ckpt_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void writeText(const std::string& text) { std::ofstream(dir_ / gpt::kConfigFile) << text; }
  fs::path dir_;
};

TEST_F(GptCheckpointTest, ConfigRoundTripsAndRejectsBadFiles) {
  gpt::GptCheckpoint cp{GptConfig{}, ByteVocab::fromText("abcab c\n")};
  cp.config.vocab = cp.vocab.size();
  cp.config.layers = 3;
  cp.config.heads = 2;
  cp.config.width = 10;
  cp.config.context = 17;
  cp.config.norm = nn::Norm::Post;
  cp.config.tie_weights = true;
  cp.config.activation = nn::ActivationSpec::leakyRelu(0.125f);
  cp.config.dropout = 0.25f;
  cp.training = graph::Json::object({{"steps", graph::Json::number(42)}});
  gpt::writeConfig(dir_, cp);
  const gpt::GptCheckpoint back = gpt::readConfig(dir_);
  EXPECT_EQ(back.config.vocab, 5);
  EXPECT_EQ(back.config.layers, 3);
  EXPECT_EQ(back.config.heads, 2);
  EXPECT_EQ(back.config.width, 10);
  EXPECT_EQ(back.config.context, 17);
  EXPECT_EQ(back.config.norm, nn::Norm::Post);
  EXPECT_TRUE(back.config.tie_weights);
  EXPECT_EQ(back.config.activation.kind, ops::Activation::LeakyRelu);
  EXPECT_EQ(back.config.activation.param, 0.125f);
  EXPECT_EQ(back.config.dropout, 0.25f);
  EXPECT_EQ(back.vocab.decode(back.vocab.encode("cab\n")), "cab\n");
  EXPECT_EQ(back.training.find("steps")->asUint(), 42u);

  cp.config.vocab = 4;
  expectErrorContaining([&] { gpt::writeConfig(dir_, cp); }, "vocab");
  expectErrorContaining([&] { gpt::readConfig(dir_ / "nope"); }, "no such checkpoint directory");
  writeText("{\"format\": \"vkgrad-gpt\", ");
  expectErrorContaining([&] { gpt::readConfig(dir_); }, "config.json: JSON");
  writeText("{\"format\": \"other\", \"version\": 1}");
  expectErrorContaining([&] { gpt::readConfig(dir_); }, "format");
  writeText("{\"format\": \"vkgrad-gpt\", \"version\": 1, \"model\": {\"vocab\": 3}}");
  expectErrorContaining([&] { gpt::readConfig(dir_); }, "missing \"layers\"");
  fs::remove(dir_ / gpt::kConfigFile);
  expectErrorContaining([&] { gpt::readConfig(dir_); }, "cannot open");
}

class GptSamplerTest : public VkTest {
 protected:
  GptConfig config() const {
    GptConfig c;
    c.vocab = 11;
    c.layers = 2;
    c.heads = 2;
    c.width = 16;
    c.context = 7;
    return c;
  }

  // Logits of the last token of `tokens` (at most context of them) from an unpadded graph.
  std::vector<float> lastLogits(const graph::ParameterStore& store, const GptConfig& c,
                                const std::vector<uint32_t>& tokens) {
    graph::Graph g;
    const graph::Tensor ids = g.input("ids", {1, int64_t(tokens.size())}, ops::DType::U32);
    const graph::Tensor logits = gpt::gptLogits(g, store, c, ids);
    g.markOutput(logits);
    graph::Executor exec(ctx(), g);
    exec.setInput(ids, tokens);
    exec.step();
    const auto all = exec.read(logits);
    return {all.end() - c.vocab, all.end()};
  }
  Rng rng_;
};

TEST_F(GptSamplerTest, GreedyPicksTheArgmaxOfTheLastToken) {
  const GptConfig c = config();
  graph::ParameterStore store(ctx());
  gpt::declareGpt(store, c);
  store.initialize(rng_.seed());
  gpt::Sampler greedy(ctx(), store, c, {1.0f, 1}, rng_.seed());
  for (size_t length : {1, 4, 7, 12}) {
    std::vector<uint32_t> tokens(length);
    for (auto& t : tokens) t = rng_.below(uint32_t(c.vocab));
    const size_t seen = std::min(length, size_t(c.context));
    const auto logits =
        lastLogits(store, c, std::vector<uint32_t>(tokens.end() - ptrdiff_t(seen), tokens.end()));
    const auto best = std::max_element(logits.begin(), logits.end());
    const uint32_t picked = greedy.next(tokens);
    ASSERT_LT(picked, uint32_t(c.vocab));
    // A near-tie could flip with the padded graph's different rounding: accept only that.
    EXPECT_GE(logits[picked], *best - 1e-5f * std::max(1.0f, std::fabs(*best)))
        << "length " << length << ": picked " << picked << ", argmax "
        << (best - logits.begin()) << "; " << rng_.describe();
  }
  std::vector<uint32_t> none;
  expectErrorContaining([&] { greedy.next(none); }, "at least one token");
  const std::vector<uint32_t> bad{uint32_t(c.vocab)};
  expectErrorContaining([&] { greedy.next(bad); }, "outside the vocabulary");
}

// The same seed gives the same continuation; the draws follow the model's distribution, so
// different seeds at a high temperature give different continuations.
TEST_F(GptSamplerTest, SeedFixesTheDraws) {
  const GptConfig c = config();
  graph::ParameterStore store(ctx());
  gpt::declareGpt(store, c);
  store.initialize(rng_.seed());
  const std::vector<uint32_t> prompt{1, 2, 3};
  auto generate = [&](uint64_t seed) {
    gpt::Sampler s(ctx(), store, c, {2.0f, 0}, seed);
    std::vector<uint32_t> tokens = prompt;
    s.extend(tokens, 24);
    EXPECT_EQ(tokens.size(), prompt.size() + 24);
    for (uint32_t t : tokens) EXPECT_LT(t, uint32_t(c.vocab));
    return tokens;
  };
  const uint64_t seed = rng_.seed();
  EXPECT_EQ(generate(seed), generate(seed)) << rng_.describe();
  // An untrained model is near uniform over 11 tokens: 24 equal draws by chance ~ 11^-24.
  EXPECT_NE(generate(seed), generate(seed + 1)) << rng_.describe();
}

}  // namespace
}  // namespace vkgrad::test

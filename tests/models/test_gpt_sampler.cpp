// The pieces of models/gpt around the model: the byte vocabulary, config.json checkpoints
// and on-device sampling. Greedy sampling (top_k = 1) must pick the argmax of the logits a
// separate, unpadded forward graph computes, for prompts shorter than, equal to and longer
// than the context (the window path pads and slides its window; the cached path restarts its
// cache), and the cached path must give the window path's greedy text token for token.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "common/compare.h"
#include "common/random.h"
#include "common/temp_dir.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/gpt/checkpoint.h"
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/gpt/sampler.h"
#include "vkgrad/gpt/vocab.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"

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
  EXPECT_EQ(v.encode("\n")[0], 0u);     // ids follow byte order
  EXPECT_EQ(v.encode("\xc3")[0], 12u);  // the largest byte, after 0xa9
  expectErrorContaining([&] { v.encode("held!"); }, "'!' at position 4");
  expectErrorContaining([&] { v.encode("\x01"); }, "\\x01");
  expectErrorContaining([&] { v.decode(uint32_t(13)); }, "13");
  expectErrorContaining([&] { ByteVocab::fromText(""); }, "empty");

  auto parse = [](const std::string& text) { return graph::parseJson(text, "vocab"); };
  const ByteVocab back = ByteVocab::fromJson(parse(graph::dumpJson(v.toJson())));
  EXPECT_EQ(back.encode(text), ids);
  expectErrorContaining([&] { ByteVocab::fromJson(parse("[3, 2]")); }, "increasing");
  expectErrorContaining([&] { ByteVocab::fromJson(parse("[300]")); }, "255");
  expectErrorContaining([&] { ByteVocab::fromJson(parse("[-1]")); }, "must be an integer");
  expectErrorContaining([&] { ByteVocab::fromJson(parse("[]")); }, "non-empty");
  expectErrorContaining([&] { ByteVocab::fromJson(parse("\"abc\"")); }, "non-empty array");
}

class GptCheckpointTest : public TempDirTest {
 protected:
  void writeText(const std::string& text) { std::ofstream(dir_ / gpt::kConfigFile) << text; }
  std::string readText() const {
    std::ifstream in(dir_ / gpt::kConfigFile);
    return {std::istreambuf_iterator<char>(in), {}};
  }
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
  cp.training = {{"steps", 42}, {"lr", 3e-3f}};
  gpt::writeConfig(dir_, cp);
  const std::string good = readText();
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
  EXPECT_EQ(back.training, cp.training);

  cp.config.vocab = 4;
  expectErrorContaining([&] { gpt::writeConfig(dir_, cp); }, "vocab");
  expectErrorContaining([&] { gpt::readConfig(dir_ / "nope"); }, "no such checkpoint directory");
  // Whatever is wrong, the error names the file.
  const std::string where = (dir_ / gpt::kConfigFile).string() + ": ";
  writeText("{\"format\": \"vkgrad-gpt\", ");
  expectErrorContaining([&] { gpt::readConfig(dir_); }, where + "invalid JSON: ");
  writeText("{\"format\": \"vkgrad-gpt\", \"format\": \"vkgrad-gpt\"}");
  expectErrorContaining([&] { gpt::readConfig(dir_); },
                        where + "invalid JSON: key \"format\" twice");
  writeText("[]");
  expectErrorContaining([&] { gpt::readConfig(dir_); }, where + "not a JSON object");
  writeText("{\"format\": \"other\", \"version\": 1}");
  expectErrorContaining([&] { gpt::readConfig(dir_); }, where + "format");
  writeText("{\"format\": \"vkgrad-gpt\", \"version\": 2}");
  expectErrorContaining([&] { gpt::readConfig(dir_); }, where + "version 2 is not supported");
  writeText("{\"format\": \"vkgrad-gpt\", \"version\": 1, \"model\": {\"vocab\": 3}}");
  expectErrorContaining([&] { gpt::readConfig(dir_); }, where + "missing \"layers\"");
  writeText("{\"format\": \"vkgrad-gpt\", \"version\": 1, \"model\": 3}");
  expectErrorContaining([&] { gpt::readConfig(dir_); }, where + "\"model\" must be an object");
  // Absurd sizes and wrong types never reach the model.
  for (const auto& [field, value, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"layers", "0", "\"layers\" must be in [1, 2^31]"},
           {"width", "1e300", "\"width\" must be an integer"},
           {"heads", "-2", "\"heads\" must be an integer"},
           {"context", "\"16\"", "\"context\" must be an integer"},
           {"dropout", "\"0.1\"", "\"dropout\" must be a number"},
           {"tie_weights", "1", "\"tie_weights\" must be true or false"}}) {
    graph::Json doc = graph::parseJson(good, "good");
    doc["model"][field] = graph::parseJson(value, "value");
    writeText(graph::dumpJson(doc));
    expectErrorContaining([&] { gpt::readConfig(dir_); }, where + message);
  }
  fs::remove(dir_ / gpt::kConfigFile);
  expectErrorContaining([&] { gpt::readConfig(dir_); },
                        "missing (is this a vkgrad-gpt checkpoint directory?)");
}

// config.json as vkgrad-gpt wrote it before its JSON went through nlohmann (every number
// with up to 17 significant digits).
TEST_F(GptCheckpointTest, ReadsConfigsFromEarlierVersions) {
  writeText(
      R"({"format":"vkgrad-gpt","version":1,"model":{"vocab":10,"layers":2,"heads":2,"width":8,)"
      R"("context":16,"norm":"pre","tie_weights":false,"activation":"leaky_relu",)"
      R"("activation_param":0.0099999997764825821,"dropout":0.10000000149011612},)"
      R"("vocab_bytes":[10,32,44,100,101,104,108,111,114,119],"training":{"data":"text.txt",)"
      R"("steps":600,"lr":0.0030000000260770321,"train_loss":1.2345677614212036}})"
      "\n");
  const gpt::GptCheckpoint cp = gpt::readConfig(dir_);
  EXPECT_EQ(cp.config.vocab, 10);
  EXPECT_EQ(cp.config.layers, 2);
  EXPECT_EQ(cp.config.width, 8);
  EXPECT_EQ(cp.config.context, 16);
  EXPECT_EQ(cp.config.norm, nn::Norm::Pre);
  EXPECT_FALSE(cp.config.tie_weights);
  EXPECT_EQ(cp.config.activation.kind, ops::Activation::LeakyRelu);
  EXPECT_EQ(cp.config.activation.param, 0.01f);
  EXPECT_EQ(cp.config.dropout, 0.1f);
  EXPECT_EQ(cp.vocab.decode(cp.vocab.encode("hello, world\n")), "hello, world\n");
  EXPECT_EQ(cp.training["steps"], 600);
  EXPECT_EQ(float(cp.training["lr"].get<double>()), 3e-3f);
  // Written again (shortest digits now), it reads back the same.
  gpt::writeConfig(dir_, cp);
  const gpt::GptCheckpoint again = gpt::readConfig(dir_);
  EXPECT_EQ(again.config.activation.param, 0.01f);
  EXPECT_EQ(again.config.dropout, 0.1f);
  EXPECT_EQ(again.training, cp.training);
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
  for (const gpt::Decoding decoding : {gpt::Decoding::Cached, gpt::Decoding::Window}) {
    SCOPED_TRACE(gpt::decodingName(decoding));
    gpt::Sampler greedy(ctx(), store, c, {1.0f, 1}, rng_.seed(), decoding);
    for (size_t length : {1, 4, 7, 12}) {
      std::vector<uint32_t> tokens(length);
      for (auto& t : tokens) t = rng_.below(uint32_t(c.vocab));
      const size_t seen = gpt::visibleTokens(length, c.context, decoding);
      const auto logits =
          lastLogits(store, c, std::vector<uint32_t>(tokens.end() - ptrdiff_t(seen), tokens.end()));
      const auto best = std::max_element(logits.begin(), logits.end());
      const uint32_t picked = greedy.next(tokens);
      ASSERT_LT(picked, uint32_t(c.vocab));
      // A near-tie could flip with the padded graph's different rounding: accept only that.
      EXPECT_GE(logits[picked], *best - 1e-5f * std::max(1.0f, std::fabs(*best)))
          << "length " << length << ": picked " << picked << ", argmax " << (best - logits.begin())
          << "; " << rng_.describe();
    }
    std::vector<uint32_t> none;
    expectErrorContaining([&] { greedy.next(none); }, "at least one token");
    const std::vector<uint32_t> bad{uint32_t(c.vocab)};
    expectErrorContaining([&] { greedy.next(bad); }, "outside the vocabulary");
  }
}

TEST(GptVisibleTokensTest, TheCacheRestartsWithHalfTheContext) {
  using gpt::Decoding;
  // context 8: both see everything up to 8 tokens; then the window the last 8, the cache 4
  // kept plus one more per token until 8, then 4 + 1 again.
  const size_t cached[] = {1, 2, 3, 4, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6};
  for (size_t n = 1; n <= 14; ++n) {
    EXPECT_EQ(gpt::visibleTokens(n, 8, Decoding::Window), std::min<size_t>(n, 8)) << n;
    EXPECT_EQ(gpt::visibleTokens(n, 8, Decoding::Cached), cached[n - 1]) << n;
  }
  // A context of 1 keeps nothing: each token alone, as the window sees it.
  for (size_t n = 1; n <= 4; ++n) EXPECT_EQ(gpt::visibleTokens(n, 1, Decoding::Cached), 1u);
  EXPECT_EQ(gpt::visibleTokens(1000, 7, Decoding::Cached), 3 + (1000 - 8) % 4 + 1);
}

// Every row's logits of the one-row cached graph, fed a sequence token by token, against the
// window graph's rows for the same sequence: the same model, within f32 rounding.
TEST_F(GptSamplerTest, CachedLogitsMatchTheWindowRowByRow) {
  struct Shape {
    int64_t layers, heads, width, context;
    nn::Norm norm;
    bool tied;
  };
  for (const Shape s : {Shape{2, 2, 16, 7, nn::Norm::Pre, false},
                        Shape{1, 3, 15, 9, nn::Norm::Post, true},  // head dim 5
                        Shape{3, 1, 8, 5, nn::Norm::Pre, true}}) {
    GptConfig c = config();
    c.layers = s.layers, c.heads = s.heads, c.width = s.width, c.context = s.context;
    c.norm = s.norm, c.tie_weights = s.tied;
    c.dropout = 0.2f;  // an evaluation graph drops nothing
    SCOPED_TRACE(testing::Message() << c.layers << " layers, " << c.heads << " heads, width "
                                    << c.width << ", context " << c.context << ", "
                                    << nn::normName(c.norm) << (c.tie_weights ? ", tied" : ""));
    graph::ParameterStore store(ctx());
    gpt::declareGpt(store, c);
    store.initialize(rng_.seed());
    std::vector<uint32_t> tokens(size_t(c.context));
    for (auto& t : tokens) t = rng_.below(uint32_t(c.vocab));

    graph::Graph window;
    window.setTraining(false);
    const graph::Tensor ids = window.input("ids", {1, c.context}, ops::DType::U32);
    const graph::Tensor all = gpt::gptLogits(window, store, c, ids);
    window.markOutput(all);
    graph::Executor full(ctx(), window);
    full.setInput(ids, tokens);
    full.step();
    const std::vector<float> want = full.read(all);

    graph::Graph g;
    g.setTraining(false);
    const graph::Tensor id = g.input("ids", {1, 1}, ops::DType::U32);
    const gpt::GptCache cache = gpt::gptCache(g, c, 1);
    const graph::Tensor row = gpt::gptLogits(g, store, c, id, &cache);
    g.markOutput(row);
    graph::Executor exec(ctx(), g);
    for (size_t t = 0; t < tokens.size(); ++t) {
      const uint32_t position = uint32_t(t);
      exec.setInput(id, std::span(&tokens[t], 1));
      exec.setInput(cache.position, std::span(&position, 1));
      exec.step();
      const auto first = want.begin() + ptrdiff_t(t) * c.vocab;
      EXPECT_TRUE(allClose(exec.read(row), std::vector<float>(first, first + c.vocab), 1e-5))
          << "position " << t << "; " << rng_.describe();
    }
  }
}

// Greedy text from the cached path equals the window path's, token for token, fed what the
// cached path sees (visibleTokens): for prompts shorter and longer than the context, over
// generations that restart the cache several times, on several model shapes.
TEST_F(GptSamplerTest, CachedGreedyTextEqualsTheWindowPath) {
  for (const auto& [layers, heads, width, context] :
       {std::tuple{2, 2, 16, 7}, std::tuple{1, 3, 15, 12}, std::tuple{3, 2, 32, 16}}) {
    GptConfig c = config();
    c.layers = layers, c.heads = heads, c.width = width, c.context = context;
    graph::ParameterStore store(ctx());
    gpt::declareGpt(store, c);
    store.initialize(rng_.seed());
    gpt::Sampler cached(ctx(), store, c, {1.0f, 1}, 1, gpt::Decoding::Cached);
    gpt::Sampler window(ctx(), store, c, {1.0f, 1}, 1, gpt::Decoding::Window);
    for (const size_t prompt : {size_t(1), size_t(context - 1), size_t(2 * context + 3)}) {
      SCOPED_TRACE(testing::Message()
                   << layers << " layers, " << heads << " heads, width " << width << ", context "
                   << context << ", prompt " << prompt << "; " << rng_.describe());
      std::vector<uint32_t> tokens(prompt);
      for (auto& t : tokens) t = rng_.below(uint32_t(c.vocab));
      for (int i = 0; i < 2 * context + 5; ++i) {
        const size_t seen = gpt::visibleTokens(tokens.size(), c.context, gpt::Decoding::Cached);
        const uint32_t want = window.next(std::span(tokens).last(seen));
        const uint32_t got = cached.next(tokens);
        if (got != want) {  // only a near-tie may differ in the last bits: then go on with want
          const std::vector<uint32_t> visible(tokens.end() - ptrdiff_t(seen), tokens.end());
          const auto logits = lastLogits(store, c, visible);
          ASSERT_NEAR(logits[got], logits[want], 1e-5f)
              << "token " << i << " after " << tokens.size() << ": cached " << got << ", window "
              << want;
        }
        tokens.push_back(want);
      }
    }
  }
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

// A vocabulary padded past its tokenizer (GPT-2's 50257 ids in 50304 rows): with valid_vocab
// the padded ids are never drawn, even when their logits are the largest by far. ln_f's gain
// is 0 and its bias b, so every row's final state is b; the head's padded columns are 4b:
// their logits 4|b|^2 ~ 64 against the others' ~0.1. Without the limit greedy draws them.
TEST_F(GptSamplerTest, PaddedIdsAreNeverDrawn) {
  const GptConfig c = config();
  const int64_t valid = 8;
  graph::ParameterStore store(ctx());
  gpt::declareGpt(store, c);
  store.initialize(rng_.seed());
  std::vector<graph::SavedTensor> saved = store.download();
  const std::vector<float> b = rng_.normal(size_t(c.width));
  for (graph::SavedTensor& t : saved) {
    auto set = [&](size_t i, float v) { std::memcpy(&t.data[i], &v, 4); };
    if (t.name == "ln_f.g")
      for (size_t i = 0; i < t.data.size(); ++i) set(i, 0.0f);
    if (t.name == "ln_f.b")
      for (size_t i = 0; i < t.data.size(); ++i) set(i, b[i]);
    if (t.name == "head.w")  // (width, vocab)
      for (int64_t i = 0; i < c.width; ++i)
        for (int64_t j = valid; j < c.vocab; ++j) set(size_t(i * c.vocab + j), 4.0f * b[size_t(i)]);
  }
  std::vector<const graph::SavedTensor*> all;
  for (const auto& t : saved) all.push_back(&t);
  store.upload(all, "test");
  const std::vector<uint32_t> prompt{1, 2, 3};
  for (const gpt::Decoding decoding : {gpt::Decoding::Cached, gpt::Decoding::Window}) {
    SCOPED_TRACE(gpt::decodingName(decoding));
    gpt::Sampler unlimited(ctx(), store, c, {1.0f, 1}, rng_.seed(), decoding);
    EXPECT_GE(unlimited.next(prompt), uint32_t(valid)) << "the padded logits are not the largest";
    // Greedy, and every id drawn at a high temperature over the whole (cut) row.
    for (const ops::SampleOptions options : {ops::SampleOptions{1.0f, 1}, {4.0f, 0}}) {
      gpt::Sampler limited(ctx(), store, c, options, rng_.seed(), decoding, valid);
      std::vector<uint32_t> tokens = prompt;
      limited.extend(tokens, 16);
      for (uint32_t t : tokens) EXPECT_LT(t, uint32_t(valid)) << rng_.describe();
    }
  }
  expectErrorContaining(
      [&] {
        gpt::Sampler(ctx(), store, c, {1.0f, 1}, 1, gpt::Decoding::Cached, c.vocab + 1);
      },
      "valid_vocab 12");
}

}  // namespace
}  // namespace vkgrad::test

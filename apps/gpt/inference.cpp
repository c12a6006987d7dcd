#include "gpt/inference.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/cli.h"
#include "common/device_options.h"
#include "gpt/corpus.h"
#include "gpt/model_source.h"
#include "gpt/options.h"
#include "vkgrad/core/error.h"
#include "vkgrad/gpt/sampler.h"
#include "vkgrad/gpt/stream_loss.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/io/npy.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {

namespace {

std::string modelKind(const ModelSource& source) {
  if (!source.huggingFace()) return "vkgrad-gpt";
  return "Hugging Face " + std::string(hf::modelTypeName(source.hf->type)) +
         (source.lora ? " with LoRA adapters" : "");
}

// --prompt's tokens: refused when empty or longer than the window; a note when the tokens to
// draw pass the window (each then sees only the latest).
std::vector<uint32_t> promptTokens(Cli& cli, const ModelSource& source,
                                   const gpt::GptConfig& config, int64_t count,
                                   gpt::Decoding decoding) {
  const std::string prompt = cli.get("prompt");
  if (prompt.empty()) cli.fail("--prompt must not be empty");
  std::vector<uint32_t> tokens = source.encode(prompt, "the prompt", /*prompt=*/true);
  if (tokens.empty()) cli.fail("--prompt encodes to no tokens");
  const std::string limit =
      (config.context == source.config.context ? "the model's context of " : "the window of ") +
      std::to_string(config.context);
  if (int64_t(tokens.size()) > config.context)
    throw Error("the prompt is " + std::to_string(tokens.size()) + " tokens, longer than " + limit);
  if (int64_t(tokens.size()) + count > config.context)
    std::fprintf(stderr,
                 "note: %lld tokens pass %s: past it each token sees only the latest tokens (the "
                 "%s decoding's window, gpt/sampler.h)\n",
                 static_cast<long long>(int64_t(tokens.size()) + count), limit.c_str(),
                 gpt::decodingName(decoding));
  return tokens;
}

}  // namespace

int sample(int argc, char** argv) {
  Cli cli("vkgrad-gpt sample",
          "Generates text from a checkpoint written by `vkgrad-gpt train` or from a Hugging Face\n"
          "model folder (config.json, model.safetensors or its shards, and tokenizer.json or\n"
          "vocab.json + merges.txt), sampling on the device.");
  cli.positional("sample", "the command");
  declareSampleOptions(cli);
  declareDeviceOptions(cli);
  cli.flag("json",
           "print one JSON line instead of the text: {\"ids\": the generated ids (the "
           "prompt's excluded), \"text\": their text}");
  cli.parse(argc, argv);
  if (cli.get("checkpoint").empty()) cli.fail("no --checkpoint directory given");
  const gpt::Decoding decoding = decodingFromCli(cli);
  const int64_t count = cli.getInt("tokens", 0, 1 << 24);
  ops::SampleOptions options;
  options.temperature = float(cli.getDouble("temperature", 1e-6, 1e6));
  options.top_k = cli.getInt("top-k", 0, 1 << 30);
  const uint64_t seed = uint64_t(cli.getInt("seed", 0, INT64_MAX));
  const bool json = cli.has("json");

  const ModelSource source = readModelSource(cli.get("checkpoint"), cli.get("adapter"));
  // The window (capped by default, windowFromCli) sizes the key/value cache or the window
  // graph; a shorter one than the model's reads the first rows of a position table.
  gpt::GptConfig config = source.config;
  config.context = windowFromCli(cli, source.config.context);
  const std::string prompt = cli.get("prompt");
  std::vector<uint32_t> tokens = promptTokens(cli, source, config, count, decoding);
  vk::Context context(contextOptions(cli));
  const auto store = loadParameters(context, source);
  // A padded vocabulary's ids past the tokenizer's stand for no text: never drawn.
  const int64_t valid_vocab = source.tokenizer ? int64_t(source.tokenizer->size()) : 0;
  gpt::Sampler sampler(context, *store, config, options, seed, decoding, valid_vocab);
  if (!json) std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  const size_t prompt_tokens = tokens.size();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::pair<size_t, double>> token_ms;  // (the position drawn after, ms)
  for (int64_t i = 0; i < count; ++i) {
    const auto before = std::chrono::steady_clock::now();
    const uint32_t next = sampler.next(tokens);
    token_ms.emplace_back(tokens.size(), std::chrono::duration<double, std::milli>(
                                             std::chrono::steady_clock::now() - before)
                                             .count());
    tokens.push_back(next);
    if (json) continue;
    const std::string text =
        source.decode(std::span<const uint32_t>(&next, 1), /*continuation=*/true);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  const std::span<const uint32_t> drawn = std::span<const uint32_t>(tokens).subspan(prompt_tokens);
  if (json) {
    std::printf("%s\n", graph::dumpJson({{"ids", std::vector<uint32_t>(drawn.begin(), drawn.end())},
                                         {"text", source.decode(drawn, /*continuation=*/true)}})
                            .c_str());
  } else {
    std::printf("\n");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // On stderr: stdout is the text alone.
  if (count > 0)
    std::fprintf(stderr, "%lld tokens in %.2f s (%.2f ms per token, %s decoding, %s model)\n",
                 static_cast<long long>(count), seconds, 1e3 * seconds / double(count),
                 gpt::decodingName(decoding), modelKind(source).c_str());
  if (cli.has("timing")) printTokenTimes(token_ms, config.context);
  return validationFailed(context, "vkgrad-gpt") ? 1 : 0;
}

int eval(int argc, char** argv) {
  Cli cli("vkgrad-gpt eval",
          "The mean next-token loss of a model (a `vkgrad-gpt train` checkpoint or a Hugging\n"
          "Face folder) over a text file: windows start every --context tokens, each holds up to\n"
          "context + 1 tokens and predicts all but its first, so every token but the file's\n"
          "first is predicted once (a folder's tokenizer may put a token first: Llama's <s>).");
  cli.positional("eval", "the command");
  cli.option("checkpoint",
             "checkpoint, Hugging Face model folder or PEFT adapter folder (required)");
  cli.option("adapter", "a PEFT LoRA adapter folder to run on the --checkpoint folder", "");
  cli.option("data", "text file or directory of them (required; read as train reads it)");
  cli.option("context",
             "window length in tokens (0: the model's context, at most " +
                 std::to_string(kDefaultWindow) + "; longer than the model's is refused)",
             "0");
  cli.flag("json", "print one JSON line: {\"loss\": mean loss in nats, \"tokens\": predicted}");
  cli.option("logits",
             "also write the first window's logits, (rows, vocab) f32, to this .npy file (for "
             "comparing with another implementation)",
             "");
  declareDeviceOptions(cli);
  cli.parse(argc, argv);
  if (cli.get("checkpoint").empty()) cli.fail("no --checkpoint directory given");
  if (cli.get("data").empty()) cli.fail("no --data file given");
  const ModelSource source = readModelSource(cli.get("checkpoint"), cli.get("adapter"));
  const int64_t window = windowFromCli(cli, source.config.context);
  const Corpus corpus = readCorpus(cli.get("data"));
  const std::vector<uint32_t> tokens = source.encode(corpus.text, cli.get("data"));
  if (tokens.size() < 2)
    throw Error(cli.get("data") + ": " + std::to_string(tokens.size()) +
                " tokens, need at least 2 to predict one");
  vk::Context context(contextOptions(cli));
  const auto store = loadParameters(context, source);
  const gpt::StreamLoss result = gpt::streamLoss(context, *store, source.config, tokens, window);
  if (const std::string path = cli.get("logits"); !path.empty()) {
    const size_t rows = std::min(size_t(window), tokens.size() - 1);
    graph::writeNpy(path, {int64_t(rows), source.config.vocab},
                    gpt::windowLogits(context, *store, source.config,
                                      std::span<const uint32_t>(tokens).first(rows)));
  }
  if (cli.has("json")) {
    std::printf("%s\n",
                graph::dumpJson({{"loss", result.loss}, {"tokens", result.tokens}}).c_str());
  } else {
    std::printf("loss %.6f nats over %lld tokens (%s model, windows of %lld)\n", result.loss,
                static_cast<long long>(result.tokens), modelKind(source).c_str(),
                static_cast<long long>(window));
  }
  return validationFailed(context, "vkgrad-gpt") ? 1 : 0;
}

}  // namespace vkgrad::apps

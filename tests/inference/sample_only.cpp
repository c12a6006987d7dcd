// A program that only generates text: it loads a vkgrad-gpt checkpoint and continues a prompt
// greedily with the key/value cache, linking vkgrad::inference alone (no autograd pass, no
// optimizer builder, no trainer: the test checks its symbols). Used by
// tests/apps/test_inference_only.cpp.
//   vkgrad-sample-only CHECKPOINT_DIR PROMPT TOKENS
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "vkgrad/gpt/checkpoint.h"
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/gpt/sampler.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/vk/context.h"

int main(int argc, char** argv) {
  using namespace vkgrad;
  if (argc != 4) {
    std::fprintf(stderr, "usage: vkgrad-sample-only CHECKPOINT_DIR PROMPT TOKENS\n");
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    const gpt::GptCheckpoint cp = gpt::readConfig(dir);
    vk::ContextOptions options;
    options.validation = true;
    vk::Context context(options);
    graph::ParameterStore store(context);
    gpt::declareGpt(store, cp.config);
    store.load(dir / gpt::kModelFile);
    gpt::Sampler sampler(context, store, cp.config, {1.0f, 1}, 1, gpt::Decoding::Cached);
    std::vector<uint32_t> tokens = cp.vocab.encode(argv[2]);
    sampler.extend(tokens, std::atoll(argv[3]));
    std::printf("%s\n", cp.vocab.decode(tokens).c_str());
    for (const std::string& m : context.validationMessages())
      std::fprintf(stderr, "validation: %s\n", m.c_str());
    return context.validationMessages().empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkgrad-sample-only: %s\n", e.what());
    return 1;
  }
}

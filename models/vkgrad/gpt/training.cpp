// The GPT's training-only functions (gpt.h): outside vkgrad_inference, which a program that
// only generates text links.
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/training/memory_estimate.h"

namespace vkgrad::gpt {

graph::MemoryEstimate estimateTraining(vk::Context& context, const GptConfig& config,
                                       int64_t tokens, const graph::TrainerOptions& options,
                                       const std::function<void(graph::ParameterStore&)>& declare,
                                       int64_t window) {
  graph::ParameterStore store(context, graph::StoreMemory::Planning);
  if (declare)
    declare(store);
  else
    declareGpt(store, config);
  const TokenWindows windows = declareTokenWindows(tokens, window ? window : config.context);
  const graph::Dataset* datasets[] = {&windows.ids, &windows.targets};
  return graph::estimateTrainer(context, store, datasets, gptLossFn(store, config), options,
                                /*evaluation=*/true);
}

}  // namespace vkgrad::gpt

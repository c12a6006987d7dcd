#include "models/hf/lora_check.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "vkgrad/gpt/gpt.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::test {

void expectOnlyAdaptersTrain(vk::Context& ctx, Rng& rng, graph::ParameterStore& store,
                             const hf::HfModel& model, const hf::HfLora& lora) {
  using graph::SavedTensor;
  const gpt::GptConfig& c = model.gpt;
  const std::vector<uint32_t> tokens = rng.below(40, uint32_t(c.vocab));
  const gpt::TokenWindows windows = gpt::uploadTokenWindows(ctx, tokens, c.context);
  graph::TrainerOptions options;
  options.batch = 3;
  options.schedule = graph::Schedule::constant(1e-2f);
  graph::Trainer trainer(ctx, store, {&windows.ids, &windows.targets}, gpt::gptLossFn(store, c),
                         options);
  for (int i = 0; i < 2; ++i) trainer.step(std::vector<uint32_t>{uint32_t(i), 7, 20});
  std::map<std::string, const SavedTensor*> given;
  for (const SavedTensor& t : model.parameters) given[t.name] = &t;
  for (const SavedTensor& t : lora.tensors) given[t.name] = &t;
  for (const SavedTensor& t : store.download()) {
    if (t.name.find("lora_scale") != std::string::npos) continue;
    const bool adapter = t.name.find(".lora_") != std::string::npos;
    EXPECT_EQ(t.data == given.at(t.name)->data, !adapter) << t.name;
  }
}

}  // namespace vkgrad::test

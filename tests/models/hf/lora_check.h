// Checks the LoRA tests of every architecture share (test_hf_lora.cpp for GPT-2,
// test_hf_llama_lora.cpp for the Llama family).
#pragma once

#include "common/random.h"
#include "vkgrad/hf/lora.h"
#include "vkgrad/hf/model.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::test {

// Two Trainer steps (batch 3, learning rate 1e-2) on 40 random tokens through the model in
// store (loadHfLora(store, model, lora, train = true)), then a GoogleTest failure for every
// adapter tensor that kept its bytes and every other parameter that did not (the frozen
// lora_scale aside).
void expectOnlyAdaptersTrain(vk::Context& ctx, Rng& rng, graph::ParameterStore& store,
                             const hf::HfModel& model, const hf::HfLora& lora);

}  // namespace vkgrad::test

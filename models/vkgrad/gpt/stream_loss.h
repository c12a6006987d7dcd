// The mean next-token loss of a GPT over a whole token stream (a text file's tokens), as
// `vkgrad-gpt eval` reports it. Windows start every `window` tokens; each holds up to
// window + 1 tokens and predicts all but its first, so every token but the stream's first is
// predicted exactly once, seeing the tokens since the start of its window (at most `window`
// of them). The last window is shorter where the stream ends.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vkgrad/gpt/gpt.h"

namespace vkgrad::gpt {

struct StreamLoss {
  double loss = 0;     // mean cross-entropy (nats) over the predicted tokens
  int64_t tokens = 0;  // how many were predicted: the stream's length - 1
};

// Runs on the device, one window per step, fp32 losses summed in double on the host. Throws
// Error, before any GPU work, for fewer than 2 tokens, a window outside [1, config.context],
// or an id >= config.vocab (named with its position).
StreamLoss streamLoss(vk::Context& context, const graph::ParameterStore& store,
                      const GptConfig& config, std::span<const uint32_t> tokens, int64_t window);

// The logits of one window, ids: (T) with T in [1, config.context] -> (T, vocab) row-major,
// read back (for comparing with another implementation). Throws Error as streamLoss does.
std::vector<float> windowLogits(vk::Context& context, const graph::ParameterStore& store,
                                const GptConfig& config, std::span<const uint32_t> ids);

}  // namespace vkgrad::gpt

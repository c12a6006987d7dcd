// Sampling a token from logits on the device: temperature and top-k turn each row of logits
// into unnormalised weights, and ops::categorical (ops/random.h) draws from them. Together
// they replace a download of the logits with a download of one id per row.
#pragma once

#include <cstdint>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

struct SampleOptions {
  float temperature = 1.0f;  // > 0; below 1 sharpens the distribution, above 1 flattens it
  int64_t top_k = 0;         // > 0: only the k largest logits of a row can be drawn; 0: all
};

// logits, weights: (..., V), disjoint, each f32, f16 or bf16 (ops/storage.h; the arithmetic
// is f32, and 16-bit weights round once, when stored). weights = exp((logits - row max) /
// temperature) where a logit is among the row's top_k largest (every logit equal to the k-th
// largest stays), else 0. Logits must be finite. Throws ShapeError on bad shapes, Error on a
// temperature <= 0 or a negative top_k, before recording anything.
void topKWeights(vk::Recorder& rec, const TensorView& logits, const TensorView& weights,
                 const SampleOptions& options);

}  // namespace vkgrad::ops

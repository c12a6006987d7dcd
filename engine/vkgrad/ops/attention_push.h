// The attention launchers' shared types (ops/attention.cpp and ops/attention_fragment.cpp):
// the push constants every attention kernel reads, the problem's sizes, and the backward's
// tensors. Internal to ops/.
#pragma once

#include <cstdint>

#include "vkgrad/ops/attention.h"

namespace vkgrad::ops::detail {

// Mirrors shaders/attention/common.glsl.
enum Slot : uint32_t { kQ, kK, kV, kO, kDO, kDQ, kDK, kDV };
struct AttentionPush {
  uint32_t b, h, tq, tk;
  float scale;
  uint32_t causal, accumulate;
  uint32_t lse_skip, rowdot_skip;
  uint32_t skip[8], stride[8];
  uint32_t group;  // query heads per key/value head, H / Hkv
};
static_assert(sizeof(AttentionPush) == 104);

// hkv: key/value heads (grouped-query attention; h when every query head has its own).
struct Dims {
  int64_t b, h, tq, tk, d, hkv;
};

// attentionBackward's tensors, as the texel and fragment kernels read and write them.
struct BackwardTensors {
  const AttentionTensor &q, &k, &v, &o, &dout, &dq, &dk, &dv;
  const TensorView &lse, &rowdot;
};

}  // namespace vkgrad::ops::detail

// The optimizer nodes' slots and attributes, shared by their definitions
// (runtime/ops/optimizer.cpp) and their builder (training/optimizer.cpp). Internal: only those two
// include it. It names only ops/optimizer.h's options, so the runtime includes nothing of training.
#pragma once

#include <vector>

#include "vkgrad/ops/optimizer.h"

namespace vkgrad::graph::nodes {

struct AdvanceStep {
  enum In { state, kInputs };  // state: ops::OptimizerState, 8 words
  enum Out { kOutputs };
};

// Variadic: the gradients first, then these.
struct ClipGradNorm {
  enum In { scratch, norm, state, kInputs };  // the clip factor goes into the state
  enum Out { table, kOutputs };               // u32: the segment table (ops/optimizer.h)
  struct Attrs {
    float max_norm = 0.0f;
  };
};

// Variadic: the gradients first, then these. The norm of the scaled gradients, then
// ops::updateLossScale.
struct LossScaleUpdate {
  enum In { scratch, norm, scale, counters, state, kInputs };
  enum Out { table, kOutputs };  // u32: the segment table
  struct Attrs {
    float max_norm = 0.0f;  // 0: no clipping
    ops::LossScaleOptions options;
  };
};

struct SgdUpdate {
  enum In { param, grad, velocity, state, kInputs };
  enum Out { kOutputs };
  using Attrs = ops::SgdOptions;
};

// Variadic: param, grad, m, v of every parameter in turn, then the state. One node updates
// them all (ops::adamwMany: one dispatch where the executor's flat buffers hold them).
struct AdamWUpdate {
  enum Each { param, grad, m, v, kEach };
  enum In { state, kInputs };
  enum Out { table, kOutputs };  // u32: the segment table
  struct Attrs {
    ops::AdamWOptions options;        // its weight_decay unused: each tensor has its own
    std::vector<float> weight_decay;  // per parameter
  };
};

}  // namespace vkgrad::graph::nodes

// Learning-rate schedules, computed on the host each step and written into the optimizer's
// small device state buffer (Executor::setLearningRate), so the recording never changes.
#pragma once

#include <cstdint>

namespace vkgrad::graph {

// lr(step) for step = 0, 1, ... (the update about to run):
//   step < warmup_steps:   peak * (step + 1) / warmup_steps   (linear warm-up)
//   then, if decay_steps:  cosine from peak down to min_lr over decay_steps steps, min_lr after
//   otherwise:             peak
struct Schedule {
  float peak = 1e-3f;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 0;  // 0: no decay
  float min_lr = 0.0f;

  static Schedule constant(float lr) { return {lr}; }
  static Schedule linearWarmup(float lr, int64_t warmup) { return {lr, warmup}; }
  // Warm-up (0 for none), then cosine decay to min_lr by step warmup + decay.
  static Schedule cosine(float lr, int64_t warmup, int64_t decay, float min_lr = 0.0f) {
    return {lr, warmup, decay, min_lr};
  }

  // Throws Error for negative step counts or rates, or min_lr > peak.
  void validate() const;
  float at(int64_t step) const;
};

}  // namespace vkgrad::graph

#include "vkgrad/training/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "vkgrad/core/error.h"

namespace vkgrad::graph {

void Schedule::validate() const {
  if (!(peak >= 0) || !(min_lr >= 0) || min_lr > peak || warmup_steps < 0 || decay_steps < 0)
    throw Error("schedule: needs 0 <= min_lr <= peak and step counts >= 0, got peak " +
                std::to_string(peak) + ", min_lr " + std::to_string(min_lr) + ", warmup " +
                std::to_string(warmup_steps) + ", decay " + std::to_string(decay_steps));
}

float Schedule::at(int64_t step) const {
  if (step < warmup_steps) return float(double(peak) * double(step + 1) / double(warmup_steps));
  if (decay_steps == 0) return peak;
  // Double precision: step counts in the millions lose nothing before the cast.
  const double t = std::min(1.0, double(step - warmup_steps) / double(decay_steps));
  return float(min_lr + 0.5 * (double(peak) - min_lr) * (1.0 + std::cos(std::numbers::pi * t)));
}

}  // namespace vkgrad::graph

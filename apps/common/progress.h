// Progress output for the apps' training loops: a bar redrawn in place when stderr is a
// terminal, a plain line about every tenth of an epoch when it is not (logs, CI).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace vkgrad::apps {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t);
// "m:ss" (minutes may exceed 59).
std::string duration(double seconds);

class Progress {
 public:
  Progress(int64_t epoch, int64_t epochs, int64_t steps);
  // After step `step` of the epoch (1-based), `images` seen in `seconds`; `stats` is the
  // model's part of the line ("loss 0.4210").
  void update(int64_t step, int64_t images, const std::string& stats, double seconds);

 private:
  int64_t epoch_, epochs_, steps_;
  bool tty_;
};

}  // namespace vkgrad::apps

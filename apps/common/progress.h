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
  // items: what the rate counts ("images").
  Progress(int64_t epoch, int64_t epochs, int64_t steps, std::string items = "images");
  // After step `step` of the epoch (1-based), `items` seen in `seconds`; `stats` is the
  // model's part of the line ("loss 0.4210").
  void update(int64_t step, int64_t items, const std::string& stats, double seconds);

 private:
  int64_t epoch_, epochs_, steps_;
  std::string items_;
  bool tty_;
};

}  // namespace vkgrad::apps

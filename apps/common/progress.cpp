#include "common/progress.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "common/platform.h"

namespace vkgrad::apps {

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string duration(double seconds) {
  char text[32];
  const int s = int(std::lround(seconds));
  std::snprintf(text, sizeof text, "%d:%02d", s / 60, s % 60);
  return text;
}

Progress::Progress(int64_t epoch, int64_t epochs, int64_t steps, std::string items)
    : epoch_(epoch),
      epochs_(epochs),
      steps_(steps),
      items_(std::move(items)),
      tty_(isTerminal(stderr)) {}

void Progress::update(int64_t step, int64_t items, const std::string& stats, double seconds) {
  const bool line_due = step * 10 / steps_ != (step - 1) * 10 / steps_;
  if (!tty_ && !line_due && step != steps_) return;
  const double rate = seconds > 0 ? double(items) / seconds : 0.0;
  const double eta = step > 0 ? seconds * double(steps_ - step) / double(step) : 0.0;
  char line[256];
  std::snprintf(line, sizeof line, "%5lld/%lld  %s  %7.0f %s/s  ETA %s",
                static_cast<long long>(step), static_cast<long long>(steps_), stats.c_str(), rate,
                items_.c_str(), duration(eta).c_str());
  if (tty_) {
    const int width = 30, filled = int(width * step / steps_);
    std::fprintf(stderr, "\repoch %lld/%lld [%s%s] %s", static_cast<long long>(epoch_),
                 static_cast<long long>(epochs_), std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(width - filled), '.').c_str(), line);
    if (step == steps_) std::fputc('\n', stderr);
  } else {
    std::fprintf(stderr, "epoch %lld/%lld %s\n", static_cast<long long>(epoch_),
                 static_cast<long long>(epochs_), line);
  }
  std::fflush(stderr);
}

}  // namespace vkgrad::apps

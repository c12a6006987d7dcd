#include "bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <stdexcept>

#include "vkgrad/ops/copy.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

// A recording holds at most 1024 timestamps (Recorder); two per timed run.
constexpr int kTimedPerSubmit = 500;

double processCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

Timing timeRuns(vk::Context& context, int warmup, int iters,
                const std::function<void(vk::Recorder&)>& record) {
  vk::Recorder rec(context);
  Timing timing;
  double cpu_s = 0;
  // The warm-up gets a submission of its own: llvmpipe compiles a pipeline's machine code on
  // its first dispatch, which must not count as CPU time of the timed runs.
  if (warmup > 0) {
    for (int i = 0; i < warmup; ++i) record(rec);
    rec.submit();
    rec.reset();
  }
  while (int(timing.ms.size()) < iters) {
    const int count = std::min(kTimedPerSubmit, iters - int(timing.ms.size()));
    std::vector<std::pair<uint32_t, uint32_t>> marks;
    for (int i = 0; i < count; ++i) {
      const uint32_t from = rec.timestamp();
      record(rec);
      marks.push_back({from, rec.timestamp()});
    }
    const double cpu_before = processCpuSeconds();
    rec.submit();
    cpu_s += processCpuSeconds() - cpu_before;
    for (auto [from, to] : marks) timing.ms.push_back(rec.milliseconds(from, to));
    rec.reset();
  }
  timing.cpu_ms = cpu_s * 1e3 / iters;
  return timing;
}

Timing timeDispatches(vk::Context& context, const BenchOptions& options, const std::string& what,
                      const std::function<void(vk::Recorder&)>& record) {
  std::fprintf(stderr, "vkgrad-bench: %s: %d warm-up + %d timed dispatches\n", what.c_str(),
               options.warmup, options.iters);
  return timeRuns(context, options.warmup, options.iters, record);
}

Stats stats(std::vector<double> ms) {
  if (ms.empty()) return {};
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  return {median, ms.front(), ms.back()};
}

void printJsonLine(const graph::Json& line) {
  std::printf("%s\n", graph::dumpJson(line).c_str());
}

std::string parseChoice(const Cli& cli, const std::string& name,
                        std::initializer_list<const char*> choices) {
  const std::string text = cli.get(name);
  std::string names;
  size_t i = 0;
  for (const char* choice : choices) {
    if (text == choice) return text;
    if (i++ > 0) names += i == choices.size() ? " or " : ", ";
    names += choice;
  }
  cli.fail("--" + name + " must be " + names + ", got '" + text + "'");
}

int failIfWrong(const std::string& what, double error, double tolerance, const char* measure) {
  if (error <= tolerance) return 0;
  std::fprintf(stderr, "vkgrad-bench: %s is WRONG: %s %g > %g\n", what.c_str(), measure, error,
               tolerance);
  return 1;
}

std::vector<float> benchData(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(lo, hi);
  std::vector<float> data(n);
  for (float& x : data) x = uniform(rng);
  return data;
}

double copyGbps(vk::Context& context, const BenchOptions& options, int64_t words) {
  static std::map<int64_t, double> measured;
  if (auto it = measured.find(words); it != measured.end()) return it->second;
  const vk::Buffer src = context.allocator().allocate(uint64_t(words) * 4),
                   dst = context.allocator().allocate(uint64_t(words) * 4);
  const auto data = benchData(size_t(words), -1.0f, 1.0f, 7);
  context.staging().upload(src, 0, data.data(), data.size() * 4);
  std::fprintf(stderr, "vkgrad-bench: copy baseline: %lld floats, %d warm-up + %d timed\n",
               (long long)words, options.warmup, options.iters);
  const Timing timing = timeRuns(context, options.warmup, options.iters, [&](vk::Recorder& rec) {
    ops::copy(rec, ops::view(src, {words}), ops::view(dst, {words}));
  });
  std::vector<float> got(data.size());
  context.staging().download(dst, 0, got.data(), got.size() * 4);
  if (got != data) throw std::runtime_error("the copy baseline kernel copied wrong values");
  return measured[words] = 8.0 * double(words) / (stats(timing.ms).median * 1e6);
}

int reportBandwidth(const vk::Context& context, const BenchOptions& options,
                    const BandwidthResult& r, double copy_gbps) {
  const Stats t = stats(r.timing.ms);
  const double gbps = r.bytes / (t.median * 1e6);
  const bool ok = r.error <= r.tolerance;
  if (options.json) {
    graph::Json line = {{"op", r.op}};
    for (const auto& [name, value] : r.dims) line[name] = value;
    line.update({{"variant", r.variant},
                 {"requested", r.requested},
                 {"ms", t.median},
                 {"min_ms", t.min},
                 {"max_ms", t.max},
                 {"bytes", int64_t(r.bytes)},
                 {"gbps", gbps},
                 {"copy_gbps", copy_gbps},
                 {"ratio", gbps / copy_gbps},
                 {"iters", options.iters},
                 {"warmup", options.warmup},
                 {"cpu_ms", r.timing.cpu_ms},
                 {"checked", true},
                 {"error", r.error},
                 {"device", context.info().name},
                 {"driver", driverDescription(context)}});
    printJsonLine(line);
  } else {
    std::string dims;
    for (const auto& [name, value] : r.dims)
      dims += (dims.empty() ? "" : "x") + std::to_string(value);
    std::printf(
        "%-11s %-14s %-18s %9.3f ms  %7.2f GB/s  %5.0f%% of copy (%.2f GB/s)  "
        "(min %.3f, max %.3f)  error %.2g%s\n",
        r.op.c_str(), dims.c_str(), (r.variant + (r.requested == "auto" ? " (auto)" : "")).c_str(),
        t.median, gbps, 100.0 * gbps / copy_gbps, copy_gbps, t.min, t.max, r.error,
        ok ? "" : "  WRONG");
  }
  std::fflush(stdout);
  return failIfWrong(r.op + " " + r.variant, r.error, r.tolerance);
}

std::string deviceDescription(const vk::Context& context) {
  const vk::DeviceInfo& info = context.info();
  return info.name + " [" + vk::deviceTypeName(info.type) + "], " + driverDescription(context);
}

std::string driverDescription(const vk::Context& context) {
  return context.info().driver_name + " (" + context.info().driver_info + ")";
}

}  // namespace vkgrad::apps

// Shared pieces of vkgrad-bench: the options every op benchmark takes, GPU timing with
// Recorder timestamps, and result lines as text or JSON. One file per op (bench_<op>.cpp)
// implements a BenchOp; main.cpp lists them as subcommands.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/cli.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/ops/reference/normalised_error.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::apps {

struct BenchOptions {
  int iters = 10;      // timed dispatches; the median is reported
  int warmup = 2;      // untimed dispatches recorded before them
  bool json = false;   // one JSON object per result line on stdout
  bool check = false;  // verify against the CPU reference even when it is slow
};

struct BenchOp {
  const char* name;
  const char* summary;
  void (*declare)(Cli& cli);  // adds the op's own options
  // Runs the benchmark; returns the exit code (1 when a result is wrong).
  int (*run)(const Cli& cli, vk::Context& context, const BenchOptions& options);
};

const BenchOp& matmulBench();
const BenchOp& copyBench();
const BenchOp& elementwiseBench();
const BenchOp& softmaxBench();
const BenchOp& layerNormBench();
const BenchOp& attentionBench();
const BenchOp& spmmBench();
const BenchOp& adamwBench();
const BenchOp& foldsBench();
const BenchOp& batchNormBench();
const BenchOp& conv2dBench();
const BenchOp& generalBench();
const BenchOp& cachedAttentionBench();

struct Timing {
  std::vector<double> ms;  // GPU milliseconds of each timed run
  // CPU time this process spent per timed run while their submissions executed. On a CPU
  // device (lavapipe) that is the device's own work: on a loaded machine it grows much less
  // than wall time (though not zero: shared caches and, in a VM, the host still slow it).
  double cpu_ms = 0;
};

// Submits `warmup` untimed calls of record(rec), then `iters` timed ones, each between two
// timestamps, in one more submission (several when there are more timed runs than one
// recording's timestamps). Dispatch time only: uploads happen before, readbacks after.
Timing timeRuns(vk::Context& context, int warmup, int iters,
                const std::function<void(vk::Recorder&)>& record);
// timeRuns with the options' warm-up and iterations, announced on stderr as
// "vkgrad-bench: WHAT: W warm-up + I timed dispatches".
Timing timeDispatches(vk::Context& context, const BenchOptions& options, const std::string& what,
                      const std::function<void(vk::Recorder&)>& record);

struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats stats(std::vector<double> ms);

// Prints one result as a line of JSON (graph::dumpJson: non-finite numbers as null).
void printJsonLine(const graph::Json& line);

// The value of option `name`, one of `choices`; else fails as "--NAME must be a, b or c, got
// 'x'".
std::string parseChoice(const Cli& cli, const std::string& name,
                        std::initializer_list<const char*> choices);

// Unless error <= tolerance (NaN is not), prints "vkgrad-bench: WHAT is WRONG: MEASURE E > T"
// to stderr and returns 1; else returns 0.
int failIfWrong(const std::string& what, double error, double tolerance,
                const char* measure = "normalised error");

// Every op benchmark reports its error against the CPU reference by this one measure.
using ops::ref::normalisedError;

// Uniform random floats in [lo, hi), the same on every run.
std::vector<float> benchData(size_t n, float lo, float hi, uint32_t seed);

// A bandwidth-bound kernel's result: its bytes moved (each input read once, each output
// written once) over the median time, and the ratio to the device's copy bandwidth measured
// with ops::copy over a buffer of `copy_words` floats (read once, written once).
struct BandwidthResult {
  std::string op, variant, requested;
  std::vector<std::pair<std::string, int64_t>> dims;  // e.g. {"rows", R}, {"cols", C}
  double bytes = 0;
  Timing timing;
  double error = 0, tolerance = 0;  // against the CPU reference
};
// Copy bandwidth in GB/s (1e9 bytes/s) of the copy kernel over `words` floats, measured once
// per size and process.
double copyGbps(vk::Context& context, const BenchOptions& options, int64_t words);
// Prints one result (a text line, or a JSON object with op, the dims, variant, ms, gbps,
// copy_gbps, ratio, ...); returns 1 when the error is above tolerance, else 0.
int reportBandwidth(const vk::Context& context, const BenchOptions& options,
                    const BandwidthResult& result, double copy_gbps);

// "llvmpipe (LLVM 15.0.6, 256 bits) [cpu], llvmpipe (Mesa 22.3.6 (LLVM 15.0.6))"
std::string deviceDescription(const vk::Context& context);
// "llvmpipe (Mesa 22.3.6 (LLVM 15.0.6))": the JSON results' driver field.
std::string driverDescription(const vk::Context& context);

}  // namespace vkgrad::apps

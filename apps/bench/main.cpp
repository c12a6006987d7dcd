// vkgrad-bench: times one op's kernels on a device with GPU timestamps. Each op is a
// subcommand implemented in bench_<op>.cpp (see bench.h); results go to stdout as text or
// JSON lines, progress and errors to stderr.
#include <cstdio>
#include <exception>
#include <string>

#include "bench.h"
#include "vk/context.h"
#include "vk/error.h"

namespace vkgrad::apps {
namespace {

const BenchOp* const kOps[] = {&matmulBench()};

int run(int argc, char** argv) {
  std::string summary =
      "Times an op's kernel variants with GPU timestamps: warm-up dispatches, then the\n"
      "median of the timed ones (dispatch time only, no uploads). Ops:\n";
  for (const BenchOp* op : kOps)
    summary += "  " + std::string(op->name) + ": " + op->summary + "\n";
  summary += "Example: vkgrad-bench matmul --m 1024 --n 1024 --k 1024 --variant all";
  Cli cli("vkgrad-bench", summary);
  cli.positional("OP", "the op to time");
  cli.option("iters", "timed dispatches", "10");
  cli.option("warmup", "untimed dispatches recorded first", "2");
  cli.option("device", "device index or name substring (beats VKGRAD_DEVICE)");
  cli.flag("json", "one JSON object per result line");
  cli.flag("check", "verify against the CPU reference even for large sizes (slow)");
  for (const BenchOp* op : kOps) op->declare(cli);
  cli.parse(argc, argv);

  if (cli.positionals().empty()) cli.fail("no OP given");
  const std::string name = cli.positionals()[0];
  const BenchOp* op = nullptr;
  for (const BenchOp* candidate : kOps)
    if (name == candidate->name) op = candidate;
  if (!op) cli.fail("unknown OP '" + name + "'");

  BenchOptions options;
  options.iters = int(cli.getInt("iters", 1, 100000));
  options.warmup = int(cli.getInt("warmup", 0, 100000));
  options.json = cli.has("json");
  options.check = cli.has("check");
  vk::ContextOptions context_options;
  context_options.device = cli.get("device");
  vk::Context context(context_options);
  return op->run(cli, context, options);
}

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  try {
    return vkgrad::apps::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkgrad-bench: %s\n", e.what());
    return 1;
  }
}

// vkgrad-bench: times one op's kernels on a device with GPU timestamps. Each op is a
// subcommand implemented in bench_<op>.cpp (see bench.h); results go to stdout as text or
// JSON lines, progress and errors to stderr.
#include <cstdio>
#include <exception>
#include <string>

#include "bench.h"
#include "common/app_main.h"
#include "common/device_options.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {
namespace {

const BenchOp* const kOps[] = {
    &matmulBench(),    &copyBench(),    &elementwiseBench(),    &softmaxBench(), &layerNormBench(),
    &attentionBench(), &spmmBench(),    &adamwBench(),          &foldsBench(),   &batchNormBench(),
    &conv2dBench(),    &generalBench(), &cachedAttentionBench()};

int run(int argc, char** argv) {
  std::string summary =
      "Times an op's kernel variants with GPU timestamps: warm-up dispatches, then the\n"
      "median of the timed ones (dispatch time only, no uploads). Ops:\n";
  for (const BenchOp* op : kOps)
    summary += "  " + std::string(op->name) + ": " + op->summary + "\n";
  summary +=
      "Bandwidth-bound ops report GB/s and the ratio to the copy kernel's bandwidth.\n"
      "Examples: vkgrad-bench matmul --m 1024 --n 1024 --k 1024 --variant all\n"
      "          vkgrad-bench softmax --rows 4096 --cols 4096 --variant all --json";
  summary += "\nOP comes first; `vkgrad-bench OP --help` lists the op's own options.";
  // The op's options are declared only when it is named (ops share names such as --n).
  const BenchOp* op = nullptr;
  const std::string name = argc > 1 ? argv[1] : "";
  for (const BenchOp* candidate : kOps)
    if (name == candidate->name) op = candidate;

  Cli cli("vkgrad-bench", summary);
  cli.positional("OP", "the op to time");
  cli.option("iters", "timed dispatches", "10");
  cli.option("warmup", "untimed dispatches recorded first", "2");
  declareDeviceOptions(cli);
  cli.flag("json", "one JSON object per result line");
  cli.flag("check", "matmul: verify against the CPU reference even for large sizes (slow)");
  if (op) op->declare(cli);
  cli.parse(argc, argv);

  if (cli.positionals().empty()) cli.fail("no OP given");
  if (!op || cli.positionals()[0] != name)
    cli.fail("unknown OP '" + cli.positionals()[0] + "' (OP must be the first argument)");

  BenchOptions options;
  options.iters = int(cli.getInt("iters", 1, 100000));
  options.warmup = int(cli.getInt("warmup", 0, 100000));
  options.json = cli.has("json");
  options.check = cli.has("check");
  vk::Context context(contextOptions(cli));
  const int result = op->run(cli, context, options);
  return validationFailed(context, "vkgrad-bench") ? 1 : result;
}

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  return vkgrad::apps::guardedMain("vkgrad-bench", vkgrad::apps::run, argc, argv);
}

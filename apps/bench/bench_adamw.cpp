// vkgrad-bench adamw: the optimizer update over a model's parameters, packed one after another
// into one buffer per role (parameters, gradients, first and second moments) as a compiled
// graph places them: one dispatch per tensor (`each`) against ops::adamwMany (`many`, one
// dispatch for them all). Bandwidth: each element reads 4 floats and writes 3.
#include <cstdio>
#include <string>
#include <vector>

#include "bench.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/optimizer.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

// The 4-layer GPT's parameters (width 128, context 64, vocabulary 86): 53 tensors.
std::vector<int64_t> gptSizes() {
  std::vector<int64_t> sizes = {86 * 128, 64 * 128};  // token and position embeddings
  for (int layer = 0; layer < 4; ++layer)
    for (int64_t n :
         {128, 128, 128 * 384, 384, 128 * 128, 128, 128, 128, 128 * 512, 512, 512 * 128, 128})
      sizes.push_back(n);
  for (int64_t n : {128, 128, 128 * 86}) sizes.push_back(n);  // final norm, head
  return sizes;
}

void declare(Cli& cli) {
  cli.option("tensors", "tensors of the GPT's sizes repeated this many times (1: its 53)", "1");
  cli.option("variant", "each, many or all", "all");
}

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const int64_t repeat = cli.getInt("tensors", 1, 1000);
  const std::string variant = parseChoice(cli, "variant", {"each", "many", "all"});
  std::vector<int64_t> sizes;
  for (int64_t r = 0; r < repeat; ++r)
    for (int64_t n : gptSizes()) sizes.push_back(n);
  const uint64_t align = ops::bindingAlignment(context) / 4;
  std::vector<int64_t> at;
  int64_t total = 0;
  for (int64_t n : sizes) {
    at.push_back(total);
    total += (n + int64_t(align) - 1) / int64_t(align) * int64_t(align);
  }
  std::fprintf(stderr, "vkgrad-bench: adamw over %zu tensors, %lld floats, on %s\n", sizes.size(),
               (long long)total, context.info().name.c_str());

  const std::vector<float> p0 = benchData(size_t(total), -1.0f, 1.0f, 1),
                           g0 = benchData(size_t(total), -1.0f, 1.0f, 2);
  const std::vector<float> zeros(size_t(total), 0.0f);
  const double copy_gbps = copyGbps(context, options, total);
  std::vector<std::vector<float>> results;
  int exit_code = 0;
  for (const char* name : {"each", "many"}) {
    if (variant != "all" && variant != name) continue;
    std::vector<vk::Buffer> roles;
    for (const auto* data : {&p0, &g0, &zeros, &zeros}) {
      roles.push_back(context.allocator().allocate(uint64_t(total) * 4));
      context.staging().upload(roles.back(), 0, data->data(), data->size() * 4);
    }
    vk::Buffer state = context.allocator().allocate(sizeof(ops::OptimizerState));
    const ops::OptimizerState s = ops::OptimizerState::make(1e-3f);
    context.staging().upload(state, 0, &s, sizeof(s));
    const vk::Buffer table =
        context.allocator().allocate(uint64_t(ops::segmentTableWords(sizes.size())) * 4);
    std::vector<ops::AdamWTensor> tensors;
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto v = [&](size_t r) { return ops::view(roles[r], {sizes[i]}, uint64_t(at[i]) * 4); };
      tensors.push_back({v(0), v(1), v(2), v(3), i % 2 ? 0.0f : 0.01f});
    }
    const ops::TensorView sv = ops::view(state, {8}, 0, ops::DType::U32);
    const ops::TensorView tv =
        ops::view(table, {ops::segmentTableWords(sizes.size())}, 0, ops::DType::U32);
    std::fprintf(stderr, "vkgrad-bench: %s: %d warm-up + %d timed steps\n", name, options.warmup,
                 options.iters);
    const Timing timing = timeRuns(context, options.warmup, options.iters, [&](vk::Recorder& rec) {
      ops::advanceStep(rec, sv);
      if (std::string(name) == "each")
        for (const ops::AdamWTensor& t : tensors)
          ops::adamw(rec, t.param, t.grad, t.m, t.v, sv, {1e-8f, t.weight_decay});
      else
        ops::adamwMany(rec, tensors, sv, tv);
    });
    results.emplace_back(size_t(total));
    context.staging().download(roles[0], 0, results.back().data(), results.back().size() * 4);
    BandwidthResult result{
        "adamw", name, variant, {{"tensors", int64_t(sizes.size())}}, 7.0 * 4.0 * double(total),
        timing};
    // Both variants run the same steps from the same start: the same bits (tolerance 0);
    // the first one is compared with itself.
    result.error = normalisedError(results.back(), results.front());
    result.tolerance = 0;
    exit_code |= reportBandwidth(context, options, result, copy_gbps);
  }
  return exit_code;
}

}  // namespace

const BenchOp& adamwBench() {
  static const BenchOp op{"adamw",
                          "AdamW over the GPT's 53 parameter tensors packed in one buffer per "
                          "role: one dispatch per tensor (each) or one for all (many)",
                          declare, run};
  return op;
}

}  // namespace vkgrad::apps

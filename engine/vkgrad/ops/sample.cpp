#include "vkgrad/ops/sample.h"

#include <cmath>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

struct TopKPush {
  uint32_t rows, cols, k;
  uint32_t l_skip, w_skip;
  float inv_temperature;
};
static_assert(sizeof(TopKPush) == 24);

}  // namespace

void topKWeights(vk::Recorder& rec, const TensorView& logits, const TensorView& weights,
                 const SampleOptions& options) {
  const std::string shapes = logits.shape.str() + " -> " + weights.shape.str();
  if (logits.shape.rank() < 1 || logits.shape.numel() == 0)
    throw ShapeError("topKWeights: logits " + logits.shape.str() + " must be non-empty (...,V)");
  if (!(weights.shape == logits.shape))
    throw ShapeError("topKWeights: " + shapes + ": weights must have the shape of logits");
  if (logits.shape.numel() > int64_t(INT32_MAX))
    throw ShapeError("topKWeights: logits " + logits.shape.str() + " exceed 2^31 elements");
  if (!(options.temperature > 0.0f) || !std::isfinite(options.temperature))
    throw Error("topKWeights: temperature " + std::to_string(options.temperature) +
                " must be positive and finite");
  if (options.top_k < 0)
    throw Error("topKWeights: top_k " + std::to_string(options.top_k) + " must be >= 0");
  checkFloatOperand("topKWeights", "logits", logits);
  checkFloatOperand("topKWeights", "weights", weights);
  checkAlias("topKWeights", "weights", weights, "logits", logits, /*allow_same=*/false);

  vk::Context& ctx = rec.context();
  const int64_t cols = logits.shape.back();
  const int64_t k = options.top_k == 0 ? cols : std::min(options.top_k, cols);
  const Bound bl = bindStorage(ctx, logits);
  const Bound bw = bindStorage(ctx, weights);
  const TopKPush push{uint32_t(logits.shape.rows()), uint32_t(cols), uint32_t(k), bl.skip, bw.skip,
                      1.0f / options.temperature};
  const vk::Kernel& kernel =
      floatKernel(ctx, "sample/top_k", {{"local_size_x", workgroupSize(ctx)}},
                  {{"logits_dtype", logits.dtype}, {"w_dtype", weights.dtype}});
  const vk::Arg args[] = {bl.arg, bw.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     std::min(push.rows, kMaxStrideGroups));  // a row each; more loop
}

}  // namespace vkgrad::ops

// sample: one id per row drawn from softmax(logits / temperature) over the row's top_k
// largest logits. Two nodes: the weights (ops/sample.h, a radix select per row), then a
// categorical draw from the graph's generator (ops/random.h). Not differentiable.
#include <cmath>
#include <string>

#include "vkgrad/ops/random.h"
#include "vkgrad/ops/sample.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct TopKWeights {
  enum In { logits, kInputs };
  enum Out { weights, kOutputs };
  using Attrs = ops::SampleOptions;
};

struct Categorical {
  enum In { weights, rng, kInputs };
  enum Out { ids, kOutputs };  // u32, one per row
  struct Attrs {
    uint32_t stream = 0;  // the generator's stream, one per call site
  };
};

void launchTopK(const Launch& l) {
  ops::topKWeights(l.rec, l.in(TopKWeights::logits), l.out(TopKWeights::weights),
                   l.attr<TopKWeights::Attrs>());
}

void launchCategorical(const Launch& l) {
  ops::categorical(l.rec, l.in(Categorical::weights), l.out(Categorical::ids),
                   l.in(Categorical::rng), l.attr<Categorical::Attrs>().stream);
}

}  // namespace

Tensor Graph::sample(Tensor logits, const ops::SampleOptions& options) {
  check(logits, "sample");
  const Shape s = shape(logits);  // a copy: output() may move tensors_
  if (tensor(logits).dtype != DType::F32 || s.numel() == 0)
    throw ShapeError(describe("sample", {logits}) + ": logits must be non-empty f32 (...,V)");
  if (!(options.temperature > 0.0f) || !std::isfinite(options.temperature))
    throw Error("sample: temperature " + std::to_string(options.temperature) +
                " must be positive and finite");
  if (options.top_k < 0)
    throw Error("sample: top_k " + std::to_string(options.top_k) + " must be >= 0");
  const int weights = output(s, DType::F32, false);
  addNode({OpKind::TopKWeights, {logits.id}, {weights}, {}, options});
  int64_t dims[Shape::kMaxRank];
  for (int i = 0; i + 1 < s.rank(); ++i) dims[i] = s[i];
  const int ids =
      output(s.rank() > 1 ? Shape::of(dims, s.rank() - 1) : Shape{1}, DType::U32, false);
  addNode({OpKind::Categorical, {weights, generator()}, {ids}, {}, Categorical::Attrs{streams_++}});
  return {ids};
}

namespace defs {
const OpDef kTopKWeights{.name = "topKWeights",
                         .inputs = TopKWeights::kInputs,
                         .outputs = TopKWeights::kOutputs,
                         .f32_outputs = 1u << TopKWeights::weights,
                         .launch = launchTopK};
const OpDef kCategorical{.name = "categorical",
                         .inputs = Categorical::kInputs,
                         .outputs = Categorical::kOutputs,
                         .launch = launchCategorical};
}  // namespace defs

}  // namespace vkgrad::graph

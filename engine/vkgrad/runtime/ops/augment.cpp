// augment: a random shift and mirror of each training image (ops/augment.h), drawn from the
// graph's on-device generator like dropout, so every step augments anew. Not differentiable:
// images are data, so there is no backward rule (autograd says "backward: no rule for
// augment" if a gradient ever has to pass through one).
#include "vkgrad/runtime/ops/augment.h"

#include <string>

#include "vkgrad/ops/augment.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Augment {
  enum In { images, rng, kInputs };  // rng: the generator's state (Graph::rngState)
  enum Out { out, kOutputs };
  struct Attrs {
    int64_t pad = 0;      // shifts in [-pad, pad]
    bool flip = false;    // mirror with probability 1/2
    float fill = 0.0f;    // the value shifted in from outside
    uint32_t stream = 0;  // the generator's stream, one per call site
  };
};

void launch(const Launch& l) {
  const auto& at = l.attr<Augment::Attrs>();
  ops::augment(l.rec, l.in(Augment::images), l.out(Augment::out), at.pad, at.flip,
               l.in(Augment::rng), at.stream, at.fill);
}

}  // namespace

Tensor augment(Graph& g, Tensor images, int64_t pad, bool flip, float fill) {
  g.check(images, "augment");
  if (g.tensor(images).dtype != DType::F32)
    throw ShapeError(g.describe("augment", {images}) + ": images must be f32");
  const Shape out = ops::augmentShape(g.shape(images), pad);
  if ((pad == 0 && !flip) || !g.training()) return images;
  // Differentiable only if the images are: then autograd stops at the missing rule.
  const int y = g.output(out, DType::F32, g.tensor(images).differentiable);
  const Graph::RandomStream draw = g.randomStream();
  g.addNode({OpKind::Augment,
             {images.id, draw.rng},
             {y},
             {},
             Augment::Attrs{pad, flip, fill, draw.stream}});
  return {y};
}

namespace defs {
const OpDef kAugment{
    .name = "augment", .inputs = Augment::kInputs, .outputs = Augment::kOutputs, .launch = launch};
}  // namespace defs

}  // namespace vkgrad::graph

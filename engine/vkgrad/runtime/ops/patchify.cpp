// patchify: images (B,H,W) -> patches (B, (H/patch)*(W/patch), patch*patch), one dispatch
// (ops/patchify.h); its backward puts each pixel's gradient back in place, the inverse
// permutation. Images are usually data, but the rule lets a graph differentiate through it.
#include "vkgrad/runtime/ops/patchify.h"

#include "vkgrad/ops/patchify.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Patchify {
  enum In { images, kInputs };
  enum Out { patches, kOutputs };
  struct Attrs {
    int64_t patch = 1;  // side of the square patches
  };
};

struct PatchifyBackward {
  enum In { dpatches, kInputs };
  enum Out { dimages, kOutputs };
  using Attrs = Patchify::Attrs;
};

void backward(Backward& b, const Node& f) {
  if (b.needs(f, Patchify::images))
    b.emit(OpKind::PatchifyBackward, f, Patchify::images, {b.dout(f, Patchify::patches)},
           f.attr<Patchify::Attrs>());
}

void launch(const Launch& l) {
  ops::patchify(l.rec, l.in(Patchify::images), l.out(Patchify::patches),
                l.attr<Patchify::Attrs>().patch);
}

void launchBackward(const Launch& l) {
  using B = PatchifyBackward;
  ops::patchifyBackward(l.rec, l.in(B::dpatches), l.out(B::dimages), l.attr<B::Attrs>().patch,
                        l.write(B::dimages));
}

}  // namespace

Tensor patchify(Graph& g, Tensor images, int64_t patch) {
  g.check(images, "patchify");
  if (g.tensor(images).dtype != DType::F32)
    throw ShapeError(g.describe("patchify", {images}) + ": images must be f32");
  const Shape out = ops::patchifyShape(g.shape(images), patch);
  const int y = g.output(out);
  g.addNode({OpKind::Patchify, {images.id}, {y}, {}, Patchify::Attrs{patch}});
  return {y};
}

namespace defs {
const OpDef kPatchify{.name = "patchify",
                      .inputs = Patchify::kInputs,
                      .outputs = Patchify::kOutputs,
                      .backward = backward,
                      .launch = launch};
const OpDef kPatchifyBackward{.name = "patchifyBackward",
                              .inputs = PatchifyBackward::kInputs,
                              .outputs = PatchifyBackward::kOutputs,
                              .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph

#include "vkgrad/ops/augment.h"

#include <algorithm>
#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/random.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// augment/forward.comp's push constants.
struct AugmentPush {
  uint32_t n;  // B*H*W
  uint32_t height, width;
  uint32_t pad;
  uint32_t flip;
  uint32_t stream;
  float fill;
  uint32_t images_skip, out_skip;
};
static_assert(sizeof(AugmentPush) == 36);

}  // namespace

Shape augmentShape(const Shape& images, int64_t pad) {
  const std::string shapes =
      "augment: images " + images.str() + " with pad " + std::to_string(pad) + ": ";
  if (images.rank() != 3 || images.numel() == 0)
    throw ShapeError(shapes + "images must be a non-empty (B,H,W)");
  const int64_t side = std::min(images[1], images[2]);
  if (pad < 0 || pad >= side)
    throw ShapeError(shapes + "the pad must be in [0, " + std::to_string(side) + ")");
  return images;
}

void augment(vk::Recorder& rec, const TensorView& images, const TensorView& out, int64_t pad,
             bool flip, const TensorView& rng, uint32_t stream, float fill) {
  const Shape want = augmentShape(images.shape, pad);
  if (!(out.shape == want))
    throw ShapeError("augment: images " + images.shape.str() + ": out " + out.shape.str() +
                     " must be " + want.str());
  checkFloatOperand("augment", "images", images);
  checkFloatOperand("augment", "out", out);
  checkAlias("augment", "out", out, "images", images, false);
  checkRngState("augment", rng);

  vk::Context& ctx = rec.context();
  const Bound bi = bindStorage(ctx, images), bo = bindStorage(ctx, out);
  const AugmentPush push{uint32_t(images.shape.numel()),
                         uint32_t(images.shape[1]),
                         uint32_t(images.shape[2]),
                         uint32_t(pad),
                         flip ? 1u : 0u,
                         stream,
                         fill,
                         bi.skip,
                         bo.skip};
  const vk::Kernel& kernel =
      floatKernel(ctx, "augment/forward", {{"local_size_x", workgroupSize(ctx)}},
                  {{"images_dtype", images.dtype}, {"augmented_dtype", out.dtype}});
  // The state's 4 words, as the random kernels bind it.
  const vk::Arg args[] = {bi.arg, bo.arg, {*rng.buffer, rng.offset, 16}};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(rec.context(), push.n, workgroupSize(rec.context())));
}

}  // namespace vkgrad::ops

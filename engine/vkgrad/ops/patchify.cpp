#include "vkgrad/ops/patchify.h"

#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// patchify/index.glsl's push constants.
struct PatchifyPush {
  uint32_t n;          // B*H*W
  uint32_t side;       // patch
  uint32_t grid_w;     // W / patch
  uint32_t per_image;  // H*W
  uint32_t width;      // W
  uint32_t images_skip, patches_skip;
};
static_assert(sizeof(PatchifyPush) == 28);

// Checks images and patches against each other (patches as the shape rule gives it) and
// records one kernel over every element; forward reads images, backward writes them.
void record(const char* op, vk::Recorder& rec, const TensorView& images, const char* images_name,
            const TensorView& patches, const char* patches_name, int64_t patch, bool backward,
            Write write) {
  const Shape want = patchifyShape(images.shape, patch);
  if (!(patches.shape == want))
    throw ShapeError(std::string(op) + ": " + images_name + " " + images.shape.str() +
                     " with patch " + std::to_string(patch) + ": " + patches_name + " " +
                     patches.shape.str() + " must be " + want.str());
  checkFloatOperand(op, images_name, images);
  checkFloatOperand(op, patches_name, patches);
  if (backward)
    checkAlias(op, images_name, images, patches_name, patches, false);
  else
    checkAlias(op, patches_name, patches, images_name, images, false);

  vk::Context& ctx = rec.context();
  const Bound bi = bindStorage(ctx, images), bp = bindStorage(ctx, patches);
  const PatchifyPush push{uint32_t(images.shape.numel()),
                          uint32_t(patch),
                          uint32_t(images.shape[2] / patch),
                          uint32_t(images.shape[1] * images.shape[2]),
                          uint32_t(images.shape[2]),
                          bi.skip,
                          bp.skip};
  const vk::Kernel& kernel =
      backward ? floatKernel(ctx, "patchify/backward",
                             {{"local_size_x", workgroupSize(ctx)},
                              {"kAccumulate", write == Write::Accumulate}},
                             {{"dimages_dtype", images.dtype}, {"dpatches_dtype", patches.dtype}})
               : floatKernel(ctx, "patchify/forward", {{"local_size_x", workgroupSize(ctx)}},
                             {{"images_dtype", images.dtype}, {"patches_dtype", patches.dtype}});
  const vk::Arg args[] = {bi.arg, bp.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(rec.context(), push.n, workgroupSize(rec.context())));
}

}  // namespace

Shape patchifyShape(const Shape& images, int64_t patch) {
  const std::string shapes =
      "patchify: images " + images.str() + " with patch " + std::to_string(patch) + ": ";
  if (images.rank() != 3 || images.numel() == 0)
    throw ShapeError(shapes + "images must be a non-empty (B,H,W)");
  if (patch < 1) throw ShapeError(shapes + "the patch must be at least 1");
  if (images[1] % patch != 0 || images[2] % patch != 0)
    throw ShapeError(shapes + "H and W must be multiples of the patch");
  return {images[0], (images[1] / patch) * (images[2] / patch), patch * patch};
}

void patchify(vk::Recorder& rec, const TensorView& images, const TensorView& patches,
              int64_t patch) {
  record("patchify", rec, images, "images", patches, "patches", patch, false, Write::Overwrite);
}

void patchifyBackward(vk::Recorder& rec, const TensorView& dpatches, const TensorView& dimages,
                      int64_t patch, Write write) {
  record("patchifyBackward", rec, dimages, "dimages", dpatches, "dpatches", patch, true, write);
}

}  // namespace vkgrad::ops

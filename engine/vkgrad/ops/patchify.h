// Patchify: images (B,H,W) cut into non-overlapping patch x patch squares, each flattened
// into a row, the tokens a vision transformer projects; and unpatchify, its backward, the
// inverse permutation. Both are one dispatch on the device, no host im2col.
//
//   patches[b, q, ky*patch + kx] = images[b, (q / (W/patch))*patch + ky, (q % (W/patch))*patch +
//   kx]
//
// Patches q run row-major over the (H/patch, W/patch) grid, pixels row-major within a patch.
#pragma once

#include <cstdint>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The shape rule, Vulkan-free (the graph builder uses it too): images (B,H,W) with H and W
// multiples of patch >= 1 -> (B, (H/patch)*(W/patch), patch*patch). Throws ShapeError
// "patchify: images (2,28,28) with patch 5: H and W must be multiples of the patch".
Shape patchifyShape(const Shape& images, int64_t patch);

// images: (B,H,W); patches: (B,P,patch*patch), must not overlap images. Either may be f32,
// f16 or bf16 (a 16-bit patch of f32 images is rounded once, as it is stored). Throws
// ShapeError before recording anything on bad shapes or views.
void patchify(vk::Recorder& rec, const TensorView& images, const TensorView& patches,
              int64_t patch);

// dpatches: (B,P,patch*patch); dimages: (B,H,W), (=|+=) the pixels put back in place. Every
// pixel gets exactly its one value (the map is a bijection), so nothing is left unwritten.
// Any float formats, as in patchify; an accumulation adds in f32 and rounds once.
void patchifyBackward(vk::Recorder& rec, const TensorView& dpatches, const TensorView& dimages,
                      int64_t patch, Write write = Write::Overwrite);

}  // namespace vkgrad::ops

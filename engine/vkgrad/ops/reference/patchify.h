// CPU reference for ops::patchify and its backward, written as the plain nested loops over
// the patch grid (a different route from the kernels' index arithmetic).
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// images: (B,H,W); patches: (B, (H/patch)*(W/patch), patch*patch).
void patchify(const float* images, float* patches, int64_t batch, int64_t height, int64_t width,
              int64_t patch);
// dpatches as patches; dimages: (B,H,W), overwritten, or added to when accumulate.
void patchifyBackward(const float* dpatches, float* dimages, int64_t batch, int64_t height,
                      int64_t width, int64_t patch, bool accumulate);

}  // namespace vkgrad::ops::ref

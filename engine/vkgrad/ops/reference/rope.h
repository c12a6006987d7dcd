// CPU reference for the rotary position embedding: the angle as the kernel and PyTorch form
// it (f32 product of the position and inv_freq), its cosine and sine and the rotation in
// double.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// x, y: (B,T,H,D); inv_freq: (D/2); row t has position t + offset. inverse turns by -angle.
// Heads from rotated_heads on (-1: none) are copied.
void rope(const float* x, const float* inv_freq, float* y, int64_t b, int64_t t, int64_t h,
          int64_t d, uint32_t offset, bool inverse = false, int64_t rotated_heads = -1);

}  // namespace vkgrad::ops::ref

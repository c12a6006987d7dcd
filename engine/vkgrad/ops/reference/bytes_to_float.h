// CPU reference for bytesToFloat (ops/bytes_to_float.h), in double.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// words: (n_words) u32, 4 little-endian bytes each; out: (4 * n_words) = byte * scale + shift.
void bytesToFloat(const uint32_t* words, float* out, int64_t n_words, float scale, float shift);

}  // namespace vkgrad::ops::ref

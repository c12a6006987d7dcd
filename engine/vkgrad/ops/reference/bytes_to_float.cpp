#include "vkgrad/ops/reference/bytes_to_float.h"

namespace vkgrad::ops::ref {

void bytesToFloat(const uint32_t* words, float* out, int64_t n_words, float scale, float shift) {
  for (int64_t w = 0; w < n_words; ++w)
    for (int k = 0; k < 4; ++k)
      out[4 * w + k] = float(double((words[w] >> (8 * k)) & 0xFFu) * scale + shift);
}

}  // namespace vkgrad::ops::ref

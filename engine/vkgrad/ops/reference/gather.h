// CPU reference for gather (the embedding lookup) and its backward (double accumulation). Ids
// >= vocab are skipped, as the kernels do: their out rows are 0, their gradients dropped.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// ids: (n); table: V rows of D, row v at v * row_stride (0: D); out: (n,D).
void gather(const uint32_t* ids, const float* table, float* out, int64_t n, int64_t vocab,
            int64_t dim, int64_t row_stride = 0);
// ids: (n); dout: (n,D); dtable: (V,D), overwritten, or added to when accumulate.
void gatherBackward(const uint32_t* ids, const float* dout, float* dtable, int64_t n, int64_t vocab,
                    int64_t dim, bool accumulate);

}  // namespace vkgrad::ops::ref

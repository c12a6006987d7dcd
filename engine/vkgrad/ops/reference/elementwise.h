// CPU references for the binary elementwise ops, in double, so they are the trusted side of
// a test. a and out are folded to (outer, kept, inner) and b is (kept), as in
// ops/elementwise.h: out[o][m][k] = op(a[o][m][k], b[m]).
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

enum class BinaryKind { Add, Sub, Mul };

void binary(BinaryKind kind, const float* a, const float* b, float* out, int64_t outer,
            int64_t kept, int64_t inner);
// da: (outer, kept, inner), db: (kept); both overwritten. a and b are read by Mul only.
void binaryBackward(BinaryKind kind, const float* a, const float* b, const float* dout, float* da,
                    float* db, int64_t outer, int64_t kept, int64_t inner);

}  // namespace vkgrad::ops::ref

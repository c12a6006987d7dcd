// The (outer, kept, inner) view that broadcasts and reductions share: a tensor seen as three
// axes, row-major. Reductions (ops/reduce.h) sum outer and inner away and keep `kept`;
// broadcasts (ops/elementwise.h) repeat a (kept) tensor over outer and inner. Pure shape
// arithmetic, no Vulkan: the graph builder checks broadcasts with it too.
#pragma once

#include <cstdint>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

struct KeptAxis {
  int64_t outer = 1, kept = 1, inner = 1;
  int64_t numel() const { return outer * kept * inner; }
};

// The view of a that b broadcasts over (the rule is at the top of ops/elementwise.h). Throws
// ShapeError "add: a (4,8), b (9,2): b does not broadcast to a", named by op.
KeptAxis broadcastAxes(const char* op, const Shape& a, const Shape& b);
// Whether broadcastAxes accepts b over a (the one-sided kernels can take the pair).
bool broadcastsOver(const Shape& a, const Shape& b);

}  // namespace vkgrad::ops

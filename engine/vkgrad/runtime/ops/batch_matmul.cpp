// batchMatmul: numpy's matmul on operands of rank 2 to 4 (batch axes broadcast on both
// sides), built from the matmul node (runtime/ops/matmul.cpp), which takes one batch axis
// broadcast from 1: the batch axes are folded into one by reshapes (views, no copy), and an
// operand broadcast along only some of them is expanded first (runtime/ops/expand.cpp).
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/map_reduce.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {
namespace {

// The shape's batch axes (all but the last two) and their product.
Shape batchOf(const Shape& s) {
  if (s.rank() <= 2) return Shape{1};
  int64_t dims[Shape::kMaxRank];
  for (int a = 0; a < s.rank() - 2; ++a) dims[a] = s[a];
  return Shape::of(dims, s.rank() - 2);
}

// s with its batch axes replaced by `batch` (the matrix axes kept).
Shape withBatch(const Shape& batch, const Shape& s) {
  int64_t dims[Shape::kMaxRank];
  int rank = 0;
  for (int a = 0; a < batch.rank(); ++a) dims[rank++] = batch[a];
  dims[rank++] = s[s.rank() - 2];
  dims[rank++] = s[s.rank() - 1];
  return Shape::of(dims, rank);
}

}  // namespace

Tensor Graph::batchMatmul(Tensor a, Tensor b, bool trans_a, bool trans_b) {
  check(a, "batchMatmul");
  check(b, "batchMatmul");
  const Shape sa = shape(a), sb = shape(b);
  if (sa.rank() < 2 || sa.rank() > 4 || sb.rank() < 2 || sb.rank() > 4)
    throw ShapeError(describe("batchMatmul", {a, b}) + ": operands of rank 2 to 4");
  const Shape ba = batchOf(sa), bb = batchOf(sb);
  const Shape batch = ops::broadcastShape("batchMatmul", ba, bb);
  const int64_t n_batch = batch.numel();
  // An operand whose batch is the whole batch folds it into one axis; one with a batch of 1
  // is a single matrix every batch entry shares; anything between is expanded first.
  auto fold = [&](Tensor t, const Shape& s, const Shape& own) {
    if (own.numel() == 1) return reshape(t, {s[s.rank() - 2], s[s.rank() - 1]});
    if (own.numel() != n_batch) t = expand(t, withBatch(batch, s));
    return reshape(t, {n_batch, s[s.rank() - 2], s[s.rank() - 1]});
  };
  const Tensor c = matmul(fold(a, sa, ba), fold(b, sb, bb), {}, trans_a, trans_b);
  if (sa.rank() <= 2 && sb.rank() <= 2) return c;
  return reshape(c, withBatch(batch, shape(c)));
}

}  // namespace vkgrad::graph

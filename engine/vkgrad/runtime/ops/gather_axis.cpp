// gatherAxis: numpy's take along any axis, built from gather (runtime/ops/gather.cpp, which
// picks rows of the first axis with a deterministic gradient) between two transposes; and
// the host's narrowing of 64-bit or negative indices to the u32 ids the kernels take.
#include <numeric>
#include <string>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/map_reduce.h"

namespace vkgrad::graph {

Tensor Graph::gatherAxis(Tensor x, Tensor ids, int axis) {
  check(x, "gatherAxis");
  check(ids, "gatherAxis");
  const Shape xs = shape(x), is = shape(ids);
  axis = normalizeAxis("gatherAxis", xs, axis);
  if (xs.rank() - 1 + is.rank() > Shape::kMaxRank)
    throw ShapeError(describe("gatherAxis", {x, ids}) + ": the result would have more than " +
                     std::to_string(Shape::kMaxRank) + " axes");
  if (axis == 0) return gather(x, ids);
  // x's axis to the front, rows gathered: (ids..., x's other axes in order), then ids' axes
  // moved back to where the axis was.
  std::vector<int> front(size_t(xs.rank()));
  std::iota(front.begin(), front.end(), 0);
  front.erase(front.begin() + axis);
  front.insert(front.begin(), axis);
  const Tensor rows = gather(transpose(x, front), ids);
  std::vector<int> back;
  const int r = is.rank();
  for (int a = 0; a < axis; ++a) back.push_back(r + a);                  // x's axes before the axis
  for (int a = 0; a < r; ++a) back.push_back(a);                         // ids' axes
  for (int a = axis + 1; a < xs.rank(); ++a) back.push_back(r + a - 1);  // after it
  return transpose(rows, back);
}

std::vector<uint32_t> Graph::narrowIndices(std::span<const int64_t> ids, int64_t n) {
  std::vector<uint32_t> out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    const int64_t at = id < 0 ? id + n : id;  // negative: from the end, as numpy and ONNX
    if (at < 0 || at >= n)
      throw ShapeError("index " + std::to_string(id) + " out of range for an axis of " +
                       std::to_string(n));
    out.push_back(uint32_t(at));
  }
  return out;
}

}  // namespace vkgrad::graph

// Shape ops: the ones that move or pick elements (Reshape, Transpose, Concat, Slice, Split,
// Gather, Expand, ...). On the host when their inputs are known there (onnx/ops/constants.cpp
// makes the shape values), so a chain Shape -> Gather -> Concat -> Reshape folds to one
// reshape on the device.
#include <cmath>
#include <functional>
#include <numeric>

#include "vkgrad/onnx/node_context.h"

namespace vkgrad::onnx {

std::vector<int64_t> reshapeDims(const NodeContext& c, const std::vector<int64_t>& in,
                                 std::vector<int64_t> shape, bool allowzero) {
  int infer = -1;
  int64_t known = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 0 && !allowzero) {
      if (k >= in.size())
        c.fail("shape " + dimsText(shape) + " copies an axis " + dimsText(in) + " lacks");
      shape[k] = in[k];
    }
    if (shape[k] == -1) {
      if (infer >= 0) c.fail("shape " + dimsText(shape) + " has two -1");
      infer = int(k);
    } else if (shape[k] < 0) {
      c.fail("shape " + dimsText(shape) + " has a negative size");
    } else if (__builtin_mul_overflow(known, shape[k], &known)) {
      c.fail("shape " + dimsText(shape) + " has too many elements");
    }
  }
  const int64_t n = dimsNumel(in);
  if (infer >= 0) {
    if (known == 0 || n % known)
      c.fail("cannot reshape " + dimsText(in) + " to " + dimsText(shape));
    shape[size_t(infer)] = n / known;
  } else if (known != n) {
    c.fail("cannot reshape " + dimsText(in) + " to " + dimsText(shape));
  }
  return shape;
}

namespace {

std::vector<int64_t> stridesOf(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

// A host tensor of `dims` whose element i is x's element at index(i).
HostTensor hostGather(const HostTensor& x, const std::vector<int64_t>& dims,
                      const std::function<int64_t(int64_t)>& index) {
  HostTensor r;
  r.type = x.type;
  r.dims = dims;
  const int64_t n = dimsNumel(dims);
  for (int64_t i = 0; i < n; ++i) {
    if (x.isFloat())
      r.floats.push_back(x.floats[size_t(index(i))]);
    else
      r.ints.push_back(x.ints[size_t(index(i))]);
  }
  return r;
}

// The input with new dims: on the host a relabelling, on the device a view.
void relabel(NodeContext& c, const std::vector<int64_t>& dims) {
  if (c.foldable(0)) {
    HostTensor r = c.host(0);
    r.dims = dims;
    c.setHost(0, std::move(r));
  } else {
    c.setDevice(0, c.g.reshape(c.tensor(0), deviceShape(dims)), dims, c.value(0).type);
  }
}

void reshape(NodeContext& c) {
  relabel(c, reshapeDims(c, c.dims(0), c.hostInts(1), c.attrInt("allowzero", 0) != 0));
}

void flatten(NodeContext& c) {
  const auto& d = c.dims(0);
  const int r = int(d.size());
  const int64_t a = c.attrInt("axis", 1);
  const int axis = a == r ? r : c.axis(a, r);
  int64_t outer = 1;
  for (int k = 0; k < axis; ++k) outer *= d[size_t(k)];
  relabel(c, {outer, dimsNumel(d) / std::max<int64_t>(outer, 1)});
}

// Axes from opset 13's input (Squeeze, Unsqueeze) or an older attribute.
std::vector<int64_t> axesInput(const NodeContext& c, int input) {
  if (c.has(input)) return c.hostInts(input);
  return c.attrInts("axes");
}

void squeeze(NodeContext& c) {
  const auto& d = c.dims(0);
  std::vector<int64_t> axes = axesInput(c, 1);
  std::vector<bool> drop(d.size(), false);
  if (axes.empty())
    for (size_t k = 0; k < d.size(); ++k) drop[k] = d[k] == 1;
  for (int64_t a : axes) {
    const int k = c.axis(a, int(d.size()));
    if (d[size_t(k)] != 1) c.fail("axis " + std::to_string(a) + " of " + dimsText(d) + " is not 1");
    drop[size_t(k)] = true;
  }
  std::vector<int64_t> out;
  for (size_t k = 0; k < d.size(); ++k)
    if (!drop[k]) out.push_back(d[k]);
  relabel(c, out);
}

void unsqueeze(NodeContext& c) {
  const auto& d = c.dims(0);
  const std::vector<int64_t> axes = axesInput(c, 1);
  const int rank = int(d.size() + axes.size());
  std::vector<bool> added(size_t(rank), false);
  for (int64_t a : axes) {
    const int k = c.axis(a, rank);
    if (added[size_t(k)]) c.fail("axis " + std::to_string(a) + " is given twice");
    added[size_t(k)] = true;
  }
  std::vector<int64_t> out;
  size_t from = 0;
  for (int k = 0; k < rank; ++k) out.push_back(added[size_t(k)] ? 1 : d[from++]);
  relabel(c, out);
}

void transpose(NodeContext& c) {
  const auto& d = c.dims(0);
  const int r = int(d.size());
  std::vector<int64_t> perm = c.attrInts("perm");
  if (perm.empty())
    for (int k = r - 1; k >= 0; --k) perm.push_back(k);
  if (int(perm.size()) != r)
    c.fail("perm has " + std::to_string(perm.size()) + " axes, the input " + std::to_string(r));
  const size_t n = perm.size();
  std::vector<int64_t> out(n);
  std::vector<int> p(n);
  for (int k = 0; k < r; ++k) {
    p[size_t(k)] = c.axis(perm[size_t(k)], r);
    out[size_t(k)] = d[size_t(p[size_t(k)])];
  }
  if (c.foldable(0)) {
    const auto in_strides = stridesOf(d), out_strides = stridesOf(out);
    c.setHost(0, hostGather(c.host(0), out, [&](int64_t i) {
                int64_t src = 0;
                for (int k = 0; k < r; ++k)
                  src += (i / out_strides[size_t(k)] % out[size_t(k)]) *
                         in_strides[size_t(p[size_t(k)])];
                return src;
              }));
    return;
  }
  if (r < 2) {
    c.setDevice(0, c.tensor(0), out, c.value(0).type);
    return;
  }
  c.setDevice(0, c.g.transpose(c.tensor(0), p), out, c.value(0).type);
}

void concat(NodeContext& c) {
  const int r = c.rank(0);
  const int axis = c.axis(c.attrInt("axis", 0), r);
  std::vector<int64_t> out = c.dims(0);
  out[size_t(axis)] = 0;
  std::vector<int> given;
  for (int i = 0; i < c.inputCount(); ++i) {
    if (!c.has(i)) continue;
    const auto& d = c.dims(i);
    if (int(d.size()) != r) c.fail("inputs of different ranks");
    for (int k = 0; k < r; ++k)
      if (k != axis && d[size_t(k)] != out[size_t(k)])
        c.fail("input " + dimsText(d) + " does not match " + dimsText(c.dims(0)) + " off axis " +
               std::to_string(axis));
    if (d[size_t(axis)] == 0) continue;  // an empty piece (shape arithmetic's starting point)
    out[size_t(axis)] += d[size_t(axis)];
    given.push_back(i);
  }
  if (c.allHost()) {
    HostTensor r0;
    r0.type = c.host(given.empty() ? 0 : given[0]).type;
    r0.dims = out;
    int64_t outer = 1;
    for (int k = 0; k < axis; ++k) outer *= out[size_t(k)];
    for (int64_t o = 0; o < outer; ++o)
      for (int i : given) {
        const HostTensor& x = c.host(i);
        const int64_t block = x.numel() / std::max<int64_t>(outer, 1);
        for (int64_t k = 0; k < block; ++k) {
          if (r0.isFloat())
            r0.floats.push_back(float(x.at(o * block + k)));
          else
            r0.ints.push_back(x.intAt(o * block + k));
        }
      }
    c.setHost(0, std::move(r0));
    return;
  }
  std::vector<graph::Tensor> xs;
  for (int i : given) xs.push_back(c.tensor(i));
  c.setDevice(0, xs.size() == 1 ? xs[0] : c.g.concat(xs, axis), out, c.value(given[0]).type);
}

// Python's slice bounds for one axis, as ONNX clamps them (positive steps).
void clampSlice(int64_t n, int64_t& begin, int64_t& end) {
  if (begin < 0) begin += n;
  if (end < 0) end += n;
  begin = std::clamp<int64_t>(begin, 0, n);
  end = std::clamp<int64_t>(end, 0, n);
}

void slice(NodeContext& c) {
  const auto& d = c.dims(0);
  const int r = int(d.size());
  const std::vector<int64_t> starts = c.hostInts(1), ends = c.hostInts(2);
  std::vector<int64_t> axes = c.has(3) ? c.hostInts(3) : std::vector<int64_t>();
  std::vector<int64_t> steps = c.has(4) ? c.hostInts(4) : std::vector<int64_t>();
  if (axes.empty()) axes.resize(starts.size()), std::iota(axes.begin(), axes.end(), 0);
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps differ in length");
  std::vector<int64_t> begin(size_t(r), 0), step(size_t(r), 1), out = d;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int k = c.axis(axes[i], r);
    if (steps[i] <= 0) c.fail("steps must be positive (a reversed slice is not supported)");
    int64_t b = starts[i], e = ends[i];
    clampSlice(d[size_t(k)], b, e);
    begin[size_t(k)] = b;
    step[size_t(k)] = steps[i];
    out[size_t(k)] = e > b ? (e - b + steps[i] - 1) / steps[i] : 0;
  }
  if (dimsNumel(out) == 0) c.fail("an empty result " + dimsText(out));
  if (c.foldable(0)) {
    const auto in_strides = stridesOf(d), out_strides = stridesOf(out);
    c.setHost(0, hostGather(c.host(0), out, [&](int64_t i) {
                int64_t src = 0;
                for (int k = 0; k < r; ++k)
                  src += (begin[size_t(k)] +
                          (i / out_strides[size_t(k)] % out[size_t(k)]) * step[size_t(k)]) *
                         in_strides[size_t(k)];
                return src;
              }));
    return;
  }
  graph::Tensor y = c.tensor(0);
  for (int k = 0; k < r; ++k)
    if (out[size_t(k)] != d[size_t(k)])
      y = c.g.sliceAxis(y, k, begin[size_t(k)],
                        begin[size_t(k)] + out[size_t(k)] * step[size_t(k)] - (step[size_t(k)] - 1),
                        step[size_t(k)]);
  c.setDevice(0, y, out, c.value(0).type);
}

void split(NodeContext& c) {
  const auto& d = c.dims(0);
  const int axis = c.axis(c.attrInt("axis", 0), int(d.size()));
  std::vector<int64_t> sizes = c.has(1) ? c.hostInts(1) : c.attrInts("split");
  const int64_t n = d[size_t(axis)];
  if (sizes.empty()) {
    const int64_t parts = c.attrInt("num_outputs", c.outputCount());
    const int64_t each = (n + parts - 1) / parts;
    for (int64_t left = n; left > 0; left -= each) sizes.push_back(std::min(each, left));
  }
  if (int(sizes.size()) != c.outputCount() ||
      std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != n)
    c.fail("split sizes " + dimsText(sizes) + " do not cut axis " + std::to_string(axis) + " of " +
           dimsText(d) + " into " + std::to_string(c.outputCount()));
  if (c.foldable(0)) c.fail("a split of a value known when importing is not supported");
  const std::vector<graph::Tensor> parts = c.g.split(c.tensor(0), axis, sizes);
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<int64_t> out = d;
    out[size_t(axis)] = sizes[i];
    c.setDevice(int(i), parts[i], out, c.value(0).type);
  }
}

void gather(NodeContext& c) {
  const auto& d = c.dims(0);
  const auto& id = c.dims(1);
  const int axis = c.axis(c.attrInt("axis", 0), int(d.size()));
  std::vector<int64_t> out(d.begin(), d.begin() + axis);
  out.insert(out.end(), id.begin(), id.end());
  out.insert(out.end(), d.begin() + axis + 1, d.end());
  if (c.allHost()) {
    const HostTensor& x = c.host(0);
    const std::vector<uint32_t> ids = graph::Graph::narrowIndices(c.hostInts(1), d[size_t(axis)]);
    int64_t inner = 1;
    for (size_t k = size_t(axis) + 1; k < d.size(); ++k) inner *= d[k];
    const int64_t count = int64_t(ids.size());
    c.setHost(0, hostGather(x, out, [&](int64_t i) {
                const int64_t in_block = i % inner, rest = i / inner;
                const int64_t which = rest % count, outer = rest / count;
                return (outer * d[size_t(axis)] + ids[size_t(which)]) * inner + in_block;
              }));
    return;
  }
  if (!isFloatType(c.value(0).type)) c.fail("gathers floats on the device");
  const graph::Tensor ids = c.tensor(1, d[size_t(axis)]);
  c.setDevice(0, c.g.gatherAxis(c.tensor(0), ids, axis), out);
}

void expand(NodeContext& c) {
  const auto& d = c.dims(0);
  const std::vector<int64_t> shape = c.hostInts(1);
  const std::vector<int64_t> out = c.broadcast(d, shape);
  const size_t rank = out.size();
  if (c.foldable(0)) {
    const auto out_strides = stridesOf(out);
    const auto in_strides = stridesOf(d);
    c.setHost(0, hostGather(c.host(0), out, [&](int64_t i) {
                int64_t src = 0;
                for (size_t k = 0; k < d.size(); ++k) {
                  const size_t ok = k + rank - d.size();
                  src += (d[k] == 1 ? 0 : i / out_strides[ok] % out[ok]) * in_strides[k];
                }
                return src;
              }));
    return;
  }
  if (out == d) return c.setDevice(0, c.tensor(0), out, c.value(0).type);
  c.setDevice(0, c.g.expand(c.tensor(0), deviceShape(out)), out, c.value(0).type);
}

}  // namespace

void registerShapeOps(OpTable& t) {
  t["Reshape"] = reshape;
  t["Flatten"] = flatten;
  t["Squeeze"] = squeeze;
  t["Unsqueeze"] = unsqueeze;
  t["Transpose"] = transpose;
  t["Concat"] = concat;
  t["Slice"] = slice;
  t["Split"] = split;
  t["Gather"] = gather;
  t["Expand"] = expand;
}

}  // namespace vkgrad::onnx

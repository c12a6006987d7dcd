// The values exporters build shapes from, all known when importing: Shape, Range,
// ConstantOfShape and Constant. They make host values only (onnx/ops/shape.cpp folds what
// reads them).
#include <algorithm>
#include <cmath>

#include "vkgrad/onnx/node_context.h"
#include "vkgrad/onnx/tensor_proto.h"

namespace vkgrad::onnx {
namespace {

void shapeOp(NodeContext& c) {
  const auto& d = c.dims(0);
  const int r = int(d.size());
  int64_t start = c.attrInt("start", 0), end = c.attrInt("end", r);
  // Python's bounds: negative from the end, clamped to the rank.
  start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
  end = std::clamp<int64_t>(end < 0 ? end + r : end, 0, r);
  c.setHost(0, HostTensor::ofInts(
                   {std::max<int64_t>(end - start, 0)},
                   std::vector<int64_t>(d.begin() + start, d.begin() + std::max(start, end))));
}

void constantOfShape(NodeContext& c) {
  const std::vector<int64_t> dims = c.hostInts(0);
  HostTensor value = HostTensor::ofFloats({1}, {0.0f});
  if (const auto* t = c.attrTensor("value")) value = readTensor(*t, {}, c.name() + " value");
  if (dimsNumel(dims) > (int64_t(1) << 31)) c.fail("shape " + dimsText(dims) + " is too large");
  HostTensor r;
  r.type = value.type;
  r.dims = dims;
  if (r.isFloat())
    r.floats.assign(size_t(dimsNumel(dims)), float(value.at(0)));
  else
    r.ints.assign(size_t(dimsNumel(dims)), value.intAt(0));
  c.setHost(0, std::move(r));
}

void range(NodeContext& c) {
  const HostTensor &s = c.host(0), &l = c.host(1), &d = c.host(2);
  const double start = s.at(0), limit = l.at(0), delta = d.at(0);
  if (delta == 0) c.fail("delta 0");
  const int64_t n = std::max<int64_t>(int64_t(std::ceil((limit - start) / delta)), 0);
  if (n > (int64_t(1) << 31)) c.fail("more than 2^31 elements");
  HostTensor r;
  r.type = s.type;
  r.dims = {n};
  for (int64_t i = 0; i < n; ++i) {
    if (r.isFloat())
      r.floats.push_back(float(start + double(i) * delta));
    else
      r.ints.push_back(s.intAt(0) + i * d.intAt(0));
  }
  c.setHost(0, std::move(r));
}

void constant(NodeContext& c) {
  if (const auto* t = c.attrTensor("value")) return c.setHost(0, readTensor(*t, {}, c.name()));
  if (c.hasAttr("value_float"))
    return c.setHost(0, HostTensor::ofFloats({}, {c.attrFloat("value_float", 0)}));
  if (c.hasAttr("value_int"))
    return c.setHost(0, HostTensor::ofInts({}, {c.attrInt("value_int", 0)}));
  if (c.hasAttr("value_ints")) {
    const auto v = c.attrInts("value_ints");
    return c.setHost(0, HostTensor::ofInts({int64_t(v.size())}, v));
  }
  for (const auto& a : c.node.attribute())
    if (a.name() == "value_floats")
      return c.setHost(
          0, HostTensor::ofFloats({a.floats_size()}, {a.floats().begin(), a.floats().end()}));
  c.fail("a Constant without a value this importer reads (sparse or string)");
}

}  // namespace

void registerConstantOps(OpTable& t) {
  t["Shape"] = shapeOp;
  t["ConstantOfShape"] = constantOfShape;
  t["Range"] = range;
  t["Constant"] = constant;
}

}  // namespace vkgrad::onnx

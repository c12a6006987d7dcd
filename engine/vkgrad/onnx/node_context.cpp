#include "vkgrad/onnx/node_context.h"

#include <algorithm>
#include <cstdint>

namespace vkgrad::onnx {

graph::Shape deviceShape(const std::vector<int64_t>& dims) {
  if (dims.empty()) return graph::Shape{1};
  return graph::Shape::of(dims.data(), int(dims.size()));
}

// --- NodeContext

std::string NodeContext::name() const {
  return node.op_type() + " node \"" + (node.name().empty() ? node.output(0) : node.name()) + "\"";
}

void NodeContext::fail(const std::string& why) const {
  throw Error(name() + ": " + why);
}

const Value& NodeContext::value(int i) const {
  if (!has(i)) fail("input " + std::to_string(i) + " is required");
  const auto it = values_.find(node.input(i));
  if (it == values_.end())
    fail("input \"" + node.input(i) +
         "\" is an output its node does not support (a BatchNormalization's saved "
         "statistics, a Dropout's mask, ...)");
  return it->second;
}

bool NodeContext::allHost() const {
  for (int i = 0; i < inputCount(); ++i)
    if (has(i) && !foldable(i)) return false;
  return true;
}

const HostTensor& NodeContext::host(int i) const {
  const Value& v = value(i);
  if (!v.host)
    fail("input " + std::to_string(i) + " (\"" + node.input(i) +
         "\") must be known when the model is imported (a constant or shape arithmetic), "
         "it is computed on the device");
  return *v.host;
}

std::vector<int64_t> NodeContext::hostInts(int i) const {
  const HostTensor& h = host(i);
  std::vector<int64_t> out(size_t(h.numel()));
  for (int64_t k = 0; k < h.numel(); ++k) out[size_t(k)] = h.intAt(k);
  return out;
}

graph::Tensor NodeContext::tensor(int i, int64_t index_range) {
  value(i);  // checks that input i is given
  Value& v = values_.at(node.input(i));
  if (v.onDevice()) return v.device;
  const HostTensor& h = *v.host;
  if (v.parameter) {
    v.device = param_(node.input(i), h);
  } else if (h.isFloat()) {
    v.device = g.constant(node.input(i), deviceShape(h.dims), h.floats);
  } else {
    const int64_t range = index_range > 0 ? index_range : (int64_t(1) << 32);
    std::vector<uint32_t> ids;
    if (index_range > 0) {
      ids = graph::Graph::narrowIndices(h.ints, range);
    } else {
      ids.reserve(h.ints.size());
      for (int64_t x : h.ints) {
        if (x < 0 || x >= range)
          fail("integer input \"" + node.input(i) + "\" holds " + std::to_string(x) +
               ": the device takes 0 to 2^32-1");
        ids.push_back(uint32_t(x));
      }
    }
    v.device = g.constantIds(node.input(i), deviceShape(h.dims), std::move(ids));
  }
  return v.device;
}

namespace {
const ::onnx::AttributeProto* findAttr(const ::onnx::NodeProto& node, const char* name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
}  // namespace

bool NodeContext::hasAttr(const char* name) const {
  return findAttr(node, name) != nullptr;
}

int64_t NodeContext::attrInt(const char* name, int64_t fallback) const {
  const auto* a = findAttr(node, name);
  return a ? a->i() : fallback;
}

float NodeContext::attrFloat(const char* name, float fallback) const {
  const auto* a = findAttr(node, name);
  return a ? a->f() : fallback;
}

std::string NodeContext::attrString(const char* name, const std::string& fallback) const {
  const auto* a = findAttr(node, name);
  return a ? a->s() : fallback;
}

std::vector<int64_t> NodeContext::attrInts(const char* name, std::vector<int64_t> fallback) const {
  const auto* a = findAttr(node, name);
  if (!a) return fallback;
  return {a->ints().begin(), a->ints().end()};
}

const ::onnx::TensorProto* NodeContext::attrTensor(const char* name) const {
  const auto* a = findAttr(node, name);
  return a && a->has_t() ? &a->t() : nullptr;
}

void NodeContext::setHost(int i, HostTensor t) {
  if (i >= outputCount() || node.output(i).empty()) return;
  if (t.numel() > (int64_t(1) << 31)) fail("a result of more than 2^31 elements");
  Value v;
  v.dims = t.dims;
  v.type = t.type;
  v.host = std::make_shared<const HostTensor>(std::move(t));
  values_[node.output(i)] = std::move(v);
}

void NodeContext::setDevice(int i, graph::Tensor t, std::optional<std::vector<int64_t>> dims,
                            int type) {
  if (i >= outputCount() || node.output(i).empty()) return;
  Value v;
  const graph::Shape& s = g.shape(t);
  if (dims) {
    if (deviceShape(*dims).numel() != s.numel())
      fail("internal: result " + s.str() + " is not " + dimsText(*dims));
    v.dims = *dims;
    if (!(deviceShape(*dims) == s)) t = g.reshape(t, deviceShape(*dims));
  } else {
    for (int k = 0; k < s.rank(); ++k) v.dims.push_back(s[k]);
  }
  v.type = type;
  v.device = t;
  values_[node.output(i)] = std::move(v);
}

std::vector<int64_t> NodeContext::broadcast(const std::vector<int64_t>& a,
                                            const std::vector<int64_t>& b) const {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t da = k + a.size() >= rank ? a[k + a.size() - rank] : 1;
    const int64_t db = k + b.size() >= rank ? b[k + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      fail("shapes " + dimsText(a) + " and " + dimsText(b) + " do not broadcast");
    out[k] = da == 1 ? db : da;
  }
  return out;
}

int NodeContext::axis(int64_t a, int rank) const {
  if (a < -rank || a >= std::max(rank, 1))
    fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return int(a < 0 ? a + rank : a);
}

}  // namespace vkgrad::onnx
